//! The list type: a quicklist, as in Redis 7.0 (`src/quicklist.c`,
//! `src/listpack.c`).
//!
//! A list is a deque of nodes; each node is one contiguous buffer of
//! entries in Redis's listpack entry format (an encoding byte that also
//! says the length, the string bytes or a compact integer, then a
//! "back-length" so the buffer can be walked from either end). Pushing or
//! popping at either end touches one node and allocates nothing per
//! element; seeking an index skips whole nodes by their counts, then walks
//! one node from its nearer end.
//!
//! Node sizes follow Redis exactly, because they are visible: DEBUG OBJECT
//! reports `ql_nodes` and the sizes, and `list-max-listpack-size` (the
//! `fill`, fixed per list when it is created, as `quicklistSetOptions` does)
//! decides when a node is full. A node's size is what its listpack would
//! take in Redis (6-byte header + entries + end byte), so the same commands
//! split nodes at the same elements. Elements of 1 GiB or more get a node of
//! their own ("plain" nodes, Redis's `packed_threshold`). The rules of each
//! structural operation are Redis's: pushes fill the end node or start a
//! new one (`_quicklistNodeAllowInsert`), LINSERT splits a full node and
//! merges neighbours (`_quicklistInsert`, `_quicklistMergeNodes`), LSET
//! replaces in place (`quicklistReplaceEntry`), and deletions only ever
//! drop emptied nodes, never merge.
//!
//! Integers are stored the way listpack stores them (an element whose
//! bytes are a canonical `i64`, as `string2ll` reads it, becomes 1 to 9
//! bytes), so they come back as [`Elem::Int`] and are formatted on output;
//! the text clients see is identical, as the parse is lossless.
//!
//! Strings of 4 GiB or more do not fit a listpack length; they use an
//! encoding of our own (0xF5 + 64-bit length) that Redis does not have,
//! which only plain nodes ever hold.
use std::collections::VecDeque;
use std::fmt;

use crate::util::num;

/// Redis `optimization_level`: the node byte limit for fill -1 ... -5.
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// Redis `SIZE_SAFETY_LIMIT`: a node limited by count still stops here.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Redis `SIZE_ESTIMATE_OVERHEAD`: the entry overhead assumed by the
/// "does one more element fit" test.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// Redis `packed_threshold`: an element this long gets a plain node.
#[cfg(not(test))]
const PACKED_THRESHOLD: usize = 1 << 30;
/// Small in unit tests, so the plain-node paths run without 1 GiB buffers.
#[cfg(test)]
const PACKED_THRESHOLD: usize = 8192;
/// Listpack header (total bytes + element count) and end marker: counted
/// in a node's size, not stored.
const LP_OVERHEAD: usize = 7;
/// Redis `FILL_MAX` (16 fill bits, signed) and the lowest size class.
const FILL_MAX: i64 = (1 << 15) - 1;
const FILL_MIN: i64 = -5;
/// `list-max-listpack-size`'s default (8 KB nodes).
pub const DEFAULT_FILL: i32 = -2;

// ---------------------------------------------------------------------------
// Elements

/// One stored element: its bytes, or an integer stored compactly (whose
/// text is its canonical decimal form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl<'a> Elem<'a> {
    /// The element's bytes as a new vector.
    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }

    /// Calls `f` with the element's bytes (an integer is formatted on the
    /// stack).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Bytes(b) => f(b),
            Elem::Int(n) => f(itoa::Buffer::new().format(n).as_bytes()),
        }
    }

    /// Length of the element's bytes.
    pub fn str_len(self) -> usize {
        match self {
            Elem::Bytes(b) => b.len(),
            Elem::Int(n) => itoa::Buffer::new().format(n).len(),
        }
    }

    /// True if the element's bytes equal the needle's (listpack
    /// `lpCompare`: an integer entry is compared as an integer).
    pub fn matches(self, needle: &Needle) -> bool {
        match self {
            Elem::Bytes(b) => b == needle.bytes,
            Elem::Int(n) => needle.int == Some(n),
        }
    }
}

/// A value searched for (LPOS, LREM, LINSERT's pivot), parsed once so that
/// integer entries compare without formatting.
#[derive(Clone, Copy, Debug)]
pub struct Needle<'a> {
    bytes: &'a [u8],
    int: Option<i64>,
}

impl<'a> Needle<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Needle {
            bytes,
            int: num::parse_i64(bytes),
        }
    }
}

// ---------------------------------------------------------------------------
// Entry encoding (listpack's, plus 0xF5 for strings of 4 GiB or more)

/// An element ready to be written: header (encoding, integer payload or
/// string length), string payload, back-length.
struct Encoded<'a> {
    head: [u8; 9],
    head_len: usize,
    data: &'a [u8],
    back: [u8; 10],
    back_len: usize,
}

impl<'a> Encoded<'a> {
    fn new(v: &'a [u8]) -> Self {
        let mut head = [0u8; 9];
        let (head_len, data) = match num::parse_i64(v) {
            Some(n) => (encode_int(n, &mut head), &[][..]),
            None => (encode_str_header(v.len(), &mut head), v),
        };
        let mut back = [0u8; 10];
        let back_len = encode_backlen(head_len + data.len(), &mut back);
        Encoded {
            head,
            head_len,
            data,
            back,
            back_len,
        }
    }

    /// Bytes the entry takes.
    fn total(&self) -> usize {
        self.head_len + self.data.len() + self.back_len
    }

    /// Writes the entry into `out`, which is exactly `total()` long.
    fn write(&self, out: &mut [u8]) {
        let (h, rest) = out.split_at_mut(self.head_len);
        h.copy_from_slice(&self.head[..self.head_len]);
        let (d, b) = rest.split_at_mut(self.data.len());
        d.copy_from_slice(self.data);
        b.copy_from_slice(&self.back[..self.back_len]);
    }

    fn append_to(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.head[..self.head_len]);
        buf.extend_from_slice(self.data);
        buf.extend_from_slice(&self.back[..self.back_len]);
    }
}

fn encode_int(n: i64, out: &mut [u8; 9]) -> usize {
    if (0..=127).contains(&n) {
        out[0] = n as u8;
        1
    } else if (-4096..=4095).contains(&n) {
        // 13-bit two's complement.
        let u = (n as u64 & 0x1fff) as u16;
        out[0] = 0xC0 | (u >> 8) as u8;
        out[1] = u as u8;
        2
    } else if let Ok(v) = i16::try_from(n) {
        out[0] = 0xF1;
        out[1..3].copy_from_slice(&v.to_le_bytes());
        3
    } else if (-8_388_608..=8_388_607).contains(&n) {
        out[0] = 0xF2;
        out[1..4].copy_from_slice(&(n as i32).to_le_bytes()[..3]);
        4
    } else if let Ok(v) = i32::try_from(n) {
        out[0] = 0xF3;
        out[1..5].copy_from_slice(&v.to_le_bytes());
        5
    } else {
        out[0] = 0xF4;
        out[1..9].copy_from_slice(&n.to_le_bytes());
        9
    }
}

