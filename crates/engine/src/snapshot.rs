//! Point-in-time snapshots without fork() and without a copy of the
//! keyspace: copy-on-lock, shard by shard (Dragonfly's scheme).
//!
//! A snapshot starts at one instant, the *cut*: `Engine::begin_snapshot`
//! locks every shard, gives the snapshot a new epoch and installs its sink,
//! runs the caller's `on_cut` (the journal rotates its file there: journal
//! appends happen under shard locks, so no write straddles the cut), and
//! unlocks. From then on, the first lock of each shard, by anyone, hands
//! the shard to the sink *before* the locker can change anything
//! (`SnapState::before_use`, called from `Engine::lock_shard`); the shard
//! is marked with the epoch so that happens once. The snapshot's own
//! thread then locks every shard in order (`Engine::snapshot_sweep`),
//! which serializes whatever nobody touched yet. So the sink sees every
//! shard exactly as it was at the cut, and the only extra memory is what
//! the sink holds until it is written out.
//!
//! The engine knows no files and no format: the sink (the persistence
//! crate's snapshot writer) decides what "hand over" means. A sink is
//! called with shard locks held and must not lock shards itself.
use crate::keyspace::{Engine, Shard};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Receives each shard of the keyspace once per snapshot.
pub trait ShardSink: Send + Sync {
    /// Called with shard `index` locked, before any change after the cut.
    /// May be called from any thread, for several shards at once.
    fn dump(&self, index: usize, shard: &Shard);
}

/// Why a snapshot could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginError {
    /// Another snapshot (a BGSAVE, a journal rewrite) is still running:
    /// the engine keeps one cut at a time.
    InProgress,
    /// This thread holds every shard (`hold_all`, i.e. inside EXEC); a
    /// cut there would have to wait for itself. Callers schedule instead.
    InsideHold,
}

/// The running snapshot: its epoch (0 = none) and its sink.
#[derive(Default)]
pub(crate) struct SnapState {
    /// Epoch of the running snapshot, 0 if none. Read on every shard lock
    /// (one relaxed load); written only with every shard locked (start) or
    /// after every shard was dumped (end), so a locker that sees a stale
    /// value finds its shard already dumped or no sink, and does nothing.
    epoch: AtomicU64,
    /// The last epoch handed out; epochs are never reused, so a shard
    /// marked by an aborted snapshot is not mistaken for dumped later.
    last: AtomicU64,
    sink: RwLock<Option<(u64, Arc<dyn ShardSink>)>>,
}

impl SnapState {
    /// The copy-on-lock hook: serializes `shard` into the running
    /// snapshot if it is not in it yet. Called right after shard `i` is
    /// locked, before its holder sees it.
    #[inline]
    pub(crate) fn before_use(&self, i: usize, shard: &mut Shard) {
        let ep = self.epoch.load(Ordering::Relaxed);
        if ep != 0 && shard.snap_epoch != ep {
            self.dump(i, shard, ep);
        }
    }

    #[cold]
    fn dump(&self, i: usize, shard: &mut Shard, ep: u64) {
        let sink = self.sink.read();
        if let Some((cur, sink)) = &*sink {
            if *cur == ep {
                sink.dump(i, shard);
                shard.snap_epoch = ep;
            }
        }
    }
}

impl Engine {
    /// Starts a snapshot: with every shard locked, installs `sink` under a
    /// new epoch and runs `on_cut`. Returns the epoch. The snapshot then
    /// runs until `end_snapshot`; call `snapshot_sweep` to make sure every
    /// shard reached the sink.
    pub fn begin_snapshot(
        &self,
        cx: &crate::cx::Cx,
        sink: Arc<dyn ShardSink>,
        on_cut: impl FnOnce(),
    ) -> Result<u64, BeginError> {
        if self.holds_any(cx) {
            return Err(BeginError::InsideHold);
        }
        let locks: Vec<_> = (0..self.shard_count())
            .map(|i| self.lock_shard_raw(i))
            .collect();
        if self.snap.epoch.load(Ordering::Relaxed) != 0 {
            return Err(BeginError::InProgress);
        }
        let ep = self.snap.last.fetch_add(1, Ordering::Relaxed) + 1;
        *self.snap.sink.write() = Some((ep, sink));
        self.snap.epoch.store(ep, Ordering::Relaxed);
        on_cut();
        drop(locks);
        Ok(ep)
    }

    /// Locks each shard in turn, so every shard not yet handed to the sink
    /// of snapshot `epoch` is handed over now. `between(i)` runs after
    /// shard `i` with no lock held (the writer drains its queue there) and
    /// may stop the sweep by returning false.
    pub fn snapshot_sweep(&self, mut between: impl FnMut(usize) -> bool) {
        for i in 0..self.shard_count() {
            self.with_shard(&crate::cx::Cx::DETACHED, i, |_| ());
            if !between(i) {
                return;
            }
        }
    }

