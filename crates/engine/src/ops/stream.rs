//! Stream operations (Redis 7.0 `src/t_stream.c`): XADD, XTRIM, XDEL,
//! XSETID, the range reads, consumer groups (XGROUP, XREADGROUP's
//! delivery, XACK, XCLAIM, XAUTOCLAIM) and what XINFO and XPENDING read.
//!
//! Owns the keyspace side of those commands: lookups (read lookups count
//! hits and misses), creation of the key, WATCH signals, keyspace
//! notifications (`xadd`, `xtrim`, `xdel`, `xsetid`, `xgroup-create`,
//! `xgroup-setid`, `xgroup-destroy`, `xgroup-createconsumer`,
//! `xgroup-delconsumer`, as `t_stream.c` sends them), waking blocked
//! readers, and the deterministic journal forms of clock-dependent group
//! writes (Redis propagates XREADGROUP and XCLAIM as `XCLAIM ... TIME ms
//! RETRYCOUNT n FORCE JUSTID LASTID id` plus `XGROUP SETID ... ENTRIESREAD`,
//! and so does Cairn). The encoding lives in `value::stream`; argument
//! parsing and replies live in the server.
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::value::stream::{EntryRef, Group, StreamId, StreamValue, Trim};
use crate::value::Value;
use crate::{Error, Result};

/// The stream a key holds, or WRONGTYPE.
pub fn as_stream(v: &Value) -> Result<&StreamValue> {
    match v {
        Value::Stream(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

pub fn as_stream_mut(v: &mut Value) -> Result<&mut StreamValue> {
    match v {
        Value::Stream(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

/// XADD's ID argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddId {
    /// `*`
    Auto,
    /// `ms-*`: the sequence is chosen.
    Ms(u64),
    /// A full ID.
    Exact(StreamId),
}

/// A trimming request (XADD's and XTRIM's MAXLEN/MINID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimSpec {
    pub how: Trim,
    pub approx: bool,
    /// 0: no limit.
    pub limit: u64,
}

/// What a trim left, for the journal: the exact form of an approximate
/// trim (`streamRewriteTrimArgument`: MAXLEN = the length left, MINID =
/// the first ID left).
pub fn exact_trim_arg(s: &StreamValue, how: Trim) -> String {
    match how {
        Trim::MaxLen(_) => s.len().to_string(),
        Trim::MinId(_) => s.first_id.to_string(),
    }
}

/// XADD's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Added {
    pub id: StreamId,
    /// For an approximate trim while the journal is on, the exact
    /// argument that reproduces it.
    pub exact_trim: Option<String>,
}

/// XADD key [NOMKSTREAM] [trim] id field value [...]: None when the key
/// is missing and NOMKSTREAM was given. Follows `xaddCommand`: the key is
/// created before the ID is checked, an ID not above the last one fails,
/// trimming runs after the append.
#[allow(clippy::too_many_arguments)]
pub fn xadd(
    g: &mut Guard,
    db: usize,
    k: &Key,
    id: AddId,
    nomkstream: bool,
    trim: Option<TrimSpec>,
    pairs: &[(&[u8], &[u8])],
    now_ms: u64,
) -> Result<Option<Added>> {
    let limits = g.engine().limits.stream();
    // The exact form of a `~` trim is only for the journal.
    let journal = g.engine().journal_on();
    if g.write(db, k).is_none() {
        if nomkstream {
            return Ok(None);
        }
        g.set(db, k, Value::Stream(Box::default()), Expiry::Clear);
    }
    let e = g.write(db, k).expect("the key exists or was just created");
    let s = as_stream_mut(&mut e.value)?;
    if s.last_id == StreamId::MAX {
        return Err(Error::StreamExhausted);
    }
    let new_id = match id {
        AddId::Exact(i) => i,
        AddId::Ms(ms) => {
            if s.last_id.ms == ms {
                if s.last_id.seq == u64::MAX {
                    return Err(Error::StreamIdTooSmall);
                }
                StreamId::new(ms, s.last_id.seq + 1)
            } else {
                StreamId::new(ms, 0)
            }
        }
        // Redis `streamNextID`.
        AddId::Auto => {
            if now_ms > s.last_id.ms {
                StreamId::new(now_ms, 0)
            } else {
                s.last_id.incr().expect("the last ID is not the greatest")
            }
        }
    };
    if new_id <= s.last_id {
        return Err(Error::StreamIdTooSmall);
    }
    s.append(new_id, pairs, &limits);
    let mut trimmed = false;
    let mut exact_trim = None;
    if let Some(t) = trim {
        trimmed = s.trim(t.how, t.approx, t.limit) > 0;
        if t.approx && journal {
            exact_trim = Some(exact_trim_arg(s, t.how));
        }
    }
    g.modified(db, k);
    g.notify(class::STREAM, "xadd", db, k);
    if trimmed {
        g.notify(class::STREAM, "xtrim", db, k);
    }
    g.key_ready(db, k);
    Ok(Some(Added {
        id: new_id,
        exact_trim,
    }))
}

/// XTRIM key trim: the number of entries removed, and for an approximate
/// trim that removed some, the exact argument that reproduces it.
pub fn xtrim(g: &mut Guard, db: usize, k: &Key, t: TrimSpec) -> Result<(u64, Option<String>)> {
    let Some(e) = g.write(db, k) else {
        return Ok((0, None));
    };
    let s = as_stream_mut(&mut e.value)?;
    let n = s.trim(t.how, t.approx, t.limit);
    let exact = (n > 0 && t.approx).then(|| exact_trim_arg(s, t.how));
    if n > 0 {
        g.notify(class::STREAM, "xtrim", db, k);
        g.modified(db, k);
    }
    Ok((n, exact))
}

/// XDEL key id [id ...]: how many were deleted.
pub fn xdel(g: &mut Guard, db: usize, k: &Key, ids: &[StreamId]) -> Result<usize> {
    let Some(e) = g.write(db, k) else {
        return Ok(0);
    };
    let s = as_stream_mut(&mut e.value)?;
    let n = ids.iter().filter(|&&i| s.delete(i)).count();
    if n > 0 {
        g.modified(db, k);
        g.notify(class::STREAM, "xdel", db, k);
    }
    Ok(n)
}

/// XLEN key.
pub fn xlen(g: &mut Guard, db: usize, k: &Key) -> Result<u64> {
    match g.read(db, k) {
        None => Ok(0),
        Some(e) => Ok(as_stream(&e.value)?.len()),
    }
}

/// Calls `f` with the stream under `k` (None when absent) after a read
/// lookup, or fails with WRONGTYPE. The shard stays locked while `f`
/// runs, so replies are written straight from the nodes.
pub fn view<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<&StreamValue>) -> R,
) -> Result<R> {
    match g.read(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(as_stream(&e.value)?))),
    }
}

