//! What carries a connection's bytes. Every read, write and writev of a
//! client socket goes through `Transport`, and nothing else touches the
//! socket but registration with the worker's poll: plain TCP or TLS
//! (`net::tls`), with no difference visible to the worker loop or to any
//! protocol. Both keep the same contract: a read shorter than the buffer
//! means the socket is drained, and bytes accepted by a write but not yet
//! on the wire count in `pending_out`.
use crate::net::tls::TlsStream;
use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use std::io::{IoSlice, Read, Result, Write};
use std::sync::Arc;

pub enum Transport {
    /// Plain TCP, non-blocking.
    Plain(TcpStream),
    /// TLS over non-blocking TCP; boxed, as rustls's state is large.
    Tls(Box<TlsStream>),
}

impl Transport {
    /// A freshly accepted socket, already non-blocking.
    pub fn plain(stream: std::net::TcpStream) -> Transport {
        Transport::Plain(TcpStream::from_std(stream))
    }

    /// A freshly accepted socket, already non-blocking, whose first bytes
    /// are the client's TLS handshake.
    pub fn tls(
        stream: std::net::TcpStream,
        config: Arc<rustls::ServerConfig>,
    ) -> Result<Transport> {
        let s = TlsStream::new(TcpStream::from_std(stream), config)?;
        Ok(Transport::Tls(Box::new(s)))
    }

    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => t.read(buf),
        }
    }

    #[inline]
    pub fn write(&mut self, buf: &[u8]) -> Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => t.write(buf),
        }
    }

    #[inline]
    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> Result<usize> {
        match self {
            Transport::Plain(s) => s.write_vectored(bufs),
            Transport::Tls(t) => t.write_vectored(bufs),
        }
    }

    /// True while a TLS handshake is under way; never for plain TCP.
    #[inline]
    pub fn handshaking(&self) -> bool {
        match self {
            Transport::Plain(_) => false,
            Transport::Tls(t) => t.handshaking(),
        }
    }

    /// Bytes the transport itself holds for the socket (TLS records the
    /// socket would not take yet); 0 for plain TCP.
    #[inline]
    pub fn pending_out(&self) -> usize {
        match self {
            Transport::Plain(_) => 0,
            Transport::Tls(t) => t.pending_out(),
        }
    }

    /// Writes what `pending_out` counts; `WouldBlock` while the socket is
    /// full.
    pub fn send_pending(&mut self) -> Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(t) => t.send_pending(),
        }
    }

    pub fn register(&mut self, registry: &Registry, token: Token) -> Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        match self {
            Transport::Plain(s) => s.register(registry, token, interest),
            Transport::Tls(t) => t.sock.register(registry, token, interest),
        }
    }

    pub fn deregister(&mut self, registry: &Registry) -> Result<()> {
        match self {
            Transport::Plain(s) => s.deregister(registry),
            Transport::Tls(t) => t.sock.deregister(registry),
        }
    }
}
