//! Eviction: which key goes when memory is over `maxmemory`, and the LFU
//! counter's arithmetic. Redis 7.0's evict.c is the model.
//!
//! The engine does not know how much memory is in use (the server reads the
//! allocator); it only answers "evict one key under this policy" and leaves
//! the loop, its budget and the limit to the caller.
//!
//! - **Approximated LRU / LFU / TTL** (Redis's eviction pool). Each step
//!   samples `maxmemory-samples` keys from random shards into a small pool
//!   that keeps the best candidates seen so far across steps (sorted by
//!   score: idle seconds for LRU, 255 minus the decayed counter for LFU,
//!   nearness of the expire time for volatile-ttl), then deletes the best
//!   candidate that still exists. Before deleting, the candidate's score is
//!   computed again: a key that was read since it was sampled goes back into
//!   the pool with its new score instead of being evicted (Redis deletes it
//!   anyway), which is cheap and keeps hot keys.
//! - **Random policies** delete a key from a random shard.
//! - `volatile-*` policies consider only keys with a TTL and never touch the
//!   others.
//!
//! The pool lives with the caller (one per thread that evicts), so workers
//! evicting at the same time never contend on it; a candidate another
//! thread already deleted is found missing and skipped.
//!
//! Every eviction goes through `evict_key`, the one place a key leaves the
//! keyspace because of memory: statistics, the `evicted` keyspace
//! notification and WATCH are handled there (and persistence can record
//! the deletion there).
use crate::compact::Meta;
use crate::cx::Cx;
use crate::entry::{Owned, Ref};
use crate::keyspace::{Engine, Guard, Key};
use std::sync::atomic::{AtomicU32, Ordering};

/// Redis's `maxmemory-policy` values, as the engine needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    /// Only keys with an expire time may go.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllkeysRandom | Policy::VolatileRandom)
    }
}

// ------------------------------------------------------------------ LFU ---

/// `lfu-log-factor` (Redis default 10): how slowly the counter saturates.
pub static LFU_LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
/// `lfu-decay-time` in minutes (Redis default 1): the counter loses one per
/// period without access; 0 never decays.
pub static LFU_DECAY_TIME: AtomicU32 = AtomicU32::new(1);

pub use crate::entry::LFU_INIT_VAL;

/// The counter after decay (Redis `LFUDecrAndReturn`). `since_secs` is the
/// LRU-clock second of the last decrement (the entry's `access` under an
/// LFU policy, Redis's "ldt"); the clock wraps like Redis's.
pub fn lfu_decayed(counter: u8, since_secs: u32) -> u8 {
    let period = LFU_DECAY_TIME.load(Ordering::Relaxed);
    if period == 0 {
        return counter;
    }
    let elapsed_min = crate::clock::lru_secs().wrapping_sub(since_secs) / 60;
    let periods = elapsed_min / period;
    counter.saturating_sub(periods.min(255) as u8)
}

/// Redis's logarithmic increment (`LFULogIncr`): the chance of counting an
/// access falls as 1 / ((counter - LFU_INIT_VAL) * lfu-log-factor + 1).
pub fn lfu_log_incr(counter: u8) -> u8 {
    if counter == 255 {
        return 255;
    }
    let r: f64 = rand::random();
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let factor = LFU_LOG_FACTOR.load(Ordering::Relaxed) as f64;
    if r < 1.0 / (base * factor + 1.0) {
        counter + 1
    } else {
        counter
    }
}

/// An access under an LFU policy (Redis `updateLFU`): decay, then count.
/// The caller stores the current LRU second as the new decrement time.
pub fn lfu_on_access(counter: u8, since_secs: u32) -> u8 {
    lfu_log_incr(lfu_decayed(counter, since_secs))
}

// --------------------------------------------------------------- scores ---

