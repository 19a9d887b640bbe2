use strata::model;

fn main() {
    let model = model![Input((8, 8, 12)), GroupNormalization(groups = 5)];
    println!("{}", model.summary());
}
