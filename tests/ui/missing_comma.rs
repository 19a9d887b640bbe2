use strata::model;

fn main() {
    let model = model![Input(784) Dense(10)];
    println!("{}", model.summary());
}
