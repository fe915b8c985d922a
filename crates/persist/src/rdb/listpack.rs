//! Redis's listpack (`listpack.c`, 7.0), the blob inside RDB types 16
//! (HASH_LISTPACK), 17 (ZSET_LISTPACK) and the nodes of 18
//! (LIST_QUICKLIST_2) and the streams' types.
//!
//! ```text
//! listpack := total_bytes:u32le  count:u16le (65535 = unknown)  entry*  0xff
//! entry    := encoding [data]  backlen       backlen = size of encoding+data,
//!                                            1-5 bytes of 7 bits, read backwards
//! encoding := 0xxxxxxx            7-bit unsigned int
//!           | 10LLLLLL data       string, 6-bit length
//!           | 110xxxxx yyyyyyyy   13-bit signed int
//!           | 1110LLLL LLLLLLLL   string, 12-bit length (big end first)
//!           | 11110000 len:u32le  string, 32-bit length
//!           | 11110001..0100      int16 / int24 / int32 / int64, little endian
//! ```
//! The writer stores a string that is a canonical integer as an integer, as
//! `lpAppend` does, so the bytes equal Redis's.
use super::Malformed;

/// One listpack (or ziplist) element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// The element as the bytes a client sees.
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Int(v) => v.to_string().into_bytes(),
            Elem::Str(s) => s.to_vec(),
        }
    }
}

const HEADER: usize = 6;
const EOF: u8 = 0xff;

/// Builds a listpack element by element.
pub struct Writer {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Writer {
    fn default() -> Self {
        Writer::new()
    }
}

impl Writer {
    pub fn new() -> Self {
        Writer {
            buf: vec![0; HEADER],
            count: 0,
        }
    }

    /// Bytes the finished listpack will take.
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends `s`, as an integer when it is one's canonical text.
    pub fn push(&mut self, s: &[u8]) {
        match cairn_engine::util::num::parse_i64(s) {
            Some(v) => self.push_int(v),
            None => self.push_str(s),
        }
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64) & 0x1fff;
            b.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
        } else if let Ok(h) = i16::try_from(v) {
            b.push(0xf1);
            b.extend_from_slice(&h.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            b.push(0xf2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(w) = i32::try_from(v) {
            b.push(0xf3);
            b.extend_from_slice(&w.to_le_bytes());
        } else {
            b.push(0xf4);
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.finish_entry(start);
    }

    pub fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let b = &mut self.buf;
        let n = s.len();
        if n < 64 {
            b.push(0x80 | n as u8);
        } else if n < 4096 {
            b.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]);
        } else {
            b.push(0xf0);
            b.extend_from_slice(&(n as u32).to_le_bytes());
        }
        b.extend_from_slice(s);
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let l = self.buf.len() - start;
        put_backlen(&mut self.buf, l);
        self.count += 1;
    }

