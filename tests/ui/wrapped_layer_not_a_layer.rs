use strata::model;

fn main() {
    let model = model![Input((4, 28)), TimeDistributed(8)];
    println!("{}", model.summary());
}
