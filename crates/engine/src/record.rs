//! The deterministic record of each write, for the journal (issue 6).
//!
//! The engine knows no files: it only says, for every write, what to
//! append, and hands the bytes to a sink the server registers
//! (`Engine::set_journal`). What it records follows Redis 7.0's
//! propagation rules (`alsoPropagate`, `rewriteClientCommandVector`):
//!
//! - by default a command is recorded as it was sent (its argument vector,
//!   which the command's context lends for its duration: `crate::cx::Cx`),
//!   with the database it ran in, and only if it changed something (a
//!   `Guard` that wrote: Redis's dirty counter);
//! - a command whose effect depends on the clock or on chance stages its
//!   replacement with `stage` before its guard is dropped (SET EX ->
//!   SET PXAT, SPOP -> SREM of the popped members, INCRBYFLOAT -> SET of
//!   the result, ...);
//! - a key removed because it expired (lazily by a lookup, or by the active
//!   sweep) is recorded as `DEL key` before whatever the command did;
//! - a memcached write is recorded as the item's resulting state
//!   (`stage_item`: an `ITEM` record, with its client flags and absolute
//!   expire time), which only replay understands.
//!
//! Ordering: a guard commits its records when it is dropped, while its
//! shard locks are still held, so two writes to one key reach the journal
//! in the order they took effect. Inside EXEC (`Engine::hold_all`) the
//! records of every queued command are collected in the hold and committed
//! as one unit when the hold is released, so a transaction replays
//! entirely or not at all.
//!
//! Staged records live in the command's `CmdState` (`crate::cx`), not in
//! the thread: a command run inside another (a queued command of EXEC, a
//! script's call) stages into the state it shares with its caller.
//!
//! With no journal the cost is one relaxed load at each guard's drop.
//!
//! A record's bytes (the journal frames them; see docs/design.md):
//! ```text
//! record := tag:u8  db:varint  argc:varint  ( len:varint  bytes )*   (Command, Item)
//!          | tag:u8  db:varint  len:varint  bytes                       (Wire)
//! ```
//! varints are LEB128 (7 bits per byte, low first). Tags are append-only.
//!
//! A command recorded as sent is normally a `Wire` record: the request's
//! own bytes as the client sent them (`ArgSource::raw`), copied in one
//! piece, which the server's replay parses again. Encoding the arguments
//! one by one cost ~60 instructions per argument on every write (callgrind,
//! HSET `-P 16`: ~250 of the journal's ~810 per write); one copy of the
//! request costs a tenth of that. The engine never looks inside those
//! bytes.
use crate::cx::{Cx, Staged};
use crate::keyspace::{Engine, Guard, Key};
use crate::value::{StrValue, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Record tags. On disk: never renumber, only append.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// A command's argument vector, run in `db` on replay.
    Command = 1,
    /// A memcached item's whole state: args = key, value, client flags
    /// (u32 LE), expire time (Unix ms, u64 LE, 0 = none). Only replay
    /// accepts it; no client can send it.
    Item = 2,
    /// A command as the client sent it, in the server's request encoding
    /// (`ArgSource::raw`): one opaque argument, which only the server's
    /// replay parses (into the argument vector a `Command` would hold).
    Wire = 3,
}

impl Tag {
    pub fn from_u8(b: u8) -> Option<Tag> {
        match b {
            1 => Some(Tag::Command),
            2 => Some(Tag::Item),
            3 => Some(Tag::Wire),
            _ => None,
        }
    }
}

/// Where committed records go: the server's journal buffer. Each append
/// returns the end of the unit in the journal's stream (0 if nothing was
/// appended), which the command's context keeps (`CmdState`) so the
/// server knows what a reply must wait for.
pub trait Sink: Send + Sync {
    /// Appends one unit of records (one command's, or one transaction's)
    /// that must replay as a whole. Called with the writing command's shard
    /// locks held, so it must not block for long and never take a shard
    /// lock.
    fn append(&self, unit: &[u8]) -> u64 {
        self.append_with(&mut |out| out.extend_from_slice(unit))
    }

