use strata::model;

fn main() {
    let m = model! {
        let h = Dense(4, relu)(x);
        Dense(2, softmax)(h)
    };
    println!("{}", m.summary());
}
