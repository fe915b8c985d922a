//! Server-side request parsing: RESP multibulk (`*N\r\n$len\r\n...`) and
//! inline commands, following Redis 7.0's `networking.c`
//! (`processMultibulkBuffer`, `processInlineBuffer`) and `sds.c`
//! (`sdssplitargs`) byte for byte, including which malformed input is an
//! error, which is waited on, and the exact error texts.
//!
//! Redis parses incrementally as reads arrive, so for over-long lines the
//! moment it gives up depends on how the kernel chunked the input. This
//! parser answers as Redis would if bytes arrived one at a time: the
//! outcome for a given byte stream never depends on where reads split it.
//!
//! Arguments are returned as spans into the caller's buffer; only inline
//! arguments that needed unquoting are copied, into a scratch buffer the
//! [`ArgList`] keeps across requests.

use std::fmt;
use std::sync::Arc;

use memchr::memchr2;

/// Parser limits, mirroring Redis configuration and compile-time limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `proto-max-bulk-len`: the largest bulk argument accepted.
    pub max_bulk_len: usize,
    /// The largest multibulk count accepted (Redis: `INT_MAX`).
    pub max_multibulk_len: usize,
    /// `PROTO_INLINE_MAX_SIZE`: the longest inline request, and the longest
    /// a `*`/`$` count line may grow without its `\r`.
    pub max_inline_len: usize,
    /// The client still owes a password: Redis then refuses more than 10
    /// arguments or a bulk over 16 KiB (`authRequired` in networking.c), so
    /// a stranger cannot make the server buffer large requests.
    pub unauthenticated: bool,
    /// A bulk at least this long that has not fully arrived is reported as
    /// [`Parsed::Block`], so the caller can read it into a buffer of its
    /// own (Redis's `PROTO_MBULK_BIG_ARG`). `usize::MAX`: never.
    pub big_arg: usize,
}

/// Most arguments an unauthenticated client may send in one request.
pub const UNAUTHENTICATED_MAX_ARGS: u64 = 10;
/// Longest bulk an unauthenticated client may send.
pub const UNAUTHENTICATED_MAX_BULK: usize = 16 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
            big_arg: usize::MAX,
        }
    }
}

/// A request that cannot be parsed. The connection must be closed after
/// replying `-ERR <message>\r\n`, as Redis does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    InvalidMultibulkLength,
    InvalidBulkLength,
    /// A multibulk element did not start with `$`; carries the byte found.
    ExpectedDollar(u8),
    TooBigInlineRequest,
    TooBigMbulkCountString,
    TooBigBulkCountString,
    UnbalancedQuotes,
    UnauthenticatedMultibulkLength,
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    /// Appends the message exactly as Redis sends it after `-ERR `. Unlike
    /// [`fmt::Display`], this keeps a non-ASCII byte in
    /// [`ProtocolError::ExpectedDollar`] as the raw byte Redis echoes.
    pub fn write_message(&self, out: &mut Vec<u8>) {
        match *self {
            ProtocolError::ExpectedDollar(b) => {
                out.extend_from_slice(b"Protocol error: expected '$', got '");
                out.push(dollar_echo(b));
                out.push(b'\'');
            }
            other => out.extend_from_slice(other.fixed_text().as_bytes()),
        }
    }

    fn fixed_text(self) -> &'static str {
        match self {
            ProtocolError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtocolError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtocolError::ExpectedDollar(_) => "Protocol error: expected '$'",
            ProtocolError::TooBigInlineRequest => "Protocol error: too big inline request",
            ProtocolError::TooBigMbulkCountString => "Protocol error: too big mbulk count string",
            ProtocolError::TooBigBulkCountString => "Protocol error: too big bulk count string",
            ProtocolError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtocolError::UnauthenticatedMultibulkLength => {
                "Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::UnauthenticatedBulkLength => {
                "Protocol error: unauthenticated bulk length"
            }
        }
    }
}

/// Redis formats the byte with `%c` and then, like every formatted error,
/// turns CR and LF into spaces so the reply stays one line.
fn dollar_echo(b: u8) -> u8 {
    if b == b'\r' || b == b'\n' {
        b' '
    } else {
        b
    }
}

impl fmt::Display for ProtocolError {
    /// Exact for every case except a non-ASCII byte after "got", shown as
    /// U+FFFD; use [`ProtocolError::write_message`] for the raw byte.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ProtocolError::ExpectedDollar(b) => {
                let c = match dollar_echo(b) {
                    c if c.is_ascii() => char::from(c),
                    _ => char::REPLACEMENT_CHARACTER,
                };
                write!(f, "Protocol error: expected '$', got '{c}'")
            }
            other => f.write_str(other.fixed_text()),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Outcome of [`parse_request`] on a buffer that did not hold an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request was parsed from the first `consumed` bytes. It may
    /// have no arguments (an empty inline line, `*0`, `*-1`); Redis skips
    /// those silently.
    Complete { consumed: usize },
    /// More input is needed. Nothing can change, neither completion nor an
    /// error, until the buffer holds at least `min_total` bytes, so the
    /// caller may reserve that much and skip re-parsing until then.
    Incomplete { min_total: usize },
    /// A bulk of `len` bytes (at least [`Limits::big_arg`]) starts at
    /// offset `at` and has not fully arrived. The caller moves the bytes
    /// from `at` on into a buffer of exactly `len + 2` bytes (the payload and
    /// the two bytes after it), reads the rest of the bulk straight into
    /// it, drops those bytes from the request buffer (so it ends at `at`),
    /// and then calls [`ArgList::add_block`] with the payload and parses
    /// again: the argument is then that buffer, never copied.
    Block { at: usize, len: usize },
}

