use strata::model;

fn main() {
    let model = model![Input((2, 3, 4)), Permute((2, 1)), Flatten()];
    println!("{}", model.summary());
}
