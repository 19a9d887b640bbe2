use strata::model;

fn main() {
    let m = model! {
        let x = Input(4);
        let enc = Dense(4);
        Add()([enc, x])
    };
    println!("{}", m.summary());
}
