//! The snapshot file format, version 2: constants, tags, and the encoding
//! and decoding of one key. Drawn byte by byte in docs/design.md
//! ("Snapshot file format"); the short form:
//!
//! ```text
//! header  "CAIRNSNP" | version u32 | flags u32 | cut_ms u64 | databases u32 | crc u32      (32 bytes)
//! book*   'D' | id u8 | current u8 | code lengths [u8; 256] | crc u32                    (263 bytes)
//! funcs?  'F' | libraries u32 | payload_len u64 | crc u32 | payload (code strings)     (17 + len)
//! names?  'N' | lists u32 | payload_len u64 | crc u32 | payload (per list: varint n, n names)
//! repl?   'R' | 1 u32 | payload_len u64 | crc u32 | payload (varint stream_db, replid, varint offset)
//! dicts?  'Z' | dictionaries u32 | payload_len u64 | crc u32 | payload (per one: id u16, codec u8, raw)   (version 3)
//! block*  'B' | records u32 | payload_len u64 | crc u32 | payload (records)               (17 + len)
//! end     'E' | keys u64 | blocks u64 | crc u32                                          (21 bytes)
//! record  tag u8 | db varint | expire_ms varint | key | value (by tag, below)
//! ```
//!
//! Integers are little-endian; `varint` is unsigned LEB128; a byte string
//! is a varint length and the bytes. Each CRC is CRC-32C (`crate::crc`) of
//! everything before it in its section, a block's CRC including its
//! payload; a CRC of 0 means "not computed" (`rdbchecksum no`) and is not
//! checked. Version 1 differs only there: its CRCs are CRC-32 (IEEE, as
//! zlib). It is still read (`Checksum::of_version`), never written.
//! Version 3 (`TIER_VERSION`) is version 2 plus the record that points
//! into the disk tier (tag 8) and the dictionaries section: written only
//! by a snapshot that points into the tier, so every other file stays
//! version 2, byte for byte what older Cairns wrote and read. Values are written logically (the elements through the value
//! types' public APIs), never as their in-memory encodings, so a change of
//! encoding never changes the file, and a loaded value is built by the
//! same constructors the commands use, in the encodings the limits in
//! force choose.
//!
//! Tags are append-only: a number, once given, keeps its meaning forever
//! (the `tags_are_pinned` test fails if one changes). A reader refuses a
//! version or tag it does not know rather than guessing.
use cairn_engine::value::stream::{Group, StreamId, StreamLimits, StreamValue};
use cairn_engine::value::zset::ZSetLimits;
use cairn_engine::value::{HashLimits, HashValue, ListValue, SetValue, StrValue, ZSetValue};
use cairn_engine::{Ref, Value};

/// The first eight bytes of every snapshot file.
pub const MAGIC: &[u8; 8] = b"CAIRNSNP";
/// The format version this code writes for a file that holds values
/// only.
pub const VERSION: u32 = 2;
/// The version of a file that points into the disk tier (tiered records
/// and the dictionaries section): the newest this code reads.
pub const TIER_VERSION: u32 = 3;
/// The oldest version this code reads.
pub const OLDEST_READ: u32 = 1;
/// Header size in bytes.
pub const HEADER_LEN: usize = 32;
/// Block header size in bytes (before the payload).
pub const BLOCK_HEADER_LEN: usize = 17;
/// End section size in bytes.
pub const END_LEN: usize = 21;
/// Codebook section size in bytes.
pub const BOOK_LEN: usize = 263;
/// A block is closed after the record that takes its payload past this,
/// so loading works on buffers of about this size (a single larger
/// record makes one larger block).
pub const BLOCK_TARGET_BYTES: usize = 1 << 20;
/// The first bytes of a Redis RDB file, recognised only to say so.
pub const REDIS_MAGIC: &[u8; 5] = b"REDIS";

/// Section tags: what follows in the file.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    Block = b'B',
    End = b'E',
    /// A shared Huffman book of hash values (issue 20), written before the
    /// blocks. Only the in-memory size of values depends on it: records
    /// stay logical, so a reader may ignore a book it cannot install.
    Codebook = b'D',
    /// The FUNCTION libraries (issue 21), before the blocks: how many, the
    /// payload's length, its CRC, then each library's code as a byte
    /// string. The server runs the code again when it loads the file.
    Functions = b'F',
    /// The interned field-name lists of hash values (issue 20), before the
    /// blocks, laid out as a functions section whose payload holds, per
    /// list, a varint count and that many byte strings. Like a book, only
    /// the in-memory size of values depends on it; a file without it
    /// loads the same values.
    Names = b'N',
    /// The replication ID and offset the data is at (Redis's `repl-id`,
    /// `repl-offset` and `repl-stream-db` AUX fields), framed as a
    /// functions section of one item whose payload is a varint database,
    /// the ID as a byte string and a varint offset. Written by a master
    /// with a backlog and by a replica, so either continues with PSYNC
    /// after a restart; a file without it loads the same data.
    Repl = b'R',
    /// The dictionaries the tiered records' coded values name (version 3,
    /// branch tiersnap), before the blocks, framed as a functions
    /// section: per dictionary its id (u16 LE), its codec (u8,
    /// `zcomp::CODEC_ZSTD` = 1) and its raw bytes as a byte string. A
    /// load installs them under their ids before any record names one.
    Dicts = b'Z',
}

