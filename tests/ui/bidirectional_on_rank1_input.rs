use strata::model;

fn main() {
    let model = model![Input(28), Bidirectional(LSTM(8)), Dense(10, softmax)];
    println!("{}", model.summary());
}
