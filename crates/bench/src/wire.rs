//! A blocking TCP connection, plain or TLS (rustls), with reusable read and
//! write buffers, shared by the RESP and memcached clients. Nothing here
//! allocates per operation once the buffers have grown to the largest reply
//! seen.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// How to speak TLS to a target: the client context and the name its
/// certificate must carry.
#[derive(Debug, Clone)]
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// The socket, or the TLS session over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    fn sock(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(t) => t.flush(),
        }
    }
}

/// Why an operation did not succeed. Each kind is counted separately in the
/// report; none of them is ever timed as a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    /// The client time-out expired (the server did not answer in time).
    Timeout,
    /// The connection failed (reset, refused, broken pipe).
    Io(String),
    /// The server closed the connection.
    Closed,
    /// The server answered with an error reply.
    Server(String),
    /// The server refused to store a value (NOT_STORED, SERVER_ERROR object
    /// too large, OOM, ...).
    Refused(String),
    /// A value that should exist was not returned.
    Missing,
    /// A value came back different from what was written.
    Wrong(String),
    /// The reply did not parse or had an unexpected shape.
    Protocol(String),
}

impl OpError {
    /// The key under which the report counts this error.
    pub fn kind(&self) -> &'static str {
        match self {
            OpError::Timeout => "timeout",
            OpError::Io(_) => "io",
            OpError::Closed => "closed",
            OpError::Server(_) => "server_error",
            OpError::Refused(_) => "refused",
            OpError::Missing => "missing",
            OpError::Wrong(_) => "wrong_value",
            OpError::Protocol(_) => "protocol",
        }
    }

    /// A human-readable detail for the report's error samples.
    pub fn detail(&self) -> String {
        match self {
            OpError::Timeout => "client time-out".into(),
            OpError::Io(s)
            | OpError::Server(s)
            | OpError::Refused(s)
            | OpError::Wrong(s)
            | OpError::Protocol(s) => s.clone(),
            OpError::Closed => "connection closed by server".into(),
            OpError::Missing => "value missing".into(),
        }
    }

    /// After these the connection's state is unknown (a late reply may still
    /// arrive), so the client must reconnect before the next operation.
    pub fn breaks_connection(&self) -> bool {
        matches!(
            self,
            OpError::Timeout | OpError::Io(_) | OpError::Closed | OpError::Protocol(_)
        )
    }
}

impl std::fmt::Display for OpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind(), self.detail())
    }
}

impl From<io::Error> for OpError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => OpError::Timeout,
            io::ErrorKind::UnexpectedEof => OpError::Closed,
            _ => OpError::Io(e.to_string()),
        }
    }
}

const INITIAL_BUF: usize = 64 * 1024;

/// A connected socket plus an output buffer (`out`, filled by the protocol
/// encoders, sent by [`Wire::send`]) and an input buffer `buf[pos..end]`.
pub struct Wire {
    stream: Stream,
    pub out: Vec<u8>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

impl Wire {
    /// Connects with `timeout` as connect, read and write time-out; over
    /// TLS if `tls` (the handshake completes with the first exchange).
    pub fn connect(
        addr: &SocketAddr,
        timeout: Duration,
        tls: Option<&TlsClient>,
    ) -> Result<Wire, OpError> {
        let sock = TcpStream::connect_timeout(addr, timeout)?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        let stream = match tls {
            None => Stream::Plain(sock),
            Some(t) => {
                let conn = ClientConnection::new(t.config.clone(), t.server_name.clone())
                    .map_err(|e| OpError::Io(format!("TLS: {e}")))?;
                Stream::Tls(Box::new(StreamOwned::new(conn, sock)))
            }
        };
        Ok(Wire {
            stream,
            out: Vec::with_capacity(INITIAL_BUF),
            buf: vec![0; INITIAL_BUF],
            pos: 0,
            end: 0,
        })
    }

    /// Changes the read and write time-out.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), OpError> {
        self.stream.sock().set_read_timeout(Some(timeout))?;
        self.stream.sock().set_write_timeout(Some(timeout))?;
        Ok(())
    }

    /// Writes `out` and clears it.
    pub fn send(&mut self) -> Result<(), OpError> {
        let r = self
            .stream
            .write_all(&self.out)
            .and_then(|()| self.stream.flush());
        self.out.clear();
        r.map_err(OpError::from)
    }

