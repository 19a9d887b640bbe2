//! Replicated execution on both backends: `all_reduce_sum` sums every replica's operand
//! (f32 and i32), `replica_id` tells replicas apart, state updates stay in place on each
//! replica, and values of the wrong kind or replica count are typed errors.
//!
//! The XLA half needs the CPU plugin (`scripts/install-xla-plugin`, run by `scripts/test`);
//! without it those tests fail with the install command.

use std::sync::Arc;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::{
    Backend, CompileOptions, Device, MirroredBackend, Placement, ReplicaBackend,
};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::{Error, Tensor};

fn xla_cpu(devices: usize) -> Arc<dyn ReplicaBackend> {
    match PjrtBackend::with_options(
        &Device::XlaCpu {
            devices: Some(devices),
        },
        PjrtOptions {
            cache: CacheDir::Disabled,
            ..PjrtOptions::default()
        },
    ) {
        Ok(b) => Arc::new(b),
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    }
}

fn f32t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}

/// `w += all_reduce(x)` (an in-place update) and outputs `all_reduce(x) + replica_id`, and
/// the all-reduce of an i32 operand.
fn graph() -> (Graph, CompileOptions) {
    let mut g = Graph::new("replicated");
    let w = g.parameter(TensorType::new(DType::F32, [3]));
    let x = g.parameter(TensorType::new(DType::F32, [3]));
    let k = g.parameter(TensorType::new(DType::I32, [2]));
    let s = g.all_reduce_sum(x).unwrap();
    let id = g.replica_id();
    let idf = g.convert(id, DType::F32).unwrap();
    let idb = g.broadcast_in_dim(idf, [3usize], &[]).unwrap();
    let out = g.add(s, idb).unwrap();
    let new_w = g.add(w, s).unwrap();
    let ks = g.all_reduce_sum(k).unwrap();
    g.set_outputs(vec![new_w, out, ks]).unwrap();
    (
        g,
        CompileOptions {
            updates: vec![(0, 0)],
        },
    )
}

fn check(inner: Arc<dyn ReplicaBackend>, replicas: usize) {
    let name = inner.name();
    let m = MirroredBackend::new(inner, replicas).unwrap();
    let (g, options) = graph();
    let mut exe = m.compile(&g, &options).unwrap();
    let xs: Vec<Tensor> = (0..replicas)
        .map(|r| {
            let r = r as f32;
            f32t(&[3], &[1.0 + r, 0.5 * r, -2.0])
        })
        .collect();
    let ks: Vec<Tensor> = (0..replicas)
        .map(|r| Tensor::from_vec(&[2], vec![r as i32, 10]).unwrap())
        .collect();
    let mut args = vec![
        m.upload(&f32t(&[3], &[0.0, 1.0, 2.0])).unwrap(),
        m.upload_per_replica(&xs).unwrap(),
        m.upload_per_replica(&ks).unwrap(),
    ];
    let n = replicas as f32;
    let sum: Vec<f32> = (0..3)
        .map(|i| xs.iter().map(|t| t.to_vec::<f32>().unwrap()[i]).sum())
        .collect();
    for step in 1..=3 {
        let outs = exe.execute(&mut args).unwrap();
        assert_eq!(outs.len(), 2, "{name} x{replicas}");
        for (r, t) in m.download_per_replica(&outs[0]).unwrap().iter().enumerate() {
            let want: Vec<f32> = sum.iter().map(|s| s + r as f32).collect();
            assert_eq!(
                t.to_vec::<f32>().unwrap(),
                want,
                "{name} x{replicas} replica {r}"
            );
        }
        let isum = (0..replicas as i32).sum::<i32>();
        for t in m.download_per_replica(&outs[1]).unwrap() {
            assert_eq!(t.to_vec::<i32>().unwrap(), vec![isum, 10 * replicas as i32]);
        }
        // The state was updated in place on every replica, identically.
        let ws = m.download_per_replica(&args[0]).unwrap();
        let want: Vec<f32> = [0.0, 1.0, 2.0]
            .iter()
            .zip(&sum)
            .map(|(w, s)| w + step as f32 * s)
            .collect();
        for w in &ws {
            assert_eq!(
                w.to_vec::<f32>().unwrap(),
                want,
                "{name} x{replicas} step {step}"
            );
        }
        assert_eq!(m.download(&args[0]).unwrap(), ws[0]);
    }
    assert_eq!(
        m.read_scalar(&m.upload(&Tensor::scalar(n)).unwrap())
            .unwrap(),
        n as f64
    );
}

