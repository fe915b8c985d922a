//! Requests in: memcached's text protocol and meta commands, parsed the way
//! memcached 1.6 (`proto_text.c`) parses them, so the same bad line gets
//! the same error, and a line that memcached accepts is accepted.
//!
//! The decoder is sans-IO: it is given the bytes buffered for a connection
//! and answers with one request and how many bytes it used, or how many
//! bytes it needs first (a storage command is not parsed again until its
//! whole data block is there, so a 100 MB value costs two parses), or that
//! some bytes were discarded. Requests borrow from the buffer: nothing is
//! copied or allocated on the way in.
//!
//! Bounds, as memcached's: a key is at most 250 bytes (and, Cairn's own
//! rule from protocol.txt, has no control character); a line without an
//! end that grows past 2048 bytes closes the connection unless it is a
//! `get`/`gets` (multi-key gets have no line limit in memcached; the
//! server's query buffer limit bounds them); a value longer than
//! `Limits::max_value` is refused and its data block discarded as it
//! arrives, never buffered.
use super::base64;
use cairn_num::memcache::{strtol, strtoul, strtoull};
use memchr::memchr;
use std::sync::Arc;

/// Longest key memcached accepts (`KEY_MAX_LENGTH`).
pub const KEY_MAX: usize = 250;
/// A line with no end yet, longer than this, closes the connection
/// (memcached `try_read_command_ascii`), unless it is a get or gets.
pub const LINE_MAX: usize = 2048;
/// Longest `O` (opaque) token, the `O` included.
pub const OPAQUE_MAX: usize = 32;
/// memcached tokenizes at most this many words of a line (`MAX_TOKENS`,
/// which counts the terminal token): the 24th slot only tells that more
/// text follows.
const MAX_WORDS: usize = 23;

/// What the server lets the decoder accept.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest value a storage command may send (`proto-max-bulk-len`).
    pub max_value: usize,
    /// Memory is full: storage commands are refused before their data is
    /// read, as memcached refuses when it cannot allocate the item.
    pub no_memory: bool,
    /// A data block at least this long that has not fully arrived is
    /// reported as [`Decoded::Block`]. `usize::MAX`: never.
    pub big_value: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_value: 512 * 1024 * 1024,
            no_memory: false,
            big_value: usize::MAX,
        }
    }
}

/// A large data block read into a buffer of its own (see
/// [`Decoded::Block`]): its `len` bytes, and whether the two bytes after
/// them were "\r\n".
#[derive(Debug)]
pub struct DataBlock {
    pub data: Arc<Vec<u8>>,
    pub terminated: bool,
}

/// The result of one `Decoder::decode` call.
#[derive(Debug)]
pub enum Decoded<'a> {
    /// Call again once the buffer holds at least `min_total` bytes.
    Incomplete { min_total: usize },
    /// A data block of `len` bytes (at least [`Limits::big_value`]) starts
    /// at offset `at`, right after its command line, and has not fully
    /// arrived. The caller moves the bytes from `at` on into a buffer of
    /// `len + 2` bytes, reads the rest of the block (and its "\r\n")
    /// straight into it, cuts the request buffer at `at`, and calls
    /// [`Decoder::decode_with`] with the block: the value is then that
    /// buffer, never copied.
    Block { at: usize, len: usize },
    /// `consumed` bytes of a refused data block were discarded.
    Skipped { consumed: usize },
    /// One request, which used `consumed` bytes of the buffer.
    Request { consumed: usize, req: Request<'a> },
    /// The client sent a line too long to be a command: close the
    /// connection (memcached does, without a reply).
    Close,
}

/// How a storage command treats an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

/// A text-protocol storage command with its data block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Store<'a> {
    pub mode: StoreMode,
    pub key: &'a [u8],
    pub flags: u32,
    pub exptime: i32,
    pub data: &'a [u8],
    /// `data`'s own buffer when it was read into one ([`Decoded::Block`]),
    /// so the item can keep it instead of copying.
    pub shared: Option<&'a Arc<Vec<u8>>>,
    /// The `cas` command's unique (0 for the others).
    pub cas: u64,
    pub noreply: bool,
}

