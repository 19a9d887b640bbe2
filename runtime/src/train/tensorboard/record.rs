//! TFRecord framing, the container of TensorBoard's event files: each record is its
//! length (u64, little-endian), the masked CRC-32C of those 8 bytes, the data, and the
//! masked CRC-32C of the data.

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) by a 256-entry table. Event
/// files are a few kilobytes an epoch, so a table beats taking on a crate with its own
/// hardware paths.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82F6_3B78
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut crc = !0u32;
    for &b in data {
        crc = TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The CRC as TFRecord stores it: rotated and offset, so that a CRC of data that holds
/// CRCs is not degenerate.
pub(crate) fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    crc.rotate_right(15).wrapping_add(0xA282_EAD8)
}

/// Appends one framed record holding `data` to `out`.
pub(crate) fn frame(data: &[u8], out: &mut Vec<u8>) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc32c(data).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_of_the_check_string() {
        // The CRC catalogue's check value for CRC-32C.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn a_record_is_length_crc_data_crc() {
        let mut out = Vec::new();
        frame(b"123456789", &mut out);
        assert_eq!(out.len(), 8 + 4 + 9 + 4);
        assert_eq!(&out[..8], &9u64.to_le_bytes());
        assert_eq!(&out[12..21], b"123456789");
        // Both CRCs as TensorBoard's own `masked_crc32c` gives them.
        assert_eq!(&out[8..12], &0x3971_F937u32.to_le_bytes());
        assert_eq!(&out[21..], &0xC78A_B0E5u32.to_le_bytes());
    }
}
