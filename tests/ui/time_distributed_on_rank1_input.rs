use strata::model;

fn main() {
    let model = model![Input(28), TimeDistributed(Dense(8))];
    println!("{}", model.summary());
}
