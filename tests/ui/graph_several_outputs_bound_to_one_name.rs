use strata::model;

fn main() {
    let model = model! {
        let x = Input((5, 3));
        let h = LSTM(8, return_sequences = true, return_state = true)(x);
        Dense(1)(h)
    };
    println!("{}", model.summary());
}
