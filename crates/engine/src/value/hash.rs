//! The hash value type and its two encodings.
//!
//! Mirrors Redis 7.0 `src/t_hash.c`: a small hash is kept "packed" (Redis's
//! listpack: one contiguous buffer, fields in insertion order, linear
//! lookups), and converted for good to a hash table ("hashtable") once it
//! has more than `hash-max-listpack-entries` fields or a field or value
//! longer than `hash-max-listpack-value` bytes. Redis never converts back
//! while the key lives (only a reload re-packs), and neither do we unless
//! asked via [`HashValue::try_pack`].
//!
//! Observable consequences that this module reproduces:
//! * OBJECT ENCODING says "listpack" or "hashtable" at the same moments;
//! * HGETALL/HKEYS/HVALS/HSCAN on a packed hash list fields in insertion
//!   order, with an updated field keeping its place (listpack `lpReplace`)
//!   and a new field appended at the tail;
//! * HSCAN of a packed hash returns everything in one call with cursor 0.
//!
//! The packed buffer is `(varint field_len, field, varint value_len,
//! value)*`, with LEB128 varints. Unlike a listpack it does not store
//! integer-looking strings as integers; the bytes clients see are the same.
//!
//! Memory (issues 5 and 20): a packed buffer is sized exactly once a write
//! ends (`seal`), and one of 256 B to 16 KiB whose entries average 64 bytes
//! or more is kept **coded** when that saves 1/8: each value on its own,
//! against the process's shared Huffman book (`value::codebooks`; random
//! text such as YCSB values has ~6 bits per byte), fields left plain. A
//! coded hash is read and written one value at a time: HGET/HMGET decode
//! only the values asked for, a one-field HSET codes only the new value and
//! splices it in, and HGETALL decodes each value once. Reads go through
//! [`HashValue::view`]; the stored form has no `get`/`iter`, so no caller
//! can read a coded value by mistake.

use std::cell::{Cell, OnceCell};
use std::hash::Hasher;
use std::ops::Range;

use hashbrown::HashMap;

use crate::util::huff::Codebook;
use crate::value::codebooks;
use crate::value::names::{self, NameList};

/// The two config knobs that decide the encoding (redis.conf
/// `hash-max-listpack-entries` and `hash-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashLimits {
    pub max_listpack_entries: usize,
    pub max_listpack_value: usize,
}

impl Default for HashLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        HashLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// Redis `LISTPACK_MAX_SAFETY_SIZE`: a listpack is converted rather than
/// allowed to grow past 1 GiB (`lpSafeToAdd`), whatever the limits say.
const PACKED_MAX_SAFE_BYTES: usize = 1 << 30;

/// Longest LEB128 encoding of a `usize` on 64-bit targets.
const MAX_VARINT_LEN: usize = 10;

/// A hash value as stored. See the module docs for when each encoding is
/// used. 32 bytes (the `Box<HashValue>` in `Value` is one 32-byte block);
/// reads go through [`HashValue::view`], which decodes coded values.
#[derive(Clone, Debug)]
pub enum HashValue {
    Packed(PackedHash),
    Table(Box<TableHash>),
}

/// The listpack-like encoding: one buffer, insertion order, values
/// possibly coded (see [`HashValue::seal`]).
#[derive(Clone, Debug, Default)]
pub struct PackedHash {
    /// The entries: plain (`book == 0`) or coded. Sized exactly once
    /// sealed.
    buf: Vec<u8>,
    /// Number of fields (at most `PACKED_MAX_SAFE_BYTES / 2`, so it fits).
    len: u32,
    /// 0: plain entries. Else the id of the shared book (`codebooks`) the
    /// entries are coded with; the book lives as long as the process.
    book: u8,
    /// Coded entries only: the id of the interned list (`value::names`)
    /// that holds the field names, which the buffer then leaves out; 0 or
    /// `NAMES_REFUSED` when the names are inline (0: not asked yet).
    names: u16,
}

/// Packed buffers shorter than this are never coded: small values
/// (redis-benchmark's 3-byte ones) stay on the plain path.
pub const COMPRESS_MIN: usize = 256;
/// Packed buffers longer than this are not coded, so that reading a whole
/// hash never decodes more than this many bytes (~10 us).
pub const COMPRESS_MAX: usize = 16 * 1024;
/// Values shorter than this stay raw inside a coded hash: a code saves at
/// most a few bytes there and each coded value pays a length varint.
pub const CODE_MIN_VALUE: usize = 16;
/// Only hashes whose entries average at least this many packed bytes are
/// coded: there coding saves the most and the cost of coding a written
/// value is small next to the data it moves. Hashes of
/// many small fields (counters, session attributes, redis-benchmark's
/// HSET) stay plain, so HINCRBY on them stays as cheap as in Redis.
pub const COMPRESS_MIN_AVG_ENTRY: usize = 64;

thread_local! {
    /// A reusable buffer for decoded reads and for coding output, so a
    /// read of a coded hash allocates nothing in the steady state.
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

fn take_scratch() -> Vec<u8> {
    let mut v = SCRATCH.with(|s| s.take());
    v.clear();
    v
}

fn give_scratch(v: Vec<u8>) {
    // Keep at most one buffer, and none bigger than what one read needs.
    if v.capacity() <= 2 * COMPRESS_MAX {
        SCRATCH.with(|s| s.set(v));
    }
}

/// The hashtable encoding. Keeps a running total of field and value bytes
/// so that `mem_bytes` stays O(1), as the engine asks for it after writes.
#[derive(Clone, Debug, Default)]
pub struct TableHash {
    map: HashMap<Box<[u8]>, Box<[u8]>>,
    payload: usize,
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

// ---------------------------------------------------------------------------
// Varints

/// Appends `v` as LEB128 (7 bits per byte, high bit = more follows).
fn put_varint(out: &mut Vec<u8>, v: usize) {
    let mut tmp = [0u8; MAX_VARINT_LEN];
    let n = encode_varint(v, &mut tmp);
    out.extend_from_slice(&tmp[..n]);
}

/// Writes `v` as LEB128 into `buf`, returning the number of bytes used.
fn encode_varint(mut v: usize, buf: &mut [u8; MAX_VARINT_LEN]) -> usize {
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf[n] = byte;
            return n + 1;
        }
        buf[n] = byte | 0x80;
        n += 1;
    }
}

fn varint_len(v: usize) -> usize {
    let mut tmp = [0u8; MAX_VARINT_LEN];
    encode_varint(v, &mut tmp)
}

/// Reads a LEB128 value at `pos`: `(value, bytes used)`. `None` on a
/// truncated or over-long encoding, which a buffer built by this module
/// never contains; callers treat it as the end of the data rather than
/// panicking.
#[inline]
fn get_varint(buf: &[u8], pos: usize) -> Option<(usize, usize)> {
    // Almost every length in a hash takes one or two bytes (a coded
    // value's header is `vlen << 1 | 1`: two bytes from 64).
    match buf.get(pos..pos + 2) {
        Some(&[b, _]) if b < 0x80 => Some((usize::from(b), 1)),
        Some(&[b, c]) if c < 0x80 => Some((usize::from(b & 0x7f) | usize::from(c) << 7, 2)),
        _ => get_varint_long(buf, pos),
    }
}

fn get_varint_long(buf: &[u8], pos: usize) -> Option<(usize, usize)> {
    let mut v: usize = 0;
    let mut shift = 0u32;
    for (i, &byte) in buf.get(pos..)?.iter().enumerate().take(MAX_VARINT_LEN) {
        let bits = usize::from(byte & 0x7f);
        if shift >= usize::BITS || (shift > 0 && bits >> (usize::BITS - shift) != 0) {
            return None;
        }
        v |= bits << shift;
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
        shift += 7;
    }
    None
}

// ---------------------------------------------------------------------------
// Packed encoding

/// Where one entry sits in the packed buffer.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// First byte of the entry (the field's length varint).
    start: usize,
    field: (usize, usize),
    /// First byte of the value's length varint.
    value_hdr: usize,
    value: (usize, usize),
}

impl Slot {
    fn end(&self) -> usize {
        self.value.1
    }
}

/// Decodes the entry starting at `pos`.
fn slot_at(buf: &[u8], pos: usize) -> Option<Slot> {
    let (flen, n) = get_varint(buf, pos)?;
    let fstart = pos + n;
    let fend = fstart.checked_add(flen)?;
    let (vlen, m) = get_varint(buf, fend)?;
    let vstart = fend + m;
    let vend = vstart.checked_add(vlen)?;
    if vend > buf.len() {
        return None;
    }
    Some(Slot {
        start: pos,
        field: (fstart, fend),
        value_hdr: fend,
        value: (vstart, vend),
    })
}

/// Iterator over the slots of a packed buffer, in insertion order.
struct Slots<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Iterator for Slots<'_> {
    type Item = Slot;
    fn next(&mut self) -> Option<Slot> {
        if self.pos >= self.buf.len() {
            return None;
        }
        match slot_at(self.buf, self.pos) {
            Some(s) => {
                self.pos = s.end();
                Some(s)
            }
            None => {
                // Corrupt tail: stop rather than loop or panic.
                self.pos = self.buf.len();
                None
            }
        }
    }
}

/// The slot of `field` in a plain packed buffer.
fn packed_find(buf: &[u8], field: &[u8]) -> Option<Slot> {
    // Compare lengths first: cheap and skips most entries.
    Slots { buf, pos: 0 }
        .find(|s| s.field.1 - s.field.0 == field.len() && same(&buf[s.field.0..s.field.1], field))
}

// ---------------------------------------------------------------------------
// Coded entries (issue 20)
//
// A coded buffer keeps the plain layout's order; the field bytes are kept
// plain, or left out when the hash's names are an interned list
// (`value::names`: the header's `names` id), and each value is:
//
//   b = its first byte
//   b < CODE_MIN_VALUE       raw value of b bytes, which follow
//   CODE_MIN_VALUE..=0xFD    coded value of b bytes
//   0xFE                     coded value, varint vlen follows
//   0xFF                     raw value, varint vlen follows, then the bytes
//   coded: [varint clen, unless the book has a fixed width w, when
//           clen = ceil(vlen * w / 8)] then clen bytes of code (LSB first)
//
// A value is coded only if that saves 1/8 of it (and, with a fixed-width
// book, only if the book has a code for every byte of it), so short values
// and values the book does not suit stay raw and are read in place. A
// YCSB value of 100 bytes is one header byte and 75 bytes of code.

