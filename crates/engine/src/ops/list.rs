//! List operations (Redis 7.0 `src/t_list.c`): pushes, pops (single, with
//! a count, from the first non-empty of several keys), LINDEX, LSET,
//! LINSERT, LREM, LTRIM, LRANGE, LPOS and LMOVE.
//!
//! Owns the keyspace side of those commands: which lookup each one does
//! (read commands count hits and misses as `lookupKeyRead` does, writes do
//! not), when a list is created (with the `list-max-listpack-size` of that
//! moment, which it keeps), that a list left empty is deleted, and every
//! hook Redis calls: `signalModifiedKey` (`Guard::modified`) and the
//! keyspace notifications, with Redis's classes, names and order. The
//! encoding lives in `value::list`; the wire replies live in the server,
//! which gets the elements through iterators while the shard is locked.
use std::sync::atomic::Ordering;

use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::{as_list, as_list_mut};
use crate::value::{ListValue, Value};
use crate::{Error, Result};

pub use crate::value::list::{Elem, End, Iter, Needle};

/// The event a push at `end` raises.
fn push_event(end: End) -> &'static str {
    match end {
        End::Left => "lpush",
        End::Right => "rpush",
    }
}

/// The event a pop at `end` raises.
fn pop_event(end: End) -> &'static str {
    match end {
        End::Left => "lpop",
        End::Right => "rpop",
    }
}

/// A new, empty list with the configured node fill.
pub fn new_list(g: &Guard) -> ListValue {
    ListValue::with_fill(
        g.engine()
            .limits
            .list_max_listpack_size
            .load(Ordering::Relaxed),
    )
}

/// Calls `f` with the list under `k` (None when the key is absent), or
/// fails with WRONGTYPE. A read lookup (counts a hit or miss, touches the
/// key). The shard stays locked while `f` runs.
pub fn view<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<&ListValue>) -> R,
) -> Result<R> {
    match g.read(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(as_list(&e.value)?))),
    }
}

/// LLEN key: 0 for a missing key.
pub fn llen(g: &mut Guard, db: usize, k: &Key) -> Result<usize> {
    view(g, db, k, |l| l.map_or(0, ListValue::len))
}

/// LPUSH/RPUSH (`only_existing` false) and LPUSHX/RPUSHX (true): pushes
/// `elems` one by one at `end` and returns the new length; a missing key
/// is created (or, for the X forms, left alone with 0 returned). One
/// `lpush`/`rpush` event for the whole command, after the key's `new`.
pub fn push<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    end: End,
    only_existing: bool,
    elems: impl IntoIterator<Item = &'a [u8]>,
) -> Result<usize> {
    let len = match g.write(db, k) {
        Some(e) => {
            let l = as_list_mut(&mut e.value)?;
            for v in elems {
                l.push(end, v);
            }
            let len = l.len();
            g.modified(db, k);
            len
        }
        None if only_existing => return Ok(0),
        None => {
            let mut l = new_list(g);
            for v in elems {
                l.push(end, v);
            }
            let len = l.len();
            g.set(db, k, Value::List(Box::new(l)), Expiry::Clear);
            len
        }
    };
    g.notify(class::LIST, push_event(end), db, k);
    Ok(len)
}

/// The hooks after elements were popped from `k` at `end` (Redis
/// `listElementsRemoved`): the pop event, and if the list is now empty
/// its deletion and `del`; the key is signalled as modified either way.
fn popped(g: &mut Guard, db: usize, k: &Key, end: End, now_empty: bool) {
    g.notify(class::LIST, pop_event(end), db, k);
    if now_empty {
        drop(g.remove(db, k));
        g.notify(class::GENERIC, "del", db, k);
    } else {
        g.modified(db, k);
    }
}

/// LPOP/RPOP key [count]: removes up to `n` elements at `end`, handing
/// them to `f` (in the order they are popped) before they go. None when
/// the key is absent. `n` = 0 answers without touching the list (Redis's
/// fast exit: no event, no modification).
pub fn pop<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    end: End,
    n: usize,
    f: impl FnOnce(Iter<'_>) -> R,
) -> Result<Option<R>> {
    let (r, now_empty) = match g.write(db, k) {
        None => return Ok(None),
        Some(e) => {
            let l = as_list_mut(&mut e.value)?;
            let r = f(l.end_range(end, n));
            if n == 0 {
                return Ok(Some(r));
            }
            l.pop_n(end, n);
            (r, l.is_empty())
        }
    };
    popped(g, db, k, end, now_empty);
    Ok(Some(r))
}

