use strata::model;

fn main() {
    let model = model![Input((5, 3)), LSTM(4611686018427387904), Dense(10, softmax)];
    println!("{}", model.summary());
}
