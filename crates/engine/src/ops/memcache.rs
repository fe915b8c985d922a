//! Memcached item operations on the keyspace: what memcached 1.6's
//! `do_store_item`, `do_add_delta`, `item_touch` and the meta commands do
//! to an item, done to Cairn keys. The server's memcached handlers parse
//! the wire and format replies; these functions only change the keyspace.
//!
//! The mapping (also in docs/design.md, "memcached"):
//! - An item is a string key in the database the caller passes (the
//!   server always passes 0). Its bytes are the string; its client flags,
//!   CAS and item bits live in `StrValue::Mc`. A plain string (written over
//!   RESP) reads as flags 0 and becomes an `Mc` item the first time
//!   memcached reads it, so that its CAS and fetch state can be kept.
//! - A key of another type is not an item: reads miss it, and conditional
//!   writes fail the way memcached fails them (add: NOT_STORED, append and
//!   prepend: NOT_STORED, cas: EXISTS, incr/decr: non-numeric). `set` and
//!   `replace` overwrite it, as SET and SET XX do; `delete` removes it.
//! - Writes record the keyspace event of the Redis command a Redis client
//!   would use for the same change: `set` (set/add/replace/cas, prepend,
//!   vivify), `append`, `incrby` (incr and decr, as INCRBY/DECRBY), `del`,
//!   `expire`/`persist` (touch, gat, TTL flags). `Guard::set`, `remove` and
//!   `set_expire` tell WATCH; in-place changes call `g.modified`.
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::value::string::{mc_bits, next_cas};
use crate::value::{StrValue, Value};
use crate::Entry;
use cairn_num::memcache::strtoull;

/// memcached's `REALTIME_MAXDELTA`: a larger exptime is a Unix time.
pub const MAX_RELATIVE_SECS: i64 = 60 * 60 * 24 * 30;

/// A memcached exptime as an expiry (memcached `realtime()`): 0 never
/// expires, up to 30 days is relative seconds, above that an absolute Unix
/// time, and a negative value (or an absolute time already past) is an
/// item that is expired at once. Expired is `At(1)`: a deadline in 1970
/// (0 would mean "no expiry").
pub fn expiry(exptime: i64, now_ms: u64) -> Expiry {
    if exptime == 0 {
        Expiry::Clear
    } else if exptime < 0 {
        Expiry::At(1)
    } else if exptime > MAX_RELATIVE_SECS {
        Expiry::At((exptime as u64 * 1000).max(1))
    } else {
        Expiry::At(now_ms + exptime as u64 * 1000)
    }
}

/// Seconds left before the entry expires as memcached reports them (`t`
/// flag, `ma t`): -1 without a TTL, else rounded up, so a TTL just set to
/// 60 reads 60 as it does in memcached (whose clock ticks in seconds).
pub fn ttl_secs(e: &Entry, now_ms: u64) -> i64 {
    match e.expire_at() {
        0 => -1,
        at => (at.saturating_sub(now_ms)).div_ceil(1000) as i64,
    }
}

/// The live string at `k`, for memcached. A read (`bump`) counts a
/// keyspace hit or miss and records the access, like GET; `mg u` does
/// neither. None for a missing key or a key of another type.
pub fn lookup<'g>(g: &'g mut Guard, db: usize, k: &Key, bump: bool) -> Option<&'g mut Entry> {
    let e = if bump { g.read(db, k) } else { g.peek(db, k) }?;
    matches!(e.value, Value::Str(_)).then_some(e)
}

/// Counts a read made through `Guard::peek` the way `Guard::read` counts
/// one (a keyspace hit, or a miss and its `keymiss` event), for `mg`,
/// which must see an item's access time and fetch state as they were
/// before the read.
pub fn count_read(g: &mut Guard, db: usize, k: &Key, hit: bool) {
    if hit {
        g.stats_mut(k).keyspace_hits += 1;
    } else {
        g.stats_mut(k).keyspace_misses += 1;
        g.notify(class::KEY_MISS, "keymiss", db, k);
    }
}

/// The string of an entry `lookup` returned.
pub fn item(e: &mut Entry) -> &mut StrValue {
    match &mut e.value {
        Value::Str(s) => s,
        _ => unreachable!("lookup returns strings only"),
    }
}

