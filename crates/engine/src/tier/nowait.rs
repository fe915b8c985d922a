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
use super::{check, store, Loc, Pointer, COUNTERS};
use crate::entry::Ref;
use crate::keyspace::{Guard, Key};
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Reads that must not wait for the disk. The server implements it over
/// its value logs with `preadv2(RWF_NOWAIT)`.
pub trait NowaitRead: Send + Sync {
    /// Appends the record to `buf` if every byte of it can be had without
    /// waiting for the disk (page cache, or the log's write buffer), its
    /// CRC checked, and says where its key and value are; None if the read
    /// would wait. On None or an error `buf` is as it was.
    fn read_nowait(
        &self,
        group: usize,
        loc: Loc,
        buf: &mut Vec<u8>,
    ) -> Option<Result<Placed, String>>;
}

/// Where `NowaitRead::read_nowait` put a record in the buffer it was
/// given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub key: std::ops::Range<usize>,
    pub value: std::ops::Range<usize>,
    /// Kind 1: the value is a zcomp coded value; else the plain bytes.
    pub coded: bool,
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
/// value's bytes as its record holds them (coded, or plain), or the read's
/// error (which fails the command as a synchronous read's would). The
/// bytes of every value sit back to back in one buffer, kept from one
/// command to the next (`install` hands it back): an MGET's reads cost no
/// allocation once warm, and a coded value is decoded only when the
/// handler writes it, straight into the reply (`tier::append_plain`).
#[derive(Debug, Default)]
pub struct Fetched {
    buf: Vec<u8>,
    vals: Vec<(Pointer, Result<Held, String>)>,
}

/// A value's place in `Fetched::buf`.
#[derive(Clone, Copy, Debug)]
struct Held {
    at: usize,
    len: usize,
    coded: bool,
}

/// A fetched value as `Fetched::with` lends it: its bytes, and whether
/// they are coded (a zcomp value to decode) or plain.
pub(super) type Lent<'a> = Result<(&'a [u8], bool), &'a str>;

impl Fetched {
    pub fn is_empty(&self) -> bool {
        self.vals.is_empty()
    }

    pub fn len(&self) -> usize {
        self.vals.len()
    }

    /// A value read elsewhere (the I/O threads): its plain bytes, or the
    /// error of its read.
    pub fn push(&mut self, ptr: Pointer, val: Result<Vec<u8>, String>) {
        let held = val.map(|v| {
            let at = self.buf.len();
            self.buf.extend_from_slice(&v);
            Held {
                at,
                len: v.len(),
                coded: false,
            }
        });
        self.vals.push((ptr, held));
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.vals.clear();
    }

    /// The first failed read among them, if any.
    pub fn first_error(&self) -> Option<&str> {
        self.vals
            .iter()
            .find_map(|(_, v)| v.as_ref().err().map(String::as_str))
    }

    fn find(&self, p: Pointer) -> Option<&Result<Held, String>> {
        // A handful of entries (an MGET's): a scan beats hashing.
        self.vals
            .iter()
            .find(|(q, _)| q.group == p.group && q.loc == p.loc)
            .map(|(_, v)| v)
    }

    fn has(&self, p: Pointer) -> bool {
        self.find(p).is_some()
    }

