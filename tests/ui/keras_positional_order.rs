use strata::model;

fn main() {
    // Keras' third positional argument of Conv2D is `strides`, not the activation.
    let m = model![Input((28, 28, 1)), Conv2D(32, (3, 3), "relu"), Flatten, Dense(10, softmax)];
    println!("{}", m.summary());
}