/// The last header byte that is a coded value's length itself.
const CODED_SHORT_MAX: u8 = 0xFD;
const CODED_LONG: u8 = 0xFE;
const RAW_LONG: u8 = 0xFF;

/// `PackedHash::names` of a coded hash whose names are inline because the
/// table refused them: not asked again until the fields change.
const NAMES_REFUSED: u16 = u16::MAX;

/// A coded buffer and what reading it needs.
#[derive(Clone, Copy)]
struct Coded<'a> {
    buf: &'a [u8],
    book: &'static Codebook,
    /// The interned names, or `None` when they are inline.
    names: Option<&'static NameList>,
}

/// Where one coded entry sits.
#[derive(Clone, Copy, Debug)]
struct CSlot<'a> {
    /// First byte of the entry (its field's length varint, or its value's
    /// header when the names are interned).
    start: usize,
    field: &'a [u8],
    /// First byte of the value's header.
    value_hdr: usize,
    vlen: usize,
    coded: bool,
    /// The code if `coded`, else the value itself.
    data: (usize, usize),
}

/// Parses the value at `pos`: `(vlen, coded, data start, data end)`.
#[inline]
fn value_at(buf: &[u8], pos: usize, width: u32) -> Option<(usize, bool, usize, usize)> {
    let b = *buf.get(pos)?;
    let (vlen, coded, mut at) = if b < CODE_MIN_VALUE as u8 {
        (usize::from(b), false, pos + 1)
    } else if b <= CODED_SHORT_MAX {
        (usize::from(b), true, pos + 1)
    } else {
        let (v, n) = get_varint(buf, pos + 1)?;
        (v, b == CODED_LONG, pos + 1 + n)
    };
    let dlen = if !coded {
        vlen
    } else if width != 0 {
        vlen.checked_mul(width as usize)?.div_ceil(8)
    } else {
        let (c, k) = get_varint(buf, at)?;
        at += k;
        c
    };
    let end = at.checked_add(dlen)?;
    if end > buf.len() {
        return None;
    }
    Some((vlen, coded, at, end))
}

/// Iterator over the entries of a coded buffer, in insertion order.
struct CSlots<'a> {
    buf: &'a [u8],
    pos: usize,
    width: u32,
    names: Option<&'static NameList>,
    /// Index of the next entry (into `names`).
    idx: usize,
}

impl<'a> CSlots<'a> {
    fn slot_at(&self, pos: usize) -> Option<CSlot<'a>> {
        let (field, fend): (&'a [u8], usize) = match self.names {
            Some(list) => (&list.get(self.idx)?[..], pos),
            None => {
                let (flen, n) = get_varint(self.buf, pos)?;
                let fstart = pos + n;
                let fend = fstart.checked_add(flen)?;
                (self.buf.get(fstart..fend)?, fend)
            }
        };
        let (vlen, coded, dstart, dend) = value_at(self.buf, fend, self.width)?;
        Some(CSlot {
            start: pos,
            field,
            value_hdr: fend,
            vlen,
            coded,
            data: (dstart, dend),
        })
    }
}

impl<'a> Iterator for CSlots<'a> {
    type Item = CSlot<'a>;
    #[inline]
    fn next(&mut self) -> Option<CSlot<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        match self.slot_at(self.pos) {
            Some(s) => {
                self.pos = s.data.1;
                self.idx += 1;
                Some(s)
            }
            None => {
                self.pos = self.buf.len();
                None
            }
        }
    }
}

impl<'a> Coded<'a> {
    fn slots(&self) -> CSlots<'a> {
        CSlots {
            buf: self.buf,
            pos: 0,
            width: self.book.width(),
            names: self.names,
            idx: 0,
        }
    }

    fn find(&self, field: &[u8]) -> Option<CSlot<'a>> {
        self.slots().find(|s| same(s.field, field))
    }

    /// Length of the plain buffer this one stands for.
    fn plain_len(&self) -> usize {
        self.slots()
            .map(|s| varint_len(s.field.len()) + s.field.len() + varint_len(s.vlen) + s.vlen)
            .sum()
    }

    /// Appends the plain form to `out`.
    fn decode_all(&self, out: &mut Vec<u8>) {
        for s in self.slots() {
            put_varint(out, s.field.len());
            out.extend_from_slice(s.field);
            put_varint(out, s.vlen);
            let at = out.len();
            out.resize(at + s.vlen, 0);
            read_value(self.buf, &s, self.book, &mut out[at..]);
        }
    }

    /// The same entries with their names inline.
    fn with_inline_names(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.buf.len() + 16 * self.slots().count());
        for s in self.slots() {
            put_varint(&mut out, s.field.len());
            out.extend_from_slice(s.field);
            out.extend_from_slice(&self.buf[s.value_hdr..s.data.1]);
        }
        out
    }
}

/// `a == b` for slices of equal length, short ones (most field names)
/// compared with two overlapping word loads instead of a call to memcmp.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        let w =
            |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
        return w(a, 0) == w(b, 0) && w(a, n - 8) == w(b, n - 8);
    }
    if (4..8).contains(&n) {
        let w =
            |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
        return w(a, 0) == w(b, 0) && w(a, n - 4) == w(b, n - 4);
    }
    a == b
}

/// Appends a value's header and bytes to a coded buffer: coded with `book`
/// when that saves at least 1/8 of the value (and the book codes every
/// byte of it), else raw. With a complete book the code is written first,
/// behind room for the longest header, and moved down once its length is
/// known (one pass over the value, not two); with a fixed-width book its
/// length is known up front.
fn put_value(out: &mut Vec<u8>, book: &Codebook, value: &[u8]) {
    let n = value.len();
    let w = book.width();
    if n >= CODE_MIN_VALUE && w != 0 {
        // A fixed-width book: the code's length follows from the value's,
        // so whether coding pays is known before coding, and the code goes
        // straight behind its header (no room to guess, nothing to move).
        let short = n <= usize::from(CODED_SHORT_MAX);
        let used = if short { 1 } else { 1 + varint_len(n) };
        let clen = (n * w as usize).div_ceil(8);
        if used + clen <= n - n / 8 {
            let start = out.len();
            if short {
                out.push(n as u8);
            } else {
                out.push(CODED_LONG);
                put_varint(out, n);
            }
            let at = out.len();
            // 8 bytes of slack: every store of the encoder is a whole word.
            out.resize(at + clen + 8, 0);
            if book.encode_fixed(value, &mut out[at..]) {
                out.truncate(at + clen);
                return;
            }
            out.truncate(start);
        }
    } else if n >= CODE_MIN_VALUE {
        let start = out.len();
        let short = n <= usize::from(CODED_SHORT_MAX);
        let vhdr = if short { 1 } else { 1 + varint_len(n) };
        let room = vhdr + varint_len(n * 3 / 2 + 1);
        out.resize(start + room, 0);
        let clen = book.encode_bits_into(value, out).div_ceil(8);
        let used = vhdr + varint_len(clen);
        if used + clen <= n - n / 8 {
            let mut hdr = [0u8; 1 + 2 * MAX_VARINT_LEN];
            let mut k = 1;
            if short {
                hdr[0] = n as u8;
            } else {
                hdr[0] = CODED_LONG;
                k += encode_varint(n, (&mut hdr[k..k + MAX_VARINT_LEN]).try_into().expect("10"));
            }
            k += encode_varint(
                clen,
                (&mut hdr[k..k + MAX_VARINT_LEN]).try_into().expect("10"),
            );
            debug_assert_eq!(k, used);
            let code_at = start + room;
            if used != room {
                out.copy_within(code_at..code_at + clen, start + used);
            }
            out[start..start + used].copy_from_slice(&hdr[..used]);
            out.truncate(start + used + clen);
            return;
        }
        out.truncate(start);
    }
    if n < CODE_MIN_VALUE {
        out.push(n as u8);
    } else {
        out.push(RAW_LONG);
        put_varint(out, n);
    }
    out.extend_from_slice(value);
}

/// Writes the value of `s` into `out` (exactly `s.vlen` bytes long).
fn read_value(buf: &[u8], s: &CSlot, book: &Codebook, out: &mut [u8]) {
    if !s.coded {
        out.copy_from_slice(&buf[s.data.0..s.data.1]);
    } else if book
        .decode(&buf[s.data.0..], s.data.1 - s.data.0, out)
        .is_none()
    {
        // Cannot happen for a buffer this module wrote.
        debug_assert!(false, "corrupt coded hash value");
    }
}

/// Replaces `buf[r]` by `with`, moving the tail once.
fn replace_range(buf: &mut Vec<u8>, r: Range<usize>, with: &[u8]) {
    let old = r.end - r.start;
    let end = buf.len();
    if with.len() > old {
        let grow = with.len() - old;
        buf.resize(end + grow, 0);
        buf.copy_within(r.end..end, r.end + grow);
    } else if with.len() < old {
        buf.copy_within(r.end..end, r.start + with.len());
        buf.truncate(end - (old - with.len()));
    }
    buf[r.start..r.start + with.len()].copy_from_slice(with);
}

