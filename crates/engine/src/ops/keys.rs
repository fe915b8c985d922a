//! Keyspace operations (Redis 7.0 `db.c`, `expire.c`, `object.c`): DEL,
//! EXISTS, TYPE, TOUCH, the EXPIRE family, TTL, PERSIST, RENAME, MOVE, COPY,
//! OBJECT, and the filtering half of KEYS and SCAN. The whole-keyspace walks
//! themselves (`Engine::scan`, `for_each_key`, `flush`,
//! `swap_dbs`) live in `iterate`.
//!
//! Statistics follow Redis's lookup flavours, because INFO exposes them:
//! `lookupKeyRead` (GET-like reads, TOUCH, COPY's source) counts a keyspace
//! hit or miss and records the access; `lookupKeyReadWithFlags(NOTOUCH)`
//! (EXISTS, TYPE, TTL, OBJECT) counts but does not touch; `lookupKeyWrite`
//! (EXPIRE, PERSIST, RENAME, MOVE) touches but does not count; DEL counts
//! nothing.
//!
//! Keyspace notifications follow `db.c` and `expire.c`: `del` per key
//! removed, `expire` / `del` (a time already past) for the EXPIRE family,
//! `persist`, `rename_from` + `rename_to`, `move_from` + `move_to`, and
//! `copy_to`; a destination that is replaced is deleted first, so it gets
//! the `new` event of a key created, as Redis's `dbDelete` + `dbAdd` do.
use crate::cx::Cx;
use crate::entry::Owned;
use crate::events::class;
use crate::keyspace::{Draw, Engine, Guard, Key};
use crate::util::glob::glob_match;
use crate::value::{Kind, StrValue, Value};
use crate::{Error, Result};

/// Redis `OBJ_SHARED_INTEGERS`: integers in `0..10000` are shared objects.
pub const SHARED_INTEGERS: i64 = 10_000;

/// Redis `LAZYFREE_THRESHOLD`: a value costing more than this many
/// allocations to free is freed on a background thread by UNLINK.
pub const LAZYFREE_THRESHOLD: usize = 64;

/// A NOTOUCH read lookup's bookkeeping: one keyspace hit or miss.
fn count_lookup(g: &mut Guard, k: &Key, hit: bool) {
    let stats = g.stats_mut(k);
    if hit {
        stats.keyspace_hits += 1;
    } else {
        stats.keyspace_misses += 1;
    }
}

/// A read lookup's bookkeeping for EXISTS, TYPE and TTL: the hit or miss,
/// and a miss's `keymiss` notification (OBJECT counts but does not notify:
/// Redis looks its key up with `LOOKUP_NONOTIFY`).
fn read_lookup(g: &mut Guard, db: usize, k: &Key, hit: bool) {
    count_lookup(g, k, hit);
    if !hit {
        g.notify(class::KEY_MISS, "keymiss", db, k);
    }
}

/// DEL / UNLINK: removes each key that exists and hands the removed entry
/// to `removed`, so the caller can free it after unlocking (or on another
/// thread). A key named twice is removed once. Returns how many were removed.
pub fn del(g: &mut Guard, db: usize, keys: &[Key], mut removed: impl FnMut(Owned)) -> usize {
    let mut n = 0;
    for k in keys {
        if let Some(e) = g.remove(db, k) {
            g.notify(class::GENERIC, "del", db, k);
            removed(e);
            n += 1;
        }
    }
    n
}

/// How much work freeing `v` is (Redis `lazyfreeGetFreeEffort`): the element
/// count of a value made of many allocations, 1 for everything else.
pub fn free_effort(v: &Value) -> usize {
    match v {
        Value::Str(_) => 1,
        Value::Hash(h) if h.is_packed() => 1,
        Value::Hash(h) => h.len(),
        // One allocation per node: Redis counts a quicklist's nodes.
        Value::List(l) => l.node_count(),
        Value::Set(s) if s.is_intset() => 1,
        Value::Set(s) => s.len(),
        Value::ZSet(z) if z.is_packed() => 1,
        Value::ZSet(z) => z.len(),
        // Redis counts the radix tree's nodes plus each group's PEL.
        Value::Stream(s) => {
            s.node_count() + s.groups.values().map(|g| 1 + g.pel.len()).sum::<usize>()
        }
    }
}

/// EXISTS: how many of `keys` exist, a key named twice counting twice.
pub fn exists(g: &mut Guard, db: usize, keys: &[Key]) -> usize {
    let mut n = 0;
    for k in keys {
        let hit = g.exists(db, k);
        read_lookup(g, db, k, hit);
        n += usize::from(hit);
    }
    n
}

/// TOUCH: how many of `keys` exist; each one found has its access recorded.
pub fn touch(g: &mut Guard, db: usize, keys: &[Key]) -> usize {
    keys.iter().filter(|k| g.read_ref(db, k).is_some()).count()
}

/// TYPE: the kind of value the key holds, None if it does not exist.
pub fn key_type(g: &mut Guard, db: usize, k: &Key) -> Option<Kind> {
    let kind = g.peek_ref(db, k).map(|e| e.kind());
    read_lookup(g, db, k, kind.is_some());
    kind
}

/// The NX / XX / GT / LT options of the EXPIRE family. Which combinations
/// are allowed is the caller's to check (the error texts are wire-level).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireCond {
    /// Only if the key has no expire time.
    pub nx: bool,
    /// Only if the key has an expire time.
    pub xx: bool,
    /// Only if the new time is later; no expire time counts as infinite.
    pub gt: bool,
    /// Only if the new time is earlier; no expire time counts as infinite.
    pub lt: bool,
}

