//! Support for cairn-bench's end-to-end tests: real redis-server and
//! memcached processes on ephemeral ports (killed on drop, even when a test
//! fails), scripted fake servers for the failure paths, and a runner for
//! the `cairn-bench` binary.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_bench::report::Report;

/// A server process, killed and reaped on drop.
pub struct Server {
    pub port: u16,
    pub child: Child,
    name: &'static str,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("{} on port {} stopped", self.name, self.port);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("ephemeral port")
}

fn in_path(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// Whether a missing peer is a failure (CI) or a skip (a developer box).
fn require(bin: &str) -> Option<PathBuf> {
    match in_path(bin) {
        Some(p) => Some(p),
        None if std::env::var_os("CI").is_some() => {
            panic!("{bin} is required in CI (scripts/test installs it)")
        }
        None => {
            eprintln!("{bin} not installed; test skipped");
            None
        }
    }
}

fn wait_ready(server: &mut Server, probe: &[u8], expect: &[u8]) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = server.child.try_wait() {
            return false;
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", server.port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut buf = [0u8; 64];
            if s.write_all(probe).is_ok() {
                if let Ok(n) = s.read(&mut buf) {
                    if buf[..n].starts_with(expect) {
                        return true;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A redis-server without persistence on a free port.
pub fn redis() -> Option<Server> {
    let bin = require("redis-server")?;
    for _ in 0..5 {
        let port = free_port();
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(std::env::temp_dir())
            // A file name of its own: a dump.rdb another test's server
            // left in the temp dir would load (with a replication backlog
            // counted in used_memory, which made every SET of the
            // hit-ratio test go over its small maxmemory).
            .args([
                "--dbfilename",
                &format!("cairn-bench-test-{}-{port}.rdb", std::process::id()),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut s = Server {
            port,
            child,
            name: "redis-server",
        };
        if wait_ready(&mut s, b"*1\r\n$4\r\nPING\r\n", b"+PONG") {
            return Some(s);
        }
    }
    panic!("redis-server did not start");
}

/// A memcached on a free port (`extra` e.g. `["-m", "1"]`).
pub fn memcached(extra: &[&str]) -> Option<Server> {
    let bin = require("memcached")?;
    // memcached refuses to run as root without -u.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
            .args(extra);
        if root {
            cmd.args(["-u", "root"]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn memcached");
        let mut s = Server {
            port,
            child,
            name: "memcached",
        };
        if wait_ready(&mut s, b"version\r\n", b"VERSION") {
            return Some(s);
        }
    }
    panic!("memcached did not start");
}

/// Whether charts can be drawn here (a TrueType font exists). In CI a
/// missing font is a failure: scripts/test installs fonts-dejavu-core.
pub fn have_font() -> bool {
    match cairn_bench::chart::init_font(None) {
        Ok(_) => true,
        Err(e) if std::env::var_os("CI").is_some() => panic!("{e}"),
        Err(e) => {
            eprintln!("{e}; chart checks skipped");
            false
        }
    }
}

/// `--chart <dir>/<name>` when charts can be drawn, else nothing.
pub fn chart_args(dir: &TempDir, name: &str) -> Vec<String> {
    if have_font() {
        vec!["--chart".into(), dir.path(name).to_str().unwrap().into()]
    } else {
        vec![]
    }
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "cairn-bench-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            eprintln!("test files kept in {}", self.0.display());
        }
    }
}

/// Splits a command line on whitespace (test paths have no spaces).
pub fn argv(line: &str) -> Vec<String> {
    line.split_whitespace().map(String::from).collect()
}

/// Runs `cairn-bench <line>` plus `extra` arguments; must succeed.
pub fn run_ok(line: &str, extra: &[String]) -> Output {
    let mut a = argv(line);
    a.extend(extra.iter().cloned());
    let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    bench_ok(&refs)
}

/// Runs `cairn-bench <line>`; returns its output whatever the status.
pub fn run_cmd(line: &str) -> Output {
    let a = argv(line);
    let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    bench(&refs)
}

/// Runs cairn-bench and returns its output.
pub fn bench(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-bench"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run cairn-bench");
    out
}

pub fn bench_ok(args: &[&str]) -> Output {
    let out = bench(args);
    assert!(
        out.status.success(),
        "cairn-bench {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // stderr is not a terminal here: no progress bar escapes.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains('\r') && !err.contains("\x1b["),
        "progress output on a non-terminal:\n{err}"
    );
    out
}

/// Reads and validates a JSON report.
pub fn report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let r: Report =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
    cairn_bench::report::validate(&r).unwrap_or_else(|e| panic!("invalid report: {e}"));
    r
}

/// One RESP command on a fresh connection; the reply parsed loosely.
pub fn redis_cmd(port: u16, args: &[&[u8]]) -> RespValue {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    s.write_all(&out).unwrap();
    let mut r = Reader { s, buf: Vec::new() };
    r.value()
}

/// A memcached text command on a fresh connection; returns the raw reply
/// up to and including its terminator line (`END`, `STORED`, ...).
pub fn mc_cmd(port: u16, cmd: &str, terminators: &[&str]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(cmd.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "memcached closed");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if terminators
            .iter()
            .any(|t| text.ends_with(&format!("{t}\r\n")))
        {
            return text.into_owned();
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum RespValue {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<RespValue>),
}

impl RespValue {
    pub fn int(&self) -> i64 {
        match self {
            RespValue::Int(n) => *n,
            v => panic!("not an integer: {v:?}"),
        }
    }
    pub fn array(&self) -> &[RespValue] {
        match self {
            RespValue::Array(v) => v,
            v => panic!("not an array: {v:?}"),
        }
    }
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            RespValue::Bulk(Some(b)) => b.clone(),
            v => panic!("not a bulk string: {v:?}"),
        }
    }
}

struct Reader {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    fn fill(&mut self) {
        let mut chunk = [0u8; 65536];
        let n = self.s.read(&mut chunk).expect("read");
        assert!(n > 0, "server closed");
        self.buf.extend_from_slice(&chunk[..n]);
    }
    fn line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).into_owned();
                self.buf.drain(..i + 2);
                return l;
            }
            self.fill();
        }
    }
    fn value(&mut self) -> RespValue {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => RespValue::Simple(rest.into()),
            "-" => RespValue::Error(rest.into()),
            ":" => RespValue::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return RespValue::Bulk(None);
                }
                while self.buf.len() < n as usize + 2 {
                    self.fill();
                }
                let b = self.buf[..n as usize].to_vec();
                self.buf.drain(..n as usize + 2);
                RespValue::Bulk(Some(b))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                RespValue::Array((0..n.max(0)).map(|_| self.value()).collect())
            }
            _ => panic!("bad reply line {l:?}"),
        }
    }
}

