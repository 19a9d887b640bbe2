use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, name = "hidden"), Dense(64, name = "hidden")];
    println!("{}", model.summary());
}