/// Why a storage command was refused before its data was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `SERVER_ERROR object too large for cache`
    TooLarge,
    /// `SERVER_ERROR out of memory storing object`
    NoMemory,
}

impl Refusal {
    pub fn message(self) -> &'static str {
        match self {
            Refusal::TooLarge => "SERVER_ERROR object too large for cache",
            Refusal::NoMemory => "SERVER_ERROR out of memory storing object",
        }
    }
}

/// A key as the command named it: the bytes of the line, or decoded from
/// base64 (meta `b` flag; rare, so the decoded bytes may cost a small
/// allocation rather than make every request large).
#[derive(Clone, PartialEq, Eq)]
pub enum KeyBytes<'a> {
    Raw(&'a [u8]),
    Decoded(Box<[u8]>),
}

impl<'a> KeyBytes<'a> {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            KeyBytes::Raw(b) => b,
            KeyBytes::Decoded(b) => b,
        }
    }

    pub fn is_binary(&self) -> bool {
        matches!(self, KeyBytes::Decoded(_))
    }
}

impl std::fmt::Debug for KeyBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))?;
        if self.is_binary() {
            write!(f, " (b)")?;
        }
        Ok(())
    }
}

/// The four meta commands that take flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaCmd {
    Get,
    Set,
    Delete,
    Arith,
}

/// The flags of a meta command, parsed (memcached `_meta_flag_preparse`),
/// and the flag words themselves in request order: replies list the
/// flags they return in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MetaFlags<'a> {
    /// The flag words as they were sent (split again on demand: a few
    /// bytes, cheaper than storing an array of slices in every request).
    text: &'a [u8],
    /// `b`: the key was base64.
    pub base64: bool,
    /// `q`: no reply for the nominal outcome (hit/stored/deleted, or EN).
    pub quiet: bool,
    /// `u`: no LRU bump, no hit recorded.
    pub no_bump: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `N<ttl>`: create on miss with this exptime.
    pub vivify: Option<i32>,
    /// `T<ttl>`: new exptime.
    pub ttl: Option<i32>,
    /// `R<ttl>`: win the recache token when the TTL left is below this.
    pub recache: Option<i32>,
    /// `F<flags>`: client flags to store (0 if absent).
    pub client_flags: u32,
    /// `C<cas>`: compare CAS.
    pub compare_cas: Option<u64>,
    /// `I`: invalidate (md) / store stale on an older CAS (ms).
    pub invalidate: bool,
    /// `M<c>`: mode switch character.
    pub mode: Option<u8>,
    /// `J<n>`: ma's initial value on vivify.
    pub initial: u64,
    /// `D<n>`: ma's delta (1 if absent).
    pub delta: u64,
}

impl<'a> MetaFlags<'a> {
    /// The flag words in request order (`O` words include the `O`).
    pub fn words(&self) -> Words<'a> {
        Words { rest: self.text }
    }

    /// True if flag `c` was given (first letter of a word).
    pub fn has(&self, c: u8) -> bool {
        self.words().any(|w| w[0] == c)
    }
}

/// A meta command: mg, ms, md or ma.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta<'a> {
    pub cmd: MetaCmd,
    pub key: KeyBytes<'a>,
    pub flags: MetaFlags<'a>,
    /// ms: the value.
    pub data: &'a [u8],
    /// `data`'s own buffer, as for [`Store::shared`].
    pub shared: Option<&'a Arc<Vec<u8>>>,
}

/// Space-separated words of a line, in order: the keys of a get/gets/
/// gat/gats line (the server checks each key, length and control bytes,
/// when it reaches it, as memcached does: keys before a bad one have
/// already been looked up when the error replaces the reply), the flags of
/// a meta command, the arguments of `stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Words<'a> {
    rest: &'a [u8],
}

/// The keys of a get line.
pub type Keys<'a> = Words<'a>;

impl<'a> Iterator for Words<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&c| c != b' ')?;
        let rest = &self.rest[start..];
        let end = memchr(b' ', rest).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

