//! The disk tier's side in the engine (issue 25 item 2; docs/design.md,
//! "The disk tier"): the 16-byte pointer a tiered compact block holds
//! instead of its value, the `Store` the server installs (one value log
//! per shard group, `cairn_persist::vlog`), the one place a tiered value
//! is fetched, checked and decoded (`fetch`), and the move of a value
//! out to the store (`Engine::tier_out`).
//!
//! The engine knows no files: the store is a trait object installed once
//! per process (`install`), as the dictionary table of `value::zcomp` is
//! process-wide. A block frees its record when it is dropped
//! (`compact::Block`'s `Drop` calls `release`), so every way a key
//! leaves (DEL, overwrite, expiry, eviction, FLUSHALL, lazyfree) frees it
//! without knowing the tier exists.
//!
//! `fetch` reads on the calling thread (under the caller's shard lock):
//! the I/O threads' read, and the read of every context that cannot park
//! its client. Read commands that can park first fetch their keys' values
//! through `nowait` (RWF_NOWAIT, then the server's I/O threads) and
//! `plain` answers from what they fetched.
use crate::compact::Block;
use crate::cx::Cx;
use crate::entry::{Owned, Ref};
use crate::evict::{score, Policy, Pool};
use crate::keyspace::Engine;
use crate::value::zcomp;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

pub mod nowait;

/// Shard groups: one value log each, the top 4 bits of the key's hash
/// (64 shards of 1,024 each).
pub const GROUPS: usize = 16;

/// Where a record is in its group's log: segment number, byte offset,
/// record length (header + key + value, no padding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loc {
    pub segment: u32,
    pub offset: u32,
    pub len: u32,
}

/// What a tiered block holds as its value bytes (16 bytes, all LE):
///
/// ```text
///  0  segment u32     sequence number of the segment file
///  4  offset  u32     byte offset of the record in it
///  8  len     u32     record length (one pread)
/// 12  bits 0..15      plain length (tiered values are < 32 KiB: STRLEN
///                     without I/O)
///     bits 16..27     dictionary id of a kind-1 record (0: none), whose
///                     use the block holds as a coded block would
///     bits 28..31     shard group (whose log holds the record)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pointer {
    pub loc: Loc,
    pub plain_len: u16,
    pub dict: u16,
    pub group: u8,
}

impl Pointer {
    pub const BYTES: usize = 16;

    pub fn to_bytes(self) -> [u8; Pointer::BYTES] {
        debug_assert!(self.dict < 1 << 12 && usize::from(self.group) < GROUPS);
        let mut b = [0u8; Pointer::BYTES];
        b[0..4].copy_from_slice(&self.loc.segment.to_le_bytes());
        b[4..8].copy_from_slice(&self.loc.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.loc.len.to_le_bytes());
        let w =
            u32::from(self.plain_len) | u32::from(self.dict) << 16 | u32::from(self.group) << 28;
        b[12..16].copy_from_slice(&w.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Pointer {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let w = u(12);
        Pointer {
            loc: Loc {
                segment: u(0),
                offset: u(4),
                len: u(8),
            },
            plain_len: w as u16,
            dict: ((w >> 16) & 0xfff) as u16,
            group: (w >> 28) as u8,
        }
    }
}

/// A record read back and checked by the store (CRC, bounds).
pub struct Record {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    /// Kind 1: `value` is a zcomp coded value; else the plain bytes.
    pub coded: bool,
}

/// The value logs, as the engine needs them. The server implements it
/// over `cairn_persist::vlog::Log`, one per group.
pub trait Store: Send + Sync {
    /// Appends a record to `group`'s log (buffered: no I/O beyond a
    /// memcpy unless the buffer is full). An error (disk full, the disk
    /// limit, a failed write) leaves the value where it was.
    fn append(
        &self,
        group: usize,
        db: u8,
        coded: bool,
        key: &[u8],
        value: &[u8],
    ) -> Result<Loc, String>;
    /// Reads one record (a pread, or a copy from the write buffer).
    fn read(&self, group: usize, loc: Loc) -> Result<Record, String>;
    /// The keyspace no longer points at `loc`: counters only, no I/O.
    fn free(&self, group: usize, loc: Loc);
    /// A loaded snapshot points at `loc`: counts it live, after checking
    /// that it names a whole record the log holds (an error names the
    /// segment file and offset).
    fn mark_live(&self, group: usize, loc: Loc) -> Result<(), String> {
        let _ = (group, loc);
        Err("this store cannot load pointers".into())
    }
    /// Writes and fsyncs every log: before a snapshot that points into
    /// them is renamed into place.
    fn sync(&self) -> Result<(), String> {
        Ok(())
    }
    /// A snapshot that writes pointers made its cut: returns the
    /// retirement mark it stands at (segments compaction empties from
    /// now on may still be named by it, and are kept until `close_cut`).
    fn open_cut(&self) -> u64 {
        0
    }
    /// The snapshot of `open_cut`'s `mark` is written (or failed).
    fn close_cut(&self, mark: u64) {
        let _ = mark;
    }
}

/// A snapshot's hold on the segments it may name, from its cut until the
/// caller has recorded it durable (or given up): while it lives,
/// compaction keeps every segment it empties. Dropping it releases the
/// hold.
#[derive(Debug)]
pub struct CutPin {
    mark: u64,
}

impl CutPin {
    /// Opens one if a tier store is installed (at a snapshot's cut).
    pub fn open() -> Option<CutPin> {
        store().map(|s| CutPin { mark: s.open_cut() })
    }

    /// The retirement mark of the cut: a segment retired at or below it
    /// holds nothing this snapshot names.
    pub fn mark(&self) -> u64 {
        self.mark
    }
}

impl Drop for CutPin {
    fn drop(&mut self) {
        if let Some(s) = store() {
            s.close_cut(self.mark);
        }
    }
}

/// Compaction decides liveness by looking keys up, so it must not run
/// while a snapshot that points into the tier is being loaded (a key not
/// yet loaded would look dead): a load holds this for writing, and each
/// compaction turn for reading (`try_compaction_turn`).
static COMPACTION: parking_lot::RwLock<()> = parking_lot::RwLock::new(());

/// Held by a snapshot load: no compaction meanwhile.
pub fn hold_compaction() -> parking_lot::RwLockWriteGuard<'static, ()> {
    COMPACTION.write()
}

/// A compaction turn's permission; None while a load holds the tier.
pub fn try_compaction_turn() -> Option<parking_lot::RwLockReadGuard<'static, ()>> {
    COMPACTION.try_read()
}

static STORE: OnceLock<Box<dyn Store>> = OnceLock::new();

/// Installs the process's store (at start-up, with `tier-enabled yes`).
/// False if one was installed already.
pub fn install(store: Box<dyn Store>) -> bool {
    STORE.set(store).is_ok()
}

/// The installed store, if the tier is on.
pub fn store() -> Option<&'static dyn Store> {
    STORE.get().map(|s| &**s)
}

