//! Replication (issue 24): the master's replication stream and backlog.
//!
//! The engine records every write deterministically for the journal
//! (`cairn_engine::record`); replication is a second consumer of those
//! records. While a backlog exists the engine's sink is this module's
//! (`Replication`, or `Fanout` beside the journal): each unit is written
//! as the RESP commands Redis would propagate (`stream`) into the shared
//! replication buffer (`buffer`), which is the backlog and every attached
//! replica's unsent output at once. With no backlog and no journal the
//! engine has no sink, and a write pays what it paid before: one relaxed
//! load at each guard's drop.
//!
//! What Redis keeps, kept as Redis keeps it (replication.c):
//! `master_replid` (new at start, new when the backlog is created from
//! nothing or freed), `master_replid2` and `second_repl_offset` (cleared
//! then), `master_repl_offset` (bytes ever fed), the backlog's
//! `repl-backlog-size` and `repl-backlog-ttl` (freed after that many
//! seconds without replicas), and the sync counters of INFO stats.
//!
//! The replicas attached to this master are `link`'s senders, each a
//! reader of the buffer (`attach`, `take`), listed in `replicas` for INFO,
//! ROLE, WAIT and `min-replicas-to-write`. The replica side (REPLICAOF)
//! feeds the bytes of its own master here (`feed_from_master`) and moves
//! the IDs (`adopt_master`, `continue_from_master`, `shift_replid`,
//! `set_replica_mode`), so chained replicas and later PSYNCs see the
//! master's offsets, as Redis 7.0 does. Links run over plain TCP or TLS
//! (`tls_link`); replicas that need a full sync share images
//! (`shared_sync`).
pub mod buffer;
pub mod diskless_load;
pub mod failover;
pub mod link;
pub mod outlimit;
pub mod replica;
pub mod restart;
pub mod shared_sync;
pub mod stream;
#[cfg(test)]
mod tests;
pub mod tls_link;

