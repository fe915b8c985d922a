//! Compressed string values (issue 25, item 1): the codec (zstd, one
//! frame per value) and the table of dictionaries it codes with, trained
//! per dictionary domain (a group of keyspace shards) on that domain's own
//! values. The keyspace stores a compressed value as a compact block with
//! `FLAG_ZSTD` (see `crate::compact`); everything else here is independent
//! of how a value is held, so a disk tier can code its records the same way.
//! A second codec, liblz4 (`value::zcomp_lz4`, branch lz4code), codes the
//! values the background coder (`crate::zcoder`) picks; a value says which
//! codec coded it, so both kinds decode side by side.
//!
//! **A coded value** (what the block's value bytes hold):
//!
//! ```text
//! offset  size  field
//!      0     4  plain length, u32 LE (STRLEN reads it; decoding sizes its buffer)
//!      4     2  bits 0-11: dictionary id (0 = coded without a dictionary);
//!               bits 12-15: codec (`Codec`: 0 zstd, 1 lz4), u16 LE
//!      6     n  zstd: one frame, without content size, dictionary id or
//!               checksum (the header above says both; 4-6 bytes a value);
//!               lz4: one LZ4 block
//! ```
//!
//! **Dictionaries.** Each domain collects samples (copies of the values it
//! codes) until it holds `SAMPLE_BYTES`, then a `cairn-zdict` thread trains a `DICT_BYTES` dictionary from them
//! (`zstd::dict::from_continuous`) and it becomes the domain's current one,
//! under a fresh id. Until then values
//! are coded without one. A dictionary counts the values coded with it
//! (`users`); when a newer one replaces it (retraining) it is `retired`,
//! and it is freed once no value uses it. Readers find a dictionary by id
//! in a fixed array of pointers (one load, no lock): a value being read
//! holds a use of its dictionary, and the shard lock keeps the value alive
//! while it is read, so a dictionary cannot be freed under a reader.
//!
//! **Retraining.** After training, a domain measures its ratio (coded /
//! plain bytes) over windows of `WINDOW_BYTES` of plain input. The first
//! window is the baseline; a later window more than 10% worse starts a new
//! sample, and the dictionary trained from it replaces the current one.
//! Values keep the dictionary that coded them until they are written again.
//!
//! **Memory.** zstd allocates with the C allocator, which `used_memory`
//! (jemalloc's counters) does not see, so the prepared dictionaries' sizes
//! are counted here (`dict_bytes`) and added to `used_memory` by the server.
use parking_lot::Mutex;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use zstd::zstd_safe::zstd_sys as sys;
use zstd::zstd_safe::{DCtx, DDict};

use super::zcomp_lz4::{self as lz4, Lz4Dict};

/// The codec of a coded value (the top 4 bits of its dictionary field) and
/// of a dictionary. Append-only values: they are in the disk tier's
/// records and in persisted dictionaries.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Zstd = 0,
    Lz4 = 1,
}

impl Codec {
    pub fn from_tag(t: u8) -> Option<Codec> {
        match t {
            0 => Some(Codec::Zstd),
            1 => Some(Codec::Lz4),
            _ => None,
        }
    }

    /// OBJECT ENCODING of a value it coded.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
        }
    }
}

/// The id bits of a coded value's dictionary field; the codec is above.
const ID_MASK: u16 = 0x0fff;
const CODEC_SHIFT: u32 = 12;

/// Bytes before the zstd frame in a coded value.
pub const HEADER: usize = 6;

/// Dictionary domains: keyspace shard `s` trains and codes in domain
/// `s * DOMAINS / shards`. One (branch zfast): a larger dictionary for the
/// whole keyspace codes smaller and faster than sixteen small ones, for a
/// sixteenth of the memory and training (docs/design.md, "Compressed
/// values", the zfast table).
pub const DOMAINS: usize = 1;

/// The dictionary domain of a key's hash: its top bits, by a multiply so
/// that one domain (a shift by 64) works too.
#[inline]
pub fn domain_of(hash: u64) -> usize {
    ((u128::from(hash) * DOMAINS as u128) >> 64) as usize
}

/// Size of a trained dictionary: 64 KiB codes the test's 2.8 KB text 25%
/// smaller than 16 KiB and with ~27% fewer instructions to code, ~15% fewer
/// to decode (longer matches, fewer sequences).
pub const DICT_BYTES: usize = 64 << 10;

/// Samples a domain collects before training (16 times the dictionary,
/// which is where zstd's trainer stops gaining on text).
pub const SAMPLE_BYTES: usize = 1 << 20;

/// Plain bytes per ratio window (retraining, above).
pub const WINDOW_BYTES: u64 = 8 << 20;

/// Dictionary ids live in `1..SLOTS`; 0 means none. They fit the 12 bits
/// of a coded value's header (and of a tier pointer).
const SLOTS: usize = 4096;

/// The default of `value-compression-min-size`.
pub const MIN_SIZE_DEFAULT: usize = 512;

/// The default of `value-compression-level` (docs/design.md: level 3
/// codes 2.8 KB text ~8% smaller than 1 at the same instruction count).
pub const LEVEL_DEFAULT: i32 = 3;

/// A zstd CDict (zstd-safe's wrapper gives no pointer, and the frame
/// parameters we want need `ZSTD_compress_usingCDict_advanced`).
struct RawCDict(NonNull<sys::ZSTD_CDict>);

// SAFETY: a CDict is read-only once built; zstd documents sharing one
// between threads.
unsafe impl Send for RawCDict {}
// SAFETY: as above.
unsafe impl Sync for RawCDict {}

impl RawCDict {
    fn create(raw: &[u8], level: i32) -> Option<RawCDict> {
        // SAFETY: zstd copies `raw`; a null result means failure.
        NonNull::new(unsafe { sys::ZSTD_createCDict(raw.as_ptr().cast(), raw.len(), level) })
            .map(RawCDict)
    }

    fn sizeof(&self) -> usize {
        // SAFETY: a live CDict.
        unsafe { sys::ZSTD_sizeof_CDict(self.0.as_ptr()) }
    }
}

impl Drop for RawCDict {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCDict and freed once, here.
        unsafe {
            sys::ZSTD_freeCDict(self.0.as_ptr());
        }
    }
}

/// A thread's compression context.
struct RawCCtx(NonNull<sys::ZSTD_CCtx>);

impl Drop for RawCCtx {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCCtx and freed once, here.
        unsafe {
            sys::ZSTD_freeCCtx(self.0.as_ptr());
        }
    }
}

/// Frames without content size (the coded value's header holds the plain
/// length), checksum or dictionary id (the header holds ours).
const FRAME: sys::ZSTD_frameParameters = sys::ZSTD_frameParameters {
    contentSizeFlag: 0,
    checksumFlag: 0,
    noDictIDFlag: 1,
};

