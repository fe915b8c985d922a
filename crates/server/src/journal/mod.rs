//! The journal (Redis's append-only file, in Cairn's own framing): every
//! write is appended, in the order writes took effect, to a buffer that a
//! writer thread writes to the current journal file and fsyncs according
//! to `appendfsync`.
//!
//! - The engine produces the records (`cairn_engine::record`) and appends
//!   each command's unit while the command's shard locks are held; this
//!   module frames them (`frame`) and is the engine's `Sink`.
//! - `always`: group commit. The writer takes everything appended so far,
//!   writes and fsyncs it once, and publishes the durable position; a
//!   worker holds back a connection's output (every reply after a write,
//!   so pipelined order is kept) until the journal is durable past that
//!   connection's last write, and is woken (`Msg::Durable`) when it is.
//!   A reply to a write never leaves before the write is on disk, and no
//!   reply leaves before every write appended before it is on disk (a
//!   read may show another client's write; Redis, single-threaded, fsyncs
//!   before any reply of the loop turn). While the journal is failing,
//!   reads are not held (they must keep working), so they may then show
//!   writes that are not on disk.
//! - `everysec`: the writer writes as data arrives and fsyncs once a
//!   second; `no`: it only writes. Replies are not held.
//! - A failed write or fsync sets `failed`: write commands are refused with
//!   Redis's MISCONF error, held replies stay held, and the writer retries
//!   every 100 ms (rewriting everything not known durable under `always`,
//!   since after a failed fsync the page cache can no longer be trusted),
//!   until it succeeds.
//! - Files: a directory (`appenddirname`) with a manifest, an optional base
//!   snapshot and journal files; start-up replays them (`replay`). Their
//!   formats, and `cairn check-journal`, are `cairn_persist::journal`.
/// `cairn check-journal`, reached as `journal::check` by main.rs.
pub use cairn_persist::journal::check;
pub mod replay;
pub mod rewrite;
mod spin;

use crate::config::AppendFsync;
use crate::log;
use crate::shared::{Msg, Shared};
use cairn_engine::record::put_wire;
use cairn_engine::Cx;
use cairn_persist::journal::frame;
use cairn_persist::journal::manifest::{self, Manifest};
use parking_lot::{Condvar, Mutex};
use spin::{SpinGuard, SpinLock};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// everysec / no: how long the writer lets appends gather before one
/// write(2), unless this many bytes are already waiting. Each interval is
/// one wake-up of the writer thread; at 1 ms those wake-ups cost the
/// workers 20-30% of their unpipelined throughput on 2 shared cores
/// (BENCHMARKS.md). It is also what a crash of the process (not of the
/// machine) can lose under these policies (README, "Durability").
const COALESCE: Duration = Duration::from_millis(10);
const COALESCE_BYTES: usize = 256 * 1024;

/// How long the writer waits before retrying after a failed write/fsync.
const RETRY_EVERY: Duration = Duration::from_millis(100);
/// Appended bytes not yet handed to write(2) beyond which a worker waits
/// at the end of its loop turn (`end_of_turn`) until the writer is back
/// to half of it: the bound on the journal's buffer when the disk is
/// slower than the writes (Redis's main thread blocks in write(2) then).
/// The writer normally takes the buffer every 10 ms, so only a stalled
/// write or fsync gets near it.
pub const BEHIND_LIMIT: u64 = 128 << 20;

const POLICY_NO: u8 = 0;
const POLICY_EVERYSEC: u8 = 1;
const POLICY_ALWAYS: u8 = 2;

fn policy_code(p: AppendFsync) -> u8 {
    match p {
        AppendFsync::No => POLICY_NO,
        AppendFsync::Everysec => POLICY_EVERYSEC,
        AppendFsync::Always => POLICY_ALWAYS,
    }
}

/// A frame takes no more units once its payload reaches this: frames stay
/// small enough that replay holds one in memory cheaply and a torn tail
/// drops little, while a batch of small writes shares one header and one
/// checksum pass.
const FRAME_TARGET: usize = 1 << 20;

/// A spare buffer bigger than this is freed rather than kept for reuse.
const KEEP_SPARE: usize = 4 * COALESCE_BYTES;

/// Appended frames the writer has not taken yet.
#[derive(Default)]
struct Pending {
    /// Frames, each a reserved header and then whole units. Headers are
    /// filled in when the data is taken (`take`, `frame::seal`).
    data: Vec<u8>,
    /// Where each frame in `data` starts; the last one takes more units
    /// unless `sealed`.
    frames: Vec<usize>,
    /// The last frame is closed: a compaction's cut follows it.
    sealed: bool,
    /// The writer waits on the condvar: an append must wake it.
    sleeping: bool,
    /// Under `always`, `data` is complete enough to fsync: a worker's
    /// loop turn that appended has ended, or a thread that is not a
    /// worker appended (see `end_of_turn`).
    turn_ended: bool,
    stop: bool,
    /// A compaction's cut: at this logical position, go on in this file.
    rotate: Option<(u64, File)>,
}

impl Pending {
    /// Where the frame the next unit joins starts, if one is open: not
    /// sealed, and its payload still below `FRAME_TARGET`.
    fn open_frame(&self) -> Option<usize> {
        let f = *self.frames.last()?;
        (!self.sealed && self.data.len() - f - frame::FRAME_HEADER_LEN < FRAME_TARGET).then_some(f)
    }

    /// Takes the appended frames, leaving `spare` (an empty buffer) in
    /// their place; the caller seals them (`frame::seal`) after releasing
    /// the lock, so appends never wait for the checksum.
    fn take(&mut self, spare: &mut Vec<u8>) -> (Vec<u8>, Vec<usize>) {
        let data = std::mem::replace(&mut self.data, std::mem::take(spare));
        self.sealed = false;
        (data, std::mem::take(&mut self.frames))
    }
}

