//! The sockets of replication links, plain TCP or TLS, as the link
//! threads use them: blocking reads and writes bounded by the link's
//! timeouts, whatever carries the bytes.
//!
//! **Master side** (`LinkSocket`): a replica that sent PSYNC on the TLS
//! port keeps the worker's `Transport` (the handshake is done and rustls
//! holds the session keys; a new handshake is not possible). A link has
//! two threads, the sender and the ack reader, and one rustls session
//! cannot be split in two: the threads share it behind a mutex over the
//! still non-blocking socket. Each call holds the lock for one
//! non-blocking rustls read or write and waits for the socket with
//! `poll(2)` without it, so a sender stuck on a replica that stopped
//! reading never holds off the ack reader (WAIT and `repl-timeout` keep
//! working), and an ack reader waiting for a quiet replica never holds off
//! the stream. A single thread that polls for both directions would do
//! the same but would rewrite the link's two loops; rustls's blocking
//! `StreamOwned` cannot be shared, as its reads block while holding it.
//! A plain link is the blocking `TcpStream` it always was.
//!
//! **Replica side** (`MasterSocket`): with `tls-replication yes` the link
//! to the master is a rustls client (`client_config`, Redis's rules for
//! which certificate to present) over a blocking socket with the
//! `repl-timeout` deadlines; one thread reads and writes it, so rustls's
//! own `StreamOwned` serves.
use crate::net::transport::Transport;
use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A replica's socket on the master, for the link's threads; clones share
/// the connection.
pub struct LinkSocket {
    kind: Kind,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

enum Kind {
    /// Blocking TCP (its timeouts are the socket's own).
    Plain(TcpStream),
    /// The worker's TLS transport, non-blocking, and its socket.
    Tls(Arc<Mutex<Transport>>, RawFd),
}

impl LinkSocket {
    /// The socket PSYNC handed over (`Client::handoff`).
    pub fn from_transport(t: Transport) -> io::Result<LinkSocket> {
        let kind = match t {
            Transport::Plain(s) => {
                let s = TcpStream::from(s);
                s.set_nonblocking(false)?;
                Kind::Plain(s)
            }
            tls => {
                let fd = tls.raw_fd();
                Kind::Tls(Arc::new(Mutex::new(tls)), fd)
            }
        };
        Ok(LinkSocket {
            kind,
            read_timeout: None,
            write_timeout: None,
        })
    }

    /// True for a link over TLS (for log lines).
    pub fn is_tls(&self) -> bool {
        matches!(self.kind, Kind::Tls(..))
    }

    pub fn try_clone(&self) -> io::Result<LinkSocket> {
        let kind = match &self.kind {
            Kind::Plain(s) => Kind::Plain(s.try_clone()?),
            Kind::Tls(t, fd) => Kind::Tls(t.clone(), *fd),
        };
        Ok(LinkSocket {
            kind,
            read_timeout: self.read_timeout,
            write_timeout: self.write_timeout,
        })
    }

    pub fn set_write_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        if let Kind::Plain(s) = &self.kind {
            s.set_write_timeout(t)?;
        }
        self.write_timeout = t;
        Ok(())
    }

    pub fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        if let Kind::Plain(s) = &self.kind {
            s.set_read_timeout(t)?;
        }
        self.read_timeout = t;
        Ok(())
    }

    /// The worker set TCP_NODELAY on every accepted socket; a plain link
    /// sets it again as it always did.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match &self.kind {
            Kind::Plain(s) => s.set_nodelay(on),
            Kind::Tls(..) => Ok(()),
        }
    }

    /// Ends the link for both threads (and for CLIENT KILL's, which shuts
    /// the same fd down).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match &self.kind {
            Kind::Plain(s) => s.shutdown(how),
            Kind::Tls(_, fd) => {
                let how = match how {
                    Shutdown::Read => libc::SHUT_RD,
                    Shutdown::Write => libc::SHUT_WR,
                    Shutdown::Both => libc::SHUT_RDWR,
                };
                // SAFETY: shutdown(2) takes no pointers; the fd stays open
                // while the transport in `self` lives.
                unsafe { libc::shutdown(*fd, how) };
                Ok(())
            }
        }
    }
}

/// Waits until `fd` is ready for `events`, up to `deadline` (None:
/// forever): false when the time is up.
fn wait(fd: RawFd, events: libc::c_short, deadline: Option<Instant>) -> io::Result<bool> {
    let ms = match deadline {
        None => -1,
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int
        }
    };
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == ErrorKind::Interrupted {
            Ok(true)
        } else {
            Err(e)
        };
    }
    Ok(n > 0)
}

