//! The one checksum of Cairn's files: CRC-32C (Castagnoli, the polynomial
//! of iSCSI, ext4 and LevelDB), computed by the `crc32c` crate. Journal
//! frames and snapshot sections (format version 2 on) use it; the only
//! other CRC is CRC-32 IEEE, kept to read version-1 snapshots.
//!
//! Why this crate: it uses the CPU's `crc32` instruction (SSE4.2 on
//! x86-64, the CRC extension on aarch64) three streams at a time, so a
//! buffer of a few hundred bytes or more goes at several times the speed
//! of one serial stream of the instruction, which the journal used to
//! run by hand; elsewhere it falls back to tables. docs/design.md
//! ("Checksums") has the measurements.

/// CRC-32C of `data`, continuing from `crc` (0 to start): appending
/// pieces one by one equals one call over their concatenation.
#[inline]
pub fn crc32c(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// CRC-32 (IEEE 802.3, as zlib) of `parts` in order: the checksum of
/// version-1 snapshots, which are still read but no longer written.
pub fn crc32_ieee(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_known_answers() {
        // RFC 3720 B.4 test vectors.
        assert_eq!(crc32c(0, b""), 0);
        assert_eq!(crc32c(0, b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(0, &[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(0, &[0xffu8; 32]), 0x62a8_ab43);
        let inc: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(0, &inc), 0x46dd_794e);
        // Incremental equals one-shot, at every split.
        let data: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37)).collect();
        for cut in 0..data.len() {
            assert_eq!(
                crc32c(crc32c(0, &data[..cut]), &data[cut..]),
                crc32c(0, &data)
            );
        }
    }

    /// The crate's three-stream path (long buffers, any alignment) agrees
    /// with a plain bitwise CRC-32C.
    #[test]
    fn crc32c_matches_the_bitwise_definition_at_every_length_and_alignment() {
        fn bitwise(data: &[u8]) -> u32 {
            let mut c = !0u32;
            for &b in data {
                c ^= u32::from(b);
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        (c >> 1) ^ 0x82f6_3b78
                    } else {
                        c >> 1
                    };
                }
            }
            !c
        }
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7919 % 251) as u8).collect();
        for start in 0..8 {
            for len in (0..40).chain([255, 256, 767, 768, 769, 1024, 2048, 2991]) {
                let d = &data[start..start + len];
                assert_eq!(crc32c(0, d), bitwise(d), "start {start} len {len}");
            }
        }
    }

    #[test]
    fn crc32_ieee_known_answers() {
        assert_eq!(crc32_ieee(&[b"123456789"]), 0xcbf4_3926);
        assert_eq!(crc32_ieee(&[b"1234", b"56789"]), 0xcbf4_3926);
        assert_eq!(crc32_ieee(&[]), 0);
    }
}
