//! SORT and SORT_RO (Redis 7.0 `src/sort.c`): the elements of a list, set
//! or sorted set, ordered numerically or lexicographically, by themselves
//! or by weights looked up through a `BY` pattern, sliced by `LIMIT`,
//! projected through `GET` patterns, and returned or stored as a list.
//!
//! Patterns name other keys, so a SORT that uses them must run with every
//! shard locked (the server takes `lock_all`); one without them locks only
//! its key and the STORE destination.
use crate::keyspace::{Expiry, Guard, Key};
use crate::util::num;
use crate::value::Value;
use crate::{Error, Result};
use std::cmp::Ordering;

/// SORT's options, as parsed from the command line.
pub struct SortSpec<'a> {
    /// `BY pattern`: weights from other keys. A pattern without `*` means
    /// "do not sort" (`BY nosort`).
    pub by: Option<&'a [u8]>,
    /// `LIMIT offset count`, as given.
    pub limit: Option<(i64, i64)>,
    /// `GET pattern`, in order; `#` is the element itself.
    pub gets: Vec<&'a [u8]>,
    pub desc: bool,
    pub alpha: bool,
    /// `STORE destination` (SORT only).
    pub store: Option<Key<'a>>,
    /// Called from a script: a set's order must not depend on its layout
    /// (Redis's `CLIENT_SCRIPT` check), as with STORE.
    pub script: bool,
}

impl SortSpec<'_> {
    /// True if the options look up keys other than the sorted one, so the
    /// command must lock the whole keyspace.
    pub fn uses_patterns(&self) -> bool {
        self.by.is_some_and(|p| c_str(p).contains(&b'*'))
            || self.gets.iter().any(|g| !is_hash_sign(g))
    }
}

/// SORT's outcome.
#[derive(Debug, PartialEq, Eq)]
pub enum Sorted {
    /// The reply's elements (None: a GET that found nothing).
    Items(Vec<Option<Vec<u8>>>),
    /// STORE: the length of the stored list.
    Stored(usize),
}

/// One element being sorted, with its weight.
struct Item {
    elem: Vec<u8>,
    score: f64,
    /// ALPHA with BY: the looked-up value (None if missing).
    cmp: Option<Vec<u8>>,
}

