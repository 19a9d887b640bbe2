use strata::model;

fn main() {
    let model = model![Input((4, 28)), TimeDistributed(Conv2D(2, 3))];
    println!("{}", model.summary());
}
