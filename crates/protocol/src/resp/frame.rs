//! Client-side RESP2/RESP3 frames: decoding whatever a server sends and
//! encoding commands and frames, for tests, the differential harness and
//! the benchmark client. Follows the RESP3 specification
//! (redis/redis-specifications, `protocol/RESP3.md`) without streamed
//! aggregates or strings (`$?`, `*?`), which Redis never sends.
//!
//! Input is untrusted: nesting is bounded by [`MAX_DEPTH`], lengths by
//! [`MAX_LEN`], and nothing is allocated for a frame until all of its
//! bytes have arrived.

use std::fmt;

use memchr::memchr2;

/// Deepest aggregate nesting accepted; deeper input is an error rather
/// than a stack overflow.
pub const MAX_DEPTH: usize = 512;

/// Largest blob length or aggregate count accepted (4 GiB).
pub const MAX_LEN: u64 = 1 << 32;

/// Longest length or integer line; anything longer without `\r\n` cannot
/// be a valid number, so it is rejected instead of waited on.
const MAX_NUMBER_LINE: usize = 32;

/// Elements reserved up front for an aggregate, whatever its claimed count.
const PREALLOC_CAP: usize = 1024;

/// One RESP2 or RESP3 value, as sent on the wire.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    /// RESP2 `$-1`.
    NullBulk,
    /// RESP2 `*-1`.
    NullArray,
    /// RESP3 `_`.
    Null,
    Array(Vec<Frame>),
    Map(Vec<(Frame, Frame)>),
    Set(Vec<Frame>),
    Push(Vec<Frame>),
    /// RESP3 `|`: metadata for the frame that follows it, which is decoded
    /// as a separate frame.
    Attribute(Vec<(Frame, Frame)>),
    /// RESP3 `,`: the text exactly as sent (`1.5`, `inf`, `1e+20`).
    Double(Vec<u8>),
    Boolean(bool),
    /// RESP3 `(`: the digits as sent.
    BigNumber(Vec<u8>),
    Verbatim {
        format: [u8; 3],
        text: Vec<u8>,
    },
    BlobError(Vec<u8>),
}

/// Input that is not valid RESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The first byte of a frame is not a known type.
    UnknownType(u8),
    /// A length or count is malformed, negative where not allowed, or
    /// above [`MAX_LEN`].
    InvalidLength,
    /// An integer frame is malformed or outside `i64`.
    InvalidInteger,
    /// A line has a bare CR or LF, or a blob is not followed by `\r\n`.
    InvalidLine,
    /// A boolean other than `#t` / `#f`, a non-empty null, or an empty
    /// double or big number.
    InvalidValue,
    /// A verbatim string shorter than 4 bytes or without `:` after its
    /// format.
    InvalidVerbatim,
    /// Aggregates nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnknownType(b) => write!(f, "unknown RESP type byte 0x{b:02x}"),
            FrameError::InvalidLength => f.write_str("invalid RESP length"),
            FrameError::InvalidInteger => f.write_str("invalid RESP integer"),
            FrameError::InvalidLine => f.write_str("invalid RESP line termination"),
            FrameError::InvalidValue => f.write_str("invalid RESP value"),
            FrameError::InvalidVerbatim => f.write_str("invalid RESP verbatim string"),
            FrameError::TooDeep => write!(f, "RESP nesting deeper than {MAX_DEPTH}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Decodes the first frame of `buf`. `Ok(None)` means more bytes are
/// needed; otherwise returns the frame and the bytes it occupied.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    // Validate the whole frame before building anything, so an incomplete
    // frame costs no allocation and a huge one is built exactly once.
    if frame_len(buf)?.is_none() {
        return Ok(None);
    }
    walk(buf, 0, 0, &mut Build)
}

/// Length of the first complete frame of `buf`, or `Ok(None)` if it is
/// not complete yet, without building it.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, FrameError> {
    Ok(walk(buf, 0, 0, &mut Skip)?.map(|((), end)| end))
}