impl PackedHash {
    fn slots(&self) -> Slots<'_> {
        debug_assert!(self.book == 0);
        Slots {
            buf: &self.buf,
            pos: 0,
        }
    }

    /// The book a coded buffer uses (`None` for a plain one).
    fn book(&self) -> Option<&'static Codebook> {
        if self.book == 0 {
            return None;
        }
        Some(codebooks::get(self.book).expect("books are never removed"))
    }

    /// The interned names of a coded buffer (`None`: inline).
    fn names(&self) -> Option<&'static NameList> {
        if self.names == 0 || self.names == NAMES_REFUSED {
            return None;
        }
        Some(names::get(self.names).expect("name lists are never removed"))
    }

    /// The buffer as a coded one, if it is.
    fn coded(&self) -> Option<Coded<'_>> {
        Some(Coded {
            buf: &self.buf,
            book: self.book()?,
            names: self.names(),
        })
    }

    fn worth_coding(&self, plain_len: usize) -> bool {
        (COMPRESS_MIN..=COMPRESS_MAX).contains(&plain_len)
            && plain_len >= COMPRESS_MIN_AVG_ENTRY.saturating_mul(self.len as usize)
    }

    /// Ends a write: codes a plain buffer that qualifies (see
    /// [`HashValue::seal`]), makes a coded one that no longer does plain,
    /// interns the names of a coded one whose fields changed, and trims
    /// the buffer to its length.
    fn seal(&mut self) {
        match self.book() {
            None => {
                if self.worth_coding(self.buf.len()) {
                    self.code();
                }
            }
            Some(_) => {
                // The plain size is at most 8 times the coded size (no code
                // is shorter than 1 bit) plus the names left out (at most
                // 2 bytes each beside its bytes), and at least the coded
                // size less a byte an entry (a long raw value's header is
                // one byte longer than its plain length), so most seals
                // need not walk the entries to know it.
                let n = self.buf.len();
                let lower = n.saturating_sub(self.len as usize);
                let upper = n.saturating_mul(8) + 2 * names::MAX_LIST_BYTES;
                let surely = self.worth_coding(lower) && upper <= COMPRESS_MAX;
                if !surely {
                    let c = self.coded().expect("coded");
                    if !self.worth_coding(c.plain_len()) {
                        self.decode();
                    }
                }
            }
        }
        if self.book != 0 && self.names == 0 {
            self.intern_names();
        }
        self.buf.shrink_to_fit();
    }

    /// Replaces the inline names of a coded buffer by the id of an
    /// interned list, if the table has (or now takes) this list.
    fn intern_names(&mut self) {
        let c = self.coded().expect("coded");
        debug_assert!(c.names.is_none());
        let Some(id) = names::intern(|| c.slots().map(|s| s.field), self.len as usize) else {
            self.names = NAMES_REFUSED;
            return;
        };
        let names_bytes: usize = c.slots().map(|s| s.value_hdr - s.start).sum();
        let mut out = Vec::with_capacity(self.buf.len() - names_bytes);
        for s in c.slots() {
            out.extend_from_slice(&self.buf[s.value_hdr..s.data.1]);
        }
        self.buf = out;
        self.names = id;
    }

    /// Puts the names of an interned coded buffer back inline, before a
    /// write that changes the fields.
    fn inline_names(&mut self) {
        // The id first: most calls (each field of a new record, which
        // starts coded with its names inline) have no list, and need no
        // book or list looked up to find that out.
        if self.names != 0 && self.names != NAMES_REFUSED {
            if let Some(c) = self.coded() {
                self.buf = c.with_inline_names();
            }
        }
        self.names = 0;
    }

    /// Codes a plain buffer with the current book if that saves 1/8. With
    /// no book yet, the values go to the training sample instead.
    fn code(&mut self) {
        let cur = codebooks::current().or_else(|| {
            let buf = &self.buf;
            codebooks::observe(self.slots().map(|s| &buf[s.value.0..s.value.1]))
        });
        let Some((id, book)) = cur else {
            return;
        };
        let n = self.buf.len();
        let mut out = take_scratch();
        for s in self.slots() {
            put_varint(&mut out, s.field.1 - s.field.0);
            out.extend_from_slice(&self.buf[s.field.0..s.field.1]);
            put_value(&mut out, book, &self.buf[s.value.0..s.value.1]);
        }
        if out.len() <= n - n / 8 {
            self.buf = out.as_slice().to_vec();
            self.book = id;
            self.names = 0;
        }
        give_scratch(out);
    }

    /// Makes a coded buffer plain (for a conversion to a table).
    fn decode(&mut self) {
        if let Some(c) = self.coded() {
            let mut raw = Vec::new();
            c.decode_all(&mut raw);
            self.buf = raw;
            self.book = 0;
            self.names = 0;
        }
    }

    fn find(&self, field: &[u8]) -> Option<Slot> {
        debug_assert!(self.book == 0);
        packed_find(&self.buf, field)
    }

    /// Inserts or updates; true if the field is new. An update keeps the
    /// entry's position (listpack `lpReplace`), a new field goes to the tail
    /// (`lpAppend`).
    fn upsert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(book) = self.book() {
            return self.coded_upsert(book, field, value);
        }
        match self.find(field) {
            Some(s) => {
                if s.value.1 - s.value.0 == value.len() {
                    // Same length: overwrite in place, no reallocation.
                    self.buf[s.value.0..s.value.1].copy_from_slice(value);
                } else {
                    let mut hdr = [0u8; MAX_VARINT_LEN];
                    let n = encode_varint(value.len(), &mut hdr);
                    let old = s.value.1 - s.value_hdr;
                    self.buf
                        .reserve_exact((n + value.len()).saturating_sub(old));
                    self.buf.splice(
                        s.value_hdr..s.value.1,
                        hdr[..n].iter().chain(value.iter()).copied(),
                    );
                }
                false
            }
            None => {
                self.buf.reserve_exact(
                    varint_len(field.len()) + field.len() + varint_len(value.len()) + value.len(),
                );
                put_varint(&mut self.buf, field.len());
                self.buf.extend_from_slice(field);
                put_varint(&mut self.buf, value.len());
                self.buf.extend_from_slice(value);
                self.len += 1;
                true
            }
        }
    }

    /// Adds an entry for a field known to be absent.
    fn append(&mut self, field: &[u8], value: &[u8]) {
        match self.book() {
            Some(book) => {
                self.inline_names();
                put_varint(&mut self.buf, field.len());
                self.buf.extend_from_slice(field);
                put_value(&mut self.buf, book, value);
            }
            None => {
                put_varint(&mut self.buf, field.len());
                self.buf.extend_from_slice(field);
                put_varint(&mut self.buf, value.len());
                self.buf.extend_from_slice(value);
            }
        }
        self.len += 1;
    }

    /// `upsert` on a coded buffer: codes the one new value and splices it
    /// in; the other values (and interned names) are not touched.
    fn coded_upsert(&mut self, book: &Codebook, field: &[u8], value: &[u8]) -> bool {
        let found = self.coded().expect("coded").find(field).map(|s| {
            (
                s.value_hdr..s.data.1,
                s.coded && s.vlen == value.len(),
                s.data,
            )
        });
        match found {
            Some((r, same_len, (a, b))) => {
                // A coded value replaced by one of the same length (a YCSB
                // update) with a fixed-width book: the new code has the old
                // one's length and header, so it is written over it in
                // place. If the new value holds a byte the book has no code
                // for, the junk left is overwritten by the raw form below.
                if same_len && book.width() != 0 && book.encode_fixed(value, &mut self.buf[a..b]) {
                    return false;
                }
                let mut part = take_scratch();
                put_value(&mut part, book, value);
                replace_range(&mut self.buf, r, &part);
                give_scratch(part);
                false
            }
            None => {
                self.inline_names();
                put_varint(&mut self.buf, field.len());
                self.buf.extend_from_slice(field);
                put_value(&mut self.buf, book, value);
                self.len += 1;
                true
            }
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let range = match self.coded() {
            Some(c) => {
                if c.find(field).is_none() {
                    return false;
                }
                self.inline_names();
                let c = self.coded().expect("coded");
                c.find(field).map(|s| s.start..s.data.1)
            }
            None => self.find(field).map(|s| s.start..s.end()),
        };
        match range {
            Some(r) => {
                self.buf.drain(r);
                self.len -= 1;
                true
            }
            None => false,
        }
    }
}

// ---------------------------------------------------------------------------
// Table encoding

impl TableHash {
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        // One hash and one probe either way (a lookup then an insert hashed
        // a new field twice); the key is boxed only when it is new.
        match self.map.entry_ref(field) {
            hashbrown::hash_map::EntryRef::Occupied(mut e) => {
                let v = e.get_mut();
                self.payload = self.payload - v.len() + value.len();
                *v = value.into();
                false
            }
            hashbrown::hash_map::EntryRef::Vacant(e) => {
                self.payload += field.len() + value.len();
                e.insert(value.into());
                true
            }
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        match self.map.remove(field) {
            Some(v) => {
                self.payload -= field.len() + v.len();
                true
            }
            None => false,
        }
    }
}

/// The order a table-encoded hash is scanned in: a fixed hash of the field,
/// reduced to 63 bits so every cursor also fits a signed 64-bit integer for
/// clients that parse it that way. `DefaultHasher::new()` is SipHash with
/// fixed keys: stable for the life of the process, which is all a cursor
/// needs.
fn scan_hash(field: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(field);
    h.finish() >> 1
}

// ---------------------------------------------------------------------------
// Public API

impl HashValue {
    /// An empty hash, packed (Redis `createHashObject` makes a listpack).
    pub fn new() -> Self {
        HashValue::Packed(PackedHash::default())
    }

    pub fn len(&self) -> usize {
        match self {
            HashValue::Packed(p) => p.len as usize,
            HashValue::Table(t) => t.map.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A read-only view with the lookups (get, iter, scan, ...). It only
    /// borrows: for a coded hash, `get` decodes the one value asked for
    /// and `iter` the whole hash once, into per-thread buffers the view
    /// hands back when dropped.
    pub fn view(&self) -> HashView<'_> {
        let len = self.len();
        let inner = match self {
            HashValue::Packed(p) => match p.coded() {
                Some(c) => ViewInner::Coded(CodedView {
                    c,
                    values: OnceCell::new(),
                    plain: OnceCell::new(),
                }),
                None => ViewInner::Packed(&p.buf),
            },
            HashValue::Table(t) => ViewInner::Table(t),
        };
        HashView { inner, len }
    }

    /// True if the packed buffer is stored coded.
    pub fn is_compressed(&self) -> bool {
        matches!(self, HashValue::Packed(p) if p.book != 0)
    }

    /// Ends a write: a packed buffer between `COMPRESS_MIN` and
    /// `COMPRESS_MAX` bytes (plain size) whose entries average
    /// `COMPRESS_MIN_AVG_ENTRY` bytes or more is coded if that saves at
    /// least 1/8 and a book exists (else its values train the first book),
    /// a coded one that no longer qualifies is made plain, and the buffer
    /// is trimmed to its length. A hash that is never sealed is still
    /// correct, only larger.
    pub fn seal(&mut self) {
        if let HashValue::Packed(p) = self {
            p.seal();
        }
    }

    /// HSET/HMSET/HINCRBY/HINCRBYFLOAT semantics; true if `field` is new.
    ///
    /// Redis 7.0 converts to a hashtable before inserting when the field or
    /// the value is longer than `max_listpack_value` (checked for an update
    /// of an existing field too, and for the results of HINCRBY and
    /// HINCRBYFLOAT), and after inserting when the hash has more than
    /// `max_listpack_entries` fields. Updating a packed value with one of the
    /// same length rewrites it in place without reallocating.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &HashLimits) -> bool {
        self.set_inner(field, value, limits, false)
    }

