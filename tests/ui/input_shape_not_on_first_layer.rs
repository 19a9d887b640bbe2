use strata::model;

fn main() {
    let model = model![Dense(128), Dense(10, input_shape = 784)];
    println!("{}", model.summary());
}
