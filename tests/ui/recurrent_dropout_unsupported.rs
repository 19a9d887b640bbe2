use strata::model;

fn main() {
    let model = model![Input((5, 3)), SimpleRNN(4, recurrent_dropout = 0.2), Dense(1)];
    println!("{}", model.summary());
}
