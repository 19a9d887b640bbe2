use strata::model;

fn main() {
    let model = model![Input((16, 16, 1)), Conv2D(8, 3, strides = 2, dilation_rate = 2)];
    println!("{}", model.summary());
}
