use strata::model;

fn main() {
    let model = model![Input(8), PReLU(shared_axes = 2), Dense(1)];
    println!("{}", model.summary());
}
