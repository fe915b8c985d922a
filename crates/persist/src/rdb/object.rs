//! One value in RDB form, as Redis 7.0's `rdbSaveObject` writes it and
//! `rdbLoadObject` reads it: a type byte, then the object. DUMP payloads
//! are exactly this plus the footer (`super::seal_dump`); an RDB file's
//! key records (`super::file`) are this with the key between type and
//! object.
//!
//! Writer, per Cairn value (the types Redis 7.0 itself writes):
//! - string: `RDB_TYPE_STRING`, integer-encoded or LZF as `rdbcompression
//!   yes` writes it (`super::put_string_redis`);
//! - list: `RDB_TYPE_LIST_QUICKLIST_2`, listpack nodes of at most ~8 KB
//!   (the default `list-max-listpack-size -2`); node boundaries are free,
//!   Redis keeps whatever nodes it is given;
//! - set: `RDB_TYPE_SET_INTSET` when the set is an intset (which is when
//!   Redis's would be), else `RDB_TYPE_SET`;
//! - sorted set: `RDB_TYPE_ZSET_LISTPACK` when packed (within the
//!   `zset-max-listpack-*` limits), else `RDB_TYPE_ZSET_2` with binary
//!   scores, tail first as Redis writes its skiplist;
//! - hash: `RDB_TYPE_HASH_LISTPACK` when packed, else `RDB_TYPE_HASH`;
//! - stream: `RDB_TYPE_STREAM_LISTPACKS_2` (`super::stream`).
//!
//! Reader: every type Redis 7.0 loads except modules, each
//! rebuilt through the engine's constructors in the encoding the limits in
//! force give it (Redis converts on load the same way). The compact blobs
//! are validated whole before use (`sanitize-dump-payload yes`, always: a
//! payload is client input). Empty values are refused, as Redis's
//! `emptykey` check does (an empty stream is a value, as in Redis).
use super::listpack::{self, Elem};
use super::{intset, put_len, put_string_redis, ziplist, zipmap, Malformed, Reader};
use crate::snapshot::format::BuildLimits;
use cairn_engine::value::{HashValue, ListValue, SetValue, StrValue, Value, ZSetValue};
use cairn_engine::Ref;

/// RDB object type bytes (`rdb.h`). On disk: never renumber.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    String = 0,
    List = 1,
    Set = 2,
    ZSet = 3,
    Hash = 4,
    ZSet2 = 5,
    ModulePreGa = 6,
    Module2 = 7,
    HashZipmap = 9,
    ListZiplist = 10,
    SetIntset = 11,
    ZSetZiplist = 12,
    HashZiplist = 13,
    ListQuicklist = 14,
    StreamListpacks = 15,
    HashListpack = 16,
    ZSetListpack = 17,
    ListQuicklist2 = 18,
    StreamListpacks2 = 19,
}

impl Type {
    pub fn from_u8(b: u8) -> Option<Type> {
        use Type::*;
        Some(match b {
            0 => String,
            1 => List,
            2 => Set,
            3 => ZSet,
            4 => Hash,
            5 => ZSet2,
            6 => ModulePreGa,
            7 => Module2,
            9 => HashZipmap,
            10 => ListZiplist,
            11 => SetIntset,
            12 => ZSetZiplist,
            13 => HashZiplist,
            14 => ListQuicklist,
            15 => StreamListpacks,
            16 => HashListpack,
            17 => ZSetListpack,
            18 => ListQuicklist2,
            19 => StreamListpacks2,
            _ => return None,
        })
    }
}

/// `QUICKLIST_NODE_CONTAINER_PLAIN` / `_PACKED`: how a QUICKLIST_2 node is
/// stored.
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// Node size for lists: `list-max-listpack-size -2` (8 KB), with
/// quicklist's per-entry overestimate (`SIZE_ESTIMATE_OVERHEAD`).
const LIST_NODE_BYTES: usize = 8192;
const SIZE_ESTIMATE_OVERHEAD: usize = 8;

/// Appends the type byte and object of the key `r` refers to.
pub fn put_ref(out: &mut Vec<u8>, r: Ref<'_>) {
    match r.value() {
        Some(v) => put_value(out, v),
        None => {
            out.push(Type::String as u8);
            r.str()
                .expect("a compact entry is a string")
                .with_bytes(|b| put_string_redis(out, b));
        }
    }
}

