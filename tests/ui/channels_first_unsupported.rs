use strata::model;

fn main() {
    let model = model![Input((3, 28, 28)), Conv2D(8, 3, data_format = channels_first)];
    println!("{}", model.summary());
}