fn encode_str_header(len: usize, out: &mut [u8; 9]) -> usize {
    if len < 64 {
        out[0] = 0x80 | len as u8;
        1
    } else if len < 4096 {
        out[0] = 0xE0 | (len >> 8) as u8;
        out[1] = len as u8;
        2
    } else if let Ok(l) = u32::try_from(len) {
        out[0] = 0xF0;
        out[1..5].copy_from_slice(&l.to_le_bytes());
        5
    } else {
        out[0] = 0xF5;
        out[1..9].copy_from_slice(&(len as u64).to_le_bytes());
        9
    }
}

/// Bytes of the back-length of an entry whose header + payload is `l`
/// bytes (listpack `lpEncodeBacklen`'s thresholds; 7 bits per byte past
/// what a listpack can hold).
fn backlen_size(l: usize) -> usize {
    if l <= 127 {
        1
    } else if l < 16_383 {
        2
    } else if l < 2_097_151 {
        3
    } else if l < 268_435_455 {
        4
    } else if (l as u64) < (1 << 35) {
        5
    } else {
        (usize::BITS - l.leading_zeros()).div_ceil(7) as usize
    }
}

/// Writes the back-length of `l`: most significant group first, every byte
/// but the first with its high bit set, so it can be read right to left.
fn encode_backlen(l: usize, out: &mut [u8; 10]) -> usize {
    let n = backlen_size(l);
    for (i, b) in out[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i);
        let group = ((l as u64) >> shift) as u8 & 127;
        *b = if i == 0 { group } else { group | 128 };
    }
    n
}

/// Reads the back-length that ends just before `end`: `(l, bytes used)`.
fn decode_backlen(buf: &[u8], end: usize) -> (usize, usize) {
    let mut val: u64 = 0;
    let mut shift = 0;
    let mut n = 0;
    loop {
        let b = buf[end - 1 - n];
        val |= u64::from(b & 127) << shift;
        n += 1;
        if b & 128 == 0 || n == 10 {
            return (val as usize, n);
        }
        shift += 7;
    }
}

fn le_u64(bytes: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(a)
}

/// Decodes the entry at `off`: the element and the bytes the entry takes.
#[inline]
fn decode(buf: &[u8], off: usize) -> (Elem<'_>, usize) {
    let b = buf[off];
    let (elem, l) = if b & 0x80 == 0 {
        (Elem::Int(i64::from(b)), 1)
    } else if b & 0xC0 == 0x80 {
        let len = usize::from(b & 0x3f);
        (Elem::Bytes(&buf[off + 1..off + 1 + len]), 1 + len)
    } else if b & 0xE0 == 0xC0 {
        let u = (u16::from(b & 0x1f) << 8) | u16::from(buf[off + 1]);
        // Sign-extend 13 bits.
        let v = ((u << 3) as i16) >> 3;
        (Elem::Int(i64::from(v)), 2)
    } else if b & 0xF0 == 0xE0 {
        let len = (usize::from(b & 0x0f) << 8) | usize::from(buf[off + 1]);
        (Elem::Bytes(&buf[off + 2..off + 2 + len]), 2 + len)
    } else {
        match b {
            0xF0 => {
                let len = le_u64(&buf[off + 1..off + 5]) as usize;
                (Elem::Bytes(&buf[off + 5..off + 5 + len]), 5 + len)
            }
            0xF1 => {
                let v = i16::from_le_bytes([buf[off + 1], buf[off + 2]]);
                (Elem::Int(i64::from(v)), 3)
            }
            0xF2 => {
                let v = i32::from_le_bytes([0, buf[off + 1], buf[off + 2], buf[off + 3]]) >> 8;
                (Elem::Int(i64::from(v)), 4)
            }
            0xF3 => {
                let v = le_u64(&buf[off + 1..off + 5]) as u32 as i32;
                (Elem::Int(i64::from(v)), 5)
            }
            0xF4 => (Elem::Int(le_u64(&buf[off + 1..off + 9]) as i64), 9),
            // 0xF5: the only other encoding this module writes.
            _ => {
                let len = le_u64(&buf[off + 1..off + 9]) as usize;
                (Elem::Bytes(&buf[off + 9..off + 9 + len]), 9 + len)
            }
        }
    };
    (elem, l + backlen_size(l))
}

/// Start of the entry before the one starting at `off` (`off` may be the
/// buffer's end). The caller knows there is one.
#[inline]
fn prev_off(buf: &[u8], off: usize) -> usize {
    let (l, n) = decode_backlen(buf, off);
    off - n - l
}

/// Bytes the entry at `off` takes.
#[inline]
fn entry_len(buf: &[u8], off: usize) -> usize {
    decode(buf, off).1
}

// ---------------------------------------------------------------------------
// Nodes

/// One quicklist node: `count` entries back to back in `buf`, or, when
/// `plain`, exactly one (large) entry.
#[derive(Clone, Debug, Default)]
struct Node {
    buf: Vec<u8>,
    count: u32,
    plain: bool,
}

impl Node {
    fn with_entry(enc: &Encoded, plain: bool) -> Node {
        let mut buf = Vec::with_capacity(enc.total());
        enc.append_to(&mut buf);
        Node {
            buf,
            count: 1,
            plain,
        }
    }

    /// Redis's `node->sz`: the listpack's bytes, or a plain node's
    /// element length.
    fn sz(&self) -> usize {
        if self.plain {
            decode(&self.buf, 0).0.str_len()
        } else {
            self.buf.len() + LP_OVERHEAD
        }
    }

    /// Byte offset of entry `idx` (`idx == count` gives the end), walking
    /// from the nearer end as `lpSeek` does.
    fn offset_of(&self, idx: u32) -> usize {
        if idx <= self.count / 2 {
            let mut off = 0;
            for _ in 0..idx {
                off += entry_len(&self.buf, off);
            }
            off
        } else {
            let mut off = self.buf.len();
            for _ in idx..self.count {
                off = prev_off(&self.buf, off);
            }
            off
        }
    }

    fn insert_at(&mut self, off: usize, enc: &Encoded) {
        let total = enc.total();
        let old = self.buf.len();
        self.buf.resize(old + total, 0);
        self.buf.copy_within(off..old, off + total);
        enc.write(&mut self.buf[off..off + total]);
        self.count += 1;
    }