use crate::log;
use crate::shared::Shared;
use buffer::Buffer;
use cairn_engine::record::Sink;
use cairn_engine::Cx;
use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The replication state of a master.
pub struct Replication {
    state: Mutex<State>,
    /// A backlog exists: the engine records writes for the stream.
    active: AtomicBool,
    /// The journal's sink is installed (`install_sink`): a backlog made
    /// later fans out beside it, and one freed leaves it in place.
    journal_in: AtomicBool,
    /// INFO stats `sync_full`, `sync_partial_ok`, `sync_partial_err`.
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// Signalled when bytes are fed while some reader waits for them.
    fed: Condvar,
    /// The attached replicas (INFO's `slaveN:`, ROLE, WAIT).
    pub replicas: Mutex<Vec<Arc<link::Replica>>>,
    /// Clients blocked in WAIT: (client id, worker, offset they wait for).
    pub waiters: Mutex<Vec<(u64, usize, u64)>>,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (set with the
    /// config, read by admission without the config's lock).
    pub min_to_write: AtomicU32,
    pub min_max_lag: AtomicU32,
    /// This server replicates from a master (REPLICAOF): its stream is the
    /// master's bytes, the engine records nothing for it.
    replica_mode: AtomicBool,
    /// The stream's end as of the last feed, read without the lock: a
    /// command that sees it move sets its client's WAIT offset (`woff`).
    end_hint: AtomicU64,
    /// A worker fed the stream this turn and its senders are not woken
    /// yet: they are at the turn's end (`end_of_turn`), once for all the
    /// turn's writes, as Redis writes a replica's buffer once per event
    /// loop turn.
    wake_due: AtomicBool,
    /// The statistics of the master's commands a replica applies: INFO
    /// commandstats and the latency histograms count them, as Redis's
    /// `call` does, from this set beside the workers' (only the link
    /// thread writes it, as only a worker writes its own).
    master_stats: std::sync::OnceLock<crate::shared::WorkerStats>,
}

struct State {
    replid: String,
    replid2: String,
    /// `second_repl_offset`: up to where `replid2`'s history is ours
    /// (-1: none).
    second_offset: i64,
    /// `master_repl_offset` while there is no buffer (the buffer's `end`
    /// while there is).
    offset: u64,
    buffer: Option<Buffer>,
    /// The database the stream last selected (None: the next command is
    /// preceded by a SELECT whatever its database).
    db: Option<usize>,
    /// A unit's records, then its RESP form, reused across writes.
    unit: Vec<u8>,
    out: Vec<u8>,
    /// Since when no replica is attached (for `repl-backlog-ttl`).
    idle_since: Instant,
    /// Units that did not decode (an engine bug): counted and logged once.
    bad_units: u64,
    /// Bumped when every attached replica must go (the IDs moved, or the
    /// buffer was replaced): a sender that sees it change closes its link
    /// (Redis's `disconnectSlaves`), and the replica reconnects.
    kick: u64,
    /// Readers waiting on `fed`.
    waiting: usize,
}

/// What INFO replication shows of the master's side.
pub struct Info {
    pub replid: String,
    pub replid2: String,
    pub offset: u64,
    pub second_offset: i64,
    pub backlog_active: bool,
    pub backlog_first_byte: u64,
    pub backlog_histlen: u64,
    /// Bytes the buffer's blocks take (INFO memory).
    pub backlog_bytes: usize,
}

/// A new 40-hex-digit replication ID (Redis's `changeReplicationId`).
fn new_replid() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

impl Default for Replication {
    fn default() -> Replication {
        Replication {
            state: Mutex::new(State {
                replid: new_replid(),
                replid2: "0".repeat(40),
                second_offset: -1,
                offset: 0,
                buffer: None,
                db: None,
                unit: Vec::new(),
                out: Vec::new(),
                idle_since: Instant::now(),
                bad_units: 0,
                kick: 0,
                waiting: 0,
            }),
            active: AtomicBool::new(false),
            journal_in: AtomicBool::new(false),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            fed: Condvar::new(),
            replicas: Mutex::new(Vec::new()),
            waiters: Mutex::new(Vec::new()),
            min_to_write: AtomicU32::new(0),
            min_max_lag: AtomicU32::new(10),
            replica_mode: AtomicBool::new(false),
            end_hint: AtomicU64::new(0),
            wake_due: AtomicBool::new(false),
            master_stats: std::sync::OnceLock::new(),
        }
    }
}

impl Replication {
    /// The stream's end as of its last feed (0 before any): one relaxed
    /// load, for `dispatch` to see whether a command fed the stream.
    #[inline]
    pub fn end_hint(&self) -> u64 {
        self.end_hint.load(Ordering::Relaxed)
    }

    /// The master's commands' statistics (made at the first).
    pub fn master_stats(&self, shared: &Shared) -> &crate::shared::WorkerStats {
        self.master_stats
            .get_or_init(|| crate::shared::WorkerStats::new(shared.table.all().len()))
    }

    /// The master's commands' statistics, if a master ever sent one.
    pub fn master_stats_if_any(&self) -> Option<&crate::shared::WorkerStats> {
        self.master_stats.get()
    }

    /// True while a backlog exists.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// `master_repl_offset`.
    pub fn offset(&self) -> u64 {
        let s = self.state.lock();
        s.buffer.as_ref().map_or(s.offset, Buffer::end)
    }

    pub fn info(&self) -> Info {
        let s = self.state.lock();
        let b = s.buffer.as_ref();
        Info {
            replid: s.replid.clone(),
            replid2: s.replid2.clone(),
            offset: b.map_or(s.offset, Buffer::end),
            second_offset: s.second_offset,
            backlog_active: b.is_some(),
            // Redis shows 0 and 0 with no backlog.
            backlog_first_byte: b.map_or(0, Buffer::first_byte),
            backlog_histlen: b.map_or(0, Buffer::histlen),
            backlog_bytes: b.map_or(0, Buffer::bytes),
        }
    }

