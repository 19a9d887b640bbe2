use strata::model;

fn main() {
    let model = model![Input((4, 5, 3)), TimeDistributed(LSTM(8, return_state = true))];
    println!("{}", model.summary());
}