/// What to do with parsed pieces: build [`Frame`]s, or only measure.
trait Sink {
    type Out;
    type Seq;
    type Pairs;
    fn line(&mut self, kind: u8, bytes: &[u8]) -> Self::Out;
    fn integer(&mut self, n: i64) -> Self::Out;
    fn boolean(&mut self, b: bool) -> Self::Out;
    fn blob(&mut self, kind: u8, bytes: &[u8]) -> Self::Out;
    fn unit(&mut self, f: Frame) -> Self::Out;
    fn seq(&mut self, n: u64) -> Self::Seq;
    fn seq_push(&mut self, seq: &mut Self::Seq, item: Self::Out);
    fn seq_done(&mut self, kind: u8, seq: Self::Seq) -> Self::Out;
    fn pairs(&mut self, n: u64) -> Self::Pairs;
    fn pairs_push(&mut self, pairs: &mut Self::Pairs, k: Self::Out, v: Self::Out);
    fn pairs_done(&mut self, kind: u8, pairs: Self::Pairs) -> Self::Out;
}

struct Skip;

impl Sink for Skip {
    type Out = ();
    type Seq = ();
    type Pairs = ();
    fn line(&mut self, _: u8, _: &[u8]) {}
    fn integer(&mut self, _: i64) {}
    fn boolean(&mut self, _: bool) {}
    fn blob(&mut self, _: u8, _: &[u8]) {}
    fn unit(&mut self, _: Frame) {}
    fn seq(&mut self, _: u64) {}
    fn seq_push(&mut self, _: &mut (), _: ()) {}
    fn seq_done(&mut self, _: u8, _: ()) {}
    fn pairs(&mut self, _: u64) {}
    fn pairs_push(&mut self, _: &mut (), _: (), _: ()) {}
    fn pairs_done(&mut self, _: u8, _: ()) {}
}

struct Build;

fn prealloc(n: u64) -> usize {
    usize::try_from(n).map_or(PREALLOC_CAP, |n| n.min(PREALLOC_CAP))
}

impl Sink for Build {
    type Out = Frame;
    type Seq = Vec<Frame>;
    type Pairs = Vec<(Frame, Frame)>;
    fn line(&mut self, kind: u8, bytes: &[u8]) -> Frame {
        let v = bytes.to_vec();
        match kind {
            b'+' => Frame::Simple(v),
            b'-' => Frame::Error(v),
            b',' => Frame::Double(v),
            _ => Frame::BigNumber(v),
        }
    }
    fn integer(&mut self, n: i64) -> Frame {
        Frame::Integer(n)
    }
    fn boolean(&mut self, b: bool) -> Frame {
        Frame::Boolean(b)
    }
    fn blob(&mut self, kind: u8, bytes: &[u8]) -> Frame {
        match kind {
            b'$' => Frame::Bulk(bytes.to_vec()),
            b'!' => Frame::BlobError(bytes.to_vec()),
            _ => {
                // `walk` checked the length and the ':' already.
                let mut format = [0u8; 3];
                format.copy_from_slice(&bytes[..3]);
                Frame::Verbatim {
                    format,
                    text: bytes[4..].to_vec(),
                }
            }
        }
    }
    fn unit(&mut self, f: Frame) -> Frame {
        f
    }
    fn seq(&mut self, n: u64) -> Vec<Frame> {
        Vec::with_capacity(prealloc(n))
    }
    fn seq_push(&mut self, seq: &mut Vec<Frame>, item: Frame) {
        seq.push(item);
    }
    fn seq_done(&mut self, kind: u8, seq: Vec<Frame>) -> Frame {
        match kind {
            b'*' => Frame::Array(seq),
            b'~' => Frame::Set(seq),
            _ => Frame::Push(seq),
        }
    }
    fn pairs(&mut self, n: u64) -> Vec<(Frame, Frame)> {
        Vec::with_capacity(prealloc(n))
    }
    fn pairs_push(&mut self, pairs: &mut Vec<(Frame, Frame)>, k: Frame, v: Frame) {
        pairs.push((k, v));
    }
    fn pairs_done(&mut self, kind: u8, pairs: Vec<(Frame, Frame)>) -> Frame {
        if kind == b'%' {
            Frame::Map(pairs)
        } else {
            Frame::Attribute(pairs)
        }
    }
}

/// The line starting at `start`: `Ok(Some(index of its \r))`, `Ok(None)`
/// if its `\r\n` has not arrived. RESP lines may hold neither CR nor LF.
fn find_line(buf: &[u8], start: usize, max: Option<usize>) -> Result<Option<usize>, FrameError> {
    let rest = &buf[start.min(buf.len())..];
    let window = match max {
        Some(m) => &rest[..rest.len().min(m + 2)],
        None => rest,
    };
    match memchr2(b'\r', b'\n', window) {
        Some(i) if window[i] == b'\r' => match rest.get(i + 1) {
            Some(b'\n') => Ok(Some(start + i)),
            Some(_) => Err(FrameError::InvalidLine),
            None => Ok(None),
        },
        Some(_) => Err(FrameError::InvalidLine),
        None if max.is_some_and(|m| rest.len() > m + 1) => Err(FrameError::InvalidLength),
        None => Ok(None),
    }
}

