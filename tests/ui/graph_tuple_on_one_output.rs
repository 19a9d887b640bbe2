use strata::model;

fn main() {
    let model = model! {
        let x = Input((5, 3));
        let (y, h) = LSTM(8)(x);
        Dense(1)(h)
    };
    println!("{}", model.summary());
    let bound = model! {
        let x = Input((5, 3));
        let (a, b) = x;
        Dense(1)(a)
    };
    println!("{}", bound.summary());
}
