use strata::model;

fn main() {
    let model = model![];
    println!("{}", model.summary());
}
