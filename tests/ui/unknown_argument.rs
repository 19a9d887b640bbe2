use strata::model;

fn main() {
    let model = model![Input(784), Dense(128, activaton = relu)];
    println!("{}", model.summary());
}
