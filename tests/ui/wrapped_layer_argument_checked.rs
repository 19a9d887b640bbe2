use strata::model;

fn main() {
    let model = model![Input((5, 3)), Bidirectional(LSTM(8, return_state = true))];
    println!("{}", model.summary());
}
