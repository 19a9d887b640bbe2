use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let h = Dense(8, relu)(x);
        Dense(2, softmax)(x)
    };
    println!("{}", m.summary());
}
