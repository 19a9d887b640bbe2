use strata::model;

fn main() {
    let m = model! {
        let a = Input(4);
        let b = Input(4);
        Dense(1, sigmoid)(Concatenate()([a, b]))
    };
    println!("{}", m.summary());
}
