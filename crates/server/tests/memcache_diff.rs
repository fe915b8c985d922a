//! Differential test of the memcached protocol: runs every corpus file in
//! `tests/memcache_diff/*.txt` (repo root) against a real memcached 1.6
//! started by the test and against Cairn's memcached port, in lockstep,
//! and compares the reply bytes of every step. The corpus syntax is in
//! `tests/memcache_diff/README.md`; replies allowed to differ are listed in
//! `tests/memcache_diff/DIFFERENCES.md` (a listed step that no longer
//! differs fails the run, so the list stays honest).
//!
//! CAS values differ by design (memcached draws one at every store, Cairn
//! when a client first asks), so before comparing, each distinct CAS in a
//! file's replies is renamed `C1`, `C2`, ... in order of first appearance:
//! the replies must agree on which versions are the same and which differ.
//!
//! Environment:
//! - `CAIRN_MCDIFF_FILES=text,meta`: only files whose name contains one of
//!   the parts.
//! - `CAIRN_MCDIFF_SELF_CHECK=1`: run against a second memcached instead of
//!   Cairn; everything must match (listed differences are not compared).
//!   Proves the corpus deterministic.
//! - `CAIRN_MCDIFF_VERBOSE=1`: print every step with memcached's reply.
//! - `CI`: a missing memcached fails instead of skipping.

mod mc_support;
mod support;

use mc_support::{Conn, Memcached};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/memcache_diff")
}

/// How a step's replies are compared.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    Exact,
    /// `!masknum`: every run of digits counts as `0`.
    MaskNum,
    /// `!fields a,b`: only these `STAT` lines.
    Fields(Vec<String>),
    /// `!skip`: sent, read, not compared.
    Skip,
}

#[derive(Clone, Debug)]
enum Op {
    /// Bytes to send (lines with "\r\n", or `@raw` bytes as written).
    Send(Vec<u8>),
    Conn(String),
    Reconnect,
    Sleep(u64),
}

#[derive(Clone, Debug)]
struct Step {
    line_no: usize,
    /// The first line as written (prefix included): DIFFERENCES.md key.
    text: String,
    mode: Mode,
    op: Op,
}

/// Escapes: `\r \n \t \0 \\ \xHH`.
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'r' => out.push(b'\r'),
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'0' => out.push(0),
                b'\\' => out.push(b'\\'),
                b'x' if i + 3 < b.len() => {
                    let h = u8::from_str_radix(&s[i + 2..i + 4], 16).expect("bad \\x escape");
                    out.push(h);
                    i += 4;
                    continue;
                }
                c => panic!("unknown escape \\{}", c as char),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// `*N c`: N copies of the byte c (large data blocks).
fn repeat(cont: &str) -> Option<Vec<u8>> {
    let (n, c) = cont.strip_prefix('*')?.split_once(' ')?;
    let n: usize = n.parse().ok()?;
    let c = unescape(c);
    (c.len() == 1).then(|| vec![c[0]; n])
}

fn parse_corpus(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        if let Some(cont) = raw.strip_prefix('+') {
            let Some(Step {
                op: Op::Send(bytes),
                ..
            }) = steps.last_mut()
            else {
                panic!("line {line_no}: a '+' line continues a command line");
            };
            match repeat(cont) {
                Some(data) => bytes.extend_from_slice(&data),
                None => bytes.extend_from_slice(&unescape(cont)),
            }
            bytes.extend_from_slice(b"\r\n");
            continue;
        }
        let t = raw.trim_end();
        if t.trim().is_empty() || t.starts_with('#') {
            continue;
        }
        let (mode, rest) = if let Some(r) = t.strip_prefix("!skip ") {
            (Mode::Skip, r)
        } else if let Some(r) = t.strip_prefix("!masknum ") {
            (Mode::MaskNum, r)
        } else if let Some(r) = t.strip_prefix("!fields ") {
            let (names, r) = r.split_once(' ').expect("!fields NAMES command");
            (
                Mode::Fields(names.split(',').map(str::to_string).collect()),
                r,
            )
        } else {
            (Mode::Exact, t)
        };
        let op = if let Some(name) = rest.strip_prefix("@conn ") {
            Op::Conn(name.trim().to_string())
        } else if rest == "@reconnect" {
            Op::Reconnect
        } else if let Some(ms) = rest.strip_prefix("@sleep ") {
            Op::Sleep(ms.trim().parse().expect("@sleep MS"))
        } else if let Some(bytes) = rest.strip_prefix("@raw ") {
            Op::Send(unescape(bytes))
        } else {
            let mut b = unescape(rest);
            b.extend_from_slice(b"\r\n");
            Op::Send(b)
        };
        steps.push(Step {
            line_no,
            text: t.to_string(),
            mode,
            op,
        });
    }
    steps
}

