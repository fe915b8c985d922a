//! The value log's bytes: the segment header, the record and the pointer
//! the keyspace keeps for a record. Pure encoding and checks, no I/O.
//! docs/design.md ("The disk tier", "The file format") draws the same
//! layout; the tests at the end pin it.
//!
//! ```text
//! segment header (32 bytes, all integers little-endian)
//!   0 "CAIRNVLG"   8 version u16 = 1   10 flags u16 = 0   12 group u16
//!  14 reserved u16 = 0   16 seq u32   20 reserved 8 bytes = 0
//!  28 CRC-32C of bytes 0..28
//! record (at an 8-aligned offset >= 32)
//!   0 crc u32   4 vlen u32   8 klen u16   10 db u8   11 kind u8
//!  12 reserved u32 = 0   16 key[klen]   16+klen value[vlen]
//!   then zero padding to the next multiple of 8
//!   crc = CRC-32C of bytes 4..16, the key and the value (not the padding)
//! ```
use crate::crc::crc32c;

pub const MAGIC: &[u8; 8] = b"CAIRNVLG";
pub const VERSION: u16 = 1;
pub const SEGMENT_HEADER_LEN: u64 = 32;
pub const RECORD_HEADER_LEN: usize = 16;
/// Records start at multiples of this: the header's fields stay aligned
/// for the reader, at 3.5 bytes of padding a record on average.
pub const ALIGN: u64 = 8;
/// The longest key a record holds (`klen` is a u16).
pub const KEY_MAX: usize = u16::MAX as usize;

/// What the value bytes of a record are. Persisted: values are
/// append-only (a test pins them).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The value's plain bytes.
    Plain = 0,
    /// The value as the engine's zcomp codes it (plain length u32, dictionary
    /// id u16, one zstd frame); the log does not look inside.
    Coded = 1,
}

impl Kind {
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Plain),
            1 => Some(Kind::Coded),
            _ => None,
        }
    }
}

/// Where a record is: what RAM keeps for a tiered value (with the plain
/// length beside it, in the key's block). The segment's number is never
/// reused, so a pointer names one record for as long as the log exists:
/// compaction compares pointers to decide whether a key still holds a
/// record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ptr {
    pub segment: u32,
    /// Byte offset of the record in its segment file (segments are at
    /// most 4 GiB).
    pub offset: u32,
    /// The record's length, header included, padding excluded: one pread.
    pub len: u32,
}

impl Ptr {
    pub const BYTES: usize = 12;