/// How much `e` deserves eviction under `policy`: higher goes first.
/// An expired key scores highest under every policy (it is garbage).
pub fn score(policy: Policy, e: &Meta, now_ms: u64) -> u64 {
    if e.is_expired(now_ms) {
        return u64::MAX;
    }
    match policy {
        // Least frequently used first; among equal counters (the counter
        // is logarithmic, so many keys share one) the longest idle, from
        // the last access, which `access` keeps under LFU.
        Policy::AllkeysLfu | Policy::VolatileLfu => {
            let rarity = 255 - u64::from(lfu_decayed(e.freq, e.access));
            (rarity << 32) | e.idle_secs().min(u64::from(u32::MAX))
        }
        Policy::VolatileTtl => u64::MAX - 1 - e.expire_at(),
        // LRU, and anything else: idle seconds.
        _ => e.idle_secs(),
    }
}

/// `score`, for the eviction pool: a key whose value is in the disk tier
/// ranks below every key whose value is in RAM (0 against at least 1).
/// Tiered keys are the coldest, so plain scores would evict them first,
/// and evicting one gives back ~64 bytes (key and pointer) where a value
/// in RAM gives back its whole size: it goes only when the pool holds
/// nothing else.
fn rank(policy: Policy, e: Ref<'_>, now_ms: u64) -> u64 {
    let s = score(policy, e.meta(), now_ms);
    match e {
        Ref::Compact(c) if c.is_tiered() && s != u64::MAX => 0,
        _ => s.saturating_add(1),
    }
}

// ----------------------------------------------------------------- pool ---

/// Redis's `EVPOOL_SIZE`.
pub const POOL_SIZE: usize = 16;

/// A sampled key waiting in the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub score: u64,
    pub db: usize,
    pub key: Vec<u8>,
}

/// The best candidates seen so far, sorted by ascending score (Redis's
/// `evictionPoolEntry` array). Key buffers are reused as Redis caches its
/// pool's sds strings, so a steady eviction allocates nothing here.
#[derive(Default, Debug)]
pub struct Pool {
    cands: Vec<Candidate>,
    spare: Vec<Vec<u8>>,
}

impl Pool {
    pub fn len(&self) -> usize {
        self.cands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cands.is_empty()
    }

    /// Best score in the pool, if any.
    pub fn best_score(&self) -> Option<u64> {
        self.cands.last().map(|c| c.score)
    }

    /// Offers a sampled key. Kept if the pool has room or the key beats
    /// the worst candidate (which then leaves); a key already pooled only
    /// has its score updated.
    pub fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        if let Some(i) = self.cands.iter().position(|c| c.db == db && c.key == key) {
            let mut c = self.cands.remove(i);
            c.score = score;
            self.insert(c);
            return;
        }
        if self.cands.len() >= POOL_SIZE {
            if score <= self.cands[0].score {
                return;
            }
            let worst = self.cands.remove(0);
            self.spare.push(worst.key);
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(key);
        self.insert(Candidate {
            score,
            db,
            key: buf,
        });
    }

    fn insert(&mut self, c: Candidate) {
        let at = self.cands.partition_point(|x| x.score <= c.score);
        self.cands.insert(at, c);
    }

    /// Takes the best candidate out.
    pub fn pop_best(&mut self) -> Option<Candidate> {
        self.cands.pop()
    }

    /// Returns a popped candidate's buffer for reuse.
    pub fn recycle(&mut self, c: Candidate) {
        if self.spare.len() < POOL_SIZE {
            self.spare.push(c.key);
        }
    }

    /// Forgets every candidate (policy changed, FLUSHALL...).
    pub fn clear(&mut self) {
        while let Some(c) = self.cands.pop() {
            self.recycle(c);
        }
    }
}

// ------------------------------------------------------------- eviction ---

/// Removes `k` from `db` because of memory pressure: the single place a
/// key is evicted. Counts it (INFO `evicted_keys`), records the `evicted`
/// keyspace notification and flags WATCHers (through `remove`), as Redis's
/// `performEvictions` does around `dbGenericDelete`. Returns the entry so
/// the caller can drop it after unlocking. None if the key is not there.
pub fn evict_key(g: &mut Guard, db: usize, k: &Key) -> Option<Owned> {
    let e = g.remove(db, k)?;
    // Journaled as a DEL while the shard is still locked (Redis propagates
    // an eviction as DEL), so replay never resurrects an evicted key.
    crate::record::deleted(g.engine(), db, std::iter::once(k.bytes));
    g.stats_mut(k).evicted_keys += 1;
    g.notify(crate::events::class::EVICTED, "evicted", db, k);
    Some(e)
}