/// One parsed request.
#[derive(Clone, Debug, PartialEq)]
pub enum Request<'a> {
    /// get, gets, gat, gats (and memcached's old alias bget).
    Get {
        /// Return the CAS (gets, gats).
        cas: bool,
        /// gat/gats: the new exptime.
        touch: Option<i32>,
        keys: Keys<'a>,
    },
    Store(Store<'a>),
    /// A storage command refused before its data (which the decoder
    /// discards). A `set` that fails this way also deletes the key, as
    /// memcached does, so a stale value is not served after a failed set.
    Refused {
        why: Refusal,
        key: KeyBytes<'a>,
        /// set, or ms in set mode (memcached deletes for any ms).
        deletes: bool,
        /// Text command with noreply: no error line (memcached's
        /// `out_string`). Meta commands always answer errors.
        noreply: bool,
    },
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    Arith {
        incr: bool,
        key: &'a [u8],
        delta: u64,
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i32,
        noreply: bool,
    },
    FlushAll {
        delay: i32,
        noreply: bool,
    },
    Version,
    Verbosity {
        level: u32,
        noreply: bool,
    },
    /// `stats [args...]`: the words after `stats`.
    Stats {
        args: Words<'a>,
    },
    Quit,
    /// mn
    MetaNoop,
    /// me <key> [b]
    MetaDebug {
        key: KeyBytes<'a>,
    },
    Meta(Meta<'a>),
    /// A line memcached answers with an error line (or nothing, when the
    /// command had noreply).
    Error {
        msg: &'static str,
        noreply: bool,
    },
}

/// memcached's tokenizer over one line: up to 23 words split on spaces
/// only; `more` is set when text follows the 23rd word.
struct Line<'a> {
    line: &'a [u8],
    words: [&'a [u8]; MAX_WORDS],
    /// Where each word starts in `line`.
    starts: [usize; MAX_WORDS],
    n: usize,
    more: bool,
}

impl<'a> Line<'a> {
    fn split(line: &'a [u8]) -> Line<'a> {
        let mut words: [&[u8]; MAX_WORDS] = [&[]; MAX_WORDS];
        let mut starts = [0; MAX_WORDS];
        let mut n = 0;
        let mut i = 0;
        let mut more = false;
        while i < line.len() {
            if line[i] == b' ' {
                i += 1;
                continue;
            }
            if n == MAX_WORDS {
                more = true;
                break;
            }
            let end = memchr(b' ', &line[i..]).map_or(line.len(), |e| i + e);
            words[n] = &line[i..end];
            starts[n] = i;
            n += 1;
            i = end;
        }
        Line {
            line,
            words,
            starts,
            n,
            more,
        }
    }

    /// The words from word `i` on, to the end of the line (beyond the
    /// 23 words memcached tokenizes at once: a get reads all its keys).
    fn from(&self, i: usize) -> Words<'a> {
        Words {
            rest: if i < self.n {
                &self.line[self.starts[i]..]
            } else {
                &[]
            },
        }
    }

    /// memcached's `ntokens`: the words plus the terminal token.
    fn ntokens(&self) -> usize {
        self.n + 1
    }

    fn word(&self, i: usize) -> &'a [u8] {
        self.words[i]
    }

    /// memcached `set_noreply_maybe`: the last word is "noreply".
    fn noreply(&self) -> bool {
        self.n >= 1 && self.words[self.n - 1] == b"noreply"
    }
}

/// A key memcached would accept: at most 250 bytes, and (Cairn's rule,
/// from protocol.txt) no control bytes. The tokenizer already split on
/// spaces.
pub fn key_ok(key: &[u8]) -> bool {
    key.len() <= KEY_MAX && !key.iter().any(|&c| c < 0x20 || c == 0x7f)
}

const ERROR: &str = "ERROR";
const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
const BAD_CHUNK: &str = "CLIENT_ERROR bad data chunk";
const BAD_EXPTIME: &str = "CLIENT_ERROR invalid exptime argument";

fn error<'a>(msg: &'static str, noreply: bool) -> Request<'a> {
    Request::Error { msg, noreply }
}

/// Per-connection decoder state: how much of a refused data block is still
/// to be discarded.
#[derive(Debug, Default)]
pub struct Decoder {
    swallow: usize,
}

