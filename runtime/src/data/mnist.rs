//! MNIST-format directories (MNIST, Fashion-MNIST): the four IDX files Keras'
//! `load_data()` reads, with images scaled to `[0, 1]`.

use super::read_idx;
use crate::{Error, Result, Tensor};
use ndarray::{Array1, ArrayD};
use std::path::Path;

/// Train and test splits; images `[n, 28, 28]` in `[0, 1]`, labels `[n]`.
#[derive(Clone, Debug)]
pub struct Mnist {
    pub x_train: ArrayD<f32>,
    pub y_train: Array1<i32>,
    pub x_test: ArrayD<f32>,
    pub y_test: Array1<i32>,
}

/// Where Debian's `dataset-fashion-mnist` package puts Fashion-MNIST.
pub const FASHION_MNIST_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// Reads `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte` and
/// `t10k-labels-idx1-ubyte` (each plain or `.gz`) from `dir`.
pub fn load_mnist(dir: impl AsRef<Path>) -> Result<Mnist> {
    let dir = dir.as_ref();
    let path = |stem: &str| {
        let plain = dir.join(stem);
        if plain.exists() {
            plain
        } else {
            dir.join(format!("{stem}.gz"))
        }
    };
    let file = |stem: &str| -> Result<Tensor> { read_idx(path(stem)) };
    let images = |stem: &str| -> Result<ArrayD<f32>> {
        let a = super::idx::read_idx_unit_f32(&path(stem))?;
        if a.ndim() != 3 {
            return Err(Error::Data {
                path: dir.join(stem).display().to_string(),
                message: format!("expected images [n, rows, cols], got shape {:?}", a.shape()),
            });
        }
        Ok(a)
    };
    let labels = |stem: &str, n: usize| -> Result<Array1<i32>> {
        let t = file(stem)?;
        let a = t.array::<i32>()?;
        if a.ndim() != 1 || a.len() != n {
            return Err(Error::Data {
                path: dir.join(stem).display().to_string(),
                message: format!("expected {n} labels, got shape {}", t.shape()),
            });
        }
        Ok(a.iter().copied().collect())
    };
    let x_train = images("train-images-idx3-ubyte")?;
    let y_train = labels("train-labels-idx1-ubyte", x_train.shape()[0])?;
    let x_test = images("t10k-images-idx3-ubyte")?;
    let y_test = labels("t10k-labels-idx1-ubyte", x_test.shape()[0])?;
    Ok(Mnist {
        x_train,
        y_train,
        x_test,
        y_test,
    })
}
