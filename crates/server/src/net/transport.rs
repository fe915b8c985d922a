//! What carries a connection's bytes. Every read, write and writev of a
//! client socket goes through `Transport`, and nothing else touches the
//! socket but registration with the worker's poll: TLS becomes a second
//! variant here, with no change to the worker loop or to any protocol.
use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use std::io::{IoSlice, Read, Result, Write};

pub enum Transport {
    /// Plain TCP, non-blocking.
    Plain(TcpStream),
}

impl Transport {
    /// A freshly accepted socket, already non-blocking.
    pub fn plain(stream: std::net::TcpStream) -> Transport {
        Transport::Plain(TcpStream::from_std(stream))
    }

    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
        }
    }

    #[inline]
    pub fn write(&mut self, buf: &[u8]) -> Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
        }
    }

    #[inline]
    pub fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> Result<usize> {
        match self {
            Transport::Plain(s) => s.write_vectored(bufs),
        }
    }

    pub fn register(&mut self, registry: &Registry, token: Token) -> Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        match self {
            Transport::Plain(s) => s.register(registry, token, interest),
        }
    }

    pub fn deregister(&mut self, registry: &Registry) -> Result<()> {
        match self {
            Transport::Plain(s) => s.deregister(registry),
        }
    }
}
