//! The serialized `xla.CompileOptionsProto` handed to `PJRT_Client_Compile`, hand-encoded.
//!
//! Only `executable_build_options` (field 3) is sent, with `num_replicas` (its field 4) and
//! `num_partitions` (its field 5). Both are required in practice: empty options, or replicas
//! without partitions, make the CPU plugin abort the whole process on an internal CHECK
//! (measured), so the values are validated here before any bytes exist.

use crate::{Error, Result};

/// How many copies of the program run, and over how many devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BuildOptions {
    pub num_replicas: usize,
    pub num_partitions: usize,
}

impl BuildOptions {
    /// One replica, one partition: a program on one device.
    pub fn single_device() -> BuildOptions {
        BuildOptions {
            num_replicas: 1,
            num_partitions: 1,
        }
    }

    /// The protobuf bytes, after checking the values against the client's device count.
    pub fn encode(&self, device_count: usize) -> Result<Vec<u8>> {
        let (r, p) = (self.num_replicas, self.num_partitions);
        if r == 0 || p == 0 {
            return Err(Error::invalid(
                "XLA compile options",
                format!("replicas ({r}) and partitions ({p}) must both be at least 1"),
            ));
        }
        let total = r.saturating_mul(p);
        if total > device_count {
            return Err(Error::invalid(
                "XLA compile options",
                format!(
                    "{r} replica(s) x {p} partition(s) need {total} devices; the client has {device_count}"
                ),
            ));
        }
        let mut build = Vec::new();
        varint_field(&mut build, 4, r as u64);
        varint_field(&mut build, 5, p as u64);
        let mut out = Vec::new();
        bytes_field(&mut out, 3, &build);
        Ok(out)
    }
}

/// Protobuf wire type 0 (varint) field.
fn varint_field(out: &mut Vec<u8>, field: u32, value: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, value);
}

/// Protobuf wire type 2 (length-delimited) field.
fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, (u64::from(field) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_device_bytes_are_the_measured_ones() {
        let b = BuildOptions::single_device().encode(1).unwrap();
        assert_eq!(b, [0x1a, 0x04, 0x20, 0x01, 0x28, 0x01]);
    }

    #[test]
    fn four_replicas() {
        let b = BuildOptions {
            num_replicas: 4,
            num_partitions: 1,
        }
        .encode(4)
        .unwrap();
        assert_eq!(b, [0x1a, 0x04, 0x20, 0x04, 0x28, 0x01]);
    }

    #[test]
    fn large_values_use_multi_byte_varints() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
    }

    #[test]
    fn invalid_counts_are_refused_before_encoding() {
        let zero = BuildOptions {
            num_replicas: 0,
            num_partitions: 1,
        };
        assert!(zero.encode(4).is_err());
        let too_many = BuildOptions {
            num_replicas: 8,
            num_partitions: 1,
        };
        assert!(too_many.encode(4).is_err());
    }
}
