use strata::model;

fn main() {
    let model = model![Input((28, 0)), Flatten];
    println!("{}", model.summary());
}
