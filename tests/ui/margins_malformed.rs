use strata::model;

fn main() {
    // Three sizes for two axes, and a negative margin.
    let model = model![Input((4, 4, 1)), ZeroPadding2D((1, 2, 3)), Cropping2D(-1), Flatten()];
    println!("{}", model.summary());
}
