//! The stream type (Redis 7.0 `src/t_stream.c`, `src/stream.h`): entries
//! packed in nodes under an ordered index, plus consumer groups.
//!
//! **Entries.** As Redis keeps listpacks in a radix tree keyed by each
//! node's master ID, a stream here is a `BTreeMap` from a node's master ID
//! (the ID of the first entry ever put in the node) to a `Node`: one byte
//! buffer holding the master entry's field names, then every entry:
//!
//! ```text
//! node    nfields:varint (len:varint field)*   entry*
//! entry   flags:u8  ms_delta:varint  seq_delta:zigzag-varint
//!         [nfields:varint  (len field len value)*]     (flags & SAME_FIELDS == 0)
//!         [(len value)*]                               (SAME_FIELDS: the master's names)
//! ```
//!
//! IDs are deltas against the master ID (an entry's `ms` is never below
//! the master's; its `seq` may be, when `ms` moved on, hence zig-zag), and
//! an entry whose field names equal the master entry's stores only its
//! values, as Redis's `STREAM_ITEM_FLAG_SAMEFIELDS` does. Deleting an entry
//! sets its `DELETED` flag in place; a node with no live entry left is
//! dropped. A node is closed to appends once it holds
//! `stream-node-max-entries` entries (live or deleted) or its buffer
//! reaches `stream-node-max-bytes`, the same two tests as
//! `streamAppendItem`, so `~` trimming (which removes whole nodes only)
//! removes what Redis removes in the common cases.
//!
//! **Groups.** Each consumer group keeps its last delivered ID, its
//! logical read counter (`entries_read`, None when unknown: Redis's
//! `SCG_INVALID_ENTRIES_READ`), its pending entries list ordered by ID
//! (`Nack`: owner, last delivery time, delivery count) and its consumers
//! by name, each with the IDs it owns. Groups and consumers are ordered by
//! name, as Redis's radix trees order them for XINFO.
//!
//! The API is logical and complete enough for a snapshot or RDB writer to
//! walk every field (`entries`, `groups`, the counters) and for a reader to
//! rebuild the same stream (`push_raw`, `set_meta`, `Group::from_parts`),
//! deleted-entry counters included. The commands' semantics (ID rules,
//! trimming, PEL updates) live in `ops::stream`; this module owns the
//! representation and the primitive edits.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A stream entry ID: milliseconds and a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (Redis `streamIncrID`); None past the last one.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }

    /// The previous ID (Redis `streamDecrID`); None before 0-0.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Node size limits (`stream-node-max-bytes`, `stream-node-max-entries`;
/// 0 means no limit, as in Redis).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLimits {
    pub node_max_bytes: usize,
    pub node_max_entries: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            node_max_bytes: 4096,
            node_max_entries: 100,
        }
    }
}

const DELETED: u8 = 1;
const SAME_FIELDS: u8 = 2;

/// One packed node (see the module comment).
#[derive(Clone, Debug)]
struct Node {
    buf: Vec<u8>,
    /// Where the entries start (after the master field names).
    entries_at: u32,
    /// Number of master field names.
    nmaster: u32,
    live: u32,
    deleted: u32,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint the node itself wrote: the buffer is never foreign.
fn get_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn get_bytes<'a>(b: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let n = get_varint(b, pos) as usize;
    let s = &b[*pos..*pos + n];
    *pos += n;
    s
}

fn skip_bytes(b: &[u8], pos: &mut usize) {
    let n = get_varint(b, pos) as usize;
    *pos += n;
}

fn zigzag(v: i128) -> u64 {
    // Deltas fit 65 bits at most; the node's IDs keep them within i64
    // after the master is chosen (see `Node::fits_delta`).
    let v = v as i64;
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The position of one entry inside its node.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Offset of the flags byte.
    at: usize,
    id: StreamId,
    flags: u8,
    /// Offset of the field data (after the IDs).
    body: usize,
}

