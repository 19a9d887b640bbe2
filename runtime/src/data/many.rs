//! Data for a model with several inputs or outputs: arrays in order, or by name (Keras'
//! list and dict forms), besides the one array of a model with one.

use super::IntoTensor;
use crate::Tensor;

/// What `fit`, `evaluate` and `predict` take as inputs or targets: one array, several in
/// the order the model lists its inputs (outputs), or several by name.
#[derive(Clone, Debug)]
pub enum Data {
    One(Tensor),
    List(Vec<Tensor>),
    Named(Vec<(String, Tensor)>),
}

impl Data {
    /// Arrays by the names of the inputs (or outputs) they are for.
    pub fn named<N: Into<String>, T: IntoTensor>(parts: impl IntoIterator<Item = (N, T)>) -> Data {
        Data::Named(
            parts
                .into_iter()
                .map(|(n, t)| (n.into(), t.into_tensor()))
                .collect(),
        )
    }

    /// How many arrays this holds.
    pub fn len(&self) -> usize {
        match self {
            Data::One(_) => 1,
            Data::List(v) => v.len(),
            Data::Named(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Anything that converts into [`Data`]: every [`IntoTensor`] (one array), a `Vec` or
/// array of tensors, a tuple of up to four arrays (in order), and `Data` itself.
pub trait IntoData {
    fn into_data(self) -> Data;
}

impl<T: IntoTensor> IntoData for T {
    fn into_data(self) -> Data {
        Data::One(self.into_tensor())
    }
}

impl IntoData for Data {
    fn into_data(self) -> Data {
        self
    }
}

impl IntoData for Vec<Tensor> {
    fn into_data(self) -> Data {
        Data::List(self)
    }
}

impl<const N: usize> IntoData for [Tensor; N] {
    fn into_data(self) -> Data {
        Data::List(self.into())
    }
}

macro_rules! tuple_data {
    ($($t:ident),+) => {
        impl<$($t: IntoTensor),+> IntoData for ($($t,)+) {
            #[allow(non_snake_case)]
            fn into_data(self) -> Data {
                let ($($t,)+) = self;
                Data::List(vec![$($t.into_tensor()),+])
            }
        }
    };
}
tuple_data!(A, B);
tuple_data!(A, B, C);
tuple_data!(A, B, C, D);

impl From<Tensor> for Data {
    fn from(t: Tensor) -> Data {
        Data::One(t)
    }
}