    /// `repl-backlog-size` changed.
    pub fn resize(&self, size: u64) {
        if let Some(b) = self.state.lock().buffer.as_mut() {
            b.resize(size);
        }
    }

    /// A reader of the stream from byte number `from` on (PSYNC's offset:
    /// `offset() + 1` for everything after now); None if there is no
    /// backlog or those bytes are gone. A replica's sender is one.
    pub fn attach(&self, from: u64) -> Option<usize> {
        self.state.lock().buffer.as_mut()?.add_reader(from)
    }

    /// Copies up to `max` of the reader's next bytes into `out`; returns
    /// how many.
    pub fn take(&self, reader: usize, max: usize, out: &mut Vec<u8>) -> usize {
        match self.state.lock().buffer.as_mut() {
            Some(b) => b.read(reader, max, out),
            None => 0,
        }
    }

    /// `take`, waiting up to `wait` for bytes when there are none. None
    /// when the reader must go: the buffer is gone or `kick` moved past
    /// `since`.
    pub fn take_wait(
        &self,
        reader: usize,
        since: u64,
        max: usize,
        out: &mut Vec<u8>,
        wait: Duration,
    ) -> Option<usize> {
        let mut s = self.state.lock();
        for round in 0..2 {
            if s.kick != since {
                return None;
            }
            let n = s.buffer.as_mut()?.read(reader, max, out);
            if n > 0 || round == 1 {
                return Some(n);
            }
            s.waiting += 1;
            self.fed.wait_for(&mut s, wait);
            s.waiting -= 1;
        }
        Some(0)
    }

    /// The current `kick` generation (a sender notes it when it attaches).
    pub fn generation(&self) -> u64 {
        self.state.lock().kick
    }

    /// Closes every attached replica's link (they reconnect and PSYNC).
    pub fn kick_replicas(&self) {
        self.state.lock().kick += 1;
        self.fed.notify_all();
    }

    /// `master_replid` and `master_repl_offset` together.
    pub fn id_and_offset(&self) -> (String, u64) {
        let s = self.state.lock();
        (
            s.replid.clone(),
            s.buffer.as_ref().map_or(s.offset, Buffer::end),
        )
    }

    /// Redis's `masterTryPartialResynchronization` test: the reader to
    /// serve `PSYNC replid from` with, attached, and the ID to answer
    /// `+CONTINUE` with; None if a full sync is needed.
    pub fn try_continue(&self, replid: &str, from: u64) -> Option<(usize, u64, String)> {
        let mut s = self.state.lock();
        let ours = replid == s.replid
            || (replid == s.replid2 && s.second_offset >= 0 && from <= s.second_offset as u64);
        if !ours {
            return None;
        }
        let reader = s.buffer.as_mut()?.add_reader(from)?;
        Some((reader, s.kick, s.replid.clone()))
    }

    /// At a snapshot's cut (every shard locked): a reader for everything
    /// after it, with the ID and offset `+FULLRESYNC` names.
    pub fn attach_at_cut(&self) -> Option<(usize, u64, String, u64)> {
        let mut s = self.state.lock();
        let b = s.buffer.as_mut()?;
        let end = b.end();
        let reader = b.add_reader(end + 1)?;
        // Redis's replicationSetupSlaveForFullResync (slaveseldb = -1):
        // the stream's next command selects its database again, so a
        // replica starting at the cut never depends on a SELECT sent
        // before it.
        s.db = None;
        Some((reader, s.kick, s.replid.clone(), end))
    }

    /// Feeds bytes that are no write (PING, `REPLCONF GETACK *`) to the
    /// stream, as Redis's cron and WAIT do; nothing without a backlog or
    /// on a replica (whose stream is its master's).
    pub fn feed_raw(&self, bytes: &[u8]) {
        if self.replica_mode.load(Ordering::Relaxed) {
            return;
        }
        let mut s = self.state.lock();
        if let Some(b) = s.buffer.as_mut() {
            // `end_hint` stays: WAIT's own GETACK must not become its
            // client's write offset (Redis feeds it outside `call`).
            b.feed(bytes);
            if s.waiting > 0 {
                self.fed.notify_all();
            }
        }
    }