/// A dictionary prepared for one codec.
enum Prepared {
    /// For both directions.
    Zstd {
        cdict: RawCDict,
        ddict: DDict<'static>,
    },
    Lz4(Lz4Dict),
}

/// A trained dictionary, prepared for both directions of its codec.
pub struct Dict {
    pub id: u16,
    pub codec: Codec,
    prep: Prepared,
    /// Values coded with it and still stored, codings in progress, and one
    /// for being its domain's current dictionary (given back when it is
    /// retired), so whoever gives back the last use frees it: exactly once.
    users: AtomicU64,
    /// Replaced by a newer dictionary of its domain.
    retired: AtomicBool,
    mem: usize,
    /// The trained bytes, kept for persistence (`Dicts::export`): a
    /// snapshot that points into the disk tier carries the dictionaries
    /// its records were coded with.
    raw: std::sync::Arc<[u8]>,
}

/// Dictionaries by id.
static TABLE: [AtomicPtr<Dict>; SLOTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// Where the next id search starts (ids are reused once free).
static NEXT_ID: AtomicU16 = AtomicU16::new(1);

/// Bytes zstd holds for live dictionaries (the server adds it to used_memory).
static DICT_MEM: AtomicUsize = AtomicUsize::new(0);

/// Dictionaries trained since start (INFO, tests).
static TRAINED: AtomicU64 = AtomicU64::new(0);

/// Coded values stored, and their plain and coded bytes (INFO).
static STORED: AtomicU64 = AtomicU64::new(0);
static STORED_PLAIN: AtomicU64 = AtomicU64::new(0);
static STORED_CODED: AtomicU64 = AtomicU64::new(0);

/// CPU time the trainer spent training, in microseconds (INFO).
static TRAIN_CPU_US: AtomicU64 = AtomicU64::new(0);

/// Train on the calling thread instead of a `cairn-zdict` thread (tests).
static SYNC_TRAINING: AtomicBool = AtomicBool::new(false);

/// Bytes of prepared dictionaries held by zstd, for `used_memory`.
pub fn dict_bytes() -> usize {
    DICT_MEM.load(Ordering::Relaxed)
}

/// Dictionaries alive (current or still used by a value).
pub fn dict_count() -> usize {
    TABLE
        .iter()
        .filter(|p| !p.load(Ordering::Acquire).is_null())
        .count()
}

/// Dictionaries trained since start.
pub fn trained() -> u64 {
    TRAINED.load(Ordering::Relaxed)
}

/// Coded values stored now, their plain bytes and their coded bytes.
pub fn stored() -> (u64, u64, u64) {
    (
        STORED.load(Ordering::Relaxed),
        STORED_PLAIN.load(Ordering::Relaxed),
        STORED_CODED.load(Ordering::Relaxed),
    )
}

/// CPU time spent training dictionaries since start, in microseconds.
pub fn training_cpu_us() -> u64 {
    TRAIN_CPU_US.load(Ordering::Relaxed)
}

/// Counts a coded value a block now holds (`compact::Block::new_coded`).
pub fn note_stored(coded: &[u8]) {
    STORED.fetch_add(1, Ordering::Relaxed);
    STORED_PLAIN.fetch_add(plain_len(coded) as u64, Ordering::Relaxed);
    STORED_CODED.fetch_add(coded.len() as u64, Ordering::Relaxed);
}

/// A block holding a coded value is freed: uncounts it and gives back its
/// use of the dictionary.
pub fn note_freed(coded: &[u8]) {
    STORED.fetch_sub(1, Ordering::Relaxed);
    STORED_PLAIN.fetch_sub(plain_len(coded) as u64, Ordering::Relaxed);
    STORED_CODED.fetch_sub(coded.len() as u64, Ordering::Relaxed);
    release(dict_id(coded));
}

/// True while `domain`'s dictionary is being trained: the background
/// coder waits rather than code values without it (branch lz4code).
pub fn training(domain: usize) -> bool {
    with_domain(domain, |d| d.training)
}

/// Makes training synchronous (tests: the dictionary exists when the
/// write that completed the sample returns).
pub fn set_sync_training(on: bool) {
    SYNC_TRAINING.store(on, Ordering::Relaxed);
}

fn dict(id: u16) -> Option<&'static Dict> {
    let p = TABLE.get(id as usize)?.load(Ordering::Acquire);
    // SAFETY: a non-null slot points to a live `Dict` (boxed in `install`),
    // freed only in `try_free` after its last use is released; callers
    // hold a use (a stored value coded with it, or a coding in progress).
    unsafe { p.as_ref() }
}

/// Takes a use of dictionary `id` (a coded value copied: COPY, RENAME).
pub fn retain(id: u16) {
    if let Some(d) = dict(id) {
        d.users.fetch_add(1, Ordering::Relaxed);
    }
}

/// Gives back a use of dictionary `id` (a coded value freed); the last use
/// of a retired dictionary frees it (a current one holds its own use).
pub fn release(id: u16) {
    if let Some(d) = dict(id) {
        if d.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            try_free(id);
        }
    }
}

fn try_free(id: u16) {
    let p = TABLE[id as usize].swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: boxed in `install`; the swap made this the only owner.
        let d = unsafe { Box::from_raw(p) };
        DICT_MEM.fetch_sub(d.mem, Ordering::Relaxed);
    }
}

impl Dict {
    fn lz4(&self) -> Option<&Lz4Dict> {
        match &self.prep {
            Prepared::Lz4(d) => Some(d),
            Prepared::Zstd { .. } => None,
        }
    }
}

/// `raw` prepared for `codec`, and the bytes that takes (the raw copy
/// kept for persistence included).
fn prepare(raw: &[u8], codec: Codec, level: i32) -> Option<(Prepared, usize)> {
    let (prep, mem) = match codec {
        Codec::Zstd => {
            let cdict = RawCDict::create(raw, level)?;
            let ddict = DDict::try_create(raw)?;
            let mem = cdict.sizeof() + ddict.sizeof();
            (Prepared::Zstd { cdict, ddict }, mem)
        }
        Codec::Lz4 => {
            let d = Lz4Dict::create(raw)?;
            let mem = d.mem();
            (Prepared::Lz4(d), mem)
        }
    };
    Some((prep, mem + raw.len()))
}

/// Prepares `raw` for `codec` and gives it a free id; None when all ids
/// are taken (the domain keeps coding with what it has).
fn install(raw: &[u8], codec: Codec, level: i32) -> Option<&'static Dict> {
    let (prep, mem) = prepare(raw, codec, level)?;
    let start = NEXT_ID.load(Ordering::Relaxed) as usize;
    let mut d = Some(Box::new(Dict {
        id: 0,
        codec,
        prep,
        users: AtomicU64::new(1),
        retired: AtomicBool::new(false),
        mem,
        raw: raw.into(),
    }));
    for step in 0..SLOTS - 1 {
        let id = 1 + (start - 1 + step) % (SLOTS - 1);
        if !TABLE[id].load(Ordering::Relaxed).is_null() {
            continue;
        }
        let mut b = d.take()?;
        b.id = id as u16;
        let p = Box::into_raw(b);
        match TABLE[id].compare_exchange(
            std::ptr::null_mut(),
            p,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                NEXT_ID.store((id % (SLOTS - 1) + 1) as u16, Ordering::Relaxed);
                DICT_MEM.fetch_add(mem, Ordering::Relaxed);
                return dict(id as u16);
            }
            // SAFETY: not published; we still own it.
            Err(_) => d = Some(unsafe { Box::from_raw(p) }),
        }
    }
    None
}

