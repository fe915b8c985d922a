//! The journal (issue 6) through real clients: every fsync policy replays
//! every command family after a restart; a torn tail and a flipped byte at
//! start-up; `cairn check-journal` and `--fix`; MISCONF while writes or
//! fsyncs fail (through the DEBUG JOURNAL-FAULT knob) and recovery after;
//! and the crash test: concurrent writers under `appendfsync always`,
//! SIGKILL at a random moment, restart, every acknowledged write present.

mod mc_support;
mod support;

use mc_support::free_port;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{start_cairn, RawConn, Server};

/// A temporary data directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "cairn-journal-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn journal_file(&self) -> PathBuf {
        self.0.join("appendonlydir/appendonly.aof.1.incr.journal")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn start(dir: &TempDir, extra: &[&str]) -> Server {
    let mut args = vec![
        "--dir",
        dir.path(),
        "--appendonly",
        "yes",
        "--enable-debug-command",
        "yes",
    ];
    args.extend_from_slice(extra);
    let server = start_cairn(&args);
    wait_loaded(&server);
    server
}

/// Clients get -LOADING until the journal is replayed (as in Redis).
fn wait_loaded(server: &Server) {
    let mut c = server.conn();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c.cmd(&["PING"]);
        if r == b"+PONG\r\n" {
            return;
        }
        assert!(r.starts_with(b"-LOADING"), "{}", text(&r));
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Everything observable about the keyspace (databases 0-15), canonical.
fn render(c: &mut RawConn) -> String {
    let mut s = String::new();
    for db in 0..16 {
        c.cmd(&["SELECT", &db.to_string()]);
        let keys = text(&c.cmd(&["KEYS", "*"]));
        let mut names: Vec<&str> = keys
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .collect();
        names.sort_unstable();
        for k in names {
            let t = text(&c.cmd(&["TYPE", k]));
            let v = match t.trim_end() {
                "+string" => c.cmd(&["GET", k]),
                "+list" => c.cmd(&["LRANGE", k, "0", "-1"]),
                "+set" => c.cmd(&["SORT", k, "ALPHA"]),
                "+zset" => c.cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"]),
                "+hash" => c.cmd(&["HGETALL", k]),
                other => panic!("type {other}"),
            };
            let ttl = text(&c.cmd(&["PEXPIRETIME", k]));
            s.push_str(&format!(
                "{db} {k} {} {} {}\n",
                t.trim_end(),
                text(&v).replace("\r\n", " "),
                ttl.trim_end()
            ));
        }
    }
    c.cmd(&["SELECT", "0"]);
    s
}

fn ok(c: &mut RawConn, args: &[&str]) {
    let r = c.cmd(args);
    assert!(!r.starts_with(b"-"), "{args:?}: {}", text(&r));
}

/// One memcached request line (+ data) and its reply.
fn mc(port: u16, req: &str, want_end: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !text(&out).ends_with(want_end) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed; got {}", text(&out));
        out.extend_from_slice(&buf[..n]);
    }
    text(&out)
}