/// `view` without counting a hit or miss or touching the key: the checks
/// a retried XREADGROUP makes before its real lookups.
pub fn peek<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<&StreamValue>) -> R,
) -> Result<R> {
    match g.peek(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(as_stream(&e.value)?))),
    }
}

/// XSETID key id [ENTRIESADDED n] [MAXDELETEDID id] (`xsetidCommand`).
pub fn xsetid(
    g: &mut Guard,
    db: usize,
    k: &Key,
    id: StreamId,
    entries_added: Option<u64>,
    max_deleted: Option<StreamId>,
) -> Result<()> {
    let Some(e) = g.write(db, k) else {
        return Err(Error::NoSuchKey);
    };
    let s = as_stream_mut(&mut e.value)?;
    if !s.is_empty() {
        if id < s.last_valid_id() {
            return Err(Error::StreamSetIdBelowTop);
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return Err(Error::StreamEntriesAddedBelowLength);
        }
    }
    s.last_id = id;
    if let Some(n) = entries_added {
        s.entries_added = n;
    }
    if let Some(m) = max_deleted.filter(|m| !m.is_zero()) {
        s.max_deleted_id = m;
    }
    g.modified(db, k);
    g.notify(class::STREAM, "xsetid", db, k);
    Ok(())
}

// ------------------------------------------------------------------ groups

/// Where XGROUP CREATE/SETID starts a group: `$` or an ID (or an ID
/// argument that did not parse, which fails only after the key checks, as
/// in Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupStart {
    Last,
    Id(StreamId),
    Invalid,
}

