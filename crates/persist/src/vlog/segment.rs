//! One segment file of a value log: its counters, the recovery scan at
//! open (a torn tail is cut, corruption is refused) and the sequential
//! walk compaction uses. Appending belongs to `log.rs`; the bytes to
//! `format.rs`.
//!
//! **Torn or corrupt.** A record that cannot be read whole (the file ends
//! inside it, or its checksum fails) is a torn tail, left by a crash while
//! the last buffer was being written, when no whole, valid record follows
//! it anywhere in the file; otherwise it is damage in the middle, and the
//! open fails naming the file and the offset. Looking for a valid record
//! after the damage, rather than asking only whether bytes follow it,
//! also tells a flipped length bit (which makes a record seem to run past
//! the end of the file) from a tail that was never written.
use super::format::{self, Header, Ptr, RecordRef, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::Error;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes read at a time by the scans (recovery, compaction).
const WINDOW: usize = 1 << 20;

pub(crate) struct Segment {
    pub seq: u32,
    pub path: PathBuf,
    pub file: File,
    /// Bytes at the start of the file that hold the header and whole
    /// records: a read past it is refused. Grows as the tail's buffer is
    /// written (Release, read with Acquire, so a reader that sees it sees
    /// the bytes in the file).
    pub end: AtomicU64,
    /// What the caller says is still referenced (`Log::free`,
    /// `Log::mark_live`, and every append).
    pub live_bytes: AtomicU64,
    pub live_records: AtomicU64,
    /// An fsync of this file failed: the kernel may have dropped its dirty
    /// pages, so nothing more is appended to it and compaction should move
    /// its live records (checked by CRC as they are read) first.
    pub suspect: AtomicBool,
}

impl Segment {
    pub fn new(seq: u32, path: PathBuf, file: File, end: u64) -> Segment {
        Segment {
            seq,
            path,
            file,
            end: AtomicU64::new(end),
            live_bytes: AtomicU64::new(0),
            live_records: AtomicU64::new(0),
            suspect: AtomicBool::new(false),
        }
    }

    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    pub fn add_live(&self, len: u64) {
        self.live_bytes.fetch_add(len, Ordering::Relaxed);
        self.live_records.fetch_add(1, Ordering::Relaxed);
    }

    /// Saturating: freeing twice is the caller's bug, and a wrapped
    /// counter would make the segment look full forever.
    pub fn sub_live(&self, len: u64) {
        let sub = |a: &AtomicU64, n: u64| {
            let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(n))
            });
        };
        debug_assert!(self.live_bytes.load(Ordering::Relaxed) >= len);
        sub(&self.live_bytes, len);
        sub(&self.live_records, 1);
    }

    /// Opens segment `seq` of `group` at `path` and scans it. A torn tail
    /// is cut off the file. None: the file is shorter than its header (a
    /// crash right after it was created), and has been removed.
    pub fn recover(path: &Path, group: u16, seq: u32) -> Result<Option<Segment>, Error> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, "open", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(path, "stat", e))?
            .len();
        if len < SEGMENT_HEADER_LEN {
            drop(file);
            std::fs::remove_file(path).map_err(|e| Error::io(path, "remove", e))?;
            return Ok(None);
        }
        let mut sc = Scanner::new(&file, len);
        let mut h = [0u8; SEGMENT_HEADER_LEN as usize];
        h.copy_from_slice(
            sc.get(0, SEGMENT_HEADER_LEN as usize)
                .map_err(|e| Error::io(path, "read", e).at(0))?
                .expect("the file is at least a header long"),
        );
        if h.iter().all(|&b| b == 0) && all_zero(&mut sc).map_err(|e| Error::io(path, "read", e))? {
            // Created and extended, but no byte of it reached the disk (a
            // crash before the first write was flushed): never used.
            drop(file);
            std::fs::remove_file(path).map_err(|e| Error::io(path, "remove", e))?;
            return Ok(None);
        }
        let (g, s) = format::parse_segment_header(&h).map_err(|r| Error::corrupt(path, 0, r))?;
        if g != group || s != seq {
            return Err(Error::corrupt(
                path,
                0,
                format!("segment header names group {g} segment {s}, expected group {group} segment {seq}"),
            ));
        }
        let mut off = SEGMENT_HEADER_LEN;
        let read_err = |e: io::Error, at: u64| Error::io(path, "read", e).at(at);
        while off < len {
            match try_record(&mut sc, off).map_err(|e| read_err(e, off))? {
                Try::Whole(n) => off = format::padded(off + n),
                Try::Fatal(reason) => return Err(Error::corrupt(path, off, reason)),
                Try::Bad(reason) => {
                    if let Some(next) =
                        find_record_after(&mut sc, off).map_err(|e| read_err(e, off))?
                    {
                        return Err(Error::corrupt(
                            path,
                            off,
                            format!("{reason}, and a whole record follows at offset {next}"),
                        ));
                    }
                    // Torn tail: cut it so the file ends with whole records.
                    file.set_len(off)
                        .map_err(|e| Error::io(path, "truncate", e).at(off))?;
                    file.sync_all().map_err(|e| Error::io(path, "fsync", e))?;
                    break;
                }
            }
        }
        // A last record whose padding was not all written still counts as
        // whole: `off` may then be past the file's end.
        let end = off.min(len.max(SEGMENT_HEADER_LEN));
        Ok(Some(Segment::new(seq, path.to_path_buf(), file, end)))
    }

    /// Calls `f` with the pointer and the fields of every record, in
    /// order. Every record is checked: damage is an error naming the
    /// offset (a sealed segment has no torn tail; `recover` cut it).
    pub fn walk(
        &self,
        mut f: impl FnMut(Ptr, RecordRef<'_>, &[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let end = self.end();
        let mut sc = Scanner::new(&self.file, end);
        let mut off = SEGMENT_HEADER_LEN;
        while off < end {
            let corrupt = |r: String| Error::corrupt(&self.path, off, r);
            let head = sc
                .get(off, RECORD_HEADER_LEN)
                .map_err(|e| Error::io(&self.path, "read", e).at(off))?
                .ok_or_else(|| corrupt("file ends inside a record header".into()))?;
            let n = Header::parse(head).record_len();
            let rec = sc
                .get(off, n as usize)
                .map_err(|e| Error::io(&self.path, "read", e).at(off))?
                .ok_or_else(|| corrupt("record runs past the end of the segment".into()))?;
            let r = format::check_record(rec).map_err(corrupt)?;
            let ptr = Ptr {
                segment: self.seq,
                offset: off as u32,
                len: n as u32,
            };
            f(ptr, r, rec)?;
            off = format::padded(off + n);
        }
        Ok(())
    }
}