/// How a [`FakeResp`] server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fake {
    /// Accepts every write, then answers GETs alternately with nothing and
    /// with a value of the right length but the wrong bytes (E3's RAM disk).
    Liar,
    /// Never answers data commands (an overloaded server).
    Silent,
}

/// A scripted RESP server on a free port; stops accepting on drop.
pub struct FakeResp {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Drop for FakeResp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

pub fn fake_resp(mode: Fake) -> FakeResp {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            if st.load(Ordering::Relaxed) {
                return;
            }
            let Ok(conn) = conn else { continue };
            let st = st.clone();
            std::thread::spawn(move || serve_fake(conn, mode, st));
        }
    });
    FakeResp { port, stop }
}

/// Parses one complete command from `buf`: (args, bytes used).
fn parse_command(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let line_end = |from: usize| {
        buf[from..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|i| from + i)
    };
    let e = line_end(0)?;
    let n: usize = std::str::from_utf8(&buf[1..e]).ok()?.parse().ok()?;
    let mut pos = e + 2;
    let mut args = Vec::new();
    for _ in 0..n {
        let e = line_end(pos)?;
        let len: usize = std::str::from_utf8(&buf[pos + 1..e]).ok()?.parse().ok()?;
        let start = e + 2;
        if buf.len() < start + len + 2 {
            return None;
        }
        args.push(buf[start..start + len].to_vec());
        pos = start + len + 2;
    }
    Some((args, pos))
}

fn serve_fake(mut s: TcpStream, mode: Fake, stop: Arc<AtomicBool>) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut gets = 0usize;
    let mut sizes = std::collections::HashMap::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        while let Some((args, used)) = parse_command(&buf) {
            buf.drain(..used);
            let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
            let reply: Option<Vec<u8>> = match name.as_str() {
                "INFO" => {
                    let body = "# Server\r\nredis_version:0.0.0-fake\r\n";
                    Some(format!("${}\r\n{body}\r\n", body.len()).into_bytes())
                }
                "PING" => Some(b"+PONG\r\n".to_vec()),
                _ if mode == Fake::Silent => None,
                "SET" => {
                    sizes.insert(args[1].clone(), args[2].len());
                    Some(b"+OK\r\n".to_vec())
                }
                "GET" => {
                    gets += 1;
                    match sizes.get(&args[1]) {
                        Some(n) if gets.is_multiple_of(2) => {
                            let mut r = format!("${n}\r\n").into_bytes();
                            r.extend(std::iter::repeat_n(b'?', *n));
                            r.extend_from_slice(b"\r\n");
                            Some(r)
                        }
                        _ => Some(b"$-1\r\n".to_vec()),
                    }
                }
                "DEL" => Some(format!(":{}\r\n", args.len() - 1).into_bytes()),
                _ => Some(b"-ERR unknown command\r\n".to_vec()),
            };
            if let Some(r) = reply {
                if s.write_all(&r).is_err() {
                    return;
                }
            }
        }
    }
}
