use strata::model;

fn main() {
    let model = model![Input((5, 3)), Bidirectional(GRU(8, go_backwards = true))];
    println!("{}", model.summary());
}