fn resolve(s: Option<&StreamValue>, at: GroupStart) -> Result<StreamId> {
    match at {
        GroupStart::Last => Ok(s.map_or(StreamId::MIN, |s| s.last_id)),
        GroupStart::Id(i) => Ok(i),
        GroupStart::Invalid => Err(Error::InvalidStreamId),
    }
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]. A missing key
/// without MKSTREAM is `NoSuchKey`; an existing group `BusyGroup`.
pub fn group_create(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    at: GroupStart,
    mkstream: bool,
    entries_read: Option<u64>,
) -> Result<()> {
    let exists = match g.write(db, k) {
        Some(e) => {
            as_stream(&e.value)?;
            true
        }
        None if mkstream => false,
        None => return Err(Error::NoSuchKey),
    };
    let start = {
        let s = match g.peek(db, k) {
            Some(e) => Some(as_stream(&e.value)?),
            None => None,
        };
        resolve(s, at)?
    };
    if !exists {
        g.set(db, k, Value::Stream(Box::default()), Expiry::Clear);
    }
    let e = g.write(db, k).expect("the key exists or was just created");
    let s = as_stream_mut(&mut e.value)?;
    if s.groups.contains_key(name) {
        return Err(Error::BusyGroup);
    }
    s.groups
        .insert(name.into(), Group::new(start, entries_read));
    g.dirty();
    g.notify(class::STREAM, "xgroup-create", db, k);
    Ok(())
}

/// Runs `f` on group `name` of the stream at `k` (for a write): a missing
/// key is `NoSuchKey`, a missing group `NoGroup`.
fn with_group<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    f: impl FnOnce(&mut StreamValue, &[u8]) -> Result<R>,
) -> Result<R> {
    let Some(e) = g.write(db, k) else {
        return Err(Error::NoSuchKey);
    };
    let s = as_stream_mut(&mut e.value)?;
    if !s.groups.contains_key(name) {
        return Err(Error::NoGroup);
    }
    f(s, name)
}

/// XGROUP SETID key group id|$ [ENTRIESREAD n].
pub fn group_setid(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    at: GroupStart,
    entries_read: Option<u64>,
) -> Result<()> {
    with_group(g, db, k, name, |s, name| {
        let id = resolve(Some(s), at)?;
        let grp = s.groups.get_mut(name).expect("checked");
        grp.last_id = id;
        grp.entries_read = entries_read;
        Ok(())
    })?;
    g.dirty();
    g.notify(class::STREAM, "xgroup-setid", db, k);
    Ok(())
}

/// XGROUP DESTROY key group: true if the group existed. Its blocked
/// readers are woken to be told.
pub fn group_destroy(g: &mut Guard, db: usize, k: &Key, name: &[u8]) -> Result<bool> {
    let Some(e) = g.write(db, k) else {
        return Err(Error::NoSuchKey);
    };
    let s = as_stream_mut(&mut e.value)?;
    if s.groups.remove(name).is_none() {
        return Ok(false);
    }
    g.dirty();
    g.notify(class::STREAM, "xgroup-destroy", db, k);
    g.key_ready(db, k);
    Ok(true)
}

/// XGROUP CREATECONSUMER key group consumer: true if created.
pub fn create_consumer(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    consumer: &[u8],
    now_ms: u64,
) -> Result<bool> {
    let created = with_group(g, db, k, name, |s, name| {
        Ok(s.groups
            .get_mut(name)
            .expect("checked")
            .create_consumer(consumer, now_ms))
    })?;
    if created {
        g.dirty();
        g.notify(class::STREAM, "xgroup-createconsumer", db, k);
    }
    Ok(created)
}

/// XGROUP DELCONSUMER key group consumer: the entries it had pending (0
/// if it did not exist).
pub fn delete_consumer(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    consumer: &[u8],
) -> Result<usize> {
    let pending = with_group(g, db, k, name, |s, name| {
        Ok(s.groups
            .get_mut(name)
            .expect("checked")
            .delete_consumer(consumer))
    })?;
    match pending {
        Some(n) => {
            g.dirty();
            g.notify(class::STREAM, "xgroup-delconsumer", db, k);
            Ok(n)
        }
        None => Ok(0),
    }
}

/// XACK key group id [id ...]: how many were pending (0 for a missing key
/// or group).
pub fn xack(g: &mut Guard, db: usize, k: &Key, name: &[u8], ids: &[StreamId]) -> Result<usize> {
    let Some(e) = g.read(db, k) else {
        return Ok(0);
    };
    let s = as_stream_mut(&mut e.value)?;
    let Some(grp) = s.groups.get_mut(name) else {
        return Ok(0);
    };
    let n = ids.iter().filter(|&&i| grp.ack(i)).count();
    if n > 0 {
        g.dirty();
    }
    Ok(n)
}

