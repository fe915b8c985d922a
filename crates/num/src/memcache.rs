//! Numbers as memcached 1.6 reads them from a command line, and from a
//! stored item's data for incr/decr (`util.c`: `safe_strtol`,
//! `safe_strtoul`, `safe_strtoull`, built on C's `strtol`/`strtoul`/
//! `strtoull` on a 64-bit system). The quirks are kept
//! on purpose, so a line memcached accepts is accepted here with the same
//! value: leading whitespace and a sign are allowed, a number may be
//! followed by one whitespace byte and then anything, `safe_strtol` and
//! `safe_strtoul` parse 64 bits and then truncate to 32, and a `-` is only
//! refused by the unsigned parsers when the result looks negative.

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `strto*`'s common part: skips whitespace, reads a sign and digits.
/// Returns (negative, magnitude or None on overflow of `limit`, index after
/// the digits), or None when there are no digits.
fn scan(b: &[u8], limit: u64) -> Option<(bool, Option<u64>, usize)> {
    let mut i = 0;
    while i < b.len() && is_space(b[i]) {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let start = i;
    let mut n = Some(0u64);
    while i < b.len() && b[i].is_ascii_digit() {
        n = n
            .and_then(|n| n.checked_mul(10))
            .and_then(|n| n.checked_add((b[i] - b'0') as u64))
            .filter(|&n| n <= limit);
        i += 1;
    }
    (i > start).then_some((neg, n, i))
}

/// What may follow the number: the end, a NUL, or a whitespace byte.
fn ends_ok(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        None | Some(0) => true,
        Some(&c) => is_space(c),
    }
}

/// `safe_strtoull`: an unsigned 64-bit number.
pub fn strtoull(b: &[u8]) -> Option<u64> {
    let (neg, n, end) = scan(b, u64::MAX)?;
    let n = n?;
    if !ends_ok(b, end) {
        return None;
    }
    let v = if neg { n.wrapping_neg() } else { n };
    if neg && (v as i64) < 0 {
        return None;
    }
    Some(v)
}

/// `safe_strtoul`: as `strtoull`, then truncated to 32 bits (`*out = l`
/// with a 64-bit `unsigned long`).
pub fn strtoul(b: &[u8]) -> Option<u32> {
    strtoull(b).map(|v| v as u32)
}

/// `safe_strtol`: a signed 64-bit `long` (ERANGE refused), then truncated
/// to 32 bits.
pub fn strtol(b: &[u8]) -> Option<i32> {
    let (neg, n, end) = scan(b, 1 << 63)?;
    let n = n?;
    if !ends_ok(b, end) {
        return None;
    }
    let v: i64 = if neg {
        (n as i128).wrapping_neg() as i64
    } else if n > i64::MAX as u64 {
        return None;
    } else {
        n as i64
    };
    Some(v as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned() {
        assert_eq!(strtoull(b"0"), Some(0));
        assert_eq!(strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(strtoull(b"18446744073709551616"), None);
        assert_eq!(strtoull(b"-1"), None);
        assert_eq!(strtoull(b"-0"), Some(0));
        assert_eq!(strtoull(b"+3"), Some(3));
        assert_eq!(strtoull(b" 3"), Some(3));
        assert_eq!(strtoull(b"3\tx"), Some(3));
        assert_eq!(strtoull(b"3x"), None);
        assert_eq!(strtoull(b""), None);
        assert_eq!(strtoull(b"-"), None);
        assert_eq!(strtoul(b"4294967296"), Some(0));
        assert_eq!(strtoul(b"4294967295"), Some(u32::MAX));
    }

    #[test]
    fn signed() {
        assert_eq!(strtol(b"-1"), Some(-1));
        assert_eq!(strtol(b"2147483647"), Some(i32::MAX));
        assert_eq!(strtol(b"2147483648"), Some(i32::MIN));
        assert_eq!(strtol(b"4294967296"), Some(0));
        assert_eq!(strtol(b"9223372036854775807"), Some(-1));
        assert_eq!(strtol(b"9223372036854775808"), None);
        assert_eq!(strtol(b"-9223372036854775808"), Some(0));
        assert_eq!(strtol(b"-9223372036854775809"), None);
        assert_eq!(strtol(b"x"), None);
        assert_eq!(strtol(b"12a"), None);
    }

    #[test]
    fn a_stored_value_as_incr_reads_it() {
        assert_eq!(strtoull(b"10"), Some(10));
        assert_eq!(strtoull(b" 10"), Some(10));
        assert_eq!(strtoull(b"10 "), Some(10));
        assert_eq!(strtoull(b"10 junk"), Some(10));
        assert_eq!(strtoull(b"+7"), Some(7));
        assert_eq!(strtoull(b"-0"), Some(0));
        assert_eq!(strtoull(b"-1"), None);
        assert_eq!(strtoull(b"10x"), None);
        assert_eq!(strtoull(b""), None);
        assert_eq!(strtoull(b" "), None);
        assert_eq!(strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(strtoull(b"18446744073709551616"), None);
        assert_eq!(strtoull(b"000000000000000000001"), Some(1));
        assert_eq!(strtoull(b"5\0x"), Some(5));
    }
}
