//! The data pipeline and file readers; `fit_dataset`; the seeded random helpers.

use std::io::Write;
use strata_runtime::data::{read_idx, read_npy, Batch, Dataset, Groups};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::SGD;
use strata_runtime::train::Fit;
use strata_runtime::Model;
use strata_runtime::{random, Error, Tensor};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("strata-data-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn idx_bytes() -> Vec<u8> {
    // Two 2x3 u8 images.
    let mut b = vec![0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3];
    b.extend(0u8..12);
    b
}

#[test]
fn idx_plain_gzip_and_broken() {
    let p = tmp("images.idx");
    std::fs::write(&p, idx_bytes()).unwrap();
    let t = read_idx(&p).unwrap();
    assert_eq!(t.dims(), &[2, 2, 3]);
    assert_eq!(t.to_vec::<i32>().unwrap(), (0..12).collect::<Vec<i32>>());

    let gz = tmp("images.idx.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    e.write_all(&idx_bytes()).unwrap();
    e.finish().unwrap();
    assert_eq!(read_idx(&gz).unwrap(), t);

    let f = tmp("floats.idx");
    let mut b = vec![0, 0, 0x0D, 1, 0, 0, 0, 2];
    b.extend(1.5f32.to_be_bytes());
    b.extend((-2.0f32).to_be_bytes());
    std::fs::write(&f, b).unwrap();
    assert_eq!(
        read_idx(&f).unwrap(),
        Tensor::from_vec(&[2], vec![1.5f32, -2.0]).unwrap()
    );

    let short = tmp("short.idx");
    std::fs::write(&short, &idx_bytes()[..20]).unwrap();
    let e = read_idx(&short).unwrap_err();
    assert!(
        matches!(e, Error::Data { .. }) && e.to_string().contains("truncated"),
        "{e}"
    );
    let foreign = tmp("foreign.idx");
    std::fs::write(&foreign, b"PK\x03\x04 zip").unwrap();
    assert!(read_idx(&foreign)
        .unwrap_err()
        .to_string()
        .contains("not an IDX file"));
    assert!(matches!(
        read_idx(tmp("missing.idx")).unwrap_err(),
        Error::Io { .. }
    ));
}

/// A hand-written .npy file.
fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    b.extend(data);
    b
}

#[test]
fn npy_types_orders_and_errors() {
    let p = tmp("a.npy");
    let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&p, npy("<f4", false, "(2, 3)", &data)).unwrap();
    let t = read_npy(&p).unwrap();
    assert_eq!(
        t,
        Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()
    );
    // The same memory in Fortran order is the transpose.
    std::fs::write(&p, npy("<f4", true, "(2, 3)", &data)).unwrap();
    assert_eq!(
        read_npy(&p).unwrap(),
        Tensor::from_vec(&[2, 3], vec![1.0f32, 3.0, 5.0, 2.0, 4.0, 6.0]).unwrap()
    );
    let big: Vec<u8> = [7i64, -8].iter().flat_map(|v| v.to_be_bytes()).collect();
    std::fs::write(&p, npy(">i8", false, "(2,)", &big)).unwrap();
    assert_eq!(
        read_npy(&p).unwrap(),
        Tensor::from_vec(&[2], vec![7i64, -8]).unwrap()
    );
    std::fs::write(&p, npy("|u1", false, "(3,)", &[0, 200, 255])).unwrap();
    assert_eq!(
        read_npy(&p).unwrap(),
        Tensor::from_vec(&[3], vec![0i32, 200, 255]).unwrap()
    );
    std::fs::write(&p, npy("<f4", false, "(2, 3)", &data[..20])).unwrap();
    assert!(read_npy(&p)
        .unwrap_err()
        .to_string()
        .contains("needs 24 bytes"));
    std::fs::write(&p, npy("<c8", false, "(1,)", &[0; 8])).unwrap();
    assert!(read_npy(&p)
        .unwrap_err()
        .to_string()
        .contains("unsupported dtype"));
}

fn ds(n: usize) -> Dataset {
    let x = Tensor::from_vec(&[n, 2], (0..2 * n).map(|v| v as f32).collect::<Vec<f32>>()).unwrap();
    let y = Tensor::from_vec(&[n], (0..n as i32).collect::<Vec<i32>>()).unwrap();
    Dataset::from_arrays(x, y).unwrap()
}

fn labels(b: &[Batch]) -> Vec<i32> {
    b.iter()
        .flat_map(|b| b.y.to_vec::<i32>().unwrap())
        .collect()
}

