//! Reading a snapshot: into an engine at start-up (`load`), or only to
//! check it (`check`, behind `cairn check-snapshot FILE`).
//!
//! Every section is verified before it is used: the header's magic,
//! version and CRC; each block's length against the file's size (so a
//! corrupt length cannot make a huge allocation) and its CRC before any
//! record in it is decoded; the end section's counts against what was
//! read; nothing after it. Any failure names the file, the byte offset and
//! the reason, and nothing is guessed or skipped.
use super::format::{
    self, BuildLimits, Decoder, Record, Section, BLOCK_HEADER_LEN, END_LEN, HEADER_LEN,
};
use cairn_engine::{Engine, Expiry};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A snapshot that cannot be read: file, byte offset and reason.
#[derive(Debug)]
pub struct LoadError {
    pub path: PathBuf,
    pub offset: u64,
    pub reason: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at offset {}: {}",
            self.path.display(),
            self.offset,
            self.reason
        )
    }
}

impl std::error::Error for LoadError {}

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
    /// Load keys whose expire time has passed too (the journal's base:
    /// the journal after it may write to them as they were at the cut,
    /// as Redis loads an AOF's RDB preamble). They go on first lookup.
    pub keep_expired: bool,
}

/// Reads the snapshot at `path` into `engine` (which should be empty:
/// a key already present is reported as a duplicate). Keys whose expire
/// time has passed are skipped. `progress` is called after each block.
pub fn load(
    engine: &Engine,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(&LoadProgress),
) -> Result<LoadStats, LoadError> {
    let limits = BuildLimits::of(engine);
    let dbs = engine.databases();
    let now = cairn_engine::clock::now_ms();
    let mut expired = 0u64;
    let mut stats = read(path, &limits, opts, progress, &mut |rec| {
        if rec.db >= dbs {
            return Err(format!(
                "key in database {} but this server has {dbs} databases (raise `databases`)",
                rec.db
            ));
        }
        if !opts.keep_expired && rec.expire_at != 0 && rec.expire_at < now {
            expired += 1;
            return Ok(());
        }
        let k = engine.key(rec.key);
        let mut g = engine.lock(&k);
        let expiry = match rec.expire_at {
            0 => Expiry::Clear,
            t => Expiry::At(t),
        };
        if g.set(rec.db, &k, rec.value, expiry).is_some() {
            return Err(format!(
                "duplicate key '{}' in database {}",
                String::from_utf8_lossy(&rec.key[..rec.key.len().min(128)]),
                rec.db
            ));
        }
        Ok(())
    })?;
    stats.keys -= expired;
    stats.expired = expired;
    Ok(stats)
}

/// Reads and verifies the whole snapshot at `path` without loading it:
/// every CRC, every record decoded into a value (with Redis's default
/// encoding limits) and the end counts.
pub fn check(path: &Path) -> Result<LoadStats, LoadError> {
    read(
        path,
        &BuildLimits::default(),
        &LoadOptions::default(),
        &mut |_| {},
        &mut |_| Ok(()),
    )
}

