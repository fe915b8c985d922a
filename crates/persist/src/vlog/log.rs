//! `Log`: the value log of one shard group. Appends go through a write
//! buffer to a tail segment, which rolls to a new file at
//! `segment_size`; reads are a `pread` of one record from any thread;
//! per-segment live counters are kept from the caller's `free` and
//! `mark_live`; `compact` copies a segment's live records to a second
//! tail of their own and reports where they went. What is live is the
//! caller's knowledge (RAM holds the pointers), so the log never decides
//! it.
//!
//! Locks: the segment map is a `RwLock` taken for a lookup (read) or when
//! a segment is created or dropped (write); each tail (buffer, file
//! position, failure state) is a `Mutex` held by its appends and by reads
//! of a record still in its buffer. A read of a written record takes only
//! the map's read lock, for the time of an `Arc` clone, and then reads
//! without any lock: two atomics per tail (`Stream::seq`,
//! `Stream::flushed`) tell it whether the record is in the file yet.
use super::format::{self, Kind, Ptr, RecordRef, SEGMENT_HEADER_LEN};
use super::segment::Segment;
use crate::Error;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// When the log's writes reach the disk, named as `appendfsync` names the
/// journal's policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// Never fsync; the kernel writes back when it likes.
    No,
    /// `tick` fsyncs at most once a second (and a segment is fsynced when
    /// the tail leaves it).
    Everysec,
    /// Each append is written and fsynced before its pointer is returned.
    Always,
}

impl Fsync {
    pub fn parse(s: &str) -> Option<Fsync> {
        match s.to_ascii_lowercase().as_str() {
            "no" => Some(Fsync::No),
            "everysec" => Some(Fsync::Everysec),
            "always" => Some(Fsync::Always),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct Options {
    /// A segment file's maximum size, header included (at most 4 GiB:
    /// pointers hold u32 offsets). 64 MiB by default, extstore's page.
    pub segment_size: u32,
    /// The write buffer is written to the file when it reaches this.
    pub buffer_size: usize,
    pub fsync: Fsync,
    /// Bytes on disk (written and buffered) the log may not exceed:
    /// appends past it fail with `StorageFull`, as a full disk would.
    pub disk_limit: Option<u64>,
    /// Bytes of `disk_limit` that only compaction's copies may use: new
    /// values are refused once the log would hold more than the limit less
    /// this, so a log filled by new values can still compact (its
    /// survivors are copied before the segment they leave is dropped, and
    /// count against the limit meanwhile). Extstore keeps free pages for
    /// its compactor the same way. 0: none.
    pub compaction_reserve: u64,
    /// Injected failures (tests, and a DEBUG command once wired).
    pub faults: Option<Arc<Faults>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            segment_size: 64 << 20,
            buffer_size: 1 << 20,
            fsync: Fsync::Everysec,
            disk_limit: None,
            compaction_reserve: 0,
            faults: None,
        }
    }
}

/// Makes the next `n` writes, fsyncs or reads fail with an OS error
/// (ENOSPC, EIO...), as `DEBUG JOURNAL-FAULT` does for the journal.
#[derive(Default)]
pub struct Faults {
    writes: AtomicU32,
    fsyncs: AtomicU32,
    reads: AtomicU32,
    errno: AtomicI32,
}

impl Faults {
    pub fn fail_writes(&self, n: u32, errno: i32) {
        self.errno.store(errno, Ordering::Relaxed);
        self.writes.store(n, Ordering::Relaxed);
    }

    pub fn fail_fsyncs(&self, n: u32, errno: i32) {
        self.errno.store(errno, Ordering::Relaxed);
        self.fsyncs.store(n, Ordering::Relaxed);
    }

    pub fn fail_reads(&self, n: u32, errno: i32) {
        self.errno.store(errno, Ordering::Relaxed);
        self.reads.store(n, Ordering::Relaxed);
    }

    fn take(&self, counter: &AtomicU32) -> Option<io::Error> {
        counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1))
            .ok()
            .map(|_| io::Error::from_raw_os_error(self.errno.load(Ordering::Relaxed)))
    }
}

/// A record read back: its bytes, with accessors for the fields.
#[derive(Debug)]
pub struct Fetched {
    rec: Vec<u8>,
}

impl Fetched {
    fn fields(&self) -> RecordRef<'_> {
        format::check_record(&self.rec).expect("checked when it was read")
    }

    pub fn db(&self) -> u8 {
        self.fields().db
    }

    pub fn kind(&self) -> Kind {
        self.fields().kind
    }

    pub fn key(&self) -> &[u8] {
        let k = format::RECORD_HEADER_LEN;
        &self.rec[k..k + usize::from(u16::from_le_bytes([self.rec[8], self.rec[9]]))]
    }

    pub fn value(&self) -> &[u8] {
        let k = format::RECORD_HEADER_LEN + self.key().len();
        &self.rec[k..]
    }
}