/// Where one argument's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    /// The request buffer.
    Buf,
    /// The scratch buffer (inline unquoting changed the bytes).
    Scratch,
    /// A block of its own (`start` is the index in `ArgList::blocks`).
    Block,
}

/// Where one argument lives.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    src: Src,
}

/// Arguments of the last parsed request, meant to be reused across
/// requests so the steady state allocates nothing.
#[derive(Clone, Debug, Default)]
pub struct ArgList {
    spans: Vec<Span>,
    scratch: Vec<u8>,
    /// Large bulks of the request in progress that were read into buffers
    /// of their own, with the offset in the request buffer where each one's
    /// payload would have started. They belong to the request, not to one
    /// parse: kept across [`parse_request`] calls until
    /// [`ArgList::take_blocks`].
    blocks: Vec<(usize, Arc<Vec<u8>>)>,
    /// A multibulk request whose end has not arrived yet: the next
    /// [`parse_request`] call continues it instead of starting over, so a
    /// request sent in many small reads costs time linear in its bytes
    /// (re-parsing from the first byte on every read made a 200,000-argument
    /// RPUSH in 1.4 KB segments cost 2.4 s of CPU; issue 23, defect 2).
    partial: Option<Partial>,
    /// Argument headers examined, for the tests that check parsing stays
    /// linear however the input is split.
    #[cfg(test)]
    examined: usize,
}

/// Where an unfinished multibulk request resumes: its argument count and
/// the offset (from the request's first byte) of the first argument not
/// yet parsed. The arguments before it are already in `spans`.
#[derive(Clone, Copy, Debug)]
struct Partial {
    count: u64,
    pos: usize,
}

/// Above these, `clear` gives memory back: one huge request should not pin
/// its argument table for the life of the connection.
const KEEP_SPANS: usize = 4096;
const KEEP_SCRATCH: usize = 128 * 1024;

