use strata::model;

fn main() {
    let model = model! {
        let x = Input((4, 6));
        let a = Dense(3)(x);
        Dot(axes = -1)([a, x])
    };
}
