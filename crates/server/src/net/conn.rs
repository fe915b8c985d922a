//! A client connection: its transport (`net::transport`), its read and
//! write buffers, its client state and its protocol session, and the
//! read → process → write steps the worker runs on it (shared/STYLE.md,
//! "a request, end to end"). Everything here is protocol-blind: the bytes
//! go to `Session::process`, which says why it stopped.
//!
//! Per readiness event a connection reads once (a read shorter than the free
//! buffer means the socket is drained: on Linux a later arrival raises a new
//! edge, which is what tokio also relies on) and executes every complete
//! request in the buffer; at the end of the loop turn each connection's
//! replies go out with one `write` (Redis's `handleClientsWithPendingWrites`). Fairness: a
//! connection that keeps filling the buffer is put back on a ready list after
//! a read budget, so one huge client cannot starve the others. Backpressure:
//! while a connection has more than `OUT_HIGH_WATER` bytes of replies unsent
//! (or just over a larger `client-output-buffer-limit normal`, which then
//! closes it) it executes nothing more, so a client that pipelines without
//! reading cannot grow the server's memory without bound.
use crate::client::Client;
use crate::log;
use crate::net::session::{Io, Session, Stop};
use crate::net::transport::Transport;
use crate::shared::{bump, Shared};
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// First read buffer; grows for large requests, shrinks back when idle.
pub(super) const READ_CHUNK: usize = 16 * 1024;
/// Bytes read from one connection before others get a turn.
const READ_BUDGET: usize = 1024 * 1024;
/// Unsent reply bytes above which a connection stops executing requests.
pub(super) const OUT_HIGH_WATER: usize = 8 * 1024 * 1024;
/// Replies at least this large are written at once instead of at the end of
/// the loop turn.
const LARGE_REPLY: usize = 64 * 1024;
/// Most bytes one `read` puts into a large bulk's own buffer (`BlockIn`),
/// and most read into it per serve: the buffer is zeroed a chunk at a time just before each read (so
/// a 100 MB buffer is never zeroed, or faulted in, in one go). Fresh pages
/// fault in as they are zeroed, which on a loaded VM costs several
/// microseconds each: a quarter MiB (64 pages) per turn keeps that short.
const BLOCK_READ: usize = 256 * 1024;
/// Most iovecs handed to one `writev`.
const MAX_IOV: usize = 16;
/// Bytes written to one connection per `flush` before others get a turn:
/// a fast reader on loopback can keep a socket writable for the whole of a
/// 100 MB reply, and writing it in one go would stall the worker for tens
/// of milliseconds. A flush that stops here (not on a full socket) is
/// queued again for the next loop turn, since no new write edge will come.
const WRITE_BUDGET: usize = 1024 * 1024;

/// A large bulk or data block being read into its own buffer.
pub(super) struct BlockIn {
    /// Offset of its first byte in the request (from `rpos`).
    at: usize,
    /// The payload plus the two bytes after it, as they arrive.
    buf: Vec<u8>,
    /// `payload + 2`: the length `buf` will reach.
    want: usize,
}

