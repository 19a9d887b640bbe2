use strata::model;

fn main() {
    let model = model![Input((4, 4, 1)), Conv2DTranspose(2, 3, strides = 2, output_padding = 2)];
    println!("{}", model.summary());
}