/// Runs SORT on `k`. The caller locked `k`, the STORE destination, and,
/// if `spec.uses_patterns()`, every shard.
pub fn sort(g: &mut Guard, db: usize, k: &Key, spec: &SortSpec) -> Result<Sorted> {
    let mut dontsort = spec.by.is_some_and(|p| !c_str(p).contains(&b'*'));
    let mut alpha = spec.alpha;
    let mut by = spec.by;
    let (kind, elems) = match g.read(db, k) {
        None => (Shape::List, Vec::new()),
        Some(e) => match &e.value {
            v @ (Value::List(_) | Value::Set(_) | Value::ZSet(_)) => {
                (Shape::of(v), native_elements(v))
            }
            _ => return Err(Error::WrongType),
        },
    };
    // A set has no order of its own: when storing, or for a script, sort
    // it so the result is deterministic (Redis forces ALPHA).
    if dontsort && kind == Shape::Set && (spec.store.is_some() || spec.script) {
        dontsort = false;
        alpha = true;
        by = None;
    }
    let len = elems.len() as i64;
    let (mut start, mut end) = limits(spec.limit, len);

    let mut items: Vec<Item>;
    if dontsort && kind != Shape::Set {
        // Native order (DESC: from the other end), only the LIMIT range.
        items = Vec::new();
        if end >= start {
            let take = (end - start + 1) as usize;
            let it: Box<dyn Iterator<Item = Vec<u8>>> = if spec.desc {
                Box::new(elems.into_iter().rev().skip(start as usize))
            } else {
                Box::new(elems.into_iter().skip(start as usize))
            };
            items.extend(it.take(take).map(|elem| Item {
                elem,
                score: 0.0,
                cmp: None,
            }));
            end -= start;
            start = 0;
        }
    } else {
        items = elems
            .into_iter()
            .map(|elem| Item {
                elem,
                score: 0.0,
                cmp: None,
            })
            .collect();
    }

    if !dontsort {
        let mut conversion_error = false;
        for it in &mut items {
            let weight: Option<Vec<u8>> = match by {
                Some(p) => lookup(g, db, p, &it.elem),
                None => None,
            };
            if by.is_some() && weight.is_none() {
                continue;
            }
            if alpha {
                if by.is_some() {
                    it.cmp = weight;
                }
            } else {
                let w = weight.as_deref().unwrap_or(&it.elem);
                match num::parse_sort_weight(w) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        if conversion_error {
            return Err(Error::SortNotFloat);
        }
        let store = spec.store.is_some();
        let by_pattern = by.is_some();
        let desc = spec.desc;
        items.sort_by(|a, b| {
            let c = compare(a, b, alpha, by_pattern, store);
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }

    let range = if end >= start && !items.is_empty() {
        start as usize..(end as usize + 1).min(items.len())
    } else {
        0..0
    };
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    for it in &items[range] {
        if spec.gets.is_empty() {
            out.push(Some(it.elem.clone()));
        }
        for p in &spec.gets {
            out.push(lookup(g, db, p, &it.elem));
        }
    }

    let Some(dest) = &spec.store else {
        return Ok(Sorted::Items(out));
    };
    let n = out.len();
    if n > 0 {
        // A GET that found nothing stores an empty string.
        let list = list_from(g, out.into_iter().map(Option::unwrap_or_default));
        drop(g.set(db, dest, list, Expiry::Clear));
        g.notify(crate::events::class::LIST, "sortstore", db, dest);
    } else if g.remove(db, dest).is_some() {
        g.notify(crate::events::class::GENERIC, "del", db, dest);
    }
    Ok(Sorted::Stored(n))
}

/// Which kind of collection is sorted (for the native-order rules).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    List,
    Set,
    ZSet,
}

impl Shape {
    fn of(v: &Value) -> Shape {
        match v {
            Value::Set(_) => Shape::Set,
            Value::ZSet(_) => Shape::ZSet,
            _ => Shape::List,
        }
    }
}

/// Redis's LIMIT arithmetic (`sortCommandGeneric`): the inclusive range
/// `start..=end` of the sorted vector to return; empty when `end < start`.
fn limits(limit: Option<(i64, i64)>, len: i64) -> (i64, i64) {
    let (lstart, lcount) = limit.unwrap_or((0, -1));
    let mut start = lstart.max(0).min(len);
    let count = lcount.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// Redis's `sortCompare`.
fn compare(a: &Item, b: &Item, alpha: bool, by_pattern: bool, store: bool) -> Ordering {
    if !alpha {
        return match a.score.partial_cmp(&b.score) {
            Some(Ordering::Equal) | None => a.elem.cmp(&b.elem),
            Some(o) => o,
        };
    }
    if by_pattern {
        return match (&a.cmp, &b.cmp) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            // With STORE Redis compares binary-safe; otherwise strcoll,
            // which in the C locale is strcmp: up to the first NUL.
            (Some(x), Some(y)) if store => x.cmp(y),
            (Some(x), Some(y)) => c_str(x).cmp(c_str(y)),
        };
    }
    if store {
        a.elem.cmp(&b.elem)
    } else {
        c_str(&a.elem).cmp(c_str(&b.elem))
    }
}

/// The bytes before the first NUL (C string semantics).
fn c_str(b: &[u8]) -> &[u8] {
    match memchr::memchr(0, b) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// `#` as a C string.
fn is_hash_sign(p: &[u8]) -> bool {
    c_str(p) == b"#"
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the
/// first `*` is replaced by the element and the key read (a string), or,
/// with `->field` after the `*`, that field of a hash. None for anything
/// missing or of another type, and for a pattern without `*`.
fn lookup(g: &mut Guard, db: usize, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if is_hash_sign(pattern) {
        return Some(elem.to_vec());
    }
    let cpat = c_str(pattern);
    let star = memchr::memchr(b'*', cpat)?;
    let after = &cpat[star + 1..];
    let field_at = memchr::memmem::find(after, b"->")
        .filter(|&i| i + 2 < after.len())
        .map(|i| star + 1 + i);
    let (key_tail_end, field) = match field_at {
        Some(f) => (f, Some(&pattern[f + 2..])),
        None => (pattern.len(), None),
    };
    let mut name = Vec::with_capacity(pattern.len() + elem.len());
    name.extend_from_slice(&pattern[..star]);
    name.extend_from_slice(elem);
    name.extend_from_slice(&pattern[star + 1..key_tail_end]);
    let k = g.key(&name);
    let e = g.read(db, &k)?;
    match (&e.value, field) {
        (Value::Str(s), None) => Some(s.to_vec()),
        (Value::Hash(h), Some(f)) => h.view().get(f).map(<[u8]>::to_vec),
        _ => None,
    }
}

/// The elements of a list, set or sorted set in its native order (a
/// list's order, a sorted set's score order, a set's iteration order).
fn native_elements(v: &Value) -> Vec<Vec<u8>> {
    match v {
        Value::List(l) => l.iter().map(|e| e.to_vec()).collect(),
        Value::Set(s) => s.iter().map(|e| e.to_vec()).collect(),
        Value::ZSet(z) => z.iter().map(|(m, _)| m.to_vec()).collect(),
        _ => Vec::new(),
    }
}

/// A list value holding `items` in order, with the configured node size.
fn list_from(g: &Guard, items: impl Iterator<Item = Vec<u8>>) -> Value {
    let mut l = crate::ops::list::new_list(g);
    for i in items {
        l.push_back(&i);
    }
    Value::List(Box::new(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_arithmetic_matches_redis() {
        assert_eq!(limits(None, 5), (0, 4));
        assert_eq!(limits(Some((1, 2)), 5), (1, 2));
        assert_eq!(limits(Some((-3, 2)), 5), (0, 1));
        assert_eq!(limits(Some((3, -7)), 5), (3, 4));
        assert_eq!(limits(Some((5, 1)), 5), (4, 3));
        assert_eq!(limits(Some((2, 100)), 5), (2, 4));
        assert_eq!(limits(Some((0, 0)), 5), (0, -1));
        assert_eq!(limits(None, 0), (-1, -2));
        assert_eq!(limits(Some((i64::MAX, i64::MAX)), 3), (2, 1));
    }

    #[test]
    fn c_strings_end_at_nul() {
        assert_eq!(c_str(b"ab\0cd"), b"ab");
        assert!(is_hash_sign(b"#"));
        assert!(is_hash_sign(b"#\0x"));
        assert!(!is_hash_sign(b"##"));
    }
}