/// Keeps `buf`, emptied, as the next `spare`, unless it is too big to pin.
fn recycle(spare: &mut Vec<u8>, mut buf: Vec<u8>) {
    if buf.capacity() <= KEEP_SPARE && buf.capacity() > spare.capacity() {
        buf.clear();
        *spare = buf;
    }
}

/// The journal's shared state. Positions are logical: bytes appended since
/// the journal was opened in this process, so they never go back when a
/// file is rotated.
pub struct Journal {
    /// Appends take this lock once per write command (`spin`).
    pending: SpinLock<Pending>,
    /// The writer sleeps on `cond` under `wake`, which an append that
    /// found `Pending::sleeping` sets (so a wake-up between its check and
    /// its wait is not lost).
    wake: Mutex<bool>,
    cond: Condvar,
    /// End of everything appended.
    appended: AtomicU64,
    /// End of what has been handed to write(2).
    written: AtomicU64,
    /// End of what is known to be on disk (fsynced).
    durable: AtomicU64,
    /// appendonly is on and the journal is open.
    enabled: AtomicBool,
    policy: AtomicU8,
    /// A write or fsync failed and has not succeeded since.
    failed: AtomicBool,
    /// errno of the last failure (INFO, the MISCONF text).
    errno: AtomicI32,
    /// Per worker: some connection's output waits for `durable`.
    waiters: Box<[AtomicBool]>,
    /// Test fault knob (DEBUG JOURNAL-FAULT): fail this many of the next
    /// writes / fsyncs with EIO.
    pub fault_writes: AtomicU64,
    pub fault_fsyncs: AtomicU64,
    /// Test knob: every fsync sleeps this many milliseconds first.
    pub fault_fsync_delay_ms: AtomicU64,
    /// Test knob: every write(2) sleeps this many milliseconds first.
    pub fault_write_delay_ms: AtomicU64,
    /// `BEHIND_LIMIT`, lowered by tests (DEBUG JOURNAL-FAULT BEHIND-LIMIT).
    pub behind_limit: AtomicU64,
    /// Loop turns that waited for the writer (INFO `aof_write_throttles`).
    throttles: AtomicU64,
    /// When the last "journal behind" warning was logged.
    behind_warned: Mutex<Option<Instant>>,
    /// Size of the current journal file, of the older journal files the
    /// manifest still names, and of the base (INFO, auto-rewrite).
    current_size: AtomicU64,
    incr_before: AtomicU64,
    base_size: AtomicU64,
    /// fsyncs the everysec writer postponed because one was still running
    /// (INFO `aof_delayed_fsync`); always 0 here since the writer does both.
    delayed_fsync: AtomicU64,
    /// The writer thread's handle, to join on shutdown.
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The file and what is in flight to it, while the journal is open.
    io: Mutex<Option<Io>>,
    /// The server, for the writer thread started by CONFIG SET (handlers
    /// only borrow it).
    pub server: std::sync::OnceLock<std::sync::Weak<Shared>>,
    /// The manifest in force while the journal is on.
    manifest: Mutex<Manifest>,
    /// Compaction (BGREWRITEAOF) state.
    pub rewrite: rewrite::Rewrite,
}

