use strata::model;

fn main() {
    // One mistake (the merge of 4 and 5 features): the layers after it see an unknown
    // shape and report nothing more.
    let m = model! {
        let x = Input(4);
        let y = Add()([Dense(4)(x), Dense(5)(x)]);
        let z = Dense(3)(Reshape((2, 2))(y));
        Dense(2, softmax)(z)
    };
    println!("{}", m.summary());
}