impl Node {
    fn new<'a>(fields: impl Iterator<Item = &'a [u8]>) -> Node {
        let names: Vec<&[u8]> = fields.collect();
        let mut buf = Vec::with_capacity(64);
        put_varint(&mut buf, names.len() as u64);
        for f in &names {
            put_bytes(&mut buf, f);
        }
        Node {
            entries_at: buf.len() as u32,
            nmaster: names.len() as u32,
            buf,
            live: 0,
            deleted: 0,
        }
    }

    fn master_fields(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut pos = 0;
        let n = get_varint(&self.buf, &mut pos);
        (0..n).map(move |_| get_bytes(&self.buf, &mut pos))
    }

    fn same_as_master(&self, pairs: &[(&[u8], &[u8])]) -> bool {
        pairs.len() == self.nmaster as usize
            && self.master_fields().zip(pairs).all(|(m, (f, _))| m == *f)
    }

    /// True if `id` can be delta-coded against `master` (ms at or above it,
    /// and a signed 64-bit seq delta).
    fn fits_delta(master: StreamId, id: StreamId) -> bool {
        id.ms >= master.ms && {
            let d = i128::from(id.seq) - i128::from(master.seq);
            d >= i128::from(i64::MIN) && d <= i128::from(i64::MAX)
        }
    }

    fn append(&mut self, master: StreamId, id: StreamId, pairs: &[(&[u8], &[u8])], flags: u8) {
        let same = self.same_as_master(pairs);
        let at = self.buf.len();
        self.buf.push(flags | if same { SAME_FIELDS } else { 0 });
        put_varint(&mut self.buf, id.ms - master.ms);
        put_varint(
            &mut self.buf,
            zigzag(i128::from(id.seq) - i128::from(master.seq)),
        );
        if same {
            for (_, v) in pairs {
                put_bytes(&mut self.buf, v);
            }
        } else {
            put_varint(&mut self.buf, pairs.len() as u64);
            for (f, v) in pairs {
                put_bytes(&mut self.buf, f);
                put_bytes(&mut self.buf, v);
            }
        }
        debug_assert!(at < self.buf.len());
        if flags & DELETED != 0 {
            self.deleted += 1;
        } else {
            self.live += 1;
        }
    }

    /// The slot at `at`, and where the next one starts.
    fn slot(&self, master: StreamId, at: usize) -> (Slot, usize) {
        let b = &self.buf;
        let flags = b[at];
        let mut pos = at + 1;
        let ms = master.ms + get_varint(b, &mut pos);
        let seq = (i128::from(master.seq) + i128::from(unzigzag(get_varint(b, &mut pos)))) as u64;
        let body = pos;
        if flags & SAME_FIELDS != 0 {
            for _ in 0..self.nmaster {
                skip_bytes(b, &mut pos);
            }
        } else {
            let n = get_varint(b, &mut pos);
            for _ in 0..2 * n {
                skip_bytes(b, &mut pos);
            }
        }
        (
            Slot {
                at,
                id: StreamId::new(ms, seq),
                flags,
                body,
            },
            pos,
        )
    }

    /// Every slot, deleted ones included, in ID order.
    fn slots(&self, master: StreamId) -> Vec<Slot> {
        let mut out = Vec::with_capacity((self.live + self.deleted) as usize);
        let mut pos = self.entries_at as usize;
        while pos < self.buf.len() {
            let (s, next) = self.slot(master, pos);
            out.push(s);
            pos = next;
        }
        out
    }

    fn last_slot(&self, master: StreamId) -> Option<Slot> {
        let mut pos = self.entries_at as usize;
        let mut last = None;
        while pos < self.buf.len() {
            let (s, next) = self.slot(master, pos);
            last = Some(s);
            pos = next;
        }
        last
    }

    fn mark_deleted(&mut self, s: &Slot) {
        debug_assert_eq!(s.flags & DELETED, 0);
        self.buf[s.at] |= DELETED;
        self.live -= 1;
        self.deleted += 1;
    }

    fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Node>() + self.buf.capacity() + 2 * std::mem::size_of::<StreamId>()
    }
}

/// One entry, borrowed from its node: its ID and its field-value pairs.
#[derive(Clone, Copy, Debug)]
pub struct EntryRef<'a> {
    pub id: StreamId,
    node: &'a Node,
    slot: Slot,
}