/// Appends the type byte and object of `v`.
pub fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Stream(s) => super::stream::put(out, s),
        Value::Str(s) => {
            out.push(Type::String as u8);
            s.with_bytes(|b| put_string_redis(out, b));
        }
        Value::List(l) => {
            out.push(Type::ListQuicklist2 as u8);
            let mut nodes: Vec<Vec<u8>> = Vec::new();
            let mut cur = listpack::Writer::new();
            for e in l.iter() {
                e.with_bytes(|b| {
                    if !cur.is_empty()
                        && cur.bytes() + b.len() + SIZE_ESTIMATE_OVERHEAD > LIST_NODE_BYTES
                    {
                        nodes.push(std::mem::take(&mut cur).finish());
                    }
                    cur.push(b);
                });
            }
            if !cur.is_empty() {
                nodes.push(cur.finish());
            }
            put_len(out, nodes.len() as u64);
            for n in nodes {
                put_len(out, CONTAINER_PACKED);
                put_string_redis(out, &n);
            }
        }
        Value::Set(s) => {
            if let Some(blob_len) = s.intset_blob_len() {
                let mut ints: Vec<i64> = s
                    .iter()
                    .map(|e| e.as_int().expect("an intset holds integers"))
                    .collect();
                ints.sort_unstable();
                let width = (blob_len - 8).checked_div(ints.len()).unwrap_or(2);
                out.push(Type::SetIntset as u8);
                put_string_redis(out, &intset::build(&ints, width));
            } else {
                out.push(Type::Set as u8);
                put_len(out, s.len() as u64);
                for m in s.iter() {
                    m.with_bytes(|b| put_string_redis(out, b));
                }
            }
        }
        Value::ZSet(z) => {
            if z.is_packed() {
                out.push(Type::ZSetListpack as u8);
                let mut w = listpack::Writer::new();
                let mut text = Vec::new();
                for (m, score) in z.iter() {
                    w.push(m);
                    text.clear();
                    cairn_engine::ops::zset::scan_score_text(true, score, &mut text);
                    w.push(&text);
                }
                put_string_redis(out, &w.finish());
            } else {
                out.push(Type::ZSet2 as u8);
                put_len(out, z.len() as u64);
                // Tail first, so a loader inserting at the head is linear.
                let mut items: Vec<(&[u8], f64)> = z.iter().collect();
                items.reverse();
                for (m, score) in items {
                    put_string_redis(out, m);
                    out.extend_from_slice(&score.to_le_bytes());
                }
            }
        }
        Value::Hash(h) => {
            let view = h.view();
            if h.is_packed() {
                out.push(Type::HashListpack as u8);
                let mut w = listpack::Writer::new();
                let mut buf = Vec::new();
                view.for_each(|f, v| {
                    w.push(f);
                    buf.clear();
                    v.append_to(&mut buf);
                    w.push(&buf);
                });
                put_string_redis(out, &w.finish());
            } else {
                out.push(Type::Hash as u8);
                put_len(out, view.len() as u64);
                let mut buf = Vec::new();
                view.for_each(|f, v| {
                    put_string_redis(out, f);
                    buf.clear();
                    v.append_to(&mut buf);
                    put_string_redis(out, &buf);
                });
            }
        }
    }
}

/// Reads one object of type `type_byte` (already read) from `r`.
pub fn read(r: &mut Reader<'_>, type_byte: u8, limits: &BuildLimits) -> Result<Value, Malformed> {
    let t = Type::from_u8(type_byte).ok_or(Malformed)?;
    Ok(match t {
        Type::String => Value::Str(StrValue::from_vec(r.string()?)),
        Type::List => {
            let n = r.count(1)?;
            let mut l = ListValue::with_fill(limits.list_fill);
            for _ in 0..n {
                l.push_back(&r.string()?);
            }
            list_value(l)?
        }
        Type::ListZiplist => {
            let blob = r.string()?;
            let mut l = ListValue::with_fill(limits.list_fill);
            for e in ziplist::parse(&blob)? {
                l.push_back(&e.to_vec());
            }
            list_value(l)?
        }
        Type::ListQuicklist | Type::ListQuicklist2 => {
            let nodes = r.count(2)?;
            let mut l = ListValue::with_fill(limits.list_fill);
            for _ in 0..nodes {
                let container = if t == Type::ListQuicklist2 {
                    r.len()?
                } else {
                    CONTAINER_PACKED
                };
                let blob = r.string()?;
                match container {
                    CONTAINER_PLAIN => l.push_back(&blob),
                    CONTAINER_PACKED => {
                        let elems = if t == Type::ListQuicklist2 {
                            listpack::parse(&blob)?
                        } else {
                            ziplist::parse(&blob)?
                        };
                        // Redis skips an empty node rather than failing.
                        for e in elems {
                            l.push_back(&e.to_vec());
                        }
                    }
                    _ => return Err(Malformed),
                }
            }
            list_value(l)?
        }
        Type::Set => {
            let n = r.count(1)?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                members.push(r.string()?);
            }
            set_value(members.iter().map(Vec::as_slice), limits)?
        }
        Type::SetIntset => {
            let blob = r.string()?;
            let ints = intset::parse(&blob)?;
            let texts: Vec<Vec<u8>> = ints.iter().map(|v| v.to_string().into_bytes()).collect();
            set_value(texts.iter().map(Vec::as_slice), limits)?
        }
        Type::ZSet | Type::ZSet2 => {
            let n = r.count(if t == Type::ZSet2 { 9 } else { 2 })?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.string()?;
                let s = if t == Type::ZSet2 {
                    r.binary_double()?
                } else {
                    r.text_double()?
                };
                items.push((s, m));
            }
            zset_value(items, limits)?
        }
        Type::ZSetZiplist | Type::ZSetListpack => {
            let blob = r.string()?;
            let elems = if t == Type::ZSetListpack {
                listpack::parse(&blob)?
            } else {
                ziplist::parse(&blob)?
            };
            if elems.len() % 2 != 0 {
                return Err(Malformed);
            }
            let mut items = Vec::with_capacity(elems.len() / 2);
            for p in elems.chunks_exact(2) {
                let score = match p[1] {
                    Elem::Int(v) => v as f64,
                    Elem::Str(s) => {
                        cairn_engine::util::num::parse_f64_strict(s).ok_or(Malformed)?
                    }
                };
                items.push((score, p[0].to_vec()));
            }
            zset_value(items, limits)?
        }
        Type::Hash => {
            let n = r.count(2)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                let f = r.string()?;
                let v = r.string()?;
                pairs.push((f, v));
            }
            hash_value(
                pairs.iter().map(|(f, v)| (f.as_slice(), v.as_slice())),
                limits,
            )?
        }
        Type::HashZipmap => {
            let blob = r.string()?;
            hash_value(zipmap::parse(&blob)?.into_iter(), limits)?
        }
        Type::HashZiplist | Type::HashListpack => {
            let blob = r.string()?;
            let elems = if t == Type::HashListpack {
                listpack::parse(&blob)?
            } else {
                ziplist::parse(&blob)?
            };
            if elems.len() % 2 != 0 {
                return Err(Malformed);
            }
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = elems
                .chunks_exact(2)
                .map(|p| (p[0].to_vec(), p[1].to_vec()))
                .collect();
            hash_value(
                pairs.iter().map(|(f, v)| (f.as_slice(), v.as_slice())),
                limits,
            )?
        }
        Type::StreamListpacks | Type::StreamListpacks2 => Value::Stream(Box::new(
            super::stream::read(r, t == Type::StreamListpacks2, &limits.stream)?,
        )),
        // Modules Cairn has none of.
        Type::ModulePreGa | Type::Module2 => return Err(Malformed),
    })
}

