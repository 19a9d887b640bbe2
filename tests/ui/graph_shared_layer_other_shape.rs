use strata::model;

fn main() {
    let m = model! {
        let x = Input(32);
        let enc = Dense(16, relu);
        let a = enc(x);
        let b = enc(a);
        Dense(1, sigmoid)(Concatenate()([a, b]))
    };
    println!("{}", m.summary());
}
