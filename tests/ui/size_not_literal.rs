use strata::model;

const UNITS: usize = 128;

fn main() {
    let model = model![Input(784), Dense(UNITS, relu)];
    println!("{} {UNITS}", model.summary());
}
