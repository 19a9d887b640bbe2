use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, relu), Conv1D(32, 3, activation = relu)];
    println!("{}", model.summary());
}
