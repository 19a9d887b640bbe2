use strata::model;

fn main() {
    let model = model! {
        let x = Input((4, 6));
        let v = Dense(3)(x);
        Attention()([x, v])
    };
}