/// Where `Log::read_nowait_into` put a checked record in the caller's
/// buffer: `buf[key.clone()]` is its key, `buf[value.clone()]` its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub db: u8,
    pub kind: Kind,
    pub key: std::ops::Range<usize>,
    pub value: std::ops::Range<usize>,
}

impl Placed {
    /// `f`, the fields of a checked record, which starts at `start` in the
    /// buffer (no second pass over its bytes).
    fn of(start: usize, f: RecordRef<'_>) -> Placed {
        let k = start + format::RECORD_HEADER_LEN;
        let v = k + f.key.len();
        Placed {
            db: f.db,
            kind: f.kind,
            key: k..v,
            value: v..v + f.value.len(),
        }
    }
}

/// A record compaction copied: the caller repoints `key` from `old` to
/// `new` if it still holds `old`, and frees `new` otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    pub db: u8,
    pub key: Vec<u8>,
    pub old: Ptr,
    pub new: Ptr,
}

#[derive(Debug, Default)]
pub struct Compaction {
    pub moved: Vec<Moved>,
    pub dropped_records: u64,
    pub dropped_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentStats {
    pub seq: u32,
    /// Bytes of the file holding its header and whole records.
    pub bytes: u64,
    pub live_bytes: u64,
    pub live_records: u64,
    /// Being appended to: not a compaction candidate.
    pub tail: bool,
    pub suspect: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub segments: usize,
    /// Bytes in segment files (written), plus the write buffer.
    pub disk_bytes: u64,
    pub buffered_bytes: u64,
    /// Bytes of records the caller holds pointers to (padding excluded).
    pub live_bytes: u64,
    pub live_records: u64,
}

struct Failure {
    path: PathBuf,
    offset: Option<u64>,
    op: &'static str,
    os: Option<i32>,
    kind: io::ErrorKind,
    text: String,
}

impl Failure {
    fn of(e: &Error) -> Failure {
        let (op, source) = match &e.kind {
            crate::ErrorKind::Io { op, source } => (*op, source),
            _ => unreachable!("only I/O failures are kept"),
        };
        Failure {
            path: e.path.clone(),
            offset: e.offset,
            op,
            os: source.raw_os_error(),
            kind: source.kind(),
            text: source.to_string(),
        }
    }

