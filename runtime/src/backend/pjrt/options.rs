//! The serialized `xla.CompileOptionsProto` handed to `PJRT_Client_Compile`, hand-encoded.
//!
//! Only `executable_build_options` (field 3) is sent, with `num_replicas` (its field 4),
//! `num_partitions` (its field 5) and, for replicated programs, `device_assignment` (its
//! field 9). Replicas and partitions are required in practice: empty options, or replicas
//! without partitions, make the CPU plugin abort the whole process on an internal CHECK
//! (measured), so the values are validated here before any bytes exist.

use crate::{Error, Result};

/// How many copies of the program run, and over how many devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BuildOptions {
    pub num_replicas: usize,
    pub num_partitions: usize,
}

/// Which device runs each replica (one partition): `DeviceAssignmentProto` with
/// `replica_count` (field 1), `computation_count` (field 2) and one `computation_devices`
/// entry (field 3) listing each replica's device id (`replica_device_ids`, its field 1).
/// Without it XLA picks its default assignment, whose order need not be the client's.
pub(crate) fn device_assignment(device_ids: &[i64]) -> Vec<u8> {
    let mut devices = Vec::new();
    for &id in device_ids {
        // int64 as a varint: two's complement for negatives, as protobuf does.
        varint_field(&mut devices, 1, id as u64);
    }
    let mut out = Vec::new();
    varint_field(&mut out, 1, device_ids.len() as u64);
    varint_field(&mut out, 2, 1);
    bytes_field(&mut out, 3, &devices);
    out
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
        self.encode_with(device_count, None)
    }

    /// [`encode`](Self::encode) with an explicit device per replica (`device_ids[r]` runs
    /// replica `r`; one partition).
    pub fn encode_assigned(&self, device_count: usize, device_ids: &[i64]) -> Result<Vec<u8>> {
        if self.num_partitions != 1 || device_ids.len() != self.num_replicas {
            return Err(Error::invalid(
                "XLA compile options",
                format!(
                    "a device assignment names one device per replica of one partition: {} ids for {} replica(s) x {} partition(s)",
                    device_ids.len(),
                    self.num_replicas,
                    self.num_partitions
                ),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(id) = device_ids.iter().find(|id| !seen.insert(**id)) {
            return Err(Error::invalid(
                "XLA compile options",
                format!("device {id} is assigned to two replicas"),
            ));
        }
        self.encode_with(device_count, Some(device_ids))
    }

    fn encode_with(&self, device_count: usize, device_ids: Option<&[i64]>) -> Result<Vec<u8>> {
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
        if let Some(ids) = device_ids {
            bytes_field(&mut build, 9, &device_assignment(ids));
        }
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
    fn a_device_assignment_lists_each_replicas_device() {
        let b = BuildOptions {
            num_replicas: 2,
            num_partitions: 1,
        }
        .encode_assigned(4, &[3, 1])
        .unwrap();
        // build options: replicas 2, partitions 1, then field 9 (tag 0x4a) holding
        // replica_count 2, computation_count 1, computation_devices { ids 3, 1 }.
        assert_eq!(
            b,
            [
                0x1a, 0x10, 0x20, 0x02, 0x28, 0x01, 0x4a, 0x0a, 0x08, 0x02, 0x10, 0x01, 0x1a, 0x04,
                0x08, 0x03, 0x08, 0x01
            ]
        );
        let two = BuildOptions {
            num_replicas: 2,
            num_partitions: 1,
        };
        assert!(two.encode_assigned(4, &[1]).is_err());
        assert!(two.encode_assigned(4, &[1, 1]).is_err());
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