/// The journal records staged for one group write (see the module
/// comment), each an argument vector.
#[derive(Default, Debug)]
pub struct GroupRecords {
    pub cmds: Vec<Vec<Vec<u8>>>,
}

impl GroupRecords {
    fn claim(
        &mut self,
        key: &[u8],
        group: &[u8],
        id: StreamId,
        nack: &crate::value::stream::Nack,
        last: StreamId,
    ) {
        self.cmds.push(vec![
            b"XCLAIM".to_vec(),
            key.to_vec(),
            group.to_vec(),
            nack.consumer.to_vec(),
            b"0".to_vec(),
            id.to_string().into_bytes(),
            b"TIME".to_vec(),
            nack.delivery_time_ms.to_string().into_bytes(),
            b"RETRYCOUNT".to_vec(),
            nack.delivery_count.to_string().into_bytes(),
            b"FORCE".to_vec(),
            b"JUSTID".to_vec(),
            b"LASTID".to_vec(),
            last.to_string().into_bytes(),
        ]);
    }

    /// An entry a claim found deleted: its NACK goes (Redis propagates the
    /// XCLAIM, which drops it on the replica too; XACK says so plainly).
    fn drop_nack(&mut self, key: &[u8], group: &[u8], id: StreamId) {
        self.cmds.push(vec![
            b"XACK".to_vec(),
            key.to_vec(),
            group.to_vec(),
            id.to_string().into_bytes(),
        ]);
    }

    fn setid(&mut self, key: &[u8], group: &[u8], grp: &Group) {
        let read = grp.entries_read.map_or(-1, |n| n as i64);
        self.cmds.push(vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            group.to_vec(),
            grp.last_id.to_string().into_bytes(),
            b"ENTRIESREAD".to_vec(),
            read.to_string().into_bytes(),
        ]);
    }

    fn consumer(&mut self, key: &[u8], group: &[u8], consumer: &[u8]) {
        self.cmds.push(vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            group.to_vec(),
            consumer.to_vec(),
        ]);
    }
}

/// Finds or creates `consumer` in `grp`, refreshing its seen time; true
/// if it was created (the caller notifies `xgroup-createconsumer` once
/// it no longer borrows the stream).
fn touch_consumer(
    k: &Key,
    grp: &mut Group,
    group: &[u8],
    consumer: &[u8],
    now_ms: u64,
    rec: &mut GroupRecords,
) -> bool {
    if grp.create_consumer(consumer, now_ms) {
        rec.consumer(k.bytes, group, consumer);
        true
    } else {
        if let Some(c) = grp.consumers.get_mut(consumer) {
            c.seen_time_ms = now_ms;
        }
        false
    }
}

/// What one stream of an XREADGROUP serves.
#[derive(Clone, Copy, Debug)]
pub struct GroupRead<'a> {
    pub group: &'a [u8],
    pub consumer: &'a [u8],
    pub noack: bool,
}

/// One item of a read: an entry, or (history of a consumer) an ID whose
/// entry was deleted.
pub type ReadItem<'a> = (StreamId, Option<EntryRef<'a>>);

