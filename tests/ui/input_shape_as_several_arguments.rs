use strata::model;

fn main() {
    let model = model![Input(28, 28, 1), Flatten];
    println!("{}", model.summary());
}
