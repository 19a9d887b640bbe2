use strata::model;

fn main() {
    // A stack passes one value from layer to layer; the states need the graph form.
    let model = model![Input((5, 3)), GRU(4, return_state = true), Dense(1)];
    println!("{}", model.summary());
    let wrapped = model![Input((5, 3)), Bidirectional(LSTM(4, return_state = true))];
    println!("{}", wrapped.summary());
}
