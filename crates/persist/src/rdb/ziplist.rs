//! Redis's ziplist (`ziplist.c`, before 7.0), read only: Redis 7.0 still
//! loads RDB types 10 (LIST_ZIPLIST), 12 (ZSET_ZIPLIST), 13 (HASH_ZIPLIST)
//! and the nodes of 14 (LIST_QUICKLIST) written by older versions, and
//! converts them; nothing writes them any more.
//!
//! ```text
//! ziplist := zlbytes:u32le  zltail:u32le  zllen:u16le  entry*  0xff
//! entry   := prevlen (1 byte < 254 | 0xfe u32le)  encoding  [data]
//! encoding:= 00LLLLLL | 01LLLLLL LLLLLLLL (big endian) | 10000000 len:u32be
//!          | 0xc0 int16 | 0xd0 int32 | 0xe0 int64 | 0xf0 int24 | 0xfe int8
//!          | 1111xxxx  (xxxx 1..13: the value xxxx - 1)
//! ```
use super::listpack::Elem;
use super::Malformed;

const HEADER: usize = 10;
const END: u8 = 0xff;

/// Every element of `blob`, checked as `ziplistValidateIntegrity` with deep
/// checking does (header, each entry inside the blob, each prevlen equal to
/// the previous entry's size, the tail offset, the terminator, the count
/// unless it is the "unknown" 65535).
pub fn parse(blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if blob.len() < HEADER + 1 {
        return Err(Malformed);
    }
    let zlbytes = u32::from_le_bytes(blob[..4].try_into().map_err(|_| Malformed)?) as usize;
    let zltail = u32::from_le_bytes(blob[4..8].try_into().map_err(|_| Malformed)?) as usize;
    let zllen = u16::from_le_bytes([blob[8], blob[9]]);
    if zlbytes != blob.len() || blob[zlbytes - 1] != END {
        return Err(Malformed);
    }
    let end = zlbytes - 1;
    let mut p = HEADER;
    let mut prev_size = 0usize;
    let mut last_start = HEADER;
    let mut out = Vec::new();
    while p < end {
        let b = &blob[p..end];
        let (prevlen, h) = if b[0] < 254 {
            (b[0] as usize, 1)
        } else if b[0] == 254 {
            let v = b.get(1..5).ok_or(Malformed)?;
            (
                u32::from_le_bytes(v.try_into().map_err(|_| Malformed)?) as usize,
                5,
            )
        } else {
            return Err(Malformed);
        };
        if prevlen != prev_size {
            return Err(Malformed);
        }
        let (elem, size) = entry(&b[h..])?;
        out.push(elem);
        last_start = p;
        prev_size = h + size;
        p += prev_size;
    }
    if p != end || (!out.is_empty() && zltail != last_start) || (out.is_empty() && zltail != HEADER)
    {
        return Err(Malformed);
    }
    if zllen != u16::MAX && usize::from(zllen) != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

/// One entry's encoding and data at the start of `b`, and their size.
fn entry(b: &[u8]) -> Result<(Elem<'_>, usize), Malformed> {
    let first = *b.first().ok_or(Malformed)?;
    let get = |from: usize, n: usize| b.get(from..from + n).ok_or(Malformed);
    let le = |s: &[u8]| {
        let mut v = 0u64;
        for (i, &x) in s.iter().enumerate() {
            v |= u64::from(x) << (8 * i);
        }
        v
    };
    let sext = |v: u64, bits: u32| ((v << (64 - bits)) as i64) >> (64 - bits);
    Ok(match first >> 6 {
        0 => {
            let n = (first & 0x3f) as usize;
            (Elem::Str(get(1, n)?), 1 + n)
        }
        1 => {
            let n = ((first & 0x3f) as usize) << 8 | get(1, 1)?[0] as usize;
            (Elem::Str(get(2, n)?), 2 + n)
        }
        2 => {
            if first != 0x80 {
                return Err(Malformed);
            }
            let n = u32::from_be_bytes(get(1, 4)?.try_into().map_err(|_| Malformed)?) as usize;
            (Elem::Str(get(5, n)?), 5 + n)
        }
        _ => match first {
            0xc0 => (Elem::Int(sext(le(get(1, 2)?), 16)), 3),
            0xd0 => (Elem::Int(sext(le(get(1, 4)?), 32)), 5),
            0xe0 => (Elem::Int(le(get(1, 8)?) as i64), 9),
            0xf0 => (Elem::Int(sext(le(get(1, 3)?), 24)), 4),
            0xfe => (Elem::Int(get(1, 1)?[0] as i8 as i64), 2),
            0xf1..=0xfd => (Elem::Int(i64::from(first & 0x0f) - 1), 1),
            _ => return Err(Malformed),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ziplist of "a", 12, -2, 300 and a 70-byte string, built by hand
    /// the way ziplist.c lays it out.
    fn sample() -> Vec<u8> {
        let mut long = vec![0x40, 70];
        long.extend_from_slice(&[b'q'; 70]);
        let e: Vec<Vec<u8>> = vec![
            vec![0x01, b'a'],
            vec![0xfd],             // 12
            vec![0xfe, 0xfe],       // -2 as int8
            vec![0xc0, 0x2c, 0x01], // 300 as int16
            long,
        ];
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = 0;
        for x in &e {
            tail = HEADER + body.len();
            body.push(prev as u8);
            body.extend_from_slice(x);
            prev = x.len() + 1;
        }
        let mut z = Vec::new();
        let total = HEADER + body.len() + 1;
        z.extend_from_slice(&(total as u32).to_le_bytes());
        z.extend_from_slice(&(tail as u32).to_le_bytes());
        z.extend_from_slice(&(e.len() as u16).to_le_bytes());
        z.extend_from_slice(&body);
        z.push(END);
        z
    }

    #[test]
    fn reads_every_encoding() {
        let z = sample();
        assert_eq!(
            parse(&z).unwrap(),
            vec![
                Elem::Str(b"a"),
                Elem::Int(12),
                Elem::Int(-2),
                Elem::Int(300),
                Elem::Str(&[b'q'; 70])
            ]
        );
    }

    #[test]
    fn truncations_and_flips_never_panic() {
        let z = sample();
        for n in 0..z.len() {
            assert!(parse(&z[..n]).is_err());
        }
        for i in 0..z.len() {
            for bit in 0..8 {
                let mut b = z.clone();
                b[i] ^= 1 << bit;
                let _ = parse(&b);
            }
        }
    }
}
