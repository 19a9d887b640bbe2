use strata::model;

fn main() {
    // Keras' LSTM gives [output, state_h, state_c]: three, not two.
    let model = model! {
        let x = Input((5, 3));
        let (seq, h) = LSTM(8, return_sequences = true, return_state = true)(x);
        let y = Dense(1)(h);
        (seq, y)
    };
    println!("{}", model.summary());
    // Bidirectional's: the output, then each direction's states.
    let wrapped = model! {
        let x = Input((5, 3));
        let (y, forward_h, backward_h) = Bidirectional(LSTM(8, return_state = true))(x);
        (y, forward_h, backward_h)
    };
    println!("{}", wrapped.summary());
}
