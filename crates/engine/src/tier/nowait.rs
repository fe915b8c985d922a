//! Reads of the disk tier that do not hold up a worker (docs/design.md,
//! "Waiting for I/O without holding up a worker"): the engine's half.
//!
//! A command that needs tiered values asks its guard which of its keys
//! hold pointers (`Guard::tier_wants`), tries each without waiting for
//! the disk (`try_nowait`: `preadv2(RWF_NOWAIT)` through the reader the
//! server installs), and what would wait goes to the server's I/O
//! threads while the client is parked. When they are back the command
//! runs again: the records fetched so far are `Fetched`, matched to the
//! keys' pointers *as they are now* (`missing`: a pointer names one
//! record forever, so a key rewritten, compacted or tiered again since
//! simply does not match and is fetched again), and installed for the
//! run (`install`), where `tier::plain` takes them instead of reading.
//!
//! The installed records sit in a thread-local for the length of one
//! handler (`Installed` clears them on drop, unwinding included), not in
//! the command's `Cx`: `plain` is reached from `StrRef::with_bytes`,
//! which has no context to look in, and nothing nested runs inside a
//! read command that could see another command's records.
//!
//! Contexts that cannot park (EXEC, scripts, memcached, the snapshot
//! writer, DUMP, edits that materialize a value) never get here and keep
//! the synchronous `tier::fetch`.
use super::{decode, store, Loc, Pointer, Record, COUNTERS};
use crate::entry::Ref;
use crate::keyspace::{Guard, Key};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Reads that must not wait for the disk. The server implements it over
/// its value logs with `preadv2(RWF_NOWAIT)`.
pub trait NowaitRead: Send + Sync {
    /// The record if every byte of it can be had without waiting for the
    /// disk (page cache, or the log's write buffer); None if the read
    /// would wait.
    fn read_nowait(&self, group: usize, loc: Loc) -> Option<Result<Record, String>>;
}

static NOWAIT: OnceLock<Box<dyn NowaitRead>> = OnceLock::new();

/// Installs the process's reader (at start-up, beside the `Store`).
/// False if one was installed already.
pub fn install_reader(r: Box<dyn NowaitRead>) -> bool {
    NOWAIT.set(r).is_ok()
}

/// How the non-waiting reads went (INFO's `# Tier`).
pub struct Counters {
    /// Records served without waiting (page cache or write buffer).
    pub hits: AtomicU64,
    /// Records that would have waited: fetched by the I/O threads or,
    /// where the command could not park, synchronously.
    pub misses: AtomicU64,
}

pub static NOWAIT_COUNTERS: Counters = Counters {
    hits: AtomicU64::new(0),
    misses: AtomicU64::new(0),
};

/// One tiered value a command needs: its key and the pointer its block
/// held when the command looked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    pub key: Vec<u8>,
    pub ptr: Pointer,
}

/// Values fetched for one command, by the pointer they were read at: the
/// plain bytes, or the read's error (which fails the command as a
/// synchronous read's would).
#[derive(Debug, Default)]
pub struct Fetched {
    vals: Vec<(Pointer, Result<Vec<u8>, String>)>,
}

impl Fetched {
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    pub fn len(&self) -> usize {
        self.vals.len()
    }

    pub fn push(&mut self, ptr: Pointer, val: Result<Vec<u8>, String>) {
        self.vals.push((ptr, val));
    }

    pub fn clear(&mut self) {
        self.vals.clear();
    }

    /// The first failed read among them, if any.
    pub fn first_error(&self) -> Option<&str> {
        self.vals
            .iter()
            .find_map(|(_, v)| v.as_ref().err().map(String::as_str))
    }

    fn get(&self, p: Pointer) -> Option<&Result<Vec<u8>, String>> {
        // A handful of entries (an MGET's): a scan beats hashing.
        self.vals
            .iter()
            .find(|(q, _)| q.group == p.group && q.loc == p.loc)
            .map(|(_, v)| v)
    }
}

/// The retry rule: of `wants` (the keys' pointers now), those `have`
/// does not answer. An entry of `have` whose pointer no key holds any
/// more (rewritten, deleted, compacted or tiered again since it was
/// fetched) is dropped: its bytes may be stale.
pub fn missing(wants: Vec<Want>, have: &mut Fetched) -> Vec<Want> {
    have.vals.retain(|(q, _)| {
        wants
            .iter()
            .any(|w| w.ptr.group == q.group && w.ptr.loc == q.loc)
    });
    wants
        .into_iter()
        .filter(|w| have.get(w.ptr).is_none())
        .collect()
}