impl<'a> EntryRef<'a> {
    /// Number of field-value pairs.
    pub fn len(&self) -> usize {
        if self.slot.flags & SAME_FIELDS != 0 {
            self.node.nmaster as usize
        } else {
            let mut pos = self.slot.body;
            get_varint(&self.node.buf, &mut pos) as usize
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The field-value pairs, in the order they were added.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
        let node = self.node;
        let b: &'a [u8] = &node.buf;
        let mut pos = self.slot.body;
        let same = self.slot.flags & SAME_FIELDS != 0;
        let mut names = node.master_fields();
        let n = if same {
            node.nmaster as usize
        } else {
            get_varint(b, &mut pos) as usize
        };
        (0..n).map(move |_| {
            let f = if same {
                names
                    .next()
                    .expect("a same-fields entry has the master's field count")
            } else {
                get_bytes(b, &mut pos)
            };
            let v = get_bytes(b, &mut pos);
            (f, v)
        })
    }
}

impl<'a> EntryRef<'a> {
    /// True for a tombstone (only `NodeView::entries` yields those).
    pub fn is_deleted(&self) -> bool {
        self.slot.flags & DELETED != 0
    }

    /// True if the field names are the node's master entry's (Redis's
    /// `STREAM_ITEM_FLAG_SAMEFIELDS`: only the values are stored).
    pub fn same_fields(&self) -> bool {
        self.slot.flags & SAME_FIELDS != 0
    }
}

/// One node as stored (see `StreamValue::nodes`): its master ID and field
/// names, its counters and every entry, tombstones included.
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    /// The ID of the first entry ever put in the node.
    pub master: StreamId,
    node: &'a Node,
}

impl<'a> NodeView<'a> {
    /// The master entry's field names (the first entry's).
    pub fn master_fields(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let node: &'a Node = self.node;
        node.master_fields()
    }

    pub fn master_field_count(&self) -> usize {
        self.node.nmaster as usize
    }

    pub fn live(&self) -> u32 {
        self.node.live
    }

    pub fn deleted(&self) -> u32 {
        self.node.deleted
    }

    /// Every entry, deleted ones included, in ID order.
    pub fn entries(&self) -> impl Iterator<Item = EntryRef<'a>> + 'a {
        let node: &'a Node = self.node;
        node.slots(self.master)
            .into_iter()
            .map(move |slot| EntryRef {
                id: slot.id,
                node,
                slot,
            })
    }
}

/// A pending entry of a group (Redis `streamNACK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// The consumer that owns it.
    pub consumer: Box<[u8]>,
    /// Unix ms of the last delivery.
    pub delivery_time_ms: u64,
    pub delivery_count: u64,
}

/// A consumer of a group (Redis 7.0 `streamConsumer`: 7.0 keeps only the
/// seen time; 7.2's active time does not exist yet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix ms of the last interaction (read, claim).
    pub seen_time_ms: u64,
    /// The IDs of the group's PEL this consumer owns.
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group (Redis `streamCG`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    /// The logical read counter; None when unknown.
    pub entries_read: Option<u64>,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Box<[u8]>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    /// Adds a consumer if absent; true if it was created.
    pub fn create_consumer(&mut self, name: &[u8], now_ms: u64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            name.into(),
            Consumer {
                seen_time_ms: now_ms,
                pel: BTreeSet::new(),
            },
        );
        true
    }

    /// Removes a consumer and its pending entries; the number of entries
    /// it had pending, or None if it did not exist.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Gives the pending entry `id` to `consumer` (which must exist) with
    /// the given delivery data, creating it if absent, moving it from its
    /// owner otherwise.
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], delivery_time_ms: u64, count: u64) {
        if let Some(old) = self.pel.get(&id) {
            if &*old.consumer != consumer {
                if let Some(c) = self.consumers.get_mut(&old.consumer) {
                    c.pel.remove(&id);
                }
            }
        }
        self.pel.insert(
            id,
            Nack {
                consumer: consumer.into(),
                delivery_time_ms,
                delivery_count: count,
            },
        );
        self.consumers
            .get_mut(consumer)
            .expect("the consumer was created before it is assigned entries")
            .pel
            .insert(id);
    }

    /// Acknowledges `id`: true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    fn mem_bytes(&self) -> usize {
        let nack = std::mem::size_of::<Nack>() + 2 * std::mem::size_of::<StreamId>() + 16;
        let mut n = std::mem::size_of::<Group>()
            + self
                .pel
                .values()
                .map(|p| nack + p.consumer.len())
                .sum::<usize>();
        for (name, c) in &self.consumers {
            n += std::mem::size_of::<Consumer>()
                + name.len()
                + 32
                + c.pel.len() * (std::mem::size_of::<StreamId>() + 8);
        }
        n
    }
}

