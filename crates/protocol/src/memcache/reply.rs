//! Reply lines out. Replies are plain text lines ending in "\r\n" (and a
//! data block for values); most are fixed words the server writes itself.
//! These helpers format the lines with numbers in them, without
//! allocating.

/// Appends the decimal text of `n`.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends the decimal text of `n`.
pub fn push_i64(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n`, the header of one item in a
/// get/gets/gat/gats reply; the caller appends the data and "\r\n".
pub fn value_line(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    push_u64(out, flags as u64);
    out.push(b' ');
    push_u64(out, len as u64);
    if let Some(c) = cas {
        out.push(b' ');
        push_u64(out, c);
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_lines() {
        let mut out = Vec::new();
        value_line(&mut out, b"k", 0, 3, None);
        value_line(&mut out, b"k", u32::MAX, 0, Some(u64::MAX));
        assert_eq!(
            out,
            b"VALUE k 0 3\r\nVALUE k 4294967295 0 18446744073709551615\r\n"
        );
    }
}