#[test]
fn dataset_batches_shuffles_maps_and_prefetches() {
    let d = ds(10).batch(4).unwrap();
    let b: Vec<Batch> = d.iter(0).map(|b| b.unwrap()).collect();
    assert_eq!(
        b.iter().map(|b| b.x.dims()[0]).collect::<Vec<_>>(),
        [4, 4, 2]
    );
    assert_eq!(labels(&b), (0..10).collect::<Vec<_>>());
    assert_eq!(d.clone().drop_remainder(true).num_batches(), 2);

    let s = ds(10).batch(4).unwrap().shuffle(7);
    let e0 = labels(&s.iter(0).map(|b| b.unwrap()).collect::<Vec<_>>());
    let e1 = labels(&s.iter(1).map(|b| b.unwrap()).collect::<Vec<_>>());
    assert_ne!(e0, e1, "each epoch reshuffles");
    assert_eq!(
        e0,
        labels(&s.iter(0).map(|b| b.unwrap()).collect::<Vec<_>>()),
        "same seed and epoch, same order"
    );
    let mut sorted = e0.clone();
    sorted.sort();
    assert_eq!(sorted, (0..10).collect::<Vec<_>>(), "a permutation");
    // x rows travel with their labels.
    let b = s.iter(0).next().unwrap().unwrap();
    let (x, y) = (b.x.to_vec::<f32>().unwrap(), b.y.to_vec::<i32>().unwrap());
    for (i, &l) in y.iter().enumerate() {
        assert_eq!(x[2 * i], 2.0 * l as f32);
    }

    let m = ds(6).batch(3).unwrap().map(|mut b| {
        b.x = Tensor::F32(b.x.array::<f32>()?.mapv(|v| v * 10.0));
        Ok(b)
    });
    assert_eq!(
        m.iter(0)
            .next()
            .unwrap()
            .unwrap()
            .x
            .to_vec::<f32>()
            .unwrap()[..2],
        [0.0, 10.0]
    );
    let p = m.clone().prefetch(2).shuffle(3);
    let a: Vec<_> = p.iter(4).map(|b| b.unwrap().x).collect();
    let inline: Vec<_> = m.shuffle(3).iter(4).map(|b| b.unwrap().x).collect();
    assert_eq!(a, inline, "prefetching changes nothing but timing");
    // A failing map surfaces as an error from the iterator.
    let bad = ds(4)
        .map(|_| {
            Err(Error::InvalidArgument {
                what: "map".into(),
                message: "boom".into(),
            })
        })
        .prefetch(1);
    assert!(bad.iter(0).next().unwrap().is_err());
    assert!(ds(4).batch(0).is_err());
    assert!(ds(4).with_sample_weight(vec![1.0; 3]).is_err());
}

#[test]
fn fit_dataset_matches_fit_on_arrays() {
    let x = random::normal(&[24, 5], 0.0, 1.0, 1).unwrap();
    let y = random::uniform_int(&[24], 0, 3, 2).unwrap();
    let make = || {
        let mut m = Model::new(Sequential::new(
            Some(vec![5]),
            vec![Box::new(Dense::new("dense", 3, Activation::Softmax))],
        ));
        m.compile(SGD::new(0.1), SparseCategoricalCrossentropy::default(), ())
            .unwrap();
        m
    };
    let mut a = make();
    a.fit(&x, &y, Fit::epochs(3).batch_size(5).seed(4).verbose(0))
        .unwrap();
    let mut b = make();
    let d = Dataset::from_arrays(&x, &y)
        .unwrap()
        .batch(5)
        .unwrap()
        .shuffle(4)
        .prefetch(2);
    b.fit_dataset(&d, Fit::epochs(3).verbose(0)).unwrap();
    assert_eq!(a.weights(), b.weights());
    // A map that breaks the input shape is caught per batch.
    let broken = d.map(|mut b| {
        b.x = Tensor::zeros(&strata_runtime::ir::TensorType::new(
            strata_runtime::ir::DType::F32,
            [b.x.dims()[0], 4],
        ))?;
        Ok(b)
    });
    assert!(make()
        .fit_dataset(&broken, Fit::epochs(1).verbose(0))
        .is_err());
}

#[test]
fn random_helpers_are_seeded_and_in_range() {
    let a = random::normal(&[1000], 2.0, 0.5, 9).unwrap();
    assert_eq!(a, random::normal(&[1000], 2.0, 0.5, 9).unwrap());
    let mean = a.mean().unwrap();
    assert!((mean - 2.0).abs() < 0.1, "{mean}");
    let u = random::uniform(&[1000], -1.0, 1.0, 1).unwrap();
    assert!(u.iter().all(|&v| (-1.0..1.0).contains(&v)));
    let k = random::uniform_int(&[1000], 0, 10, 1).unwrap();
    assert!(k.iter().all(|&v| (0..10).contains(&v)));
    assert!((0..10).all(|c| k.iter().any(|&v| v == c)));
    assert!(random::uniform_int(&[3], 5, 5, 0).is_err());
    assert!(random::normal(&[3], 0.0, -1.0, 0).is_err());
}

