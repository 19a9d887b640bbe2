use strata::model;

fn main() {
    let model = model![Input(784), Dropout(0.2, 0.5)];
    println!("{}", model.summary());
}
