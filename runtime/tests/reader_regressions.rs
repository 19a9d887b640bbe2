//! The file readers (IDX, `.npy`, checkpoints, the compile cache) on hostile bytes: each
//! case here once panicked, aborted or said something vague, or is a crash the fuzzers
//! (`scripts/fuzz`) found. Every one must now be a typed error naming the file.
//!
//! `fuzz_seeds_are_read` also writes the fuzzers' seed corpus when `STRATA_FUZZ_SEEDS` names
//! a directory: seeds made by the real writers, so they follow the formats as they change.

use std::io::Write;
use std::path::{Path, PathBuf};
use strata_runtime::data::{read_idx, read_npy};
use strata_runtime::fuzzing;
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::train::Fit;
use strata_runtime::{Error, Model, Tensor};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("strata-reader-regressions-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Writes `bytes` to a file named `name` and returns the path.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The error's text, after checking that it is a `Error::Data` naming `path`.
fn data_error(r: strata_runtime::Result<Tensor>, path: &Path) -> String {
    match r {
        Err(e @ Error::Data { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            text
        }
        other => panic!("expected Error::Data, got {other:?}"),
    }
}

/// A `.npy` file with a version-1 header holding `dict` as written.
fn npy_raw(dict: &[u8], data: &[u8]) -> Vec<u8> {
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((dict.len() as u16).to_le_bytes());
    b.extend(dict);
    b.extend(data);
    b
}

fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}\n");
    npy_raw(dict.as_bytes(), data)
}

#[test]
fn npy_descr_empty_a_lone_byte_order_or_not_ascii_is_an_error() {
    for (name, descr) in [
        ("empty.npy", ""),
        ("order-only.npy", "<"),
        ("big-order-only.npy", ">"),
        ("non-ascii.npy", "é4"),
        ("non-ascii-kind.npy", "<fé"),
        ("no-order.npy", "f4"),
        ("unknown-kind.npy", "<f9"),
    ] {
        let p = file(name, &npy(descr, "(1,)", &[0; 4]));
        let text = data_error(read_npy(&p), &p);
        assert!(text.contains("unsupported dtype"), "{text}");
    }
    // Not UTF-8 at all.
    let p = file(
        "latin1.npy",
        &npy_raw(
            b"{'descr': '\xe9', 'fortran_order': False, 'shape': (1,), }",
            &[0],
        ),
    );
    assert!(data_error(read_npy(&p), &p).contains("not text"));
}

#[test]
fn npy_sizes_are_checked_before_anything_is_allocated() {
    // The element count times the element size wraps in 64 bits.
    let p = file("wraps.npy", &npy("<f4", "(4294967296, 4294967296)", &[]));
    assert!(data_error(read_npy(&p), &p).contains("overflows"));
    // A claim of 2^60 bytes over a file of 8: refused by comparing, not by allocating.
    let p = file(
        "claims.npy",
        &npy("<f8", "(1152921504606846976, 1)", &[0; 8]),
    );
    let text = data_error(read_npy(&p), &p);
    assert!(
        text.contains("9223372036854775808 bytes") && text.contains("truncated"),
        "{text}"
    );
    // No elements, but dims that no array can index.
    let p = file(
        "zero-dim.npy",
        &npy("<f4", "(0, 4611686018427387904, 4)", &[]),
    );
    data_error(read_npy(&p), &p);
    // A header longer than the file.
    let mut b = npy("<f4", "(1,)", &[0; 4]);
    b[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
    let p = file("long-header.npy", &b);
    assert!(data_error(read_npy(&p), &p).contains("truncated header"));
    // Version 2: a 4-byte header length near u32::MAX.
    let mut b = b"\x93NUMPY\x02\x00".to_vec();
    b.extend(u32::MAX.to_le_bytes());
    let p = file("long-header-v2.npy", &b);
    assert!(data_error(read_npy(&p), &p).contains("truncated header"));
}

fn idx_header(ty: u8, dims: &[u32]) -> Vec<u8> {
    let mut b = vec![0, 0, ty, dims.len() as u8];
    for d in dims {
        b.extend(d.to_be_bytes());
    }
    b
}

#[test]
fn idx_sizes_are_checked_before_anything_is_allocated() {
    // 2^32-1 to the fourth, times 8 bytes: wraps.
    let p = file("wraps.idx", &idx_header(0x0E, &[u32::MAX; 4]));
    assert!(data_error(read_idx(&p), &p).contains("overflow"));
    // No elements, but dims that no array can index.
    let p = file(
        "zero-dim.idx",
        &idx_header(0x08, &[0, u32::MAX, u32::MAX, u32::MAX]),
    );
    data_error(read_idx(&p), &p);
    // A claim of 16 GiB over a 12-byte file.
    let p = file("claims.idx", &idx_header(0x0D, &[65536, 65536]));
    assert!(data_error(read_idx(&p), &p).contains("truncated"));
    // The same claim, gzipped.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&idx_header(0x0D, &[65536, 65536])).unwrap();
    let p = file("claims.idx.gz", &gz.finish().unwrap());
    assert!(data_error(read_idx(&p), &p).contains("truncated"));
    // 255 dimensions announced, 3 bytes of them present.
    let p = file("many-dims.idx", &[0, 0, 0x08, 255, 0, 0, 1]);
    assert!(data_error(read_idx(&p), &p).contains("truncated header"));
}

fn tiny() -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![2]),
        vec![Box::new(Dense::new("dense", 2, Activation::Softmax))],
    ))
    .with_seed(1)
    .unwrap()
}

