//! Hash operations (Redis 7.0 `src/t_hash.c`): HSET, HSETNX, HDEL,
//! HINCRBY, HINCRBYFLOAT and the read side (HGET, HLEN, HEXISTS, HSTRLEN,
//! plus `view` for the commands that walk the whole hash), HRANDFIELD's
//! sampling and one HSCAN step.
//!
//! Owns the keyspace side of those commands: which lookup each one does
//! (read lookups count hits and misses, as `lookupKeyRead` does), when a
//! key is created (`hashTypeLookupWriteOrCreate`) and that a hash left
//! empty is deleted (HDEL). The encodings and their conversion rules live
//! in `value::hash`; the wire replies live in the server.
//!
//! Every write tells WATCH (`g.modified`) and records the notification
//! `t_hash.c` sends: `hset` (HSET, HMSET, and HSETNX when it set),
//! `hdel` (then `del` when the hash is gone), `hincrby`, `hincrbyfloat`.
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::sample;
use crate::ops::{as_hash, as_hash_mut};
use crate::util::glob;
use crate::util::num::{self, FloatIncrError, LdClass};
use crate::value::{hash, HashValue, HashView, Value};
use crate::{Error, Result};

/// Calls `f` with a view of the hash under `k` (None when the key is
/// absent), or fails with WRONGTYPE. A read lookup: counts a hit or miss and
/// touches the key, like Redis's `lookupKeyRead`. The shard stays locked
/// while `f` runs, so `f` can write a reply straight from the stored bytes
/// (for a coded hash, from values decoded as they are asked for).
pub fn view<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<&HashView>) -> R,
) -> Result<R> {
    match g.read(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(&as_hash(&e.value)?.view()))),
    }
}

/// HGET key field: calls `f` with the value (None if key or field is absent).
pub fn hget<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    field: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R> {
    view(g, db, k, |h| f(h.and_then(|h| h.get(field))))
}

/// HLEN key: number of fields, 0 for a missing key.
pub fn hlen(g: &mut Guard, db: usize, k: &Key) -> Result<usize> {
    match g.read(db, k) {
        None => Ok(0),
        Some(e) => Ok(as_hash(&e.value)?.len()),
    }
}

/// HEXISTS key field.
pub fn hexists(g: &mut Guard, db: usize, k: &Key, field: &[u8]) -> Result<bool> {
    view(g, db, k, |h| h.is_some_and(|h| h.contains(field)))
}

/// HSTRLEN key field: the value's length, 0 if key or field is absent.
pub fn hstrlen(g: &mut Guard, db: usize, k: &Key, field: &[u8]) -> Result<usize> {
    view(g, db, k, |h| {
        h.and_then(|h| h.get(field)).map_or(0, <[u8]>::len)
    })
}

/// Runs `f` on the hash under `k`, creating an empty one first if the key
/// is absent (Redis `hashTypeLookupWriteOrCreate`). A new hash is stored
/// only if `f` succeeded and left it non-empty, so a failed write never
/// leaves an empty key behind (Redis would, but none of its callers can
/// fail once the key was created: every argument is checked before).
/// The hash is sealed (coded or trimmed) after `f`, error or not, so `f`
/// can edit it field by field and the buffer is sized once.
fn write_or_create<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(&mut HashValue, &hash::HashLimits) -> Result<R>,
) -> Result<R> {
    let limits = g.engine().limits.hash();
    match g.write(db, k) {
        Some(e) => {
            let h = as_hash_mut(&mut e.value)?;
            let r = f(h, &limits);
            h.seal();
            r
        }
        None => {
            let mut h = HashValue::new();
            let r = f(&mut h, &limits)?;
            h.seal();
            if !h.is_empty() {
                g.set(db, k, Value::Hash(Box::new(h)), Expiry::Clear);
            }
            Ok(r)
        }
    }
}

/// HSET/HMSET key field value [field value ...]: sets every pair in order
/// (a field named twice keeps the last value) and returns how many fields
/// were new. Encoding conversions follow `HashValue::set`; Redis checks all
/// argument lengths up front (`hashTypeTryConversion`), which converts at
/// the same point of the command as checking pair by pair does, since a
/// converted hash never goes back.
pub fn hset<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<usize> {
    let created = write_or_create(g, db, k, |h, limits| {
        if !h.is_empty() {
            return Ok(pairs
                .into_iter()
                .filter(|(f, v)| h.set(f, v, limits))
                .count());
        }
        // A new hash (a YCSB insert): built in one pass when its names are
        // a known list (`HashValue::fill_coded`). Otherwise a field can
        // only be there already if this command named it before, so compare
        // with the fields named so far (short slices) instead of walking
        // the buffer for each field.
        let pairs: smallvec::SmallVec<[(&[u8], &[u8]); 16]> = pairs.into_iter().collect();
        if h.fill_coded(&pairs, limits) {
            return Ok(pairs.len());
        }
        let mut named: smallvec::SmallVec<[&[u8]; 16]> = smallvec::SmallVec::new();
        let mut created = 0;
        for (f, v) in pairs {
            if named.contains(&f) {
                h.set(f, v, limits);
            } else {
                h.set_absent(f, v, limits);
                named.push(f);
                created += 1;
            }
        }
        Ok(created)
    })?;
    // Redis signals and notifies even when every field already had its value.
    changed(g, db, k, "hset");
    Ok(created)
}

/// A hash written in place: WATCH is told and `event` notified.
fn changed(g: &mut Guard, db: usize, k: &Key, event: &'static str) {
    g.modified(db, k);
    g.notify(class::HASH, event, db, k);
}

