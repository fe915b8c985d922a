//! Redis's intset (`intset.c`), the blob of RDB type 11 (SET_INTSET).
//!
//! ```text
//! intset := encoding:u32le (2, 4 or 8: bytes per element)  length:u32le
//!           element* (little endian, strictly ascending)
//! ```
//! Redis widens an intset when a member needs it and never narrows it, so
//! the writer takes the width from the caller (the set's own, when it
//! knows one) and uses the narrowest that fits otherwise.
use super::Malformed;

/// The narrowest width (2, 4 or 8) that holds `v`.
pub fn width_of(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

/// An intset of `sorted` (ascending, distinct) at `width` bytes per
/// element, widened if a member needs more.
pub fn build(sorted: &[i64], width: usize) -> Vec<u8> {
    let width = sorted
        .iter()
        .map(|&v| width_of(v))
        .fold(width.clamp(2, 8), usize::max);
    let width = if width > 4 {
        8
    } else if width > 2 {
        4
    } else {
        2
    };
    let mut out = Vec::with_capacity(8 + sorted.len() * width);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for &v in sorted {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The members of `blob`, checked as `intsetValidateIntegrity` with deep
/// checking does: a known width, the length matching the size, members
/// strictly ascending (so no duplicates).
pub fn parse(blob: &[u8]) -> Result<Vec<i64>, Malformed> {
    if blob.len() < 8 {
        return Err(Malformed);
    }
    let width = u32::from_le_bytes(blob[..4].try_into().map_err(|_| Malformed)?) as usize;
    let len = u32::from_le_bytes(blob[4..8].try_into().map_err(|_| Malformed)?) as usize;
    if !matches!(width, 2 | 4 | 8) || len.checked_mul(width) != Some(blob.len() - 8) {
        return Err(Malformed);
    }
    let mut out: Vec<i64> = Vec::with_capacity(len);
    for c in blob[8..].chunks_exact(width) {
        let v = match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes(c.try_into().map_err(|_| Malformed)?),
        };
        if out.last().is_some_and(|&p| p >= v) {
            return Err(Malformed);
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_a_wider_width() {
        let v = [-5i64, 1, 2, 30_000];
        let b = build(&v, 2);
        assert_eq!(b.len(), 8 + 4 * 2);
        assert_eq!(parse(&b).unwrap(), v);
        let b = build(&v, 8);
        assert_eq!(b.len(), 8 + 4 * 8);
        assert_eq!(parse(&b).unwrap(), v);
        let big = [i64::MIN, 0, i64::MAX];
        assert_eq!(parse(&build(&big, 2)).unwrap(), big);
    }

    #[test]
    fn refuses_disorder_duplicates_and_bad_sizes() {
        assert!(parse(&build(&[1, 1], 2)).is_err());
        let mut b = build(&[1, 2], 2);
        b.swap(8, 10);
        assert!(parse(&b).is_err());
        assert!(parse(&build(&[1, 2], 2)[..11]).is_err());
        let mut b = build(&[1, 2], 2);
        b[0] = 3;
        assert!(parse(&b).is_err());
    }
}
