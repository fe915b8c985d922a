//! Server-side reply encoding for RESP2 and RESP3, byte-identical to
//! Redis 7.0's `addReply*` family in `networking.c`: the same type
//! prefixes, the same RESP2 downgrades of RESP3-only types, the same
//! `%.17g` doubles. Appends to a caller-owned buffer and never allocates
//! beyond growing it.

use super::float::g17;

/// The protocol a connection negotiated with `HELLO` (RESP2 until then).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Protocol {
    Resp2,
    Resp3,
}

/// Appends replies to `out` in the connection's protocol. Aggregate
/// headers (`array`, `map`, ...) only write the header; the caller then
/// writes exactly that many elements (twice as many for `map`).
pub struct ReplyWriter<'a> {
    pub out: &'a mut Vec<u8>,
    pub proto: Protocol,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        ReplyWriter { out, proto }
    }

    fn is_resp3(&self) -> bool {
        self.proto == Protocol::Resp3
    }

    fn crlf(&mut self) {
        self.out.extend_from_slice(b"\r\n");
    }

    /// `<prefix><n>\r\n`, the shape of every length and integer line.
    fn line_int(&mut self, prefix: u8, n: impl itoa::Integer) {
        let mut ib = itoa::Buffer::new();
        let digits = ib.format(n).as_bytes();
        self.out.reserve(digits.len() + 3);
        self.out.push(prefix);
        self.out.extend_from_slice(digits);
        self.crlf();
    }

    /// `<prefix><n>\r\n` for a length. Lengths under 100,000 (nearly all
    /// of them: a hash reply writes one per field and value) are put
    /// together in one word and appended with one 8-byte store, then the
    /// spare bytes are cut off; `line_int`'s formatting, reserve and three
    /// appends cost several times that, per header (issue 20).
    #[inline]
    fn line_len(&mut self, prefix: u8, n: usize) {
        if n >= 100_000 {
            return self.line_int(prefix, n);
        }
        let mut digits = 0u64;
        let mut k = 0u32;
        let mut m = n;
        loop {
            digits = digits << 8 | (b'0' + (m % 10) as u8) as u64;
            m /= 10;
            k += 1;
            if m == 0 {
                break;
            }
        }
        let w = u64::from(prefix)
            | digits << 8
            | u64::from(b'\r') << (8 * (k + 1))
            | u64::from(b'\n') << (8 * (k + 2));
        let len = self.out.len();
        self.out.extend_from_slice(&w.to_le_bytes());
        self.out.truncate(len + k as usize + 3);
    }

    /// `+s\r\n`. `s` must not contain CR or LF.
    pub fn simple(&mut self, s: &str) {
        self.out.reserve(s.len() + 3);
        self.out.push(b'+');
        self.out.extend_from_slice(s.as_bytes());
        self.crlf();
    }

    /// `-msg\r\n`, where `msg` starts with its error code (`ERR ...`,
    /// `WRONGTYPE ...`). CR and LF become spaces, as Redis ensures, so a
    /// message built from user input cannot break the reply stream.
    pub fn error(&mut self, msg: &str) {
        self.out.reserve(msg.len() + 3);
        self.out.push(b'-');
        self.out.extend(
            msg.bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.crlf();
    }

    /// `:n\r\n`.
    pub fn int(&mut self, n: i64) {
        self.line_int(b':', n);
    }

    /// `$len\r\nb\r\n`.
    pub fn bulk(&mut self, b: &[u8]) {
        self.line_len(b'$', b.len());
        self.out.reserve(b.len() + 2);
        self.out.extend_from_slice(b);
        self.crlf();
    }

    /// `$len\r\n` alone: the caller supplies the `len` bytes and the
    /// closing `\r\n` (a large value written from its own buffer).
    pub fn bulk_len(&mut self, len: usize) {
        self.line_len(b'$', len);
    }

    /// A bulk string holding `n` in decimal (`addReplyBulkLongLong`).
    pub fn bulk_int(&mut self, n: i64) {
        let mut ib = itoa::Buffer::new();
        let digits = ib.format(n).as_bytes();
        self.line_int(b'$', digits.len());
        self.out.extend_from_slice(digits);
        self.crlf();
    }

    /// Missing value: RESP2 null bulk `$-1`, RESP3 `_`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(if self.is_resp3() {
            b"_\r\n"
        } else {
            b"$-1\r\n"
        });
    }

    /// Missing aggregate: RESP2 null array `*-1`, RESP3 `_`.
    pub fn null_array(&mut self) {
        self.out.extend_from_slice(if self.is_resp3() {
            b"_\r\n"
        } else {
            b"*-1\r\n"
        });
    }

    /// `*n\r\n`.
    pub fn array(&mut self, n: usize) {
        self.line_len(b'*', n);
    }

    /// `n` key/value pairs follow: RESP3 `%n`, RESP2 a flat array of `2n`.
    pub fn map(&mut self, n: usize) {
        if self.is_resp3() {
            self.line_len(b'%', n);
        } else if n < usize::MAX / 2 {
            self.line_len(b'*', n * 2);
        } else {
            self.line_int(b'*', n as u128 * 2);
        }
    }

    /// RESP3 `~n`, RESP2 `*n`.
    pub fn set(&mut self, n: usize) {
        let prefix = if self.is_resp3() { b'~' } else { b'*' };
        self.line_int(prefix, n);
    }

    /// Out-of-band message: RESP3 `>n`, RESP2 `*n`.
    pub fn push(&mut self, n: usize) {
        let prefix = if self.is_resp3() { b'>' } else { b'*' };
        self.line_int(prefix, n);
    }

    /// `addReplyDouble`: RESP2 a bulk string of `%.17g`, RESP3 `,<%.17g>`.
    /// Infinities are `inf` / `-inf` in both.
    pub fn double(&mut self, v: f64) {
        let (buf, len) = g17(v);
        let text = &buf[..len];
        if self.is_resp3() {
            self.out.reserve(len + 3);
            self.out.push(b',');
            self.out.extend_from_slice(text);
            self.crlf();
        } else {
            self.bulk(text);
        }
    }

    /// RESP3 `#t` / `#f`, RESP2 `:1` / `:0`.
    pub fn boolean(&mut self, b: bool) {
        let bytes: &[u8] = match (self.is_resp3(), b) {
            (true, true) => b"#t\r\n",
            (true, false) => b"#f\r\n",
            (false, true) => b":1\r\n",
            (false, false) => b":0\r\n",
        };
        self.out.extend_from_slice(bytes);
    }

    /// RESP3 `=len\r\nfmt:text\r\n`, RESP2 a plain bulk of `text`. Like
    /// Redis, `format` is cut or space-padded to exactly three bytes.
    pub fn verbatim(&mut self, format: &str, text: &[u8]) {
        if !self.is_resp3() {
            self.bulk(text);
            return;
        }
        self.line_int(b'=', text.len() as u128 + 4);
        let mut ext = [b' '; 3];
        for (slot, &b) in ext.iter_mut().zip(format.as_bytes()) {
            *slot = b;
        }
        self.out.reserve(text.len() + 6);
        self.out.extend_from_slice(&ext);
        self.out.push(b':');
        self.out.extend_from_slice(text);
        self.crlf();
    }

    /// RESP3 `(digits`, RESP2 a bulk of the digits.
    pub fn big_number(&mut self, digits: &str) {
        if self.is_resp3() {
            self.out.reserve(digits.len() + 3);
            self.out.push(b'(');
            self.out.extend_from_slice(digits.as_bytes());
            self.crlf();
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// Appends bytes that are already valid RESP for this connection.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(f: impl Fn(&mut ReplyWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
        let mut r2 = Vec::new();
        f(&mut ReplyWriter::new(&mut r2, Protocol::Resp2));
        let mut r3 = Vec::new();
        f(&mut ReplyWriter::new(&mut r3, Protocol::Resp3));
        (r2, r3)
    }

    #[test]
    fn length_lines_match_the_general_formatter() {
        let mut ns: Vec<usize> = (0..=1100).collect();
        ns.extend([9_999, 10_000, 99_999, 100_000, 123_456_789, usize::MAX]);
        for n in ns {
            let mut fast = b"x".to_vec();
            ReplyWriter::new(&mut fast, Protocol::Resp2).line_len(b'$', n);
            assert_eq!(fast, format!("x${n}\r\n").into_bytes(), "{n}");
        }
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        w.map(usize::MAX);
        w.map(3);
        w.array(12);
        w.bulk_len(100);
        w.bulk(b"ab");
        assert_eq!(
            out,
            format!(
                "*{}\r\n*6\r\n*12\r\n$100\r\n$2\r\nab\r\n",
                usize::MAX as u128 * 2
            )
            .into_bytes()
        );
    }

    fn check(f: impl Fn(&mut ReplyWriter<'_>), resp2: &[u8], resp3: &[u8]) {
        let (r2, r3) = both(f);
        assert_eq!(
            String::from_utf8_lossy(&r2),
            String::from_utf8_lossy(resp2),
            "RESP2"
        );
        assert_eq!(
            String::from_utf8_lossy(&r3),
            String::from_utf8_lossy(resp3),
            "RESP3"
        );
        assert_eq!(r2, resp2);
        assert_eq!(r3, resp3);
    }

    #[test]
    fn simple_error_int() {
        check(|w| w.simple("OK"), b"+OK\r\n", b"+OK\r\n");
        check(|w| w.simple(""), b"+\r\n", b"+\r\n");
        check(
            |w| w.error("ERR unknown command"),
            b"-ERR unknown command\r\n",
            b"-ERR unknown command\r\n",
        );
        check(
            |w| w.error("ERR bad\r\nthing\n"),
            b"-ERR bad  thing \r\n",
            b"-ERR bad  thing \r\n",
        );
        check(|w| w.int(0), b":0\r\n", b":0\r\n");
        check(|w| w.int(-42), b":-42\r\n", b":-42\r\n");
        check(
            |w| w.int(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        check(
            |w| w.int(i64::MAX),
            b":9223372036854775807\r\n",
            b":9223372036854775807\r\n",
        );
    }

    #[test]
    fn bulks_and_nulls() {
        check(|w| w.bulk(b"foo"), b"$3\r\nfoo\r\n", b"$3\r\nfoo\r\n");
        check(|w| w.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n");
        check(
            |w| w.bulk(b"a\r\n\0b"),
            b"$5\r\na\r\n\0b\r\n",
            b"$5\r\na\r\n\0b\r\n",
        );
        check(
            |w| w.bulk_int(12345),
            b"$5\r\n12345\r\n",
            b"$5\r\n12345\r\n",
        );
        check(|w| w.bulk_int(-1), b"$2\r\n-1\r\n", b"$2\r\n-1\r\n");
        check(|w| w.null(), b"$-1\r\n", b"_\r\n");
        check(|w| w.null_array(), b"*-1\r\n", b"_\r\n");
    }

    #[test]
    fn aggregates() {
        check(|w| w.array(0), b"*0\r\n", b"*0\r\n");
        check(|w| w.array(3), b"*3\r\n", b"*3\r\n");
        check(|w| w.map(2), b"*4\r\n", b"%2\r\n");
        check(|w| w.map(0), b"*0\r\n", b"%0\r\n");
        check(|w| w.set(5), b"*5\r\n", b"~5\r\n");
        check(|w| w.push(3), b"*3\r\n", b">3\r\n");
        check(
            |w| {
                w.map(1);
                w.bulk(b"k");
                w.array(2);
                w.int(1);
                w.null();
            },
            b"*2\r\n$1\r\nk\r\n*2\r\n:1\r\n$-1\r\n",
            b"%1\r\n$1\r\nk\r\n*2\r\n:1\r\n_\r\n",
        );
    }

    #[test]
    fn doubles() {
        check(|w| w.double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n");
        check(|w| w.double(0.0), b"$1\r\n0\r\n", b",0\r\n");
        check(|w| w.double(-0.0), b"$2\r\n-0\r\n", b",-0\r\n");
        check(
            |w| w.double(0.1),
            b"$19\r\n0.10000000000000001\r\n",
            b",0.10000000000000001\r\n",
        );
        check(|w| w.double(1e20), b"$5\r\n1e+20\r\n", b",1e+20\r\n");
        check(
            |w| w.double(3.0e-5),
            b"$22\r\n3.0000000000000001e-05\r\n",
            b",3.0000000000000001e-05\r\n",
        );
        check(|w| w.double(f64::INFINITY), b"$3\r\ninf\r\n", b",inf\r\n");
        check(
            |w| w.double(f64::NEG_INFINITY),
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
        check(|w| w.double(f64::NAN), b"$3\r\nnan\r\n", b",nan\r\n");
    }

    #[test]
    fn resp3_only_types() {
        check(|w| w.boolean(true), b":1\r\n", b"#t\r\n");
        check(|w| w.boolean(false), b":0\r\n", b"#f\r\n");
        check(
            |w| w.verbatim("txt", b"hello"),
            b"$5\r\nhello\r\n",
            b"=9\r\ntxt:hello\r\n",
        );
        check(|w| w.verbatim("mkd", b""), b"$0\r\n\r\n", b"=4\r\nmkd:\r\n");
        check(
            |w| w.verbatim("x", b"a"),
            b"$1\r\na\r\n",
            b"=5\r\nx  :a\r\n",
        );
        check(
            |w| w.verbatim("long", b"a"),
            b"$1\r\na\r\n",
            b"=5\r\nlon:a\r\n",
        );
        check(
            |w| w.big_number("3492890328409238509324850943850943825024385"),
            b"$43\r\n3492890328409238509324850943850943825024385\r\n",
            b"(3492890328409238509324850943850943825024385\r\n",
        );
        check(|w| w.raw(b"+X\r\n"), b"+X\r\n", b"+X\r\n");
    }

    #[test]
    fn appends_without_clearing() {
        let mut out = b"prev".to_vec();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        w.int(1);
        w.simple("OK");
        assert_eq!(out, b"prev:1\r\n+OK\r\n");
    }
}