    /// The finished blob, header filled in.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// `lpEncodeBacklen`: big end first, every byte but the first with its
/// high bit set, so it reads backwards from the entry's last byte.
fn put_backlen(out: &mut Vec<u8>, l: usize) {
    let l = l as u64;
    if l <= 127 {
        out.push(l as u8);
    } else if l < 16383 {
        out.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
    } else if l < 2_097_151 {
        out.extend_from_slice(&[
            (l >> 14) as u8,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else if l < 268_435_455 {
        out.extend_from_slice(&[
            (l >> 21) as u8,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    } else {
        out.extend_from_slice(&[
            (l >> 28) as u8,
            ((l >> 21) & 127) as u8 | 128,
            ((l >> 14) & 127) as u8 | 128,
            ((l >> 7) & 127) as u8 | 128,
            (l & 127) as u8 | 128,
        ]);
    }
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Every element of `blob`, checked whole first as `lpValidateIntegrity`
/// with deep checking does (header size, each entry inside the blob, each
/// back length, the terminator, the count when the header knows it).
pub fn parse(blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if blob.len() < HEADER + 1 {
        return Err(Malformed);
    }
    let total = u32::from_le_bytes(blob[..4].try_into().map_err(|_| Malformed)?) as usize;
    if total != blob.len() || blob[total - 1] != EOF {
        return Err(Malformed);
    }
    let declared = u16::from_le_bytes([blob[4], blob[5]]);
    let end = total - 1;
    let mut p = HEADER;
    let mut out = Vec::new();
    while p < end {
        let (elem, size) = entry(&blob[p..end])?;
        let bl = backlen_size(size);
        let back = blob.get(p + size..p + size + bl).ok_or(Malformed)?;
        if read_backlen(back) != Some(size) {
            return Err(Malformed);
        }
        out.push(elem);
        p += size + bl;
    }
    if p != end || (declared != u16::MAX && usize::from(declared) != out.len()) {
        return Err(Malformed);
    }
    Ok(out)
}

fn read_backlen(b: &[u8]) -> Option<usize> {
    let mut v = 0usize;
    for (i, &x) in b.iter().enumerate() {
        // Only the first byte has its high bit clear.
        if (i == 0) == (x & 128 != 0) {
            return None;
        }
        v = (v << 7) | (x & 127) as usize;
    }
    Some(v)
}

/// One entry at the start of `b`: the element and the size of its
/// encoding and data (without the back length).
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
    Ok(if first & 0x80 == 0 {
        (Elem::Int(i64::from(first)), 1)
    } else if first & 0xc0 == 0x80 {
        let n = (first & 0x3f) as usize;
        (Elem::Str(get(1, n)?), 1 + n)
    } else if first & 0xe0 == 0xc0 {
        let v = (u64::from(first & 0x1f) << 8) | u64::from(*get(1, 1)?.first().ok_or(Malformed)?);
        (Elem::Int(sext(v, 13)), 2)
    } else if first & 0xf0 == 0xe0 {
        let n = ((first & 0x0f) as usize) << 8 | *get(1, 1)?.first().ok_or(Malformed)? as usize;
        (Elem::Str(get(2, n)?), 2 + n)
    } else {
        match first {
            0xf0 => {
                let n = le(get(1, 4)?) as usize;
                (Elem::Str(get(5, n)?), 5 + n)
            }
            0xf1 => (Elem::Int(sext(le(get(1, 2)?), 16)), 3),
            0xf2 => (Elem::Int(sext(le(get(1, 3)?), 24)), 4),
            0xf3 => (Elem::Int(sext(le(get(1, 4)?), 32)), 5),
            0xf4 => (Elem::Int(le(get(1, 8)?) as i64), 9),
            _ => return Err(Malformed),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_strings_round_trip_in_every_width() {
        let ints = [
            0i64,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            8_388_607,
            -8_388_608,
            8_388_608,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ];
        let strs: Vec<Vec<u8>> = [0usize, 1, 63, 64, 4095, 4096, 70_000]
            .iter()
            .map(|&n| vec![b'x'; n])
            .collect();
        let mut w = Writer::new();
        for v in ints {
            w.push(v.to_string().as_bytes());
        }
        for s in &strs {
            w.push(s);
        }
        w.push(b"007");
        let blob = w.finish();
        let got = parse(&blob).unwrap();
        let mut want: Vec<Elem> = ints.iter().map(|&v| Elem::Int(v)).collect();
        want.extend(strs.iter().map(|s| Elem::Str(s)));
        want.push(Elem::Str(b"007"));
        assert_eq!(got, want);
    }

    #[test]
    fn golden_bytes_match_redis() {
        // RPUSH l a 1 -> the node's listpack as Redis 7.0 writes it.
        let mut w = Writer::new();
        w.push(b"a");
        w.push(b"1");
        assert_eq!(
            w.finish(),
            [0x0c, 0, 0, 0, 2, 0, 0x81, b'a', 2, 0x01, 1, 0xff]
        );
    }

    #[test]
    fn every_truncation_and_flip_is_refused_or_read_without_panic() {
        let mut w = Writer::new();
        for s in [&b"hello"[..], b"12", b"-5000", &[b'z'; 100][..]] {
            w.push(s);
        }
        let blob = w.finish();
        for n in 0..blob.len() {
            assert!(parse(&blob[..n]).is_err());
        }
        for i in 0..blob.len() {
            for bit in 0..8 {
                let mut b = blob.clone();
                b[i] ^= 1 << bit;
                let _ = parse(&b);
            }
        }
    }
}