/// DIFFERENCES.md: `| file | `step` | reason |` rows.
fn allowed_differences() -> HashMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(corpus_dir().join("DIFFERENCES.md"))
        .expect("tests/memcache_diff/DIFFERENCES.md");
    let mut map: HashMap<String, BTreeSet<String>> = HashMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        if cells.len() < 3 || !line.starts_with("| ") {
            continue;
        }
        let file = cells[0].trim_start_matches("| ").trim();
        let cmd = cells[1].trim();
        if !file.ends_with(".txt") || !cmd.starts_with('`') {
            continue;
        }
        let cmd = cmd.trim_matches('`').replace("\\|", "|");
        map.entry(file.to_string()).or_default().insert(cmd);
    }
    map
}

/// One side of the comparison: a server and its connections.
struct Side {
    port: u16,
    conns: BTreeMap<String, Conn>,
    current: String,
    /// The last CAS seen in a reply (for `$cas` in the corpus).
    last_cas: u64,
    /// CAS value -> its name in this file (`C1`, ...).
    cas_names: HashMap<u64, usize>,
}

impl Side {
    fn new(port: u16) -> Side {
        Side {
            port,
            conns: BTreeMap::new(),
            current: "main".into(),
            last_cas: 0,
            cas_names: HashMap::new(),
        }
    }

    fn conn(&mut self) -> &mut Conn {
        let port = self.port;
        let c = self
            .conns
            .entry(self.current.clone())
            .or_insert_with(|| Conn::connect(port));
        if c.closed {
            *c = Conn::connect(port);
        }
        c
    }

    /// `$cas`, `$cas+N`, `$cas-N` → this side's last CAS (plus/minus N).
    fn substitute(&self, bytes: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(bytes);
        if !text.contains("$cas") {
            return bytes.to_vec();
        }
        let mut out = Vec::new();
        let mut rest: &[u8] = bytes;
        while let Some(p) = find(rest, b"$cas") {
            out.extend_from_slice(&rest[..p]);
            rest = &rest[p + 4..];
            let mut v = self.last_cas as i128;
            if let Some(&sign) = rest.first() {
                if sign == b'+' || sign == b'-' {
                    let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    if digits > 0 {
                        let n: i128 = std::str::from_utf8(&rest[1..1 + digits])
                            .unwrap()
                            .parse()
                            .unwrap();
                        v = if sign == b'+' { v + n } else { v - n };
                        rest = &rest[1 + digits..];
                    }
                }
            }
            out.extend_from_slice(v.to_string().as_bytes());
        }
        out.extend_from_slice(rest);
        out
    }

    /// The reply with each CAS renamed (and the last one remembered).
    fn normalize(&mut self, reply: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < reply.len() {
            let end = find(&reply[i..], b"\r\n").map_or(reply.len(), |e| i + e);
            let line = &reply[i..end];
            let (line, data) = self.normalize_line(line);
            out.extend_from_slice(&line);
            i = (end + 2).min(reply.len());
            out.extend_from_slice(&reply[end.min(reply.len())..i]);
            if let Some(n) = data {
                // A data block follows: copy it as is.
                let stop = (i + n + 2).min(reply.len());
                out.extend_from_slice(&reply[i..stop]);
                i = stop;
            }
        }
        out
    }