/// How a storage command treats an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    /// Only if absent (an existing item is only bumped in the LRU).
    Add,
    /// Only if present.
    Replace,
    Append,
    Prepend,
    /// Only if present and its CAS is `Store::cas`.
    Cas,
}

/// A storage request: the text commands and `ms`.
#[derive(Clone, Copy, Debug)]
pub struct Store<'a> {
    pub mode: StoreMode,
    pub data: &'a [u8],
    /// `data`'s own buffer when the server read a large value into one:
    /// a new item then keeps that buffer instead of copying it.
    pub shared: Option<&'a std::sync::Arc<Vec<u8>>>,
    pub flags: u32,
    /// Ignored by append and prepend, which keep the item's TTL.
    pub expiry: Expiry,
    /// Compared in `Cas` mode; in append/prepend mode, compared when
    /// non-zero (`ms MA C...`).
    pub cas: u64,
    /// `ms I`: a CAS mismatch with an *older* CAS stores the value anyway
    /// but marks it stale (keeping the item's TTL).
    pub invalidate: bool,
    /// Assign and return the new item's CAS (`ms c`).
    pub want_cas: bool,
    /// The key was sent base64-encoded (`b`): `k` returns it that way.
    pub key_binary: bool,
    /// proto-max-bulk-len: append/prepend may not grow the item past it.
    pub max_len: usize,
}

/// What a storage request did (memcached `store_item_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// Stored; the CAS when asked for (else 0).
    Stored(u64),
    NotStored,
    Exists,
    NotFound,
    /// Append/prepend would pass `max_len`: nothing changed (memcached,
    /// failing to allocate the combined item, answers NOT_STORED).
    TooLarge,
}

/// What `store` does once it has looked at the key.
enum Next {
    /// Store a new item with this TTL (stale: with these extra bits).
    Fresh(Expiry, u8),
    /// Appended or prepended in place; the CAS if asked for.
    Edited(u64),
    Done(Stored),
}

/// Runs a storage command against `k` (memcached `do_store_item`).
pub fn store(g: &mut Guard, db: usize, k: &Key, req: &Store) -> Stored {
    use StoreMode::*;
    let bits = if req.key_binary {
        mc_bits::KEY_BINARY
    } else {
        0
    };
    // A plain set needs no look first: one lookup, not two (the hot path).
    let found = if req.mode == Set {
        None
    } else {
        g.write(db, k)
    };
    let next = match found {
        None => match req.mode {
            Set | Add => Next::Fresh(req.expiry, 0),
            Replace | Append | Prepend => Next::Done(Stored::NotStored),
            Cas => Next::Done(Stored::NotFound),
        },
        // `g.write` recorded the access: memcached's add bumps an
        // existing item in the LRU too.
        Some(e) => match (&mut e.value, req.mode) {
            (_, Set | Replace) => Next::Fresh(req.expiry, 0),
            (_, Add) => Next::Done(Stored::NotStored),
            (Value::Str(s), Append | Prepend) => {
                if req.cas != 0 && !s.cas_matches(req.cas) {
                    Next::Done(Stored::Exists)
                } else if s.len().saturating_add(req.data.len()) > req.max_len {
                    Next::Done(Stored::TooLarge)
                } else {
                    let old = std::mem::replace(s, StrValue::Int(0));
                    let flags = old.mc_flags();
                    // The item keeps how its key was first stored.
                    let bits = old.mc_bits() & mc_bits::KEY_BINARY;
                    let mut data = old.into_vec();
                    if req.mode == Append {
                        crate::value::string::reserve(&mut data, req.data.len());
                        data.extend_from_slice(req.data);
                    } else {
                        data.splice(0..0, req.data.iter().copied());
                    }
                    *s = StrValue::mc_vec(data, flags, bits);
                    Next::Edited(if req.want_cas { s.cas() } else { 0 })
                }
            }
            (_, Append | Prepend) => Next::Done(Stored::NotStored),
            (Value::Str(s), Cas) => {
                if s.cas_matches(req.cas) {
                    Next::Fresh(req.expiry, 0)
                } else if req.invalidate && req.cas < s.cas() {
                    // An older writer may still store, as a stale value:
                    // the item keeps its TTL and its win token (memcached
                    // `do_store_item` with `set_stale`).
                    Next::Fresh(
                        Expiry::Keep,
                        mc_bits::STALE | (s.mc_bits() & mc_bits::TOKEN_SENT),
                    )
                } else {
                    Next::Done(Stored::Exists)
                }
            }
            (_, Cas) => Next::Done(Stored::Exists),
        },
    };
    match next {
        Next::Done(r) => r,
        Next::Edited(cas) => {
            g.modified(db, k);
            crate::record::stage_item(g, db, k);
            // Redis has no PREPEND: a Redis client would rewrite the value.
            let event = if req.mode == Append { "append" } else { "set" };
            g.notify(class::STRING, event, db, k);
            Stored::Stored(cas)
        }
        Next::Fresh(expiry, extra) => {
            let v = match req.shared {
                Some(a) if a.len() >= crate::value::string::LARGE_MIN => StrValue::Large {
                    data: crate::value::string::BigBytes::from_arc(a.clone()),
                    cas: 0,
                    flags: req.flags,
                    bits: bits | extra,
                },
                _ => StrValue::mc_vec(req.data.to_vec(), req.flags, bits | extra),
            };
            finish_store(g, db, k, v, expiry, req.want_cas)
        }
    }
}