    /// [`set`](Self::set) of a field the caller knows is absent (a new
    /// hash filled by one HSET, whose fields it has compared among
    /// themselves): a packed hash appends without looking for the field,
    /// which for a whole record would walk the buffer once per field.
    /// Returns true, as `set` would.
    pub fn set_absent(&mut self, field: &[u8], value: &[u8], limits: &HashLimits) -> bool {
        self.set_inner(field, value, limits, true)
    }

    fn set_inner(&mut self, field: &[u8], value: &[u8], limits: &HashLimits, absent: bool) -> bool {
        if let HashValue::Packed(p) = self {
            let too_long =
                field.len() > limits.max_listpack_value || value.len() > limits.max_listpack_value;
            let too_big =
                p.buf.len().saturating_add(field.len() + value.len()) > PACKED_MAX_SAFE_BYTES;
            if !too_long && !too_big {
                if p.len == 0 && p.book == 0 && value.len() >= COMPRESS_MIN_AVG_ENTRY {
                    // A new hash whose first value is long enough to be
                    // coded starts coded, so an HSET of a whole record
                    // codes each value once instead of building the plain
                    // form and coding it at the seal (which makes it plain
                    // again should the whole not qualify).
                    if let Some((id, _)) = codebooks::current() {
                        p.book = id;
                    }
                }
                let new = if absent {
                    debug_assert!(p.book != 0 || p.find(field).is_none());
                    debug_assert!(p.coded().is_none_or(|c| c.find(field).is_none()));
                    p.append(field, value);
                    true
                } else {
                    p.upsert(field, value)
                };
                if p.len as usize > limits.max_listpack_entries {
                    self.convert_to_table();
                }
                return new;
            }
            self.convert_to_table();
        }
        match self {
            HashValue::Table(t) => t.insert(field, value),
            // Unreachable: converted just above.
            HashValue::Packed(p) => p.upsert(field, value),
        }
    }

    /// Fills a new, empty hash with the pairs of one HSET in one pass, when
    /// the result is what setting them one by one and sealing would give
    /// a coded hash with interned names (a YCSB insert): the field names
    /// are the list this thread found last (so they are distinct and no
    /// field is looked up), every value is coded once straight into the
    /// thread's scratch buffer, and the record is allocated once, at its
    /// size, without names (no growing buffer, no second pass to take the
    /// names out). False, with the hash untouched, when any of that does
    /// not hold: the caller then sets the pairs one by one.
    pub fn fill_coded(&mut self, pairs: &[(&[u8], &[u8])], limits: &HashLimits) -> bool {
        let HashValue::Packed(p) = self else {
            return false;
        };
        let n = pairs.len();
        if p.len != 0 || p.book != 0 || n > limits.max_listpack_entries {
            return false;
        }
        let mut plain = 0usize;
        for (f, v) in pairs {
            if f.len() > limits.max_listpack_value || v.len() > limits.max_listpack_value {
                return false;
            }
            plain += varint_len(f.len()) + f.len() + varint_len(v.len()) + v.len();
        }
        if !(COMPRESS_MIN..=COMPRESS_MAX).contains(&plain)
            || plain < COMPRESS_MIN_AVG_ENTRY.saturating_mul(n)
        {
            return false;
        }
        let Some((id, book)) = codebooks::current() else {
            return false;
        };
        let Some(list) = names::last_matching(pairs.iter().map(|(f, _)| *f), n) else {
            return false;
        };
        let mut out = take_scratch();
        for (_, v) in pairs {
            put_value(&mut out, book, v);
        }
        // Setting one by one keeps the hash coded only if that saved 1/8
        // (`code`), unless its first value was long enough to start coded.
        let names_len = plain
            - pairs
                .iter()
                .map(|(_, v)| varint_len(v.len()) + v.len())
                .sum::<usize>();
        let fits = out.len() + names_len <= plain - plain / 8
            || pairs[0].1.len() >= COMPRESS_MIN_AVG_ENTRY;
        if fits {
            p.buf = out.as_slice().to_vec();
            p.len = n as u32;
            p.book = id;
            p.names = list;
        }
        give_scratch(out);
        fits
    }

    /// HSETNX: sets only if `field` is absent; true if it was set. An
    /// existing field leaves the hash untouched, encoding included (Redis
    /// checks existence before its length-based conversion).
    pub fn set_nx(&mut self, field: &[u8], value: &[u8], limits: &HashLimits) -> bool {
        if self.view().contains(field) {
            return false;
        }
        self.set(field, value, limits)
    }

    /// HDEL of one field; true if it existed. Never changes the encoding.
    /// The caller deletes the key when the hash becomes empty, as Redis does.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            HashValue::Packed(p) => p.remove(field),
            HashValue::Table(t) => t.remove(field),
        }
    }

    /// OBJECT ENCODING's answer, with Redis 7.0's names (a coded
    /// packed hash is still a "listpack": same rules, same order).
    pub fn encoding(&self) -> &'static str {
        match self {
            HashValue::Packed(_) => "listpack",
            HashValue::Table(_) => "hashtable",
        }
    }

    pub fn is_packed(&self) -> bool {
        matches!(self, HashValue::Packed(_))
    }

    /// Heap bytes held (not counting `size_of::<HashValue>()`), for MEMORY
    /// USAGE and memory accounting. O(1). Packed: the buffer's capacity
    /// (exact once sealed). Table: the boxed table, its buckets and the
    /// field and value bytes.
    pub fn mem_bytes(&self) -> usize {
        match self {
            HashValue::Packed(p) => p.buf.capacity(),
            HashValue::Table(t) => {
                // Per bucket: the two boxed-slice headers plus hashbrown's
                // control byte; plus the bytes the boxes point to.
                let bucket = std::mem::size_of::<(Box<[u8]>, Box<[u8]>)>() + 1;
                std::mem::size_of::<TableHash>() + t.map.capacity() * bucket + t.payload
            }
        }
    }

    /// Switches to the hashtable encoding (no-op if already there).
    pub fn convert_to_table(&mut self) {
        if let HashValue::Packed(p) = self {
            p.decode();
            let mut t = TableHash {
                map: HashMap::with_capacity(p.len as usize),
                payload: 0,
            };
            for s in p.slots() {
                t.insert(&p.buf[s.field.0..s.field.1], &p.buf[s.value.0..s.value.1]);
            }
            *self = HashValue::Table(Box::new(t));
        }
    }

    /// Re-packs a table that fits the limits again (what an RDB reload does
    /// in Redis). Returns true if the hash is packed afterwards. Order of
    /// the packed entries is the table's iteration order. The result is
    /// sealed.
    pub fn try_pack(&mut self, limits: &HashLimits) -> bool {
        let t = match self {
            HashValue::Packed(_) => return true,
            HashValue::Table(t) => t,
        };
        let fits = t.map.len() <= limits.max_listpack_entries
            && t.payload <= PACKED_MAX_SAFE_BYTES
            && t.map.iter().all(|(f, v)| {
                f.len() <= limits.max_listpack_value && v.len() <= limits.max_listpack_value
            });
        if !fits {
            return false;
        }
        let mut p = PackedHash::default();
        for (f, v) in t.map.iter() {
            p.upsert(f, v);
        }
        p.seal();
        *self = HashValue::Packed(p);
        true
    }
}

/// A buffer on loan from the thread's scratch slot.
struct Scratch(Vec<u8>);

impl Drop for Scratch {
    fn drop(&mut self) {
        give_scratch(std::mem::take(&mut self.0));
    }
}

/// The values `get` decoded from a coded hash. One buffer, sized up front
/// (twice the coded size: every value of the hash unless the book codes
/// it more than 2:1, without walking the entries to add them up), filled
/// from the front and never moved or rewritten, so a slice handed out
/// stays valid (and is the only reference to its bytes) while later gets
/// append behind it.
struct Arena {
    /// Owns the memory; not touched through this field while the arena
    /// lives (only through `ptr`), and handed back to the scratch slot on
    /// drop, when no slice into it can be left.
    _keep: Scratch,
    ptr: *mut u8,
    cap: usize,
    used: Cell<usize>,
}

impl Arena {
    fn new(buf: &[u8]) -> Arena {
        let cap = 2 * buf.len();
        let mut v = take_scratch();
        // Initialised, so handing out `&mut [u8]` over it is sound.
        v.resize(cap, 0);
        let ptr = v.as_mut_ptr();
        Arena {
            _keep: Scratch(v),
            ptr,
            cap,
            used: Cell::new(0),
        }
    }

    /// The next `n` bytes, or `None` once the buffer is used up (a caller
    /// that asks for the same value many times, or values coded more than
    /// 2:1).
    #[allow(clippy::mut_from_ref)]
    fn alloc(&self, n: usize) -> Option<&mut [u8]> {
        let at = self.used.get();
        if n > self.cap - at {
            return None;
        }
        self.used.set(at + n);
        // SAFETY: `at + n <= cap` = the initialised length of the buffer
        // `ptr` points to, which lives (unmoved: a Vec's heap block does
        // not move with the Vec) as long as `self`. `used` only grows, so
        // `at..at + n` was never handed out: this is its only reference.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(at), n) })
    }
}

/// Read state of a coded hash: its buffer and book, the values decoded by
/// `get` (one at a time), and the whole plain form once something walks it.
struct CodedView<'a> {
    c: Coded<'a>,
    values: OnceCell<Arena>,
    plain: OnceCell<Scratch>,
}

impl CodedView<'_> {
    fn plain(&self) -> &[u8] {
        &self
            .plain
            .get_or_init(|| {
                let mut v = take_scratch();
                self.c.decode_all(&mut v);
                Scratch(v)
            })
            .0
    }

    /// One value: a raw one in place, a coded one decoded on its own.
    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        if let Some(p) = self.plain.get() {
            return packed_find(&p.0, field).map(|s| &p.0[s.value.0..s.value.1]);
        }
        let s = self.c.find(field)?;
        if !s.coded {
            return Some(&self.c.buf[s.data.0..s.data.1]);
        }
        let arena = self.values.get_or_init(|| Arena::new(self.c.buf));
        match arena.alloc(s.vlen) {
            Some(out) => {
                read_value(self.c.buf, &s, self.c.book, out);
                Some(out)
            }
            None => {
                let p = self.plain();
                packed_find(p, field).map(|s| &p[s.value.0..s.value.1])
            }
        }
    }
}

