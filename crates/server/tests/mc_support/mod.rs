//! Support for the memcached-protocol tests (`mod mc_support;`): Cairn with
//! its memcached port on, a reference memcached started on an ephemeral
//! port and killed on drop (even when the test fails), and a raw
//! connection that reads one step's replies exactly.
//!
//! A raw connection delimits replies without knowing their shape: after
//! the bytes of a step it sends a sync request, `mg __cairn_sync__ O<n>`,
//! whose reply `EN O<n>` is unique, and returns everything before it. A
//! step that closes the connection returns what arrived and `closed`.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{start_cairn, Server};

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
}

/// Cairn with its memcached listener on; `.1` is the memcached port.
pub fn cairn(args: &[&str]) -> (Server, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut all = vec!["--memcached-port", p.as_str()];
    all.extend_from_slice(args);
    let server = start_cairn(&all);
    wait_for(port);
    (server, port)
}

fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The memcached binary: `$MEMCACHED`, else `memcached` on PATH.
pub fn memcached_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MEMCACHED") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("memcached"))
        .find(|p| p.is_file())
}

/// A reference memcached; killed and reaped on drop.
pub struct Memcached {
    pub port: u16,
    child: Child,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts memcached (`-U 0 -l 127.0.0.1 -t 2` plus `args`) on a free port.
/// None when memcached is not installed, unless `CI` is set (then a
/// missing memcached fails the test).
pub fn start_memcached(args: &[&str]) -> Option<Memcached> {
    let Some(bin) = memcached_path() else {
        if std::env::var_os("CI").is_some() {
            panic!("memcached is required in CI (apt-get install -y memcached)");
        }
        eprintln!("memcached not found: skipping the comparison");
        return None;
    };
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.args([
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-l",
            "127.0.0.1",
            "-t",
            "2",
        ]);
        // memcached refuses to run as root without a user to switch to.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let mut m = Memcached { port, child };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(m);
            }
            if m.child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(m);
    }
    panic!("memcached did not start after 5 attempts");
}

/// A raw memcached-protocol connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    sync: u64,
    pub closed: bool,
    /// The last step got no sync reply in time (its bytes left the server
    /// waiting for more); the connection is then treated as closed.
    pub timed_out: bool,
}

/// How long one step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect 127.0.0.1:{port}: {e}"));
        stream.set_nodelay(true).ok();
        stream.set_read_timeout(Some(STEP_TIMEOUT)).ok();
        stream.set_write_timeout(Some(STEP_TIMEOUT)).ok();
        Conn {
            stream,
            buf: Vec::new(),
            sync: 0,
            closed: false,
            timed_out: false,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        if self.stream.write_all(bytes).is_err() {
            self.closed = true;
        }
    }

    /// Sends `bytes` and returns every reply byte they produced.
    pub fn step(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.sync += 1;
        let marker = format!("EN O{}\r\n", self.sync);
        let mut msg = bytes.to_vec();
        msg.extend_from_slice(format!("mg __cairn_sync__ O{}\r\n", self.sync).as_bytes());
        self.send(&msg);
        self.read_until(marker.as_bytes())
    }

    /// `step` for text that is one or more lines (each given "\r\n").
    pub fn cmd(&mut self, text: &str) -> String {
        let mut b = Vec::new();
        for l in text.split('\n') {
            b.extend_from_slice(l.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        String::from_utf8_lossy(&self.step(&b)).into_owned()
    }

    /// Reads until `marker` ends a line at the end of what arrived, and
    /// returns what came before it. On close, returns what arrived.
    fn read_until(&mut self, marker: &[u8]) -> Vec<u8> {
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some(pos) = find_marker(&self.buf, marker) {
                let out = self.buf[..pos].to_vec();
                self.buf.drain(..pos + marker.len());
                return out;
            }
            if self.closed || Instant::now() > deadline {
                return std::mem::take(&mut self.buf);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => self.closed = true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    self.timed_out = true;
                    self.closed = true;
                }
                Err(_) => self.closed = true,
            }
        }
    }

    /// Reads exactly `n` bytes (for large replies checked piecewise).
    pub fn read_exact(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            let mut chunk = vec![0u8; 1 << 20];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("closed after {} of {n} bytes", self.buf.len()),
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("read: {e}"),
            }
        }
        self.buf.drain(..n).collect()
    }

    /// True once the server has closed the connection (waits up to 2 s).
    pub fn wait_closed(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .ok();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut chunk = [0u8; 4096];
        while !self.closed && Instant::now() < deadline {
            match self.stream.read(&mut chunk) {
                Ok(0) => self.closed = true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => self.closed = true,
            }
        }
        self.stream.set_read_timeout(Some(STEP_TIMEOUT)).ok();
        self.closed
    }

    /// What arrived but was not returned yet.
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }
}

/// Where `marker` starts, if it is at the start of `buf` or right after a
/// "\n", and ends `buf`'s contents (nothing after it: the sync reply is
/// the last thing the step's bytes produce).
fn find_marker(buf: &[u8], marker: &[u8]) -> Option<usize> {
    if !buf.ends_with(marker) {
        return None;
    }
    let pos = buf.len() - marker.len();
    (pos == 0 || buf[pos - 1] == b'\n').then_some(pos)
}
