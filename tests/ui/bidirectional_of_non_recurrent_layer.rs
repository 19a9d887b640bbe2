use strata::model;

fn main() {
    let model = model![Input((5, 3)), Bidirectional(Dense(8))];
    println!("{}", model.summary());
}
