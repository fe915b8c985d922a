//! Whole-keyspace operations: SCAN, KEYS, DBSIZE, FLUSHDB,
//! FLUSHALL, SWAPDB and CLUSTER GETKEYSINSLOT. They work shard by shard; the ones that must be
//! atomic (flushes, SWAPDB) lock every shard first.
use crate::cx::Cx;
use crate::entry::Ref;
use crate::keyspace::Engine;
use crate::table::Table;

impl Engine {
    fn shard_bits(&self) -> u32 {
        self.shard_count().trailing_zeros()
    }

    /// One SCAN step over database `db`. The cursor holds the shard index in
    /// its low bits and that shard's reverse-binary bucket cursor above them,
    /// so a key present for the whole scan is returned at least once (see
    /// `table`). Like Redis, it stops once `count` keys were visited or after
    /// `count * 10` buckets, and returns the next cursor (0 = done). `visit`
    /// sees live entries only; expired ones are skipped.
    pub fn scan(
        &self,
        cx: &Cx,
        db: usize,
        cursor: u64,
        count: usize,
        visit: impl FnMut(Ref<'_>),
    ) -> u64 {
        self.scan_with_expired(cx, db, cursor, count, visit, |_| ())
    }

    /// `scan`, handing the entries past their time to `expired` instead of
    /// skipping them silently (SCAN deletes them after the step, as Redis's
    /// `scanGenericCommand` does; the step itself only reads the shard).
    pub fn scan_with_expired(
        &self,
        cx: &Cx,
        db: usize,
        cursor: u64,
        count: usize,
        mut visit: impl FnMut(Ref<'_>),
        mut expired: impl FnMut(Ref<'_>),
    ) -> u64 {
        let bits = self.shard_bits();
        let n = self.shard_count() as u64;
        let mut shard = cursor & (n - 1);
        let mut bucket = cursor >> bits;
        let mut seen = 0usize;
        let mut buckets = 0usize;
        let max_buckets = count.saturating_mul(10).max(1);
        let now = cx.now_ms();
        while shard < n {
            let finished_shard = self.with_shard_read(cx, shard as usize, |s| {
                let t = s.db(db);
                loop {
                    if t.is_empty() {
                        return true;
                    }
                    bucket = t.scan_bucket(bucket, |e| {
                        seen += 1;
                        if !e.is_expired(now) {
                            visit(e);
                        } else {
                            expired(e);
                        }
                    });
                    buckets += 1;
                    if bucket == 0 {
                        return true;
                    }
                    if seen >= count || buckets >= max_buckets {
                        return false;
                    }
                }
            });
            if finished_shard {
                shard += 1;
                bucket = 0;
            }
            if seen >= count || buckets >= max_buckets {
                break;
            }
        }
        if shard >= n {
            0
        } else {
            (bucket << bits) | shard
        }
    }

    /// Calls `visit` with every live key of `db` (KEYS). Not a snapshot:
    /// keys written while it runs may or may not be seen.
    pub fn for_each_key(&self, cx: &Cx, db: usize, mut visit: impl FnMut(Ref<'_>)) {
        let now = cx.now_ms();
        self.for_each_shard_read(cx, |_, s| {
            for e in s.db(db).iter() {
                if !e.is_expired(now) {
                    visit(e);
                }
            }
        });
    }

    /// Keys in `db`, expired-but-unremoved ones included, as Redis counts.
    pub fn dbsize(&self, cx: &Cx, db: usize) -> usize {
        let mut n = 0;
        self.for_each_shard_read(cx, |_, s| n += s.db(db).len());
        n
    }

    /// (keys, keys with a TTL) for one database, for INFO keyspace.
    pub fn db_counts(&self, cx: &Cx, db: usize) -> (usize, usize) {
        let (mut keys, mut volatile) = (0, 0);
        self.for_each_shard_read(cx, |_, s| {
            keys += s.db(db).len();
            volatile += s.db(db).volatile();
        });
        (keys, volatile)
    }

    /// Empties one database (or all with None) atomically and returns the
    /// old tables, so the caller decides where the memory is freed
    /// (FLUSHALL ASYNC frees it on another thread).
    pub fn flush(&self, cx: &Cx, db: Option<usize>) -> Vec<Table> {
        let mut g = self.lock_all(cx);
        match db {
            Some(d) => g.modified_db(d, None),
            None => (0..self.databases()).for_each(|d| g.modified_db(d, None)),
        }
        // Redis's signalFlushedDb: every tracking client drops its cache.
        self.tracking.all(cx);
        if matches!(db, None | Some(0)) {
            if let Some(ix) = self.slot_index() {
                // Every shard is locked: no insert races the reset.
                ix.clear();
            }
        }
        let mut old = Vec::new();
        for s in g.shards_mut() {
            match db {
                Some(d) => {
                    old.push(s.dbs[d].take_all());
                    s.expire_cursor[d] = 0;
                }
                None => {
                    for d in 0..s.dbs.len() {
                        old.push(s.dbs[d].take_all());
                        s.expire_cursor[d] = 0;
                    }
                }
            }
        }
        // Readers blocked on a stream that is gone must be told (Redis
        // 7.0 answers a waiting XREADGROUP "UNBLOCKED the stream key no
        // longer exists" on FLUSHALL); other waiters just look again.
        if self.blocked.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            match db {
                Some(d) => cx.push_event(crate::events::Event::ReadyDb { db: d }),
                None => (0..self.databases())
                    .for_each(|d| cx.push_event(crate::events::Event::ReadyDb { db: d })),
            }
        }
        old
    }

    /// Swaps two databases atomically (SWAPDB).
    pub fn swap_dbs(&self, cx: &Cx, a: usize, b: usize) {
        let mut g = self.lock_all(cx);
        // A watched key changes if it exists on either side of the swap.
        g.modified_db(a, Some(b));
        g.modified_db(b, Some(a));
        for s in g.shards_mut() {
            s.dbs.swap(a, b);
            s.expire_cursor.swap(a, b);
        }
        // Clients blocked on keys of either database look again: the key
        // they wait on may now hold a list (Redis `scanDatabaseForReadyKeys`).
        if self.blocked.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            cx.push_event(crate::events::Event::ReadyDb { db: a });
            cx.push_event(crate::events::Event::ReadyDb { db: b });
        }
    }
    /// Up to `count` keys of database 0 in hash slot `slot`, for CLUSTER
    /// GETKEYSINSLOT (expired keys not yet removed included, as Redis lists
    /// them). Keys are spread over the shards by their own hash, not by
    /// slot, so this walks the shards one lock at a time; the slot index
    /// (`crate::slots`) bounds the walk: nothing for an empty slot, and it
    /// stops as soon as it has every key the slot holds.
    pub fn keys_in_slot(&self, cx: &Cx, slot: u16, count: usize) -> Vec<Vec<u8>> {
        let want = match self.slot_index() {
            Some(ix) => (ix.count(slot) as usize).min(count),
            None => count,
        };
        let mut keys = Vec::new();
        for i in 0..self.shard_count() {
            if keys.len() >= want {
                break;
            }
            self.with_shard_read(cx, i, |s| {
                for e in s.db(0).iter() {
                    if keys.len() >= want {
                        break;
                    }
                    if crate::slots::key_hash_slot(e.key()) == slot {
                        keys.push(e.key().to_vec());
                    }
                }
            });
        }
        keys
    }
}
