use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let h = Dense(4)(x);
        Dense(2, softmax)(Concatenate(axis = 2)([x, h]))
    };
    println!("{}", m.summary());
}
