//! A small RESP2 client over [`Wire`]: command encoding straight into the
//! output buffer, and reply readers for the shapes the benchmarks expect.
//! Also [`skim`], a non-blocking parser that finds where a complete reply
//! ends in a byte slice, for the event-loop client.

use std::net::SocketAddr;
use std::time::Duration;

use crate::wire::{parse_i64, OpError, TlsClient, Wire};

/// A RESP connection.
pub struct RespConn {
    pub wire: Wire,
}

/// The first line of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// `+...`: range of the text.
    Simple((usize, usize)),
    /// `-...`: range of the text.
    Error((usize, usize)),
    Int(i64),
    /// `$n` (None for `$-1`).
    Bulk(Option<usize>),
    /// `*n` (None for `*-1`).
    Array(Option<usize>),
}

impl RespConn {
    pub fn connect(
        addr: &SocketAddr,
        timeout: Duration,
        tls: Option<&TlsClient>,
    ) -> Result<RespConn, OpError> {
        Ok(RespConn {
            wire: Wire::connect(addr, timeout, tls)?,
        })
    }

    /// Appends an array header `*n`.
    #[inline]
    pub fn arr(&mut self, n: usize) {
        let mut b = itoa::Buffer::new();
        self.wire.out.push(b'*');
        self.wire.out.extend_from_slice(b.format(n).as_bytes());
        self.wire.out.extend_from_slice(b"\r\n");
    }

    /// Appends a bulk string header `$len` (the caller appends the payload
    /// and then [`RespConn::crlf`]).
    #[inline]
    pub fn bulk_header(&mut self, len: usize) {
        let mut b = itoa::Buffer::new();
        self.wire.out.push(b'$');
        self.wire.out.extend_from_slice(b.format(len).as_bytes());
        self.wire.out.extend_from_slice(b"\r\n");
    }

    #[inline]
    pub fn crlf(&mut self) {
        self.wire.out.extend_from_slice(b"\r\n");
    }

    /// Appends a bulk string.
    #[inline]
    pub fn bulk(&mut self, s: &[u8]) {
        self.bulk_header(s.len());
        self.wire.out.extend_from_slice(s);
        self.crlf();
    }

    /// Appends an integer as a bulk string.
    #[inline]
    pub fn bulk_int(&mut self, v: i64) {
        let mut b = itoa::Buffer::new();
        self.bulk(b.format(v).as_bytes());
    }

    /// Appends a whole command.
    pub fn cmd(&mut self, args: &[&[u8]]) {
        self.arr(args.len());
        for a in args {
            self.bulk(a);
        }
    }

    pub fn send(&mut self) -> Result<(), OpError> {
        self.wire.send()
    }

    /// Reads a reply's first line.
    pub fn head(&mut self) -> Result<Head, OpError> {
        let (s, e) = self.wire.line()?;
        let line = self.wire.slice((s, e));
        let Some(&t) = line.first() else {
            return Err(OpError::Protocol("empty reply line".into()));
        };
        let rest = &line[1..];
        let num = || {
            parse_i64(rest).ok_or_else(|| {
                OpError::Protocol(format!(
                    "bad number in reply {:?}",
                    String::from_utf8_lossy(line)
                ))
            })
        };
        Ok(match t {
            b'+' => Head::Simple((s + 1, e)),
            b'-' => Head::Error((s + 1, e)),
            b':' => Head::Int(num()?),
            b'$' => {
                let n = num()?;
                Head::Bulk(if n < 0 { None } else { Some(n as usize) })
            }
            b'*' => {
                let n = num()?;
                Head::Array(if n < 0 { None } else { Some(n as usize) })
            }
            _ => {
                return Err(OpError::Protocol(format!(
                    "unexpected reply {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(80)])
                )))
            }
        })
    }

    /// The text of an error reply whose range [`RespConn::head`] returned.
    pub fn error_text(&self, r: (usize, usize)) -> String {
        String::from_utf8_lossy(self.wire.slice(r)).into_owned()
    }

    fn unexpected(&self, what: &str, h: Head) -> OpError {
        OpError::Protocol(format!("expected {what}, got {h:?}"))
    }

    /// A status reply (`+OK`); an error reply becomes [`OpError::Server`].
    pub fn read_ok(&mut self) -> Result<(), OpError> {
        match self.head()? {
            Head::Simple(_) => Ok(()),
            Head::Error(r) => Err(OpError::Server(self.error_text(r))),
            h => {
                // Consume the rest so the connection stays in step.
                self.skip_rest(h)?;
                Err(self.unexpected("a status reply", h))
            }
        }
    }