/// A stream: entries, counters and consumer groups.
#[derive(Clone, Debug, Default)]
pub struct StreamValue {
    nodes: BTreeMap<StreamId, Node>,
    /// Live entries.
    length: u64,
    /// The last ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty).
    pub first_id: StreamId,
    /// The greatest ID ever deleted by XDEL (0-0: none).
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    pub groups: BTreeMap<Box<[u8]>, Group>,
}

/// What `trim` is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Remove entries with IDs below this one.
    MinId(StreamId),
}

impl StreamValue {
    pub fn new() -> StreamValue {
        StreamValue::default()
    }

    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    /// Number of nodes (XINFO's radix-tree-keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Appends an entry with `id`, which the caller checked is above
    /// `last_id`; updates length, last and first IDs and entries_added.
    pub fn append(&mut self, id: StreamId, pairs: &[(&[u8], &[u8])], limits: &StreamLimits) {
        debug_assert!(id > self.last_id || (self.last_id.is_zero() && self.entries_added == 0));
        self.push_raw(id, pairs, false, limits);
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    /// Appends an entry (live, or deleted as a tombstone kept in its node)
    /// after the last one, without touching any counter but the node's:
    /// the primitive a loader uses, then `set_meta`. IDs must ascend.
    pub fn push_raw(
        &mut self,
        id: StreamId,
        pairs: &[(&[u8], &[u8])],
        deleted: bool,
        limits: &StreamLimits,
    ) {
        let entry_bytes: usize = pairs.iter().map(|(f, v)| f.len() + v.len()).sum();
        let usable = self.nodes.iter_mut().next_back().filter(|(m, n)| {
            let count = (n.live + n.deleted) as usize;
            (limits.node_max_entries == 0 || count < limits.node_max_entries)
                && (limits.node_max_bytes == 0 || n.buf.len() + entry_bytes < limits.node_max_bytes)
                && Node::fits_delta(**m, id)
        });
        let flags = if deleted { DELETED } else { 0 };
        match usable {
            Some((m, n)) => {
                let m = *m;
                n.append(m, id, pairs, flags);
            }
            None => {
                // The last node is closed to appends from now on: give back
                // the slack its buffer's doubling left (up to half of it),
                // as a listpack is sized to its content.
                if let Some((_, last)) = self.nodes.iter_mut().next_back() {
                    last.buf.shrink_to_fit();
                }
                let mut n = Node::new(pairs.iter().map(|(f, _)| *f));
                n.append(id, id, pairs, flags);
                self.nodes.insert(id, n);
            }
        }
    }

    /// Sets the counters a loader read (after `push_raw` of every entry).
    pub fn set_meta(
        &mut self,
        last_id: StreamId,
        first_id: StreamId,
        max_deleted_id: StreamId,
        entries_added: u64,
    ) {
        // A node of tombstones only (a foreign file may hold one) would
        // break the rule that every node keeps a live entry.
        self.nodes.retain(|_, n| n.live > 0);
        self.length = self.nodes.values().map(|n| u64::from(n.live)).sum();
        self.last_id = last_id;
        self.first_id = first_id;
        self.max_deleted_id = max_deleted_id;
        self.entries_added = entries_added;
    }

    /// Live entries from `start` to `end` inclusive, ascending (or
    /// descending with `rev`), at most `count` (0: all).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: usize,
        rev: bool,
    ) -> Vec<EntryRef<'_>> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        // The node holding `start` begins at or before it.
        let from = self
            .nodes
            .range(..=start)
            .next_back()
            .map(|(m, _)| *m)
            .unwrap_or(start);
        let nodes = self.nodes.range(from..=end);
        if rev {
            for (m, n) in nodes.rev() {
                if !collect(*m, n, start, end, count, rev, &mut out) {
                    break;
                }
            }
        } else {
            for (m, n) in nodes {
                if !collect(*m, n, start, end, count, rev, &mut out) {
                    break;
                }
            }
        }
        out
    }

    /// The live entry `id`, if any.
    pub fn get(&self, id: StreamId) -> Option<EntryRef<'_>> {
        self.range(id, id, 1, false).into_iter().next()
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// Every live entry, ascending.
    pub fn entries(&self) -> Vec<EntryRef<'_>> {
        self.range(StreamId::MIN, StreamId::MAX, 0, false)
    }

    /// Every node in ID order, as stored: for a writer that keeps the node
    /// layout, as RDB's listpacks do (Redis's nodes split by the same
    /// rules, see the module comment).
    pub fn nodes(&self) -> impl Iterator<Item = NodeView<'_>> + '_ {
        self.nodes.iter().map(|(m, n)| NodeView {
            master: *m,
            node: n,
        })
    }

    /// The ID of the last live entry (Redis `streamLastValidID`), 0-0 if
    /// none.
    pub fn last_valid_id(&self) -> StreamId {
        self.range(StreamId::MIN, StreamId::MAX, 1, true)
            .first()
            .map_or(StreamId::MIN, |e| e.id)
    }

    fn refresh_first_id(&mut self) {
        self.first_id = self
            .range(StreamId::MIN, StreamId::MAX, 1, false)
            .first()
            .map_or(StreamId::MIN, |e| e.id);
    }

    /// Deletes the live entry `id`: true if it was there. Updates length,
    /// first ID and the greatest deleted ID, as XDEL does.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&m, n)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Some(s) = n.slots(m).into_iter().find(|s| s.id == id) else {
            return false;
        };
        if s.flags & DELETED != 0 {
            return false;
        }
        n.mark_deleted(&s);
        if n.live == 0 {
            self.nodes.remove(&m);
        }
        self.length -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.refresh_first_id();
        }
        true
    }

    /// Trims as Redis's `streamTrim` does: whole nodes while they can go,
    /// then (unless `approx`) entry by entry inside the next node. With
    /// `limit` (0: none) at most that many entries are removed, counting
    /// whole nodes. Returns the number of entries removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        if let Trim::MaxLen(max) = how {
            if self.length <= max {
                return 0;
            }
        }
        let mut deleted = 0u64;
        while let Some((&m, n)) = self.nodes.iter_mut().next() {
            let entries = u64::from(n.live);
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => n.last_slot(m).is_some_and(|s| s.id < min),
            };
            if remove {
                self.nodes.remove(&m);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            for s in n.slots(m) {
                let stop = match how {
                    Trim::MaxLen(max) => self.length <= max,
                    Trim::MinId(min) => s.id >= min,
                };
                if stop {
                    break;
                }
                if s.flags & DELETED == 0 {
                    n.mark_deleted(&s);
                    self.length -= 1;
                    deleted += 1;
                }
            }
            if n.live == 0 {
                self.nodes.remove(&m);
            }
            break;
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::MIN;
            } else {
                self.refresh_first_id();
            }
        }
        deleted
    }

    /// Redis `streamEstimateDistanceFromFirstEverEntry`: the logical read
    /// counter of `id`, when it can be known.
    pub fn estimate_distance(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        } else if id > self.last_id {
            return None;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.length);
            } else if id == self.first_id {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// Redis `streamRangeHasTombstones` for `[start, +inf]`.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// A group's lag (XINFO), when it can be known.
    pub fn lag(&self, g: &Group) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = g.entries_read {
            if !self.has_tombstones_from(g.last_id) {
                return Some(self.entries_added.saturating_sub(read));
            }
        }
        self.estimate_distance(g.last_id)
            .map(|read| self.entries_added.saturating_sub(read))
    }

    pub fn mem_bytes(&self) -> usize {
        let nodes: usize = self.nodes.values().map(Node::mem_bytes).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| name.len() + 32 + g.mem_bytes())
            .sum();
        nodes + groups
    }
}

