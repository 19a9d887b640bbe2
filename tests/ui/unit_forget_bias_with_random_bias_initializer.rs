use strata::model;

fn main() {
    let model = model![Input((5, 3)), LSTM(4, bias_initializer = glorot_uniform), Dense(1)];
    println!("{}", model.summary());
}