    fn error(&self) -> Error {
        let source = match self.os {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::new(self.kind, self.text.clone()),
        };
        Error {
            path: self.path.clone(),
            offset: self.offset,
            kind: crate::ErrorKind::Io {
                op: self.op,
                source,
            },
        }
    }
}

struct Tail {
    seg: Option<Arc<Segment>>,
    /// Bytes not yet in the file, which start at `buf_start` in it.
    buf: Vec<u8>,
    buf_start: u64,
    /// The last write or fsync failed: appends are refused until a flush
    /// succeeds, and the buffer is kept (its records stay readable).
    failed: Option<Failure>,
    /// Written since the last fsync.
    unsynced: bool,
    last_sync: Instant,
    /// Under `Everysec`: segments this tail left whose fsync is still to
    /// come, and whether the directory (a new segment's name) is. `tick`
    /// and `sync` do them outside the tail's lock.
    sealed: Vec<Arc<Segment>>,
    dir_unsynced: bool,
}

/// The fsyncs one `tick` or `sync` does after letting go of a tail's lock.
struct Pending {
    sealed: Vec<Arc<Segment>>,
    dir: bool,
    tail: Option<Arc<Segment>>,
}

/// A tail and what a reader needs to know of it without its lock.
struct Stream {
    tail: Mutex<Tail>,
    /// The tail segment's number (0: none yet) and how much of it is in
    /// the file: a read of anything else needs no lock but the map's.
    seq: AtomicU32,
    flushed: AtomicU64,
}

impl Stream {
    fn new(buffer_size: usize) -> Stream {
        Stream {
            tail: Mutex::new(Tail {
                seg: None,
                buf: Vec::with_capacity(buffer_size),
                buf_start: 0,
                failed: None,
                unsynced: false,
                last_sync: Instant::now(),
                sealed: Vec::new(),
                dir_unsynced: false,
            }),
            seq: AtomicU32::new(0),
            flushed: AtomicU64::new(0),
        }
    }
}

/// New values go to one tail, the survivors of compaction to another:
/// survivors are long-lived, and mixing them with fresh values would make
/// every segment a mix of lifetimes that compaction copies again and
/// again (extstore 1.6.25's "compact" bucket, for the same reason).
const NEW: usize = 0;
const COMPACTED: usize = 1;

pub struct Log {
    dir: PathBuf,
    group: u16,
    opts: Options,
    segments: RwLock<BTreeMap<u32, Arc<Segment>>>,
    streams: [Stream; 2],
    /// The next segment's number; never reused.
    next_seq: AtomicU32,
    /// Held by `tick` and `sync` from taking a tail's due fsyncs to
    /// finishing them (appenders never take it): a `sync` that found the
    /// list empty because a `tick` had just taken it waits for those
    /// fsyncs before it answers that everything is durable.
    syncing: Mutex<()>,
    /// Bytes written to segment files that still exist, and bytes in the
    /// tails' buffers: the disk limit counts both without locking the
    /// other tail.
    written: AtomicU64,
    buffered: AtomicU64,
}

impl Log {
    /// Opens (or creates) the log of `group` in `dir`: every segment is
    /// scanned, torn tails are cut, damage elsewhere fails the open.
    /// Live counters start at zero: the caller marks what it points at
    /// (`mark_live`), and everything else is garbage for compaction.
    /// Appends go to a new segment.
    pub fn open(dir: &Path, group: u16, opts: Options) -> Result<Log, Error> {
        assert!(
            u64::from(opts.segment_size) > SEGMENT_HEADER_LEN + format::RECORD_HEADER_LEN as u64,
            "segment_size too small"
        );
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))?;
        let mut seqs = Vec::new();
        for ent in fs::read_dir(dir).map_err(|e| Error::io(dir, "read directory", e))? {
            let ent = ent.map_err(|e| Error::io(dir, "read directory", e))?;
            if let Some(seq) = ent.file_name().to_str().and_then(parse_name) {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut map = BTreeMap::new();
        let mut written = 0;
        for &seq in &seqs {
            if let Some(seg) = Segment::recover(&dir.join(name(seq)), group, seq)? {
                written += seg.end();
                map.insert(seq, Arc::new(seg));
            }
        }
        let next_seq = seqs.last().map_or(1, |s| s + 1);
        Ok(Log {
            dir: dir.to_path_buf(),
            group,
            segments: RwLock::new(map),
            streams: [Stream::new(opts.buffer_size), Stream::new(opts.buffer_size)],
            next_seq: AtomicU32::new(next_seq),
            syncing: Mutex::new(()),
            opts,
            written: AtomicU64::new(written),
            buffered: AtomicU64::new(0),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a record and returns where it is. It is readable at once
    /// (from the buffer until written). Under `Fsync::Always` it is in
    /// the file and fsynced, or the append fails and leaves nothing.
    /// Otherwise a failed write of the buffer is not this append's error
    /// (its record is kept in the buffer), but the next append's.
    pub fn append(&self, db: u8, kind: Kind, key: &[u8], value: &[u8]) -> Result<Ptr, Error> {
        let len = format::record_len(key.len(), value.len());
        if key.len() > format::KEY_MAX || !self.fits(len) {
            return Err(Error::io(
                &self.dir,
                "append",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a record of {len} bytes (key {}) does not fit a segment of {}",
                        key.len(),
                        self.opts.segment_size
                    ),
                ),
            ));
        }
        let s = &self.streams[NEW];
        let mut t = s.tail.lock();
        self.append_locked(s, &mut t, len, self.opts.compaction_reserve, |buf| {
            format::encode_record(buf, db, kind, key, value)
        })
    }

    fn fits(&self, len: u64) -> bool {
        SEGMENT_HEADER_LEN + format::padded(len) <= u64::from(self.opts.segment_size)
    }

    /// Appends under the tail's lock; `reserve` bytes of the disk limit
    /// must stay free after it (new values leave compaction's reserve).
    fn append_locked(
        &self,
        s: &Stream,
        t: &mut Tail,
        len: u64,
        reserve: u64,
        write: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Ptr, Error> {
        if let Some(f) = &t.failed {
            return Err(f.error());
        }
        let plen = format::padded(len);
        if let Some(limit) = self.opts.disk_limit {
            let header = if t.seg.is_none() {
                SEGMENT_HEADER_LEN
            } else {
                0
            };
            let have = self.written.load(Ordering::Relaxed) + self.buffered.load(Ordering::Relaxed);
            if have + plen + header + reserve > limit {
                let why = if reserve > 0 {
                    format!(
                        "the value log's disk limit of {limit} bytes is reached \
                         ({reserve} of them kept for compaction)"
                    )
                } else {
                    format!("the value log's disk limit of {limit} bytes is reached")
                };
                return Err(Error::io(
                    &self.dir,
                    "append",
                    io::Error::new(io::ErrorKind::StorageFull, why),
                ));
            }
        }
        let roll = match &t.seg {
            None => true,
            Some(seg) => {
                seg.suspect.load(Ordering::Relaxed)
                    || t.buf_start + t.buf.len() as u64 + plen > u64::from(self.opts.segment_size)
            }
        };
        if roll {
            self.roll(s, t)?;
        }
        let seg = t.seg.clone().expect("rolled");
        let offset = t.buf_start + t.buf.len() as u64;
        let mark = t.buf.len();
        write(&mut t.buf);
        debug_assert_eq!((t.buf.len() - mark) as u64, plen);
        self.buffered.fetch_add(plen, Ordering::Relaxed);
        seg.add_live(len);
        let ptr = Ptr {
            segment: seg.seq,
            offset: offset as u32,
            len: len as u32,
        };
        if self.opts.fsync == Fsync::Always {
            if let Err(e) = self.flush_locked(s, t, true) {
                // All or nothing: the record leaves with the error. If the
                // write went through and the fsync failed, its bytes stay
                // in the file, dead.
                if t.buf.len() > mark {
                    self.buffered
                        .fetch_sub((t.buf.len() - mark) as u64, Ordering::Relaxed);
                    t.buf.truncate(mark);
                }
                seg.sub_live(len);
                return Err(e);
            }
        } else if t.buf.len() >= self.opts.buffer_size {
            // A failure is kept in `t.failed` and refuses the next append;
            // this record is in the buffer and readable either way.
            let _ = self.flush_locked(s, t, false);
        }
        Ok(ptr)
    }

    /// Leaves the tail segment (written; fsynced here under `Always`, by
    /// the next `tick` under `Everysec`) for a new one whose header opens
    /// the buffer.
    fn roll(&self, s: &Stream, t: &mut Tail) -> Result<(), Error> {
        // Under `Everysec` the segment left and the new name are fsynced
        // by the next `tick`, outside this lock: an fsync takes
        // milliseconds to hundreds of them under a write load, and the
        // appender may be a worker making room for its client's write
        // (E4's MSET tail latency).
        let defer = self.opts.fsync == Fsync::Everysec;
        if let Some(old) = t.seg.clone() {
            self.flush_locked(s, t, self.opts.fsync == Fsync::Always)?;
            if defer && t.unsynced {
                t.sealed.push(old);
                t.unsynced = false;
            }
        }
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(name(seq));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io(&path, "create", e))?;
        if defer {
            t.dir_unsynced = true;
        } else if self.opts.fsync == Fsync::Always {
            // The new name must survive a crash for the segment to.
            self.sync_dir()?;
        }
        let seg = Arc::new(Segment::new(seq, path, file, 0));
        self.segments.write().insert(seq, seg.clone());
        debug_assert!(t.buf.is_empty(), "written by the flush above");
        t.buf
            .extend_from_slice(&format::segment_header(self.group, seq));
        self.buffered
            .fetch_add(SEGMENT_HEADER_LEN, Ordering::Relaxed);
        t.buf_start = 0;
        t.seg = Some(seg);
        // Flushed position first: a reader that sees the new number sees
        // a position of this segment (or a later one).
        s.flushed.store(0, Ordering::Release);
        s.seq.store(seq, Ordering::Release);
        Ok(())
    }

    /// Writes the buffer at its place in the tail file (pwrite: a retry
    /// after a partial write simply writes it again), then fsyncs if
    /// `sync`. A failure is kept and refuses appends until a flush
    /// succeeds.
    fn flush_locked(&self, s: &Stream, t: &mut Tail, sync: bool) -> Result<(), Error> {
        let r = self.try_flush(s, t, sync);
        match &r {
            Ok(()) => t.failed = None,
            Err(e) => t.failed = Some(Failure::of(e)),
        }
        r
    }

    fn try_flush(&self, s: &Stream, t: &mut Tail, sync: bool) -> Result<(), Error> {
        let Some(seg) = t.seg.clone() else {
            return Ok(());
        };
        if !t.buf.is_empty() {
            let fault = self.opts.faults.as_ref().and_then(|f| f.take(&f.writes));
            let r = match fault {
                Some(e) => Err(e),
                None => seg.file.write_all_at(&t.buf, t.buf_start),
            };
            r.map_err(|e| Error::io(&seg.path, "write", e).at(t.buf_start))?;
            let n = t.buf.len() as u64;
            t.buf_start += n;
            t.buf.clear();
            self.written.fetch_add(n, Ordering::Relaxed);
            self.buffered.fetch_sub(n, Ordering::Relaxed);
            seg.end.store(t.buf_start, Ordering::Release);
            s.flushed.store(t.buf_start, Ordering::Release);
            t.unsynced = true;
        }
        if sync && t.unsynced {
            self.sync_segment(&seg)?;
            t.unsynced = false;
            t.last_sync = Instant::now();
        }
        Ok(())
    }

    /// fsyncs a segment's data. A failure marks it suspect: the kernel may
    /// have dropped the pages it could not write and will not say so again
    /// (PostgreSQL's "fsyncgate"), so no more appends go to it and
    /// compaction moves what is in it.
    fn sync_segment(&self, seg: &Segment) -> Result<(), Error> {
        let fault = self.opts.faults.as_ref().and_then(|f| f.take(&f.fsyncs));
        let r = match fault {
            Some(e) => Err(e),
            None => seg.file.sync_data(),
        };
        r.map_err(|e| {
            seg.suspect.store(true, Ordering::Relaxed);
            Error::io(&seg.path, "fsync", e)
        })
    }

    fn sync_dir(&self) -> Result<(), Error> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(&self.dir, "fsync", e))
    }