/// A client connection: its transport, its buffers, the state of the
/// client (`Client`, shared by every protocol) and a session of its
/// protocol.
pub struct Conn {
    pub(super) transport: Transport,
    pub(super) client: Client,
    pub(super) session: Box<dyn Session>,
    pub(super) rbuf: Vec<u8>,
    /// Bytes of `rbuf` holding data; `rbuf.len()` is the allocated room.
    pub(super) filled: usize,
    /// Start of the first unparsed request.
    pub(super) rpos: usize,
    /// Parser's hint: buffer bytes (from `rpos`) needed before parsing again.
    pub(super) need: usize,
    pub(super) wbuf: Vec<u8>,
    pub(super) wpos: usize,
    /// The most `wbuf` held since the worker's cron last looked: a buffer
    /// in use (an MGET of 32 values of 2.8 KB is a 90 KB reply every call)
    /// is kept, one whose use has dropped is given back.
    pub(super) wbuf_peak: usize,
    /// Reading stopped by the budget or backpressure; resume without an event.
    pub(super) ready_again: bool,
    /// Listed in the worker's `pending_writes` for the end of this turn.
    pub(super) write_queued: bool,
    /// The deadline already in the worker's timer heap for this wait.
    pub(super) armed: u64,
    pub(super) closing: bool,
    /// `appendfsync always`: the output may leave only once the journal is
    /// durable up to here (where it was when this connection's commands
    /// ran).
    pub(super) hold: u64,
    /// Journal position the output must also wait for because it may show
    /// other clients' writes (`note_served`); unlike `hold`, not waited for
    /// while the journal is failing.
    pub(super) seen: u64,
    /// Listed in the worker's `held`.
    pub(super) held: bool,
    pub(super) last_active: Instant,
    /// A large bulk being read straight into a buffer of its own.
    pub(super) block_in: Option<BlockIn>,
    /// Unix seconds since which the output has been over the normal soft
    /// limit (0: not over it).
    pub(super) obuf_soft_since: u64,
    /// The last flush stopped at `WRITE_BUDGET` with the socket still
    /// writable: write again next turn without waiting for an event.
    pub(super) write_more: bool,
    /// A refusal to write once the TLS handshake is done, then close
    /// (protected mode on a TLS port; the session is `Refused`).
    pub(super) refusal: Option<Vec<u8>>,
}

impl Conn {
    /// The transport, the client and the bytes read but not yet parsed:
    /// what a connection handed to a thread of its own takes with it
    /// (PSYNC's replica link, SCRIPT DEBUG YES's session).
    pub(super) fn into_parts(self) -> (Transport, Client, Vec<u8>) {
        let Conn {
            transport,
            client,
            rbuf,
            filled,
            rpos,
            ..
        } = self;
        let unread = rbuf[rpos.min(filled)..filled].to_vec();
        (transport, client, unread)
    }

    /// Reply bytes not yet written, referenced large values included, and
    /// what the transport holds (TLS records the socket would not take).
    pub(super) fn pending_out(&self) -> usize {
        self.wbuf.len() - self.wpos + self.client.out_refs.pending() + self.transport.pending_out()
    }

    /// Request bytes buffered: the query buffer and a large bulk arriving.
    pub(super) fn query_bytes(&self) -> usize {
        self.filled - self.rpos + self.block_in.as_ref().map_or(0, |b| b.buf.len())
    }

    /// The connection closes: large buffers go to the lazy-free thread.
    pub(super) fn release(&mut self) {
        if let Some(b) = self.block_in.take() {
            cairn_engine::lazyfree::free(b.buf);
        }
        self.session.release();
    }
}

/// Unsent reply bytes at which a connection stops executing requests:
/// `OUT_HIGH_WATER`, or just over `client-output-buffer-limit normal`'s
/// hard or soft limit where one is larger, so a client that stops reading
/// meets the configured policy (closed at the hard limit, or once over the
/// soft limit for its seconds) instead of waiting below it, paused, for
/// ever (issue 23, defect 4). With the default limits (0) it stays 8 MiB.
pub(super) fn out_high_water(shared: &Shared) -> usize {
    let h = &shared.hot;
    let limit = h
        .normal_obuf_hard
        .load(Ordering::Relaxed)
        .max(h.normal_obuf_soft.load(Ordering::Relaxed));
    OUT_HIGH_WATER.max(
        usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .saturating_add(1),
    )
}

/// `client-output-buffer-limit normal` for a client that is not a
/// subscriber (subscribers are checked as pubsub on each delivery): at or
/// over the hard limit, or over the soft limit for longer than its seconds.
/// Referenced large values count, so a GET of 100 MB is over a 1 MB limit
/// as in Redis. Limits of 0 are off (the default).
fn over_normal_limit(shared: &Shared, conn: &mut Conn) -> bool {
    let h = &shared.hot;
    let hard = h.normal_obuf_hard.load(Ordering::Relaxed);
    let soft = h.normal_obuf_soft.load(Ordering::Relaxed);
    if (hard == 0 && soft == 0) || conn.client.subs.active() {
        return false;
    }
    let used = conn.pending_out() as u64;
    if hard != 0 && used >= hard {
        return true;
    }
    let since = &mut conn.obuf_soft_since;
    if soft != 0 && used >= soft {
        let now = cairn_engine::clock::now_ms() / 1000;
        if *since == 0 {
            *since = now;
            return false;
        }
        return now.saturating_sub(*since) > h.normal_obuf_soft_secs.load(Ordering::Relaxed);
    }
    *since = 0;
    false
}

