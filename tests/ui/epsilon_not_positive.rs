use strata::model;

fn main() {
    let model = model![Input(16), LayerNormalization(epsilon = 0)];
    println!("{}", model.summary());
}