    fn push_front(&mut self, enc: &Encoded) {
        self.insert_at(0, enc);
    }

    fn push_back(&mut self, enc: &Encoded) {
        enc.append_to(&mut self.buf);
        self.count += 1;
    }

    /// Removes entries `idx .. idx + n`.
    fn delete(&mut self, idx: u32, n: u32) {
        let start = self.offset_of(idx);
        let mut end = start;
        for _ in 0..n {
            end += entry_len(&self.buf, end);
        }
        self.buf.drain(start..end);
        self.count -= n;
        self.shrink();
    }

    /// Gives memory back once a node has lost most of its bytes, as
    /// listpack's realloc on delete does, without reallocating on every
    /// pop of a node that is still being filled and drained.
    fn shrink(&mut self) {
        if self.buf.capacity() > 64 && self.buf.capacity() / 4 > self.buf.len() {
            self.buf.shrink_to(self.buf.len() * 2);
        }
    }
}

/// Redis `_quicklistNodeSizeMeetsOptimizationRequirement`.
fn size_meets_optimization(sz: usize, fill: i32) -> bool {
    if fill >= 0 {
        return false;
    }
    OPTIMIZATION_LEVEL
        .get((-fill - 1) as usize)
        .is_some_and(|&limit| sz <= limit)
}

/// Redis `_quicklistNodeAllowInsert`: may an element of `sz` bytes join
/// `node`?
fn allow_insert(node: Option<&Node>, fill: i32, sz: usize) -> bool {
    let Some(node) = node else { return false };
    if node.plain || sz >= PACKED_THRESHOLD {
        return false;
    }
    let new_sz = node.sz() + sz + SIZE_ESTIMATE_OVERHEAD;
    if size_meets_optimization(new_sz, fill) {
        true
    } else if new_sz > SIZE_SAFETY_LIMIT {
        false
    } else {
        i64::from(node.count) < i64::from(fill)
    }
}

/// Redis `_quicklistNodeAllowMerge`.
fn allow_merge(a: Option<&Node>, b: Option<&Node>, fill: i32) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    if a.plain || b.plain {
        return false;
    }
    // Redis's approximation of the merged size (minus one header/trailer).
    let merge_sz = (a.sz() + b.sz()).saturating_sub(11);
    if size_meets_optimization(merge_sz, fill) {
        true
    } else if merge_sz > SIZE_SAFETY_LIMIT {
        false
    } else {
        i64::from(a.count) + i64::from(b.count) <= i64::from(fill)
    }
}

// ---------------------------------------------------------------------------
// The list

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The head (LEFT, LPUSH, LPOP).
    Left,
    /// The tail (RIGHT, RPUSH, RPOP).
    Right,
}

/// A list value. See the module docs.
pub struct ListValue {
    nodes: VecDeque<Node>,
    len: usize,
    fill: i32,
    /// Sum of the nodes' buffer capacities, for an O(1) `mem_bytes`.
    cap: usize,
}

impl Default for ListValue {
    fn default() -> Self {
        ListValue::new()
    }
}

impl Clone for ListValue {
    fn clone(&self) -> Self {
        let nodes: VecDeque<Node> = self.nodes.clone();
        let cap = nodes.iter().map(|n| n.buf.capacity()).sum();
        ListValue {
            nodes,
            len: self.len,
            fill: self.fill,
            cap,
        }
    }
}

impl fmt::Debug for ListValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListValue")
            .field("len", &self.len)
            .field("nodes", &self.nodes.len())
            .field("fill", &self.fill)
            .finish()
    }
}

impl ListValue {
    /// An empty list with the default fill.
    pub fn new() -> Self {
        ListValue::with_fill(i64::from(DEFAULT_FILL))
    }

    /// An empty list whose nodes follow `list-max-listpack-size` = `fill`
    /// (clamped to -5 ..= 32767 like `quicklistSetFill`).
    pub fn with_fill(fill: i64) -> Self {
        ListValue {
            nodes: VecDeque::new(),
            len: 0,
            fill: fill.clamp(FILL_MIN, FILL_MAX) as i32,
            cap: 0,
        }
    }

    /// A list of `elems` in order (SORT ... STORE, tests).
    pub fn from_elements<'a>(fill: i64, elems: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut l = ListValue::with_fill(fill);
        for e in elems {
            l.push_back(e);
        }
        l
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// OBJECT ENCODING: Redis 7.0 keeps every list as a quicklist.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }

    /// The fill this list was created with (DEBUG OBJECT `ql_listpack_max`).
    pub fn fill(&self) -> i32 {
        self.fill
    }