/// Stores a whole new item, as SET does, and returns `Stored`.
fn finish_store(
    g: &mut Guard,
    db: usize,
    k: &Key,
    mut v: StrValue,
    expiry: Expiry,
    want_cas: bool,
) -> Stored {
    let cas = if want_cas { v.cas() } else { 0 };
    g.set(db, k, Value::Str(v), expiry);
    crate::record::stage_item(g, db, k);
    g.notify(class::STRING, "set", db, k);
    if matches!(expiry, Expiry::At(_)) {
        g.notify(class::GENERIC, "expire", db, k);
    }
    Stored::Stored(cas)
}

/// Sets the TTL of a live item (touch, gat, `T` flags). False if there is
/// no item. `Clear` removes the TTL.
pub fn touch(g: &mut Guard, db: usize, k: &Key, expiry: Expiry) -> bool {
    let Some(e) = g.peek(db, k) else {
        return false;
    };
    if !matches!(e.value, Value::Str(_)) {
        return false;
    }
    let had_ttl = e.expire_at() != 0;
    set_ttl(g, db, k, expiry, had_ttl);
    crate::record::stage_item(g, db, k);
    true
}

/// Applies `expiry` to a key known to exist, with its event.
fn set_ttl(g: &mut Guard, db: usize, k: &Key, expiry: Expiry, had_ttl: bool) {
    match expiry {
        Expiry::Keep => {}
        Expiry::Clear => {
            if had_ttl {
                g.set_expire(db, k, 0);
                g.notify(class::GENERIC, "persist", db, k);
            }
        }
        Expiry::At(at) => {
            g.set_expire(db, k, at);
            g.notify(class::GENERIC, "expire", db, k);
        }
    }
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    NotFound,
    /// `md C...` did not match.
    Exists,
    /// `md I`: marked stale instead of removed.
    Invalidated,
}

/// delete / md: removes the key (any type, as DEL), or with `cas` only if
/// the item's CAS matches, or with `invalidate` marks the item stale, gives
/// it a new CAS and, with `Some(expiry)`, a new TTL.
pub fn delete(
    g: &mut Guard,
    db: usize,
    k: &Key,
    cas: Option<u64>,
    invalidate: Option<Expiry>,
) -> Deleted {
    let Some(e) = g.peek(db, k) else {
        return Deleted::NotFound;
    };
    let had_ttl = e.expire_at() != 0;
    let s = match &mut e.value {
        Value::Str(s) => Some(s),
        _ => None,
    };
    if let Some(want) = cas {
        match &s {
            Some(s) if s.cas_matches(want) => {}
            _ => return Deleted::Exists,
        }
    }
    if let Some(expiry) = invalidate {
        let Some(s) = s else {
            return Deleted::NotFound;
        };
        let (_, c, _, bits) = s.as_mc();
        *c = next_cas();
        *bits = (*bits | mc_bits::STALE) & !mc_bits::TOKEN_SENT;
        g.modified(db, k);
        set_ttl(g, db, k, expiry, had_ttl);
        crate::record::stage_item(g, db, k);
        return Deleted::Invalidated;
    }
    drop(g.remove(db, k));
    crate::record::stage_item(g, db, k);
    g.notify(class::GENERIC, "del", db, k);
    Deleted::Deleted
}

