use strata::model;

fn main() {
    let model = model![Input((4, 4, 1)), Cropping2D(((2, 2), (0, 0))), Flatten()];
    println!("{}", model.summary());
}
