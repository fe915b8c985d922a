//! A worker thread: one mio poll, the connections assigned to it, and the
//! read → parse → execute → write loop (shared/STYLE.md, "a request, end to
//! end"). Commands run here, on the thread that read them, against the
//! sharded engine; there is no hand-off to another thread on the request
//! path.
//!
//! Per readiness event a connection reads once (a read shorter than the free
//! buffer means the socket is drained: on Linux a later arrival raises a new
//! edge, which is what tokio also relies on) and executes every complete
//! request in the buffer; at the end of the loop turn each connection's
//! replies go out with one `write` (Redis's `handleClientsWithPendingWrites`). Fairness: a
//! connection that keeps filling the buffer is put back on a ready list after
//! a read budget, so one huge client cannot starve the others. Backpressure:
//! while a connection has more than `OUT_HIGH_WATER` bytes of replies unsent
//! it executes nothing more, so a client that pipelines without reading
//! cannot grow the server's memory without bound.
use crate::blocking;
use crate::client::{Client, ClientInfo, Unblock};
use crate::log;
use crate::resp::ctx::Args;
use crate::resp::dispatch::{self, Outcome};
use crate::shared::{bump, Msg, Shared};
use cairn_protocol::resp::{parse_request, ArgList, Limits, Parsed};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const WAKER: Token = Token(usize::MAX);
/// First read buffer; grows for large requests, shrinks back when idle.
const READ_CHUNK: usize = 16 * 1024;
/// Bytes read from one connection before others get a turn.
const READ_BUDGET: usize = 1024 * 1024;
/// Unsent reply bytes above which a connection stops executing requests.
const OUT_HIGH_WATER: usize = 8 * 1024 * 1024;
const CRON_EVERY: Duration = Duration::from_millis(100);
/// Replies at least this large are written at once instead of at the end of
/// the loop turn.
const LARGE_REPLY: usize = 64 * 1024;
/// Bulks (RESP) and data blocks (memcached) at least this long that have
/// not fully arrived are read into a buffer of their own, sized exactly,
/// which then becomes the argument and, for SET, the stored value without
/// another copy (Redis: `PROTO_MBULK_BIG_ARG`).
const BIG_ARG: usize = cairn_engine::value::string::LARGE_MIN;
/// Most bytes one `read` puts into such a buffer, and most read into it per
/// serve: the buffer is zeroed a chunk at a time just before each read (so
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
struct BlockIn {
    /// Offset of its first byte in the request (from `rpos`).
    at: usize,
    /// The payload plus the two bytes after it, as they arrive.
    buf: Vec<u8>,
    /// `payload + 2`: the length `buf` will reach.
    want: usize,
}

struct Conn {
    stream: TcpStream,
    client: Client,
    rbuf: Vec<u8>,
    /// Bytes of `rbuf` holding data; `rbuf.len()` is the allocated room.
    filled: usize,
    /// Start of the first unparsed request.
    rpos: usize,
    /// Parser's hint: buffer bytes (from `rpos`) needed before parsing again.
    need: usize,
    args: ArgList,
    wbuf: Vec<u8>,
    wpos: usize,
    /// A paused request sits at `rpos`; retry on the next cron tick.
    paused: bool,
    /// Reading stopped by the budget or backpressure; resume without an event.
    ready_again: bool,
    /// Listed in the worker's `pending_writes` for the end of this turn.
    write_queued: bool,
    /// The blocked request at `rpos` should run again (a key is ready,
    /// its time ran out, or CLIENT UNBLOCK).
    wake: bool,
    /// The deadline already in the worker's timer heap for this wait.
    armed: u64,
    closing: bool,
    /// `appendfsync always`: the output may leave only once the journal is
    /// durable up to here (where it was when this connection's commands
    /// ran).
    hold: u64,
    /// Journal position the output must also wait for because it may show
    /// other clients' writes (`note_served`); unlike `hold`, not waited for
    /// while the journal is failing.
    seen: u64,
    /// Listed in the worker's `held`.
    held: bool,
    last_active: Instant,
    /// A connection of `memcached-port`: its protocol state. None: RESP.
    mc: Option<Box<crate::memcache::McConn>>,
    /// A large bulk being read straight into a buffer of its own.
    block_in: Option<BlockIn>,
    /// Unix seconds since which the output has been over the normal soft
    /// limit (0: not over it).
    obuf_soft_since: u64,
    /// The last flush stopped at `WRITE_BUDGET` with the socket still
    /// writable: write again next turn without waiting for an event.
    write_more: bool,
}

/// A connection on its way from one worker to another (`balance`).
pub struct Moved(Box<Conn>);

