//! Small text helpers shared by several commands.

/// Appends `s` quoted the way Redis's `sdscatrepr` does (MONITOR, CLIENT
/// LIST name, DEBUG output): printable bytes as is, `"` and `\` escaped,
/// common control characters as `\n` etc., anything else as `\xHH`.
pub fn repr(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            c if c.is_ascii_graphic() || c == b' ' => out.push(c),
            c => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    #[test]
    fn repr_matches_sdscatrepr() {
        let mut out = Vec::new();
        super::repr(b"a\"b\\c\n\x01 d", &mut out);
        assert_eq!(out, b"\"a\\\"b\\\\c\\n\\x01 d\"");
    }
}
