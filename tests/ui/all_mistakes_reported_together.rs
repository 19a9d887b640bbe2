use strata::model;

fn main() {
    // Four mistakes in one invocation: all four are reported, and nothing else (the
    // stand-in model keeps the code below type-checking).
    let mut model = model![
        Input((28, 28, 1)),
        Conv2d(32, 3, activation = relu),
        MaxPooling2D(pool_size = 0),
        Dropout(1.5),
        Dense(10, activation = softmx),
    ];
    model.build(&[28, 28, 1]).unwrap();
    println!("{}", model.summary());
}