/// What one eviction step did.
#[derive(Debug)]
pub enum Step {
    /// A key was evicted (or, found expired, deleted as expired); drop the
    /// entry after every lock is released so its memory is returned.
    Freed(Option<Owned>),
    /// Nothing under this policy can be evicted.
    Nothing,
}

/// Random shards probed before a full sweep decides the keyspace (for the
/// policy) is empty. A sweep costs one lock per shard.
const PROBES: usize = 32;
/// Slots walked per table when sampling (bounds the work on a sparse table
/// or one where few keys carry a TTL).
const WALK: usize = 64;
/// Pool candidates re-scored in one step before one is evicted anyway.
const RESCORES: usize = 8;

/// Evicts one key under `policy`, sampling `samples` keys per step into
/// `pool`. Locks one shard at a time, never two.
pub fn evict_one(
    engine: &Engine,
    cx: &Cx,
    policy: Policy,
    samples: usize,
    pool: &mut Pool,
) -> Step {
    if policy == Policy::NoEviction {
        return Step::Nothing;
    }
    let samples = samples.clamp(1, 64);
    if policy.random() {
        return evict_random(engine, cx, policy);
    }
    let mut rescored = 0;
    loop {
        if !populate(engine, cx, policy, samples, pool) && pool.is_empty() {
            return Step::Nothing;
        }
        while let Some(c) = pool.pop_best() {
            let k = engine.key(&c.key);
            let mut g = engine.lock(cx, &k);
            let now = g.now;
            let Some(e) = g.peek_ref(c.db, &k) else {
                // Gone since sampled (deleted, evicted by another thread,
                // or just removed as expired: memory freed either way).
                drop(g);
                pool.recycle(c);
                continue;
            };
            if policy.volatile_only() && e.expire_at() == 0 {
                drop(g);
                pool.recycle(c);
                continue;
            }
            let now_score = rank(policy, e, now);
            // A value that moved to the disk tier since it was sampled
            // ranks last now (`rank`): it goes back whatever the count,
            // so a pool of stale candidates the tier took meanwhile does
            // not end in evicting one of them while values in RAM remain.
            if now_score < c.score && (rescored < RESCORES || now_score == 0) {
                // Used since it was sampled: it goes back with its new
                // score, and the next best is looked at.
                rescored += 1;
                drop(g);
                let (db, key) = (c.db, c.key.clone());
                pool.recycle(c);
                pool.offer(now_score, db, &key);
                continue;
            }
            let freed = evict_key(&mut g, c.db, &k);
            drop(g);
            pool.recycle(c);
            return Step::Freed(freed);
        }
    }
}

/// Samples keys into the pool: `samples` live candidates from random
/// shards (all databases of each shard visited). Returns false if nothing
/// evictable was found even by a full sweep.
fn populate(engine: &Engine, cx: &Cx, policy: Policy, samples: usize, pool: &mut Pool) -> bool {
    let n = engine.shard_count();
    let volatile = policy.volatile_only();
    // Keys sampled, and those of them whose values are in RAM: the probes
    // go on until they found enough of the latter (`rank`).
    let mut found = 0;
    let mut in_ram = 0;
    let mut sample_shard = |i: usize, pool: &mut Pool, found: &mut usize| {
        engine.with_shard(cx, i, |s| {
            let now = crate::clock::now_ms();
            for db in 0..s.dbs.len() {
                let t = s.db(db);
                if t.is_empty() || (volatile && t.volatile() == 0) {
                    continue;
                }
                let mut taken = 0;
                t.sample_walk(rand::random(), WALK, |e| {
                    if !volatile || e.expire_at() != 0 {
                        let r = rank(policy, e, now);
                        pool.offer(r, db, e.key());
                        taken += 1;
                        in_ram += usize::from(r != 0);
                    }
                    taken < samples
                });
                *found += taken;
            }
        });
        in_ram
    };
    for _ in 0..PROBES {
        let ram = sample_shard((rand::random::<u64>() as usize) & (n - 1), pool, &mut found);
        if ram >= samples {
            return true;
        }
    }
    if found > 0 {
        return true;
    }
    // Sparse keyspace: sweep every shard once from a random start.
    let start = (rand::random::<u64>() as usize) & (n - 1);
    for j in 0..n {
        sample_shard((start + j) & (n - 1), pool, &mut found);
        if found >= samples {
            break;
        }
    }
    found > 0
}