/// LMPOP, BLPOP, BRPOP, BLMPOP: pops up to `n` elements at `end` from the
/// first of `keys` (in argument order) that holds a list, calling `f` with
/// that key's position in `keys` and the elements. None if every key is
/// missing. A key of another type fails with WRONGTYPE, unless
/// `skip_wrong_type` (a blocked command's retry, which keeps waiting on
/// such a key as Redis 7.0 does) makes it count as missing.
pub fn pop_first<R>(
    g: &mut Guard,
    db: usize,
    keys: &[Key],
    end: End,
    n: usize,
    skip_wrong_type: bool,
    f: impl FnOnce(usize, Iter<'_>) -> R,
) -> Result<Option<R>> {
    for (i, k) in keys.iter().enumerate() {
        let (r, now_empty) = match g.write(db, k) {
            None => continue,
            Some(e) => match &mut e.value {
                Value::List(l) if !l.is_empty() => {
                    let r = f(i, l.end_range(end, n));
                    l.pop_n(end, n);
                    (r, l.is_empty())
                }
                Value::List(_) => continue,
                _ if skip_wrong_type => continue,
                _ => return Err(Error::WrongType),
            },
        };
        popped(g, db, k, end, now_empty);
        return Ok(Some(r));
    }
    Ok(None)
}

/// LINDEX key index: calls `f` with the element (None if the key is
/// missing or the index out of range; negative indexes count from the
/// tail).
pub fn lindex<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    index: i64,
    f: impl FnOnce(Option<Elem<'_>>) -> R,
) -> Result<R> {
    view(g, db, k, |l| f(l.and_then(|l| l.get(index))))
}

/// LSET key index element. A missing key is `NoSuchKey`, an index outside
/// the list `IndexOutOfRange`.
pub fn lset(g: &mut Guard, db: usize, k: &Key, index: i64, v: &[u8]) -> Result<()> {
    let e = g.write(db, k).ok_or(Error::NoSuchKey)?;
    let l = as_list_mut(&mut e.value)?;
    if !l.set(index, v) {
        return Err(Error::IndexOutOfRange);
    }
    g.modified(db, k);
    g.notify(class::LIST, "lset", db, k);
    Ok(())
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 if `pivot`
/// is not in the list, 0 for a missing key.
pub fn linsert(
    g: &mut Guard,
    db: usize,
    k: &Key,
    after: bool,
    pivot: &[u8],
    v: &[u8],
) -> Result<i64> {
    let Some(e) = g.write(db, k) else {
        return Ok(0);
    };
    let l = as_list_mut(&mut e.value)?;
    if !l.insert_by_pivot(&Needle::new(pivot), after, v) {
        return Ok(-1);
    }
    let len = l.len();
    g.modified(db, k);
    g.notify(class::LIST, "linsert", db, k);
    Ok(len as i64)
}

/// LREM key count element: removes elements equal to `v`: the first
/// `count` from the head (count > 0), the last `-count` from the tail
/// (count < 0), or all (0). Returns how many went.
///
/// `count` = `i64::MIN` removes all, from the tail: Redis negates it in a
/// C `long`, which leaves it negative, so its "enough removed" test never
/// fires.
pub fn lrem(g: &mut Guard, db: usize, k: &Key, count: i64, v: &[u8]) -> Result<usize> {
    let (removed, now_empty) = match g.write(db, k) {
        None => return Ok(0),
        Some(e) => {
            let l = as_list_mut(&mut e.value)?;
            let limit = if count == i64::MIN {
                0
            } else {
                count.unsigned_abs() as usize
            };
            let removed = l.remove_matching(&Needle::new(v), limit, count < 0);
            (removed, l.is_empty())
        }
    };
    if removed > 0 {
        g.notify(class::LIST, "lrem", db, k);
        if now_empty {
            drop(g.remove(db, k));
            g.notify(class::GENERIC, "del", db, k);
        } else {
            g.modified(db, k);
        }
    }
    Ok(removed)
}

/// LRANGE/LTRIM's reading of `start` and `stop` against a list of `len`
/// elements (negative = from the tail, clamped): the first position and
/// the number of elements, None for an empty range.
pub fn range_bounds(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let llen = len as i64;
    let mut start = if start < 0 { llen + start } else { start };
    let mut stop = if stop < 0 { llen + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= llen {
        return None;
    }
    if stop >= llen {
        stop = llen - 1;
    }
    Some((start as usize, (stop - start + 1) as usize))
}

/// LRANGE key start stop: calls `f` with the elements of the range (an
/// empty iterator for a missing key or an empty range).
pub fn lrange<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    start: i64,
    stop: i64,
    f: impl FnOnce(Iter<'_>) -> R,
) -> Result<R> {
    let empty = ListValue::new();
    view(g, db, k, |l| {
        let l = l.unwrap_or(&empty);
        match range_bounds(l.len(), start, stop) {
            Some((first, n)) => f(l.range(first, n)),
            None => f(empty.iter()),
        }
    })
}

/// LTRIM key start stop: keeps only the range. The `ltrim` event and the
/// modification signal happen whenever the key exists, even if nothing
/// was removed; a list left empty is deleted (`del`).
pub fn ltrim(g: &mut Guard, db: usize, k: &Key, start: i64, stop: i64) -> Result<()> {
    let now_empty = match g.write(db, k) {
        None => return Ok(()),
        Some(e) => {
            let l = as_list_mut(&mut e.value)?;
            let len = l.len();
            let (left, right) = match range_bounds(len, start, stop) {
                Some((first, n)) => (first, len - first - n),
                None => (len, 0),
            };
            l.trim(left, right);
            l.is_empty()
        }
    };
    g.notify(class::LIST, "ltrim", db, k);
    if now_empty {
        drop(g.remove(db, k));
        g.notify(class::GENERIC, "del", db, k);
    } else {
        g.modified(db, k);
    }
    Ok(())
}

/// LPOS's options, as parsed (the server checks their ranges).
#[derive(Clone, Copy, Debug)]
pub struct LposOptions {
    /// RANK: which match to start from; negative searches from the tail.
    /// Never 0.
    pub rank: i64,
    /// COUNT: None without the option, Some(0) for all matches.
    pub count: Option<i64>,
    /// MAXLEN: elements to compare at most, 0 for all.
    pub maxlen: i64,
}

/// LPOS key element [RANK r] [COUNT n] [MAXLEN m]: the indexes (from the
/// head) of the matches asked for, in the order found; at most one
/// without COUNT. None for a missing key.
///
/// Follows Redis's arithmetic in C `long`, including RANK `i64::MIN`:
/// negating it leaves it negative, so every match qualifies and COUNT
/// never stops the search (all matches, from the tail).
pub fn lpos(
    g: &mut Guard,
    db: usize,
    k: &Key,
    elem: &[u8],
    opts: LposOptions,
) -> Result<Option<Vec<i64>>> {
    let needle = Needle::new(elem);
    view(g, db, k, |l| {
        let l = l?;
        let (rank, from_tail) = if opts.rank < 0 {
            (opts.rank.wrapping_neg(), true)
        } else {
            (opts.rank, false)
        };
        let llen = l.len() as i64;
        let mut found = Vec::new();
        let mut matches: i64 = 0;
        let scan = |e: Elem<'_>, index: i64, found: &mut Vec<i64>, matches: &mut i64| -> bool {
            if !e.matches(&needle) {
                return false;
            }
            *matches += 1;
            if *matches < rank {
                return false;
            }
            found.push(if from_tail { llen - index - 1 } else { index });
            match opts.count {
                None => true,
                Some(0) => false,
                Some(c) => matches.wrapping_sub(rank).wrapping_add(1) >= c,
            }
        };
        let limit = if opts.maxlen == 0 {
            usize::MAX
        } else {
            opts.maxlen as usize
        };
        if from_tail {
            for (i, e) in l.iter_rev().take(limit).enumerate() {
                if scan(e, i as i64, &mut found, &mut matches) {
                    break;
                }
            }
        } else {
            for (i, e) in l.iter().take(limit).enumerate() {
                if scan(e, i as i64, &mut found, &mut matches) {
                    break;
                }
            }
        }
        Some(found)
    })
}

/// LMOVE/RPOPLPUSH/BLMOVE/BRPOPLPUSH: pops an element at `from` of `src`
/// and pushes it at `to` of `dst`, returning it; None if `src` is missing.
/// The caller locked both keys. WRONGTYPE for either key is checked
/// before anything moves (source first); with `src_wrong_type_is_missing`
/// (a blocked BLMOVE's retry) a source of another type counts as missing.
/// Events as Redis: `new` and `lpush`/`rpush` for the destination, then
/// `lpop`/`rpop` (and `del` if emptied) for the source. The same key as
/// source and destination rotates the list in place.
pub fn lmove(
    g: &mut Guard,
    db: usize,
    src: &Key,
    dst: &Key,
    from: End,
    to: End,
    src_wrong_type_is_missing: bool,
) -> Result<Option<Vec<u8>>> {
    match g.write(db, src) {
        None => return Ok(None),
        Some(e) => match &e.value {
            Value::List(_) => {}
            _ if src_wrong_type_is_missing => return Ok(None),
            _ => return Err(Error::WrongType),
        },
    }
    let same = src.bytes == dst.bytes;
    if !same {
        if let Some(e) = g.write(db, dst) {
            as_list(&e.value)?;
        }
    }
    // Pop from the source (kept even if now empty, so that the
    // destination's events come first, as in Redis).
    let (value, src_empty) = {
        let Some(e) = g.write(db, src) else {
            return Ok(None);
        };
        let l = as_list_mut(&mut e.value)?;
        let Some(v) = l.pop(from) else {
            return Ok(None);
        };
        if same {
            l.push(to, &v);
        }
        (v, l.is_empty())
    };
    if same {
        g.modified(db, dst);
        g.notify(class::LIST, push_event(to), db, dst);
    } else {
        push(g, db, dst, to, false, [&value[..]])?;
    }
    popped(g, db, src, from, src_empty);
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::ops::test_support::{engine, with};
    use crate::Engine;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn rpush(e: &Engine, key: &[u8], elems: &[&str]) -> usize {
        with(e, |g| {
            let k = g.key(key);
            push(
                g,
                0,
                &k,
                End::Right,
                false,
                elems.iter().map(|s| s.as_bytes()),
            )
            .unwrap()
        })
    }

    fn all(e: &Engine, key: &[u8]) -> Vec<String> {
        with(e, |g| {
            let k = g.key(key);
            lrange(g, 0, &k, 0, -1, |it| {
                it.map(|x| String::from_utf8(x.to_vec()).unwrap()).collect()
            })
            .unwrap()
        })
    }

    fn exists(e: &Engine, key: &[u8]) -> bool {
        with(e, |g| {
            let k = g.key(key);
            g.exists(0, &k)
        })
    }

    /// Runs `f` with every notification class on; returns the events.
    fn notified(e: &Engine, f: impl FnOnce(&mut Guard)) -> Vec<(&'static str, String)> {
        e.limits.notify.store(u32::MAX, Ordering::Relaxed);
        crate::cx::testing::take_events();
        with(e, f);
        e.limits.notify.store(0, Ordering::Relaxed);
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|ev| match ev {
                Event::Notify { event, key, .. } => {
                    Some((event, String::from_utf8(key.to_vec()).unwrap()))
                }
                _ => None,
            })
            .collect()
    }

    fn ev(list: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        list.iter().map(|(a, b)| (*a, b.to_string())).collect()
    }

    #[test]
    fn push_pop_and_events() {
        let e = engine();
        let got = notified(&e, |g| {
            let k = g.key(b"l");
            assert_eq!(
                push(g, 0, &k, End::Left, false, [&b"a"[..], b"b"]).unwrap(),
                2
            );
            assert_eq!(push(g, 0, &k, End::Right, true, [&b"c"[..]]).unwrap(), 3);
            let nk = g.key(b"nokey");
            assert_eq!(push(g, 0, &nk, End::Right, true, [&b"c"[..]]).unwrap(), 0);
        });
        assert_eq!(got, ev(&[("new", "l"), ("lpush", "l"), ("rpush", "l")]));
        assert_eq!(all(&e, b"l"), ["b", "a", "c"]);
        assert!(!exists(&e, b"nokey"));

        let got = notified(&e, |g| {
            let k = g.key(b"l");
            let r = pop(g, 0, &k, End::Right, 2, |it| {
                it.map(|x| x.to_vec()).collect::<Vec<_>>()
            });
            assert_eq!(r.unwrap(), Some(vec![b"c".to_vec(), b"a".to_vec()]));
            // Count 0: nothing happens.
            assert_eq!(pop(g, 0, &k, End::Left, 0, |it| it.len()).unwrap(), Some(0));
            let r = pop(g, 0, &k, End::Left, 5, |it| it.len());
            assert_eq!(r.unwrap(), Some(1));
            assert_eq!(pop(g, 0, &k, End::Left, 1, |it| it.len()).unwrap(), None);
        });
        assert_eq!(got, ev(&[("rpop", "l"), ("lpop", "l"), ("del", "l")]));
        assert!(!exists(&e, b"l"));
    }

    #[test]
    fn new_lists_take_the_fill_of_their_creation() {
        let e = engine();
        e.limits.list_max_listpack_size.store(2, Ordering::Relaxed);
        rpush(&e, b"a", &["1", "2", "3"]);
        e.limits.list_max_listpack_size.store(-2, Ordering::Relaxed);
        rpush(&e, b"a", &["4", "5"]);
        rpush(&e, b"b", &["1", "2", "3", "4", "5"]);
        with(&e, |g| {
            for (key, fill, nodes) in [(&b"a"[..], 2, 3), (b"b", -2, 1)] {
                let k = g.key(key);
                let l = as_list(&g.peek(0, &k).unwrap().value).unwrap();
                assert_eq!((l.fill(), l.node_count()), (fill, nodes));
            }
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
                push(g, 0, &k, End::Left, false, [&b"a"[..]]).unwrap_err(),
                Error::WrongType
            );
            assert_eq!(
                pop(g, 0, &k, End::Left, 1, |_| ()).unwrap_err(),
                Error::WrongType
            );
            assert_eq!(llen(g, 0, &k).unwrap_err(), Error::WrongType);
            assert_eq!(lindex(g, 0, &k, 0, |_| ()).unwrap_err(), Error::WrongType);
            assert_eq!(lset(g, 0, &k, 0, b"x").unwrap_err(), Error::WrongType);
            assert_eq!(
                linsert(g, 0, &k, true, b"a", b"b").unwrap_err(),
                Error::WrongType
            );
            assert_eq!(lrem(g, 0, &k, 0, b"a").unwrap_err(), Error::WrongType);
            assert_eq!(ltrim(g, 0, &k, 0, 1).unwrap_err(), Error::WrongType);
            assert_eq!(
                lrange(g, 0, &k, 0, 1, |_| ()).unwrap_err(),
                Error::WrongType
            );
            let o = LposOptions {
                rank: 1,
                count: None,
                maxlen: 0,
            };
            assert_eq!(lpos(g, 0, &k, b"a", o), Err(Error::WrongType));
            let l = g.key(b"l");
            push(g, 0, &l, End::Left, false, [&b"a"[..]]).unwrap();
            assert_eq!(
                lmove(g, 0, &k, &l, End::Left, End::Left, false),
                Err(Error::WrongType)
            );
            assert_eq!(
                lmove(g, 0, &l, &k, End::Left, End::Left, false),
                Err(Error::WrongType)
            );
            // Nothing moved.
            assert_eq!(llen(g, 0, &l), Ok(1));
            assert_eq!(lmove(g, 0, &k, &l, End::Left, End::Left, true), Ok(None));
            assert_eq!(
                pop_first(g, 0, &[k, l], End::Left, 1, false, |i, _| i),
                Err(Error::WrongType)
            );
            assert_eq!(
                pop_first(g, 0, &[k, l], End::Left, 1, true, |i, _| i),
                Ok(Some(1))
            );
        });
    }

    #[test]
    fn lmove_events_and_rotation() {
        let e = engine();
        rpush(&e, b"src", &["a", "b"]);
        let got = notified(&e, |g| {
            let (s, d) = (g.key(b"src"), g.key(b"dst"));
            assert_eq!(
                lmove(g, 0, &s, &d, End::Right, End::Left, false).unwrap(),
                Some(b"b".to_vec())
            );
            assert_eq!(
                lmove(g, 0, &s, &d, End::Left, End::Right, false).unwrap(),
                Some(b"a".to_vec())
            );
            assert_eq!(
                lmove(g, 0, &s, &d, End::Left, End::Right, false).unwrap(),
                None
            );
        });
        assert_eq!(
            got,
            ev(&[
                ("new", "dst"),
                ("lpush", "dst"),
                ("rpop", "src"),
                ("rpush", "dst"),
                ("lpop", "src"),
                ("del", "src"),
            ])
        );
        assert_eq!(all(&e, b"dst"), ["b", "a"]);
        // Rotation of a one-element list keeps the key.
        let got = notified(&e, |g| {
            let d = g.key(b"dst");
            lmove(g, 0, &d, &d, End::Left, End::Right, false).unwrap();
        });
        assert_eq!(got, ev(&[("rpush", "dst"), ("lpop", "dst")]));
        assert_eq!(all(&e, b"dst"), ["a", "b"]);
        rpush(&e, b"one", &["x"]);
        with(&e, |g| {
            let o = g.key(b"one");
            assert_eq!(
                lmove(g, 0, &o, &o, End::Right, End::Left, false).unwrap(),
                Some(b"x".to_vec())
            );
            assert_eq!(llen(g, 0, &o), Ok(1));
        });
    }

    #[test]
    fn trim_rem_set_insert_events() {
        let e = engine();
        rpush(&e, b"l", &["a", "b", "a", "c"]);
        let got = notified(&e, |g| {
            let k = g.key(b"l");
            assert_eq!(lrem(g, 0, &k, 0, b"zz").unwrap(), 0);
            assert_eq!(lrem(g, 0, &k, -1, b"a").unwrap(), 1);
            assert_eq!(linsert(g, 0, &k, false, b"c", b"x").unwrap(), 4);
            assert_eq!(linsert(g, 0, &k, false, b"nope", b"x").unwrap(), -1);
            lset(g, 0, &k, -1, b"C").unwrap();
            assert_eq!(lset(g, 0, &k, 9, b"C"), Err(Error::IndexOutOfRange));
            ltrim(g, 0, &k, 0, -1).unwrap();
            ltrim(g, 0, &k, 5, 1).unwrap();
            let n = g.key(b"nokey");
            assert_eq!(lset(g, 0, &n, 0, b"x"), Err(Error::NoSuchKey));
            assert_eq!(linsert(g, 0, &n, true, b"a", b"x"), Ok(0));
            ltrim(g, 0, &n, 0, 1).unwrap();
        });
        assert_eq!(
            got,
            ev(&[
                ("lrem", "l"),
                ("linsert", "l"),
                ("lset", "l"),
                ("ltrim", "l"),
                ("ltrim", "l"),
                ("del", "l"),
            ])
        );
    }

    #[test]
    fn writes_touch_watchers() {
        let e = engine();
        rpush(&e, b"l", &["a", "b", "c"]);
        let flag = Arc::new(AtomicBool::new(false));
        type Write = fn(&mut Guard, &Key);
        let writes: [(&str, Write); 8] = [
            ("push", |g, k| {
                push(g, 0, k, End::Left, false, [&b"z"[..]]).unwrap();
            }),
            ("pop", |g, k| {
                pop(g, 0, k, End::Left, 1, |_| ()).unwrap();
            }),
            ("lset", |g, k| lset(g, 0, k, 0, b"q").unwrap()),
            ("linsert", |g, k| {
                linsert(g, 0, k, true, b"q", b"r").unwrap();
            }),
            ("lrem", |g, k| {
                lrem(g, 0, k, 1, b"r").unwrap();
            }),
            ("ltrim", |g, k| ltrim(g, 0, k, 0, -1).unwrap()),
            ("lmove", |g, k| {
                lmove(g, 0, k, k, End::Left, End::Right, false).unwrap();
            }),
            ("pop_first", |g, k| {
                pop_first(g, 0, &[*k], End::Right, 1, false, |_, _| ()).unwrap();
            }),
        ];
        for (name, f) in writes {
            flag.store(false, Ordering::Relaxed);
            with(&e, |g| {
                let k = g.key(b"l");
                g.watch(0, &k, &flag);
                f(g, &k);
                g.unwatch(0, &k, &flag);
            });
            assert!(flag.load(Ordering::Relaxed), "{name} did not signal");
        }
        // Reads and no-op writes do not.
        flag.store(false, Ordering::Relaxed);
        with(&e, |g| {
            let k = g.key(b"l");
            g.watch(0, &k, &flag);
            llen(g, 0, &k).unwrap();
            lrem(g, 0, &k, 0, b"nothing").unwrap();
            linsert(g, 0, &k, true, b"nothing", b"x").unwrap();
            pop(g, 0, &k, End::Left, 0, |_| ()).unwrap();
        });
        assert!(!flag.load(Ordering::Relaxed));
    }

    #[test]
    fn lpos_like_redis() {
        let e = engine();
        rpush(&e, b"l", &["a", "b", "c", "a", "b", "c", "a"]);
        let q = |rank, count, maxlen| {
            with(&e, |g| {
                let k = g.key(b"l");
                lpos(
                    g,
                    0,
                    &k,
                    b"a",
                    LposOptions {
                        rank,
                        count,
                        maxlen,
                    },
                )
                .unwrap()
            })
        };
        assert_eq!(q(1, None, 0), Some(vec![0]));
        assert_eq!(q(2, None, 0), Some(vec![3]));
        assert_eq!(q(-1, None, 0), Some(vec![6]));
        assert_eq!(q(-3, None, 0), Some(vec![0]));
        assert_eq!(q(4, None, 0), Some(vec![]));
        assert_eq!(q(1, Some(0), 0), Some(vec![0, 3, 6]));
        assert_eq!(q(2, Some(1), 0), Some(vec![3]));
        assert_eq!(q(-1, Some(2), 0), Some(vec![6, 3]));
        assert_eq!(q(1, Some(0), 4), Some(vec![0, 3]));
        assert_eq!(q(-2, None, 3), Some(vec![]));
        // Checked against Redis 7.0.15.
        assert_eq!(q(i64::MIN, Some(1), 0), Some(vec![6, 3, 0]));
        assert_eq!(q(i64::MIN, None, 0), Some(vec![6]));
        assert_eq!(q(i64::MAX, None, 0), Some(vec![]));
        with(&e, |g| {
            let k = g.key(b"nokey");
            let o = LposOptions {
                rank: 1,
                count: None,
                maxlen: 0,
            };
            assert_eq!(lpos(g, 0, &k, b"a", o), Ok(None));
        });
    }

    #[test]
    fn ranges() {
        assert_eq!(range_bounds(5, 0, -1), Some((0, 5)));
        assert_eq!(range_bounds(5, -100, 100), Some((0, 5)));
        assert_eq!(range_bounds(5, i64::MIN, i64::MAX), Some((0, 5)));
        assert_eq!(range_bounds(5, 0, i64::MIN), None);
        assert_eq!(range_bounds(5, 3, 2), None);
        assert_eq!(range_bounds(5, 5, 10), None);
        assert_eq!(range_bounds(5, -2, -1), Some((3, 2)));
        assert_eq!(range_bounds(0, 0, -1), None);
        let e = engine();
        rpush(&e, b"l", &["1", "2", "3", "4", "5"]);
        with(&e, |g| {
            let k = g.key(b"l");
            ltrim(g, 0, &k, 1, -2).unwrap();
        });
        assert_eq!(all(&e, b"l"), ["2", "3", "4"]);
        assert_eq!(
            with(&e, |g| {
                let k = g.key(b"l");
                lrem(g, 0, &k, i64::MIN, b"3")
            }),
            Ok(1)
        );
    }
}