/// The tier's counters (INFO's `# Tier`).
pub struct Counters {
    /// Blocks that hold a pointer now.
    pub tiered_keys: AtomicU64,
    /// Plain bytes of the values they point at.
    pub tiered_plain_bytes: AtomicU64,
    pub reads: AtomicU64,
    pub read_usec: AtomicU64,
    pub read_errors: AtomicU64,
    pub writes: AtomicU64,
    pub append_errors: AtomicU64,
    /// Pointers taken from snapshots (their records were not read).
    pub loaded_pointers: AtomicU64,
    /// Moves that lost to a write of the same key (`Outcome::Raced`).
    pub move_races: AtomicU64,
    /// Records written as the value was already coded in RAM
    /// (`value-compression`): out as they were, no coding on the move.
    pub writes_coded_in_ram: AtomicU64,
    /// Records the move coded (LZ4 fast, `Coding::Lz4`).
    pub writes_coded_on_move: AtomicU64,
}

pub static COUNTERS: Counters = Counters {
    tiered_keys: AtomicU64::new(0),
    tiered_plain_bytes: AtomicU64::new(0),
    reads: AtomicU64::new(0),
    read_usec: AtomicU64::new(0),
    read_errors: AtomicU64::new(0),
    writes: AtomicU64::new(0),
    append_errors: AtomicU64::new(0),
    loaded_pointers: AtomicU64::new(0),
    move_races: AtomicU64::new(0),
    writes_coded_in_ram: AtomicU64::new(0),
    writes_coded_on_move: AtomicU64::new(0),
};

/// How `Engine::tier_out` writes a value that is plain in RAM (the
/// server's `tier-compression`); a value coded in RAM goes out as it is
/// coded either way. LZ4's fast coder costs ~46,000-52,000 instructions a
/// 2.8 KB value of E4's text (16-18 a byte: with or without the
/// dictionary, acceleration 1; it is LZ4's cost on this text, not a setup
/// redone per call) and halves the bytes on disk; on E4's write path it
/// was ~60% of the server's CPU (docs/design.md, "The tier's codec on the
/// write path").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// Plain bytes, kind 0: a copy, as memcached's extstore writes.
    Plain,
    /// LZ4 fast with the domain's dictionary, kind 1, when that saves an
    /// eighth (plain otherwise).
    Lz4,
}

/// The shard group of a key's hash: its top 4 bits.
pub fn group_of(hash: u64) -> usize {
    (hash >> 60) as usize
}

/// Fetches the values of tiered keys: for each (key, pointer), the plain
/// bytes, after the store checked the record's CRC and this function its
/// key, decoded if it is kind 1. A blocking `pread` (or a copy from the
/// write buffer) on the calling thread: the I/O threads' read, and the
/// synchronous read of contexts that cannot park (`nowait` is the other
/// way in, docs/design.md, "Waiting for I/O without holding up a worker").
pub fn fetch(reqs: &[(&[u8], Pointer)]) -> Vec<Result<Vec<u8>, String>> {
    reqs.iter().map(|&(key, p)| fetch_one(key, p)).collect()
}

fn fetch_one(key: &[u8], p: Pointer) -> Result<Vec<u8>, String> {
    let store = store().ok_or("a tiered value with no tier store installed")?;
    let t0 = std::time::Instant::now();
    let r = store.read(usize::from(p.group), p.loc);
    COUNTERS.reads.fetch_add(1, Ordering::Relaxed);
    COUNTERS
        .read_usec
        .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    let rec = r.inspect_err(|_| {
        COUNTERS.read_errors.fetch_add(1, Ordering::Relaxed);
    })?;
    decode(key, p, rec)
}

/// A record read for `key` at `p`, before its value is decoded: its key,
/// and its value's length (a coded value's from its header, and its
/// dictionary) against the pointer. A coded value whose header agrees
/// decodes to that length: the record's CRC was checked, and this process
/// or one it restarted from coded it (a failure to decode then is memory
/// corruption, `zcomp::decompress_into`'s panic).
fn check(key: &[u8], p: Pointer, rk: &[u8], v: &[u8], coded: bool) -> Result<(), String> {
    let bad = |why: &str| {
        COUNTERS.read_errors.fetch_add(1, Ordering::Relaxed);
        format!(
            "tier record {}/{}@{}: {why}",
            p.group, p.loc.segment, p.loc.offset
        )
    };
    if rk != key {
        return Err(bad("holds another key"));
    }
    let len = if coded {
        if v.len() < zcomp::HEADER || zcomp::dict_id(v) != p.dict || zcomp::codec(v).is_none() {
            return Err(bad("coded value does not match its pointer"));
        }
        zcomp::plain_len(v)
    } else {
        v.len()
    };
    if len != usize::from(p.plain_len) {
        return Err(bad("length does not match its pointer"));
    }
    Ok(())
}

/// A record read for `key` at `p`: its key and length checked
/// (`check`), decoded if kind 1.
fn decode(key: &[u8], p: Pointer, rec: Record) -> Result<Vec<u8>, String> {
    check(key, p, &rec.key, &rec.value, rec.coded)?;
    Ok(if rec.coded {
        zcomp::decompress(&rec.value)
    } else {
        rec.value
    })
}

/// How the text of a failed read starts (the RESP reply is `-ERR ` and
/// this, memcached's `SERVER_ERROR ` and this).
pub const READ_FAILED: &str = "disk tier read failed";

/// A read of the disk tier that failed where the reader has no way to
/// return an error (`plain`, below `StrRef::with_bytes`): the payload the
/// command unwinds with. `fail_read` unwinds with `resume_unwind`, which
/// runs no panic hook, so nothing is printed and no backtrace is taken
/// (with `RUST_BACKTRACE=1`, the default hook's backtrace loaded the
/// binary's debug info: ~130 MB of used memory in a test build); the
/// dispatcher (and memcached's session) catch it (`catch_read_failure`)
/// and answer its text. The read commands that matter (GET, MGET,
/// GETRANGE, GETEX, GETDEL) fetch before they read (`nowait`, the server's
/// `tier_io::prepare`) and return a failed read as an error value, so
/// they never get here.
#[derive(Debug)]
pub struct ReadFailed(pub String);

/// Unwinds out of the command with `ReadFailed` (no panic hook).
pub fn fail_read(e: &str) -> ! {
    std::panic::resume_unwind(Box::new(ReadFailed(format!("{READ_FAILED}: {e}"))))
}

/// Runs `f`; a failed tier read inside it (`fail_read`) becomes its
/// text. Any other unwinding goes on.
pub fn catch_read_failure<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        match payload.downcast::<ReadFailed>() {
            Ok(r) => r.0,
            Err(other) => std::panic::resume_unwind(other),
        }
    })
}

/// The plain bytes of one tiered value. A failed read (EIO, a bad CRC)
/// unwinds with `ReadFailed` naming the record (`fail_read`): the
/// command's guard turns it into an error reply, and the key is left as
/// it was. A value a parked command fetched beforehand
/// (`nowait::install`) is taken from there.
pub fn plain(key: &[u8], p: Pointer) -> Vec<u8> {
    let mut v = Vec::with_capacity(usize::from(p.plain_len));
    append_plain(key, p, &mut v);
    v
}

