use strata::model;

fn main() {
    let model = model![Input((4, 4, 3)), PReLU(shared_axes = (0, 1)), Flatten()];
    println!("{}", model.summary());
}
