use strata::model;

fn main() {
    let model = model![Input(784), Reshape((-1, -1))];
    println!("{}", model.summary());
}