/// A request line's storage header: what to do once the data is there.
enum Header<'a> {
    /// A complete request that uses only the line.
    Done(Request<'a>),
    /// Wants `len` bytes of data plus "\r\n" after the line.
    Data { len: usize, then: DataThen<'a> },
    /// Answer `req` now and discard `len` bytes of data plus "\r\n".
    Discard { len: usize, req: Request<'a> },
}

enum DataThen<'a> {
    Store(Store<'a>),
    Meta(Meta<'a>),
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// True while the rest of a refused data block is being discarded.
    pub fn swallowing(&self) -> bool {
        self.swallow > 0
    }

    /// Decodes the next request from the start of `buf`.
    pub fn decode<'a>(&mut self, buf: &'a [u8], limits: &Limits) -> Decoded<'a> {
        self.decode_with(buf, limits, None)
    }

    /// `decode`, with the data block of the request at the start of `buf`
    /// already read into a buffer of its own (after [`Decoded::Block`]).
    pub fn decode_with<'a>(
        &mut self,
        buf: &'a [u8],
        limits: &Limits,
        block: Option<&'a DataBlock>,
    ) -> Decoded<'a> {
        if self.swallow > 0 {
            if buf.is_empty() {
                return Decoded::Incomplete { min_total: 1 };
            }
            let n = self.swallow.min(buf.len());
            self.swallow -= n;
            return Decoded::Skipped { consumed: n };
        }
        let (line, line_len) = match take_line(buf) {
            Ok(x) => x,
            Err(NoLine::Close) => return Decoded::Close,
            Err(NoLine::Incomplete(min_total)) => return Decoded::Incomplete { min_total },
        };
        match parse_line(line, limits) {
            Header::Done(req) => Decoded::Request {
                consumed: line_len,
                req,
            },
            Header::Data { len, then } => {
                let (data, shared, terminated, total) = match block {
                    Some(b) if b.data.len() == len => {
                        (&b.data[..], Some(&b.data), b.terminated, line_len)
                    }
                    _ => {
                        let total = line_len + len + 2;
                        if buf.len() < total {
                            if len >= limits.big_value {
                                return Decoded::Block { at: line_len, len };
                            }
                            return Decoded::Incomplete { min_total: total };
                        }
                        let data = &buf[line_len..line_len + len];
                        (data, None, &buf[total - 2..total] == b"\r\n", total)
                    }
                };
                let req = if !terminated {
                    match then {
                        DataThen::Store(s) => error(BAD_CHUNK, s.noreply),
                        // "metaset mode always returns errors".
                        DataThen::Meta(_) => error(BAD_CHUNK, false),
                    }
                } else {
                    match then {
                        DataThen::Store(s) => Request::Store(Store { data, shared, ..s }),
                        DataThen::Meta(m) => Request::Meta(Meta { data, shared, ..m }),
                    }
                };
                Decoded::Request {
                    consumed: total,
                    req,
                }
            }
            Header::Discard { len, req } => {
                let block = len + 2;
                let have = buf.len() - line_len;
                let used = have.min(block);
                self.swallow = block - used;
                Decoded::Request {
                    consumed: line_len + used,
                    req,
                }
            }
        }
    }

    /// Decodes memcached's ASCII authentication (`-Y`), the only thing a
    /// connection may send before it authenticates: a fake `set <key>
    /// <flags> <exptime> <bytes>` whose data is `username password`.
    pub fn decode_auth<'a>(&mut self, buf: &'a [u8]) -> Auth<'a> {
        let (line, line_len) = match take_line(buf) {
            Ok(x) => x,
            Err(NoLine::Close) => return Auth::Close,
            Err(NoLine::Incomplete(min_total)) => return Auth::Incomplete { min_total },
        };
        let l = Line::split(line);
        let size = if l.ntokens() < 6 || l.word(0) != b"set" {
            None
        } else {
            strtoul(l.word(4))
        };
        let Some(size) = size else {
            return Auth::Reply {
                consumed: line_len,
                msg: "CLIENT_ERROR unauthenticated",
            };
        };
        // Before authentication a client gets no room for a value: a token
        // is a user name and a password. A larger size would have the
        // connection buffer the whole declared value first (a client
        // sending `set a 0 0 1000000000` made the server zero-fill ~1 GB);
        // memcached closes such a connection too.
        if size as usize > MAX_AUTH_TOKEN {
            return Auth::Close;
        }
        let total = line_len + size as usize + 2;
        if buf.len() < total {
            return Auth::Incomplete { min_total: total };
        }
        if &buf[total - 2..total] != b"\r\n" {
            return Auth::Reply {
                consumed: total,
                msg: "CLIENT_ERROR bad command line termination",
            };
        }
        let payload = &buf[line_len..total - 2];
        let payload = &payload[..memchr(0, payload).unwrap_or(payload.len())];
        let p = Line::split(payload);
        if p.ntokens() < 3 {
            return Auth::Reply {
                consumed: total,
                msg: "CLIENT_ERROR bad authentication token format",
            };
        }
        Auth::Credentials {
            consumed: total,
            user: p.word(0),
            pass: p.word(1),
        }
    }
}