    /// Number of nodes (DEBUG OBJECT `ql_nodes`; the free effort of the
    /// list, as Redis's lazyfree counts it).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Per node: whether it is plain, and its size as Redis counts it (a
    /// listpack's bytes, or a plain element's length).
    pub fn node_sizes(&self) -> impl Iterator<Item = (bool, usize)> + '_ {
        self.nodes.iter().map(|n| (n.plain, n.sz()))
    }

    /// Approximate heap bytes held. O(1).
    pub fn mem_bytes(&self) -> usize {
        self.cap + self.nodes.capacity() * std::mem::size_of::<Node>()
    }

    // -- node bookkeeping (keeps `cap` exact) --------------------------------

    fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut Node) -> R) -> R {
        let node = &mut self.nodes[i];
        let before = node.buf.capacity();
        let r = f(node);
        self.cap = self.cap - before + node.buf.capacity();
        r
    }

    fn insert_node(&mut self, i: usize, node: Node) {
        self.cap += node.buf.capacity();
        self.nodes.insert(i, node);
    }

    fn remove_node(&mut self, i: usize) -> Node {
        let node = self.nodes.remove(i).expect("node index in range");
        self.cap -= node.buf.capacity();
        node
    }

    // -- ends ----------------------------------------------------------------

    /// LPUSH/RPUSH of one element.
    pub fn push(&mut self, end: End, v: &[u8]) {
        let enc = Encoded::new(v);
        let large = v.len() >= PACKED_THRESHOLD;
        match end {
            End::Left => {
                if !large && allow_insert(self.nodes.front(), self.fill, v.len()) {
                    self.edit(0, |n| n.push_front(&enc));
                } else {
                    self.insert_node(0, Node::with_entry(&enc, large));
                }
            }
            End::Right => {
                let last = self.nodes.len().wrapping_sub(1);
                if !large && allow_insert(self.nodes.back(), self.fill, v.len()) {
                    self.edit(last, |n| n.push_back(&enc));
                } else {
                    self.insert_node(self.nodes.len(), Node::with_entry(&enc, large));
                }
            }
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, v: &[u8]) {
        self.push(End::Left, v);
    }

    pub fn push_back(&mut self, v: &[u8]) {
        self.push(End::Right, v);
    }

    /// Removes the element at `end`, handing it to `f` first.
    pub fn pop_with<R>(&mut self, end: End, f: impl FnOnce(Elem<'_>) -> R) -> Option<R> {
        if self.len == 0 {
            return None;
        }
        let i = match end {
            End::Left => 0,
            End::Right => self.nodes.len() - 1,
        };
        let r = self.edit(i, |n| {
            let off = match end {
                End::Left => 0,
                End::Right => prev_off(&n.buf, n.buf.len()),
            };
            let (e, size) = decode(&n.buf, off);
            let r = f(e);
            n.buf.drain(off..off + size);
            n.count -= 1;
            n.shrink();
            r
        });
        if self.nodes[i].count == 0 {
            self.remove_node(i);
        }
        self.len -= 1;
        Some(r)
    }

    /// Removes and returns the element at `end`.
    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        self.pop_with(end, |e| e.to_vec())
    }

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        self.pop(End::Left)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        self.pop(End::Right)
    }

    // -- indexing ------------------------------------------------------------

    /// A LINDEX-style index (negative counts from the tail) as a position,
    /// None when out of range.
    pub fn normalize(&self, index: i64) -> Option<usize> {
        let len = i64::try_from(self.len).ok()?;
        let i = if index < 0 {
            index.checked_add(len)?
        } else {
            index
        };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// (node, entry within node) of position `i` < len, skipping whole
    /// nodes from the nearer end (`quicklistGetIteratorAtIdx`).
    fn locate(&self, i: usize) -> (usize, u32) {
        debug_assert!(i < self.len);
        if i <= (self.len - 1) / 2 {
            let mut acc = 0;
            for (ni, n) in self.nodes.iter().enumerate() {
                let c = n.count as usize;
                if acc + c > i {
                    return (ni, (i - acc) as u32);
                }
                acc += c;
            }
        } else {
            let back = self.len - 1 - i;
            let mut acc = 0;
            for (ni, n) in self.nodes.iter().enumerate().rev() {
                let c = n.count as usize;
                if acc + c > back {
                    return (ni, (c - 1 - (back - acc)) as u32);
                }
                acc += c;
            }
        }
        unreachable!("node counts add up to the list length")
    }

    /// LINDEX: the element at `index` (negative counts from the tail).
    pub fn get(&self, index: i64) -> Option<Elem<'_>> {
        let i = self.normalize(index)?;
        let (ni, idx) = self.locate(i);
        let n = &self.nodes[ni];
        Some(decode(&n.buf, n.offset_of(idx)).0)
    }

    pub fn front(&self) -> Option<Elem<'_>> {
        self.get(0)
    }

    pub fn back(&self) -> Option<Elem<'_>> {
        self.get(-1)
    }

    /// LSET: replaces the element at `index`; false if out of range.
    /// Follows `quicklistReplaceEntry`: in place unless a plain node or a
    /// large value is involved, which moves the element into a node of
    /// the right kind.
    pub fn set(&mut self, index: i64, v: &[u8]) -> bool {
        let Some(i) = self.normalize(index) else {
            return false;
        };
        let (ni, idx) = self.locate(i);
        let large = v.len() >= PACKED_THRESHOLD;
        let plain = self.nodes[ni].plain;
        if !plain && !large {
            let enc = Encoded::new(v);
            self.edit(ni, |n| {
                let off = n.offset_of(idx);
                let old = entry_len(&n.buf, off);
                let total = enc.total();
                if total == old {
                    enc.write(&mut n.buf[off..off + total]);
                } else {
                    n.buf.drain(off..off + old);
                    n.count -= 1;
                    n.insert_at(off, &enc);
                }
            });
        } else if plain && large {
            let enc = Encoded::new(v);
            self.edit(ni, |n| {
                n.buf.clear();
                n.buf.shrink_to_fit();
                enc.append_to(&mut n.buf);
            });
        } else if plain {
            // Insert the small value after the plain node, then drop it.
            self.insert_entry(ni, 0, true, v);
            self.remove_node(ni);
            self.len -= 1;
        } else {
            // A large value into a packed node: it becomes a plain node
            // after the entry (splitting the node if needed), and the old
            // entry, now the last of its node, goes.
            self.insert_entry(ni, idx, true, v);
            if self.nodes[ni].count == 1 {
                self.remove_node(ni);
            } else {
                let last = self.nodes[ni].count - 1;
                self.edit(ni, |n| n.delete(last, 1));
            }
            self.len -= 1;
        }
        true
    }

    // -- insertion -----------------------------------------------------------

    /// LINSERT: inserts `v` before or after the first element equal to
    /// `pivot`; false if there is none.
    pub fn insert_by_pivot(&mut self, pivot: &Needle, after: bool, v: &[u8]) -> bool {
        let mut found = None;
        'nodes: for (ni, n) in self.nodes.iter().enumerate() {
            let mut off = 0;
            for idx in 0..n.count {
                let (e, size) = decode(&n.buf, off);
                if e.matches(pivot) {
                    found = Some((ni, idx));
                    break 'nodes;
                }
                off += size;
            }
        }
        match found {
            Some((ni, idx)) => {
                self.insert_entry(ni, idx, after, v);
                true
            }
            None => false,
        }
    }

    /// Redis `_quicklistInsert`: puts `v` before or after entry `idx` of
    /// node `ni`, into that node if it has room, else into the neighbour
    /// at that end, else a new node, else by splitting the node (and then
    /// merging what can be merged around it).
    fn insert_entry(&mut self, ni: usize, idx: u32, after: bool, v: &[u8]) {
        let fill = self.fill;
        let sz = v.len();
        let enc = Encoded::new(v);
        let count = self.nodes[ni].count;
        let full = !allow_insert(self.nodes.get(ni), fill, sz);
        let at_tail = after && idx == count - 1;
        let at_head = !after && idx == 0;
        let avail_next = at_tail && allow_insert(self.nodes.get(ni + 1), fill, sz);
        let avail_prev = at_head && ni > 0 && allow_insert(self.nodes.get(ni - 1), fill, sz);
        self.len += 1;

        if sz >= PACKED_THRESHOLD {
            let plain = Node::with_entry(&enc, true);
            if self.nodes[ni].plain || at_tail || at_head {
                self.insert_node(if after { ni + 1 } else { ni }, plain);
            } else {
                let rest = self.split_node(ni, idx, after);
                if after {
                    self.insert_node(ni + 1, plain);
                    self.insert_node(ni + 2, rest);
                } else {
                    // `rest` holds the entries before `idx`.
                    self.insert_node(ni, plain);
                    self.insert_node(ni, rest);
                }
            }
            return;
        }

        if !full {
            self.edit(ni, |n| {
                let off = n.offset_of(if after { idx + 1 } else { idx });
                n.insert_at(off, &enc);
            });
        } else if at_tail && avail_next {
            self.edit(ni + 1, |n| n.push_front(&enc));
        } else if at_head && avail_prev {
            self.edit(ni - 1, |n| n.push_back(&enc));
        } else if at_tail || at_head {
            let node = Node::with_entry(&enc, false);
            self.insert_node(if after { ni + 1 } else { ni }, node);
        } else {
            let mut new = self.split_node(ni, idx, after);
            if after {
                new.push_front(&enc);
                self.insert_node(ni + 1, new);
                self.merge_around(ni);
            } else {
                new.push_back(&enc);
                self.insert_node(ni, new);
                self.merge_around(ni + 1);
            }
        }
    }

    /// Redis `_quicklistSplitNode`: with `after`, node `ni` keeps entries
    /// `..=idx` and the returned node has the rest; without, the returned
    /// node has the entries before `idx` and node `ni` keeps the rest.
    fn split_node(&mut self, ni: usize, idx: u32, after: bool) -> Node {
        self.edit(ni, |n| {
            let cut_idx = if after { idx + 1 } else { idx };
            let cut = n.offset_of(cut_idx);
            let moved = if after {
                let tail = n.buf[cut..].to_vec();
                n.buf.truncate(cut);
                Node {
                    buf: tail,
                    count: n.count - cut_idx,
                    plain: false,
                }
            } else {
                let head: Vec<u8> = n.buf.drain(..cut).collect();
                Node {
                    buf: head,
                    count: cut_idx,
                    plain: false,
                }
            };
            n.count -= moved.count;
            n.shrink();
            moved
        })
    }

    /// Redis `_quicklistMergeNodes` around node `c`: (c-2, c-1), then
    /// (c+1, c+2), then (c-1, c), then the result with its next node.
    fn merge_around(&mut self, mut c: usize) {
        let fill = self.fill;
        if c >= 2 && allow_merge(self.nodes.get(c - 1), self.nodes.get(c - 2), fill) {
            self.merge_pair(c - 2);
            c -= 1;
        }
        if allow_merge(self.nodes.get(c + 1), self.nodes.get(c + 2), fill) {
            self.merge_pair(c + 1);
        }
        let target = if c >= 1 && allow_merge(self.nodes.get(c), self.nodes.get(c - 1), fill) {
            self.merge_pair(c - 1);
            c - 1
        } else {
            c
        };
        if allow_merge(self.nodes.get(target), self.nodes.get(target + 1), fill) {
            self.merge_pair(target);
        }
    }

    /// Joins node `i + 1` onto the end of node `i`.
    fn merge_pair(&mut self, i: usize) {
        let b = self.remove_node(i + 1);
        self.edit(i, |a| {
            a.buf.extend_from_slice(&b.buf);
            a.count += b.count;
        });
    }

    // -- deletion ------------------------------------------------------------

    /// Removes `n` elements starting at position `start` (fewer if the list
    /// ends first), as `quicklistDelRange`: whole nodes are dropped, the
    /// rest trimmed, nothing merged.
    pub fn delete_range(&mut self, start: usize, n: usize) {
        if n == 0 || start >= self.len {
            return;
        }
        let mut extent = n.min(self.len - start);
        let (mut ni, mut idx) = self.locate(start);
        while extent > 0 {
            let count = self.nodes[ni].count as usize;
            if idx == 0 && extent >= count {
                self.remove_node(ni);
                extent -= count;
                self.len -= count;
            } else {
                let del = (count - idx as usize).min(extent);
                self.edit(ni, |node| node.delete(idx, del as u32));
                extent -= del;
                self.len -= del;
                if self.nodes[ni].count == 0 {
                    self.remove_node(ni);
                } else {
                    ni += 1;
                }
            }
            idx = 0;
        }
    }

    /// LTRIM's work: drops `left` elements from the head and `right` from
    /// the tail.
    pub fn trim(&mut self, left: usize, right: usize) {
        self.delete_range(0, left);
        let right = right.min(self.len);
        self.delete_range(self.len - right, right);
    }

    /// LREM: removes elements equal to `needle`, at most `limit` of them
    /// (0: all), scanning from the tail if `from_tail`. Returns how many
    /// were removed. Each node is compacted in one pass.
    pub fn remove_matching(&mut self, needle: &Needle, limit: usize, from_tail: bool) -> usize {
        let mut quota = if limit == 0 { usize::MAX } else { limit };
        let mut removed = 0;
        let mut ni = if from_tail { self.nodes.len() } else { 0 };
        loop {
            if quota == 0 {
                break;
            }
            if from_tail {
                if ni == 0 {
                    break;
                }
                ni -= 1;
            } else if ni >= self.nodes.len() {
                break;
            }
            // From the tail, the node's last `quota` matches go: skip the
            // ones before them.
            let skip = if from_tail {
                let n = &self.nodes[ni];
                let mut matches = 0usize;
                let mut off = 0;
                while off < n.buf.len() {
                    let (e, size) = decode(&n.buf, off);
                    matches += usize::from(e.matches(needle));
                    off += size;
                }
                matches.saturating_sub(quota)
            } else {
                0
            };
            let gone = self.edit(ni, |n| compact(n, needle, skip, quota));
            quota -= gone;
            removed += gone;
            self.len -= gone;
            if self.nodes[ni].count == 0 {
                self.remove_node(ni);
            } else if !from_tail {
                ni += 1;
            }
        }
        removed
    }

    // -- iteration -----------------------------------------------------------

    /// Elements from position `start` towards the tail, at most `n`.
    pub fn range(&self, start: usize, n: usize) -> Iter<'_> {
        if start >= self.len || n == 0 {
            return Iter::empty(self);
        }
        let (ni, idx) = self.locate(start);
        Iter {
            nodes: &self.nodes,
            node: ni,
            off: self.nodes[ni].offset_of(idx),
            remaining: n.min(self.len - start),
            rev: false,
        }
    }

    /// Elements from position `last` towards the head, at most `n`.
    pub fn range_rev(&self, last: usize, n: usize) -> Iter<'_> {
        if last >= self.len || n == 0 {
            return Iter::empty(self);
        }
        let (ni, idx) = self.locate(last);
        Iter {
            nodes: &self.nodes,
            node: ni,
            off: self.nodes[ni].offset_of(idx),
            remaining: n.min(last + 1),
            rev: true,
        }
    }

    /// Every element, head to tail.
    pub fn iter(&self) -> Iter<'_> {
        self.range(0, self.len)
    }

    /// Every element, tail to head.
    pub fn iter_rev(&self) -> Iter<'_> {
        self.range_rev(self.len.wrapping_sub(1), self.len)
    }

    /// The elements a pop of `n` at `end` takes, in the order they are
    /// popped.
    pub fn end_range(&self, end: End, n: usize) -> Iter<'_> {
        match end {
            End::Left => self.range(0, n),
            End::Right => self.range_rev(self.len.wrapping_sub(1), n),
        }
    }

    /// Removes `n` elements at `end` (after `end_range` wrote them out).
    pub fn pop_n(&mut self, end: End, n: usize) {
        let n = n.min(self.len);
        match end {
            End::Left => self.delete_range(0, n),
            End::Right => self.delete_range(self.len - n, n),
        }
    }

    /// Checks the structure (tests).
    #[cfg(test)]
    fn check(&self) {
        let mut total = 0;
        for n in &self.nodes {
            assert!(n.count > 0, "empty node");
            let mut off = 0;
            let mut c = 0;
            while off < n.buf.len() {
                off += entry_len(&n.buf, off);
                c += 1;
            }
            assert_eq!(off, n.buf.len());
            assert_eq!(c, n.count);
            if n.plain {
                assert_eq!(n.count, 1);
            }
            total += n.count as usize;
        }
        assert_eq!(total, self.len);
        let cap: usize = self.nodes.iter().map(|n| n.buf.capacity()).sum();
        assert_eq!(cap, self.cap);
    }
}

