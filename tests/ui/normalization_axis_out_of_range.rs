use strata::model;

fn main() {
    let model = model![Input(784), BatchNormalization(axis = 2)];
    println!("{}", model.summary());
}