    /// Appends one unit that `fill` writes at the end of `out` (the sink's
    /// own buffer, so a command's record is encoded once, in place, with
    /// no copy in between). Writing nothing appends nothing. The same
    /// rules as `append`.
    fn append_with(&self, fill: &mut dyn FnMut(&mut Vec<u8>)) -> u64;

    /// Appends a unit of one `Wire` record (`put_wire`): a write command
    /// recorded as sent, with nothing before it. This is the record of
    /// nearly every write, so a sink may serve it without the closure and
    /// the general framing checks of `append_with`. The same rules.
    fn append_wire(&self, db: usize, raw: &[u8]) -> u64 {
        self.append_with(&mut |out| put_wire(out, db, raw))
    }
}

/// The longest LEB128 varint of a u64.
const VARINT_MAX: usize = 10;

/// The longest head of a `Wire` record: the tag and two varints.
pub const WIRE_HEAD_MAX: usize = 1 + VARINT_MAX + VARINT_MAX;

/// Writes a `Wire` record: `tag db:varint len:varint raw`.
///
/// This is the record of nearly every write, so it is built for speed:
/// the head is assembled in registers and the record lands with one
/// capacity check and two copies. Pushing byte by byte re-checked the
/// capacity and stored the length at every byte (~50 instructions per
/// record, callgrind).
#[inline]
pub fn put_wire(out: &mut Vec<u8>, db: usize, raw: &[u8]) {
    let mut head = [0u8; WIRE_HEAD_MAX];
    head[0] = Tag::Wire as u8;
    let n = varint_into(&mut head, 1, db as u64);
    let n = varint_into(&mut head, n, raw.len() as u64);
    out.reserve(WIRE_HEAD_MAX + raw.len());
    let len = out.len();
    // SAFETY: `reserve` made room for WIRE_HEAD_MAX + raw.len() bytes
    // after `len`. The whole head array is copied (a fixed-size copy the
    // compiler inlines), then `raw` right after its first `n` bytes, and
    // the length covers exactly the `n + raw.len()` bytes written.
    unsafe {
        let dst = out.as_mut_ptr().add(len);
        std::ptr::copy_nonoverlapping(head.as_ptr(), dst, WIRE_HEAD_MAX);
        std::ptr::copy_nonoverlapping(raw.as_ptr(), dst.add(n), raw.len());
        out.set_len(len + n + raw.len());
    }
}

/// Writes `v` as a LEB128 varint into `buf` at `at`; returns the end.
/// `buf` has room: a varint is at most `VARINT_MAX` bytes. The one encoder of the
/// record varints (`put_varint` goes through it too).
#[inline]
fn varint_into(buf: &mut [u8], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        buf[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    buf[at] = v as u8;
    at + 1
}

/// The argument vector of the running command, lent by the server.
pub trait ArgSource {
    fn argc(&self) -> usize;
    fn arg(&self, i: usize) -> &[u8];

    /// Writes the argument count, then every argument as `len bytes`
    /// (the record encoding; see `put_args`). A source with its arguments
    /// at hand overrides it with `put_args` over its own iterator, which
    /// saves a dynamic call per argument on every recorded write.
    fn put_args(&self, out: &mut Vec<u8>) {
        put_args(out, (0..self.argc()).map(|i| self.arg(i)));
    }

    /// The request's bytes exactly as received, when the server can replay
    /// them as they are (a `Wire` record); None to record the arguments.
    fn raw(&self) -> Option<&[u8]> {
        None
    }
}

/// Appends `argc:varint (len:varint bytes)*` for `args`: the argument
/// part of a record (`encode`).
pub fn put_args<'a>(out: &mut Vec<u8>, args: impl ExactSizeIterator<Item = &'a [u8]>) {
    put_varint(out, args.len() as u64);
    for a in args {
        put_varint(out, a.len() as u64);
        out.extend_from_slice(a);
    }
}

/// The engine's journal hook: a sink while the journal is on.
#[derive(Default)]
pub struct Hook {
    /// Commands lend their arguments (`Cx`): set before `on`, so
    /// no command can write after the switch without a record.
    armed: std::sync::atomic::AtomicBool,
    on: std::sync::atomic::AtomicBool,
    /// Replaying the journal: nothing expires (Redis: "don't expire
    /// anything while loading"), because every expiry that happened is in
    /// the journal as a DEL at the point it happened.
    pub(crate) loading: std::sync::atomic::AtomicBool,
    sink: SinkCell,
}

