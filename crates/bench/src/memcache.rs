//! A memcached text-protocol client over [`Wire`]: storage commands (set,
//! add, replace), get and multi-get, delete, stats, flush_all and version.
//! Also [`skim`], which finds the end of a complete reply in a byte slice.

use std::net::SocketAddr;
use std::time::Duration;

use crate::wire::{parse_u64, OpError, Wire};

/// A memcached connection.
pub struct McConn {
    pub wire: Wire,
}

impl McConn {
    pub fn connect(addr: &SocketAddr, timeout: Duration) -> Result<McConn, OpError> {
        Ok(McConn {
            wire: Wire::connect(addr, timeout, None)?,
        })
    }

    /// Appends `<verb> <key> <flags> <exptime> <bytes>\r\n<data>\r\n`.
    pub fn queue_store(&mut self, verb: &[u8], key: &[u8], flags: u32, exptime: u32, data: &[u8]) {
        self.store_header(verb, key, flags, exptime, data.len());
        self.wire.out.extend_from_slice(data);
        self.wire.out.extend_from_slice(b"\r\n");
    }

    /// Appends a storage command's header line; the caller appends exactly
    /// `len` bytes of data and then CRLF.
    pub fn store_header(&mut self, verb: &[u8], key: &[u8], flags: u32, exptime: u32, len: usize) {
        let out = &mut self.wire.out;
        let mut b = itoa::Buffer::new();
        out.extend_from_slice(verb);
        out.push(b' ');
        out.extend_from_slice(key);
        out.push(b' ');
        out.extend_from_slice(b.format(flags).as_bytes());
        out.push(b' ');
        out.extend_from_slice(b.format(exptime).as_bytes());
        out.push(b' ');
        out.extend_from_slice(b.format(len).as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// Reads a storage reply: `STORED` is success, anything else says why
    /// the value was not stored.
    pub fn read_store_reply(&mut self) -> Result<(), OpError> {
        let r = self.wire.line()?;
        let line = self.wire.slice(r);
        if line == b"STORED" {
            return Ok(());
        }
        let text = String::from_utf8_lossy(line).into_owned();
        Err(classify(line, text))
    }

    /// One storage command, sent and answered.
    pub fn store(
        &mut self,
        verb: &[u8],
        key: &[u8],
        flags: u32,
        exptime: u32,
        data: &[u8],
    ) -> Result<(), OpError> {
        self.queue_store(verb, key, flags, exptime, data);
        self.wire.send()?;
        self.read_store_reply()
    }

    /// Appends `get <key>...\r\n`.
    pub fn queue_get(&mut self, keys: &[&[u8]]) {
        self.wire.out.extend_from_slice(b"get");
        for k in keys {
            self.wire.out.push(b' ');
            self.wire.out.extend_from_slice(k);
        }
        self.wire.out.extend_from_slice(b"\r\n");
    }

    /// `get <key>` into `dest`; `None` when the key is absent.
    pub fn get_into(&mut self, key: &[u8], dest: &mut Vec<u8>) -> Result<Option<usize>, OpError> {
        self.queue_get(&[key]);
        self.wire.send()?;
        let mut found = None;
        loop {
            let r = self.wire.line()?;
            let line = self.wire.slice(r);
            if line == b"END" {
                return Ok(found);
            }
            let Some((_, n)) = parse_value_line(line) else {
                let text = String::from_utf8_lossy(line).into_owned();
                return Err(classify(line, text));
            };
            if found.is_some() {
                self.wire.skip(n)?;
            } else {
                self.wire.take_into(n, dest)?;
                found = Some(n);
            }
        }
    }

    /// Reads the reply to a (multi-)get, calling `each(key, len)` for every
    /// value returned, and returns how many there were. The data itself is
    /// discarded.
    pub fn read_values(&mut self, mut each: impl FnMut(&[u8], usize)) -> Result<usize, OpError> {
        let mut count = 0;
        loop {
            let r = self.wire.line()?;
            let line = self.wire.slice(r);
            if line == b"END" {
                return Ok(count);
            }
            let Some((key, n)) = parse_value_line(line) else {
                let text = String::from_utf8_lossy(line).into_owned();
                return Err(classify(line, text));
            };
            each(key, n);
            self.wire.skip(n)?;
            count += 1;
        }
    }

    /// Like [`McConn::read_values`], but `each(key, data)` sees each value's
    /// bytes (to verify them).
    pub fn read_values_data(
        &mut self,
        mut each: impl FnMut(&[u8], &[u8]),
    ) -> Result<usize, OpError> {
        let mut count = 0;
        let mut key = Vec::new();
        loop {
            let r = self.wire.line()?;
            let line = self.wire.slice(r);
            if line == b"END" {
                return Ok(count);
            }
            let Some((k, n)) = parse_value_line(line) else {
                let text = String::from_utf8_lossy(line).into_owned();
                return Err(classify(line, text));
            };
            // The line's range is invalidated by the read of the data.
            key.clear();
            key.extend_from_slice(k);
            let d = self.wire.take(n)?;
            each(&key, self.wire.slice(d));
            count += 1;
        }
    }

    /// `delete <key>`: true when it existed.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool, OpError> {
        self.wire.out.extend_from_slice(b"delete ");
        self.wire.out.extend_from_slice(key);
        self.wire.out.extend_from_slice(b"\r\n");
        self.wire.send()?;
        let r = self.wire.line()?;
        let line = self.wire.slice(r);
        match line {
            b"DELETED" => Ok(true),
            b"NOT_FOUND" => Ok(false),
            _ => {
                let text = String::from_utf8_lossy(line).into_owned();
                Err(classify(line, text))
            }
        }
    }

    /// A command answered by one line (`flush_all` → OK, `version` →
    /// VERSION x); returns that line.
    pub fn simple(&mut self, cmd: &[u8]) -> Result<String, OpError> {
        self.wire.out.extend_from_slice(cmd);
        self.wire.out.extend_from_slice(b"\r\n");
        self.wire.send()?;
        let r = self.wire.line()?;
        let line = self.wire.slice(r);
        let text = String::from_utf8_lossy(line).into_owned();
        if line.starts_with(b"ERROR")
            || line.starts_with(b"CLIENT_ERROR")
            || line.starts_with(b"SERVER_ERROR")
        {
            return Err(classify(line, text));
        }
        Ok(text)
    }

    /// `stats`: the `STAT name value` pairs.
    pub fn stats(&mut self) -> Result<Vec<(String, String)>, OpError> {
        self.wire.out.extend_from_slice(b"stats\r\n");
        self.wire.send()?;
        let mut out = Vec::new();
        loop {
            let r = self.wire.line()?;
            let line = String::from_utf8_lossy(self.wire.slice(r)).into_owned();
            if line == "END" {
                return Ok(out);
            }
            let mut it = line.splitn(3, ' ');
            match (it.next(), it.next(), it.next()) {
                (Some("STAT"), Some(k), Some(v)) => out.push((k.to_string(), v.to_string())),
                _ => return Err(OpError::Protocol(format!("unexpected stats line {line:?}"))),
            }
        }
    }
}

/// `VALUE <key> <flags> <bytes> [<cas>]` → (key, bytes).
fn parse_value_line(line: &[u8]) -> Option<(&[u8], usize)> {
    let rest = line.strip_prefix(b"VALUE ")?;
    let mut it = rest.split(|b| *b == b' ');
    let key = it.next()?;
    let _flags = it.next()?;
    let n = parse_u64(it.next()?)?;
    Some((key, usize::try_from(n).ok()?))
}

/// Maps a non-success reply line to an error kind: a refusal to store is
/// [`OpError::Refused`], a protocol complaint [`OpError::Server`].
fn classify(line: &[u8], text: String) -> OpError {
    if line.starts_with(b"SERVER_ERROR")
        || line == b"NOT_STORED"
        || line == b"EXISTS"
        || line == b"NOT_FOUND"
    {
        OpError::Refused(text)
    } else if line.starts_with(b"CLIENT_ERROR") || line.starts_with(b"ERROR") {
        OpError::Server(text)
    } else {
        OpError::Protocol(format!("unexpected reply {text:?}"))
    }
}

/// Result of [`skim`] on a complete reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skimmed {
    pub len: usize,
    /// ERROR / CLIENT_ERROR / SERVER_ERROR / NOT_STORED.
    pub error: bool,
    /// A get that found nothing (`END` alone).
    pub miss: bool,
}

