use strata::model;

fn main() {
    let model = model![Input((4, 4, 1)), Conv2D(8, kernel_size = 5)];
    println!("{}", model.summary());
}
