use strata::model;

fn main() {
    let model = model![Input(784), Dense(10, input_shape = 784)];
    println!("{}", model.summary());
}