/// Read access to a hash, whatever its encoding (see [`HashValue::view`]).
pub struct HashView<'a> {
    inner: ViewInner<'a>,
    /// Number of fields (kept by the stored form, so O(1) here too).
    len: usize,
}

enum ViewInner<'a> {
    Packed(&'a [u8]),
    Coded(CodedView<'a>),
    Table(&'a TableHash),
}

impl HashView<'_> {
    /// The plain packed buffer (decoding a coded one), if the hash is
    /// packed.
    fn packed(&self) -> Option<&[u8]> {
        match &self.inner {
            ViewInner::Packed(b) => Some(b),
            ViewInner::Coded(c) => Some(c.plain()),
            ViewInner::Table(_) => None,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.inner {
            ViewInner::Table(t) => t.map.get(field).map(|v| &**v),
            ViewInner::Coded(c) => c.get(field),
            ViewInner::Packed(buf) => packed_find(buf, field).map(|s| &buf[s.value.0..s.value.1]),
        }
    }

    /// The value of `field` without decoding it: a coded value comes back
    /// as a [`ValueRef::Coded`] that decodes straight into whatever buffer
    /// the caller appends it to (HGET/HMGET into the reply: decoded once,
    /// no scratch buffer, no copy).
    #[inline]
    pub fn get_ref(&self, field: &[u8]) -> Option<ValueRef<'_>> {
        match &self.inner {
            ViewInner::Coded(c) if c.plain.get().is_none() => {
                let s = c.c.find(field)?;
                let buf = c.c.buf;
                Some(if s.coded {
                    ValueRef::Coded {
                        code: &buf[s.data.0..],
                        clen: s.data.1 - s.data.0,
                        len: s.vlen,
                        book: c.c.book,
                    }
                } else {
                    ValueRef::Bytes(&buf[s.data.0..s.data.1])
                })
            }
            _ => self.get(field).map(ValueRef::Bytes),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        match &self.inner {
            // No need to decode anything.
            ViewInner::Coded(c) => c.c.find(field).is_some(),
            _ => self.get(field).is_some(),
        }
    }

    /// Calls `f` with every pair in [`iter`](Self::iter) order. Unlike
    /// `iter`, a coded hash is not decoded first: each [`ValueRef`] decodes
    /// its value straight into the buffer the caller appends it to (HGETALL
    /// into the reply, the snapshot writer into its block), so a coded
    /// value is decoded once and copied never.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], ValueRef<'_>)) {
        match &self.inner {
            ViewInner::Coded(c) if c.plain.get().is_none() => {
                let (buf, book) = (c.c.buf, c.c.book);
                for s in c.c.slots() {
                    let v = if s.coded {
                        ValueRef::Coded {
                            code: &buf[s.data.0..],
                            clen: s.data.1 - s.data.0,
                            len: s.vlen,
                            book,
                        }
                    } else {
                        ValueRef::Bytes(&buf[s.data.0..s.data.1])
                    };
                    f(s.field, v);
                }
            }
            _ => {
                for (field, v) in self.iter() {
                    f(field, ValueRef::Bytes(v));
                }
            }
        }
    }

    /// All (field, value) pairs: insertion order when packed (what Redis's
    /// listpack returns), unspecified order for a table.
    pub fn iter(&self) -> Iter<'_> {
        match &self.inner {
            ViewInner::Table(t) => {
                let it = t.map.iter();
                let mut ahead = it.clone();
                ahead.nth(crate::util::PREFETCH_AHEAD - 1);
                Iter(IterInner::Table { it, ahead })
            }
            _ => Iter(IterInner::Packed(Slots {
                buf: self.packed().unwrap_or_default(),
                pos: 0,
            })),
        }
    }

    /// The `i`th pair in [`iter`](Self::iter) order, for HRANDFIELD. O(i)
    /// for both encodings (hashbrown exposes no bucket indexing); callers
    /// needing many samples from a large hash should collect `iter()` once.
    pub fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.iter().nth(i)
    }

    /// One HSCAN step. Appends pairs to `out` and returns the next cursor
    /// (0 when done).
    ///
    /// Packed: everything at once and cursor 0, whatever `cursor` is, as
    /// Redis does for a listpack.
    ///
    /// Table: pairs are visited in ascending [`scan_hash`] of the field and
    /// the cursor is the hash to resume at, so any field present for the
    /// whole scan is returned (fields whose hash lies beyond the cursor are
    /// still ahead, whatever was inserted or deleted meanwhile), and none is
    /// returned twice unless it was deleted and re-added. Fields sharing a
    /// hash are returned together so a cursor never splits them. `count` is a
    /// hint as in Redis (0 is treated as 1). Cost: O(n) per call (one hash
    /// per field plus a selection), so a full scan is O(n^2 / count); this
    /// trades Redis's O(count) steps for not needing access to hashbrown's
    /// bucket layout.
    pub fn scan(&self, cursor: u64, count: usize, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> u64 {
        let t = match &self.inner {
            ViewInner::Table(t) => t,
            _ => {
                out.extend(self.iter().map(|(f, v)| (f.to_vec(), v.to_vec())));
                return 0;
            }
        };
        let count = count.max(1);
        let mut cand: Vec<(u64, &[u8], &[u8])> = t
            .map
            .iter()
            .map(|(f, v)| (scan_hash(f), &**f, &**v))
            .filter(|(h, _, _)| *h >= cursor)
            .collect();
        if cand.len() > count {
            // Bring the `count` smallest hashes to the front (unordered).
            cand.select_nth_unstable_by_key(count - 1, |c| c.0);
            let last = cand[..count].iter().map(|c| c.0).max().unwrap_or(cursor);
            // Take everything up to and including `last` (ties included);
            // resume at the smallest hash beyond it.
            let next = cand.iter().map(|c| c.0).filter(|&h| h > last).min();
            out.extend(
                cand.iter()
                    .filter(|c| c.0 <= last)
                    .map(|c| (c.1.to_vec(), c.2.to_vec())),
            );
            // `next > last >= 0`, so a real cursor is never 0.
            next.unwrap_or(0)
        } else {
            out.extend(cand.iter().map(|c| (c.1.to_vec(), c.2.to_vec())));
            0
        }
    }
}

/// A value met by [`HashView::for_each`]: bytes to borrow, or a coded
/// value that decodes into whatever buffer it is appended to.
pub enum ValueRef<'a> {
    Bytes(&'a [u8]),
    Coded {
        /// The code and whatever follows it in the hash's buffer (read as
        /// slack by the decoder, never used).
        code: &'a [u8],
        clen: usize,
        len: usize,
        book: &'static Codebook,
    },
}

impl ValueRef<'_> {
    /// The value's length in bytes (known without decoding).
    pub fn len(&self) -> usize {
        match self {
            ValueRef::Bytes(b) => b.len(),
            ValueRef::Coded { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the value's bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self {
            ValueRef::Bytes(b) => out.extend_from_slice(b),
            ValueRef::Coded {
                code,
                clen,
                len,
                book,
            } => {
                if book.decode_append(code, *clen, *len, out).is_none() {
                    // Cannot happen for a buffer this module wrote; keep
                    // the length the caller announced (a reply header).
                    debug_assert!(false, "corrupt coded hash value");
                    out.resize(out.len() + len, 0);
                }
            }
        }
    }
}

/// Iterator returned by [`HashValue::iter`].
pub struct Iter<'a>(IterInner<'a>);

