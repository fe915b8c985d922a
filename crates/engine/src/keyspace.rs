//! The sharded keyspace and the guard through which every command touches it.
//!
//! Keys are spread over many shards by the high bits of a seeded hash; each
//! shard is one mutex around a table per logical database. A command runs on
//! the thread that read it (shared/SPEED.md: hopping to an owner thread cost
//! Dragonfly 3.7x against Garnet): it locks the shards of its keys, in
//! ascending shard order so two multi-key commands can never deadlock, does
//! its work, and unlocks. That makes every multi-key command (MSET, RENAME,
//! DEL k1 k2, ...) atomic: no other client can see half of it. Commands that
//! need the whole database (FLUSHALL, SWAPDB) lock every shard.
//!
//! The guard also applies lazy expiry: a lookup that finds an expired key
//! removes it and reports it absent, so expired keys never appear in a reply.
use crate::compact::Meta;
use crate::cx::{CmdState, Cx};
use crate::entry::{Entry, Owned, Ref};
use crate::table::Table;
use crate::value::{StrValue, Value};
use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use std::cell::Cell;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Per-shard counters; kept under the shard's lock so they cost no atomics.
#[derive(Default, Clone, Copy, Debug)]
pub struct ShardStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    /// Keys whose expiry was found by the active cycle rather than a lookup.
    pub expired_active: u64,
    /// Keys evicted because of `maxmemory` (`evict::evict_key`).
    pub evicted_keys: u64,
}

/// A WATCHing client's flag: set when a key it watches changes, read by
/// its EXEC (Redis's `CLIENT_DIRTY_CAS`).
pub type WatchFlag = Arc<AtomicBool>;

/// The watchers of one shard's keys: key -> (db, flag) per watcher.
type Watchers = hashbrown::HashMap<Box<[u8]>, SmallVec<[(usize, WatchFlag); 1]>>;

/// One lock's worth of the keyspace: a table per database.
pub struct Shard {
    pub(crate) dbs: Box<[Table]>,
    pub(crate) expire_cursor: Box<[u64]>,
    pub stats: ShardStats,
    /// Keys of this shard some client WATCHes: key -> (db, flag) per
    /// watcher. Kept per shard, under the shard's lock, so a write checks
    /// it without any global lock (one `is_empty` when nobody watches).
    pub(crate) watched: Watchers,
    /// The snapshot epoch this shard was last serialized for
    /// (`crate::snapshot`): equal to the running snapshot's epoch once the
    /// shard is in it, so it is never serialized twice.
    pub(crate) snap_epoch: u64,
}

/// Cache-line alignment so two threads locking neighbouring shards do not
/// bounce one line between cores.
/// `changes` sits beside the mutex, on the line the lock holder already
/// writes, so counting costs no extra cache traffic.
#[repr(align(64))]
struct Padded(Mutex<Shard>, ShardChanges);

/// Keys changed in one shard since start (Redis's `server.dirty`, kept per
/// shard). Written only under the shard's lock, with a plain load and store
/// (no read-modify-write), and read without the lock by `Engine::changes`.
#[derive(Default)]
struct ShardChanges(std::sync::atomic::AtomicU64);

/// Tunables the engine reads on the request path; set from config.
pub struct Limits {
    pub hash_max_listpack_entries: AtomicUsize,
    pub hash_max_listpack_value: AtomicUsize,
    pub proto_max_bulk_len: AtomicUsize,
    /// An LFU maxmemory policy is in force: accesses feed the LFU counter
    /// instead of the LRU time.
    pub lfu: std::sync::atomic::AtomicBool,
    /// This server is a read-only replica (Redis 7.0 `expireIfNeeded` with
    /// `masterhost` set): a key past its time is hidden from a lookup and
    /// kept for the master's DEL, and the master's own commands
    /// (`CmdState::set_from_master`) see it as live.
    pub replica_expiry: std::sync::atomic::AtomicBool,
    /// `notify-keyspace-events` as `events::class` bits.
    pub notify: AtomicU32,
    /// `list-max-listpack-size`: > 0 entries per list node, < 0 a node size
    /// class (-1 4 KB ... -5 64 KB), as Redis reads it.
    pub list_max_listpack_size: std::sync::atomic::AtomicI64,
    pub set_max_intset_entries: AtomicUsize,
    pub set_max_listpack_entries: AtomicUsize,
    pub set_max_listpack_value: AtomicUsize,
    pub zset_max_listpack_entries: AtomicUsize,
    pub zset_max_listpack_value: AtomicUsize,
    /// `stream-node-max-bytes` and `stream-node-max-entries` (0: no limit).
    pub stream_node_max_bytes: AtomicUsize,
    pub stream_node_max_entries: AtomicUsize,
    /// Strings of at least this many bytes are stored compressed
    /// (`value-compression-min-size` while `value-compression` is yes;
    /// `usize::MAX` when it is no, so a SET pays one load and compare).
    pub value_compression_min: AtomicUsize,
    /// `value-compression-level` (zstd's level).
    pub value_compression_level: std::sync::atomic::AtomicI32,
    // branch lz4code: liblz4 values coded in the background.
    /// `value-compression-codec` as `zcomp::Codec`'s tag: zstd codes at
    /// SET; lz4 stores the value plain for the background coder
    /// (`crate::zcoder`). zstd until the server says otherwise, so an
    /// engine that only sets the minimum size codes at SET.
    pub value_compression_codec: std::sync::atomic::AtomicU8,
    /// Set by the server's coder while used memory is near `maxmemory`:
    /// lz4 values are coded at SET (LZ4's fast coder), so memory stays
    /// bounded when writers outrun the coder.
    pub value_compression_inline: std::sync::atomic::AtomicBool,
    /// `value-compression-lz4-level` (LZ4 HC's level in the background).
    pub value_compression_lz4_level: std::sync::atomic::AtomicI32,
}

impl Limits {
    pub fn hash(&self) -> crate::value::HashLimits {
        crate::value::HashLimits {
            max_listpack_entries: self.hash_max_listpack_entries.load(Ordering::Relaxed),
            max_listpack_value: self.hash_max_listpack_value.load(Ordering::Relaxed),
        }
    }

    pub fn stream(&self) -> crate::value::stream::StreamLimits {
        crate::value::stream::StreamLimits {
            node_max_bytes: self.stream_node_max_bytes.load(Ordering::Relaxed),
            node_max_entries: self.stream_node_max_entries.load(Ordering::Relaxed),
        }
    }

    pub fn max_string(&self) -> usize {
        self.proto_max_bulk_len.load(Ordering::Relaxed)
    }
}

/// What `Guard::draw_random` found.
pub(crate) enum Draw {
    /// A live key.
    Live(Vec<u8>),
    /// The shard has no key left in that database.
    Empty,
    /// Only keys past their time that a read-only replica keeps for its
    /// master's DEL were drawn; the last of them.
    Hidden(Vec<u8>),
}

/// The whole keyspace: all databases, all shards.
pub struct Engine {
    shards: Box<[Padded]>,
    shard_shift: u32,
    hasher: hashbrown::DefaultHashBuilder,
    databases: usize,
    pub limits: Limits,
    /// Clients blocked on keys (maintained by the server). While zero, no
    /// write records ready keys.
    pub blocked: AtomicUsize,
    /// Where writes are recorded while the journal is on (`record`).
    pub(crate) journal: crate::record::Hook,
    /// The running snapshot, if any (`crate::snapshot`).
    pub(crate) snap: crate::snapshot::SnapState,
    /// Client-side caching's view of changed keys (`crate::tracking`).
    pub tracking: crate::tracking::Hook,
    /// Keys per hash slot, in cluster mode only (`crate::slots`).
    slot_index: std::sync::OnceLock<crate::slots::SlotIndex>,
    /// Where the disk tier's sampling walks next (`tier::Hand`).
    pub(crate) tier_hand: crate::tier::Hand,
}