/// Drops from `n` the entries equal to `needle`, except the first `skip`
/// of them, at most `quota`; returns how many went.
fn compact(n: &mut Node, needle: &Needle, mut skip: usize, quota: usize) -> usize {
    let mut gone = 0;
    let mut r = 0;
    let mut w = 0;
    let len = n.buf.len();
    while r < len {
        if gone == quota {
            // Nothing more to remove: move the rest down at once.
            n.buf.copy_within(r..len, w);
            w += len - r;
            break;
        }
        let (e, size) = decode(&n.buf, r);
        let hit = e.matches(needle);
        if hit && skip == 0 {
            gone += 1;
        } else {
            if hit {
                skip -= 1;
            }
            if w != r {
                n.buf.copy_within(r..r + size, w);
            }
            w += size;
        }
        r += size;
    }
    n.buf.truncate(w);
    n.count -= gone as u32;
    n.shrink();
    gone
}

/// Iterator over a run of elements, either way; see [`ListValue::range`].
pub struct Iter<'a> {
    nodes: &'a VecDeque<Node>,
    node: usize,
    off: usize,
    remaining: usize,
    rev: bool,
}

impl<'a> Iter<'a> {
    fn empty(l: &'a ListValue) -> Self {
        Iter {
            nodes: &l.nodes,
            node: 0,
            off: 0,
            remaining: 0,
            rev: false,
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    #[inline]
    fn next(&mut self) -> Option<Elem<'a>> {
        if self.remaining == 0 {
            return None;
        }
        let nodes: &'a VecDeque<Node> = self.nodes;
        let node = &nodes[self.node];
        let (e, size) = decode(&node.buf, self.off);
        self.remaining -= 1;
        if self.remaining > 0 {
            if !self.rev {
                self.off += size;
                if self.off >= node.buf.len() {
                    self.node += 1;
                    self.off = 0;
                }
            } else if self.off == 0 {
                self.node -= 1;
                let prev = &nodes[self.node];
                self.off = prev_off(&prev.buf, prev.buf.len());
            } else {
                self.off = prev_off(&node.buf, self.off);
            }
        }
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn items(l: &ListValue) -> Vec<Vec<u8>> {
        l.iter().map(Elem::to_vec).collect()
    }

    fn enc_roundtrip(v: &[u8]) {
        let e = Encoded::new(v);
        let mut buf = vec![0xAAu8; 3];
        e.append_to(&mut buf);
        let (elem, size) = decode(&buf, 3);
        assert_eq!(size, e.total(), "{v:?}");
        assert_eq!(size, buf.len() - 3);
        assert_eq!(elem.to_vec(), v, "{v:?}");
        assert_eq!(prev_off(&buf, buf.len()), 3, "{v:?}");
    }

    #[test]
    fn entries_roundtrip_at_every_encoding_boundary() {
        let ints: [i64; 22] = [
            0,
            1,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            -32769,
            8_388_607,
            -8_388_608,
            8_388_608,
            -8_388_609,
            i32::MAX as i64,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MAX,
            i64::MIN,
        ];
        for n in ints {
            enc_roundtrip(n.to_string().as_bytes());
        }
        for len in [0, 1, 63, 64, 4095, 4096, 16_380, 16_383, 70_000] {
            enc_roundtrip(&vec![b'x'; len]);
        }
        // Integer-looking but not canonical: kept as strings.
        for s in ["-0", "01", "+1", " 1", "1 ", "9223372036854775808", "1.0"] {
            enc_roundtrip(s.as_bytes());
            let e = Encoded::new(s.as_bytes());
            assert_eq!(e.data, s.as_bytes());
        }
    }

    #[test]
    fn entry_sizes_are_listpacks() {
        // listpack.c: 7-bit uint 1 byte, 13-bit 2, 16-bit 3, 24-bit 4,
        // 32-bit 5, 64-bit 9; strings 1/2/5 header bytes; plus backlen.
        let size = |s: &[u8]| Encoded::new(s).total();
        assert_eq!(size(b"5"), 2);
        assert_eq!(size(b"-1"), 3);
        assert_eq!(size(b"1000"), 3);
        assert_eq!(size(b"10000"), 4);
        assert_eq!(size(b"1000000"), 5);
        assert_eq!(size(b"100000000"), 6);
        assert_eq!(size(b"10000000000"), 10);
        assert_eq!(size(b"aaaaaaaaaa"), 12);
        assert_eq!(size(&[b'a'; 100]), 103);
        assert_eq!(size(&[b'a'; 200]), 204);
        assert_eq!(size(&[b'a'; 5000]), 5007);
        let mut b = [0u8; 10];
        assert_eq!(encode_backlen(127, &mut b), 1);
        assert_eq!(encode_backlen(128, &mut b), 2);
        assert_eq!(encode_backlen(16_382, &mut b), 2);
        assert_eq!(encode_backlen(16_383, &mut b), 3);
        for l in [
            0usize,
            1,
            127,
            128,
            16_382,
            16_383,
            2_097_151,
            268_435_455,
            1 << 35,
            1 << 40,
        ] {
            let n = encode_backlen(l, &mut b);
            assert_eq!(decode_backlen(&b, n), (l, n), "{l}");
        }
    }

    #[test]
    fn node_sizes_match_redis() {
        // Redis 7.0.15: RPUSH of 681 ten-byte elements makes one node of
        // 8179 bytes; the 682nd starts a second node.
        let mut l = ListValue::new();
        for _ in 0..681 {
            l.push_back(b"aaaaaaaaaa");
        }
        assert_eq!(l.node_sizes().collect::<Vec<_>>(), vec![(false, 8179)]);
        l.push_back(b"aaaaaaaaaa");
        assert_eq!(l.node_count(), 2);
        // The size test is `node + element + 8 <= 8192`, exactly (Redis
        // 7.0.15: a 5000-byte element then one of 3170 bytes share a node,
        // one of 3171 bytes does not).
        for (y, want) in [(3170, 1), (3171, 2)] {
            let mut l = ListValue::new();
            l.push_back(&[b'a'; 5000]);
            l.push_back(&vec![b'b'; y]);
            assert_eq!(l.node_count(), want, "{y}");
        }
        // Fill by count: 3 entries per node.
        let mut l = ListValue::with_fill(3);
        for i in 0..10 {
            l.push_back(i.to_string().as_bytes());
        }
        assert_eq!(l.node_count(), 4);
        // Fill 0: one element per node, as Redis.
        let mut l = ListValue::with_fill(0);
        for _ in 0..3 {
            l.push_front(b"x");
        }
        assert_eq!(l.node_count(), 3);
        // Clamping.
        assert_eq!(ListValue::with_fill(-100).fill(), -5);
        assert_eq!(ListValue::with_fill(1 << 40).fill(), 32767);
        l.check();
    }

    #[test]
    fn indexing_and_ranges() {
        let mut l = ListValue::with_fill(4);
        for i in 0..50 {
            l.push_back(format!("e{i}").as_bytes());
        }
        assert_eq!(l.get(0), Some(Elem::Bytes(b"e0")));
        assert_eq!(l.get(-1), Some(Elem::Bytes(b"e49")));
        assert_eq!(l.get(-50), Some(Elem::Bytes(b"e0")));
        assert_eq!(l.get(-51), None);
        assert_eq!(l.get(50), None);
        assert_eq!(l.get(i64::MIN), None);
        let r: Vec<_> = l.range(10, 5).map(Elem::to_vec).collect();
        assert_eq!(
            r,
            (10..15)
                .map(|i| format!("e{i}").into_bytes())
                .collect::<Vec<_>>()
        );
        let r: Vec<_> = l.range_rev(12, 5).map(Elem::to_vec).collect();
        assert_eq!(
            r,
            (8..13)
                .rev()
                .map(|i| format!("e{i}").into_bytes())
                .collect::<Vec<_>>()
        );
        assert_eq!(l.range(48, 100).len(), 2);
        assert_eq!(l.range_rev(1, 100).len(), 2);
        assert_eq!(l.range(50, 1).len(), 0);
        assert_eq!(l.iter_rev().count(), 50);
        assert!(l.set(-1, b"last"));
        assert!(!l.set(50, b"x"));
        assert_eq!(l.back(), Some(Elem::Bytes(b"last")));
        l.check();
    }

    #[test]
    fn insert_splits_and_merges() {
        let mut l = ListValue::with_fill(3);
        for i in 0..9 {
            l.push_back(i.to_string().as_bytes());
        }
        assert_eq!(l.node_count(), 3);
        // Middle of a full node: split, then merge what fits.
        assert!(l.insert_by_pivot(&Needle::new(b"4"), false, b"x"));
        assert!(l.insert_by_pivot(&Needle::new(b"8"), true, b"y"));
        assert!(l.insert_by_pivot(&Needle::new(b"0"), false, b"z"));
        assert!(!l.insert_by_pivot(&Needle::new(b"nope"), true, b"w"));
        assert_eq!(
            items(&l),
            ["z", "0", "1", "2", "3", "x", "4", "5", "6", "7", "8", "y"]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect::<Vec<_>>()
        );
        l.check();
    }

    #[test]
    fn remove_from_either_end() {
        let mut l = ListValue::with_fill(2);
        for s in ["a", "b", "a", "c", "a", "a", "d", "a"] {
            l.push_back(s.as_bytes());
        }
        assert_eq!(l.remove_matching(&Needle::new(b"a"), 2, true), 2);
        assert_eq!(
            items(&l),
            vec![
                b"a".to_vec(),
                b"b".to_vec(),
                b"a".to_vec(),
                b"c".to_vec(),
                b"a".to_vec(),
                b"d".to_vec()
            ]
        );
        assert_eq!(l.remove_matching(&Needle::new(b"a"), 1, false), 1);
        assert_eq!(l.remove_matching(&Needle::new(b"a"), 0, false), 2);
        assert_eq!(items(&l), vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
        l.check();
    }

    #[test]
    fn large_elements_get_plain_nodes() {
        // PACKED_THRESHOLD is 8192 in unit tests.
        let plain_count = |l: &ListValue| l.nodes.iter().filter(|n| n.plain).count();
        let big = vec![b'B'; 9000];
        let big2 = vec![b'C'; 8192];
        let mut l = ListValue::with_fill(-2);
        for s in ["a", "b", "c"] {
            l.push_back(s.as_bytes());
        }
        l.push_back(&big);
        l.push_front(&big);
        // Pushes never join a plain node.
        l.push_front(b"f");
        assert_eq!(l.node_count(), 4);
        assert_eq!(plain_count(&l), 2);
        assert_eq!(l.node_sizes().nth(1), Some((true, 9000)));
        assert_eq!(l.get(1), Some(Elem::Bytes(&big)));
        // LSET of a plain element with a small value moves it into the next
        // packed node and drops the plain one.
        assert!(l.set(1, b"small"));
        assert_eq!(l.get(1), Some(Elem::Bytes(b"small")));
        assert_eq!((l.node_count(), plain_count(&l)), (3, 1));
        // LSET of a packed element with a large value: a plain node of its
        // own, splitting the packed node.
        assert!(l.set(2, &big2));
        assert_eq!(l.get(2), Some(Elem::Bytes(&big2)));
        assert_eq!(plain_count(&l), 2);
        // LSET of a plain element with a large value: replaced in place.
        assert!(l.set(2, &big));
        assert_eq!(l.get(2), Some(Elem::Bytes(&big)));
        // LINSERT of a large value inside a packed node splits it.
        assert!(l.insert_by_pivot(&Needle::new(b"c"), false, &big2));
        // Inserting a small value next to a plain node.
        assert!(l.insert_by_pivot(&Needle::new(&big), true, b"g"));
        let want: Vec<Vec<u8>> = vec![
            b"f".to_vec(),
            b"small".to_vec(),
            big.clone(),
            b"g".to_vec(),
            b"b".to_vec(),
            big2.clone(),
            b"c".to_vec(),
            big.clone(),
        ];
        assert_eq!(items(&l), want);
        l.check();
        assert_eq!(l.remove_matching(&Needle::new(&big), 0, false), 2);
        assert_eq!(plain_count(&l), 1);
        l.check();
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(bool, Vec<u8>),
        Pop(bool),
        Set(i64, Vec<u8>),
        Insert(Vec<u8>, bool, Vec<u8>),
        Remove(Vec<u8>, i64),
        Trim(i64, i64),
        DelRange(usize, usize),
        PopN(bool, usize),
    }

    fn elem() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => prop::sample::select(vec![&b"a"[..], b"b", b"1", b"-7", b"300", b"70000", b""])
                .prop_map(<[u8]>::to_vec),
            1 => proptest::collection::vec(any::<u8>(), 0..80),
            1 => (0usize..3000).prop_map(|n| vec![b'z'; n]),
            1 => (7000usize..10000).prop_map(|n| vec![b'Z'; n]),
            1 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<bool>(), elem()).prop_map(|(l, v)| Op::Push(l, v)),
            3 => any::<bool>().prop_map(Op::Pop),
            2 => (-30i64..30, elem()).prop_map(|(i, v)| Op::Set(i, v)),
            2 => (elem(), any::<bool>(), elem()).prop_map(|(p, a, v)| Op::Insert(p, a, v)),
            1 => (elem(), -3i64..4).prop_map(|(v, c)| Op::Remove(v, c)),
            1 => (-30i64..30, -30i64..30).prop_map(|(s, e)| Op::Trim(s, e)),
            1 => (0usize..30, 0usize..10).prop_map(|(s, n)| Op::DelRange(s, n)),
            1 => (any::<bool>(), 0usize..6).prop_map(|(l, n)| Op::PopN(l, n)),
        ]
    }