/// XREADGROUP's delivery from one stream (`streamReplyWithRange` with a
/// group): with `after` None, new entries after the group's last ID (`>`),
/// each added to the PEL unless `noack`; with `after` Some(id), the
/// consumer's own pending entries above `id` (history), each delivered
/// once more. `emit` gets the items; the records are added to `rec`.
/// Returns false without calling `emit` if there was nothing new to serve
/// (only possible for `>`). The key and group were checked by the caller.
#[allow(clippy::too_many_arguments)]
pub fn group_read(
    g: &mut Guard,
    db: usize,
    k: &Key,
    r: GroupRead<'_>,
    after: Option<StreamId>,
    count: usize,
    now_ms: u64,
    rec: &mut GroupRecords,
    emit: impl FnOnce(&[ReadItem<'_>]),
) -> Result<bool> {
    let e = g.peek(db, k).ok_or(Error::NoGroup)?;
    let s = as_stream_mut(&mut e.value)?;
    let mut grp = s.groups.remove(r.group).ok_or(Error::NoGroup)?;
    let mut ids: Vec<(StreamId, bool)> = Vec::new();
    let created;
    let recorded = rec.cmds.len();
    match after {
        None => {
            let maxid = s.last_valid_id();
            if s.is_empty() || maxid <= grp.last_id {
                s.groups.insert(r.group.into(), grp);
                return Ok(false);
            }
            let start = grp.last_id.incr().expect("below the last valid ID");
            let mut moved = false;
            for e in s.range(start, StreamId::MAX, count, false) {
                ids.push((e.id, true));
                if e.id > grp.last_id {
                    grp.entries_read = match grp.entries_read {
                        Some(n) if !s.has_tombstones_from(e.id) => Some(n + 1),
                        _ if s.entries_added > 0 => s.estimate_distance(e.id),
                        other => other,
                    };
                    grp.last_id = e.id;
                    moved = true;
                }
            }
            created = touch_consumer(k, &mut grp, r.group, r.consumer, now_ms, rec);
            for &(id, _) in &ids {
                if !r.noack {
                    grp.assign(id, r.consumer, now_ms, 1);
                    let nack = &grp.pel[&id];
                    rec.claim(k.bytes, r.group, id, nack, grp.last_id);
                }
            }
            if moved {
                rec.setid(k.bytes, r.group, &grp);
            }
        }
        Some(after) => {
            created = touch_consumer(k, &mut grp, r.group, r.consumer, now_ms, rec);
            let start = after.incr();
            let c = grp.consumers.get(r.consumer).expect("just touched");
            let mine: Vec<StreamId> = match start {
                Some(st) => c
                    .pel
                    .range(st..)
                    .take(if count == 0 { usize::MAX } else { count })
                    .copied()
                    .collect(),
                None => Vec::new(),
            };
            for id in mine {
                let found = s.contains(id);
                if found {
                    let n = grp
                        .pel
                        .get_mut(&id)
                        .expect("a consumer's PEL is in the group's");
                    n.delivery_time_ms = now_ms;
                    n.delivery_count += 1;
                    let nack = grp.pel[&id].clone();
                    rec.claim(k.bytes, r.group, id, &nack, grp.last_id);
                }
                ids.push((id, found));
            }
        }
    }
    s.groups.insert(r.group.into(), grp);
    let items: Vec<ReadItem<'_>> = ids
        .iter()
        .map(|&(id, found)| (id, if found { s.get(id) } else { None }))
        .collect();
    emit(&items);
    drop(items);
    if created {
        g.notify(class::STREAM, "xgroup-createconsumer", db, k);
    }
    // Only a change the journal must replay makes the command a write (a
    // consumer's seen time is not replayed: Redis does not propagate it).
    if rec.cmds.len() > recorded {
        g.dirty();
    }
    Ok(true)
}

/// XREAD's delivery from one stream: entries after `after`, at most
/// `count` (0: all); false if there are none.
pub fn read_after(
    g: &mut Guard,
    db: usize,
    k: &Key,
    after: StreamId,
    count: usize,
    emit: impl FnOnce(&[ReadItem<'_>]),
) -> Result<bool> {
    let Some(e) = g.peek(db, k) else {
        return Ok(false);
    };
    let s = as_stream(&e.value)?;
    if s.is_empty() || s.last_valid_id() <= after {
        return Ok(false);
    }
    let Some(start) = after.incr() else {
        return Ok(false);
    };
    let items: Vec<ReadItem<'_>> = s
        .range(start, StreamId::MAX, count, false)
        .into_iter()
        .map(|e| (e.id, Some(e)))
        .collect();
    emit(&items);
    Ok(true)
}

/// XPENDING's summary: count, smallest and greatest pending IDs, and
/// each consumer with entries pending (by name) with its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSummary {
    pub count: usize,
    pub bounds: Option<(StreamId, StreamId)>,
    pub consumers: Vec<(Box<[u8]>, usize)>,
}

/// One row of XPENDING's extended form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingRow {
    pub id: StreamId,
    pub consumer: Box<[u8]>,
    pub idle_ms: u64,
    pub deliveries: u64,
}

/// The group `name` of the stream at `k` for reading, or `NoGroup` (a
/// missing key too), after a read lookup.
fn read_group<'g>(
    g: &'g mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
) -> Result<(&'g StreamValue, &'g Group)> {
    let e = g.read(db, k).ok_or(Error::NoGroup)?;
    let s = as_stream(&e.value)?;
    let grp = s.groups.get(name).ok_or(Error::NoGroup)?;
    Ok((s, grp))
}

/// XPENDING key group.
pub fn pending_summary(g: &mut Guard, db: usize, k: &Key, name: &[u8]) -> Result<PendingSummary> {
    let (_, grp) = read_group(g, db, k, name)?;
    let bounds = match (grp.pel.keys().next(), grp.pel.keys().next_back()) {
        (Some(a), Some(b)) => Some((*a, *b)),
        _ => None,
    };
    Ok(PendingSummary {
        count: grp.pel.len(),
        bounds,
        consumers: grp
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(n, c)| (n.clone(), c.pel.len()))
            .collect(),
    })
}

