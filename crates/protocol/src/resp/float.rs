//! Double formatting for replies: `%.17g` exactly as glibc's `printf`
//! prints it, which is what Redis 7.0 uses for every double it sends
//! (`addReplyDouble`). Clients compare these strings, so "close enough"
//! is not enough: the digits, the fixed/exponential choice and the
//! exponent's shape must all match C.

use std::io::Write as _;

/// Longest `%.17g` output: `-1.2345678901234567e-308` is 24 bytes.
const G17_MAX: usize = 32;

/// Appends `v` formatted like C's `printf("%.17g", v)` with glibc: 17
/// significant digits, trailing zeros removed, exponential form when the
/// decimal exponent is below -4 or at least 17, and `inf`, `-inf`, `nan`,
/// `-nan` for the non-finite values.
pub fn format_g17(v: f64, out: &mut Vec<u8>) {
    let (buf, len) = g17(v);
    out.extend_from_slice(&buf[..len]);
}

/// `%.17g` into a stack buffer, so reply writers can learn the length
/// before emitting a bulk header without allocating.
pub(crate) fn g17(v: f64) -> ([u8; G17_MAX], usize) {
    let mut out = [0u8; G17_MAX];
    let mut n = 0;
    let mut put = |bytes: &[u8]| {
        out[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
    };
    if v.is_nan() {
        // glibc prints the sign bit of a NaN.
        put(if v.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return (out, n);
    }
    if v.is_infinite() {
        put(if v > 0.0 { b"inf" } else { b"-inf" });
        return (out, n);
    }
    // An integral value below 1e17 has at most 17 digits and a decimal
    // exponent below 17, so `%.17g` prints its exact digits in fixed
    // notation (glibc prints -0.0 as "-0"): the common case of sorted-set
    // scores, without the exact-digits formatter (about 2,700
    // instructions a call).
    if v.abs() < 1e17 && v == v.trunc() {
        if v.is_sign_negative() {
            put(b"-");
        }
        let mut ib = itoa::Buffer::new();
        put(ib.format(v.abs() as u64).as_bytes());
        return (out, n);
    }
    g17_general(v, out, n)
}

/// `%.17g` of a finite `v` by way of Rust's exactly rounded `{:e}`,
/// appended to `out[..n]`.
fn g17_general(v: f64, mut out: [u8; G17_MAX], mut n: usize) -> ([u8; G17_MAX], usize) {
    let mut put = |bytes: &[u8]| {
        out[n..n + bytes.len()].copy_from_slice(bytes);
        n += bytes.len();
    };

    // Rust's `{:e}` with a precision is exactly rounded (ties to even, as
    // glibc does in the default rounding mode), so it yields the same 17
    // significant digits and the same post-rounding exponent that %g
    // bases its choice on. Shape: `-d.dddddddddddddddde-X`.
    let mut sci = [0u8; G17_MAX];
    let sci_len = {
        let mut cursor: &mut [u8] = &mut sci;
        let room = cursor.len();
        // 24 bytes always fit in 32; on the impossible failure we still
        // emit whatever was written rather than panic.
        let _ = write!(cursor, "{:.16e}", v.abs());
        room - cursor.len()
    };
    let sci = &sci[..sci_len];
    let e_pos = sci.iter().position(|&b| b == b'e').unwrap_or(sci.len());
    let mut digits = [0u8; 17];
    let mut nd = 0;
    for &b in &sci[..e_pos] {
        if b.is_ascii_digit() && nd < digits.len() {
            digits[nd] = b;
            nd += 1;
        }
    }
    let exp = parse_exp(&sci[(e_pos + 1).min(sci.len())..]);

    if v.is_sign_negative() {
        put(b"-");
    }
    // %g drops trailing zeros of the significand; they are the same
    // digits in either notation.
    let mut sig = nd;
    while sig > 1 && digits[sig - 1] == b'0' {
        sig -= 1;
    }
    let digits = &digits[..sig];

    if !(-4..17).contains(&exp) {
        put(&digits[..1]);
        if digits.len() > 1 {
            put(b".");
            put(&digits[1..]);
        }
        put(if exp < 0 { b"e-" } else { b"e+" });
        let abs = exp.unsigned_abs();
        // C prints at least two exponent digits.
        if abs < 10 {
            put(b"0");
        }
        let mut ib = itoa::Buffer::new();
        put(ib.format(abs).as_bytes());
    } else if exp >= 0 {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            put(digits);
            for _ in digits.len()..int_len {
                put(b"0");
            }
        } else {
            put(&digits[..int_len]);
            put(b".");
            put(&digits[int_len..]);
        }
    } else {
        put(b"0.");
        for _ in 0..(-exp - 1) {
            put(b"0");
        }
        put(digits);
    }
    (out, n)
}

fn parse_exp(s: &[u8]) -> i32 {
    let (neg, body) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let mut e: i32 = 0;
    for &b in body {
        e = e * 10 + i32::from(b - b'0');
    }
    if neg {
        -e
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(v: f64) -> String {
        let mut out = Vec::new();
        format_g17(v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn specials() {
        assert_eq!(g(0.0), "0");
        assert_eq!(g(-0.0), "-0");
        assert_eq!(g(f64::INFINITY), "inf");
        assert_eq!(g(f64::NEG_INFINITY), "-inf");
        assert_eq!(g(f64::NAN), "nan");
        assert_eq!(g(-f64::NAN), "-nan");
        assert_eq!(g(1.0), "1");
        assert_eq!(g(0.1), "0.10000000000000001");
        assert_eq!(g(1.5), "1.5");
        assert_eq!(g(1e20), "1e+20");
        assert_eq!(g(1e20 + 16384.0), "1.0000000000000002e+20");
        assert_eq!(g(1e16), "10000000000000000");
        assert_eq!(g(1e17), "1e+17");
        assert_eq!(g(1e-4), "0.0001");
        assert_eq!(g(1e-5), "1.0000000000000001e-05");
        assert_eq!(g(5e-324), "4.9406564584124654e-324");
        assert_eq!(g(f64::MAX), "1.7976931348623157e+308");
        // Exact tie at the 18th digit: glibc rounds half to even.
        assert_eq!(g(1.0 + 1.0 / 131072.0), "1.0000076293945312");
    }

    #[test]
    fn golden_table_matches_glibc() {
        let table = include_str!("testdata/g17_golden.txt");
        let mut checked = 0;
        for line in table.lines().filter(|l| !l.starts_with('#')) {
            let (hex, want) = line.split_once(' ').unwrap();
            let v = f64::from_bits(u64::from_str_radix(hex, 16).unwrap());
            assert_eq!(g(v), want, "bits {hex}");
            assert_eq!(g(-v), format!("-{want}").replace("--", ""), "bits -{hex}");
            checked += 1;
        }
        assert!(checked > 500, "golden table too small: {checked}");
    }

    /// The integral fast path prints what the general path prints.
    #[test]
    fn integers_match_the_general_path() {
        let general = |v: f64| {
            let (buf, len) = g17_general(v, [0u8; G17_MAX], 0);
            String::from_utf8(buf[..len].to_vec()).unwrap()
        };
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut vals = vec![
            0.0,
            1.0,
            99999.0,
            9007199254740992.0,
            9007199254740993.0,
            1e16,
            99999999999999984.0,
        ];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push((x >> (x % 64)) as f64);
            vals.push(((x >> 11) % 1_000_000) as f64);
        }
        for v in vals {
            for v in [v, -v] {
                if v.abs() < 1e17 {
                    assert_eq!(g(v), general(v), "{v}");
                }
            }
        }
        assert_eq!(g(-0.0), general(-0.0));
    }

    #[test]
    fn output_parses_back_exactly() {
        // 17 significant digits always round-trip an f64.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if !v.is_finite() {
                continue;
            }
            let s = g(v);
            assert!(s.len() <= 24, "{s}");
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{s}");
        }
    }
}