/// The current sink, read without a lock of its own: `set_journal` writes
/// it only with every shard locked (or before serving), and it is read
/// only by threads holding a shard lock, so the shard mutexes order every
/// read after the write it sees. Before, each write read a thread-local
/// copy checked against a generation counter (and before that, took a
/// shared `RwLock` and cloned the `Arc`: two atomic read-modify-writes on
/// lines every worker writes); this is one plain load.
#[derive(Default)]
struct SinkCell(std::cell::UnsafeCell<Option<Arc<dyn Sink>>>);

// SAFETY: see `SinkCell`: every access is ordered by the shard mutexes.
unsafe impl Sync for SinkCell {}

impl Hook {
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The current sink. The caller holds a shard lock (see `SinkCell`).
    #[inline]
    fn sink(&self) -> Option<&Arc<dyn Sink>> {
        // SAFETY: see `SinkCell`.
        unsafe { (*self.sink.0.get()).as_ref() }
    }
}

impl Engine {
    /// Starts (Some) or stops (None) recording writes. Call with every
    /// shard locked (or before serving) so the switch falls between two
    /// writes of every key: the journal then holds exactly the writes after
    /// that instant.
    pub fn set_journal(&self, sink: Option<Arc<dyn Sink>>) {
        let on = sink.is_some();
        if on {
            self.arm_journal(true);
        }
        // SAFETY: every shard is locked (see `SinkCell`).
        unsafe { *self.journal.sink.0.get() = sink };
        self.journal.on.store(on, Ordering::SeqCst);
        if !on {
            self.arm_journal(false);
        }
    }

    pub fn journal_on(&self) -> bool {
        self.journal.on()
    }

    /// From now on every command lends its arguments. The server arms,
    /// waits until every worker has finished the command it was running,
    /// then turns the journal on (`set_journal`).
    pub fn arm_journal(&self, armed: bool) {
        self.journal.armed.store(armed, Ordering::SeqCst);
    }

    /// While loading, guards see the time as 0, so no key expires: the
    /// journal's own DEL records replay every expiry where it happened.
    pub fn set_loading(&self, on: bool) {
        self.journal.loading.store(on, Ordering::SeqCst);
    }

    #[inline]
    pub fn journal_armed(&self) -> bool {
        self.journal.armed.load(Ordering::Relaxed)
    }
}

/// Appends a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; VARINT_MAX];
    let n = varint_into(&mut b, 0, v);
    out.extend_from_slice(&b[..n]);
}

/// Reads a LEB128 varint at `*pos`; None if truncated or over 64 bits.
pub fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Encodes one record.
pub fn encode<'a>(
    out: &mut Vec<u8>,
    tag: Tag,
    db: usize,
    args: impl ExactSizeIterator<Item = &'a [u8]>,
) {
    out.push(tag as u8);
    put_varint(out, db as u64);
    put_args(out, args);
}

/// One decoded record, borrowing the unit's bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub tag: Tag,
    pub db: usize,
    pub args: Vec<&'a [u8]>,
}

/// Decodes the records of one unit; Err names the byte offset within the
/// unit and what is wrong.
pub fn decode_unit(b: &[u8]) -> Result<Vec<Record<'_>>, (usize, &'static str)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let start = pos;
        let tag = Tag::from_u8(b[pos]).ok_or((start, "unknown record tag"))?;
        pos += 1;
        let db = get_varint(b, &mut pos).ok_or((start, "bad database number"))?;
        if tag == Tag::Wire {
            let len = get_varint(b, &mut pos).ok_or((start, "bad request length"))?;
            if len == 0 || len > (b.len() - pos) as u64 {
                return Err((start, "request runs past the end of its batch"));
            }
            out.push(Record {
                tag,
                db: db as usize,
                args: vec![&b[pos..pos + len as usize]],
            });
            pos += len as usize;
            continue;
        }
        let argc = get_varint(b, &mut pos).ok_or((start, "bad argument count"))?;
        if argc == 0 || argc > (b.len() - pos) as u64 + 1 {
            return Err((start, "bad argument count"));
        }
        let mut args = Vec::with_capacity(argc as usize);
        for _ in 0..argc {
            let len = get_varint(b, &mut pos).ok_or((start, "bad argument length"))?;
            if len > (b.len() - pos) as u64 {
                return Err((start, "argument runs past the end of its batch"));
            }
            args.push(&b[pos..pos + len as usize]);
            pos += len as usize;
        }
        out.push(Record {
            tag,
            db: db as usize,
            args,
        });
    }
    Ok(out)
}

