use strata::model;

fn main() {
    let model = model! {
        let x = Input((4, 6, 6));
        let h = TimeDistributed(Conv2D(2, 3))(x);
        Bidirectional(LSTM(8))(h)
    };
    println!("{}", model.summary());
}
