use strata::model;

fn main() {
    let model = model![Input((3, 2)), MaxPooling1D(4)];
    println!("{}", model.summary());
}
