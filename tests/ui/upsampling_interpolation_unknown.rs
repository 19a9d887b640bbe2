use strata::model;

fn main() {
    let model = model![Input((4, 4, 1)), UpSampling2D(interpolation = "bicubic"), Flatten()];
    println!("{}", model.summary());
}