/// A key and its hash, computed once per command.
#[derive(Clone, Copy)]
pub struct Key<'a> {
    pub bytes: &'a [u8],
    hash: u64,
}

impl Key<'_> {
    /// The key's table hash, for lookups that bypass `Guard` (DEBUG
    /// DIGEST-VALUE reads without expiring).
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }
}

/// Engine construction options.
pub struct Options {
    pub databases: usize,
    /// Rounded up to a power of two.
    pub shards: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            databases: 16,
            shards: 1024,
        }
    }
}

impl Engine {
    pub fn new(opts: Options) -> Engine {
        let n = opts.shards.max(1).next_power_of_two();
        let databases = opts.databases.max(1);
        let shards = (0..n)
            .map(|_| {
                Padded(
                    Mutex::new(Shard {
                        dbs: (0..databases).map(|_| Table::default()).collect(),
                        expire_cursor: vec![0; databases].into_boxed_slice(),
                        stats: ShardStats::default(),
                        watched: hashbrown::HashMap::new(),
                        snap_epoch: 0,
                    }),
                    ShardChanges::default(),
                )
            })
            .collect();
        Engine {
            shards,
            shard_shift: 64 - n.trailing_zeros(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            databases,
            limits: Limits {
                hash_max_listpack_entries: AtomicUsize::new(512),
                // Cairn's defaults (config.rs says why).
                hash_max_listpack_value: AtomicUsize::new(1024),
                proto_max_bulk_len: AtomicUsize::new(512 * 1024 * 1024),
                lfu: std::sync::atomic::AtomicBool::new(false),
                replica_expiry: std::sync::atomic::AtomicBool::new(false),
                notify: AtomicU32::new(0),
                list_max_listpack_size: std::sync::atomic::AtomicI64::new(-2),
                set_max_intset_entries: AtomicUsize::new(512),
                set_max_listpack_entries: AtomicUsize::new(128),
                set_max_listpack_value: AtomicUsize::new(64),
                zset_max_listpack_entries: AtomicUsize::new(128),
                zset_max_listpack_value: AtomicUsize::new(1024),
                stream_node_max_bytes: AtomicUsize::new(4096),
                stream_node_max_entries: AtomicUsize::new(100),
                value_compression_min: AtomicUsize::new(usize::MAX),
                value_compression_level: std::sync::atomic::AtomicI32::new(
                    crate::value::zcomp::LEVEL_DEFAULT,
                ),
                value_compression_codec: std::sync::atomic::AtomicU8::new(0),
                value_compression_inline: std::sync::atomic::AtomicBool::new(false),
                value_compression_lz4_level: std::sync::atomic::AtomicI32::new(
                    crate::value::zcomp_lz4::LEVEL_DEFAULT,
                ),
            },
            blocked: AtomicUsize::new(0),
            journal: Default::default(),
            snap: Default::default(),
            tracking: Default::default(),
            slot_index: std::sync::OnceLock::new(),
            tier_hand: crate::tier::Hand::new(n),
        }
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Starts counting database 0's keys per hash slot (cluster mode).
    /// Called at start-up, before any key is stored: keys stored earlier
    /// would never be counted.
    pub fn enable_slot_index(&self) {
        let _ = self.slot_index.set(crate::slots::SlotIndex::default());
    }

    /// The per-slot key counts, when cluster mode keeps them.
    pub fn slot_index(&self) -> Option<&crate::slots::SlotIndex> {
        self.slot_index.get()
    }

    /// A key of `db` was stored: counted in its slot (cluster mode).
    #[inline]
    pub(crate) fn slot_added(&self, db: usize, key: &[u8]) {
        if db == 0 {
            if let Some(ix) = self.slot_index.get() {
                ix.added(key);
            }
        }
    }

    /// A key of `db` was removed: uncounted from its slot (cluster mode).
    #[inline]
    pub(crate) fn slot_removed(&self, db: usize, key: &[u8]) {
        if db == 0 {
            if let Some(ix) = self.slot_index.get() {
                ix.removed(key);
            }
        }
    }

    pub fn key<'a>(&self, bytes: &'a [u8]) -> Key<'a> {
        Key {
            bytes,
            hash: self.hasher.hash_one(bytes),
        }
    }

    fn shard_of(&self, k: &Key) -> usize {
        if self.shard_shift == 64 {
            0
        } else {
            (k.hash >> self.shard_shift) as usize
        }
    }

    /// Locks the shard of one key for the command of `cx`.
    // Always inlined, so the guard is built in the caller's frame.
    #[inline(always)]
    pub fn lock<'e>(&'e self, cx: &Cx<'e>, k: &Key) -> Guard<'e> {
        let i = self.shard_of(k);
        self.guard(cx, Locks::One((i, self.take_shard(cx, i))))
    }

    /// Locks the shards of all `keys` in ascending order (deadlock-free).
    pub fn lock_keys<'e>(&'e self, cx: &Cx<'e>, keys: &[Key]) -> Guard<'e> {
        let mut idx: SmallVec<[usize; 16]> = keys.iter().map(|k| self.shard_of(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        let locks = match idx[..] {
            [i] => Locks::One((i, self.take_shard(cx, i))),
            _ => {
                // A plain loop: `collect` kept `take_shard` out of line
                // (callgrind, MSET of 10 keys: +300 instructions).
                let mut list = Vec::with_capacity(idx.len());
                for &i in &idx {
                    list.push((i, self.take_shard(cx, i)));
                }
                Locks::Many(list)
            }
        };
        self.guard(cx, locks)
    }

    /// Locks every shard, in order. For whole-database commands only.
    pub fn lock_all<'e>(&'e self, cx: &Cx<'e>) -> Guard<'e> {
        let locks = if self.shards.len() == 1 {
            Locks::One((0, self.take_shard(cx, 0)))
        } else {
            Locks::Many(
                (0..self.shards.len())
                    .map(|i| (i, self.take_shard(cx, i)))
                    .collect(),
            )
        };
        self.guard(cx, locks)
    }

    /// Locks shard `i` alone for the command of `cx`: RANDOMKEY picks a
    /// shard before it knows a key (`Guard::draw_random`).
    pub(crate) fn lock_index<'e>(&'e self, cx: &Cx<'e>, i: usize) -> Guard<'e> {
        self.guard(cx, Locks::One((i, self.take_shard(cx, i))))
    }

    /// Shard `i`: locked now, or, inside the `hold_all` of `cx`, the shard
    /// the hold already owns.
    #[inline]
    fn take_shard<'e>(&'e self, cx: &Cx<'e>, i: usize) -> ShardRef<'e> {
        match self.held(cx) {
            Some(hold) => ShardRef::Held(hold.shard(i)),
            None => ShardRef::Locked(self.lock_shard(i)),
        }
    }

    /// Locks shard `i`. Every lock of a shard goes through here so that a
    /// running snapshot sees the shard before anyone can change it (the
    /// holder may write; we cannot know yet): see `crate::snapshot`.
    pub(crate) fn lock_shard(&self, i: usize) -> MutexGuard<'_, Shard> {
        if let Some(g) = self.reclaim(i) {
            // Held since its last guard: the snapshot hook ran when it
            // was taken, and no snapshot can start while it is held.
            return g;
        }
        let mut g = self.shards[i].0.lock();
        self.snap.before_use(i, &mut g);
        g
    }

    /// `lock_shard` if shard `i` is free now.
    fn try_lock_shard(&self, i: usize) -> Option<MutexGuard<'_, Shard>> {
        if let Some(g) = self.reclaim(i) {
            return Some(g);
        }
        let mut g = self.shards[i].0.try_lock()?;
        self.snap.before_use(i, &mut g);
        Some(g)
    }

