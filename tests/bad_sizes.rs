//! Sizes from user input that no machine can hold: each is a typed error naming what was
//! to be allocated, never an abort ("memory allocation of N bytes failed") or a panic
//! ("capacity overflow"). The sizes are beyond any address space (over 2^47 bytes) or
//! overflow outright, so every machine refuses them the same way.

use ndarray::{Array1, Array2};
use strata::ir::{DType, Graph, TensorType};
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::model;
use strata::optim::Adam;
use strata::train::Fit;
use strata::{Error, Tensor};

/// Bytes no process can get: more than a 47-bit address space.
const IMPOSSIBLE: usize = 1 << 48;

#[track_caller]
fn out_of_memory<T>(r: strata::Result<T>, names: &str) -> String {
    match r {
        Err(e @ Error::OutOfMemory { .. }) => {
            let text = e.to_string();
            assert!(text.contains(names), "`{text}` should name `{names}`");
            text
        }
        Err(e) => panic!("expected Error::OutOfMemory naming `{names}`, got {e:?}"),
        Ok(_) => panic!("expected Error::OutOfMemory naming `{names}`, got Ok"),
    }
}

fn data(n: usize) -> (Array2<f32>, Array1<i32>) {
    let x = Array2::from_shape_fn((n, 4), |(i, j)| ((i * 7 + j) % 5) as f32 / 5.0);
    let y = Array1::from_shape_fn(n, |i| (i % 3) as i32);
    (x, y)
}

#[test]
fn a_mistyped_layer_size_fails_at_compile_not_in_model() {
    // 784 inputs × 10^12 units of f32: about 3 × 10^15 bytes.
    let mut m = model![Input(784), Dense(1_000_000_000_000)];
    assert!(!m.is_built());
    assert!(m.weights().is_empty());
    let text = out_of_memory(
        m.compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        ),
        "dense/kernel",
    );
    assert!(text.contains("784, 1000000000000"), "{text}");
    // Asking again gives the same answer, and so does predict (which builds the model).
    assert!(matches!(m.build(&[784]), Err(Error::OutOfMemory { .. })));
    let x = Array2::<f32>::zeros((2, 784));
    out_of_memory(m.predict(&x), "dense/kernel");
    assert!(!m.is_built());
}

#[test]
fn a_layer_whose_parameter_count_overflows_is_an_error() {
    // 2^40 × 2^40 elements: the count wraps in 64 bits.
    let mut m = model![Input(1099511627776), Dense(1099511627776)];
    let text = out_of_memory(m.build(&[1 << 40]), "dense/kernel");
    assert!(text.contains("overflow"), "{text}");
}

#[test]
fn a_model_built_from_its_first_input_reports_the_size_at_fit() {
    // 4 inputs × 2^48 units.
    let mut m = model![Dense(281474976710656)];
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let (x, y) = data(16);
    out_of_memory(m.fit(&x, &y, Fit::epochs(1).verbose(0)), "dense/kernel");
}

#[test]
fn a_batch_size_far_above_the_row_count_trains_on_the_rows() {
    for batch in [1usize << 40, usize::MAX] {
        let mut m = model![Input(4), Dense(3, softmax)];
        m.compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        let (x, y) = data(100);
        let h = m
            .fit(&x, &y, Fit::epochs(2).batch_size(batch).verbose(0))
            .unwrap();
        assert_eq!(h.history["loss"].len(), 2);
        assert_eq!(m.iterations(), 2, "one batch of all 100 rows per epoch");
        m.evaluate_batched(&x, &y, batch).unwrap();
        assert_eq!(m.predict_batched(&x, batch).unwrap().dims(), &[100, 3]);
    }
}

#[test]
fn a_dataset_batch_far_above_the_row_count_is_one_batch() {
    let (x, y) = data(10);
    for batch in [1usize << 40, usize::MAX] {
        for prefetch in [0, 2] {
            let ds = strata::data::Dataset::from_arrays(&x, &y)
                .unwrap()
                .shuffle(1)
                .batch(batch)
                .unwrap()
                .prefetch(prefetch);
            let batches: Vec<_> = ds.iter(0).collect::<strata::Result<_>>().unwrap();
            assert_eq!(batches.len(), 1);
            assert_eq!(batches[0].x.dims(), &[10, 4]);
        }
    }
}