/// Record tags: the kind of value a record holds. Append-only.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// A string: its bytes (an integer-looking string is stored as text).
    Str = 1,
    /// A hash: count, then field and value of each pair.
    Hash = 2,
    /// A list: count, then each element from head to tail.
    List = 3,
    /// A set: count, then each member.
    Set = 4,
    /// A sorted set: count, then each (score f64 LE, member) in rank order.
    ZSet = 5,
    /// A memcached item: client flags u32 LE, item bits u8, then its bytes.
    McStr = 6,
    /// A stream: its counters, its live entries, its consumer groups (see
    /// `put_stream`).
    Stream = 7,
    /// A string whose value is in the disk tier (version 3): the 16-byte
    /// pointer a tiered block holds (`cairn_engine::tier::Pointer`:
    /// segment, offset, record length, plain length, dictionary id,
    /// group), then a flags byte (bit 0: the `raw` encoding bit). The
    /// record it names is in `tier/NN/`, kept until a newer snapshot is
    /// durable.
    Tiered = 8,
}

impl Tag {
    pub fn from_u8(b: u8) -> Option<Tag> {
        Some(match b {
            1 => Tag::Str,
            2 => Tag::Hash,
            3 => Tag::List,
            4 => Tag::Set,
            5 => Tag::ZSet,
            6 => Tag::McStr,
            7 => Tag::Stream,
            8 => Tag::Tiered,
            _ => return None,
        })
    }
}

/// The checksum of a file's sections, by format version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checksum {
    /// Version 1: CRC-32 (IEEE).
    Crc32Ieee,
    /// Version 2 on: CRC-32C, the journal's checksum too.
    Crc32c,
}

impl Checksum {
    /// The checksum of `version`; None for a version this code cannot read.
    pub fn of_version(version: u32) -> Option<Checksum> {
        match version {
            1 => Some(Checksum::Crc32Ieee),
            2 | 3 => Some(Checksum::Crc32c),
            _ => None,
        }
    }

    /// The checksum of `parts`, in order.
    pub fn of(self, parts: &[&[u8]]) -> u32 {
        let c = match self {
            Checksum::Crc32Ieee => crate::crc::crc32_ieee(parts),
            Checksum::Crc32c => parts.iter().fold(0, |c, p| crate::crc::crc32c(c, p)),
        };
        // 0 marks "not computed"; a real 0 is mapped to 1 so it stays checked.
        match c {
            0 => 1,
            c => c,
        }
    }
}

/// The checksum this code writes (`VERSION`'s) of `parts`, in order.
pub fn crc(parts: &[&[u8]]) -> u32 {
    Checksum::Crc32c.of(parts)
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    extend_small(out, b);
}

/// `out.extend_from_slice(b)`, with the copy of a short `b` (at most 16
/// bytes: most list, set and hash elements) done inline by two
/// overlapping word copies instead of a call to memcpy. A snapshot of a
/// list of a million 3-byte elements spent ~20% of its time in memcpy
/// calls (perf).
#[inline]
fn extend_small(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if n > 16 {
        out.extend_from_slice(b);
        return;
    }
    out.reserve(16);
    let len = out.len();
    // SAFETY: `reserve` made room for 16 bytes after `len`, and every
    // read and write below stays within `b[..n]` and `dst[..n]`.
    unsafe {
        let src = b.as_ptr();
        let dst = out.as_mut_ptr().add(len);
        if n >= 8 {
            let head = (src as *const u64).read_unaligned();
            let tail = (src.add(n - 8) as *const u64).read_unaligned();
            (dst as *mut u64).write_unaligned(head);
            (dst.add(n - 8) as *mut u64).write_unaligned(tail);
        } else if n >= 4 {
            let head = (src as *const u32).read_unaligned();
            let tail = (src.add(n - 4) as *const u32).read_unaligned();
            (dst as *mut u32).write_unaligned(head);
            (dst.add(n - 4) as *mut u32).write_unaligned(tail);
        } else if n > 0 {
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
        out.set_len(len + n);
    }
}

/// The header for a snapshot cut at `cut_ms` of an engine with `databases`.
pub fn header(cut_ms: u64, databases: u32, checksum: bool) -> [u8; HEADER_LEN] {
    header_of(VERSION, cut_ms, databases, checksum)
}

/// `header` for a given format version (`TIER_VERSION` for a file that
/// points into the disk tier).
pub fn header_of(version: u32, cut_ms: u64, databases: u32, checksum: bool) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    // 12..16: flags, none defined.
    h[16..24].copy_from_slice(&cut_ms.to_le_bytes());
    h[24..28].copy_from_slice(&databases.to_le_bytes());
    let c = if checksum { crc(&[&h[..28]]) } else { 0 };
    h[28..32].copy_from_slice(&c.to_le_bytes());
    h
}

