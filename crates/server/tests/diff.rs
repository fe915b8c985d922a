//! Differential test: runs every corpus file in `tests/diff/*.txt` (repo
//! root) against a reference redis-server and against Cairn, in lockstep,
//! and compares the exact reply bytes. See `tests/diff/README.md` for the
//! corpus syntax and `tests/diff/DIFFERENCES.md` for the replies that are
//! allowed to differ.
//!
//! Environment:
//! - `CAIRN_DIFF_FILES=strings,hash` runs only the files whose name contains
//!   one of the comma-separated parts.
//! - `CAIRN_DIFF_SELF_CHECK=1` runs the corpus against a second redis-server
//!   instead of Cairn: every line must then match (lines listed in
//!   DIFFERENCES.md are run but not compared). This proves the corpus is
//!   deterministic; use it after editing the corpus.
//! - `CAIRN_DIFF_VERBOSE=1` prints every step with the reference reply.
//! - `CI`: a missing redis-server fails instead of skipping.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_protocol::resp::{self, Frame};
use support::{escape, start_cairn, start_redis, unescape, RawConn, Server};

/// Stop printing details after this many mismatches in one file.
const MAX_SHOWN_PER_FILE: usize = 30;
/// How much of a long reply a report shows.
const SHOW_BYTES: usize = 600;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/diff")
}

// ---------------------------------------------------------------- corpus ---

/// How two replies are compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Byte for byte.
    Exact,
    /// `!sorted`: elements of the top-level aggregate (and of aggregates
    /// directly inside it) are compared as multisets.
    Sorted,
    /// `!sortedpairs`: a flat array is taken as consecutive (field, value)
    /// pairs, compared as a multiset of pairs (maps: their pairs).
    SortedPairs,
    /// `!shape`: only frame types and aggregate lengths, recursively (and
    /// the text of errors).
    Shape,
    /// `!masknum`: every number (a run of ASCII digits, with any decimal
    /// point inside it) counts as `0`.
    MaskNum,
    /// `!noreply`: nothing is read (a later reply would then be out of step).
    NoReply,
    /// `!scanall`: a SCAN/HSCAN command (cursor argument `0`) is repeated
    /// with the returned cursor until it is 0; the compared reply is
    /// `*2 0 [union of the elements, sorted, duplicates removed]` (HSCAN:
    /// field-value pairs). An error reply ends the iteration and is compared.
    ScanAll,
}

#[derive(Clone, Debug)]
enum Op {
    /// A command, sent as a RESP multibulk. An argument `$id:NAME` is
    /// replaced by the CLIENT ID of connection NAME on that server.
    Cmd(Vec<Vec<u8>>),
    /// `@raw BYTES`: send bytes, read one reply, check whether the
    /// connection is then closed.
    Raw(Vec<u8>),
    /// `@read`: read one more reply on the current connection (and check,
    /// like `@raw`, whether the connection is then closed).
    Read,
    /// `@sleep MS`
    Sleep(u64),
    /// `@conn NAME`: switch to connection NAME (opened on first use).
    Conn(String),
    /// `@reconnect`: replace the current connection by a fresh one.
    Reconnect,
}

#[derive(Clone, Debug)]
struct Step {
    line: usize,
    /// The trimmed source line (what DIFFERENCES.md refers to).
    text: String,
    mode: Mode,
    op: Op,
}

struct CorpusFile {
    name: String,
    steps: Vec<Step>,
    /// All trimmed non-comment lines, for validating DIFFERENCES.md.
    texts: BTreeSet<String>,
}