impl Conn {
    /// Reply bytes not yet written, referenced large values included.
    fn pending_out(&self) -> usize {
        self.wbuf.len() - self.wpos + self.client.out_refs.pending()
    }

    /// Request bytes buffered: the query buffer and a large bulk arriving.
    fn query_bytes(&self) -> usize {
        self.filled - self.rpos + self.block_in.as_ref().map_or(0, |b| b.buf.len())
    }
}

pub struct Worker {
    id: usize,
    shared: Arc<Shared>,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    ready: Vec<usize>,
    limits: Limits,
    /// The time at the top of this loop turn; precise enough for idle
    /// tracking and cron, and one clock read instead of one per read.
    now: Instant,
    /// Connections with replies to write at the end of this loop turn.
    pending_writes: Vec<usize>,
    /// Client id -> slot in `conns`, for messages addressed to a client.
    by_id: std::collections::HashMap<u64, usize>,
    /// Deadlines of blocked clients, earliest first: (unix ms, client id).
    /// An entry whose client has moved on is skipped when it comes up.
    deadlines: BinaryHeap<Reverse<(u64, u64)>>,
    /// Connections whose output waits for the journal (`Conn::hold`).
    held: Vec<usize>,
    /// Connections served (published in `WorkerStats::conns`).
    live: usize,
    /// The balance plan acted on last (`balance::Balance::epoch`).
    balance_epoch: u64,
    /// Round-robin position over the active workers for hand-overs.
    next_home: usize,
    /// Time spent spinning on polls that found nothing (not work).
    spin_ns: u64,
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>, poll: Poll) -> Worker {
        Worker {
            id,
            shared,
            poll,
            conns: Vec::new(),
            free: Vec::new(),
            ready: Vec::new(),
            limits: Limits::default(),
            now: Instant::now(),
            pending_writes: Vec::new(),
            by_id: std::collections::HashMap::new(),
            deadlines: BinaryHeap::new(),
            held: Vec::new(),
            live: 0,
            balance_epoch: 0,
            next_home: 0,
            spin_ns: 0,
        }
    }

    pub fn run(mut self) {
        crate::memory::register_thread();
        crate::journal::defer_kicks();
        cairn_engine::keyspace::retain_locks(self.shared.config.read().worker_retain_locks);
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now() + CRON_EVERY;
        let mut busy_since: Option<Instant> = None;
        let mut spun_empty = false;
        loop {
            // While busy, poll without sleeping for up to `worker-spin-us`
            // after the last work: on a VM, waking an idle vCPU (an IPI and
            // a halt exit) costs more than the few empty polls that usually
            // find the next request. Measured on this 2-vCPU machine: 50 us
            // raised unpipelined throughput 15-60% at equal or lower CPU per
            // request; an idle server stops spinning 50 us after its last
            // request, so it costs nothing when there is no load.
            let spin =
                Duration::from_micros(self.shared.hot.worker_spin_us.load(Ordering::Relaxed));
            // `self.now` was read right after the previous poll, which is
            // when the last work was seen; no extra clock read per turn.
            let spinning = busy_since.is_some_and(|t| self.now.duration_since(t) < spin);
            let timeout = if !self.ready.is_empty() || !self.pending_writes.is_empty() || spinning {
                Duration::ZERO
            } else {
                let mut t = next_cron.saturating_duration_since(self.now);
                if let Some(Reverse((at, _))) = self.deadlines.peek() {
                    let now_ms = cairn_engine::clock::now_ms();
                    t = t.min(Duration::from_millis(at.saturating_sub(now_ms)));
                }
                t
            };
            // Whatever ran since the last turn's writes (cron, mailbox)
            // may owe the journal writer a wake-up; never sleep on it.
            cairn_engine::keyspace::release_retained();
            crate::journal::end_of_turn(&self.shared, self.id);
            // A spin that found nothing is the wait, done awake: its time
            // is not work (`publish_work` subtracts it from the CPU time).
            if spun_empty {
                self.spin_ns += self.now.elapsed().as_nanos() as u64;
            }
            let spin_poll = timeout.is_zero();
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != ErrorKind::Interrupted {
                    log::warning(&format!("worker {} poll failed: {e}", self.id));
                }
                continue;
            }
            self.now = Instant::now();
            spun_empty = spin_poll
                && events.is_empty()
                && self.ready.is_empty()
                && self.pending_writes.is_empty();
            if !events.is_empty() {
                busy_since = Some(self.now);
            } else if !spinning {
                busy_since = None;
            }
            self.refresh_limits();
            for ev in events.iter() {
                match ev.token() {
                    WAKER => self.drain_mailbox(),
                    Token(i) => {
                        self.on_event(i, ev.is_readable() || ev.is_read_closed(), ev.is_writable())
                    }
                }
            }
            self.expire_blocked();
            // A connection can be listed more than once (its read budget ran
            // out both on an event and on the ready list in one turn); served
            // once per turn, or a big sender would get a growing share.
            let mut ready = std::mem::take(&mut self.ready);
            ready.sort_unstable();
            ready.dedup();
            for i in ready {
                self.on_event(i, true, false);
            }
            // A shard lock kept through the turn's commands is not held
            // over the writes (`retain_locks`).
            cairn_engine::keyspace::release_retained();
            crate::journal::end_of_turn(&self.shared, self.id);
            self.write_pending();
            if self.release_held() {
                self.write_pending();
            }
            if self.now >= next_cron {
                self.cron();
                next_cron = self.now + CRON_EVERY;
            }
        }
    }

    fn refresh_limits(&mut self) {
        let h = &self.shared.hot;
        self.limits.max_bulk_len = h.proto_max_bulk_len.load(Ordering::Relaxed);
    }

    fn drain_mailbox(&mut self) {
        let msgs = std::mem::take(&mut *self.shared.worker(self.id).mailbox.lock());
        for m in msgs {
            match m {
                Msg::Pubsub(batch) => self.deliver_pubsub(batch),
                Msg::NewConn(stream, addr) => self.adopt(stream, addr, false),
                Msg::NewMemcacheConn(stream, addr) => self.adopt(stream, addr, true),
                Msg::Monitor(id, line) => self.deliver_monitor(id, &line),
                Msg::Poke => self.cron(),
                Msg::Wake(id) => self.wake(id),
                Msg::Durable => {
                    self.release_held();
                }
                Msg::Moved(m) => self.adopt_moved(m),
                Msg::Barrier(left) => {
                    left.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn adopt(&mut self, std_stream: std::net::TcpStream, addr: std::net::SocketAddr, mc: bool) {
        let laddr = std_stream.local_addr().unwrap_or(addr);
        if std_stream.set_nonblocking(true).is_err() {
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let _ = std_stream.set_nodelay(true);
        use std::os::fd::AsRawFd;
        let fd = std_stream.as_raw_fd();
        let mut stream = TcpStream::from_std(std_stream);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warning(&format!("cannot register connection from {addr}: {e}"));
            self.free.push(slot);
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let id = self.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        let info = Arc::new(ClientInfo::new(id, addr, laddr, fd, self.id));
        info.mark_active(self.now);
        self.shared.clients.lock().insert(id, info.clone());
        self.by_id.insert(id, slot);
        self.count_conns(1);
        let authenticated = !self.shared.hot.requirepass.load(Ordering::Relaxed);
        self.conns[slot] = Some(Conn {
            stream,
            client: Client::new(info, authenticated),
            rbuf: Vec::new(),
            filled: 0,
            rpos: 0,
            need: 0,
            args: ArgList::new(),
            wbuf: Vec::new(),
            wpos: 0,
            paused: false,
            ready_again: false,
            write_queued: false,
            wake: false,
            armed: 0,
            closing: false,
            hold: 0,
            seen: 0,
            held: false,
            last_active: self.now,
            mc: mc.then(crate::memcache::McConn::new),
            block_in: None,
            obuf_soft_since: 0,
            write_more: false,
        });
    }

    fn on_event(&mut self, i: usize, readable: bool, writable: bool) {
        let Some(Some(conn)) = self.conns.get_mut(i) else {
            return;
        };
        if writable && conn.pending_out() > 0 {
            flush(conn, &self.shared, self.id);
            // Draining output may let a throttled connection run again.
            if conn.ready_again && conn.pending_out() < OUT_HIGH_WATER {
                conn.ready_again = false;
                self.ready.push(i);
            }
        }
        if readable && !conn.closing {
            let again = serve(conn, &self.shared, &self.limits, self.id, self.now);
            if again {
                self.ready.push(i);
            }
            note_served(conn, &self.shared);
        }
        let conn = self.conns[i].as_mut().expect("checked above");
        if let Some(b) = &conn.client.blocked {
            if b.deadline_ms != 0 && conn.armed != b.deadline_ms {
                conn.armed = b.deadline_ms;
                self.deadlines
                    .push(Reverse((b.deadline_ms, conn.client.id)));
            }
        }
        if conn.pending_out() > 0 && !conn.write_queued {
            conn.write_queued = true;
            self.pending_writes.push(i);
        }
        let killed = conn.client.info.killed.load(Ordering::Relaxed);
        if killed || (conn.closing && conn.pending_out() == 0) {
            self.close(i);
        }
    }

    /// Writes every reply produced in this loop turn, one `write` per
    /// connection (Redis: `handleClientsWithPendingWrites` before sleeping).
    /// Writing at the end of the turn rather than right after each read
    /// hands a client that waits on many connections its replies together,
    /// so it wakes once for many instead of once each.
    fn write_pending(&mut self) {
        for i in std::mem::take(&mut self.pending_writes) {
            let Some(Some(conn)) = self.conns.get_mut(i) else {
                continue;
            };
            conn.write_queued = false;
            // Decided once, by `flush`: re-reading `durable` here could see
            // it pass after `flush` held the output, and the connection
            // would then be neither written nor listed as held (its client
            // waiting forever). `release_held` re-checks under `want_wake`.
            if flush(conn, &self.shared, self.id) && !conn.held {
                conn.held = true;
                self.held.push(i);
            }
            if conn.ready_again && conn.pending_out() < OUT_HIGH_WATER {
                conn.ready_again = false;
                self.ready.push(i);
            }
            if conn.closing && conn.pending_out() == 0 {
                self.close(i);
            } else if conn.write_more {
                // Budget used, socket still writable: next turn.
                conn.write_queued = true;
                self.pending_writes.push(i);
            }
        }
    }

    /// Queues for writing the held connections whose output the journal
    /// has made durable; asks to be woken for the rest. True if any was
    /// queued.
    fn release_held(&mut self) -> bool {
        if self.held.is_empty() {
            return false;
        }
        let j = &self.shared.journal;
        // Ask first, then look: the writer publishes `durable` before it
        // reads the flag, so one of the two sees the other.
        j.want_wake(self.id);
        let durable = j.durable();
        let mut queued = false;
        let mut i = 0;
        while i < self.held.len() {
            let slot = self.held[i];
            let Some(Some(conn)) = self.conns.get_mut(slot) else {
                self.held.swap_remove(i);
                continue;
            };
            if must_wait(conn, &self.shared, durable) {
                i += 1;
                continue;
            }
            self.held.swap_remove(i);
            conn.held = false;
            if !conn.write_queued {
                conn.write_queued = true;
                self.pending_writes.push(slot);
                queued = true;
            }
        }
        queued
    }

    fn close(&mut self, i: usize) {
        if let Some(mut conn) = self.conns[i].take() {
            if let Some(b) = conn.block_in.take() {
                cairn_engine::lazyfree::free(b.buf);
            }
            for b in conn.args.take_blocks() {
                cairn_engine::lazyfree::release(b);
            }
            let _ = self.poll.registry().deregister(&mut conn.stream);
            let id = conn.client.id;
            crate::pubsub::drop_client(&self.shared, &mut conn.client);
            self.shared.clients.lock().remove(&id);
            self.by_id.remove(&id);
            if let Some(on) = conn.client.blocked.take() {
                blocking::unregister(&self.shared, id, &on);
                blocking::handoff(&self.shared, &on);
            }
            if !conn.client.watched.is_empty() {
                crate::resp::cmd::multi::unwatch_all(
                    &self.shared,
                    &cairn_engine::Cx::DETACHED,
                    &mut conn.client,
                );
            }
            if conn.client.info.monitor.load(Ordering::Relaxed) {
                let mut m = self.shared.monitors.lock();
                m.retain(|(mid, _)| *mid != id);
                self.shared.monitor_count.store(m.len(), Ordering::Relaxed);
            }
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            self.free.push(i);
            self.count_conns(-1);
        }
    }

    fn count_conns(&mut self, d: isize) {
        self.live = self.live.saturating_add_signed(d);
        self.shared.worker_stats[self.id]
            .conns
            .store(self.live, Ordering::Relaxed);
    }

    /// A connection that can change worker now: nothing half done on it
    /// (no buffered input or output, no large bulk arriving, no output
    /// held for the journal, not queued anywhere in this turn), and nothing
    /// registered elsewhere under this worker's number (blocked clients,
    /// subscribers and monitors are found by worker; they stay).
    fn movable(conn: &Conn) -> bool {
        conn.rpos == conn.filled
            && conn.pending_out() == 0
            && conn.block_in.is_none()
            && !conn.write_queued
            && !conn.write_more
            && !conn.held
            && !conn.paused
            && !conn.ready_again
            && !conn.wake
            && !conn.closing
            && conn.client.blocked.is_none()
            && !conn.client.subs.active()
            && !conn.client.info.monitor.load(Ordering::Relaxed)
            && !conn.client.info.killed.load(Ordering::Relaxed)
    }

    /// Hands connection `i` to worker `to`: out of this poll, into the
    /// other worker's mailbox. The socket keeps its buffered bytes; the
    /// new owner registers it and reads (`adopt_moved`).
    fn hand_off(&mut self, i: usize, to: usize) {
        let Some(mut conn) = self.conns[i].take() else {
            return;
        };
        if let Err(e) = self.poll.registry().deregister(&mut conn.stream) {
            // Still ours: keep serving it here.
            log::warning(&format!("cannot move a connection: {e}"));
            let _ = self.poll.registry().register(
                &mut conn.stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            );
            self.conns[i] = Some(conn);
            return;
        }
        self.by_id.remove(&conn.client.id);
        self.free.push(i);
        self.count_conns(-1);
        self.shared.balance.moved.fetch_add(1, Ordering::Relaxed);
        self.shared
            .worker(to)
            .send(Msg::Moved(Moved(Box::new(conn))));
    }

    /// A connection handed over by another worker: register it here and
    /// serve it this turn (bytes may have arrived while it moved).
    fn adopt_moved(&mut self, m: Moved) {
        let mut conn = m.0;
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self.poll.registry().register(
            &mut conn.stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warning(&format!("cannot adopt a moved connection: {e}"));
            self.free.push(slot);
            let id = conn.client.id;
            crate::pubsub::drop_client(&self.shared, &mut conn.client);
            self.shared.clients.lock().remove(&id);
            if !conn.client.watched.is_empty() {
                crate::resp::cmd::multi::unwatch_all(
                    &self.shared,
                    &cairn_engine::Cx::DETACHED,
                    &mut conn.client,
                );
            }
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        conn.client.info.set_worker(self.id);
        self.by_id.insert(conn.client.id, slot);
        self.conns[slot] = Some(*conn);
        self.count_conns(1);
        self.ready.push(slot);
    }

    /// Follows `balance`: an inactive worker hands every movable connection
    /// to the active ones; under a new plan, an active worker hands over
    /// the surplus the plan names.
    fn rebalance(&mut self) {
        let balance = &self.shared.balance;
        let active = balance.active();
        let epoch = std::mem::replace(&mut self.balance_epoch, balance.epoch());
        if self.id >= active {
            for i in 0..self.conns.len() {
                if self.conns[i].as_ref().is_some_and(Self::movable) {
                    self.next_home = (self.next_home + 1) % active;
                    self.hand_off(i, self.next_home);
                }
            }
            return;
        }
        if epoch == self.balance_epoch {
            return;
        }
        let moves = balance.moves_of(self.id);
        let mut slots = (0..self.conns.len()).rev();
        'plan: for (to, count) in moves {
            if to == self.id || to >= active {
                continue;
            }
            let mut left = count;
            while left > 0 {
                let Some(i) = slots.next() else {
                    break 'plan;
                };
                if self.conns[i].as_ref().is_some_and(Self::movable) {
                    self.hand_off(i, to);
                    left -= 1;
                }
            }
        }
    }

    /// A key client `id` waits on is ready, or CLIENT UNBLOCK asked it to
    /// stop waiting: run its blocked request again this turn.
    fn wake(&mut self, id: u64) {
        let Some(&slot) = self.by_id.get(&id) else {
            return;
        };
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if conn.client.blocked.is_none() {
            return;
        }
        match conn.client.info.unblock_req.swap(0, Ordering::Relaxed) {
            1 => conn.client.unblock = Some(Unblock::Timeout),
            2 => conn.client.unblock = Some(Unblock::Error),
            _ => {}
        }
        if !conn.wake {
            conn.wake = true;
            self.ready.push(slot);
        }
    }

    /// Runs, as timed out, the blocked requests whose deadline has passed.
    fn expire_blocked(&mut self) {
        if self.deadlines.is_empty() {
            return;
        }
        let now_ms = cairn_engine::clock::now_ms();
        while let Some(&Reverse((at, id))) = self.deadlines.peek() {
            if at > now_ms {
                break;
            }
            self.deadlines.pop();
            let Some(&slot) = self.by_id.get(&id) else {
                continue;
            };
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            // Only the wait this entry was made for.
            if conn.client.blocked.as_ref().map(|b| b.deadline_ms) == Some(at) {
                conn.client.unblock = Some(Unblock::Timeout);
                if !conn.wake {
                    conn.wake = true;
                    self.ready.push(slot);
                }
            }
        }
    }

    fn deliver_monitor(&mut self, id: u64, line: &[u8]) {
        let (shared, worker) = (self.shared.clone(), self.id);
        let Some(&slot) = self.by_id.get(&id) else {
            return;
        };
        if let Some(conn) = self.conns[slot].as_mut() {
            if !conn.closing {
                conn.wbuf.extend_from_slice(line);
                flush(conn, &shared, worker);
                if conn.write_more && !conn.write_queued {
                    conn.write_queued = true;
                    self.pending_writes.push(slot);
                }
            }
        }
    }

    /// Appends a published message to each target connection of this
    /// worker (see `pubsub`), to be written at the end of the loop turn.
    /// A subscriber whose unsent output goes over `client-output-buffer-limit
    /// pubsub` is closed, with Redis's log line, so one that never reads
    /// cannot grow the server's memory without bound.
    fn deliver_pubsub(&mut self, batch: crate::pubsub::Batch) {
        let mut over: smallvec::SmallVec<[usize; 4]> = smallvec::SmallVec::new();
        for &(id, frame) in batch.targets() {
            let Some(&slot) = self.by_id.get(&id) else {
                continue;
            };
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if conn.closing || !batch.write(frame, &conn.client, &mut conn.wbuf) {
                continue;
            }
            let pending = conn.pending_out();
            if crate::pubsub::over_output_limit(&self.shared, &mut conn.client, pending) {
                let info = &conn.client.info;
                info.obl.store(pending, Ordering::Relaxed);
                info.omem.store(
                    conn.wbuf.capacity() + conn.client.out_refs.pending(),
                    Ordering::Relaxed,
                );
                let line = crate::resp::cmd::client::describe(&self.shared, info);
                log::warning(&format!(
                    "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
                ));
                abort(conn);
                over.push(slot);
            } else if !conn.write_queued {
                conn.write_queued = true;
                self.pending_writes.push(slot);
            }
        }
        for slot in over {
            self.close(slot);
        }
    }

    /// Periodic work: kills, idle timeouts, paused clients, buffer shrinking.
    /// Publishes this thread's work so far for `balance`: its CPU time
    /// less its empty spins.
    fn publish_work(&self) {
        let cpu_ns = crate::resp::cmd::info::cpu_us(libc::RUSAGE_THREAD) * 1000;
        self.shared.worker_stats[self.id]
            .work_ns
            .store(cpu_ns.saturating_sub(self.spin_ns), Ordering::Relaxed);
    }

    fn cron(&mut self) {
        self.publish_work();
        self.rebalance();
        let timeout = self.shared.hot.timeout_secs.load(Ordering::Relaxed);
        let now = self.now;
        let pause_over =
            self.shared.pause.until_ms.load(Ordering::Relaxed) <= cairn_engine::clock::now_ms();
        for i in 0..self.conns.len() {
            let Some(conn) = self.conns[i].as_mut() else {
                continue;
            };
            let info = &conn.client.info;
            if info.killed.load(Ordering::Relaxed) {
                self.close(i);
                continue;
            }
            let is_monitor = info.monitor.load(Ordering::Relaxed);
            // Subscribers only listen: `timeout` spares them, as in Redis;
            // blocked clients obey their own timeout, not the idle one.
            let is_subscriber = conn.client.subs.active();
            if timeout > 0
                && !is_monitor
                && !is_subscriber
                && conn.client.blocked.is_none()
                && !conn.paused
                && now.duration_since(conn.last_active).as_secs() >= timeout
            {
                log::verbose("Closing idle client");
                self.close(i);
                continue;
            }
            if conn.paused && pause_over {
                conn.paused = false;
                self.ready.push(i);
            } else if conn.paused {
                continue;
            }
            // Give idle connections' big buffers back (Redis's
            // clientsCronResizeQueryBuffer / OutputBuffer).
            let idle = now.duration_since(conn.last_active) > Duration::from_secs(2);
            if conn.filled == 0 && (conn.rbuf.len() > READ_CHUNK || (idle && !conn.rbuf.is_empty()))
            {
                conn.rbuf = Vec::new();
            }
            if conn.pending_out() == 0 && conn.wbuf.capacity() > 64 * 1024 {
                conn.wbuf = Vec::new();
                conn.wpos = 0;
            }
            conn.client
                .info
                .qbuf
                .store(conn.query_bytes(), Ordering::Relaxed);
            conn.client
                .info
                .qbuf_free
                .store(conn.rbuf.len() - conn.filled, Ordering::Relaxed);
            conn.client.info.omem.store(
                conn.wbuf.capacity() + conn.client.out_refs.pending(),
                Ordering::Relaxed,
            );
        }
    }
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

/// Why `process` stopped.
#[derive(PartialEq, Eq)]
enum Stop {
    /// Every complete request ran; more bytes are needed.
    NeedInput,
    /// Enough replies are pending that the rest must wait for the socket.
    OutputFull,
    /// CLIENT PAUSE holds the next request.
    Paused,
    /// The request at the head waits on keys.
    Blocked,
    /// The connection is closing.
    Closing,
}

/// Runs what is buffered, reads what the socket has, runs that, and writes
/// the replies once. Returns true if the connection should be served again
/// without waiting for a new readiness event (read budget used up).
fn serve(conn: &mut Conn, shared: &Shared, limits: &Limits, worker: usize, now: Instant) -> bool {
    let stats = &shared.worker_stats[worker];
    let mut budget = READ_BUDGET;
    let mut drained = false;
    loop {
        let stop = process(conn, shared, limits, worker);
        // Before any of the replies is written, as Redis checks on each
        // reply added: a client over its limit gets none of them.
        if over_normal_limit(shared, conn) {
            let info = &conn.client.info;
            info.obl.store(conn.pending_out(), Ordering::Relaxed);
            let line = crate::resp::cmd::client::describe(shared, info);
            log::warning(&format!(
                "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
            ));
            abort(conn);
            return false;
        }
        match stop {
            Stop::Paused | Stop::Closing | Stop::Blocked => break,
            Stop::OutputFull => {
                flush(conn, shared, worker);
                if conn.pending_out() >= OUT_HIGH_WATER {
                    conn.ready_again = true;
                    return false;
                }
                continue;
            }
            Stop::NeedInput => {}
        }
        if drained {
            break;
        }
        if budget == 0 {
            return true;
        }
        let limit = shared.hot.query_buffer_limit.load(Ordering::Relaxed);
        if conn.query_bytes() > limit {
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
        match conn.stream.read(&mut conn.rbuf[conn.filled..]) {
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
fn abort(conn: &mut Conn) {
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
        let n = match conn.stream.read(&mut b.buf[old..]) {
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
    match conn.mc.as_deref_mut() {
        Some(mc) => mc.set_block(cairn_protocol::memcache::DataBlock { data, terminated }),
        None => conn.args.add_block(at, data),
    }
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

/// Parses and runs every complete request in the read buffer.
fn process(conn: &mut Conn, shared: &Shared, limits: &Limits, worker: usize) -> Stop {
    if conn.mc.is_some() {
        return process_memcache(conn, shared, worker);
    }
    let stats = &shared.worker_stats[worker];
    let Conn {
        rbuf,
        filled,
        rpos,
        need,
        args,
        wbuf,
        wpos,
        client,
        paused,
        closing,
        wake,
        block_in,
        ..
    } = conn;
    if block_in.is_some() {
        return Stop::NeedInput;
    }
    let mut stop = Stop::NeedInput;
    while *rpos < *filled {
        if *closing {
            stop = Stop::Closing;
            break;
        }
        if wbuf.len() - *wpos + client.out_refs.pending() >= OUT_HIGH_WATER {
            stop = Stop::OutputFull;
            break;
        }
        if client.blocked.is_some() {
            if !*wake {
                stop = Stop::Blocked;
                break;
            }
            *wake = false;
        }
        let buf = &rbuf[*rpos..*filled];
        if buf.len() < *need {
            break;
        }
        // A client that still owes the password gets Redis's tighter
        // request limits; AUTH earlier in the same batch lifts them.
        let limits = Limits {
            unauthenticated: !client.authenticated,
            big_arg: BIG_ARG,
            ..*limits
        };
        match parse_request(buf, &limits, args) {
            Ok(Parsed::Complete { consumed }) => {
                *need = 0;
                if !args.is_empty() {
                    let mut a = Args::new(buf, args);
                    if buf[0] == b'*' && !args.has_blocks() {
                        // Every argument is in `buf`: the journal can
                        // record the request's own bytes.
                        a = a.with_raw(&buf[..consumed]);
                    }
                    match dispatch::execute(shared, client, a, wbuf, stats) {
                        Outcome::Paused => {
                            *paused = true;
                            stop = Stop::Paused;
                            break;
                        }
                        Outcome::Blocked => {
                            let on = client.wants_block.take().expect("Blocked sets it");
                            if client.blocked.is_none() {
                                // Registered first, then one more look: a
                                // push that landed in between is not missed.
                                blocking::register(shared, client.id, worker, &on);
                                client.info.blocked.store(true, Ordering::Relaxed);
                                client.blocked = Some(on);
                                *wake = true;
                                continue;
                            }
                            stop = Stop::Blocked;
                            break;
                        }
                        Outcome::Done => {
                            if let Some(on) = client.blocked.take() {
                                blocking::unregister(shared, client.id, &on);
                                client.info.blocked.store(false, Ordering::Relaxed);
                                client.info.unblock_req.store(0, Ordering::Relaxed);
                                if client.unblock.take().is_none() {
                                    blocking::handoff(shared, &on);
                                }
                            }
                        }
                    }
                    if client.close_after_reply {
                        *closing = true;
                    }
                }
                *rpos += consumed;
                for b in args.take_blocks() {
                    cairn_engine::lazyfree::release(b);
                }
            }
            Ok(Parsed::Incomplete { min_total }) => {
                *need = min_total;
                break;
            }
            Ok(Parsed::Block { at, len }) => {
                start_block(rbuf, filled, *rpos, block_in, at, len);
                break;
            }
            Err(e) => {
                // Reply, then close this connection only (Redis:
                // setProtocolError → CLIENT_CLOSE_AFTER_REPLY).
                let msg = format!("ERR {e}");
                cairn_protocol::resp::ReplyWriter::new(wbuf, client.proto).error(&msg);
                log::verbose(&format!(
                    "Protocol error ({e}) from client {}",
                    client.info.addr
                ));
                *closing = true;
                *rpos = *filled;
                stop = Stop::Closing;
                break;
            }
        }
    }
    if *closing {
        stop = Stop::Closing;
    }
    if *rpos == *filled {
        *rpos = 0;
        *filled = 0;
    }
    stop
}

/// `process` for a memcached connection: the same buffers, bounds and
/// backpressure, another parser and command set (`crate::memcache`).
fn process_memcache(conn: &mut Conn, shared: &Shared, worker: usize) -> Stop {
    use crate::memcache::Stop as Mc;
    let Conn {
        rbuf,
        filled,
        rpos,
        need,
        wbuf,
        wpos,
        client,
        closing,
        mc,
        block_in,
        ..
    } = conn;
    let Some(mc) = mc.as_deref_mut() else {
        return Stop::Closing;
    };
    if block_in.is_some() {
        return Stop::NeedInput;
    }
    let input = &rbuf[..*filled];
    let stop = match crate::memcache::process(
        mc,
        input,
        rpos,
        need,
        wbuf,
        *wpos,
        OUT_HIGH_WATER,
        client,
        shared,
        worker,
    ) {
        Mc::NeedInput => Stop::NeedInput,
        Mc::Block { at, len } => {
            start_block(rbuf, filled, *rpos, block_in, at, len);
            Stop::NeedInput
        }
        Mc::OutputFull => Stop::OutputFull,
        Mc::Closing => {
            *closing = true;
            Stop::Closing
        }
        Mc::Abort => {
            abort(conn);
            return Stop::Closing;
        }
    };
    if *rpos == *filled {
        *rpos = 0;
        *filled = 0;
    }
    stop
}

/// `appendfsync always`: the connection's output waits until the journal is
/// durable past the writes its commands just made (appended on this thread
/// while they ran).
#[inline]
/// After a connection's requests ran: its replies wait for its own writes
/// (`note_hold`) and, under `always`, for every write appended before them
/// by any client, because a reply can reveal another client's write: Redis
/// sends no reply of a loop turn before that turn's fsync, so no client
/// ever sees data a crash could still take back. Not while the journal is
/// failing: reads keep working then (they may show writes not on disk).
/// Only here, when new replies were made, never when held output is
/// flushed: a later `appended` would keep a reader waiting behind a
/// stream of other clients' writes.
fn note_served(conn: &mut Conn, shared: &Shared) {
    note_hold(conn, shared);
    let j = &shared.journal;
    if conn.pending_out() > 0 && j.holds_replies() && !j.is_failing() {
        conn.seen = conn.seen.max(j.appended());
    }
}

/// The connection's output waits for the journal to be durable past its
/// own writes, and (unless the journal is failing) past what its replies
/// may show.
#[inline]
fn must_wait(conn: &Conn, shared: &Shared, durable: u64) -> bool {
    conn.hold > durable || (conn.seen > durable && !shared.journal.is_failing())
}

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
fn flush(conn: &mut Conn, shared: &Shared, worker: usize) -> bool {
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
        let r = if refs.is_empty() {
            let end = conn.wbuf.len().min(conn.wpos + budget);
            conn.stream.write(&conn.wbuf[conn.wpos..end])
        } else {
            let mut slices = Vec::with_capacity(MAX_IOV);
            refs.gather(&conn.wbuf, conn.wpos, budget, &mut slices);
            conn.stream.write_vectored(&slices)
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
