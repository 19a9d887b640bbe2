//! The LSTM of `examples/lstm_fashion_mnist.rs` (each image read row by row), shrunk to
//! 32 units and trained on the first 3,000 Fashion-MNIST training images for 3 epochs: it
//! must reach 0.65 accuracy on the first 1,000 test images, natively and on XLA CPU
//! (which CI installs); gradients flow through the LSTM's scan on both.

use strata::backend::Device;
use strata::data::{load_mnist, FASHION_MNIST_DIR};
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::Fit;

fn learns(device: Device) -> f64 {
    let data = load_mnist(FASHION_MNIST_DIR).unwrap_or_else(|e| {
        panic!("Fashion-MNIST is missing ({e}): install it with `apt-get install dataset-fashion-mnist` (scripts/test does)")
    });
    let take = |x: &ndarray::ArrayD<f32>, n: usize| {
        x.slice(ndarray::s![..n, .., ..])
            .to_owned()
            .into_shape_with_order((n, 28, 28))
            .unwrap()
    };
    let (x_train, x_test) = (take(&data.x_train, 3000), take(&data.x_test, 1000));
    let y_train = data.y_train.slice(ndarray::s![..3000]).to_owned();
    let y_test = data.y_test.slice(ndarray::s![..1000]).to_owned();
    let mut model = strata::model![Input((28, 28)), LSTM(32), Dense(10, softmax)];
    model.set_device(device).unwrap();
    model
        .compile(
            Adam::new(0.005),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
    model
        .fit(&x_train, &y_train, Fit::epochs(3).batch_size(64).verbose(0))
        .unwrap();
    model
        .evaluate(&x_test, &y_test)
        .unwrap()
        .get("accuracy")
        .unwrap()
}

#[test]
fn a_shrunk_lstm_learns_fashion_mnist_row_by_row() {
    let native = learns(Device::Native);
    eprintln!("shrunk LSTM, native: test accuracy {native}");
    assert!(native >= 0.65, "native test accuracy {native}");
    let xla = learns(Device::XlaCpu { devices: None });
    eprintln!("shrunk LSTM, XLA CPU: test accuracy {xla}");
    assert!(xla >= 0.65, "XLA CPU test accuracy {xla}");
}