// --------------------------------------------------------- persistence ---

/// The codec a persisted dictionary is for. Append-only numbers, written
/// into snapshot files (docs/design.md, "Restart: the snapshot points
/// into the tier"): a reader refuses a tag it does not know.
pub const CODEC_ZSTD: u8 = 1;
/// liblz4's dictionaries (branch lz4code): the same trained bytes,
/// attached to LZ4's coder and decoder.
pub const CODEC_LZ4: u8 = 2;

fn persisted_tag(codec: Codec) -> u8 {
    match codec {
        Codec::Zstd => CODEC_ZSTD,
        Codec::Lz4 => CODEC_LZ4,
    }
}

/// A dictionary as persistence carries it: its id (what coded values and
/// tier pointers name), the codec it is for and its raw bytes. Nothing
/// of zstd's prepared forms: a loader prepares them again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    pub id: u16,
    pub codec: u8,
    pub raw: std::sync::Arc<[u8]>,
}

/// The dictionary table as persistence sees it: export what is alive,
/// import what a file carries under the ids its values name.
pub struct Dicts;

impl Dicts {
    /// Every live dictionary (current, or still used by a value). The
    /// caller must keep values from being freed meanwhile (a snapshot's
    /// cut holds every shard); the domains' locks are held here, so a
    /// retraining cannot free a dictionary under the copy.
    pub fn export() -> Vec<Exported> {
        let _domains: Vec<_> = DOMAIN_STATE.iter().map(|d| d.lock()).collect();
        (1..SLOTS as u16)
            .filter_map(dict)
            .map(|d| Exported {
                id: d.id,
                codec: persisted_tag(d.codec),
                raw: d.raw.clone(),
            })
            .collect()
    }

    /// Installs a persisted dictionary under its own id, retired (it
    /// only decodes; the domains train their own), holding one use for
    /// the caller, which gives it back with `unpin` once the values that
    /// use it hold theirs. An id already holding the same bytes only
    /// takes the use (DEBUG RELOAD reads back what it just wrote); one
    /// holding other bytes is refused, since values name dictionaries by
    /// id alone.
    pub fn import(id: u16, codec: u8, raw: &[u8]) -> Result<(), String> {
        let codec = match codec {
            CODEC_ZSTD => Codec::Zstd,
            CODEC_LZ4 => Codec::Lz4,
            _ => return Err(format!("dictionary {id}: unknown codec {codec}")),
        };
        if id == 0 || usize::from(id) >= SLOTS {
            return Err(format!("dictionary id {id} out of range"));
        }
        let _domains: Vec<_> = DOMAIN_STATE.iter().map(|d| d.lock()).collect();
        if let Some(d) = dict(id) {
            if *d.raw != *raw {
                return Err(format!("dictionary id {id} is taken by another dictionary"));
            }
            d.users.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let (prep, mem) = prepare(raw, codec, LEVEL_DEFAULT)
            .ok_or_else(|| format!("dictionary {id}: the codec refused it"))?;
        let p = Box::into_raw(Box::new(Dict {
            id,
            codec,
            prep,
            users: AtomicU64::new(1),
            retired: AtomicBool::new(true),
            mem,
            raw: raw.into(),
        }));
        match TABLE[usize::from(id)].compare_exchange(
            std::ptr::null_mut(),
            p,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                DICT_MEM.fetch_add(mem, Ordering::Relaxed);
                Ok(())
            }
            Err(_) => {
                // SAFETY: not published; we still own it.
                drop(unsafe { Box::from_raw(p) });
                Err(format!("dictionary id {id} was taken meanwhile"))
            }
        }
    }

    /// Gives back the use `import` took: a dictionary no value took a use
    /// of is freed.
    pub fn unpin(id: u16) {
        release(id);
    }

    /// A dictionary holds `id` now.
    pub fn exists(id: u16) -> bool {
        dict(id).is_some()
    }
}

// ------------------------------------------------------------- domains ---

/// One domain's training state.
#[derive(Default)]
struct Domain {
    /// The zstd dictionary new values are coded with (id; 0 = none yet).
    current: u16,
    /// The same for lz4 (branch lz4code).
    current_lz4: u16,
    /// The last trained dictionary's bytes, from which the codec that did
    /// not ask for the training prepares its own at first use (the disk
    /// tier codes with zstd while the keyspace codes with lz4).
    raw: Option<Box<[u8]>>,
    /// The codec of the last training's request: the one whose ratio the
    /// drift windows measure.
    codec: Option<Codec>,
    /// Collecting samples for a (re)training.
    collecting: bool,
    /// A training thread is running on a taken sample.
    training: bool,
    samples: Vec<u8>,
    sizes: Vec<usize>,
    /// The current window's plain and coded bytes.
    win_plain: u64,
    win_coded: u64,
    /// The first window's ratio with the current dictionary (coded per
    /// plain byte, x 1,000,000); 0 until measured.
    baseline: u64,
    level: i32,
}

/// `domain`'s place in [`DOMAIN_STATE`]; any id maps to one. With one
/// domain (the zfast choice) every id is domain 0, and clippy sees the
/// modulo of 1; it stays for when DOMAINS grows again.
#[inline]
#[allow(clippy::modulo_one)]
fn domain_slot(domain: usize) -> usize {
    domain % DOMAINS
}

static DOMAIN_STATE: [Mutex<Option<Domain>>; DOMAINS] = [const { Mutex::new(None) }; DOMAINS];

fn with_domain<R>(domain: usize, f: impl FnOnce(&mut Domain) -> R) -> R {
    let mut g = DOMAIN_STATE[domain_slot(domain)].lock();
    let d = g.get_or_insert_with(|| Domain {
        collecting: true,
        ..Domain::default()
    });
    f(d)
}

/// Forgets a domain's state (tests: a test that trains starts from none);
/// its current dictionary is retired, freed with its last value.
#[cfg(test)]
fn reset_domain(domain: usize) {
    let mut g = DOMAIN_STATE[domain_slot(domain)].lock();
    if let Some(d) = g.take() {
        for id in [d.current, d.current_lz4] {
            if let Some(o) = dict(id) {
                o.retired.store(true, Ordering::Relaxed);
                release(id);
            }
        }
    }
}