/// A block's 17-byte header for `payload`.
pub fn block_header(records: u32, payload: &[u8], checksum: bool) -> [u8; BLOCK_HEADER_LEN] {
    let mut h = [0u8; BLOCK_HEADER_LEN];
    h[0] = Section::Block as u8;
    h[1..5].copy_from_slice(&records.to_le_bytes());
    h[5..13].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let c = if checksum {
        crc(&[&h[..13], payload])
    } else {
        0
    };
    h[13..17].copy_from_slice(&c.to_le_bytes());
    h
}

/// The end section.
pub fn end(keys: u64, blocks: u64, checksum: bool) -> [u8; END_LEN] {
    let mut e = [0u8; END_LEN];
    e[0] = Section::End as u8;
    e[1..9].copy_from_slice(&keys.to_le_bytes());
    e[9..17].copy_from_slice(&blocks.to_le_bytes());
    let c = if checksum { crc(&[&e[..17]]) } else { 0 };
    e[17..21].copy_from_slice(&c.to_le_bytes());
    e
}

/// Functions section header size in bytes (before the payload).
pub const FUNCTIONS_HEADER_LEN: usize = 17;

/// A functions section: each library's code (FUNCTION LOAD's argument).
pub fn functions(codes: &[Vec<u8>], checksum: bool) -> Vec<u8> {
    let mut payload = Vec::new();
    for c in codes {
        put_bytes(&mut payload, c);
    }
    counted_section(Section::Functions, codes.len() as u32, &payload, checksum)
}

/// A section of `count` items framed as functions and names sections are:
/// tag, count (u32), payload length (u64), CRC-32C of all that and the
/// payload (0 without checksums), then the payload.
fn counted_section(tag: Section, count: u32, payload: &[u8], checksum: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(FUNCTIONS_HEADER_LEN + payload.len());
    out.push(tag as u8);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = if checksum {
        Checksum::Crc32c.of(&[&out, payload])
    } else {
        0
    };
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// The dictionaries section (version 3): each dictionary's id, codec
/// and raw bytes.
pub fn dicts(list: &[cairn_engine::value::zcomp::Exported], checksum: bool) -> Vec<u8> {
    let mut payload = Vec::new();
    for d in list {
        payload.extend_from_slice(&d.id.to_le_bytes());
        payload.push(d.codec);
        put_bytes(&mut payload, &d.raw);
    }
    counted_section(Section::Dicts, list.len() as u32, &payload, checksum)
}

/// A dictionary read from a file: id, codec, raw bytes.
pub type DictRecord = (u16, u8, Vec<u8>);

/// The dictionaries section's payload; None if malformed.
pub fn parse_dicts(payload: &[u8], count: u32) -> Option<Vec<DictRecord>> {
    let mut pos = 0;
    let mut out = Vec::new();
    for _ in 0..count {
        let head = payload.get(pos..pos + 3)?;
        pos += 3;
        let raw = get_bytes(payload, &mut pos)?;
        out.push((
            u16::from_le_bytes([head[0], head[1]]),
            head[2],
            raw.to_vec(),
        ));
    }
    (pos == payload.len()).then_some(out)
}

fn get_varint_at(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

fn get_bytes<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let n = get_varint_at(b, pos)?;
    let end = pos.checked_add(usize::try_from(n).ok()?)?;
    let s = b.get(*pos..end)?;
    *pos = end;
    Some(s)
}

/// A names section: every interned field-name list
/// (`cairn_engine::value::names`), in id order.
pub fn names(lists: &[&[Box<[u8]>]], checksum: bool) -> Vec<u8> {
    let mut payload = Vec::new();
    for l in lists {
        put_varint(&mut payload, l.len() as u64);
        for name in l.iter() {
            put_bytes(&mut payload, name);
        }
    }
    counted_section(Section::Names, lists.len() as u32, &payload, checksum)
}

/// The lists of a names section's payload holding `count` of them.
pub fn parse_names(payload: &[u8], count: u32) -> Option<Vec<Vec<Vec<u8>>>> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(count.min(1 << 12) as usize);
    for _ in 0..count {
        let n = get_varint_at(payload, &mut pos)?;
        // Each name takes at least its length byte.
        if n > (payload.len() - pos) as u64 {
            return None;
        }
        let mut list = Vec::with_capacity(n as usize);
        for _ in 0..n {
            list.push(get_bytes(payload, &mut pos)?.to_vec());
        }
        out.push(list);
    }
    (pos == payload.len()).then_some(out)
}