/// Writes of every family, then a restart (graceful or SIGKILL) must give
/// the same keyspace, expiry times included.
fn every_family(policy: &str, kill: bool) {
    let dir = TempDir::new(policy);
    let mcp = free_port().to_string();
    let args = ["--appendfsync", policy, "--memcached-port", mcp.as_str()];
    let server = start(&dir, &args);
    let mcport: u16 = mcp.parse().unwrap();
    let mut c = server.conn();
    for cmd in [
        &["SET", "str", "v"][..],
        &["SET", "ex", "v", "EX", "1000"],
        &["SETEX", "setex", "2000", "v"],
        &["PSETEX", "psetex", "3000000", "v"],
        &["SET", "soon", "v", "PX", "1"],
        &["INCRBYFLOAT", "float", "10.5"],
        &["INCRBYFLOAT", "float", "0.1"],
        &["APPEND", "str", "more"],
        &["INCR", "counter"],
        &["HSET", "h", "a", "1", "b", "2"],
        &["HINCRBYFLOAT", "h", "c", "1.25"],
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["LPOP", "l"],
        &["SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h"],
        &["SPOP", "s"],
        &["SPOP", "s", "3"],
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZPOPMIN", "z"],
        &["SETBIT", "bits", "100", "1"],
        &["PFADD", "hll", "x", "y", "z"],
        &["EXPIRE", "h", "5000"],
        &["PEXPIRE", "gone", "-1"],
        &["GETEX", "str", "EX", "4000"],
        &["SELECT", "5"],
        &["SET", "in5", "v"],
        &["SWAPDB", "5", "6"],
        &["SELECT", "0"],
        &["SET", "x", "1"],
        &["FLUSHALL"],
    ] {
        ok(&mut c, cmd);
    }
    // After FLUSHALL: the data that must come back.
    for cmd in [
        &["SET", "str", "v"][..],
        &["SET", "ex", "v", "EX", "1000"],
        &["SETEX", "setex", "2000", "v"],
        &["INCRBYFLOAT", "float", "10.5"],
        &["HSET", "h", "a", "1"],
        &["HINCRBYFLOAT", "h", "c", "1.25"],
        &["EXPIRE", "h", "5000"],
        &["RPUSH", "l", "a", "b", "c"],
        &["SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h"],
        &["SPOP", "s", "2"],
        &["SPOP", "s"],
        &["ZADD", "z", "1", "a", "2.5", "b"],
        &["ZINCRBY", "z", "0.5", "a"],
        &["SETBIT", "bits", "7", "1"],
        &["PFADD", "hll", "a", "b", "c"],
        &["SELECT", "3"],
        &["SET", "in3", "v"],
        &["SWAPDB", "3", "4"],
        &["SELECT", "0"],
    ] {
        ok(&mut c, cmd);
    }
    // MULTI/EXEC.
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "tx1", "a"]);
    ok(&mut c, &["INCR", "tx2"]);
    ok(&mut c, &["SPOP", "s"]);
    assert!(c.cmd(&["EXEC"]).starts_with(b"*3"));
    // A blocking pop served by a push from another client.
    let mut b = server.conn();
    b.send(&[b"BLPOP", b"q1", b"q2", b"10"]);
    std::thread::sleep(Duration::from_millis(100));
    ok(&mut c, &["RPUSH", "q2", "first", "second"]);
    assert_eq!(
        text(&b.read_raw_reply()),
        "*2\r\n$2\r\nq2\r\n$5\r\nfirst\r\n"
    );
    // memcached items: flags and absolute expiry.
    assert_eq!(mc(mcport, "set mk 42 0 3\r\nabc\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(mc(mcport, "set mt 7 1000 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(mc(mcport, "set mn 0 0 1\r\n5\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(mc(mcport, "incr mn 10\r\n", "\r\n"), "15\r\n");
    assert_eq!(mc(mcport, "append mk 0 0 1\r\nd\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(mc(mcport, "set md 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(mc(mcport, "delete md\r\n", "\r\n"), "DELETED\r\n");

    // Requests as they come off the wire, recorded as sent: a pipelined
    // batch with an inline command in it (recorded by its arguments), and
    // a big value that arrives in two pieces, so the worker reads it into
    // a buffer of its own (also recorded by its arguments).
    c.send_raw(
        b"SET wire1 a\r\n*3\r\n$3\r\nSET\r\n$5\r\nwire2\r\n$1\r\nb\r\n\
          *2\r\n$4\r\nINCR\r\n$5\r\nwire3\r\n",
    );
    for want in ["+OK\r\n", "+OK\r\n", ":1\r\n"] {
        assert_eq!(text(&c.read_raw_reply()), want);
    }
    let big: String = (0..100_000)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    c.send_raw(format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", big.len()).as_bytes());
    c.send_raw(&big.as_bytes()[..1000]);
    std::thread::sleep(Duration::from_millis(50));
    c.send_raw(&big.as_bytes()[1000..]);
    c.send_raw(b"\r\n");
    assert_eq!(text(&c.read_raw_reply()), "+OK\r\n");

    let before = render(&mut c);
    for want in [
        "0 wire1 +string $1 a",
        "0 wire2 +string $1 b",
        "0 wire3 +string $1 1",
        "0 big +string $100000 abcdefgh",
        "0 str",
        "0 float +string $4 10.5",
        "0 tx2",
        "0 q2",
        "4 in3",
        "0 mk",
        "0 mt",
    ] {
        assert!(before.contains(want), "{want}: {before}");
    }
    assert!(!before.contains("0 md "), "{before}");
    drop(c);
    drop(b);
    let mut server = server;
    if kill {
        // SIGKILL; under everysec/no give the writer a moment to hand the
        // last batches to the OS (a process crash loses only what was not).
        std::thread::sleep(Duration::from_millis(50));
        drop(server);
    } else {
        let mut c = server.conn();
        c.send(&[b"SHUTDOWN"]);
        assert!(server.wait_exit(Duration::from_secs(10)).is_some());
        drop(server);
    }
    let server = start(&dir, &args);
    let mut c = server.conn();
    assert_eq!(render(&mut c), before, "policy {policy}");
    assert_eq!(
        mc(mcport, "get mk\r\n", "END\r\n"),
        "VALUE mk 42 4\r\nabcd\r\nEND\r\n"
    );
    assert_eq!(
        mc(mcport, "get mn\r\n", "END\r\n"),
        "VALUE mn 0 2\r\n15\r\nEND\r\n"
    );
    let log = server.log();
    assert!(log.contains("DB loaded from the journal"), "{log}");
    assert!(!log.contains("answered"), "{log}");
}

#[test]
fn always_replays_every_family_after_sigkill() {
    every_family("always", true);
}

#[test]
fn everysec_replays_every_family_after_shutdown() {
    every_family("everysec", false);
}

#[test]
fn no_replays_every_family_after_shutdown() {
    every_family("no", false);
}

#[test]
fn info_and_config() {
    let dir = TempDir::new("info");
    let server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    let info = text(&c.cmd(&["INFO", "persistence"]));
    for f in [
        "aof_enabled:1\r\n",
        "aof_rewrite_in_progress:0\r\n",
        "aof_last_write_status:ok\r\n",
        "aof_current_size:",
        "aof_base_size:0\r\n",
        "aof_buffer_length:",
        "aof_delayed_fsync:0\r\n",
    ] {
        assert!(info.contains(f), "{f}: {info}");
    }
    assert_eq!(
        text(&c.cmd(&["CONFIG", "GET", "appendonly"])),
        "*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n"
    );
    assert_eq!(
        text(&c.cmd(&["CONFIG", "GET", "appenddirname"])),
        "*2\r\n$13\r\nappenddirname\r\n$13\r\nappendonlydir\r\n"
    );
    ok(&mut c, &["SET", "k", "v"]);
    // Turning it off stops the journal; INFO says so.
    ok(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    let info = text(&c.cmd(&["INFO", "persistence"]));
    assert!(info.contains("aof_enabled:0\r\n"), "{info}");
    assert!(!info.contains("aof_current_size"), "{info}");
    // Written while the journal is off: only in memory.
    ok(&mut c, &["SET", "while-off", "1"]);
    // On again with data in memory: a compaction writes it as the base,
    // and recording starts at its cut.
    ok(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    ok(&mut c, &["SET", "after-on", "1"]);
    wait_info(&mut c, "aof_rewrites", "1");
    wait_info(&mut c, "aof_rewrite_in_progress", "0");
    ok(&mut c, &["SET", "after-rewrite", "1"]);
    let m = std::fs::read_to_string(dir.0.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert!(m.contains("type b"), "{m}");
    drop(c);
    drop(server);
    let server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    let mut keys = text(&c.cmd(&["KEYS", "*"]))
        .lines()
        .filter(|l| !l.starts_with(['*', '$']))
        .map(String::from)
        .collect::<Vec<_>>();
    keys.sort();
    assert_eq!(keys, ["after-on", "after-rewrite", "k", "while-off"]);
    // On an empty keyspace it starts a fresh journal at once.
    ok(&mut c, &["CONFIG", "SET", "appendonly", "no"]);
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    ok(&mut c, &["SET", "fresh", "1"]);
    drop(c);
    drop(server);
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["KEYS", "*"])), "*1\r\n$5\r\nfresh\r\n");
}

#[test]
fn server_without_appendonly_reports_it_off() {
    let server = start_cairn(&[]);
    let mut c = server.conn();
    let info = text(&c.cmd(&["INFO", "persistence"]));
    assert!(info.contains("aof_enabled:0\r\n"), "{info}");
    assert!(info.contains("aof_last_write_status:ok\r\n"), "{info}");
}

fn check_journal(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("check-journal")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout) + &text(&out.stderr),
    )
}

/// Writes `n` keys under `always` and stops the server with SIGKILL.
fn journal_with(dir: &TempDir, n: usize) {
    let server = start(dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..n {
        ok(&mut c, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
}

#[test]
fn torn_tail_and_check_journal_fix() {
    let dir = TempDir::new("torn");
    journal_with(&dir, 10);
    let file = dir.journal_file();
    let f = file.to_str().unwrap();
    let (code, out) = check_journal(&[f]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("10 good batches, 10 records"), "{out}");
    assert!(out.contains("Journal is valid"), "{out}");
    let good = std::fs::metadata(&file).unwrap().len();
    // A batch cut short: a crash mid-write.
    let mut data = std::fs::read(&file).unwrap();
    data.extend_from_slice(&[40, 0, 0, 0, 1, 2, 3, 4, 1, 0, 3]);
    std::fs::write(&file, &data).unwrap();
    let (code, out) = check_journal(&[f]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("Torn last batch at offset {good}")),
        "{out}"
    );
    // aof-load-truncated yes (the default): starts, warns, keeps 10 keys,
    // and cuts the tail off so new batches follow the good ones.
    {
        let server = start(&dir, &["--appendfsync", "always"]);
        let log = server.log();
        assert!(log.contains("dropping the torn last batch"), "{log}");
        assert!(log.contains(&format!("at offset {good}")), "{log}");
        let mut c = server.conn();
        assert_eq!(text(&c.cmd(&["DBSIZE"])), ":10\r\n");
        ok(&mut c, &["SET", "k10", "v10"]);
    }
    let (code, out) = check_journal(&[f]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("11 good batches"), "{out}");
    // aof-load-truncated no refuses to start on a torn tail.
    let mut data = std::fs::read(&file).unwrap();
    let len = data.len() as u64;
    data.extend_from_slice(&[9, 0, 0]);
    std::fs::write(&file, &data).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--port", "0", "--bind", "127.0.0.1", "--dir", dir.path()])
        .args(["--appendonly", "yes", "--aof-load-truncated", "no"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log = text(&out.stdout) + &text(&out.stderr);
    assert!(log.contains(&format!("at offset {len}")), "{log}");
    assert!(log.contains("check-journal --fix"), "{log}");
    // --fix truncates to the last good batch.
    let (code, out) = check_journal(&["--fix", f]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "truncated the journal to offset {len} (3 bytes dropped)"
        )),
        "{out}"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), len);
    assert_eq!(check_journal(&[f]).0, 0);
}

#[test]
fn flipped_byte_stops_startup_with_file_and_offset() {
    let dir = TempDir::new("flip");
    journal_with(&dir, 10);
    let file = dir.journal_file();
    let f = file.to_str().unwrap();
    let mut data = std::fs::read(&file).unwrap();
    // Each acknowledged `SET kI vI` is a batch of its own after the
    // 16-byte header: an 8-byte frame header, then one record of the
    // request as sent (tag, database, length, the RESP bytes). Flip a byte
    // inside the 5th batch's payload.
    let batch = 8 + 3 + b"*3\r\n$3\r\nSET\r\n$2\r\nk4\r\n$2\r\nv4\r\n".len();
    let fifth = 16 + 4 * batch;
    data[fifth + 12] ^= 0x20;
    std::fs::write(&file, &data).unwrap();
    let (code, out) = check_journal(&[f]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("Corruption at offset {fifth}: checksum mismatch")),
        "{out}"
    );
    assert!(out.contains("4 good batches"), "{out}");
    let log = startup_refused(&dir);
    assert!(
        log.contains(&format!(
            "appendonly.aof.1.incr.journal at offset {fifth}: checksum mismatch"
        )),
        "{log}"
    );
    // --fix cuts there, and the server starts with the 4 good writes.
    let (code, out) = check_journal(&["--fix", f]);
    assert_eq!(code, 0, "{out}");
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["DBSIZE"])), ":4\r\n");
    assert_eq!(text(&c.cmd(&["GET", "k3"])), "$2\r\nv3\r\n");
}

/// Starts the server on `dir`'s journal, expects start-up to fail, and
/// returns what it printed.
fn startup_refused(dir: &TempDir) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--port", "0", "--bind", "127.0.0.1", "--dir", dir.path()])
        .args(["--appendonly", "yes"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    text(&out.stdout) + &text(&out.stderr)
}

#[test]
fn a_bad_manifest_stops_startup_with_file_and_offset() {
    let dir = TempDir::new("badmanifest");
    journal_with(&dir, 2);
    let path = dir.0.join("appendonlydir/appendonly.aof.manifest");
    let mut m = std::fs::read_to_string(&path).unwrap();
    let offset = m.len();
    m.push_str("file appendonly.aof.9.incr.journal seq nine type i\n");
    std::fs::write(&path, &m).unwrap();
    let log = startup_refused(&dir);
    assert!(
        log.contains(&format!(
            "appendonly.aof.manifest at offset {offset}: manifest line"
        )),
        "{log}"
    );
}

#[test]
fn check_journal_usage_and_missing_file() {
    let (code, out) = check_journal(&[]);
    assert_eq!(code, 1);
    assert!(
        out.contains("Usage: cairn check-journal [--fix] <file>"),
        "{out}"
    );
    let (code, out) = check_journal(&["/nonexistent/cairn-journal"]);
    assert_eq!(code, 1);
    assert!(out.contains("Cannot open file"), "{out}");
}

/// Polls INFO until `field` has `value`.
fn wait_info(c: &mut RawConn, field: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = text(&c.cmd(&["INFO", "persistence"]));
        if info.contains(&format!("{field}:{value}\r\n")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{field} never became {value}: {info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn misconf(fault: &str) {
    let dir = TempDir::new(fault);
    let mcp = free_port().to_string();
    let server = start(
        &dir,
        &["--appendfsync", "always", "--memcached-port", mcp.as_str()],
    );
    let mcport: u16 = mcp.parse().unwrap();
    let mut c = server.conn();
    ok(&mut c, &["SET", "before", "1"]);
    // The next 20 writes (or fsyncs) fail: about 2 s of retries.
    ok(&mut c, &["DEBUG", "JOURNAL-FAULT", fault, "20"]);
    let mut w = server.conn();
    w.send(&[b"SET", b"during", b"1"]);
    let mut r = server.conn();
    wait_info(&mut r, "aof_last_write_status", "err");
    // Writes are refused with Redis's text, PING too; reads go on.
    assert_eq!(
        text(&r.cmd(&["SET", "x", "1"])),
        "-MISCONF Errors writing to the AOF file: Input/output error\r\n"
    );
    assert!(text(&r.cmd(&["PING"])).starts_with("-MISCONF"));
    assert_eq!(text(&r.cmd(&["GET", "before"])), "$1\r\n1\r\n");
    // memcached writes are refused the same way; its reads go on.
    let refused = "SERVER_ERROR MISCONF Errors writing to the AOF file: Input/output error\r\n";
    assert_eq!(mc(mcport, "set m 0 0 1\r\nx\r\n", "\r\n"), refused);
    assert_eq!(mc(mcport, "ms m 1\r\nx\r\n", "\r\n"), refused);
    assert_eq!(mc(mcport, "delete before\r\n", "\r\n"), refused);
    assert_eq!(mc(mcport, "incr before 1\r\n", "\r\n"), refused);
    assert_eq!(mc(mcport, "touch before 10\r\n", "\r\n"), refused);
    assert_eq!(mc(mcport, "mg before T10\r\n", "\r\n"), refused);
    // noreply silences the error as it silences every reply.
    assert_eq!(
        mc(mcport, "set m 0 0 1 noreply\r\nx\r\nmn\r\n", "MN\r\n"),
        "MN\r\n"
    );
    assert_eq!(
        mc(mcport, "get before\r\n", "END\r\n"),
        "VALUE before 0 1\r\n1\r\nEND\r\n"
    );
    assert_eq!(
        mc(mcport, "mg before v\r\n", "VA 1\r\n1\r\n"),
        "VA 1\r\n1\r\n"
    );
    // The write that ran before the failure is not acknowledged yet: its
    // batch is not on disk.
    w.stream().set_nonblocking(true).unwrap();
    let mut probe = [0u8; 16];
    assert!(matches!(
        w.stream().peek(&mut probe),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
    ));
    w.stream().set_nonblocking(false).unwrap();
    // When writing works again it is acknowledged, and writes resume.
    assert_eq!(text(&w.read_raw_reply()), "+OK\r\n");
    wait_info(&mut r, "aof_last_write_status", "ok");
    ok(&mut r, &["SET", "after", "1"]);
    assert!(
        server.log().contains("Input/output error"),
        "{}",
        server.log()
    );
    drop((c, w, r));
    drop(server);
    let server = start(&dir, &[]);
    let mut c = server.conn();
    for k in ["before", "during", "after"] {
        assert_eq!(text(&c.cmd(&["GET", k])), "$1\r\n1\r\n", "{k}");
    }
}

/// Under `always` no client sees a write before it is on disk: a GET of a
/// key whose SET is still being fsynced (on another connection, any
/// worker) answers only after that fsync, as in Redis, where no reply of a
/// loop turn leaves before the turn's fsync.
#[test]
fn always_shows_no_write_before_its_fsync() {
    let dir = TempDir::new("read-after-fsync");
    let server = start(&dir, &["--appendfsync", "always", "--server-threads", "2"]);
    let mut c = server.conn();
    ok(&mut c, &["DEBUG", "JOURNAL-FAULT", "FSYNC-DELAY", "600"]);
    // Several readers, so some run on the other worker than the writer.
    let mut readers: Vec<RawConn> = (0..4).map(|_| server.conn()).collect();
    for r in &mut readers {
        assert_eq!(text(&r.cmd(&["PING"])), "+PONG\r\n");
    }
    let mut w = server.conn();
    let sent = Instant::now();
    w.send(&[b"SET", b"k", b"v"]);
    // Let the SET run; its fsync now takes 600 ms.
    std::thread::sleep(Duration::from_millis(100));
    for r in &mut readers {
        let got = text(&r.cmd(&["GET", "k"]));
        let waited = sent.elapsed();
        assert_eq!(got, "$1\r\nv\r\n");
        assert!(
            waited >= Duration::from_millis(500),
            "GET showed the write {waited:?} after it was sent, before its fsync"
        );
    }
    assert_eq!(text(&w.read_raw_reply()), "+OK\r\n");
    ok(&mut c, &["DEBUG", "JOURNAL-FAULT", "FSYNC-DELAY", "0"]);
    // With nothing waiting to be fsynced, reads are not held.
    let t = Instant::now();
    for r in &mut readers {
        assert_eq!(text(&r.cmd(&["GET", "k"])), "$1\r\nv\r\n");
    }
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn misconf_while_journal_writes_fail() {
    misconf("WRITE");
}

#[test]
fn misconf_while_journal_fsyncs_fail() {
    misconf("FSYNC");
}

fn files(dir: &TempDir) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.0.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn bgrewriteaof_compacts_while_clients_write() {
    let dir = TempDir::new("rewrite");
    let server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..100 {
        ok(&mut c, &["SET", "counter", &i.to_string()]);
        ok(&mut c, &["RPUSH", "list", &i.to_string()]);
    }
    ok(&mut c, &["SET", "ttl", "v", "EX", "1000"]);
    let before_size = std::fs::metadata(dir.journal_file()).unwrap().len();
    // Slow the base down (the snapshot writer's test knob) so the
    // compaction is seen running: 3 keys, 1 s each, long enough for the
    // writes below even on a loaded machine (each waits for an fsync).
    ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
    assert_eq!(
        text(&c.cmd(&["BGREWRITEAOF"])),
        "+Background append only file rewriting started\r\n"
    );
    assert_eq!(
        text(&c.cmd(&["BGREWRITEAOF"])),
        "-ERR Background append only file rewriting already in progress\r\n"
    );
    wait_info(&mut c, "aof_rewrite_in_progress", "1");
    // Clients go on writing meanwhile; these land in the new journal file.
    for i in 100..120 {
        ok(&mut c, &["RPUSH", "list", &i.to_string()]);
    }
    ok(&mut c, &["SET", "during", "1"]);
    // A BGSAVE is refused while the rewrite runs (Redis: another child
    // is active), whether or not its cut is made yet.
    let r = text(&c.cmd(&["BGSAVE"]));
    assert!(r.starts_with("-ERR") || r.contains("scheduled"), "{r}");
    ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    wait_info(&mut c, "aof_rewrite_in_progress", "0");
    let info = text(&c.cmd(&["INFO", "persistence"]));
    for f in ["aof_rewrites:1\r\n", "aof_last_bgrewrite_status:ok\r\n"] {
        assert!(info.contains(f), "{f}: {info}");
    }
    assert!(!info.contains("aof_base_size:0\r\n"), "{info}");
    assert!(!info.contains("aof_last_rewrite_time_sec:-1\r\n"), "{info}");
    // The old journal file is gone; base 2 and journal 2 remain.
    assert_eq!(
        files(&dir),
        [
            "appendonly.aof.2.base.snapshot",
            "appendonly.aof.2.incr.journal",
            "appendonly.aof.manifest"
        ]
    );
    let incr2 = dir.0.join("appendonlydir/appendonly.aof.2.incr.journal");
    assert!(std::fs::metadata(&incr2).unwrap().len() < before_size);
    ok(&mut c, &["SET", "after", "1"]);
    let before = render(&mut c);
    drop(c);
    drop(server); // SIGKILL
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(render(&mut c), before);
    assert_eq!(text(&c.cmd(&["LLEN", "list"])), ":120\r\n");
    assert_eq!(text(&c.cmd(&["GET", "counter"])), "$2\r\n99\r\n");
}

#[test]
fn crash_during_compaction_loses_nothing() {
    let dir = TempDir::new("rewrite-crash");
    let server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    for i in 0..50 {
        ok(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]);
    assert!(c.cmd(&["BGREWRITEAOF"]).starts_with(b"+Background"));
    // Wait until the base is being written (its temporary file exists;
    // not the manifest's own temporary file, which exists for a moment
    // before the manifest naming the new journal is renamed into place).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !files(&dir)
        .iter()
        .any(|f| f.starts_with("temp-") && !f.ends_with(".manifest"))
    {
        assert!(Instant::now() < deadline, "{:?}", files(&dir));
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 50..60 {
        ok(&mut c, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    drop(c);
    drop(server); // SIGKILL in the middle of writing the base
                  // The manifest named the new journal file before the cut.
    let m = std::fs::read_to_string(dir.0.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    assert!(
        m.contains("appendonly.aof.1.incr.journal") && m.contains("appendonly.aof.2.incr.journal"),
        "{m}"
    );
    assert!(!m.contains("type b"), "{m}");
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["DBSIZE"])), ":60\r\n");
    // The next compaction starts from there.
    assert!(c.cmd(&["BGREWRITEAOF"]).starts_with(b"+Background"));
    wait_info(&mut c, "aof_rewrites", "1");
    assert_eq!(
        files(&dir),
        [
            "appendonly.aof.3.base.snapshot",
            "appendonly.aof.3.incr.journal",
            "appendonly.aof.manifest"
        ]
    );
    drop(c);
    drop(server);
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["DBSIZE"])), ":60\r\n");
}

#[test]
fn automatic_compaction_by_growth() {
    let dir = TempDir::new("auto");
    let server = start(
        &dir,
        &[
            "--auto-aof-rewrite-percentage",
            "100",
            "--auto-aof-rewrite-min-size",
            "4kb",
        ],
    );
    let mut c = server.conn();
    let v = "x".repeat(100);
    for i in 0..60 {
        ok(&mut c, &["SET", &format!("k{}", i % 5), &v]);
    }
    wait_info(&mut c, "aof_rewrites", "1");
    assert!(
        server
            .log()
            .contains("Starting automatic rewriting of AOF on"),
        "{}",
        server.log()
    );
}

#[test]
fn bgrewriteaof_with_appendonly_off_writes_a_base() {
    let dir = TempDir::new("off");
    let server = start_cairn(&["--dir", dir.path(), "--appendfsync", "always"]);
    let mut c = server.conn();
    ok(&mut c, &["SET", "a", "1"]);
    assert!(c
        .cmd(&["BGREWRITEAOF"])
        .starts_with(b"+Background append only file rewriting started"));
    wait_info(&mut c, "aof_rewrites", "1");
    drop(c);
    drop(server);
    // Started with the journal on, it loads that base.
    let server = start(&dir, &["--appendfsync", "always"]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["GET", "a"])), "$1\r\n1\r\n");
    ok(&mut c, &["SET", "b", "2"]);
    drop(c);
    drop(server);
    let server = start(&dir, &[]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["DBSIZE"])), ":2\r\n");
}

