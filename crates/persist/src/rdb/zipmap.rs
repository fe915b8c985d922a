//! Redis's zipmap (`zipmap.c`, before 2.6), read only: RDB type 9
//! (HASH_ZIPMAP), which Redis 7.0 still loads and converts.
//!
//! ```text
//! zipmap := zmlen:u8 (254 = unknown)  (len key  len free:u8 value pad[free])*  0xff
//! len    := one byte < 254 | 254 u32le
//! ```
use super::Malformed;

const END: u8 = 0xff;

/// A zipmap's (field, value) pairs, in order.
pub type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

/// The (field, value) pairs of `blob`, checked as
/// `zipmapValidateIntegrity` does (every piece inside the blob, the
/// terminator last, the count when known).
pub fn parse(blob: &[u8]) -> Result<Pairs<'_>, Malformed> {
    let zmlen = *blob.first().ok_or(Malformed)?;
    let mut p = 1usize;
    let len = |p: &mut usize| -> Result<usize, Malformed> {
        let b = *blob.get(*p).ok_or(Malformed)?;
        match b {
            0..=253 => {
                *p += 1;
                Ok(b as usize)
            }
            254 => {
                let v = blob.get(*p + 1..*p + 5).ok_or(Malformed)?;
                *p += 5;
                Ok(u32::from_le_bytes(v.try_into().map_err(|_| Malformed)?) as usize)
            }
            _ => Err(Malformed),
        }
    };
    let take = |p: &mut usize, n: usize| -> Result<&[u8], Malformed> {
        let end = p.checked_add(n).ok_or(Malformed)?;
        let s = blob.get(*p..end).ok_or(Malformed)?;
        *p = end;
        Ok(s)
    };
    let mut out = Vec::new();
    loop {
        if *blob.get(p).ok_or(Malformed)? == END {
            p += 1;
            break;
        }
        let kl = len(&mut p)?;
        let k = take(&mut p, kl)?;
        let vl = len(&mut p)?;
        let free = *blob.get(p).ok_or(Malformed)? as usize;
        p += 1;
        let v = take(&mut p, vl)?;
        take(&mut p, free)?;
        out.push((k, v));
    }
    if p != blob.len() || (zmlen < 254 && usize::from(zmlen) != out.len()) {
        return Err(Malformed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pairs_with_free_bytes() {
        // {"foo" => "bar", "k" => "vv"} with 2 free bytes after "vv".
        let z = [
            2, 3, b'f', b'o', b'o', 3, 0, b'b', b'a', b'r', 1, b'k', 2, 2, b'v', b'v', 0, 0, END,
        ];
        assert_eq!(
            parse(&z).unwrap(),
            vec![(&b"foo"[..], &b"bar"[..]), (&b"k"[..], &b"vv"[..])]
        );
        for n in 0..z.len() {
            assert!(parse(&z[..n]).is_err());
        }
        let mut bad = z;
        bad[0] = 3;
        assert!(parse(&bad).is_err());
    }
}