/// A replication section (`Section::Repl`).
pub fn repl_info(info: &crate::snapshot::ReplInfo, checksum: bool) -> Vec<u8> {
    let mut payload = Vec::new();
    put_varint(&mut payload, info.stream_db as u64);
    put_bytes(&mut payload, info.replid.as_bytes());
    put_varint(&mut payload, info.offset);
    counted_section(Section::Repl, 1, &payload, checksum)
}

/// A replication section's payload.
pub fn parse_repl_info(payload: &[u8], count: u32) -> Option<crate::snapshot::ReplInfo> {
    let mut pos = 0;
    let stream_db = usize::try_from(get_varint_at(payload, &mut pos)?).ok()?;
    let replid = String::from_utf8(get_bytes(payload, &mut pos)?.to_vec()).ok()?;
    let offset = get_varint_at(payload, &mut pos)?;
    (count == 1 && pos == payload.len()).then_some(crate::snapshot::ReplInfo {
        stream_db,
        replid,
        offset,
    })
}

/// The codes of a functions section's payload holding `count` libraries.
pub fn parse_functions(payload: &[u8], count: u32) -> Option<Vec<Vec<u8>>> {
    let mut pos = 0;
    let mut out = Vec::with_capacity(count.min(1 << 16) as usize);
    for _ in 0..count {
        out.push(get_bytes(payload, &mut pos)?.to_vec());
    }
    (pos == payload.len()).then_some(out)
}

/// A codebook section: the book's id, whether new values are coded with
/// it, and its 256 code lengths (`cairn_engine::value::codebooks`).
pub fn codebook(id: u8, current: bool, lens: &[u8; 256], checksum: bool) -> [u8; BOOK_LEN] {
    let mut b = [0u8; BOOK_LEN];
    b[0] = Section::Codebook as u8;
    b[1] = id;
    b[2] = u8::from(current);
    b[3..259].copy_from_slice(lens);
    let c = if checksum { crc(&[&b[..259]]) } else { 0 };
    b[259..263].copy_from_slice(&c.to_le_bytes());
    b
}

/// Appends one key as a record. With `tier_pointers`, a key whose value
/// is in the disk tier is written as its pointer (`Tag::Tiered`); without
/// (RDB's callers, a replica's or a debugger's copy), its value is read
/// through the tier and written in full.
pub fn put_entry(out: &mut Vec<u8>, db: usize, r: Ref<'_>, tier_pointers: bool) {
    let e = match r {
        Ref::Full(e) => e,
        Ref::Compact(c) if tier_pointers && c.is_tiered() => {
            out.push(Tag::Tiered as u8);
            put_varint(out, db as u64);
            put_varint(out, c.meta().expire_at());
            put_bytes(out, c.key());
            out.extend_from_slice(&c.tier_ptr().to_bytes());
            out.push(u8::from(c.raw()));
            return;
        }
        // A compact block is a plain string: the record a `Str` entry of
        // the same bytes writes (the loader stores it compact again). A
        // compressed one is written decoded, and the loader compresses it
        // again when `value-compression` is on (docs/design.md,
        // "Compressed values").
        Ref::Compact(c) => {
            out.push(Tag::Str as u8);
            put_varint(out, db as u64);
            put_varint(out, c.meta().expire_at());
            put_bytes(out, c.key());
            c.with_plain(|v| put_bytes(out, v));
            return;
        }
    };
    let tag = match &e.value {
        Value::Str(StrValue::Mc { .. }) => Tag::McStr,
        Value::Str(_) => Tag::Str,
        Value::Hash(_) => Tag::Hash,
        Value::List(_) => Tag::List,
        Value::Set(_) => Tag::Set,
        Value::ZSet(_) => Tag::ZSet,
        Value::Stream(_) => Tag::Stream,
    };
    out.push(tag as u8);
    put_varint(out, db as u64);
    put_varint(out, e.expire_at());
    put_bytes(out, e.key());
    match &e.value {
        Value::Str(s) => {
            if tag == Tag::McStr {
                out.extend_from_slice(&s.mc_flags().to_le_bytes());
                out.push(s.mc_bits());
            }
            s.with_bytes(|b| put_bytes(out, b));
        }
        Value::Hash(h) => {
            put_varint(out, h.len() as u64);
            // A coded value decodes straight into the block.
            h.view().for_each(|f, v| {
                put_bytes(out, f);
                put_varint(out, v.len() as u64);
                v.append_to(out);
            });
        }
        Value::List(l) => {
            put_varint(out, l.len() as u64);
            for el in l.iter() {
                el.with_bytes(|b| put_bytes(out, b));
            }
        }
        Value::Set(s) => {
            put_varint(out, s.len() as u64);
            for m in s.iter() {
                m.with_bytes(|b| put_bytes(out, b));
            }
        }
        Value::ZSet(z) => {
            put_varint(out, z.len() as u64);
            for (m, score) in z.iter() {
                out.extend_from_slice(&score.to_le_bytes());
                put_bytes(out, m);
            }
        }
        Value::Stream(s) => put_stream(out, s),
    }
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_varint(out, id.ms);
    put_varint(out, id.seq);
}

