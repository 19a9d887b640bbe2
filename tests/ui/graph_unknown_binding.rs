use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let hidden = Dense(8, relu)(x);
        Dense(2, softmax)(hiden)
    };
    println!("{}", m.summary());
}
