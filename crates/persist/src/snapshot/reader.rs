//! Reading a snapshot: into an engine at start-up (`load`), or only to
//! check it (`check`, behind `cairn check-snapshot FILE`). `load` also
//! takes a Redis RDB file, recognised by its magic (`crate::rdb::file`).
//!
//! Every section is verified before it is used: the header's magic,
//! version and CRC (CRC-32C, or CRC-32 IEEE in a version-1 file); each block's length against the file's size (so a
//! corrupt length cannot make a huge allocation) and its CRC before any
//! record in it is decoded; the end section's counts against what was
//! read; nothing after it. Any failure is a `crate::Error` naming the
//! file, the byte offset and the reason, and nothing is guessed or skipped.
//! Codebook sections (issue 20) are checked the same way; a load installs
//! them into the process (`cairn_engine::value::codebooks`) before the
//! blocks that follow are decoded, so loaded hashes are coded as before
//! the restart.
use super::format::{
    self, BuildLimits, Checksum, Decoder, Record, Section, BLOCK_HEADER_LEN, BOOK_LEN, END_LEN,
    HEADER_LEN,
};
use crate::{Error, ErrorKind};
use cairn_engine::Cx;
use cairn_engine::{Engine, Expiry};
use parking_lot::Mutex;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// What a load or check read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Keys stored into the engine (for `check`: keys read).
    pub keys: u64,
    /// Keys left out because their expire time had passed.
    pub expired: u64,
    pub blocks: u64,
    pub bytes: u64,
    /// Unix ms of the snapshot's cut.
    pub cut_ms: u64,
    /// The FUNCTION libraries' codes, for the server to load again.
    pub functions: Vec<Vec<u8>>,
    /// The replication state saved with the data, if any.
    pub repl: Option<super::ReplInfo>,
}

/// Where a load is, for progress lines.
#[derive(Clone, Copy, Debug)]
pub struct LoadProgress {
    pub bytes_read: u64,
    pub total_bytes: u64,
    pub keys: u64,
}

/// Load knobs.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Test knob (Redis's `key-load-delay`): sleep this long per key, so
    /// tests can watch a load in progress (the `-LOADING` reply) without
    /// gigabytes of data. Applied after each block, for its keys together.
    pub key_delay: Duration,
    /// Threads that decode and insert: 0 picks one per core (at most
    /// `MAX_LOAD_THREADS`) for files of 4 MiB or more, else 1.
    pub threads: usize,
    /// Run first on each loading thread this crate starts: the server
    /// registers the thread with its memory accounting, since the keys it
    /// allocates outlive it.
    pub thread_start: Option<fn()>,
    /// Load keys whose expire time has passed too (the journal's base:
    /// the journal after it may write to them as they were at the cut,
    /// as Redis loads an AOF's RDB preamble). They go on first lookup.
    pub keep_expired: bool,
    /// A key already present takes the loaded value instead of failing
    /// the load (DEBUG RELOAD MERGE: Redis's RDBFLAGS_ALLOW_DUP).
    pub replace_existing: bool,
}