/// Replaces the running command's record with `args` (in `db`) for the
/// next guard of `cx` that writes. Call before that guard is dropped; a
/// guard that changes nothing drops it unrecorded.
/// The forms a handler stages are named in `crate::rewrite`.
pub fn stage(engine: &Engine, cx: &Cx, db: usize, args: &[&[u8]]) {
    stage_with(engine, cx, |out| {
        encode(out, Tag::Command, db, args.iter().copied())
    });
}

/// Replaces the running command's record with several commands (in
/// `db`), replayed in order as one unit: a stream group write recorded as
/// its effects (`ops::stream::GroupRecords`). An empty list stages an
/// empty record.
pub fn stage_all(engine: &Engine, cx: &Cx, db: usize, cmds: &[Vec<&[u8]>]) {
    stage_with(engine, cx, |out| {
        for c in cmds {
            encode(out, Tag::Command, db, c.iter().copied());
        }
    });
}

/// Stages what `fill` writes as the command's record, in place of what
/// was staged before.
fn stage_with(engine: &Engine, cx: &Cx, fill: impl FnOnce(&mut Vec<u8>)) {
    if !engine.journal_on() {
        return;
    }
    let Some(state) = cx.state() else {
        return;
    };
    let mut s = state.staged.borrow_mut();
    s.explicit.clear();
    fill(&mut s.explicit);
    s.has_explicit = true;
    state.staged_any.set(true);
}

/// Stages the state of a memcached item after a write: an `ITEM` record,
/// or `DEL` if the key no longer holds a string.
pub fn stage_item(g: &mut Guard, db: usize, k: &Key) {
    if !g.engine().journal_on() {
        return;
    }
    let rec = match g.peek(db, k) {
        Some(e) => {
            let at = e.expire_at();
            match &e.value {
                Value::Str(s) => {
                    let flags = match s {
                        StrValue::Mc { flags, .. } => *flags,
                        _ => 0,
                    };
                    let data = s.to_vec();
                    let mut out = Vec::with_capacity(data.len() + k.bytes.len() + 24);
                    let f = flags.to_le_bytes();
                    let t = at.to_le_bytes();
                    let args: [&[u8]; 4] = [k.bytes, &data, &f, &t];
                    encode(&mut out, Tag::Item, db, args.into_iter());
                    out
                }
                _ => return,
            }
        }
        None => {
            let mut out = Vec::new();
            encode(
                &mut out,
                Tag::Command,
                db,
                [&b"DEL"[..], k.bytes].into_iter(),
            );
            out
        }
    };
    let cx = g.cx();
    stage_with(g.engine(), &cx, |out| *out = rec);
}

/// A key was removed because it expired (a lookup found it so): record
/// `DEL key` ahead of the command's own record.
pub(crate) fn expired(engine: &Engine, cx: &Cx, db: usize, key: &[u8]) -> bool {
    if !engine.journal_on() {
        return false;
    }
    match cx.state() {
        Some(state) => {
            let mut s = state.staged.borrow_mut();
            encode(&mut s.pre, Tag::Command, db, [&b"DEL"[..], key].into_iter());
            state.staged_any.set(true);
        }
        // No command to put it ahead of: record it on its own, now (the
        // caller holds the key's shard lock, so it is in order).
        None => deleted(engine, db, std::iter::once(key)),
    }
    true
}

