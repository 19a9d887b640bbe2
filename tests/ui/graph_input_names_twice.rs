use strata::model;

fn main() {
    let m = model! {
        let a = Input(4, name = "item");
        let b = Input(4, name = "item");
        let c = Input(4, name = "dense");
        Dense(1, sigmoid)(Concatenate()([a, b, c]))
    };
    println!("{}", m.summary());
}