/// The domain's current dictionary for `codec` with a use taken (prepared
/// from the last training's bytes at its first use), or 0.
fn take_current(d: &mut Domain, codec: Codec, level: i32) -> u16 {
    let cur = match codec {
        Codec::Zstd => &mut d.current,
        Codec::Lz4 => &mut d.current_lz4,
    };
    if *cur == 0 {
        if let Some(n) = d.raw.as_deref().and_then(|r| install(r, codec, level)) {
            *cur = n.id;
        }
    }
    retain(*cur);
    *cur
}

/// The current `codec` dictionary of `domain` with a use taken, or 0;
/// feeds the sample when the domain is collecting.
fn acquire(domain: usize, codec: Codec, plain: &[u8], level: i32) -> u16 {
    let start = with_domain(domain, |d| {
        if d.collecting && !d.training {
            d.samples.extend_from_slice(plain);
            d.sizes.push(plain.len());
            if d.samples.len() >= SAMPLE_BYTES {
                d.training = true;
                d.level = level;
                let s = std::mem::take(&mut d.samples);
                let z = std::mem::take(&mut d.sizes);
                return (0, Some((s, z)));
            }
        }
        (take_current(d, codec, level), None)
    });
    match start {
        (cur, None) => cur,
        (_, Some((samples, sizes))) => {
            if SYNC_TRAINING.load(Ordering::Relaxed) {
                train(domain, samples, sizes, level, codec);
            } else {
                let job = Job {
                    domain,
                    samples,
                    sizes,
                    level,
                    codec,
                };
                if TRAINER.get_or_init(start_trainer).lock().send(job).is_err() {
                    with_domain(domain, |d| d.training = false);
                }
            }
            with_domain(domain, |d| take_current(d, codec, level))
        }
    }
}

/// A sample to train from, for the trainer thread.
struct Job {
    domain: usize,
    samples: Vec<u8>,
    sizes: Vec<usize>,
    level: i32,
    codec: Codec,
}

static TRAINER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<Job>>> =
    std::sync::OnceLock::new();

/// Run first on the trainer thread (the server registers it with its
/// memory accounting, as the samples it frees were allocated by workers).
static THREAD_START: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what the trainer thread runs when it starts.
pub fn set_thread_start(f: fn()) {
    let _ = THREAD_START.set(f);
}

/// One long-lived `cairn-zdict` thread trains every domain in turn: at
/// start-up or a load, sixteen domains fill their samples together, and
/// sixteen trainings at once would take every core and leave sixteen
/// C-allocator arenas holding a training's tables each.
fn start_trainer() -> Mutex<std::sync::mpsc::Sender<Job>> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("cairn-zdict".into())
        .spawn(move || {
            if let Some(f) = THREAD_START.get() {
                f();
            }
            // Not niced: one training is ~0.1-0.3 s of CPU once per domain
            // (and per drift), while a starved trainer leaves every value
            // coded meanwhile without a dictionary, ~1.6x larger until it
            // is rewritten. At nice 19 on a loaded machine no training ran
            // in minutes (docs/design.md, "Cheaper compressed values").
            for j in rx {
                train(j.domain, j.samples, j.sizes, j.level, j.codec);
                // The trainer's tables (megabytes) went back to the C
                // allocator; hand them to the OS so RSS does not keep them.
                // SAFETY: malloc_trim has no preconditions.
                unsafe {
                    libc::malloc_trim(0);
                }
            }
        });
    // Without the thread every send fails and the domain keeps coding
    // without a dictionary.
    drop(spawned);
    Mutex::new(tx)
}

/// CPU time of the calling thread, in microseconds (also the server's
/// background coder's budget).
pub fn thread_cpu_us() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
    }
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

/// Trains a dictionary from a domain's sample and makes it current for
/// `codec` (the other codec prepares its own from the same bytes when it
/// first codes). LZ4 uses the zstd-trained bytes as they are: mostly the
/// trainer's chosen content (docs/design.md measures them against the
/// samples' last 64 KiB).
fn train(domain: usize, samples: Vec<u8>, sizes: Vec<usize>, level: i32, codec: Codec) {
    let t0 = thread_cpu_us();
    let raw = zstd::dict::from_continuous(&samples, &sizes, DICT_BYTES).ok();
    drop(samples);
    let new = raw.as_deref().and_then(|r| install(r, codec, level));
    TRAIN_CPU_US.fetch_add(thread_cpu_us().saturating_sub(t0), Ordering::Relaxed);
    with_domain(domain, |d| {
        d.training = false;
        let Some(new) = new else {
            // Training failed (too few distinct samples): collect more.
            return;
        };
        TRAINED.fetch_add(1, Ordering::Relaxed);
        let (mine, other) = match codec {
            Codec::Zstd => (&mut d.current, &mut d.current_lz4),
            Codec::Lz4 => (&mut d.current_lz4, &mut d.current),
        };
        let old = [std::mem::replace(mine, new.id), std::mem::replace(other, 0)];
        d.raw = raw.map(Vec::into_boxed_slice);
        d.codec = Some(codec);
        d.collecting = false;
        d.baseline = 0;
        d.win_plain = 0;
        d.win_coded = 0;
        for id in old {
            if let Some(o) = dict(id) {
                o.retired.store(true, Ordering::Relaxed);
                release(id);
            }
        }
    });
}

/// Counts one coding into its domain's window and starts a retraining when
/// the ratio has drifted (only codings of the codec the domain last
/// trained for: two codecs' ratios in one window would mean nothing).
fn account(domain: usize, codec: Codec, plain: usize, coded: usize) {
    with_domain(domain, |d| {
        if d.raw.is_none() || d.collecting || d.codec != Some(codec) {
            return;
        }
        d.win_plain += plain as u64;
        d.win_coded += coded as u64;
        if d.win_plain < WINDOW_BYTES {
            return;
        }
        let ratio = d.win_coded * 1_000_000 / d.win_plain.max(1);
        d.win_plain = 0;
        d.win_coded = 0;
        if d.baseline == 0 {
            d.baseline = ratio;
        } else if ratio > d.baseline + d.baseline / 10 {
            d.collecting = true;
        }
    });
}

// --------------------------------------------------------------- codec ---