/// What an EXPIRE-family command did.
pub enum ExpireOutcome {
    /// The key is missing or a condition failed (reply 0).
    Unchanged,
    /// The expire time was set (reply 1).
    Set,
    /// The time was not in the future, so the key was deleted (reply 1);
    /// the entry is handed back to be freed outside the lock.
    Deleted(Owned),
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT with the absolute deadline
/// `when_ms` (may be zero or negative), in Redis's `expireGenericCommand`
/// order: existence, then NX, XX, GT, LT, then "already expired?"
/// (`when <= now` deletes the key, as `checkAlreadyExpired` does).
pub fn expire(g: &mut Guard, db: usize, k: &Key, when_ms: i64, cond: ExpireCond) -> ExpireOutcome {
    let Some(e) = g.write_meta(db, k) else {
        return ExpireOutcome::Unchanged;
    };
    // Redis's getExpire answers -1 for "no expire time".
    let current = match e.expire_at() {
        0 => -1,
        at => at as i64,
    };
    if (cond.nx && current != -1)
        || (cond.xx && current == -1)
        || (cond.gt && (current == -1 || when_ms <= current))
        || (cond.lt && current != -1 && when_ms >= current)
    {
        return ExpireOutcome::Unchanged;
    }
    if when_ms <= g.now as i64 {
        return match g.remove(db, k) {
            Some(old) => {
                g.notify(class::GENERIC, "del", db, k);
                ExpireOutcome::Deleted(old)
            }
            None => ExpireOutcome::Unchanged,
        };
    }
    g.set_expire(db, k, when_ms as u64);
    g.notify(class::GENERIC, "expire", db, k);
    ExpireOutcome::Set
}

/// A key's expire state, as TTL and its relatives report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    Missing,
    Persistent,
    /// Expires at this Unix millisecond.
    At(u64),
}

/// TTL / PTTL / EXPIRETIME / PEXPIRETIME lookup.
pub fn ttl(g: &mut Guard, db: usize, k: &Key) -> Ttl {
    let t = match g.peek_ref(db, k) {
        None => Ttl::Missing,
        Some(e) => match e.expire_at() {
            0 => Ttl::Persistent,
            at => Ttl::At(at),
        },
    };
    read_lookup(g, db, k, t != Ttl::Missing);
    t
}

/// PERSIST: clears the expire time; false if the key is missing or had none.
pub fn persist(g: &mut Guard, db: usize, k: &Key) -> bool {
    match g.write_meta(db, k) {
        Some(e) if e.expire_at() != 0 => {
            g.set_expire(db, k, 0);
            g.notify(class::GENERIC, "persist", db, k);
            true
        }
        _ => false,
    }
}

/// RENAME (`nx` false) and RENAMENX (`nx` true), Redis's
/// `renameGenericCommand`: NoSuchKey if `from` is missing (even when it is
/// also the destination); renaming a key to itself does nothing and answers
/// true for RENAME, false for RENAMENX; RENAMENX onto an existing key
/// answers false. The value keeps its TTL. Both keys must be locked.
pub fn rename(g: &mut Guard, db: usize, from: &Key, to: &Key, nx: bool) -> Result<bool> {
    if g.write_meta(db, from).is_none() {
        return Err(Error::NoSuchKey);
    }
    if from.bytes == to.bytes {
        return Ok(!nx);
    }
    if g.exists(db, to) {
        if nx {
            return Ok(false);
        }
        // Deleted first, so the new name is a key created (`new`).
        drop(g.remove(db, to));
    }
    g.rename_entry(db, from, db, to);
    g.notify(class::GENERIC, "rename_from", db, from);
    g.notify(class::GENERIC, "rename_to", db, to);
    Ok(true)
}

/// MOVE key db: moves the key with its TTL into `to_db` unless it is
/// missing or `to_db` already has the name. SameObject when the databases
/// are the same (checked first, as Redis does).
pub fn move_key(g: &mut Guard, from_db: usize, to_db: usize, k: &Key) -> Result<bool> {
    if from_db == to_db {
        return Err(Error::SameObject);
    }
    if g.write_meta(from_db, k).is_none() || g.exists(to_db, k) {
        return Ok(false);
    }
    g.rename_entry(from_db, k, to_db, k);
    g.notify(class::GENERIC, "move_from", from_db, k);
    g.notify(class::GENERIC, "move_to", to_db, k);
    Ok(true)
}

/// COPY source destination [DB n] [REPLACE]: a deep copy of the value with
/// the same TTL and fresh access metadata. SameObject for the same key in
/// the same database (before any lookup); false if the source is missing, or
/// the destination exists and `replace` is off. The replaced value, if any,
/// is handed to `removed`.
pub fn copy(
    g: &mut Guard,
    src_db: usize,
    from: &Key,
    dst_db: usize,
    to: &Key,
    replace: bool,
    removed: impl FnOnce(Owned),
) -> Result<bool> {
    if src_db == dst_db && from.bytes == to.bytes {
        return Err(Error::SameObject);
    }
    if g.read_ref(src_db, from).is_none() {
        return Ok(false);
    }
    if !replace && g.exists(dst_db, to) {
        return Ok(false);
    }
    let dup = match g.peek_ref(src_db, from) {
        Some(e) => Owned::duplicate(e, to.bytes),
        None => return Ok(false),
    };
    // A replaced destination is deleted first, so the copy is a key
    // created (`new`), as Redis's `dbDelete` + `dbAdd` do.
    if let Some(old) = g.remove(dst_db, to) {
        removed(old);
    }
    drop(g.set_entry(dst_db, to, dup));
    g.notify(class::GENERIC, "copy_to", dst_db, to);
    Ok(true)
}

