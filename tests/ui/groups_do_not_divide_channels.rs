use strata::model;

fn main() {
    let model = model![Input((8, 8, 3)), Conv2D(4, 3, groups = 2)];
    println!("{}", model.summary());
}