/// Reads each of `wants` without waiting; what came back goes into
/// `have`, what would wait is returned. With no reader installed every
/// read would wait.
pub fn try_nowait(wants: Vec<Want>, have: &mut Fetched) -> Vec<Want> {
    let Some(r) = NOWAIT.get() else {
        return wants;
    };
    let mut left = Vec::new();
    for w in wants {
        let t0 = std::time::Instant::now();
        match r.read_nowait(usize::from(w.ptr.group), w.ptr.loc) {
            Some(rec) => {
                NOWAIT_COUNTERS.hits.fetch_add(1, Ordering::Relaxed);
                COUNTERS.reads.fetch_add(1, Ordering::Relaxed);
                COUNTERS
                    .read_usec
                    .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                let val = rec
                    .inspect_err(|_| {
                        COUNTERS.read_errors.fetch_add(1, Ordering::Relaxed);
                    })
                    .and_then(|rec| decode(&w.key, w.ptr, rec));
                have.push(w.ptr, val);
            }
            None => {
                NOWAIT_COUNTERS.misses.fetch_add(1, Ordering::Relaxed);
                left.push(w);
            }
        }
    }
    left
}

/// Fetches `wants` the blocking way (the I/O threads' read, or a
/// command that may not park): one entry each, in order.
pub fn fetch_all(wants: &[Want], have: &mut Fetched) {
    let reqs: Vec<(&[u8], Pointer)> = wants.iter().map(|w| (&w.key[..], w.ptr)).collect();
    for (w, v) in wants.iter().zip(super::fetch(&reqs)) {
        have.push(w.ptr, v);
    }
}

thread_local! {
    /// The records installed for the handler running on this thread.
    static INSTALLED: RefCell<Fetched> = RefCell::new(Fetched::default());
}

/// Records installed for one handler; dropping it takes them away.
#[must_use = "the records are installed only while this lives"]
pub struct Installed(bool);

impl Installed {
    /// Nothing installed (the tier is off, or no key is tiered).
    pub fn none() -> Installed {
        Installed(false)
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if self.0 {
            INSTALLED.with(|i| i.borrow_mut().clear());
        }
    }
}

/// Makes `have` what `tier::plain` answers from on this thread until the
/// returned guard drops.
pub fn install(have: Fetched) -> Installed {
    if have.is_empty() {
        return Installed::none();
    }
    INSTALLED.with(|i| *i.borrow_mut() = have);
    Installed(true)
}

/// The installed value of `p`, if any (`tier::plain` asks first).
pub(super) fn installed(p: Pointer) -> Option<Result<Vec<u8>, String>> {
    INSTALLED.with(|i| {
        let i = i.borrow();
        if i.is_empty() {
            return None;
        }
        i.get(p).cloned()
    })
}

