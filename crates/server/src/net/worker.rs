//! A worker thread: one mio poll, the connections assigned to it, and the
//! loop that serves them (`net::conn`): polling, read budgets and the
//! ready list, writes at the end of each turn, output held for the journal
//! (`appendfsync always`), blocked clients' wake-ups and deadlines, the
//! mailbox other threads write to, moving connections between workers
//! (`net::balance`), and a cron for idle timeouts, kills and buffers.
//! Commands run here, on the thread that read them, against the sharded
//! engine; there is no hand-off to another thread on the request path.
//! The loop knows no protocol: each connection's session does the parsing
//! and running (`net::session`).
use crate::blocking;
use crate::client::{Client, ClientInfo, Unblock};
use crate::log;
use crate::net::conn::{
    abort, flush, must_wait, note_served, out_high_water, serve, Conn, READ_CHUNK,
};
use crate::net::session::FrontEnd;
use crate::net::transport::Transport;
use crate::shared::{Msg, Shared};
use mio::{Events, Poll, Token};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const WAKER: Token = Token(usize::MAX);
const CRON_EVERY: Duration = Duration::from_millis(100);

/// A connection on its way from one worker to another (`balance`).
pub struct Moved(Box<Conn>);

pub struct Worker {
    id: usize,
    shared: Arc<Shared>,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    ready: Vec<usize>,
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
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        self.shared.worker_stats[self.id]
            .tid
            .store(u32::try_from(tid).unwrap_or(0), Ordering::Relaxed);
        crate::journal::defer_kicks();
        crate::replication::enter_worker();
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
            self.shared.replication.end_of_turn();
            // A spin that found nothing is the wait, done awake: its time
            // is not work (`publish_work` subtracts it from the CPU time).
            if spun_empty {
                self.spin_ns += self.now.elapsed().as_nanos() as u64;
                // Spin politely: a thread waiting for this core (on a small
                // box, a client thread that a reply just woke) runs first.
                // Without it the spin held the core for its whole window
                // while that client, whose next request is what the spin
                // waits for, sat on the run queue. Alone on the core the
                // call returns at once (~0.2 us). After the accounting, so
                // the others' run time is not counted as this worker's spin.
                // SAFETY: sched_yield takes no arguments and cannot fail.
                unsafe { libc::sched_yield() };
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
            self.shared.replication.end_of_turn();
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

    fn drain_mailbox(&mut self) {
        let msgs = std::mem::take(&mut *self.shared.worker(self.id).mailbox.lock());
        for m in msgs {
            match m {
                Msg::Pubsub(batch) => self.deliver_pubsub(batch),
                Msg::NewConn(stream, addr, front, tls, refuse) => {
                    self.adopt(stream, addr, front, tls, refuse)
                }
                Msg::Monitor(id, line) => self.deliver_monitor(id, &line),
                Msg::Invalidate(id) => self.deliver_invalidations(id),
                Msg::Poke => self.cron(),
                Msg::Wake(id) => self.wake(id),
                Msg::Durable => {
                    self.release_held();
                }
                Msg::Moved(m) => self.adopt_moved(m),
                Msg::Barrier(left) => {
                    left.fetch_sub(1, Ordering::SeqCst);
                }
                Msg::WakeServed(id, tickets) => self.wake_served(id, tickets),
                Msg::Served(id) => self.served(id),
            }
        }
    }

    fn adopt(
        &mut self,
        std_stream: std::net::TcpStream,
        addr: std::net::SocketAddr,
        front: &'static FrontEnd,
        tls: Option<Arc<rustls::ServerConfig>>,
        refuse: Option<crate::net::session::Refusal>,
    ) {
        let laddr = std_stream.local_addr().unwrap_or(addr);
        if std_stream.set_nonblocking(true).is_err() {
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let _ = std_stream.set_nodelay(true);
        use std::os::fd::AsRawFd;
        let fd = std_stream.as_raw_fd();
        let mut transport = match tls {
            None => Transport::plain(std_stream),
            Some(config) => match Transport::tls(std_stream, config) {
                Ok(t) => t,
                Err(e) => {
                    log::warning(&format!("cannot start TLS with {addr}: {e}"));
                    self.shared.connected.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            },
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = transport.register(self.poll.registry(), Token(slot)) {
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
        // Every connection starts as the default user; authenticated at
        // once when that user is enabled with no password.
        let gen = self.shared.acl.generation();
        let user = self.shared.acl.default_user();
        let authenticated = user.nopass && user.enabled;
        let mut client = Client::new(info, authenticated, Some(user));
        client.user_gen = gen;
        let session: Box<dyn crate::net::session::Session> = match refuse {
            Some(_) => Box::new(crate::net::session::Refused),
            None => (front.session)(),
        };
        self.conns[slot] = Some(Conn {
            transport,
            client,
            session,
            rbuf: Vec::new(),
            filled: 0,
            rpos: 0,
            need: 0,
            wbuf: Vec::new(),
            wpos: 0,
            wbuf_peak: 0,
            ready_again: false,
            write_queued: false,
            armed: 0,
            closing: false,
            hold: 0,
            seen: 0,
            held: false,
            last_active: self.now,
            block_in: None,
            obuf_soft_since: 0,
            write_more: false,
            refusal: refuse.map(front.refusal),
        });
    }

    fn on_event(&mut self, i: usize, readable: bool, writable: bool) {
        let Some(Some(conn)) = self.conns.get_mut(i) else {
            return;
        };
        if writable && conn.pending_out() > 0 {
            flush(conn, &self.shared, self.id);
            // Draining output may let a throttled connection run again.
            if conn.ready_again && conn.pending_out() < out_high_water(&self.shared) {
                conn.ready_again = false;
                self.ready.push(i);
            }
        }
        if readable && !conn.closing {
            let again = serve(conn, &self.shared, self.id, self.now);
            if again {
                self.ready.push(i);
            }
            note_served(conn, &self.shared);
            // A client woken to serve another's command has had its turn.
            if conn.client.served.carrying() {
                crate::served::release(&self.shared, &mut conn.client);
            }
        }
        let conn = self.conns[i].as_mut().expect("checked above");
        if conn.refusal.is_some() && !conn.transport.handshaking() {
            // The handshake is done: the refusal goes out encrypted, then
            // the connection closes (Redis's `clientAcceptHandler`).
            let msg = conn.refusal.take().expect("checked");
            conn.wbuf.extend_from_slice(&msg);
            conn.closing = true;
        }
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
            if conn.ready_again && conn.pending_out() < out_high_water(&self.shared) {
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
            if conn.session.paused() {
                self.shared.pause.held.fetch_sub(1, Ordering::Relaxed);
            }
            conn.release();
            let _ = conn.transport.deregister(self.poll.registry());
            let id = conn.client.id;
            crate::pubsub::drop_client(&self.shared, &mut conn.client);
            crate::tracking::disable(&self.shared, &mut conn.client);
            // A socket that lives on in another thread (a replica's link)
            // keeps the client's registration: that thread owns it now.
            let handoff = conn.client.handoff.take();
            let handoff = handoff.filter(|_| !conn.client.info.killed.load(Ordering::Relaxed));
            let take_whole = conn.client.take_transport.take();
            let take_whole =
                take_whole.filter(|_| !conn.client.info.killed.load(Ordering::Relaxed));
            if handoff.is_none() {
                self.shared.clients.lock().remove(&id);
            }
            self.by_id.remove(&id);
            if let Some(on) = conn.client.blocked.take() {
                blocking::unregister(&self.shared, id, &on);
                blocking::handoff(&self.shared, &on, None);
            }
            crate::served::release(&self.shared, &mut conn.client);
            if !conn.client.watched.is_empty() {
                crate::client::unwatch_all(
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
            if let Some(take) = handoff {
                self.hand_over(conn, take);
            } else if let Some(take) = take_whole {
                let (transport, client, unread) = conn.into_parts();
                let link = super::debug_link::OwnedLink::new(transport, unread);
                take(Box::new(link), Box::new(client));
            }
        }
    }

    /// Gives a closing connection's transport (plain or TLS, the handshake
    /// done) and its unread bytes to `take` (`Client::handoff`: a
    /// replica's link, which makes it blocking for its own threads).
    fn hand_over(&mut self, conn: Conn, take: crate::client::Handoff) {
        let (transport, _client, unread) = conn.into_parts();
        take(transport, unread);
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
            && !conn.client.served.waiting()
            && !conn.session.holding()
            && !conn.ready_again
            && !conn.closing
            && conn.refusal.is_none()
            && conn.client.blocked.is_none()
            && !conn.client.tier.parked()
            && !conn.client.subs.active()
            && conn.client.info.tracking.load(Ordering::Relaxed) == 0
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
        if let Err(e) = conn.transport.deregister(self.poll.registry()) {
            // Still ours: keep serving it here.
            log::warning(&format!("cannot move a connection: {e}"));
            let _ = conn.transport.register(self.poll.registry(), Token(i));
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
        if let Err(e) = conn.transport.register(self.poll.registry(), Token(slot)) {
            log::warning(&format!("cannot adopt a moved connection: {e}"));
            self.free.push(slot);
            let id = conn.client.id;
            crate::pubsub::drop_client(&self.shared, &mut conn.client);
            crate::tracking::disable(&self.shared, &mut conn.client);
            self.shared.clients.lock().remove(&id);
            if !conn.client.watched.is_empty() {
                crate::client::unwatch_all(
                    &self.shared,
                    &cairn_engine::Cx::DETACHED,
                    &mut conn.client,
                );
            }
            self.shared.connected.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        conn.client.info.set_worker(self.id);
        // An invalidation posted while the connection moved woke its old
        // worker, which no longer has it: write it here. (The worker is
        // stored first, so a later post wakes this one.)
        crate::tracking::drain_inbox(&conn.client.info, &mut conn.wbuf);
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
        // A worker stuck in a long script cannot serve a connection handed
        // to it (the listener sends new ones elsewhere for the same reason).
        let shared = self.shared.clone();
        let busy = |w: usize| shared.scripts.worker_busy(w);
        if self.id >= active {
            for i in 0..self.conns.len() {
                if self.conns[i].as_ref().is_some_and(Self::movable) {
                    let Some(home) = (1..=active)
                        .map(|k| (self.next_home + k) % active)
                        .find(|&w| !busy(w))
                    else {
                        return;
                    };
                    self.next_home = home;
                    self.hand_off(i, home);
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
            if to == self.id || to >= active || busy(to) {
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

    /// A key client `id` waits on is ready, CLIENT UNBLOCK asked it to
    /// stop waiting, or the disk tier's reads it was parked for are done:
    /// run its request again this turn.
    fn wake(&mut self, id: u64) {
        let Some(&slot) = self.by_id.get(&id) else {
            return;
        };
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if conn.client.blocked.is_none() && !conn.client.tier.parked() {
            return;
        }
        match conn.client.info.unblock_req.swap(0, Ordering::Relaxed) {
            1 => conn.client.unblock = Some(Unblock::Timeout),
            2 => conn.client.unblock = Some(Unblock::Error),
            _ => {}
        }
        if conn.session.wake() {
            self.ready.push(slot);
        }
    }

    /// `wake` on behalf of another client's command (`crate::served`): the
    /// client takes the tickets, given back after its turn; a client no
    /// longer here or no longer waiting gives them back at once.
    fn wake_served(&mut self, id: u64, tickets: Vec<Arc<crate::served::Ticket>>) {
        let waiting = self
            .by_id
            .get(&id)
            .and_then(|&slot| self.conns[slot].as_mut())
            .filter(|conn| conn.client.blocked.is_some());
        match waiting {
            Some(conn) => {
                crate::served::carry(&mut conn.client, tickets);
                self.wake(id);
            }
            None => crate::served::give_back_all(&self.shared, tickets),
        }
    }

    /// The clients client `id`'s command woke have all had their turn: its
    /// held reply goes out and its next request runs.
    fn served(&mut self, id: u64) {
        let Some(&slot) = self.by_id.get(&id) else {
            return;
        };
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if crate::served::done(&mut conn.client) {
            self.ready.push(slot);
            self.release_held();
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
                if conn.session.wake() {
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

    /// Writes the invalidation messages other threads left for client `id`
    /// (`crate::tracking`), as MONITOR lines are written.
    fn deliver_invalidations(&mut self, id: u64) {
        let (shared, worker) = (self.shared.clone(), self.id);
        let Some(&slot) = self.by_id.get(&id) else {
            return;
        };
        if let Some(conn) = self.conns[slot].as_mut() {
            if !conn.closing && conn.client.info.inbox_pending.load(Ordering::Acquire) {
                crate::tracking::drain_inbox(&conn.client.info, &mut conn.wbuf);
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
                let line = crate::client::describe(&self.shared, info);
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
        let cpu_ns = crate::process::cpu_us(libc::RUSAGE_THREAD) * 1000;
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
                && !conn.session.paused()
                && now.duration_since(conn.last_active).as_secs() >= timeout
            {
                log::verbose("Closing idle client");
                self.close(i);
                continue;
            }
            if conn.session.paused() {
                if !pause_over {
                    continue;
                }
                conn.session.unpause();
                self.shared.pause.held.fetch_sub(1, Ordering::Relaxed);
                self.ready.push(i);
            }
            // Give idle connections' big buffers back (Redis's
            // clientsCronResizeQueryBuffer / OutputBuffer).
            let idle = now.duration_since(conn.last_active) > Duration::from_secs(2);
            if conn.filled == 0 && (conn.rbuf.len() > READ_CHUNK || (idle && !conn.rbuf.is_empty()))
            {
                conn.rbuf = Vec::new();
            }
            // The reply buffer goes back when idle, or when it held less
            // than a quarter of its room since the last look (Redis's
            // clientsCronResizeOutputBuffer also judges by the peak): a
            // client reading large replies all the time keeps its buffer,
            // instead of growing it from nothing again after every tick
            // (~5% of the instructions of E4's MGET x 32, branch tierr).
            let cap = conn.wbuf.capacity();
            if conn.pending_out() == 0 && cap > 64 * 1024 && (idle || conn.wbuf_peak < cap / 4) {
                conn.wbuf = Vec::new();
                conn.wpos = 0;
            }
            conn.wbuf_peak = 0;
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
