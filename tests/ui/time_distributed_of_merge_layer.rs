use strata::model;

fn main() {
    let model = model![Input((4, 28)), TimeDistributed(Add())];
    println!("{}", model.summary());
}
