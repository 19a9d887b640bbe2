use strata::model;

fn main() {
    // No input shape: the first width comes from the data, but ranks are still checked.
    let model = model![Dense(128, relu), Flatten, Conv2D(8, 3)];
    println!("{}", model.summary());
}
