use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, units = 64)];
    println!("{}", model.summary());
}
