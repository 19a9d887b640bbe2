use strata::model;

fn main() {
    let model = model! {
        let x = Input((4, 6));
        Dot(axes = (1, 0))([x, x])
    };
}