/// Appends the plain bytes of one tiered value to `out` (a reply): a
/// value fetched beforehand (`nowait::install`) is decoded straight into
/// it, with no buffer of its own. Failures as `plain`'s.
pub fn append_plain(key: &[u8], p: Pointer, out: &mut Vec<u8>) {
    let done = nowait::with_installed(p, |v| match v {
        Ok((bytes, true)) => zcomp::decompress_into(bytes, out),
        Ok((bytes, false)) => out.extend_from_slice(bytes),
        Err(e) => fail_read(e),
    });
    if done.is_none() {
        match fetch_one(key, p) {
            Ok(v) => out.extend_from_slice(&v),
            Err(e) => fail_read(&e),
        }
    }
}

/// Calls `f` with the plain bytes of one tiered value: one fetched
/// beforehand is lent where it lies (decoded in a reused buffer when
/// coded, `zcomp::with_plain`), without a copy. Failures as `plain`'s.
pub fn with_plain<R>(key: &[u8], p: Pointer, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut f = Some(f);
    let done = nowait::with_installed(p, |v| {
        let f = f.take().expect("called once");
        match v {
            Ok((bytes, true)) => zcomp::with_plain(bytes, f),
            Ok((bytes, false)) => f(bytes),
            Err(e) => fail_read(e),
        }
    });
    match done {
        Some(r) => r,
        None => match fetch_one(key, p) {
            Ok(v) => (f.take().expect("not called above"))(&v),
            Err(e) => fail_read(&e),
        },
    }
}

/// A tiered block is being freed: the record is dead, the dictionary use
/// it held is given back.
pub(crate) fn release(p: Pointer) {
    COUNTERS.tiered_keys.fetch_sub(1, Ordering::Relaxed);
    COUNTERS
        .tiered_plain_bytes
        .fetch_sub(u64::from(p.plain_len), Ordering::Relaxed);
    if let Some(s) = store() {
        s.free(usize::from(p.group), p.loc);
    }
    if p.dict != 0 {
        zcomp::release(p.dict);
    }
}

pub(crate) fn note_tiered(p: Pointer) {
    COUNTERS.tiered_keys.fetch_add(1, Ordering::Relaxed);
    COUNTERS
        .tiered_plain_bytes
        .fetch_add(u64::from(p.plain_len), Ordering::Relaxed);
}

/// Whether a string of `len` plain bytes may move to the log: at least
/// `tier-min-size` (and not empty), and no longer than a pointer's `u16`
/// length (a compact block holds at most `compact::VALUE_MAX` plain
/// bytes, well inside it). The sampler and `tier_out` share this test,
/// so the sampler never offers a value `tier_out` would skip for its
/// length, and a writer making room (up to ten budgets when it has moved
/// nothing: `out_of_time` in the server) does not spin on one.
fn movable_len(len: usize, min_size: usize) -> bool {
    len >= min_size.max(1) && len <= usize::from(u16::MAX)
}

/// What `Engine::tier_out` did with a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The value is on disk; `freed` bytes of block went back.
    Moved { freed: usize },
    /// Gone, expired, not a plain string block, already tiered or too
    /// small: nothing to do.
    Skipped,
    /// The store refused the append (disk full, the disk limit): the
    /// value stays in RAM.
    Refused,
    /// The value changed while it was being coded and appended (another
    /// thread wrote, edited, deleted or moved it): the new value stays,
    /// the record written for the old one is freed as dead.
    Raced,
}

