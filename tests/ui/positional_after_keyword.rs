use strata::model;

fn main() {
    let model = model![Input(784), Dense(units = 128, relu)];
    println!("{}", model.summary());
}
