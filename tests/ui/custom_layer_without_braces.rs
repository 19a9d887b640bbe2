use strata::model;

fn main() {
    // A layer of the user's own is an expression in braces: `{ Scale::new(2.0) }`.
    let m = model![Input(4), Scale(2.0), Dense(2, softmax)];
    println!("{}", m.summary());
}