/// XPENDING key group [IDLE min] start end count [consumer].
#[allow(clippy::too_many_arguments)]
pub fn pending_range(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    min_idle_ms: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&[u8]>,
    now_ms: u64,
) -> Result<Vec<PendingRow>> {
    let (_, grp) = read_group(g, db, k, name)?;
    let mut out = Vec::new();
    if start > end || count == 0 {
        return Ok(out);
    }
    let ids: Box<dyn Iterator<Item = StreamId>> = match consumer {
        Some(c) => match grp.consumers.get(c) {
            Some(c) => Box::new(c.pel.range(start..=end).copied()),
            None => return Ok(out),
        },
        None => Box::new(grp.pel.range(start..=end).map(|(i, _)| *i)),
    };
    for id in ids {
        let n = &grp.pel[&id];
        let idle = now_ms as i64 - n.delivery_time_ms as i64;
        if min_idle_ms != 0 && idle < min_idle_ms {
            continue;
        }
        out.push(PendingRow {
            id,
            consumer: n.consumer.clone(),
            idle_ms: idle.max(0) as u64,
            deliveries: n.delivery_count,
        });
        if out.len() == count {
            break;
        }
    }
    Ok(out)
}

/// XCLAIM's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimOptions {
    pub min_idle_ms: i64,
    /// The delivery time to set (IDLE/TIME), already sanitised.
    pub delivery_time_ms: Option<u64>,
    pub retry_count: Option<u64>,
    pub force: bool,
    pub justid: bool,
    pub last_id: StreamId,
}

/// Gives the pending entry `id` to `consumer` with a new delivery time
/// and count (RETRYCOUNT, else one more unless JUSTID): the effect of a
/// claim, shared by XCLAIM and XAUTOCLAIM once the caller has checked the
/// idle time.
fn claim_one(
    grp: &mut Group,
    id: StreamId,
    consumer: &[u8],
    delivery_time_ms: u64,
    retry_count: Option<u64>,
    justid: bool,
) {
    let count = match (retry_count, grp.pel.get(&id)) {
        (Some(n), _) => n,
        (None, Some(n)) if !justid => n.delivery_count + 1,
        (None, Some(n)) => n.delivery_count,
        (None, None) if !justid => 2,
        (None, None) => 1,
    };
    grp.assign(id, consumer, delivery_time_ms, count);
}

