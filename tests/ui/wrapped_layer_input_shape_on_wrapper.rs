use strata::model;

fn main() {
    let model = model![TimeDistributed(Dense(8, input_shape = (4, 3)))];
    println!("{}", model.summary());
}
