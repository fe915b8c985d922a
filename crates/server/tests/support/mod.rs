//! Shared support for Cairn's integration tests (`mod support;` in each test
//! file): starting Cairn and a reference redis-server, a raw RESP connection
//! that sees the exact reply bytes, and `redis` crate clients.
//!
//! Every server is owned by a [`Server`], whose `Drop` kills the process and
//! waits for it, so a failing test never leaks a server.
#![allow(dead_code)]

pub mod clients;
pub mod sentinel;
pub mod tier;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cairn_protocol::resp::{self, Frame};
use redis::{Connection, FromRedisValue, RedisError, Value};

/// How long a server may take to become ready.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Read and write timeout of a [`RawConn`].
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A running server process (Cairn or redis-server).
pub struct Server {
    pub port: u16,
    child: Child,
    log_path: PathBuf,
    name: &'static str,
    /// A file of the server's own, removed when it stops (a redis-server's
    /// RDB file: see `start_redis`).
    pub(crate) scratch: Option<PathBuf>,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file that receives the process's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Everything the process has logged so far.
    pub fn log(&self) -> String {
        std::fs::read(&self.log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// `Some(status)` once the process has exited.
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Waits up to [`START_TIMEOUT`] for the process to answer PING on its
    /// port: false if it exited or stayed silent.
    pub fn answers_ping(&mut self) -> bool {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline && self.is_running() {
            if ping(self.port) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.exit_status() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new raw connection to this server.
    pub fn conn(&self) -> RawConn {
        RawConn::connect(self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(f) = &self.scratch {
            let _ = std::fs::remove_file(f);
        }
        if std::thread::panicking() {
            eprintln!(
                "{} (pid {}) log kept at {}",
                self.name,
                self.child.id(),
                self.log_path.display()
            );
        } else {
            let _ = std::fs::remove_file(&self.log_path);
        }
    }
}

fn temp_log(prefix: &str) -> (PathBuf, File) {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}-{nanos}.log",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .and_then(|_| OpenOptions::new().append(true).open(&path))
        .unwrap_or_else(|e| panic!("cannot create log file {}: {e}", path.display()));
    (path, file)
}

fn spawn_logged(mut cmd: Command, prefix: &str) -> io::Result<(Child, PathBuf)> {
    let (path, file) = temp_log(prefix);
    let out = file.try_clone()?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(file);
    match cmd.spawn() {
        Ok(child) => Ok((child, path)),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e)
        }
    }
}

/// The port in a Cairn log line `... Ready to accept connections tcp addr=127.0.0.1:PORT`.
fn parse_ready_port(log: &str) -> Option<u16> {
    log.lines()
        .filter(|l| l.contains("Ready to accept connections"))
        .find_map(|l| {
            let addr = l[l.find("addr=")? + 5..].split_whitespace().next()?;
            addr.rsplit(':').next()?.trim_end_matches(']').parse().ok()
        })
}

/// Starts the `cairn` binary on an ephemeral port (`--port 0 --bind 127.0.0.1`
/// plus `args`) and waits for its ready line. Panics if it does not start.
pub fn start_cairn(args: &[&str]) -> Server {
    start_cairn_env(args, &[])
}

/// `start_cairn` with extra environment variables for the process (test
/// knobs such as `CAIRN_TEST_SNAPSHOT_FAULT_AFTER`).
/// `start_cairn` with the child's `RLIMIT_NOFILE` (soft and hard) set to
/// `nofile`, as `ulimit -n` would.
pub fn start_cairn_nofile(args: &[&str], nofile: u64) -> Server {
    start_cairn_limited(None, args, &[], Some(nofile))
}

pub fn start_cairn_env(args: &[&str], env: &[(&str, &str)]) -> Server {
    start_cairn_from(None, args, env)
}

/// `start_cairn` with a config file as the first argument (the options
/// still override it).
pub fn start_cairn_conf(conf: &Path, args: &[&str]) -> Server {
    start_cairn_from(Some(conf), args, &[])
}

fn start_cairn_from(conf: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> Server {
    start_cairn_limited(conf, args, env, None)
}

fn start_cairn_limited(
    conf: Option<&Path>,
    args: &[&str],
    env: &[(&str, &str)],
    nofile: Option<u64>,
) -> Server {
    let bin = env!("CARGO_BIN_EXE_cairn");
    let mut cmd = Command::new(bin);
    if let Some(n) = nofile {
        use std::os::unix::process::CommandExt;
        let lim = libc::rlimit {
            rlim_cur: n as libc::rlim_t,
            rlim_max: n as libc::rlim_t,
        };
        // SAFETY: setrlimit is async-signal-safe and only reads `lim`.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        }
    }
    if let Some(conf) = conf {
        cmd.arg(conf);
    }
    cmd.args(["--port", "0", "--bind", "127.0.0.1"]).args(args);
    // A test that asks for several workers means to spread its clients
    // over them: keep `worker-balance` from gathering them on one while
    // the test is light (tests of the balancing itself say so explicitly).
    let threads = args.iter().position(|a| *a == "--server-threads");
    let several = threads
        .and_then(|i| args.get(i + 1))
        .is_some_and(|n| *n != "1");
    if several && !args.contains(&"--worker-balance") {
        cmd.args(["--worker-balance", "no"]);
    }
    // A full sync waits `repl-diskless-sync-delay` (5 s) for more replicas;
    // tests want it now, as Redis's test suite's default config says,
    // unless they set it (a config file's own value stays).
    if conf.is_none() && !args.contains(&"--repl-diskless-sync-delay") {
        cmd.args(["--repl-diskless-sync-delay", "0"]);
    }
    cmd.envs(env.iter().copied());
    let (child, log_path) =
        spawn_logged(cmd, "cairn").unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
    // The port is unknown until the ready line; 0 keeps Drop usable meanwhile.
    let mut server = Server {
        port: 0,
        child,
        log_path,
        name: "cairn",
        scratch: None,
    };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let log = server.log();
        if let Some(port) = parse_ready_port(&log) {
            server.port = port;
            return server;
        }
        if let Some(st) = server.exit_status() {
            panic!("cairn {args:?} exited during startup ({st}); its output:\n{log}");
        }
        if Instant::now() >= deadline {
            panic!(
                "cairn {args:?} printed no 'Ready to accept connections ... addr=' line within {START_TIMEOUT:?}; its output:\n{log}"
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The `redis-server` executable, if one is installed (`$REDIS_SERVER` or `PATH`).
pub fn redis_server_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_SERVER") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
}

/// Sends PING on a fresh connection; true on `+PONG` (or `-NOAUTH`/`-LOADING`,
/// which also mean the server is up and answering).
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(n) if n > 0 => buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"),
        _ => false,
    }
}

/// Starts a reference redis-server on a free port (`--save '' --appendonly no
/// --enable-debug-command yes` plus `args`) and waits until it answers PING.
///
/// Returns `None` when redis-server is not installed, except when `CI` is
/// set: then a missing redis-server is a failure.
pub fn start_redis(args: &[&str]) -> Option<Server> {
    let Some(bin) = redis_server_path() else {
        if std::env::var_os("CI").is_some() {
            panic!("redis-server is required in CI (apt-get install -y redis-server)");
        }
        return None;
    };
    let dir = std::env::temp_dir();
    let mut last_log = String::new();
    for _attempt in 0..5 {
        let port = free_port();
        let rdb = format!("redis-{}-{port}.rdb", std::process::id());
        let mut cmd = Command::new(&bin);
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args(["--enable-debug-command", "yes", "--daemonize", "no"])
        .arg("--dir")
        .arg(&dir)
        // An RDB file of its own: a redis-server replica saves what it
        // syncs, and a later server in the shared temp dir loaded that
        // file (a backlog and a replication offset with it, which broke the
        // differential ROLE lines). A test's own --dir/--dbfilename win.
        .args(["--dbfilename", &rdb])
        .args(args);
        let (child, log_path) = spawn_logged(cmd, "redis")
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let mut server = Server {
            port,
            child,
            log_path,
            name: "redis-server",
            scratch: Some(dir.join(&rdb)),
        };
        if server.answers_ping() {
            return Some(server);
        }
        // Most likely the port was taken between free_port() and the bind:
        // drop (kill) this one and try another port.
        last_log = server.log();
    }
    panic!("redis-server {args:?} did not start after 5 attempts; last output:\n{last_log}");
}

/// A sync `redis` crate client (RESP2).
pub fn redis_client(port: u16) -> redis::Connection {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("redis client url");
    client
        .get_connection_with_timeout(IO_TIMEOUT)
        .expect("redis client connect")
}

/// A sync `redis` crate client speaking RESP3 (it sends `HELLO 3`).
pub fn redis_client_resp3(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/?protocol=resp3"))
        .expect("redis client url");
    client
        .get_connection_with_timeout(IO_TIMEOUT)
        .expect("redis client connect (resp3)")
}

/// A plain TCP connection speaking RESP, exposing the exact bytes of replies.
pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
    eof: bool,
}

impl RawConn {
    pub fn connect(port: u16) -> RawConn {
        Self::try_connect(port).unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"))
    }

    pub fn try_connect(port: u16) -> io::Result<RawConn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let _ = stream.set_nodelay(true);
        Ok(RawConn {
            stream,
            buf: Vec::new(),
            eof: false,
        })
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one command as a RESP multibulk.
    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        resp::encode_command(args, &mut out);
        self.send_raw(&out);
    }

    /// Sends bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.try_send_raw(bytes)
            .unwrap_or_else(|e| panic!("write failed: {e}"));
    }