/// XCLAIM key group consumer min-idle id [id ...] [options]: the IDs
/// claimed, in argument order (the caller replies with the entries or,
/// with JUSTID, the IDs). The records replace the command in the journal.
#[allow(clippy::too_many_arguments)]
pub fn xclaim(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    consumer: &[u8],
    ids: &[StreamId],
    o: ClaimOptions,
    now_ms: u64,
    rec: &mut GroupRecords,
    emit: impl FnOnce(&[ReadItem<'_>]),
) -> Result<()> {
    let e = g.read(db, k).ok_or(Error::NoGroup)?;
    let s = as_stream_mut(&mut e.value)?;
    let mut grp = s.groups.remove(name).ok_or(Error::NoGroup)?;
    let mut last_moved = false;
    if o.last_id > grp.last_id {
        grp.last_id = o.last_id;
        last_moved = true;
    }
    let delivery = o.delivery_time_ms.unwrap_or(now_ms);
    let mut claimed = Vec::new();
    let mut created = false;
    let mut changed = last_moved;
    for &id in ids {
        let pending = grp.pel.contains_key(&id);
        if !s.contains(id) {
            if pending {
                grp.ack(id);
                rec.drop_nack(k.bytes, name, id);
                changed = true;
            }
            continue;
        }
        if !pending && !o.force {
            continue;
        }
        if pending && o.min_idle_ms != 0 {
            let idle = now_ms as i64 - grp.pel[&id].delivery_time_ms as i64;
            if idle < o.min_idle_ms {
                continue;
            }
        }
        if !created && grp.create_consumer(consumer, now_ms) {
            rec.consumer(k.bytes, name, consumer);
            created = true;
        } else if let Some(c) = grp.consumers.get_mut(consumer) {
            c.seen_time_ms = now_ms;
        }
        // A NACK made by FORCE starts at count 1 (`streamCreateNACK`)
        // before the increment.
        if !pending {
            grp.pel.insert(
                id,
                crate::value::stream::Nack {
                    consumer: consumer.into(),
                    delivery_time_ms: delivery,
                    delivery_count: 1,
                },
            );
        }
        claim_one(&mut grp, id, consumer, delivery, o.retry_count, o.justid);
        rec.claim(k.bytes, name, id, &grp.pel[&id], grp.last_id);
        claimed.push(id);
        changed = true;
    }
    if last_moved && claimed.is_empty() {
        rec.setid(k.bytes, name, &grp);
    }
    s.groups.insert(name.into(), grp);
    let items: Vec<ReadItem<'_>> = claimed.iter().map(|&id| (id, s.get(id))).collect();
    emit(&items);
    drop(items);
    if created {
        g.notify(class::STREAM, "xgroup-createconsumer", db, k);
    }
    if changed {
        g.dirty();
    }
    Ok(())
}

/// XAUTOCLAIM's result: the cursor, the IDs claimed and those found
/// deleted (their NACKs dropped).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutoClaimed {
    pub next: StreamId,
    pub claimed: Vec<StreamId>,
    pub deleted: Vec<StreamId>,
}

/// XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID]
/// (`xautoclaimCommand`: at most `count * 10` PEL entries are looked at).
#[allow(clippy::too_many_arguments)]
pub fn xautoclaim(
    g: &mut Guard,
    db: usize,
    k: &Key,
    name: &[u8],
    consumer: &[u8],
    min_idle_ms: i64,
    start: StreamId,
    count: usize,
    justid: bool,
    now_ms: u64,
    rec: &mut GroupRecords,
    emit: impl FnOnce(&AutoClaimed, &[ReadItem<'_>]),
) -> Result<()> {
    let e = g.read(db, k).ok_or(Error::NoGroup)?;
    let s = as_stream_mut(&mut e.value)?;
    let mut grp = s.groups.remove(name).ok_or(Error::NoGroup)?;
    let mut out = AutoClaimed::default();
    let mut attempts = count.saturating_mul(10);
    let mut left = count;
    let mut created = false;
    let ids: Vec<StreamId> = grp.pel.range(start..).map(|(i, _)| *i).collect();
    let mut it = ids.into_iter().peekable();
    while attempts > 0 && left > 0 {
        let Some(id) = it.next() else { break };
        attempts -= 1;
        if !s.contains(id) {
            grp.ack(id);
            rec.drop_nack(k.bytes, name, id);
            out.deleted.push(id);
            left -= 1;
            continue;
        }
        if min_idle_ms != 0 {
            let idle = now_ms as i64 - grp.pel[&id].delivery_time_ms as i64;
            if idle < min_idle_ms {
                continue;
            }
        }
        if !created && grp.create_consumer(consumer, now_ms) {
            rec.consumer(k.bytes, name, consumer);
            created = true;
        } else if let Some(c) = grp.consumers.get_mut(consumer) {
            c.seen_time_ms = now_ms;
        }
        claim_one(&mut grp, id, consumer, now_ms, None, justid);
        rec.claim(k.bytes, name, id, &grp.pel[&id], grp.last_id);
        out.claimed.push(id);
        left -= 1;
    }
    out.next = it.next().unwrap_or(StreamId::MIN);
    let changed = !out.claimed.is_empty() || !out.deleted.is_empty();
    s.groups.insert(name.into(), grp);
    let items: Vec<ReadItem<'_>> = out.claimed.iter().map(|&id| (id, s.get(id))).collect();
    emit(&out, &items);
    drop(items);
    if created {
        g.notify(class::STREAM, "xgroup-createconsumer", db, k);
    }
    if changed {
        g.dirty();
    }
    Ok(())
}
