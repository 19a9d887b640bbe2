use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, relu, kernel_initializer = he_norml)];
    println!("{}", model.summary());
}