    pub fn try_send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// The exact bytes of one complete reply frame. Bytes after it stay
    /// buffered for the next read. Panics on EOF, timeout or a bad frame.
    pub fn read_raw_reply(&mut self) -> Vec<u8> {
        match self.try_read_raw_reply() {
            Ok(Some(bytes)) => bytes,
            Ok(None) => panic!("connection closed by the server while waiting for a reply"),
            Err(e) => panic!("reading a reply: {e}"),
        }
    }

    /// Like [`read_raw_reply`](Self::read_raw_reply), but `Ok(None)` when the
    /// server closed the connection before a complete frame (partial bytes
    /// are discarded) and `Err` on timeout, I/O error or an undecodable frame.
    pub fn try_read_raw_reply(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if !self.buf.is_empty() {
                match resp::frame_len(&self.buf) {
                    Ok(Some(n)) => return Ok(Some(self.buf.drain(..n).collect())),
                    Ok(None) => {}
                    Err(_) => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("undecodable reply bytes: {}", escape(&self.buf)),
                        ));
                    }
                }
            }
            if self.eof {
                self.buf.clear();
                return Ok(None);
            }
            self.fill()?;
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => self.eof = true,
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => self.eof = true,
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// One decoded reply frame.
    pub fn read_frame(&mut self) -> Frame {
        let raw = self.read_raw_reply();
        match resp::decode_frame(&raw) {
            Ok(Some((frame, _))) => frame,
            _ => panic!("cannot decode reply {}", escape(&raw)),
        }
    }

    /// Sends a command and returns the exact bytes of its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.read_raw_reply()
    }

    /// True when the server has closed the connection. Buffered or pending
    /// reply bytes mean open; otherwise waits up to 200 ms for an EOF.
    pub fn is_closed(&mut self) -> bool {
        self.is_closed_within(Duration::from_millis(200))
    }

    pub fn is_closed_within(&mut self, wait: Duration) -> bool {
        if self.eof {
            return true;
        }
        if !self.buf.is_empty() {
            return false;
        }
        let _ = self
            .stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))));
        let mut b = [0u8; 1];
        let closed = match self.stream.peek(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
            ),
        };
        let _ = self.stream.set_read_timeout(Some(IO_TIMEOUT));
        if closed {
            self.eof = true;
        }
        closed
    }

    /// Closes our side.
    pub fn close(self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Printable form of protocol bytes: `\r`, `\n`, `\t`, `\\`, `\"` escaped,
/// other bytes outside printable ASCII as `\xHH`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s
}