/// The crash test: writers under `appendfsync always`, SIGKILL at a random
/// moment, restart; every acknowledged write must be there, in order.
#[test]
fn crash_loses_no_acknowledged_write() {
    const ROUNDS: usize = 20;
    const WRITERS: usize = 4;
    let dir = TempDir::new("crash");
    let mut acked_all: Vec<Vec<usize>> = Vec::new();
    let started = Instant::now();
    for round in 0..ROUNDS {
        let server = start(&dir, &["--appendfsync", "always"]);
        // Everything acknowledged in earlier rounds survived their crash.
        let mut c = server.conn();
        for (r, acked) in acked_all.iter().enumerate() {
            for (t, &n) in acked.iter().enumerate() {
                let key = format!("r{r}:w{t}");
                let len: usize = text(&c.cmd(&["LLEN", &key]))[1..]
                    .trim_end()
                    .parse()
                    .unwrap();
                // At most the one write in flight at the kill is extra.
                assert!(
                    len == n || len == n + 1,
                    "{key}: {len} elements, {n} acknowledged"
                );
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        // Acknowledged writes so far, over all writers: the kill waits for
        // the first (a loaded machine can take longer than the random
        // window to connect and answer one).
        let acks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..WRITERS)
            .map(|t| {
                let port = server.port;
                let stop = stop.clone();
                let acks = acks.clone();
                std::thread::spawn(move || {
                    let Ok(mut c) = RawConn::try_connect(port) else {
                        return 0;
                    };
                    let key = format!("r{round}:w{t}");
                    let mut acked = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let i = acked.to_string();
                        let args: [&[u8]; 3] = [b"RPUSH", key.as_bytes(), i.as_bytes()];
                        let mut out = Vec::new();
                        cairn_protocol::resp::encode_command(&args, &mut out);
                        if c.try_send_raw(&out).is_err() {
                            break;
                        }
                        match c.try_read_raw_reply() {
                            Ok(Some(r)) if r == format!(":{}\r\n", acked + 1).as_bytes() => {
                                acked += 1;
                                acks.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(Some(r)) => panic!("{key}: unexpected reply {}", text(&r)),
                            _ => break,
                        }
                    }
                    acked
                })
            })
            .collect();
        let first = Instant::now() + Duration::from_secs(10);
        while acks.load(Ordering::Relaxed) == 0 && Instant::now() < first {
            std::thread::sleep(Duration::from_millis(2));
        }
        let wait = 30 + rand_below(120);
        std::thread::sleep(Duration::from_millis(wait));
        drop(server); // SIGKILL
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(
            acked.iter().sum::<usize>() > 0,
            "round {round}: no write acknowledged"
        );
        acked_all.push(acked);
    }
    // The last round, checked element by element.
    let server = start(&dir, &[]);
    let mut c = server.conn();
    for (r, acked) in acked_all.iter().enumerate() {
        for (t, &n) in acked.iter().enumerate() {
            let key = format!("r{r}:w{t}");
            if n == 0 {
                // (LRANGE 0 -1 would be the whole list: the one unacknowledged
                // write may be there.)
                continue;
            }
            let got = text(&c.cmd(&["LRANGE", &key, "0", &(n as i64 - 1).to_string()]));
            let mut want = format!("*{n}\r\n");
            for i in 0..n {
                want.push_str(&format!("${}\r\n{i}\r\n", i.to_string().len()));
            }
            assert_eq!(got, want, "{key}");
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

/// A small pseudo-random number from the clock (no extra dependency).
fn rand_below(n: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    (t.wrapping_mul(6364136223846793005) >> 33) % n
}

/// Many clients writing at once under `always` all keep getting replies: a
/// reply held for the journal is always released. (A lost wake-up once
/// left connections neither written nor listed as held, their clients
/// waiting forever; the benchmark saw it as a collapse to ~600 writes/s.)
#[test]
fn always_releases_every_held_reply() {
    const CLIENTS: usize = 32;
    const WRITES: i64 = 1000;
    let dir = TempDir::new("liveness");
    let server = start(&dir, &["--appendfsync", "always"]);
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let url = format!("redis://127.0.0.1:{}/", server.port);
            std::thread::spawn(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                for i in 0..WRITES {
                    let n: i64 = redis::cmd("INCR")
                        .arg(format!("live:{t}"))
                        .query(&mut c)
                        .unwrap_or_else(|e| panic!("client {t}, write {i}: {e}"));
                    assert_eq!(n, i + 1);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["GET", "live:0"])), "$4\r\n1000\r\n");
}

fn info_field(c: &mut RawConn, field: &str) -> u64 {
    let info = text(&c.cmd(&["INFO", "persistence"]));
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"));
    line.trim().parse().unwrap()
}

/// Sends `n` pipelined SETs of `size`-byte values (keys `{tag}{i}`) and
/// checks every reply.
fn pipelined_sets(c: &mut RawConn, tag: &str, n: usize, size: usize) {
    let v = vec![b'v'; size];
    let mut batch = Vec::new();
    for i in 0..n {
        let k = format!("{tag}{i}");
        batch.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${size}\r\n", k.len()).as_bytes(),
        );
        batch.extend_from_slice(&v);
        batch.extend_from_slice(b"\r\n");
    }
    c.send_raw(&batch);
    for i in 0..n {
        assert_eq!(text(&c.read_raw_reply()), "+OK\r\n", "reply {i}");
    }
}

/// A journal whose disk is slower than the writes: the buffer in front of
/// the file stays bounded, because workers wait for the writer at the end
/// of a turn once it is more than `behind-limit` ahead; nothing is lost.
#[test]
fn slow_disk_throttles_writers_and_loses_nothing() {
    let dir = TempDir::new("behind");
    let mut server = start(
        &dir,
        &["--appendfsync", "everysec", "--server-threads", "1"],
    );
    let mut c = server.conn();
    // Control: with the default limit (128 MiB) 4 MB never waits.
    ok(&mut c, &["DEBUG", "JOURNAL-FAULT", "WRITE-DELAY", "200"]);
    pipelined_sets(&mut c, "a", 40, 100_000);
    assert_eq!(info_field(&mut c, "aof_write_throttles"), 0);
    // With a 1 MiB limit the same 4 MB must wait for the slow writes.
    ok(
        &mut c,
        &["DEBUG", "JOURNAL-FAULT", "BEHIND-LIMIT", "1048576"],
    );
    let t = Instant::now();
    pipelined_sets(&mut c, "b", 40, 100_000);
    let throttles = info_field(&mut c, "aof_write_throttles");
    assert!(throttles >= 1, "never waited ({:?})", t.elapsed());
    assert!(
        server
            .log()
            .contains("The journal's writes are falling behind"),
        "{}",
        server.log()
    );
    ok(&mut c, &["DEBUG", "JOURNAL-FAULT", "WRITE-DELAY", "0"]);
    ok(&mut c, &["DEBUG", "JOURNAL-FAULT", "BEHIND-LIMIT", "0"]);
    c.send(&[b"SHUTDOWN"]);
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    drop(server);
    // Everything acknowledged is in the journal.
    let server = start(&dir, &["--appendfsync", "everysec"]);
    let mut c = server.conn();
    assert_eq!(text(&c.cmd(&["DBSIZE"])), ":80\r\n");
    assert_eq!(text(&c.cmd(&["STRLEN", "b39"])), ":100000\r\n");
}