    /// The raw lock of shard `i`, without the snapshot hook: only for
    /// starting a snapshot, which must lock every shard as it is.
    pub(crate) fn lock_shard_raw(&self, i: usize) -> MutexGuard<'_, Shard> {
        if let Some(g) = self.reclaim(i) {
            return g;
        }
        self.shards[i].0.lock()
    }

    /// Before this thread locks shard `i`: the lock it kept after its last
    /// guard (`retain_locks`) if that is shard `i` of this engine;
    /// otherwise that kept lock is released first, so a thread never holds
    /// a shard it did not ask for and shards are still taken in ascending
    /// order.
    #[inline]
    fn reclaim(&self, i: usize) -> Option<MutexGuard<'_, Shard>> {
        let (engine, j) = RETAINED.with(Cell::get)?;
        if std::ptr::eq(engine, self) && j == i {
            RETAINED.with(|r| r.set(None));
            // SAFETY: this thread locked shard `i` and leaked its guard
            // (`Guard::drop`); nothing unlocked it since.
            return Some(unsafe { self.shards[i].0.make_guard_unchecked() });
        }
        release_retained();
        None
    }

    /// Keys changed since start, all shards together: one per key a write
    /// changed (`Guard::modified`), Redis's `server.dirty` in all but
    /// detail. Monotonic; callers keep their own baseline.
    pub fn changes(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.1 .0.load(Ordering::Relaxed))
            .sum()
    }

    /// True if `cx` holds shards of this engine (`hold_all`, `hold_shards`).
    pub(crate) fn holds_any(&self, cx: &Cx) -> bool {
        self.held(cx).is_some()
    }

    /// The hold `cx` carries, if it holds shards of this engine.
    #[inline]
    fn held<'e>(&self, cx: &Cx<'e>) -> Option<&'e Hold<'e>> {
        let hold = cx.hold()?;
        std::ptr::eq(hold.engine, self).then_some(hold)
    }

    /// A guard over shards already locked in ascending order, with the
    /// command's clock.
    #[inline(always)]
    fn guard<'e>(&'e self, cx: &Cx<'e>, locks: Locks<'e>) -> Guard<'e> {
        let now = if self.journal.loading.load(Ordering::Relaxed) {
            0
        } else {
            cx.now_ms()
        };
        Guard {
            engine: self,
            cx: *cx,
            locks,
            now,
            wrote: false,
            expired: false,
        }
    }

    /// Runs `f` on each shard in turn, holding only that shard's lock.
    /// For reads that need no cross-shard atomicity (KEYS, DBSIZE, INFO).
    pub fn for_each_shard(&self, cx: &Cx, mut f: impl FnMut(usize, &mut Shard)) {
        for i in 0..self.shards.len() {
            f(i, &mut self.take_shard(cx, i));
        }
    }

    /// Runs `f` on one shard under its lock.
    pub fn with_shard<R>(&self, cx: &Cx, i: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        f(&mut self.take_shard(cx, i))
    }

    /// `for_each_shard` for reads only (INFO, DBSIZE, KEYS, SCAN): `f`
    /// cannot change the shard, so a running snapshot need not serialize
    /// it first (see `crate::snapshot`), and a whole-keyspace read during
    /// a BGSAVE costs no extra memory.
    pub fn for_each_shard_read(&self, cx: &Cx, mut f: impl FnMut(usize, &Shard)) {
        for i in 0..self.shards.len() {
            self.with_shard_read(cx, i, |s| f(i, s));
        }
    }

    /// `with_shard` for reads only; see `for_each_shard_read`.
    pub fn with_shard_read<R>(&self, cx: &Cx, i: usize, f: impl FnOnce(&Shard) -> R) -> R {
        match self.held(cx) {
            Some(hold) => f(&ShardRef::Held(hold.shard(i))),
            None => f(&self.lock_shard_raw(i)),
        }
    }

    /// Locks every shard and keeps them locked until the returned hold is
    /// dropped. Meanwhile every lock asked with a context carrying the hold
    /// (`Cx::with_hold`) is served from it instead of the mutexes, so a
    /// sequence of ordinary commands runs as one atomic step (EXEC): no
    /// other thread sees anything between them. The records of the writes
    /// made through it are committed as one unit when it drops, and their
    /// end is noted in `cx`'s state. Holds do not nest.
    pub fn hold_all<'e>(&'e self, cx: &Cx<'e>) -> Hold<'e> {
        assert!(self.held(cx).is_none(), "holds do not nest");
        let mut locks: Vec<MutexGuard<'_, Shard>> =
            (0..self.shards.len()).map(|i| self.lock_shard(i)).collect();
        let ptrs: Box<[*mut Shard]> = locks.iter_mut().map(|g| &mut **g as *mut Shard).collect();
        Hold {
            engine: self,
            set: HeldSet::All {
                _locks: locks,
                ptrs,
            },
            tx: Default::default(),
            state: cx.state(),
        }
    }

    /// Locks the shards of `keys` (in ascending order) and keeps them until
    /// the returned hold drops: `hold_all` for a command that names its
    /// keys up front (a script's declared KEYS), at the cost of those
    /// shards instead of all 1024. A lock outside the set through a context
    /// carrying the hold takes the shard into the hold (`Hold::add` first
    /// if it must not wait: see there). Records commit as one unit, as for
    /// `hold_all`.
    pub fn hold_keys<'e>(&'e self, cx: &Cx<'e>, keys: &[Key]) -> Hold<'e> {
        assert!(self.held(cx).is_none(), "holds do not nest");
        let mut idx: SmallVec<[usize; 8]> = keys.iter().map(|k| self.shard_of(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        let locks = idx
            .into_iter()
            .map(|i| (i, leak(self.lock_shard(i))))
            .collect();
        Hold {
            engine: self,
            set: HeldSet::Some(std::cell::RefCell::new(locks)),
            tx: Default::default(),
            state: cx.state(),
        }
    }

    /// The shard index of `k` (for `Hold::add`).
    pub fn shard_index(&self, k: &Key) -> usize {
        self.shard_of(k)
    }

    /// A new key holding the plain string `value`: compressed when
    /// `value-compression` is on and the value is long enough and shrinks
    /// (`value::zcomp`), else `Owned::string`. The dictionary domain is the
    /// top bits of the key's hash: a fixed group of shards.
    fn string_owned(&self, k: &Key, value: &[u8], raw: bool, meta: Meta) -> Owned {
        if value.len() >= self.limits.value_compression_min.load(Ordering::Relaxed)
            && crate::compact::fits(k.bytes.len(), value.len())
        {
            if let Some(o) = self.coded_owned(k, value, raw, meta) {
                return o;
            }
        }
        Owned::string(k.bytes, value, raw, meta)
    }

    #[cold]
    fn coded_owned(&self, k: &Key, value: &[u8], raw: bool, meta: Meta) -> Option<Owned> {
        use crate::value::zcomp::{self, Codec};
        let lz4 = self.limits.value_compression_codec.load(Ordering::Relaxed) == Codec::Lz4 as u8;
        if lz4 && !self.limits.value_compression_inline.load(Ordering::Relaxed) {
            // Plain now, coded by the background coder once idle.
            let b = crate::compact::Block::new_pending(k.bytes, value, raw, meta);
            return Some(Owned::Compact(b));
        }
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let domain = zcomp::domain_of(k.hash);
        let (codec, level) = if lz4 {
            (Codec::Lz4, 0)
        } else {
            let level = self.limits.value_compression_level.load(Ordering::Relaxed);
            (Codec::Zstd, level)
        };
        BUF.with(|b| {
            let mut b = b.borrow_mut();
            zcomp::compress_with(codec, domain, value, level, &mut b)
                .then(|| Owned::Compact(crate::compact::Block::new_coded(k.bytes, &b, meta)))
        })
    }
}

// Lock retention is the one piece of keyspace state kept per thread: it
// belongs to the worker thread, not to a command (a kept lock spans many
// commands of many connections), and every lock taken on that thread, by
// whatever path, must see it or the thread would deadlock on its own kept
// lock. A command's own locks and its EXEC hold travel in its `Cx`.
thread_local! {
    /// This thread keeps a single-shard guard's lock after the guard drops
    /// (`retain_locks`).
    static RETAIN: Cell<bool> = const { Cell::new(false) };
    /// The shard lock this thread kept: (engine, shard index).
    static RETAINED: Cell<Option<(*const Engine, usize)>> = const { Cell::new(None) };
}

/// Lock retention for the calling thread (a server worker). While on, a
/// guard over one shard does not unlock it when it drops: the lock stays
/// with the thread until it locks another shard (`Engine::reclaim`) or
/// calls [`release_retained`]. A run of commands on one hot key (a
/// pipeline, or one request from each of many connections in one loop
/// turn) then takes the lock once instead of once per command, and two
/// workers on one hot key hand the lock (and the key's cache lines) over
/// once per run instead of once per command: with redis-benchmark's
/// single-key tests at -P 16, two workers spent twice the CPU per ZADD of
/// one. The caller must call `release_retained` before anything that
/// waits for another thread (which might need the shard) and at the end
/// of each loop turn, so a lock is kept for at most one turn; the engine
/// must outlive the kept lock.
pub fn retain_locks(on: bool) {
    RETAIN.with(|r| r.set(on));
    if !on {
        release_retained();
    }
}

/// Unlocks the shard this thread kept, if any (see [`retain_locks`]).
#[inline]
pub fn release_retained() {
    if let Some((engine, i)) = RETAINED.with(|r| r.take()) {
        // SAFETY: the engine outlives the kept lock (`retain_locks`'s
        // contract), and this thread locked the shard and leaked its guard.
        unsafe { (*engine).shards[i].0.force_unlock() };
    }
}

/// Shards of an engine locked by one command for its whole run (see
/// `Engine::hold_all` and `Engine::hold_keys`).
pub struct Hold<'e> {
    engine: &'e Engine,
    set: HeldSet<'e>,
    /// The records of the writes made through the hold, committed as one
    /// unit when it drops (`record::commit_tx`).
    pub(crate) tx: std::cell::RefCell<Vec<u8>>,
    /// Where the unit's end in the journal is noted.
    state: Option<&'e CmdState>,
}

