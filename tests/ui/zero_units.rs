use strata::model;

fn main() {
    let model = model![Input(784), Dense(0, relu)];
    println!("{}", model.summary());
}