/// What incr/decr/ma did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// The new value.
    Value(u64),
    /// `ma N`: the item was created with this initial value.
    Created(u64),
    NotFound,
    /// Not a decimal unsigned 64-bit number (or not a string).
    NonNumeric,
    /// `ma C...` did not match.
    Exists,
}

/// incr/decr/ma (memcached `do_add_delta`): the value must read as an
/// unsigned 64-bit decimal as memcached's `safe_strtoull` reads the
/// item's data, which ends in "\r\n" (`cairn_num::memcache::strtoull`:
/// "-1" is not a number but "-0" is 0, an empty value is not a number);
/// incr wraps at 2^64, decr stops at 0. The result is stored as its decimal text (memcached pads a
/// shorter result with spaces; Cairn stores the exact digits), keeping the
/// item's flags and TTL, with a new CAS. `vivify` (`ma N`): on a miss,
/// create the item with this TTL and initial value instead.
pub fn arith(
    g: &mut Guard,
    db: usize,
    k: &Key,
    incr: bool,
    delta: u64,
    cas: u64,
    vivify: Option<(Expiry, u64)>,
) -> Arith {
    let Some(e) = g.write(db, k) else {
        let Some((expiry, initial)) = vivify else {
            return Arith::NotFound;
        };
        let text = itoa::Buffer::new().format(initial).as_bytes().into();
        g.set(db, k, Value::Str(StrValue::mc(text, 0)), expiry);
        crate::record::stage_item(g, db, k);
        g.notify(class::STRING, "set", db, k);
        if matches!(expiry, Expiry::At(_)) {
            g.notify(class::GENERIC, "expire", db, k);
        }
        return Arith::Created(initial);
    };
    let Value::Str(s) = &mut e.value else {
        return Arith::NonNumeric;
    };
    if cas != 0 && !s.cas_matches(cas) {
        return Arith::Exists;
    }
    let Some(cur) = s.with_bytes(strtoull) else {
        return Arith::NonNumeric;
    };
    let new = if incr {
        cur.wrapping_add(delta)
    } else {
        cur.saturating_sub(delta)
    };
    let flags = s.mc_flags();
    let text = itoa::Buffer::new().format(new).as_bytes().to_vec();
    *s = if flags != 0 || matches!(s, StrValue::Mc { .. }) {
        StrValue::mc(text.into_boxed_slice(), flags)
    } else {
        StrValue::from_vec(text)
    };
    g.modified(db, k);
    crate::record::stage_item(g, db, k);
    g.notify(class::STRING, "incrby", db, k);
    Arith::Value(new)
}

