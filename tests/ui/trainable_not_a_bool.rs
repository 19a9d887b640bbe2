use strata::model;

fn main() {
    let m = model![Input(4), Dense(8, trainable = no), Dense(2, softmax)];
    println!("{}", m.summary());
}