    /// The replica side: bytes received from this server's master, fed
    /// verbatim (Redis 7.0's `replicationFeedStreamFromMasterStream`), so
    /// this server's offsets are its master's. Without a backlog only the
    /// offset moves.
    pub fn feed_from_master(&self, bytes: &[u8]) {
        let mut s = self.state.lock();
        match s.buffer.as_mut() {
            Some(b) => b.feed(bytes),
            None => s.offset += bytes.len() as u64,
        }
        if s.waiting > 0 {
            self.fed.notify_all();
        }
    }

    /// The replica side, after `+FULLRESYNC <replid> <offset>` and the
    /// load of the master's image: this server's history is the master's
    /// from `offset` on. A fresh backlog there (Redis creates one on a
    /// replica after the load), no ID2, and every chained replica goes
    /// (Redis's `disconnectSlaves`, they resync with the new data).
    pub fn adopt_master(&self, shared: &Shared, replid: &str, offset: u64) {
        let size = shared.config.read().repl_backlog_size;
        let mut s = self.state.lock();
        s.replid = replid.to_string();
        s.replid2 = "0".repeat(40);
        s.second_offset = -1;
        s.offset = offset;
        s.buffer = Some(Buffer::new(offset, size));
        s.db = None;
        s.idle_since = Instant::now();
        s.kick += 1;
        drop(s);
        self.fed.notify_all();
    }

    /// The replica side, after `+CONTINUE <new_replid>` from a master whose
    /// ID changed (a promoted replica): ours becomes ID2, valid up to the
    /// current offset (Redis's `slaveTryPartialResynchronization`), and
    /// chained replicas reconnect to learn the new ID.
    pub fn continue_from_master(&self, new_replid: &str) {
        let mut s = self.state.lock();
        if s.replid == new_replid {
            return;
        }
        let end = s.buffer.as_ref().map_or(s.offset, Buffer::end);
        s.replid2 = std::mem::replace(&mut s.replid, new_replid.to_string());
        s.second_offset = end as i64 + 1;
        s.kick += 1;
        drop(s);
        self.fed.notify_all();
    }

    /// True while this server replicates from a master.
    pub fn replica_mode(&self) -> bool {
        self.replica_mode.load(Ordering::Relaxed)
    }

    /// Replicas whose last ACK is at most `min-replicas-max-lag` seconds
    /// old (Redis's `repl_good_slaves_count`).
    pub fn good_replicas(&self) -> u32 {
        let max_lag = u64::from(self.min_max_lag.load(Ordering::Relaxed));
        let now = cairn_engine::clock::now_ms();
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.online() && now.saturating_sub(r.ack_ms()) / 1000 <= max_lag)
            .count() as u32
    }

    /// Writes are refused (`-NOREPLICAS`): `min-replicas-to-write` and
    /// `min-replicas-max-lag` are set and too few replicas are good.
    /// Redis's `processCommand` check, masters only.
    #[inline]
    pub fn too_few_replicas(&self) -> bool {
        let min = self.min_to_write.load(Ordering::Relaxed);
        min > 0
            && self.min_max_lag.load(Ordering::Relaxed) > 0
            && !self.replica_mode()
            && self.good_replicas() < min
    }

    /// The config's replication settings changed (or were loaded).
    pub fn configure(&self, backlog_size: u64, min_to_write: u32, max_lag: u32) {
        self.resize(backlog_size);
        self.min_to_write.store(min_to_write, Ordering::Relaxed);
        self.min_max_lag.store(max_lag, Ordering::Relaxed);
    }