enum IterInner<'a> {
    Packed(Slots<'a>),
    /// `ahead` runs `util::PREFETCH_AHEAD` pairs in front of `it`: each field
    /// and value is an allocation of its own, so a walk over a large hash
    /// (HGETALL, a snapshot) is a walk of cache misses unless the pair a
    /// few steps ahead is fetched meanwhile.
    Table {
        it: hashbrown::hash_map::Iter<'a, Box<[u8]>, Box<[u8]>>,
        ahead: hashbrown::hash_map::Iter<'a, Box<[u8]>, Box<[u8]>>,
    },
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterInner::Packed(slots) => {
                let buf: &'a [u8] = slots.buf;
                slots
                    .next()
                    .map(|s| (&buf[s.field.0..s.field.1], &buf[s.value.0..s.value.1]))
            }
            IterInner::Table { it, ahead } => {
                if let Some((f, v)) = ahead.next() {
                    crate::util::prefetch(f.as_ptr());
                    crate::util::prefetch(v.as_ptr());
                }
                it.next().map(|(f, v)| (&**f, &**v))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterInner::Packed(_) => (0, None),
            IterInner::Table { it, .. } => it.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap as StdMap, HashSet};

    fn lim(entries: usize, value: usize) -> HashLimits {
        HashLimits {
            max_listpack_entries: entries,
            max_listpack_value: value,
        }
    }

    #[test]
    fn header_is_one_32_byte_block() {
        // The `Box<HashValue>` in `Value` is one jemalloc 32-byte block
        // (docs/design.md, "Memory layout").
        assert_eq!(std::mem::size_of::<HashValue>(), 32);
    }

    #[test]
    fn varint_edges() {
        let cases = [
            0usize,
            1,
            127,
            128,
            255,
            16_383,
            16_384,
            (1 << 21) - 1,
            1 << 21,
            u32::MAX as usize,
            usize::MAX,
        ];
        for &v in &cases {
            let mut buf = vec![0xAA];
            put_varint(&mut buf, v);
            assert_eq!(buf.len() - 1, varint_len(v), "{v}");
            assert_eq!(get_varint(&buf, 1), Some((v, buf.len() - 1)), "{v}");
            // Truncated encodings are rejected, not misread.
            if buf.len() > 2 {
                assert_eq!(get_varint(&buf[..buf.len() - 1], 1), None, "{v}");
            }
        }
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(usize::MAX), MAX_VARINT_LEN);
        // Over-long / overflowing encodings.
        assert_eq!(get_varint(&[0xff; 11], 0), None);
        assert_eq!(
            get_varint(
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
                0
            ),
            None
        );
        assert_eq!(get_varint(&[], 0), None);
        assert_eq!(get_varint(&[1], 5), None);
    }

    #[test]
    fn packed_with_multibyte_lengths() {
        let l = lim(128, 100_000);
        let mut h = HashValue::new();
        let f = vec![b'f'; 200];
        assert!(h.set(&f, &[b'x'; 127], &l));
        assert!(h.set(b"", b"", &l));
        assert!(h.set(b"k", &[b'y'; 70_000], &l));
        assert_eq!(h.view().get(&f), Some(&[b'x'; 127][..]));
        // Value grows from a 1-byte to a 2-byte length varint, then shrinks.
        assert!(!h.set(&f, &[b'z'; 128], &l));
        assert_eq!(h.view().get(&f), Some(&[b'z'; 128][..]));
        assert_eq!(h.view().get(b""), Some(&b""[..]));
        assert!(!h.set(&f, b"", &l));
        assert_eq!(h.view().get(&f), Some(&b""[..]));
        assert_eq!(h.view().get(b"k").map(<[u8]>::len), Some(70_000));
        assert!(h.is_packed());
        let order: Vec<Vec<u8>> = h.view().iter().map(|(f, _)| f.to_vec()).collect();
        assert_eq!(order, vec![f.clone(), b"".to_vec(), b"k".to_vec()]);
        assert!(h.remove(b""));
        assert!(!h.remove(b""));
        assert_eq!(h.len(), 2);
        assert_eq!(h.view().get(b"k").map(<[u8]>::len), Some(70_000));
    }

    #[test]
    fn same_length_update_does_not_reallocate() {
        let l = HashLimits::default();
        let mut h = HashValue::new();
        h.set(b"a", b"1111", &l);
        h.set(b"b", b"2222", &l);
        let before = match &h {
            HashValue::Packed(p) => (p.buf.as_ptr(), p.buf.capacity()),
            HashValue::Table(_) => panic!("packed expected"),
        };
        assert!(!h.set(b"a", b"9999", &l));
        let after = match &h {
            HashValue::Packed(p) => (p.buf.as_ptr(), p.buf.capacity()),
            HashValue::Table(_) => panic!("packed expected"),
        };
        assert_eq!(before, after);
        assert_eq!(h.view().get(b"a"), Some(&b"9999"[..]));
    }

    #[test]
    fn conversions_like_redis() {
        // Each scenario checked against Redis 7.0.15 OBJECT ENCODING.
        let l = HashLimits::default();
        let long = [b'x'; 65];
        // HSET of an existing field with a long value converts.
        let mut h = HashValue::new();
        h.set(b"f", b"1", &l);
        h.set(b"f", &long, &l);
        assert_eq!(h.encoding(), "hashtable");
        // HSETNX of an existing field with a long value does not.
        let mut h = HashValue::new();
        h.set(b"f", b"1", &l);
        assert!(!h.set_nx(b"f", &long, &l));
        assert_eq!(h.encoding(), "listpack");
        // HSETNX of a new long field does.
        assert!(h.set_nx(&long, b"1", &l));
        assert_eq!(h.encoding(), "hashtable");
        // 128 fields stay packed, the 129th converts.
        let mut h = HashValue::new();
        for i in 0..128 {
            h.set(format!("f{i}").as_bytes(), b"v", &l);
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"one-more", b"v", &l);
        assert_eq!(h.encoding(), "hashtable");
        // Shrinking does not convert back.
        for i in 0..128 {
            h.remove(format!("f{i}").as_bytes());
        }
        assert_eq!((h.len(), h.encoding()), (1, "hashtable"));
        assert!(h.try_pack(&l));
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.view().get(b"one-more"), Some(&b"v"[..]));
        // hash-max-listpack-entries 0: the first field converts.
        let mut h = HashValue::new();
        h.set(b"f", b"1", &lim(0, 64));
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn table_scan_returns_everything_once() {
        let l = lim(0, 0);
        let mut h = HashValue::new();
        for i in 0..1000 {
            h.set(
                format!("field:{i}").as_bytes(),
                format!("{i}").as_bytes(),
                &l,
            );
        }
        for count in [1, 7, 10, 999, 1000, 5000] {
            let mut seen = HashSet::new();
            let mut cursor = 0;
            let mut steps = 0;
            loop {
                let mut out = Vec::new();
                cursor = h.view().scan(cursor, count, &mut out);
                for (f, v) in out {
                    assert_eq!(h.view().get(&f), Some(&v[..]));
                    assert!(seen.insert(f), "duplicate");
                }
                steps += 1;
                if cursor == 0 {
                    break;
                }
                assert!(cursor <= i64::MAX as u64);
            }
            assert_eq!(seen.len(), 1000);
            assert!(steps >= 1000 / count.max(1));
        }
    }

    #[test]
    fn table_scan_survives_mutation() {
        let l = lim(0, 0);
        let mut h = HashValue::new();
        for i in 0..500 {
            h.set(format!("stable:{i}").as_bytes(), b"v", &l);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let mut out = Vec::new();
            cursor = h.view().scan(cursor, 10, &mut out);
            seen.extend(out.into_iter().map(|(f, _)| f));
            // Churn between steps: add and remove other fields.
            for j in 0..20 {
                h.set(format!("churn:{round}:{j}").as_bytes(), b"v", &l);
                h.remove(format!("churn:{}:{j}", round.max(1) - 1).as_bytes());
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(seen.contains(format!("stable:{i}").as_bytes()));
        }
    }

    #[test]
    fn packed_scan_is_one_shot() {
        let l = HashLimits::default();
        let mut h = HashValue::new();
        h.set(b"a", b"1", &l);
        h.set(b"b", b"2", &l);
        let mut out = Vec::new();
        assert_eq!(h.view().scan(12345, 1, &mut out), 0);
        assert_eq!(
            out,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec())
            ]
        );
    }

    #[test]
    fn mem_bytes_tracks_payload() {
        let l = lim(0, 0);
        let mut h = HashValue::new();
        h.set(b"field", &[0u8; 1000], &l);
        assert!(h.mem_bytes() >= 1005);
        h.set(b"field", b"", &l);
        let small = h.mem_bytes();
        assert!(small < 1000);
        h.remove(b"field");
        assert!(h.mem_bytes() <= small);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Set(Vec<u8>, Vec<u8>),
        SetNx(Vec<u8>, Vec<u8>),
        Remove(Vec<u8>),
        Get(Vec<u8>),
    }

    fn field() -> impl Strategy<Value = Vec<u8>> {
        // Few distinct short fields so updates and deletes hit; some long
        // enough (up to 10 > 8) to force conversions.
        prop_oneof![
            4 => proptest::collection::vec(prop::sample::select(vec![b'a', b'b', b'c']), 0..4),
            1 => proptest::collection::vec(any::<u8>(), 0..11),
        ]
    }

    fn value() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..11)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (field(), value()).prop_map(|(f, v)| Op::Set(f, v)),
            1 => (field(), value()).prop_map(|(f, v)| Op::SetNx(f, v)),
            3 => field().prop_map(Op::Remove),
            1 => field().prop_map(Op::Get),
        ]
    }

    /// YCSB-like record: ten 100-byte values over a 64-symbol alphabet.
    fn ycsb_record(seed: &mut u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..10)
            .map(|i| {
                let v = (0..100)
                    .map(|_| {
                        *seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        b' ' + (*seed >> 58) as u8
                    })
                    .collect();
                (format!("field{i}").into_bytes(), v)
            })
            .collect()
    }

    /// Makes sure the process has a book, trained on YCSB-like text if
    /// this is the first test to need one.
    fn ensure_book() {
        let mut seed = 77;
        while codebooks::current().is_none() {
            let text: Vec<Vec<u8>> = (0..64)
                .flat_map(|_| ycsb_record(&mut seed).into_iter().map(|(_, v)| v))
                .collect();
            codebooks::observe(text.iter().map(|v| &v[..]));
        }
    }

    #[test]
    fn ycsb_record_is_compressed_and_reads_back() {
        ensure_book();
        let l = lim(512, 1024);
        let mut seed = 9;
        let rec = ycsb_record(&mut seed);
        let mut h = HashValue::new();
        for (f, v) in &rec {
            h.set(f, v, &l);
        }
        h.seal();
        assert!(h.is_compressed());
        assert_eq!(h.encoding(), "listpack");
        // 1080 packed bytes: the coded form is under 7/8 of that (each
        // value at ~6 bits a byte).
        assert!(h.mem_bytes() <= 1080 - 1080 / 8, "{}", h.mem_bytes());
        let got: Vec<(Vec<u8>, Vec<u8>)> = h
            .view()
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, rec);
        // One value at a time, in any order, each decoded on its own, and
        // all of them alive at once.
        let v = h.view();
        let some: Vec<&[u8]> = [7, 2, 7, 9, 0]
            .iter()
            .map(|&i| v.get(&rec[i].0).unwrap())
            .collect();
        for (got, &i) in some.iter().zip(&[7, 2, 7, 9, 0]) {
            assert_eq!(*got, &rec[i].1[..]);
        }
        // Asking for more than the hash holds falls back to one full
        // decode, and the earlier values stay valid.
        let many: Vec<&[u8]> = (0..40).map(|i| v.get(&rec[i % 10].0).unwrap()).collect();
        for (i, got) in many.iter().enumerate() {
            assert_eq!(*got, &rec[i % 10].1[..]);
        }
        assert_eq!(some[0], &rec[7].1[..]);
        assert!(v.contains(b"field4") && !v.contains(b"field10") && v.get(b"nope").is_none());
        drop(v);
        // A write edits the coded form in place: the new value is coded
        // (or kept raw, if short) and the others are not touched.
        assert!(!h.set(b"field3", b"short", &l));
        assert!(h.is_compressed());
        assert!(!h.set(b"field5", &rec[1].1, &l));
        assert!(h.set(b"field10", &rec[2].1, &l));
        h.seal();
        assert!(h.is_compressed());
        assert_eq!(h.view().get(b"field3"), Some(&b"short"[..]));
        assert_eq!(h.view().get(b"field5"), Some(&rec[1].1[..]));
        assert_eq!(h.view().get(b"field10"), Some(&rec[2].1[..]));
        assert!(h.remove(b"field10"));
        for (f, _) in rec.iter().skip(1) {
            assert!(h.remove(f));
        }
        h.seal();
        assert!(!h.is_compressed());
        assert_eq!(h.len(), 1);
        assert_eq!(h.view().get(b"field0"), Some(&rec[0].1[..]));
        // Small values (redis-benchmark's) never compress, even when there
        // are enough of them to pass COMPRESS_MIN.
        let mut s = HashValue::new();
        s.set(b"f", b"xxx", &l);
        s.seal();
        assert!(!s.is_compressed());
        assert_eq!(s.mem_bytes(), 1 + 1 + 1 + 3);
        for i in 0..100 {
            s.set(format!("element:{i:012}").as_bytes(), b"xxx", &l);
        }
        s.seal();
        assert!(s.mem_bytes() > COMPRESS_MIN);
        assert!(!s.is_compressed());
    }

    /// The interned-list id of a packed hash (0 or `NAMES_REFUSED`: inline).
    fn names_id(h: &HashValue) -> u16 {
        match h {
            HashValue::Packed(p) => p.names,
            HashValue::Table(_) => 0,
        }
    }

    fn record_hash(rec: &[(Vec<u8>, Vec<u8>)], l: &HashLimits) -> HashValue {
        let mut h = HashValue::new();
        for (f, v) in rec {
            h.set(f, v, l);
        }
        h.seal();
        h
    }

    /// Issue 20's update path: a coded value replaced by one of the same
    /// length is coded over the old code (with a fixed-width book: the
    /// buffer neither moves nor changes length); a value the book cannot
    /// code falls back to the raw form, and a codable one codes again.
    #[test]
    fn same_length_update_is_coded_in_place() {
        ensure_book();
        let l = lim(512, 1024);
        let mut seed = 41;
        let rec = ycsb_record(&mut seed);
        let mut h = record_hash(&rec, &l);
        assert!(h.is_compressed());
        let at = |h: &HashValue| match h {
            HashValue::Packed(p) => (p.buf.as_ptr(), p.buf.len(), p.buf.capacity()),
            HashValue::Table(_) => panic!("packed"),
        };
        let before = at(&h);
        let fixed = codebooks::current().expect("book").1.width() != 0;
        let new = ycsb_record(&mut seed);
        for (i, (f, _)) in rec.iter().enumerate() {
            assert!(!h.set(f, &new[i].1, &l));
            h.seal();
            if fixed {
                assert_eq!(at(&h), before, "field {i}");
            }
        }
        let got: Vec<(Vec<u8>, Vec<u8>)> = h
            .view()
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, new);
        let mut odd = new[3].1.clone();
        odd[50] = 0xC3;
        assert!(!h.set(&new[3].0, &odd, &l));
        h.seal();
        assert!(h.is_compressed());
        if fixed {
            assert!(at(&h).1 > before.1, "kept raw: longer");
        }
        assert!(!h.set(&new[4].0, &rec[4].1, &l));
        assert!(!h.set(&new[3].0, &rec[3].1, &l));
        h.seal();
        if fixed {
            assert_eq!(at(&h).1, before.1, "coded again");
        }
        let mut want = new.clone();
        want[3].1 = rec[3].1.clone();
        want[4].1 = rec[4].1.clone();
        let got: Vec<(Vec<u8>, Vec<u8>)> = h
            .view()
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, want);
    }

    /// Issue 20's insert path: a new hash whose names are the thread's last
    /// list is built in one pass, into the same bytes that setting the
    /// pairs one by one and sealing gives; otherwise nothing is touched.
    #[test]
    fn fill_coded_is_set_one_by_one() {
        ensure_book();
        let l = lim(512, 1024);
        let mut seed = 43;
        let rec: Vec<(Vec<u8>, Vec<u8>)> = ycsb_record(&mut seed)
            .into_iter()
            .map(|(f, v)| ([b"fill-".as_slice(), &f].concat(), v))
            .collect();
        let pairs: Vec<(&[u8], &[u8])> = rec.iter().map(|(f, v)| (&f[..], &v[..])).collect();
        // Not a known list yet: refused, untouched.
        let mut h = HashValue::new();
        assert!(!h.fill_coded(&pairs, &l));
        assert!(h.is_empty() && !h.is_compressed());
        record_hash(&rec, &l);
        let one_by_one = record_hash(&rec, &l);
        assert_ne!(names_id(&one_by_one), 0);
        assert_ne!(names_id(&one_by_one), NAMES_REFUSED);
        let mut filled = HashValue::new();
        assert!(filled.fill_coded(&pairs, &l));
        filled.seal();
        let bytes = |h: &HashValue| match h {
            HashValue::Packed(p) => (p.buf.clone(), p.len, p.book, p.names),
            HashValue::Table(_) => panic!("packed"),
        };
        assert_eq!(bytes(&filled), bytes(&one_by_one));
        assert_eq!(filled.mem_bytes(), one_by_one.mem_bytes());
        // Limits it would break, another order, a prefix: refused.
        assert!(!HashValue::new().fill_coded(&pairs, &lim(9, 1024)));
        assert!(!HashValue::new().fill_coded(&pairs, &lim(512, 99)));
        let mut swapped = pairs.clone();
        swapped.swap(0, 1);
        assert!(!HashValue::new().fill_coded(&swapped, &l));
        assert!(!HashValue::new().fill_coded(&pairs[..9], &l));
        // Not an empty hash: refused.
        let mut full = one_by_one.clone();
        assert!(!full.fill_coded(&pairs, &l));
    }

    #[test]
    fn ycsb_records_share_their_names() {
        ensure_book();
        let l = lim(512, 1024);
        let mut seed = 31;
        // Names of their own, so this test's sightings are its own.
        let rec: Vec<(Vec<u8>, Vec<u8>)> = ycsb_record(&mut seed)
            .into_iter()
            .map(|(f, v)| ([b"share-".as_slice(), &f].concat(), v))
            .collect();
        let first = record_hash(&rec, &l);
        assert!(first.is_compressed());
        assert_eq!(
            names_id(&first),
            NAMES_REFUSED,
            "first sighting keeps its names"
        );
        let h = record_hash(&rec, &l);
        let id = names_id(&h);
        assert!(id != 0 && id != NAMES_REFUSED);
        let mut h2 = record_hash(
            &ycsb_record(&mut seed)
                .into_iter()
                .map(|(f, v)| ([b"share-".as_slice(), &f].concat(), v))
                .collect::<Vec<_>>(),
            &l,
        );
        assert_eq!(names_id(&h2), id);
        // 10 x (1 + 75) with a fixed-width 6-bit book: jemalloc's 768
        // class, where names inline took the 896 one.
        let width = codebooks::current().unwrap().1.width();
        if width == 6 {
            assert_eq!(h.mem_bytes(), 760);
            assert!(first.mem_bytes() > 768);
        }
        assert!(h.mem_bytes() + 60 < first.mem_bytes());
        let got: Vec<(Vec<u8>, Vec<u8>)> = h
            .view()
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, rec);
        let mut walked = Vec::new();
        h.view().for_each(|f, v| {
            let mut b = Vec::new();
            v.append_to(&mut b);
            walked.push((f.to_vec(), b));
        });
        assert_eq!(walked, rec);
        assert_eq!(h.view().get(&rec[9].0), Some(&rec[9].1[..]));
        assert!(h.view().contains(&rec[0].0) && !h.view().contains(b"field0"));
        // An update of one field keeps the list; a new field puts the
        // names back inline (an 11-name list seen once is not interned);
        // removing it finds the list again.
        assert!(!h2.set(&rec[4].0, &rec[5].1, &l));
        h2.seal();
        assert_eq!(names_id(&h2), id);
        assert_eq!(h2.view().get(&rec[4].0), Some(&rec[5].1[..]));
        assert!(h2.set(b"extra", &rec[1].1, &l));
        h2.seal();
        assert_eq!(names_id(&h2), NAMES_REFUSED);
        assert_eq!(h2.view().get(b"extra"), Some(&rec[1].1[..]));
        assert_eq!(h2.view().get(&rec[4].0), Some(&rec[5].1[..]));
        assert!(h2.remove(b"extra"));
        h2.seal();
        assert_eq!(names_id(&h2), id);
        assert_eq!(h2.len(), 10);
        // Removing a field of an interned hash leaves 9 inline names.
        assert!(h2.remove(&rec[0].0));
        assert!(!h2.remove(&rec[0].0));
        h2.seal();
        assert_ne!(names_id(&h2), id);
        assert_eq!(h2.len(), 9);
        assert_eq!(h2.view().get(&rec[9].0).map(<[u8]>::len), Some(100));
        // A conversion to a table and back decodes through the list.
        let mut t = h.clone();
        t.convert_to_table();
        let got: StdMap<Vec<u8>, Vec<u8>> = t
            .view()
            .iter()
            .map(|(f, v)| (f.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, rec.iter().cloned().collect::<StdMap<_, _>>());
        // With the table full, a new list stays inline; a known one is
        // still found.
        names::set_full_for_test(true);
        let other: Vec<(Vec<u8>, Vec<u8>)> = rec
            .iter()
            .map(|(f, v)| ([b"full-".as_slice(), f].concat(), v.clone()))
            .collect();
        for _ in 0..3 {
            assert_eq!(names_id(&record_hash(&other, &l)), NAMES_REFUSED);
        }
        assert_eq!(names_id(&record_hash(&rec, &l)), id);
        names::set_full_for_test(false);
    }

    /// Not a test: CPU cost of the compressed path, for the report.
    /// `cargo test --release -p cairn-engine --lib compressed_cpu_cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn compressed_cpu_cost() {
        use std::time::Instant;
        let l = lim(512, 1024);
        let mut seed = 5;
        let rec = ycsb_record(&mut seed);
        let build = |seal: bool| {
            let mut h = HashValue::new();
            for (f, v) in &rec {
                h.set(f, v, &l);
            }
            if seal {
                h.seal();
            }
            h
        };
        ensure_book();
        for compressed in [false, true] {
            let mut h = build(compressed);
            assert_eq!(h.is_compressed(), compressed);
            let n = 100_000u32;
            let t = Instant::now();
            let mut acc = 0usize;
            for _ in 0..n {
                acc += h.view().get(b"field7").map_or(0, <[u8]>::len);
            }
            let hget = t.elapsed() / n;
            let t = Instant::now();
            for _ in 0..n {
                acc += h
                    .view()
                    .iter()
                    .map(|(f, v)| f.len() + v.len())
                    .sum::<usize>();
            }
            let hgetall = t.elapsed() / n;
            let t = Instant::now();
            for i in 0..n {
                h.set(b"field7", &rec[(i % 10) as usize].1, &l);
                if compressed {
                    h.seal();
                }
            }
            let hset = t.elapsed() / n;
            println!(
                "compressed={compressed}: HGET {hget:?}, HGETALL walk {hgetall:?}, HSET one field {hset:?} ({acc})"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Packed (compressed or not) and table encodings against a map,
        /// with seals between writes: conversions packed -> table at the
        /// limits (from a compressed buffer too), compressed <-> plain as
        /// the buffer crosses `COMPRESS_MIN`, and `try_pack` back.
        #[test]
        fn compressed_behaves_like_a_map(
            ops in proptest::collection::vec(
                (0u8..6, 0u8..12, 0usize..140, any::<u64>()), 0..80)
        ) {
            ensure_book();
            let l = lim(10, 120);
            let mut h = HashValue::new();
            let mut model: StdMap<Vec<u8>, Vec<u8>> = StdMap::new();
            let mut converted = false;
            for (kind, f, vlen, seed) in ops {
                let f = format!("field{f}").into_bytes();
                let mut sd = seed;
                let v: Vec<u8> = (0..vlen)
                    .map(|_| {
                        sd = sd.wrapping_mul(6364136223846793005).wrapping_add(1);
                        b' ' + (sd >> 58) as u8
                    })
                    .collect();
                match kind {
                    0 | 1 => {
                        if v.len() > 120 {
                            converted = true;
                        }
                        prop_assert_eq!(h.set(&f, &v, &l), !model.contains_key(&f));
                        model.insert(f, v);
                        if model.len() > 10 {
                            converted = true;
                        }
                    }
                    2 => {
                        prop_assert_eq!(h.remove(&f), model.remove(&f).is_some());
                    }
                    3 => {
                        if h.try_pack(&l) {
                            converted = false;
                        }
                    }
                    _ => h.seal(),
                }
                // Coding is decided when a write ends (a seal); writes in
                // between edit the form they find.
                let sealed = kind >= 4;
                if !h.is_packed() || !converted {
                    prop_assert_eq!(h.is_packed(), !converted);
                }
                prop_assert_eq!(h.len(), model.len());
                let got: StdMap<Vec<u8>, Vec<u8>> = h
                    .view()
                    .iter()
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect();
                prop_assert_eq!(&got, &model);
                // `for_each` walks the same pairs in the same order as
                // `iter`, decoding each value into the caller's buffer.
                let listed: Vec<(Vec<u8>, Vec<u8>)> = h
                    .view()
                    .iter()
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect();
                let mut walked = Vec::new();
                h.view().for_each(|f, v| {
                    let mut b = vec![7u8];
                    v.append_to(&mut b);
                    walked.push((f.to_vec(), b[1..].to_vec(), v.len()));
                });
                prop_assert_eq!(walked.len(), listed.len());
                for ((f, v, n), (lf, lv)) in walked.iter().zip(&listed) {
                    prop_assert_eq!(f, lf);
                    prop_assert_eq!(v, lv);
                    prop_assert_eq!(*n, lv.len());
                }
                // Every value through one view, all borrowed at once (the
                // coded form decodes each into the view's own buffer).
                let view = h.view();
                let gets: Vec<Option<&[u8]>> = model.keys().map(|f| view.get(f)).collect();
                for ((f, v), g) in model.iter().zip(gets) {
                    prop_assert_eq!(g, Some(&v[..]));
                    prop_assert!(view.contains(f));
                }
                prop_assert!(!view.contains(b"absent"));
                drop(view);
                if sealed && h.is_compressed() {
                    let raw: usize = model.iter().map(|(f, v)| 2 + f.len() + v.len()).sum();
                    prop_assert!(h.mem_bytes() < raw);
                    prop_assert!(raw >= COMPRESS_MIN);
                    prop_assert!(raw >= COMPRESS_MIN_AVG_ENTRY * model.len());
                }
            }
        }

        /// Coded hashes with interned and inline names against a model
        /// that keeps insertion order: fields come and go (HSET of a new
        /// field and HDEL put the names back inline, the seal after the
        /// write interns them again if their list is known), with the
        /// name table full or not, values coded or raw (short, or with
        /// bytes a fixed-width book has no code for).
        #[test]
        fn interned_names_behave_like_a_map(
            ops in proptest::collection::vec(
                (0u8..8, 0u8..12, 0usize..140, any::<u64>(), any::<bool>()), 0..60)
        ) {
            ensure_book();
            let l = lim(64, 1024);
            let field = |i: u8| format!("pm-field{i}").into_bytes();
            let text = |n: usize, mut sd: u64, odd: bool| -> Vec<u8> {
                let mut v: Vec<u8> = (0..n)
                    .map(|_| {
                        sd = sd.wrapping_mul(6364136223846793005).wrapping_add(1);
                        b' ' + (sd >> 58) as u8
                    })
                    .collect();
                if odd && n > 0 {
                    v[n / 2] = 0xC3;
                }
                v
            };
            // The ten-name list is known (two sightings).
            let base: Vec<(Vec<u8>, Vec<u8>)> =
                (0..10).map(|i| (field(i), text(100, u64::from(i), false))).collect();
            record_hash(&base, &l);
            let mut h = record_hash(&base, &l);
            let mut model = base.clone();
            for (kind, f, vlen, seed, odd) in ops {
                let f = field(f);
                let at = model.iter().position(|(g, _)| *g == f);
                match kind {
                    0..=3 => {
                        let v = text(vlen, seed, odd && kind == 0);
                        prop_assert_eq!(h.set(&f, &v, &l), at.is_none());
                        match at {
                            Some(i) => model[i].1 = v,
                            None => model.push((f, v)),
                        }
                    }
                    4 | 5 => {
                        prop_assert_eq!(h.remove(&f), at.is_some());
                        if let Some(i) = at {
                            model.remove(i);
                        }
                    }
                    6 => names::set_full_for_test(odd),
                    _ => {
                        prop_assert_eq!(
                            h.view().get(&f).map(<[u8]>::to_vec),
                            at.map(|i| model[i].1.clone())
                        );
                    }
                }
                h.seal();
                prop_assert!(h.is_packed());
                prop_assert_eq!(h.len(), model.len());
                let got: Vec<(Vec<u8>, Vec<u8>)> =
                    h.view().iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                prop_assert_eq!(&got, &model);
                let mut walked = Vec::new();
                h.view().for_each(|f, v| {
                    let mut b = Vec::new();
                    v.append_to(&mut b);
                    assert_eq!(b.len(), v.len());
                    walked.push((f.to_vec(), b));
                });
                prop_assert_eq!(&walked, &model);
                let view = h.view();
                for (f, v) in &model {
                    let mut b = vec![1u8];
                    view.get_ref(f).expect("present").append_to(&mut b);
                    prop_assert_eq!(&b[1..], &v[..]);
                    prop_assert_eq!(view.get(f), Some(&v[..]));
                }
                prop_assert!(view.get_ref(b"pm-absent").is_none());
                drop(view);
                let interned = names_id(&h) != 0 && names_id(&h) != NAMES_REFUSED;
                if interned {
                    prop_assert!(h.is_compressed());
                    let list = names::get(names_id(&h)).unwrap();
                    prop_assert!(list.iter().map(|b| &b[..]).eq(model.iter().map(|(f, _)| &f[..])));
                }
                // Back to the ten names in their order: the list is found.
                let ten = model.len() == 10
                    && model.iter().zip(&base).all(|((f, _), (g, _))| f == g);
                if ten && h.is_compressed() {
                    prop_assert!(interned);
                }
            }
            names::set_full_for_test(false);
        }

        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec(op(), 0..120)) {
            let l = lim(4, 8);
            let mut h = HashValue::new();
            // Reference: contents, insertion order (valid while packed), and
            // whether Redis's rules would have converted by now.
            let mut model: StdMap<Vec<u8>, Vec<u8>> = StdMap::new();
            let mut order: Vec<Vec<u8>> = Vec::new();
            let mut converted = false;
            for op in ops {
                match op {
                    Op::Set(f, v) => {
                        let fresh = !model.contains_key(&f);
                        if f.len() > 8 || v.len() > 8 {
                            converted = true;
                        }
                        prop_assert_eq!(h.set(&f, &v, &l), fresh);
                        if fresh {
                            order.push(f.clone());
                        }
                        model.insert(f, v);
                        if model.len() > 4 {
                            converted = true;
                        }
                    }
                    Op::SetNx(f, v) => {
                        let fresh = !model.contains_key(&f);
                        prop_assert_eq!(h.set_nx(&f, &v, &l), fresh);
                        if fresh {
                            if f.len() > 8 || v.len() > 8 {
                                converted = true;
                            }
                            order.push(f.clone());
                            model.insert(f, v);
                            if model.len() > 4 {
                                converted = true;
                            }
                        }
                    }
                    Op::Remove(f) => {
                        let had = model.remove(&f).is_some();
                        order.retain(|x| x != &f);
                        prop_assert_eq!(h.remove(&f), had);
                    }
                    Op::Get(f) => {
                        let got = h.view().get(&f).map(<[u8]>::to_vec);
                        prop_assert_eq!(got, model.get(&f).cloned());
                    }
                }
                prop_assert_eq!(h.len(), model.len());
                prop_assert_eq!(h.is_empty(), model.is_empty());
                prop_assert_eq!(h.encoding(), if converted { "hashtable" } else { "listpack" });
                let got: Vec<(Vec<u8>, Vec<u8>)> =
                    h.view().iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
                if h.is_packed() {
                    let want: Vec<(Vec<u8>, Vec<u8>)> = order
                        .iter()
                        .map(|f| (f.clone(), model[f].clone()))
                        .collect();
                    prop_assert_eq!(got, want);
                } else {
                    let got: StdMap<_, _> = got.into_iter().collect();
                    prop_assert_eq!(&got, &model);
                }
                for i in 0..model.len() {
                    prop_assert!(h.view().nth(i).is_some());
                }
                prop_assert!(h.view().nth(model.len()).is_none());
                // A full scan sees exactly the contents.
                let mut all = StdMap::new();
                let mut cursor = 0;
                loop {
                    let mut out = Vec::new();
                    cursor = h.view().scan(cursor, 2, &mut out);
                    for (f, v) in out {
                        prop_assert!(all.insert(f, v).is_none());
                    }
                    if cursor == 0 {
                        break;
                    }
                }
                prop_assert_eq!(&all, &model);
            }
        }
    }
}