/// The largest authentication token (`set` data before authentication)
/// a connection may send: user name, password and separators.
pub const MAX_AUTH_TOKEN: usize = 4096;

/// The result of `Decoder::decode_auth`.
#[derive(Debug, PartialEq, Eq)]
pub enum Auth<'a> {
    Incomplete {
        min_total: usize,
    },
    Close,
    /// An error line; the connection stays unauthenticated.
    Reply {
        consumed: usize,
        msg: &'static str,
    },
    Credentials {
        consumed: usize,
        user: &'a [u8],
        pass: &'a [u8],
    },
}

/// The next command line: its text (without "\r\n", cut at a NUL as
/// memcached's `strlen` cuts it) and the bytes it spans with its "\n".
/// Why `take_line` found no line.
enum NoLine {
    /// Wait for more bytes: at least this many in all.
    Incomplete(usize),
    /// Too long to be a command: close.
    Close,
}

fn take_line(buf: &[u8]) -> Result<(&[u8], usize), NoLine> {
    let Some(nl) = memchr(b'\n', buf) else {
        if buf.len() > LINE_MAX {
            let spaces = buf.iter().take_while(|&&c| c == b' ').count();
            let rest = &buf[spaces..];
            if spaces > 100 || !(rest.starts_with(b"get ") || rest.starts_with(b"gets ")) {
                return Err(NoLine::Close);
            }
        }
        return Err(NoLine::Incomplete(buf.len() + 1));
    };
    let mut end = nl;
    if end > 1 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    let line = &buf[..end];
    let line = &line[..memchr(0, line).unwrap_or(line.len())];
    Ok((line, nl + 1))
}

/// Parses one command line (memcached `process_command_ascii`).
fn parse_line<'a>(line: &'a [u8], limits: &Limits) -> Header<'a> {
    let l = Line::split(line);
    let nt = l.ntokens();
    if nt < 2 || l.word(0).len() < 2 {
        return Header::Done(error(ERROR, false));
    }
    let cmd = l.word(0);
    if cmd.len() == 2 && cmd[0] == b'm' {
        return match cmd[1] {
            b'g' => Header::Done(meta(&l, MetaCmd::Get)),
            b's' => meta_set(&l, limits),
            b'd' => Header::Done(meta(&l, MetaCmd::Delete)),
            b'a' => Header::Done(meta(&l, MetaCmd::Arith)),
            b'n' => Header::Done(Request::MetaNoop),
            b'e' => Header::Done(meta_debug(&l)),
            _ => Header::Done(error(ERROR, false)),
        };
    }
    let tokens_in = |a: usize, b: usize| nt == a || nt == b;
    let req = match cmd {
        b"get" | b"gets" | b"gat" | b"gats" | b"bget" => get(&l, cmd),
        b"set" | b"add" | b"replace" | b"append" | b"prepend" if tokens_in(6, 7) => {
            return storage(&l, limits)
        }
        b"cas" if tokens_in(7, 8) => return storage(&l, limits),
        b"incr" | b"decr" if tokens_in(4, 5) => arith(&l),
        b"delete" if (3..=5).contains(&nt) => delete(&l),
        b"touch" if tokens_in(4, 5) => touch(&l),
        b"flush_all" if (2..=4).contains(&nt) => flush_all(&l),
        b"verbosity" if tokens_in(3, 4) => verbosity(&l),
        b"version" => Request::Version,
        b"quit" => Request::Quit,
        b"stats" => Request::Stats { args: l.from(1) },
        // memcached answers this way while its shutdown command is
        // disabled, its default; Cairn never stops for a memcached client.
        b"shutdown" => error("ERROR: shutdown not enabled", false),
        _ => error(ERROR, false),
    };
    Header::Done(req)
}

