use strata::model;

fn main() {
    // Both kinds: a number >= 0, and None or a number >= 0.
    let model = model![Input(8), ReLU(max_value = -1, negative_slope = -0.5), LeakyReLU(-0.1)];
    println!("{}", model.summary());
}