/// The bytes of a real checkpoint: weights, Adam's slots and the training state.
fn checkpoint_bytes() -> Vec<u8> {
    let mut m = tiny();
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        (),
    )
    .unwrap();
    // One step, so that the optimizer's state exists to be saved.
    let x = Tensor::from_vec(&[4, 2], vec![0.5f32, -1.0, 2.0, 0.0, 1.0, 1.0, -0.5, 3.0]).unwrap();
    let y = Tensor::from_vec(&[4], vec![0i32, 1, 1, 0]).unwrap();
    m.fit(&x, &y, Fit::epochs(1).batch_size(4).verbose(0))
        .unwrap();
    let p = tmp("real.safetensors");
    m.save_checkpoint_at(&p, 3).unwrap();
    std::fs::read(p).unwrap()
}

/// The checkpoint error's text, after checking the model kept its weights.
fn checkpoint_error(bytes: &[u8], name: &str) -> String {
    let mut m = tiny();
    let before = m.weights();
    let p = file(name, bytes);
    match m.load_checkpoint(&p) {
        Err(e @ Error::Checkpoint { .. }) => {
            assert_eq!(m.weights(), before, "a failed load changed weights");
            let text = e.to_string();
            assert!(text.contains(&p.display().to_string()), "{text}");
            text
        }
        other => panic!("{name}: expected Error::Checkpoint, got {other:?}"),
    }
}

#[test]
fn a_truncated_checkpoint_says_truncated_and_by_how_much() {
    let good = checkpoint_bytes();
    let n = good.len();
    let header = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize + 8;
    for cut in [0, 3, 8, header / 2, header, header + 1, n - 1] {
        let text = checkpoint_error(&good[..cut], &format!("cut-{cut}.safetensors"));
        assert!(text.contains("truncated"), "cut at {cut}: {text}");
        assert!(
            text.contains(&format!("the file has {cut}")),
            "cut at {cut}: {text}"
        );
        let expected = if cut < 8 {
            "8-byte".to_string()
        } else if cut < header {
            format!("needs {header} bytes")
        } else {
            format!("describes {n} bytes")
        };
        assert!(text.contains(&expected), "cut at {cut}: {text}");
    }
    let mut long = good.clone();
    long.extend([0; 5]);
    let text = checkpoint_error(&long, "trailing.safetensors");
    assert!(
        text.contains(&format!("describes {n} bytes, the file has {}", n + 5)),
        "{text}"
    );
}

/// A safetensors file with this JSON header and data.
fn safetensors(json: &str, data: &[u8]) -> Vec<u8> {
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend(json.as_bytes());
    b.extend(data);
    b
}

const STRATA_META: &str =
    r#""__metadata__":{"format":"strata.checkpoint","version":"1","epoch":"0"}"#;

#[test]
fn a_checkpoint_tensor_no_array_can_hold_is_an_error() {
    // safetensors accepts it (no elements, no bytes); ndarray cannot index the dims.
    let json = format!(
        r#"{{{STRATA_META},"model/dense/kernel":{{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}}}}"#
    );
    let bytes = safetensors(&json, &[]);
    assert!(matches!(
        fuzzing::checkpoint(&bytes),
        Err(Error::Checkpoint { .. })
    ));
    let text = checkpoint_error(&bytes, "unindexable.safetensors");
    assert!(text.contains("model/dense/kernel"), "{text}");
}

