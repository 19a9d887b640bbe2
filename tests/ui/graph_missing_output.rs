use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let y = Dense(2, softmax)(x);
    };
    println!("{}", m.summary());
}
