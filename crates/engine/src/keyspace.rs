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
use crate::entry::Entry;
use crate::table::Table;
use crate::value::Value;
use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Per-shard counters; kept under the shard's lock so they cost no atomics.
#[derive(Default, Clone, Copy, Debug)]
pub struct ShardStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    /// Keys whose expiry was found by the active cycle rather than a lookup.
    pub expired_active: u64,
}

/// One lock's worth of the keyspace: a table per database.
pub struct Shard {
    pub(crate) dbs: Box<[Table]>,
    pub(crate) expire_cursor: Box<[u64]>,
    pub stats: ShardStats,
}

/// Cache-line alignment so two threads locking neighbouring shards do not
/// bounce one line between cores.
#[repr(align(64))]
struct Padded(Mutex<Shard>);

/// Tunables the engine reads on the request path; set from config.
pub struct Limits {
    pub hash_max_listpack_entries: AtomicUsize,
    pub hash_max_listpack_value: AtomicUsize,
    pub proto_max_bulk_len: AtomicUsize,
    /// An LFU maxmemory policy is in force: accesses feed the LFU counter
    /// instead of the LRU time.
    pub lfu: std::sync::atomic::AtomicBool,
}

impl Limits {
    pub fn hash(&self) -> crate::value::HashLimits {
        crate::value::HashLimits {
            max_listpack_entries: self.hash_max_listpack_entries.load(Ordering::Relaxed),
            max_listpack_value: self.hash_max_listpack_value.load(Ordering::Relaxed),
        }
    }

    pub fn max_string(&self) -> usize {
        self.proto_max_bulk_len.load(Ordering::Relaxed)
    }
}

/// The whole keyspace: all databases, all shards.
pub struct Engine {
    shards: Box<[Padded]>,
    shard_shift: u32,
    hasher: hashbrown::DefaultHashBuilder,
    databases: usize,
    pub limits: Limits,
}