/// The shards a hold owns.
enum HeldSet<'e> {
    /// Every shard (EXEC, a script that names keys it did not declare).
    All {
        _locks: Vec<MutexGuard<'e, Shard>>,
        ptrs: Box<[*mut Shard]>,
    },
    /// Some shards, sorted by index (a script's declared keys, plus any it
    /// took later), each locked with its guard leaked (`leak`) and
    /// unlocked when the hold drops: a `RefCell` of guards would make the
    /// hold, and so every `Cx`, invariant in its lifetime.
    Some(std::cell::RefCell<SmallVec<[(usize, *mut Shard); 4]>>),
}

/// Why `Hold::add` could not take a shard.
#[derive(Debug, PartialEq, Eq)]
pub struct WouldWait;

impl<'e> Hold<'e> {
    /// True if the hold owns every shard.
    pub fn is_all(&self) -> bool {
        matches!(self.set, HeldSet::All { .. })
    }

    /// True if the hold owns shard `i`.
    pub fn has(&self, i: usize) -> bool {
        match &self.set {
            HeldSet::All { .. } => true,
            HeldSet::Some(set) => set.borrow().iter().any(|(j, _)| *j == i),
        }
    }

    /// Takes shard `i` into the hold without risking a deadlock: a shard
    /// above every one held is waited for (every thread locks in
    /// ascending order, so no cycle can form); one below is taken only if
    /// it is free now. `WouldWait` if it is not: the caller decides (a
    /// script that has written nothing starts again under `hold_all`).
    pub fn add(&self, i: usize) -> Result<(), WouldWait> {
        let HeldSet::Some(set) = &self.set else {
            return Ok(());
        };
        let mut set = set.borrow_mut();
        let pos = match set.binary_search_by_key(&i, |(j, _)| *j) {
            Ok(_) => return Ok(()),
            Err(pos) => pos,
        };
        let guard = if pos == set.len() {
            self.engine.lock_shard(i)
        } else {
            self.engine.try_lock_shard(i).ok_or(WouldWait)?
        };
        set.insert(pos, (i, leak(guard)));
        Ok(())
    }

    /// The held shard `i`. A shard outside a partial hold is taken into it
    /// first, waiting if it must: callers that cannot know their shards in
    /// advance use `hold_all`, and a script checks each call's keys with
    /// `add` before running it, so this wait happens only for a shard
    /// above all others.
    #[inline]
    fn shard(&self, i: usize) -> *mut Shard {
        match &self.set {
            HeldSet::All { ptrs, .. } => ptrs[i],
            HeldSet::Some(set) => {
                let mut set = set.borrow_mut();
                match set.binary_search_by_key(&i, |(j, _)| *j) {
                    Ok(pos) => set[pos].1,
                    Err(pos) => {
                        debug_assert!(
                            pos == set.len(),
                            "a partial hold took shard {i} out of order without Hold::add"
                        );
                        let p = leak(self.engine.lock_shard(i));
                        set.insert(pos, (i, p));
                        p
                    }
                }
            }
        }
    }
}

/// A locked shard whose guard is given up: `Hold`'s drop unlocks it.
fn leak(g: MutexGuard<'_, Shard>) -> *mut Shard {
    MutexGuard::leak(g) as *mut Shard
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        // The transaction's records go out as one unit while every shard
        // is still locked (the locks drop after this body).
        if self.engine.journal.on() {
            let end = crate::record::commit_tx(self.engine, self.tx.get_mut());
            if let Some(s) = self.state {
                s.note_journal_end(end);
            }
        }
        if let HeldSet::Some(set) = &self.set {
            for &(i, _) in set.borrow().iter() {
                // SAFETY: the hold locked shard `i` and leaked its guard
                // (`leak`); nothing borrows the shard once the hold drops.
                unsafe { self.engine.shards[i].0.force_unlock() };
            }
        }
    }
}

/// A shard as a guard has it: locked by the guard, or borrowed from its
/// command's `Hold`. Two guards of one thread never share a shard (with
/// real locks that would deadlock), so a held shard is never aliased.
enum ShardRef<'e> {
    Locked(MutexGuard<'e, Shard>),
    Held(*mut Shard),
}

impl std::ops::Deref for ShardRef<'_> {
    type Target = Shard;
    fn deref(&self) -> &Shard {
        match self {
            ShardRef::Locked(g) => g,
            // SAFETY: see the type's comment; the hold outlives the guard.
            ShardRef::Held(p) => unsafe { &**p },
        }
    }
}

impl std::ops::DerefMut for ShardRef<'_> {
    fn deref_mut(&mut self) -> &mut Shard {
        match self {
            ShardRef::Locked(g) => g,
            // SAFETY: as for `deref`.
            ShardRef::Held(p) => unsafe { &mut **p },
        }
    }
}

impl Shard {
    pub fn db(&self, db: usize) -> &Table {
        &self.dbs[db]
    }

    pub fn db_mut(&mut self, db: usize) -> &mut Table {
        &mut self.dbs[db]
    }

    /// Number of databases (one table each).
    pub fn databases(&self) -> usize {
        self.dbs.len()
    }

