use strata::model;

fn main() {
    let model = model![Input(784), Dropout(1.0), Dense(10)];
    println!("{}", model.summary());
}
