use strata::model;

fn main() {
    let model = model![Input((5, 3)), Bidirectional(LSTM(8, bias_initializer = glorot_uniform))];
    println!("{}", model.summary());
}
