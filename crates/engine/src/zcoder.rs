//! Background coding of string values (issue 25 item 1, branch lz4code;
//! docs/design.md, "LZ4 values coded in the background"). With the lz4
//! codec a SET stores its value plain, in a compact block flagged
//! *pending* (`compact::FLAG_PENDING`); the server's coder thread walks the
//! shards with `Engine::code_step` and codes the pending values that have
//! been idle for a while with LZ4 HC and the domain's dictionary, swapping
//! each block for a coded one if the key still holds the same bytes.
//!
//! The walk copies a value out under the shard lock and codes it with the
//! lock released (an HC coding of 2.8 KB is ~260,000 instructions; a
//! worker wanting the shard meanwhile would wait for all of it), then
//! locks again and swaps only if the block is still pending with the same
//! value bytes: a value written, edited or deleted meanwhile is left to
//! its new owner. Coding changes no value, so it makes no journal record,
//! WATCH signal or keyspace event (as a move to the disk tier).
//!
//! The pending counters here are exact: a block counts from its creation
//! (`compact::Block::new_pending`) to its drop or its coding.
use crate::compact::{Block, FLAG_PENDING};
use crate::entry::{Owned, Ref};
use crate::keyspace::Engine;
use crate::value::zcomp::{self, Codec};
use std::sync::atomic::{AtomicU64, Ordering};

static PENDING_VALUES: AtomicU64 = AtomicU64::new(0);
static PENDING_BYTES: AtomicU64 = AtomicU64::new(0);
/// Values the walk coded, and values it tried that did not shrink by 1/8
/// (they stay plain, no longer pending).
static CODED: AtomicU64 = AtomicU64::new(0);
static KEPT_PLAIN: AtomicU64 = AtomicU64::new(0);

/// A pending block of `n` value bytes was made.
pub(crate) fn note_pending(n: usize) {
    PENDING_VALUES.fetch_add(1, Ordering::Relaxed);
    PENDING_BYTES.fetch_add(n as u64, Ordering::Relaxed);
}

/// A pending block of `n` value bytes was freed or coded.
pub(crate) fn note_unpending(n: usize) {
    PENDING_VALUES.fetch_sub(1, Ordering::Relaxed);
    PENDING_BYTES.fetch_sub(n as u64, Ordering::Relaxed);
}

/// Values stored plain awaiting the coder, and their bytes (INFO).
pub fn pending() -> (u64, u64) {
    (
        PENDING_VALUES.load(Ordering::Relaxed),
        PENDING_BYTES.load(Ordering::Relaxed),
    )
}

/// Values coded in the background since start, and values tried that
/// stayed plain (INFO).
pub fn coded() -> (u64, u64) {
    (
        CODED.load(Ordering::Relaxed),
        KEPT_PLAIN.load(Ordering::Relaxed),
    )
}

/// Where a walk is: shard, database, slot; `passes` counts completed walks
/// over the whole keyspace.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cursor {
    shard: usize,
    db: usize,
    slot: usize,
    pub passes: u64,
}

/// Slots looked at per lock of a shard: a walk of cache misses, so a few
/// microseconds, short enough for a worker waiting on the shard.
const WALK: usize = 128;
/// Values copied out per lock.
const BATCH: usize = 8;

/// A value copied out to code: database, key, plain bytes.
type Candidate = (usize, Vec<u8>, Vec<u8>);