enum Try {
    /// A whole, valid record of this many bytes (padding excluded).
    Whole(u64),
    /// Unreadable: torn or corrupt, as what follows decides.
    Bad(String),
    /// A whole record with a good checksum that this version cannot use.
    Fatal(String),
}

fn try_record(sc: &mut Scanner<'_>, off: u64) -> io::Result<Try> {
    let Some(head) = sc.get(off, RECORD_HEADER_LEN)? else {
        return Ok(Try::Bad("file ends inside a record header".into()));
    };
    let n = Header::parse(head).record_len();
    let Some(rec) = sc.get(off, n as usize)? else {
        return Ok(Try::Bad("record runs past the end of the file".into()));
    };
    Ok(match format::check_record(rec) {
        Ok(_) => Try::Whole(n),
        Err(r) if r.starts_with("unknown record kind") => Try::Fatal(r),
        Err(r) => Try::Bad(r),
    })
}

/// The first aligned offset after `off` where a whole, valid record
/// starts. Only called on damage; a torn tail is at most a buffer long.
fn find_record_after(sc: &mut Scanner<'_>, off: u64) -> io::Result<Option<u64>> {
    let mut p = off + format::ALIGN;
    while p + RECORD_HEADER_LEN as u64 <= sc.len {
        if let Try::Whole(_) | Try::Fatal(_) = try_record(sc, p)? {
            return Ok(Some(p));
        }
        p += format::ALIGN;
    }
    Ok(None)
}

fn all_zero(sc: &mut Scanner<'_>) -> io::Result<bool> {
    let mut off = 0;
    while off < sc.len {
        let n = (sc.len - off).min(WINDOW as u64) as usize;
        let chunk = sc.get(off, n)?.expect("inside the file");
        if chunk.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        off += n as u64;
    }
    Ok(true)
}

/// Reads a file through a window of `WINDOW` bytes, so a scan costs one
/// pread per MiB instead of two per record.
pub(crate) struct Scanner<'a> {
    file: &'a File,
    pub len: u64,
    start: u64,
    win: Vec<u8>,
}

impl<'a> Scanner<'a> {
    pub fn new(file: &'a File, len: u64) -> Scanner<'a> {
        Scanner {
            file,
            len,
            start: 0,
            win: Vec::new(),
        }
    }

    /// `n` bytes at `off`, or None when they run past `len`.
    pub fn get(&mut self, off: u64, n: usize) -> io::Result<Option<&[u8]>> {
        let Some(stop) = off.checked_add(n as u64) else {
            return Ok(None);
        };
        if stop > self.len {
            return Ok(None);
        }
        if off < self.start || stop > self.start + self.win.len() as u64 {
            let want = (n.max(WINDOW) as u64).min(self.len - off) as usize;
            self.win.resize(want, 0);
            self.file.read_exact_at(&mut self.win, off)?;
            self.start = off;
        }
        let s = (off - self.start) as usize;
        Ok(Some(&self.win[s..s + n]))
    }
}
