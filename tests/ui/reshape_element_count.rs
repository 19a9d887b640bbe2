use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, relu), Reshape((28, 28, 1))];
    println!("{}", model.summary());
}
