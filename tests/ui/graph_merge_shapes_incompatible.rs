use strata::model;

fn main() {
    let m = model! {
        let x = Input((28, 28, 1));
        let h = Conv2D(16, 3, padding = same)(x);
        let y = Conv2D(8, 3, padding = same)(h);
        let y = Add()([y, h]);
        Dense(10, softmax)(GlobalAveragePooling2D()(y))
    };
    println!("{}", m.summary());
}