impl ArgList {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`. `buf` must be the buffer given to the [`parse_request`]
    /// call that filled this list. Panics if `i >= self.len()`.
    // Always inlined: the server's dispatcher is too large for the inliner
    // to take it, and a restricted ACL user's key read through it cost a
    // ~22-instruction call per key (callgrind, session 18).
    #[inline(always)]
    pub fn get<'a>(&'a self, buf: &'a [u8], i: usize) -> &'a [u8] {
        let s = self.spans[i];
        match s.src {
            Src::Buf => &buf[s.start..s.end],
            Src::Scratch => &self.scratch[s.start..s.end],
            Src::Block => &self.blocks[s.start].1,
        }
    }

    /// Argument `i`'s own buffer, if it was read into one (see
    /// [`Parsed::Block`]): a handler may keep a reference to it instead of
    /// copying the bytes.
    pub fn block(&self, i: usize) -> Option<&Arc<Vec<u8>>> {
        let s = self.spans.get(i)?;
        (s.src == Src::Block).then(|| &self.blocks[s.start].1)
    }

    /// Adds the payload of the bulk reported by [`Parsed::Block`] at `at`
    /// (`data` holds exactly its `len` bytes).
    pub fn add_block(&mut self, at: usize, data: Arc<Vec<u8>>) {
        self.blocks.push((at, data));
    }

    /// True while the request in progress has blocks.
    pub fn has_blocks(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// Removes the request's blocks once it is done with (its arguments
    /// are invalid afterwards); the caller decides where they are freed.
    pub fn take_blocks(&mut self) -> impl Iterator<Item = Arc<Vec<u8>>> + '_ {
        self.partial = None;
        self.spans.clear();
        self.blocks.drain(..).map(|(_, b)| b)
    }

    /// All arguments in order; `buf` as for [`ArgList::get`].
    pub fn iter<'a>(&'a self, buf: &'a [u8]) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        (0..self.len()).map(move |i| self.get(buf, i))
    }

    /// Heap bytes of the argument table and scratch buffer: a request of
    /// many small arguments needs about three times its size here, so
    /// the caller counts it with the request's bytes.
    pub fn heap_bytes(&self) -> usize {
        self.spans.capacity() * std::mem::size_of::<Span>() + self.scratch.capacity()
    }

    pub fn clear(&mut self) {
        self.partial = None;
        self.spans.clear();
        self.scratch.clear();
        if self.spans.capacity() > KEEP_SPANS {
            self.spans.shrink_to(KEEP_SPANS);
        }
        if self.scratch.capacity() > KEEP_SCRATCH {
            self.scratch.shrink_to(KEEP_SCRATCH);
        }
    }

    /// A list that owns copies of `args`, independent of any buffer: `get`
    /// and `iter` then ignore the `buf` they are given. For requests kept
    /// beyond their read buffer (commands queued by MULTI).
    pub fn from_args<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> ArgList {
        let mut list = ArgList::new();
        for a in args {
            let start = list.scratch.len();
            list.scratch.extend_from_slice(a);
            list.spans.push(Span {
                start,
                end: list.scratch.len(),
                src: Src::Scratch,
            });
        }
        list
    }

    fn push_buf(&mut self, start: usize, end: usize) {
        self.spans.push(Span {
            start,
            end,
            src: Src::Buf,
        });
    }

    fn push_block(&mut self, index: usize) {
        let len = self.blocks[index].1.len();
        self.spans.push(Span {
            start: index,
            end: len,
            src: Src::Block,
        });
    }
}

/// Parses one request from the start of `buf` into `args` (cleared first).
///
/// A first byte of `*` selects the multibulk protocol, anything else the
/// inline one, as in Redis. On `Err` the connection is unusable: Redis
/// replies with the error and closes it.
///
/// After [`Parsed::Incomplete`] or [`Parsed::Block`] the next call must be
/// given the same request with more bytes after it (or cut at the block's
/// `at`): parsing resumes where it stopped. [`ArgList::clear`] forgets an
/// unfinished request.
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
    args: &mut ArgList,
) -> Result<Parsed, ProtocolError> {
    if let Some(p) = args.partial.take() {
        // Anything but a multibulk start is not the unfinished request:
        // forget it and parse afresh.
        if buf.first() == Some(&b'*') {
            return parse_bulks(buf, limits, args, p);
        }
    }
    args.clear();
    match buf.first() {
        None => Ok(Parsed::Incomplete { min_total: 1 }),
        Some(b'*') => parse_multibulk(buf, limits, args),
        Some(_) => parse_inline(buf, limits, args),
    }
}

/// Result of looking for the `\r\n` ending a `*`/`$` count line.
enum Line {
    /// Index of the `\r`; a byte (not checked to be `\n`) follows it.
    Cr(usize),
    Incomplete,
    TooBig,
}

/// Finds the `\r` ending the count line starting at `start`. Redis uses
/// `strchr`, which stops at a NUL byte: a NUL before the `\r` hides it, and
/// the line then waits until it is over-long. Redis does not check that
/// `\n` follows the `\r`; it just skips one byte.
fn count_line(buf: &[u8], start: usize, max: usize) -> Line {
    let window_end = buf.len().min(start.saturating_add(max).saturating_add(1));
    match memchr2(b'\r', 0, &buf[start..window_end]) {
        Some(i) if buf[start + i] == b'\r' => {
            let cr = start + i;
            if cr + 1 < buf.len() {
                Line::Cr(cr)
            } else {
                Line::Incomplete
            }
        }
        _ if buf.len() - start > max => Line::TooBig,
        _ => Line::Incomplete,
    }
}

fn parse_multibulk(
    buf: &[u8],
    limits: &Limits,
    args: &mut ArgList,
) -> Result<Parsed, ProtocolError> {
    let more = Parsed::Incomplete {
        min_total: buf.len() + 1,
    };
    let cr = match count_line(buf, 0, limits.max_inline_len) {
        Line::Cr(cr) => cr,
        Line::Incomplete => return Ok(more),
        Line::TooBig => return Err(ProtocolError::TooBigMbulkCountString),
    };
    let count = match string2ll(&buf[1..cr]) {
        Some(n) if n <= 0 => {
            return Ok(Parsed::Complete { consumed: cr + 2 });
        }
        Some(n) if (n as u64) <= limits.max_multibulk_len as u64 => n as u64,
        _ => return Err(ProtocolError::InvalidMultibulkLength),
    };
    if limits.unauthenticated && count > UNAUTHENTICATED_MAX_ARGS {
        return Err(ProtocolError::UnauthenticatedMultibulkLength);
    }

    parse_bulks(buf, limits, args, Partial { count, pos: cr + 2 })
}

/// Parses the bulks of a multibulk request from `at.pos` until `at.count`
/// arguments are in `args`. Where input runs out it records where it
/// stopped, so the next call goes on from there.
fn parse_bulks(
    buf: &[u8],
    limits: &Limits,
    args: &mut ArgList,
    at: Partial,
) -> Result<Parsed, ProtocolError> {
    let Partial { count, mut pos } = at;
    let more = Parsed::Incomplete {
        min_total: buf.len() + 1,
    };
    while (args.spans.len() as u64) < count {
        if pos >= buf.len() {
            args.partial = Some(Partial { count, pos });
            return Ok(more);
        }
        #[cfg(test)]
        {
            args.examined += 1;
        }
        let cr = match count_line(buf, pos, limits.max_inline_len) {
            Line::Cr(cr) => cr,
            Line::Incomplete => {
                args.partial = Some(Partial { count, pos });
                return Ok(more);
            }
            Line::TooBig => return Err(ProtocolError::TooBigBulkCountString),
        };
        if buf[pos] != b'$' {
            return Err(ProtocolError::ExpectedDollar(buf[pos]));
        }
        let len = match string2ll(&buf[pos + 1..cr]) {
            Some(n) if n >= 0 && (n as u64) <= limits.max_bulk_len as u64 => n as usize,
            _ => return Err(ProtocolError::InvalidBulkLength),
        };
        if limits.unauthenticated && len > UNAUTHENTICATED_MAX_BULK {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        let body = cr + 2;
        // A bulk already read into a block of its own: the request buffer
        // goes on, at `body`, with what followed it.
        if let Some(i) = args.blocks.iter().position(|&(at, _)| at == body) {
            args.push_block(i);
            pos = body;
            continue;
        }
        // Redis skips the two bytes after the payload without looking at
        // them, so neither do we.
        let next = body.saturating_add(len).saturating_add(2);
        if next > buf.len() {
            args.partial = Some(Partial { count, pos });
            if len >= limits.big_arg {
                return Ok(Parsed::Block { at: body, len });
            }
            return Ok(Parsed::Incomplete { min_total: next });
        }
        args.push_buf(body, body + len);
        pos = next;
    }
    Ok(Parsed::Complete { consumed: pos })
}

fn parse_inline(buf: &[u8], limits: &Limits, args: &mut ArgList) -> Result<Parsed, ProtocolError> {
    // As for count lines: strchr stops at NUL, and the line may not grow
    // past the limit without its newline.
    let window_end = buf.len().min(limits.max_inline_len.saturating_add(1));
    let nl = match memchr2(b'\n', 0, &buf[..window_end]) {
        Some(i) if buf[i] == b'\n' => i,
        _ if buf.len() > limits.max_inline_len => {
            return Err(ProtocolError::TooBigInlineRequest);
        }
        _ => {
            return Ok(Parsed::Incomplete {
                min_total: buf.len() + 1,
            })
        }
    };
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    if !split_args(&buf[..line_end], args) {
        args.clear();
        return Err(ProtocolError::UnbalancedQuotes);
    }
    Ok(Parsed::Complete { consumed: nl + 1 })
}

/// Splits a line into arguments like Redis's `sdssplitargs` (used for
/// inline commands and configuration lines). `None` on unbalanced quotes,
/// including a closing quote not followed by whitespace. A NUL byte ends
/// the line, as it ends the C string.
pub fn split_inline_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = ArgList::new();
    if !split_args(line, &mut args) {
        return None;
    }
    Some(args.iter(line).map(<[u8]>::to_vec).collect())
}

/// C `isspace` in the "C" locale. Bytes >= 0x80 are not spaces there.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `sdssplitargs` into `args`, spans relative to `line`. Returns false on
/// unbalanced quotes. Tokens that are plain bytes of the line stay spans
/// into it; a token that touched a quote is rebuilt in the scratch buffer.
fn split_args(line: &[u8], args: &mut ArgList) -> bool {
    // Reading past the end yields NUL, which is what C sees there.
    let at = |p: usize| -> u8 { line.get(p).copied().unwrap_or(0) };
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return true;
        }
        let start = p;
        let mut end = p;
        let mut scratch_start = None::<usize>;
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            let c = at(p);
            if in_dq {
                if c == b'\\' && at(p + 1) == b'x' {
                    if let (Some(hi), Some(lo)) = (hex_val(at(p + 2)), hex_val(at(p + 3))) {
                        args.scratch.push(hi * 16 + lo);
                        p += 4;
                        continue;
                    }
                }
                if c == b'\\' && at(p + 1) != 0 {
                    let e = match at(p + 1) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    };
                    args.scratch.push(e);
                    p += 2;
                } else if c == b'"' {
                    // The closing quote must be followed by whitespace or
                    // the end of the line.
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return false;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return false;
                } else {
                    args.scratch.push(c);
                    p += 1;
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    args.scratch.push(b'\'');
                    p += 2;
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return false;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return false;
                } else {
                    args.scratch.push(c);
                    p += 1;
                }
            } else {
                match c {
                    // Only these end an unquoted token; \v and \f do not,
                    // although they are skipped between tokens.
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        end = p;
                        if c != 0 {
                            p += 1;
                        }
                        break;
                    }
                    b'"' | b'\'' => {
                        if scratch_start.is_none() {
                            scratch_start = Some(args.scratch.len());
                            args.scratch.extend_from_slice(&line[start..p]);
                        }
                        in_dq = c == b'"';
                        in_sq = c == b'\'';
                        p += 1;
                    }
                    _ => {
                        if scratch_start.is_some() {
                            args.scratch.push(c);
                        }
                        p += 1;
                    }
                }
            }
        }
        match scratch_start {
            Some(s) => args.spans.push(Span {
                start: s,
                end: args.scratch.len(),
                src: Src::Scratch,
            }),
            None => args.push_buf(start, end),
        }
    }
}

/// Redis's `string2ll`: optional `-`, no `+`, no leading zeros (so no
/// `-0`), at most 20 bytes, within `i64`.
fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some(0i64.wrapping_sub(v as i64))
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::frame::encode_command;
    use proptest::prelude::*;

    fn parse(buf: &[u8]) -> Result<(Parsed, Vec<Vec<u8>>), ProtocolError> {
        parse_with(buf, &Limits::default())
    }

    fn parse_with(buf: &[u8], limits: &Limits) -> Result<(Parsed, Vec<Vec<u8>>), ProtocolError> {
        let mut args = ArgList::new();
        let p = parse_request(buf, limits, &mut args)?;
        Ok((p, args.iter(buf).map(<[u8]>::to_vec).collect()))
    }

    fn vecs(a: &[&[u8]]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.to_vec()).collect()
    }

    /// Every strict prefix must be Incomplete with a sound `min_total`, and
    /// the whole input must complete with `want`.
    fn check_split(input: &[u8], want: &[&[u8]]) {
        let limits = Limits::default();
        let mut args = ArgList::new();
        for cut in 0..input.len() {
            let r = parse_request(&input[..cut], &limits, &mut args);
            match r {
                Ok(Parsed::Incomplete { min_total }) => {
                    assert!(min_total > cut, "cut {cut}: min_total {min_total}");
                    assert!(min_total <= input.len(), "cut {cut}: min_total {min_total}");
                }
                other => panic!("cut {cut} of {input:?}: {other:?}"),
            }
        }
        let r = parse_request(input, &limits, &mut args);
        assert_eq!(
            r,
            Ok(Parsed::Complete {
                consumed: input.len()
            }),
            "{input:?}"
        );
        let got: Vec<&[u8]> = args.iter(input).collect();
        assert_eq!(got, want, "{input:?}");
    }

    #[test]
    fn multibulk_basic_and_split_everywhere() {
        check_split(b"*1\r\n$4\r\nPING\r\n", &[b"PING"]);
        check_split(
            b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
            &[b"SET", b"key", b"value"],
        );
        check_split(b"*2\r\n$0\r\n\r\n$2\r\n\r\n\r\n", &[b"", b"\r\n"]);
        check_split(b"*1\r\n$3\r\na\0b\r\n", &[b"a\0b"]);
        check_split(b"*0\r\n", &[]);
        check_split(b"*-1\r\n", &[]);
        check_split(b"*-9223372036854775808\r\n", &[]);
    }

    #[test]
    fn multibulk_redis_leniencies() {
        // Redis never checks the byte after \r nor the two after a payload.
        check_split(b"*1\rX$4\r\nPINGxx", &[b"PING"]);
        check_split(b"*1\r\n$4\rYPING\r\n", &[b"PING"]);
    }

    #[test]
    fn pipelined_requests_consume_one_at_a_time() {
        let buf = b"*1\r\n$4\r\nPING\r\nPING\r\n*0\r\n\n";
        let mut args = ArgList::new();
        let mut pos = 0;
        let mut seen = Vec::new();
        while pos < buf.len() {
            match parse_request(&buf[pos..], &Limits::default(), &mut args).unwrap() {
                Parsed::Complete { consumed } => {
                    seen.push(
                        args.iter(&buf[pos..])
                            .map(<[u8]>::to_vec)
                            .collect::<Vec<_>>(),
                    );
                    pos += consumed;
                }
                Parsed::Incomplete { .. } | Parsed::Block { .. } => panic!("incomplete at {pos}"),
            }
        }
        assert_eq!(
            seen,
            vec![vecs(&[b"PING"]), vecs(&[b"PING"]), vec![], vec![]]
        );
    }

    #[test]
    fn min_total_covers_the_whole_bulk() {
        let mut buf = b"*2\r\n$3\r\nSET\r\n$100000000\r\n".to_vec();
        let header = buf.len();
        buf.extend_from_slice(b"abc");
        assert_eq!(
            parse(&buf).unwrap().0,
            Parsed::Incomplete {
                min_total: header + 100_000_000 + 2
            }
        );
    }

    #[test]
    fn empty_buffer_is_incomplete() {
        assert_eq!(parse(b"").unwrap().0, Parsed::Incomplete { min_total: 1 });
    }

    fn err(buf: &[u8]) -> String {
        let e = parse(buf).unwrap_err();
        let mut bytes = Vec::new();
        e.write_message(&mut bytes);
        assert_eq!(String::from_utf8_lossy(&bytes), e.to_string());
        e.to_string()
    }

    #[test]
    fn multibulk_count_errors() {
        for bad in [
            &b"*\r\n"[..],
            b"*-0\r\n",
            b"*+1\r\n",
            b"*01\r\n",
            b"*1x\r\n",
            b"* 1\r\n",
            b"*2147483648\r\n",
            b"*9223372036854775808\r\n",
            b"*-9223372036854775809\r\n",
            b"*000000000000000000001\r\n",
        ] {
            assert_eq!(
                err(bad),
                "Protocol error: invalid multibulk length",
                "{bad:?}"
            );
        }
        assert_eq!(
            parse(b"*2147483647\r\n").unwrap().0,
            Parsed::Incomplete { min_total: 14 }
        );
        let tight = Limits {
            max_multibulk_len: 3,
            ..Limits::default()
        };
        assert!(parse_with(b"*3\r\n", &tight).is_ok());
        assert_eq!(
            parse_with(b"*4\r\n", &tight),
            Err(ProtocolError::InvalidMultibulkLength)
        );
    }

    #[test]
    fn bulk_length_errors() {
        for bad in [
            &b"*1\r\n$\r\n"[..],
            b"*1\r\n$-1\r\n",
            b"*1\r\n$-0\r\n",
            b"*1\r\n$01\r\n",
            b"*1\r\n$+1\r\n",
            b"*1\r\n$1 \r\n",
            b"*1\r\n$536870913\r\n",
            b"*1\r\n$9223372036854775808\r\n",
            b"*1\r\n$18446744073709551616\r\n",
        ] {
            assert_eq!(err(bad), "Protocol error: invalid bulk length", "{bad:?}");
        }
        // Exactly proto-max-bulk-len is fine.
        assert!(matches!(
            parse(b"*1\r\n$536870912\r\n"),
            Ok((Parsed::Incomplete { .. }, _))
        ));
        let tight = Limits {
            max_bulk_len: 3,
            ..Limits::default()
        };
        assert!(parse_with(b"*1\r\n$3\r\nabc\r\n", &tight).is_ok());
        assert_eq!(
            parse_with(b"*1\r\n$4\r\nabcd\r\n", &tight),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let strict = Limits {
            unauthenticated: true,
            ..Limits::default()
        };
        let mut eleven = b"*11\r\n".to_vec();
        for _ in 0..11 {
            eleven.extend_from_slice(b"$1\r\na\r\n");
        }
        assert_eq!(
            parse_with(&eleven, &strict),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        assert!(parse_with(&eleven, &Limits::default()).is_ok());
        assert_eq!(
            parse_with(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n", &strict),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        let mut ok = b"*2\r\n$4\r\nAUTH\r\n$16384\r\n".to_vec();
        ok.extend(std::iter::repeat_n(b'p', 16384));
        ok.extend_from_slice(b"\r\n");
        assert!(parse_with(&ok, &strict).is_ok());
    }

    #[test]
    fn expected_dollar_errors() {
        assert_eq!(
            err(b"*2\r\n$4\r\nECHO\r\n:3\r\n"),
            "Protocol error: expected '$', got ':'"
        );
        // An element line is only judged once its \r\n is there.
        assert!(matches!(
            parse(b"*1\r\nX"),
            Ok((Parsed::Incomplete { .. }, _))
        ));
        // CR/LF are echoed as spaces, as Redis's error formatting does.
        assert_eq!(err(b"*1\r\n\r\n"), "Protocol error: expected '$', got ' '");
        assert_eq!(
            err(b"*1\r\n\n\r\n"),
            "Protocol error: expected '$', got ' '"
        );
        for b in 1..=255u8 {
            if b == b'$' || b == b'\r' {
                continue;
            }
            let input = [b'*', b'1', b'\r', b'\n', b, b'\r', b'\n'];
            let e = parse(&input).unwrap_err();
            assert_eq!(e, ProtocolError::ExpectedDollar(b));
            let mut msg = Vec::new();
            e.write_message(&mut msg);
            let mut want = b"Protocol error: expected '$', got '".to_vec();
            want.push(if b == b'\n' { b' ' } else { b });
            want.push(b'\'');
            assert_eq!(msg, want);
        }
        assert_eq!(
            ProtocolError::ExpectedDollar(0x80).to_string(),
            "Protocol error: expected '$', got '\u{fffd}'"
        );
    }

    #[test]
    fn too_big_count_strings() {
        for (prefix, msg) in [
            (&b"*"[..], "Protocol error: too big mbulk count string"),
            (b"*1\r\n$", "Protocol error: too big bulk count string"),
        ] {
            let start = if prefix.len() == 1 { 0 } else { 4 };
            let mut large = prefix.to_vec();
            large.resize(start + 65536, b'0');
            assert!(matches!(parse(&large), Ok((Parsed::Incomplete { .. }, _))));
            let mut over = large.clone();
            over.push(b'0');
            assert_eq!(err(&over), msg);
            let mut cr = large.clone();
            cr.push(b'\r');
            assert!(matches!(parse(&cr), Ok((Parsed::Incomplete { .. }, _))));
            cr.push(b'\n');
            let invalid = if start == 0 {
                "Protocol error: invalid multibulk length"
            } else {
                "Protocol error: invalid bulk length"
            };
            assert_eq!(err(&cr), invalid);
            // A \r beyond the limit does not rescue the line: fed byte by
            // byte, Redis would have given up before reaching it.
            let mut late = over.clone();
            late.extend_from_slice(b"\r\n");
            assert_eq!(err(&late), msg);
        }
        // strchr stops at NUL, so a NUL hides the \r and the line waits.
        assert!(matches!(
            parse(b"*1\0\r\n"),
            Ok((Parsed::Incomplete { .. }, _))
        ));
        assert!(matches!(
            parse(b"*1\r\n\0\r\n"),
            Ok((Parsed::Incomplete { .. }, _))
        ));
        let mut nul = b"*1\r\n\0\r\n".to_vec();
        nul.resize(4 + 65537, b'x');
        assert_eq!(err(&nul), "Protocol error: too big bulk count string");
    }

    #[test]
    fn inline_basic_and_split_everywhere() {
        check_split(b"PING\n", &[b"PING"]);
        check_split(b"PING\r\n", &[b"PING"]);
        check_split(b" PING\t\r\n", &[b"PING"]);
        check_split(b"SET k v\r\n", &[b"SET", b"k", b"v"]);
        check_split(b"\n", &[]);
        check_split(b"\r\n", &[]);
        check_split(b" \t\x0b\x0c\n", &[]);
        check_split(b"ECHO \"\"\r\n", &[b"ECHO", b""]);
        check_split(b"ECHO a\"b c\"\r\n", &[b"ECHO", b"ab c"]);
        check_split(b"PI\rNG\r\n", &[b"PI", b"NG"]);
        check_split(b"ECHO a\x0bb\r\n", &[b"ECHO", b"a\x0bb"]);
        check_split(b"\x0bECHO b\r\n", &[b"ECHO", b"b"]);
        check_split(b"hello \xff\r\n", &[b"hello", b"\xff"]);
        check_split(b"\r\r\n", &[]);
    }

    #[test]
    fn inline_quoting() {
        let s = |l: &[u8]| split_inline_args(l);
        let v = |a: &[&[u8]]| Some(vecs(a));
        assert_eq!(s(b"set \"a b\" 'c d'"), v(&[b"set", b"a b", b"c d"]));
        assert_eq!(s(b"\"\\x41\\x4\""), v(&[b"Ax4"]));
        assert_eq!(s(b"\"\\x4a\\x4A\\xzz\""), v(&[b"JJxzz"]));
        assert_eq!(
            s(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\""),
            v(&[b"\n\r\t\x08\x07\\\"q"])
        );
        assert_eq!(s(b"'\\x41\\''"), v(&[b"\\x41'"]));
        assert_eq!(s(b"'a\\nb'"), v(&[b"a\\nb"]));
        assert_eq!(s(b"'it''s'"), None);
        assert_eq!(s(b"\"a\"\x0b"), v(&[b"a"]));
        assert_eq!(s(b"\"a\"\x0bb"), v(&[b"a", b"b"]));
        assert_eq!(s(b"a\x0c"), v(&[b"a\x0c"]));
        assert_eq!(s(b"pre\"mid\"'x'"), None);
        assert_eq!(s(b"pre'mid'"), v(&[b"premid"]));
        assert_eq!(s(b""), v(&[]));
        assert_eq!(s(b"   "), v(&[]));
        assert_eq!(s(b"a\0b"), v(&[b"a"]));
        assert_eq!(s(b"\"a\0b\""), None);
        for bad in [
            &b"\"a"[..],
            b"'a",
            b"\"a\"x",
            b"'a'x",
            b"\"a\\\"",
            b"'a\\'",
            b"\"a\\",
        ] {
            assert_eq!(s(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn inline_errors() {
        for bad in [
            &b"ECHO \"a\n"[..],
            b"ECHO 'a\r\n",
            b"ECHO \"a\"x\n",
            b"ECHO 'a'x\n",
            b"ECHO \"a\\\"\n",
            b"ECHO 'a\\'\n",
        ] {
            assert_eq!(
                err(bad),
                "Protocol error: unbalanced quotes in request",
                "{bad:?}"
            );
        }
        assert!(matches!(
            parse(&[b'x'; 65536]),
            Ok((Parsed::Incomplete { .. }, _))
        ));
        assert_eq!(
            err(&[b'x'; 65537]),
            "Protocol error: too big inline request"
        );
        let mut long_line = vec![b'x'; 65536];
        long_line.push(b'\n');
        assert!(matches!(
            parse(&long_line),
            Ok((Parsed::Complete { .. }, _))
        ));
        let mut too_long = vec![b'x'; 65537];
        too_long.push(b'\n');
        assert_eq!(err(&too_long), "Protocol error: too big inline request");
        // NUL hides the newline from strchr.
        assert!(matches!(
            parse(b"PING\0\n"),
            Ok((Parsed::Incomplete { .. }, _))
        ));
        let mut nul = b"PING\0\n".to_vec();
        nul.resize(65537, b'x');
        assert_eq!(err(&nul), "Protocol error: too big inline request");
    }

    #[test]
    fn arglist_reuse_and_scratch() {
        let mut args = ArgList::new();
        let buf = b"SET \"k\\x00\" plain\r\n";
        parse_request(buf, &Limits::default(), &mut args).unwrap();
        assert_eq!(args.len(), 3);
        assert_eq!(args.get(buf, 1), b"k\0");
        assert_eq!(args.get(buf, 2), b"plain");
        let buf2 = b"*1\r\n$1\r\nx\r\n";
        parse_request(buf2, &Limits::default(), &mut args).unwrap();
        assert_eq!(args.len(), 1);
        assert_eq!(args.get(buf2, 0), b"x");
        args.clear();
        assert!(args.is_empty());
    }

    #[test]
    fn large_bulk_is_linear() {
        // 100 MB arriving in 64 KiB reads, with the caller skipping
        // re-parses until min_total: a handful of parse calls in total.
        let mut input = Vec::new();
        let payload = vec![b'v'; 100 * 1024 * 1024];
        encode_command(&[b"SET", b"k", &payload], &mut input);
        let mut args = ArgList::new();
        let limits = Limits::default();
        let (mut have, mut calls, mut wait_for) = (0usize, 0usize, 0usize);
        loop {
            have = (have + 64 * 1024).min(input.len());
            if have < wait_for {
                continue;
            }
            calls += 1;
            match parse_request(&input[..have], &limits, &mut args).unwrap() {
                Parsed::Complete { consumed } => {
                    assert_eq!(consumed, input.len());
                    break;
                }
                Parsed::Incomplete { min_total } => wait_for = min_total,
                Parsed::Block { .. } => unreachable!("big_arg is off by default"),
            }
        }
        assert!(calls <= 3, "{calls} parse calls");
        assert_eq!(args.get(&input, 2).len(), payload.len());
    }

    #[test]
    fn many_small_arguments_in_small_reads_are_linear() {
        // Issue 23, defect 2: 200,000 arguments arriving in 1.4 KB reads
        // were parsed again from the first byte on every read.
        let n = 200_000;
        let items: Vec<Vec<u8>> = (0..n).map(|i| format!("item{i}").into_bytes()).collect();
        let mut argv: Vec<&[u8]> = vec![b"RPUSH", b"list"];
        argv.extend(items.iter().map(Vec::as_slice));
        let mut input = Vec::new();
        encode_command(&argv, &mut input);
        let mut args = ArgList::new();
        let limits = Limits::default();
        let (mut have, mut calls, mut wait_for) = (0usize, 0usize, 0usize);
        loop {
            have = (have + 1400).min(input.len());
            if have < wait_for {
                continue;
            }
            calls += 1;
            match parse_request(&input[..have], &limits, &mut args).unwrap() {
                Parsed::Complete { consumed } => {
                    assert_eq!(consumed, input.len());
                    break;
                }
                Parsed::Incomplete { min_total } => wait_for = min_total,
                Parsed::Block { .. } => unreachable!("big_arg is off by default"),
            }
        }
        // Each read looks again at most at the one argument it stopped in.
        assert!(
            args.examined <= argv.len() + calls,
            "{} argument headers examined for {} arguments in {calls} reads",
            args.examined,
            argv.len()
        );
        assert_eq!(args.len(), argv.len());
        assert_eq!(args.get(&input, n + 1), format!("item{}", n - 1).as_bytes());
    }

    /// Feeds `input` to the parser in `step`-byte reads the way the server
    /// does with `big_arg` set: a reported block is cut out of the request
    /// buffer into its own buffer, filled to its length, and handed back.
    /// Returns the parsed arguments and how many were blocks.
    fn parse_with_blocks(input: &[u8], step: usize, big_arg: usize) -> (Vec<Vec<u8>>, usize) {
        let limits = Limits {
            big_arg,
            ..Limits::default()
        };
        let mut args = ArgList::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        loop {
            match parse_request(&buf, &limits, &mut args).unwrap() {
                Parsed::Complete { consumed } => {
                    assert_eq!(fed, input.len(), "nothing left unread");
                    assert_eq!(consumed, buf.len());
                    let got: Vec<Vec<u8>> = args.iter(&buf).map(<[u8]>::to_vec).collect();
                    let blocks = (0..args.len()).filter(|&i| args.block(i).is_some()).count();
                    assert_eq!(args.take_blocks().count(), blocks);
                    return (got, blocks);
                }
                Parsed::Incomplete { .. } => {
                    let n = step.min(input.len() - fed);
                    assert!(n > 0, "parser wants more than the request");
                    buf.extend_from_slice(&input[fed..fed + n]);
                    fed += n;
                }
                Parsed::Block { at, len } => {
                    assert!(len >= big_arg);
                    let mut block = buf.split_off(at);
                    assert!(block.len() < len + 2);
                    let rest = len + 2 - block.len();
                    block.extend_from_slice(&input[fed..fed + rest]);
                    fed += rest;
                    block.truncate(len);
                    args.add_block(at, Arc::new(block));
                }
            }
        }
    }

    #[test]
    fn big_bulks_are_read_into_blocks_of_their_own() {
        let big1 = vec![b'a'; 5000];
        let big2: Vec<u8> = (0..7000u32).map(|i| i as u8).collect();
        let cmd: [&[u8]; 5] = [b"MSET", b"k1", &big1, b"k2", &big2];
        let mut input = Vec::new();
        encode_command(&cmd, &mut input);
        let want: Vec<Vec<u8>> = cmd.iter().map(|a| a.to_vec()).collect();
        for step in [1, 7, 100, 4096, 1 << 20] {
            let (got, blocks) = parse_with_blocks(&input, step, 1000);
            assert_eq!(got, want, "step {step}");
            // A bulk that arrived whole in one read needs no block.
            if step < 5000 {
                assert_eq!(blocks, 2, "step {step}");
            }
        }
        // Below the threshold: the ordinary path.
        assert_eq!(parse_with_blocks(&input, 100, 10_000), (want, 0));
    }

    proptest! {
        #[test]
        fn blocks_parse_like_the_whole_buffer(
            cmd in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..6),
            step in 1usize..400,
            big_arg in 1usize..200,
        ) {
            let mut input = Vec::new();
            let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            encode_command(&refs, &mut input);
            let (got, _) = parse_with_blocks(&input, step, big_arg);
            prop_assert_eq!(got, cmd);
        }

        #[test]
        fn encoded_commands_parse_back(
            cmd in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..12),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
        ) {
            let refs: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            let mut input = Vec::new();
            encode_command(&refs, &mut input);
            let limits = Limits::default();
            let mut args = ArgList::new();
            for cut in &cuts {
                let at = cut.index(input.len());
                match parse_request(&input[..at], &limits, &mut args) {
                    Ok(Parsed::Incomplete { min_total }) => {
                        prop_assert!(min_total > at && min_total <= input.len());
                    }
                    other => prop_assert!(false, "cut {}: {:?}", at, other),
                }
            }
            // Trailing bytes of a pipelined next request must not matter.
            let whole = input.len();
            input.extend_from_slice(b"*1\r\n$4\r\nPI");
            let r = parse_request(&input, &limits, &mut args);
            prop_assert_eq!(r, Ok(Parsed::Complete { consumed: whole }));
            let got: Vec<&[u8]> = args.iter(&input).collect();
            prop_assert_eq!(got, refs);
        }

        #[test]
        fn quoted_args_roundtrip(
            words in prop::collection::vec(prop::collection::vec(1u8..=255, 0..20), 0..8),
        ) {
            // Any byte string survives "\xHH"-quoting through sdssplitargs.
            let mut line = Vec::new();
            for w in &words {
                line.extend_from_slice(b" \"");
                for &b in w {
                    line.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                }
                line.push(b'"');
            }
            prop_assert_eq!(split_inline_args(&line), Some(words.clone()));
        }

        #[test]
        fn resumed_parsing_matches_one_parse(
            argv in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..30),
            steps in prop::collection::vec(1usize..20, 1..50),
        ) {
            // The same request fed in reads of arbitrary sizes, honouring
            // min_total as the server does, parses to the same arguments.
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            let mut input = Vec::new();
            encode_command(&argv, &mut input);
            let limits = Limits::default();
            let mut args = ArgList::new();
            let (mut have, mut wait_for) = (0usize, 0usize);
            let mut step = steps.iter().cycle();
            loop {
                have = (have + step.next().unwrap()).min(input.len());
                if have < wait_for {
                    continue;
                }
                match parse_request(&input[..have], &limits, &mut args).unwrap() {
                    Parsed::Complete { consumed } => {
                        prop_assert_eq!(consumed, input.len());
                        break;
                    }
                    Parsed::Incomplete { min_total } => wait_for = min_total,
                    Parsed::Block { .. } => unreachable!(),
                }
            }
            let got: Vec<&[u8]> = args.iter(&input).collect();
            prop_assert_eq!(got, argv);
        }

        #[test]
        fn arbitrary_input_never_panics_and_prefixes_agree(
            input in prop::collection::vec(
                prop::sample::select(vec![b'*', b'$', b'\r', b'\n', b'0', b'1', b'2', b'-', b'a', b'"', b'\'', b' ', b'\\', 0u8]),
                0..40,
            ),
        ) {
            // Prefix-closure: once a prefix completes or fails, longer
            // inputs give the same answer (bytes-arrive-one-at-a-time
            // semantics).
            let limits = Limits { max_inline_len: 16, ..Limits::default() };
            let mut first: Option<Result<Parsed, ProtocolError>> = None;
            let mut args = ArgList::new();
            let mut quiet_until = 0;
            for cut in 0..=input.len() {
                let r = parse_request(&input[..cut], &limits, &mut args);
                // Below a promised min_total nothing may happen.
                if cut < quiet_until {
                    prop_assert!(matches!(r, Ok(Parsed::Incomplete { .. })), "cut {}: {:?}", cut, r);
                }
                match (&first, r) {
                    (None, Ok(Parsed::Incomplete { min_total })) => {
                        prop_assert!(min_total > cut);
                        quiet_until = quiet_until.max(min_total);
                    }
                    (None, other) => first = Some(other),
                    (Some(f), other) => prop_assert_eq!(f, &other),
                }
            }
        }
    }
}
