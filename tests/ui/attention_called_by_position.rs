use strata::model;

fn main() {
    let model = model! {
        let x = Input((4, 6));
        Attention()(x, x)
    };
}