fn get<'a>(l: &Line<'a>, cmd: &[u8]) -> Request<'a> {
    if l.ntokens() < 3 {
        return error(ERROR, false);
    }
    let (cas, touch) = match cmd {
        b"get" | b"bget" => (false, false),
        b"gets" => (true, false),
        b"gat" => (false, true),
        _ => (true, true),
    };
    let touch = if touch {
        let Some(t) = strtol(l.word(1)) else {
            return error(BAD_EXPTIME, false);
        };
        Some(t)
    } else {
        None
    };
    let keys = l.from(if touch.is_some() { 2 } else { 1 });
    Request::Get { cas, touch, keys }
}

/// set/add/replace/append/prepend/cas (memcached `process_update_command`).
fn storage<'a>(l: &Line<'a>, limits: &Limits) -> Header<'a> {
    let noreply = l.noreply();
    let mode = match l.word(0) {
        b"set" => StoreMode::Set,
        b"add" => StoreMode::Add,
        b"replace" => StoreMode::Replace,
        b"append" => StoreMode::Append,
        b"prepend" => StoreMode::Prepend,
        _ => StoreMode::Cas,
    };
    let key = l.word(1);
    if !key_ok(key) {
        return Header::Done(error(BAD_FORMAT, noreply));
    }
    let (Some(flags), Some(exptime), Some(vlen)) =
        (strtoul(l.word(2)), strtol(l.word(3)), strtol(l.word(4)))
    else {
        return Header::Done(error(BAD_FORMAT, noreply));
    };
    let cas = if mode == StoreMode::Cas {
        match strtoull(l.word(5)) {
            Some(c) => c,
            None => return Header::Done(error(BAD_FORMAT, noreply)),
        }
    } else {
        0
    };
    if !(0..=i32::MAX - 2).contains(&vlen) {
        return Header::Done(error(BAD_FORMAT, noreply));
    }
    let len = vlen as usize;
    if let Some(why) = refusal(len, limits) {
        return Header::Discard {
            len,
            req: Request::Refused {
                why,
                key: KeyBytes::Raw(key),
                deletes: mode == StoreMode::Set,
                noreply,
            },
        };
    }
    Header::Data {
        len,
        then: DataThen::Store(Store {
            mode,
            key,
            flags,
            exptime,
            data: &[],
            shared: None,
            cas,
            noreply,
        }),
    }
}

fn refusal(len: usize, limits: &Limits) -> Option<Refusal> {
    if len > limits.max_value {
        Some(Refusal::TooLarge)
    } else if limits.no_memory {
        Some(Refusal::NoMemory)
    } else {
        None
    }
}

fn arith<'a>(l: &Line<'a>) -> Request<'a> {
    let noreply = l.noreply();
    let key = l.word(1);
    if !key_ok(key) {
        return error(BAD_FORMAT, noreply);
    }
    let Some(delta) = strtoull(l.word(2)) else {
        return error("CLIENT_ERROR invalid numeric delta argument", noreply);
    };
    Request::Arith {
        incr: l.word(0) == b"incr",
        key,
        delta,
        noreply,
    }
}

fn delete<'a>(l: &Line<'a>) -> Request<'a> {
    let nt = l.ntokens();
    let noreply = l.noreply();
    if nt > 3 {
        let hold_is_zero = l.word(2) == b"0";
        let valid = (nt == 4 && (hold_is_zero || noreply)) || (nt == 5 && hold_is_zero && noreply);
        if !valid {
            return error(
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
                noreply,
            );
        }
    }
    let key = l.word(1);
    if !key_ok(key) {
        return error(BAD_FORMAT, noreply);
    }
    Request::Delete { key, noreply }
}

fn touch<'a>(l: &Line<'a>) -> Request<'a> {
    let noreply = l.noreply();
    let key = l.word(1);
    if !key_ok(key) {
        return error(BAD_FORMAT, noreply);
    }
    let Some(exptime) = strtol(l.word(2)) else {
        return error(BAD_EXPTIME, noreply);
    };
    Request::Touch {
        key,
        exptime,
        noreply,
    }
}