thread_local! {
    static CCTX: RefCell<Option<RawCCtx>> = const { RefCell::new(None) };
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
    /// Buffers for decoded values, taken while in use so nested reads (LCS
    /// reads two values) each get their own.
    static SCRATCH: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Codes `plain` for `domain` into `out` (cleared first) with zstd at
/// `level`. False, with `out` unspecified, when the coded form would not
/// be at least 1/8 smaller: the value stays plain. Trains the domain's
/// dictionary as samples come in.
pub fn compress(domain: usize, plain: &[u8], level: i32, out: &mut Vec<u8>) -> bool {
    compress_with(Codec::Zstd, domain, plain, level, out)
}

/// `compress` with either codec. For lz4, `level` 0 is LZ4's fast coder
/// (the in-line coding under memory pressure), 3-12 LZ4 HC.
pub fn compress_with(
    codec: Codec,
    domain: usize,
    plain: &[u8],
    level: i32,
    out: &mut Vec<u8>,
) -> bool {
    let Ok(plain_len) = u32::try_from(plain.len()) else {
        return false;
    };
    let id = acquire(domain, codec, plain, level);
    let bound = match codec {
        Codec::Zstd => zstd::zstd_safe::compress_bound(plain.len()),
        Codec::Lz4 => lz4::bound(plain.len()),
    };
    out.clear();
    out.reserve(HEADER + bound);
    out.extend_from_slice(&plain_len.to_le_bytes());
    out.extend_from_slice(&(id | (codec as u16) << CODEC_SHIFT).to_le_bytes());
    let ok = match codec {
        Codec::Zstd => zstd_code(id, plain, level, out),
        Codec::Lz4 => lz4::compress(dict(id).and_then(Dict::lz4), plain, level, out),
    };
    let keep = ok && out.len() <= plain.len() - plain.len() / 8;
    if keep {
        account(domain, codec, plain.len(), out.len());
    } else {
        release(id);
    }
    keep
}

/// zstd's part of `compress_with`: the frame after the header in `out`.
fn zstd_code(id: u16, plain: &[u8], level: i32, out: &mut Vec<u8>) -> bool {
    CCTX.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            // SAFETY: a null result (out of memory) is checked.
            *c = NonNull::new(unsafe { sys::ZSTD_createCCtx() }).map(RawCCtx);
        }
        let Some(cctx) = c.as_ref() else {
            return false;
        };
        let dst = out.spare_capacity_mut();
        // SAFETY: the context is this thread's; `dst` is the Vec's spare
        // capacity (at least `bound` bytes after the header); zstd writes
        // at most that many and returns how many, or an error code.
        let r = unsafe {
            match dict(id).map(|d| &d.prep) {
                Some(Prepared::Zstd { cdict, .. }) => sys::ZSTD_compress_usingCDict_advanced(
                    cctx.0.as_ptr(),
                    dst.as_mut_ptr().cast(),
                    dst.len(),
                    plain.as_ptr().cast(),
                    plain.len(),
                    cdict.0.as_ptr(),
                    FRAME,
                ),
                _ => {
                    let mut p = sys::ZSTD_getParams(level, plain.len() as u64, 0);
                    p.fParams = FRAME;
                    sys::ZSTD_compress_advanced(
                        cctx.0.as_ptr(),
                        dst.as_mut_ptr().cast(),
                        dst.len(),
                        plain.as_ptr().cast(),
                        plain.len(),
                        std::ptr::null(),
                        0,
                        p,
                    )
                }
            }
        };
        // SAFETY: ZSTD_isError only classifies the code.
        if unsafe { sys::ZSTD_isError(r) } != 0 {
            return false;
        }
        // SAFETY: zstd initialized `r` bytes of the spare capacity.
        unsafe { out.set_len(HEADER + r) };
        true
    })
}

/// The plain length of a coded value (STRLEN), from its header.
pub fn plain_len(coded: &[u8]) -> usize {
    u32::from_le_bytes([coded[0], coded[1], coded[2], coded[3]]) as usize
}

/// The dictionary a coded value uses (0 = none).
pub fn dict_id(coded: &[u8]) -> u16 {
    u16::from_le_bytes([coded[4], coded[5]]) & ID_MASK
}

/// The codec that coded a value (None: a tag this build does not know,
/// which only corrupt bytes can hold).
pub fn codec(coded: &[u8]) -> Option<Codec> {
    Codec::from_tag((u16::from_le_bytes([coded[4], coded[5]]) >> CODEC_SHIFT) as u8)
}

/// OBJECT ENCODING of a coded value: its codec's name.
pub fn encoding(coded: &[u8]) -> &'static str {
    codec(coded).map_or("zstd", Codec::name)
}

/// Decodes into `out` (appended, in place: no second copy). A value this
/// process coded always decodes; a failure means memory corruption, so it
/// panics (the command's panic guard turns that into an error reply).
pub fn decompress_into(coded: &[u8], out: &mut Vec<u8>) {
    let n = plain_len(coded);
    let start = out.len();
    out.reserve(n);
    let d = dict(dict_id(coded));
    let ok = match codec(coded) {
        Some(Codec::Zstd) => {
            let r = DCTX.with(|c| {
                let mut c = c.borrow_mut();
                let dctx = c.get_or_insert_with(DCtx::create);
                let mut tail = Tail { v: out, start };
                match d.map(|d| &d.prep) {
                    Some(Prepared::Zstd { ddict, .. }) => {
                        dctx.decompress_using_ddict(&mut tail, &coded[HEADER..], ddict)
                    }
                    _ => dctx.decompress(&mut tail, &coded[HEADER..]),
                }
            });
            r.is_ok_and(|k| k == n)
        }
        Some(Codec::Lz4) => lz4::decompress(d.and_then(Dict::lz4), &coded[HEADER..], n, out),
        None => false,
    };
    if !ok {
        corrupt(coded);
    }
}

/// The plain bytes of a coded value.
pub fn decompress(coded: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    decompress_into(coded, &mut v);
    v
}

/// Calls `f` with the plain bytes of a coded value, decoded into a
/// thread's reused buffer (no allocation once warm): for LZ4 with a
/// dictionary, the buffer that holds the dictionary before the value
/// (`zcomp_lz4::with_decoded`).
pub fn with_plain<R>(coded: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    if codec(coded) == Some(Codec::Lz4) {
        if let Some(d) = dict(dict_id(coded)).and_then(Dict::lz4) {
            return lz4::with_decoded(Some(d), &coded[HEADER..], plain_len(coded), f)
                .unwrap_or_else(|| corrupt(coded));
        }
    }
    let mut buf = SCRATCH.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    buf.clear();
    decompress_into(coded, &mut buf);
    let r = f(&buf);
    // Keep no buffer of more than 64 KiB (values coded here are < 32 KiB).
    if buf.capacity() <= 64 << 10 {
        SCRATCH.with(|s| s.borrow_mut().push(buf));
    }
    r
}

fn corrupt(coded: &[u8]) -> ! {
    panic!(
        "a coded value does not decode (dictionary {}, codec {:?})",
        dict_id(coded),
        codec(coded)
    );
}

/// A Vec's spare capacity as zstd's output: a frame written after the
/// first `start` bytes, which stay.
struct Tail<'a> {
    v: &'a mut Vec<u8>,
    start: usize,
}

// SAFETY: forwards to the Vec's capacity after `start` (<= its length);
// `filled_until` counts from that offset.
unsafe impl zstd::zstd_safe::WriteBuf for Tail<'_> {
    fn as_slice(&self) -> &[u8] {
        &self.v[self.start..]
    }
    fn capacity(&self) -> usize {
        self.v.capacity() - self.start
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: `start` is within the Vec's length, so in bounds.
        unsafe { self.v.as_mut_ptr().add(self.start) }
    }
    unsafe fn filled_until(&mut self, n: usize) {
        // SAFETY: the caller (zstd) initialized `n` bytes from `start`.
        unsafe { self.v.set_len(self.start + n) }
    }
}