/// Runs what is buffered, reads what the socket has, runs that, and writes
/// the replies once. Returns true if the connection should be served again
/// without waiting for a new readiness event (read budget used up).
pub(super) fn serve(conn: &mut Conn, shared: &Shared, worker: usize, now: Instant) -> bool {
    let stats = &shared.worker_stats[worker];
    let mut budget = READ_BUDGET;
    let mut drained = false;
    loop {
        let stop = process(conn, shared, worker);
        // Before any of the replies is written, as Redis checks on each
        // reply added: a client over its limit gets none of them.
        if over_normal_limit(shared, conn) {
            let info = &conn.client.info;
            info.obl.store(conn.pending_out(), Ordering::Relaxed);
            let line = crate::client::describe(shared, info);
            log::warning(&format!(
                "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
            ));
            abort(conn);
            return false;
        }
        match stop {
            // `process` has already turned `Abort` into closing and
            // `Block` into reading the block.
            Stop::Paused | Stop::Closing | Stop::Blocked | Stop::Abort => break,
            Stop::OutputFull => {
                flush(conn, shared, worker);
                if conn.pending_out() >= out_high_water(shared) {
                    conn.ready_again = true;
                    return false;
                }
                continue;
            }
            Stop::NeedInput | Stop::Block { .. } => {}
        }
        if drained {
            break;
        }
        if budget == 0 {
            return true;
        }
        let limit = shared.hot.query_buffer_limit.load(Ordering::Relaxed);
        if conn.query_bytes() + conn.session.parsed_bytes() > limit {
            log::warning(&format!(
                "Closing client {} that reached max query buffer length",
                conn.client.info.addr
            ));
            abort(conn);
            return false;
        }
        if conn.block_in.is_some() {
            match read_block(conn, budget.min(BLOCK_READ)) {
                Ok(n) => {
                    bump(&stats.net_in, n as u64);
                    // One chunk per serve: the rest after others' turns.
                    budget = 0;
                    conn.last_active = now;
                    conn.client.info.mark_active(now);
                    continue;
                }
                Err(BlockRead::Drained(n)) => {
                    bump(&stats.net_in, n as u64);
                    conn.last_active = now;
                    conn.client.info.mark_active(now);
                    break;
                }
                Err(BlockRead::Closed) => {
                    abort(conn);
                    return false;
                }
            }
        }
        make_room(conn);
        let room = conn.rbuf.len() - conn.filled;
        match conn.transport.read(&mut conn.rbuf[conn.filled..]) {
            Ok(0) => {
                abort(conn);
                return false;
            }
            Ok(n) => {
                conn.filled += n;
                bump(&stats.net_in, n as u64);
                budget = budget.saturating_sub(n);
                drained = n < room;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                abort(conn);
                return false;
            }
        }
        conn.last_active = now;
        conn.client.info.mark_active(now);
    }
    // Large replies go out now rather than waiting for the end of the
    // turn, so they do not sit in memory while other clients are served.
    if conn.pending_out() >= LARGE_REPLY {
        flush(conn, shared, worker);
    }
    false
}

/// The peer is gone or misbehaved: drop pending output and close.
pub(super) fn abort(conn: &mut Conn) {
    conn.closing = true;
    conn.wbuf.clear();
    conn.wpos = 0;
    conn.client.out_refs.clear();
}

/// Why `read_block` stopped without filling its share.
enum BlockRead {
    /// The socket has no more for now (after `n` bytes).
    Drained(usize),
    /// The peer closed or the read failed.
    Closed,
}