fn flush_all<'a>(l: &Line<'a>) -> Request<'a> {
    let noreply = l.noreply();
    let bare = if noreply { 3 } else { 2 };
    let delay = if l.ntokens() != bare {
        match strtol(l.word(1)) {
            Some(d) => d,
            None => return error(BAD_EXPTIME, noreply),
        }
    } else {
        0
    };
    Request::FlushAll { delay, noreply }
}

fn verbosity<'a>(l: &Line<'a>) -> Request<'a> {
    let noreply = l.noreply();
    match strtoul(l.word(1)) {
        Some(level) => Request::Verbosity { level, noreply },
        None => error(BAD_FORMAT, noreply),
    }
}

/// me <key> [b] (memcached `process_meta_command`).
fn meta_debug<'a>(l: &Line<'a>) -> Request<'a> {
    let raw = l.word(1);
    if l.ntokens() < 3 || raw.len() > KEY_MAX {
        return error(BAD_FORMAT, false);
    }
    let key = if l.ntokens() >= 4 && l.word(2) == b"b" {
        match decode_key(raw) {
            Some(k) => k,
            None => return error(BAD_FORMAT, false),
        }
    } else if !key_ok(raw) {
        return error(BAD_FORMAT, false);
    } else {
        KeyBytes::Raw(raw)
    };
    Request::MetaDebug { key }
}

fn decode_key(raw: &[u8]) -> Option<KeyBytes<'static>> {
    let mut buf = [0u8; 192];
    let len = base64::decode(raw, &mut buf)?;
    Some(KeyBytes::Decoded(buf[..len].into()))
}

/// Largest number of words (command and key included) a meta command may
/// have: memcached refuses more than `MFLAG_MAX_OPT_LENGTH` (20) tokens,
/// its terminal token included.
const META_WORDS_MAX: usize = 19;

/// mg, md and ma (memcached `process_mget_command` and friends, up to the
/// item lookup).
fn meta<'a>(l: &Line<'a>, cmd: MetaCmd) -> Request<'a> {
    if l.ntokens() < 3 {
        return error(ERROR, false);
    }
    let raw = l.word(1);
    if raw.len() > KEY_MAX {
        return error(BAD_FORMAT, false);
    }
    if l.n > META_WORDS_MAX || l.more {
        let msg = if cmd == MetaCmd::Get {
            "CLIENT_ERROR options flags are too long"
        } else {
            "CLIENT_ERROR options flags too long"
        };
        return error(msg, false);
    }
    let parsed = flags(l, 2);
    let (key, flags) = match parsed {
        Ok(x) => x,
        // md and ma report any flag problem in one message.
        Err(msg) if cmd != MetaCmd::Get => {
            let _ = msg;
            return error("CLIENT_ERROR invalid or duplicate flag", false);
        }
        Err(msg) => return error(msg, false),
    };
    if let Err(msg) = check_meta(cmd, &flags) {
        return error(msg, false);
    }
    if !flags.base64 && !key_ok(raw) {
        return error(BAD_FORMAT, false);
    }
    Request::Meta(Meta {
        cmd,
        key,
        flags,
        data: &[],
        shared: None,
    })
}

/// Checks that come after the flags are parsed: the opaque length (Cairn
/// checks it before touching the item, memcached while writing the reply)
/// and the mode letter of ma.
fn check_meta(cmd: MetaCmd, f: &MetaFlags) -> Result<(), &'static str> {
    if f.words().any(|w| w[0] == b'O' && w.len() > OPAQUE_MAX) {
        return Err("CLIENT_ERROR opaque token too long");
    }
    match (cmd, f.mode) {
        (MetaCmd::Arith, Some(m)) if !matches!(m, b'I' | b'+' | b'D' | b'-') => {
            Err("CLIENT_ERROR invalid mode for ma M token")
        }
        (MetaCmd::Set, Some(m)) if !matches!(m, b'E' | b'A' | b'P' | b'R' | b'S') => {
            Err("CLIENT_ERROR invalid mode for ms M token")
        }
        _ => Ok(()),
    }
}

