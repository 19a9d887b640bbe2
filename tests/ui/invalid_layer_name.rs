use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, name = "Hidden-1")];
    println!("{}", model.summary());
}