impl Guard<'_> {
    /// The tiered values among `keys` of `db` a read would fetch: each
    /// key whose block holds a pointer (an expired key is removed by the
    /// look, as the command's own lookup would). No access is recorded:
    /// the command records its own when it runs.
    pub fn tier_wants(&mut self, db: usize, keys: &[Key]) -> Vec<Want> {
        if super::COUNTERS.tiered_keys.load(Ordering::Relaxed) == 0 || store().is_none() {
            return Vec::new();
        }
        let mut wants: Vec<Want> = Vec::new();
        for k in keys {
            if let Some(Ref::Compact(c)) = self.peek_ref(db, k) {
                if c.is_tiered() {
                    let ptr = c.tier_ptr();
                    if !wants.iter().any(|w| w.ptr == ptr) {
                        wants.push(Want {
                            key: k.bytes.to_vec(),
                            ptr,
                        });
                    }
                }
            }
        }
        wants
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{mem, SERIAL};
    use super::*;
    use crate::keyspace::Expiry;
    use crate::ops::string as s;
    use crate::ops::test_support::{engine, with};
    use crate::value::zcomp::sample_text;
    use crate::Engine;

    fn set(e: &Engine, key: &[u8], v: &[u8]) {
        with(e, |g| {
            let k = g.key(key);
            s::set(g, 0, &k, v, s::Cond::Always, Expiry::Clear, false).unwrap();
        });
    }

    fn wants(e: &Engine, keys: &[&[u8]]) -> Vec<Want> {
        with(e, |g| {
            let ks: Vec<Key> = keys.iter().map(|k| g.key(k)).collect();
            g.tier_wants(0, &ks)
        })
    }

    fn get(e: &Engine, key: &[u8]) -> Option<Vec<u8>> {
        with(e, |g| {
            let k = g.key(key);
            s::get(g, 0, &k, |b| b.map(<[u8]>::to_vec)).unwrap()
        })
    }

    fn out(e: &Engine, key: &[u8]) {
        let moved = e.tier_out(0, key, 1, super::super::Coding::Lz4, crate::clock::now_ms());
        assert!(matches!(moved, super::super::Outcome::Moved { .. }));
    }

    /// The rule the parked command's second run follows: a record fetched
    /// at a pointer the key still holds is used; one whose key was
    /// rewritten (in RAM, or tiered again at a new place) is dropped and
    /// the key read again; a key now in RAM needs nothing.
    #[test]
    fn a_changed_pointer_is_fetched_again() {
        let _s = SERIAL.lock();
        let _store = mem();
        let e = engine();
        let (a, b, c) = (
            sample_text(1, 600),
            sample_text(2, 700),
            sample_text(3, 800),
        );
        set(&e, b"w:a", &a);
        set(&e, b"w:b", &b);
        set(&e, b"w:c", &c);
        set(&e, b"w:ram", b"in memory");
        for k in [&b"w:a"[..], b"w:b", b"w:c"] {
            out(&e, k);
        }
        let keys: [&[u8]; 5] = [b"w:a", b"w:b", b"w:c", b"w:ram", b"w:none"];
        let first = wants(&e, &keys);
        assert_eq!(
            first.iter().map(|w| &w.key[..]).collect::<Vec<_>>(),
            [&b"w:a"[..], b"w:b", b"w:c"],
            "only tiered keys are wanted"
        );
        // The I/O threads fetch all three.
        let mut have = Fetched::default();
        fetch_all(&first, &mut have);
        assert_eq!(have.len(), 3);
        // Meanwhile: w:b is rewritten in RAM, w:c is rewritten and tiered
        // again (a new record), w:a is untouched.
        let c2 = sample_text(4, 900);
        set(&e, b"w:b", b"new b");
        set(&e, b"w:c", &c2);
        out(&e, b"w:c");
        let again = missing(wants(&e, &keys), &mut have);
        assert_eq!(again.len(), 1, "only w:c's new record is read again");
        assert_eq!(again[0].key, b"w:c");
        assert_eq!(have.len(), 1, "the stale records are dropped");
        fetch_all(&again, &mut have);
        assert!(missing(wants(&e, &keys), &mut have).is_empty());
        // Installed, the run reads from what was fetched: with every read
        // failing, the values still come back.
        mem()
            .fail_reads
            .store(u32::MAX, std::sync::atomic::Ordering::Relaxed);
        {
            let _i = install(have);
            assert_eq!(get(&e, b"w:a").unwrap(), a);
            assert_eq!(get(&e, b"w:b").unwrap(), b"new b");
            assert_eq!(get(&e, b"w:c").unwrap(), c2);
        }
        // Once the guard is gone nothing is installed: a read goes to the
        // store (and fails here).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| get(&e, b"w:a")));
        assert!(r.is_err());
        mem()
            .fail_reads
            .store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(get(&e, b"w:a").unwrap(), a);
        // Without a reader installed nothing is served without waiting.
        let mut none = Fetched::default();
        assert_eq!(try_nowait(wants(&e, &keys), &mut none).len(), 2);
        assert!(none.is_empty());
    }

    /// A failed fetch is kept as an error and fails the run as a
    /// synchronous read would (unwinding with `ReadFailed`, naming the
    /// record, no panic hook).
    #[test]
    fn a_failed_fetch_fails_the_run() {
        let _s = SERIAL.lock();
        let _store = mem();
        let e = engine();
        set(&e, b"w:f", &sample_text(5, 500));
        out(&e, b"w:f");
        let w = wants(&e, &[b"w:f"]);
        let mut have = Fetched::default();
        mem()
            .fail_reads
            .store(1, std::sync::atomic::Ordering::Relaxed);
        fetch_all(&w, &mut have);
        assert!(missing(wants(&e, &[b"w:f"]), &mut have).is_empty());
        assert!(have.first_error().is_some());
        let _i = install(have);
        let msg = super::super::catch_read_failure(|| get(&e, b"w:f")).unwrap_err();
        assert!(msg.starts_with(super::super::READ_FAILED), "{msg}");
    }
}