/// ms <key> <datalen> <flags>* (memcached `process_mset_command`).
fn meta_set<'a>(l: &Line<'a>, limits: &Limits) -> Header<'a> {
    let nt = l.ntokens();
    if nt < 3 {
        return Header::Done(error(ERROR, false));
    }
    let raw = l.word(1);
    if raw.len() > KEY_MAX || nt == 3 {
        return Header::Done(error(BAD_FORMAT, false));
    }
    if l.n > META_WORDS_MAX || l.more {
        return Header::Done(error("CLIENT_ERROR options flags too long", false));
    }
    let vlen = match strtol(l.word(2)) {
        Some(v) if (0..=i32::MAX - 2).contains(&v) => v as usize,
        _ => return Header::Done(error(BAD_FORMAT, false)),
    };
    // From here on an error still discards the data block.
    let discard = |msg| Header::Discard {
        len: vlen,
        req: error(msg, false),
    };
    let (key, flags) = match flags(l, 3) {
        Ok(x) => x,
        Err(msg) => return discard(msg),
    };
    if let Err(msg) = check_meta(MetaCmd::Set, &flags) {
        return discard(msg);
    }
    if !flags.base64 && !key_ok(raw) {
        return discard(BAD_FORMAT);
    }
    if let Some(why) = refusal(vlen, limits) {
        return Header::Discard {
            len: vlen,
            req: Request::Refused {
                why,
                key,
                deletes: true,
                noreply: false,
            },
        };
    }
    Header::Data {
        len: vlen,
        then: DataThen::Meta(Meta {
            cmd: MetaCmd::Set,
            key,
            flags,
            data: &[],
            shared: None,
        }),
    }
}

const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";

/// memcached `_meta_flag_preparse`: each word's first byte is a flag;
/// a flag may appear once. Errors found along the way are remembered and
/// the last one is reported, as memcached keeps overwriting `errstr`;
/// an unknown or repeated flag stops at once.
fn flags<'a>(l: &Line<'a>, first: usize) -> Result<(KeyBytes<'a>, MetaFlags<'a>), &'static str> {
    let raw_key = l.word(1);
    let mut f = MetaFlags {
        text: l.from(first).rest,
        delta: 1,
        ..MetaFlags::default()
    };
    let mut key = KeyBytes::Raw(raw_key);
    let mut seen = [false; 128];
    let mut err: Option<&'static str> = None;
    for &w in &l.words[first.min(l.n)..l.n] {
        let o = w[0];
        if o >= 127 || seen[o as usize] {
            return Err("CLIENT_ERROR duplicate flag");
        }
        seen[o as usize] = true;
        let arg = &w[1..];
        match o {
            b'b' => {
                f.base64 = true;
                match decode_key(raw_key) {
                    Some(k) => key = k,
                    None => err = Some("CLIENT_ERROR error decoding key"),
                }
            }
            b'N' | b'T' | b'R' => match strtol(arg) {
                Some(t) => match o {
                    b'N' => f.vivify = Some(t),
                    b'T' => f.ttl = Some(t),
                    _ => f.recache = Some(t),
                },
                None => err = Some(BAD_TOKEN),
            },
            b'l' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'h' => {}
            b'v' => f.value = true,
            b'u' => f.no_bump = true,
            b'q' => f.quiet = true,
            b'F' => match strtoul(arg) {
                Some(v) => f.client_flags = v,
                // memcached sets has_error without a message of its own:
                // the last message set, or its initial generic one.
                None => err = err.or(Some(BAD_FORMAT)),
            },
            b'C' => match strtoull(arg) {
                Some(v) => f.compare_cas = Some(v),
                None => err = Some(BAD_TOKEN),
            },
            b'M' => {
                if w.len() != 2 {
                    err = Some("CLIENT_ERROR incorrect length for M token");
                } else {
                    f.mode = Some(w[1]);
                }
            }
            b'J' => match strtoull(arg) {
                Some(v) => f.initial = v,
                None => err = Some("CLIENT_ERROR invalid numeric initial value"),
            },
            b'D' => match strtoull(arg) {
                Some(v) => f.delta = v,
                None => err = Some("CLIENT_ERROR invalid numeric delta value"),
            },
            b'I' => f.invalidate = true,
            _ => return Err("CLIENT_ERROR invalid flag"),
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok((key, f)),
    }
}

#[cfg(test)]
mod tests;
