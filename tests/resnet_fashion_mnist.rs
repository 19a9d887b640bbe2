//! The residual CNN of `examples/resnet_fashion_mnist.rs`, shrunk (8 then 16 channels),
//! trained on the first 4,000 Fashion-MNIST training images for 3 epochs: it must reach
//! 0.75 accuracy on the first 2,000 test images (the full example reaches the README's
//! figure; this checks the graph form trains a real CNN end to end).

use strata::data::{load_mnist, FASHION_MNIST_DIR};
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::Fit;

#[test]
fn a_shrunk_residual_cnn_learns_fashion_mnist() {
    let data = load_mnist(FASHION_MNIST_DIR).unwrap_or_else(|e| {
        panic!("Fashion-MNIST is missing ({e}): install it with `apt-get install dataset-fashion-mnist` (scripts/test does)")
    });
    let take = |x: &ndarray::ArrayD<f32>, n: usize| {
        x.slice(ndarray::s![..n, .., ..])
            .to_owned()
            .into_shape_with_order((n, 28, 28, 1))
            .unwrap()
    };
    let (x_train, x_test) = (take(&data.x_train, 4000), take(&data.x_test, 2000));
    let y_train = data.y_train.slice(ndarray::s![..4000]).to_owned();
    let y_test = data.y_test.slice(ndarray::s![..2000]).to_owned();
    let mut model = strata::model! {
        let x = Input((28, 28, 1));
        let h = Conv2D(8, 3, padding = same, activation = relu)(x);
        let r = Conv2D(8, 3, padding = same, activation = relu)(h);
        let r = Conv2D(8, 3, padding = same)(r);
        let h = Activation(relu)(Add()([h, r]));
        let h = MaxPooling2D(2)(h);
        let h = Conv2D(16, 3, padding = same, activation = relu)(h);
        let r = Conv2D(16, 3, padding = same)(h);
        let h = Activation(relu)(Add()([h, r]));
        let h = MaxPooling2D(2)(h);
        Dense(10, softmax)(Flatten()(h))
    };
    model
        .compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
    model
        .fit(&x_train, &y_train, Fit::epochs(3).batch_size(64).verbose(0))
        .unwrap();
    let acc = model
        .evaluate(&x_test, &y_test)
        .unwrap()
        .get("accuracy")
        .unwrap();
    eprintln!("shrunk residual CNN: test accuracy {acc}");
    assert!(acc >= 0.75, "test accuracy {acc}");
}