#[test]
fn all_reduce_sums_over_native_threads() {
    for replicas in [1, 2, 4] {
        check(Arc::new(NativeBackend::new()), replicas);
    }
}

#[test]
fn all_reduce_sums_over_xla_cpu_devices() {
    let xla = xla_cpu(4);
    for replicas in [1, 2, 4] {
        check(xla.clone(), replicas);
    }
}

#[test]
fn wrong_values_are_typed_errors() {
    let native: Arc<dyn ReplicaBackend> = Arc::new(NativeBackend::new());
    let two = MirroredBackend::new(native.clone(), 2).unwrap();
    let four = MirroredBackend::new(native.clone(), 4).unwrap();
    assert!(matches!(
        MirroredBackend::new(native.clone(), 0),
        Err(Error::InvalidArgument { .. })
    ));
    let t = f32t(&[3], &[1.0, 2.0, 3.0]);
    // One piece per replica, all of one type.
    assert!(two.upload_per_replica(std::slice::from_ref(&t)).is_err());
    assert!(two
        .upload_per_replica(&[t.clone(), f32t(&[2], &[1.0, 2.0])])
        .is_err());
    // A mirrored value is not a native buffer, nor one of another replica count.
    let v = two.upload(&t).unwrap();
    assert!(matches!(
        native.download(&v),
        Err(Error::WrongBackend { .. })
    ));
    assert!(four.download(&v).is_err());
    let plain = native.upload(&t).unwrap();
    assert!(matches!(
        two.download(&plain),
        Err(Error::WrongBackend { .. })
    ));

    let (g, options) = graph();
    let mut exe = two.compile(&g, &options).unwrap();
    let mut wrong = vec![two.upload(&t).unwrap(), v, plain];
    assert!(exe.execute(&mut wrong).is_err());
    let mut short = vec![two.upload(&t).unwrap()];
    assert!(matches!(
        exe.execute(&mut short),
        Err(Error::InvalidArgument { .. })
    ));
    // More replicas than the XLA client has devices.
    assert!(matches!(
        MirroredBackend::new(xla_cpu(2), 4),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn xla_arguments_on_the_wrong_device_are_refused() {
    let xla = xla_cpu(2);
    let mut exe = xla.compile_replicated(&graph().0, &graph().1, 2).unwrap();
    let w = f32t(&[3], &[0.0; 3]);
    let k = Tensor::from_vec(&[2], vec![0i32, 0]).unwrap();
    // Replica 1's list, all placed on device 0.
    let mut args: Vec<Vec<_>> = (0..2)
        .map(|_| {
            vec![
                xla.upload_to(&w, 0).unwrap(),
                xla.upload_to(&w, 0).unwrap(),
                xla.upload_to(&k, 0).unwrap(),
            ]
        })
        .collect();
    match exe.execute(&mut args) {
        Err(Error::InvalidArgument { message, .. }) => {
            assert!(message.contains("device"), "{message}")
        }
        other => panic!("expected a wrong-device error, got {other:?}"),
    }
}

#[test]
fn rows_of_a_batch_go_to_their_replicas() {
    let t = Tensor::from_vec(&[4, 2], vec![0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
    let ids = Tensor::from_vec(&[4], vec![10i32, 11, 12, 13]).unwrap();
    for inner in [
        Arc::new(NativeBackend::new()) as Arc<dyn ReplicaBackend>,
        xla_cpu(2),
    ] {
        let m = MirroredBackend::new(inner, 2).unwrap();
        let mut b = m.upload(&Tensor::scalar(0f32)).unwrap();
        // Built fresh, then refilled in place with other rows (a repeat pads replica 1).
        for rows in [vec![vec![0, 1], vec![2, 3]], vec![vec![3, 0], vec![2, 2]]] {
            m.upload_rows_per_replica_into(&t, &rows, &mut b).unwrap();
            assert_eq!(b.ty(), &TensorType::new(DType::F32, [2, 2]));
            let got = m.download_per_replica(&b).unwrap();
            for (r, idx) in rows.iter().enumerate() {
                let want: Vec<f32> = idx
                    .iter()
                    .flat_map(|&i| [2.0 * i as f32, 2.0 * i as f32 + 1.0])
                    .collect();
                assert_eq!(got[r].to_vec::<f32>().unwrap(), want, "{}", m.name());
            }
            let mut c = m.upload(&Tensor::scalar(0i32)).unwrap();
            m.upload_rows_per_replica_into(&ids, &rows, &mut c).unwrap();
            let got = m.download_per_replica(&c).unwrap();
            assert_eq!(got[1].to_vec::<i32>().unwrap()[0], 10 + rows[1][0] as i32);
        }
        assert!(m
            .upload_rows_per_replica_into(&t, &[vec![9], vec![0]], &mut b)
            .is_err());
        assert!(m
            .upload_rows_per_replica_into(&t, &[vec![0]], &mut b)
            .is_err());
    }
}

#[test]
fn bind_inputs_places_each_input_as_asked() {
    let t = Tensor::from_vec(&[4, 2], vec![0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
    let lr = Tensor::from_vec(&[1], vec![0.5f32]).unwrap();
    let parts = [f32t(&[2], &[1.0, 2.0]), f32t(&[2], &[3.0, 4.0])];
    let rows = [vec![0, 1], vec![3, 3]];
    let m = MirroredBackend::new(Arc::new(NativeBackend::new()), 2).unwrap();
    let mut args = vec![m.upload(&Tensor::scalar(0f32)).unwrap()];
    let placements = [
        Placement::Rows(&rows),
        Placement::Parts(&parts),
        Placement::Whole,
    ];
    // Twice: made, then reused in place.
    for _ in 0..2 {
        let (mut x, mut w, mut l) = (t.clone(), parts[0].clone(), lr.clone());
        m.bind_inputs(&mut args, 1, &mut [&mut x, &mut w, &mut l], &placements)
            .unwrap();
        assert_eq!(args.len(), 4);
        let xs = m.download_per_replica(&args[1]).unwrap();
        assert_eq!(xs[1].to_vec::<f32>().unwrap(), [6.0, 7.0, 6.0, 7.0]);
        let ws = m.download_per_replica(&args[2]).unwrap();
        assert_eq!(ws[1].to_vec::<f32>().unwrap(), [3.0, 4.0]);
        for l in m.download_per_replica(&args[3]).unwrap() {
            assert_eq!(l.to_vec::<f32>().unwrap(), [0.5]);
        }
        for (b, (t, p)) in args[1..]
            .iter()
            .zip([&t, &parts[0], &lr].iter().zip(&placements))
        {
            assert!(m.input_fits(b, t, p));
        }
    }

    // One device takes every input whole (a one-replica placement is that replica's
    // share) and refuses a placement over several replicas.
    let native = NativeBackend::new();
    let mut args = Vec::new();
    let mut x = t.clone();
    native
        .bind_inputs(&mut args, 0, &mut [&mut x], &[Placement::Rows(&[vec![2]])])
        .unwrap();
    assert_eq!(
        native.download(&args[0]).unwrap().to_vec::<f32>().unwrap(),
        [4.0, 5.0]
    );
    let r = native.bind_inputs(&mut args, 0, &mut [&mut x], &[Placement::Rows(&rows)]);
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
    let r = native.bind_inputs(&mut args, 0, &mut [&mut x], &[]);
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
}
