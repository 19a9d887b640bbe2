use strata::model;

fn main() {
    let model = model![Dense(10), Input(784)];
    println!("{}", model.summary());
}