/// Records deletions that happened outside any command while the shard
/// was locked by the caller (the active expiry sweep, eviction): one unit
/// of `DEL` records, committed now.
pub fn deleted<'a>(engine: &Engine, db: usize, keys: impl Iterator<Item = &'a [u8]>) {
    if !engine.journal_on() {
        return;
    }
    let mut unit = Vec::new();
    for k in keys {
        encode(&mut unit, Tag::Command, db, [&b"DEL"[..], k].into_iter());
    }
    if !unit.is_empty() {
        if let Some(sink) = engine.journal.sink() {
            sink.append(&unit);
        }
    }
}

/// Records a command that changes no shard but must be replayed (FUNCTION
/// LOAD, DELETE, FLUSH, RESTORE), as sent: one unit now, or in the hold's
/// transaction inside EXEC. Its end is noted in `cx`'s state.
pub fn command(engine: &Engine, cx: &Cx, args: &[&[u8]]) {
    if !engine.journal_on() {
        return;
    }
    let mut unit = Vec::new();
    encode(&mut unit, Tag::Command, cx.db, args.iter().copied());
    match cx.hold() {
        Some(hold) => hold.tx.borrow_mut().extend_from_slice(&unit),
        None => {
            if let Some(sink) = engine.journal.sink() {
                let end = sink.append(&unit);
                if let Some(s) = cx.state() {
                    s.note_journal_end(end);
                }
            }
        }
    }
}

/// Called by a guard being dropped: commits its records (expiry deletions
/// it found, then the command's record if it wrote) while its locks are
/// still held. Inside a hold (EXEC) they are collected in the hold's
/// transaction instead. This runs for every write command while the
/// journal is on.
#[inline]
pub(crate) fn commit(engine: &Engine, cx: &Cx, wrote: bool) {
    let Some(sink) = engine.journal.sink() else {
        discard(cx);
        return;
    };
    let state = cx.state();
    if wrote && cx.hold().is_none() && !state.is_some_and(|s| s.staged_any.get()) {
        // The common case: one write command recorded as sent.
        if let Some(raw) = cx.args().and_then(|a| a.raw()) {
            let end = sink.append_wire(cx.db, raw);
            if let Some(s) = state {
                s.note_journal_end(end);
            }
            return;
        }
    }
    commit_staged(sink, cx, wrote);
}

/// `commit` of anything but a lone command recorded as sent.
#[cold]
fn commit_staged(sink: &Arc<dyn Sink>, cx: &Cx, wrote: bool) {
    let mut empty = Staged::default();
    let mut borrowed;
    let staged: &mut Staged = match cx.state() {
        Some(state) => {
            state.staged_any.set(false);
            borrowed = state.staged.borrow_mut();
            &mut borrowed
        }
        None => &mut empty,
    };
    if !wrote {
        staged.has_explicit = false;
        if staged.pre.is_empty() {
            return;
        }
    }
    match cx.hold() {
        Some(hold) => write_unit(staged, cx, wrote, &mut hold.tx.borrow_mut()),
        None => {
            let end = sink.append_with(&mut |out| write_unit(staged, cx, wrote, out));
            if let Some(s) = cx.state() {
                s.note_journal_end(end);
            }
        }
    }
}

/// Writes a guard's unit at the end of `out`: the expiry deletions it
/// found, then (if it wrote) the staged record or the command as sent.
fn write_unit(staged: &mut Staged, cx: &Cx, wrote: bool, out: &mut Vec<u8>) {
    out.append(&mut staged.pre);
    if !wrote {
        return;
    }
    if staged.has_explicit {
        out.extend_from_slice(&staged.explicit);
        staged.has_explicit = false;
    } else if let Some(args) = cx.args() {
        if let Some(raw) = args.raw() {
            put_wire(out, cx.db, raw);
        } else {
            out.push(Tag::Command as u8);
            put_varint(out, cx.db as u64);
            args.put_args(out);
        }
    } else {
        unsourced();
    }
}

/// A guard dropped without committing (no journal): forget what it staged.
#[inline]
pub(crate) fn discard(cx: &Cx) {
    let Some(state) = cx.state() else {
        return;
    };
    if !state.staged_any.replace(false) {
        return;
    }
    let mut s = state.staged.borrow_mut();
    s.has_explicit = false;
    s.pre.clear();
}

