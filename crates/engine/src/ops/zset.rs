//! Sorted set operations (Redis 7.0 `src/t_zset.c`): ZADD/ZINCRBY, ZREM,
//! the ZREMRANGEBY* family, the pops (ZPOPMIN/ZPOPMAX/ZMPOP and the
//! blocking ones' serving step), ZRANGE-family range resolution, ZRANGESTORE,
//! ZUNION/ZINTER/ZDIFF (and their STORE forms, ZINTERCARD), ZRANDMEMBER's
//! sampling and one ZSCAN step, plus the parsing of score and lex range
//! arguments, which is Redis's own (`zslParseRange`, `zslParseLexRange`).
//!
//! Owns the keyspace side of those commands: which lookup each one does
//! (read lookups count hits and misses, as `lookupKeyRead` does), when a
//! key is created, that a sorted set left empty is deleted, and the
//! keyspace notifications and WATCH signals, in Redis's order. The
//! encodings live in `value::zset`; the wire replies live in the server.
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::sample;
use crate::ops::{as_zset, as_zset_mut};
use crate::util::glob;
use crate::value::zset::{self, AddFlags, Added, LexBound, LexRange, ScoreRange, ZSetLimits};
use crate::value::{SetValue, Value, ZSetValue};
use crate::{Error, Result};
use std::sync::atomic::Ordering;

/// The encoding limits in force (`zset-max-listpack-*`).
pub fn limits(g: &Guard) -> ZSetLimits {
    let l = &g.engine().limits;
    ZSetLimits {
        max_listpack_entries: l.zset_max_listpack_entries.load(Ordering::Relaxed),
        max_listpack_value: l.zset_max_listpack_value.load(Ordering::Relaxed),
    }
}

// ---------------------------------------------------------------------------
// Range arguments

extern "C" {
    /// libc `strtod`, which Redis's `zslParseRange` calls directly.
    fn strtod(nptr: *const std::os::raw::c_char, endptr: *mut *mut std::os::raw::c_char) -> f64;
}

/// Redis `zslParseRange`'s reading of one bound: libc `strtod` over the
/// C string (so it stops at a NUL byte, skips leading whitespace, accepts
/// an empty string as 0, hex floats, "inf"/"infinity", and overflow to
/// ±inf), requiring it to consume everything up to the NUL; NaN refused.
/// This is looser than the `string2d` ZADD uses for scores.
fn strtod_whole(s: &[u8]) -> Option<f64> {
    let mut stack = [0u8; 128];
    let mut heap = Vec::new();
    let buf: &mut [u8] = if s.len() < stack.len() {
        &mut stack[..s.len() + 1]
    } else {
        heap.resize(s.len() + 1, 0);
        &mut heap
    };
    buf[..s.len()].copy_from_slice(s);
    buf[s.len()] = 0;
    let mut end: *mut std::os::raw::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated and lives across the call; strtod
    // only reads up to the NUL and stores a pointer into `buf` in `end`.
    let v = unsafe { strtod(buf.as_ptr().cast(), &mut end) };
    // SAFETY: `end` points into `buf` (at most at its NUL).
    let stop = unsafe { *end.cast::<u8>() };
    (stop == 0 && !v.is_nan()).then_some(v)
}

/// Parses a ZRANGEBYSCORE-style interval: each bound a float as above,
/// `(` in front making it exclusive. None means Redis's "min or max is not
/// a float".
pub fn parse_score_range(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
    let bound = |b: &[u8]| match b.first() {
        Some(b'(') => strtod_whole(&b[1..]).map(|v| (v, true)),
        _ => strtod_whole(b).map(|v| (v, false)),
    };
    let (min, minex) = bound(min)?;
    let (max, maxex) = bound(max)?;
    Some(ScoreRange {
        min,
        minex,
        max,
        maxex,
    })
}

/// Parses one ZRANGEBYLEX bound (Redis `zslParseLexRangeItem`): `-`, `+`
/// (read as C strings: a NUL right after them ends the argument), or `[` /
/// `(` followed by any bytes.
fn parse_lex_bound(b: &[u8]) -> Option<LexBound<'_>> {
    let alone = b.len() == 1 || b.get(1) == Some(&0);
    match b.first() {
        Some(b'+') if alone => Some(LexBound::PosInf),
        Some(b'-') if alone => Some(LexBound::NegInf),
        Some(b'(') => Some(LexBound::Excl(&b[1..])),
        Some(b'[') => Some(LexBound::Incl(&b[1..])),
        _ => None,
    }
}

/// Parses a ZRANGEBYLEX interval. None means Redis's "min or max not valid
/// string range item".
pub fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Option<LexRange<'a>> {
    Some(LexRange {
        min: parse_lex_bound(min)?,
        max: parse_lex_bound(max)?,
    })
}

// ---------------------------------------------------------------------------
// Reads

/// Calls `f` with the sorted set under `k` (None when the key is absent),
/// or fails with WRONGTYPE. A read lookup (`lookupKeyRead`): counts a hit
/// or miss and touches the key. The shard stays locked while `f` runs, so
/// `f` can write a reply straight from the stored bytes.
pub fn view<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<&ZSetValue>) -> R,
) -> Result<R> {
    match g.read(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(as_zset(&e.value)?))),
    }
}

/// How a ZRANGE-family request selects members.
#[derive(Clone, Copy, Debug)]
pub enum RangeSpec<'a> {
    /// By index, `start` and `end` inclusive, negative from the end.
    Rank { start: i64, end: i64 },
    /// By score, after skipping `offset` members, at most `limit` of them
    /// (negative: no limit).
    Score {
        range: ScoreRange,
        offset: i64,
        limit: i64,
    },
    /// By member, likewise.
    Lex {
        range: LexRange<'a>,
        offset: i64,
        limit: i64,
    },
}

impl RangeSpec<'_> {
    /// The result size ZRANGESTORE may assume up front: known for an index
    /// range (Redis passes it to `zrangeResultBeginStore`), unknown (None)
    /// for score and lex ranges.
    pub fn known_len(&self, z: &ZSetValue) -> Option<usize> {
        match self {
            RangeSpec::Rank { .. } => Some(resolve_range(z, self, false).1),
            _ => None,
        }
    }
}

