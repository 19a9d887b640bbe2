use strata::model;

fn main() {
    let m = model![Input(4), Dense(4), Add(), Dense(2, softmax)];
    println!("{}", m.summary());
}