    /// The value fetched at `p`, if any, lent to `f`.
    pub(super) fn with<R>(&self, p: Pointer, f: impl FnOnce(Lent<'_>) -> R) -> Option<R> {
        let v = self.find(p)?;
        Some(f(match v {
            Ok(h) => Ok((&self.buf[h.at..h.at + h.len], h.coded)),
            Err(e) => Err(e.as_str()),
        }))
    }

    /// Reads `w` without waiting into the buffer: true if it came (or
    /// failed), false if it would wait (nothing kept).
    fn read_nowait(&mut self, r: &dyn NowaitRead, w: &Want) -> bool {
        let mark = self.buf.len();
        let placed = match r.read_nowait(usize::from(w.ptr.group), w.ptr.loc, &mut self.buf) {
            None => {
                self.buf.truncate(mark);
                return false;
            }
            Some(p) => p,
        };
        let held = placed
            .inspect_err(|_| {
                COUNTERS.read_errors.fetch_add(1, Ordering::Relaxed);
            })
            .and_then(|pl| {
                let coded = pl.coded;
                let (k, v) = (&self.buf[pl.key.clone()], &self.buf[pl.value.clone()]);
                check(&w.key, w.ptr, k, v, coded).map(|()| Held {
                    at: pl.value.start,
                    len: pl.value.len(),
                    coded,
                })
            });
        if held.is_err() {
            self.buf.truncate(mark);
        }
        self.vals.push((w.ptr, held));
        true
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
    wants.into_iter().filter(|w| !have.has(w.ptr)).collect()
}

/// Reads each of `wants` without waiting; what came back goes into
/// `have`, what would wait is returned. With no reader installed every
/// read would wait.
pub fn try_nowait(wants: Vec<Want>, have: &mut Fetched) -> Vec<Want> {
    let Some(r) = NOWAIT.get() else {
        return wants;
    };
    // A command's reads come from the page cache in microseconds: they are
    // timed together, not each (two clock reads a value).
    let t0 = std::time::Instant::now();
    let mut left = Vec::new();
    let mut hits = 0;
    for w in wants {
        if have.read_nowait(&**r, &w) {
            hits += 1;
        } else {
            left.push(w);
        }
    }
    if hits > 0 {
        NOWAIT_COUNTERS.hits.fetch_add(hits, Ordering::Relaxed);
        COUNTERS.reads.fetch_add(hits, Ordering::Relaxed);
        COUNTERS
            .read_usec
            .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    }
    if !left.is_empty() {
        NOWAIT_COUNTERS
            .misses
            .fetch_add(left.len() as u64, Ordering::Relaxed);
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
    /// A `Fetched` whose buffers are kept for the next command on this
    /// thread (`install` swaps the installed one back in here when it is
    /// taken away).
    static SPARE: RefCell<Fetched> = RefCell::new(Fetched::default());
}

/// A `Fetched` to read into: this thread's spare one (empty, its buffers
/// kept from earlier commands) if `have` is empty, else `have`.
pub fn reuse(have: Fetched) -> Fetched {
    if !have.is_empty() || have.buf.capacity() > 0 {
        return have;
    }
    SPARE.with(|s| std::mem::take(&mut *s.borrow_mut()))
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

/// Buffers larger than this are not kept between commands (an MGET of
/// many large values should not pin its buffer).
const KEEP_BYTES: usize = 256 << 10;

impl Drop for Installed {
    fn drop(&mut self) {
        if self.0 {
            let mut f = INSTALLED.with(|i| std::mem::take(&mut *i.borrow_mut()));
            f.clear();
            if f.buf.capacity() <= KEEP_BYTES {
                SPARE.with(|s| *s.borrow_mut() = f);
            }
        }
    }
}

/// Makes `have` what `tier::plain` answers from on this thread until the
/// returned guard drops.
pub fn install(have: Fetched) -> Installed {
    if have.is_empty() {
        if have.buf.capacity() > 0 && have.buf.capacity() <= KEEP_BYTES {
            SPARE.with(|s| *s.borrow_mut() = have);
        }
        return Installed::none();
    }
    INSTALLED.with(|i| *i.borrow_mut() = have);
    Installed(true)
}

/// The installed value of `p`, if any, lent to `f` (`tier::plain` and its
/// kin ask first). `f` may read other installed values (a shared borrow).
pub(super) fn with_installed<R>(p: Pointer, f: impl FnOnce(Lent<'_>) -> R) -> Option<R> {
    INSTALLED.with(|i| {
        let i = i.borrow();
        if i.is_empty() {
            return None;
        }
        i.with(p, f)
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