/// A key and its hash, computed once per command.
#[derive(Clone, Copy)]
pub struct Key<'a> {
    pub bytes: &'a [u8],
    hash: u64,
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
                Padded(Mutex::new(Shard {
                    dbs: (0..databases).map(|_| Table::default()).collect(),
                    expire_cursor: vec![0; databases].into_boxed_slice(),
                    stats: ShardStats::default(),
                }))
            })
            .collect();
        Engine {
            shards,
            shard_shift: 64 - n.trailing_zeros(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            databases,
            limits: Limits {
                hash_max_listpack_entries: AtomicUsize::new(512),
                hash_max_listpack_value: AtomicUsize::new(64),
                proto_max_bulk_len: AtomicUsize::new(512 * 1024 * 1024),
                lfu: std::sync::atomic::AtomicBool::new(false),
            },
        }
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
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

    /// Locks the shard of one key.
    pub fn lock(&self, k: &Key) -> Guard<'_> {
        let i = self.shard_of(k);
        let mut shards = SmallVec::new();
        shards.push((i, self.shards[i].0.lock()));
        self.guard(shards)
    }

    /// Locks the shards of all `keys` in ascending order (deadlock-free).
    pub fn lock_keys(&self, keys: &[Key]) -> Guard<'_> {
        let mut idx: SmallVec<[usize; 16]> = keys.iter().map(|k| self.shard_of(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        self.guard(
            idx.into_iter()
                .map(|i| (i, self.shards[i].0.lock()))
                .collect(),
        )
    }

    /// Locks every shard, in order. For whole-database commands only.
    pub fn lock_all(&self) -> Guard<'_> {
        self.guard(
            (0..self.shards.len())
                .map(|i| (i, self.shards[i].0.lock()))
                .collect(),
        )
    }

    /// A guard over shards already locked in ascending order, with the
    /// command's clock.
    fn guard<'e>(&'e self, shards: SmallVec<[(usize, MutexGuard<'e, Shard>); 16]>) -> Guard<'e> {
        Guard {
            engine: self,
            shards,
            now: crate::clock::now_ms(),
        }
    }

    /// Runs `f` on each shard in turn, holding only that shard's lock.
    /// For reads that need no cross-shard atomicity (KEYS, DBSIZE, INFO).
    pub fn for_each_shard(&self, mut f: impl FnMut(usize, &mut Shard)) {
        for (i, s) in self.shards.iter().enumerate() {
            f(i, &mut s.0.lock());
        }
    }

    /// Runs `f` on one shard under its lock.
    pub fn with_shard<R>(&self, i: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        f(&mut self.shards[i].0.lock())
    }
}

impl Shard {
    pub fn db(&self, db: usize) -> &Table {
        &self.dbs[db]
    }

    pub fn db_mut(&mut self, db: usize) -> &mut Table {
        &mut self.dbs[db]
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

/// Exclusive access to the shards of the keys a command named.
pub struct Guard<'e> {
    engine: &'e Engine,
    shards: SmallVec<[(usize, MutexGuard<'e, Shard>); 16]>,
    /// The command's notion of "now", fixed for its whole run as Redis does.
    pub now: u64,
}

impl<'e> Guard<'e> {
    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    pub fn key<'a>(&self, bytes: &'a [u8]) -> Key<'a> {
        self.engine.key(bytes)
    }

    fn shard(&mut self, k: &Key) -> &mut Shard {
        let i = self.engine.shard_of(k);
        let pos = self
            .shards
            .iter()
            .position(|(j, _)| *j == i)
            .expect("a command may only touch keys it locked");
        &mut self.shards[pos].1
    }

    /// Every locked shard, for whole-database commands.
    pub fn shards_mut(&mut self) -> impl Iterator<Item = &mut Shard> + use<'_, 'e> {
        self.shards.iter_mut().map(|(_, g)| &mut **g)
    }

    /// Slot of a live key, removing it first if it has expired.
    fn live_slot(&mut self, db: usize, k: &Key) -> Option<usize> {
        let now = self.now;
        let shard = self.shard(k);
        let table = &mut shard.dbs[db];
        let i = table.find(k.hash, k.bytes)?;
        if table.at(i).is_expired(now) {
            drop(table.remove_at(i));
            shard.stats.expired_keys += 1;
            return None;
        }
        Some(i)
    }

    /// A read lookup: counts a keyspace hit or miss and records the access.
    pub fn read(&mut self, db: usize, k: &Key) -> Option<&mut Entry> {
        let found = self.live_slot(db, k);
        let lfu = self.engine.limits.lfu.load(Ordering::Relaxed);
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

    /// Stores `value` under the key, replacing any old value, and returns
    /// the old value so the caller can drop a large one after unlocking.
    /// Overwriting reuses the entry and its key (as Redis's `dbOverwrite`
    /// reuses the dict entry): only the value changes hands, the LRU time
    /// restarts and the LFU counter is kept.
    pub fn set(&mut self, db: usize, k: &Key, value: Value, expiry: Expiry) -> Option<Value> {
        let found = self.live_slot(db, k);
        let table = &mut self.shard(k).dbs[db];
        match found {
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
                None
            }
        }
    }

    /// Inserts a whole entry (MOVE, COPY, RENAME keep metadata this way).
    pub fn set_entry(&mut self, db: usize, k: &Key, entry: Box<Entry>) -> Option<Box<Entry>> {
        debug_assert_eq!(entry.key(), k.bytes);
        let found = self.live_slot(db, k);
        let table = &mut self.shard(k).dbs[db];
        match found {
            Some(i) => Some(table.replace_at(i, entry)),
            None => {
                table.insert_new(k.hash, entry);
                None
            }
        }
    }

    /// Removes the key; None if it did not exist (or had just expired).
    pub fn remove(&mut self, db: usize, k: &Key) -> Option<Box<Entry>> {
        let i = self.live_slot(db, k)?;
        Some(self.shard(k).dbs[db].remove_at(i))
    }

    /// Sets (or with 0 clears) the expire time of an existing key.
    pub fn set_expire(&mut self, db: usize, k: &Key, at_ms: u64) -> bool {
        match self.live_slot(db, k) {
            Some(i) => {
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
        let Some(old) = self.remove(from_db, from) else {
            return false;
        };
        drop(self.set_entry(to_db, to, old.rekey(to.bytes)));
        true
    }

    /// Counts for an expired key found by a caller-side check.
    pub fn stats_mut(&mut self, k: &Key) -> &mut ShardStats {
        &mut self.shard(k).stats
    }
}