    /// How many attached replicas acknowledged at least `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.online() && r.ack_offset() >= offset)
            .count()
    }

    /// A replica acknowledged `acked`: wake the WAITing clients it may
    /// satisfy (each runs its WAIT again and counts; one that is still
    /// short blocks again). Entries of clients gone meanwhile are dropped.
    pub fn wake_waiters(&self, shared: &Shared, acked: u64) {
        let mut w = self.waiters.lock();
        if w.is_empty() {
            return;
        }
        {
            let clients = shared.clients.lock();
            w.retain(|(client, _, _)| clients.contains_key(client));
        }
        for &(client, worker, offset) in w.iter() {
            if offset <= acked {
                shared.worker(worker).send(crate::shared::Msg::Wake(client));
            }
        }
    }

    /// The reader is gone.
    pub fn detach(&self, reader: usize) {
        let mut s = self.state.lock();
        if let Some(b) = s.buffer.as_mut() {
            b.remove_reader(reader);
        }
        s.idle_since = Instant::now();
    }
}

impl State {
    /// Writes a unit of records to the stream.
    fn feed_unit(&mut self) {
        self.out.clear();
        match stream::unit(&self.unit, &mut self.db, &mut self.out) {
            Ok(()) => {
                if let Some(b) = self.buffer.as_mut() {
                    b.feed(&self.out);
                }
            }
            Err(why) => {
                self.bad_units += 1;
                if self.bad_units == 1 {
                    log::warning(&format!(
                        "BUG: a write's record could not be replicated ({why}); replicas may diverge"
                    ));
                }
            }
        }
    }

    /// Writes a lone `Wire` record (the common write) to the stream: the
    /// request's bytes go into the buffer with no copy in between.
    fn feed_wire(&mut self, db: usize, raw: &[u8]) {
        let Some(b) = self.buffer.as_mut() else {
            return;
        };
        if self.db != Some(db) {
            self.out.clear();
            stream::select(db, &mut self.db, &mut self.out);
            b.feed(&self.out);
        }
        b.feed(raw);
    }
}

/// The engine's sink while a backlog exists and the journal is off.
impl Sink for Replication {
    fn append_with(&self, fill: &mut dyn FnMut(&mut Vec<u8>)) -> u64 {
        let mut s = self.state.lock();
        let s = &mut *s;
        s.unit.clear();
        fill(&mut s.unit);
        if !s.unit.is_empty() {
            s.feed_unit();
            self.notify(s);
        }
        // Nothing for a reply to wait for (that is the journal's end).
        0
    }

    fn append_wire(&self, db: usize, raw: &[u8]) -> u64 {
        let mut s = self.state.lock();
        s.feed_wire(db, raw);
        self.notify(&s);
        0
    }
}

impl Replication {
    /// Wakes the senders waiting for bytes (a futex call only when one
    /// waits: an idle replica's sender, not one busy writing). On a worker
    /// the wake waits for the turn's end (`end_of_turn`): woken at each
    /// write, a sender took one pipeline's commands per wake-up and system
    /// call (-P 16, 50 clients: 0.78 `sendto` and futex pairs a pipeline).
    #[inline]
    fn notify(&self, s: &State) {
        if let Some(b) = &s.buffer {
            self.end_hint.store(b.end(), Ordering::Relaxed);
        }
        if s.waiting > 0 {
            if IN_WORKER.with(Cell::get) {
                self.wake_due.store(true, Ordering::Relaxed);
            } else {
                self.fed.notify_all();
            }
        }
    }

    /// A worker's turn ends: wakes the senders its writes (or another
    /// worker's) left waiting. One relaxed load when there are none.
    #[inline]
    pub fn end_of_turn(&self) {
        if self.wake_due.load(Ordering::Relaxed) && self.wake_due.swap(false, Ordering::AcqRel) {
            // Under the lock, so a sender between its empty read and its
            // wait cannot miss it (it reads and waits holding the lock).
            let s = self.state.lock();
            if s.waiting > 0 {
                self.fed.notify_all();
            }
        }
    }
}