#[test]
fn large_normal_tensors_are_seeded_block_by_block() {
    // More than one 65,536-value block: made on several threads, yet the same for a seed.
    let n = 300_000;
    let a = random::normal(&[n], 0.0, 1.0, 5).unwrap();
    assert_eq!(a, random::normal(&[n], 0.0, 1.0, 5).unwrap());
    assert_ne!(a, random::normal(&[n], 0.0, 1.0, 6).unwrap());
    // The first block is the same whatever the length: values depend on seed and index.
    let short = random::normal(&[1000], 0.0, 1.0, 5).unwrap();
    assert_eq!(a.as_slice().unwrap()[..1000], short.as_slice().unwrap()[..]);
    // Each block on its own is standard normal, and blocks are not copies of each other.
    let v = a.as_slice().unwrap();
    for block in v.chunks(1 << 16) {
        let m = block.iter().map(|&x| x as f64).sum::<f64>() / block.len() as f64;
        let var = block.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / block.len() as f64;
        assert!(
            m.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "mean {m}, var {var}"
        );
    }
    assert_ne!(v[..100], v[1 << 16..(1 << 16) + 100]);
}

#[test]
fn a_large_gather_split_over_threads_copies_every_row() {
    // 1024 rows of 784 floats (3 MB, split over the worker crew) in a shuffled order.
    let (n, row) = (2000usize, 784usize);
    let src = Tensor::from_vec(&[n, row], (0..n * row).map(|v| v as f32).collect()).unwrap();
    let idx: Vec<usize> = (0..1024).map(|k| (k * 769 + 11) % n).collect();
    let mut dst = Tensor::zeros(&strata_runtime::ir::TensorType::new(
        strata_runtime::ir::DType::F32,
        [1024, row],
    ))
    .unwrap();
    strata_runtime::data::gather_rows(&src, &idx, &mut dst).unwrap();
    let d = dst.to_vec::<f32>().unwrap();
    for (k, &i) in idx.iter().enumerate() {
        let want: Vec<f32> = (i * row..(i + 1) * row).map(|v| v as f32).collect();
        assert_eq!(&d[k * row..(k + 1) * row], &want[..], "row {k}");
    }
}

/// A call's batches under steps_per_execution: `Groups` gives up to k batches of one size
/// stacked, in the epoch's order, the partial last batch in a call of its own, whether
/// the rows are gathered at once (arrays, no maps) or batch by batch (maps, a prefetch
/// thread).
#[test]
fn groups_stack_the_epochs_batches_in_order() {
    let n = 23;
    let x: Vec<f32> = (0..n * 3).map(|v| v as f32).collect();
    let y: Vec<i32> = (0..n as i32).collect();
    let w: Vec<f32> = (0..n).map(|v| 0.5 + v as f32).collect();
    let base = Dataset::from_arrays(
        Tensor::from_vec(&[n, 3], x).unwrap(),
        Tensor::from_vec(&[n], y).unwrap(),
    )
    .unwrap()
    .with_sample_weight(w)
    .unwrap()
    .shuffle(7)
    .batch(4)
    .unwrap();
    let double = |mut b: Batch| {
        b.x = Tensor::from_vec(
            b.x.dims(),
            b.x.to_vec::<f32>()?.iter().map(|v| v * 2.0).collect(),
        )?;
        Ok(b)
    };
    let forms = [
        ("arrays", base.clone()),
        ("mapped", base.clone().map(double)),
        ("prefetched", base.clone().map(double).prefetch(2)),
    ];
    for (form, ds) in forms {
        for k in [1, 2, 4, 5, 9] {
            let batches: Vec<Batch> = ds.iter(1).map(Result::unwrap).collect();
            let mut groups = Groups::new(ds.iter(1));
            let mut b = Batch::default();
            let mut at = 0;
            let mut calls = Vec::new();
            while let Some(m) = groups.next_into(&mut b, k) {
                let m = m.unwrap();
                let parts = &batches[at..at + m];
                let rows = parts[0].x.dims()[0];
                assert!(
                    m <= k && parts.iter().all(|p| p.x.dims()[0] == rows),
                    "{form} k={k}"
                );
                let cat = |f: &dyn Fn(&Batch) -> Vec<f32>| -> Vec<f32> {
                    parts.iter().flat_map(f).collect()
                };
                assert_eq!(
                    b.x.to_vec::<f32>().unwrap(),
                    cat(&|p| p.x.to_vec().unwrap())
                );
                assert_eq!(b.x.dims(), &[rows * m, 3]);
                let ys: Vec<i32> = parts
                    .iter()
                    .flat_map(|p| p.y.to_vec::<i32>().unwrap())
                    .collect();
                assert_eq!(b.y.to_vec::<i32>().unwrap(), ys, "{form} k={k}");
                let sw = b.sample_weight.as_ref().unwrap().to_vec::<f32>().unwrap();
                assert_eq!(
                    sw,
                    cat(&|p| p.sample_weight.as_ref().unwrap().to_vec().unwrap())
                );
                calls.push(m);
                at += m;
            }
            assert_eq!(at, batches.len(), "{form} k={k}");
            // 5 full batches of 4 and one of 3: the partial one runs alone.
            let full = 5;
            let mut want: Vec<usize> = vec![k; full / k];
            if full % k > 0 {
                want.push(full % k);
            }
            want.push(1);
            assert_eq!(calls, want, "{form} k={k}");
        }
    }
}
