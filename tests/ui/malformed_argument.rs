use strata::model;

fn main() {
    let model = model![Input(784), Dense(128 relu), Dense(10, softmax)];
    println!("{}", model.summary());
}
