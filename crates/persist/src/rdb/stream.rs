//! Streams in RDB form: `RDB_TYPE_STREAM_LISTPACKS_2` (19) as Redis 7.0's
//! `rdbSaveObject` writes it, and both 19 and the 6.x form
//! `RDB_TYPE_STREAM_LISTPACKS` (15) as `rdbLoadObject` reads them.
//!
//! ```text
//! stream   nodes:len  (master-id:string(16 bytes, ms and seq big endian)
//!                      listpack:string)*
//!          length:len  last_id(ms:len seq:len)
//!          [first_id  max_deleted_entry_id  entries_added:len]   (type 19)
//!          groups:len  group*
//! group    name:string  last_id(ms:len seq:len)  [entries_read:len]  (19; -1 unknown)
//!          pel:len  (id:16 raw  delivery_time:u64le  delivery_count:len)*
//!          consumers:len  (name:string  seen_time:u64le  pel:len  id:16 raw *)*
//! listpack master entry: count deleted nfields field* 0
//!          then per entry: flags ms-diff seq-diff [nfields] ([field] value)* lp-count
//! ```
//!
//! Cairn's nodes split at the same points as Redis's (the first entry of a
//! node is its master; a node closes at `stream-node-max-entries` entries,
//! tombstones counted), so for entries small enough that the entry limit
//! rather than the byte limit closes nodes, the bytes equal Redis's.
//! Tombstones are written where they lie, as Redis keeps them in place.
use super::listpack::{self, Elem};
use super::object::Type;
use super::{put_len, put_string_redis, Malformed, Reader};
use cairn_engine::value::stream::{Group, StreamId, StreamLimits, StreamValue};

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;

/// `streamEncodeID`: ms then seq, big endian, so byte order is ID order.
fn encode_id(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

fn decode_id(b: &[u8]) -> Result<StreamId, Malformed> {
    if b.len() != 16 {
        return Err(Malformed);
    }
    let ms = u64::from_be_bytes(b[..8].try_into().map_err(|_| Malformed)?);
    let seq = u64::from_be_bytes(b[8..].try_into().map_err(|_| Malformed)?);
    Ok(StreamId::new(ms, seq))
}

fn put_id_lens(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

/// Appends type 19 and the stream `s`.
pub fn put(out: &mut Vec<u8>, s: &StreamValue) {
    put_as(out, s, true);
}

/// `put` in type 19 (`v2`) or, for tests of the 6.x reader, type 15.
fn put_as(out: &mut Vec<u8>, s: &StreamValue, v2: bool) {
    let t = if v2 {
        Type::StreamListpacks2
    } else {
        Type::StreamListpacks
    };
    out.push(t as u8);
    put_len(out, s.node_count() as u64);
    for node in s.nodes() {
        put_string_redis(out, &encode_id(node.master));
        let mut w = listpack::Writer::new();
        w.push_int(i64::from(node.live()));
        w.push_int(i64::from(node.deleted()));
        w.push_int(node.master_field_count() as i64);
        for f in node.master_fields() {
            w.push(f);
        }
        w.push_int(0);
        for e in node.entries() {
            let same = e.same_fields();
            let flags = if e.is_deleted() { FLAG_DELETED } else { 0 }
                | if same { FLAG_SAME_FIELDS } else { 0 };
            w.push_int(flags);
            // Redis passes the unsigned differences as int64.
            w.push_int(e.id.ms.wrapping_sub(node.master.ms) as i64);
            w.push_int(e.id.seq.wrapping_sub(node.master.seq) as i64);
            let n = e.len() as i64;
            if !same {
                w.push_int(n);
            }
            for (f, v) in e.pairs() {
                if !same {
                    w.push(f);
                }
                w.push(v);
            }
            w.push_int(if same { n + 3 } else { 2 * n + 4 });
        }
        put_string_redis(out, &w.finish());
    }
    put_len(out, s.len());
    put_id_lens(out, s.last_id);
    if v2 {
        put_id_lens(out, s.first_id);
        put_id_lens(out, s.max_deleted_id);
        put_len(out, s.entries_added);
    }
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_string_redis(out, name);
        put_id_lens(out, g.last_id);
        if v2 {
            // SCG_INVALID_ENTRIES_READ (-1) as rdbSaveLen writes it.
            put_len(out, g.entries_read.unwrap_or(u64::MAX));
        }
        put_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&encode_id(*id));
            out.extend_from_slice(&nack.delivery_time_ms.to_le_bytes());
            put_len(out, nack.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string_redis(out, cname);
            out.extend_from_slice(&c.seen_time_ms.to_le_bytes());
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&encode_id(*id));
            }
        }
    }
}