    /// Bytes received and not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Marks `n` buffered bytes consumed.
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.pos);
        self.pos += n;
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        }
    }

    /// Reads at least one more byte from the socket into the buffer,
    /// compacting or growing it when full.
    pub fn fill(&mut self) -> Result<(), OpError> {
        if self.end == self.buf.len() {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.pos = 0;
            } else {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            }
        }
        loop {
            match self.stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(OpError::Closed),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Ensures `n` bytes are buffered.
    pub fn need(&mut self, n: usize) -> Result<(), OpError> {
        if self.end - self.pos >= n {
            return Ok(());
        }
        if self.buf.len() - self.pos < n {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
            if self.buf.len() < n {
                self.buf.resize(n.next_power_of_two(), 0);
            }
        }
        while self.end - self.pos < n {
            self.fill()?;
        }
        Ok(())
    }

    /// The next line (without its CRLF) as a range into the buffer, which
    /// stays valid until the next read; the line is consumed.
    pub fn line(&mut self) -> Result<(usize, usize), OpError> {
        let mut scanned = 0;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.pos + scanned..self.end]) {
                let nl = self.pos + scanned + i;
                if nl == self.pos || self.buf[nl - 1] != b'\r' {
                    return Err(OpError::Protocol("line not ended by CRLF".into()));
                }
                let r = (self.pos, nl - 1);
                // Do not reset pos/end here: the range must stay valid.
                self.pos = nl + 1;
                return Ok(r);
            }
            scanned = self.end - self.pos;
            if scanned > 64 * 1024 * 1024 {
                return Err(OpError::Protocol("reply line over 64 MiB".into()));
            }
            self.fill()?;
        }
    }

    /// The bytes of a range returned by [`Wire::line`] or [`Wire::take`].
    pub fn slice(&self, r: (usize, usize)) -> &[u8] {
        &self.buf[r.0..r.1]
    }

    /// Consumes `n` bytes followed by CRLF and returns the range of the `n`.
    pub fn take(&mut self, n: usize) -> Result<(usize, usize), OpError> {
        self.need(n + 2)?;
        let start = self.pos;
        if &self.buf[start + n..start + n + 2] != b"\r\n" {
            return Err(OpError::Protocol("payload not followed by CRLF".into()));
        }
        self.pos += n + 2;
        Ok((start, start + n))
    }

    /// Consumes `n` payload bytes plus CRLF into `dest` (resized to `n`),
    /// reading the part not yet buffered straight from the socket so that a
    /// large value is copied once.
    pub fn take_into(&mut self, n: usize, dest: &mut Vec<u8>) -> Result<(), OpError> {
        // Resizing to the same length as last time writes nothing.
        dest.resize(n, 0);
        let avail = (self.end - self.pos).min(n);
        dest[..avail].copy_from_slice(&self.buf[self.pos..self.pos + avail]);
        self.pos += avail;
        if avail < n {
            self.pos = 0;
            self.end = 0;
            let mut got = avail;
            while got < n {
                match self.stream.read(&mut dest[got..]) {
                    Ok(0) => return Err(OpError::Closed),
                    Ok(k) => got += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        self.need(2)?;
        if &self.buf[self.pos..self.pos + 2] != b"\r\n" {
            return Err(OpError::Protocol("payload not followed by CRLF".into()));
        }
        self.consume(2);
        Ok(())
    }

    /// Consumes `n` payload bytes plus CRLF without keeping them.
    pub fn skip(&mut self, n: usize) -> Result<(), OpError> {
        let mut left = n + 2;
        while left > 0 {
            if self.end == self.pos {
                self.pos = 0;
                self.end = 0;
                self.fill()?;
            }
            let k = left.min(self.end - self.pos);
            left -= k;
            self.pos += k;
        }
        // The CRLF itself is not checked when it straddled reads; a framing
        // error shows up on the next reply.
        Ok(())
    }
}

/// Parses an unsigned decimal.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// Parses a signed decimal.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.first() {
        Some(b'-') => {
            let v = parse_u64(&s[1..])?;
            if v <= i64::MAX as u64 + 1 {
                Some((v as i64).wrapping_neg())
            } else {
                None
            }
        }
        _ => parse_u64(s).and_then(|v| i64::try_from(v).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1a"), None);
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    #[test]
    fn error_kinds() {
        let e: OpError = io::Error::from(io::ErrorKind::WouldBlock).into();
        assert_eq!(e, OpError::Timeout);
        assert!(e.breaks_connection());
        assert!(!OpError::Missing.breaks_connection());
        assert_eq!(OpError::Refused("x".into()).kind(), "refused");
    }
}