impl Read for LinkSocket {
    /// As a blocking socket's read with `read_timeout`: `WouldBlock` when
    /// nothing came in time.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (t, fd) = match &self.kind {
            Kind::Plain(s) => return (&*s).read(buf),
            Kind::Tls(t, fd) => (t, *fd),
        };
        let deadline = self.read_timeout.map(|d| Instant::now() + d);
        loop {
            // A short read left nothing behind in rustls (net::tls), so
            // waiting on the socket after `WouldBlock` misses nothing.
            let r = t.lock().read(buf);
            match r {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !wait(fd, libc::POLLIN, deadline)? {
                        return Err(ErrorKind::WouldBlock.into());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

impl Write for LinkSocket {
    /// As a blocking socket's write with `write_timeout`; over TLS the
    /// ciphertext of what was taken is on the wire when it returns, so
    /// nothing waits in rustls while the sender sleeps.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (t, fd) = match &self.kind {
            Kind::Plain(s) => return (&*s).write(buf),
            Kind::Tls(t, fd) => (t, *fd),
        };
        let deadline = self.write_timeout.map(|d| Instant::now() + d);
        let mut taken = None;
        loop {
            let r = {
                let mut t = t.lock();
                match taken {
                    // `write` refuses (WouldBlock) while older ciphertext
                    // is unsent, and sends what it can of the new.
                    None if !buf.is_empty() => t.write(buf).map(|n| taken = Some(n)),
                    _ => Ok(()),
                }
                .and_then(|()| t.send_pending())
            };
            match r {
                Ok(()) => return Ok(taken.unwrap_or(0)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !wait(fd, libc::POLLOUT, deadline)? {
                        return Err(ErrorKind::TimedOut.into());
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write(&[]).map(|_| ())
    }
}

/// The replica's connection to its master: plain, or a rustls client
/// session; clones share it (the link reads through a `BufReader` and
/// writes through a clone, from one thread).
pub enum MasterSocket {
    Plain(TcpStream),
    /// The session, and the socket for its options and address.
    Tls(
        Arc<Mutex<StreamOwned<ClientConnection, TcpStream>>>,
        TcpStream,
    ),
}

impl MasterSocket {
    fn sock(&self) -> &TcpStream {
        match self {
            MasterSocket::Plain(s) | MasterSocket::Tls(_, s) => s,
        }
    }

    pub fn try_clone(&self) -> io::Result<MasterSocket> {
        Ok(match self {
            MasterSocket::Plain(s) => MasterSocket::Plain(s.try_clone()?),
            MasterSocket::Tls(t, s) => MasterSocket::Tls(t.clone(), s.try_clone()?),
        })
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.sock().set_read_timeout(t)
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock().peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock().local_addr()
    }
}

impl AsRawFd for MasterSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.sock().as_raw_fd()
    }
}

impl Read for MasterSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            MasterSocket::Plain(s) => s.read(buf),
            MasterSocket::Tls(t, _) => t.lock().read(buf),
        }
    }
}

impl Write for MasterSocket {
    /// Over TLS the records are sent before it returns (`StreamOwned`
    /// only tries to).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            MasterSocket::Plain(s) => s.write(buf),
            MasterSocket::Tls(t, _) => {
                let mut t = t.lock();
                let n = t.write(buf)?;
                t.flush()?;
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            MasterSocket::Plain(s) => s.flush(),
            MasterSocket::Tls(t, _) => t.lock().flush(),
        }
    }
}

/// The TLS session to a master on `sock` (connected, with the link's
/// timeouts), the handshake done. A failed handshake is reported in
/// Redis's words (syncWithMaster's "Error condition on socket for SYNC").
pub fn connect_master(
    config: Arc<ClientConfig>,
    sock: TcpStream,
    host: &str,
) -> io::Result<MasterSocket> {
    let sync_err = |e: &dyn std::fmt::Display| format!("Error condition on socket for SYNC: {e}");
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::other(sync_err(&format!("{host}: {e}"))))?;
    let mut conn =
        ClientConnection::new(config, name).map_err(|e| io::Error::other(sync_err(&e)))?;
    let mut raw = sock.try_clone()?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut raw) {
            return Err(io::Error::new(e.kind(), sync_err(&e)));
        }
    }
    let opts = sock.try_clone()?;
    Ok(MasterSocket::Tls(
        Arc::new(Mutex::new(StreamOwned::new(conn, sock))),
        opts,
    ))
}

/// The client side of a replication link (Redis 7.0 `tlsConfigure`'s
/// client context): `tls-client-cert-file`/`-key-file`/`-key-file-pass`
/// when both files are set, else the server's `tls-cert-file`/`-key-file`;
/// the master verified against `tls-ca-cert-file`/`-dir`, its chain only,
/// since Redis checks no host name (its own test certificates name none).
pub fn client_config(cfg: &crate::config::Config) -> Result<ClientConfig, String> {
    let parts = crate::net::tls_config::client_parts(cfg)?;
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(parts.roots), parts.provider.clone())
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?;
    ClientConfig::builder_with_provider(parts.provider)
        .with_protocol_versions(&parts.versions)
        .map_err(|e| format!("tls-protocols / tls-ciphers: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)))
        .with_client_auth_cert(parts.certs, parts.key)
        .map_err(|e| format!("Failed to use {}: {e}", parts.cert_file))
}

/// webpki's verification of the master's chain, without the host name.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        // webpki checks the name only once the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
