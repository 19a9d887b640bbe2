use strata::model;

fn main() {
    let model = model![Input((10, 2)), Conv1D(4, (3, 3))];
    println!("{}", model.summary());
}