/// Signed decimal with optional sign, as RESP3 allows for integers.
fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        // Accumulate negatively so i64::MIN is representable.
        v = v.checked_mul(10)?.checked_sub(d)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// A length line's value: `Some(n)`, or `None` for `-1` where a null is
/// allowed.
fn parse_len(s: &[u8], null_ok: bool) -> Result<Option<u64>, FrameError> {
    if null_ok && s == b"-1" {
        return Ok(None);
    }
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return Err(FrameError::InvalidLength);
    }
    let mut v: u64 = 0;
    for &b in s {
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or(FrameError::InvalidLength)?;
    }
    if v > MAX_LEN {
        return Err(FrameError::InvalidLength);
    }
    Ok(Some(v))
}

type Step<T> = Result<Option<(T, usize)>, FrameError>;

/// Parses one frame starting at `pos`, returning what the sink made of it
/// and the position after it.
fn walk<S: Sink>(buf: &[u8], pos: usize, depth: usize, sink: &mut S) -> Step<S::Out> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let body = pos + 1;
    match kind {
        b'+' | b'-' | b',' | b'(' => {
            let Some(cr) = find_line(buf, body, None)? else {
                return Ok(None);
            };
            let text = &buf[body..cr];
            if text.is_empty() && (kind == b',' || kind == b'(') {
                return Err(FrameError::InvalidValue);
            }
            Ok(Some((sink.line(kind, text), cr + 2)))
        }
        b':' => {
            let Some(cr) = find_line(buf, body, Some(MAX_NUMBER_LINE))? else {
                return Ok(None);
            };
            let n = parse_i64(&buf[body..cr]).ok_or(FrameError::InvalidInteger)?;
            Ok(Some((sink.integer(n), cr + 2)))
        }
        b'#' => {
            let Some(cr) = find_line(buf, body, Some(MAX_NUMBER_LINE))? else {
                return Ok(None);
            };
            let b = match &buf[body..cr] {
                b"t" => true,
                b"f" => false,
                _ => return Err(FrameError::InvalidValue),
            };
            Ok(Some((sink.boolean(b), cr + 2)))
        }
        b'_' => {
            let Some(cr) = find_line(buf, body, Some(MAX_NUMBER_LINE))? else {
                return Ok(None);
            };
            if cr != body {
                return Err(FrameError::InvalidValue);
            }
            Ok(Some((sink.unit(Frame::Null), cr + 2)))
        }
        b'$' | b'!' | b'=' => {
            let Some(cr) = find_line(buf, body, Some(MAX_NUMBER_LINE))? else {
                return Ok(None);
            };
            let Some(len) = parse_len(&buf[body..cr], kind == b'$')? else {
                return Ok(Some((sink.unit(Frame::NullBulk), cr + 2)));
            };
            // MAX_LEN keeps this within usize on 64-bit targets; elsewhere
            // a blob that cannot be addressed is simply invalid.
            let len = usize::try_from(len).map_err(|_| FrameError::InvalidLength)?;
            if kind == b'=' && len < 4 {
                return Err(FrameError::InvalidVerbatim);
            }
            let start = cr + 2;
            let end = start.checked_add(len).ok_or(FrameError::InvalidLength)?;
            let tail_end = end.checked_add(2).ok_or(FrameError::InvalidLength)?;
            let Some(tail) = buf.get(end..tail_end) else {
                // Judge the verbatim format as soon as it is visible.
                if kind == b'=' && buf.len() > start + 3 && buf[start + 3] != b':' {
                    return Err(FrameError::InvalidVerbatim);
                }
                return Ok(None);
            };
            if tail != b"\r\n" {
                return Err(FrameError::InvalidLine);
            }
            if kind == b'=' && buf[start + 3] != b':' {
                return Err(FrameError::InvalidVerbatim);
            }
            Ok(Some((sink.blob(kind, &buf[start..end]), end + 2)))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            if depth >= MAX_DEPTH {
                return Err(FrameError::TooDeep);
            }
            let Some(cr) = find_line(buf, body, Some(MAX_NUMBER_LINE))? else {
                return Ok(None);
            };
            let Some(n) = parse_len(&buf[body..cr], kind == b'*')? else {
                return Ok(Some((sink.unit(Frame::NullArray), cr + 2)));
            };
            let mut at = cr + 2;
            if kind == b'%' || kind == b'|' {
                let mut pairs = sink.pairs(n);
                for _ in 0..n {
                    let Some((k, next)) = walk(buf, at, depth + 1, sink)? else {
                        return Ok(None);
                    };
                    let Some((v, next)) = walk(buf, next, depth + 1, sink)? else {
                        return Ok(None);
                    };
                    sink.pairs_push(&mut pairs, k, v);
                    at = next;
                }
                Ok(Some((sink.pairs_done(kind, pairs), at)))
            } else {
                let mut seq = sink.seq(n);
                for _ in 0..n {
                    let Some((item, next)) = walk(buf, at, depth + 1, sink)? else {
                        return Ok(None);
                    };
                    sink.seq_push(&mut seq, item);
                    at = next;
                }
                Ok(Some((sink.seq_done(kind, seq), at)))
            }
        }
        other => Err(FrameError::UnknownType(other)),
    }
}