/// HSETNX key field value: true if the field was absent and is now set.
/// An existing field leaves the hash, encoding included, untouched.
pub fn hsetnx(g: &mut Guard, db: usize, k: &Key, field: &[u8], value: &[u8]) -> Result<bool> {
    let set = write_or_create(g, db, k, |h, limits| Ok(h.set_nx(field, value, limits)))?;
    if set {
        changed(g, db, k, "hset");
    }
    Ok(set)
}

/// HDEL key field [field ...]: the number of fields removed. Removing the
/// last field deletes the key, as Redis does.
pub fn hdel<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    fields: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize> {
    let (removed, now_empty) = match g.write(db, k) {
        None => return Ok(0),
        Some(e) => {
            let h = as_hash_mut(&mut e.value)?;
            let mut removed = 0;
            for f in fields {
                if h.remove(f) {
                    removed += 1;
                    // Redis stops here too: nothing is left to delete.
                    if h.is_empty() {
                        break;
                    }
                }
            }
            h.seal();
            (removed, h.is_empty())
        }
    };
    if removed > 0 {
        changed(g, db, k, "hdel");
    }
    if now_empty {
        drop(g.remove(db, k));
        g.notify(class::GENERIC, "del", db, k);
    }
    Ok(removed)
}

/// HINCRBY key field incr: the new value. A missing field counts as 0; a
/// stored value must be what `string2ll` accepts (`HashNotInteger`), and
/// the sum must fit an i64 (`Overflow`); either error leaves it unchanged.
pub fn hincrby(g: &mut Guard, db: usize, k: &Key, field: &[u8], incr: i64) -> Result<i64> {
    let new = write_or_create(g, db, k, |h, limits| {
        let old = match h.view().get(field) {
            None => 0,
            Some(v) => num::parse_i64(v).ok_or(Error::HashNotInteger)?,
        };
        let new = old.checked_add(incr).ok_or(Error::Overflow)?;
        let mut text = itoa::Buffer::new();
        h.set(field, text.format(new).as_bytes(), limits);
        Ok(new)
    })?;
    changed(g, db, k, "hincrby");
    Ok(new)
}

/// An HINCRBYFLOAT increment that Redis's `string2ld` accepts and that is
/// finite. HINCRBYFLOAT rejects a bad increment before it looks at the key
/// (so before WRONGTYPE), with two texts of its own; making the check a
/// type keeps `hincrbyfloat` from ever blaming the stored value for it.
#[derive(Clone, Copy, Debug)]
pub struct FloatIncr<'a>(&'a [u8]);

impl<'a> FloatIncr<'a> {
    /// `Err(LdClass::Invalid)`: "ERR value is not a valid float";
    /// `Err(LdClass::Infinite)`: "ERR value is NaN or Infinity".
    pub fn parse(incr: &'a [u8]) -> std::result::Result<FloatIncr<'a>, LdClass> {
        match num::classify_ld(incr) {
            LdClass::Finite => Ok(FloatIncr(incr)),
            other => Err(other),
        }
    }
}

/// HINCRBYFLOAT key field incr: the new value's text, which is also what
/// is stored (Redis `ld2string(.., LD_STR_HUMAN)` of the long double sum).
/// A stored value `string2ld` rejects is `HashNotFloat`; a NaN or infinite
/// sum is `NanOrInfinity`. A long result converts a packed hash, as any
/// long value does.
pub fn hincrbyfloat(
    g: &mut Guard,
    db: usize,
    k: &Key,
    field: &[u8],
    incr: FloatIncr,
) -> Result<Vec<u8>> {
    let new = write_or_create(g, db, k, |h, limits| {
        let new = num::incr_by_float(h.view().get(field), incr.0).map_err(|e| match e {
            // The increment was checked by `FloatIncr::parse`, so only the
            // stored value can be the bad one.
            FloatIncrError::NotFloat => Error::HashNotFloat,
            FloatIncrError::NanOrInfinity => Error::NanOrInfinity,
        })?;
        h.set(field, &new, limits);
        Ok(new)
    })?;
    changed(g, db, k, "hincrbyfloat");
    Ok(new)
}

/// HRANDFIELD key (no count): one field chosen uniformly; None for an
/// empty hash. O(n) for either encoding (see `HashValue::nth`).
pub fn random_field<'a>(h: &'a HashView) -> Option<&'a [u8]> {
    if h.is_empty() {
        return None;
    }
    h.nth(rand::random_range(0..h.len())).map(|(f, _)| f)
}

/// The (field, value) pairs HRANDFIELD key count returns (the cases are
/// in `ops::sample`).
pub type Sample<'a> = sample::Sample<hash::Iter<'a>, Vec<(&'a [u8], &'a [u8])>>;

/// Chooses HRANDFIELD's pairs for `count` (see [`Sample`]). The caller has
/// range-checked `count` as Redis does (`-i64::MAX..=i64::MAX`).
pub fn sample<'a>(h: &'a HashView, count: i64) -> Sample<'a> {
    let size = h.len();
    let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if wanted == 0 || size == 0 {
        return Sample::empty();
    }
    if count < 0 || wanted == 1 {
        return Sample::repeat(h.iter().collect(), wanted);
    }
    if wanted >= size {
        return Sample::whole(h.iter(), size);
    }
    let mut all: Vec<(&[u8], &[u8])> = h.iter().collect();
    sample::shuffle_prefix(&mut all, wanted);
    Sample::distinct(all)
}

