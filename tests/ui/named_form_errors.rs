use strata::model;

model! {
    /// A classifier with a typo: the type and its `model()` still exist.
    pub struct Classifier {
        Input(784),
        Dense(128, relu, use_bias = yes),
        Dense(10, softmax),
    }
}

fn main() {
    let model = Classifier::model();
    println!("{}", model.summary());
}