    /// Writes stream `s`'s buffer under its lock, then does the fsyncs due
    /// (every one with `force`; else the tail's once a second, as
    /// `Everysec` asks) after letting go of it, so appends go on during
    /// them. A failed fsync is kept in the tail (appends are refused until
    /// a flush succeeds), as a failed write is.
    fn write_then_sync(&self, s: &Stream, force: bool) -> Result<(), Error> {
        let _turn = self.syncing.lock();
        let pending = {
            let mut t = s.tail.lock();
            let due = force
                || (self.opts.fsync == Fsync::Everysec
                    && t.last_sync.elapsed() >= Duration::from_secs(1));
            if t.buf.is_empty()
                && !due
                && t.failed.is_none()
                && t.sealed.is_empty()
                && !t.dir_unsynced
            {
                return Ok(());
            }
            self.flush_locked(s, &mut t, false)?;
            let mut p = Pending {
                sealed: std::mem::take(&mut t.sealed),
                dir: std::mem::take(&mut t.dir_unsynced),
                tail: None,
            };
            if due && t.unsynced {
                p.tail = t.seg.clone();
                t.unsynced = false;
                t.last_sync = Instant::now();
            }
            p
        };
        let mut r = Ok(());
        for seg in pending.sealed.iter().chain(&pending.tail) {
            if let Err(e) = self.sync_segment(seg) {
                r = r.and(Err(e));
            }
        }
        if pending.dir {
            r = r.and_then(|()| self.sync_dir());
        }
        if let Err(e) = &r {
            let mut t = s.tail.lock();
            t.failed = Some(Failure::of(e));
            t.unsynced |= pending.tail.is_some();
        }
        r
    }