fn parse_line(text: &str) -> Result<(Mode, Op), String> {
    let mut rest = text;
    let mut mode = Mode::Exact;
    while rest.starts_with('!') {
        let (word, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let m = match word {
            "!sorted" => Mode::Sorted,
            "!sortedpairs" => Mode::SortedPairs,
            "!shape" => Mode::Shape,
            "!masknum" => Mode::MaskNum,
            "!noreply" => Mode::NoReply,
            "!scanall" => Mode::ScanAll,
            _ => return Err(format!("unknown prefix {word:?}")),
        };
        if mode != Mode::Exact {
            return Err("more than one ! prefix".into());
        }
        mode = m;
        rest = tail.trim_start();
    }
    let op = if let Some(d) = rest.strip_prefix('@') {
        let (word, arg) = d
            .split_once(char::is_whitespace)
            .map(|(w, a)| (w, a.trim()))
            .unwrap_or((d, ""));
        let no_arg = |op: Op| {
            if arg.is_empty() {
                Ok(op)
            } else {
                Err(format!("@{word} takes no argument"))
            }
        };
        let op = match word {
            "raw" if !arg.is_empty() => Op::Raw(unescape(arg)?),
            "read" => no_arg(Op::Read)?,
            "reconnect" => no_arg(Op::Reconnect)?,
            "sleep" => Op::Sleep(
                arg.parse()
                    .map_err(|_| format!("@sleep needs milliseconds, got {arg:?}"))?,
            ),
            "conn" if !arg.is_empty() && !arg.contains(char::is_whitespace) => {
                Op::Conn(arg.to_string())
            }
            _ => return Err(format!("unknown or malformed directive @{word}")),
        };
        if mode != Mode::Exact && !matches!(op, Op::Raw(_) | Op::Read) {
            return Err(format!("a ! prefix does not apply to @{word}"));
        }
        if mode == Mode::NoReply && matches!(op, Op::Read) {
            return Err("!noreply @read makes no sense".into());
        }
        op
    } else {
        let args = resp::split_inline_args(rest.as_bytes()).ok_or("unbalanced quotes")?;
        if args.is_empty() {
            return Err("empty command".into());
        }
        if mode == Mode::ScanAll && scan_layout(&args).is_none() {
            return Err("!scanall needs SCAN 0 ... or HSCAN key 0 ...".into());
        }
        Op::Cmd(args)
    };
    if mode == Mode::ScanAll && !matches!(op, Op::Cmd(_)) {
        return Err("!scanall applies to commands only".into());
    }
    Ok((mode, op))
}

fn parse_corpus_file(name: &str, src: &str) -> Result<CorpusFile, Vec<String>> {
    let mut steps = Vec::new();
    let mut texts = BTreeSet::new();
    let mut errors = Vec::new();
    for (i, raw) in src.lines().enumerate() {
        let text = raw.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        match parse_line(text) {
            Ok((mode, op)) => {
                texts.insert(text.to_string());
                steps.push(Step {
                    line: i + 1,
                    text: text.to_string(),
                    mode,
                    op,
                });
            }
            Err(e) => errors.push(format!("{name}:{}: {e}: {text}", i + 1)),
        }
    }
    if errors.is_empty() {
        Ok(CorpusFile {
            name: name.to_string(),
            steps,
            texts,
        })
    } else {
        Err(errors)
    }
}

fn load_corpus() -> (Vec<CorpusFile>, Vec<String>) {
    let dir = corpus_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read corpus dir {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".txt"))
        .collect();
    names.sort();
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for name in names {
        let src = std::fs::read_to_string(dir.join(&name))
            .unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
        match parse_corpus_file(&name, &src) {
            Ok(f) => files.push(f),
            Err(mut e) => errors.append(&mut e),
        }
    }
    (files, errors)
}

/// Splits a Markdown table row on `|`, honouring `\|`.
fn table_cells(row: &str) -> Vec<String> {
    let row = row.trim();
    let inner = row.strip_prefix('|').unwrap_or(row);
    let inner = inner
        .strip_suffix('|')
        .filter(|s| !s.ends_with('\\'))
        .unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// `(file, line text) -> reason` from DIFFERENCES.md.
fn load_differences(files: &[CorpusFile]) -> (BTreeMap<(String, String), String>, Vec<String>) {
    let path = corpus_dir().join("DIFFERENCES.md");
    let src = std::fs::read_to_string(&path).unwrap_or_default();
    let mut map = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, row) in src.lines().enumerate() {
        if !row.trim_start().starts_with('|') {
            continue;
        }
        let cells = table_cells(row);
        let at = format!("DIFFERENCES.md:{}", i + 1);
        if cells
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|c| matches!(c, '-' | ':' | ' ')))
        {
            continue; // separator row
        }
        if cells.len() != 3 {
            errors.push(format!(
                "{at}: expected 3 cells | file | command | reason |"
            ));
            continue;
        }
        if cells[0].eq_ignore_ascii_case("file") {
            continue; // header row
        }
        let file = cells[0].trim_matches('`').to_string();
        let cmd = cells[1].trim_matches('`').trim().to_string();
        if cells[2].is_empty() {
            errors.push(format!("{at}: no reason given"));
        }
        match files.iter().find(|f| f.name == file) {
            None => errors.push(format!("{at}: no corpus file {file:?}")),
            Some(f) if !f.texts.contains(&cmd) => {
                errors.push(format!("{at}: {file} has no line {cmd:?}"))
            }
            Some(_) => {}
        }
        if map
            .insert((file.clone(), cmd.clone()), cells[2].clone())
            .is_some()
        {
            errors.push(format!("{at}: duplicate entry {file} {cmd:?}"));
        }
    }
    (map, errors)
}