    fn model_index(len: usize, i: i64) -> Option<usize> {
        let i = if i < 0 { i + len as i64 } else { i };
        (i >= 0 && (i as usize) < len).then_some(i as usize)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn behaves_like_a_deque(
            fill in prop::sample::select(vec![-5i64, -2, -1, 0, 1, 2, 3, 5, 8]),
            ops in proptest::collection::vec(op(), 0..150),
        ) {
            let mut l = ListValue::with_fill(fill);
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(left, v) => {
                        if left {
                            l.push_front(&v);
                            m.push_front(v);
                        } else {
                            l.push_back(&v);
                            m.push_back(v);
                        }
                    }
                    Op::Pop(left) => {
                        let (got, want) = if left {
                            (l.pop_front(), m.pop_front())
                        } else {
                            (l.pop_back(), m.pop_back())
                        };
                        prop_assert_eq!(got, want);
                    }
                    Op::Set(i, v) => {
                        let idx = model_index(m.len(), i);
                        prop_assert_eq!(l.set(i, &v), idx.is_some());
                        if let Some(idx) = idx { m[idx] = v; }
                    }
                    Op::Insert(p, after, v) => {
                        let pos = m.iter().position(|x| *x == p);
                        let inserted = l.insert_by_pivot(&Needle::new(&p), after, &v);
                        prop_assert_eq!(inserted, pos.is_some());
                        if let Some(pos) = pos { m.insert(if after { pos + 1 } else { pos }, v); }
                    }
                    Op::Remove(v, c) => {
                        let limit = c.unsigned_abs() as usize;
                        let mut want = 0;
                        let mut keep: Vec<bool> = vec![true; m.len()];
                        let order: Vec<usize> = if c < 0 {
                            (0..m.len()).rev().collect()
                        } else {
                            (0..m.len()).collect()
                        };
                        for i in order {
                            if m[i] == v && (limit == 0 || want < limit) {
                                keep[i] = false;
                                want += 1;
                            }
                        }
                        let mut it = keep.iter();
                        m.retain(|_| *it.next().unwrap());
                        prop_assert_eq!(l.remove_matching(&Needle::new(&v), limit, c < 0), want);
                    }
                    Op::Trim(s, e) => {
                        let len = m.len() as i64;
                        let mut s = if s < 0 { len + s } else { s };
                        let e = if e < 0 { len + e } else { e };
                        if s < 0 { s = 0; }
                        let (lt, rt) = if s > e || s >= len {
                            (len, 0)
                        } else {
                            (s, len - e.min(len - 1) - 1)
                        };
                        l.trim(lt as usize, rt as usize);
                        for _ in 0..lt { m.pop_front(); }
                        for _ in 0..rt { m.pop_back(); }
                    }
                    Op::DelRange(s, n) => {
                        l.delete_range(s, n);
                        if s < m.len() {
                            let end = (s + n).min(m.len());
                            m.drain(s..end);
                        }
                    }
                    Op::PopN(left, n) => {
                        let end = if left { End::Left } else { End::Right };
                        let got: Vec<Vec<u8>> = l.end_range(end, n).map(Elem::to_vec).collect();
                        l.pop_n(end, n);
                        let mut want = Vec::new();
                        for _ in 0..n {
                            match if left { m.pop_front() } else { m.pop_back() } {
                                Some(v) => want.push(v),
                                None => break,
                            }
                        }
                        prop_assert_eq!(got, want);
                    }
                }
                l.check();
                prop_assert_eq!(l.len(), m.len());
                prop_assert_eq!(items(&l), m.iter().cloned().collect::<Vec<_>>());
                let rev: Vec<Vec<u8>> = l.iter_rev().map(Elem::to_vec).collect();
                prop_assert_eq!(rev, m.iter().rev().cloned().collect::<Vec<_>>());
                for i in [0i64, 1, -1, -2, (m.len() / 2) as i64] {
                    let want = model_index(m.len(), i).map(|i| m[i].clone());
                    prop_assert_eq!(l.get(i).map(Elem::to_vec), want);
                }
            }
            let c = l.clone();
            c.check();
            prop_assert_eq!(items(&c), items(&l));
        }
    }
}