/// `mg N`: on a miss, creates an empty item with this TTL. The reader
/// that created it is told it "won" the right to recache it (the server
/// sets `TOKEN_SENT` when it sends that W flag).
pub fn vivify(g: &mut Guard, db: usize, k: &Key, expiry: Expiry, key_binary: bool) {
    let mut v = StrValue::mc(Box::default(), 0);
    if let StrValue::Mc { bits, .. } = &mut v {
        *bits = if key_binary { mc_bits::KEY_BINARY } else { 0 };
    }
    g.set(db, k, Value::Str(v), expiry);
    crate::record::stage_item(g, db, k);
    g.notify(class::STRING, "set", db, k);
    if matches!(expiry, Expiry::At(_)) {
        g.notify(class::GENERIC, "expire", db, k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::{engine, with};

    fn put(
        g: &mut Guard,
        key: &[u8],
        mode: StoreMode,
        data: &[u8],
        flags: u32,
        cas: u64,
    ) -> Stored {
        let k = g.key(key);
        store(
            g,
            0,
            &k,
            &Store {
                mode,
                data,
                flags,
                expiry: Expiry::Clear,
                shared: None,
                cas,
                invalidate: false,
                want_cas: false,
                key_binary: false,
                max_len: 1 << 20,
            },
        )
    }

    fn read(g: &mut Guard, key: &[u8]) -> Option<(Vec<u8>, u32, u64)> {
        let k = g.key(key);
        let e = lookup(g, 0, &k, true)?;
        let s = item(e);
        let cas = s.cas();
        Some((s.to_vec(), s.mc_flags(), cas))
    }

    #[test]
    fn expiry_follows_memcached_realtime() {
        let now = 1_700_000_000_000;
        assert_eq!(expiry(0, now), Expiry::Clear);
        assert_eq!(expiry(-1, now), Expiry::At(1));
        assert_eq!(expiry(10, now), Expiry::At(now + 10_000));
        assert_eq!(
            expiry(MAX_RELATIVE_SECS, now),
            Expiry::At(now + MAX_RELATIVE_SECS as u64 * 1000)
        );
        assert_eq!(
            expiry(MAX_RELATIVE_SECS + 1, now),
            Expiry::At((MAX_RELATIVE_SECS as u64 + 1) * 1000)
        );
        assert_eq!(expiry(1_800_000_000, now), Expiry::At(1_800_000_000_000));
    }

    #[test]
    fn storage_modes() {
        let e = engine();
        with(&e, |g| {
            assert_eq!(put(g, b"k", StoreMode::Add, b"a", 1, 0), Stored::Stored(0));
            assert_eq!(put(g, b"k", StoreMode::Add, b"b", 1, 0), Stored::NotStored);
            assert_eq!(
                put(g, b"x", StoreMode::Replace, b"b", 1, 0),
                Stored::NotStored
            );
            assert_eq!(
                put(g, b"k", StoreMode::Replace, b"b", 2, 0),
                Stored::Stored(0)
            );
            assert_eq!(
                put(g, b"k", StoreMode::Append, b"c", 9, 0),
                Stored::Stored(0)
            );
            assert_eq!(
                put(g, b"k", StoreMode::Prepend, b"a", 9, 0),
                Stored::Stored(0)
            );
            assert_eq!(
                read(g, b"k").map(|r| (r.0, r.1)),
                Some((b"abc".to_vec(), 2))
            );
            assert_eq!(
                put(g, b"x", StoreMode::Append, b"c", 0, 0),
                Stored::NotStored
            );
            assert_eq!(put(g, b"x", StoreMode::Cas, b"c", 0, 5), Stored::NotFound);
        });
    }

    #[test]
    fn cas_changes_with_every_write_from_either_protocol() {
        let e = engine();
        with(&e, |g| {
            put(g, b"k", StoreMode::Set, b"v", 3, 0);
            let (_, _, c1) = read(g, b"k").unwrap();
            assert_eq!(read(g, b"k").unwrap().2, c1, "reads keep the CAS");
            assert_eq!(
                put(g, b"k", StoreMode::Cas, b"w", 4, c1 + 100),
                Stored::Exists
            );
            assert_eq!(put(g, b"k", StoreMode::Cas, b"w", 4, c1), Stored::Stored(0));
            assert_eq!(put(g, b"k", StoreMode::Cas, b"z", 4, c1), Stored::Exists);
            let (v, f, c2) = read(g, b"k").unwrap();
            assert_eq!((v.as_slice(), f), (&b"w"[..], 4));
            assert!(c2 > c1);
            // A RESP APPEND keeps the flags and changes the CAS.
            let k = g.key(b"k");
            crate::ops::string::append(g, 0, &k, b"!").unwrap();
            let (v, f, c3) = read(g, b"k").unwrap();
            assert_eq!((v.as_slice(), f), (&b"w!"[..], 4));
            assert!(c3 > c2);
            // A RESP INCR too.
            put(g, b"n", StoreMode::Set, b"41", 8, 0);
            let c4 = read(g, b"n").unwrap().2;
            let k = g.key(b"n");
            assert_eq!(crate::ops::string::incr_by(g, 0, &k, 1).unwrap(), 42);
            let (v, f, c5) = read(g, b"n").unwrap();
            assert_eq!((v.as_slice(), f, c5 > c4), (&b"42"[..], 8, true));
            // A RESP SET stores a plain string: flags 0, new CAS.
            let k = g.key(b"n");
            crate::ops::string::set(
                g,
                0,
                &k,
                b"x",
                crate::ops::string::Cond::Always,
                Expiry::Keep,
                false,
            )
            .unwrap();
            let (_, f, c6) = read(g, b"n").unwrap();
            assert_eq!(f, 0);
            assert!(c6 > c5);
        });
    }

    #[test]
    fn stale_cas_store_with_invalidate() {
        let e = engine();
        with(&e, |g| {
            put(g, b"k", StoreMode::Set, b"v", 0, 0);
            let c = read(g, b"k").unwrap().2;
            let k = g.key(b"k");
            let mut req = Store {
                mode: StoreMode::Cas,
                data: b"old",
                shared: None,
                flags: 0,
                expiry: Expiry::Clear,
                cas: c - 1,
                invalidate: true,
                want_cas: true,
                key_binary: false,
                max_len: 100,
            };
            let Stored::Stored(nc) = store(g, 0, &k, &req) else {
                panic!("an older CAS with I stores")
            };
            assert!(nc > c);
            let bits = item(lookup(g, 0, &k, false).unwrap()).mc_bits();
            assert_eq!(bits & mc_bits::STALE, mc_bits::STALE);
            req.cas = nc + 10;
            assert_eq!(store(g, 0, &k, &req), Stored::Exists, "a newer CAS never");
        });
    }

    #[test]
    fn other_types_are_not_items() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"h");
            g.set(0, &k, Value::Hash(Box::default()), Expiry::Clear);
            assert!(lookup(g, 0, &k, true).is_none());
            assert_eq!(put(g, b"h", StoreMode::Add, b"a", 0, 0), Stored::NotStored);
            assert_eq!(
                put(g, b"h", StoreMode::Append, b"a", 0, 0),
                Stored::NotStored
            );
            assert_eq!(put(g, b"h", StoreMode::Cas, b"a", 0, 1), Stored::Exists);
            assert_eq!(arith(g, 0, &k, true, 1, 0, None), Arith::NonNumeric);
            assert!(!touch(g, 0, &k, Expiry::Clear));
            assert_eq!(
                put(g, b"h", StoreMode::Replace, b"a", 0, 0),
                Stored::Stored(0)
            );
            assert!(lookup(g, 0, &k, true).is_some());
        });
    }

    #[test]
    fn arithmetic() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"n");
            assert_eq!(arith(g, 0, &k, true, 1, 0, None), Arith::NotFound);
            put(g, b"n", StoreMode::Set, b"10", 5, 0);
            assert_eq!(arith(g, 0, &k, false, 3, 0, None), Arith::Value(7));
            assert_eq!(arith(g, 0, &k, false, 30, 0, None), Arith::Value(0));
            assert_eq!(
                arith(g, 0, &k, true, u64::MAX, 0, None),
                Arith::Value(u64::MAX)
            );
            assert_eq!(arith(g, 0, &k, true, 2, 0, None), Arith::Value(1));
            assert_eq!(read(g, b"n").map(|r| (r.0, r.1)), Some((b"1".to_vec(), 5)));
            let c = read(g, b"n").unwrap().2;
            assert_eq!(arith(g, 0, &k, true, 1, c + 1, None), Arith::Exists);
            assert_eq!(arith(g, 0, &k, true, 1, c, None), Arith::Value(2));
            let v = g.key(b"v");
            assert_eq!(
                arith(g, 0, &v, true, 1, 0, Some((Expiry::Clear, 7))),
                Arith::Created(7)
            );
            put(g, b"s", StoreMode::Set, b"abc", 0, 0);
            let s = g.key(b"s");
            assert_eq!(arith(g, 0, &s, true, 1, 0, None), Arith::NonNumeric);
        });
    }

    #[test]
    fn delete_and_invalidate() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            assert_eq!(delete(g, 0, &k, None, None), Deleted::NotFound);
            put(g, b"k", StoreMode::Set, b"v", 0, 0);
            let c = read(g, b"k").unwrap().2;
            assert_eq!(delete(g, 0, &k, Some(c + 1), None), Deleted::Exists);
            assert_eq!(
                delete(g, 0, &k, Some(c), Some(Expiry::Keep)),
                Deleted::Invalidated
            );
            let (_, _, c2) = read(g, b"k").unwrap();
            assert!(c2 > c);
            let bits = item(lookup(g, 0, &k, false).unwrap()).mc_bits();
            assert_eq!(bits & mc_bits::STALE, mc_bits::STALE);
            assert_eq!(delete(g, 0, &k, None, None), Deleted::Deleted);
            assert!(read(g, b"k").is_none());
        });
    }
}
