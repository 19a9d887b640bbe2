use strata::model;

fn main() {
    let model = model![Input(784), Dens(128, relu), Dense(10, softmax)];
    println!("{}", model.summary());
}
