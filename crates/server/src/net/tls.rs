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

    /// True until the handshake is done.
    #[inline]
    pub fn handshaking(&self) -> bool {
        self.conn.is_handshaking()
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

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
    use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
    use std::time::Duration;

    /// A server `TlsStream` and a blocking rustls client connected to it
    /// over loopback, the handshake done.
    fn pair() -> (
        TlsStream,
        StreamOwned<ClientConnection, std::net::TcpStream>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(cert.der().to_vec()))
            .unwrap();
        let client_config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        accepted.set_nonblocking(true).unwrap();
        let mut server =
            TlsStream::new(TcpStream::from_std(accepted), Arc::new(server_config)).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut client = ClientConnection::new(Arc::new(client_config), name).unwrap();
        // Drive both ends by hand until the handshake is over.
        let mut sock = sock;
        sock.set_nonblocking(true).unwrap();
        for _ in 0..1000 {
            let _ = client.write_tls(&mut sock);
            if client.read_tls(&mut sock).is_ok() {
                client.process_new_packets().unwrap();
            }
            let mut scratch = [0u8; 16];
            match server.read(&mut scratch) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                r => panic!("handshake read gave {r:?}"),
            }
            if !client.is_handshaking() && !server.conn.is_handshaking() && !client.wants_write() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!server.conn.is_handshaking());
        sock.set_nonblocking(false).unwrap();
        (server, StreamOwned::new(client, sock))
    }

    /// The edge-triggered contract: a read shorter than the buffer means
    /// nothing is left, neither in the socket nor decrypted in rustls.
    #[test]
    fn read_is_short_only_when_drained() {
        let (mut server, mut client) = pair();
        // Four full records and a bit, all in the socket before reading.
        let sent: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        client.write_all(&sent).unwrap();
        client.flush().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // A small buffer comes back full, again and again...
        let mut got = vec![0u8; 10_000];
        assert_eq!(server.read(&mut got).unwrap(), 10_000);
        // ...and a large one takes every remaining record at once.
        let mut rest = vec![0u8; 1 << 20];
        let n = server.read(&mut rest).unwrap();
        assert_eq!(n, sent.len() - 10_000);
        got.extend_from_slice(&rest[..n]);
        assert!(got == sent);
        let e = server.read(&mut rest).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock);
        // close_notify reads as end of stream.
        client.conn.send_close_notify();
        client.flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(server.read(&mut rest).unwrap(), 0);
    }

    /// Ciphertext the socket would not take counts as pending output and
    /// goes out with `send_pending` once the peer reads.
    #[test]
    fn unsent_ciphertext_is_pending_output() {
        let (mut server, mut client) = pair();
        let chunk = vec![7u8; 64 * 1024];
        let mut written = 0usize;
        loop {
            match server.write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
            assert!(written < 1 << 30, "the socket never filled");
        }
        assert!(server.pending_out() > 0);
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; written];
            client.read_exact(&mut buf).unwrap();
            buf.iter().all(|&b| b == 7)
        });
        loop {
            match server.send_pending() {
                Ok(()) => break,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(server.pending_out(), 0);
        assert!(reader.join().unwrap());
    }
}
