//! Set operations (Redis 7.0 `src/t_set.c`): SADD, SREM, SMOVE, SPOP,
//! SRANDMEMBER's sampling, the SINTER / SUNION / SDIFF family with their
//! STORE and CARD forms, and one SSCAN step.
//!
//! Owns the keyspace side of those commands: which lookup each one does
//! (read lookups count hits and misses, as `lookupKeyRead` does), when a key
//! is created (`setTypeCreate` + `dbAdd`) or deleted (a set left empty),
//! WATCH signals (`g.modified`) and keyspace notifications in Redis's order.
//! The encodings and their conversion rules live in `value::set`; the wire
//! replies live in the server, which receives members through a [`Sink`]
//! while the shards are still locked, so listing a set copies nothing.
use std::sync::atomic::Ordering;

use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::{as_set, as_set_mut};
use crate::util::glob;
use crate::value::set::{Elem, SetValue};
use crate::value::{StrValue, Value};
use crate::{Error, Result};

/// Receives the members of a reply: `len` once, then that many `elem`s
/// (fewer only if an `elem` returned false, see [`srandmember_count`]).
pub trait Sink {
    fn len(&mut self, n: usize);
    /// One member; false asks the producer to stop.
    fn elem(&mut self, e: Elem<'_>) -> bool;
}

/// `set-max-intset-entries` as configured now.
fn max_intset(g: &Guard) -> usize {
    g.engine()
        .limits
        .set_max_intset_entries
        .load(Ordering::Relaxed)
}

/// Calls `f` with the set under `k` (None when the key is absent), or fails
/// with WRONGTYPE. A read lookup: counts a hit or miss and touches the key,
/// like Redis's `lookupKeyRead`. The shard stays locked while `f` runs, so
/// `f` can write a reply straight from the stored members.
pub fn view<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<&SetValue>) -> R,
) -> Result<R> {
    match g.read(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(as_set(&e.value)?))),
    }
}

/// SCARD key: members, 0 for a missing key.
pub fn scard(g: &mut Guard, db: usize, k: &Key) -> Result<usize> {
    view(g, db, k, |s| s.map_or(0, SetValue::len))
}

/// SISMEMBER key member.
pub fn sismember(g: &mut Guard, db: usize, k: &Key, member: &[u8]) -> Result<bool> {
    view(g, db, k, |s| s.is_some_and(|s| s.contains(member)))
}

/// SMEMBERS key (Redis runs it as a one-key SINTER): every member, in the
/// set's order (ascending for an intset).
pub fn smembers(g: &mut Guard, db: usize, k: &Key, sink: &mut impl Sink) -> Result<()> {
    view(g, db, k, |s| emit_all(s, sink))
}

fn emit_all(s: Option<&SetValue>, sink: &mut impl Sink) {
    let Some(s) = s else {
        sink.len(0);
        return;
    };
    sink.len(s.len());
    for e in s.iter() {
        sink.elem(e);
    }
}

/// SADD key member [member ...]: how many members were new. A new key is
/// created in the encoding its first member needs (`setTypeCreate`) and
/// announced as "new" before "sadd"; nothing is signalled when nothing was
/// added.
pub fn sadd<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    members: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize> {
    let max = max_intset(g);
    let added = match g.write(db, k) {
        Some(e) => {
            let s = as_set_mut(&mut e.value)?;
            let added = members.into_iter().filter(|m| s.add(m, max)).count();
            if added > 0 {
                g.modified(db, k);
            }
            added
        }
        None => {
            let mut members = members.into_iter().peekable();
            let Some(first) = members.peek() else {
                return Ok(0);
            };
            let mut s = SetValue::for_member(first);
            let added = members.filter(|m| s.add(m, max)).count();
            g.set(db, k, Value::Set(Box::new(s)), Expiry::Clear);
            added
        }
    };
    if added > 0 {
        g.notify(class::SET, "sadd", db, k);
    }
    Ok(added)
}

/// SREM key member [member ...]: how many were removed. Removing the last
/// member deletes the key ("srem" then "del"), as Redis does.
pub fn srem<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    members: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize> {
    let (removed, emptied) = match g.write(db, k) {
        None => return Ok(0),
        Some(e) => {
            let s = as_set_mut(&mut e.value)?;
            let mut removed = 0;
            for m in members {
                if s.remove(m) {
                    removed += 1;
                    // Redis stops here too: the key is gone.
                    if s.is_empty() {
                        break;
                    }
                }
            }
            (removed, s.is_empty())
        }
    };
    if removed > 0 {
        if emptied {
            drop(g.remove(db, k));
        } else {
            g.modified(db, k);
        }
        g.notify(class::SET, "srem", db, k);
        if emptied {
            g.notify(class::GENERIC, "del", db, k);
        }
    }
    Ok(removed)
}

/// SMOVE source destination member: true if the member was moved (or,
/// when source and destination are one key, if it is a member). Follows
/// `smoveCommand`: both keys are looked up (so both may expire) before any
/// type check; "srem" on the source (and "del" if that emptied it), a new
/// destination created for the member (`setTypeCreate`), and "sadd" only
/// if the destination did not already hold the member.
pub fn smove(g: &mut Guard, db: usize, src: &Key, dst: &Key, member: &[u8]) -> Result<bool> {
    let is_set = |e: &mut crate::Entry| matches!(e.value, Value::Set(_));
    let src_is_set = g.write(db, src).map(is_set);
    let dst_is_set = g.write(db, dst).map(is_set);
    let Some(src_is_set) = src_is_set else {
        return Ok(false);
    };
    if !src_is_set || dst_is_set == Some(false) {
        return Err(Error::WrongType);
    }
    if src.bytes == dst.bytes {
        return Ok(g
            .peek(db, src)
            .is_some_and(|e| as_set(&e.value).is_ok_and(|s| s.contains(member))));
    }
    let emptied = match g.peek(db, src) {
        Some(e) => {
            let s = as_set_mut(&mut e.value)?;
            if !s.remove(member) {
                return Ok(false);
            }
            s.is_empty()
        }
        None => return Ok(false),
    };
    g.notify(class::SET, "srem", db, src);
    if emptied {
        drop(g.remove(db, src));
        g.notify(class::GENERIC, "del", db, src);
    } else {
        g.modified(db, src);
    }
    let max = max_intset(g);
    let added = match g.peek(db, dst) {
        Some(e) => {
            let added = as_set_mut(&mut e.value)?.add(member, max);
            if added {
                g.modified(db, dst);
            }
            added
        }
        None => {
            let mut s = SetValue::for_member(member);
            s.add(member, max);
            g.set(db, dst, Value::Set(Box::new(s)), Expiry::Clear);
            true
        }
    };
    if added {
        g.notify(class::SET, "sadd", db, dst);
    }
    Ok(true)
}