    /// An integer reply.
    pub fn read_int(&mut self) -> Result<i64, OpError> {
        match self.head()? {
            Head::Int(n) => Ok(n),
            Head::Error(r) => Err(OpError::Server(self.error_text(r))),
            h => {
                self.skip_rest(h)?;
                Err(self.unexpected("an integer", h))
            }
        }
    }

    /// A bulk string read into `dest` (resized to its length); `None` for a
    /// nil reply.
    pub fn read_bulk_into(&mut self, dest: &mut Vec<u8>) -> Result<Option<usize>, OpError> {
        match self.head()? {
            Head::Bulk(Some(n)) => {
                self.wire.take_into(n, dest)?;
                Ok(Some(n))
            }
            Head::Bulk(None) => Ok(None),
            Head::Error(r) => Err(OpError::Server(self.error_text(r))),
            h => {
                self.skip_rest(h)?;
                Err(self.unexpected("a bulk string", h))
            }
        }
    }

    /// Any reply, discarded. Returns the element count of an array reply
    /// (None for a nil array or nil bulk), the length for a bulk string.
    /// A top-level error reply becomes [`OpError::Server`].
    pub fn read_any(&mut self) -> Result<Option<usize>, OpError> {
        let h = self.head()?;
        if let Head::Error(r) = h {
            return Err(OpError::Server(self.error_text(r)));
        }
        let n = match h {
            Head::Array(n) | Head::Bulk(n) => n,
            _ => Some(1),
        };
        self.skip_rest(h)?;
        Ok(n)
    }

    /// An array reply whose elements are discarded; returns how many of
    /// them were present (not nil). HGETALL of a missing key gives 0, and
    /// so does HMGET when every field is nil.
    pub fn read_array_present(&mut self) -> Result<usize, OpError> {
        let n = match self.head()? {
            Head::Array(Some(n)) => n,
            Head::Array(None) => return Ok(0),
            Head::Error(r) => return Err(OpError::Server(self.error_text(r))),
            h => {
                self.skip_rest(h)?;
                return Err(self.unexpected("an array", h));
            }
        };
        let mut present = 0;
        for _ in 0..n {
            let h = self.head()?;
            match h {
                Head::Bulk(None) | Head::Array(None) => {}
                _ => present += 1,
            }
            self.skip_rest(h)?;
        }
        Ok(present)
    }

    /// Consumes whatever follows a head already read (a bulk payload or an
    /// array's elements, nested arrays included).
    fn skip_rest(&mut self, h: Head) -> Result<(), OpError> {
        let mut pending: usize = match h {
            Head::Bulk(Some(n)) => {
                self.wire.skip(n)?;
                0
            }
            Head::Array(Some(n)) => n,
            _ => 0,
        };
        while pending > 0 {
            pending -= 1;
            match self.head()? {
                Head::Bulk(Some(n)) => self.wire.skip(n)?,
                Head::Array(Some(n)) => pending += n,
                _ => {}
            }
        }
        Ok(())
    }

    /// An array of bulk strings (e.g. ZRANGEBYSCORE) appended to `data`,
    /// with each element's range in `offs`. Returns the element count.
    pub fn read_bulk_array(
        &mut self,
        data: &mut Vec<u8>,
        offs: &mut Vec<(usize, usize)>,
    ) -> Result<usize, OpError> {
        data.clear();
        offs.clear();
        let n = match self.head()? {
            Head::Array(Some(n)) => n,
            Head::Array(None) => return Ok(0),
            Head::Error(r) => return Err(OpError::Server(self.error_text(r))),
            h => {
                self.skip_rest(h)?;
                return Err(self.unexpected("an array", h));
            }
        };
        for i in 0..n {
            match self.head()? {
                Head::Bulk(Some(len)) => {
                    let r = self.wire.take(len)?;
                    let start = data.len();
                    data.extend_from_slice(self.wire.slice(r));
                    offs.push((start, data.len()));
                }
                Head::Bulk(None) => offs.push((data.len(), data.len())),
                h => {
                    self.skip_rest(h)?;
                    // Keep the stream in step: consume the remaining elements.
                    let rest = n - i - 1;
                    if rest > 0 {
                        self.skip_rest(Head::Array(Some(rest)))?;
                    }
                    return Err(self.unexpected("bulk strings in the array", h));
                }
            }
        }
        Ok(n)
    }
}