#[test]
fn tensor_constructors_check_the_element_count() {
    // The product of the dims wraps to 0 in 64 bits.
    out_of_memory(
        Tensor::from_vec::<f32>(&[1 << 32, 1 << 32], vec![]),
        "Tensor::from_vec",
    );
    // A zero dimension makes an empty tensor, unless the other dims could not be indexed.
    assert_eq!(
        Tensor::from_vec::<f32>(&[0, 1 << 20, 1 << 20], vec![])
            .unwrap()
            .numel(),
        0
    );
    out_of_memory(
        Tensor::from_vec::<f32>(&[0, 1 << 40, 1 << 40], vec![]),
        "Tensor::from_vec",
    );
    let huge = TensorType::new(DType::F32, [1 << 24, 1 << 24]);
    out_of_memory(Tensor::zeros(&huge), "f32[16777216, 16777216]");
    let wraps = TensorType::new(DType::I64, [1 << 32, 1 << 32, 2]);
    let text = out_of_memory(Tensor::zeros(&wraps), "i64");
    assert!(text.contains("overflow"), "{text}");
    assert_eq!(
        Tensor::zeros(&TensorType::new(DType::BF16, [2, 3]))
            .unwrap()
            .dims(),
        &[2, 3]
    );
}

#[test]
fn random_arrays_check_their_size() {
    out_of_memory(
        strata::random::normal(&[IMPOSSIBLE], 0.0, 1.0, 0),
        "random::normal",
    );
    out_of_memory(
        strata::random::uniform(&[1 << 32, 1 << 32], 0.0, 1.0, 0),
        "random::uniform",
    );
    out_of_memory(
        strata::random::uniform_int(&[IMPOSSIBLE, 2], 0, 10, 0),
        "random::uniform_int",
    );
    assert_eq!(
        strata::random::normal(&[3, 2], 0.0, 1.0, 0)
            .unwrap()
            .shape(),
        &[3, 2]
    );
}

#[test]
fn a_graph_whose_buffers_cannot_exist_fails_to_compile() {
    let backend = strata::backend::native::NativeBackend::new();
    use strata::backend::{Backend, CompileOptions};
    // A parameter of 2^48 bytes: the native plan's arena cannot hold it.
    let mut g = Graph::new("huge");
    let x = g.parameter(TensorType::new(DType::F32, [1 << 46]));
    let y = g.neg(x).unwrap();
    g.set_outputs(vec![y]).unwrap();
    out_of_memory(backend.compile(&g, &CompileOptions::default()), "huge");
    // A type whose element count overflows is refused where it is built.
    let mut g = Graph::new("wraps");
    let x = g.parameter(TensorType::new(DType::F32, [1 << 40]));
    let r = g.broadcast_in_dim(x, [1 << 40, 1 << 40], &[1]);
    out_of_memory(r, "broadcast_in_dim");
}

#[test]
fn row_copies_check_their_ranges() {
    use strata::data::{copy_rows_into, gather_rows};
    let src = Tensor::from_vec(&[2, 3], vec![1.0f32; 6]).unwrap();
    let mut dst = Tensor::zeros(&TensorType::new(DType::F32, [4, 3])).unwrap();
    assert!(matches!(
        copy_rows_into(&src, &mut dst, usize::MAX),
        Err(Error::InvalidArgument { .. })
    ));
    copy_rows_into(&src, &mut dst, 2).unwrap();
    let scalar = Tensor::scalar(1.0f32);
    let mut scalar_dst = Tensor::scalar(0.0f32);
    assert!(copy_rows_into(&scalar, &mut scalar_dst, 0).is_err());
    assert!(gather_rows(&scalar, &[], &mut scalar_dst).is_err());
    let mut one = Tensor::zeros(&TensorType::new(DType::F32, [1, 3])).unwrap();
    assert!(gather_rows(&src, &[usize::MAX], &mut one).is_err());
    gather_rows(&src, &[1], &mut one).unwrap();
}