/// A deep copy of a value in the same encoding (Redis `dupStringObject`,
/// `hashTypeDup`, ...: COPY keeps OBJECT ENCODING).
pub fn clone_value(v: &Value) -> Value {
    match v {
        Value::Str(s) => Value::Str(s.clone()),
        Value::Hash(h) => Value::Hash(h.clone()),
        Value::List(l) => Value::List(l.clone()),
        Value::Set(s) => Value::Set(s.clone()),
        Value::ZSet(z) => Value::ZSet(z.clone()),
        Value::Stream(s) => Value::Stream(s.clone()),
    }
}

/// What OBJECT reports about a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub encoding: &'static str,
    /// An `int`-encoded string in `0..SHARED_INTEGERS`: Redis stores it as a
    /// shared object (refcount `INT_MAX`) unless maxmemory with an LRU/LFU
    /// policy forbids sharing; the caller knows the policy.
    pub shared_integer: bool,
    pub idle_secs: u64,
    /// The LFU counter after decay (Redis `LFUDecrAndReturn`).
    pub freq: u8,
}

/// OBJECT ENCODING / REFCOUNT / IDLETIME / FREQ lookup (no access recorded).
pub fn object(g: &mut Guard, db: usize, k: &Key) -> Option<ObjectInfo> {
    let info = g.peek_ref(db, k).map(|e| {
        let idle_secs = e.idle_secs();
        ObjectInfo {
            encoding: e.encoding(),
            shared_integer: matches!(e.value(), Some(Value::Str(StrValue::Int(n))) if (0..SHARED_INTEGERS).contains(n)),
            idle_secs,
            freq: crate::evict::lfu_decayed(e.meta().freq, e.meta().access),
        }
    });
    count_lookup(g, k, info.is_some());
    info
}

/// RANDOMKEY: a live key of `db` chosen uniformly, None if it has none.
///
/// A shard is picked with probability proportional to its key count, then a slot
/// uniformly within it; keys past their time met on the way are deleted as a
/// lookup deletes them (a DEL propagated for each), as Redis's `dbRandomKey`
/// does, in a loop. A read-only replica keeps them for its master's DEL
/// and draws again; when every key of the database has a TTL it returns
/// one past its time after 100 draws, as Redis does, rather than loop for
/// ever. Costs one pass over the shard locks per shard drawn.
pub fn random_key(engine: &Engine, cx: &Cx, db: usize) -> Option<Vec<u8>> {
    let mut lens: Vec<usize> = Vec::with_capacity(engine.shard_count());
    loop {
        lens.clear();
        let mut volatile = 0usize;
        engine.for_each_shard_read(cx, |_, s| {
            lens.push(s.db(db).len());
            volatile += s.db(db).volatile();
        });
        let total: usize = lens.iter().sum();
        if total == 0 {
            return None;
        }
        let mut r = (rand::random::<u64>() % total as u64) as usize;
        let shard = lens.iter().position(|&n| {
            if r < n {
                return true;
            }
            r -= n;
            false
        })?;
        match engine.lock_index(cx, shard).draw_random(db, 100) {
            Draw::Live(key) => return Some(key),
            Draw::Hidden(key) if volatile == total => return Some(key),
            // The shard emptied between the two looks, or holds only keys
            // a replica hides: count again.
            Draw::Hidden(_) | Draw::Empty => {}
        }
    }
}

/// The filters of one SCAN call, applied to the keys a step collected, in
/// Redis's order: pattern, then type.
#[derive(Clone, Copy, Debug)]
pub struct ScanFilter<'a> {
    /// None: every key (MATCH absent, or exactly `*`, which Redis skips).
    pub pattern: Option<&'a [u8]>,
    pub kind: TypeFilter,
}

/// SCAN's TYPE option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeFilter {
    Any,
    Only(Kind),
    /// A type name no value of ours has (e.g. "stream", "foo"): Redis still
    /// walks the keyspace and returns the next cursor, with no keys.
    Nothing,
}

