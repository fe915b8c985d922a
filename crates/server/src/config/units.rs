//! Numbers and memory units as Redis's util.c parses and prints them
//! (`string2ll`, `memtoull`: `1k`, `5gb`, ...).

use super::*;

/// Redis's string2ll: optional '-', no '+', no spaces, no leading zeros.
pub(super) fn string_to_i64(s: &str) -> Option<i64> {
    cairn_engine::util::num::parse_i64(s.as_bytes())
}

/// C's strtoll(s, &end, 10) followed by Redis's `*end == '\0'` check:
/// leading whitespace and a sign are allowed, an empty string is 0, and an
/// out-of-range value saturates.
pub(super) fn strtoll_whole(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && is_space(b[i]) {
        i += 1;
    }
    let mut negative = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        negative = b[i] == b'-';
        i += 1;
    }
    let digits_start = i;
    let mut v: i128 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        v = (v * 10 + i128::from(b[i] - b'0')).min(i128::from(u64::MAX));
        i += 1;
    }
    if i == digits_start {
        // No digits: strtoll leaves `end` at the start of the string.
        return if b.is_empty() { Some(0) } else { None };
    }
    if i != b.len() {
        return None;
    }
    let v = if negative { -v } else { v };
    Some(v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// Parses a memory value the way Redis's memtoull does: digits followed by
/// an optional case-insensitive unit, `b`, `k` (1000), `kb` (1024), `m`,
/// `mb`, `g`, `gb`. No sign, no spaces, no fractions. As in Redis an empty
/// number counts as 0 ("" and "mb" are 0). Where Redis overflows, this
/// saturates at u64::MAX.
pub fn parse_memory(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let unit = &s[digits..];
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // Redis copies the digits into a 128-byte buffer.
    if digits >= 128 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in &b[..digits] {
        v = v.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    Some(v.saturating_mul(mul))
}

/// Redis's rewriteConfigFormatMemory: the largest exact unit.
pub(super) fn format_memory(bytes: u64) -> String {
    const GB: u64 = 1024 * 1024 * 1024;
    const MB: u64 = 1024 * 1024;
    const KB: u64 = 1024;
    if bytes != 0 && bytes.is_multiple_of(GB) {
        format!("{}gb", bytes / GB)
    } else if bytes != 0 && bytes.is_multiple_of(MB) {
        format!("{}mb", bytes / MB)
    } else if bytes != 0 && bytes.is_multiple_of(KB) {
        format!("{}kb", bytes / KB)
    } else {
        bytes.to_string()
    }
}