/// A stream's record body:
///
/// ```text
/// last_id first_id max_deleted_id entries_added:varint
/// n:varint ( id npairs:varint (field value)* )*                 live entries
/// groups:varint ( name last_id entries_read:varint              0 = unknown, else n+1
///                 pel:varint ( id consumer delivery_ms:varint count:varint )*
///                 consumers:varint ( name seen_ms:varint )* )*
/// id := ms:varint seq:varint
/// ```
///
/// A consumer's own PEL is the NACKs naming it, so it is not repeated.
fn put_stream(out: &mut Vec<u8>, s: &StreamValue) {
    put_id(out, s.last_id);
    put_id(out, s.first_id);
    put_id(out, s.max_deleted_id);
    put_varint(out, s.entries_added);
    let entries = s.entries();
    put_varint(out, entries.len() as u64);
    for e in &entries {
        put_id(out, e.id);
        put_varint(out, e.len() as u64);
        for (f, v) in e.pairs() {
            put_bytes(out, f);
            put_bytes(out, v);
        }
    }
    put_varint(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_bytes(out, name);
        put_id(out, g.last_id);
        put_varint(out, g.entries_read.map_or(0, |n| n + 1));
        put_varint(out, g.pel.len() as u64);
        for (id, n) in &g.pel {
            put_id(out, *id);
            put_bytes(out, &n.consumer);
            put_varint(out, n.delivery_time_ms);
            put_varint(out, n.delivery_count);
        }
        put_varint(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_bytes(out, cname);
            put_varint(out, c.seen_time_ms);
        }
    }
}

/// The encoding limits loaded values are built under (the config in
/// force, read from the engine).
#[derive(Clone, Copy, Debug)]
pub struct BuildLimits {
    pub hash: HashLimits,
    pub zset: ZSetLimits,
    pub list_fill: i64,
    pub max_intset: usize,
    pub stream: StreamLimits,
}

impl BuildLimits {
    pub fn of(engine: &cairn_engine::Engine) -> BuildLimits {
        use std::sync::atomic::Ordering::Relaxed;
        let l = &engine.limits;
        BuildLimits {
            hash: l.hash(),
            zset: ZSetLimits {
                max_listpack_entries: l.zset_max_listpack_entries.load(Relaxed),
                max_listpack_value: l.zset_max_listpack_value.load(Relaxed),
            },
            list_fill: l.list_max_listpack_size.load(Relaxed),
            max_intset: l.set_max_intset_entries.load(Relaxed),
            stream: l.stream(),
        }
    }
}

impl Default for BuildLimits {
    fn default() -> Self {
        BuildLimits {
            hash: HashLimits::default(),
            zset: ZSetLimits::default(),
            list_fill: -2,
            max_intset: 512,
            stream: StreamLimits::default(),
        }
    }
}

/// One decoded key.
#[derive(Debug)]
pub struct Record<'a> {
    pub db: usize,
    /// Unix ms; 0 = no expiry.
    pub expire_at: u64,
    pub key: &'a [u8],
    /// The value; an empty string for a tiered record, whose value is
    /// in the tier at `tiered`.
    pub value: Value,
    /// A tiered record's pointer and `raw` bit.
    pub tiered: Option<(cairn_engine::tier::Pointer, bool)>,
}

/// Reads records out of one block's payload. Every read is checked
/// against the payload's end, so a corrupt length can never make it
/// allocate or read past the block.
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Why a record could not be decoded, and where in the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub pos: usize,
    pub reason: String,
}

