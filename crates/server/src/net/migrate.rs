//! MIGRATE's outbound connections (Redis 7.0 `migrateGetSocket`,
//! `migrateCloseSocket`, `migrateCloseTimedoutSockets`): one blocking TCP
//! connection per target `host:port`, cached for reuse and closed after
//! 10 s unused, at most 64 at once, with the database last SELECTed on it
//! so a later MIGRATE to the same database skips the SELECT.
//!
//! The exchange blocks the calling worker for the network round trips, as
//! Redis blocks its main thread: every step (connect, write, each reply
//! line) is bounded by MIGRATE's timeout. The cache is process-wide, as
//! Redis's is; a connection is taken out of it while in use, so two
//! workers migrating to one target at once use two connections.
//!
//! This module speaks just enough RESP to send commands and read one-line
//! replies (`syncReadLine`); what the commands are is the handler's.
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Redis `MIGRATE_SOCKET_CACHE_ITEMS` and `MIGRATE_SOCKET_CACHE_TTL`.
const CACHE_ITEMS: usize = 64;
const CACHE_TTL: Duration = Duration::from_secs(10);
/// `syncReadLine`'s buffer in `migrateCommand`: longer lines are cut.
const LINE_MAX: usize = 1024;

/// A connection to a target server.
pub struct Target {
    name: String,
    stream: BufReader<TcpStream>,
    /// The database the last successful MIGRATE selected, if any.
    pub last_db: Option<i64>,
    last_use: Instant,
}

fn cache() -> &'static Mutex<HashMap<String, Target>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Target>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Why no connection could be had.
pub enum TakeError {
    /// The address did not resolve: Redis's "error or timeout connecting".
    Resolve,
    /// The TCP connection failed or timed out. Redis's blocking connect
    /// reports success then (it only waits for writability), so the
    /// failure shows on the first write: the caller treats it as one.
    Connect(io::Error),
}

/// The cached connection to `host:port`, or a new one made within
/// `timeout`.
pub fn take(host: &[u8], port: &[u8], timeout: Duration) -> Result<Target, TakeError> {
    let name = format!(
        "{}:{}",
        String::from_utf8_lossy(host),
        String::from_utf8_lossy(port)
    );
    {
        let mut c = cache().lock();
        c.retain(|_, t| t.last_use.elapsed() <= CACHE_TTL);
        if let Some(t) = c.remove(&name) {
            return Ok(t);
        }
    }
    let port = atoi(port);
    let host = String::from_utf8_lossy(host).into_owned();
    let deadline = Instant::now() + timeout;
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|_| TakeError::Resolve)?
        .collect();
    if addrs.is_empty() {
        return Err(TakeError::Resolve);
    }
    let mut last = io::Error::from(io::ErrorKind::TimedOut);
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(s) => {
                s.set_nodelay(true).map_err(TakeError::Connect)?;
                return Ok(Target {
                    name,
                    stream: BufReader::new(s),
                    last_db: None,
                    last_use: Instant::now(),
                });
            }
            Err(e) => last = e,
        }
    }
    Err(TakeError::Connect(last))
}

/// C's `atoi`: leading digits, else 0 (Redis reads MIGRATE's port so).
fn atoi(b: &[u8]) -> u16 {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    std::str::from_utf8(&b[..digits])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(0, |v| v as u16)
}

/// Puts a connection back for reuse.
pub fn give_back(mut t: Target) {
    t.last_use = Instant::now();
    let mut c = cache().lock();
    if c.len() >= CACHE_ITEMS {
        // Redis evicts a random entry; the least recently used is as good.
        if let Some(oldest) = c
            .iter()
            .min_by_key(|(_, t)| t.last_use)
            .map(|(k, _)| k.clone())
        {
            c.remove(&oldest);
        }
    }
    c.insert(t.name.clone(), t);
}

/// Whether an I/O error is a timeout (Redis retries other errors once).
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

impl Target {
    /// Writes all of `buf` within `timeout`.
    pub fn send(&mut self, buf: &[u8], timeout: Duration) -> io::Result<()> {
        let s = self.stream.get_mut();
        s.set_write_timeout(Some(timeout))?;
        s.write_all(buf)?;
        s.flush()
    }

    /// One reply line without its CRLF, cut at `LINE_MAX` bytes.
    pub fn read_line(&mut self, timeout: Duration) -> io::Result<Vec<u8>> {
        self.stream.get_ref().set_read_timeout(Some(timeout))?;
        let mut line = Vec::new();
        loop {
            let buf = self.stream.fill_buf()?;
            if buf.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let room = LINE_MAX - line.len();
            let upto = buf.len().min(room);
            if let Some(i) = buf[..upto].iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&buf[..i]);
                self.stream.consume(i + 1);
                break;
            }
            line.extend_from_slice(&buf[..upto]);
            self.stream.consume(upto);
            if line.len() >= LINE_MAX {
                break;
            }
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Ok(line)
    }
}

/// Appends one command in RESP's multibulk form.
pub fn put_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn atoi_reads_leading_digits() {
        assert_eq!(atoi(b"6379"), 6379);
        assert_eq!(atoi(b"12ab"), 12);
        assert_eq!(atoi(b"x"), 0);
    }

    #[test]
    fn lines_are_read_and_connections_reused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"*1\r\n$4\r\nPING\r\n");
            s.write_all(b"+PONG\r\n-ERR x\r\n").unwrap();
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
        });
        let t = Duration::from_secs(5);
        let mut c = take(b"127.0.0.1", port.as_bytes(), t).ok().unwrap();
        let mut cmd = Vec::new();
        put_command(&mut cmd, &[b"PING"]);
        c.send(&cmd, t).unwrap();
        assert_eq!(c.read_line(t).unwrap(), b"+PONG");
        assert_eq!(c.read_line(t).unwrap(), b"-ERR x");
        c.last_db = Some(3);
        give_back(c);
        let mut c = take(b"127.0.0.1", port.as_bytes(), t).ok().unwrap();
        assert_eq!(c.last_db, Some(3));
        c.send(b"x", t).unwrap();
        server.join().unwrap();
    }
}
