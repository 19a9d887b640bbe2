use strata::model;

fn main() {
    let model = model![Input((5, 3)), Bidirectional(LSTM(8), backward_layer = LSTM(8))];
    println!("{}", model.summary());
}