/// The members a ZRANGE-family request selects, as the ascending index to
/// start at and how many to take from there (going down when `rev`):
/// `z.iter_from(start, rev).take(count)`. Follows Redis's walk exactly:
/// an index range is clamped (`genericZrangebyrankCommand`); a score or
/// lex range starts at the first (last, when `rev`) member in range, steps
/// over `offset` members without looking at them, then takes members while
/// they are in range, up to `limit`. A negative offset walks off the end
/// (Redis's `while (offset--)` never reaches zero), so selects nothing.
pub fn resolve_range(z: &ZSetValue, spec: &RangeSpec, rev: bool) -> (usize, usize) {
    const NONE: (usize, usize) = (0, 0);
    let len = z.len() as i64;
    match *spec {
        RangeSpec::Rank { start, end } => {
            let (mut start, mut end) = (start, end);
            if start < 0 {
                start += len;
            }
            if end < 0 {
                end += len;
            }
            if start < 0 {
                start = 0;
            }
            if start > end || start >= len {
                return NONE;
            }
            if end >= len {
                end = len - 1;
            }
            let count = (end - start + 1) as usize;
            let first = if rev { len - 1 - start } else { start };
            (first as usize, count)
        }
        RangeSpec::Score {
            range,
            offset,
            limit,
        } => {
            if offset > 0 && offset >= len {
                return NONE;
            }
            let first = if rev {
                z.last_in_score(&range)
            } else {
                z.first_in_score(&range)
            };
            walk_from(z, first, offset, limit, rev, |_, s| {
                if rev {
                    range.gte_min(s)
                } else {
                    range.lte_max(s)
                }
            })
        }
        RangeSpec::Lex {
            range,
            offset,
            limit,
        } => {
            let first = if rev {
                z.last_in_lex(&range)
            } else {
                z.first_in_lex(&range)
            };
            walk_from(z, first, offset, limit, rev, |m, _| {
                if rev {
                    range.gte_min(m)
                } else {
                    range.lte_max(m)
                }
            })
        }
    }
}

/// The offset/limit walk shared by score and lex ranges.
fn walk_from(
    z: &ZSetValue,
    first: Option<usize>,
    offset: i64,
    limit: i64,
    rev: bool,
    in_range: impl Fn(&[u8], f64) -> bool,
) -> (usize, usize) {
    let Some(first) = first else { return (0, 0) };
    if offset < 0 {
        return (0, 0);
    }
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let start = if rev {
        match first.checked_sub(offset) {
            Some(s) => s,
            None => return (0, 0),
        }
    } else {
        match first.checked_add(offset) {
            Some(s) if s < z.len() => s,
            _ => return (0, 0),
        }
    };
    let limit = if limit < 0 {
        usize::MAX
    } else {
        usize::try_from(limit).unwrap_or(usize::MAX)
    };
    let count = z
        .iter_from(start, rev)
        .take(limit)
        .take_while(|(m, s)| in_range(m, *s))
        .count();
    (start, count)
}

// ---------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, ZREMRANGEBY*

/// What ZADD did (Redis's `added`, `updated`, `processed`), and the score
/// of the last member processed, which ZADD INCR and ZINCRBY reply.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ZaddOutcome {
    pub added: usize,
    pub updated: usize,
    pub processed: usize,
    pub score: f64,
}

/// ZADD key [flags] score member ... (and ZINCRBY, with `flags.incr`):
/// applies each pair in order. A missing key is created (its encoding
/// chosen from the first member, `ZSetValue::for_first_member`) unless XX
/// is given. An increment that makes a score NaN stops the command there
/// with [`Error::ScoreNaN`], keeping what earlier pairs did, as Redis does. If
/// anything was added or updated the key is signalled modified and "zadd"
/// ("zincr" with INCR) is notified, also on that error path.
pub fn zadd(
    g: &mut Guard,
    db: usize,
    k: &Key,
    flags: AddFlags,
    pairs: &[(f64, &[u8])],
) -> Result<ZaddOutcome> {
    let limits = limits(g);
    let mut out = ZaddOutcome::default();
    let apply = |z: &mut ZSetValue, out: &mut ZaddOutcome| -> bool {
        for &(score, member) in pairs {
            match z.add(member, score, flags, &limits) {
                Err(zset::NotANumber) => return true,
                Ok(Added::Added(s)) => {
                    out.added += 1;
                    out.processed += 1;
                    out.score = s;
                }
                Ok(Added::Updated(s)) => {
                    out.updated += 1;
                    out.processed += 1;
                    out.score = s;
                }
                Ok(Added::Same(s)) => {
                    out.processed += 1;
                    out.score = s;
                }
                Ok(Added::Nop) => {}
            }
        }
        false
    };
    let (nan, created) = match g.write(db, k) {
        Some(e) => (apply(as_zset_mut(&mut e.value)?, &mut out), false),
        None => {
            if flags.xx {
                return Ok(out);
            }
            let first = pairs.first().map_or(0, |p| p.1.len());
            let mut z = ZSetValue::for_first_member(first, &limits);
            let nan = apply(&mut z, &mut out);
            if !z.is_empty() {
                g.set(db, k, Value::ZSet(Box::new(z)), Expiry::Clear);
            }
            (nan, true)
        }
    };
    if out.added + out.updated > 0 {
        if !created {
            g.modified(db, k);
        }
        let event = if flags.incr { "zincr" } else { "zadd" };
        g.notify(class::ZSET, event, db, k);
    }
    if nan {
        return Err(Error::ScoreNaN);
    }
    Ok(out)
}

/// Deletes the key of a sorted set just emptied, with Redis's "del".
fn delete_emptied(g: &mut Guard, db: usize, k: &Key) {
    drop(g.remove(db, k));
    g.notify(class::GENERIC, "del", db, k);
}

/// ZREM key member ...: how many were removed. Removing the last member
/// deletes the key ("zrem" then "del").
pub fn zrem<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    members: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize> {
    let (deleted, empty) = match g.write(db, k) {
        None => return Ok(0),
        Some(e) => {
            let z = as_zset_mut(&mut e.value)?;
            let mut deleted = 0;
            for m in members {
                deleted += usize::from(z.remove(m));
                if z.is_empty() {
                    break;
                }
            }
            (deleted, z.is_empty())
        }
    };
    if deleted > 0 {
        if empty {
            drop(g.remove(db, k));
        } else {
            g.modified(db, k);
        }
        g.notify(class::ZSET, "zrem", db, k);
        if empty {
            g.notify(class::GENERIC, "del", db, k);
        }
    }
    Ok(deleted)
}

/// What a ZREMRANGEBY* command removes.
#[derive(Clone, Copy, Debug)]
pub enum RemoveRange<'a> {
    /// ZREMRANGEBYRANK start stop (inclusive, negative from the end).
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange<'a>),
}

/// ZREMRANGEBYRANK / ZREMRANGEBYSCORE / ZREMRANGEBYLEX: how many members
/// were removed; the key goes when it empties ("zremrangeby*", "del").
pub fn zremrange(g: &mut Guard, db: usize, k: &Key, r: RemoveRange) -> Result<usize> {
    let (deleted, empty) = match g.write(db, k) {
        None => return Ok(0),
        Some(e) => {
            let z = as_zset_mut(&mut e.value)?;
            let n = match r {
                RemoveRange::Rank(start, end) => {
                    let spec = RangeSpec::Rank { start, end };
                    let (first, count) = resolve_range(z, &spec, false);
                    if count == 0 {
                        0
                    } else {
                        z.remove_range(first, first + count - 1)
                    }
                }
                RemoveRange::Score(range) => z.remove_in_score(&range),
                RemoveRange::Lex(range) => z.remove_in_lex(&range),
            };
            (n, z.is_empty())
        }
    };
    if deleted > 0 {
        let event = match r {
            RemoveRange::Rank(..) => "zremrangebyrank",
            RemoveRange::Score(_) => "zremrangebyscore",
            RemoveRange::Lex(_) => "zremrangebylex",
        };
        if empty {
            drop(g.remove(db, k));
        } else {
            g.modified(db, k);
        }
        g.notify(class::ZSET, event, db, k);
        if empty {
            g.notify(class::GENERIC, "del", db, k);
        }
    }
    Ok(deleted)
}