/// Reads into the large bulk in progress, at most `budget` bytes (at least
/// one chunk) and never past its end, so the bytes after it stay in the
/// socket for the ordinary buffer. Ok(n): read `n` bytes and the socket may
/// have more; once the bulk is whole it is handed to the parser.
fn read_block(conn: &mut Conn, budget: usize) -> Result<usize, BlockRead> {
    let b = conn.block_in.as_mut().expect("caller checked");
    let mut total = 0;
    loop {
        let room = (b.want - b.buf.len()).min(BLOCK_READ);
        if room == 0 {
            break;
        }
        let old = b.buf.len();
        b.buf.resize(old + room, 0);
        let n = match conn.transport.read(&mut b.buf[old..]) {
            Ok(0) => {
                b.buf.truncate(old);
                return Err(BlockRead::Closed);
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {
                b.buf.truncate(old);
                continue;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                b.buf.truncate(old);
                return Err(BlockRead::Drained(total));
            }
            Err(_) => {
                b.buf.truncate(old);
                return Err(BlockRead::Closed);
            }
        };
        b.buf.truncate(old + n);
        total += n;
        if n < room {
            // Short of `room`, so short of the bulk's end too.
            return Err(BlockRead::Drained(total));
        }
        if total >= budget {
            break;
        }
    }
    if b.buf.len() == b.want {
        finish_block(conn);
    }
    Ok(total)
}

/// The large bulk is whole: its payload becomes a shared buffer handed to
/// the parser, and parsing resumes.
fn finish_block(conn: &mut Conn) {
    let BlockIn { at, mut buf, want } = conn.block_in.take().expect("caller checked");
    let len = want - 2;
    let terminated = buf[len..] == *b"\r\n";
    // The capacity stays `len + 2`: an APPEND of two bytes fits in place.
    buf.truncate(len);
    let data = Arc::new(buf);
    conn.session.add_block(at, data, terminated);
    conn.need = 0;
}

/// The parser reported a large bulk at `at` (from `rpos`) of `len` bytes:
/// moves what of it is already buffered into a buffer of its own, exactly
/// sized, and cuts the request buffer there.
fn start_block(
    rbuf: &[u8],
    filled: &mut usize,
    rpos: usize,
    block_in: &mut Option<BlockIn>,
    at: usize,
    len: usize,
) {
    let start = rpos + at;
    let want = len + 2;
    let mut buf = Vec::with_capacity(want);
    buf.extend_from_slice(&rbuf[start..*filled]);
    *filled = start;
    *block_in = Some(BlockIn { at, buf, want });
}

/// Ensures free room after `filled`: at least a quarter chunk, or what the
/// parser said the request in progress needs, moving unparsed bytes to the
/// front first so the buffer does not creep.
fn make_room(conn: &mut Conn) {
    let need_total = conn.rpos + conn.need;
    if conn.rbuf.len() - conn.filled >= READ_CHUNK / 4 && conn.rbuf.len() >= need_total {
        return;
    }
    if conn.rpos > 0 {
        conn.rbuf.copy_within(conn.rpos..conn.filled, 0);
        conn.filled -= conn.rpos;
        conn.rpos = 0;
    }
    let target = conn.need.max(conn.filled + READ_CHUNK);
    if conn.rbuf.len() < target {
        conn.rbuf.resize(target, 0);
    }
}

/// Hands what is buffered to the connection's session, which runs every
/// complete request in it, and acts on why it stopped.
fn process(conn: &mut Conn, shared: &Shared, worker: usize) -> Stop {
    if conn.block_in.is_some() {
        return Stop::NeedInput;
    }
    let Conn {
        rbuf,
        filled,
        rpos,
        need,
        wbuf,
        wpos,
        client,
        session,
        block_in,
        transport,
        ..
    } = conn;
    let io = Io {
        input: &rbuf[..*filled],
        rpos,
        need,
        out: wbuf,
        unsent_from: *wpos,
        high_water: out_high_water(shared),
    };
    let stop = if client.script_debug {
        // SCRIPT DEBUG is on: the next EVAL talks over the socket itself.
        let mut link = super::debug_link::ConnLink::new(transport);
        // SAFETY: cleared below, before `link` goes.
        unsafe { client.link.lend(&mut link) };
        let stop = session.process(io, client, shared, worker);
        client.link.clear();
        stop
    } else {
        session.process(io, client, shared, worker)
    };
    let stop = match stop {
        Stop::Block { at, len } => {
            start_block(rbuf, filled, *rpos, block_in, at, len);
            Stop::NeedInput
        }
        Stop::Abort => {
            abort(conn);
            return Stop::Closing;
        }
        stop => stop,
    };
    if stop == Stop::Closing {
        conn.closing = true;
    }
    if conn.rpos == conn.filled {
        conn.rpos = 0;
        conn.filled = 0;
    }
    stop
}

/// After a connection's requests ran: its replies wait for its own writes
/// (`note_hold`) and, under `always`, for every write appended before them
/// by any client, because a reply can reveal another client's write: Redis
/// sends no reply of a loop turn before that turn's fsync, so no client
/// ever sees data a crash could still take back. Not while the journal is
/// failing: reads keep working then (they may show writes not on disk).
/// Only here, when new replies were made, never when held output is
/// flushed: a later `appended` would keep a reader waiting behind a
/// stream of other clients' writes.
#[inline]
pub(super) fn note_served(conn: &mut Conn, shared: &Shared) {
    note_hold(conn, shared);
    let j = &shared.journal;
    if conn.pending_out() > 0 && j.holds_replies() && !j.is_failing() {
        conn.seen = conn.seen.max(j.appended());
    }
}

/// The connection's output waits for the journal to be durable past its
/// own writes, and (unless the journal is failing) past what its replies
/// may show; or for the blocked clients its last command woke to be
/// served first (`crate::served`).
#[inline]
pub(super) fn must_wait(conn: &Conn, shared: &Shared, durable: u64) -> bool {
    conn.hold > durable
        || (conn.seen > durable && !shared.journal.is_failing())
        || conn.client.served.waiting()
}

/// `appendfsync always`: the connection's output waits until the journal is
/// durable past the writes its commands just made (appended on this thread
/// while they ran).
fn note_hold(conn: &mut Conn, shared: &Shared) {
    let end = conn.client.take_journal_end();
    if end > conn.hold && shared.journal.holds_replies() {
        conn.hold = end;
    }
}

/// Writes pending replies, referenced large values included (`writev`);
/// leaves the rest for the next writable event. Returns true when the
/// output was held back for the journal (`appendfsync always`): the caller
/// must then list the connection as held, whatever `durable` reads by then.
pub(super) fn flush(conn: &mut Conn, shared: &Shared, worker: usize) -> bool {
    conn.wbuf_peak = conn.wbuf_peak.max(conn.wbuf.len());
    note_hold(conn, shared);
    // Held for the journal: the worker writes it when the journal says it
    // is durable (`release_held`).
    if conn.pending_out() > 0 && must_wait(conn, shared, shared.journal.durable()) {
        return true;
    }
    conn.write_more = false;
    let mut budget = WRITE_BUDGET;
    while conn.pending_out() > 0 {
        if budget == 0 {
            conn.write_more = true;
            break;
        }
        let refs = &conn.client.out_refs;
        let r = if conn.wpos == conn.wbuf.len() && refs.is_empty() {
            // Only the transport's own bytes are left (TLS records); Ok(0)
            // ends the loop once they are out.
            conn.transport.send_pending().map(|()| 0)
        } else if refs.is_empty() {
            let end = conn.wbuf.len().min(conn.wpos + budget);
            conn.transport.write(&conn.wbuf[conn.wpos..end])
        } else {
            let mut slices = Vec::with_capacity(MAX_IOV);
            refs.gather(&conn.wbuf, conn.wpos, budget, &mut slices);
            conn.transport.write_vectored(&slices)
        };
        match r {
            Ok(0) => break,
            Ok(n) => {
                conn.client
                    .out_refs
                    .advance(conn.wbuf.len(), &mut conn.wpos, n);
                budget = budget.saturating_sub(n);
                bump(&shared.worker_stats[worker].net_out, n as u64);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                conn.closing = true;
                conn.wbuf.clear();
                conn.wpos = 0;
                conn.client.out_refs.clear();
                return false;
            }
        }
    }
    if conn.pending_out() == 0 {
        conn.wbuf.clear();
        conn.wpos = 0;
    }
    false
}