/// For `!scanall`: (index of the cursor argument, whether elements come in
/// field-value pairs).
fn scan_layout(args: &[Vec<u8>]) -> Option<(usize, bool)> {
    let name = args.first()?.to_ascii_lowercase();
    let (idx, pairs) = match name.as_slice() {
        b"scan" => (1, false),
        b"sscan" => (2, false),
        b"hscan" | b"zscan" => (2, true),
        _ => return None,
    };
    (args.get(idx).map(|a| a.as_slice()) == Some(b"0")).then_some((idx, pairs))
}

/// `(cursor, elements)` of a SCAN-family reply.
fn scan_reply(bytes: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    let Frame::Array(parts) = decode(bytes)? else {
        return None;
    };
    let [Frame::Bulk(cursor), Frame::Array(items)] = parts.as_slice() else {
        return None;
    };
    let items = items.iter().map(|i| match i {
        Frame::Bulk(b) => Some(b.clone()),
        _ => None,
    });
    Some((cursor.clone(), items.collect::<Option<Vec<_>>>()?))
}

// --------------------------------------------------------------- running ---

#[derive(Clone, PartialEq, Eq)]
enum Outcome {
    Reply(Vec<u8>),
    /// EOF instead of a reply.
    Closed,
    /// Nothing read (`!noreply`, or a directive).
    Nothing,
    /// No connection to send on (it was closed earlier).
    NotConnected,
    /// Timeout or I/O error; the connection is dropped.
    Failed(String),
}

#[derive(Clone)]
struct StepResult {
    outcome: Outcome,
    /// For `@raw`: whether the connection was closed afterwards.
    closed_after: Option<bool>,
}

struct Side {
    label: &'static str,
    server: Server,
    /// Connections by name; `None` = closed by the server.
    conns: HashMap<String, Option<RawConn>>,
    ids: HashMap<String, Vec<u8>>,
    current: String,
    admin: Option<RawConn>,
}

impl Side {
    fn new(label: &'static str, server: Server) -> Side {
        Side {
            label,
            server,
            conns: HashMap::new(),
            ids: HashMap::new(),
            current: String::new(),
            admin: None,
        }
    }

    fn begin_file(&mut self) {
        self.conns.clear();
        self.ids.clear();
        self.current = "main".to_string();
    }

    /// The named connection, opened on first use. `Err(NotConnected)` if the
    /// server closed it earlier, `Err(Failed)` if it cannot be opened.
    fn conn(&mut self, name: &str) -> Result<&mut RawConn, Outcome> {
        if !self.conns.contains_key(name) {
            let c = RawConn::try_connect(self.server.port).map_err(|e| {
                Outcome::Failed(format!("cannot connect to port {}: {e}", self.server.port))
            })?;
            self.conns.insert(name.to_string(), Some(c));
        }
        self.conns
            .get_mut(name)
            .and_then(|c| c.as_mut())
            .ok_or(Outcome::NotConnected)
    }

    /// Runs a setup command on the long-lived admin connection; returns the
    /// reply (reconnecting once if the connection was lost).
    fn admin_cmd(&mut self, args: &[&str]) -> Result<Vec<u8>, String> {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut out = Vec::new();
        resp::encode_command(&bytes, &mut out);
        // A file may have killed the admin connection (CLIENT KILL): if the
        // send fails, or the connection is seen closed, use a new one.
        let sent = match self.admin.as_mut() {
            Some(c) => !c.is_closed_within(Duration::ZERO) && c.try_send_raw(&out).is_ok(),
            None => false,
        };
        if !sent {
            let mut c =
                RawConn::try_connect(self.server.port).map_err(|e| format!("connect: {e}"))?;
            c.try_send_raw(&out).map_err(|e| e.to_string())?;
            self.admin = Some(c);
        }
        let c = self.admin.as_mut().unwrap();
        match c.try_read_raw_reply() {
            Ok(Some(r)) => Ok(r),
            Ok(None) => {
                self.admin = None;
                Err("connection closed".into())
            }
            Err(e) => {
                self.admin = None;
                Err(e.to_string())
            }
        }
    }