// ---------------------------------------------------------------------------
// Pops

/// ZPOPMIN/ZPOPMAX/ZMPOP and the serving step of BZPOPMIN/BZPOPMAX/BZMPOP
/// (Redis `genericZpopCommand`): write lookups of `keys` in order, failing
/// with WRONGTYPE on the first non-zset, and popping from the first
/// existing one up to `count` members from the low end (high end when
/// `max`). Returns None if no key exists. Otherwise `emit` gets the index
/// of the key in `keys`, how many members go, and those members in pop
/// order, while they are still stored (so the reply copies nothing); then
/// they are removed, "zpopmin"/"zpopmax" notified and the key signalled,
/// and an emptied key deleted ("del"). `count` 0 pops nothing and notifies
/// nothing (ZPOPMIN key 0 on an existing key).
pub fn pop<R>(
    g: &mut Guard,
    db: usize,
    keys: &[Key],
    max: bool,
    count: usize,
    emit: impl FnOnce(usize, usize, &mut dyn Iterator<Item = (&[u8], f64)>) -> R,
) -> Result<Option<R>> {
    for (i, k) in keys.iter().enumerate() {
        let (r, n, empty) = match g.write(db, k) {
            None => continue,
            Some(e) => {
                let z = as_zset_mut(&mut e.value)?;
                let len = z.len();
                let n = count.min(len);
                // A stored set is never empty; saturate anyway rather than
                // trust it (iter_from answers nothing out of range).
                let (start, rev) = if max {
                    (len.saturating_sub(1), true)
                } else {
                    (0, false)
                };
                let r = emit(i, n, &mut z.iter_from(start, rev).take(n));
                if n > 0 {
                    if max {
                        z.remove_range(len - n, len - 1);
                    } else {
                        z.remove_range(0, n - 1);
                    }
                }
                (r, n, z.is_empty())
            }
        };
        if n > 0 {
            g.notify(class::ZSET, if max { "zpopmax" } else { "zpopmin" }, db, k);
            g.modified(db, k);
            if empty {
                delete_emptied(g, db, k);
            }
        }
        return Ok(Some(r));
    }
    Ok(None)
}

// ---------------------------------------------------------------------------
// Stores

/// Stores a command's result under `dst` the way Redis's store commands
/// do: a non-empty result replaces whatever `dst` held (TTL cleared, as
/// `setKey`) and `event` is notified; an empty one deletes `dst` ("del",
/// only if it existed). Returns the result's size.
pub fn store(g: &mut Guard, db: usize, dst: &Key, z: ZSetValue, event: &'static str) -> usize {
    let n = z.len();
    if n > 0 {
        let old = g.set(db, dst, Value::ZSet(Box::new(z)), Expiry::Clear);
        g.notify(class::ZSET, event, db, dst);
        drop(old);
    } else if g.remove(db, dst).is_some() {
        g.notify(class::GENERIC, "del", db, dst);
    }
    n
}

/// ZRANGESTORE dst src ...: the selected members of `src` (a read lookup)
/// stored under `dst`, built the way Redis builds it: an empty set sized
/// by [`RangeSpec::known_len`], then each member added in turn (so a long
/// member converts it as ZADD would). Returns the stored count.
pub fn zrangestore(
    g: &mut Guard,
    db: usize,
    dst: &Key,
    src: &Key,
    spec: &RangeSpec,
    rev: bool,
) -> Result<usize> {
    let limits = limits(g);
    let built = view(g, db, src, |z| {
        let Some(z) = z else {
            return ZSetValue::new();
        };
        let mut out = ZSetValue::for_size_hint(spec.known_len(z), &limits);
        let (start, count) = resolve_range(z, spec, rev);
        for (m, s) in z.iter_from(start, rev).take(count) {
            // Scores in a set are never NaN, so adding cannot fail.
            let _ = out.add(m, s, AddFlags::default(), &limits);
        }
        out
    })?;
    Ok(store(g, db, dst, built, "zrangestore"))
}

// ---------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF

/// Which of the three set operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Inter,
    Diff,
}

/// AGGREGATE SUM|MIN|MAX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Aggregate {
    #[default]
    Sum,
    Min,
    Max,
}

/// Redis `zunionInterAggregate`: a SUM of opposite infinities is 0; MIN
/// and MAX keep the old value when the new one is NaN.
fn aggregate(target: &mut f64, val: f64, agg: Aggregate) {
    match agg {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

/// A weighted score (`weight * score`, NaN as 0), as each operation's
/// first value for a member.
fn weighted(weight: f64, score: f64) -> f64 {
    let v = weight * score;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Sizes of the inputs of ZUNION/ZINTER/ZDIFF/ZINTERCARD and their STORE
/// forms, 0 for a missing key: read lookups in argument order, failing
/// with WRONGTYPE on the first key that is neither a sorted set nor a set.
/// Redis does these lookups before it parses WEIGHTS/AGGREGATE, so the
/// caller runs this first and parses after.
pub fn setop_sizes(g: &mut Guard, db: usize, keys: &[Key]) -> Result<Vec<usize>> {
    keys.iter()
        .map(|k| match g.read(db, k) {
            None => Ok(0),
            Some(e) => match &e.value {
                Value::ZSet(z) => Ok(z.len()),
                Value::Set(s) => Ok(s.len()),
                _ => Err(Error::WrongType),
            },
        })
        .collect()
}

/// One input as the operations read it: a sorted set, or a plain set
/// whose members all score 1.
#[derive(Clone, Copy)]
enum Source<'a> {
    Missing,
    ZSet(&'a ZSetValue),
    Set(&'a SetValue),
}

impl Source<'_> {
    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Source::Missing => {}
            Source::ZSet(z) => z.iter().for_each(|(m, s)| f(m, s)),
            Source::Set(s) => set_for_each(s, |m| f(m, 1.0)),
        }
    }

    fn find(&self, m: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::ZSet(z) => z.score(m),
            Source::Set(s) => set_contains(s, m).then_some(1.0),
        }
    }
}

/// The members of a plain set, for ZUNION/ZINTER/ZDIFF inputs (an
/// intset's integers formatted on the stack).
fn set_for_each(s: &SetValue, mut f: impl FnMut(&[u8])) {
    for e in s.iter() {
        e.with_bytes(&mut f);
    }
}

/// Membership in a plain set, for ZINTER/ZDIFF inputs.
fn set_contains(s: &SetValue, m: &[u8]) -> bool {
    s.contains(m)
}