/// Finds the end of the first complete reply to a storage command or a get
/// in `buf`; `Ok(None)` when more bytes are needed.
pub fn skim(buf: &[u8]) -> Result<Option<Skimmed>, String> {
    let mut pos = 0;
    let mut values = 0;
    loop {
        let Some(i) = memchr::memchr(b'\n', &buf[pos..]) else {
            return Ok(None);
        };
        let nl = pos + i;
        if i == 0 || buf[nl - 1] != b'\r' {
            return Err("reply line not ended by CRLF".into());
        }
        let line = &buf[pos..nl - 1];
        pos = nl + 1;
        if let Some((_, n)) = parse_value_line(line) {
            if buf.len() < pos + n + 2 {
                return Ok(None);
            }
            pos += n + 2;
            values += 1;
            continue;
        }
        if values > 0 && line != b"END" {
            return Err("get reply not ended by END".into());
        }
        let error = line.starts_with(b"ERROR")
            || line.starts_with(b"CLIENT_ERROR")
            || line.starts_with(b"SERVER_ERROR")
            || line == b"NOT_STORED";
        return Ok(Some(Skimmed {
            len: pos,
            error,
            miss: line == b"END" && values == 0,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skim_replies() {
        let s = skim(b"STORED\r\n").unwrap().unwrap();
        assert_eq!((s.len, s.error, s.miss), (8, false, false));
        assert!(skim(b"END\r\n").unwrap().unwrap().miss);
        let v = b"VALUE k 0 3\r\nabc\r\nEND\r\n";
        let s = skim(v).unwrap().unwrap();
        assert_eq!((s.len, s.miss), (v.len(), false));
        assert_eq!(skim(&v[..v.len() - 2]).unwrap(), None);
        assert_eq!(skim(b"VALUE k 0 3\r\nab").unwrap(), None);
        assert!(
            skim(b"SERVER_ERROR object too large for cache\r\n")
                .unwrap()
                .unwrap()
                .error
        );
        assert!(skim(b"NOT_STORED\r\n").unwrap().unwrap().error);
    }

    #[test]
    fn value_lines() {
        assert_eq!(
            parse_value_line(b"VALUE usertable-user1 0 1093"),
            Some((&b"usertable-user1"[..], 1093))
        );
        assert_eq!(parse_value_line(b"VALUE k 5 10 99"), Some((&b"k"[..], 10)));
        assert_eq!(parse_value_line(b"VALUE k 5"), None);
        assert!(matches!(
            classify(b"SERVER_ERROR object too large for cache", String::new()),
            OpError::Refused(_)
        ));
    }
}
