use strata::model;

fn main() {
    let model = model![Input((3, 4)), RepeatVector(2), Flatten()];
    println!("{}", model.summary());
}
