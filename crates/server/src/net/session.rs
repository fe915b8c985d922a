//! The seam between the connection layer and a protocol. A connection
//! carries one `Session` of its port's protocol; the worker hands it the
//! bytes read so far and the output buffer, and the session parses what
//! is complete, runs it (through `crate::exec` or the protocol's own
//! handlers) and appends the replies. The loop knows no protocol: adding
//! one is a folder that implements `Session` and a `FrontEnd` for its
//! listener (`resp/session.rs`, `memcache/session.rs`).
//!
//! What the loop needs to know of a connection's client (blocked on keys,
//! subscribed, a monitor, killed, wants to close) is in `crate::client`,
//! state every protocol shares; what only the protocol knows (a request
//! held at the head of the buffer for CLIENT PAUSE or for a key to be
//! ready) the session reports here.
//!
//! A `dyn Session` costs one indirect call per read, not per request (a
//! pipelined batch runs inside one `process`).
use crate::client::Client;
use crate::shared::Shared;
use std::sync::Arc;

/// One protocol's parse and execute state for one connection.
pub trait Session: Send {
    /// Parses and runs every complete request in `io.input[*io.rpos..]`,
    /// appending replies to `io.out`. Stops when more bytes are needed
    /// (`*io.need` says how many, from `*io.rpos`), when `io.high_water`
    /// bytes of replies are unsent (backpressure), or when the connection
    /// is to close or wait.
    fn process(&mut self, io: Io<'_>, client: &mut Client, shared: &Shared, worker: usize) -> Stop;

    /// The large argument or data block asked for by `Stop::Block` has
    /// arrived whole: `data` is its payload, `terminated` whether the two
    /// bytes after it were CRLF.
    fn add_block(&mut self, at: usize, data: Arc<Vec<u8>>, terminated: bool);

    /// A request sits at the head of the buffer waiting to run again
    /// (paused, or woken from a wait): the connection cannot move to
    /// another worker now.
    fn holding(&self) -> bool;

    /// CLIENT PAUSE holds the request at the head of the buffer.
    fn paused(&self) -> bool;

    /// The pause is over: the held request may run again.
    fn unpause(&mut self);

    /// The blocked request at the head should run again (a key it waits
    /// on is ready, its time ran out, or CLIENT UNBLOCK). False if it was
    /// already to run again, so the caller lists the connection once.
    fn wake(&mut self) -> bool;

    /// The connection closes: give back what the session holds (large
    /// arguments go to the lazy-free thread).
    fn release(&mut self);

    /// Memory the session holds for the request still arriving, beyond
    /// its bytes in the input (the argument table of an unfinished
    /// multibulk request): counted against `client-query-buffer-limit`.
    fn parsed_bytes(&self) -> usize {
        0
    }
}

/// The connection's buffers as a session sees them.
pub struct Io<'a> {
    /// The bytes read so far; requests start at `*rpos`.
    pub input: &'a [u8],
    /// Start of the first request not yet run.
    pub rpos: &'a mut usize,
    /// Bytes (from `*rpos`) needed before parsing again is worth it.
    pub need: &'a mut usize,
    /// Replies are appended here.
    pub out: &'a mut Vec<u8>,
    /// Bytes of `out` before this offset are already written.
    pub unsent_from: usize,
    /// Unsent reply bytes at which to stop running requests.
    pub high_water: usize,
}

/// Why `Session::process` stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every complete request ran; more bytes are needed.
    NeedInput,
    /// Enough replies are pending that the rest must wait for the socket.
    OutputFull,
    /// A large argument or data block starts at `at` (from `rpos`) and is
    /// `len` bytes long: read it into a buffer of its own, then
    /// `Session::add_block`.
    Block { at: usize, len: usize },
    /// CLIENT PAUSE holds the next request.
    Paused,
    /// The request at the head waits on keys.
    Blocked,
    /// Close once the replies are written (QUIT, a protocol error).
    Closing,
    /// Close now, without a reply (a line too long to be a command).
    Abort,
}

/// Why the listener turns a connection away (before a worker sees it, or
/// on a TLS port after the handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `maxclients` reached.
    MaxClients,
    /// Protected mode: not loopback and no password set.
    ProtectedMode,
}

/// The session of a connection refused on a TLS port, waiting for its
/// handshake to end before the worker writes the refusal and closes it
/// (`Conn::refusal`): whatever the client sends meanwhile is dropped
/// unread, so nothing runs.
pub struct Refused;

impl Session for Refused {
    fn process(&mut self, io: Io<'_>, _: &mut Client, _: &Shared, _: usize) -> Stop {
        *io.rpos = io.input.len();
        *io.need = 0;
        Stop::NeedInput
    }

    fn add_block(&mut self, _at: usize, _data: Arc<Vec<u8>>, _terminated: bool) {}

    fn holding(&self) -> bool {
        false
    }

    fn paused(&self) -> bool {
        false
    }

    fn unpause(&mut self) {}

    fn wake(&mut self) -> bool {
        false
    }

    fn release(&mut self) {}
}

/// A protocol as the connection layer knows it: how to start a session
/// for a new connection and how to word a refusal at accept time.
pub struct FrontEnd {
    pub session: fn() -> Box<dyn Session>,
    /// The bytes written before closing a refused connection.
    pub refusal: fn(Refusal) -> Vec<u8>,
}