/// English-like text for tests and benchmarks: words from a fixed list,
/// drawn by a seeded generator, `len` bytes exactly.
pub fn sample_text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "of",
        "and",
        "in",
        "to",
        "was",
        "is",
        "for",
        "on",
        "as",
        "by",
        "with",
        "he",
        "at",
        "from",
        "his",
        "an",
        "were",
        "are",
        "which",
        "also",
        "be",
        "or",
        "has",
        "had",
        "first",
        "one",
        "their",
        "its",
        "new",
        "after",
        "but",
        "who",
        "not",
        "they",
        "have",
        "her",
        "she",
        "two",
        "been",
        "other",
        "when",
        "there",
        "all",
        "during",
        "into",
        "school",
        "time",
        "may",
        "years",
        "more",
        "most",
        "only",
        "over",
        "city",
        "some",
        "world",
        "would",
        "where",
        "later",
        "up",
        "such",
        "used",
        "many",
        "can",
        "state",
        "about",
        "national",
        "out",
        "known",
        "university",
        "united",
        "then",
        "made",
        "season",
        "american",
        "between",
        "film",
        "while",
        "south",
        "north",
        "century",
        "river",
        "album",
        "team",
        "county",
        "government",
        "population",
        "district",
        "born",
        "released",
        "played",
        "series",
        "history",
        "village",
        "church",
        "family",
        "career",
        "district,",
        "war.",
        "music.",
        "located",
        "station",
        "league",
        "company",
        "published",
        "according",
        "several",
    ];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Skewed towards the first words, as word frequencies are.
        let r = (x >> 33) as usize % WORDS.len();
        let i = r * ((x >> 20) as usize % WORDS.len()) / WORDS.len();
        out.extend_from_slice(WORDS[i].as_bytes());
        out.push(if x.is_multiple_of(17) { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::string as s;
    use crate::ops::test_support::{engine, with};
    use crate::Engine;
    use proptest::prelude::*;

    /// The domains and training mode are process-wide: tests that train
    /// take turns.
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    fn on(e: &Engine, min: usize) {
        e.limits.value_compression_min.store(min, Ordering::Relaxed);
    }

    #[test]
    fn dictionaries_export_and_import_by_id() {
        let _s = SERIAL.lock();
        let raw = sample_text(9, 4096);
        let id = 4000;
        assert!(!Dicts::exists(id));
        Dicts::import(id, CODEC_ZSTD, &raw).unwrap();
        assert!(Dicts::exists(id));
        assert!(Dicts::export()
            .iter()
            .any(|d| d.id == id && d.codec == CODEC_ZSTD && *d.raw == *raw));
        // The same bytes again take another use; other bytes, another
        // codec or id 0 are refused.
        Dicts::import(id, CODEC_ZSTD, &raw).unwrap();
        assert!(Dicts::import(id, CODEC_ZSTD, b"other bytes").is_err());
        assert!(Dicts::import(id + 1, 9, &raw).is_err());
        assert!(Dicts::import(0, CODEC_ZSTD, &raw).is_err());
        // A value coded with those bytes under that id decodes, as a
        // tiered record written before a restart does after it.
        let plain = sample_text(10, 2000);
        let frame = zstd::bulk::Compressor::with_dictionary(3, &raw)
            .unwrap()
            .compress(&plain)
            .unwrap();
        let mut coded = (plain.len() as u32).to_le_bytes().to_vec();
        coded.extend_from_slice(&id.to_le_bytes());
        coded.extend_from_slice(&frame);
        assert_eq!(decompress(&coded), plain);
        Dicts::unpin(id);
        assert!(Dicts::exists(id));
        Dicts::unpin(id);
        assert!(!Dicts::exists(id), "freed with its last use");
    }

    #[test]
    fn round_trip_with_and_without_a_dictionary() {
        let _s = SERIAL.lock();
        set_sync_training(true);
        reset_domain(0);
        let mut out = Vec::new();
        // The domain trains here: the first values code without a dictionary.
        let first = sample_text(1, 2800);
        assert!(compress(0, &first, 1, &mut out));
        assert_eq!(plain_len(&out), 2800);
        assert_eq!(decompress(&out), first);
        assert!(out.len() < 2800 * 2 / 3, "{}", out.len());
        release(dict_id(&out));
        let mut n = 0;
        while with_domain(0, |d| d.current) == 0 && n < 1000 {
            let v = sample_text(100 + n, 2800);
            assert!(compress(0, &v, 1, &mut out));
            release(dict_id(&out));
            n += 1;
        }
        let id = with_domain(0, |d| d.current);
        assert_ne!(id, 0, "trained after {SAMPLE_BYTES} bytes of samples");
        let v = sample_text(7, 2800);
        assert!(compress(0, &v, 1, &mut out));
        assert_eq!(dict_id(&out), id);
        let mut nodict = Vec::new();
        assert!(compress_plain(&v, &mut nodict));
        assert!(out.len() < nodict.len(), "{} {}", out.len(), nodict.len());
        // Nested reads (LCS) each get a buffer.
        let coded2 = out.clone();
        retain(id);
        with_plain(&out, |a| with_plain(&coded2, |b| assert_eq!(a, b)));
        let mut tail = b"xy".to_vec();
        decompress_into(&out, &mut tail);
        assert_eq!(&tail[2..], &v[..]);
        release(id);
        release(id);
        // What does not shrink stays plain, and takes no use.
        let mut x = 88172645463325252u64;
        let noise: Vec<u8> = (0..2000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let users = dict(id).unwrap().users.load(Ordering::Relaxed);
        assert!(!compress(0, &noise, 1, &mut out));
        assert_eq!(dict(id).unwrap().users.load(Ordering::Relaxed), users);
        assert!(dict_bytes() > 0);
        set_sync_training(false);
    }

    #[test]
    fn codec_tags_are_pinned() {
        // In coded values' headers and the disk tier's records: append-only.
        assert_eq!(Codec::Zstd as u8, 0);
        assert_eq!(Codec::Lz4 as u8, 1);
        assert_eq!(Codec::from_tag(1), Some(Codec::Lz4));
        assert_eq!(Codec::from_tag(2), None);
    }

    #[test]
    fn lz4_round_trip_with_a_dictionary_and_zstd_beside_it() {
        let _s = SERIAL.lock();
        set_sync_training(true);
        reset_domain(0);
        let mut out = Vec::new();
        let first = sample_text(1, 2800);
        assert!(compress_with(Codec::Lz4, 0, &first, 4, &mut out));
        assert_eq!((codec(&out), dict_id(&out)), (Some(Codec::Lz4), 0));
        assert_eq!(encoding(&out), "lz4");
        assert_eq!(decompress(&out), first);
        let nodict = out.len();
        let mut n = 0;
        while with_domain(0, |d| d.current_lz4) == 0 && n < 1000 {
            let v = sample_text(100 + n, 2800);
            assert!(compress_with(Codec::Lz4, 0, &v, 4, &mut out));
            release(dict_id(&out));
            n += 1;
        }
        let id = with_domain(0, |d| d.current_lz4);
        assert_ne!(id, 0, "trained for lz4");
        assert_eq!(dict(id).unwrap().codec, Codec::Lz4);
        assert_eq!(
            with_domain(0, |d| d.current),
            0,
            "zstd's is made at first use"
        );
        for level in [4, 0, 12] {
            assert!(compress_with(Codec::Lz4, 0, &first, level, &mut out));
            assert_eq!(dict_id(&out), id);
            assert!(out.len() < nodict, "{level}: {} {nodict}", out.len());
            // Nested reads, and an append after existing bytes.
            let c2 = out.clone();
            with_plain(&out, |a| with_plain(&c2, |b| assert_eq!(a, b)));
            let mut tail = b"xy".to_vec();
            decompress_into(&out, &mut tail);
            assert_eq!(&tail[2..], &first[..]);
            release(id);
        }
        // The disk tier codes with zstd meanwhile: a zstd dictionary from
        // the same training, under its own id, and both kinds decode.
        let mut z = Vec::new();
        let trainings = trained();
        assert!(compress(0, &first, 3, &mut z));
        let zid = dict_id(&z);
        assert!(zid != 0 && zid != id);
        assert_eq!(
            (codec(&z), dict(zid).unwrap().codec),
            (Some(Codec::Zstd), Codec::Zstd)
        );
        assert_eq!(decompress(&z), first);
        // zstd also decodes after bytes already there (a reply buffer).
        let mut tail = b"xy".to_vec();
        decompress_into(&z, &mut tail);
        assert_eq!((&tail[..2], &tail[2..]), (&b"xy"[..], &first[..]));
        assert_eq!(trained(), trainings, "one training serves both codecs");
        release(zid);
        set_sync_training(false);
    }

    /// Codes without any dictionary (the comparison above).
    fn compress_plain(v: &[u8], out: &mut Vec<u8>) -> bool {
        let mut c = zstd::zstd_safe::CCtx::create();
        out.clear();
        out.reserve(HEADER + zstd::zstd_safe::compress_bound(v.len()));
        out.extend_from_slice(&[0; HEADER]);
        c.compress(
            &mut Tail {
                v: out,
                start: HEADER,
            },
            v,
            1,
        )
        .is_ok()
    }

    #[test]
    fn drift_retrains_and_old_dictionaries_live_while_used() {
        let _s = SERIAL.lock();
        set_sync_training(true);
        let d = 0;
        reset_domain(d);
        let mut out = Vec::new();
        let mut n = 0u64;
        fn feed(
            d: usize,
            n: &mut u64,
            gen: &dyn Fn(u64) -> Vec<u8>,
            until: &dyn Fn() -> bool,
            keep: &mut Vec<Vec<u8>>,
        ) {
            let mut out = Vec::new();
            while !until() {
                let v = gen(*n);
                *n += 1;
                if compress(d, &v, 1, &mut out) {
                    if keep.len() < 3 {
                        keep.push(out.clone());
                    } else {
                        release(dict_id(&out));
                    }
                }
            }
        }
        let text = |i: u64| sample_text(i, 2800);
        let mut kept = Vec::new();
        feed(
            d,
            &mut n,
            &text,
            &|| with_domain(d, |s| s.current) != 0,
            &mut kept,
        );
        let first = with_domain(d, |s| s.current);
        // A baseline window, then data the dictionary does not know.
        feed(
            d,
            &mut n,
            &text,
            &|| with_domain(d, |s| s.baseline) != 0,
            &mut kept,
        );
        kept.iter().for_each(|c| release(dict_id(c)));
        kept.clear();
        while kept.len() < 3 {
            let v = text(n);
            n += 1;
            if compress(d, &v, 1, &mut out) {
                kept.push(out.clone());
            }
        }
        let other = |i: u64| {
            let mut v = sample_text(i, 2800);
            // Another vocabulary: the same shape of text, other bytes.
            v.iter_mut().for_each(|b| {
                if b.is_ascii_lowercase() {
                    *b = b'A' + (*b - b'a' + (i % 7) as u8) % 26
                }
            });
            v
        };
        let mut none = Vec::new();
        feed(
            d,
            &mut n,
            &other,
            &|| with_domain(d, |s| s.current) != first,
            &mut none,
        );
        let second = with_domain(d, |s| s.current);
        assert_ne!(second, first);
        assert!(trained() >= 2);
        // The first dictionary is retired but still read by the kept values.
        assert!(dict(first).unwrap().retired.load(Ordering::Relaxed));
        for c in &kept {
            assert_eq!(dict_id(c), first);
            assert_eq!(decompress(c).len(), 2800);
        }
        for c in kept.iter().chain(&none) {
            release(dict_id(c));
        }
        assert!(dict(first).is_none(), "freed with its last value");
        assert!(dict(second).is_some(), "the current one stays");
        set_sync_training(false);
    }

    #[test]
    fn string_commands_read_compressed_values() {
        let _s = SERIAL.lock();
        let e = engine();
        on(&e, 64);
        let v = sample_text(3, 1000);
        with(&e, |g| {
            let k = g.key(b"k");
            s::set(
                g,
                0,
                &k,
                &v,
                s::Cond::Always,
                crate::keyspace::Expiry::Clear,
                false,
            )
            .unwrap();
            let r = g.read_ref(0, &k).unwrap();
            assert_eq!(r.encoding(), "zstd");
            assert!(r.mem_bytes() < 700, "{}", r.mem_bytes());
            assert_eq!(s::strlen(g, 0, &k).unwrap(), 1000);
            assert_eq!(s::get(g, 0, &k, |b| b.unwrap().to_vec()).unwrap(), v);
            assert_eq!(
                s::getrange(g, 0, &k, 10, 19, |b| b.to_vec()).unwrap(),
                &v[10..20]
            );
            // COPY and RENAME keep the coded bytes and the dictionary use.
            let c = g.key(b"c");
            crate::ops::keys::copy(g, 0, &k, 0, &c, false, drop).unwrap();
            assert_eq!(g.read_ref(0, &c).unwrap().encoding(), "zstd");
            let r2 = g.key(b"renamed");
            crate::ops::keys::rename(g, 0, &c, &r2, false).unwrap();
            assert_eq!(s::get(g, 0, &r2, |b| b.unwrap().to_vec()).unwrap(), v);
            // An in-place edit leaves a plain raw string.
            assert_eq!(s::append(g, 0, &k, b"!").unwrap(), 1001);
            assert_eq!(g.read_ref(0, &k).unwrap().encoding(), "raw");
            assert_eq!(s::get(g, 0, &r2, |b| b.unwrap().len()).unwrap(), 1000);
        });
    }

    /// A string op and its reply, compared between two engines.
    #[derive(Debug, Clone)]
    pub(crate) enum Op {
        Set(u8, u64, u16),
        Get(u8),
        Append(u8, u8),
        SetRange(u8, u16, u8),
        GetRange(u8, i16, i16),
        Strlen(u8),
        SetBit(u8, u16, bool),
        GetBit(u8, u16),
        BitCount(u8),
        Incr(u8),
        GetDel(u8),
        GetSet(u8, u64),
        Copy(u8, u8),
        Rename(u8, u8),
        Lcs(u8, u8),
        Digest(u8),
        Dump(u8),
    }

    pub(crate) fn op() -> impl Strategy<Value = Op> {
        let k = 0u8..4;
        prop_oneof![
            4 => (k.clone(), any::<u64>(), 0u16..3000).prop_map(|(a, b, c)| Op::Set(a, b, c)),
            3 => k.clone().prop_map(Op::Get),
            1 => (k.clone(), any::<u8>()).prop_map(|(a, b)| Op::Append(a, b)),
            1 => (k.clone(), 0u16..3100, any::<u8>()).prop_map(|(a, b, c)| Op::SetRange(a, b, c)),
            1 => (k.clone(), any::<i16>(), any::<i16>()).prop_map(|(a, b, c)| Op::GetRange(a, b, c)),
            1 => k.clone().prop_map(Op::Strlen),
            1 => (k.clone(), 0u16..30000, any::<bool>()).prop_map(|(a, b, c)| Op::SetBit(a, b, c)),
            1 => (k.clone(), 0u16..30000).prop_map(|(a, b)| Op::GetBit(a, b)),
            1 => k.clone().prop_map(Op::BitCount),
            1 => k.clone().prop_map(Op::Incr),
            1 => k.clone().prop_map(Op::GetDel),
            1 => (k.clone(), any::<u64>()).prop_map(|(a, b)| Op::GetSet(a, b)),
            1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Copy(a, b)),
            1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
            1 => (k.clone(), k.clone()).prop_map(|(a, b)| Op::Lcs(a, b)),
            1 => k.clone().prop_map(Op::Digest),
            1 => k.prop_map(Op::Dump),
        ]
    }

    pub(crate) fn run(e: &Engine, op: &Op) -> String {
        let name = |i: u8| format!("key:{i}").into_bytes();
        let digest = |k: u8| e.digest_value(&crate::cx::testing::cx(), 0, &name(k));
        if let Op::Digest(k) = op {
            return format!("{:?}", digest(*k));
        }
        with(e, |g| {
            let key = |i: u8| name(i);
            match op {
                Op::Set(k, seed, len) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    let v = sample_text(*seed, *len as usize);
                    format!(
                        "{:?}",
                        s::set(
                            g,
                            0,
                            &k,
                            &v,
                            s::Cond::Always,
                            crate::keyspace::Expiry::Clear,
                            true
                        )
                    )
                }
                Op::Get(k) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::get(g, 0, &k, |b| b.map(<[u8]>::to_vec)))
                }
                Op::Append(k, b) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::append(g, 0, &k, &[*b; 3]))
                }
                Op::SetRange(k, off, b) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::setrange(g, 0, &k, *off as usize, &[*b; 5]))
                }
                Op::GetRange(k, a, b) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!(
                        "{:?}",
                        s::getrange(g, 0, &k, *a as i64, *b as i64, <[u8]>::to_vec)
                    )
                }
                Op::Strlen(k) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::strlen(g, 0, &k))
                }
                Op::SetBit(k, off, on) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!(
                        "{:?}",
                        crate::ops::bitmap::setbit(g, 0, &k, *off as u64, *on)
                    )
                }
                Op::GetBit(k, off) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", crate::ops::bitmap::getbit(g, 0, &k, *off as u64))
                }
                Op::BitCount(k) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    let r: Result<i64, crate::Error> =
                        crate::ops::bitmap::bitcount(g, 0, &k, || {
                            Ok(crate::ops::bitmap::CountArgs::Whole)
                        });
                    format!("{r:?}")
                }
                Op::Incr(k) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::incr_by(g, 0, &k, 1))
                }
                Op::GetDel(k) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::getdel(g, 0, &k))
                }
                Op::GetSet(k, seed) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!("{:?}", s::getset(g, 0, &k, &sample_text(*seed, 900)))
                }
                Op::Copy(a, b) => {
                    let (ka, kb) = (key(*a), key(*b));
                    let (a, b) = (g.key(&ka), g.key(&kb));
                    format!("{:?}", crate::ops::keys::copy(g, 0, &a, 0, &b, true, drop))
                }
                Op::Rename(a, b) => {
                    let (ka, kb) = (key(*a), key(*b));
                    let (a, b) = (g.key(&ka), g.key(&kb));
                    format!("{:?}", crate::ops::keys::rename(g, 0, &a, &b, false))
                }
                Op::Lcs(a, b) => {
                    let (ka, kb) = (key(*a), key(*b));
                    let (a, b) = (g.key(&ka), g.key(&kb));
                    format!("{:?}", s::lcs_operands(g, 0, &a, &b))
                }
                Op::Dump(k) => {
                    let kk = key(*k);
                    let k = g.key(&kk);
                    format!(
                        "{:?}",
                        g.read_ref(0, &k).and_then(|r| r.str()).map(|s| s.to_vec())
                    )
                }
                Op::Digest(_) => unreachable!("answered above"),
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn replies_are_the_same_with_compression_on_and_off(ops in proptest::collection::vec(op(), 1..40)) {
            let _s = SERIAL.lock();
            let plain = engine();
            let coded = engine();
            on(&coded, 32);
            let mut long_sets = 0;
            let mut coded_sets = 0;
            for o in &ops {
                prop_assert_eq!(run(&plain, o), run(&coded, o), "{:?}", o);
                if let Op::Set(k, _, len) = o {
                    let name = format!("key:{k}").into_bytes();
                    let enc = with(&coded, |g| {
                        let k = g.key(&name);
                        g.read_ref(0, &k).map(|r| r.encoding())
                    });
                    long_sets += usize::from(*len >= 1000);
                    coded_sets += usize::from(enc == Some("zstd"));
                }
            }
            // Text of 1,000 bytes or more shrinks by far more than the
            // 1/8 kept as the threshold, with or without a dictionary (the
            // process-wide domain may hold one from another test, or be
            // training): the compressed path is what is being compared,
            // not a plain one twice. 200 bytes without a dictionary was
            // too close to the threshold (a failure in the suite).
            prop_assert!(long_sets == 0 || coded_sets > 0);
        }
    }
}