/// One HSCAN step (Redis `scanGenericCommand` over a hash): appends the
/// pairs visited from `cursor` to `out`, keeping only those whose field
/// matches `pattern` (values are never matched), and returns the next
/// cursor, 0 when done. A packed hash is returned whole with cursor 0.
/// `pattern` `*` is no filter at all, as in Redis (which skips the matcher
/// for it; the matcher itself would refuse an empty field).
pub fn scan_step(
    h: &HashView,
    cursor: u64,
    count: usize,
    pattern: Option<&[u8]>,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> u64 {
    let start = out.len();
    let next = h.scan(cursor, count, out);
    if let Some(p) = pattern.filter(|p| *p != b"*") {
        // Only the pairs this step appended are filtered.
        let mut seen = 0;
        out.retain(|(f, _)| {
            seen += 1;
            seen <= start || glob::glob_match(p, f, false)
        });
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::{engine, with};
    use crate::Engine;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::sync::atomic::Ordering;

    fn set_limits(e: &Engine, entries: usize, value: usize) {
        e.limits
            .hash_max_listpack_entries
            .store(entries, Ordering::Relaxed);
        e.limits
            .hash_max_listpack_value
            .store(value, Ordering::Relaxed);
    }

    fn get(g: &mut Guard, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        let k = g.key(key);
        hget(g, 0, &k, field, |v| v.map(<[u8]>::to_vec)).unwrap()
    }

    fn hs(g: &mut Guard, key: &[u8], pairs: &[(&[u8], &[u8])]) -> usize {
        let k = g.key(key);
        hset(g, 0, &k, pairs.iter().copied()).unwrap()
    }

    fn encoding(g: &mut Guard, key: &[u8]) -> Option<&'static str> {
        let k = g.key(key);
        g.peek(0, &k).map(|e| e.value.encoding())
    }

    fn all(g: &mut Guard, key: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let k = g.key(key);
        view(g, 0, &k, |h| {
            h.map(|h| h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())
                .unwrap_or_default()
        })
        .unwrap()
    }

    fn put_str(g: &mut Guard, key: &[u8]) {
        let k = g.key(key);
        g.set(
            0,
            &k,
            Value::Str(crate::value::StrValue::from_bytes(b"x")),
            Expiry::Clear,
        );
    }

    #[test]
    fn hset_counts_new_fields_and_keeps_order() {
        let e = engine();
        with(&e, |g| {
            assert_eq!(hs(g, b"h", &[(b"a", b"1"), (b"b", b"2")]), 2);
            assert_eq!(hs(g, b"h", &[(b"a", b"9"), (b"c", b"3"), (b"c", b"4")]), 1);
            assert_eq!(get(g, b"h", b"a").as_deref(), Some(&b"9"[..]));
            assert_eq!(get(g, b"h", b"c").as_deref(), Some(&b"4"[..]));
            let order: Vec<Vec<u8>> = all(g, b"h").into_iter().map(|(f, _)| f).collect();
            assert_eq!(order, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
            let k = g.key(b"h");
            assert_eq!(hlen(g, 0, &k).unwrap(), 3);
            assert!(hexists(g, 0, &k, b"b").unwrap());
            assert!(!hexists(g, 0, &k, b"z").unwrap());
            assert_eq!(hstrlen(g, 0, &k, b"a").unwrap(), 1);
            assert_eq!(hstrlen(g, 0, &k, b"z").unwrap(), 0);
            // Another database is another keyspace.
            assert_eq!(hlen(g, 1, &k).unwrap(), 0);
            // A new key named twice in one HSET: counted once, first place,
            // last value (the new-hash path compares the names itself).
            assert_eq!(
                hs(
                    g,
                    b"n",
                    &[
                        (b"f", b"1"),
                        (b"g", b"2"),
                        (b"f", b"3"),
                        (b"g", b"4"),
                        (b"h", b"5")
                    ]
                ),
                3
            );
            assert_eq!(
                all(g, b"n"),
                vec![
                    (b"f".to_vec(), b"3".to_vec()),
                    (b"g".to_vec(), b"4".to_vec()),
                    (b"h".to_vec(), b"5".to_vec())
                ]
            );
        });
    }

    #[test]
    fn missing_key_reads() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"nosuch");
            assert_eq!(hlen(g, 0, &k).unwrap(), 0);
            assert!(!hexists(g, 0, &k, b"f").unwrap());
            assert_eq!(hstrlen(g, 0, &k, b"f").unwrap(), 0);
            assert_eq!(get(g, b"nosuch", b"f"), None);
            assert_eq!(hdel(g, 0, &k, [&b"f"[..]]).unwrap(), 0);
            assert!(view(g, 0, &k, |h| h.is_none()).unwrap());
            assert!(!g.exists(0, &k));
        });
    }

    #[test]
    fn wrong_type_everywhere() {
        let e = engine();
        with(&e, |g| {
            put_str(g, b"s");
            let k = g.key(b"s");
            let wt = Err(Error::WrongType);
            assert_eq!(hset(g, 0, &k, [(&b"f"[..], &b"v"[..])]), wt);
            assert_eq!(hsetnx(g, 0, &k, b"f", b"v").map(|_| 0), wt);
            assert_eq!(hdel(g, 0, &k, [&b"f"[..]]), wt);
            assert_eq!(hlen(g, 0, &k), wt);
            assert_eq!(hexists(g, 0, &k, b"f").map(|_| 0), wt);
            assert_eq!(hstrlen(g, 0, &k, b"f"), wt);
            assert_eq!(hincrby(g, 0, &k, b"f", 1).map(|_| 0), wt);
            let one = FloatIncr::parse(b"1").unwrap();
            assert_eq!(hincrbyfloat(g, 0, &k, b"f", one).map(|_| 0), wt);
            assert_eq!(hget(g, 0, &k, b"f", |_| 0), wt);
            assert_eq!(encoding(g, b"s"), Some("embstr"));
        });
    }

    #[test]
    fn hsetnx_only_sets_absent_fields() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"h");
            assert!(hsetnx(g, 0, &k, b"f", b"v").unwrap());
            assert!(!hsetnx(g, 0, &k, b"f", b"w").unwrap());
            assert_eq!(get(g, b"h", b"f").as_deref(), Some(&b"v"[..]));
            // A long value for an existing field converts nothing.
            assert!(!hsetnx(g, 0, &k, b"f", &[b'x'; 65]).unwrap());
            assert_eq!(encoding(g, b"h"), Some("listpack"));
        });
    }

    #[test]
    fn hdel_of_last_field_deletes_the_key() {
        let e = engine();
        with(&e, |g| {
            hs(g, b"h", &[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]);
            let k = g.key(b"h");
            assert_eq!(hdel(g, 0, &k, [&b"a"[..], b"a", b"zz"]).unwrap(), 1);
            assert!(g.exists(0, &k));
            assert_eq!(hdel(g, 0, &k, [&b"b"[..], b"c", b"b"]).unwrap(), 2);
            assert!(!g.exists(0, &k));
        });
    }

    #[test]
    fn hincrby_rules() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"h");
            assert_eq!(hincrby(g, 0, &k, b"n", 5).unwrap(), 5);
            assert_eq!(hincrby(g, 0, &k, b"n", -7).unwrap(), -2);
            assert_eq!(get(g, b"h", b"n").as_deref(), Some(&b"-2"[..]));
            hs(g, b"h", &[(b"max", b"9223372036854775807")]);
            assert_eq!(hincrby(g, 0, &k, b"max", 1), Err(Error::Overflow));
            assert_eq!(hincrby(g, 0, &k, b"max", 0).unwrap(), i64::MAX);
            assert_eq!(
                hincrby(g, 0, &k, b"max", i64::MIN).unwrap(),
                -1,
                "MAX + MIN fits"
            );
            hs(g, b"h", &[(b"min", b"-9223372036854775808")]);
            assert_eq!(hincrby(g, 0, &k, b"min", -1), Err(Error::Overflow));
            assert_eq!(
                get(g, b"h", b"min").as_deref(),
                Some(&b"-9223372036854775808"[..])
            );
            for bad in [&b"abc"[..], b"1.5", b" 1", b"", b"01", b"+1", b"-0"] {
                hs(g, b"h", &[(b"bad", bad)]);
                assert_eq!(hincrby(g, 0, &k, b"bad", 1), Err(Error::HashNotInteger));
                assert_eq!(get(g, b"h", b"bad").as_deref(), Some(bad));
            }
        });
    }

    #[test]
    fn hincrbyfloat_rules() {
        let e = engine();
        set_limits(&e, 512, 64);
        with(&e, |g| {
            let k = g.key(b"h");
            let f = |s: &'static [u8]| FloatIncr::parse(s).unwrap();
            assert_eq!(hincrbyfloat(g, 0, &k, b"x", f(b"1.5")).unwrap(), b"1.5");
            assert_eq!(hincrbyfloat(g, 0, &k, b"x", f(b"0.1")).unwrap(), b"1.6");
            assert_eq!(hincrbyfloat(g, 0, &k, b"x", f(b"-1.6")).unwrap(), b"0");
            assert_eq!(get(g, b"h", b"x").as_deref(), Some(&b"0"[..]));
            hs(g, b"h", &[(b"s", b"abc"), (b"big", b"1e4932")]);
            assert_eq!(
                hincrbyfloat(g, 0, &k, b"s", f(b"1")),
                Err(Error::HashNotFloat)
            );
            assert_eq!(
                hincrbyfloat(g, 0, &k, b"big", f(b"1e4932")),
                Err(Error::NanOrInfinity)
            );
            assert_eq!(get(g, b"h", b"big").as_deref(), Some(&b"1e4932"[..]));
            assert!(matches!(FloatIncr::parse(b"inf"), Err(LdClass::Infinite)));
            assert!(matches!(FloatIncr::parse(b"nan"), Err(LdClass::Invalid)));
            assert!(matches!(FloatIncr::parse(b""), Err(LdClass::Invalid)));
            // A result longer than hash-max-listpack-value converts.
            assert_eq!(encoding(g, b"h"), Some("listpack"));
            let long = hincrbyfloat(g, 0, &k, b"y", f(b"1e100")).unwrap();
            assert!(long.len() > 64);
            assert_eq!(encoding(g, b"h"), Some("hashtable"));
        });
    }

    #[test]
    fn conversions_follow_the_limits() {
        let e = engine();
        set_limits(&e, 4, 8);
        with(&e, |g| {
            let k = g.key(b"h");
            hs(
                g,
                b"h",
                &[(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"d", b"4")],
            );
            assert_eq!(encoding(g, b"h"), Some("listpack"));
            hs(g, b"h", &[(b"e", b"5")]);
            assert_eq!(encoding(g, b"h"), Some("hashtable"));
            hdel(g, 0, &k, [&b"a"[..], b"b", b"c", b"d"]).unwrap();
            assert_eq!(encoding(g, b"h"), Some("hashtable"));

            hs(g, b"v", &[(b"f", b"12345678")]);
            assert_eq!(encoding(g, b"v"), Some("listpack"));
            hs(g, b"v", &[(b"f", b"123456789")]);
            assert_eq!(encoding(g, b"v"), Some("hashtable"));

            // HINCRBY growing a value past the limit converts too.
            let kv = g.key(b"n");
            hs(g, b"n", &[(b"c", b"9999999")]);
            hincrby(g, 0, &kv, b"c", 1).unwrap();
            assert_eq!(encoding(g, b"n"), Some("listpack"));
            hincrby(g, 0, &kv, b"c", 90_000_000).unwrap();
            assert_eq!(encoding(g, b"n"), Some("hashtable"));
        });
    }

    #[test]
    fn random_field_and_samples() {
        let mut h = HashValue::new();
        assert_eq!(random_field(&h.view()), None);
        assert_eq!(sample(&h.view(), 5).len(), 0);
        assert_eq!(sample(&h.view(), -5).len(), 0);
        let l = hash::HashLimits::default();
        for i in 0..10 {
            h.set(format!("f{i}").as_bytes(), format!("v{i}").as_bytes(), &l);
        }
        let h = h.view();
        for _ in 0..50 {
            assert!(h.contains(random_field(&h).unwrap()));
        }
        assert_eq!(sample(&h, 0).count(), 0);
        // Negative: exactly |count| picks, repeats allowed.
        let picks: Vec<_> = sample(&h, -100).collect();
        assert_eq!(picks.len(), 100);
        assert!(picks.iter().all(|(f, v)| h.get(f) == Some(*v)));
        let distinct: HashSet<_> = picks.iter().map(|(f, _)| *f).collect();
        assert!(distinct.len() > 1);
        // count >= size: everything, in iteration order.
        let whole: Vec<_> = sample(&h, 10).collect();
        assert_eq!(whole, h.iter().collect::<Vec<_>>());
        assert_eq!(sample(&h, i64::MAX).len(), 10);
        assert_eq!(sample(&h, -i64::MAX).len(), i64::MAX as usize);
        // Otherwise distinct picks: both Redis cases (count*3 > size and not).
        for count in [1usize, 2, 3, 4, 9] {
            let s = sample(&h, count as i64);
            assert_eq!(s.len(), count);
            let got: Vec<_> = s.collect();
            let set: HashSet<_> = got.iter().map(|(f, _)| *f).collect();
            assert_eq!(set.len(), count);
            assert!(got.iter().all(|(f, v)| h.get(f) == Some(*v)));
        }
        // Every field can be chosen.
        let mut seen = HashSet::new();
        for _ in 0..500 {
            seen.extend(sample(&h, 2).map(|(f, _)| f));
        }
        assert_eq!(seen.len(), 10);
    }

    #[test]
    fn scan_step_filters_fields_only() {
        let l = hash::HashLimits::default();
        let mut h = HashValue::new();
        h.set(b"a1", b"b1", &l);
        h.set(b"b1", b"a1", &l);
        h.set(b"", b"empty", &l);
        let mut out = vec![(b"keep".to_vec(), b"me".to_vec())];
        assert_eq!(scan_step(&h.view(), 0, 10, Some(b"a*"), &mut out), 0);
        assert_eq!(
            out,
            vec![
                (b"keep".to_vec(), b"me".to_vec()),
                (b"a1".to_vec(), b"b1".to_vec())
            ]
        );
        let mut out = Vec::new();
        scan_step(&h.view(), 0, 10, Some(b"*"), &mut out);
        assert_eq!(out.len(), 3, "`*` matches the empty field too");
        let mut out = Vec::new();
        scan_step(&h.view(), 0, 10, Some(b""), &mut out);
        assert_eq!(out, vec![(Vec::new(), b"empty".to_vec())]);

        // Table encoding, stepping with a small count.
        let t = hash::HashLimits {
            max_listpack_entries: 0,
            max_listpack_value: 0,
        };
        let mut h = HashValue::new();
        for i in 0..300 {
            h.set(format!("f{i}").as_bytes(), b"v", &t);
        }
        let (mut cursor, mut got) = (0, HashSet::new());
        loop {
            let mut out = Vec::new();
            cursor = scan_step(&h.view(), cursor, 7, Some(b"f1*"), &mut out);
            got.extend(out.into_iter().map(|(f, _)| f));
            if cursor == 0 {
                break;
            }
        }
        let want: HashSet<Vec<u8>> = (0..300)
            .map(|i| format!("f{i}").into_bytes())
            .filter(|f| f.starts_with(b"f1"))
            .collect();
        assert_eq!(got, want);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Set(Vec<(u8, Vec<u8>)>),
        SetNx(u8, Vec<u8>),
        Del(Vec<u8>),
        IncrBy(u8, i64),
        IncrByFloat(u8, i32),
    }

    fn field_name(f: u8) -> Vec<u8> {
        // A few long names (> 8 bytes) force conversions under lim(4, 8).
        if f % 7 == 6 {
            format!("long-field-{f}").into_bytes()
        } else {
            vec![b'a' + f % 26]
        }
    }

    fn op() -> impl Strategy<Value = Op> {
        let value = prop_oneof![
            3 => proptest::collection::vec(b'0'..=b'9', 0..4),
            1 => proptest::collection::vec(any::<u8>(), 0..12),
        ];
        prop_oneof![
            4 => proptest::collection::vec((0u8..12, value.clone()), 1..4).prop_map(Op::Set),
            1 => (0u8..12, value).prop_map(|(f, v)| Op::SetNx(f, v)),
            3 => proptest::collection::vec(0u8..12, 1..4).prop_map(Op::Del),
            2 => (0u8..12, prop_oneof![
                4 => -1000i64..1000,
                1 => Just(i64::MAX),
                1 => Just(i64::MIN),
            ]).prop_map(|(f, n)| Op::IncrBy(f, n)),
            1 => (0u8..12, -50i32..50).prop_map(|(f, n)| Op::IncrByFloat(f, n)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random HSET/HSETNX/HDEL/HINCRBY/HINCRBYFLOAT sequences against
        /// a HashMap model: replies, contents, key existence and encoding.
        #[test]
        fn matches_a_map_model(ops in proptest::collection::vec(op(), 0..80)) {
            let e = engine();
            set_limits(&e, 4, 8);
            let mut g = e.lock_all(&crate::cx::testing::cx());
            let k = g.key(b"h");
            let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            let mut converted = false;
            for op in ops {
                match op {
                    Op::Set(pairs) => {
                        let pairs: Vec<(Vec<u8>, Vec<u8>)> =
                            pairs.into_iter().map(|(f, v)| (field_name(f), v)).collect();
                        let mut new = 0;
                        for (f, v) in &pairs {
                            converted |= f.len() > 8 || v.len() > 8;
                            if model.insert(f.clone(), v.clone()).is_none() {
                                new += 1;
                            }
                        }
                        converted |= model.len() > 4;
                        let got = hset(&mut g, 0, &k, pairs.iter().map(|(f, v)| (&f[..], &v[..])));
                        prop_assert_eq!(got, Ok(new));
                    }
                    Op::SetNx(f, v) => {
                        let f = field_name(f);
                        let fresh = !model.contains_key(&f);
                        if fresh {
                            converted |= f.len() > 8 || v.len() > 8;
                            model.insert(f.clone(), v.clone());
                            converted |= model.len() > 4;
                        }
                        prop_assert_eq!(hsetnx(&mut g, 0, &k, &f, &v), Ok(fresh));
                    }
                    Op::Del(fields) => {
                        let fields: Vec<Vec<u8>> = fields.into_iter().map(field_name).collect();
                        let mut removed = 0;
                        for f in &fields {
                            if model.remove(f).is_some() {
                                removed += 1;
                            }
                        }
                        let got = hdel(&mut g, 0, &k, fields.iter().map(Vec::as_slice));
                        prop_assert_eq!(got, Ok(removed));
                        if model.is_empty() {
                            // The key is gone, and a new one starts packed.
                            converted = false;
                        }
                    }
                    Op::IncrBy(f, n) => {
                        let f = field_name(f);
                        let want = match model.get(&f) {
                            None => Ok(0),
                            Some(v) => num::parse_i64(v).ok_or(Error::HashNotInteger),
                        }
                        .and_then(|old| old.checked_add(n).ok_or(Error::Overflow));
                        if let Ok(new) = want {
                            let text = new.to_string().into_bytes();
                            converted |= f.len() > 8 || text.len() > 8;
                            model.insert(f.clone(), text);
                            converted |= model.len() > 4;
                        }
                        prop_assert_eq!(hincrby(&mut g, 0, &k, &f, n), want);
                    }
                    Op::IncrByFloat(f, n) => {
                        let f = field_name(f);
                        let incr = n.to_string();
                        let want = num::incr_by_float(model.get(&f).map(Vec::as_slice), incr.as_bytes())
                            .map_err(|e| match e {
                                FloatIncrError::NotFloat => Error::HashNotFloat,
                                FloatIncrError::NanOrInfinity => Error::NanOrInfinity,
                            });
                        if let Ok(text) = &want {
                            converted |= f.len() > 8 || text.len() > 8;
                            model.insert(f.clone(), text.clone());
                            converted |= model.len() > 4;
                        }
                        let incr = FloatIncr::parse(incr.as_bytes()).unwrap();
                        prop_assert_eq!(hincrbyfloat(&mut g, 0, &k, &f, incr), want);
                    }
                }
                prop_assert_eq!(hlen(&mut g, 0, &k), Ok(model.len()));
                prop_assert_eq!(g.exists(0, &k), !model.is_empty());
                let got: HashMap<Vec<u8>, Vec<u8>> = view(&mut g, 0, &k, |h| {
                    h.map(|h| h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())
                        .unwrap_or_default()
                })
                .unwrap();
                prop_assert_eq!(&got, &model);
                if !model.is_empty() {
                    let want = if converted { "hashtable" } else { "listpack" };
                    prop_assert_eq!(g.peek(0, &k).map(|e| e.value.encoding()), Some(want));
                }
            }
        }
    }

    /// YCSB-shaped writes (issue 20's in-place update and one-pass
    /// insert) and odd-shaped ones, through the commands.
    #[derive(Clone, Debug)]
    enum YOp {
        /// HSET of a whole record: `field0..field9` in order, or, when
        /// `shape` says so, with a value of another length, a byte the
        /// book has no code for, a field named twice or the names in
        /// another order.
        Insert(u8, u8, u64),
        /// HSET of one field to a value of `len` bytes (100: YCSB's
        /// update), odd (a byte outside the alphabet) or not.
        Set(u8, u8, usize, bool, u64),
        SetNx(u8, u8, usize, u64),
        Del(u8, Vec<u8>),
        IncrBy(u8, u8, i64),
        IncrByFloat(u8, u8, i32),
    }

    fn ytext(n: usize, mut seed: u64, odd: bool) -> Vec<u8> {
        let mut v: Vec<u8> = (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b' ' + (seed >> 58) as u8
            })
            .collect();
        if odd && n > 0 {
            v[(seed % n as u64) as usize] = 0xC3;
        }
        v
    }

    fn yfield(i: u8) -> Vec<u8> {
        format!("field{}", i % 12).into_bytes()
    }

    fn yop() -> impl Strategy<Value = YOp> {
        let len = prop_oneof![
            6 => Just(100usize),
            1 => 0usize..20,
            1 => 240usize..270,
            1 => 60usize..140,
        ];
        prop_oneof![
            3 => (0u8..3, 0u8..8, any::<u64>()).prop_map(|(k, s, d)| YOp::Insert(k, s, d)),
            8 => (0u8..3, 0u8..12, len.clone(), any::<bool>(), any::<u64>())
                .prop_map(|(k, f, n, odd, d)| YOp::Set(k, f, n, odd && n % 3 == 0, d)),
            1 => (0u8..3, 0u8..12, len, any::<u64>()).prop_map(|(k, f, n, d)| YOp::SetNx(k, f, n, d)),
            2 => (0u8..3, proptest::collection::vec(0u8..12, 1..3)).prop_map(|(k, f)| YOp::Del(k, f)),
            1 => (0u8..3, 0u8..12, -5i64..5).prop_map(|(k, f, n)| YOp::IncrBy(k, f, n)),
            1 => (0u8..3, 0u8..12, -5i32..5).prop_map(|(k, f, n)| YOp::IncrByFloat(k, f, n)),
        ]
    }

    /// Contents and order of `key` as the snapshot writer sees them
    /// (`for_each`, each value appended as it would be to a block), and
    /// as HMGET reads them (`get_ref`, field by field).
    fn ycsb_check(
        g: &mut Guard,
        key: &[u8],
        model: &[(Vec<u8>, Vec<u8>)],
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let k = g.key(key);
        view(g, 0, &k, |h| {
            let Some(h) = h else { return Vec::new() };
            let mut walked = Vec::new();
            h.for_each(|f, v| {
                let mut b = vec![0xEE];
                v.append_to(&mut b);
                assert_eq!(b.len(), v.len() + 1);
                walked.push((f.to_vec(), b[1..].to_vec()));
            });
            for (f, v) in model {
                let mut b = Vec::new();
                h.get_ref(f).expect("present").append_to(&mut b);
                assert_eq!(&b, v);
            }
            walked
        })
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Random HSET/HSETNX/HDEL/HINCRBY/HINCRBYFLOAT sequences on
        /// YCSB-shaped hashes (ten 100-byte fields over a 64-byte alphabet,
        /// coded with the process's book) and odd-shaped ones, against a
        /// BTreeMap model of the contents and a list of the insertion
        /// order: same-length updates written in place, whole records
        /// built in one pass, and every fallback (values of other lengths
        /// or with a byte the book cannot code, fields named twice, names
        /// in another order). Each hash then goes through the snapshot's
        /// logical form and back (`for_each` out, `set` and `seal` in,
        /// what `cairn_persist`'s hash block does) with the same contents,
        /// order and encoding (coded or not may differ: that depends on
        /// the order the values came in).
        #[test]
        fn ycsb_writes_match_a_model(ops in proptest::collection::vec(yop(), 1..60)) {
            let mut round = 0u64;
            while crate::value::codebooks::current().is_none() {
                let vals: Vec<Vec<u8>> = (0..100).map(|i| ytext(100, round * 100 + i, false)).collect();
                crate::value::codebooks::observe(vals.iter().map(|v| &v[..]));
                round += 1;
            }
            let e = engine();
            set_limits(&e, 128, 1024);
            let mut g = e.lock_all(&crate::cx::testing::cx());
            let keys: [&[u8]; 3] = [b"user1", b"user2", b"user3"];
            let mut model: [BTreeMap<Vec<u8>, Vec<u8>>; 3] = Default::default();
            let mut order: [Vec<Vec<u8>>; 3] = Default::default();
            // The ten names are a known list (two records sealed with them).
            for key in [b"warm1".as_slice(), b"warm2"] {
                let rec: Vec<(Vec<u8>, Vec<u8>)> =
                    (0..10).map(|i| (yfield(i), ytext(100, u64::from(i), false))).collect();
                hs(&mut g, key, &rec.iter().map(|(f, v)| (&f[..], &v[..])).collect::<Vec<_>>());
            }
            for op in ops {
                match op {
                    YOp::Insert(ki, shape, d) => {
                        let (k, key) = (usize::from(ki), keys[usize::from(ki)]);
                        let mut rec: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
                            .map(|i| (yfield(i), ytext(100, d.wrapping_add(u64::from(i)), false)))
                            .collect();
                        match shape {
                            0 => rec[3].1 = ytext(100, d, true),
                            1 => rec[0].1 = ytext(17, d, false),
                            2 => rec[9].0 = yfield(2),
                            3 => rec.swap(1, 4),
                            _ => {}
                        }
                        let mut new = 0;
                        for (f, v) in &rec {
                            if model[k].insert(f.clone(), v.clone()).is_none() {
                                order[k].push(f.clone());
                                new += 1;
                            }
                        }
                        let pairs: Vec<(&[u8], &[u8])> = rec.iter().map(|(f, v)| (&f[..], &v[..])).collect();
                        prop_assert_eq!(hs(&mut g, key, &pairs), new);
                    }
                    YOp::Set(ki, f, n, odd, d) => {
                        let (k, key, f) = (usize::from(ki), keys[usize::from(ki)], yfield(f));
                        let v = ytext(n, d, odd);
                        let fresh = model[k].insert(f.clone(), v.clone()).is_none();
                        if fresh {
                            order[k].push(f.clone());
                        }
                        prop_assert_eq!(hs(&mut g, key, &[(&f, &v)]), usize::from(fresh));
                    }
                    YOp::SetNx(ki, f, n, d) => {
                        let (k, key, f) = (usize::from(ki), keys[usize::from(ki)], yfield(f));
                        let v = ytext(n, d, false);
                        let fresh = !model[k].contains_key(&f);
                        if fresh {
                            model[k].insert(f.clone(), v.clone());
                            order[k].push(f.clone());
                        }
                        let kk = g.key(key);
                        prop_assert_eq!(hsetnx(&mut g, 0, &kk, &f, &v), Ok(fresh));
                    }
                    YOp::Del(ki, fs) => {
                        let (k, key) = (usize::from(ki), keys[usize::from(ki)]);
                        let fs: Vec<Vec<u8>> = fs.into_iter().map(yfield).collect();
                        let mut removed = 0;
                        for f in &fs {
                            if model[k].remove(f).is_some() {
                                order[k].retain(|x| x != f);
                                removed += 1;
                            }
                        }
                        let kk = g.key(key);
                        prop_assert_eq!(hdel(&mut g, 0, &kk, fs.iter().map(Vec::as_slice)), Ok(removed));
                    }
                    YOp::IncrBy(ki, f, n) => {
                        let (k, key, f) = (usize::from(ki), keys[usize::from(ki)], yfield(f));
                        let want = match model[k].get(&f) {
                            None => Ok(0),
                            Some(v) => num::parse_i64(v).ok_or(Error::HashNotInteger),
                        }
                        .and_then(|old| old.checked_add(n).ok_or(Error::Overflow));
                        if let Ok(new) = want {
                            if model[k].insert(f.clone(), new.to_string().into_bytes()).is_none() {
                                order[k].push(f.clone());
                            }
                        }
                        let kk = g.key(key);
                        prop_assert_eq!(hincrby(&mut g, 0, &kk, &f, n), want);
                    }
                    YOp::IncrByFloat(ki, f, n) => {
                        let (k, key, f) = (usize::from(ki), keys[usize::from(ki)], yfield(f));
                        let incr = n.to_string();
                        let want = num::incr_by_float(model[k].get(&f).map(Vec::as_slice), incr.as_bytes())
                            .map_err(|e| match e {
                                FloatIncrError::NotFloat => Error::HashNotFloat,
                                FloatIncrError::NanOrInfinity => Error::NanOrInfinity,
                            });
                        if let Ok(text) = &want {
                            if model[k].insert(f.clone(), text.clone()).is_none() {
                                order[k].push(f.clone());
                            }
                        }
                        let kk = g.key(key);
                        let incr = FloatIncr::parse(incr.as_bytes()).unwrap();
                        prop_assert_eq!(hincrbyfloat(&mut g, 0, &kk, &f, incr), want);
                    }
                }
                for (k, key) in keys.iter().enumerate() {
                    let want: Vec<(Vec<u8>, Vec<u8>)> =
                        order[k].iter().map(|f| (f.clone(), model[k][f].clone())).collect();
                    prop_assert_eq!(ycsb_check(&mut g, key, &want), want.clone());
                    prop_assert_eq!(all(&mut g, key), want);
                    let kk = g.key(key);
                    prop_assert_eq!(g.exists(0, &kk), !model[k].is_empty());
                    if !model[k].is_empty() {
                        prop_assert_eq!(encoding(&mut g, key), Some("listpack"));
                    }
                }
            }
            // The snapshot's round trip: out through `for_each`, back in
            // pair by pair, sealed.
            let limits = e.limits.hash();
            for (k, key) in keys.iter().enumerate() {
                let kk = g.key(key);
                let Some(entry) = g.peek(0, &kk) else {
                    prop_assert!(model[k].is_empty());
                    continue;
                };
                let h = crate::ops::as_hash(&entry.value).unwrap();
                let mut pairs = Vec::new();
                h.view().for_each(|f, v| {
                    let mut b = Vec::new();
                    v.append_to(&mut b);
                    pairs.push((f.to_vec(), b));
                });
                let mut back = HashValue::new();
                for (f, v) in &pairs {
                    prop_assert!(back.set(f, v, &limits));
                }
                back.seal();
                let again: Vec<(Vec<u8>, Vec<u8>)> =
                    back.view().iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                prop_assert_eq!(&again, &pairs);
                let want: BTreeMap<Vec<u8>, Vec<u8>> = again.into_iter().collect();
                prop_assert_eq!(&want, &model[k]);
                prop_assert_eq!(back.encoding(), h.encoding());
            }
        }
    }

    /// Every keyspace event recorded since the last call, as `event:key`.
    fn events() -> Vec<String> {
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|e| match e {
                crate::events::Event::Notify { event, key, .. } => {
                    Some(format!("{event}:{}", String::from_utf8_lossy(&key)))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn notifications_and_watch_follow_t_hash_c() {
        let e = engine();
        e.limits.notify.store(u32::MAX, Ordering::Relaxed);
        events();
        let flag: crate::keyspace::WatchFlag = Default::default();
        let fired = || flag.swap(false, Ordering::Relaxed);
        with(&e, |g| {
            let k = g.key(b"h");
            g.watch(0, &k, &flag);
            hs(g, b"h", &[(b"a", b"1")]);
            assert_eq!(events(), ["new:h", "hset:h"]);
            assert!(fired());
            hs(g, b"h", &[(b"a", b"1")]);
            assert_eq!(events(), ["hset:h"], "even when nothing changed");
            assert!(fired());
            assert!(!hsetnx(g, 0, &k, b"a", b"2").unwrap());
            assert_eq!(events(), Vec::<String>::new());
            assert!(!fired());
            assert!(hsetnx(g, 0, &k, b"b", b"2").unwrap());
            assert_eq!(events(), ["hset:h"]);
            assert!(fired());
            hincrby(g, 0, &k, b"a", 1).unwrap();
            assert_eq!(events(), ["hincrby:h"]);
            assert!(fired());
            let incr = FloatIncr::parse(b"1.5").unwrap();
            hincrbyfloat(g, 0, &k, b"a", incr).unwrap();
            assert_eq!(events(), ["hincrbyfloat:h"]);
            assert!(fired());
            assert!(hincrby(g, 0, &k, b"a", 1).is_err());
            assert_eq!(events(), Vec::<String>::new());
            assert!(!fired());
            assert_eq!(hdel(g, 0, &k, [&b"zz"[..]]).unwrap(), 0);
            assert_eq!(events(), Vec::<String>::new());
            assert!(!fired());
            assert_eq!(hdel(g, 0, &k, [&b"a"[..]]).unwrap(), 1);
            assert_eq!(events(), ["hdel:h"]);
            assert!(fired());
            assert_eq!(hdel(g, 0, &k, [&b"b"[..], b"zz"]).unwrap(), 1);
            assert_eq!(events(), ["hdel:h", "del:h"]);
            assert!(fired());
            assert_eq!(hlen(g, 0, &k).unwrap(), 0);
            assert_eq!(events(), ["keymiss:h"]);
        });
    }
}