    /// One reply line, its CAS fields renamed; and the length of the data
    /// block that follows it, if any.
    fn normalize_line(&mut self, line: &[u8]) -> (Vec<u8>, Option<usize>) {
        let text = String::from_utf8_lossy(line).into_owned();
        let words: Vec<&str> = text.split(' ').collect();
        let mut out: Vec<String> = Vec::new();
        let mut data = None;
        match words[0] {
            "VALUE" if words.len() >= 4 => {
                data = words[3].parse().ok();
                for (i, w) in words.iter().enumerate() {
                    if i == 4 {
                        out.push(self.cas_name(w, ""));
                    } else {
                        out.push(w.to_string());
                    }
                }
            }
            "VA" | "HD" | "NS" | "EX" | "NF" | "EN" => {
                if words[0] == "VA" && words.len() >= 2 {
                    data = words[1].parse().ok();
                }
                for (i, w) in words.iter().enumerate() {
                    if i > 0
                        && w.len() > 1
                        && w.starts_with('c')
                        && w[1..].bytes().all(|b| b.is_ascii_digit())
                    {
                        out.push(self.cas_name(&w[1..], "c"));
                    } else {
                        out.push(w.to_string());
                    }
                }
            }
            "ME" => {
                for w in &words {
                    match w.strip_prefix("cas=") {
                        Some(v) => out.push(self.cas_name(v, "cas=")),
                        None => out.push(w.to_string()),
                    }
                }
            }
            _ => return (line.to_vec(), None),
        }
        (out.join(" ").into_bytes(), data)
    }

