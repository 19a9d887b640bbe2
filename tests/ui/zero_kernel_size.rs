use strata::model;

fn main() {
    let model = model![Input((28, 28, 1)), Conv2D(32, kernel_size = (3, 0))];
    println!("{}", model.summary());
}
