//! A TLS connection over a non-blocking socket (`Transport::Tls`): the
//! rustls state machine driven so that the worker loop and the protocol
//! sessions cannot tell it from plain TCP. Contexts are made elsewhere
//! (`net::tls_config`).
//!
//! The worker polls edge-triggered and takes a read shorter than its free
//! buffer to mean "the socket is drained" (`net::conn`). So `read` keeps
//! going, handing out decrypted bytes and pulling ciphertext from the
//! socket, until the caller's buffer is full or the socket says
//! `WouldBlock` with nothing decrypted left over: a short read here means
//! exactly what it means on a plain socket. Handshake records are written
//! as soon as rustls makes them; ciphertext the socket would not take
//! waits in rustls and counts in `pending_out`, so the worker flushes it on
//! the writable edge and a closing connection waits for it. A write does
//! not take new plaintext while older ciphertext is unsent, which bounds
//! what waits here to one write's worth.
use crate::log;
use mio::net::TcpStream;
use rustls::ServerConnection;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::sync::Arc;

pub struct TlsStream {
    pub(super) sock: TcpStream,
    conn: ServerConnection,
    /// Ciphertext bytes made and not yet written (an estimate from the
    /// plaintext accepted: record overhead is not counted); 0 exactly when
    /// rustls has nothing to send.
    unsent: usize,
    /// Peer address, for log lines.
    peer: String,
}

impl TlsStream {
    pub fn new(sock: TcpStream, config: Arc<rustls::ServerConfig>) -> io::Result<TlsStream> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        let peer = sock
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        Ok(TlsStream {
            sock,
            conn,
            unsent: 0,
            peer,
        })
    }

    /// Ciphertext waiting for the socket.
    #[inline]
    pub fn pending_out(&self) -> usize {
        if self.conn.wants_write() {
            self.unsent.max(1)
        } else {
            0
        }
    }

    /// Writes what rustls has to send. Ok(true): all of it went out;
    /// Ok(false): the socket is full (a writable edge will follow).
    fn send(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.unsent = self.unsent.saturating_sub(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.unsent = 0;
        Ok(true)
    }

    /// Sends what is pending; `WouldBlock` if the socket is still full.
    pub fn send_pending(&mut self) -> io::Result<()> {
        if self.send()? {
            Ok(())
        } else {
            Err(ErrorKind::WouldBlock.into())
        }
    }

    /// Decrypts what `read_tls` brought in and sends any handshake or alert
    /// records it produced. A TLS error closes only this connection; it is
    /// logged as Redis logs a failed accept or read.
    fn process(&mut self) -> io::Result<()> {
        let handshaking = self.conn.is_handshaking();
        match self.conn.process_new_packets() {
            Ok(_) => {
                self.send()?;
                Ok(())
            }
            Err(e) => {
                // The alert rustls queued, best effort: the peer may be gone.
                let _ = self.send();
                if handshaking {
                    log::verbose(&format!(
                        "Error accepting a client connection: {e} (addr={})",
                        self.peer
                    ));
                } else {
                    log::verbose(&format!(
                        "Error reading from client: {e} (addr={})",
                        self.peer
                    ));
                }
                Err(io::Error::new(ErrorKind::InvalidData, e))
            }
        }
    }

    /// Fills `buf` with plaintext until it is full or the socket has
    /// nothing more (see the file comment). Ok(0): the peer closed
    /// (close_notify or end of stream), once nothing decrypted is left.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        loop {
            if n == buf.len() {
                return Ok(n);
            }
            match self.conn.reader().read(&mut buf[n..]) {
                // close_notify received and everything before it read.
                Ok(0) => return Ok(n),
                Ok(k) => {
                    n += k;
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // End of stream without close_notify: closed all the same.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(n),
                Err(e) => return Err(e),
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => {
                    // End of stream: let rustls note it, then the reader
                    // above answers Ok(0) or UnexpectedEof.
                    self.process()?;
                    match self.conn.reader().read(&mut buf[n..]) {
                        Ok(k) if k > 0 => {
                            n += k;
                            continue;
                        }
                        _ => return Ok(n),
                    }
                }
                Ok(_) => self.process()?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    return if n > 0 { Ok(n) } else { Err(e) };
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return if n > 0 { Ok(n) } else { Err(e) },
            }
        }
    }

    /// Encrypts as much of `buf` as rustls takes and sends it. Refuses
    /// (`WouldBlock`) while older ciphertext is unsent.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !self.send()? {
            return Err(ErrorKind::WouldBlock.into());
        }
        let n = self.conn.writer().write(buf)?;
        self.unsent += n;
        self.send()?;
        Ok(n)
    }

    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if !self.send()? {
            return Err(ErrorKind::WouldBlock.into());
        }
        let n = self.conn.writer().write_vectored(bufs)?;
        self.unsent += n;
        self.send()?;
        Ok(n)
    }
}

impl Drop for TlsStream {
    /// Tells the peer the stream ends here (close_notify), if the socket
    /// takes it now; a closing connection never waits for it.
    fn drop(&mut self) {
        if !self.conn.is_handshaking() {
            self.conn.send_close_notify();
            let _ = self.conn.write_tls(&mut self.sock);
        }
    }
}