    /// Flags every client watching `key` in `db` (Redis `touchWatchedKey`).
    pub fn touch_watched(&self, db: usize, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(ws) = self.watched.get(key) {
            for (d, flag) in ws {
                if *d == db {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Flags the watchers of every watched key of `db` that exists now in
    /// `db` or, for SWAPDB, in `other` (Redis `touchAllWatchedKeysInDb`):
    /// a FLUSHDB of keys nobody had does not fail their EXEC.
    pub fn touch_watched_db(
        &self,
        db: usize,
        other: Option<usize>,
        hash: impl Fn(&[u8]) -> u64,
        now: u64,
    ) {
        for (key, ws) in &self.watched {
            let h = hash(key);
            let live = |d: usize| {
                let t = &self.dbs[d];
                t.find(h, key).is_some_and(|i| !t.at(i).is_expired(now))
            };
            for (d, flag) in ws {
                if *d == db && (live(db) || other.is_some_and(live)) {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// How a write treats the key's existing expire time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Keep whatever TTL the key had (SET KEEPTTL, SETRANGE, APPEND, ...).
    Keep,
    /// No TTL after the write (plain SET).
    Clear,
    /// Expire at this Unix millisecond.
    At(u64),
}

/// The expire time a write leaves on a key that had `old` (0: none):
/// None when it stays as it is.
fn new_expiry(expiry: Expiry, old: u64) -> Option<u64> {
    match expiry {
        Expiry::Keep => None,
        Expiry::Clear => (old != 0).then_some(0),
        Expiry::At(t) => Some(t),
    }
}

/// The shards a guard has, each with its index.
///
/// Small on purpose: a guard is moved out of `Engine::lock` and into
/// `drop`, and Rust moves a value by copying all of it. With the list
/// inline (room for 16: 392 bytes, a 464-byte guard) each move was a
/// `memcpy` call of ~70 instructions, three per single-key command; now
/// the guard is ~100 bytes and moves by a few register copies. A
/// multi-shard list lives on the heap: one allocation per multi-shard
/// command (MSET of 10 keys; design.md "The guard of a single-key
/// command" has the counts).
enum Locks<'e> {
    /// One shard: every single-key command, and multi-key commands whose
    /// keys share a shard.
    One((usize, ShardRef<'e>)),
    /// Two or more shards (or none), by ascending index.
    Many(Vec<(usize, ShardRef<'e>)>),
}

impl<'e> Locks<'e> {
    fn as_mut_slice(&mut self) -> &mut [(usize, ShardRef<'e>)] {
        match self {
            Locks::One(one) => std::slice::from_mut(one),
            Locks::Many(list) => list,
        }
    }
}

/// Exclusive access to the shards of the keys a command named.
pub struct Guard<'e> {
    engine: &'e Engine,
    /// The command this guard works for: its records, events and hold.
    cx: Cx<'e>,
    locks: Locks<'e>,
    /// The command's notion of "now", fixed for its whole run as Redis does.
    pub now: u64,
    /// Something changed through this guard (Redis's dirty counter): its
    /// command is journaled when the guard drops.
    wrote: bool,
    /// A lookup removed an expired key: a `DEL` is journaled.
    expired: bool,
}

impl Drop for Guard<'_> {
    /// Commits the journal records of what this guard did while its locks
    /// are still held (the shard guards drop after this body), so records
    /// of one key are in the order the writes took effect.
    fn drop(&mut self) {
        if self.engine.journal.on() {
            if self.wrote || self.expired {
                crate::record::commit(self.engine, &self.cx, self.wrote);
            } else {
                crate::record::discard(&self.cx);
            }
        }
        // Keep a single shard's lock for the thread's next command
        // (`retain_locks`), after the records above went out under it.
        if matches!(self.locks, Locks::One((_, ShardRef::Locked(_))))
            && RETAIN.with(Cell::get)
            && RETAINED.with(Cell::get).is_none()
        {
            let locks = std::mem::replace(&mut self.locks, Locks::Many(Vec::new()));
            if let Locks::One((i, ShardRef::Locked(g))) = locks {
                MutexGuard::leak(g);
                RETAINED.with(|r| r.set(Some((self.engine as *const Engine, i))));
            }
        }
    }
}

impl<'e> Guard<'e> {
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// The context of the command this guard works for.
    pub fn cx(&self) -> Cx<'e> {
        self.cx
    }

    pub fn key<'a>(&self, bytes: &'a [u8]) -> Key<'a> {
        self.engine.key(bytes)
    }

    fn shard(&mut self, k: &Key) -> &mut Shard {
        let i = self.engine.shard_of(k);
        let list = self.locks.as_mut_slice();
        let pos = list
            .iter()
            .position(|(j, _)| *j == i)
            .expect("a command may only touch keys it locked");
        &mut list[pos].1
    }

    /// Every locked shard, for whole-database commands.
    pub fn shards_mut(&mut self) -> impl Iterator<Item = &mut Shard> + use<'_, 'e> {
        self.locks.as_mut_slice().iter_mut().map(|(_, g)| &mut **g)
    }

    /// Slot of a live key, removing it first if it has expired (on a
    /// read-only replica: hiding it, `Limits::replica_expiry`).
    fn live_slot(&mut self, db: usize, k: &Key) -> Option<usize> {
        let now = self.now;
        let engine = self.engine;
        let shard = self.shard(k);
        let table = &mut shard.dbs[db];
        let i = table.find(k.hash, k.bytes)?;
        if table.at(i).is_expired(now) {
            if engine.limits.replica_expiry.load(Ordering::Relaxed) {
                return self.cx.is_master_command().then_some(i);
            }
            drop(table.remove_at(i));
            engine.slot_removed(db, k.bytes);
            shard.stats.expired_keys += 1;
            shard.touch_watched(db, k.bytes);
            // The reading command's context, so a BCAST prefix's message
            // goes out after it.
            self.engine.tracking.expired(k.bytes, &self.cx);
            if crate::record::expired(self.engine, &self.cx, db, k.bytes) {
                self.expired = true;
            }
            self.notify(crate::events::class::EXPIRED, "expired", db, k);
            return None;
        }
        Some(i)
    }

    /// RANDOMKEY's draw from the guard's one shard (`Engine::lock_index`):
    /// a key chosen uniformly, the keys past their time met on the way
    /// removed as any lookup removes them (DEL recorded, WATCH, tracking
    /// and `expired` told), as Redis's `dbRandomKey` does through
    /// `expireIfNeeded`. A read-only replica only hides them: after `tries`
    /// such draws it stops with `Draw::Hidden`.
    pub(crate) fn draw_random(&mut self, db: usize, mut tries: u32) -> Draw {
        loop {
            let (key, expired) = {
                let t = self.locks.as_mut_slice()[0].1.db(db);
                let Some(slot) = t.random_slot(rand::random::<u64>) else {
                    return Draw::Empty;
                };
                let e = t.at(slot);
                (e.key().to_vec(), e.is_expired(self.now))
            };
            if !expired {
                return Draw::Live(key);
            }
            let k = self.engine.key(&key);
            if self.live_slot(db, &k).is_some() {
                // A replica applying its master's command: live to it.
                return Draw::Live(key);
            }
            if self.engine.limits.replica_expiry.load(Ordering::Relaxed) {
                tries = tries.saturating_sub(1);
                if tries == 0 {
                    return Draw::Hidden(key);
                }
            }
        }
    }

    /// Records a keyspace notification (Redis `notifyKeyspaceEvent`) if
    /// `notify-keyspace-events` enables its class.
    pub fn notify(&self, class: u32, event: &'static str, db: usize, k: &Key) {
        let on = self.engine.limits.notify.load(Ordering::Relaxed);
        if on & class != 0 {
            self.cx.push_event(crate::events::Event::Notify {
                class,
                event,
                db,
                key: k.bytes.into(),
            });
        }
    }

    /// Tells WATCH that the key changed (Redis `signalModifiedKey`). Every
    /// write that changes a key through an entry borrowed from `write` or
    /// `peek` must call it; `set`, `set_entry`, `remove` and `set_expire`
    /// call it themselves.
    pub fn modified(&mut self, db: usize, k: &Key) {
        self.wrote = true;
        let c = &self.engine.shards[self.engine.shard_of(k)].1 .0;
        // Only the lock holder writes this counter: no atomic add needed.
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        self.shard(k).touch_watched(db, k.bytes);
        // Redis's signalModifiedKey: WATCH, then client-side caching.
        self.engine.tracking.key(k.bytes, &self.cx);
    }

    /// Starts watching `k` in `db` for the client owning `flag`.
    pub fn watch(&mut self, db: usize, k: &Key, flag: &WatchFlag) {
        let list = self.shard(k).watched.entry(k.bytes.into()).or_default();
        if !list.iter().any(|(d, f)| *d == db && Arc::ptr_eq(f, flag)) {
            list.push((db, flag.clone()));
        }
    }

    /// Stops the watch `watch` started.
    pub fn unwatch(&mut self, db: usize, k: &Key, flag: &WatchFlag) {
        let shard = self.shard(k);
        if let Some(list) = shard.watched.get_mut(k.bytes) {
            list.retain(|(d, f)| !(*d == db && Arc::ptr_eq(f, flag)));
            if list.is_empty() {
                shard.watched.remove(k.bytes);
            }
        }
    }

    /// Flags the watchers of keys of `db` that exist now (in `db`, or in
    /// `other` for SWAPDB). Needs every shard locked (`lock_all`).
    pub fn modified_db(&mut self, db: usize, other: Option<usize>) {
        self.wrote = true;
        let engine = self.engine;
        let now = self.now;
        for s in self.shards_mut() {
            if !s.watched.is_empty() {
                s.touch_watched_db(db, other, |key| engine.hasher.hash_one(key), now);
            }
        }
    }

    /// Records a write that changes no key's value as clients see it
    /// (a consumer group's PEL: Redis bumps `server.dirty` without
    /// `signalModifiedKey`), so the journal records the command while
    /// WATCH is not told.
    pub fn dirty(&mut self) {
        self.wrote = true;
    }

    /// Wakes clients blocked on `k` (a stream grew, or a group they read
    /// through went away): Redis's `signalKeyAsReady` for streams, which
    /// unlike lists is raised on every XADD, not only on creation.
    pub fn key_ready(&self, db: usize, k: &Key) {
        if self.engine.blocked.load(Ordering::Relaxed) > 0 {
            self.cx.push_event(crate::events::Event::Ready {
                db,
                key: k.bytes.into(),
            });
        }
    }

    /// Wakes clients blocked on `k` if it now holds a list, sorted set or
    /// stream.
    fn signal_ready(&self, db: usize, k: &Key, v: &Value) {
        if matches!(v, Value::List(_) | Value::ZSet(_) | Value::Stream(_))
            && self.engine.blocked.load(Ordering::Relaxed) > 0
        {
            self.cx.push_event(crate::events::Event::Ready {
                db,
                key: k.bytes.into(),
            });
        }
    }

    /// A read lookup: counts a keyspace hit or miss and records the access.
    pub fn read(&mut self, db: usize, k: &Key) -> Option<&mut Entry> {
        let found = self.live_slot(db, k);
        let lfu = self.engine.limits.lfu.load(Ordering::Relaxed);
        if found.is_none() {
            // Redis's `keymiss` goes with every read miss it counts.
            self.notify(crate::events::class::KEY_MISS, "keymiss", db, k);
        }
        let shard = self.shard(k);
        match found {
            Some(i) => {
                shard.stats.keyspace_hits += 1;
                let e = shard.dbs[db].at_mut(i);
                e.touch(lfu);
                Some(e)
            }
            None => {
                shard.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// `read` without materializing a compact string: the key borrowed in
    /// whichever form it is stored (GET, MGET, STRLEN, GETRANGE, ...).
    pub fn read_ref(&mut self, db: usize, k: &Key) -> Option<Ref<'_>> {
        let found = self.live_slot(db, k);
        let lfu = self.engine.limits.lfu.load(Ordering::Relaxed);
        if found.is_none() {
            self.notify(crate::events::class::KEY_MISS, "keymiss", db, k);
        }
        let shard = self.shard(k);
        match found {
            Some(i) => {
                shard.stats.keyspace_hits += 1;
                let t = &mut shard.dbs[db];
                t.meta_mut(i).touch(lfu);
                Some(t.at(i))
            }
            None => {
                shard.stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// Before a multi-key read looks `keys` up one at a time: brings each
    /// key's table header, home slot and entry toward the cache in three
    /// passes, so that their cache misses overlap instead of coming one
    /// after another (three dependent misses a key in a large keyspace:
    /// 16% of the server's cycles in E4's MGET x 32 under perf, branch
    /// tierr). Valkey 8 prefetches a batch's entries the same way. Reads
    /// nothing a lookup would not, changes nothing.
    pub fn prefetch(&mut self, db: usize, keys: &[Key]) {
        if keys.len() < 2 {
            return;
        }
        for k in keys {
            let t: *const Table = &self.shard(k).dbs[db];
            crate::table::prefetch(t.cast());
        }
        for k in keys {
            self.shard(k).dbs[db].prefetch_home(k.hash);
        }
        for k in keys {
            self.shard(k).dbs[db].prefetch_entry(k.hash);
        }
    }

    /// `peek` without materializing (TYPE, TTL, OBJECT, MEMORY USAGE, ...).
    pub fn peek_ref(&mut self, db: usize, k: &Key) -> Option<Ref<'_>> {
        let i = self.live_slot(db, k)?;
        Some(self.shard(k).dbs[db].at(i))
    }

    /// `write` without materializing: records the access and returns the
    /// key's metadata (EXPIRE, PERSIST, RENAME and MOVE's existence check).
    pub fn write_meta(&mut self, db: usize, k: &Key) -> Option<&mut Meta> {
        let i = self.live_slot(db, k)?;
        let lfu = self.engine.limits.lfu.load(Ordering::Relaxed);
        let m = self.shard(k).dbs[db].meta_mut(i);
        m.touch(lfu);
        Some(m)
    }

    /// A lookup for a write or a metadata query: no hit/miss counting and no
    /// access recorded (Redis's LOOKUP_NOTOUCH for TYPE, TTL, OBJECT, ...).
    pub fn peek(&mut self, db: usize, k: &Key) -> Option<&mut Entry> {
        let i = self.live_slot(db, k)?;
        Some(self.shard(k).dbs[db].at_mut(i))
    }

    /// A lookup for a write: records the access (writes count as use).
    pub fn write(&mut self, db: usize, k: &Key) -> Option<&mut Entry> {
        let i = self.live_slot(db, k)?;
        let lfu = self.engine.limits.lfu.load(Ordering::Relaxed);
        let e = self.shard(k).dbs[db].at_mut(i);
        e.touch(lfu);
        Some(e)
    }

    pub fn exists(&mut self, db: usize, k: &Key) -> bool {
        self.live_slot(db, k).is_some()
    }

    /// The key as stored, past its time or not, left where it is: DEBUG
    /// OBJECT (Redis's reads the dict directly, with no expiry check).
    pub fn peek_stored(&mut self, db: usize, k: &Key) -> Option<&mut Entry> {
        let table = &mut self.shard(k).dbs[db];
        let i = table.find(k.hash, k.bytes)?;
        Some(table.at_mut(i))
    }

    /// Stores `value` under the key, replacing any old value, and returns
    /// the old value so the caller can drop a large one after unlocking.
    /// Overwriting reuses the entry and its key (as Redis's `dbOverwrite`
    /// reuses the dict entry): only the value changes hands, the LRU time
    /// restarts and the LFU counter is kept. A small plain string is
    /// stored as a compact block (`crate::compact`) instead.
    pub fn set(&mut self, db: usize, k: &Key, value: Value, expiry: Expiry) -> Option<Value> {
        if let Value::Str(StrValue::Bytes { data, raw }) = &value {
            if crate::compact::fits(k.bytes.len(), data.len()) {
                return self
                    .set_compact(db, k, data, *raw, expiry)
                    .map(Owned::into_value);
            }
        }
        let found = self.live_slot(db, k);
        self.signal_ready(db, k, &value);
        if let Some(i) = found {
            if self.engine.blocked.load(Ordering::Relaxed) > 0 {
                let old = self.shard(k).dbs[db].at(i);
                if matches!(old.value(), Some(Value::Stream(_))) {
                    self.key_ready(db, k);
                }
            }
        }
        self.modified(db, k);
        let table = &mut self.shard(k).dbs[db];
        match found {
            Some(i) if table.at(i).is_compact() => {
                // A block cannot hold another kind of value: a new entry
                // with the block's metadata takes its place.
                let mut meta = *table.at(i).meta();
                meta.restart_access();
                if let Some(at) = new_expiry(expiry, meta.expire_at()) {
                    meta.set_expire_at_raw(at);
                }
                let e = Entry::with_meta(k.bytes, value, meta);
                Some(table.replace_at(i, e).into_value())
            }
            Some(i) => {
                let e = table.at_mut(i);
                let old = std::mem::replace(&mut e.value, value);
                e.restart_access();
                match expiry {
                    Expiry::Keep => {}
                    Expiry::Clear => table.set_expire_at(i, 0),
                    Expiry::At(t) => table.set_expire_at(i, t),
                }
                Some(old)
            }
            None => {
                let at = match expiry {
                    Expiry::Keep | Expiry::Clear => 0,
                    Expiry::At(t) => t,
                };
                table.insert_new(k.hash, Entry::new(k.bytes, value, at));
                self.engine.slot_added(db, k.bytes);
                self.notify(crate::events::class::NEW, "new", db, k);
                None
            }
        }
    }

    /// Stores the plain string `value` (not an integer text: the caller
    /// checked `num::should_store_as_int`) as SET does, as a compact block
    /// when it fits, without building a `StrValue` first: one allocation
    /// for a new key. The same semantics as `set` (LFU counter kept, LRU
    /// restarted, `expiry` applied, WATCH and `new` notified). Returns the
    /// old key, for the caller to drop (after unlocking, if it likes).
    pub fn set_compact(
        &mut self,
        db: usize,
        k: &Key,
        value: &[u8],
        raw: bool,
        expiry: Expiry,
    ) -> Option<Owned> {
        let found = self.live_slot(db, k);
        self.modified(db, k);
        match found {
            Some(i) => {
                // A string over a stream: its XREADGROUP waiters are told
                // (Redis's `dbOverwrite` signals the deleted stream).
                if self.engine.blocked.load(Ordering::Relaxed) > 0 {
                    let old = self.shard(k).dbs[db].at(i);
                    if matches!(old.value(), Some(Value::Stream(_))) {
                        self.key_ready(db, k);
                    }
                }
                let mut meta = *self.shard(k).dbs[db].at(i).meta();
                meta.restart_access();
                if let Some(at) = new_expiry(expiry, meta.expire_at()) {
                    meta.set_expire_at_raw(at);
                }
                let new = self.engine.string_owned(k, value, raw, meta);
                let table = &mut self.shard(k).dbs[db];
                Some(table.replace_at(i, new))
            }
            None => {
                let at = new_expiry(expiry, 0).unwrap_or(0);
                let new = self.engine.string_owned(k, value, raw, Meta::new(at));
                let table = &mut self.shard(k).dbs[db];
                table.insert_new(k.hash, new);
                self.engine.slot_added(db, k.bytes);
                self.notify(crate::events::class::NEW, "new", db, k);
                None
            }
        }
    }

    /// Inserts a whole key (MOVE, COPY, RENAME keep metadata this way).
    pub fn set_entry(&mut self, db: usize, k: &Key, entry: impl Into<Owned>) -> Option<Owned> {
        let entry = entry.into();
        debug_assert_eq!(entry.key(), k.bytes);
        let found = self.live_slot(db, k);
        if let Some(v) = entry.as_ref().value() {
            self.signal_ready(db, k, v);
        }
        self.modified(db, k);
        let table = &mut self.shard(k).dbs[db];
        match found {
            Some(i) => {
                let old = table.replace_at(i, entry);
                self.stream_gone(db, k, old.as_ref().value());
                Some(old)
            }
            None => {
                table.insert_new(k.hash, entry);
                self.engine.slot_added(db, k.bytes);
                self.notify(crate::events::class::NEW, "new", db, k);
                None
            }
        }
    }

    /// Removes the key; None if it did not exist (or had just expired).
    pub fn remove(&mut self, db: usize, k: &Key) -> Option<Owned> {
        let i = self.live_slot(db, k)?;
        self.modified(db, k);
        let old = self.shard(k).dbs[db].remove_at(i);
        self.engine.slot_removed(db, k.bytes);
        self.stream_gone(db, k, old.as_ref().value());
        Some(old)
    }

    /// A stream was deleted or overwritten: its XREADGROUP waiters must
    /// be told (Redis `signalDeletedKeyAsReady`).
    fn stream_gone(&self, db: usize, k: &Key, old: Option<&Value>) {
        if matches!(old, Some(Value::Stream(_))) {
            self.key_ready(db, k);
        }
    }

    /// Sets (or with 0 clears) the expire time of an existing key.
    pub fn set_expire(&mut self, db: usize, k: &Key, at_ms: u64) -> bool {
        match self.live_slot(db, k) {
            Some(i) => {
                self.modified(db, k);
                self.shard(k).dbs[db].set_expire_at(i, at_ms);
                true
            }
            None => false,
        }
    }

    /// Moves a key to a new name in `to_db`, keeping value, TTL and access
    /// metadata, replacing whatever `to` held. The caller locked both keys.
    /// Returns false if `from` does not exist.
    pub fn rename_entry(&mut self, from_db: usize, from: &Key, to_db: usize, to: &Key) -> bool {
        // A value in the disk tier is read while the key is still in its
        // slot: a failed read fails the command (it panics) and leaves
        // the key where it was, which it could not once the block is out
        // of the table. (The pointer cannot move with the key: its record
        // names the old key, which reads and compaction check.)
        let plain =
            self.live_slot(from_db, from)
                .and_then(|i| match self.shard(from).dbs[from_db].at(i) {
                    Ref::Compact(c) if c.is_tiered() && c.key() != to.bytes => Some(c.plain_vec()),
                    _ => None,
                });
        let Some(old) = self.remove(from_db, from) else {
            return false;
        };
        let new = match plain {
            Some(v) => old.rekey_read(to.bytes, &v),
            None => old.rekey(to.bytes),
        };
        drop(self.set_entry(to_db, to, new));
        true
    }

    /// Counts for an expired key found by a caller-side check.
    pub fn stats_mut(&mut self, k: &Key) -> &mut ShardStats {
        &mut self.shard(k).stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::StrValue;

    fn shard_locked(e: &Engine, k: &Key) -> bool {
        e.shards[e.shard_of(k)].0.try_lock().is_none()
    }

    #[test]
    fn a_partial_hold_serves_its_shards_and_takes_others_without_deadlock() {
        let e = Arc::new(Engine::new(Options::default()));
        // Three keys in three shards, sorted by shard.
        let mut keys: Vec<(usize, Vec<u8>)> = Vec::new();
        for n in 0.. {
            let k = format!("hold:{n}").into_bytes();
            let i = e.shard_of(&e.key(&k));
            if keys.iter().all(|(j, _)| *j != i) {
                keys.push((i, k));
            }
            if keys.len() == 3 {
                break;
            }
        }
        keys.sort();
        let [(_, lo), (mid_i, mid), (_, hi)] = [keys[0].clone(), keys[1].clone(), keys[2].clone()];
        let (klo, kmid, khi) = (e.key(&lo), e.key(&mid), e.key(&hi));
        {
            let hold = e.hold_keys(&Cx::DETACHED, &[kmid]);
            let cx = Cx::DETACHED.with_hold(&hold);
            assert!(shard_locked(&e, &kmid) && hold.has(mid_i) && !hold.is_all());
            e.lock(&cx, &kmid).set(
                0,
                &kmid,
                Value::Str(StrValue::from_bytes(b"v")),
                Expiry::Clear,
            );
            // Below the held shard and taken by another thread: no wait.
            let (tx, rx) = std::sync::mpsc::channel();
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            let e2 = e.clone();
            let lo2 = lo.clone();
            let t = std::thread::spawn(move || {
                let k = e2.key(&lo2);
                let g = e2.lock(&Cx::DETACHED, &k);
                tx.send(()).unwrap();
                release_rx.recv().unwrap();
                drop(g);
            });
            rx.recv().unwrap();
            assert_eq!(hold.add(e.shard_of(&klo)), Err(WouldWait));
            release_tx.send(()).unwrap();
            t.join().unwrap();
            // Free now: taken.
            assert_eq!(hold.add(e.shard_of(&klo)), Ok(()));
            // Above: waited for (free here), and a plain lock through the
            // hold's context takes it too.
            assert!(e.lock(&cx, &khi).read(0, &khi).is_none());
            assert!(shard_locked(&e, &klo) && shard_locked(&e, &khi));
        }
        assert!(!shard_locked(&e, &klo) && !shard_locked(&e, &kmid) && !shard_locked(&e, &khi));
        assert!(e.lock(&Cx::DETACHED, &kmid).read(0, &kmid).is_some());
    }

    /// Two keys in different shards.
    fn two_keys(e: &Engine) -> (Vec<u8>, Vec<u8>) {
        let a = b"retain:a".to_vec();
        let sa = e.shard_of(&e.key(&a));
        let b = (0..)
            .map(|i| format!("retain:{i}").into_bytes())
            .find(|b| e.shard_of(&e.key(b)) != sa)
            .unwrap();
        (a, b)
    }

    #[test]
    fn retained_lock_is_reused_released_and_never_deadlocks() {
        let e = Engine::new(Options::default());
        let (a, b) = two_keys(&e);
        let (ka, kb) = (e.key(&a), e.key(&b));
        retain_locks(true);
        {
            let mut g = e.lock(&Cx::DETACHED, &ka);
            g.set(
                0,
                &ka,
                Value::Str(StrValue::from_bytes(b"1")),
                Expiry::Clear,
            );
        }
        // The guard is gone, the lock is kept.
        assert!(shard_locked(&e, &ka));
        // The same shard again: served from the kept lock (a real lock
        // would deadlock here).
        {
            let mut g = e.lock(&Cx::DETACHED, &ka);
            assert!(g.read(0, &ka).is_some());
        }
        assert!(shard_locked(&e, &ka));
        // Another shard: the kept one is released first.
        drop(e.lock(&Cx::DETACHED, &kb));
        assert!(!shard_locked(&e, &ka));
        assert!(shard_locked(&e, &kb));
        // Whole-keyspace paths take every shard, the kept one included.
        e.for_each_shard_read(&Cx::DETACHED, |_, _| {});
        drop(e.lock_all(&Cx::DETACHED));
        drop(e.lock_keys(&Cx::DETACHED, &[ka, kb]));
        assert!(!shard_locked(&e, &ka));
        {
            let hold = e.hold_all(&Cx::DETACHED);
            drop(e.lock(&Cx::DETACHED.with_hold(&hold), &ka));
        }
        assert!(!shard_locked(&e, &ka) && !shard_locked(&e, &kb));
        drop(e.lock(&Cx::DETACHED, &ka));
        release_retained();
        assert!(!shard_locked(&e, &ka));
        // Off: guards unlock as they drop.
        retain_locks(false);
        drop(e.lock(&Cx::DETACHED, &ka));
        assert!(!shard_locked(&e, &ka));
    }

    #[test]
    fn a_guard_moves_by_register_copies() {
        // Every single-key command moves its guard out of `lock` and into
        // `drop`; at 464 bytes (the shard list inline) each move was a
        // memcpy call of ~70 instructions. Up to 128 bytes, a move is a
        // few vector copies.
        let size = std::mem::size_of::<Guard>();
        assert!(size <= 128, "Guard is {size} bytes");
    }

    fn str_of(g: &mut Guard, k: &Key) -> Option<Vec<u8>> {
        match &g.read(0, k)?.value {
            Value::Str(s) => Some(s.to_vec()),
            _ => None,
        }
    }

    #[test]
    fn keys_locked_together_are_one_step_in_one_shard_or_many() {
        let e = Engine::new(Options::default());
        let (a, b) = two_keys(&e);
        let (ka, kb) = (e.key(&a), e.key(&b));
        // A second key in a's shard.
        let a2 = (0..)
            .map(|i| format!("same:{i}").into_bytes())
            .find(|k| e.shard_of(&e.key(k)) == e.shard_of(&ka))
            .unwrap();
        let ka2 = e.key(&a2);
        let v = |s: &[u8]| Value::Str(StrValue::from_bytes(s));
        for keys in [[ka, ka2], [ka, kb], [kb, ka]] {
            let mut g = e.lock_keys(&Cx::DETACHED, &keys);
            assert!(keys.iter().all(|k| shard_locked(&e, k)));
            for (n, k) in keys.iter().enumerate() {
                g.set(0, k, v(&[b'0' + n as u8]), Expiry::Clear);
            }
            assert_eq!(str_of(&mut g, &keys[0]).as_deref(), Some(&b"0"[..]));
            assert_eq!(str_of(&mut g, &keys[1]).as_deref(), Some(&b"1"[..]));
            let shards = if keys.iter().any(|k| k.bytes == b) {
                2
            } else {
                1
            };
            assert_eq!(g.shards_mut().count(), shards);
            drop(g);
            assert!(keys.iter().all(|k| !shard_locked(&e, k)));
        }
        // Keys of one shard are kept as a single key's are; two are not.
        retain_locks(true);
        drop(e.lock_keys(&Cx::DETACHED, &[ka, ka2]));
        assert!(shard_locked(&e, &ka));
        drop(e.lock_keys(&Cx::DETACHED, &[ka, kb]));
        assert!(!shard_locked(&e, &ka) && !shard_locked(&e, &kb));
        retain_locks(false);
        // One shard in all: `lock_all` is a single-shard guard.
        let one = Engine::new(Options {
            databases: 1,
            shards: 1,
        });
        let k = one.key(b"k");
        let mut g = one.lock_all(&Cx::DETACHED);
        g.set(0, &k, v(b"x"), Expiry::Clear);
        assert_eq!(g.shards_mut().count(), 1);
        assert_eq!(str_of(&mut g, &k).as_deref(), Some(&b"x"[..]));
    }

    #[test]
    #[should_panic(expected = "a command may only touch keys it locked")]
    fn a_single_shard_guard_refuses_another_shards_key() {
        let e = Engine::new(Options::default());
        let (a, b) = two_keys(&e);
        let (ka, kb) = (e.key(&a), e.key(&b));
        e.lock(&Cx::DETACHED, &ka).read(0, &kb);
    }

    #[test]
    #[should_panic(expected = "a command may only touch keys it locked")]
    fn a_multi_shard_guard_refuses_a_key_it_did_not_lock() {
        let e = Engine::new(Options::default());
        let (a, b) = two_keys(&e);
        let (ka, kb) = (e.key(&a), e.key(&b));
        let c = (0..)
            .map(|i| format!("other:{i}").into_bytes())
            .find(|c| {
                ![ka, kb]
                    .iter()
                    .any(|k| e.shard_of(k) == e.shard_of(&e.key(c)))
            })
            .unwrap();
        e.lock_keys(&Cx::DETACHED, &[ka, kb]).read(0, &e.key(&c));
    }

    #[test]
    fn another_thread_waits_for_a_kept_lock_only_until_release() {
        let e = Arc::new(Engine::new(Options::default()));
        let k = e.key(b"hot");
        retain_locks(true);
        drop(e.lock(&Cx::DETACHED, &k));
        let (tx, rx) = std::sync::mpsc::channel();
        let e2 = e.clone();
        let t = std::thread::spawn(move || {
            let k = e2.key(b"hot");
            let mut g = e2.lock(&Cx::DETACHED, &k);
            g.set(0, &k, Value::Str(StrValue::from_bytes(b"x")), Expiry::Clear);
            tx.send(()).unwrap();
        });
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(100))
            .is_err());
        release_retained();
        rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        t.join().unwrap();
        retain_locks(false);
    }
}
