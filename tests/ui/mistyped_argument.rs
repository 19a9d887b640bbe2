use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, relu, use_bias = 1)];
    println!("{}", model.summary());
}