/// `lpGetIntegerIfValid`: an integer element, or a string that is one.
fn int(e: Option<&Elem<'_>>) -> Result<i64, Malformed> {
    match e.ok_or(Malformed)? {
        Elem::Int(v) => Ok(*v),
        Elem::Str(s) => cairn_engine::util::num::parse_i64(s).ok_or(Malformed),
    }
}

fn id(r: &mut Reader<'_>) -> Result<StreamId, Malformed> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn ms_time(r: &mut Reader<'_>) -> Result<u64, Malformed> {
    let b = r.take(8)?;
    Ok(u64::from_le_bytes(b.try_into().map_err(|_| Malformed)?))
}

/// Reads a stream of type 15 (`v2` false) or 19, checked as Redis's deep
/// sanitization checks it, plus what Cairn's representation relies on:
/// entry IDs strictly ascending across nodes and not above `last_id`, the
/// declared length equal to the live entries, PELs consistent.
pub fn read(r: &mut Reader<'_>, v2: bool, limits: &StreamLimits) -> Result<StreamValue, Malformed> {
    let nodes = r.count(2)?;
    let mut s = StreamValue::new();
    let mut prev: Option<StreamId> = None;
    let mut live = 0u64;
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for _ in 0..nodes {
        let master = decode_id(&r.string()?)?;
        let blob = r.string()?;
        let elems = listpack::parse(&blob)?;
        if elems.is_empty() {
            return Err(Malformed);
        }
        let mut it = elems.iter();
        let count = int(it.next())?;
        let deleted = int(it.next())?;
        let nmaster = int(it.next())?;
        if count < 0 || deleted < 0 || nmaster < 0 || nmaster as usize > elems.len() {
            return Err(Malformed);
        }
        let fields: Vec<Vec<u8>> = (0..nmaster)
            .map(|_| it.next().map(|e| e.to_vec()).ok_or(Malformed))
            .collect::<Result<_, _>>()?;
        if int(it.next())? != 0 {
            return Err(Malformed);
        }
        let total = count.checked_add(deleted).ok_or(Malformed)?;
        for _ in 0..total {
            let flags = int(it.next())?;
            let ms = master.ms.wrapping_add(int(it.next())? as u64);
            let seq = master.seq.wrapping_add(int(it.next())? as u64);
            let eid = StreamId::new(ms, seq);
            let same = flags & FLAG_SAME_FIELDS != 0;
            let n = if same {
                nmaster
            } else {
                let n = int(it.next())?;
                if n < 0 || n as usize > elems.len() {
                    return Err(Malformed);
                }
                n
            };
            pairs.clear();
            let mut names = fields.iter();
            for _ in 0..n {
                let f = if same {
                    names.next().ok_or(Malformed)?.clone()
                } else {
                    it.next().ok_or(Malformed)?.to_vec()
                };
                let v = it.next().ok_or(Malformed)?.to_vec();
                pairs.push((f, v));
            }
            let want = if same { n + 3 } else { 2 * n + 4 };
            if int(it.next())? != want {
                return Err(Malformed);
            }
            if prev.is_some_and(|p| p >= eid) {
                return Err(Malformed);
            }
            prev = Some(eid);
            let dead = flags & FLAG_DELETED != 0;
            if !dead {
                live += 1;
            }
            let borrowed: Vec<(&[u8], &[u8])> = pairs
                .iter()
                .map(|(f, v)| (f.as_slice(), v.as_slice()))
                .collect();
            s.push_raw(eid, &borrowed, dead, limits);
        }
        if it.next().is_some() {
            return Err(Malformed);
        }
    }
    let length = r.len()?;
    let last_id = id(r)?;
    if length != live || prev.is_some_and(|p| p > last_id) {
        return Err(Malformed);
    }
    if v2 {
        let first_id = id(r)?;
        let max_deleted = id(r)?;
        let added = r.len()?;
        s.set_meta(last_id, first_id, max_deleted, added);
    } else {
        // As Redis migrates a 6.x stream: no tombstone known, every entry
        // counted as added, the first ID the first live entry's.
        s.set_meta(last_id, StreamId::MIN, StreamId::MIN, length);
        let first = s.entries().first().map_or(StreamId::MIN, |e| e.id);
        s.first_id = first;
    }
    let ngroups = r.count(4)?;
    for _ in 0..ngroups {
        let name = r.string()?;
        let last = id(r)?;
        let entries_read = if v2 {
            match r.len()? {
                u64::MAX => None,
                n => Some(n),
            }
        } else {
            s.estimate_distance(last)
        };
        let mut g = Group::new(last, entries_read);
        let npel = r.count(17)?;
        let mut pel: Vec<(StreamId, u64, u64)> = Vec::with_capacity(npel);
        for _ in 0..npel {
            let pid = decode_id(r.take(16)?)?;
            let t = ms_time(r)?;
            let count = r.len()?;
            pel.push((pid, t, count));
        }
        pel.sort_unstable_by_key(|p| p.0);
        if pel.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(Malformed);
        }
        let mut owned = vec![false; pel.len()];
        let nconsumers = r.count(10)?;
        for _ in 0..nconsumers {
            let cname = r.string()?;
            let seen = ms_time(r)?;
            if !g.create_consumer(&cname, seen) {
                return Err(Malformed);
            }
            let n = r.count(16)?;
            for _ in 0..n {
                let pid = decode_id(r.take(16)?)?;
                let at = pel
                    .binary_search_by_key(&pid, |p| p.0)
                    .map_err(|_| Malformed)?;
                // An entry owned twice would leave the PELs inconsistent.
                if std::mem::replace(&mut owned[at], true) {
                    return Err(Malformed);
                }
                let (_, t, count) = pel[at];
                g.assign(pid, &cname, t, count);
            }
        }
        // Redis's deep check: every pending entry has an owner.
        if owned.iter().any(|o| !o) {
            return Err(Malformed);
        }
        if s.groups.insert(name.into(), g).is_some() {
            return Err(Malformed);
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(b: &[u8]) -> Result<StreamValue, Malformed> {
        let (&t, body) = b.split_first().ok_or(Malformed)?;
        let mut r = Reader::new(body);
        let s = read(
            &mut r,
            t == Type::StreamListpacks2 as u8,
            &StreamLimits::default(),
        )?;
        if !r.is_empty() {
            return Err(Malformed);
        }
        Ok(s)
    }

    /// 250 entries over three nodes (mostly the master's fields, some
    /// not), tombstones inside nodes, and two groups: one with pending entries over two consumers and one
    /// with an unknown read counter.
    fn sample() -> StreamValue {
        let limits = StreamLimits::default();
        let mut s = StreamValue::new();
        for i in 1..=250u64 {
            let v = i.to_string();
            let pairs: Vec<(&[u8], &[u8])> = if i % 7 == 0 {
                vec![(b"other", v.as_bytes()), (b"x", b"-12")]
            } else {
                vec![(b"name", b"sensor"), (b"temp", v.as_bytes())]
            };
            s.append(
                StreamId::new(1_700_000_000_000 + i / 3, i % 3),
                &pairs,
                &limits,
            );
        }
        for i in [5u64, 6, 40, 200] {
            assert!(s.delete(StreamId::new(1_700_000_000_000 + i / 3, i % 3)));
        }
        let mut g = Group::new(StreamId::new(1_700_000_000_010, 0), Some(30));
        g.create_consumer(b"alice", 1_700_000_000_100);
        g.create_consumer(b"bob", 1_700_000_000_200);
        g.create_consumer(b"idle", 1_700_000_000_300);
        g.assign(
            StreamId::new(1_700_000_000_001, 1),
            b"alice",
            1_700_000_000_150,
            1,
        );
        g.assign(
            StreamId::new(1_700_000_000_002, 0),
            b"bob",
            1_700_000_000_250,
            3,
        );
        g.assign(
            StreamId::new(1_700_000_000_009, 2),
            b"alice",
            1_700_000_000_160,
            2,
        );
        s.groups.insert(b"g1"[..].into(), g);
        s.groups
            .insert(b"g0"[..].into(), Group::new(StreamId::MIN, None));
        s
    }

    #[test]
    fn streams_round_trip_with_tombstones_and_groups() {
        let s = sample();
        let mut out = Vec::new();
        put(&mut out, &s);
        let back = read_all(&out).unwrap();
        assert_eq!(back, s);
        // The same nodes, tombstones where they were: written again, the
        // bytes are the same.
        let mut again = Vec::new();
        put(&mut again, &back);
        assert_eq!(again, out);
        let masters: Vec<StreamId> = s.nodes().map(|n| n.master).collect();
        assert_eq!(masters.len(), 3);
        assert_eq!(back.nodes().map(|n| n.master).collect::<Vec<_>>(), masters);
        let dead: u32 = back.nodes().map(|n| n.deleted()).sum();
        assert_eq!(dead, 4);
        // An empty stream (XGROUP CREATE MKSTREAM) is a value.
        let mut e = StreamValue::new();
        e.groups
            .insert(b"g"[..].into(), Group::new(StreamId::MIN, Some(0)));
        let mut out = Vec::new();
        put(&mut out, &e);
        assert_eq!(read_all(&out).unwrap(), e);
    }

    #[test]
    fn a_one_entry_stream_has_redis_layout() {
        // XADD s 1-1 f v, as Redis 7.0.15 dumps it (the object part).
        let mut s = StreamValue::new();
        s.append(
            StreamId::new(1, 1),
            &[(b"f", b"v")],
            &StreamLimits::default(),
        );
        let mut out = Vec::new();
        put(&mut out, &s);
        let mut want = vec![19u8, 1, 16];
        want.extend_from_slice(&encode_id(StreamId::new(1, 1)));
        let mut lp = listpack::Writer::new();
        for e in [1, 0, 1] {
            lp.push_int(e);
        }
        lp.push(b"f");
        for e in [0, 2, 0, 0] {
            lp.push_int(e);
        }
        lp.push(b"v");
        lp.push_int(4);
        let lp = lp.finish();
        want.push(lp.len() as u8);
        want.extend_from_slice(&lp);
        // length 1, last 1-1, first 1-1, max deleted 0-0, added 1, no groups.
        want.extend_from_slice(&[1, 1, 1, 1, 1, 0, 0, 1, 0]);
        assert_eq!(out, want);
    }

    #[test]
    fn type_15_reads_as_redis_migrates_it() {
        let s = sample();
        let mut out = Vec::new();
        put_as(&mut out, &s, false);
        let back = read_all(&out).unwrap();
        assert_eq!(back.len(), s.len());
        assert_eq!(back.entries_added, s.len());
        assert_eq!(back.max_deleted_id, StreamId::MIN);
        assert_eq!(back.first_id, s.first_id);
        assert_eq!(back.last_id, s.last_id);
        let g = &back.groups[&b"g1"[..]];
        assert_eq!(g.pel, s.groups[&b"g1"[..]].pel);
        // Redis estimates the read counter; with tombstones before the
        // group's ID it cannot know it.
        assert_eq!(g.entries_read, back.estimate_distance(g.last_id));
    }

    #[test]
    fn inconsistent_streams_are_refused() {
        let s = sample();
        let mut good = Vec::new();
        put(&mut good, &s);
        for cut in 0..good.len() {
            assert!(read_all(&good[..cut]).is_err(), "prefix {cut}");
        }
        // A PEL entry no consumer owns: drop bob's one ID.
        let mut t = StreamValue::new();
        t.append(
            StreamId::new(1, 0),
            &[(b"f", b"v")],
            &StreamLimits::default(),
        );
        let mut g = Group::new(StreamId::new(1, 0), Some(1));
        g.create_consumer(b"c", 5);
        g.assign(StreamId::new(1, 0), b"c", 6, 1);
        t.groups.insert(b"g"[..].into(), g);
        let mut out = Vec::new();
        put(&mut out, &t);
        assert!(read_all(&out).is_ok());
        let n = out.len();
        // The consumer's PEL count 1 -> 0, its ID dropped.
        let mut orphan = out[..n - 16].to_vec();
        orphan[n - 17] = 0;
        assert!(read_all(&orphan).is_err());
        // A length that is not the live entries'.
        let mut wrong = out.clone();
        wrong[length_at(&out)] = 2;
        assert!(read_all(&wrong).is_err());
        // Entries out of order across nodes: two nodes with the same master.
        let mut twice = vec![19u8, 2];
        let mut r = Reader::new(&out[2..]);
        r.string().unwrap();
        r.string().unwrap();
        let node = &out[2..out.len() - r.remaining()];
        twice.extend_from_slice(node);
        twice.extend_from_slice(node);
        twice.extend_from_slice(&out[length_at(&out)..]);
        assert!(read_all(&twice).is_err());
    }

    /// Where the length follows the nodes in a one-node stream.
    fn length_at(out: &[u8]) -> usize {
        let mut r = Reader::new(&out[2..]);
        r.string().unwrap();
        r.string().unwrap();
        out.len() - r.remaining()
    }

    /// A listpack of `items`: integers as numbers, anything else as text.
    fn lp(items: &[&str]) -> Vec<u8> {
        let mut w = listpack::Writer::new();
        for i in items {
            w.push(i.as_bytes());
        }
        w.finish()
    }

    #[test]
    fn a_node_of_tombstones_only_is_dropped() {
        // Node 1-0 holds two deleted entries, node 3-0 two live ones, as a
        // foreign writer could leave them (Redis drops such a node).
        let mut out = vec![19u8, 2];
        for (m, items) in [
            (
                1,
                [
                    "0", "2", "1", "f", "0", "3", "0", "0", "v", "4", "3", "1", "0", "v", "4",
                ],
            ),
            (
                3,
                [
                    "2", "0", "1", "f", "0", "2", "0", "0", "v", "4", "2", "1", "0", "v", "4",
                ],
            ),
        ] {
            crate::rdb::put_string(&mut out, &encode_id(StreamId::new(m, 0)));
            crate::rdb::put_string(&mut out, &lp(&items));
        }
        // length 2, last 4-0, first 3-0, max deleted 2-0, added 4, no group.
        out.extend_from_slice(&[2, 4, 0, 3, 0, 2, 0, 4, 0]);
        let back = read_all(&out).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back.node_count(), 1);
        assert_eq!(back.first_id, StreamId::new(3, 0));
        // A wrong lp-count, a master terminator that is not 0, an entry
        // count beyond the listpack: each refused.
        for bad in [
            [
                "2", "0", "1", "f", "0", "2", "0", "0", "v", "5", "2", "1", "0", "v", "4",
            ],
            [
                "2", "0", "1", "f", "1", "2", "0", "0", "v", "4", "2", "1", "0", "v", "4",
            ],
            [
                "3", "0", "1", "f", "0", "2", "0", "0", "v", "4", "2", "1", "0", "v", "4",
            ],
        ] {
            let mut out = vec![19u8, 1];
            crate::rdb::put_string(&mut out, &encode_id(StreamId::new(3, 0)));
            crate::rdb::put_string(&mut out, &lp(&bad));
            out.extend_from_slice(&[2, 4, 0, 3, 0, 0, 0, 2, 0]);
            assert!(read_all(&out).is_err(), "{bad:?}");
        }
    }

    /// DUMP of a stream made on redis-server 7.0.15: 130 entries plus one
    /// with its own fields over two nodes, an XDEL and an exact trim
    /// (tombstones), a group with five pending entries on two consumers and
    /// an idle third.
    const REDIS_GROUPS: &[&str] = &[
        "1302100000018bcfe568000000000000000001c342c9454a164a0500005e025e0106010201816602",
        "816e020001030100200105817602010105600c0001400c0002600c040101dfff02201a0003a00d60",
        "270004a00c60270005200c0002200180270006a00d60270007a00c60270008600c0003a0270009a0",
        "0d6027000aa00c6027000b600c0004a027000ca00d6027000da00c6027000e600c0005a027000f20",
        "09400d60270010a00c60270011600c0006a0270012a00d60270013a00c60270014600c0007a02700",
        "15a00d60270016a00c60270017600c0008a0270018a00d60270019a00c6027001a600c0009a02700",
        "1ba00d6027001ca00c6027001d600c000aa027001ea00d6027001fa00c60270020600c000ba02700",
        "21a00d60270022a00c60270023600c000ca0270024a00d60270025a00c60270026600c000da02700",
        "27a00d60270028a00c60270029600c000ea027002aa00d6027002ba00c6027002c600c000fa02700",
        "2da00d6027002ea00c6027002f600c0010a0270030a00d60270031a00c60270032600c0011a02700",
        "33a00d60270034a00c60270035600c0012a0270036a00d60270037a00c60270038600c0013a02700",
        "39a00d6027003aa00c6027003b200c02030114a027003c200d0002200d6027003da00c6027003e60",
        "0c0015a027003fa00d60270040a00c60270041600c0016a0270042a00d60270043a00c6027004460",
        "0c0017a0270045a00d60270046a00c60270047600c0018a0270048a00d60270049a00c6027004a60",
        "0c0019a027004ba00d6027004ca00c6027004d600c001aa027004ea00d6027004fa00c6027005060",
        "0c001ba0270051a00d60270052a00c60270053600c001ca0270054a00d60270055a00c6027005660",
        "0c001da0270057a00d60270058a00c60270059600c001ea027005aa00d6027005ba00c6027005c60",
        "0c001fa027005da00d6027005ea00c6027005f600c0020a0270060a00d60270061a00c6027006260",
        "0c0021a0270063a00d60270064200c00ff100000018bcfe568210000000000000002c3410441c511",
        "c5010000c1001f0100010201816602816e02400900002001058176026501052016040101dffe0220",
        "0d0066c00d00ff400d0067a00d60280068600c0002a0280069c00d6028006aa00d6028006b600c00",
        "03a028006cc00d6028006da00d6028006e600c0004a028006fc00d60280070a00d60280071600c00",
        "05a02800722009600d60280073a00d60280074600c0006a0280075c00d60280076a00d6028007760",
        "0c0007a0280078c00d60280079a00d6028007a600c0008a028007bc00d6028007ca00d6028007d60",
        "0c0009a028007ec00d6028007fa00d602802c0800240bf000aa02901c081c00e602a01c082200e02",
        "00010b401d0c0101836f776e048178020601ff407d810000018bcfe5682c00810000018bcfe56802",
        "00810000018bcfe568140040830103677270810000018bcfe568030181ffffffffffffffff050000",
        "018bcfe5680200000000000000002f832c1aa2010000010000018bcfe5680200000000000000012f",
        "832c1aa2010000010000018bcfe5680200000000000000022f832c1aa2010000010000018bcfe568",
        "0300000000000000008c832c1aa2010000010000018bcfe5680300000000000000018c832c1aa201",
        "000001030263312f832c1aa2010000030000018bcfe5680200000000000000000000018bcfe56802",
        "00000000000000010000018bcfe5680200000000000000020263328c832c1aa2010000020000018b",
        "cfe5680300000000000000000000018bcfe5680300000000000000010469646c65da832c1aa20100",
        "00000a00cbe2dd24c3674ca9",
    ];

    #[test]
    fn a_redis_payload_restores_and_dumps_back_byte_for_byte() {
        let payload: Vec<u8> = REDIS_GROUPS
            .concat()
            .as_bytes()
            .chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect();
        let v = super::super::object::restore(
            &payload,
            &crate::snapshot::format::BuildLimits::default(),
        )
        .unwrap();
        let cairn_engine::value::Value::Stream(s) = &v else {
            panic!("not a stream");
        };
        assert_eq!(s.len(), 125);
        assert_eq!(s.node_count(), 2);
        let g = &s.groups[&b"grp"[..]];
        assert_eq!(g.pel.len(), 5);
        assert_eq!(g.consumers.len(), 3);
        let mut out = Vec::new();
        super::super::object::put_value(&mut out, &v);
        crate::rdb::seal_dump(&mut out);
        assert_eq!(out, payload);
    }

    proptest! {
        #[test]
        fn flipped_streams_never_panic(at in any::<usize>(), bit in 0u8..8) {
            let mut out = Vec::new();
            put(&mut out, &sample());
            let i = at % out.len();
            out[i] ^= 1 << bit;
            let _ = read_all(&out);
        }
    }
}
