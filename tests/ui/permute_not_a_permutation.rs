use strata::model;

fn main() {
    let model = model![Input((2, 3)), Permute((1, 1)), Flatten()];
    println!("{}", model.summary());
}
