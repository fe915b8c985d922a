//! Parsing of argument values shared by every family, with Redis's errors.
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::util::num;

/// An integer argument (`getLongLongFromObjectOrReply`).
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    num::parse_i64(arg).ok_or(CmdError::NotInteger)
}

/// Case-insensitive comparison with an ASCII keyword.
pub fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A blocking command's timeout in seconds, as milliseconds (0: wait
/// forever). Redis 7.0 `getTimeoutFromObjectOrReply`: parsed as a long
/// double, scaled to ms and cast to `long long` (on x86-64 an out-of-range
/// cast gives LLONG_MIN, so huge and infinite values are "negative"), then
/// checked against the clock.
pub fn timeout_ms(arg: &[u8]) -> Result<u64, CmdError> {
    let secs = num::parse_f64_strict(arg).ok_or(CmdError::text(errors::TIMEOUT_NOT_FLOAT))?;
    let scaled = secs * 1000.0;
    // 2^63 as an f64: the first value outside the i64 range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let ms = if scaled.is_nan() || !(-LIMIT..LIMIT).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    if ms < 0 {
        return Err(CmdError::text(errors::TIMEOUT_NEGATIVE));
    }
    let now = cairn_engine::clock::now_ms() as i64;
    if ms > 0 && ms > i64::MAX - now {
        return Err(CmdError::text(errors::TIMEOUT_OUT_OF_RANGE));
    }
    Ok(ms as u64)
}

/// A SCAN-family cursor, read the way Redis reads it (`parseScanCursorOrReply`
/// uses `strtoul`): leading `+`/`-` allowed (`-1` wraps to 2^64-1), no
/// leading whitespace, nothing after the digits, a NUL ends the argument.
pub fn cursor(arg: &[u8]) -> Result<u64, CmdError> {
    parse_cursor(arg).ok_or(CmdError::text(errors::INVALID_CURSOR))
}

pub fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let s = arg.split(|&b| b == 0).next().unwrap_or_default();
    let (negative, digits) = match s.split_first() {
        None => return Some(0),
        // C isspace: space, \t \n \v \f \r.
        Some((b' ' | b'\t'..=b'\r', _)) => return None,
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

/// The COUNT hint when none is given (Redis `scanGenericCommand`).
const SCAN_DEFAULT_COUNT: usize = 10;

/// HSCAN's, SSCAN's and ZSCAN's options as `scanGenericCommand` reads them: MATCH and COUNT in
/// any order, the last one winning, each needing its argument; COUNT must
/// be an integer (else the integer error) of at least 1 (else a syntax
/// error). TYPE is only for SCAN, so it is a syntax error here, like
/// anything else.
pub fn scan_options<'a>(
    mut rest: impl Iterator<Item = &'a [u8]>,
) -> Result<(Option<&'a [u8]>, usize), CmdError> {
    let mut pattern = None;
    let mut count = SCAN_DEFAULT_COUNT;
    while let Some(opt) = rest.next() {
        if is(opt, "count") {
            let n = int(rest.next().ok_or(CmdError::Syntax)?)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(opt, "match") {
            pattern = Some(rest.next().ok_or(CmdError::Syntax)?);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((pattern, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"00"), Some(0));
        assert_eq!(parse_cursor(b"+1"), Some(1));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-0"), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"-18446744073709551616"), None);
        assert_eq!(parse_cursor(b"5\0junk"), Some(5));
        assert_eq!(parse_cursor(b"\0junk"), Some(0));
        for bad in [
            &b" 0"[..],
            b"\t1",
            b"\x0b1",
            b"1 ",
            b"-",
            b"+",
            b"abc",
            b"-abc",
            b"1.5",
            b"0x10",
        ] {
            assert_eq!(parse_cursor(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn scan_options_like_redis() {
        let p = |v: &[&'static [u8]]| scan_options(v.iter().copied());
        assert_eq!(p(&[]), Ok((None, 10)));
        assert_eq!(
            p(&[b"MATCH", b"a*", b"count", b"5"]),
            Ok((Some(&b"a*"[..]), 5))
        );
        assert_eq!(
            p(&[b"count", b"5", b"COUNT", b"7", b"match", b"x", b"match", b"y"]),
            Ok((Some(&b"y"[..]), 7))
        );
        assert_eq!(p(&[b"count", b"0"]), Err(CmdError::Syntax));
        assert_eq!(p(&[b"count", b"-1"]), Err(CmdError::Syntax));
        assert_eq!(p(&[b"count", b"x"]), Err(CmdError::NotInteger));
        assert_eq!(p(&[b"count"]), Err(CmdError::Syntax));
        assert_eq!(p(&[b"match"]), Err(CmdError::Syntax));
        assert_eq!(p(&[b"type", b"string"]), Err(CmdError::Syntax));
        assert_eq!(p(&[b"novalues"]), Err(CmdError::Syntax));
    }
}
