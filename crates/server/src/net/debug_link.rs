//! The connection's socket as a SCRIPT DEBUG session borrows it
//! (`crate::client::DebugLink`): blocking reads and writes of raw bytes
//! over the connection's transport, plain or TLS, waiting with `poll(2)`
//! on the non-blocking socket. What the bytes say is the debugger's.
use crate::client::DebugLink;
use crate::net::transport::Transport;
use std::io::{Error, ErrorKind, Result};
use std::time::{Duration, Instant};

/// Redis's `connSendTimeout(ldb.conn, 5000)`.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) struct ConnLink<'a> {
    transport: &'a mut Transport,
}

impl<'a> ConnLink<'a> {
    pub(super) fn new(transport: &'a mut Transport) -> Self {
        ConnLink { transport }
    }

    /// Waits until the socket is ready for `events` or `wait` passes:
    /// false on time out.
    fn wait(&self, events: libc::c_short, wait: Duration) -> Result<bool> {
        let mut p = libc::pollfd {
            fd: self.transport.raw_fd(),
            events,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            let e = Error::last_os_error();
            return if e.kind() == ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(n > 0)
    }
}

impl DebugLink for ConnLink<'_> {
    fn read(&mut self, buf: &mut [u8], wait: Duration) -> Result<Option<usize>> {
        let deadline = Instant::now() + wait;
        loop {
            match self.transport.read(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || !self.wait(libc::POLLIN, left)? {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> Result<()> {
        let deadline = Instant::now() + SEND_TIMEOUT;
        while !bytes.is_empty() || self.transport.pending_out() > 0 {
            if Instant::now() >= deadline {
                return Err(ErrorKind::TimedOut.into());
            }
            let r = if bytes.is_empty() {
                self.transport.send_pending().map(|()| 0)
            } else {
                self.transport.write(bytes)
            };
            match r {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() || !self.wait(libc::POLLOUT, left)? {
                        return Err(ErrorKind::TimedOut.into());
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A connection's transport taken whole by a SCRIPT DEBUG YES session
/// (`Client::take_transport`), which runs on its own thread: the same
/// reads and writes as `ConnLink`, the bytes the worker had read past the
/// EVAL served first. Dropping it closes the connection (a TLS peer gets
/// its close_notify, `TlsStream`'s drop).
pub(super) struct OwnedLink {
    transport: Transport,
    unread: Vec<u8>,
}

impl OwnedLink {
    pub(super) fn new(transport: Transport, unread: Vec<u8>) -> Self {
        OwnedLink { transport, unread }
    }
}

impl DebugLink for OwnedLink {
    fn read(&mut self, buf: &mut [u8], wait: Duration) -> Result<Option<usize>> {
        if !self.unread.is_empty() {
            let n = buf.len().min(self.unread.len());
            buf[..n].copy_from_slice(&self.unread[..n]);
            self.unread.drain(..n);
            return Ok(Some(n));
        }
        ConnLink::new(&mut self.transport).read(buf, wait)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        ConnLink::new(&mut self.transport).write_all(bytes)
    }
}