/// The hold of an EXEC ends: commit its records as one unit. Returns the
/// unit's end in the journal (0: nothing appended).
pub(crate) fn commit_tx(engine: &Engine, tx: &mut Vec<u8>) -> u64 {
    if tx.is_empty() {
        return 0;
    }
    let end = match engine.journal.sink() {
        Some(sink) => sink.append(tx),
        None => 0,
    };
    tx.clear();
    end
}

static UNSOURCED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A write with neither an explicit record nor a command to name: a bug
/// in a caller (a write path outside any command that forgot to `stage`).
/// Counted, and reported once on standard error, rather than guessed at.
fn unsourced() {
    if UNSOURCED.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!("cairn: BUG: a write with no journal record (see record.rs)");
    }
}

/// How many writes had no record (tests assert 0).
pub fn unsourced_count() -> u64 {
    UNSOURCED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_pinned() {
        assert_eq!(Tag::Command as u8, 1);
        assert_eq!(Tag::Item as u8, 2);
        assert_eq!(Tag::Wire as u8, 3);
        assert_eq!(Tag::from_u8(3), Some(Tag::Wire));
        assert_eq!(Tag::from_u8(4), None);
        assert_eq!(Tag::from_u8(0), None);
    }

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(get_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
            // Every strict prefix is truncated.
            for cut in 0..b.len() {
                let mut pos = 0;
                assert_eq!(get_varint(&b[..cut], &mut pos), None);
            }
        }
        // 11 bytes of continuation: too long.
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
    }

    #[test]
    fn put_wire_matches_the_plain_encoding() {
        for db in [0usize, 1, 15, 127, 128, 300, usize::MAX] {
            for len in [1usize, 5, 127, 128, 200, 20_000] {
                let raw: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let mut plain = vec![9u8, 9];
                plain.push(Tag::Wire as u8);
                put_varint(&mut plain, db as u64);
                put_varint(&mut plain, len as u64);
                plain.extend_from_slice(&raw);
                // Appends after what is there, in a buffer with and
                // without spare room.
                for cap in [2, 4096] {
                    let mut fast = Vec::with_capacity(cap);
                    fast.extend_from_slice(&[9, 9]);
                    put_wire(&mut fast, db, &raw);
                    assert_eq!(fast, plain, "db {db} len {len} cap {cap}");
                }
                let recs = decode_unit(&plain[2..]).unwrap();
                assert_eq!((recs[0].db, recs[0].args[0]), (db, &raw[..]));
            }
        }
    }

    /// A request as a client sends it; the engine never parses it.
    const WIRE: &[u8] = b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n";

    #[test]
    fn records_round_trip() {
        let mut b = Vec::new();
        encode(
            &mut b,
            Tag::Command,
            3,
            [&b"SET"[..], b"k", b""].into_iter(),
        );
        encode(
            &mut b,
            Tag::Item,
            0,
            [&b"k"[..], b"v", b"\0\0\0\0", b"12345678"].into_iter(),
        );
        b.extend_from_slice(&[Tag::Wire as u8, 1, WIRE.len() as u8]);
        b.extend_from_slice(WIRE);
        assert_eq!(&b[..6], &[1, 3, 3, 3, b'S', b'E']);
        let recs = decode_unit(&b).unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].tag, Tag::Command);
        assert_eq!(recs[0].db, 3);
        assert_eq!(recs[0].args, vec![&b"SET"[..], b"k", b""]);
        assert_eq!(recs[1].tag, Tag::Item);
        assert_eq!(recs[2].tag, Tag::Wire);
        assert_eq!(recs[2].db, 1);
        assert_eq!(recs[2].args, vec![WIRE]);
        // tag, db, argc, then (len, bytes) for SET, k and "".
        let first = 3 + 4 + 2 + 1;
        assert_eq!(decode_unit(&b[..first]).unwrap().len(), 1);
        // A cut record is an error, never a shorter record.
        let second = b.len() - 3 - WIRE.len();
        for cut in (1..b.len()).filter(|&c| c != first && c != second) {
            let r = decode_unit(&b[..cut]);
            assert!(r.is_err(), "cut {cut}: {r:?}");
        }
    }
}