    pub fn to_bytes(self) -> [u8; Ptr::BYTES] {
        let mut b = [0u8; Ptr::BYTES];
        b[0..4].copy_from_slice(&self.segment.to_le_bytes());
        b[4..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub fn from_bytes(b: [u8; Ptr::BYTES]) -> Ptr {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ptr {
            segment: u(0),
            offset: u(4),
            len: u(8),
        }
    }

    /// The record's end in its file, padding excluded.
    pub fn end(self) -> u64 {
        u64::from(self.offset) + u64::from(self.len)
    }
}

/// The 32-byte header of segment `seq` of shard group `group`.
pub fn segment_header(group: u16, seq: u32) -> [u8; SEGMENT_HEADER_LEN as usize] {
    let mut h = [0u8; SEGMENT_HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..10].copy_from_slice(&VERSION.to_le_bytes());
    h[12..14].copy_from_slice(&group.to_le_bytes());
    h[16..20].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32c(0, &h[..28]);
    h[28..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The group and sequence number a segment header names, or why it is
/// not one.
pub fn parse_segment_header(h: &[u8]) -> Result<(u16, u32), String> {
    if h.len() < SEGMENT_HEADER_LEN as usize {
        return Err("file ends inside the segment header".into());
    }
    if &h[..8] != MAGIC {
        return Err("not a value log segment (bad magic)".into());
    }
    let stored = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
    if crc32c(0, &h[..28]) != stored {
        return Err("segment header checksum mismatch".into());
    }
    let version = u16::from_le_bytes([h[8], h[9]]);
    if version != VERSION {
        return Err(format!("unsupported value log version {version}"));
    }
    let flags = u16::from_le_bytes([h[10], h[11]]);
    if flags != 0 {
        return Err(format!("unknown segment flags {flags:#x}"));
    }
    let group = u16::from_le_bytes([h[12], h[13]]);
    let seq = u32::from_le_bytes([h[16], h[17], h[18], h[19]]);
    Ok((group, seq))
}

/// A record's length, padding excluded.
pub fn record_len(klen: usize, vlen: usize) -> u64 {
    (RECORD_HEADER_LEN + klen + vlen) as u64
}

/// `len` rounded up to the record alignment.
pub fn padded(len: u64) -> u64 {
    (len + ALIGN - 1) & !(ALIGN - 1)
}

/// Appends one record and its padding to `out`. The caller has checked
/// the lengths (`klen` <= `KEY_MAX`, `vlen` < 4 GiB).
pub fn encode_record(out: &mut Vec<u8>, db: u8, kind: Kind, key: &[u8], value: &[u8]) {
    debug_assert!(key.len() <= KEY_MAX && u32::try_from(value.len()).is_ok());
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.push(db);
    out.push(kind as u8);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    // One call over header, key and value: the crate's fixed cost per
    // call is larger than a short key's bytes (crc.rs).
    let crc = crc32c(0, &out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    pad(out, start);
}

/// Zero bytes after the record that started at `start` in `out`, up to
/// the alignment.
pub fn pad(out: &mut Vec<u8>, start: usize) {
    let len = (out.len() - start) as u64;
    out.resize(start + padded(len) as usize, 0);
}

/// A record header's fields.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub crc: u32,
    pub vlen: u32,
    pub klen: u16,
    pub db: u8,
    pub kind: u8,
}

impl Header {
    /// `b` holds at least `RECORD_HEADER_LEN` bytes.
    pub fn parse(b: &[u8]) -> Header {
        Header {
            crc: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            vlen: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            klen: u16::from_le_bytes([b[8], b[9]]),
            db: b[10],
            kind: b[11],
        }
    }

    pub fn record_len(&self) -> u64 {
        record_len(usize::from(self.klen), self.vlen as usize)
    }
}

/// A checked record's fields, borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct RecordRef<'a> {
    pub db: u8,
    pub kind: Kind,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Checks `rec`, exactly one record without its padding: its length, its
/// CRC and its kind.
pub fn check_record(rec: &[u8]) -> Result<RecordRef<'_>, String> {
    if rec.len() < RECORD_HEADER_LEN {
        return Err("record shorter than its header".into());
    }
    let h = Header::parse(rec);
    if h.record_len() != rec.len() as u64 {
        return Err(format!(
            "record length {} does not match its header's {}",
            rec.len(),
            h.record_len()
        ));
    }
    if crc32c(0, &rec[4..]) != h.crc {
        return Err("record checksum mismatch".into());
    }
    let kind = Kind::from_u8(h.kind).ok_or_else(|| format!("unknown record kind {}", h.kind))?;
    let k = RECORD_HEADER_LEN + usize::from(h.klen);
    Ok(RecordRef {
        db: h.db,
        kind,
        key: &rec[RECORD_HEADER_LEN..k],
        value: &rec[k..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_pinned() {
        assert_eq!(Kind::Plain as u8, 0);
        assert_eq!(Kind::Coded as u8, 1);
        for b in 0..=255u8 {
            if let Some(k) = Kind::from_u8(b) {
                assert_eq!(k as u8, b);
            }
        }
        assert_eq!(Kind::from_u8(2), None);
    }

    #[test]
    fn segment_header_is_pinned() {
        let h = segment_header(3, 7);
        let mut want = Vec::new();
        want.extend_from_slice(b"CAIRNVLG");
        want.extend_from_slice(&[1, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0]);
        want.extend_from_slice(&[0; 8]);
        assert_eq!(&h[..28], &want[..]);
        assert_eq!(&h[28..], &SEGMENT_HEADER_CRC_3_7);
        assert_eq!(parse_segment_header(&h), Ok((3, 7)));
        let mut bad = h;
        bad[16] ^= 1;
        assert_eq!(
            parse_segment_header(&bad),
            Err("segment header checksum mismatch".to_string())
        );
        assert!(parse_segment_header(&h[..31]).is_err());
        assert!(parse_segment_header(&[0u8; 32])
            .unwrap_err()
            .contains("magic"));
    }
    const SEGMENT_HEADER_CRC_3_7: [u8; 4] = [72, 171, 235, 167];

    #[test]
    fn record_bytes_are_pinned() {
        let mut out = vec![0xAA];
        encode_record(&mut out, 2, Kind::Coded, b"key", b"value!");
        let rec = &out[1..];
        assert_eq!(rec.len(), 25 + 7);
        assert_eq!(
            &rec[4..],
            &[
                6, 0, 0, 0, 3, 0, 2, 1, 0, 0, 0, 0, b'k', b'e', b'y', b'v', b'a', b'l', b'u', b'e',
                b'!', 0, 0, 0, 0, 0, 0, 0
            ]
        );
        assert_eq!(&rec[..4], &RECORD_CRC);
        let r = check_record(&rec[..25]).unwrap();
        assert_eq!(
            (r.db, r.kind, r.key, r.value),
            (2, Kind::Coded, &b"key"[..], &b"value!"[..])
        );
        // Every single-bit flip of the record is caught.
        for i in 0..25 {
            for bit in 0..8 {
                let mut bad = rec[..25].to_vec();
                bad[i] ^= 1 << bit;
                assert!(check_record(&bad).is_err(), "byte {i} bit {bit}");
            }
        }
        assert_eq!(padded(24), 24);
        assert_eq!(padded(25), 32);
        assert_eq!(record_len(3, 5), 24);
    }
    const RECORD_CRC: [u8; 4] = [95, 27, 23, 38];

    #[test]
    fn pointers_round_trip() {
        let p = Ptr {
            segment: 0x0102_0304,
            offset: 0x0506_0708,
            len: 0x090a_0b0c,
        };
        let b = p.to_bytes();
        assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5, 0xc, 0xb, 0xa, 9]);
        assert_eq!(Ptr::from_bytes(b), p);
    }
}