/// allkeys-random / volatile-random: a random key of a random shard.
fn evict_random(engine: &Engine, cx: &Cx, policy: Policy) -> Step {
    let n = engine.shard_count();
    let volatile = policy.volatile_only();
    let pick = |i: usize| {
        engine.with_shard(cx, i, |s| {
            let dbs = s.dbs.len();
            let first = (rand::random::<u64>() as usize) % dbs;
            for d in 0..dbs {
                let db = (first + d) % dbs;
                let t = s.db(db);
                if t.is_empty() || (volatile && t.volatile() == 0) {
                    continue;
                }
                let mut key = None;
                t.sample_walk(rand::random(), t.capacity(), |e| {
                    if !volatile || e.expire_at() != 0 {
                        key = Some(e.key().to_vec());
                        return false;
                    }
                    true
                });
                if let Some(k) = key {
                    return Some((db, k));
                }
            }
            None
        })
    };
    let start = (rand::random::<u64>() as usize) & (n - 1);
    let found = (0..PROBES)
        .find_map(|_| pick((rand::random::<u64>() as usize) & (n - 1)))
        .or_else(|| (0..n).find_map(|j| pick((start + j) & (n - 1))));
    let Some((db, key)) = found else {
        return Step::Nothing;
    };
    let k = engine.key(&key);
    let mut g = engine.lock(cx, &k);
    // peek removes it if it expired meanwhile; that frees memory too.
    if g.peek_ref(db, &k).is_none() {
        return Step::Freed(None);
    }
    let freed = evict_key(&mut g, db, &k);
    drop(g);
    Step::Freed(freed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Expiry, Options};
    use crate::value::{StrValue, Value};

    fn engine() -> Engine {
        Engine::new(Options {
            databases: 2,
            shards: 16,
        })
    }

    fn put(e: &Engine, db: usize, key: &str, at: u64) {
        let k = e.key(key.as_bytes());
        let mut g = e.lock(&Cx::DETACHED, &k);
        let exp = if at == 0 {
            Expiry::Clear
        } else {
            Expiry::At(at)
        };
        g.set(db, &k, Value::Str(StrValue::from_bytes(b"v")), exp);
    }

    fn exists(e: &Engine, db: usize, key: &str) -> bool {
        let k = e.key(key.as_bytes());
        e.lock(&Cx::DETACHED, &k).exists(db, &k)
    }

    #[test]
    fn pool_keeps_the_best_sorted_and_bounded() {
        let mut p = Pool::default();
        for i in 0..100u64 {
            // Scores in a scrambled order.
            let s = (i * 37) % 100;
            p.offer(s, 0, format!("k{s}").as_bytes());
        }
        assert_eq!(p.len(), POOL_SIZE);
        let mut got = Vec::new();
        while let Some(c) = p.pop_best() {
            got.push(c.score);
        }
        let want: Vec<u64> = (100 - POOL_SIZE as u64..100).rev().collect();
        assert_eq!(got, want);
    }

    #[test]
    fn pool_updates_a_key_already_there() {
        let mut p = Pool::default();
        p.offer(5, 0, b"a");
        p.offer(7, 0, b"b");
        p.offer(9, 0, b"a");
        assert_eq!(p.len(), 2);
        assert_eq!(p.pop_best().unwrap().key, b"a");
        // Same key in another database is another candidate.
        p.offer(1, 1, b"b");
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn volatile_policies_never_touch_keys_without_ttl() {
        let e = engine();
        let far = crate::clock::now_ms() + 3_600_000;
        for i in 0..200 {
            put(&e, 0, &format!("p{i}"), 0);
        }
        for i in 0..20 {
            put(&e, 1, &format!("v{i}"), far + i);
        }
        for policy in [
            Policy::VolatileLru,
            Policy::VolatileLfu,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
        ] {
            let mut pool = Pool::default();
            for i in 0..5 {
                put(&e, 1, &format!("w{i}"), far);
            }
            let mut n = 0;
            while let Step::Freed(_) = evict_one(&e, &Cx::DETACHED, policy, 5, &mut pool) {
                n += 1;
                assert!(n <= 100, "{policy:?} keeps evicting");
            }
            assert!(n >= 5, "{policy:?} evicted {n}");
            assert_eq!(e.dbsize(&Cx::DETACHED, 0), 200, "{policy:?}");
            assert_eq!(e.dbsize(&Cx::DETACHED, 1), 0, "{policy:?}");
        }
    }

    #[test]
    fn volatile_ttl_takes_the_nearest_expiry_first() {
        let e = engine();
        let base = crate::clock::now_ms() + 3_600_000;
        for i in 0..100u64 {
            put(&e, 0, &format!("k{i}"), base + i * 1000);
        }
        let mut pool = Pool::default();
        for _ in 0..50 {
            assert!(matches!(
                evict_one(&e, &Cx::DETACHED, Policy::VolatileTtl, 10, &mut pool),
                Step::Freed(Some(_))
            ));
        }
        // With 10 samples per step from 100 keys, what goes is mostly the
        // early half: far fewer of the late half than chance (25) would lose.
        let late_gone = (50..100)
            .filter(|i| !exists(&e, 0, &format!("k{i}")))
            .count();
        assert!(late_gone < 12, "late keys evicted: {late_gone}");
    }

    #[test]
    fn lru_keeps_recently_used_keys() {
        let e = engine();
        for i in 0..200 {
            put(&e, 0, &format!("k{i}"), 0);
        }
        // Half the keys look idle for an hour.
        e.for_each_shard(&Cx::DETACHED, |_, s| {
            let t = s.db_mut(0);
            let slots: Vec<usize> = (0..t.capacity()).collect();
            for i in slots {
                let Some(key) = t.slot(i).map(|r| r.key().to_vec()) else {
                    continue;
                };
                if let Some(en) = t.slot_mut(i) {
                    let n: usize = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
                    if n.is_multiple_of(2) {
                        en.access = en.access.wrapping_sub(3600);
                    }
                }
            }
        });
        let mut pool = Pool::default();
        for _ in 0..60 {
            evict_one(&e, &Cx::DETACHED, Policy::AllkeysLru, 5, &mut pool);
        }
        let hot_gone = (0..200)
            .filter(|i| i % 2 == 1 && !exists(&e, 0, &format!("k{i}")))
            .count();
        assert!(hot_gone <= 3, "recently used keys evicted: {hot_gone}");
    }

    #[test]
    fn nothing_to_evict_is_reported() {
        let e = engine();
        let mut pool = Pool::default();
        assert!(matches!(
            evict_one(&e, &Cx::DETACHED, Policy::AllkeysLru, 5, &mut pool),
            Step::Nothing
        ));
        assert!(matches!(
            evict_one(&e, &Cx::DETACHED, Policy::AllkeysRandom, 5, &mut pool),
            Step::Nothing
        ));
        put(&e, 0, "a", 0);
        assert!(matches!(
            evict_one(&e, &Cx::DETACHED, Policy::NoEviction, 5, &mut pool),
            Step::Nothing
        ));
        assert!(matches!(
            evict_one(&e, &Cx::DETACHED, Policy::VolatileLru, 5, &mut pool),
            Step::Nothing
        ));
        assert!(matches!(
            evict_one(&e, &Cx::DETACHED, Policy::AllkeysRandom, 5, &mut pool),
            Step::Freed(Some(_))
        ));
        assert_eq!(e.dbsize(&Cx::DETACHED, 0), 0);
    }

    #[test]
    fn lfu_counter_grows_logarithmically_and_decays() {
        let mut c = LFU_INIT_VAL;
        for _ in 0..1000 {
            c = lfu_log_incr(c);
        }
        // Redis's table for factor 10: ~1000 hits reach about 18.
        assert!((10..=30).contains(&c), "counter {c}");
        let now = crate::clock::lru_secs();
        assert_eq!(lfu_decayed(20, now), 20);
        assert_eq!(lfu_decayed(20, now.wrapping_sub(5 * 60)), 15);
        assert_eq!(lfu_decayed(3, now.wrapping_sub(50 * 60)), 0);
    }
}
