use strata::model;

fn main() {
    let model = model![Input((5, 3)), Bidirectional(LSTM(8), merge_mode = None)];
    println!("{}", model.summary());
}
