use strata::model;

fn main() {
    let model = model![Input((5, 3)), GRU(4, return_state = true), Dense(1)];
    println!("{}", model.summary());
}