    fn cas_name(&mut self, value: &str, prefix: &str) -> String {
        let Ok(v) = value.parse::<u64>() else {
            return format!("{prefix}{value}");
        };
        if v == 0 {
            return format!("{prefix}0");
        }
        self.last_cas = v;
        let next = self.cas_names.len() + 1;
        let n = *self.cas_names.entry(v).or_insert(next);
        format!("{prefix}C{n}")
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn mask_digits(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut in_num = false;
    for &c in b {
        if c.is_ascii_digit() {
            if !in_num {
                out.push(b'0');
            }
            in_num = true;
        } else {
            in_num = false;
            out.push(c);
        }
    }
    out
}

fn only_fields(b: &[u8], names: &[String]) -> Vec<u8> {
    let text = String::from_utf8_lossy(b);
    let mut out = String::new();
    for l in text.split("\r\n") {
        let mut w = l.split(' ');
        if w.next() == Some("STAT") && w.next().is_some_and(|n| names.iter().any(|x| x == n)) {
            out.push_str(l);
            out.push('\n');
        }
    }
    out.into_bytes()
}

fn compared(reply: &[u8], mode: &Mode) -> Vec<u8> {
    match mode {
        Mode::Exact | Mode::Skip => reply.to_vec(),
        Mode::MaskNum => mask_digits(reply),
        Mode::Fields(names) => only_fields(reply, names),
    }
}

fn show(b: &[u8]) -> String {
    let s = format!("{:?}", String::from_utf8_lossy(b));
    if s.len() > 600 {
        format!("{}... ({} bytes)", &s[..600], b.len())
    } else {
        s
    }
}

/// Runs one side's step; returns its normalized reply (with `<closed>`
/// when the server closed the connection).
fn run_step(side: &mut Side, step: &Step) -> Vec<u8> {
    match &step.op {
        Op::Conn(name) => {
            side.current = name.clone();
            side.conn();
            Vec::new()
        }
        Op::Reconnect => {
            let port = side.port;
            let name = side.current.clone();
            side.conns.insert(name, Conn::connect(port));
            Vec::new()
        }
        Op::Sleep(_) => Vec::new(),
        Op::Send(bytes) => {
            let bytes = side.substitute(bytes);
            let conn = side.conn();
            let reply = conn.step(&bytes);
            let (closed, timed_out) = (conn.closed, conn.timed_out);
            let mut r = side.normalize(&reply);
            if timed_out {
                r.extend_from_slice(b"<no reply: the step left the server waiting>");
            } else if closed {
                r.extend_from_slice(b"<closed>");
            }
            r
        }
    }
}

/// Resets a server between files: empty cache, zero counters.
fn reset(port: u16) {
    let mut c = Conn::connect(port);
    let r = c.cmd("flush_all\nverbosity 0\nstats reset");
    assert_eq!(
        r, "OK\r\nOK\r\nRESET\r\n",
        "reset of the server on port {port}"
    );
}

#[test]
fn memcache_differential_corpus() {
    let Some(reference) = mc_support::start_memcached(&[]) else {
        return;
    };
    let self_check = std::env::var_os("CAIRN_MCDIFF_SELF_CHECK").is_some();
    let verbose = std::env::var_os("CAIRN_MCDIFF_VERBOSE").is_some();
    let (_cairn, other_port, _twin): (Option<support::Server>, u16, Option<Memcached>) =
        if self_check {
            let twin = mc_support::start_memcached(&[]).expect("second memcached");
            (None, twin.port, Some(twin))
        } else {
            // memcached's item limit is 1 MB; Cairn's is proto-max-bulk-len:
            // set alike so the corpus compares what happens past it.
            let (server, port) = mc_support::cairn(&["--proto-max-bulk-len", "1mb"]);
            (Some(server), port, None)
        };
    let filter: Vec<String> = std::env::var("CAIRN_MCDIFF_FILES")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/memcache_diff")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            filter.is_empty() || filter.iter().any(|f| n.contains(f.as_str()))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files");
    let allowed = allowed_differences();
    let mut failures = Vec::new();
    let mut steps_run = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let steps = parse_corpus(&text);
        reset(reference.port);
        reset(other_port);
        let mut a = Side::new(reference.port);
        let mut b = Side::new(other_port);
        let listed = allowed.get(&name).cloned().unwrap_or_default();
        let mut listed_seen_equal: BTreeSet<String> = BTreeSet::new();
        let mut listed_seen_diff: BTreeSet<String> = BTreeSet::new();
        for step in &steps {
            let started = std::time::Instant::now();
            let ra = run_step(&mut a, step);
            if let Op::Sleep(ms) = step.op {
                std::thread::sleep(Duration::from_millis(ms));
            }
            let rb = run_step(&mut b, step);
            steps_run += 1;
            if verbose {
                let text: String = step.text.chars().take(120).collect();
                eprintln!(
                    "{name}:{} ({} ms) {text} -> {}",
                    step.line_no,
                    started.elapsed().as_millis(),
                    show(&ra)
                );
            }
            if step.mode == Mode::Skip {
                continue;
            }
            let (ca, cb) = (compared(&ra, &step.mode), compared(&rb, &step.mode));
            if listed.contains(&step.text) {
                if ca == cb {
                    listed_seen_equal.insert(step.text.clone());
                } else {
                    listed_seen_diff.insert(step.text.clone());
                }
                continue;
            }
            if ca != cb {
                failures.push(format!(
                    "{name}:{}: {}\n   memcached: {}\n   {}: {}",
                    step.line_no,
                    step.text,
                    show(&ca),
                    if self_check { "memcached#2" } else { "cairn" },
                    show(&cb)
                ));
            }
        }
        if !self_check {
            for s in listed_seen_equal.difference(&listed_seen_diff) {
                failures.push(format!(
                    "{name}: `{s}` is listed in DIFFERENCES.md but now matches memcached: remove the row"
                ));
            }
        }
        for s in listed.iter() {
            if !steps.iter().any(|st| &st.text == s) {
                failures.push(format!(
                    "{name}: DIFFERENCES.md lists `{s}`, which is not in the file"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {steps_run} steps differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!("{steps_run} steps in {} files matched", files.len());
}