fn list_value(l: ListValue) -> Result<Value, Malformed> {
    if l.is_empty() {
        return Err(Malformed);
    }
    Ok(Value::List(Box::new(l)))
}

/// A set of `members`, refused when empty or when a member repeats (Redis's
/// "Duplicate set members detected").
fn set_value<'a>(
    mut members: impl Iterator<Item = &'a [u8]>,
    limits: &BuildLimits,
) -> Result<Value, Malformed> {
    let first = members.next().ok_or(Malformed)?;
    let mut s = SetValue::for_member(first);
    s.add(first, limits.max_intset);
    for m in members {
        if !s.add(m, limits.max_intset) {
            return Err(Malformed);
        }
    }
    Ok(Value::Set(Box::new(s)))
}

/// A sorted set of `(score, member)` in any order, refused when empty, on a
/// NaN score or a repeated member.
fn zset_value(mut items: Vec<(f64, Vec<u8>)>, limits: &BuildLimits) -> Result<Value, Malformed> {
    if items.is_empty() || items.iter().any(|i| i.0.is_nan()) {
        return Err(Malformed);
    }
    items.sort_by(|a, b| a.1.cmp(&b.1));
    if items.windows(2).any(|w| w[0].1 == w[1].1) {
        return Err(Malformed);
    }
    // -0 and 0 compare equal, as in Redis's skiplist; each keeps its sign
    // (ZSCORE shows "-0").
    items.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .expect("no NaN scores")
            .then_with(|| a.1.cmp(&b.1))
    });
    Ok(Value::ZSet(Box::new(ZSetValue::from_sorted(
        &items,
        &limits.zset,
    ))))
}

/// A hash of `pairs` in order, refused when empty or a field repeats.
fn hash_value<'a>(
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    limits: &BuildLimits,
) -> Result<Value, Malformed> {
    let mut h = HashValue::new();
    for (f, v) in pairs {
        if !h.set(f, v, &limits.hash) {
            return Err(Malformed);
        }
    }
    if h.is_empty() {
        return Err(Malformed);
    }
    h.seal();
    Ok(Value::Hash(Box::new(h)))
}

/// Why a RESTORE payload was refused, in the order Redis checks.
#[derive(Debug, PartialEq, Eq)]
pub enum RestoreError {
    /// "DUMP payload version or checksum are wrong".
    Footer,
    /// "Bad data format".
    Format,
}

/// DUMP's payload of the key `r` refers to: type, object, RDB version and
/// CRC-64 (`createDumpPayload`).
pub fn dump(r: Ref<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    put_ref(&mut out, r);
    super::seal_dump(&mut out);
    out
}

/// The value in a RESTORE payload. Bytes after the object are ignored, as
/// Redis ignores them.
pub fn restore(payload: &[u8], limits: &BuildLimits) -> Result<Value, RestoreError> {
    let body = super::open_dump(payload).ok_or(RestoreError::Footer)?;
    let mut r = Reader::new(body);
    let t = r.byte().map_err(|_| RestoreError::Format)?;
    read(&mut r, t, limits).map_err(|_| RestoreError::Format)
}

#[cfg(test)]
mod tests;