thread_local! {
    /// The value's bytes as `tier_out` copied them out under the lock,
    /// and the record's bytes it codes from them outside it.
    static BUFS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

impl Engine {
    /// Moves the value of `key` in `db` to the tier, if it is still a
    /// string block of at least `min_size` plain bytes, in three steps so
    /// that the shard lock covers copies, not coding: under the lock, the
    /// value's bytes are copied out; without it, they are coded as
    /// `coding` says (a value coded in RAM is written as it is) and
    /// appended to the group's log; under the lock again
    /// the block is swapped for a pointer block only if the key still
    /// holds the same bytes (`swap_tiered`). A value written, edited,
    /// deleted or tiered by another thread meanwhile is its new owner's:
    /// the record is freed as dead and the move answers `Raced`, as the
    /// background coder's swap does (`zcoder::code_step`). Not a write: no
    /// WATCH, journal or keyspace event (the value does not change).
    pub fn tier_out(
        &self,
        db: usize,
        key: &[u8],
        min_size: usize,
        coding: Coding,
        now_ms: u64,
    ) -> Outcome {
        let Some(store) = store() else {
            return Outcome::Skipped;
        };
        BUFS.with(|b| {
            let (plain, out) = &mut *b.borrow_mut();
            self.tier_out_with(store, db, key, min_size, coding, now_ms, plain, out)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn tier_out_with(
        &self,
        store: &dyn Store,
        db: usize,
        key: &[u8],
        min_size: usize,
        coding: Coding,
        now_ms: u64,
        copy: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Outcome {
        let k = self.key(key);
        let group = group_of(k.hash());
        // Under the lock: check the candidate, copy its bytes. A coded
        // value's dictionary use is taken here, while the block holds
        // one: once the lock is gone the block (and its use) may go.
        let (was_coded, plain_len) = {
            let mut shard = self.lock_shard(self.shard_index(&k));
            if db >= shard.databases() {
                return Outcome::Skipped;
            }
            let table = shard.db_mut(db);
            let Some(i) = table.find(k.hash(), key) else {
                return Outcome::Skipped;
            };
            let Ref::Compact(c) = table.at(i) else {
                return Outcome::Skipped;
            };
            if c.is_tiered() || c.meta().is_expired(now_ms) || !movable_len(c.plain_len(), min_size)
            {
                return Outcome::Skipped;
            }
            let Ok(plain_len) = u16::try_from(c.plain_len()) else {
                return Outcome::Skipped;
            };
            copy.clear();
            copy.extend_from_slice(c.value());
            if c.is_coded() {
                zcomp::retain(zcomp::dict_id(c.value()));
            }
            (c.is_coded(), plain_len)
        };
        // Unlocked: the coding and the append (the store's own mutex
        // covers the memcpy into its buffer, and the buffer's write when
        // it fills). `record` is what goes to disk, `dict` the dictionary
        // use the pointer will hold (given back if the append fails or
        // the swap loses).
        let (coded, dict, record) = if was_coded {
            (true, zcomp::dict_id(copy), &copy[..])
        } else if coding == Coding::Lz4
            // LZ4's fast coder with the domain's dictionary: about half
            // zstd's instructions to code a 2.8 KB value (~47,000 against
            // ~100,000) and a third to decode, for ~1.5x the bytes on disk.
            // Under the shard lock it held E4's MSETs to 0.74 of memcached
            // (run S18u): a worker wanting the shard waited for it.
            && zcomp::compress_with(zcomp::Codec::Lz4, zcomp::domain_of(k.hash()), copy, 0, out)
        {
            (true, zcomp::dict_id(out), &out[..])
        } else {
            (false, 0, &copy[..])
        };
        let loc = match store.append(group, db as u8, coded, key, record) {
            Ok(loc) => loc,
            Err(_) => {
                zcomp::release(dict);
                COUNTERS.append_errors.fetch_add(1, Ordering::Relaxed);
                return Outcome::Refused;
            }
        };
        COUNTERS.writes.fetch_add(1, Ordering::Relaxed);
        if was_coded {
            COUNTERS.writes_coded_in_ram.fetch_add(1, Ordering::Relaxed);
        } else if coded {
            COUNTERS
                .writes_coded_on_move
                .fetch_add(1, Ordering::Relaxed);
        }
        let p = Pointer {
            loc,
            plain_len,
            dict,
            group: group as u8,
        };
        match self.swap_tiered(db, &k, was_coded, copy, p) {
            Some(freed) => Outcome::Moved { freed },
            None => {
                // Changed meanwhile: the record is dead on arrival.
                store.free(group, loc);
                zcomp::release(dict);
                COUNTERS.move_races.fetch_add(1, Ordering::Relaxed);
                Outcome::Raced
            }
        }
    }

    /// `tier_out`'s last step: swaps `k`'s block for a tiered one holding
    /// `p` if it still holds exactly the bytes `tier_out` copied (coded
    /// or not as it was), keeping the block's metadata as it is now (a TTL
    /// or an access time changed meanwhile stays). Returns the bytes of
    /// block freed; None if the value changed (the caller frees `p`).
    fn swap_tiered(
        &self,
        db: usize,
        k: &crate::keyspace::Key<'_>,
        was_coded: bool,
        copy: &[u8],
        p: Pointer,
    ) -> Option<usize> {
        let mut shard = self.lock_shard(self.shard_index(k));
        let table = shard.db_mut(db);
        let i = table.find(k.hash(), k.bytes)?;
        let Ref::Compact(c) = table.at(i) else {
            return None;
        };
        if c.is_tiered() || c.is_coded() != was_coded || c.value() != copy {
            return None;
        }
        let size = c.size();
        let block = Block::new_tiered(k.bytes, p, c.raw(), *c.meta());
        let old = table.replace_at(i, Owned::Compact(block));
        drop(shard);
        // A coded block gives back its dictionary use as it drops; the
        // pointer holds the one taken under the first lock.
        drop(old);
        Some(size.saturating_sub(crate::compact::HEADER + k.bytes.len() + Pointer::BYTES))
    }
}

/// Stores a key whose value a snapshot left in the tier at `p` (the
/// snapshot's pointer record): checks the pointer against the log
/// (`Store::mark_live`) and that its dictionary was loaded, takes the
/// dictionary's use, and puts a tiered block in `db`. No record is read.
/// Returns the entry it replaced, if any. An error (no tier, a pointer
/// that names no record, a missing dictionary) stops the load.
pub fn load_pointer(
    g: &mut crate::keyspace::Guard<'_>,
    db: usize,
    k: &crate::keyspace::Key<'_>,
    p: Pointer,
    raw: bool,
    expire_at: u64,
) -> Result<Option<Owned>, String> {
    let Some(s) = store() else {
        return Err("the snapshot points into the disk tier but `tier-enabled` is off".into());
    };
    if usize::from(p.group) >= GROUPS || usize::from(p.plain_len) == 0 {
        return Err(format!("bad disk tier pointer {p:?}"));
    }
    if p.dict != 0 && !zcomp::Dicts::exists(p.dict) {
        return Err(format!(
            "disk tier pointer names dictionary {} which the snapshot does not hold",
            p.dict
        ));
    }
    s.mark_live(usize::from(p.group), p.loc)
        .map_err(|e| format!("disk tier pointer: {e}"))?;
    zcomp::retain(p.dict);
    COUNTERS.loaded_pointers.fetch_add(1, Ordering::Relaxed);
    let block = Block::new_tiered(k.bytes, p, raw, crate::compact::Meta::new(expire_at));
    Ok(g.set_entry(db, k, Owned::Compact(block)))
}

/// The tier's cursor over the keyspace (`Engine::tier_sample`): the next
/// shard to visit, and per shard where its walk stopped (database << 32 |
/// slot). Threads that sample at once share it; a lost update only makes
/// a walk repeat or pass a few slots.
pub(crate) struct Hand {
    next: AtomicUsize,
    at: Box<[AtomicU64]>,
}

impl Hand {
    pub(crate) fn new(shards: usize) -> Hand {
        Hand {
            next: AtomicUsize::new(0),
            at: (0..shards).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Engine {
    /// Samples keys whose values could move out (string blocks in RAM of
    /// at least `min_size` plain bytes) into `pool`, scored as eviction
    /// scores them (idle time, or LFU's counter): the coldest come out
    /// first. Returns how many were offered.
    ///
    /// A CLOCK hand, not random probes: shards in turn, and in each a walk
    /// that goes on from where the last one stopped and passes tiered keys
    /// by their slot's mark (`Table::walk_untiered`) without touching their
    /// blocks. At 3x `maxmemory` two keys in three are tiered, so random
    /// probes (16 shards of 64 slots) mostly dereferenced blocks that could
    /// not move: 9% of the server's CPU in E4's MSET phase (run S18u).
    /// The walk goes round each table once per sweep, so every value in RAM
    /// is offered once per sweep, the pool ordering each call's offers.
    pub fn tier_sample(
        &self,
        cx: &Cx,
        lfu: bool,
        min_size: usize,
        samples: usize,
        pool: &mut Pool,
    ) -> usize {
        let policy = if lfu {
            Policy::AllkeysLfu
        } else {
            Policy::AllkeysLru
        };
        let n = self.shard_count();
        let mut found = 0;
        let mut budget = SAMPLE_SLOTS;
        for _ in 0..n.min(SAMPLE_SHARDS) {
            // Shards in a scattered order (an odd stride is a permutation
            // of the power-of-two count), not 0, 1, 2...: neighbouring
            // shards share a group (its log, its share of
            // `tier-max-disk`), and a sweep in order would fill one log
            // after another.
            let turn = self.tier_hand.next.fetch_add(1, Ordering::Relaxed);
            let i = turn.wrapping_mul(SHARD_STRIDE) & (n - 1);
            let at = &self.tier_hand.at[i];
            let pos = at.load(Ordering::Relaxed);
            let (mut db, mut slot) = ((pos >> 32) as usize, pos as u32 as usize);
            self.with_shard_read(cx, i, |s| {
                let now = crate::clock::now_ms();
                // Each database once at most, then the first one's start
                // again.
                for _ in 0..=s.databases() {
                    if db >= s.databases() {
                        db = 0;
                        slot = 0;
                    }
                    let t = s.db(db);
                    let stop = t.walk_untiered(slot, budget, |e| {
                        if let Ref::Compact(c) = e {
                            if movable_len(c.plain_len(), min_size) {
                                pool.offer(score(policy, e.meta(), now), db, e.key());
                                found += 1;
                            }
                        }
                        found < samples
                    });
                    budget -= stop - slot;
                    slot = stop;
                    if found >= samples || budget == 0 {
                        break;
                    }
                    db += 1;
                    slot = 0;
                }
            });
            at.store((db as u64) << 32 | slot as u64, Ordering::Relaxed);
            if found >= samples || budget == 0 {
                break;
            }
        }
        found
    }

    /// Compaction's liveness question: the database whose `key` holds
    /// exactly the record `loc` of `group` (any database: SWAPDB moves
    /// keys between them, and a record's number is never reused, so a
    /// pointer names one record).
    pub fn tier_holder(&self, key: &[u8], group: usize, loc: Loc) -> Option<usize> {
        let k = self.key(key);
        let shard = self.lock_shard(self.shard_index(&k));
        (0..shard.databases()).find(|&db| {
            let t = shard.db(db);
            t.find(k.hash(), key).is_some_and(|i| match t.at(i) {
                Ref::Compact(c) => {
                    c.is_tiered()
                        && c.tier_ptr().loc == loc
                        && usize::from(c.tier_ptr().group) == group
                }
                Ref::Full(_) => false,
            })
        })
    }

    /// After compaction copied a record: points `key` at `new` if it still
    /// holds `old`. False if it was rewritten meanwhile: the caller frees
    /// `new`. The old record is freed with the old block.
    pub fn tier_repoint(&self, key: &[u8], group: usize, old: Loc, new: Loc) -> bool {
        let k = self.key(key);
        let mut shard = self.lock_shard(self.shard_index(&k));
        for db in 0..shard.databases() {
            let t = shard.db_mut(db);
            let Some(i) = t.find(k.hash(), key) else {
                continue;
            };
            let Ref::Compact(c) = t.at(i) else {
                continue;
            };
            if !c.is_tiered() || c.tier_ptr().loc != old || usize::from(c.tier_ptr().group) != group
            {
                continue;
            }
            let p = Pointer {
                loc: new,
                ..c.tier_ptr()
            };
            // The new block takes its own use of the dictionary; the old
            // one gives its back when it drops.
            zcomp::retain(p.dict);
            let block = Block::new_tiered(key, p, c.raw(), *c.meta());
            let gone = t.replace_at(i, Owned::Compact(block));
            drop(shard);
            drop(gone);
            return true;
        }
        false
    }
}

/// Shards visited per `tier_sample` at most, and slots walked in all:
/// a call that finds nothing costs a bounded walk, and the next call
/// goes on from there.
const SAMPLE_SHARDS: usize = 16;
const SAMPLE_SLOTS: usize = 1024;
/// The hand's step from shard to shard: odd, and far from any power of
/// two, so consecutive turns land in different groups.
const SHARD_STRIDE: usize = 0x9e37_79b9;

/// An in-memory store for the engine's tests: records in a map, with
/// injected failures, and a check that each record is freed once.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use parking_lot::Mutex;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU32;

    /// A stored record: db, coded, key, value.
    type Rec = (u8, bool, Vec<u8>, Vec<u8>);

    /// Run by the next append, before it stores anything.
    pub type Hook = Box<dyn FnOnce() + Send>;

    #[derive(Default)]
    pub struct MemStore {
        recs: Mutex<HashMap<(usize, Loc), Rec>>,
        next: AtomicU32,
        pub fail_appends: AtomicU32,
        pub fail_reads: AtomicU32,
        pub on_append: Mutex<Option<Hook>>,
    }

    fn take(n: &AtomicU32) -> bool {
        n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1))
            .is_ok()
    }

    impl Store for MemStore {
        fn append(
            &self,
            group: usize,
            db: u8,
            coded: bool,
            key: &[u8],
            value: &[u8],
        ) -> Result<Loc, String> {
            let hook = self.on_append.lock().take();
            if let Some(hook) = hook {
                hook();
            }
            if take(&self.fail_appends) {
                return Err("injected: no space left on device".into());
            }
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let loc = Loc {
                segment: 1,
                offset: 32 + 8 * n,
                len: (16 + key.len() + value.len()) as u32,
            };
            let rec = (db, coded, key.to_vec(), value.to_vec());
            self.recs.lock().insert((group, loc), rec);
            Ok(loc)
        }

        fn read(&self, group: usize, loc: Loc) -> Result<Record, String> {
            if take(&self.fail_reads) {
                return Err("injected: input/output error".into());
            }
            let recs = self.recs.lock();
            let (_, coded, key, value) = recs.get(&(group, loc)).ok_or("no such record")?;
            Ok(Record {
                key: key.clone(),
                value: value.clone(),
                coded: *coded,
            })
        }

        fn free(&self, group: usize, loc: Loc) {
            let gone = self.recs.lock().remove(&(group, loc));
            assert!(
                gone.is_some(),
                "record {loc:?} of group {group} freed twice"
            );
        }
    }

    impl MemStore {
        /// Records held for `key` (any group, any db).
        pub fn live(&self, key: &[u8]) -> usize {
            self.recs.lock().values().filter(|r| r.2 == key).count()
        }

        /// The records held for `key`: (coded, value bytes as stored).
        pub fn records(&self, key: &[u8]) -> Vec<(bool, Vec<u8>)> {
            let recs = self.recs.lock();
            let held = recs.values().filter(|r| r.2 == key);
            held.map(|r| (r.1, r.3.clone())).collect()
        }
    }

    static MEM: OnceLock<&'static MemStore> = OnceLock::new();

    /// The process's store for tests: installed by the first caller.
    pub fn mem() -> &'static MemStore {
        MEM.get_or_init(|| {
            let s: &'static MemStore = Box::leak(Box::default());
            struct Fwd(&'static MemStore);
            impl Store for Fwd {
                fn append(
                    &self,
                    g: usize,
                    db: u8,
                    c: bool,
                    k: &[u8],
                    v: &[u8],
                ) -> Result<Loc, String> {
                    self.0.append(g, db, c, k, v)
                }
                fn read(&self, g: usize, l: Loc) -> Result<Record, String> {
                    self.0.read(g, l)
                }
                fn free(&self, g: usize, l: Loc) {
                    self.0.free(g, l)
                }
            }
            assert!(install(Box::new(Fwd(s))), "the test store is the only one");
            s
        })
    }

    /// Tests that tier values or inject failures take turns with each
    /// other and with zcomp's (the store, its fault knobs and the
    /// dictionaries the records take uses of are process-wide).
    pub(crate) use crate::value::zcomp::tests::SERIAL;
}

#[cfg(test)]
mod tests {
    use super::testing::{mem, SERIAL};
    use super::*;
    use crate::entry::TIERED_ENCODING;
    use crate::keyspace::Expiry;
    use crate::ops::string as s;
    use crate::ops::test_support::{engine, with};
    use crate::value::zcomp::sample_text;
    use proptest::prelude::*;

    /// SET codes values of 64 bytes or more with LZ4 in line (the path
    /// under memory pressure), so they are coded in RAM before any move.
    fn lz4_at_set(e: &Engine) {
        e.limits.value_compression_min.store(64, Ordering::Relaxed);
        e.limits
            .value_compression_codec
            .store(zcomp::Codec::Lz4 as u8, Ordering::Relaxed);
        e.limits
            .value_compression_inline
            .store(true, Ordering::Relaxed);
    }

    fn set(e: &Engine, key: &[u8], v: &[u8]) {
        with(e, |g| {
            let k = g.key(key);
            s::set(g, 0, &k, v, s::Cond::Always, Expiry::Clear, false).unwrap();
        });
    }

    fn get(e: &Engine, key: &[u8]) -> Option<Vec<u8>> {
        with(e, |g| {
            let k = g.key(key);
            s::get(g, 0, &k, |b| b.map(<[u8]>::to_vec)).unwrap()
        })
    }

    fn encoding(e: &Engine, key: &[u8]) -> Option<&'static str> {
        with(e, |g| {
            let k = g.key(key);
            g.peek_ref(0, &k).map(|r| r.encoding())
        })
    }

    fn out(e: &Engine, key: &[u8]) -> Outcome {
        e.tier_out(0, key, 1, Coding::Lz4, crate::clock::now_ms())
    }

    #[test]
    fn pointer_bytes_are_the_drawn_ones() {
        let p = Pointer {
            loc: Loc {
                segment: 0x0102_0304,
                offset: 0x0506_0708,
                len: 0x090a_0b0c,
            },
            plain_len: 0x7fff,
            dict: 0xabc,
            group: 0xf,
        };
        let b = p.to_bytes();
        assert_eq!(
            b,
            [4, 3, 2, 1, 8, 7, 6, 5, 0xc, 0xb, 0xa, 9, 0xff, 0x7f, 0xbc, 0xfa]
        );
        assert_eq!(Pointer::from_bytes(&b), p);
        // The block of a 23-byte key: 24 + 23 + 16 = 63 bytes (jemalloc's 64).
        assert_eq!(crate::compact::HEADER + 23 + Pointer::BYTES, 63);
    }

    #[test]
    fn tiered_values_read_as_before_and_free_their_records() {
        let _s = SERIAL.lock();
        let store = mem();
        let e = engine();
        let text = sample_text(7, 1000);
        let bytes: Vec<u8> = (0..300u32).map(|i| (i * 7919 % 251) as u8).collect();
        set(&e, b"t:text", &text);
        set(&e, b"t:bytes", &bytes);
        set(&e, b"t:small", b"tiny");
        assert!(matches!(out(&e, b"t:text"), Outcome::Moved { .. }));
        assert!(matches!(out(&e, b"t:bytes"), Outcome::Moved { .. }));
        assert_eq!(
            e.tier_out(0, b"t:small", 256, Coding::Lz4, 0),
            Outcome::Skipped
        );
        assert_eq!(out(&e, b"t:text"), Outcome::Skipped, "already tiered");
        assert_eq!(out(&e, b"t:none"), Outcome::Skipped);
        assert_eq!(encoding(&e, b"t:text"), Some(TIERED_ENCODING));
        assert_eq!(store.live(b"t:text"), 1);
        with(&e, |g| {
            let k = g.key(b"t:text");
            let r = g.read_ref(0, &k).unwrap();
            assert_eq!(r.mem_bytes(), crate::compact::HEADER + 6 + Pointer::BYTES);
            assert_eq!(s::strlen(g, 0, &k).unwrap(), 1000);
            assert_eq!(
                s::getrange(g, 0, &k, 10, 19, |b| b.to_vec()).unwrap(),
                &text[10..20]
            );
        });
        assert_eq!(get(&e, b"t:text").unwrap(), text);
        assert_eq!(get(&e, b"t:bytes").unwrap(), bytes);
        // COPY reads the value back into RAM; the source keeps its record.
        with(&e, |g| {
            let (a, b) = (g.key(b"t:text"), g.key(b"t:copy"));
            crate::ops::keys::copy(g, 0, &a, 0, &b, false, drop).unwrap();
        });
        assert_ne!(encoding(&e, b"t:copy"), Some(TIERED_ENCODING));
        assert_eq!(get(&e, b"t:copy").unwrap(), text);
        assert_eq!(store.live(b"t:text"), 1);
        // RENAME brings it back too (the record names the old key), and
        // frees the old record.
        with(&e, |g| {
            let (a, b) = (g.key(b"t:text"), g.key(b"t:renamed"));
            crate::ops::keys::rename(g, 0, &a, &b, false).unwrap();
        });
        assert_eq!(store.live(b"t:text"), 0);
        assert_eq!(get(&e, b"t:renamed").unwrap(), text);
        // An in-place edit materializes it (and frees the record).
        assert!(matches!(out(&e, b"t:renamed"), Outcome::Moved { .. }));
        with(&e, |g| {
            let k = g.key(b"t:renamed");
            assert_eq!(s::append(g, 0, &k, b"!").unwrap(), 1001);
        });
        assert_eq!(store.live(b"t:renamed"), 0);
        assert_eq!(encoding(&e, b"t:renamed"), Some("raw"));
        // Overwrite, DEL, expiry: each frees the record.
        set(&e, b"t:bytes", b"new");
        assert_eq!(store.live(b"t:bytes"), 0);
        set(&e, b"t:bytes", &bytes);
        assert!(matches!(out(&e, b"t:bytes"), Outcome::Moved { .. }));
        with(&e, |g| {
            let k = g.key(b"t:bytes");
            assert!(g.remove(0, &k).is_some());
        });
        assert_eq!(store.live(b"t:bytes"), 0);
        set(&e, b"t:exp", &bytes);
        assert!(matches!(out(&e, b"t:exp"), Outcome::Moved { .. }));
        with(&e, |g| {
            let k = g.key(b"t:exp");
            assert!(g.set_expire(0, &k, 1));
        });
        assert_eq!(get(&e, b"t:exp"), None);
        assert_eq!(store.live(b"t:exp"), 0);
        // Dropping the engine (FLUSHALL's path) frees the rest.
        assert!(matches!(out(&e, b"t:copy"), Outcome::Moved { .. }));
        assert_eq!(store.live(b"t:copy"), 1);
        drop(e);
        assert_eq!(store.live(b"t:copy"), 0);
    }

    /// `Coding::Plain` writes a plain value's bytes as they are (kind 0),
    /// `Coding::Lz4` codes it (kind 1); a value coded in RAM goes out as
    /// it is coded under both, not coded again. Each reads back intact,
    /// and the INFO counters say which way each record went.
    #[test]
    fn each_coding_writes_its_kind_and_reads_back() {
        let _s = SERIAL.lock();
        let store = mem();
        let e = engine();
        let text = sample_text(21, 2800);
        let c = &COUNTERS;
        let counts = || {
            (
                c.writes.load(Ordering::Relaxed),
                c.writes_coded_in_ram.load(Ordering::Relaxed),
                c.writes_coded_on_move.load(Ordering::Relaxed),
            )
        };
        // Plain in RAM: a copy under Plain, LZ4 under Lz4.
        for (key, coding) in [(&b"c:plain"[..], Coding::Plain), (b"c:lz4", Coding::Lz4)] {
            set(&e, key, &text);
            let (w, ram, mv) = counts();
            assert!(matches!(
                e.tier_out(0, key, 1, coding, crate::clock::now_ms()),
                Outcome::Moved { .. }
            ));
            let recs = store.records(key);
            assert_eq!(recs.len(), 1);
            let coded = coding == Coding::Lz4;
            assert_eq!(recs[0].0, coded, "{key:?}");
            if coded {
                assert!(recs[0].1.len() < text.len() - text.len() / 8);
            } else {
                assert_eq!(recs[0].1, text, "a plain record is the value's bytes");
            }
            assert_eq!(counts(), (w + 1, ram, mv + u64::from(coded)));
            assert_eq!(encoding(&e, key), Some(TIERED_ENCODING));
            assert_eq!(get(&e, key).unwrap(), text);
        }
        // A refused append counts nothing.
        set(&e, b"c:refused", &text);
        let before = counts();
        store.fail_appends.store(1, Ordering::Relaxed);
        let r = e.tier_out(0, b"c:refused", 1, Coding::Lz4, crate::clock::now_ms());
        assert_eq!(r, Outcome::Refused);
        assert_eq!(counts(), before);
        // Coded in RAM (SET's in-line LZ4): out as it is under both.
        lz4_at_set(&e);
        for (key, coding) in [
            (&b"c:ram-plain"[..], Coding::Plain),
            (b"c:ram-lz4", Coding::Lz4),
        ] {
            set(&e, key, &text);
            assert_eq!(encoding(&e, key), Some("lz4"));
            let in_ram = with(&e, |g| {
                let k = g.key(key);
                match g.peek_ref(0, &k) {
                    Some(Ref::Compact(b)) => b.value().to_vec(),
                    _ => panic!("not a block"),
                }
            });
            let (w, ram, mv) = counts();
            assert!(matches!(
                e.tier_out(0, key, 1, coding, crate::clock::now_ms()),
                Outcome::Moved { .. }
            ));
            assert_eq!(store.records(key), vec![(true, in_ram)], "{key:?}");
            assert_eq!(counts(), (w + 1, ram + 1, mv));
            assert_eq!(get(&e, key).unwrap(), text);
        }
        drop(e);
        for key in [&b"c:plain"[..], b"c:lz4", b"c:ram-plain", b"c:ram-lz4"] {
            assert_eq!(store.live(key), 0);
        }
    }

    #[test]
    fn a_refused_append_or_a_failed_read_loses_nothing() {
        let _s = SERIAL.lock();
        let store = mem();
        let e = engine();
        let v = sample_text(3, 800);
        set(&e, b"f:k", &v);
        store.fail_appends.store(1, Ordering::Relaxed);
        assert_eq!(out(&e, b"f:k"), Outcome::Refused);
        assert_ne!(encoding(&e, b"f:k"), Some(TIERED_ENCODING));
        assert_eq!(get(&e, b"f:k").unwrap(), v);
        assert!(matches!(out(&e, b"f:k"), Outcome::Moved { .. }));
        // A read that fails fails the command (a panic its guard turns
        // into an error reply) and leaves the key as it was, even for an
        // edit that materializes it.
        store.fail_reads.store(1, Ordering::Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with(&e, |g| {
                let k = g.key(b"f:k");
                s::append(g, 0, &k, b"!").unwrap()
            })
        }));
        assert!(r.is_err());
        assert_eq!(encoding(&e, b"f:k"), Some(TIERED_ENCODING));
        assert_eq!(store.live(b"f:k"), 1);
        assert_eq!(get(&e, b"f:k").unwrap(), v);
        drop(e);
        assert_eq!(store.live(b"f:k"), 0);
    }

    #[test]
    fn a_rename_whose_read_fails_keeps_the_key() {
        let _s = SERIAL.lock();
        let store = mem();
        let e = engine();
        let v = sample_text(5, 900);
        set(&e, b"r:a", &v);
        assert!(matches!(out(&e, b"r:a"), Outcome::Moved { .. }));
        store.fail_reads.store(1, Ordering::Relaxed);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with(&e, |g| {
                let (a, b) = (g.key(b"r:a"), g.key(b"r:b"));
                crate::ops::keys::rename(g, 0, &a, &b, false)
            })
        }));
        assert!(r.is_err(), "the read failed");
        assert_eq!(encoding(&e, b"r:a"), Some(TIERED_ENCODING));
        assert_eq!(get(&e, b"r:b"), None);
        assert_eq!(store.live(b"r:a"), 1);
        // Without the fault it reads, and the old record is freed.
        with(&e, |g| {
            let (a, b) = (g.key(b"r:a"), g.key(b"r:b"));
            assert!(crate::ops::keys::rename(g, 0, &a, &b, false).unwrap());
        });
        assert_eq!(get(&e, b"r:b").unwrap(), v);
        assert_eq!(get(&e, b"r:a"), None);
        assert_eq!(store.live(b"r:a"), 0);
    }

    #[test]
    fn eviction_takes_values_in_ram_before_tiered_keys() {
        let _s = SERIAL.lock();
        mem();
        let e = engine();
        let key = |i: usize| format!("ev:{i}").into_bytes();
        for i in 0..40 {
            set(&e, &key(i), &sample_text(i as u64, 600));
        }
        for i in (0..40).step_by(2) {
            assert!(matches!(out(&e, &key(i)), Outcome::Moved { .. }));
        }
        let mut pool = Pool::default();
        for _ in 0..20 {
            let step = crate::evict::evict_one(
                &e,
                &crate::cx::Cx::DETACHED,
                Policy::AllkeysLru,
                5,
                &mut pool,
            );
            assert!(matches!(step, crate::evict::Step::Freed(Some(_))));
        }
        for i in 0..40 {
            let there = get(&e, &key(i)).is_some();
            assert_eq!(there, i % 2 == 0, "ev:{i}: tiered keys stay, RAM ones go");
        }
    }

    /// A value rewritten while `tier_out` codes and appends it keeps the
    /// new value: the append runs without the shard lock (another
    /// thread's SET of the key goes through during it), the swap sees the
    /// change, and the record written for the old value is freed as dead
    /// (`Raced`). Both kinds of candidate: plain, and coded (its
    /// dictionary use is taken under the first lock and given back).
    #[test]
    fn a_value_rewritten_while_it_moves_out_keeps_the_new_value() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let _s = SERIAL.lock();
        let store = mem();
        let e = Arc::new(engine());
        let old = sample_text(11, 900);
        let new = sample_text(12, 700);
        for (key, coded) in [(&b"race:plain"[..], false), (&b"race:lz4"[..], true)] {
            if coded {
                // SET codes in line with LZ4 (the path under pressure).
                lz4_at_set(&e);
            }
            set(&e, key, &old);
            assert_eq!(encoding(&e, key), Some(if coded { "lz4" } else { "raw" }));
            let went_through = Arc::new(AtomicBool::new(false));
            let writer = Arc::new(parking_lot::Mutex::new(None));
            let (e2, new2, key2) = (e.clone(), new.clone(), key.to_vec());
            let (flag, slot) = (went_through.clone(), writer.clone());
            *store.on_append.lock() = Some(Box::new(move || {
                // Another client's SET of the key, between the move's copy
                // and its swap. Were the shard still locked, the SET would
                // wait for the move and not be done in time.
                let (tx, rx) = std::sync::mpsc::channel();
                *slot.lock() = Some(std::thread::spawn(move || {
                    set(&e2, &key2, &new2);
                    let _ = tx.send(());
                }));
                let done = rx.recv_timeout(std::time::Duration::from_secs(10));
                flag.store(done.is_ok(), Ordering::Relaxed);
            }));
            let races = COUNTERS.move_races.load(Ordering::Relaxed);
            assert_eq!(out(&e, key), Outcome::Raced, "{key:?}");
            writer
                .lock()
                .take()
                .expect("the append ran")
                .join()
                .unwrap();
            assert!(
                went_through.load(Ordering::Relaxed),
                "{key:?}: the SET waited for the move's append"
            );
            assert_eq!(COUNTERS.move_races.load(Ordering::Relaxed), races + 1);
            assert_eq!(get(&e, key).unwrap(), new);
            assert_ne!(encoding(&e, key), Some(TIERED_ENCODING));
            assert_eq!(store.live(key), 0, "the dead record was freed");
            // Unchanged, it moves out, and reads back.
            assert!(matches!(out(&e, key), Outcome::Moved { .. }));
            assert_eq!(get(&e, key).unwrap(), new);
            assert_eq!(store.live(key), 1);
        }
        drop(e);
        assert_eq!(store.live(b"race:plain") + store.live(b"race:lz4"), 0);
    }

    /// The length test the sampler and `tier_out` share: a compact block's
    /// plain string always fits a pointer's `u16` length.
    #[test]
    fn movable_lengths() {
        assert!(movable_len(crate::compact::VALUE_MAX, 1));
        assert!(movable_len(usize::from(u16::MAX), 1));
        assert!(!movable_len(usize::from(u16::MAX) + 1, 1));
        assert!(!movable_len(0, 0));
        assert!(movable_len(1, 0));
        assert!(!movable_len(99, 100));
        assert!(movable_len(100, 100));
    }

    /// The sampler's hand passes tiered keys (by their slot's mark) and
    /// goes round: every value in RAM is offered within a sweep, no
    /// tiered key ever is, and once all are tiered a call finds nothing.
    #[test]
    fn the_sampler_offers_each_value_in_ram_and_no_tiered_key() {
        let _s = SERIAL.lock();
        mem();
        let e = engine();
        let key = |i: usize| format!("hand:{i}").into_bytes();
        for i in 0..200 {
            set(&e, &key(i), &sample_text(i as u64, 300));
        }
        // A small value is never offered.
        set(&e, b"hand:small", b"tiny");
        for i in (0..200).filter(|i| i % 3 != 0) {
            assert!(matches!(out(&e, &key(i)), Outcome::Moved { .. }));
        }
        let in_ram: std::collections::BTreeSet<Vec<u8>> =
            (0..200).filter(|i| i % 3 == 0).map(key).collect();
        let mut seen = std::collections::BTreeSet::new();
        let mut pool = Pool::default();
        for _ in 0..64 {
            e.tier_sample(&Cx::DETACHED, false, 100, 5, &mut pool);
            while let Some(c) = pool.pop_best() {
                assert!(
                    in_ram.contains(&c.key),
                    "offered {:?}",
                    String::from_utf8_lossy(&c.key)
                );
                seen.insert(c.key.clone());
                pool.recycle(c);
            }
        }
        assert_eq!(seen, in_ram, "a sweep offers every value in RAM");
        for k in &in_ram {
            assert!(matches!(out(&e, k), Outcome::Moved { .. }));
        }
        for _ in 0..8 {
            assert_eq!(e.tier_sample(&Cx::DETACHED, false, 100, 5, &mut pool), 0);
        }
        // A value written again is in RAM, and the hand finds it.
        set(&e, &key(1), b"back in RAM, and long enough to move out again: ..........................................................................................");
        let found: usize = (0..8)
            .map(|_| e.tier_sample(&Cx::DETACHED, false, 100, 5, &mut pool))
            .sum();
        // Offered again at each pass of the hand (a small keyspace is
        // walked whole by one call); the pool holds it once.
        assert!(found >= 1);
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.pop_best().unwrap().key, key(1));
    }

    /// The hand visits shards in a scattered order, so the values one
    /// burst of sampling offers spread over the groups' logs (in shard
    /// order, 64 shards a group, they would fill one log after another).
    #[test]
    fn the_hand_spreads_its_turns_over_the_groups() {
        let _s = SERIAL.lock();
        mem();
        let e = Engine::new(crate::keyspace::Options::default());
        for i in 0..4000u64 {
            set(&e, format!("g:{i}").as_bytes(), &sample_text(i, 300));
        }
        let mut pool = Pool::default();
        let mut groups = std::collections::BTreeSet::new();
        for _ in 0..16 {
            e.tier_sample(&Cx::DETACHED, false, 100, 5, &mut pool);
            while let Some(c) = pool.pop_best() {
                groups.insert(group_of(e.key(&c.key).hash()));
                pool.recycle(c);
            }
        }
        // About 20 shards visited: in order, all in group 0; scattered,
        // about 11 groups of 16 (10 seen here).
        assert!(
            groups.len() >= 8,
            "16 calls offered keys of groups {groups:?}"
        );
    }

    /// A string command of zcomp's comparison, or a move of values out.
    #[derive(Debug, Clone)]
    enum TOp {
        Str(crate::value::zcomp::tests::Op),
        /// Tier one key (the other engine does nothing).
        Out(u8),
        /// Tier every key that qualifies.
        AllOut,
        Expire(u8, bool),
    }

    fn top() -> impl Strategy<Value = TOp> {
        prop_oneof![
            6 => crate::value::zcomp::tests::op().prop_map(TOp::Str),
            3 => (0u8..4).prop_map(TOp::Out),
            1 => Just(TOp::AllOut),
            1 => (0u8..4, any::<bool>()).prop_map(|(k, past)| TOp::Expire(k, past)),
        ]
    }

    /// Keys move out plain or LZ4-coded by their number, so the model
    /// compares both codings (and values coded in RAM, which go out as
    /// they are under either).
    fn coding_of(k: u8) -> Coding {
        if k.is_multiple_of(2) {
            Coding::Lz4
        } else {
            Coding::Plain
        }
    }

    fn apply(e: &Engine, tiered: bool, op: &TOp) -> String {
        let name = |i: u8| format!("key:{i}").into_bytes();
        match op {
            TOp::Str(o) => crate::value::zcomp::tests::run(e, o),
            TOp::Out(k) if tiered => {
                e.tier_out(0, &name(*k), 1, coding_of(*k), crate::clock::now_ms());
                String::new()
            }
            TOp::AllOut if tiered => {
                for k in 0..4 {
                    e.tier_out(0, &name(k), 1, coding_of(k), crate::clock::now_ms());
                }
                String::new()
            }
            TOp::Out(_) | TOp::AllOut => String::new(),
            TOp::Expire(k, past) => with(e, |g| {
                let kk = name(*k);
                let k = g.key(&kk);
                // In the past: gone at the next lookup. Far ahead: TTL
                // kept by a tiered block as by any.
                let at = if *past { 1 } else { u64::MAX / 4 };
                format!("{}", g.set_expire(0, &k, at))
            }),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn replies_are_the_same_with_values_moved_to_disk(ops in proptest::collection::vec(top(), 1..40)) {
            let _s = SERIAL.lock();
            let store = mem();
            let ram = engine();
            let disk = engine();
            for o in &ops {
                prop_assert_eq!(apply(&ram, false, o), apply(&disk, true, o), "{:?}", o);
            }
            drop(disk);
            for k in 0..4 {
                prop_assert_eq!(store.live(format!("key:{k}").as_bytes()), 0);
            }
        }
    }
}
