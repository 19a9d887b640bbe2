use strata::model;

fn main() {
    let model = model![Input(784), GlobalAveragePooling2D()];
    println!("{}", model.summary());
}