/// `range`'s work on one node: pushes its live entries within
/// `start..=end`; false once `count` (0: no limit) is reached.
fn collect<'a>(
    m: StreamId,
    n: &'a Node,
    start: StreamId,
    end: StreamId,
    count: usize,
    rev: bool,
    out: &mut Vec<EntryRef<'a>>,
) -> bool {
    let mut slots = n.slots(m);
    if rev {
        slots.reverse();
    }
    for s in slots {
        if s.flags & DELETED != 0 || s.id < start || s.id > end {
            continue;
        }
        out.push(EntryRef {
            id: s.id,
            node: n,
            slot: s,
        });
        if count != 0 && out.len() >= count {
            return false;
        }
    }
    true
}

impl PartialEq for StreamValue {
    /// Logical equality: the same live entries, counters and groups,
    /// however the entries are packed.
    fn eq(&self, other: &Self) -> bool {
        let a = self.entries();
        let b = other.entries();
        self.length == other.length
            && self.last_id == other.last_id
            && self.first_id == other.first_id
            && self.max_deleted_id == other.max_deleted_id
            && self.entries_added == other.entries_added
            && self.groups == other.groups
            && a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| x.id == y.id && x.pairs().eq(y.pairs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Owned field-value pairs.
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn add(s: &mut StreamValue, i: StreamId, pairs: &[(&[u8], &[u8])]) {
        s.append(i, pairs, &StreamLimits::default());
    }

    #[test]
    fn ids_step_and_print() {
        assert_eq!(id(1, 2).incr(), Some(id(1, 3)));
        assert_eq!(id(1, u64::MAX).incr(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(id(2, 0).decr(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.decr(), None);
        assert_eq!(id(5, 7).to_string(), "5-7");
    }

    #[test]
    fn entries_share_master_fields_and_come_back() {
        let mut s = StreamValue::new();
        add(&mut s, id(1, 0), &[(b"a", b"1"), (b"b", b"2")]);
        add(&mut s, id(1, 1), &[(b"a", b"3"), (b"b", b"4")]);
        add(&mut s, id(2, 0), &[(b"x", b"5")]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.node_count(), 1);
        let all = s.entries();
        let got: Vec<(StreamId, Pairs)> = all
            .iter()
            .map(|e| {
                (
                    e.id,
                    e.pairs().map(|(f, v)| (f.to_vec(), v.to_vec())).collect(),
                )
            })
            .collect();
        assert_eq!(
            got[1].1,
            vec![
                (b"a".to_vec(), b"3".to_vec()),
                (b"b".to_vec(), b"4".to_vec())
            ]
        );
        assert_eq!(got[2], (id(2, 0), vec![(b"x".to_vec(), b"5".to_vec())]));
        let rev: Vec<StreamId> = s
            .range(StreamId::MIN, StreamId::MAX, 2, true)
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(rev, vec![id(2, 0), id(1, 1)]);
        assert!(s.delete(id(1, 0)));
        assert!(!s.delete(id(1, 0)));
        assert_eq!(s.first_id, id(1, 1));
        assert_eq!(s.max_deleted_id, id(1, 0));
    }

    #[test]
    fn nodes_close_at_the_entry_limit() {
        let mut s = StreamValue::new();
        for i in 1..=250 {
            add(&mut s, id(i, 0), &[(b"f", b"v")]);
        }
        assert_eq!(s.node_count(), 3);
        // ~ removes whole nodes only.
        assert_eq!(s.trim(Trim::MaxLen(120), true, 0), 100);
        assert_eq!(s.len(), 150);
        assert_eq!(s.trim(Trim::MaxLen(120), false, 0), 30);
        assert_eq!(s.len(), 120);
        assert_eq!(s.first_id, id(131, 0));
    }

    #[test]
    fn groups_track_owners() {
        let mut g = Group::new(StreamId::MIN, None);
        assert!(g.create_consumer(b"c1", 5));
        assert!(!g.create_consumer(b"c1", 6));
        g.create_consumer(b"c2", 5);
        g.assign(id(1, 0), b"c1", 10, 1);
        g.assign(id(1, 0), b"c2", 11, 2);
        assert!(g.consumers[&b"c1"[..]].pel.is_empty());
        assert_eq!(g.pel[&id(1, 0)].consumer.as_ref(), b"c2");
        assert_eq!(g.delete_consumer(b"c2"), Some(1));
        assert!(g.pel.is_empty());
        assert!(!g.ack(id(1, 0)));
    }

    /// The model: entries in a BTreeMap and the counters kept by hand.
    #[derive(Default, Debug)]
    struct Model {
        entries: BTreeMap<StreamId, Pairs>,
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add { gap_ms: u64, fields: u8, same: bool },
        Del(usize),
        TrimMaxLen(u64, bool),
        TrimMinId(usize, bool),
        Range(usize, usize, usize, bool),
        Read(u8),
        Ack(usize),
        Claim(usize, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..3, 0u8..4, any::<bool>()).prop_map(|(gap_ms, fields, same)| Op::Add { gap_ms, fields, same }),
            2 => any::<usize>().prop_map(Op::Del),
            1 => (0u64..300, any::<bool>()).prop_map(|(n, a)| Op::TrimMaxLen(n, a)),
            1 => (any::<usize>(), any::<bool>()).prop_map(|(i, a)| Op::TrimMinId(i, a)),
            2 => (any::<usize>(), any::<usize>(), 0usize..5, any::<bool>()).prop_map(|(a, b, c, r)| Op::Range(a, b, c, r)),
            2 => (0u8..3).prop_map(Op::Read),
            1 => any::<usize>().prop_map(Op::Ack),
            1 => (any::<usize>(), 0u8..3).prop_map(|(i, c)| Op::Claim(i, c)),
        ]
    }

    fn pick(ids: &[StreamId], i: usize) -> Option<StreamId> {
        (!ids.is_empty()).then(|| ids[i % ids.len()])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn stream_matches_model(ops in proptest::collection::vec(op(), 1..400), entries in 2usize..12) {
            let limits = StreamLimits { node_max_bytes: 4096, node_max_entries: entries };
            let mut s = StreamValue::new();
            let mut m = Model::default();
            // Group model: pending id -> (consumer, count).
            let mut g = Group::new(StreamId::MIN, Some(0));
            let mut pel: BTreeMap<StreamId, (u8, u64)> = BTreeMap::new();
            let mut last = StreamId::MIN;
            let mut ms = 1u64;
            for op in ops {
                match op {
                    Op::Add { gap_ms, fields, same } => {
                        ms += gap_ms;
                        let i = if last.ms == ms { last.incr().unwrap() } else { id(ms, 0) };
                        let pairs: Pairs = (0..fields.max(1)).map(|f| {
                            let name = if same { vec![b'f', f] } else { vec![b'g', f, (i.seq % 3) as u8] };
                            (name, i.to_string().into_bytes())
                        }).collect();
                        let refs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
                        s.append(i, &refs, &limits);
                        m.entries.insert(i, pairs);
                        last = i;
                    }
                    Op::Del(i) => {
                        let ids: Vec<StreamId> = m.entries.keys().copied().collect();
                        if let Some(d) = pick(&ids, i) {
                            prop_assert!(s.delete(d));
                            m.entries.remove(&d);
                            prop_assert!(!s.delete(d));
                        }
                    }
                    Op::TrimMaxLen(n, approx) => {
                        let before = m.entries.len() as u64;
                        let removed = s.trim(Trim::MaxLen(n), approx, 0);
                        if approx {
                            // Whole nodes only, never below the target.
                            prop_assert!(s.len() >= n.min(before));
                        } else {
                            prop_assert_eq!(s.len(), n.min(before));
                        }
                        prop_assert_eq!(removed, before - s.len());
                        let drop = (before - s.len()) as usize;
                        let gone: Vec<StreamId> = m.entries.keys().take(drop).copied().collect();
                        for k in gone { m.entries.remove(&k); }
                    }
                    Op::TrimMinId(i, approx) => {
                        let ids: Vec<StreamId> = m.entries.keys().copied().collect();
                        let min = pick(&ids, i).unwrap_or(id(ms, 0));
                        let before = m.entries.len() as u64;
                        let removed = s.trim(Trim::MinId(min), approx, 0);
                        let below = m.entries.range(..min).count() as u64;
                        if approx {
                            prop_assert!(removed <= below);
                        } else {
                            prop_assert_eq!(removed, below);
                        }
                        let gone: Vec<StreamId> = m.entries.keys().take(removed as usize).copied().collect();
                        for k in gone { m.entries.remove(&k); }
                        prop_assert_eq!(s.len(), before - removed);
                    }
                    Op::Range(a, b, count, rev) => {
                        let ids: Vec<StreamId> = m.entries.keys().copied().collect();
                        let (lo, hi) = match (pick(&ids, a), pick(&ids, b)) {
                            (Some(x), Some(y)) => (x.min(y), x.max(y)),
                            _ => (StreamId::MIN, StreamId::MAX),
                        };
                        let got: Vec<StreamId> = s.range(lo, hi, count, rev).iter().map(|e| e.id).collect();
                        let mut want: Vec<StreamId> = m.entries.range(lo..=hi).map(|(k, _)| *k).collect();
                        if rev { want.reverse(); }
                        if count != 0 { want.truncate(count); }
                        prop_assert_eq!(got, want);
                    }
                    Op::Read(c) => {
                        // XREADGROUP >: deliver what follows last_id.
                        let name = [b'c', c];
                        g.create_consumer(&name, 0);
                        let start = match g.last_id.incr() { Some(x) => x, None => continue };
                        let ids: Vec<StreamId> = s.range(start, StreamId::MAX, 2, false).iter().map(|e| e.id).collect();
                        for i in ids {
                            g.last_id = i;
                            g.assign(i, &name, 0, 1);
                            pel.insert(i, (c, 1));
                        }
                    }
                    Op::Ack(i) => {
                        let ids: Vec<StreamId> = pel.keys().copied().collect();
                        if let Some(a) = pick(&ids, i) {
                            prop_assert!(g.ack(a));
                            pel.remove(&a);
                        }
                    }
                    Op::Claim(i, c) => {
                        let ids: Vec<StreamId> = pel.keys().copied().collect();
                        if let Some(a) = pick(&ids, i) {
                            let name = [b'c', c];
                            g.create_consumer(&name, 0);
                            let n = g.pel[&a].delivery_count + 1;
                            g.assign(a, &name, 0, n);
                            pel.insert(a, (c, n));
                        }
                    }
                }
                // Invariants after every step.
                prop_assert_eq!(s.len(), m.entries.len() as u64);
                let got: Vec<(StreamId, Pairs)> = s.entries().iter()
                    .map(|e| (e.id, e.pairs().map(|(f, v)| (f.to_vec(), v.to_vec())).collect())).collect();
                let want: Vec<(StreamId, Pairs)> = m.entries.iter().map(|(k, v)| (*k, v.clone())).collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(s.first_id, m.entries.keys().next().copied().unwrap_or(StreamId::MIN));
                prop_assert_eq!(s.last_id, last);
                prop_assert_eq!(s.last_valid_id(), m.entries.keys().next_back().copied().unwrap_or(StreamId::MIN));
                let gp: BTreeMap<StreamId, (u8, u64)> = g.pel.iter().map(|(k, n)| (*k, (n.consumer[1], n.delivery_count))).collect();
                prop_assert_eq!(&gp, &pel);
                for (name, c) in &g.consumers {
                    let mine: BTreeSet<StreamId> = pel.iter().filter(|(_, (o, _))| *o == name[1]).map(|(k, _)| *k).collect();
                    prop_assert_eq!(&c.pel, &mine);
                }
            }
        }
    }
}
