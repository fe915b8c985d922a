//! Field-name lists interned per process (issue 20): a coded hash whose
//! fields, in order, are a list held here stores the list's id instead of
//! the names (YCSB's `field0` .. `field9`: ~70 bytes of every ~830-byte
//! record).
//!
//! Does not own the layout of a hash that uses a list (`value::hash`).
//! Persisted by the snapshot writer as sections of their own
//! (`cairn_persist::snapshot`), so a restart interns the same lists at
//! once; nothing ever *needs* a list to read a file, because snapshots and
//! the journal hold field names logically, and journal replay interns
//! lists again as it re-runs the writes.
//!
//! The table is bounded ([`MAX_LISTS`] lists of at most
//! [`MAX_LIST_BYTES`] of names each, ~1 MiB at worst) and lists are never
//! freed, so a hash can name its list by a `u16` and read it with no lock.
//! A list is interned the [`SIGHTINGS`]th time a hash with those names
//! asks, so hashes whose names are their own (one-off field names) do not
//! fill the table; the first hash of a list keeps its names inline.
//! Memory is the global allocator's, so `used_memory` counts it.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::{Mutex, OnceLock};

/// Number of list ids (1..=MAX_LISTS); 0 means "names inline".
pub const MAX_LISTS: usize = 1024;

/// Longest list interned, counting one byte per name beside its bytes.
pub const MAX_LIST_BYTES: usize = 1024;

/// Times a list of names must be asked for before it is interned.
pub const SIGHTINGS: u8 = 2;

/// Lists asked for fewer than `SIGHTINGS` times that are remembered; the
/// count is forgotten beyond this (a workload of one-off names).
const MAX_CANDIDATES: usize = 4096;

/// One interned list: the names in the order the hash holds them.
pub type NameList = [Box<[u8]>];

static LISTS: [OnceLock<Box<NameList>>; MAX_LISTS] = [const { OnceLock::new() }; MAX_LISTS];

#[derive(Default)]
struct Index {
    /// Hash of a list -> ids of the lists with that hash.
    by_hash: HashMap<u64, Vec<u16>>,
    /// Hash of a list not interned yet -> times asked.
    seen: HashMap<u64, u8>,
    /// Lists interned so far (they take ids 1..=used, in order).
    used: usize,
}

static INDEX: Mutex<Option<Index>> = Mutex::new(None);

thread_local! {
    /// The list this thread found last: consecutive writes of one kind of
    /// record (a YCSB load) match it without hashing or locking.
    static LAST: Cell<u16> = const { Cell::new(0) };
}

/// The list with this id, if there is one.
#[inline]
pub fn get(id: u16) -> Option<&'static NameList> {
    let i = usize::from(id).checked_sub(1)?;
    LISTS.get(i)?.get().map(|l| &**l)
}

fn matches<'a>(list: &NameList, fields: impl Iterator<Item = &'a [u8]>, n: usize) -> bool {
    if list.len() != n {
        return false;
    }
    let mut count = 0;
    for (a, b) in list.iter().zip(fields) {
        if **a != *b {
            return false;
        }
        count += 1;
    }
    count == n
}

/// The id of the interned list equal to `fields()` (which yields `n`
/// names), interning it if it has now been asked for `SIGHTINGS` times
/// and the table has room. `None`: keep the names inline. `fields` is
/// called once per pass over the names.
pub fn intern<'a, I>(fields: impl Fn() -> I, n: usize) -> Option<u16>
where
    I: Iterator<Item = &'a [u8]>,
{
    let last = LAST.with(Cell::get);
    if get(last).is_some_and(|l| matches(l, fields(), n)) {
        return Some(last);
    }
    lookup(&fields, n, false)
}

/// The id of the list this thread found last, if it is `fields` (`n`
/// names): no hashing, no lock and no sighting counted. A new hash filled
/// by one HSET (a YCSB insert) asks this first: a match also tells that
/// its fields are distinct, as every list's are.
#[inline]
pub fn last_matching<'a>(fields: impl Iterator<Item = &'a [u8]>, n: usize) -> Option<u16> {
    let last = LAST.with(Cell::get);
    get(last).filter(|l| matches(l, fields, n)).map(|_| last)
}

/// Interns a list read from a snapshot at once (no sightings needed).
/// `None` if the table is full, the list too long, or a name repeats (no
/// hash has that, so only a damaged file does; `last_matching` relies on
/// every list's names being distinct).
pub fn install(list: &[Vec<u8>]) -> Option<u16> {
    let distinct: std::collections::HashSet<&[u8]> = list.iter().map(|f| &f[..]).collect();
    if distinct.len() != list.len() {
        return None;
    }
    lookup(&|| list.iter().map(|f| &f[..]), list.len(), true)
}