/// One SCAN step over `db` from `cursor`, visiting up to about `count`
/// entries (see `Engine::scan`); each live key that passes `filter` goes to
/// `emit`. Returns the next cursor (0: done).
pub fn scan(
    engine: &Engine,
    cx: &Cx,
    db: usize,
    cursor: u64,
    count: usize,
    filter: ScanFilter,
    mut emit: impl FnMut(&[u8]),
) -> u64 {
    let mut type_checked = 0u64;
    let mut expired: Vec<Box<[u8]>> = Vec::new();
    let matches = |key: &[u8]| filter.pattern.is_none_or(|p| glob_match(p, key, false));
    let next = engine.scan_with_expired(
        cx,
        db,
        cursor,
        count,
        |e| {
            if !matches(e.key()) {
                return;
            }
            let keep = match filter.kind {
                TypeFilter::Any => true,
                TypeFilter::Only(kind) => {
                    type_checked += 1;
                    e.kind() == kind
                }
                TypeFilter::Nothing => {
                    type_checked += 1;
                    false
                }
            };
            if keep {
                emit(e.key());
            }
        },
        |e| {
            if matches(e.key()) {
                expired.push(e.key().into());
            }
        },
    );
    // Redis's `scanGenericCommand` deletes the keys past their time that
    // pass the pattern (a read-only replica only hides them) and
    // propagates a DEL for each: here a lookup of each under its own lock,
    // after the walk's read-only pass. With TYPE, Redis's type check is a
    // read lookup, which counts the miss and raises `keymiss`.
    for key in &expired {
        let k = engine.key(key);
        let mut g = engine.lock(cx, &k);
        if filter.kind == TypeFilter::Any {
            g.exists(db, &k);
        } else {
            g.read(db, &k);
        }
    }
    if type_checked > 0 {
        // Redis checks the type with a read lookup, which counts a hit per
        // key checked; keyspace statistics are summed over shards, so any
        // shard may carry them.
        let k = engine.key(b"");
        engine.lock(cx, &k).stats_mut(&k).keyspace_hits += type_checked;
    }
    next
}

