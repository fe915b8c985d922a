//! Standard base64 (RFC 4648, `+/`, padded) for meta-command keys sent
//! with the `b` flag. Decoding is strict: the length is a multiple of 4 and
//! `=` may only end the text (memcached's decoder tolerates a stray `=`
//! inside; such a key is refused here).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// Decodes `src` into `out` and returns the length, or None if `src` is
/// not valid padded base64, decodes to nothing, or does not fit `out`.
pub fn decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    if src.is_empty() || !src.len().is_multiple_of(4) {
        return None;
    }
    let pad = src.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return None;
    }
    let body = &src[..src.len() - pad];
    let len = src.len() / 4 * 3 - pad;
    if len == 0 || len > out.len() {
        return None;
    }
    let mut o = 0;
    for chunk in body.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out[o] = (acc >> (16 - 8 * i)) as u8;
            o += 1;
        }
    }
    Some(o)
}

/// Appends the padded base64 text of `src` to `out`.
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    for chunk in src.chunks(3) {
        let mut acc = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            acc |= (b as u32) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(acc >> (18 - 6 * i)) as usize & 63]);
            } else {
                out.push(b'=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dec(s: &[u8]) -> Option<Vec<u8>> {
        let mut out = [0u8; 64];
        decode(s, &mut out).map(|n| out[..n].to_vec())
    }

    #[test]
    fn known_values() {
        assert_eq!(dec(b"Zm9v").as_deref(), Some(&b"foo"[..]));
        assert_eq!(dec(b"Zm9vYg==").as_deref(), Some(&b"foob"[..]));
        assert_eq!(dec(b"Zm9vYmE=").as_deref(), Some(&b"fooba"[..]));
        assert_eq!(dec(b"AAEC").as_deref(), Some(&[0u8, 1, 2][..]));
        for bad in [
            &b"Zm9vYg"[..],
            b"Zm9vYg=",
            b"Zg",
            b"!!!!",
            b"Zm=v",
            b"====",
            b"",
            b"Z===",
        ] {
            assert_eq!(dec(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let mut out = Vec::new();
        encode(b"fooba", &mut out);
        assert_eq!(out, b"Zm9vYmE=");
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(any::<u8>(), 1..40)) {
            let mut text = Vec::new();
            encode(&data, &mut text);
            prop_assert_eq!(dec(&text), Some(data));
        }
    }
}