    /// Ends (or abandons) snapshot `epoch`: later locks no longer dump.
    /// Does nothing if another snapshot is running.
    pub fn end_snapshot(&self, epoch: u64) {
        let mut sink = self.snap.sink.write();
        if sink.as_ref().is_some_and(|(e, _)| *e == epoch) {
            self.snap.epoch.store(0, Ordering::Relaxed);
            *sink = None;
        }
    }

    /// True while a snapshot is running.
    pub fn snapshot_running(&self) -> bool {
        self.snap.epoch.load(Ordering::Relaxed) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cx::Cx;
    use crate::keyspace::{Expiry, Options};
    use crate::value::{StrValue, Value};
    use parking_lot::Mutex;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    /// Records, per shard, the string values it saw.
    #[derive(Default)]
    struct Collect(Mutex<Vec<(usize, Pairs)>>);

    impl ShardSink for Collect {
        fn dump(&self, index: usize, shard: &Shard) {
            let mut kv = Vec::new();
            for d in 0..shard.databases() {
                for e in shard.db(d).iter() {
                    if let Some(s) = e.str() {
                        kv.push((e.key().to_vec(), s.to_vec()));
                    }
                }
            }
            self.0.lock().push((index, kv));
        }
    }

    fn set(e: &Engine, k: &str, v: &str) {
        let key = e.key(k.as_bytes());
        let mut g = e.lock(&Cx::DETACHED, &key);
        g.set(
            0,
            &key,
            Value::Str(StrValue::from_bytes(v.as_bytes())),
            Expiry::Clear,
        );
    }

    fn engine() -> Engine {
        Engine::new(Options {
            databases: 2,
            shards: 16,
        })
    }

    #[test]
    fn writes_after_the_cut_are_not_seen() {
        let e = engine();
        for i in 0..100 {
            set(&e, &format!("k{i}"), "old");
        }
        let sink = Arc::new(Collect::default());
        let mut cut_ran = false;
        let ep = e
            .begin_snapshot(&Cx::DETACHED, sink.clone(), || cut_ran = true)
            .unwrap();
        assert!(cut_ran);
        assert_eq!(
            e.begin_snapshot(&Cx::DETACHED, sink.clone(), || ()),
            Err(BeginError::InProgress)
        );
        // Writers after the cut: every shard they touch is dumped first.
        for i in 0..100 {
            set(&e, &format!("k{i}"), "new");
        }
        set(&e, "added", "x");
        e.snapshot_sweep(|_| true);
        e.end_snapshot(ep);
        let got = sink.0.lock();
        let mut shards: Vec<usize> = got.iter().map(|(i, _)| *i).collect();
        shards.sort_unstable();
        assert_eq!(shards, (0..16).collect::<Vec<_>>(), "each shard once");
        let all: Vec<_> = got.iter().flat_map(|(_, kv)| kv.iter()).collect();
        assert_eq!(all.len(), 100);
        assert!(all.iter().all(|(_, v)| v == b"old"));
        drop(got);
        // After the end, nothing more is dumped, and a new snapshot can start.
        set(&e, "k1", "newer");
        assert_eq!(sink.0.lock().len(), 16);
        let ep2 = e
            .begin_snapshot(&Cx::DETACHED, sink.clone(), || ())
            .unwrap();
        assert!(ep2 > ep);
        e.end_snapshot(ep2);
        assert!(!e.snapshot_running());
    }

    #[test]
    fn reads_do_not_dump_writes_and_sweep_do() {
        let e = engine();
        for i in 0..100 {
            set(&e, &format!("k{i}"), "v");
        }
        let sink = Arc::new(Collect::default());
        let ep = e
            .begin_snapshot(&Cx::DETACHED, sink.clone(), || ())
            .unwrap();
        assert_eq!(e.dbsize(&Cx::DETACHED, 0), 100);
        e.for_each_key(&Cx::DETACHED, 0, |_| ());
        e.scan(&Cx::DETACHED, 0, 0, 1000, |_| ());
        e.active_expire(
            &Cx::DETACHED,
            &mut Default::default(),
            std::time::Instant::now(),
        );
        assert_eq!(sink.0.lock().len(), 0, "reads hand nothing over");
        set(&e, "k1", "w");
        assert_eq!(sink.0.lock().len(), 1, "a write hands its shard over");
        e.snapshot_sweep(|_| true);
        e.end_snapshot(ep);
        assert_eq!(sink.0.lock().len(), 16);
    }

    #[test]
    fn not_inside_a_hold_and_changes_counted() {
        let e = engine();
        let before = e.changes();
        set(&e, "a", "1");
        set(&e, "b", "1");
        assert_eq!(e.changes(), before + 2);
        let hold = e.hold_all(&Cx::DETACHED);
        assert_eq!(
            e.begin_snapshot(
                &Cx::DETACHED.with_hold(&hold),
                Arc::new(Collect::default()),
                || ()
            ),
            Err(BeginError::InsideHold)
        );
        drop(hold);
    }
}
