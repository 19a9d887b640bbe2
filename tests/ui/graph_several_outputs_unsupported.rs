use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let h = Dense(4)(x);
        (Dense(1, sigmoid)(h), Dense(3, softmax)(h))
    };
    println!("{}", m.summary());
}