#[test]
fn compile_cache_entries_with_impossible_lengths_are_ignored() {
    let good = fuzzing::compile_cache_seed(b"executable");
    assert_eq!(
        fuzzing::compile_cache_entry(&good),
        Some(b"executable".to_vec())
    );
    let magic = &good[..16];
    for len in [u64::MAX, u64::MAX - 7, 1 << 40] {
        let mut b = magic.to_vec();
        b.extend(len.to_le_bytes());
        b.extend(fuzzing::CACHE_IDENTITY);
        assert_eq!(fuzzing::compile_cache_entry(&b), None, "key length {len}");
        let mut b = magic.to_vec();
        b.extend((fuzzing::CACHE_IDENTITY.len() as u64).to_le_bytes());
        b.extend(fuzzing::CACHE_IDENTITY);
        b.extend(len.to_le_bytes());
        assert_eq!(
            fuzzing::compile_cache_entry(&b),
            None,
            "payload length {len}"
        );
    }
    for cut in 0..good.len() {
        assert_eq!(
            fuzzing::compile_cache_entry(&good[..cut]),
            None,
            "cut at {cut}"
        );
    }
}

/// Each fuzz target's seeds: small valid files of every kind the reader knows.
fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    // IDX: every element type, then gzipped.
    for (ty, size) in [
        (0x08, 1),
        (0x09, 1),
        (0x0B, 2),
        (0x0C, 4),
        (0x0D, 4),
        (0x0E, 8),
    ] {
        let mut b = idx_header(ty, &[2, 3]);
        b.extend((0..6 * size).map(|i| i as u8));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&b).unwrap();
        out.push(("idx", format!("type-{ty:02x}.idx.gz"), gz.finish().unwrap()));
        out.push(("idx", format!("type-{ty:02x}.idx"), b));
    }
    // npy: every dtype in each byte order, both memory orders, scalars.
    for (kind, size) in [
        ("f4", 4),
        ("f8", 8),
        ("i1", 1),
        ("i2", 2),
        ("i4", 4),
        ("i8", 8),
        ("u1", 1),
        ("u2", 2),
        ("b1", 1),
    ] {
        let data: Vec<u8> = (0..6 * size).map(|i| i as u8).collect();
        for (order, name) in [("<", "le"), (">", "be"), ("|", "any")] {
            out.push((
                "npy",
                format!("{kind}-{name}.npy"),
                npy(&format!("{order}{kind}"), "(2, 3)", &data),
            ));
        }
        let dict = format!("{{'descr': '<{kind}', 'fortran_order': True, 'shape': (3, 2), }}\n");
        out.push((
            "npy",
            format!("{kind}-fortran.npy"),
            npy_raw(dict.as_bytes(), &data),
        ));
        out.push((
            "npy",
            format!("{kind}-scalar.npy"),
            npy(&format!("<{kind}"), "()", &data[..size]),
        ));
    }
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    let dict = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
    v2.extend((dict.len() as u32).to_le_bytes());
    v2.extend(dict);
    v2.extend(1.5f32.to_le_bytes());
    out.push(("npy", "version-2.npy".into(), v2));
    // Checkpoints: weights only, and with an optimizer's state.
    let p = tmp("weights.safetensors");
    tiny().save_checkpoint(&p).unwrap();
    out.push((
        "checkpoint",
        "weights.safetensors".into(),
        std::fs::read(p).unwrap(),
    ));
    let adam = checkpoint_bytes();
    assert!(
        adam.windows(b"optimizer/".len())
            .any(|w| w == b"optimizer/"),
        "the seed has no optimizer state"
    );
    out.push(("checkpoint", "adam.safetensors".into(), adam));
    // Compile-cache entries.
    for payload in [&b""[..], b"x", b"a serialized executable"] {
        out.push((
            "compile_cache",
            format!("entry-{}.xla", payload.len()),
            fuzzing::compile_cache_seed(payload),
        ));
    }
    out
}

/// Every seed reads back (so the fuzzers start from files that get past the checks); with
/// `STRATA_FUZZ_SEEDS=DIR` they are also written to `DIR/TARGET/NAME` for `scripts/fuzz`.
#[test]
fn fuzz_seeds_are_read() {
    let dir = std::env::var_os("STRATA_FUZZ_SEEDS").map(PathBuf::from);
    for (target, name, bytes) in seeds() {
        let ok = match target {
            "idx" => fuzzing::idx(&bytes).map(|_| ()),
            "npy" => fuzzing::npy(&bytes).map(|_| ()),
            "checkpoint" => fuzzing::checkpoint(&bytes).map(|t| assert!(!t.is_empty())),
            _ => match fuzzing::compile_cache_entry(&bytes) {
                Some(_) => Ok(()),
                None => Err(Error::InvalidArgument {
                    what: "compile cache".into(),
                    message: "the entry was refused".into(),
                }),
            },
        };
        assert!(ok.is_ok(), "{target}/{name}: {ok:?}");
        if let Some(dir) = &dir {
            let d = dir.join(target);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("seed-{name}")), &bytes).unwrap();
        }
    }
}
