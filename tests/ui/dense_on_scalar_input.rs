use strata::model;

fn main() {
    let model = model![Input(()), Dense(4)];
    println!("{}", model.summary());
}