/// SPOP key (no count): calls `f` with a member chosen uniformly at random
/// just before removing it, and returns its result; None for a missing
/// key. "spop", then "del" if the set is now empty.
pub fn spop_one<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Elem<'_>) -> R,
) -> Result<Option<R>> {
    let (r, emptied) = match g.write(db, k) {
        None => return Ok(None),
        Some(e) => {
            let s = as_set_mut(&mut e.value)?;
            let Some(i) = s.random_index() else {
                return Ok(None);
            };
            let r = s.get(i).map(f);
            s.remove_at(i);
            (r, s.is_empty())
        }
    };
    g.notify(class::SET, "spop", db, k);
    if emptied {
        drop(g.remove(db, k));
        g.notify(class::GENERIC, "del", db, k);
    } else {
        g.modified(db, k);
    }
    Ok(r)
}

/// Redis `SPOP_MOVE_STRATEGY_MUL`: when fewer than `count / 5` members
/// would remain, SPOP builds a new set of the survivors instead.
const SPOP_MOVE_STRATEGY_MUL: u128 = 5;

/// SPOP key count (the caller has checked `count` is not negative): the
/// popped members go to `sink`. Follows `spopWithCountCommand`:
/// * missing key or count 0: nothing, and no event;
/// * count >= size: the whole set, in the order SUNION of the key would
///   list it (Redis runs exactly that; it is also a read lookup, counted
///   as a keyspace hit), then the key is deleted ("spop", "del");
/// * few to pop: that many random picks, each removed at once;
/// * almost all: random survivors are moved to a new set, created like
///   SADD would (so it may be an intset again), the members left in the old
///   one are the reply (ascending if it was an intset), and the new set
///   replaces the old under the same key and TTL.
pub fn spop_count(
    g: &mut Guard,
    db: usize,
    k: &Key,
    count: u64,
    sink: &mut impl Sink,
) -> Result<()> {
    let size = match g.write(db, k) {
        None => {
            sink.len(0);
            return Ok(());
        }
        Some(e) => as_set(&e.value)?.len(),
    };
    if count == 0 {
        sink.len(0);
        return Ok(());
    }
    g.notify(class::SET, "spop", db, k);
    let max = max_intset(g);
    if count >= size as u64 {
        if let Some(e) = g.read(db, k) {
            emit_union_of_one(as_set(&e.value)?, max, sink);
        }
        drop(g.remove(db, k));
        g.notify(class::GENERIC, "del", db, k);
        return Ok(());
    }
    let Some(e) = g.peek(db, k) else {
        return Ok(());
    };
    let s = as_set_mut(&mut e.value)?;
    let count = count as usize; // < size
    let remaining = size - count;
    sink.len(count);
    if remaining as u128 * SPOP_MOVE_STRATEGY_MUL > count as u128 {
        for _ in 0..count {
            let Some(i) = s.random_index() else { break };
            if let Some(e) = s.get(i) {
                sink.elem(e);
            }
            s.remove_at(i);
        }
    } else {
        let mut survivors: Option<SetValue> = None;
        for _ in 0..remaining {
            let Some(i) = s.random_index() else { break };
            let Some(e) = s.get(i) else { break };
            let new = survivors.get_or_insert_with(|| e.with_bytes(SetValue::for_member));
            new.add_elem(e, max);
            s.remove_at(i);
        }
        for e in s.iter() {
            sink.elem(e);
        }
        if let Some(new) = survivors {
            *s = new;
        }
    }
    g.modified(db, k);
    Ok(())
}

/// The members of `s` in the order Redis's one-key SUNION lists them: it
/// adds them to a fresh intset, which stays one (and so lists ascending)
/// only if every member is an integer and there are at most `max_intset`.
fn emit_union_of_one(s: &SetValue, max_intset: usize, sink: &mut impl Sink) {
    sink.len(s.len());
    if !s.is_intset() && s.len() <= max_intset.min(crate::value::set::INTSET_MAX_ENTRIES_CAP) {
        let mut ints = Vec::with_capacity(s.len());
        for e in s.iter() {
            match e.as_int() {
                Some(n) => ints.push(n),
                None => {
                    ints.clear();
                    break;
                }
            }
        }
        if ints.len() == s.len() {
            ints.sort_unstable();
            for n in ints {
                sink.elem(Elem::Int(n));
            }
            return;
        }
    }
    for e in s.iter() {
        sink.elem(e);
    }
}

/// Redis `SRANDMEMBER_SUB_STRATEGY_MUL`.
const SRANDMEMBER_SUB_STRATEGY_MUL: u128 = 3;