/// Inverse of a C-like escaped string: `\r \n \t \0 \\ \" \xHH`; any other
/// byte is literal. Used for raw protocol bytes in test data.
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1).ok_or("trailing backslash")?;
        i += 2;
        out.push(match c {
            b'r' => b'\r',
            b'n' => b'\n',
            b't' => b'\t',
            b'0' => 0,
            b'\\' => b'\\',
            b'"' => b'"',
            b'x' => {
                let hex = s.get(i..i + 2).ok_or("short \\x escape")?;
                i += 2;
                u8::from_str_radix(hex, 16).map_err(|_| format!("bad \\x escape {hex:?}"))?
            }
            o => return Err(format!("unknown escape \\{}", o as char)),
        });
    }
    Ok(out)
}

// ------------------------------------------------- redis crate helpers ---

pub fn server() -> (Server, Connection) {
    let s = start_cairn(&["--enable-debug-command", "yes"]);
    let c = redis_client(s.port);
    (s, c)
}

pub fn cmd(args: &[&[u8]]) -> redis::Cmd {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Runs a command (string arguments) and converts its reply.
pub fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    cmd(&bytes)
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

pub fn int(con: &mut Connection, args: &[&str]) -> i64 {
    q(con, args)
}

pub fn ok(con: &mut Connection, args: &[&str]) {
    let r: String = q(con, args);
    assert_eq!(r, "OK", "{args:?}");
}

/// Runs a command that must fail; returns the error line as Redis sent it.
pub fn err(con: &mut Connection, args: &[&str]) -> String {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    match cmd(&bytes).query::<Value>(con) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => err_line(&e),
    }
}

