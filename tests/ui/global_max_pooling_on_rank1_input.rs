use strata::model;

fn main() {
    let model = model![Input(784), Dense(16), GlobalMaxPooling2D(keepdims = true)];
    println!("{}", model.summary());
}