/// Reads the file section by section, handing each record to `visit`.
fn read(
    path: &Path,
    limits: &BuildLimits,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(&LoadProgress),
    visit: &mut dyn FnMut(Record<'_>) -> Result<(), String>,
) -> Result<LoadStats, LoadError> {
    let fail = |offset: u64, reason: String| LoadError {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let file = File::open(path).map_err(|e| fail(0, format!("cannot open: {e}")))?;
    let total = file
        .metadata()
        .map_err(|e| fail(0, format!("cannot stat: {e}")))?
        .len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; HEADER_LEN];
    read_exact(&mut r, &mut head).map_err(|e| fail(0, short_read("header", e)))?;
    if head.starts_with(format::REDIS_MAGIC) {
        return Err(fail(
            0,
            "this is a Redis RDB file; Cairn reads only its own snapshot format".into(),
        ));
    }
    if &head[..8] != format::MAGIC {
        return Err(fail(0, "not a Cairn snapshot (bad magic)".into()));
    }
    let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if version != format::VERSION {
        return Err(fail(
            8,
            format!(
                "snapshot format version {version}; this Cairn reads version {}",
                format::VERSION
            ),
        ));
    }
    let flags = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes"));
    if flags != 0 {
        return Err(fail(12, format!("unknown header flags {flags:#x}")));
    }
    check_crc(&head[28..32], &[&head[..28]]).map_err(|r| fail(28, format!("header {r}")))?;
    let mut stats = LoadStats {
        cut_ms: u64::from_le_bytes(head[16..24].try_into().expect("8 bytes")),
        ..LoadStats::default()
    };
    let mut pos = HEADER_LEN as u64;
    let mut payload = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        read_exact(&mut r, &mut tag).map_err(|e| {
            fail(
                pos,
                match e {
                    Short::Eof => "truncated: the file ends before its end marker".into(),
                    Short::Io(e) => format!("read error: {e}"),
                },
            )
        })?;
        match tag[0] {
            t if t == Section::Block as u8 => {
                let mut h = [0u8; BLOCK_HEADER_LEN];
                h[0] = t;
                read_exact(&mut r, &mut h[1..])
                    .map_err(|e| fail(pos, short_read("block header", e)))?;
                let records = u32::from_le_bytes(h[1..5].try_into().expect("4 bytes"));
                let len = u64::from_le_bytes(h[5..13].try_into().expect("8 bytes"));
                let body = pos + BLOCK_HEADER_LEN as u64;
                if len > total.saturating_sub(body) {
                    return Err(fail(
                        pos,
                        format!(
                            "block of {len} bytes runs past the end of the file ({} bytes left): truncated or corrupt",
                            total.saturating_sub(body)
                        ),
                    ));
                }
                payload.clear();
                payload.resize(len as usize, 0);
                read_exact(&mut r, &mut payload).map_err(|e| fail(body, short_read("block", e)))?;
                check_crc(&h[13..17], &[&h[..13], &payload])
                    .map_err(|r| fail(pos, format!("block {r}")))?;
                let mut d = Decoder::new(&payload);
                let mut n = 0u32;
                while !d.at_end() {
                    let at = body + d.pos() as u64;
                    let rec = d
                        .record(limits)
                        .map_err(|e| fail(body + e.pos as u64, e.reason))?;
                    visit(rec).map_err(|reason| fail(at, reason))?;
                    n = n.saturating_add(1);
                }
                if n != records {
                    return Err(fail(
                        pos,
                        format!("block holds {n} records but its header says {records}"),
                    ));
                }
                stats.keys += u64::from(n);
                stats.blocks += 1;
                pos = body + len;
                progress(&LoadProgress {
                    bytes_read: pos,
                    total_bytes: total,
                    keys: stats.keys,
                });
                if !opts.key_delay.is_zero() {
                    std::thread::sleep(opts.key_delay * n);
                }
            }
            t if t == Section::End as u8 => {
                let mut e = [0u8; END_LEN];
                e[0] = t;
                read_exact(&mut r, &mut e[1..])
                    .map_err(|er| fail(pos, short_read("end marker", er)))?;
                check_crc(&e[17..21], &[&e[..17]])
                    .map_err(|r| fail(pos, format!("end marker {r}")))?;
                let keys = u64::from_le_bytes(e[1..9].try_into().expect("8 bytes"));
                let blocks = u64::from_le_bytes(e[9..17].try_into().expect("8 bytes"));
                if keys != stats.keys || blocks != stats.blocks {
                    return Err(fail(
                        pos,
                        format!(
                            "end marker counts {keys} keys in {blocks} blocks but the file holds {} in {}",
                            stats.keys, stats.blocks
                        ),
                    ));
                }
                pos += END_LEN as u64;
                if pos != total {
                    return Err(fail(
                        pos,
                        format!("{} bytes after the end marker", total.saturating_sub(pos)),
                    ));
                }
                stats.bytes = total;
                return Ok(stats);
            }
            t => {
                return Err(fail(
                    pos,
                    format!("unknown section tag {t:#04x} (corrupt file)"),
                ))
            }
        }
    }
}

/// Compares a stored CRC (0 = not computed) with the CRC of `parts`.
fn check_crc(stored: &[u8], parts: &[&[u8]]) -> Result<(), String> {
    let stored = u32::from_le_bytes(stored.try_into().expect("4 bytes"));
    if stored == 0 {
        return Ok(());
    }
    let actual = format::crc(parts);
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

fn short_read(what: &str, e: Short) -> String {
    match e {
        Short::Eof => format!("truncated: the file ends inside the {what}"),
        Short::Io(e) => format!("read error in the {what}: {e}"),
    }
}