/// Reads the snapshot (or RDB file) at `path` into `engine` (which should
/// be empty: a key already present is reported as a duplicate, unless
/// `replace_existing`). Keys whose expire
/// time has passed are skipped. `progress` is called after each block.
///
/// Blocks are decoded and inserted by several threads (one per core, at
/// most `MAX_LOAD_THREADS`) while this thread reads and checks the file:
/// inserting is mostly cache misses on the shard locks and tables, which
/// overlap well across cores. Keys are independent, so the order in which
/// blocks land does not matter.
pub fn load(
    engine: &Engine,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(&LoadProgress),
) -> Result<LoadStats, Error> {
    // A Redis dump.rdb in `dir` loads too: migrating is starting Cairn
    // where Redis kept its file.
    if crate::rdb::file::is_rdb(path) {
        return crate::rdb::file::load(engine, path, opts, progress);
    }
    let limits = BuildLimits::of(engine);
    let dbs = engine.databases();
    let now = cairn_engine::clock::now_ms();
    let expired = AtomicU64::new(0);
    // Compaction tells live records from dead ones by looking their keys
    // up: not while the keys that point at them are still being loaded.
    let _no_compaction = cairn_engine::tier::store().map(|_| cairn_engine::tier::hold_compaction());
    let mut stats = read(path, &limits, opts, true, progress, &|rec| {
        if rec.db >= dbs {
            return Err(format!(
                "key in database {} but this server has {dbs} databases (raise `databases`)",
                rec.db
            ));
        }
        if !opts.keep_expired && rec.expire_at != 0 && rec.expire_at < now {
            expired.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let k = engine.key(rec.key);
        let mut g = engine.lock(&Cx::DETACHED, &k);
        let expiry = match rec.expire_at {
            0 => Expiry::Clear,
            t => Expiry::At(t),
        };
        let replaced = match rec.tiered {
            Some((p, raw)) => {
                cairn_engine::tier::load_pointer(&mut g, rec.db, &k, p, raw, rec.expire_at)?
                    .is_some()
            }
            None => g.set(rec.db, &k, rec.value, expiry).is_some(),
        };
        if replaced && !opts.replace_existing {
            return Err(format!(
                "duplicate key '{}' in database {}",
                String::from_utf8_lossy(&rec.key[..rec.key.len().min(128)]),
                rec.db
            ));
        }
        Ok(())
    })?;
    let expired = expired.into_inner();
    stats.keys -= expired;
    stats.expired = expired;
    Ok(stats)
}

/// Reads and verifies the whole snapshot at `path` without loading it:
/// every CRC, every record decoded into a value (with Redis's default
/// encoding limits) and the end counts.
pub fn check(path: &Path) -> Result<LoadStats, Error> {
    read(
        path,
        &BuildLimits::default(),
        &LoadOptions::default(),
        false,
        &mut |_| {},
        &|_| Ok(()),
    )
}

/// Most threads a load decodes and inserts with.
const MAX_LOAD_THREADS: usize = 4;

/// A checked block on its way to a decoding thread.
struct Work {
    /// File offset of the block and of its payload.
    pos: u64,
    body: u64,
    records: u32,
    payload: Vec<u8>,
}

/// Decodes one block's records and hands each to `visit`.
fn decode_block(
    w: &Work,
    limits: &BuildLimits,
    visit: &(dyn Fn(Record<'_>) -> Result<(), String> + Sync),
) -> Result<u32, (u64, String)> {
    let mut d = Decoder::new(&w.payload);
    let mut n = 0u32;
    while !d.at_end() {
        let at = w.body + d.pos() as u64;
        let rec = d
            .record(limits)
            .map_err(|e| (w.body + e.pos as u64, e.reason))?;
        visit(rec).map_err(|reason| (at, reason))?;
        n = n.saturating_add(1);
    }
    if n != w.records {
        return Err((
            w.pos,
            format!("block holds {n} records but its header says {}", w.records),
        ));
    }
    Ok(n)
}

/// Reads the file section by section on this thread, checking every
/// section's framing and CRC, and has `visit` called for each record on
/// decoding threads.
fn read(
    path: &Path,
    limits: &BuildLimits,
    opts: &LoadOptions,
    install_books: bool,
    progress: &mut dyn FnMut(&LoadProgress),
    visit: &(dyn Fn(Record<'_>) -> Result<(), String> + Sync),
) -> Result<LoadStats, Error> {
    let fail = |offset: u64, kind: ErrorKind| Error {
        path: path.to_path_buf(),
        offset: Some(offset),
        kind,
    };
    let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
    let total = file
        .metadata()
        .map_err(|e| Error::io(path, "stat", e))?
        .len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let (cut_ms, sum) = read_header(&mut r).map_err(|(o, kind)| fail(o, kind))?;
    let threads = if opts.threads > 0 {
        opts.threads.min(MAX_LOAD_THREADS)
    } else if total < (4 << 20) {
        1
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, MAX_LOAD_THREADS)
    };
    let keys = AtomicU64::new(0);
    // Dictionaries installed from the file, each with a use held until
    // the records that name them hold theirs.
    let imported: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    // The first decoding error (lowest offset wins when several race).
    let failed: Mutex<Option<(u64, String)>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let note = |e: (u64, String)| {
        let mut f = failed.lock();
        if f.as_ref().is_none_or(|cur| e.0 < cur.0) {
            *f = Some(e);
        }
        stop.store(true, Ordering::Relaxed);
    };
    let run = |w: Work| {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match decode_block(&w, limits, visit) {
            Ok(n) => {
                keys.fetch_add(u64::from(n), Ordering::Relaxed);
                if !opts.key_delay.is_zero() {
                    std::thread::sleep(opts.key_delay * n);
                }
            }
            Err(e) => note(e),
        }
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<Work>(threads * 2);
    let rx = Mutex::new(rx);
    let framing = std::thread::scope(|scope| {
        let mut workers = Vec::new();
        if threads > 1 {
            for _ in 0..threads {
                let (rx, run) = (&rx, &run);
                let start = opts.thread_start;
                workers.push(scope.spawn(move || loop {
                    if let Some(f) = start {
                        f();
                    }
                    let next = rx.lock().recv();
                    match next {
                        Ok(w) => run(w),
                        Err(_) => return,
                    }
                }));
            }
        }
        let mut sections = Sections {
            r: &mut r,
            total,
            pos: HEADER_LEN as u64,
            sum,
            blocks: 0,
            end: (0, 0),
            install_books,
            functions: Vec::new(),
            repl: None,
            imported: &imported,
        };
        let result = loop {
            if stop.load(Ordering::Relaxed) {
                break Ok(None);
            }
            match sections.next() {
                Ok(Some(w)) => {
                    let done = w.body + w.payload.len() as u64;
                    if threads > 1 {
                        if tx.send(w).is_err() {
                            break Ok(None);
                        }
                    } else {
                        run(w);
                    }
                    progress(&LoadProgress {
                        bytes_read: done,
                        total_bytes: total,
                        keys: keys.load(Ordering::Relaxed),
                    });
                }
                Ok(None) => {
                    break Ok(Some((
                        sections.pos,
                        sections.blocks,
                        sections.end,
                        std::mem::take(&mut sections.functions),
                        sections.repl.take(),
                    )))
                }
                Err(e) => break Err(e),
            }
        };
        drop(tx);
        for w in workers {
            // A decoding thread that panicked is a bug; say so, don't hang.
            if w.join().is_err() {
                note((0, "internal error: a loading thread panicked".into()));
            }
        }
        result
    });
    for id in imported.into_inner() {
        cairn_engine::value::zcomp::Dicts::unpin(id);
    }
    if let Some((offset, reason)) = failed.into_inner() {
        return Err(Error::corrupt(path, offset, reason));
    }
    let Some((end_pos, blocks, (end_keys, end_blocks), functions, repl)) =
        framing.map_err(|(o, kind)| fail(o, kind))?
    else {
        return Err(Error::corrupt(
            path,
            0,
            "internal error: load stopped without a reason",
        ));
    };
    let keys = keys.into_inner();
    if end_keys != keys || end_blocks != blocks {
        return Err(Error::corrupt(
            path,
            end_pos,
            format!(
                "end marker counts {end_keys} keys in {end_blocks} blocks but the file holds {keys} in {blocks}"
            ),
        ));
    }
    Ok(LoadStats {
        keys,
        expired: 0,
        blocks,
        bytes: total,
        cut_ms,
        functions,
        repl,
    })
}

/// Where reading stopped and why.
type Fail = (u64, ErrorKind);

fn corrupt(offset: u64, reason: impl Into<String>) -> Fail {
    (offset, ErrorKind::Corrupt(reason.into()))
}

/// Checks the header; returns the cut time and the version's checksum.
fn read_header(r: &mut impl Read) -> Result<(u64, Checksum), Fail> {
    let mut head = [0u8; HEADER_LEN];
    read_exact(r, &mut head).map_err(|e| (0, short_read("header", e)))?;
    if head.starts_with(format::REDIS_MAGIC) {
        return Err(corrupt(
            0,
            "this is a Redis RDB file; Cairn reads only its own snapshot format",
        ));
    }
    if &head[..8] != format::MAGIC {
        return Err(corrupt(0, "not a Cairn snapshot (bad magic)"));
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    let Some(sum) = Checksum::of_version(version) else {
        return Err(corrupt(
            8,
            format!(
                "snapshot format version {version}; this Cairn reads versions {} to {}",
                format::OLDEST_READ,
                format::TIER_VERSION
            ),
        ));
    };
    let flags = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
    if flags != 0 {
        return Err(corrupt(12, format!("unknown header flags {flags:#x}")));
    }
    check_crc(sum, &head[28..32], &[&head[..28]])
        .map_err(|r| corrupt(28, format!("header {r}")))?;
    let cut_ms = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    Ok((cut_ms, sum))
}

/// The file's sections after the header, one block at a time.
struct Sections<'a, R> {
    r: &'a mut R,
    total: u64,
    pos: u64,
    /// The checksum of the file's version.
    sum: Checksum,
    blocks: u64,
    /// The end section's (keys, blocks), once read.
    end: (u64, u64),
    /// Install the codebooks read into this process (a load; not a check).
    install_books: bool,
    /// The functions section's library codes, once read.
    functions: Vec<Vec<u8>>,
    /// The replication section's state, once read.
    repl: Option<super::ReplInfo>,
    /// Dictionaries installed from a dictionaries section (a load).
    imported: &'a Mutex<Vec<u16>>,
}

impl<R: Read> Sections<'_, R> {
    /// The next block, checked (length and CRC); None at a valid end
    /// section followed by nothing.
    fn next(&mut self) -> Result<Option<Work>, Fail> {
        loop {
            if let Some(w) = self.section()? {
                return Ok(w);
            }
        }
    }

    /// One section: `Some(next())`'s answer for a block or the end, `None`
    /// after a codebook (installed, if loading).
    fn section(&mut self) -> Result<Option<Option<Work>>, Fail> {
        let pos = self.pos;
        let mut tag = [0u8; 1];
        read_exact(self.r, &mut tag).map_err(|e| match e {
            Short::Eof => corrupt(pos, "truncated: the file ends before its end marker"),
            Short::Io(source) => (pos, ErrorKind::Io { op: "read", source }),
        })?;
        match tag[0] {
            t if t == Section::Block as u8 => {
                let mut h = [0u8; BLOCK_HEADER_LEN];
                h[0] = t;
                read_exact(self.r, &mut h[1..])
                    .map_err(|e| (pos, short_read("block header", e)))?;
                let records = u32::from_le_bytes(h[1..5].try_into().expect("4 bytes"));
                let len = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
                let body = pos + BLOCK_HEADER_LEN as u64;
                let left = self.total.saturating_sub(body);
                if len > left {
                    return Err(corrupt(
                        pos,
                        format!(
                            "block of {len} bytes runs past the end of the file ({left} bytes left): truncated or corrupt"
                        ),
                    ));
                }
                let mut payload = vec![0u8; len as usize];
                read_exact(self.r, &mut payload).map_err(|e| (body, short_read("block", e)))?;
                check_crc(self.sum, &h[13..17], &[&h[..13], &payload])
                    .map_err(|r| corrupt(pos, format!("block {r}")))?;
                self.pos = body + len;
                self.blocks += 1;
                Ok(Some(Some(Work {
                    pos,
                    body,
                    records,
                    payload,
                })))
            }
            t if t == Section::Codebook as u8 => {
                let mut b = [0u8; BOOK_LEN];
                b[0] = t;
                read_exact(self.r, &mut b[1..]).map_err(|e| (pos, short_read("codebook", e)))?;
                check_crc(self.sum, &b[259..263], &[&b[..259]])
                    .map_err(|r| corrupt(pos, format!("codebook {r}")))?;
                if b[2] > 1 {
                    return Err(corrupt(
                        pos + 2,
                        format!("codebook flag {} (corrupt file)", b[2]),
                    ));
                }
                let lens: &[u8; 256] = b[3..259].try_into().expect("256 bytes");
                if cairn_engine::util::huff::Codebook::from_lens(lens).is_none() {
                    return Err(corrupt(pos + 3, "codebook lengths do not form a code"));
                }
                if self.install_books {
                    // Refused only if this process already holds another
                    // book under the id: values then code with the books
                    // it has, which changes their size, not their bytes.
                    cairn_engine::value::codebooks::install(b[1], lens, b[2] == 1);
                }
                self.pos = pos + BOOK_LEN as u64;
                Ok(None)
            }
            t if t == Section::Functions as u8 => {
                let mut h = [0u8; format::FUNCTIONS_HEADER_LEN];
                h[0] = t;
                read_exact(self.r, &mut h[1..])
                    .map_err(|e| (pos, short_read("functions header", e)))?;
                let count = u32::from_le_bytes(h[1..5].try_into().expect("4 bytes"));
                let len = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
                let body = pos + format::FUNCTIONS_HEADER_LEN as u64;
                if len > self.total.saturating_sub(body) {
                    return Err(corrupt(
                        pos,
                        "functions section runs past the end of the file",
                    ));
                }
                let mut payload = vec![0u8; len as usize];
                read_exact(self.r, &mut payload).map_err(|e| (body, short_read("functions", e)))?;
                check_crc(self.sum, &h[13..17], &[&h[..13], &payload])
                    .map_err(|r| corrupt(pos, format!("functions section {r}")))?;
                self.functions = format::parse_functions(&payload, count)
                    .ok_or_else(|| corrupt(body, "functions section is malformed"))?;
                self.pos = body + len;
                Ok(None)
            }
            t if t == Section::Repl as u8 => {
                let mut h = [0u8; format::FUNCTIONS_HEADER_LEN];
                h[0] = t;
                read_exact(self.r, &mut h[1..])
                    .map_err(|e| (pos, short_read("replication header", e)))?;
                let count = u32::from_le_bytes(h[1..5].try_into().expect("4 bytes"));
                let len = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
                let body = pos + format::FUNCTIONS_HEADER_LEN as u64;
                if len > self.total.saturating_sub(body).min(1 << 16) {
                    return Err(corrupt(
                        pos,
                        "replication section runs past the end of the file",
                    ));
                }
                let mut payload = vec![0u8; len as usize];
                read_exact(self.r, &mut payload)
                    .map_err(|e| (body, short_read("replication", e)))?;
                check_crc(self.sum, &h[13..17], &[&h[..13], &payload])
                    .map_err(|r| corrupt(pos, format!("replication section {r}")))?;
                self.repl = Some(
                    format::parse_repl_info(&payload, count)
                        .ok_or_else(|| corrupt(body, "replication section is malformed"))?,
                );
                self.pos = body + len;
                Ok(None)
            }
            t if t == Section::Dicts as u8 => {
                let mut h = [0u8; format::FUNCTIONS_HEADER_LEN];
                h[0] = t;
                read_exact(self.r, &mut h[1..])
                    .map_err(|e| (pos, short_read("dictionaries header", e)))?;
                let count = u32::from_le_bytes(h[1..5].try_into().expect("4 bytes"));
                let len = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
                let body = pos + format::FUNCTIONS_HEADER_LEN as u64;
                if len > self.total.saturating_sub(body) {
                    return Err(corrupt(
                        pos,
                        "dictionaries section runs past the end of the file",
                    ));
                }
                let mut payload = vec![0u8; len as usize];
                read_exact(self.r, &mut payload)
                    .map_err(|e| (body, short_read("dictionaries", e)))?;
                check_crc(self.sum, &h[13..17], &[&h[..13], &payload])
                    .map_err(|r| corrupt(pos, format!("dictionaries section {r}")))?;
                let list = format::parse_dicts(&payload, count)
                    .ok_or_else(|| corrupt(body, "dictionaries section is malformed"))?;
                if self.install_books {
                    for (id, codec, raw) in list {
                        cairn_engine::value::zcomp::Dicts::import(id, codec, &raw)
                            .map_err(|r| corrupt(body, r))?;
                        self.imported.lock().push(id);
                    }
                }
                self.pos = body + len;
                Ok(None)
            }
            t if t == Section::Names as u8 => {
                let mut h = [0u8; format::FUNCTIONS_HEADER_LEN];
                h[0] = t;
                read_exact(self.r, &mut h[1..])
                    .map_err(|e| (pos, short_read("names header", e)))?;
                let count = u32::from_le_bytes(h[1..5].try_into().expect("4 bytes"));
                let len = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
                let body = pos + format::FUNCTIONS_HEADER_LEN as u64;
                if len > self.total.saturating_sub(body) {
                    return Err(corrupt(pos, "names section runs past the end of the file"));
                }
                let mut payload = vec![0u8; len as usize];
                read_exact(self.r, &mut payload).map_err(|e| (body, short_read("names", e)))?;
                check_crc(self.sum, &h[13..17], &[&h[..13], &payload])
                    .map_err(|r| corrupt(pos, format!("names section {r}")))?;
                let lists = format::parse_names(&payload, count)
                    .ok_or_else(|| corrupt(body, "names section is malformed"))?;
                if self.install_books {
                    // A list the table cannot take (full, too long) only
                    // leaves the hashes that use it with their names
                    // inline.
                    for l in &lists {
                        cairn_engine::value::names::install(l);
                    }
                }
                self.pos = body + len;
                Ok(None)
            }
            t if t == Section::End as u8 => {
                let mut e = [0u8; END_LEN];
                e[0] = t;
                read_exact(self.r, &mut e[1..])
                    .map_err(|er| (pos, short_read("end marker", er)))?;
                check_crc(self.sum, &e[17..21], &[&e[..17]])
                    .map_err(|r| corrupt(pos, format!("end marker {r}")))?;
                self.end = (
                    u64::from_le_bytes(e[1..9].try_into().expect("8 bytes")),
                    u64::from_le_bytes(e[9..17].try_into().expect("8 bytes")),
                );
                let after = pos + END_LEN as u64;
                if after != self.total {
                    // Reported at the marker, not after it: a damaged tag
                    // can make another section read as an end marker whose
                    // CRC field is 0 ("not computed"; a fixed-width book's
                    // code lengths hold runs of zeros), and the damage is
                    // where the marker starts.
                    return Err(corrupt(
                        pos,
                        format!(
                            "{} bytes after the end marker",
                            self.total.saturating_sub(after)
                        ),
                    ));
                }
                Ok(Some(None))
            }
            t => Err(corrupt(
                pos,
                format!("unknown section tag {t:#04x} (corrupt file)"),
            )),
        }
    }
}

/// Compares a stored CRC (0 = not computed) with the CRC of `parts`.
fn check_crc(sum: Checksum, stored: &[u8], parts: &[&[u8]]) -> Result<(), String> {
    let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
    if stored == 0 {
        return Ok(());
    }
    let actual = sum.of(parts);
    if stored != actual {
        return Err(format!(
            "checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        ));
    }
    Ok(())
}

enum Short {
    Eof,
    Io(io::Error),
}

fn read_exact(r: &mut impl Read, buf: &mut [u8]) -> Result<(), Short> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Short::Eof
        } else {
            Short::Io(e)
        }
    })
}

fn short_read(what: &str, e: Short) -> ErrorKind {
    match e {
        Short::Eof => ErrorKind::Corrupt(format!("truncated: the file ends inside the {what}")),
        Short::Io(source) => ErrorKind::Io { op: "read", source },
    }
}
