use strata::model;

fn main() {
    let model = model![Input(784), Dense(activation = relu)];
    println!("{}", model.summary());
}
