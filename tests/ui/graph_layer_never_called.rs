use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let enc = Dense(8, relu);
        Dense(2, softmax)(x)
    };
    println!("{}", m.summary());
}