/// KEYS pattern: every live key of `db` matching the glob, to `emit`. A
/// pattern with no special bytes is one lookup instead of a walk; `*` alone
/// matches every key, the empty one included (Redis's `allkeys` shortcut,
/// which the matcher itself does not take).
pub fn keys(engine: &Engine, cx: &Cx, db: usize, pattern: &[u8], mut emit: impl FnMut(&[u8])) {
    if crate::util::glob::is_literal(pattern) {
        let k = engine.key(pattern);
        if engine.lock(cx, &k).exists(db, &k) {
            emit(pattern);
        }
        return;
    }
    let all = pattern == b"*";
    engine.for_each_key(cx, db, |e| {
        if all || glob_match(pattern, e.key(), false) {
            emit(e.key());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Expiry, Options};
    use crate::value::{HashLimits, HashValue};
    use std::collections::{BTreeMap, BTreeSet};

    fn engine() -> Engine {
        Engine::new(Options {
            databases: 4,
            shards: 16,
        })
    }

    fn put(e: &Engine, db: usize, key: &[u8], val: &[u8], at: u64) {
        let k = e.key(key);
        let exp = if at == 0 {
            Expiry::Clear
        } else {
            Expiry::At(at)
        };
        e.lock(&crate::cx::testing::cx(), &k).set(
            db,
            &k,
            Value::Str(StrValue::from_bytes(val)),
            exp,
        );
    }

    fn put_hash(e: &Engine, db: usize, key: &[u8], fields: usize) {
        let mut h = HashValue::new();
        let limits = HashLimits::default();
        for i in 0..fields {
            h.set(format!("f{i}").as_bytes(), b"v", &limits);
        }
        let k = e.key(key);
        e.lock(&crate::cx::testing::cx(), &k)
            .set(db, &k, Value::Hash(Box::new(h)), Expiry::Clear);
    }

    fn get(e: &Engine, db: usize, key: &[u8]) -> Option<Vec<u8>> {
        let k = e.key(key);
        let mut g = e.lock(&crate::cx::testing::cx(), &k);
        g.peek(db, &k).map(|en| match &en.value {
            Value::Str(s) => s.to_vec(),
            _ => b"<aggregate>".to_vec(),
        })
    }

    fn ttl_of(e: &Engine, db: usize, key: &[u8]) -> Ttl {
        let k = e.key(key);
        ttl(&mut e.lock(&crate::cx::testing::cx(), &k), db, &k)
    }

    fn hits_misses(e: &Engine) -> (u64, u64) {
        let (mut h, mut m) = (0, 0);
        e.for_each_shard(&crate::cx::testing::cx(), |_, s| {
            h += s.stats.keyspace_hits;
            m += s.stats.keyspace_misses;
        });
        (h, m)
    }

    #[test]
    fn del_exists_touch_count_like_redis() {
        let e = engine();
        put(&e, 0, b"a", b"1", 0);
        put(&e, 0, b"b", b"2", 0);
        let names: [&[u8]; 4] = [b"a", b"a", b"b", b"nosuch"];
        let keys: Vec<Key> = names.iter().map(|n| e.key(n)).collect();
        let mut g = e.lock_keys(&crate::cx::testing::cx(), &keys);
        assert_eq!(exists(&mut g, 0, &keys), 3);
        assert_eq!(touch(&mut g, 0, &keys), 3);
        let mut freed = Vec::new();
        assert_eq!(del(&mut g, 0, &keys, |x| freed.push(x)), 2);
        assert_eq!(freed.len(), 2);
        assert_eq!(exists(&mut g, 0, &keys), 0);
        drop(g);
        // EXISTS (4 + 4 lookups) and TOUCH (4) count; DEL does not.
        assert_eq!(hits_misses(&e), (6, 6));
    }

    #[test]
    fn expired_keys_are_missing_everywhere() {
        let e = engine();
        put(&e, 0, b"gone", b"v", 1);
        let k = e.key(b"gone");
        let mut g = e.lock(&crate::cx::testing::cx(), &k);
        assert_eq!(key_type(&mut g, 0, &k), None);
        assert_eq!(ttl(&mut g, 0, &k), Ttl::Missing);
        assert!(!persist(&mut g, 0, &k));
        assert_eq!(rename(&mut g, 0, &k, &k, false), Err(Error::NoSuchKey));
    }

    #[test]
    fn type_and_object() {
        let e = engine();
        put(&e, 0, b"i", b"123", 0);
        put(&e, 0, b"big", b"10000", 0);
        put(&e, 0, b"s", b"hello", 0);
        put_hash(&e, 0, b"h", 2);
        let info = |key: &[u8]| {
            let k = e.key(key);
            object(&mut e.lock(&crate::cx::testing::cx(), &k), 0, &k)
        };
        let i = info(b"i").unwrap();
        assert_eq!((i.encoding, i.shared_integer), ("int", true));
        assert_eq!(i.freq, crate::entry::LFU_INIT_VAL);
        assert!(!info(b"big").unwrap().shared_integer);
        assert_eq!(info(b"s").unwrap().encoding, "embstr");
        assert_eq!(info(b"h").unwrap().encoding, "listpack");
        assert_eq!(info(b"none"), None);
        let k = e.key(b"h");
        assert_eq!(
            key_type(&mut e.lock(&crate::cx::testing::cx(), &k), 0, &k),
            Some(Kind::Hash)
        );
    }

    fn run_expire(e: &Engine, key: &[u8], when: i64, cond: ExpireCond) -> u8 {
        let k = e.key(key);
        match expire(
            &mut e.lock(&crate::cx::testing::cx(), &k),
            0,
            &k,
            when,
            cond,
        ) {
            ExpireOutcome::Unchanged => 0,
            ExpireOutcome::Set => 1,
            ExpireOutcome::Deleted(_) => 2,
        }
    }

    #[test]
    fn expire_conditions_follow_redis() {
        let e = engine();
        let far = crate::clock::now_ms() as i64 + 1_000_000;
        let none = ExpireCond::default();
        let nx = ExpireCond { nx: true, ..none };
        let xx = ExpireCond { xx: true, ..none };
        let gt = ExpireCond { gt: true, ..none };
        let lt = ExpireCond { lt: true, ..none };
        assert_eq!(run_expire(&e, b"k", far, none), 0, "missing key");
        put(&e, 0, b"k", b"v", 0);
        // No TTL: XX and GT fail (no TTL is infinite), LT succeeds.
        assert_eq!(run_expire(&e, b"k", far, xx), 0);
        assert_eq!(run_expire(&e, b"k", far, gt), 0);
        assert_eq!(run_expire(&e, b"k", far, lt), 1);
        assert_eq!(ttl_of(&e, 0, b"k"), Ttl::At(far as u64));
        assert_eq!(run_expire(&e, b"k", far + 5, nx), 0);
        assert_eq!(run_expire(&e, b"k", far, gt), 0, "equal is not greater");
        assert_eq!(run_expire(&e, b"k", far, lt), 0, "equal is not less");
        assert_eq!(run_expire(&e, b"k", far + 5, gt), 1);
        assert_eq!(run_expire(&e, b"k", far, lt), 1);
        assert_eq!(run_expire(&e, b"k", far + 9, xx), 1);
        assert_eq!(ttl_of(&e, 0, b"k"), Ttl::At(far as u64 + 9));
        // A time not in the future deletes, conditions permitting.
        assert_eq!(run_expire(&e, b"k", -1, gt), 0);
        assert_eq!(run_expire(&e, b"k", -1, lt), 2);
        assert_eq!(ttl_of(&e, 0, b"k"), Ttl::Missing);
        put(&e, 0, b"k", b"v", 0);
        assert_eq!(run_expire(&e, b"k", 0, nx), 2);
        put(&e, 0, b"k", b"v", 0);
        assert_eq!(run_expire(&e, b"k", i64::MIN, none), 2);
    }

    #[test]
    fn persist_clears_only_a_ttl() {
        let e = engine();
        put(&e, 0, b"k", b"v", u64::MAX / 2);
        let k = e.key(b"k");
        let mut g = e.lock(&crate::cx::testing::cx(), &k);
        assert!(persist(&mut g, 0, &k));
        assert!(!persist(&mut g, 0, &k));
        assert_eq!(ttl(&mut g, 0, &k), Ttl::Persistent);
    }

    #[test]
    fn rename_and_renamenx() {
        let e = engine();
        put(&e, 0, b"a", b"1", u64::MAX / 2);
        put(&e, 0, b"b", b"2", 0);
        let (a, b, c) = (e.key(b"a"), e.key(b"b"), e.key(b"c"));
        let mut g = e.lock_keys(&crate::cx::testing::cx(), &[a, b, c]);
        assert_eq!(rename(&mut g, 0, &a, &a, false), Ok(true));
        assert_eq!(rename(&mut g, 0, &a, &a, true), Ok(false));
        assert_eq!(rename(&mut g, 0, &a, &b, true), Ok(false));
        assert_eq!(rename(&mut g, 0, &a, &b, false), Ok(true));
        assert_eq!(rename(&mut g, 0, &a, &c, false), Err(Error::NoSuchKey));
        assert_eq!(ttl(&mut g, 0, &b), Ttl::At(u64::MAX / 2));
        assert_eq!(rename(&mut g, 0, &b, &c, true), Ok(true));
        drop(g);
        assert_eq!(get(&e, 0, b"c").as_deref(), Some(&b"1"[..]));
        assert_eq!(get(&e, 0, b"a"), None);
        assert_eq!(get(&e, 0, b"b"), None);
    }

    #[test]
    fn move_keeps_ttl_and_refuses_existing() {
        let e = engine();
        put(&e, 0, b"k", b"v0", u64::MAX / 2);
        put(&e, 2, b"k", b"v2", 0);
        let k = e.key(b"k");
        let mut g = e.lock(&crate::cx::testing::cx(), &k);
        assert_eq!(move_key(&mut g, 0, 0, &k), Err(Error::SameObject));
        assert_eq!(move_key(&mut g, 0, 2, &k), Ok(false));
        assert_eq!(move_key(&mut g, 0, 1, &k), Ok(true));
        assert_eq!(move_key(&mut g, 0, 1, &k), Ok(false), "source now missing");
        assert_eq!(ttl(&mut g, 1, &k), Ttl::At(u64::MAX / 2));
        drop(g);
        assert_eq!(get(&e, 1, b"k").as_deref(), Some(&b"v0"[..]));
    }

    #[test]
    fn copy_is_deep_and_keeps_ttl_and_encoding() {
        let e = engine();
        put_hash(&e, 0, b"h", 200);
        put(&e, 0, b"t", b"v", u64::MAX / 2);
        put(&e, 0, b"x", b"old", 0);
        let (h, h2, t, x) = (e.key(b"h"), e.key(b"h2"), e.key(b"t"), e.key(b"x"));
        let nosuch = e.key(b"nosuch");
        let mut g = e.lock_keys(&crate::cx::testing::cx(), &[h, h2, t, x, nosuch]);
        let mut freed = 0;
        assert_eq!(
            copy(&mut g, 0, &h, 0, &h, true, |_| ()),
            Err(Error::SameObject)
        );
        assert_eq!(copy(&mut g, 0, &h, 1, &h, false, |_| ()), Ok(true));
        assert_eq!(copy(&mut g, 0, &h, 0, &h2, false, |_| ()), Ok(true));
        assert_eq!(copy(&mut g, 0, &t, 0, &h2, false, |_| ()), Ok(false));
        assert_eq!(copy(&mut g, 0, &t, 0, &x, true, |_| freed += 1), Ok(true));
        assert_eq!(freed, 1);
        assert_eq!(copy(&mut g, 0, &nosuch, 0, &x, true, |_| ()), Ok(false));
        assert_eq!(ttl(&mut g, 0, &x), Ttl::At(u64::MAX / 2));
        // Changing the copy leaves the original alone.
        let limits = HashLimits::default();
        match &mut g.write(0, &h2).unwrap().value {
            Value::Hash(hv) => assert!(hv.set(b"new", b"v", &limits)),
            _ => unreachable!(),
        }
        let len = |g: &mut Guard, k: &Key| match &g.peek(0, k).unwrap().value {
            Value::Hash(hv) => (hv.len(), hv.encoding()),
            _ => unreachable!(),
        };
        assert_eq!(len(&mut g, &h), (200, "hashtable"));
        assert_eq!(len(&mut g, &h2), (201, "hashtable"));
        assert_eq!(free_effort(&g.peek(0, &h).unwrap().value), 200);
    }

    #[test]
    fn keys_and_scan_filters() {
        let e = engine();
        for name in [&b""[..], b"a", b"ab", b"abc", b"b", b"h*llo", b"hello"] {
            put(&e, 0, name, b"v", 0);
        }
        put_hash(&e, 0, b"hash", 1);
        put(&e, 0, b"dead", b"v", 1);
        let keys_of = |p: &[u8]| {
            let mut v = BTreeSet::new();
            keys(&e, &crate::cx::testing::cx(), 0, p, |k| {
                v.insert(k.to_vec());
            });
            v
        };
        assert_eq!(keys_of(b"*").len(), 8, "* includes the empty key");
        assert_eq!(keys_of(b"**").len(), 7, "** does not");
        assert_eq!(keys_of(b"a*").len(), 3);
        assert_eq!(keys_of(b"h\\*llo").len(), 1);
        assert_eq!(keys_of(b"abc").len(), 1);
        assert_eq!(keys_of(b"dead").len(), 0);
        assert_eq!(keys_of(b"").len(), 1);

        let scan_all = |filter: ScanFilter| {
            let mut v = BTreeSet::new();
            let mut cursor = 0;
            loop {
                cursor = scan(&e, &crate::cx::testing::cx(), 0, cursor, 2, filter, |k| {
                    v.insert(k.to_vec());
                });
                if cursor == 0 {
                    return v;
                }
            }
        };
        let any = ScanFilter {
            pattern: None,
            kind: TypeFilter::Any,
        };
        assert_eq!(scan_all(any), keys_of(b"*"));
        let hashes = scan_all(ScanFilter {
            kind: TypeFilter::Only(Kind::Hash),
            ..any
        });
        assert_eq!(hashes, BTreeSet::from([b"hash".to_vec()]));
        let none = scan_all(ScanFilter {
            kind: TypeFilter::Nothing,
            ..any
        });
        assert!(none.is_empty());
        let a = scan_all(ScanFilter {
            pattern: Some(b"a?"),
            ..any
        });
        assert_eq!(a, BTreeSet::from([b"ab".to_vec()]));
    }

    #[test]
    fn random_key_is_fair_and_skips_expired() {
        let e = Engine::new(Options {
            databases: 2,
            shards: 64,
        });
        assert_eq!(random_key(&e, &crate::cx::testing::cx(), 0), None);
        // Many expired keys: removed iteratively (no recursion), then None.
        for i in 0..200_000 {
            put(&e, 0, format!("x{i}").as_bytes(), b"v", 1);
        }
        assert_eq!(random_key(&e, &crate::cx::testing::cx(), 0), None);
        assert_eq!(e.dbsize(&crate::cx::testing::cx(), 0), 0);
        // Ten live keys: each is picked about equally often.
        for i in 0..10 {
            put(&e, 1, format!("k{i}").as_bytes(), b"v", 0);
        }
        let mut counts = BTreeMap::new();
        for _ in 0..10_000 {
            *counts
                .entry(random_key(&e, &crate::cx::testing::cx(), 1).unwrap())
                .or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 10);
        assert!(
            counts.values().all(|&n| (700..1300).contains(&n)),
            "{counts:?}"
        );
    }

    #[test]
    fn scan_deletes_the_expired_keys_it_passes() {
        let e = engine();
        let cx = crate::cx::testing::cx();
        put(&e, 0, b"old1", b"v", 1);
        put(&e, 0, b"old2", b"v", 1);
        put(&e, 0, b"new", b"v", 0);
        let walk = |pattern: Option<&[u8]>| {
            let filter = ScanFilter {
                pattern,
                kind: TypeFilter::Any,
            };
            let (mut seen, mut cursor) = (Vec::new(), 0);
            loop {
                cursor = scan(&e, &cx, 0, cursor, 100, filter, |k| seen.push(k.to_vec()));
                if cursor == 0 {
                    return seen;
                }
            }
        };
        // Only the keys that pass the pattern: the others stay.
        put(&e, 0, b"zold", b"v", 1);
        assert_eq!(walk(Some(b"nomatch*")), Vec::<Vec<u8>>::new());
        assert_eq!(e.dbsize(&cx, 0), 4);
        assert_eq!(walk(Some(b"old*")), Vec::<Vec<u8>>::new());
        assert_eq!(e.dbsize(&cx, 0), 2);
        assert_eq!(walk(None), [b"new".to_vec()]);
        assert_eq!(e.dbsize(&cx, 0), 1);
    }

    #[test]
    fn random_key_on_a_replica_hides_expired_keys_without_removing_them() {
        let e = Engine::new(Options {
            databases: 1,
            shards: 4,
        });
        let cx = crate::cx::testing::cx();
        e.limits
            .replica_expiry
            .store(true, std::sync::atomic::Ordering::Relaxed);
        for i in 0..10 {
            put(&e, 0, format!("x{i}").as_bytes(), b"v", 1);
        }
        // Every key has a TTL and is past it: Redis's replica gives one
        // of them after 100 draws rather than loop for ever.
        assert!(random_key(&e, &cx, 0).unwrap().starts_with(b"x"));
        assert_eq!(e.dbsize(&cx, 0), 10);
        put(&e, 0, b"live", b"v", 0);
        for _ in 0..20 {
            assert_eq!(random_key(&e, &cx, 0), Some(b"live".to_vec()));
        }
        assert_eq!(e.dbsize(&cx, 0), 11);
    }

    /// DEL, COPY, RENAME, MOVE, EXPIRE and PERSIST against a BTreeMap model,
    /// over two databases and a handful of keys so collisions are frequent.
    #[test]
    fn random_ops_match_a_model() {
        let e = engine();
        // (db, key) -> (value, expire_at)
        let mut model: BTreeMap<(usize, Vec<u8>), (Vec<u8>, u64)> = BTreeMap::new();
        let far = crate::clock::now_ms() + 10_000_000;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for step in 0..5_000u64 {
            let db = next(2) as usize;
            let db2 = next(2) as usize;
            let a = format!("k{}", next(6)).into_bytes();
            let b = format!("k{}", next(6)).into_bytes();
            let (ka, kb) = (e.key(&a), e.key(&b));
            let mut g = e.lock_keys(&crate::cx::testing::cx(), &[ka, kb]);
            match next(7) {
                0 | 1 => {
                    let v = step.to_string().into_bytes();
                    g.set(db, &ka, Value::Str(StrValue::from_bytes(&v)), Expiry::Clear);
                    model.insert((db, a.clone()), (v, 0));
                }
                2 => {
                    let n = del(&mut g, db, &[ka, kb], drop);
                    let m = usize::from(model.remove(&(db, a.clone())).is_some())
                        + usize::from(model.remove(&(db, b.clone())).is_some());
                    assert_eq!(n, m);
                }
                3 => {
                    let replace = next(2) == 0;
                    let got = copy(&mut g, db, &ka, db2, &kb, replace, drop);
                    let want = if db == db2 && a == b {
                        Err(Error::SameObject)
                    } else {
                        match model.get(&(db, a.clone())).cloned() {
                            Some(v) if replace || !model.contains_key(&(db2, b.clone())) => {
                                model.insert((db2, b.clone()), v);
                                Ok(true)
                            }
                            _ => Ok(false),
                        }
                    };
                    assert_eq!(got, want);
                }
                4 => {
                    let nx = next(2) == 0;
                    let got = rename(&mut g, db, &ka, &kb, nx);
                    let want = match model.get(&(db, a.clone())).cloned() {
                        None => Err(Error::NoSuchKey),
                        Some(_) if a == b => Ok(!nx),
                        Some(_) if nx && model.contains_key(&(db, b.clone())) => Ok(false),
                        Some(v) => {
                            model.remove(&(db, a.clone()));
                            model.insert((db, b.clone()), v);
                            Ok(true)
                        }
                    };
                    assert_eq!(got, want);
                }
                5 => {
                    let got = move_key(&mut g, db, db2, &ka);
                    let want = if db == db2 {
                        Err(Error::SameObject)
                    } else {
                        match model.get(&(db, a.clone())).cloned() {
                            Some(v) if !model.contains_key(&(db2, a.clone())) => {
                                model.remove(&(db, a.clone()));
                                model.insert((db2, a.clone()), v);
                                Ok(true)
                            }
                            _ => Ok(false),
                        }
                    };
                    assert_eq!(got, want);
                }
                _ => {
                    if next(2) == 0 {
                        let at = far + next(100);
                        let set = matches!(
                            expire(&mut g, db, &ka, at as i64, ExpireCond::default()),
                            ExpireOutcome::Set
                        );
                        let m = model.get_mut(&(db, a.clone()));
                        assert_eq!(set, m.is_some());
                        if let Some(m) = m {
                            m.1 = at;
                        }
                    } else {
                        let got = persist(&mut g, db, &ka);
                        let want = match model.get_mut(&(db, a.clone())) {
                            Some(m) if m.1 != 0 => {
                                m.1 = 0;
                                true
                            }
                            _ => false,
                        };
                        assert_eq!(got, want);
                    }
                }
            }
            drop(g);
            if step % 97 == 0 {
                for d in 0..2 {
                    for i in 0..6 {
                        let key = format!("k{i}").into_bytes();
                        let want = model.get(&(d, key.clone()));
                        assert_eq!(get(&e, d, &key).as_ref(), want.map(|w| &w.0));
                        let t = ttl_of(&e, d, &key);
                        let want_t = match want {
                            None => Ttl::Missing,
                            Some((_, 0)) => Ttl::Persistent,
                            Some((_, at)) => Ttl::At(*at),
                        };
                        assert_eq!(t, want_t);
                    }
                }
            }
        }
    }

    /// Every keyspace event recorded since the last call, as
    /// `event:key` (`@db` when not 0).
    fn events() -> Vec<String> {
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|e| match e {
                crate::events::Event::Notify { event, key, db, .. } => {
                    let key = String::from_utf8_lossy(&key).into_owned();
                    Some(if db == 0 {
                        format!("{event}:{key}")
                    } else {
                        format!("{event}:{key}@{db}")
                    })
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn notifications_follow_db_c_and_expire_c() {
        let e = engine();
        e.limits
            .notify
            .store(u32::MAX, std::sync::atomic::Ordering::Relaxed);
        put(&e, 0, b"a", b"1", 0);
        put(&e, 0, b"b", b"1", 0);
        events();
        let names: [&[u8]; 5] = [b"a", b"b", b"c", b"d", b"nosuch"];
        let k: Vec<Key> = names.iter().map(|n| e.key(n)).collect();
        let mut g = e.lock_all(&crate::cx::testing::cx());
        let far = crate::clock::now_ms() as i64 + 1_000_000;
        expire(&mut g, 0, &k[0], far, ExpireCond::default());
        assert_eq!(events(), ["expire:a"]);
        expire(&mut g, 0, &k[4], far, ExpireCond::default());
        assert_eq!(events(), Vec::<String>::new());
        assert!(persist(&mut g, 0, &k[0]));
        assert!(!persist(&mut g, 0, &k[0]));
        assert_eq!(events(), ["persist:a"]);
        // Renaming onto an existing key: the destination is created anew.
        assert_eq!(rename(&mut g, 0, &k[0], &k[1], false), Ok(true));
        assert_eq!(events(), ["new:b", "rename_from:a", "rename_to:b"]);
        assert_eq!(rename(&mut g, 0, &k[1], &k[1], false), Ok(true));
        assert_eq!(events(), Vec::<String>::new());
        assert_eq!(move_key(&mut g, 0, 1, &k[1]), Ok(true));
        assert_eq!(events(), ["new:b@1", "move_from:b", "move_to:b@1"]);
        assert_eq!(copy(&mut g, 1, &k[1], 0, &k[2], false, drop), Ok(true));
        assert_eq!(events(), ["new:c", "copy_to:c"]);
        assert_eq!(copy(&mut g, 1, &k[1], 0, &k[2], false, drop), Ok(false));
        assert_eq!(events(), Vec::<String>::new());
        assert_eq!(copy(&mut g, 1, &k[1], 0, &k[2], true, drop), Ok(true));
        assert_eq!(events(), ["new:c", "copy_to:c"]);
        assert_eq!(del(&mut g, 0, &k[2..], drop), 1);
        assert_eq!(events(), ["del:c"]);
        assert_eq!(exists(&mut g, 0, &k[3..4]), 0);
        assert_eq!(key_type(&mut g, 0, &k[3]), None);
        assert_eq!(ttl(&mut g, 0, &k[3]), Ttl::Missing);
        assert_eq!(object(&mut g, 0, &k[3]), None);
        assert_eq!(events(), ["keymiss:d", "keymiss:d", "keymiss:d"]);
        assert!(matches!(
            expire(&mut g, 1, &k[1], -1, ExpireCond::default()),
            ExpireOutcome::Deleted(_)
        ));
        assert_eq!(events(), ["del:b@1"]);
    }
}