impl Journal {
    pub fn new(workers: usize) -> Journal {
        Journal {
            pending: SpinLock::default(),
            wake: Mutex::new(false),
            cond: Condvar::new(),
            appended: AtomicU64::new(0),
            written: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            enabled: AtomicBool::new(false),
            policy: AtomicU8::new(POLICY_EVERYSEC),
            failed: AtomicBool::new(false),
            errno: AtomicI32::new(0),
            waiters: (0..workers).map(|_| AtomicBool::new(false)).collect(),
            fault_writes: AtomicU64::new(0),
            fault_fsyncs: AtomicU64::new(0),
            fault_fsync_delay_ms: AtomicU64::new(0),
            fault_write_delay_ms: AtomicU64::new(0),
            behind_limit: AtomicU64::new(BEHIND_LIMIT),
            throttles: AtomicU64::new(0),
            behind_warned: Mutex::new(None),
            current_size: AtomicU64::new(0),
            incr_before: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            delayed_fsync: AtomicU64::new(0),
            writer: Mutex::new(None),
            io: Mutex::new(None),
            server: std::sync::OnceLock::new(),
            manifest: Mutex::new(Manifest::default()),
            rewrite: Default::default(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// True when replies must wait for fsync (`appendfsync always`).
    #[inline]
    pub fn holds_replies(&self) -> bool {
        self.policy.load(Ordering::Relaxed) == POLICY_ALWAYS && self.enabled()
    }

    pub fn set_policy(&self, p: AppendFsync) {
        self.policy.store(policy_code(p), Ordering::Relaxed);
        // A policy change may release held replies (always -> everysec)
        // or need an fsync now.
        self.kick();
    }

    #[inline]
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    #[inline]
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }

    /// A write or fsync failed and has not succeeded since.
    #[inline]
    pub fn is_failing(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Writes are refused (MISCONF) while this is Some.
    #[inline]
    pub fn failure(&self) -> Option<String> {
        if !self.failed.load(Ordering::Relaxed) {
            return None;
        }
        Some(strerror(self.errno.load(Ordering::Relaxed)))
    }

    /// Worker `w` has output waiting for durability: wake it when the
    /// durable position moves. The caller re-checks `durable` afterwards.
    pub fn want_wake(&self, w: usize) {
        if let Some(f) = self.waiters.get(w) {
            f.store(true, Ordering::SeqCst);
        }
    }

    /// Wakes the writer if it sleeps.
    pub(crate) fn kick(&self) {
        let mut p = self.pending.lock();
        p.turn_ended = true;
        self.wake_if_sleeping(p);
    }

    /// Releases `p`, then wakes the writer if it was going to sleep (or
    /// sleeps).
    #[inline]
    fn wake_if_sleeping(&self, mut p: SpinGuard<'_, Pending>) {
        let sleeping = std::mem::take(&mut p.sleeping);
        drop(p);
        if sleeping {
            self.wake_writer();
        }
    }

    #[cold]
    fn wake_writer(&self) {
        *self.wake.lock() = true;
        self.cond.notify_one();
    }

    fn mark_failed(&self, what: &str, e: &std::io::Error) {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        self.errno.store(errno, Ordering::Relaxed);
        if !self.failed.swap(true, Ordering::SeqCst) {
            log::warning(&format!(
                "Error {what} the journal (append only) file: {}; refusing writes until it succeeds",
                strerror(errno)
            ));
        }
    }

    fn mark_ok(&self) {
        if self.failed.swap(false, Ordering::SeqCst) {
            log::warning(
                "Journal (append only) file write error resolved: writes are accepted again",
            );
        }
    }
}

impl cairn_engine::record::Sink for Journal {
    /// Adds the unit to the open frame, or opens a frame (a reserved
    /// header) for it. A unit never spans frames, so a torn frame loses
    /// whole units. The header is filled in when the writer (or a leading
    /// worker) takes the data: one checksum pass over a batch, off the
    /// appending worker's path. Measured before (a header and a checksum
    /// per unit): ~80 of the ~600 instructions the journal added per
    /// write (callgrind, INCR -P 16).
    fn append_with(&self, fill: &mut dyn FnMut(&mut Vec<u8>)) -> u64 {
        const HDR: usize = frame::FRAME_HEADER_LEN;
        let mut p = self.pending.lock();
        let start = p.data.len();
        let open = p.open_frame();
        if open.is_none() {
            p.data.extend_from_slice(&[0; HDR]);
        }
        let body = p.data.len();
        fill(&mut p.data);
        if p.data.len() == body {
            p.data.truncate(start);
            return 0;
        }
        let frame_start = match open {
            Some(f) if p.data.len() - f - HDR > frame::MAX_FRAME as usize => {
                // Too big to join the open frame: a frame of its own (a
                // copy of the unit, only for units near the limit).
                p.data.splice(start..start, [0; HDR]);
                start
            }
            Some(f) => f,
            None => start,
        };
        if p.data.len() - frame_start - HDR > frame::MAX_FRAME as usize {
            // Cannot be framed: refuse writes from now on rather than
            // write a frame replay would reject.
            p.data.truncate(start);
            drop(p);
            self.mark_failed(
                "framing a unit for",
                &std::io::Error::from_raw_os_error(libc::EFBIG),
            );
            return 0;
        }
        if frame_start == start {
            p.frames.push(start);
            p.sealed = false;
        }
        prefetch_for_write(&p.data, start);
        let framed = p.data.len() - start;
        self.appended_unit(p, framed)
    }

    /// `append_with` for the common unit, one WIRE record: no closure,
    /// and no frame-size checks for a unit far below the frame limit.
    /// With the engine's matching fast path (`record::commit`), the
    /// journal's cost per write fell from 361 to 272 instructions
    /// (callgrind, INCR -P 16, everysec against persistence off).
    fn append_wire(&self, db: usize, raw: &[u8]) -> u64 {
        const HDR: usize = frame::FRAME_HEADER_LEN;
        if raw.len() > FRAME_TARGET {
            return self.append_with(&mut |out| put_wire(out, db, raw));
        }
        let mut p = self.pending.lock();
        let start = p.data.len();
        if p.open_frame().is_none() {
            // A frame of at most FRAME_TARGET plus this unit: far below
            // frame::MAX_FRAME.
            p.frames.push(start);
            p.sealed = false;
            p.data.extend_from_slice(&[0; HDR]);
        }
        put_wire(&mut p.data, db, raw);
        prefetch_for_write(&p.data, start);
        let framed = p.data.len() - start;
        self.appended_unit(p, framed)
    }
}

impl Journal {
    /// The end of an append: `framed` bytes were added under `p`. Returns
    /// the unit's end in the journal's stream, which the command's context
    /// keeps for its connection's replies (`CmdState::take_journal_end`).
    #[inline]
    fn appended_unit(&self, mut p: SpinGuard<'_, Pending>, framed: usize) -> u64 {
        let end = self.appended.load(Ordering::Relaxed) + framed as u64;
        self.appended.store(end, Ordering::Release);
        if DEFER_KICK.with(|d| d.get()) && self.policy.load(Ordering::Relaxed) == POLICY_ALWAYS {
            // A worker mid-turn: it leads the fsync, or wakes the writer,
            // when the turn ends (`end_of_turn`), so one fsync carries
            // every write of the turn, as Redis's one fsync per event-loop
            // turn does. Its replies leave at the end of the turn anyway.
            KICK_OWED.with(|k| k.set(true));
        } else {
            p.turn_ended = true;
            self.wake_if_sleeping(p);
        }
        end
    }
}

/// How far past the end of the journal's buffer an append asks for the
/// cache lines it will write next (`prefetch_for_write`).
const PREFETCH_AHEAD: usize = 256;

/// Asks, with intent to write, for the cache lines `PREFETCH_AHEAD` bytes
/// past `from..buf.len()` (the unit just appended), within `buf`'s
/// capacity: the lines the next appends will write.
///
/// The buffer's lines were last read by the writer thread (on the other
/// core, when it wrote them to the file), so each line an append writes
/// first needs that core's copy invalidated. Asked for a few appends
/// ahead, this overlaps with the commands in between instead of holding
/// the worker: measured in a 10-round A/B (`-P 16` everysec, every other
/// setting equal), INCR +5.5%, SET +2.3%, HSET +3.0%, LPUSH +1.4% (one
/// line at the new end; asking for every line a long unit passed over
/// measured the same).
#[inline(always)]
fn prefetch_for_write(buf: &Vec<u8>, from: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let end = (buf.len() + PREFETCH_AHEAD).min(buf.capacity());
        // One line per 64 bytes appended; a long unit (whose copy streams
        // anyway) asks for at most 8.
        let mut at = (from + PREFETCH_AHEAD).max(end.saturating_sub(8 * 64)) & !63;
        while at < end {
            // SAFETY: prefetchw is a hint: it cannot fault and changes no
            // register or memory (a NOP where unsupported).
            unsafe {
                std::arch::asm!(
                    "prefetchw [{0}]",
                    in(reg) buf.as_ptr().wrapping_add(at),
                    options(nostack, preserves_flags, readonly)
                );
            }
            at += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (buf, from);
}

/// Marks this thread as a worker whose appends may wait for the end of
/// its loop turn to wake the writer (see `end_of_turn`).
pub fn defer_kicks() {
    DEFER_KICK.with(|d| d.set(true));
}

/// A worker finished serving a loop turn: if the turn appended under
/// `always`, tells the writer that the data is ready to fsync (waking it
/// if it sleeps). Under `always` the writer fsyncs only on such a signal
/// (or an append from a thread that is not a worker), so one fsync
/// carries every write the turn made. Measured with 50 unpipelined
/// clients (strace -c): one fdatasync per ~6 writes when every append woke
/// the writer, against Redis's one per ~24.
///
/// Worker `w` first tries to lead: to write and fsync the pending data
/// itself (`Journal::lead`); the writer thread is woken only when it
/// cannot.
///
/// Then, if the journal's buffer is more than `behind_limit` ahead of the
/// file (the disk is slower than the writes), the worker waits for the
/// writer (`catch_up`): its clients' next commands wait with it, and the
/// buffer stays bounded. It holds no shard lock here.
#[inline]
pub fn end_of_turn(shared: &Shared, w: usize) {
    let j = &shared.journal;
    if KICK_OWED.with(|k| k.replace(false)) && !j.lead(shared, w) {
        j.kick();
    }
    let behind = j
        .appended
        .load(Ordering::Relaxed)
        .saturating_sub(j.written.load(Ordering::Relaxed));
    if behind > j.behind_limit.load(Ordering::Relaxed) {
        j.catch_up();
    }
}

impl Journal {
    /// Waits until the writer has written all but half of `behind_limit`,
    /// or the journal stops or fails (writes are refused then anyway).
    #[cold]
    fn catch_up(&self) {
        self.throttles.fetch_add(1, Ordering::Relaxed);
        {
            let mut warned = self.behind_warned.lock();
            if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                *warned = Some(Instant::now());
                log::warning(
                    "The journal's writes are falling behind (disk busy or slow?): \
                     delaying clients until the journal catches up.",
                );
            }
        }
        loop {
            let target = self.behind_limit.load(Ordering::Relaxed) / 2;
            let behind = self
                .appended
                .load(Ordering::Acquire)
                .saturating_sub(self.written.load(Ordering::Acquire));
            if behind <= target || !self.enabled() || self.is_failing() {
                return;
            }
            self.kick();
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

// Per worker thread, not per command: whether this thread batches its
// wake-ups of the writer to the end of its loop turn, and whether it owes
// one. The end of what a command appended travels in its context instead
// (`cairn_engine::CmdState`).
thread_local! {
    /// This thread is a worker that calls `end_of_turn` after every turn.
    static DEFER_KICK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// An append found the writer asleep and did not wake it.
    static KICK_OWED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// C's strerror text, as Redis puts it in MISCONF and the log.
pub fn strerror(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno)
        .to_string()
        .split(" (os error")
        .next()
        .unwrap_or("")
        .to_string()
}

/// The journal directory and file names, from the config.
pub struct Paths {
    pub dir: PathBuf,
    pub appendfilename: String,
}

impl Paths {
    pub fn from_config(shared: &Shared) -> Paths {
        let c = shared.config.read();
        Paths {
            dir: PathBuf::from(&c.appenddirname),
            appendfilename: c.appendfilename.clone(),
        }
    }
}

/// CONFIG SET appendonly changed: start or stop the journal. Starting at
/// run time needs the existing data in the journal's base, which
/// compaction writes; until then it is allowed on an empty keyspace only.
/// `worker`: the worker running the CONFIG SET (it is between commands of
/// its own as far as the switch is concerned, and must not wait for itself).
/// `cx`: the CONFIG SET's context (inside EXEC, its hold already locks
/// every shard).
pub fn on_config_appendonly(shared: &Shared, cx: &Cx, worker: usize) -> Result<(), String> {
    let want = shared.config.read().appendonly;
    if !want {
        stop(shared, cx);
        return Ok(());
    }
    if shared.journal.enabled() {
        return Ok(());
    }
    let Some(arc) = shared.journal.server.get().and_then(|w| w.upgrade()) else {
        return Err("the server is not fully started".into());
    };
    let keys: usize = (0..shared.engine.databases())
        .map(|d| shared.engine.db_counts(cx, d).0)
        .sum();
    if keys > 0 {
        // The data in memory becomes the base of the new journal: a
        // compaction whose cut is where recording starts (Redis starts an
        // AOF rewrite here too).
        rewrite::request_enable(shared);
        return Ok(());
    }
    let paths = Paths::from_config(shared);
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| format!("Can't create the journal directory: {e}"))?;
    let old = load_manifest(&paths)?.unwrap_or_default();
    let seq = old.last_seq() + 1;
    let (f, size) = create_file(&paths, seq)?;
    let m = Manifest {
        base: None,
        incr: vec![(Manifest::incr_name(&paths.appendfilename, seq), seq)],
    };
    m.store(&paths.dir, &paths.appendfilename)
        .map_err(|e| format!("Can't write the journal manifest: {e}"))?;
    // The old files hold data from before; the new manifest no longer
    // names them.
    for (name, _) in old.incr.iter().chain(old.base.iter()) {
        let _ = std::fs::remove_file(paths.dir.join(name));
    }
    start(&arc, cx, f, size, Some(worker));
    Ok(())
}

/// Start-up with `appendonly yes`: loads what the journal directory holds
/// (base, then journal files in order), then opens the last journal file
/// for appending and starts recording writes. Before any client is served.
pub fn open_at_startup(shared: &Arc<Shared>) -> Result<(), String> {
    let paths = Paths::from_config(shared);
    std::fs::create_dir_all(&paths.dir).map_err(|e| {
        format!(
            "Can't create the journal directory {}: {e}",
            paths.dir.display()
        )
    })?;
    let load_truncated = shared.config.read().aof_load_truncated;
    // A compaction that crashed leaves its temporary base behind.
    if let Ok(dir) = std::fs::read_dir(&paths.dir) {
        for e in dir.flatten() {
            if e.file_name().to_string_lossy().starts_with("temp-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let manifest = load_manifest(&paths)?;
    let (manifest, file, size) = match manifest {
        Some(m) if !m.incr.is_empty() => {
            let last = replay::load(shared, &paths, &m, load_truncated)?;
            let (name, _) = m.incr.last().expect("checked non-empty");
            let path = paths.dir.join(name);
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| format!("Can't open the journal file {}: {e}", path.display()))?;
            // A torn tail was dropped on load: cut it off the file too, so
            // new frames follow the last good one (redis-check-aof --fix).
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len != last {
                f.set_len(last)
                    .and_then(|_| f.sync_all())
                    .map_err(|e| format!("Can't truncate {}: {e}", path.display()))?;
            }
            if last < frame::HEADER_LEN {
                f.write_all_at(&frame::header(), 0)
                    .and_then(|_| f.sync_all())
                    .map_err(|e| format!("Can't write {}: {e}", path.display()))?;
            }
            (m, f, last.max(frame::HEADER_LEN))
        }
        other => {
            if let Some(m) = &other {
                if m.base.is_some() {
                    replay::load(shared, &paths, m, load_truncated)?;
                }
            }
            let mut m = other.unwrap_or_default();
            let seq = m.last_seq() + 1;
            let (f, size) = create_file(&paths, seq)?;
            m.incr
                .push((Manifest::incr_name(&paths.appendfilename, seq), seq));
            m.store(&paths.dir, &paths.appendfilename)
                .map_err(|e| format!("Can't write the journal manifest: {e}"))?;
            (m, f, size)
        }
    };
    // Sizes for INFO and auto-rewrite: the base and older journal files.
    let size_of = |name: &str| {
        std::fs::metadata(paths.dir.join(name))
            .map(|m| m.len())
            .unwrap_or(0)
    };
    let j = &shared.journal;
    j.base_size.store(
        manifest.base.as_ref().map(|(n, _)| size_of(n)).unwrap_or(0),
        Ordering::Relaxed,
    );
    let older = &manifest.incr[..manifest.incr.len().saturating_sub(1)];
    j.incr_before.store(
        older.iter().map(|(n, _)| size_of(n)).sum(),
        Ordering::Relaxed,
    );
    *j.manifest.lock() = manifest;
    start(shared, &Cx::DETACHED, file, size, None);
    Ok(())
}

/// The journal directory's manifest, None if there is none. A failure
/// names the file and, for a bad line, its byte offset.
fn load_manifest(paths: &Paths) -> Result<Option<Manifest>, String> {
    Manifest::load(&paths.dir, &paths.appendfilename)
        .map_err(|e| format!("Can't load the journal manifest: {e}"))
}

/// Creates journal file `seq` with its header, fsynced.
fn create_file(paths: &Paths, seq: u64) -> Result<(File, u64), String> {
    let path = paths
        .dir
        .join(Manifest::incr_name(&paths.appendfilename, seq));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("Can't create the journal file {}: {e}", path.display()))?;
    f.write_all_at(&frame::header(), 0)
        .and_then(|_| f.sync_all())
        .and_then(|_| manifest::sync_dir(&paths.dir))
        .map_err(|e| format!("Can't write the journal file {}: {e}", path.display()))?;
    Ok((f, frame::HEADER_LEN))
}

/// Starts the writer on `file` (whose good data ends at `size`) and turns
/// recording on.
fn start(shared: &Arc<Shared>, cx: &Cx, file: File, size: u64, caller: Option<usize>) {
    spawn_writer(shared, file, size);
    arm(shared, caller);
    // Under every shard lock: the journal holds exactly the writes after
    // this instant.
    let g = shared.engine.lock_all(cx);
    switch_on(shared);
    drop(g);
}

/// Starts the writer thread on `file`, whose good data ends at `size`.
fn spawn_writer(shared: &Arc<Shared>, file: File, size: u64) {
    let j = &shared.journal;
    j.set_policy(shared.config.read().appendfsync);
    j.current_size.store(size, Ordering::Relaxed);
    j.pending.lock().stop = false;
    *j.io.lock() = Some(Io::new(file, size, j.appended()));
    let s = shared.clone();
    let handle = std::thread::Builder::new()
        .name("cairn-journal".into())
        .spawn(move || {
            crate::memory::register_thread();
            writer(s)
        })
        .expect("spawn the journal writer");
    *j.writer.lock() = Some(handle);
}

/// Commands lend their arguments from now on; returns once every worker is
/// past the command it was running, so none that started unarmed can
/// write after the switch.
fn arm(shared: &Shared, caller: Option<usize>) {
    shared.engine.arm_journal(true);
    barrier(shared, caller);
}

/// Turns recording on. The caller holds every shard lock (`lock_all`, or
/// inside a snapshot's cut), so the switch falls between two writes of
/// every key.
fn switch_on(shared: &Arc<Shared>) {
    shared.journal.enabled.store(true, Ordering::SeqCst);
    // Beside the replication stream, if a backlog exists.
    crate::replication::install_sink(shared, true);
}

/// A run-time start whose cut could not be made: stop the writer again.
fn abandon_enable(shared: &Shared) {
    shared.journal.enabled.store(true, Ordering::SeqCst);
    // From the compaction thread: outside any command.
    stop(shared, &Cx::DETACHED);
}

impl Journal {
    /// At a compaction's cut (every shard locked): the writer goes on in
    /// `next` from the current position on.
    fn rotate_at_cut(&self, next: File) {
        let mut p = self.pending.lock();
        p.rotate = Some((self.appended(), next));
        // The cut falls between two frames.
        p.sealed = true;
        self.wake_if_sleeping(p);
    }

    /// Base + every journal file the manifest names (`aof_current_size`).
    pub fn total_size(&self) -> u64 {
        self.base_size.load(Ordering::Relaxed)
            + self.incr_before.load(Ordering::Relaxed)
            + self.current_size.load(Ordering::Relaxed)
    }
}

/// Returns once every worker but `caller` has handled a message sent now
/// (so has finished the command it was running), or after 5 seconds.
pub(crate) fn barrier(shared: &Shared, caller: Option<usize>) {
    let workers = shared.workers();
    let others = workers.len() - usize::from(caller.is_some_and(|c| c < workers.len()));
    if others == 0 {
        return;
    }
    let left = Arc::new(std::sync::atomic::AtomicUsize::new(others));
    for (i, w) in workers.iter().enumerate() {
        if Some(i) != caller {
            w.send(Msg::Barrier(left.clone()));
        }
    }
    let until = Instant::now() + Duration::from_secs(5);
    while left.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Stops recording, writes and fsyncs what is pending, and stops the
/// writer (CONFIG SET appendonly no, shutdown). `cx`: the command that
/// asks, whose EXEC hold may already lock every shard.
pub fn stop(shared: &Shared, cx: &Cx) {
    let j = &shared.journal;
    if !j.enabled() {
        return;
    }
    {
        let g = shared.engine.lock_all(cx);
        // The replication stream, if a backlog exists, goes on alone.
        crate::replication::install_sink(shared, false);
        drop(g);
    }
    j.pending.lock().stop = true;
    j.wake_writer();
    if let Some(h) = j.writer.lock().take() {
        let _ = h.join();
    }
    j.enabled.store(false, Ordering::SeqCst);
    j.mark_ok();
    // Nothing waits for durability any more.
    j.durable.store(j.appended(), Ordering::SeqCst);
    wake_waiters(shared);
}

/// Tells every worker with held output that `durable` moved.
fn wake_waiters(shared: &Shared) {
    for (i, w) in shared.journal.waiters.iter().enumerate() {
        if w.load(Ordering::SeqCst) && w.swap(false, Ordering::SeqCst) {
            shared.worker(i).send(Msg::Durable);
        }
    }
}

/// The journal file and what is in flight to it. The writer thread takes
/// it for each step; under `always` a worker ending a turn takes it for a
/// step of its own (`Journal::lead`), which needs it idle.
struct Io {
    file: File,
    /// Where `out` goes: everything before is written (and, under
    /// `always`, fsynced).
    file_len: u64,
    /// Bytes after `file_len` not yet durable (under `always`), or not yet
    /// written (after a failed write).
    out: Vec<u8>,
    /// How much of `out` is written.
    out_written: usize,
    /// Logical end that `out` reaches.
    out_end: u64,
    /// A compaction's cut: the next file, and the bytes appended after the
    /// cut, which go there once `out` (before the cut) is on disk.
    switch: Option<(File, Vec<u8>, u64)>,
    last_fsync: Instant,
    unsynced: bool,
    retry_at: Option<Instant>,
    /// An emptied buffer for the next `Pending::data` (no regrowth from
    /// zero at every take).
    spare: Vec<u8>,
}

impl Io {
    fn new(file: File, file_len: u64, out_end: u64) -> Io {
        Io {
            file,
            file_len,
            out: Vec::new(),
            out_written: 0,
            out_end,
            switch: None,
            last_fsync: Instant::now(),
            unsynced: false,
            retry_at: None,
            spare: Vec::new(),
        }
    }

    /// Nothing in flight: everything taken is written and fsynced, no
    /// failure is being retried, no file switch is pending.
    fn idle(&self) -> bool {
        self.out.is_empty() && !self.unsynced && self.switch.is_none() && self.retry_at.is_none()
    }

    /// Writes what of `out` is not written yet, at its place in the file (a
    /// failed partial write is simply overwritten on the next attempt).
    /// False if it failed (`failed`).
    fn write_out(&mut self, j: &Journal) -> bool {
        if self.out_written < self.out.len() {
            let delay = j.fault_write_delay_ms.load(Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(Duration::from_millis(delay));
            }
            let r = inject(&j.fault_writes).and_then(|_| {
                self.file.write_all_at(
                    &self.out[self.out_written..],
                    self.file_len + self.out_written as u64,
                )
            });
            if let Err(e) = r {
                self.failed(j, "writing", &e);
                return false;
            }
            self.out_written = self.out.len();
            self.unsynced = true;
            j.written.store(self.out_end, Ordering::SeqCst);
            j.current_size
                .store(self.file_len + self.out.len() as u64, Ordering::Relaxed);
        }
        true
    }

    /// fsyncs; on success `out` is durable and leaves the buffer. False if
    /// it failed: after a failed fsync the kernel may have dropped the
    /// dirty pages, so everything since the last good fsync is written
    /// again before the file is trusted (PostgreSQL's "fsyncgate" lesson).
    fn fsync(&mut self, j: &Journal) -> bool {
        let delay = j.fault_fsync_delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        if let Err(e) = inject(&j.fault_fsyncs).and_then(|_| self.file.sync_data()) {
            self.out_written = 0;
            self.failed(j, "fsyncing", &e);
            return false;
        }
        self.last_fsync = Instant::now();
        self.unsynced = false;
        self.settle(j);
        true
    }

    /// `out` is on disk (or, under everysec/no, in the OS's hands): it
    /// leaves the buffer and `durable` moves to its end.
    fn settle(&mut self, j: &Journal) {
        self.file_len += self.out.len() as u64;
        self.out.clear();
        self.out_written = 0;
        j.durable.store(self.out_end, Ordering::SeqCst);
        j.mark_ok();
    }

    /// A write or fsync failed: refuse writes (the caller releases replies
    /// held only for what they show) and retry in a moment.
    fn failed(&mut self, j: &Journal, what: &str, e: &std::io::Error) {
        j.mark_failed(what, e);
        self.retry_at = Some(Instant::now() + RETRY_EVERY);
    }
}

impl Journal {
    /// Leader-based group commit (`always`): the worker `w` whose turn
    /// appended writes and fsyncs everything pending itself, as Redis's one
    /// thread does before it replies, instead of waking the writer thread
    /// and being woken back: two cross-thread wake-ups per fsync, which
    /// cost more than the fsync's own CPU on a VM. Returns false (the
    /// caller then wakes the writer) when another thread holds the file,
    /// or it has work of its own (a retry, a compaction's switch).
    fn lead(&self, shared: &Shared, w: usize) -> bool {
        let Some(mut g) = self.io.try_lock() else {
            return false;
        };
        let Some(io) = g.as_mut() else {
            return false;
        };
        if !io.idle() {
            return false;
        }
        {
            let mut p = self.pending.lock();
            if p.rotate.is_some() || p.stop {
                return false;
            }
            if p.data.is_empty() {
                // Taken by a step that has finished (it held the file):
                // on disk already.
                return true;
            }
            p.turn_ended = false;
            let (mut data, frames) = p.take(&mut io.spare);
            io.out_end = self.appended();
            drop(p);
            frame::seal(&mut data, &frames);
            let old = std::mem::replace(&mut io.out, data);
            recycle(&mut io.spare, old);
        }
        // This worker releases its own held output right after
        // (`release_held`); no message to itself.
        if let Some(f) = self.waiters.get(w) {
            f.store(false, Ordering::SeqCst);
        }
        let ok = io.write_out(self) && io.fsync(self);
        drop(g);
        // Durable, or failing: either way held replies may move.
        wake_waiters(shared);
        if !ok {
            // The writer retries.
            self.kick();
        }
        true
    }
}

/// The writer thread: takes what was appended, writes it at the end of the
/// file, fsyncs per policy, publishes positions, retries after failures,
/// and switches to a new file at a compaction's cut (`Pending::rotate`).
/// Its state (`Io`) is the journal's, so a worker can lead a step.
fn writer(shared: Arc<Shared>) {
    writer_loop(&shared);
    *shared.journal.io.lock() = None;
}

fn writer_loop(shared: &Shared) {
    let j = &shared.journal;
    loop {
        // Wait for work. Lock order: the file (`io`), then `pending`; the
        // file is not held while sleeping, so a worker can lead meanwhile.
        let mut g = j.io.lock();
        let mut p = j.pending.lock();
        // Awake: appends need not signal (set again before each sleep).
        p.sleeping = false;
        let Some(io) = g.as_mut() else {
            return;
        };
        let policy = j.policy.load(Ordering::Relaxed);
        let everysec_due = policy == POLICY_EVERYSEC
            && io.unsynced
            && io.last_fsync.elapsed() >= Duration::from_secs(1);
        let retry_due = io.retry_at.is_some_and(|t| Instant::now() >= t);
        let data_ready = !p.data.is_empty() && (policy != POLICY_ALWAYS || p.turn_ended);
        let work = io.retry_at.is_none()
            && (data_ready
                || io.out_written < io.out.len()
                || (policy == POLICY_ALWAYS && io.unsynced)
                || io.switch.is_some()
                || p.rotate.is_some());
        if !(p.stop || work || everysec_due || retry_due) {
            let wait = match io.retry_at {
                Some(t) => t.saturating_duration_since(Instant::now()),
                None if io.unsynced && policy == POLICY_EVERYSEC => {
                    Duration::from_secs(1).saturating_sub(io.last_fsync.elapsed())
                }
                None => Duration::from_secs(1),
            };
            drop(g);
            p.sleeping = true;
            drop(p);
            let mut woken = j.wake.lock();
            if !*woken {
                j.cond
                    .wait_for(&mut woken, wait.max(Duration::from_millis(1)));
            }
            *woken = false;
            drop(woken);
            continue;
        }
        if !p.stop
            && policy != POLICY_ALWAYS
            && io.retry_at.is_none()
            && p.rotate.is_none()
            && p.data.len() < COALESCE_BYTES
        {
            // everysec / no: no reply waits for this write, so let appends
            // gather for a moment and carry them in one write(2).
            // Meanwhile `sleeping` is false, so appends do not signal: one
            // wake-up per interval instead of one per write command (which
            // cost the workers ~40% of their throughput on 2 cores).
            drop(p);
            drop(g);
            std::thread::sleep(COALESCE);
            g = j.io.lock();
            p = j.pending.lock();
        }
        let Some(io) = g.as_mut() else {
            return;
        };
        let stop = p.stop;
        p.turn_ended = false;
        let data_start = io.out_end;
        let (mut data, frames) = p.take(&mut io.spare);
        let data_end = j.appended();
        let rotate = p.rotate.take();
        drop(p);
        frame::seal(&mut data, &frames);
        if let Some((cut, next)) = rotate {
            // Bytes appended before the cut stay in this file.
            let keep = (cut.saturating_sub(data_start) as usize).min(data.len());
            let after = data.split_off(keep);
            io.switch = Some((next, after, data_end));
            io.out_end = cut.max(data_start);
        } else if let Some((_, after, end)) = &mut io.switch {
            after.extend_from_slice(&data);
            *end = data_end;
            data.clear();
        } else {
            io.out_end = data_end;
        }
        if io.out.is_empty() {
            let old = std::mem::replace(&mut io.out, data);
            recycle(&mut io.spare, old);
        } else {
            io.out.extend_from_slice(&data);
            recycle(&mut io.spare, data);
        }
        io.retry_at = None;
        let policy = j.policy.load(Ordering::Relaxed);
        if !io.write_out(j) {
            drop(g);
            wake_waiters(shared);
            if stop {
                log::warning("Journal writer stopping with unwritten data after an error");
                return;
            }
            continue;
        }
        let fsync_now = io.unsynced
            && match policy {
                POLICY_ALWAYS => true,
                POLICY_EVERYSEC => {
                    stop || io.switch.is_some() || io.last_fsync.elapsed() >= Duration::from_secs(1)
                }
                _ => stop || io.switch.is_some(),
            };
        if fsync_now {
            if !io.fsync(j) {
                drop(g);
                wake_waiters(shared);
                if stop {
                    return;
                }
                continue;
            }
            wake_waiters(shared);
        } else if io.out_written == io.out.len() && policy != POLICY_ALWAYS {
            // Written; under everysec/no the OS owns it now. Held replies
            // (if the policy just changed) need not wait any more.
            io.settle(j);
            wake_waiters(shared);
        }
        if io.out.is_empty() && !io.unsynced {
            if let Some((next, after, end)) = io.switch.take() {
                // Everything before the cut is on disk: go on in the new
                // file with what came after it.
                j.incr_before.fetch_add(io.file_len, Ordering::Relaxed);
                io.file = next;
                io.file_len = frame::HEADER_LEN;
                io.out = after;
                io.out_written = 0;
                io.out_end = end;
                j.current_size.store(io.file_len, Ordering::Relaxed);
                continue;
            }
        }
        if stop && io.out.is_empty() && io.switch.is_none() {
            let p = j.pending.lock();
            if p.data.is_empty() {
                return;
            }
        }
    }
}

/// The fault knob: fail with EIO while the counter is above zero.
fn inject(counter: &AtomicU64) -> std::io::Result<()> {
    let mut n = counter.load(Ordering::Relaxed);
    while n > 0 {
        match counter.compare_exchange(n, n - 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Err(std::io::Error::from_raw_os_error(libc::EIO)),
            Err(cur) => n = cur,
        }
    }
    Ok(())
}

/// INFO persistence's `aof_*` fields (Redis 7.0 `genRedisInfoString`).
pub fn info_fields(shared: &Shared, field: &mut dyn FnMut(&str, String)) {
    let j = &shared.journal;
    let on = j.enabled();
    let r = &j.rewrite;
    let enabling = r.enabling.load(Ordering::Relaxed);
    let flag = |b: bool| u8::from(b).to_string();
    field("aof_enabled", flag(on || enabling));
    field(
        "aof_rewrite_in_progress",
        flag(r.in_progress.load(Ordering::Relaxed)),
    );
    field(
        "aof_rewrite_scheduled",
        flag(r.scheduled.load(Ordering::Relaxed) && !r.in_progress.load(Ordering::Relaxed)),
    );
    field(
        "aof_last_rewrite_time_sec",
        r.last_secs.load(Ordering::Relaxed).to_string(),
    );
    field("aof_current_rewrite_time_sec", r.current_secs().to_string());
    let ok = if r.last_ok.load(Ordering::Relaxed) {
        "ok"
    } else {
        "err"
    };
    field("aof_last_bgrewrite_status", ok.into());
    field(
        "aof_rewrites",
        r.rewrites.load(Ordering::Relaxed).to_string(),
    );
    field(
        "aof_rewrites_consecutive_failures",
        r.consecutive_failures.load(Ordering::Relaxed).to_string(),
    );
    let status = if j.failed.load(Ordering::Relaxed) {
        "err"
    } else {
        "ok"
    };
    field("aof_last_write_status", status.into());
    field(
        "aof_last_cow_size",
        r.last_cow.load(Ordering::Relaxed).to_string(),
    );
    field("module_fork_in_progress", "0".into());
    field("module_fork_last_cow_size", "0".into());
    if on {
        field("aof_current_size", j.total_size().to_string());
        field(
            "aof_base_size",
            j.base_size.load(Ordering::Relaxed).to_string(),
        );
        field(
            "aof_pending_rewrite",
            flag(r.scheduled.load(Ordering::Relaxed)),
        );
        let buffered = j
            .appended()
            .saturating_sub(j.written.load(Ordering::Relaxed));
        field("aof_buffer_length", buffered.to_string());
        field("aof_pending_bio_fsync", "0".into());
        field(
            "aof_delayed_fsync",
            j.delayed_fsync.load(Ordering::Relaxed).to_string(),
        );
        // Cairn's own: loop turns that waited for a journal behind by
        // more than its buffer limit (`end_of_turn`).
        field(
            "aof_write_throttles",
            j.throttles.load(Ordering::Relaxed).to_string(),
        );
    }
}

#[cfg(test)]
mod tests;
