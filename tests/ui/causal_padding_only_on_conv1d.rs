use strata::model;

fn main() {
    let model = model![Input((8, 8, 1)), Conv2D(4, 3, padding = causal)];
    println!("{}", model.summary());
}