thread_local! {
    /// This thread is a worker, which calls `Replication::end_of_turn`.
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a worker (`Worker::run`).
pub fn enter_worker() {
    IN_WORKER.with(|w| w.set(true));
}

/// The engine's sink while both the journal and a backlog exist: each unit
/// goes to both, in the same call, under the writing command's shard locks
/// (so two writes of one key reach both in the order they took effect).
/// Returns the journal's end, which replies wait for under `always`.
struct Fanout {
    journal: Arc<crate::journal::Journal>,
    repl: Arc<Replication>,
}

impl Sink for Fanout {
    fn append_with(&self, fill: &mut dyn FnMut(&mut Vec<u8>)) -> u64 {
        // The unit is encoded once, in the journal's buffer, and copied
        // from there; the stream's lock is taken inside the journal's
        // (the only place both are held, so in one order).
        self.journal.append_with(&mut |out| {
            let start = out.len();
            fill(out);
            if out.len() > start {
                let mut s = self.repl.state.lock();
                let s = &mut *s;
                s.unit.clear();
                s.unit.extend_from_slice(&out[start..]);
                s.feed_unit();
                self.repl.notify(s);
            }
        })
    }

    fn append_wire(&self, db: usize, raw: &[u8]) -> u64 {
        let end = self.journal.append_wire(db, raw);
        let mut s = self.repl.state.lock();
        s.feed_wire(db, raw);
        self.repl.notify(&s);
        end
    }
}

/// Installs the engine's sink for what records are wanted: the journal's
/// (`journal`: appendonly is switching on or stays on), the stream's (a
/// backlog exists), both, or none. The caller holds every shard lock (or
/// is not serving yet), as `Engine::set_journal` requires.
pub fn install_sink(shared: &Shared, journal: bool) {
    let r = &shared.replication;
    r.journal_in.store(journal, Ordering::SeqCst);
    let sink: Option<Arc<dyn Sink>> = match (journal, r.active()) {
        (true, true) => Some(Arc::new(Fanout {
            journal: shared.journal.clone(),
            repl: r.clone(),
        })),
        (true, false) => Some(shared.journal.clone()),
        (false, true) => Some(r.clone()),
        (false, false) => None,
    };
    shared.engine.set_journal(sink);
}

/// Creates the backlog if there is none (the first replica's sync, as
/// Redis's `syncCommand`): a new replication ID, no ID2, an empty history
/// at the current offset, and recording switched on under every shard
/// lock, so the stream holds exactly the writes after that instant.
/// `caller`: the worker asking (it is past its barrier already).
pub fn create_backlog(shared: &Shared, cx: &Cx, caller: Option<usize>) {
    let r = &shared.replication;
    if r.active() {
        return;
    }
    if r.replica_mode() {
        // The stream is the master's: a backlog holds it from here on
        // with the master's ID, and the engine records nothing.
        let size = shared.config.read().repl_backlog_size;
        let mut s = r.state.lock();
        if s.buffer.is_none() {
            s.buffer = Some(Buffer::new(s.offset, size));
            s.idle_since = Instant::now();
        }
        return;
    }
    // Commands lend their arguments from now on; wait until none that
    // started before is still running (as the journal's start does).
    shared.engine.arm_journal(true);
    crate::journal::barrier(shared, caller);
    let g = shared.engine.lock_all(cx);
    {
        let mut s = r.state.lock();
        if s.buffer.is_none() {
            let size = shared.config.read().repl_backlog_size;
            s.replid = new_replid();
            s.replid2 = "0".repeat(40);
            s.second_offset = -1;
            s.buffer = Some(Buffer::new(s.offset, size));
            s.db = None;
            s.idle_since = Instant::now();
        }
    }
    r.active.store(true, Ordering::SeqCst);
    install_sink(shared, r.journal_in.load(Ordering::SeqCst));
    drop(g);
    log::notice("Replication backlog created, my new replication IDs are set");
}

/// Frees the backlog (`repl-backlog-ttl` passed with no replica): the
/// stream stops, and the replication ID changes (Redis: so that a replica
/// can never continue from a history this master no longer has).
pub fn free_backlog(shared: &Shared, cx: &Cx) {
    let r = &shared.replication;
    if !r.active() {
        return;
    }
    let g = shared.engine.lock_all(cx);
    r.active.store(false, Ordering::SeqCst);
    install_sink(shared, r.journal_in.load(Ordering::SeqCst));
    {
        let mut s = r.state.lock();
        if let Some(b) = s.buffer.take() {
            s.offset = b.end();
        }
        s.replid = new_replid();
        s.replid2 = "0".repeat(40);
        s.second_offset = -1;
    }
    drop(g);
}

/// The replica side: this server starts (`on`) or stops replicating from
/// a master. Starting, the engine stops recording for the stream (it is
/// the master's from now on, `feed_from_master`), the backlog is kept and
/// attached replicas reconnect (Redis's `replicationSetMaster`).
/// Stopping (REPLICAOF NO ONE) is a promotion: `shift_replid`, and the
/// engine records for the stream again if a backlog exists. `cx` and
/// `caller` are the asking command's and worker's (None off a worker), as
/// for `create_backlog`.
pub fn set_replica_mode(shared: &Shared, cx: &Cx, caller: Option<usize>, on: bool) {
    let r = &shared.replication;
    if on {
        r.replica_mode.store(true, Ordering::SeqCst);
        if r.active() {
            let g = shared.engine.lock_all(cx);
            r.active.store(false, Ordering::SeqCst);
            install_sink(shared, r.journal_in.load(Ordering::SeqCst));
            drop(g);
        }
        r.kick_replicas();
        sync_expiry(shared, shared.config.read().replica_read_only);
        return;
    }
    if !r.replica_mode.swap(false, Ordering::SeqCst) {
        return;
    }
    sync_expiry(shared, false);
    shift_replid(shared);
    if r.state.lock().buffer.is_some() {
        shared.engine.arm_journal(true);
        crate::journal::barrier(shared, caller);
        let g = shared.engine.lock_all(cx);
        r.state.lock().db = None;
        r.active.store(true, Ordering::SeqCst);
        install_sink(shared, r.journal_in.load(Ordering::SeqCst));
        drop(g);
    }
}

/// A read-only replica hides keys past their time and leaves them for the
/// master's DEL (`Limits::replica_expiry`); anything else expires them on
/// lookup. Called when the role or `replica-read-only` changes.
pub fn sync_expiry(shared: &Shared, read_only: bool) {
    let on = shared.replication.replica_mode() && read_only;
    shared
        .engine
        .limits
        .replica_expiry
        .store(on, Ordering::Relaxed);
}

/// Redis's `shiftReplicationId`: the current ID becomes ID2, valid up to
/// the current offset, and a new ID starts (a promoted replica, so its
/// old master's other replicas can still `+CONTINUE` with it).
pub fn shift_replid(shared: &Shared) {
    let r = &shared.replication;
    let mut s = r.state.lock();
    let end = s.buffer.as_ref().map_or(s.offset, Buffer::end);
    let new = new_replid();
    s.replid2 = std::mem::replace(&mut s.replid, new);
    // Redis: the next byte a replica of the old ID may ask for.
    s.second_offset = end as i64 + 1;
    s.db = None;
    drop(s);
    log::notice("Setting secondary replication ID, new replication ID set");
}

/// Once a second (the cron thread): frees a backlog that has had no
/// replica for `repl-backlog-ttl` seconds (0: never).
pub fn cron(shared: &Shared) {
    let r = &shared.replication;
    link::cron(shared);
    outlimit::check(shared);
    if !r.active() {
        return;
    }
    let ttl = shared.config.read().repl_backlog_ttl;
    let expired = {
        let s = r.state.lock();
        let idle = s
            .buffer
            .as_ref()
            .is_some_and(|b| b.readers() == 0 && ttl > 0);
        idle && s.idle_since.elapsed() >= Duration::from_secs(ttl)
    };
    if expired {
        free_backlog(shared, &Cx::DETACHED);
        log::notice(&format!(
            "Replication backlog freed after {ttl} seconds without connected replicas."
        ));
    }
}