    fn client_id(&mut self, name: &str) -> Result<Vec<u8>, String> {
        if let Some(id) = self.ids.get(name) {
            return Ok(id.clone());
        }
        let c = self
            .conn(name)
            .map_err(|_| format!("$id:{name}: no connection {name}"))?;
        c.try_send_raw(b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n")
            .map_err(|e| e.to_string())?;
        let reply = c
            .try_read_raw_reply()
            .map_err(|e| e.to_string())?
            .ok_or("closed")?;
        let id = reply
            .strip_prefix(b":")
            .and_then(|r| r.strip_suffix(b"\r\n"))
            .ok_or_else(|| format!("CLIENT ID replied {}", escape(&reply)))?
            .to_vec();
        self.ids.insert(name.to_string(), id.clone());
        Ok(id)
    }

    /// Runs one step. `close_wait`: how long to wait for the server to close
    /// the connection after a `@raw`/`@read` reply before calling it open.
    fn run(&mut self, step: &Step, close_wait: Duration) -> StepResult {
        let none = StepResult {
            outcome: Outcome::Nothing,
            closed_after: None,
        };
        let bytes = match &step.op {
            Op::Sleep(_) => return none,
            Op::Conn(name) => {
                self.current = name.clone();
                return none;
            }
            Op::Reconnect => {
                let name = self.current.clone();
                self.conns.remove(&name);
                self.ids.remove(&name);
                return none;
            }
            Op::Cmd(args) => {
                let mut subst = Vec::with_capacity(args.len());
                for a in args {
                    match a.strip_prefix(b"$id:") {
                        Some(n) => match self.client_id(&String::from_utf8_lossy(n)) {
                            Ok(id) => subst.push(id),
                            Err(e) => {
                                return StepResult {
                                    outcome: Outcome::Failed(e),
                                    closed_after: None,
                                }
                            }
                        },
                        None => subst.push(a.clone()),
                    }
                }
                let refs: Vec<&[u8]> = subst.iter().map(|a| a.as_slice()).collect();
                let mut out = Vec::new();
                resp::encode_command(&refs, &mut out);
                Some(out)
            }
            Op::Raw(b) => Some(b.clone()),
            Op::Read => None,
        };
        let current = self.current.clone();
        let conn = match self.conn(&current) {
            Ok(c) => c,
            Err(outcome) => {
                return StepResult {
                    outcome,
                    closed_after: None,
                }
            }
        };
        if let Some(b) = &bytes {
            if conn.try_send_raw(b).is_err() {
                // The server closed the connection (and we noticed on write).
                self.conns.insert(current, None);
                return StepResult {
                    outcome: Outcome::Closed,
                    closed_after: None,
                };
            }
        }
        if step.mode == Mode::NoReply {
            return none;
        }
        let outcome = match (&step.op, step.mode) {
            (Op::Cmd(args), Mode::ScanAll) => scan_all(conn, args),
            _ => match conn.try_read_raw_reply() {
                Ok(Some(r)) => Outcome::Reply(r),
                Ok(None) => Outcome::Closed,
                Err(e) => Outcome::Failed(e.to_string()),
            },
        };
        let mut closed_after = None;
        if matches!(outcome, Outcome::Reply(_)) && matches!(step.op, Op::Raw(_) | Op::Read) {
            closed_after = Some(conn.is_closed_within(close_wait));
        }
        if !matches!(outcome, Outcome::Reply(_)) || closed_after == Some(true) {
            self.conns.insert(current, None);
        }
        StepResult {
            outcome,
            closed_after,
        }
    }
}

/// Runs a SCAN-family command to completion (the first call was sent).
fn scan_all(conn: &mut RawConn, args: &[Vec<u8>]) -> Outcome {
    let (idx, pairs) = scan_layout(args).expect("checked when parsing");
    let mut all: BTreeSet<Vec<Vec<u8>>> = BTreeSet::new();
    for round in 0..100_000 {
        let raw = match conn.try_read_raw_reply() {
            Ok(Some(r)) => r,
            Ok(None) => return Outcome::Closed,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let Some((cursor, items)) = scan_reply(&raw) else {
            return Outcome::Reply(raw); // an error, or not a scan reply at all
        };
        if pairs && items.len() % 2 != 0 {
            return Outcome::Reply(raw);
        }
        all.extend(items.chunks(if pairs { 2 } else { 1 }).map(|c| c.to_vec()));
        if cursor == b"0" {
            let elems: Vec<Frame> = all.into_iter().flatten().map(Frame::Bulk).collect();
            let mut out = Vec::new();
            resp::encode_frame(
                &Frame::Array(vec![Frame::Bulk(b"0".to_vec()), Frame::Array(elems)]),
                &mut out,
            );
            return Outcome::Reply(out);
        }
        if round == 99_999 {
            break;
        }
        let mut next: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        next[idx] = &cursor;
        let mut out = Vec::new();
        resp::encode_command(&next, &mut out);
        if let Err(e) = conn.try_send_raw(&out) {
            return Outcome::Failed(e.to_string());
        }
    }
    Outcome::Failed("SCAN did not finish after 100000 calls".into())
}

// ------------------------------------------------------------ comparison ---

fn decode(bytes: &[u8]) -> Option<Frame> {
    match resp::decode_frame(bytes) {
        Ok(Some((f, n))) if n == bytes.len() => Some(f),
        _ => None,
    }
}

fn encoded(f: &Frame) -> Vec<u8> {
    let mut out = Vec::new();
    resp::encode_frame(f, &mut out);
    out
}

fn header(t: u8, n: usize) -> Vec<u8> {
    format!("{}{}\r\n", t as char, n).into_bytes()
}

/// The type byte and elements of an aggregate (maps flattened).
fn aggregate(f: &Frame) -> Option<(u8, Vec<&Frame>)> {
    Some(match f {
        Frame::Array(v) => (b'*', v.iter().collect()),
        Frame::Set(v) => (b'~', v.iter().collect()),
        Frame::Push(v) => (b'>', v.iter().collect()),
        Frame::Map(v) => (b'%', v.iter().flat_map(|(k, x)| [k, x]).collect()),
        Frame::Attribute(v) => (b'|', v.iter().flat_map(|(k, x)| [k, x]).collect()),
        _ => return None,
    })
}

/// Canonical bytes of `f` with aggregate elements sorted, down to `depth`
/// nested levels. Map entries are sorted as pairs.
fn sorted_canon(f: &Frame, depth: usize, pairs: bool) -> Vec<u8> {
    let Some((t, elems)) = aggregate(f) else {
        return encoded(f);
    };
    if depth == 0 {
        return encoded(f);
    }
    let pairwise = matches!(t, b'%' | b'|') || (pairs && t == b'*' && elems.len() % 2 == 0);
    let mut items: Vec<Vec<u8>> = if pairwise {
        elems
            .chunks(2)
            .map(|p| {
                p.iter()
                    .flat_map(|e| sorted_canon(e, depth - 1, false))
                    .collect()
            })
            .collect()
    } else {
        elems
            .iter()
            .map(|e| sorted_canon(e, depth - 1, false))
            .collect()
    };
    items.sort();
    let mut out = header(t, elems.len());
    items.into_iter().for_each(|i| out.extend(i));
    out
}

fn shape(f: &Frame, out: &mut String) {
    let tag = match f {
        Frame::Simple(_) => "simple",
        Frame::Error(_) => "error",
        Frame::Integer(_) => "integer",
        Frame::Bulk(_) => "bulk",
        Frame::NullBulk => "nullbulk",
        Frame::NullArray => "nullarray",
        Frame::Null => "null",
        Frame::Double(_) => "double",
        Frame::Boolean(_) => "boolean",
        Frame::BigNumber(_) => "bignumber",
        Frame::Verbatim { .. } => "verbatim",
        Frame::BlobError(_) => "bloberror",
        Frame::Array(_) => "array",
        Frame::Map(_) => "map",
        Frame::Set(_) => "set",
        Frame::Push(_) => "push",
        Frame::Attribute(_) => "attribute",
        #[allow(unreachable_patterns)]
        _ => "other",
    };
    out.push_str(tag);
    // Errors are deterministic: their text is compared even here.
    if let Frame::Error(e) | Frame::BlobError(e) = f {
        out.push_str(&format!("({})", escape(e)));
    }
    if let Some((_, elems)) = aggregate(f) {
        out.push_str(&format!("({})[", elems.len()));
        for (i, e) in elems.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            shape(e, out);
        }
        out.push(']');
    }
}

fn mask_digits(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    for (i, &c) in b.iter().enumerate() {
        // A decimal point inside a number belongs to it: "0.001" and "0"
        // (ACL LOG's age-seconds a millisecond apart) both read as "0".
        let in_number = c == b'.'
            && i > 0
            && b[i - 1].is_ascii_digit()
            && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if in_number {
            continue;
        }
        if c.is_ascii_digit() {
            if i == 0
                || !(b[i - 1].is_ascii_digit()
                    || b[i - 1] == b'.' && i >= 2 && b[i - 2].is_ascii_digit())
            {
                out.push(b'0');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What is compared for a reply under `mode`.
fn normalize(mode: Mode, bytes: &[u8]) -> Vec<u8> {
    match mode {
        Mode::Exact | Mode::NoReply | Mode::ScanAll => bytes.to_vec(),
        Mode::MaskNum => mask_digits(bytes),
        Mode::Sorted | Mode::SortedPairs | Mode::Shape => match decode(bytes) {
            None => bytes.to_vec(),
            Some(f) => match mode {
                Mode::Shape => {
                    let mut s = String::new();
                    shape(&f, &mut s);
                    s.into_bytes()
                }
                _ => sorted_canon(&f, 2, mode == Mode::SortedPairs),
            },
        },
    }
}

fn same(mode: Mode, a: &StepResult, b: &StepResult) -> bool {
    if a.closed_after != b.closed_after {
        return false;
    }
    match (&a.outcome, &b.outcome) {
        (Outcome::Reply(x), Outcome::Reply(y)) => {
            x == y || normalize(mode, x) == normalize(mode, y)
        }
        (Outcome::Failed(_), _) | (_, Outcome::Failed(_)) => false,
        (x, y) => x == y,
    }
}

fn show_bytes(b: &[u8], from: usize) -> String {
    if b.len() <= SHOW_BYTES {
        return escape(b);
    }
    let start = from.saturating_sub(SHOW_BYTES / 4).min(b.len());
    let end = (start + SHOW_BYTES).min(b.len());
    format!(
        "{}{}{} ({} bytes)",
        if start > 0 { "..." } else { "" },
        escape(&b[start..end]),
        if end < b.len() { "..." } else { "" },
        b.len()
    )
}

fn describe(r: &StepResult, diff_at: usize) -> String {
    let mut s = match &r.outcome {
        Outcome::Reply(b) => show_bytes(b, diff_at),
        Outcome::Closed => "<connection closed>".into(),
        Outcome::Nothing => "<nothing read>".into(),
        Outcome::NotConnected => "<no connection: closed earlier>".into(),
        Outcome::Failed(e) => format!("<failed: {e}>"),
    };
    match r.closed_after {
        Some(true) => s.push_str("  <then closed>"),
        Some(false) => s.push_str("  <then still open>"),
        None => {}
    }
    s
}

fn first_difference(a: &StepResult, b: &StepResult) -> usize {
    match (&a.outcome, &b.outcome) {
        (Outcome::Reply(x), Outcome::Reply(y)) => {
            x.iter().zip(y).take_while(|(p, q)| p == q).count()
        }
        _ => 0,
    }
}

// ---------------------------------------------------------------- driver ---

fn file_filter() -> Option<Vec<String>> {
    let v = std::env::var("CAIRN_DIFF_FILES").ok()?;
    let parts: Vec<String> = v
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!parts.is_empty()).then_some(parts)
}

/// Commands sent on a separate long-lived connection before each file, so
/// that every file starts from the same state.
const RESET: &[&[&str]] = &[
    &["CONFIG", "SET", "requirepass", ""],
    &["CLIENT", "UNPAUSE"],
    &["FLUSHALL"],
    &["CONFIG", "SET", "maxmemory", "0"],
    &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    &["CONFIG", "SET", "hash-max-listpack-entries", "128"],
    &["CONFIG", "SET", "hash-max-listpack-value", "64"],
    &["CONFIG", "SET", "zset-max-listpack-entries", "128"],
    &["CONFIG", "SET", "zset-max-listpack-value", "64"],
    &["CONFIG", "SET", "slowlog-log-slower-than", "10000"],
    &["CONFIG", "SET", "slowlog-max-len", "128"],
    &["CONFIG", "RESETSTAT"],
    &["SLOWLOG", "RESET"],
];

#[test]
fn corpus_is_well_formed() {
    let (files, mut errors) = load_corpus();
    assert!(
        !files.is_empty() || !errors.is_empty(),
        "no corpus files in {}",
        corpus_dir().display()
    );
    let (_, diff_errors) = load_differences(&files);
    errors.extend(diff_errors);
    assert!(errors.is_empty(), "corpus errors:\n{}", errors.join("\n"));
}

#[test]
fn redis_differential() {
    let (files, mut errors) = load_corpus();
    let (expected, diff_errors) = load_differences(&files);
    errors.extend(diff_errors);
    assert!(errors.is_empty(), "corpus errors:\n{}", errors.join("\n"));

    let self_check = env_flag("CAIRN_DIFF_SELF_CHECK");
    let Some(redis) = start_redis(&[]) else {
        eprintln!(
            "diff: redis-server not found (PATH or $REDIS_SERVER); skipping the differential test"
        );
        return;
    };
    let (other, other_label) = if self_check {
        (start_redis(&[]).expect("second redis-server"), "redis#2")
    } else {
        (
            start_cairn(&[
                "--enable-debug-command",
                "yes",
                // Redis's defaults where Cairn's own differ (DIFFERENCES.md).
                "--hash-max-listpack-value",
                "64",
                "--zset-max-listpack-value",
                "64",
                // The test support's start sets 0 for replication tests;
                // the corpus compares CONFIG GET with Redis's default.
                "--repl-diskless-sync-delay",
                "5",
            ]),
            "cairn",
        )
    };
    let mut run = Run {
        a: Side::new("redis", redis),
        b: Side::new(other_label, other),
        verbose: env_flag("CAIRN_DIFF_VERBOSE"),
        expected,
        report: Vec::new(),
        mismatches: 0,
        setup_failures: BTreeSet::new(),
        listed_ran: BTreeSet::new(),
        listed_differed: BTreeSet::new(),
        steps_run: 0,
        files_run: 0,
    };
    eprintln!(
        "diff: redis on port {}, {} on port {}{}",
        run.a.server.port,
        run.b.label,
        run.b.server.port,
        if self_check {
            " (self-check: corpus determinism)"
        } else {
            ""
        }
    );

    // In self-check mode, a few idle connections on the second server make
    // its client ids differ from the first's, so a line that shows an id
    // without a prefix is caught.
    let _padding: Vec<RawConn> = if self_check {
        (0..3).map(|_| run.b.server.conn()).collect()
    } else {
        Vec::new()
    };

    let filter = file_filter();
    let mut crashed = false;
    let mut previous = "startup".to_string();
    for file in &files {
        if let Some(f) = &filter {
            if !f.iter().any(|p| file.name.contains(p.as_str())) {
                continue;
            }
        }
        if run.check_alive(&previous) {
            crashed = true;
            break;
        }
        run.file(file);
        previous = file.name.clone();
    }
    if !crashed && run.check_alive(&previous) {
        crashed = true;
    }
    if !crashed && filter.is_none() {
        run.shutdown();
    }

    let mut stale = Vec::new();
    if !self_check && !crashed {
        for (key, reason) in &run.expected {
            if run.listed_ran.contains(key) && !run.listed_differed.contains(key) {
                stale.push(format!("{}: `{}` ({reason})", key.0, key.1));
            }
        }
    }
    eprintln!(
        "diff: {} steps in {} files, {} mismatches, {} listed differences ({} differed), {} stale",
        run.steps_run,
        run.files_run,
        run.mismatches,
        run.expected.len(),
        run.listed_differed.len(),
        stale.len()
    );
    let mut problems = Vec::new();
    if !run.setup_failures.is_empty() {
        problems.push(format!(
            "per-file setup commands failed (later mismatches may follow from this):\n  {}",
            run.setup_failures
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  ")
        ));
    }
    if !run.report.is_empty() {
        problems.push(format!(
            "{} mismatches (redis vs {}):\n\n{}",
            run.mismatches,
            run.b.label,
            run.report.join("\n\n")
        ));
    }
    if !stale.is_empty() {
        problems.push(format!(
            "stale DIFFERENCES.md entries (these lines now match Redis; remove them):\n  {}",
            stale.join("\n  ")
        ));
    }
    if !problems.is_empty() {
        panic!("differential test failed\n\n{}\n", problems.join("\n\n"));
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

/// State of one differential run: the reference side `a` (Redis) and the
/// side under test `b` (Cairn, or a second Redis in self-check mode).
struct Run {
    a: Side,
    b: Side,
    verbose: bool,
    expected: BTreeMap<(String, String), String>,
    report: Vec<String>,
    mismatches: usize,
    setup_failures: BTreeSet<String>,
    listed_ran: BTreeSet<(String, String)>,
    listed_differed: BTreeSet<(String, String)>,
    steps_run: usize,
    files_run: usize,
}

impl Run {
    /// Reports and returns true if a server has died or stopped answering.
    fn check_alive(&mut self, during: &str) -> bool {
        let mut dead = false;
        for side in [&mut self.a, &mut self.b] {
            let problem = match side.server.exit_status() {
                Some(st) => Some(format!("exited ({st})")),
                None => match side.admin_cmd(&["PING"]) {
                    Ok(r) if r.as_slice() == b"+PONG\r\n" => None,
                    Ok(r) => Some(format!("answered PING with {}", escape(&r))),
                    Err(e) => match side.server.wait_exit(Duration::from_secs(3)) {
                        Some(st) => Some(format!("exited ({st})")),
                        None => Some(format!("does not answer PING ({e})")),
                    },
                },
            };
            if let Some(p) = problem {
                dead = true;
                self.mismatches += 1;
                self.report.push(format!(
                    "{} {p} during {during}; the rest of the run was skipped. Last log lines:\n{}",
                    side.label,
                    side.server.log_tail(40)
                ));
            }
        }
        dead
    }

    fn file(&mut self, file: &CorpusFile) {
        self.files_run += 1;
        eprint!("diff: {:<28} {:>4} lines ... ", file.name, file.steps.len());
        for side in [&mut self.a, &mut self.b] {
            for cmd in RESET {
                let r = side.admin_cmd(cmd);
                if !matches!(&r, Ok(bytes) if bytes.as_slice() == b"+OK\r\n") {
                    let got = match r {
                        Ok(bytes) => escape(&bytes),
                        Err(e) => format!("<{e}>"),
                    };
                    self.setup_failures.insert(format!(
                        "{}: setup `{}` replied {got}",
                        side.label,
                        cmd.join(" ")
                    ));
                }
            }
            side.begin_file();
        }
        let mut shown = 0usize;
        let mut count = 0usize;
        let mut stopped = false;
        for step in &file.steps {
            self.steps_run += 1;
            // Redis closes a connection in the same event-loop turn as it
            // writes the last reply, so a short wait is enough there; give
            // the other server longer when Redis did close.
            let ra = self.a.run(step, Duration::from_millis(50));
            let wait_b = if ra.closed_after == Some(true) {
                2000
            } else {
                50
            };
            let rb = self.b.run(step, Duration::from_millis(wait_b));
            if let Op::Sleep(ms) = step.op {
                std::thread::sleep(Duration::from_millis(ms));
            }
            let key = (file.name.clone(), step.text.clone());
            let equal = same(step.mode, &ra, &rb);
            if self.verbose {
                let other = if equal {
                    String::new()
                } else {
                    format!("\n    {} => {}", self.b.label, describe(&rb, 0))
                };
                eprintln!(
                    "{}:{}: {}\n    => {}{other}",
                    file.name,
                    step.line,
                    step.text,
                    describe(&ra, 0)
                );
            }
            let mut problem = None;
            if self.expected.contains_key(&key) {
                self.listed_ran.insert(key.clone());
                if !equal {
                    self.listed_differed.insert(key);
                }
            } else if !equal {
                let at = first_difference(&ra, &rb);
                let how = match step.mode {
                    Mode::Exact | Mode::NoReply => "",
                    Mode::Sorted => " (compared as !sorted)",
                    Mode::SortedPairs => " (compared as !sortedpairs)",
                    Mode::Shape => " (compared as !shape)",
                    Mode::MaskNum => " (compared as !masknum)",
                    Mode::ScanAll => " (iterated to cursor 0: sorted union of all elements)",
                };
                problem = Some(format!(
                    "{}:{}: {}{how}\n    {:>7}: {}\n    {:>7}: {}",
                    file.name,
                    step.line,
                    step.text,
                    self.a.label,
                    describe(&ra, at),
                    self.b.label,
                    describe(&rb, at)
                ));
            }
            // After a lost connection the two sides are no longer in step.
            let lost_a = matches!(ra.outcome, Outcome::NotConnected | Outcome::Failed(_));
            let lost_b = matches!(rb.outcome, Outcome::NotConnected | Outcome::Failed(_));
            let mut stop = None;
            if lost_a || lost_b {
                if !self.a.server.is_running() || !self.b.server.is_running() {
                    stop = Some("a server exited".to_string());
                } else if ra.outcome == Outcome::NotConnected && rb.outcome == Outcome::NotConnected
                {
                    stop = Some(format!(
                        "corpus error: a command on a connection both servers had closed (use @reconnect): {}",
                        step.text
                    ));
                } else if lost_a != lost_b || matches!(ra.outcome, Outcome::Failed(_)) {
                    stop = Some("connection state diverged".to_string());
                }
            }
            if let Some(p) = problem {
                count += 1;
                self.mismatches += 1;
                if shown < MAX_SHOWN_PER_FILE {
                    shown += 1;
                    self.report.push(p);
                }
            }
            if let Some(why) = stop {
                self.mismatches += 1;
                stopped = true;
                self.report.push(format!(
                    "{}:{}: {why}; rest of the file skipped",
                    file.name, step.line
                ));
                break;
            }
        }
        if count > shown {
            self.report.push(format!(
                "{}: {} more mismatches not shown",
                file.name,
                count - shown
            ));
        }
        let status = match (count, stopped) {
            (0, false) => "ok".to_string(),
            (n, false) => format!("{n} MISMATCHES"),
            (n, true) => format!("{n} MISMATCHES, STOPPED"),
        };
        eprintln!("{status}");
    }

    /// SHUTDOWN NOSAVE: no reply, the connection closes, the process exits.
    fn shutdown(&mut self) {
        let mut outcomes = Vec::new();
        for side in [&mut self.a, &mut self.b] {
            let r = side.admin_cmd(&["SHUTDOWN", "NOSAVE"]);
            let exited = side.server.wait_exit(Duration::from_secs(10));
            outcomes.push(match (&r, exited) {
                (Err(_), Some(_)) => "connection closed, process exited".to_string(),
                (Ok(bytes), e) => format!("replied {}, exited: {}", escape(bytes), e.is_some()),
                (Err(err), None) => format!("<{err}>, process still running after 10 s"),
            });
        }
        eprintln!("diff: SHUTDOWN NOSAVE: {}: {}", self.b.label, outcomes[1]);
        if outcomes[0] != outcomes[1] {
            self.mismatches += 1;
            self.report.push(format!(
                "<runner>: SHUTDOWN NOSAVE\n    {:>7}: {}\n    {:>7}: {}",
                self.a.label, outcomes[0], self.b.label, outcomes[1]
            ));
        }
    }
}