/// Result of [`skim`] on a complete reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skimmed {
    /// Bytes the reply occupies.
    pub len: usize,
    /// The reply is an error (`-...`) at top level.
    pub error: bool,
    /// The reply is a nil bulk or nil array.
    pub nil: bool,
}

/// Finds the end of the first complete RESP2/RESP3 reply in `buf`. Returns
/// `Ok(None)` when more bytes are needed.
pub fn skim(buf: &[u8]) -> Result<Option<Skimmed>, String> {
    // The reply of SET and most writes: skipped without a line search
    // (a quarter of get-set's per-request client instructions otherwise).
    if buf.starts_with(b"+OK\r\n") {
        return Ok(Some(Skimmed {
            len: 5,
            error: false,
            nil: false,
        }));
    }
    let mut pos = 0usize;
    let mut pending = 1usize;
    let mut first = true;
    let mut error = false;
    let mut nil = false;
    while pending > 0 {
        let Some(i) = memchr::memchr(b'\n', &buf[pos..]) else {
            return Ok(None);
        };
        let line_end = pos + i;
        if i == 0 || buf[line_end - 1] != b'\r' {
            return Err("reply line not ended by CRLF".into());
        }
        let t = buf[pos];
        let body = &buf[pos + 1..line_end - 1];
        pos = line_end + 1;
        pending -= 1;
        match t {
            b'+' | b':' | b',' | b'#' | b'(' | b'_' => {}
            b'-' | b'!' if !first => {}
            b'-' => error = true,
            b'$' | b'=' => {
                let n = parse_i64(body).ok_or("bad bulk length")?;
                if n >= 0 {
                    // Checked: a hostile length must not wrap around.
                    let need = usize::try_from(n)
                        .ok()
                        .and_then(|n| pos.checked_add(n)?.checked_add(2))
                        .ok_or("bulk length out of range")?;
                    if buf.len() < need {
                        return Ok(None);
                    }
                    pos = need;
                } else if first {
                    nil = true;
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = parse_i64(body).ok_or("bad aggregate length")?;
                if n > 0 {
                    let mult = if matches!(t, b'%' | b'|') { 2 } else { 1 };
                    pending = pending.saturating_add((n as usize).saturating_mul(mult));
                } else if n < 0 && first {
                    nil = true;
                }
            }
            _ => return Err(format!("unexpected reply type byte {t:#04x}")),
        }
        first = false;
    }
    Ok(Some(Skimmed {
        len: pos,
        error,
        nil,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skim_shapes() {
        assert_eq!(skim(b"+OK\r\n").unwrap().unwrap().len, 5);
        assert_eq!(skim(b"+OK\r").unwrap(), None);
        let s = skim(b"$3\r\nabc\r\n+OK\r\n").unwrap().unwrap();
        assert_eq!((s.len, s.error, s.nil), (9, false, false));
        assert_eq!(skim(b"$3\r\nab").unwrap(), None);
        assert!(skim(b"$-1\r\n").unwrap().unwrap().nil);
        assert!(skim(b"-ERR x\r\n").unwrap().unwrap().error);
        let arr = b"*2\r\n$1\r\na\r\n*1\r\n:5\r\n";
        assert_eq!(skim(arr).unwrap().unwrap().len, arr.len());
        assert_eq!(skim(&arr[..arr.len() - 1]).unwrap(), None);
        assert!(skim(b"*-1\r\n").unwrap().unwrap().nil);
        assert!(skim(b"?\r\n").is_err());
        assert!(skim(b"+OK\n").is_err());
    }

    #[test]
    fn skim_fast_path_and_hostile_lengths() {
        // The +OK shortcut stops at the first reply, like the general path.
        let s = skim(b"+OK\r\n+OK\r\n").unwrap().unwrap();
        assert_eq!((s.len, s.error, s.nil), (5, false, false));
        assert_eq!(skim(b"+OKAY\r\n").unwrap().unwrap().len, 7);
        // Lengths near the integer limits: an error or "need more", never
        // a wrap-around or a panic.
        assert!(
            skim(b"$9223372036854775807\r\n").is_err()
                || skim(b"$9223372036854775807\r\n").unwrap().is_none()
        );
        assert_eq!(skim(b"*9223372036854775807\r\n:1\r\n").unwrap(), None);
    }
}