thread_local! {
    /// Copies of the values being coded, and the coded output.
    static WORK: std::cell::RefCell<(Vec<Candidate>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// What one `code_step` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Pending values seen that were not idle long enough yet.
    pub young: usize,
    /// Values coded and swapped in.
    pub coded: usize,
    /// Values left pending while their domain's dictionary is trained
    /// (coded without it they would stay ~1.5x larger until rewritten).
    pub waiting: usize,
}

impl Engine {
    /// One step of the background coder: looks at up to `WALK` slots
    /// from `cur` (moving on to the next database and shard at the end of
    /// a table), takes up to `BATCH` pending values idle for at least
    /// `idle_secs` seconds (the LRU clock's unit), codes each with LZ4 HC
    /// at `level` and swaps it in if unchanged. Values that do not shrink
    /// by 1/8 lose their pending flag and stay plain.
    pub fn code_step(&self, cur: &mut Cursor, idle_secs: u32, level: i32) -> Step {
        let mut step = Step::default();
        WORK.with(|w| {
            let (cands, out) = &mut *w.borrow_mut();
            cands.clear();
            self.collect_pending(cur, idle_secs, cands, &mut step);
            for (db, key, plain) in cands.iter() {
                let k = self.key(key);
                let domain = zcomp::domain_of(k.hash());
                if zcomp::training(domain) {
                    step.waiting += 1;
                    continue;
                }
                let shrank = zcomp::compress_with(Codec::Lz4, domain, plain, level, out);
                if self.swap_coded(*db, key, plain, shrank.then_some(&out[..])) {
                    step.coded += usize::from(shrank);
                } else if shrank {
                    // Changed meanwhile: give back the coding's use.
                    zcomp::release(zcomp::dict_id(out));
                }
            }
        });
        CODED.fetch_add(step.coded as u64, Ordering::Relaxed);
        step
    }

    /// The walk under one shard lock: copies out pending values old
    /// enough, advances the cursor.
    fn collect_pending(
        &self,
        cur: &mut Cursor,
        idle_secs: u32,
        cands: &mut Vec<Candidate>,
        step: &mut Step,
    ) {
        if cur.shard >= self.shard_count() {
            cur.shard = 0;
        }
        let shard = self.lock_shard(cur.shard);
        let now_ms = crate::clock::now_ms();
        let now = crate::clock::lru_secs();
        if cur.db < shard.databases() {
            let t = shard.db(cur.db);
            let end = (cur.slot + WALK).min(t.capacity());
            while cur.slot < end && cands.len() < BATCH {
                if let Some(Ref::Compact(c)) = t.slot(cur.slot) {
                    if c.is_pending() && !c.meta().is_expired(now_ms) {
                        if now.wrapping_sub(c.meta().access) >= idle_secs {
                            cands.push((cur.db, c.key().to_vec(), c.value().to_vec()));
                        } else {
                            step.young += 1;
                        }
                    }
                }
                cur.slot += 1;
            }
            if cur.slot < t.capacity() {
                return;
            }
        }
        // The end of this table: the next database, or the next shard.
        cur.slot = 0;
        cur.db += 1;
        if cur.db >= shard.databases() {
            cur.db = 0;
            cur.shard += 1;
            if cur.shard >= self.shard_count() {
                cur.shard = 0;
                cur.passes += 1;
            }
        }
    }

    /// Swaps `key`'s pending block holding `plain` for one holding `coded`
    /// (which carries a dictionary use the new block takes over), or, with
    /// no coding, clears its pending flag. False if the key no longer
    /// holds that pending value.
    fn swap_coded(&self, db: usize, key: &[u8], plain: &[u8], coded: Option<&[u8]>) -> bool {
        let k = self.key(key);
        let mut shard = self.lock_shard(self.shard_index(&k));
        if db >= shard.databases() {
            return false;
        }
        let t = shard.db_mut(db);
        let Some(i) = t.find(k.hash(), key) else {
            return false;
        };
        let Ref::Compact(c) = t.at(i) else {
            return false;
        };
        if !c.is_pending() || c.value() != plain {
            return false;
        }
        let Some(coded) = coded else {
            t.meta_mut(i).flags &= !FLAG_PENDING;
            note_unpending(plain.len());
            KEPT_PLAIN.fetch_add(1, Ordering::Relaxed);
            return true;
        };
        let block = Block::new_coded(key, coded, *c.meta());
        let old = t.replace_at(i, Owned::Compact(block));
        drop(shard);
        drop(old);
        true
    }

    /// Codes every pending value idle for `idle_secs` (tests, and a
    /// caller that wants the keyspace settled): walks until one whole
    /// pass finds nothing young left or `max_passes` passes ran.
    pub fn code_all(&self, idle_secs: u32, level: i32, max_passes: u64) {
        let mut cur = Cursor::default();
        let (mut young, mut waiting, mut passes) = (0, 0, 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while passes < max_passes {
            let before = cur.passes;
            let s = self.code_step(&mut cur, idle_secs, level);
            young += s.young;
            waiting += s.waiting;
            if cur.passes != before {
                if young == 0 && waiting == 0 {
                    return;
                }
                // A pass that waited for a training does not count.
                if waiting == 0 || std::time::Instant::now() > deadline {
                    passes += 1;
                } else {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                young = 0;
                waiting = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::string as s;
    use crate::ops::test_support::{engine, with};
    use crate::value::zcomp::tests::{op, run, Op, SERIAL};
    use proptest::prelude::*;

    /// An engine with the lz4 codec in the background (`inline` false) or
    /// coding at SET (the memory-pressure path).
    fn lz4_engine(min: usize, inline: bool) -> Engine {
        let e = engine();
        e.limits.value_compression_min.store(min, Ordering::Relaxed);
        e.limits
            .value_compression_codec
            .store(Codec::Lz4 as u8, Ordering::Relaxed);
        e.limits
            .value_compression_inline
            .store(inline, Ordering::Relaxed);
        e
    }

    fn encoding(e: &Engine, key: &[u8]) -> Option<&'static str> {
        with(e, |g| {
            let k = g.key(key);
            g.read_ref(0, &k).map(|r| r.encoding())
        })
    }

    fn set(e: &Engine, key: &[u8], v: &[u8]) {
        with(e, |g| {
            let k = g.key(key);
            s::set(
                g,
                0,
                &k,
                v,
                s::Cond::Always,
                crate::keyspace::Expiry::Clear,
                false,
            )
            .unwrap();
        });
    }

    #[test]
    fn set_stores_plain_and_the_walk_codes_idle_values() {
        let _s = SERIAL.lock();
        let e = lz4_engine(64, false);
        let v = zcomp::sample_text(11, 2800);
        let (n0, b0) = pending();
        set(&e, b"a", &v);
        set(&e, b"b", b"short");
        assert_eq!(encoding(&e, b"a"), Some("raw"));
        assert_eq!(pending(), (n0 + 1, b0 + 2800));
        // Not idle for an hour: the walk leaves it.
        e.code_all(3600, 4, 2);
        assert_eq!(encoding(&e, b"a"), Some("raw"));
        e.code_all(0, 4, 2);
        assert_eq!(encoding(&e, b"a"), Some("lz4"));
        assert_eq!(encoding(&e, b"b"), Some("embstr"));
        assert_eq!(pending(), (n0, b0));
        with(&e, |g| {
            let k = g.key(b"a");
            assert_eq!(s::get(g, 0, &k, |b| b.unwrap().to_vec()).unwrap(), v);
            assert_eq!(s::strlen(g, 0, &k).unwrap(), 2800);
            assert!(g.read_ref(0, &k).unwrap().mem_bytes() < 2000);
            // An edit leaves it plain and not pending (written whole again,
            // it is pending again).
            assert_eq!(s::append(g, 0, &k, b"!").unwrap(), 2801);
            assert_eq!(g.read_ref(0, &k).unwrap().encoding(), "raw");
        });
        assert_eq!(pending(), (n0, b0));
        // Noise does not shrink: it stays plain and leaves the pending count.
        let mut x = 7u64;
        let noise: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        set(&e, b"n", &noise);
        e.code_all(0, 4, 2);
        assert_eq!(encoding(&e, b"n"), Some("raw"));
        assert_eq!(pending(), (n0, b0));
        // DEL of a pending value uncounts it.
        set(&e, b"d", &v);
        with(&e, |g| {
            let k = g.key(b"d");
            assert_eq!(s::getdel(g, 0, &k).unwrap().map(|b| b.len()), Some(2800));
        });
        assert_eq!(pending(), (n0, b0));
    }

    #[test]
    fn a_value_rewritten_while_it_is_coded_keeps_the_new_bytes() {
        let _s = SERIAL.lock();
        let e = lz4_engine(64, false);
        let v1 = zcomp::sample_text(1, 1500);
        let v2 = zcomp::sample_text(2, 1500);
        set(&e, b"k", &v1);
        // What code_step does, with a SET between the copy and the swap.
        let mut out = Vec::new();
        assert!(zcomp::compress_with(Codec::Lz4, 0, &v1, 4, &mut out));
        set(&e, b"k", &v2);
        assert!(!e.swap_coded(0, b"k", &v1, Some(&out)));
        zcomp::release(zcomp::dict_id(&out));
        with(&e, |g| {
            let k = g.key(b"k");
            assert_eq!(s::get(g, 0, &k, |b| b.unwrap().to_vec()).unwrap(), v2);
        });
        e.code_all(0, 4, 2);
        assert_eq!(encoding(&e, b"k"), Some("lz4"));
    }

    #[test]
    fn under_memory_pressure_set_codes_in_line() {
        let _s = SERIAL.lock();
        let e = lz4_engine(64, true);
        let v = zcomp::sample_text(5, 2800);
        let (n0, _) = pending();
        set(&e, b"k", &v);
        assert_eq!(encoding(&e, b"k"), Some("lz4"));
        assert_eq!(pending().0, n0);
        with(&e, |g| {
            let k = g.key(b"k");
            assert_eq!(
                s::getrange(g, 0, &k, 100, 199, |b| b.to_vec()).unwrap(),
                &v[100..200]
            );
        });
    }

    /// Ops of zcomp's model test, plus a background coding pass.
    #[derive(Debug, Clone)]
    enum BOp {
        Str(Op),
        Code,
    }

    fn bop() -> impl Strategy<Value = BOp> {
        prop_oneof![6 => op().prop_map(BOp::Str), 1 => Just(BOp::Code)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Every reply of a plain engine and of lz4 engines (coded in the
        /// background at random points, or in line) is the same.
        #[test]
        fn replies_are_the_same_with_lz4_background_coding(ops in proptest::collection::vec(bop(), 1..40)) {
            let _s = SERIAL.lock();
            let plain = engine();
            let bg = lz4_engine(32, false);
            let inline = lz4_engine(32, true);
            let (n0, _) = pending();
            let mut coded_after_long_set = 0;
            let mut long_sets_then_code = 0;
            let mut last_long: Option<u8> = None;
            for o in &ops {
                match o {
                    BOp::Code => {
                        bg.code_all(0, 4, 2);
                        // Everything pending was coded or left plain.
                        prop_assert_eq!(pending().0, n0);
                        if let Some(k) = last_long.take() {
                            long_sets_then_code += 1;
                            let enc = encoding(&bg, format!("key:{k}").as_bytes());
                            coded_after_long_set += usize::from(enc == Some("lz4"));
                        }
                    }
                    BOp::Str(o) => {
                        let want = run(&plain, o);
                        prop_assert_eq!(&want, &run(&bg, o), "{:?}", o);
                        prop_assert_eq!(&want, &run(&inline, o), "{:?}", o);
                        last_long = match o {
                            Op::Set(k, _, len) if *len >= 1000 => Some(*k),
                            _ => None,
                        };
                    }
                }
            }
            // Text of 1,000 bytes shrinks by far more than 1/8 with LZ4 HC,
            // dictionary or not: a long SET followed by a pass is coded.
            prop_assert_eq!(coded_after_long_set, long_sets_then_code);
        }
    }
}
