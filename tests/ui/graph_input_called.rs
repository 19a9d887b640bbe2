use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        Dense(2, softmax)(Input(4)(x))
    };
    println!("{}", m.summary());
}