/// Runs `f` on input `k` (already type-checked by [`setop_sizes`]; this
/// lookup counts nothing).
fn with_source<R>(g: &mut Guard, db: usize, k: &Key, f: impl FnOnce(Source<'_>) -> R) -> R {
    match g.peek(db, k).map(|e| &e.value) {
        Some(Value::ZSet(z)) => f(Source::ZSet(z)),
        Some(Value::Set(s)) => f(Source::Set(s)),
        _ => f(Source::Missing),
    }
}

/// The result of a set operation, sorted by (score, member).
pub type Members = Vec<(f64, Box<[u8]>)>;

/// Computes ZUNION / ZINTER / ZDIFF over `keys` (whose sizes
/// [`setop_sizes`] gave) with one weight per key (ignored by ZDIFF), as
/// Redis's `zunionInterDiffGenericCommand` does: union and intersection
/// visit the inputs from the smallest to the largest (a stable order, so
/// float sums come out as Redis's do), intersection keeps the members of
/// the smallest input found in every other one, difference the members of
/// the first input found in no other one, with their first-input scores.
/// With `card_limit` (ZINTERCARD) only the intersection's size is wanted,
/// capped at the limit when it is not 0, and no members are returned.
pub fn setop(
    g: &mut Guard,
    db: usize,
    keys: &[Key],
    sizes: &[usize],
    weights: &[f64],
    agg: Aggregate,
    op: SetOp,
) -> Members {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if op != SetOp::Diff {
        order.sort_by_key(|&i| sizes[i]);
    }
    let weight = |i: usize| weights.get(i).copied().unwrap_or(1.0);
    let mut result: Members = match op {
        SetOp::Union => {
            let mut acc: hashbrown::HashMap<Box<[u8]>, f64> = hashbrown::HashMap::new();
            acc.reserve(order.last().map_or(0, |&i| sizes[i]));
            for &i in &order {
                if sizes[i] == 0 {
                    continue;
                }
                let w = weight(i);
                with_source(g, db, &keys[i], |src| {
                    src.for_each(|m, s| {
                        let v = weighted(w, s);
                        match acc.get_mut(m) {
                            Some(t) => aggregate(t, v, agg),
                            None => {
                                acc.insert(m.into(), v);
                            }
                        }
                    })
                });
            }
            acc.into_iter().map(|(m, s)| (s, m)).collect()
        }
        SetOp::Inter => {
            let Some(&first) = order.first() else {
                return Vec::new();
            };
            if sizes[first] == 0 {
                return Vec::new();
            }
            let mut cand = candidates(g, db, &keys[first], Some(weight(first)));
            for &j in &order[1..] {
                let w = weight(j);
                with_source(g, db, &keys[j], |src| {
                    cand.retain_mut(|(t, m)| match src.find(m) {
                        Some(v) => {
                            aggregate(t, v * w, agg);
                            true
                        }
                        None => false,
                    })
                });
                if cand.is_empty() {
                    break;
                }
            }
            cand
        }
        SetOp::Diff => {
            if sizes.first().is_none_or(|&n| n == 0) {
                return Vec::new();
            }
            let mut cand = candidates(g, db, &keys[0], None);
            for (j, k) in keys.iter().enumerate().skip(1) {
                if sizes[j] == 0 {
                    continue;
                }
                with_source(g, db, k, |src| cand.retain(|(_, m)| src.find(m).is_none()));
                if cand.is_empty() {
                    break;
                }
            }
            cand
        }
    };
    // Scores here are never NaN (weights and sums turn NaN into 0), and
    // -0 equals 0 here as in Redis's skiplist, ties going by member.
    result.sort_unstable_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    });
    result
}

/// ZINTERCARD: the size of the intersection of `keys`, counting stops at
/// `limit` (0: no limit).
pub fn intercard(g: &mut Guard, db: usize, keys: &[Key], sizes: &[usize], limit: usize) -> usize {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| sizes[i]);
    let Some(&first) = order.first() else {
        return 0;
    };
    if sizes[first] == 0 {
        return 0;
    }
    let mut cand = candidates(g, db, &keys[first], None);
    for &j in &order[1..] {
        with_source(g, db, &keys[j], |src| {
            cand.retain(|(_, m)| src.find(m).is_some())
        });
    }
    if limit == 0 {
        cand.len()
    } else {
        cand.len().min(limit)
    }
}

/// The members of one input with their scores (weighted when `weight` is
/// given), as owned copies: the starting point of an intersection or a
/// difference, which then reads the other inputs one at a time.
fn candidates(g: &mut Guard, db: usize, k: &Key, weight: Option<f64>) -> Members {
    with_source(g, db, k, |src| {
        let mut out = Vec::new();
        src.for_each(|m, s| {
            let v = match weight {
                Some(w) => weighted(w, s),
                None => s,
            };
            out.push((v, m.into()));
        });
        out
    })
}

/// ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE's store step: the result as Redis
/// builds it (skiplist, packed when small enough), see [`store`].
pub fn store_members(g: &mut Guard, db: usize, dst: &Key, m: &Members, op: SetOp) -> usize {
    let z = ZSetValue::from_sorted(m, &limits(g));
    let event = match op {
        SetOp::Union => "zunionstore",
        SetOp::Inter => "zinterstore",
        SetOp::Diff => "zdiffstore",
    };
    store(g, db, dst, z, event)
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN

/// ZRANDMEMBER key (no count): one member chosen uniformly; None for an
/// empty set.
pub fn random_member(z: &ZSetValue) -> Option<&[u8]> {
    if z.is_empty() {
        return None;
    }
    z.get(rand::random_range(0..z.len())).map(|(m, _)| m)
}

/// The members (with scores) ZRANDMEMBER key count returns (the cases are
/// in `ops::sample`); the whole set comes highest first, as Redis walks it
/// from the tail (`zuiInitIterator`).
pub type Sample<'a> = sample::Sample<zset::Iter<'a>, Picks<'a>>;

/// Where ZRANDMEMBER's independent picks come from.
pub enum Picks<'a> {
    /// By index from a skiplist (O(log n) each).
    Indexed(&'a ZSetValue),
    /// A packed set's members, listed once so a pick does not walk the
    /// buffer.
    Listed(Vec<(&'a [u8], f64)>),
}

impl<'a> sample::Pick for Picks<'a> {
    type Item = (&'a [u8], f64);
    fn size(&self) -> usize {
        match self {
            Picks::Indexed(z) => z.len(),
            Picks::Listed(all) => all.len(),
        }
    }
    fn get(&self, i: usize) -> Option<Self::Item> {
        match self {
            Picks::Indexed(z) => z.get(i),
            Picks::Listed(all) => all.as_slice().get(i).copied(),
        }
    }
}

/// Chooses ZRANDMEMBER's members for `count` (see [`Sample`]). The caller
/// has range-checked `count` as Redis does.
pub fn sample(z: &ZSetValue, count: i64) -> Sample<'_> {
    let size = z.len();
    let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if wanted == 0 || size == 0 {
        return Sample::empty();
    }
    if count < 0 || wanted == 1 {
        let from = if z.is_packed() && wanted > 1 {
            Picks::Listed(z.iter().collect())
        } else {
            Picks::Indexed(z)
        };
        return Sample::repeat(from, wanted);
    }
    if wanted >= size {
        return Sample::whole(z.iter_from(size - 1, true), size);
    }
    let all: Vec<(&[u8], f64)> = if wanted * 3 > size {
        // Partial Fisher-Yates over everything.
        let mut all: Vec<_> = z.iter().collect();
        sample::shuffle_prefix(&mut all, wanted);
        all
    } else {
        // Few out of many: distinct random indexes, O(log n) each for a
        // skiplist.
        let mut picked = hashbrown::HashSet::with_capacity(wanted);
        let mut all = Vec::with_capacity(wanted);
        while all.len() < wanted {
            let i = rand::random_range(0..size);
            if picked.insert(i) {
                if let Some(e) = z.get(i) {
                    all.push(e);
                }
            }
        }
        all
    };
    Sample::distinct(all)
}

/// One ZSCAN step (Redis `scanGenericCommand` over a sorted set): appends
/// the (member, score) pairs visited from `cursor`, keeping only members
/// matching `pattern` (`*` is no filter, as in Redis), and returns the
/// next cursor, 0 when done. A packed set is returned whole with cursor 0.
pub fn scan_step(
    z: &ZSetValue,
    cursor: u64,
    count: usize,
    pattern: Option<&[u8]>,
    out: &mut Vec<(Vec<u8>, f64)>,
) -> u64 {
    let start = out.len();
    let next = z.scan(cursor, count, out);
    if let Some(p) = pattern.filter(|p| *p != b"*") {
        let mut seen = 0;
        out.retain(|(m, _)| {
            seen += 1;
            seen <= start || glob::glob_match(p, m, false)
        });
    }
    next
}

/// A score as ZSCAN shows it. A listpack stores a score as text made by
/// Redis's `d2string` (an integral value within ±2^62 as an integer, so
/// -0 becomes "0"; anything else "%.17g") and ZSCAN returns that text; a
/// skiplist's scores are printed "%.17g" (`createStringObjectFromLongDouble`).
pub fn scan_score_text(packed: bool, score: f64, out: &mut Vec<u8>) {
    const LIMIT: f64 = 4_611_686_018_427_387_904.0; // (double)(LLONG_MAX / 2)
    if packed && (-LIMIT..=LIMIT).contains(&score) && score.trunc() == score {
        crate::util::num::fmt_i64(score as i64, out);
    } else {
        crate::util::num::fmt_f64(score, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::{engine, with};
    use crate::Engine;

    fn set_limits(e: &Engine, entries: usize, value: usize) {
        e.limits
            .zset_max_listpack_entries
            .store(entries, Ordering::Relaxed);
        e.limits
            .zset_max_listpack_value
            .store(value, Ordering::Relaxed);
    }

    fn add(g: &mut Guard, key: &[u8], pairs: &[(f64, &[u8])]) -> ZaddOutcome {
        let k = g.key(key);
        zadd(g, 0, &k, AddFlags::default(), pairs).unwrap()
    }

    fn members(g: &mut Guard, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
        let k = g.key(key);
        view(g, 0, &k, |z| {
            z.map(|z| z.iter().map(|(m, s)| (m.to_vec(), s)).collect())
                .unwrap_or_default()
        })
        .unwrap()
    }

    fn encoding(g: &mut Guard, key: &[u8]) -> Option<&'static str> {
        let k = g.key(key);
        g.peek(0, &k).map(|e| e.value.encoding())
    }

    #[test]
    fn score_ranges_parse_like_strtod() {
        let r = |a: &str, b: &str| parse_score_range(a.as_bytes(), b.as_bytes());
        let ok = |a: &str, b: &str, min, minex, max, maxex| {
            assert_eq!(
                r(a, b),
                Some(ScoreRange {
                    min,
                    minex,
                    max,
                    maxex
                }),
                "{a} {b}"
            );
        };
        ok("1", "(2", 1.0, false, 2.0, true);
        ok("", "(", 0.0, false, 0.0, true);
        ok(" 1", "+inf", 1.0, false, f64::INFINITY, false);
        ok(
            "-inf",
            "infinity",
            f64::NEG_INFINITY,
            false,
            f64::INFINITY,
            false,
        );
        ok(
            "1e400",
            "(-1e400",
            f64::INFINITY,
            false,
            f64::NEG_INFINITY,
            true,
        );
        ok("0x10", "1e-400", 16.0, false, 0.0, false);
        ok("5\0junk", "6", 5.0, false, 6.0, false);
        for bad in ["1 ", "nan", "(nan", "abc", "((1", " ", "1e", "--1"] {
            assert_eq!(r(bad, "1"), None, "{bad:?}");
            assert_eq!(r("1", bad), None, "{bad:?}");
        }
        let long = format!("{}1", "0".repeat(300));
        ok(&long, &long, 1.0, false, 1.0, false);
    }

    #[test]
    fn lex_ranges_parse_like_redis() {
        use LexBound::*;
        let p = |a: &'static [u8], b: &'static [u8]| parse_lex_range(a, b);
        assert_eq!(
            p(b"-", b"+"),
            Some(LexRange {
                min: NegInf,
                max: PosInf
            })
        );
        assert_eq!(
            p(b"[a", b"(b"),
            Some(LexRange {
                min: Incl(b"a"),
                max: Excl(b"b")
            })
        );
        assert_eq!(
            p(b"(", b"[").map(|r| (r.min, r.max)),
            Some((Excl(b""), Incl(b"")))
        );
        assert_eq!(p(b"+\0x", b"-").map(|r| r.min), Some(PosInf));
        for bad in [&b""[..], b"a", b"+a", b"--", b"1"] {
            assert_eq!(p(bad, b"+"), None);
            assert_eq!(p(b"-", bad), None);
        }
    }

    #[test]
    fn zadd_creates_updates_and_counts() {
        let e = engine();
        with(&e, |g| {
            let o = add(g, b"z", &[(1.0, b"a"), (2.0, b"b"), (3.0, b"a")]);
            assert_eq!((o.added, o.updated, o.processed), (2, 1, 3));
            assert_eq!(
                members(g, b"z"),
                vec![(b"b".to_vec(), 2.0), (b"a".to_vec(), 3.0)]
            );
            let k = g.key(b"z");
            let xx = AddFlags {
                xx: true,
                ..AddFlags::default()
            };
            let k2 = g.key(b"nokey");
            assert_eq!(zadd(g, 0, &k2, xx, &[(1.0, b"a")]).unwrap().processed, 0);
            assert!(!g.exists(0, &k2));
            let incr = AddFlags {
                incr: true,
                ..AddFlags::default()
            };
            assert_eq!(zadd(g, 0, &k, incr, &[(2.5, b"a")]).unwrap().score, 5.5);
            zadd(g, 0, &k, incr, &[(f64::INFINITY, b"inf")]).unwrap();
            assert_eq!(
                zadd(g, 0, &k, incr, &[(f64::NEG_INFINITY, b"inf")]),
                Err(Error::ScoreNaN)
            );
            assert_eq!(zrem(g, 0, &k, [&b"a"[..], b"a", b"x"]).unwrap(), 1);
            assert_eq!(zrem(g, 0, &k, [&b"b"[..], b"inf"]).unwrap(), 2);
            assert!(!g.exists(0, &k));
        });
    }

    #[test]
    fn wrong_type_everywhere() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"s");
            g.set(
                0,
                &k,
                Value::Str(crate::value::StrValue::from_bytes(b"x")),
                Expiry::Clear,
            );
            assert_eq!(
                zadd(g, 0, &k, AddFlags::default(), &[(1.0, b"a")]),
                Err(Error::WrongType)
            );
            assert_eq!(zrem(g, 0, &k, [&b"a"[..]]), Err(Error::WrongType));
            assert_eq!(
                zremrange(g, 0, &k, RemoveRange::Rank(0, -1)),
                Err(Error::WrongType)
            );
            assert_eq!(
                pop(g, 0, &[k], false, 1, |_, _, _| ()).map(|_| ()),
                Err(Error::WrongType)
            );
            assert_eq!(view(g, 0, &k, |_| ()), Err(Error::WrongType));
            assert_eq!(setop_sizes(g, 0, &[k]), Err(Error::WrongType));
        });
    }

    #[test]
    fn encodings_follow_redis() {
        let e = engine();
        set_limits(&e, 3, 4);
        with(&e, |g| {
            // The first member decides a new key's encoding.
            add(g, b"long", &[(1.0, b"12345"), (2.0, b"a")]);
            assert_eq!(encoding(g, b"long"), Some("skiplist"));
            add(g, b"short", &[(1.0, b"a"), (2.0, b"12345")]);
            assert_eq!(encoding(g, b"short"), Some("skiplist"));
            add(g, b"z", &[(1.0, b"a"), (2.0, b"b"), (3.0, b"c")]);
            assert_eq!(encoding(g, b"z"), Some("listpack"));
            add(g, b"z", &[(4.0, b"d")]);
            assert_eq!(encoding(g, b"z"), Some("skiplist"));
            let k = g.key(b"z");
            zremrange(g, 0, &k, RemoveRange::Rank(0, 1)).unwrap();
            assert_eq!(encoding(g, b"z"), Some("skiplist"));
            // ZRANGESTORE of a small result: packed again.
            let d = g.key(b"d");
            let spec = RangeSpec::Rank { start: 0, end: -1 };
            assert_eq!(zrangestore(g, 0, &d, &k, &spec, false).unwrap(), 2);
            assert_eq!(encoding(g, b"d"), Some("listpack"));
            // Union results are re-packed too.
            let u = g.key(b"u");
            let keys = [k, g.key(b"long")];
            let sizes = setop_sizes(g, 0, &keys).unwrap();
            let m = setop(g, 0, &keys, &sizes, &[], Aggregate::Sum, SetOp::Union);
            assert_eq!(m.len(), 4);
            store_members(g, 0, &u, &m, SetOp::Union);
            assert_eq!(encoding(g, b"u"), Some("skiplist"));
            let m = setop(
                g,
                0,
                &keys[..1],
                &sizes[..1],
                &[],
                Aggregate::Sum,
                SetOp::Union,
            );
            store_members(g, 0, &u, &m, SetOp::Union);
            assert_eq!(encoding(g, b"u"), Some("listpack"));
            // An empty result deletes the destination.
            let none = [g.key(b"none")];
            let m = setop(g, 0, &none, &[0], &[], Aggregate::Sum, SetOp::Inter);
            assert_eq!(store_members(g, 0, &u, &m, SetOp::Inter), 0);
            assert!(!g.exists(0, &u));
        });
    }

    #[test]
    fn set_operations_with_weights() {
        let e = engine();
        with(&e, |g| {
            add(g, b"a", &[(1.0, b"x"), (2.0, b"y"), (3.0, b"z")]);
            add(g, b"b", &[(10.0, b"y"), (20.0, b"z"), (30.0, b"w")]);
            add(
                g,
                b"inf",
                &[(f64::INFINITY, b"x"), (f64::NEG_INFINITY, b"y")],
            );
            let keys = [g.key(b"a"), g.key(b"b"), g.key(b"missing")];
            let sizes = setop_sizes(g, 0, &keys).unwrap();
            assert_eq!(sizes, vec![3, 3, 0]);
            let show = |m: Members| -> Vec<(String, f64)> {
                m.into_iter()
                    .map(|(s, m)| (String::from_utf8(m.into()).unwrap(), s))
                    .collect()
            };
            let u = setop(
                g,
                0,
                &keys,
                &sizes,
                &[2.0, 1.0, 5.0],
                Aggregate::Sum,
                SetOp::Union,
            );
            assert_eq!(
                show(u),
                vec![
                    ("x".into(), 2.0),
                    ("y".into(), 14.0),
                    ("z".into(), 26.0),
                    ("w".into(), 30.0)
                ]
            );
            let i = setop(
                g,
                0,
                &keys[..2],
                &sizes[..2],
                &[1.0, 1.0],
                Aggregate::Max,
                SetOp::Inter,
            );
            assert_eq!(show(i), vec![("y".into(), 10.0), ("z".into(), 20.0)]);
            let i = setop(g, 0, &keys, &sizes, &[], Aggregate::Min, SetOp::Inter);
            assert!(i.is_empty());
            let d = setop(
                g,
                0,
                &keys[..2],
                &sizes[..2],
                &[],
                Aggregate::Sum,
                SetOp::Diff,
            );
            assert_eq!(show(d), vec![("x".into(), 1.0)]);
            assert_eq!(intercard(g, 0, &keys[..2], &sizes[..2], 0), 2);
            assert_eq!(intercard(g, 0, &keys[..2], &sizes[..2], 1), 1);
            // inf + -inf sums to 0; 0 * inf weights to 0.
            let ki = [g.key(b"inf"), g.key(b"inf")];
            let si = setop_sizes(g, 0, &ki).unwrap();
            let u = setop(g, 0, &ki, &si, &[1.0, -1.0], Aggregate::Sum, SetOp::Union);
            assert_eq!(show(u), vec![("x".into(), 0.0), ("y".into(), 0.0)]);
            let u = setop(
                g,
                0,
                &ki[..1],
                &si[..1],
                &[0.0],
                Aggregate::Sum,
                SetOp::Union,
            );
            assert_eq!(show(u), vec![("x".into(), 0.0), ("y".into(), 0.0)]);
            // The same key twice: a difference with itself is empty.
            let d = setop(g, 0, &ki, &si, &[], Aggregate::Sum, SetOp::Diff);
            assert!(d.is_empty());
        });
    }

    #[test]
    fn pops_and_ranges() {
        let e = engine();
        with(&e, |g| {
            add(g, b"z", &[(1.0, b"a"), (2.0, b"b"), (3.0, b"c")]);
            let k = g.key(b"z");
            let got = pop(g, 0, &[g.key(b"none"), k], true, 2, |i, n, it| {
                (i, n, it.map(|(m, s)| (m.to_vec(), s)).collect::<Vec<_>>())
            })
            .unwrap()
            .unwrap();
            assert_eq!(
                got,
                (1, 2, vec![(b"c".to_vec(), 3.0), (b"b".to_vec(), 2.0)])
            );
            assert_eq!(pop(g, 0, &[k], false, 0, |_, n, _| n).unwrap(), Some(0));
            assert_eq!(pop(g, 0, &[k], false, 5, |_, n, _| n).unwrap(), Some(1));
            assert!(!g.exists(0, &k));
            assert_eq!(pop(g, 0, &[k], false, 5, |_, n, _| n).unwrap(), None);

            add(
                g,
                b"r",
                &[(1.0, b"a"), (2.0, b"b"), (3.0, b"c"), (4.0, b"d")],
            );
            let k = g.key(b"r");
            let sel = |g: &mut Guard, spec: RangeSpec, rev: bool| -> Vec<Vec<u8>> {
                view(g, 0, &k, |z| {
                    let z = z.unwrap();
                    let (s, n) = resolve_range(z, &spec, rev);
                    z.iter_from(s, rev)
                        .take(n)
                        .map(|(m, _)| m.to_vec())
                        .collect()
                })
                .unwrap()
            };
            let v = |s: &[&str]| s.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
            assert_eq!(
                sel(g, RangeSpec::Rank { start: 1, end: -2 }, false),
                v(&["b", "c"])
            );
            assert_eq!(
                sel(g, RangeSpec::Rank { start: 0, end: 0 }, true),
                v(&["d"])
            );
            assert_eq!(
                sel(
                    g,
                    RangeSpec::Rank {
                        start: -100,
                        end: 100
                    },
                    true
                ),
                v(&["d", "c", "b", "a"])
            );
            assert_eq!(sel(g, RangeSpec::Rank { start: 3, end: 2 }, false), v(&[]));
            let sr = parse_score_range(b"(1", b"+inf").unwrap();
            let score = |offset, limit| RangeSpec::Score {
                range: sr,
                offset,
                limit,
            };
            assert_eq!(sel(g, score(0, -1), false), v(&["b", "c", "d"]));
            assert_eq!(sel(g, score(1, 1), false), v(&["c"]));
            assert_eq!(sel(g, score(1, -7), true), v(&["c", "b"]));
            assert_eq!(sel(g, score(-1, 1), false), v(&[]));
            assert_eq!(sel(g, score(3, 1), false), v(&[]));
            assert_eq!(sel(g, score(0, 0), false), v(&[]));
            let lr = parse_lex_range(b"[b", b"(d").unwrap();
            let lex = |offset, limit| RangeSpec::Lex {
                range: lr,
                offset,
                limit,
            };
            assert_eq!(sel(g, lex(0, -1), false), v(&["b", "c"]));
            assert_eq!(sel(g, lex(0, -1), true), v(&["c", "b"]));
            assert_eq!(sel(g, lex(5, 1), false), v(&[]));
            assert_eq!(
                zremrange(
                    g,
                    0,
                    &k,
                    RemoveRange::Score(parse_score_range(b"2", b"3").unwrap())
                )
                .unwrap(),
                2
            );
            assert_eq!(
                zremrange(
                    g,
                    0,
                    &k,
                    RemoveRange::Lex(parse_lex_range(b"-", b"+").unwrap())
                )
                .unwrap(),
                2
            );
            assert!(!g.exists(0, &k));
        });
    }

    /// Every keyspace event an operation records, as (class, event, key).
    fn events_of(e: &Engine, f: impl FnOnce(&mut Guard)) -> Vec<(u32, &'static str, Vec<u8>)> {
        e.limits.notify.store(u32::MAX, Ordering::Relaxed);
        crate::cx::testing::take_events();
        with(e, f);
        e.limits.notify.store(0, Ordering::Relaxed);
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|ev| match ev {
                crate::events::Event::Notify {
                    class, event, key, ..
                } => Some((class, event, key.to_vec())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn notifications_in_redis_order() {
        let e = engine();
        let z = class::ZSET;
        let gen = class::GENERIC;
        let k = |s: &str| s.as_bytes().to_vec();
        // Creation: "new" (dbAdd) then "zadd".
        let ev = events_of(&e, |g| {
            add(g, b"z", &[(1.0, b"a"), (2.0, b"b"), (3.0, b"c")]);
        });
        assert_eq!(ev, vec![(class::NEW, "new", k("z")), (z, "zadd", k("z"))]);
        // Nothing changed: no event (same score, NX on existing, XX on new).
        let ev = events_of(&e, |g| {
            add(g, b"z", &[(1.0, b"a")]);
            let kz = g.key(b"z");
            let nx = AddFlags {
                nx: true,
                ..AddFlags::default()
            };
            zadd(g, 0, &kz, nx, &[(5.0, b"a")]).unwrap();
            let xx = AddFlags {
                xx: true,
                ..AddFlags::default()
            };
            zadd(g, 0, &kz, xx, &[(5.0, b"new")]).unwrap();
            zrem(g, 0, &kz, [&b"nosuch"[..]]).unwrap();
            zremrange(g, 0, &kz, RemoveRange::Rank(5, 9)).unwrap();
        });
        assert_eq!(ev, vec![]);
        // INCR says "zincr"; the NaN error path still notifies earlier work.
        let ev = events_of(&e, |g| {
            let kz = g.key(b"z");
            let incr = AddFlags {
                incr: true,
                ..AddFlags::default()
            };
            zadd(g, 0, &kz, incr, &[(1.0, b"a")]).unwrap();
        });
        assert_eq!(ev, vec![(z, "zincr", k("z"))]);
        // Pops, removals, and the "del" of an emptied key.
        let ev = events_of(&e, |g| {
            let kz = g.key(b"z");
            pop(g, 0, &[kz], false, 1, |_, _, _| ()).unwrap();
            pop(g, 0, &[kz], true, 0, |_, _, _| ()).unwrap();
            pop(g, 0, &[kz], true, 1, |_, _, _| ()).unwrap();
            zrem(g, 0, &kz, [&b"b"[..]]).unwrap();
        });
        assert_eq!(
            ev,
            vec![
                (z, "zpopmin", k("z")),
                (z, "zpopmax", k("z")),
                (z, "zrem", k("z")),
                (gen, "del", k("z"))
            ]
        );
        for (range, event) in [
            (RemoveRange::Rank(0, -1), "zremrangebyrank"),
            (
                RemoveRange::Score(parse_score_range(b"-inf", b"+inf").unwrap()),
                "zremrangebyscore",
            ),
            (
                RemoveRange::Lex(parse_lex_range(b"-", b"+").unwrap()),
                "zremrangebylex",
            ),
        ] {
            let ev = events_of(&e, |g| {
                add(g, b"r", &[(0.0, b"a"), (0.0, b"b")]);
                let kr = g.key(b"r");
                zremrange(g, 0, &kr, range).unwrap();
            });
            assert_eq!(
                ev,
                vec![
                    (class::NEW, "new", k("r")),
                    (z, "zadd", k("r")),
                    (z, event, k("r")),
                    (gen, "del", k("r"))
                ]
            );
        }
        // Stores: the event on a result, "del" for an empty result over an
        // existing key, nothing for an empty result over nothing.
        let ev = events_of(&e, |g| {
            add(g, b"s", &[(1.0, b"a")]);
            let (ks, kd) = (g.key(b"s"), g.key(b"d"));
            let spec = RangeSpec::Rank { start: 0, end: -1 };
            zrangestore(g, 0, &kd, &ks, &spec, false).unwrap();
            let keys = [ks];
            let m = setop(g, 0, &keys, &[1], &[], Aggregate::Sum, SetOp::Union);
            store_members(g, 0, &kd, &m, SetOp::Union);
            store_members(g, 0, &kd, &m, SetOp::Inter);
            store_members(g, 0, &kd, &m, SetOp::Diff);
            store_members(g, 0, &kd, &Vec::new(), SetOp::Diff);
            store_members(g, 0, &kd, &Vec::new(), SetOp::Diff);
        });
        assert_eq!(
            ev,
            vec![
                (class::NEW, "new", k("s")),
                (z, "zadd", k("s")),
                (class::NEW, "new", k("d")),
                (z, "zrangestore", k("d")),
                (z, "zunionstore", k("d")),
                (z, "zinterstore", k("d")),
                (z, "zdiffstore", k("d")),
                (gen, "del", k("d")),
            ]
        );
    }

    #[test]
    fn writes_signal_watchers_only_when_something_changed() {
        let e = engine();
        let flag: crate::WatchFlag = Default::default();
        with(&e, |g| {
            add(g, b"w", &[(1.0, b"a"), (2.0, b"b")]);
            let k = g.key(b"w");
            g.watch(0, &k, &flag);
            add(g, b"w", &[(1.0, b"a")]);
            zrem(g, 0, &k, [&b"x"[..]]).unwrap();
            zremrange(g, 0, &k, RemoveRange::Rank(7, 9)).unwrap();
            view(g, 0, &k, |_| ()).unwrap();
            assert!(!flag.load(Ordering::Relaxed));
            add(g, b"w", &[(3.0, b"a")]);
            assert!(flag.load(Ordering::Relaxed));
            flag.store(false, Ordering::Relaxed);
            pop(g, 0, &[k], false, 1, |_, _, _| ()).unwrap();
            assert!(flag.load(Ordering::Relaxed));
            flag.store(false, Ordering::Relaxed);
            zrem(g, 0, &k, [&b"a"[..]]).unwrap();
            assert!(flag.load(Ordering::Relaxed));
        });
    }

    #[test]
    fn plain_sets_are_inputs_with_score_one() {
        let e = engine();
        with(&e, |g| {
            let ks = g.key(b"set");
            let mut s = SetValue::new();
            for m in [&b"x"[..], b"y", b"q"] {
                s.add(m, 512);
            }
            g.set(0, &ks, Value::Set(Box::new(s)), Expiry::Clear);
            add(g, b"z", &[(5.0, b"x"), (6.0, b"y"), (7.0, b"z")]);
            let keys = [g.key(b"z"), ks];
            let sizes = setop_sizes(g, 0, &keys).unwrap();
            assert_eq!(sizes, vec![3, 3]);
            let names = |m: &Members| -> Vec<(f64, Vec<u8>)> {
                m.iter().map(|(s, m)| (*s, m.to_vec())).collect()
            };
            let u = setop(
                g,
                0,
                &keys,
                &sizes,
                &[1.0, 10.0],
                Aggregate::Sum,
                SetOp::Union,
            );
            assert_eq!(
                names(&u),
                vec![
                    (7.0, b"z".to_vec()),
                    (10.0, b"q".to_vec()),
                    (15.0, b"x".to_vec()),
                    (16.0, b"y".to_vec())
                ]
            );
            let i = setop(g, 0, &keys, &sizes, &[], Aggregate::Max, SetOp::Inter);
            assert_eq!(names(&i), vec![(5.0, b"x".to_vec()), (6.0, b"y".to_vec())]);
            let d = setop(
                g,
                0,
                &[keys[1], keys[0]],
                &[3, 3],
                &[],
                Aggregate::Sum,
                SetOp::Diff,
            );
            assert_eq!(names(&d), vec![(1.0, b"q".to_vec())]);
            assert_eq!(intercard(g, 0, &keys, &sizes, 0), 2);

            // An intset: members are integers, matched by their text.
            let ki = g.key(b"ints");
            let ints = SetValue::from_members([&b"1"[..], b"2", b"30"], 512);
            assert!(ints.is_intset());
            g.set(0, &ki, Value::Set(Box::new(ints)), Expiry::Clear);
            add(g, b"zi", &[(5.0, b"2"), (6.0, b"30"), (7.0, b"x")]);
            let keys = [g.key(b"zi"), ki];
            let sizes = setop_sizes(g, 0, &keys).unwrap();
            let i = setop(g, 0, &keys, &sizes, &[], Aggregate::Sum, SetOp::Inter);
            assert_eq!(names(&i), vec![(6.0, b"2".to_vec()), (7.0, b"30".to_vec())]);
            let u = setop(
                g,
                0,
                &keys[1..],
                &sizes[1..],
                &[2.0],
                Aggregate::Sum,
                SetOp::Union,
            );
            assert_eq!(
                names(&u),
                vec![
                    (2.0, b"1".to_vec()),
                    (2.0, b"2".to_vec()),
                    (2.0, b"30".to_vec())
                ]
            );
        });
    }

    #[test]
    fn samples_and_scan_text() {
        let l = ZSetLimits::default();
        let mut z = ZSetValue::new();
        assert!(random_member(&z).is_none());
        for i in 0..10 {
            z.add(
                format!("m{i}").as_bytes(),
                i as f64,
                AddFlags::default(),
                &l,
            )
            .unwrap();
        }
        assert_eq!(sample(&z, 0).len(), 0);
        assert_eq!(sample(&z, -25).count(), 25);
        let whole: Vec<_> = sample(&z, 10).map(|(m, _)| m.to_vec()).collect();
        assert_eq!(whole.first().map(|m| &m[..]), Some(&b"m9"[..]));
        assert_eq!(whole.len(), 10);
        for n in [2usize, 4, 9] {
            let s: Vec<_> = sample(&z, n as i64).collect();
            let set: std::collections::HashSet<_> = s.iter().map(|x| x.0).collect();
            assert_eq!(set.len(), n);
        }
        let t = |packed, v: f64| {
            let mut o = Vec::new();
            scan_score_text(packed, v, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(t(true, -0.0), "0");
        assert_eq!(t(false, -0.0), "-0");
        assert_eq!(t(true, 123456789012345678.0), "123456789012345680");
        assert_eq!(t(false, 123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(t(true, 4611686018427387904.0), "4611686018427387904");
        assert_eq!(t(true, 4611686018427388905.0), "4.6116860184273889e+18");
        assert_eq!(t(true, f64::INFINITY), "inf");
        assert_eq!(t(true, 0.1), "0.10000000000000001");
    }
}