fn put_line_int(out: &mut Vec<u8>, prefix: u8, n: impl itoa::Integer) {
    let mut ib = itoa::Buffer::new();
    out.push(prefix);
    out.extend_from_slice(ib.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn put_line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
    out.push(prefix);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

fn put_blob(out: &mut Vec<u8>, prefix: u8, bytes: &[u8]) {
    put_line_int(out, prefix, bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Appends the canonical encoding of `f`. Line-type payloads (simple
/// strings, errors, doubles, big numbers) must not contain CR or LF.
pub fn encode_frame(f: &Frame, out: &mut Vec<u8>) {
    match f {
        Frame::Simple(s) => put_line(out, b'+', s),
        Frame::Error(s) => put_line(out, b'-', s),
        Frame::Integer(n) => put_line_int(out, b':', *n),
        Frame::Bulk(b) => put_blob(out, b'$', b),
        Frame::NullBulk => out.extend_from_slice(b"$-1\r\n"),
        Frame::NullArray => out.extend_from_slice(b"*-1\r\n"),
        Frame::Null => out.extend_from_slice(b"_\r\n"),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            let prefix = match f {
                Frame::Array(_) => b'*',
                Frame::Set(_) => b'~',
                _ => b'>',
            };
            put_line_int(out, prefix, items.len());
            for item in items {
                encode_frame(item, out);
            }
        }
        Frame::Map(pairs) | Frame::Attribute(pairs) => {
            let prefix = if matches!(f, Frame::Map(_)) {
                b'%'
            } else {
                b'|'
            };
            put_line_int(out, prefix, pairs.len());
            for (k, v) in pairs {
                encode_frame(k, out);
                encode_frame(v, out);
            }
        }
        Frame::Double(text) => put_line(out, b',', text),
        Frame::Boolean(b) => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        Frame::BigNumber(digits) => put_line(out, b'(', digits),
        Frame::Verbatim { format, text } => {
            put_line_int(out, b'=', text.len() + 4);
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Frame::BlobError(b) => put_blob(out, b'!', b),
    }
}

/// Appends a command as clients send it: an array of bulk strings.
pub fn encode_command(args: &[&[u8]], out: &mut Vec<u8>) {
    let payload: usize = args.iter().map(|a| a.len() + 16).sum();
    out.reserve(payload + 16);
    put_line_int(out, b'*', args.len());
    for a in args {
        put_blob(out, b'$', a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bulk(s: &[u8]) -> Frame {
        Frame::Bulk(s.to_vec())
    }

    /// Every strict prefix needs more bytes; the whole decodes to `want`
    /// and occupies exactly `input.len()`.
    fn check_split(input: &[u8], want: &Frame) {
        for cut in 0..input.len() {
            assert_eq!(
                decode_frame(&input[..cut]),
                Ok(None),
                "cut {cut} of {input:?}"
            );
            assert_eq!(frame_len(&input[..cut]), Ok(None), "cut {cut} of {input:?}");
        }
        assert_eq!(
            decode_frame(input),
            Ok(Some((want.clone(), input.len()))),
            "{input:?}"
        );
        assert_eq!(frame_len(input), Ok(Some(input.len())));
        let mut with_tail = input.to_vec();
        with_tail.extend_from_slice(b"+next\r\n");
        assert_eq!(
            decode_frame(&with_tail),
            Ok(Some((want.clone(), input.len())))
        );
    }

    #[test]
    fn every_type_split_everywhere() {
        let cases: Vec<(&[u8], Frame)> = vec![
            (b"+OK\r\n", Frame::Simple(b"OK".to_vec())),
            (b"+\r\n", Frame::Simple(vec![])),
            (b"-ERR x y\r\n", Frame::Error(b"ERR x y".to_vec())),
            (b":0\r\n", Frame::Integer(0)),
            (b":-42\r\n", Frame::Integer(-42)),
            (b":+7\r\n", Frame::Integer(7)),
            (b":-9223372036854775808\r\n", Frame::Integer(i64::MIN)),
            (b":9223372036854775807\r\n", Frame::Integer(i64::MAX)),
            (b"$3\r\nfoo\r\n", bulk(b"foo")),
            (b"$0\r\n\r\n", bulk(b"")),
            (b"$4\r\na\r\nb\r\n", bulk(b"a\r\nb")),
            (b"$-1\r\n", Frame::NullBulk),
            (b"*-1\r\n", Frame::NullArray),
            (b"_\r\n", Frame::Null),
            (b"*0\r\n", Frame::Array(vec![])),
            (
                b"*2\r\n$1\r\na\r\n:1\r\n",
                Frame::Array(vec![bulk(b"a"), Frame::Integer(1)]),
            ),
            (
                b"%1\r\n+k\r\n*1\r\n_\r\n",
                Frame::Map(vec![(
                    Frame::Simple(b"k".to_vec()),
                    Frame::Array(vec![Frame::Null]),
                )]),
            ),
            (b"~1\r\n#t\r\n", Frame::Set(vec![Frame::Boolean(true)])),
            (
                b">2\r\n+message\r\n$2\r\nhi\r\n",
                Frame::Push(vec![Frame::Simple(b"message".to_vec()), bulk(b"hi")]),
            ),
            (
                b"|1\r\n+ttl\r\n:3600\r\n",
                Frame::Attribute(vec![(Frame::Simple(b"ttl".to_vec()), Frame::Integer(3600))]),
            ),
            (b",1.5\r\n", Frame::Double(b"1.5".to_vec())),
            (b",-inf\r\n", Frame::Double(b"-inf".to_vec())),
            (b"#f\r\n", Frame::Boolean(false)),
            (
                b"(-123456789012345678901234567890\r\n",
                Frame::BigNumber(b"-123456789012345678901234567890".to_vec()),
            ),
            (
                b"=9\r\ntxt:hello\r\n",
                Frame::Verbatim {
                    format: *b"txt",
                    text: b"hello".to_vec(),
                },
            ),
            (
                b"=4\r\nmkd:\r\n",
                Frame::Verbatim {
                    format: *b"mkd",
                    text: vec![],
                },
            ),
            (b"!5\r\nERR x\r\n", Frame::BlobError(b"ERR x".to_vec())),
        ];
        for (input, want) in &cases {
            check_split(input, want);
            let mut enc = Vec::new();
            encode_frame(want, &mut enc);
            // Canonical encoding is the input, except the redundant '+'.
            if input != b":+7\r\n" {
                assert_eq!(enc, *input);
            }
        }
    }

    #[test]
    fn errors() {
        let bad: Vec<(&[u8], FrameError)> = vec![
            (b"?x\r\n", FrameError::UnknownType(b'?')),
            (b"$?\r\n", FrameError::InvalidLength),
            (b"*?\r\n", FrameError::InvalidLength),
            (b"$-2\r\n", FrameError::InvalidLength),
            (b"!-1\r\n", FrameError::InvalidLength),
            (b"%-1\r\n", FrameError::InvalidLength),
            (b"$4294967297\r\n", FrameError::InvalidLength),
            (b"*99999999999999999999999\r\n", FrameError::InvalidLength),
            (
                b"*111111111111111111111111111111111111111",
                FrameError::InvalidLength,
            ),
            (b":\r\n", FrameError::InvalidInteger),
            (b":-\r\n", FrameError::InvalidInteger),
            (b":1x\r\n", FrameError::InvalidInteger),
            (b":9223372036854775808\r\n", FrameError::InvalidInteger),
            (b"+a\rb\r\n", FrameError::InvalidLine),
            (b"+a\nb\r\n", FrameError::InvalidLine),
            (b"$3\r\nfooXY", FrameError::InvalidLine),
            (b"#x\r\n", FrameError::InvalidValue),
            (b"_x\r\n", FrameError::InvalidValue),
            (b",\r\n", FrameError::InvalidValue),
            (b"=3\r\nabc\r\n", FrameError::InvalidVerbatim),
            (b"=5\r\ntxtxa\r\n", FrameError::InvalidVerbatim),
            (b"=100\r\ntxt-", FrameError::InvalidVerbatim),
            (b"*2\r\n:1\r\n?", FrameError::UnknownType(b'?')),
        ];
        for (input, want) in bad {
            assert_eq!(decode_frame(input), Err(want), "{input:?}");
            assert_eq!(frame_len(input), Err(want), "{input:?}");
        }
    }

    #[test]
    fn depth_is_bounded() {
        let mut ok = b"*1\r\n".repeat(MAX_DEPTH);
        ok.extend_from_slice(b":1\r\n");
        assert!(matches!(decode_frame(&ok), Ok(Some(_))));
        let mut deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(decode_frame(&deep), Err(FrameError::TooDeep));
        // Far deeper than the stack could take if unbounded.
        let huge = b"*1\r\n".repeat(1_000_000);
        assert_eq!(frame_len(&huge), Err(FrameError::TooDeep));
    }

    #[test]
    fn huge_claims_allocate_nothing_up_front() {
        assert_eq!(decode_frame(b"*4294967296\r\n:1\r\n"), Ok(None));
        assert_eq!(decode_frame(b"$4294967296\r\nabc"), Ok(None));
    }

    #[test]
    fn encode_command_bytes() {
        let mut out = Vec::new();
        encode_command(&[b"SET", b"k", b""], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        out.clear();
        encode_command(&[], &mut out);
        assert_eq!(out, b"*0\r\n");
    }

    fn line_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
            0..12,
        )
    }

    fn nonempty_line_bytes() -> impl Strategy<Value = Vec<u8>> {
        line_bytes().prop_filter("non-empty", |v| !v.is_empty())
    }

    fn arb_frame() -> impl Strategy<Value = Frame> {
        let leaf = prop_oneof![
            line_bytes().prop_map(Frame::Simple),
            line_bytes().prop_map(Frame::Error),
            any::<i64>().prop_map(Frame::Integer),
            prop::collection::vec(any::<u8>(), 0..24).prop_map(Frame::Bulk),
            Just(Frame::NullBulk),
            Just(Frame::NullArray),
            Just(Frame::Null),
            any::<f64>().prop_map(|v| {
                let mut t = Vec::new();
                crate::resp::float::format_g17(v, &mut t);
                Frame::Double(t)
            }),
            nonempty_line_bytes().prop_map(Frame::Double),
            any::<bool>().prop_map(Frame::Boolean),
            nonempty_line_bytes().prop_map(Frame::BigNumber),
            (any::<[u8; 3]>(), prop::collection::vec(any::<u8>(), 0..24))
                .prop_map(|(format, text)| Frame::Verbatim { format, text }),
            prop::collection::vec(any::<u8>(), 0..24).prop_map(Frame::BlobError),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            let items = prop::collection::vec(inner.clone(), 0..6);
            let pairs = prop::collection::vec((inner.clone(), inner), 0..4);
            prop_oneof![
                items.clone().prop_map(Frame::Array),
                items.clone().prop_map(Frame::Set),
                items.prop_map(Frame::Push),
                pairs.clone().prop_map(Frame::Map),
                pairs.prop_map(Frame::Attribute),
            ]
        })
    }

    proptest! {
        #[test]
        fn frames_roundtrip(f in arb_frame(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..8)) {
            let mut enc = Vec::new();
            encode_frame(&f, &mut enc);
            for cut in &cuts {
                let at = cut.index(enc.len());
                prop_assert_eq!(decode_frame(&enc[..at]), Ok(None));
            }
            prop_assert_eq!(frame_len(&enc), Ok(Some(enc.len())));
            prop_assert_eq!(decode_frame(&enc), Ok(Some((f, enc.len()))));
        }

        #[test]
        fn arbitrary_bytes_never_panic(input in prop::collection::vec(
            prop::sample::select(b"*$%~>|+-:,#(=!_\r\n0123-?tfx:".to_vec()), 0..48)
        ) {
            let a = decode_frame(&input);
            let b = frame_len(&input);
            match (&a, &b) {
                (Ok(Some((_, n))), Ok(Some(m))) => prop_assert_eq!(n, m),
                (Ok(None), Ok(None)) => {}
                (Err(x), Err(y)) => prop_assert_eq!(x, y),
                _ => prop_assert!(false, "{:?} vs {:?}", a, b),
            }
        }
    }
}
