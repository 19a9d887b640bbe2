use strata::model;

fn main() {
    let model = model![Input((28, 28, 1)), Conv2D(32, 3, padding = full)];
    println!("{}", model.summary());
}
