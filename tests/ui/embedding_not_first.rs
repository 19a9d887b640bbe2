use strata::model;

fn main() {
    let model = model![Input(10), Dense(4), Embedding(1000, 8)];
    println!("{}", model.summary());
}