/// SRANDMEMBER key count (the caller has range-checked `count` to
/// `-i64::MAX..=i64::MAX`), the cases of `srandmemberWithCountCommand`:
/// * missing key or count 0: nothing;
/// * negative count, or 1: `|count|` independent uniform picks, repeats
///   allowed; the only reply whose size the set does not bound, so it stops
///   as soon as `sink` refuses a member;
/// * count >= size: the whole set in its order (ascending for an intset);
/// * otherwise `count` distinct members in random order.
pub fn srandmember_count(s: Option<&SetValue>, count: i64, sink: &mut impl Sink) {
    let Some(s) = s else {
        sink.len(0);
        return;
    };
    let size = s.len();
    let wanted = count.unsigned_abs();
    if wanted == 0 || size == 0 {
        sink.len(0);
        return;
    }
    if count < 0 || wanted == 1 {
        sink.len(usize::try_from(wanted).unwrap_or(usize::MAX));
        for _ in 0..wanted {
            match s.random() {
                Some(e) if sink.elem(e) => {}
                _ => return,
            }
        }
        return;
    }
    if wanted >= size as u64 {
        emit_all(Some(s), sink);
        return;
    }
    let wanted = wanted as usize; // < size
    sink.len(wanted);
    if wanted as u128 * SRANDMEMBER_SUB_STRATEGY_MUL > size as u128 {
        // Many of them: a partial Fisher-Yates over all positions.
        let mut all: Vec<usize> = (0..size).collect();
        for i in 0..wanted {
            let j = rand::random_range(i..size);
            all.swap(i, j);
            if let Some(e) = s.get(all[i]) {
                sink.elem(e);
            }
        }
    } else {
        // Few of them: random positions, skipping repeats.
        let mut seen = hashbrown::HashSet::with_capacity(wanted);
        while seen.len() < wanted {
            let i = rand::random_range(0..size);
            if seen.insert(i) {
                if let Some(e) = s.get(i) {
                    sink.elem(e);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Multi-key commands

/// Stands in for a set lent out by [`with_sets`]; allocates nothing.
fn placeholder() -> Value {
    Value::Str(StrValue::Int(0))
}

/// Above this many keys, repeated names are found with a hash map.
const LINEAR_DEDUP_MAX: usize = 16;

/// Calls `f` with the set under each of `keys` (None for a missing key),
/// looked up in order with read lookups as Redis's set-algebra commands do
/// (each key, repeats included, counts a hit or miss). Stops at the first
/// key of another type with WRONGTYPE, after the lookups before it.
///
/// The guard lends out one entry at a time, so the sets are moved out of
/// their entries (leaving a placeholder no one else can see: the shards are
/// locked) and put back after `f`. A key named twice gets the same set
/// both times, so `std::ptr::eq` tells repeats apart as Redis compares
/// object pointers.
///
/// `store`: the command writes a destination, so the sources are write
/// lookups (Redis `lookupKeyWrite` in the STORE variants): no hit/miss
/// counting and no `keymiss` event.
fn with_sets<R>(
    g: &mut Guard,
    db: usize,
    keys: &[Key],
    store: bool,
    f: impl FnOnce(&[Option<&SetValue>]) -> R,
) -> Result<R> {
    let mut taken: Vec<(usize, Box<SetValue>)> = Vec::new();
    // Per key: the index in `taken` of its set, or None if missing.
    let mut slots: Vec<Option<usize>> = Vec::with_capacity(keys.len());
    let mut by_name: hashbrown::HashMap<&[u8], usize> = hashbrown::HashMap::new();
    let mut failed = None;
    for (i, k) in keys.iter().enumerate() {
        let earlier = if keys.len() <= LINEAR_DEDUP_MAX {
            keys[..i].iter().position(|o| o.bytes == k.bytes)
        } else {
            by_name.get(k.bytes).copied()
        };
        let found = if store { g.write(db, k) } else { g.read(db, k) };
        let Some(e) = found else {
            slots.push(None);
            continue;
        };
        if let Some(j) = earlier {
            // Already lent out (a missing or wrong-typed key would not be
            // here with an entry, or would have stopped the loop).
            slots.push(slots[j]);
            continue;
        }
        if keys.len() > LINEAR_DEDUP_MAX {
            by_name.insert(k.bytes, i);
        }
        if !matches!(e.value, Value::Set(_)) {
            failed = Some(Error::WrongType);
            break;
        }
        if let Value::Set(s) = std::mem::replace(&mut e.value, placeholder()) {
            slots.push(Some(taken.len()));
            taken.push((i, s));
        }
    }
    let outcome = match failed {
        Some(err) => Err(err),
        None => {
            let sets: Vec<Option<&SetValue>> =
                slots.iter().map(|s| s.map(|t| &*taken[t].1)).collect();
            Ok(f(&sets))
        }
    };
    for (i, s) in taken {
        if let Some(e) = g.peek(db, &keys[i]) {
            e.value = Value::Set(s);
        }
    }
    outcome
}

/// The members of the intersection, in Redis's order: those of the
/// smallest set (the first of equal ones, as Redis's sort keeps them) that
/// every other set holds, until `visit` returns false. Nothing if any key
/// is missing.
fn intersect<'s>(sets: &[Option<&'s SetValue>], mut visit: impl FnMut(Elem<'s>) -> bool) {
    let mut present: Vec<&SetValue> = Vec::with_capacity(sets.len());
    for s in sets {
        match s {
            Some(s) => present.push(s),
            None => return,
        }
    }
    present.sort_by_key(|s| s.len());
    let Some((&first, rest)) = present.split_first() else {
        return;
    };
    for e in first.iter() {
        let everywhere = rest
            .iter()
            .all(|&o| std::ptr::eq(o, first) || o.contains_elem(e));
        if everywhere && !visit(e) {
            return;
        }
    }
}

/// SINTER key [key ...] (and SMEMBERS): the intersection to `sink`.
pub fn sinter(g: &mut Guard, db: usize, keys: &[Key], sink: &mut impl Sink) -> Result<()> {
    if let [k] = keys {
        return smembers(g, db, k, sink);
    }
    with_sets(g, db, keys, false, |sets| {
        let mut found = Vec::new();
        intersect(sets, |e| {
            found.push(e);
            true
        });
        sink.len(found.len());
        for e in found {
            sink.elem(e);
        }
    })
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the
/// intersection, counting stopped at `limit` (0: no limit).
pub fn sintercard(g: &mut Guard, db: usize, keys: &[Key], limit: usize) -> Result<usize> {
    with_sets(g, db, keys, false, |sets| {
        let mut n = 0;
        intersect(sets, |_| {
            n += 1;
            limit == 0 || n < limit
        });
        n
    })
}

/// SINTERSTORE destination key [key ...]: stores the intersection (built
/// from an empty intset like Redis, so its encoding follows the usual
/// conversions) and returns its size; see [`store`].
pub fn sinterstore(g: &mut Guard, db: usize, dst: &Key, keys: &[Key]) -> Result<usize> {
    let max = max_intset(g);
    let result = with_sets(g, db, keys, true, |sets| {
        let mut out = SetValue::new();
        intersect(sets, |e| {
            out.add_elem(e, max);
            true
        });
        out
    })?;
    Ok(store(g, db, dst, result, "sinterstore"))
}

/// SUNION or SDIFF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Diff,
}

/// Redis `sunionDiffGenericCommand`'s result set, built as it builds it:
/// a fresh intset that members are added to (and, for the second DIFF
/// algorithm, removed from), converting on the way. Which algorithm runs
/// matters: it decides whether the result is still an intset, and so its
/// encoding when stored and its order when listed.
fn union_diff(sets: &[Option<&SetValue>], op: SetOp, max: usize) -> SetValue {
    let mut out = SetValue::new();
    match op {
        SetOp::Union => {
            for s in sets.iter().flatten() {
                for e in s.iter() {
                    out.add_elem(e, max);
                }
            }
        }
        SetOp::Diff => {
            let Some(Some(first)) = sets.first().copied() else {
                return out;
            };
            let rest = &sets[1..];
            // The first key named again: the difference is empty.
            if rest.iter().flatten().any(|&s| std::ptr::eq(s, first)) {
                return out;
            }
            // Algorithm 1 costs |first| per set, algorithm 2 the sizes of
            // all sets; 1 wins ties and gets a 2x head start.
            let present = sets.iter().flatten().count() as u128;
            let algo_one = first.len() as u128 * present / 2;
            let algo_two: u128 = sets.iter().flatten().map(|s| s.len() as u128).sum();
            if algo_one <= algo_two {
                let mut others: Vec<&SetValue> = rest.iter().flatten().copied().collect();
                // Largest first, to find a member sooner (Redis's order).
                others.sort_by_key(|s| std::cmp::Reverse(s.len()));
                for e in first.iter() {
                    if !others.iter().any(|o| o.contains_elem(e)) {
                        out.add_elem(e, max);
                    }
                }
            } else {
                for e in first.iter() {
                    out.add_elem(e, max);
                }
                for s in rest.iter().flatten() {
                    if out.is_empty() {
                        break;
                    }
                    for e in s.iter() {
                        out.remove_elem(e);
                    }
                }
            }
        }
    }
    out
}

/// SUNION / SDIFF key [key ...]: the result to `sink`, in the order of the
/// set Redis builds for it (ascending when that is an intset).
pub fn sunion_diff(
    g: &mut Guard,
    db: usize,
    keys: &[Key],
    op: SetOp,
    sink: &mut impl Sink,
) -> Result<()> {
    let max = max_intset(g);
    with_sets(g, db, keys, false, |sets| {
        if let ([Some(s)], SetOp::Union) = (sets, op) {
            // One set: no need to build the copy to know its order.
            return emit_union_of_one(s, max, sink);
        }
        let out = union_diff(sets, op, max);
        emit_all(Some(&out), sink);
    })
}

/// SUNIONSTORE / SDIFFSTORE destination key [key ...]: stores the result
/// and returns its size; see [`store`].
pub fn sunion_diff_store(
    g: &mut Guard,
    db: usize,
    dst: &Key,
    keys: &[Key],
    op: SetOp,
) -> Result<usize> {
    let max = max_intset(g);
    let result = with_sets(g, db, keys, true, |sets| union_diff(sets, op, max))?;
    let event = match op {
        SetOp::Union => "sunionstore",
        SetOp::Diff => "sdiffstore",
    };
    Ok(store(g, db, dst, result, event))
}

/// The end of every STORE command: a non-empty result replaces whatever
/// `dst` held, TTL cleared (Redis `setKey`: "new" if the key is new, then
/// `event`); an empty one deletes `dst` ("del" if it existed).
fn store(g: &mut Guard, db: usize, dst: &Key, result: SetValue, event: &'static str) -> usize {
    let n = result.len();
    if n > 0 {
        drop(g.set(db, dst, Value::Set(Box::new(result)), Expiry::Clear));
        g.notify(class::SET, event, db, dst);
    } else if g.remove(db, dst).is_some() {
        g.notify(class::GENERIC, "del", db, dst);
    }
    n
}

/// One SSCAN step (Redis `scanGenericCommand` over a set): appends the
/// members visited from `cursor` that match `pattern` to `out` and returns
/// the next cursor, 0 when done. An intset is returned whole with cursor 0.
/// `pattern` `*` is no filter at all, as in Redis.
pub fn scan_step<'s>(
    s: &'s SetValue,
    cursor: u64,
    count: usize,
    pattern: Option<&[u8]>,
    out: &mut Vec<Elem<'s>>,
) -> u64 {
    let pattern = pattern.filter(|p| *p != b"*");
    s.scan(cursor, count, |e| {
        let keep = match pattern {
            None => true,
            Some(p) => e.with_bytes(|b| glob::glob_match(p, b, false)),
        };
        if keep {
            out.push(e);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::ops::test_support::{engine, with};
    use crate::Engine;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashSet};

    /// A sink that records what it got.
    #[derive(Default, Debug)]
    struct Rec {
        len: Option<usize>,
        items: Vec<Vec<u8>>,
        stop_after: Option<usize>,
    }

    impl Sink for Rec {
        fn len(&mut self, n: usize) {
            assert!(self.len.is_none(), "len twice");
            self.len = Some(n);
        }
        fn elem(&mut self, e: Elem<'_>) -> bool {
            self.items.push(e.to_vec());
            self.stop_after.is_none_or(|n| self.items.len() < n)
        }
    }

    impl Rec {
        fn check(self) -> Vec<Vec<u8>> {
            assert_eq!(self.len, Some(self.items.len()), "header and elements");
            self.items
        }
        fn strs(self) -> Vec<String> {
            self.check()
                .into_iter()
                .map(|b| String::from_utf8(b).unwrap())
                .collect()
        }
    }

    fn set_limit(e: &Engine, n: usize) {
        e.limits.set_max_intset_entries.store(n, Ordering::Relaxed);
    }

    fn notify_all(e: &Engine) {
        e.limits.notify.store(u32::MAX, Ordering::Relaxed);
        crate::cx::testing::take_events();
    }

    /// The notifications recorded since the last call, as "event:key".
    fn notes() -> Vec<String> {
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Notify { event, key, .. } => {
                    Some(format!("{event}:{}", String::from_utf8_lossy(&key)))
                }
                _ => None,
            })
            .collect()
    }

    fn add(g: &mut Guard, key: &str, members: &[&str]) -> usize {
        let k = g.key(key.as_bytes());
        sadd(g, 0, &k, members.iter().map(|m| m.as_bytes())).unwrap()
    }

    fn members(g: &mut Guard, key: &str) -> Vec<String> {
        let k = g.key(key.as_bytes());
        let mut r = Rec::default();
        smembers(g, 0, &k, &mut r).unwrap();
        r.strs()
    }

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    fn encoding(g: &mut Guard, key: &str) -> Option<&'static str> {
        let k = g.key(key.as_bytes());
        g.peek(0, &k).map(|e| e.value.encoding())
    }

    fn keys<'a>(g: &Guard, names: &[&'a str]) -> Vec<Key<'a>> {
        names.iter().map(|n| g.key(n.as_bytes())).collect()
    }

    fn put_str(g: &mut Guard, key: &str) {
        let k = g.key(key.as_bytes());
        g.set(0, &k, Value::Str(StrValue::from_bytes(b"x")), Expiry::Clear);
    }

    #[test]
    fn sadd_srem_and_reads() {
        let e = engine();
        notify_all(&e);
        with(&e, |g| {
            assert_eq!(add(g, "s", &["3", "1", "2", "1"]), 3);
            assert_eq!(notes(), ["new:s", "sadd:s"]);
            assert_eq!(add(g, "s", &["1", "2"]), 0);
            assert_eq!(notes(), Vec::<String>::new());
            assert_eq!(members(g, "s"), ["1", "2", "3"]);
            assert_eq!(encoding(g, "s"), Some("intset"));
            let k = g.key(b"s");
            assert_eq!(scard(g, 0, &k), Ok(3));
            assert_eq!(sismember(g, 0, &k, b"2"), Ok(true));
            assert_eq!(sismember(g, 0, &k, b"02"), Ok(false));
            assert_eq!(srem(g, 0, &k, [&b"1"[..], b"9", b"1"]), Ok(1));
            assert_eq!(notes(), ["srem:s"]);
            assert_eq!(srem(g, 0, &k, [&b"9"[..]]), Ok(0));
            assert_eq!(notes(), Vec::<String>::new());
            assert_eq!(srem(g, 0, &k, [&b"2"[..], b"3", b"2"]), Ok(2));
            assert_eq!(notes(), ["srem:s", "del:s"]);
            assert!(!g.exists(0, &k));
            assert_eq!(scard(g, 0, &k), Ok(0));
            assert_eq!(members(g, "s"), Vec::<String>::new());
            // A first non-integer member makes a hashtable at once.
            add(g, "h", &["a", "1"]);
            assert_eq!(encoding(g, "h"), Some("hashtable"));
        });
    }

    #[test]
    fn wrong_type_everywhere() {
        let e = engine();
        with(&e, |g| {
            put_str(g, "str");
            add(g, "s", &["1"]);
            let k = g.key(b"str");
            let s = g.key(b"s");
            let wt = Err(Error::WrongType);
            assert_eq!(sadd(g, 0, &k, [&b"a"[..]]), wt);
            assert_eq!(srem(g, 0, &k, [&b"a"[..]]), wt);
            assert_eq!(scard(g, 0, &k), wt);
            assert_eq!(sismember(g, 0, &k, b"a").map(|_| 0), wt);
            assert_eq!(smembers(g, 0, &k, &mut Rec::default()).map(|_| 0), wt);
            assert_eq!(spop_one(g, 0, &k, |_| ()).map(|_| 0), wt);
            assert_eq!(spop_count(g, 0, &k, 1, &mut Rec::default()).map(|_| 0), wt);
            assert_eq!(smove(g, 0, &k, &s, b"1").map(|_| 0), wt);
            assert_eq!(smove(g, 0, &s, &k, b"1").map(|_| 0), wt);
            let ks = keys(g, &["nosuch", "s", "str"]);
            assert_eq!(sinter(g, 0, &ks, &mut Rec::default()).map(|_| 0), wt);
            assert_eq!(sintercard(g, 0, &ks, 0), wt);
            assert_eq!(sinterstore(g, 0, &s, &ks), wt);
            let mut r = Rec::default();
            assert_eq!(sunion_diff(g, 0, &ks, SetOp::Diff, &mut r).map(|_| 0), wt);
            assert_eq!(sunion_diff_store(g, 0, &s, &ks, SetOp::Union), wt);
            // Nothing was lost on the way.
            assert_eq!(members(g, "s"), ["1"]);
            assert_eq!(encoding(g, "str"), Some("embstr"));
            // A missing source wins over a wrong-typed destination.
            let n = g.key(b"nosuch");
            assert_eq!(smove(g, 0, &n, &k, b"1"), Ok(false));
        });
    }

    #[test]
    fn smove_rules_and_events() {
        let e = engine();
        set_limit(&e, 512);
        notify_all(&e);
        with(&e, |g| {
            add(g, "a", &["1", "2", "x"]);
            add(g, "b", &["5"]);
            notes();
            let (a, b, c) = (g.key(b"a"), g.key(b"b"), g.key(b"c"));
            // Same key: membership only, no event.
            assert_eq!(smove(g, 0, &a, &a, b"1"), Ok(true));
            assert_eq!(smove(g, 0, &a, &a, b"9"), Ok(false));
            assert_eq!(smove(g, 0, &a, &b, b"9"), Ok(false));
            assert_eq!(notes(), Vec::<String>::new());
            assert_eq!(smove(g, 0, &a, &b, b"1"), Ok(true));
            assert_eq!(notes(), ["srem:a", "sadd:b"]);
            assert_eq!(members(g, "b"), ["1", "5"]);
            // Into a new key: created for the member (an intset here).
            assert_eq!(smove(g, 0, &a, &c, b"2"), Ok(true));
            assert_eq!(notes(), ["srem:a", "new:c", "sadd:c"]);
            assert_eq!(encoding(g, "c"), Some("intset"));
            // The destination already has it: no sadd; the source empties.
            add(g, "c", &["x"]);
            notes();
            assert_eq!(smove(g, 0, &a, &c, b"x"), Ok(true));
            assert_eq!(notes(), ["srem:a", "del:a"]);
            assert!(!g.exists(0, &a));
            // A string member converts an intset destination.
            add(g, "d", &["s"]);
            add(g, "i", &["1"]);
            let (d, i) = (g.key(b"d"), g.key(b"i"));
            assert_eq!(smove(g, 0, &d, &i, b"s"), Ok(true));
            assert_eq!(encoding(g, "i"), Some("hashtable"));
        });
    }

    #[test]
    fn spop_one_and_events() {
        let e = engine();
        notify_all(&e);
        with(&e, |g| {
            let k = g.key(b"s");
            assert_eq!(spop_one(g, 0, &k, |e| e.to_vec()), Ok(None));
            add(g, "s", &["a", "b"]);
            notes();
            let first = spop_one(g, 0, &k, |e| e.to_vec()).unwrap().unwrap();
            assert_eq!(notes(), ["spop:s"]);
            let second = spop_one(g, 0, &k, |e| e.to_vec()).unwrap().unwrap();
            assert_eq!(notes(), ["spop:s", "del:s"]);
            let mut got = vec![first, second];
            got.sort();
            assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
            assert!(!g.exists(0, &k));
        });
    }

    fn pop(g: &mut Guard, key: &str, count: u64) -> Vec<String> {
        let k = g.key(key.as_bytes());
        let mut r = Rec::default();
        spop_count(g, 0, &k, count, &mut r).unwrap();
        r.strs()
    }

    #[test]
    fn spop_count_strategies() {
        let e = engine();
        set_limit(&e, 4);
        notify_all(&e);
        with(&e, |g| {
            assert_eq!(pop(g, "nosuch", 3), Vec::<String>::new());
            add(g, "s", &["1", "2", "3"]);
            notes();
            assert_eq!(pop(g, "s", 0), Vec::<String>::new());
            assert_eq!(notes(), Vec::<String>::new());
            // Whole set: sorted (intset), then deleted.
            assert_eq!(pop(g, "s", 5), ["1", "2", "3"]);
            assert_eq!(notes(), ["spop:s", "del:s"]);
            // A hashtable of integers small enough to be an intset again
            // comes back sorted too, as Redis's one-key SUNION has it.
            add(g, "h", &["3", "x", "1"]);
            let h = g.key(b"h");
            srem(g, 0, &h, [&b"x"[..]]).unwrap();
            assert_eq!(encoding(g, "h"), Some("hashtable"));
            assert_eq!(pop(g, "h", 2), ["1", "3"]);

            // Case 2 (few popped): stays a hashtable.
            let ten: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
            let ten: Vec<&str> = ten.iter().map(String::as_str).collect();
            add(g, "a", &ten);
            assert_eq!(encoding(g, "a"), Some("hashtable"));
            notes();
            let got = pop(g, "a", 8);
            assert_eq!(notes(), ["spop:a"]);
            assert_eq!(got.len(), 8);
            assert_eq!(encoding(g, "a"), Some("hashtable"));
            let left = members(g, "a");
            let all: HashSet<String> = got.iter().chain(&left).cloned().collect();
            assert_eq!(all.len(), 10);
            // Case 3 (almost all): the survivors make a new set, an intset
            // again when they fit.
            add(g, "b", &ten);
            let got = pop(g, "b", 9);
            assert_eq!(got.len(), 9);
            assert_eq!(encoding(g, "b"), Some("intset"));
            let left = members(g, "b");
            assert_eq!(left.len(), 1);
            assert!(!got.contains(&left[0]));
            // ... and stays a hashtable when they do not fit.
            let thirty: Vec<String> = (1..=30).map(|i| i.to_string()).collect();
            let thirty: Vec<&str> = thirty.iter().map(String::as_str).collect();
            add(g, "c", &thirty);
            assert_eq!(pop(g, "c", 25).len(), 25);
            assert_eq!(encoding(g, "c"), Some("hashtable"));
            assert_eq!(members(g, "c").len(), 5);
        });
    }

    #[test]
    fn spop_count_keeps_the_ttl() {
        let e = engine();
        with(&e, |g| {
            let many: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
            let many: Vec<&str> = many.iter().map(String::as_str).collect();
            add(g, "s", &many);
            let k = g.key(b"s");
            let at = g.now + 100_000;
            g.set_expire(0, &k, at);
            pop(g, "s", 48);
            assert_eq!(g.peek(0, &k).map(|e| e.expire_at()), Some(at));
            pop(g, "s", 1);
            assert_eq!(g.peek(0, &k).map(|e| e.expire_at()), Some(at));
        });
    }

    fn rand_members(s: &SetValue, count: i64) -> Rec {
        let mut r = Rec::default();
        srandmember_count(Some(s), count, &mut r);
        r
    }

    #[test]
    fn srandmember_cases() {
        let mut r = Rec::default();
        srandmember_count(None, 5, &mut r);
        assert!(r.check().is_empty());
        let ints = SetValue::from_members([&b"3"[..], b"1", b"2"], 512);
        assert!(rand_members(&ints, 0).check().is_empty());
        // Whole set, in order.
        assert_eq!(rand_members(&ints, 3).strs(), ["1", "2", "3"]);
        assert_eq!(rand_members(&ints, i64::MAX).strs(), ["1", "2", "3"]);
        // Negative: repeats allowed, exactly |count|.
        let picks = rand_members(&ints, -50).strs();
        assert_eq!(picks.len(), 50);
        assert!(picks.iter().all(|p| ["1", "2", "3"].contains(&p.as_str())));
        assert_eq!(rand_members(&ints, 1).strs().len(), 1);
        // A sink may stop a huge negative count.
        let mut r = Rec {
            stop_after: Some(10),
            ..Rec::default()
        };
        srandmember_count(Some(&ints), -i64::MAX, &mut r);
        assert_eq!((r.len, r.items.len()), (Some(i64::MAX as usize), 10));
        // Distinct picks, both strategies.
        let names: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
        let big = SetValue::from_members(names.iter().map(|n| n.as_bytes()), 512);
        for count in [2, 10, 33, 34, 60, 99] {
            let got = rand_members(&big, count).strs();
            let uniq: HashSet<&String> = got.iter().collect();
            assert_eq!((got.len(), uniq.len()), (count as usize, count as usize));
            assert!(got.iter().all(|m| big.contains(m.as_bytes())));
        }
        // 600 draws of 5 of 100: a member is missed with probability
        // 100 * 0.95^600 ~ 4e-12 (with 200 draws it was 0.35%: flaky).
        let mut seen = HashSet::new();
        for _ in 0..600 {
            seen.extend(rand_members(&big, 5).strs());
        }
        assert_eq!(seen.len(), 100, "every member can be picked");
    }

    fn inter(g: &mut Guard, names: &[&str]) -> Vec<String> {
        let ks = keys(g, names);
        let mut r = Rec::default();
        sinter(g, 0, &ks, &mut r).unwrap();
        r.strs()
    }

    fn union_diff_of(g: &mut Guard, names: &[&str], op: SetOp) -> Vec<String> {
        let ks = keys(g, names);
        let mut r = Rec::default();
        sunion_diff(g, 0, &ks, op, &mut r).unwrap();
        r.strs()
    }

    #[test]
    fn algebra() {
        let e = engine();
        with(&e, |g| {
            add(g, "a", &["5", "1", "3", "7"]);
            add(g, "b", &["3", "5", "9"]);
            add(g, "c", &["x", "5", "3"]);
            assert_eq!(inter(g, &["a", "b"]), ["3", "5"]);
            assert_eq!(sorted(inter(g, &["a", "c"])), ["3", "5"]);
            assert_eq!(inter(g, &["a", "a"]), ["1", "3", "5", "7"]);
            assert_eq!(inter(g, &["a", "nosuch", "b"]), Vec::<String>::new());
            assert_eq!(
                union_diff_of(g, &["a", "b"], SetOp::Union),
                ["1", "3", "5", "7", "9"]
            );
            assert_eq!(
                sorted(union_diff_of(g, &["a", "c", "nosuch"], SetOp::Union)),
                ["1", "3", "5", "7", "x"]
            );
            assert_eq!(union_diff_of(g, &["a", "b"], SetOp::Diff), ["1", "7"]);
            assert_eq!(
                union_diff_of(g, &["a", "nosuch", "c"], SetOp::Diff),
                ["1", "7"]
            );
            assert_eq!(
                union_diff_of(g, &["nosuch", "a"], SetOp::Diff),
                Vec::<String>::new()
            );
            assert_eq!(
                union_diff_of(g, &["a", "b", "a"], SetOp::Diff),
                Vec::<String>::new()
            );
            assert_eq!(sorted(union_diff_of(g, &["c", "a"], SetOp::Diff)), ["x"]);
            let ks = keys(g, &["a", "b", "c"]);
            assert_eq!(sintercard(g, 0, &ks, 0), Ok(2));
            assert_eq!(sintercard(g, 0, &ks, 1), Ok(1));
            assert_eq!(sintercard(g, 0, &ks, 5), Ok(2));
            let ks = keys(g, &["a", "nosuch"]);
            assert_eq!(sintercard(g, 0, &ks, 0), Ok(0));
            // The sets are back in place, untouched.
            assert_eq!(members(g, "a"), ["1", "3", "5", "7"]);
            assert_eq!(sorted(members(g, "c")), ["3", "5", "x"]);
        });
    }

    #[test]
    fn many_keys_with_repeats() {
        let e = engine();
        with(&e, |g| {
            add(g, "a", &["1", "2"]);
            add(g, "b", &["2", "3"]);
            let names: Vec<&str> = (0..40).map(|i| ["a", "b", "nosuch"][i % 3]).collect();
            assert_eq!(union_diff_of(g, &names, SetOp::Union), ["1", "2", "3"]);
            let ab: Vec<&str> = (0..40).map(|i| ["a", "b"][i % 2]).collect();
            assert_eq!(inter(g, &ab), ["2"]);
            assert_eq!(members(g, "a"), ["1", "2"]);
            assert_eq!(members(g, "b"), ["2", "3"]);
        });
    }

    #[test]
    fn stores_and_their_encodings() {
        let e = engine();
        set_limit(&e, 4);
        notify_all(&e);
        with(&e, |g| {
            add(g, "a", &["1", "2", "3"]);
            add(g, "b", &["3", "4", "5"]);
            add(g, "h", &["1", "2", "3", "4", "5", "6"]);
            put_str(g, "dst");
            notes();
            let d = g.key(b"dst");
            let ks = keys(g, &["a", "b"]);
            assert_eq!(sunion_diff_store(g, 0, &d, &ks, SetOp::Union), Ok(5));
            assert_eq!(notes(), ["sunionstore:dst"]);
            assert_eq!(encoding(g, "dst"), Some("hashtable"));
            let ks = keys(g, &["h", "b"]);
            assert_eq!(sunion_diff_store(g, 0, &d, &ks, SetOp::Diff), Ok(3));
            assert_eq!(encoding(g, "dst"), Some("intset"));
            assert_eq!(members(g, "dst"), ["1", "2", "6"]);
            assert_eq!(sinterstore(g, 0, &d, &ks), Ok(3));
            assert_eq!(encoding(g, "dst"), Some("intset"));
            assert_eq!(members(g, "dst"), ["3", "4", "5"]);
            let ks = keys(g, &["h", "h"]);
            assert_eq!(sinterstore(g, 0, &d, &ks), Ok(6));
            assert_eq!(encoding(g, "dst"), Some("hashtable"));
            notes();
            // Empty results delete the destination.
            let ks = keys(g, &["a", "nosuch"]);
            assert_eq!(sinterstore(g, 0, &d, &ks), Ok(0));
            assert_eq!(notes(), ["del:dst"]);
            assert!(!g.exists(0, &d));
            assert_eq!(sinterstore(g, 0, &d, &ks), Ok(0));
            assert_eq!(notes(), Vec::<String>::new());
            let ks = keys(g, &["nosuch"]);
            assert_eq!(sunion_diff_store(g, 0, &d, &ks, SetOp::Union), Ok(0));
            // Storing into a new key: "new" first; the destination may be
            // a source.
            let a = g.key(b"a");
            let ks = keys(g, &["a", "b"]);
            assert_eq!(sinterstore(g, 0, &d, &ks), Ok(1));
            assert_eq!(notes(), ["new:dst", "sinterstore:dst"]);
            assert_eq!(sunion_diff_store(g, 0, &a, &ks, SetOp::Union), Ok(5));
            assert_eq!(members(g, "a"), ["1", "2", "3", "4", "5"]);
            // The result loses the destination's TTL.
            let at = g.now + 100_000;
            g.set_expire(0, &d, at);
            sinterstore(g, 0, &d, &ks).unwrap();
            assert_eq!(g.peek(0, &d).map(|e| e.expire_at()), Some(0));
        });
    }

    #[test]
    fn sdiff_algorithm_two_keeps_a_converted_result() {
        // Redis picks algorithm 2 here (|first| * 3 / 2 > sum of sizes),
        // whose scratch set converts while holding all of `big`; the
        // result, 301 integers, then stays a hashtable.
        let e = engine();
        with(&e, |g| {
            let big: Vec<String> = (0..600).map(|i| i.to_string()).collect();
            let big: Vec<&str> = big.iter().map(String::as_str).collect();
            add(g, "big", &big);
            add(g, "x", &big[..150]);
            add(g, "y", &big[150..299]);
            let d = g.key(b"d");
            let ks = keys(g, &["big", "x", "y"]);
            assert_eq!(sunion_diff_store(g, 0, &d, &ks, SetOp::Diff), Ok(301));
            assert_eq!(encoding(g, "d"), Some("hashtable"));
            // With one more member to subtract, algorithm 1 runs and the
            // result is an intset.
            add(g, "y", &["299"]);
            assert_eq!(sunion_diff_store(g, 0, &d, &ks, SetOp::Diff), Ok(300));
            assert_eq!(encoding(g, "d"), Some("intset"));
        });
    }

    #[test]
    fn scan_steps() {
        let ints = SetValue::from_members([&b"10"[..], b"2", b"1"], 512);
        let mut out = Vec::new();
        assert_eq!(scan_step(&ints, 7, 1, Some(b"1*"), &mut out), 0);
        let got: Vec<Vec<u8>> = out.iter().map(|e| e.to_vec()).collect();
        assert_eq!(got, [b"1".to_vec(), b"10".to_vec()]);
        let names: Vec<String> = (0..100).map(|i| format!("m{i}")).collect();
        let t = SetValue::from_members(names.iter().map(|n| n.as_bytes()), 512);
        let mut all = BTreeSet::new();
        let mut cursor = 0;
        loop {
            let mut out = Vec::new();
            cursor = scan_step(&t, cursor, 7, Some(b"m1*"), &mut out);
            all.extend(out.iter().map(|e| e.to_vec()));
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(all.len(), 11);
        let mut out = Vec::new();
        scan_step(&t, 0, 1000, Some(b"*"), &mut out);
        assert_eq!(out.len(), 100);
    }

    #[test]
    fn read_lookups_count_hits_and_misses() {
        let e = engine();
        with(&e, |g| {
            add(g, "a", &["1"]);
            let hits = |g: &mut Guard| -> (u64, u64) {
                g.shards_mut().fold((0, 0), |(h, m), s| {
                    (h + s.stats.keyspace_hits, m + s.stats.keyspace_misses)
                })
            };
            let before = hits(g);
            inter(g, &["a", "a", "nosuch"]);
            let after = hits(g);
            assert_eq!((after.0 - before.0, after.1 - before.1), (2, 1));
        });
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(Vec<u8>),
        Rem(Vec<u8>),
        Pop,
        PopCount(u8),
        MoveOut(Vec<u8>),
        MoveIn(Vec<u8>),
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => (0i64..12).prop_map(|n| n.to_string().into_bytes()),
            1 => prop::sample::select(vec!["a", "b", "07", "-0"]).prop_map(|s| s.as_bytes().to_vec()),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => member().prop_map(Op::Add),
            3 => member().prop_map(Op::Rem),
            1 => Just(Op::Pop),
            1 => (0u8..12).prop_map(Op::PopCount),
            1 => member().prop_map(Op::MoveOut),
            1 => member().prop_map(Op::MoveIn),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random SADD/SREM/SPOP/SMOVE sequences on two keys against two
        /// BTreeSets: replies, contents, key existence, encodings (Redis's
        /// rules at limit 5, SPOP's rebuilt set included) and the algebra
        /// of the two keys.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec(op(), 0..80)) {
            const LIMIT: usize = 5;
            let e = engine();
            set_limit(&e, LIMIT);
            let mut g = e.lock_all(&crate::cx::testing::cx());
            let (ka, kb) = (g.key(b"a"), g.key(b"b"));
            let mut a: BTreeSet<Vec<u8>> = BTreeSet::new();
            let mut b: BTreeSet<Vec<u8>> = BTreeSet::new();
            let is_int = |m: &Vec<u8>| crate::util::num::parse_i64(m).is_some();
            for op in ops {
                match op {
                    Op::Add(m) => {
                        let fresh = a.insert(m.clone());
                        prop_assert_eq!(sadd(&mut g, 0, &ka, [&m[..]]), Ok(usize::from(fresh)));
                    }
                    Op::Rem(m) => {
                        let had = a.remove(&m);
                        prop_assert_eq!(srem(&mut g, 0, &ka, [&m[..]]), Ok(usize::from(had)));
                    }
                    Op::Pop => {
                        let got = spop_one(&mut g, 0, &ka, |e| e.to_vec()).unwrap();
                        match got {
                            Some(m) => prop_assert!(a.remove(&m)),
                            None => prop_assert!(a.is_empty()),
                        }
                    }
                    Op::PopCount(n) => {
                        let mut r = Rec::default();
                        spop_count(&mut g, 0, &ka, u64::from(n), &mut r).unwrap();
                        let got = r.check();
                        prop_assert_eq!(got.len(), a.len().min(usize::from(n)));
                        for m in got {
                            prop_assert!(a.remove(&m));
                        }
                    }
                    Op::MoveOut(m) => {
                        let had = a.remove(&m);
                        prop_assert_eq!(smove(&mut g, 0, &ka, &kb, &m), Ok(had));
                        if had {
                            b.insert(m);
                        }
                    }
                    Op::MoveIn(m) => {
                        let had = b.remove(&m);
                        prop_assert_eq!(smove(&mut g, 0, &kb, &ka, &m), Ok(had));
                        if had {
                            a.insert(m);
                        }
                    }
                }
                for (k, model) in [(&ka, &a), (&kb, &b)] {
                    prop_assert_eq!(g.exists(0, k), !model.is_empty());
                    let mut r = Rec::default();
                    smembers(&mut g, 0, k, &mut r).unwrap();
                    let got: BTreeSet<Vec<u8>> = r.check().into_iter().collect();
                    prop_assert_eq!(&got, model);
                    if let Some(enc) = g.peek(0, k).map(|e| e.value.encoding()) {
                        // Never an intset that breaks the rules; a hashtable
                        // may hold what would fit an intset (no way back).
                        if enc == "intset" {
                            prop_assert!(model.len() <= LIMIT && model.iter().all(is_int));
                        } else if model.len() > LIMIT || !model.iter().all(is_int) {
                            prop_assert_eq!(enc, "hashtable");
                        }
                    }
                }
                let both = [ka, kb];
                let mut r = Rec::default();
                sinter(&mut g, 0, &both, &mut r).unwrap();
                let got: BTreeSet<Vec<u8>> = r.check().into_iter().collect();
                let want: BTreeSet<Vec<u8>> = a.intersection(&b).cloned().collect();
                prop_assert_eq!(got, want);
                let mut r = Rec::default();
                sunion_diff(&mut g, 0, &both, SetOp::Diff, &mut r).unwrap();
                let got: BTreeSet<Vec<u8>> = r.check().into_iter().collect();
                let want: BTreeSet<Vec<u8>> = a.difference(&b).cloned().collect();
                prop_assert_eq!(got, want);
                let mut r = Rec::default();
                sunion_diff(&mut g, 0, &both, SetOp::Union, &mut r).unwrap();
                let got = r.check();
                let want: BTreeSet<Vec<u8>> = a.union(&b).cloned().collect();
                // An all-integer union that fits an intset lists ascending.
                if want.len() <= LIMIT && want.iter().all(is_int) {
                    let mut sorted: Vec<Vec<u8>> = want.iter().cloned().collect();
                    sorted.sort_by_key(|m| crate::util::num::parse_i64(m));
                    prop_assert_eq!(&got, &sorted);
                }
                prop_assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
            }
        }
    }
}