    /// Writes the buffer to the file (no fsync). Also the retry after a
    /// failure.
    pub fn flush(&self) -> Result<(), Error> {
        self.each(|s| self.flush_locked(s, &mut s.tail.lock(), false))
    }

    /// `f` on both streams; the first error, after both were tried.
    fn each(&self, mut f: impl FnMut(&Stream) -> Result<(), Error>) -> Result<(), Error> {
        let mut first = Ok(());
        for s in &self.streams {
            let r = f(s);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Writes the buffer and fsyncs the tail, whatever the policy: before
    /// a snapshot that points into the log is renamed into place. Sealed
    /// segments were fsynced when the tail left them or are fsynced here
    /// (those left under `Everysec` since the last `tick`); under `No`
    /// this also fsyncs every segment.
    pub fn sync(&self) -> Result<(), Error> {
        self.each(|s| self.write_then_sync(s, true))?;
        if self.opts.fsync == Fsync::No {
            let segs: Vec<_> = self.segments.read().values().cloned().collect();
            for s in segs {
                s.file
                    .sync_data()
                    .map_err(|e| Error::io(&s.path, "fsync", e))?;
            }
        }
        Ok(())
    }

    /// The periodic work (call it every 10-100 ms): writes the buffer, and
    /// under `Everysec` fsyncs the segments tails left and, once a second,
    /// the tails. Retries a failed write.
    pub fn tick(&self) -> Result<(), Error> {
        self.each(|s| self.write_then_sync(s, false))
    }

    /// The record `ptr` names, checked (bounds, length, CRC). Any thread;
    /// no lock is held during the read from the file.
    pub fn read(&self, ptr: Ptr) -> Result<Fetched, Error> {
        let bad = |r: &str| {
            Error::corrupt(
                &self.dir.join(name(ptr.segment)),
                u64::from(ptr.offset),
                r.to_string(),
            )
        };
        if u64::from(ptr.offset) < SEGMENT_HEADER_LEN
            || u64::from(ptr.offset) % format::ALIGN != 0
            || (ptr.len as usize) < format::RECORD_HEADER_LEN
        {
            return Err(bad("not a record pointer"));
        }
        for st in &self.streams {
            if ptr.segment != st.seq.load(Ordering::Acquire)
                || ptr.end() <= st.flushed.load(Ordering::Acquire)
            {
                continue;
            }
            let t = st.tail.lock();
            if let Some(seg) = &t.seg {
                if seg.seq == ptr.segment && u64::from(ptr.offset) >= t.buf_start {
                    let s = (u64::from(ptr.offset) - t.buf_start) as usize;
                    let rec = t
                        .buf
                        .get(s..s + ptr.len as usize)
                        .ok_or_else(|| bad("pointer past the end of the log"))?
                        .to_vec();
                    drop(t);
                    return check(rec).map_err(|r| bad(&r));
                }
            }
            // Written meanwhile: read it from the file.
        }
        let seg = self
            .segments
            .read()
            .get(&ptr.segment)
            .cloned()
            .ok_or_else(|| bad("no such segment"))?;
        if ptr.end() > seg.end() {
            return Err(bad("pointer past the end of the segment's records"));
        }
        let mut rec = vec![0u8; ptr.len as usize];
        let fault = self.opts.faults.as_ref().and_then(|f| f.take(&f.reads));
        match fault {
            Some(e) => Err(e),
            None => seg.file.read_exact_at(&mut rec, u64::from(ptr.offset)),
        }
        .map_err(|e| Error::io(&seg.path, "read", e).at(u64::from(ptr.offset)))?;
        check(rec).map_err(|r| bad(&r))
    }

    /// The caller no longer points at `ptr` (overwritten, deleted, brought
    /// back to RAM). Two atomic subtractions; no I/O. A pointer into a
    /// dropped segment is ignored.
    pub fn free(&self, ptr: Ptr) {
        if let Some(seg) = self.segments.read().get(&ptr.segment) {
            seg.sub_live(u64::from(ptr.len));
        }
    }

    /// After `open`: the caller points at `ptr` (a snapshot names it).
    /// Fails if it cannot name a record the open found.
    pub fn mark_live(&self, ptr: Ptr) -> Result<(), Error> {
        let seg = self.segments.read().get(&ptr.segment).cloned();
        let path = self.dir.join(name(ptr.segment));
        match seg {
            Some(s)
                if u64::from(ptr.offset) >= SEGMENT_HEADER_LEN
                    && u64::from(ptr.offset) % format::ALIGN == 0
                    && ptr.len as usize >= format::RECORD_HEADER_LEN
                    && ptr.end() <= s.end() =>
            {
                s.add_live(u64::from(ptr.len));
                Ok(())
            }
            Some(_) => Err(Error::corrupt(
                &path,
                u64::from(ptr.offset),
                "pointer outside the segment's records",
            )),
            None => Err(Error::corrupt(
                &path,
                u64::from(ptr.offset),
                "no such segment",
            )),
        }
    }

    /// Copies the records of sealed segment `seq` for which `live` answers
    /// true to the tail, as they are (no decoding), and returns where they
    /// went; the others are counted as dropped. The segment itself stays
    /// until `drop_segment`, so the caller can repoint its keys first
    /// (readers of old pointers keep working meanwhile). On failure the
    /// copies made so far are freed and the segment is as it was.
    pub fn compact(
        &self,
        seq: u32,
        mut live: impl FnMut(Ptr, RecordRef<'_>) -> bool,
    ) -> Result<Compaction, Error> {
        let seg = self.sealed(seq)?;
        let mut out = Compaction::default();
        let r = seg.walk(|ptr, rec, bytes| {
            if !live(ptr, rec) {
                out.dropped_records += 1;
                out.dropped_bytes += u64::from(ptr.len);
                return Ok(());
            }
            let st = &self.streams[COMPACTED];
            let mut t = st.tail.lock();
            // Compaction may use the reserve that new values leave.
            let new = self.append_locked(st, &mut t, u64::from(ptr.len), 0, |buf| {
                let start = buf.len();
                buf.extend_from_slice(bytes);
                format::pad(buf, start);
            })?;
            out.moved.push(Moved {
                db: rec.db,
                key: rec.key.to_vec(),
                old: ptr,
                new,
            });
            Ok(())
        });
        // The survivors go to the file now rather than wait in the buffer
        // for the next compaction (a failure here is kept, and retried by
        // `tick`; the records are readable from the buffer meanwhile).
        if r.is_ok() {
            let st = &self.streams[COMPACTED];
            let mut t = st.tail.lock();
            let _ = self.flush_locked(st, &mut t, false);
        }
        if let Err(e) = r {
            for m in &out.moved {
                self.free(m.new);
            }
            return Err(e);
        }
        Ok(out)
    }

    fn sealed(&self, seq: u32) -> Result<Arc<Segment>, Error> {
        let path = self.dir.join(name(seq));
        if self.is_tail(seq) {
            return Err(Error::io(
                &path,
                "compact",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the tail segment is being appended to",
                ),
            ));
        }
        self.segments
            .read()
            .get(&seq)
            .cloned()
            .ok_or_else(|| Error::io(&path, "compact", io::Error::from(io::ErrorKind::NotFound)))
    }

    fn is_tail(&self, seq: u32) -> bool {
        self.streams
            .iter()
            .any(|s| s.seq.load(Ordering::Acquire) == seq)
    }

    /// Removes sealed segment `seq` and its file. Readers that already
    /// hold its handle finish their reads on the unlinked file.
    pub fn drop_segment(&self, seq: u32) -> Result<(), Error> {
        let seg = self.sealed(seq)?;
        fs::remove_file(&seg.path).map_err(|e| Error::io(&seg.path, "remove", e))?;
        self.segments.write().remove(&seq);
        self.written.fetch_sub(seg.end(), Ordering::Relaxed);
        Ok(())
    }

    /// Every segment, oldest first.
    pub fn segment_stats(&self) -> Vec<SegmentStats> {
        self.segments
            .read()
            .values()
            .map(|s| SegmentStats {
                seq: s.seq,
                bytes: s.end(),
                live_bytes: s.live_bytes.load(Ordering::Relaxed),
                live_records: s.live_records.load(Ordering::Relaxed),
                tail: self.is_tail(s.seq),
                suspect: s.suspect.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Sealed segments worth compacting: suspect ones first, then those
    /// whose live bytes are at most `max_live` of their size, emptiest
    /// first.
    pub fn candidates(&self, max_live: f64) -> Vec<SegmentStats> {
        let mut v: Vec<_> = self
            .segment_stats()
            .into_iter()
            .filter(|s| !s.tail && (s.suspect || s.live_bytes as f64 <= max_live * s.bytes as f64))
            .collect();
        v.sort_by(|a, b| {
            b.suspect.cmp(&a.suspect).then(
                (a.live_bytes as f64 / a.bytes.max(1) as f64)
                    .total_cmp(&(b.live_bytes as f64 / b.bytes.max(1) as f64)),
            )
        });
        v
    }

    pub fn stats(&self) -> Stats {
        let buffered = self.buffered.load(Ordering::Relaxed);
        let segs = self.segment_stats();
        Stats {
            segments: segs.len(),
            disk_bytes: self.written.load(Ordering::Relaxed) + buffered,
            buffered_bytes: buffered,
            live_bytes: segs.iter().map(|s| s.live_bytes).sum(),
            live_records: segs.iter().map(|s| s.live_records).sum(),
        }
    }

    /// Drops the buffer unwritten and closes: what a crash leaves (tests).
    #[cfg(test)]
    pub(crate) fn crash(self) {
        for s in &self.streams {
            let mut t = s.tail.lock();
            self.buffered
                .fetch_sub(t.buf.len() as u64, Ordering::Relaxed);
            t.buf.clear();
        }
    }
}

impl Drop for Log {
    /// Best effort: a clean shutdown writes the buffers (the caller that
    /// needs them durable calls `sync` and sees its error).
    fn drop(&mut self) {
        let sync = self.opts.fsync != Fsync::No;
        for s in &self.streams {
            let mut t = s.tail.lock();
            if !t.buf.is_empty() && t.failed.is_none() {
                let _ = self.try_flush(s, &mut t, sync);
            }
            for seg in std::mem::take(&mut t.sealed) {
                let _ = self.sync_segment(&seg);
            }
            if std::mem::take(&mut t.dir_unsynced) {
                let _ = self.sync_dir();
            }
        }
    }
}

fn check(rec: Vec<u8>) -> Result<Fetched, String> {
    format::check_record(&rec)?;
    Ok(Fetched { rec })
}

/// A segment's file name: its number in 10 digits, so names sort as
/// numbers.
fn name(seq: u32) -> String {
    format!("{seq:010}.vlog")
}

fn parse_name(s: &str) -> Option<u32> {
    let digits = s.strip_suffix(".vlog")?;
    if digits.len() != 10 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n > 0)
}

/// Reads that do not wait for the disk, and dropping the page cache
/// (branch tierio: docs/design.md, "Waiting for I/O without holding up a
/// worker").
impl Log {
    /// `read` that never waits for the disk, into the caller's buffer: the
    /// record (checked as `read` checks it) is appended to `buf` when all
    /// of it is in the page cache (`preadv2` with `RWF_NOWAIT`, straight
    /// into `buf`'s spare room: no buffer of its own, no second copy) or
    /// in a write buffer, and `Placed` says where its key and value are;
    /// `Ok(None)` when reading it would wait (pages not cached, a file
    /// system or kernel without `RWF_NOWAIT`), for the caller to read it
    /// elsewhere with `read`. Errors as `read`'s. On `None` or an error
    /// `buf` is as it was. A parked MGET reads 32 records this way into
    /// one buffer: an allocation per command, not per value.
    pub fn read_nowait_into(&self, ptr: Ptr, buf: &mut Vec<u8>) -> Result<Option<Placed>, Error> {
        // A record not yet known to be in the file is copied from the
        // buffer by `read`, without I/O; a bad pointer, or a read fault
        // injected for tests, gets `read`'s error.
        let buffered = self.streams.iter().any(|st| {
            ptr.segment == st.seq.load(Ordering::Acquire)
                && ptr.end() > st.flushed.load(Ordering::Acquire)
        });
        let faulty = self
            .opts
            .faults
            .as_ref()
            .is_some_and(|f| f.reads.load(Ordering::Relaxed) > 0);
        let seg = self.segments.read().get(&ptr.segment).cloned();
        let seg = match seg {
            Some(seg)
                if !buffered
                    && !faulty
                    && u64::from(ptr.offset) >= SEGMENT_HEADER_LEN
                    && u64::from(ptr.offset) % format::ALIGN == 0
                    && ptr.len as usize >= format::RECORD_HEADER_LEN
                    && ptr.end() <= seg.end() =>
            {
                seg
            }
            _ => {
                let f = self.read(ptr)?;
                let start = buf.len();
                buf.extend_from_slice(&f.rec);
                return Ok(Some(Placed::of(start, f.fields())));
            }
        };
        let len = ptr.len as usize;
        let start = buf.len();
        buf.reserve(len);
        let iov = libc::iovec {
            // SAFETY: `reserve` made room for `len` bytes past `start`.
            iov_base: unsafe { buf.as_mut_ptr().add(start) }.cast(),
            iov_len: len,
        };
        use std::os::fd::AsRawFd;
        // SAFETY: one iovec over `buf`'s spare capacity, which outlives the
        // call and nothing else touches meanwhile; the file stays open
        // while `seg` is held.
        let n = unsafe {
            libc::preadv2(
                seg.file.as_raw_fd(),
                &iov,
                1,
                i64::from(ptr.offset),
                libc::RWF_NOWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // Would wait; or RWF_NOWAIT unknown to this kernel or file
                // system: the blocking read will do.
                Some(libc::EAGAIN | libc::EOPNOTSUPP | libc::EINVAL | libc::EINTR) => Ok(None),
                _ => Err(Error::io(&seg.path, "read", e).at(u64::from(ptr.offset))),
            };
        }
        // Part of the record was cached: the rest would wait.
        if (n as usize) < len {
            return Ok(None);
        }
        // SAFETY: the kernel wrote all `len` bytes past `start`.
        unsafe { buf.set_len(start + len) };
        match format::check_record(&buf[start..]) {
            Ok(f) => Ok(Some(Placed::of(start, f))),
            Err(r) => {
                buf.truncate(start);
                Err(Error::corrupt(
                    &self.dir.join(name(ptr.segment)),
                    u64::from(ptr.offset),
                    r,
                ))
            }
        }
    }

    /// Writes and fsyncs the buffers, then asks the kernel to drop every
    /// segment's pages from the page cache (`posix_fadvise(DONTNEED)`),
    /// so the next reads go to the disk: for tests of the readers that do
    /// not wait. Clean pages only are dropped, hence the fsync.
    pub fn drop_cache(&self) -> Result<(), Error> {
        self.sync()?;
        let segs: Vec<_> = self.segments.read().values().cloned().collect();
        use std::os::fd::AsRawFd;
        for s in segs {
            s.file
                .sync_data()
                .map_err(|e| Error::io(&s.path, "fsync", e))?;
            // SAFETY: a plain advice call on an open descriptor.
            unsafe { libc::posix_fadvise(s.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        Ok(())
    }
}