type DResult<T> = Result<T, DecodeError>;

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn fail<T>(&self, reason: impl Into<String>) -> DResult<T> {
        Err(DecodeError {
            pos: self.pos,
            reason: reason.into(),
        })
    }

    fn u8(&mut self) -> DResult<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.fail("record runs past the end of its block"),
        }
    }

    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if n > self.buf.len() - self.pos {
            return self.fail(format!(
                "length {n} runs past the end of its block ({} bytes left)",
                self.buf.len() - self.pos
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn varint(&mut self) -> DResult<u64> {
        let start = self.pos;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        self.pos = start;
        self.fail("malformed varint")
    }

    /// A count of items each taking at least `min_bytes`: bounded by the
    /// bytes left, so a corrupt count cannot make a huge allocation.
    fn count(&mut self, min_bytes: usize) -> DResult<usize> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n == 0 {
            return self.fail("empty value (count 0)");
        }
        if n.saturating_mul(min_bytes as u64) > left {
            return self.fail(format!("count {n} cannot fit in the {left} bytes left"));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self) -> DResult<&'a [u8]> {
        let n = self.varint()?;
        let n = usize::try_from(n).or_else(|_| self.fail("length too large"))?;
        self.take(n)
    }

    /// A count that may be 0, bounded by the bytes left at `min_bytes`
    /// each.
    fn count0(&mut self, min_bytes: usize) -> DResult<usize> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes as u64) > left {
            return self.fail(format!("count {n} cannot fit in the {left} bytes left"));
        }
        Ok(n as usize)
    }

    fn id(&mut self) -> DResult<StreamId> {
        Ok(StreamId::new(self.varint()?, self.varint()?))
    }

    /// A stream's body (`put_stream`).
    fn stream(&mut self, limits: &StreamLimits) -> DResult<StreamValue> {
        let last = self.id()?;
        let first = self.id()?;
        let max_deleted = self.id()?;
        let added = self.varint()?;
        let n = self.count0(3)?;
        let mut s = StreamValue::new();
        let mut prev: Option<StreamId> = None;
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
        for _ in 0..n {
            let id = self.id()?;
            if prev.is_some_and(|p| p >= id) || id > last {
                return self.fail("stream entries out of order");
            }
            prev = Some(id);
            let np = self.count0(2)?;
            pairs.clear();
            for _ in 0..np {
                let f = self.bytes()?;
                let v = self.bytes()?;
                pairs.push((f, v));
            }
            s.push_raw(id, &pairs, false, limits);
        }
        s.set_meta(last, first, max_deleted, added);
        let ng = self.count0(3)?;
        for _ in 0..ng {
            let name = self.bytes()?;
            let last_id = self.id()?;
            let read = self.varint()?;
            let mut g = Group::new(last_id, read.checked_sub(1));
            let np = self.count0(5)?;
            let mut owners: Vec<(StreamId, &[u8], u64, u64)> = Vec::with_capacity(np);
            for _ in 0..np {
                let id = self.id()?;
                let c = self.bytes()?;
                let t = self.varint()?;
                let d = self.varint()?;
                owners.push((id, c, t, d));
            }
            let nc = self.count0(2)?;
            for _ in 0..nc {
                let cname = self.bytes()?;
                let seen = self.varint()?;
                g.create_consumer(cname, seen);
            }
            for (id, c, t, d) in owners {
                if !g.consumers.contains_key(c) {
                    return self.fail("a pending entry names an unknown consumer");
                }
                g.assign(id, c, t, d);
            }
            if s.groups.insert(name.into(), g).is_some() {
                return self.fail("duplicate consumer group in a stream");
            }
        }
        Ok(s)
    }

    fn f64(&mut self) -> DResult<f64> {
        let b = self.take(8)?;
        Ok(f64::from_le_bytes(b.try_into().expect("took 8 bytes")))
    }

    /// The next record; the caller checks `at_end` first.
    pub fn record(&mut self, limits: &BuildLimits) -> DResult<Record<'a>> {
        let tag_pos = self.pos;
        let tag_byte = self.u8()?;
        let Some(tag) = Tag::from_u8(tag_byte) else {
            self.pos = tag_pos;
            return self.fail(format!("unknown record tag {tag_byte}"));
        };
        let db = self.varint()?;
        let db = usize::try_from(db).or_else(|_| self.fail("database index too large"))?;
        let expire_at = self.varint()?;
        let key = self.bytes()?;
        let mut tiered = None;
        let value = match tag {
            Tag::Tiered => {
                let p = cairn_engine::tier::Pointer::from_bytes(
                    self.take(cairn_engine::tier::Pointer::BYTES)?,
                );
                let flags = self.u8()?;
                if flags > 1 {
                    return self.fail(format!("tiered record flags {flags:#x}"));
                }
                tiered = Some((p, flags == 1));
                Value::Str(StrValue::from_vec(Vec::new()))
            }
            Tag::Str => Value::Str(StrValue::from_vec(self.bytes()?.to_vec())),
            Tag::McStr => {
                let flags = u32::from_le_bytes(self.take(4)?.try_into().expect("took 4"));
                let bits = self.u8()?;
                let data = self.bytes()?;
                let mut s = StrValue::mc(data.into(), flags);
                *s.as_mc().3 = bits;
                Value::Str(s)
            }
            Tag::Hash => {
                let n = self.count(2)?;
                let mut h = HashValue::new();
                for _ in 0..n {
                    let f = self.bytes()?;
                    let v = self.bytes()?;
                    if !h.set(f, v, &limits.hash) {
                        return self.fail("duplicate field in a hash");
                    }
                }
                // As a write command leaves it: trimmed, or coded.
                h.seal();
                Value::Hash(Box::new(h))
            }
            Tag::List => {
                let n = self.count(1)?;
                let mut l = ListValue::with_fill(limits.list_fill);
                for _ in 0..n {
                    l.push_back(self.bytes()?);
                }
                Value::List(Box::new(l))
            }
            Tag::Set => {
                let n = self.count(1)?;
                let mut first = true;
                let mut s = SetValue::new();
                for _ in 0..n {
                    let m = self.bytes()?;
                    if first {
                        // The encoding SADD would create for this member.
                        s = SetValue::for_member(m);
                        first = false;
                    }
                    if !s.add(m, limits.max_intset) {
                        return self.fail("duplicate member in a set");
                    }
                }
                Value::Set(Box::new(s))
            }
            Tag::ZSet => {
                let n = self.count(9)?;
                let mut items: Vec<(f64, &[u8])> = Vec::with_capacity(n);
                for _ in 0..n {
                    let score = self.f64()?;
                    let m = self.bytes()?;
                    if score.is_nan() {
                        return self.fail("NaN score in a sorted set");
                    }
                    if let Some(&(ps, pm)) = items.last() {
                        // Rank order: by score, then member bytes. Strict,
                        // so a duplicate member cannot slip in beside itself.
                        if (ps, pm) >= (score, m) {
                            return self.fail("sorted set members out of order");
                        }
                    }
                    items.push((score, m));
                }
                let z = ZSetValue::from_sorted(&items, &limits.zset);
                if z.len() != n {
                    return self.fail("duplicate member in a sorted set");
                }
                Value::ZSet(Box::new(z))
            }
            Tag::Stream => Value::Stream(Box::new(self.stream(&limits.stream)?)),
        };
        Ok(Record {
            db,
            expire_at,
            key,
            value,
            tiered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers are the file format: changing one breaks every file
    /// written before. Add new tags; never renumber.
    #[test]
    fn tags_are_pinned() {
        assert_eq!(Tag::Str as u8, 1);
        assert_eq!(Tag::Hash as u8, 2);
        assert_eq!(Tag::List as u8, 3);
        assert_eq!(Tag::Set as u8, 4);
        assert_eq!(Tag::ZSet as u8, 5);
        assert_eq!(Tag::McStr as u8, 6);
        assert_eq!(Tag::Stream as u8, 7);
        assert_eq!(Tag::Tiered as u8, 8);
        for b in 0..=255u8 {
            if let Some(t) = Tag::from_u8(b) {
                assert_eq!(t as u8, b);
            }
        }
        assert_eq!(Section::Block as u8, 0x42);
        assert_eq!(Section::End as u8, 0x45);
        assert_eq!(Section::Codebook as u8, 0x44);
        assert_eq!(MAGIC, b"CAIRNSNP");
        assert_eq!(VERSION, 2);
        assert_eq!(TIER_VERSION, 3);
        assert_eq!(Section::Dicts as u8, b'Z');
        assert_eq!(OLDEST_READ, 1);
    }

    /// Each version keeps its checksum forever; version 1's is CRC-32
    /// IEEE, version 2's CRC-32C (check values of "123456789").
    #[test]
    fn checksums_are_pinned_per_version() {
        assert_eq!(Checksum::of_version(0), None);
        assert_eq!(Checksum::of_version(1), Some(Checksum::Crc32Ieee));
        assert_eq!(Checksum::of_version(2), Some(Checksum::Crc32c));
        assert_eq!(Checksum::of_version(3), Some(Checksum::Crc32c));
        assert_eq!(Checksum::of_version(4), None);
        assert_eq!(Checksum::of_version(VERSION), Some(Checksum::Crc32c));
        assert_eq!(Checksum::Crc32Ieee.of(&[b"1234", b"56789"]), 0xcbf4_3926);
        assert_eq!(Checksum::Crc32c.of(&[b"1234", b"56789"]), 0xe306_9283);
        assert_eq!(crc(&[b"123456789"]), 0xe306_9283);
        // 0 means "not computed", so a true 0 is written as 1.
        assert_eq!(Checksum::Crc32c.of(&[]), 1);
    }

    #[test]
    fn golden_tiered_record_and_dictionaries() {
        use cairn_engine::tier::{Loc, Pointer};
        let p = Pointer {
            loc: Loc {
                segment: 1,
                offset: 32,
                len: 40,
            },
            plain_len: 300,
            dict: 2,
            group: 5,
        };
        // Tag 8, db 0, no expiry, key "k", the pointer, flags (raw).
        let mut rec = vec![8, 0, 0, 1, b'k'];
        rec.extend_from_slice(&p.to_bytes());
        rec.push(1);
        assert_eq!(
            &rec[5..],
            &[1, 0, 0, 0, 32, 0, 0, 0, 40, 0, 0, 0, 0x2c, 0x01, 0x02, 0x50, 1]
        );
        let r = Decoder::new(&rec).record(&BuildLimits::default()).unwrap();
        assert_eq!((r.db, r.expire_at, r.key), (0, 0, &b"k"[..]));
        assert_eq!(r.tiered, Some((p, true)));
        let mut bad = rec.clone();
        *bad.last_mut().unwrap() = 2;
        assert!(Decoder::new(&bad).record(&BuildLimits::default()).is_err());

        let list = vec![cairn_engine::value::zcomp::Exported {
            id: 7,
            codec: 1,
            raw: b"dictionary bytes"[..].into(),
        }];
        let sec = dicts(&list, true);
        assert_eq!(&sec[..5], &[b'Z', 1, 0, 0, 0]);
        assert_eq!(&sec[17..21], &[7, 0, 1, 16]);
        let back = parse_dicts(&sec[17..], 1).unwrap();
        assert_eq!(back, vec![(7, 1, b"dictionary bytes".to_vec())]);
        assert!(parse_dicts(&sec[17..sec.len() - 1], 1).is_none());
        let h = header_of(TIER_VERSION, 0, 16, true);
        assert_eq!(&h[8..12], &[3, 0, 0, 0]);
    }

    #[test]
    fn functions_sections_round_trip() {
        let codes = vec![b"#!lua name=a\nx".to_vec(), Vec::new(), vec![0xff; 300]];
        let sec = functions(&codes, true);
        assert_eq!(sec[0], b'F');
        let payload = &sec[FUNCTIONS_HEADER_LEN..];
        assert_eq!(parse_functions(payload, 3), Some(codes));
        assert_eq!(parse_functions(payload, 2), None);
        assert_eq!(parse_functions(&payload[..payload.len() - 1], 3), None);
        assert_eq!(Section::Functions as u8, 0x46);
    }

    #[test]
    fn names_section_round_trips() {
        let a: Vec<Box<[u8]>> = vec![b"field0".as_slice().into(), b"".as_slice().into()];
        let b: Vec<Box<[u8]>> = vec![vec![b'x'; 300].into()];
        let sec = names(&[&a, &b], true);
        assert_eq!(sec[0], b'N');
        assert_eq!(Section::Names as u8, 0x4e);
        assert_eq!(u32::from_le_bytes(sec[1..5].try_into().unwrap()), 2);
        let payload = &sec[FUNCTIONS_HEADER_LEN..];
        let want = vec![vec![b"field0".to_vec(), Vec::new()], vec![vec![b'x'; 300]]];
        assert_eq!(parse_names(payload, 2), Some(want));
        assert_eq!(parse_names(payload, 1), None);
        assert_eq!(parse_names(payload, 3), None);
        assert_eq!(parse_names(&payload[..payload.len() - 1], 2), None);
        assert_eq!(parse_names(&[0xff; 3], 1), None);
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut d = Decoder::new(&b);
            assert_eq!(d.varint().unwrap(), v);
            assert!(d.at_end());
        }
        // Eleven continuation bytes: malformed, not a panic.
        let bad = [0xffu8; 11];
        assert!(Decoder::new(&bad).varint().is_err());
    }

    #[test]
    fn golden_header_and_end() {
        let h = header(0x0102030405060708, 16, true);
        assert_eq!(&h[..8], b"CAIRNSNP");
        assert_eq!(&h[8..12], &[2, 0, 0, 0]);
        assert_eq!(&h[12..16], &[0, 0, 0, 0]);
        assert_eq!(&h[16..24], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&h[24..28], &[16, 0, 0, 0]);
        assert_eq!(&h[28..32], &crc(&[&h[..28]]).to_le_bytes());
        assert_eq!(&h[28..32], &0xfa77_29fbu32.to_le_bytes());
        let e = end(2, 1, true);
        assert_eq!(&e[17..21], &0xe9cb_5016u32.to_le_bytes());
        let mut lens = [8u8; 256];
        lens[1] = 7;
        let b = codebook(3, true, &lens, true);
        assert_eq!(&b[..5], &[b'D', 3, 1, 8, 7]);
        assert_eq!(&b[259..], &crc(&[&b[..259]]).to_le_bytes());
        assert_eq!(codebook(3, false, &lens, false)[259..], [0, 0, 0, 0]);
        let e = end(3, 2, false);
        assert_eq!(
            e,
            [b'E', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn golden_block() {
        // A string k = v1 in db 0 and a hash h = {f: x} in db 3.
        let payload = [
            1, 0, 0, 1, b'k', 2, b'v', b'1', 2, 3, 0, 1, b'h', 1, 1, b'f', 1, b'x',
        ];
        let h = block_header(2, &payload, true);
        assert_eq!(&h[..13], &[b'B', 2, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&h[13..], &0xd721_e9bdu32.to_le_bytes());
    }

    #[test]
    fn short_copies_equal_extend_from_slice() {
        let src: Vec<u8> = (1..=40).collect();
        for prefix in 0..3 {
            for n in 0..=20 {
                let mut a = vec![9u8; prefix];
                let mut b = a.clone();
                extend_small(&mut a, &src[..n]);
                b.extend_from_slice(&src[..n]);
                assert_eq!(a, b, "n={n} prefix={prefix}");
            }
        }
    }
}
