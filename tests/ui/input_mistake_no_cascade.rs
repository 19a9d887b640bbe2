use strata::model;

fn main() {
    // The malformed `Input` declares nothing: Conv2D is not told its input is (None, 28).
    let model = model![Input(28, 28, 1), Conv2D(8, 3), Flatten, Dense(10, softmax)];
    println!("{}", model.summary());
}