pub fn err_line(e: &RedisError) -> String {
    match e.detail() {
        Some(d) => format!("{} {}", e.code().unwrap_or("?"), d),
        None => e.code().unwrap_or("?").to_string(),
    }
}

/// A test's own scratch directory under the system's temp dir, named by
/// `prefix`, the test's `name`, the process and the time, removed on drop.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(prefix: &str, name: &str) -> TestDir {
        // The counter keeps two directories made in the same nanosecond by
        // one test binary apart; the time, runs of the binary.
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let d = std::env::temp_dir().join(format!(
            "cairn-{prefix}-{name}-{}-{nanos}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TestDir(d)
    }

    /// A file's path inside the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The names of the files in the directory, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The directory as a `--dir` argument.
    pub fn s(&self) -> &str {
        self.0.to_str().unwrap()
    }

    /// A subdirectory, made on the way, as a `--dir` argument.
    pub fn sub(&self, name: &str) -> String {
        let p = self.0.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p.to_str().unwrap().to_string()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a command and returns its reply; panics on an error reply.
pub fn value(c: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// DEBUG DIGEST of the server's whole dataset.
pub fn digest(c: &mut Connection) -> String {
    match value(c, &["DEBUG", "DIGEST"]) {
        Value::SimpleString(s) => s,
        other => panic!("DEBUG DIGEST: {other:?}"),
    }
}

/// One field of an INFO section.
pub fn info_field(c: &mut Connection, section: &str, name: &str) -> Option<String> {
    let text: String = q(c, &["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(str::to_string)
}

/// The commands a replica attached with SYNC gets from the server at
/// `port` while `writes` run, up to the marker `SET end 1`; PINGs left out,
/// command names in lower case and millisecond deadlines as `<ms>` (the
/// two servers' clocks differ).
pub fn replication_stream(port: u16, writes: &[&[&str]]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    sock.write_all(b"SYNC\r\n").unwrap();
    let mut r = BufReader::new(sock);
    let line = |r: &mut BufReader<std::net::TcpStream>| {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        l.trim_end_matches(['\r', '\n']).to_string()
    };
    // Redis sends bare newlines while it writes the image.
    let mut len = line(&mut r);
    while len.is_empty() {
        len = line(&mut r);
    }
    let len: usize = len.strip_prefix('$').unwrap().parse().unwrap();
    let mut rdb = vec![0u8; len];
    r.read_exact(&mut rdb).unwrap();
    let mut c = redis_client(port);
    for w in writes {
        let _: Value = q(&mut c, w);
    }
    let _: Value = q(&mut c, &["SET", "end", "1"]);
    let mut got = Vec::new();
    loop {
        let n: usize = line(&mut r).strip_prefix('*').unwrap().parse().unwrap();
        let mut words = Vec::new();
        for i in 0..n {
            let l: usize = line(&mut r).strip_prefix('$').unwrap().parse().unwrap();
            let mut w = vec![0u8; l + 2];
            r.read_exact(&mut w).unwrap();
            let w = String::from_utf8(w[..l].to_vec()).unwrap();
            words.push(match w.parse::<u64>() {
                Ok(ms) if ms > 1_000_000_000_000 && ms != 4_000_000_000_000 => "<ms>".into(),
                _ if i == 0 => w.to_lowercase(),
                _ => w,
            });
        }
        let cmd = words.join(" ");
        match cmd.as_str() {
            "ping" => {}
            "set end 1" => return got,
            _ => got.push(cmd),
        }
    }
}

/// Polls `ok` every 50 ms until it holds; panics naming `what` after
/// `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