fn lookup<'a, I>(fields: &impl Fn() -> I, n: usize, now: bool) -> Option<u16>
where
    I: Iterator<Item = &'a [u8]>,
{
    let mut bytes = 0usize;
    let mut count = 0usize;
    let mut h = std::hash::DefaultHasher::new();
    h.write_usize(n);
    for f in fields() {
        bytes += f.len() + 1;
        count += 1;
        h.write_usize(f.len());
        h.write(f);
    }
    if count != n || n < 2 || bytes > MAX_LIST_BYTES {
        return None;
    }
    let key = h.finish();
    let mut g = INDEX.lock().unwrap_or_else(|p| p.into_inner());
    let ix = g.get_or_insert_with(Index::default);
    if let Some(ids) = ix.by_hash.get(&key) {
        if let Some(&id) = ids
            .iter()
            .find(|&&id| get(id).is_some_and(|l| matches(l, fields(), n)))
        {
            LAST.with(|c| c.set(id));
            return Some(id);
        }
    }
    if ix.used >= MAX_LISTS || full_for_test() {
        return None;
    }
    if !now {
        if ix.seen.len() >= MAX_CANDIDATES && !ix.seen.contains_key(&key) {
            ix.seen.clear();
        }
        let seen = ix.seen.entry(key).or_insert(0);
        *seen += 1;
        if *seen < SIGHTINGS {
            return None;
        }
    }
    ix.seen.remove(&key);
    let list: Box<NameList> = fields().map(Box::from).collect();
    ix.used += 1;
    let id = ix.used as u16;
    // Only this function fills slots, under the lock, in order.
    let _ = LISTS[ix.used - 1].set(list);
    ix.by_hash.entry(key).or_default().push(id);
    LAST.with(|c| c.set(id));
    Some(id)
}

#[cfg(test)]
thread_local! {
    static FULL: Cell<bool> = const { Cell::new(false) };
}

/// Makes the table look full to this thread's new lists (tests of what a
/// hash does when its names cannot be interned; the table is shared by
/// every test of the process, so it is not filled for real).
#[cfg(test)]
pub(crate) fn set_full_for_test(full: bool) {
    FULL.with(|f| f.set(full));
}

#[cfg(test)]
fn full_for_test() -> bool {
    FULL.with(Cell::get)
}

#[cfg(not(test))]
#[inline]
fn full_for_test() -> bool {
    false
}

/// Every interned list, in id order, for the snapshot.
pub fn all() -> Vec<&'static NameList> {
    (1..=MAX_LISTS as u16).map_while(get).collect()
}

/// Number of lists interned (for tests and INFO-like reports).
pub fn count() -> usize {
    INDEX
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map_or(0, |ix| ix.used)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| format!("{prefix}{i}").into_bytes())
            .collect()
    }

    #[test]
    fn interned_on_the_second_sighting_and_found_again() {
        let l = names("interned-test-", 5);
        let f = || l.iter().map(|v| &v[..]);
        assert_eq!(intern(f, 5), None);
        let id = intern(f, 5).expect("second sighting");
        assert_eq!(intern(f, 5), Some(id));
        // From another thread (no LAST), through the index.
        let l2 = l.clone();
        let other = std::thread::spawn(move || intern(|| l2.iter().map(|v| &v[..]), 5))
            .join()
            .unwrap();
        assert_eq!(other, Some(id));
        let got: Vec<Vec<u8>> = get(id).unwrap().iter().map(|b| b.to_vec()).collect();
        assert_eq!(got, l);
        assert!(all()
            .iter()
            .any(|x| x.len() == 5 && *x[0] == *b"interned-test-0"));
        // A different order is a different list; a prefix is not a match.
        let rev: Vec<Vec<u8>> = l.iter().rev().cloned().collect();
        assert_ne!(install(&rev), Some(id));
        assert!(!matches(
            get(id).unwrap(),
            l.iter().take(4).map(|v| &v[..]),
            5
        ));
        // A list that names a field twice (a damaged file) is refused.
        let twice = vec![
            b"twice-a".to_vec(),
            b"twice-b".to_vec(),
            b"twice-a".to_vec(),
        ];
        assert_eq!(install(&twice), None);
        // The thread's last list is found without a sighting; another
        // list, or a prefix of it, is not.
        assert_eq!(intern(f, 5), Some(id));
        assert_eq!(last_matching(l.iter().map(|v| &v[..]), 5), Some(id));
        assert_eq!(last_matching(l.iter().take(4).map(|v| &v[..]), 4), None);
        assert_eq!(last_matching(rev.iter().map(|v| &v[..]), 5), None);
        // Lists of one name or of too many bytes are never interned.
        let one = names("single-", 1);
        assert_eq!(install(&one), None);
        let long = vec![vec![b'x'; MAX_LIST_BYTES]; 2];
        assert_eq!(install(&long), None);
        assert!(count() >= 2);
    }
}
