use strata::model;

fn main() {
    let model = model![
        Input((6, 6, 1)),
        Conv2D(8, 3),
        MaxPooling2D(pool_size = 5),
    ];
    println!("{}", model.summary());
}
