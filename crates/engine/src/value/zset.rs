//! The sorted set type and its two encodings (Redis 7.0 `src/t_zset.c`).
//!
//! A small sorted set is kept "packed" (Redis's listpack): one buffer of
//! (score, member) entries sorted by score, then by member bytes. A bigger
//! one uses a skiplist with spans, so insert, delete, rank, by-rank lookup
//! and the start of a range query are all O(log n), plus a hash index from
//! member to node for O(1) ZSCORE (Redis's `zset` = `dict` + `zskiplist`).
//!
//! The conversion rules are Redis 7.0's, because OBJECT ENCODING exposes
//! them:
//! * ZADD creating a key picks the skiplist when `zset-max-listpack-entries`
//!   is 0 or the *first* member is longer than `zset-max-listpack-value`
//!   ([`ZSetValue::for_first_member`]);
//! * adding a new member to a packed set converts it first when the count
//!   would exceed `zset-max-listpack-entries`, the member is longer than
//!   `zset-max-listpack-value`, or the buffer would pass 1 GiB
//!   (`lpSafeToAdd`); updating the score of an existing member never does;
//! * nothing converts back while the key lives, except the results the
//!   store commands build ([`ZSetValue::from_sorted`], Redis
//!   `zsetConvertToListpackIfNeeded`).
//!
//! The order is score, then member bytes (`memcmp`, shorter first on a
//! tie), for both encodings, so every range command sees the same order
//! whatever the encoding. Where Redis's two encodings answer the same
//! question differently (a lex range over members of different scores,
//! where the answer depends on how the search walks), each encoding here
//! walks the way Redis's does: the packed one linearly from the head or
//! tail, the skiplist by descending its levels.
//!
//! Packed entry layout: `score (f64, 8 bytes LE) | len (u32 LE) | member |
//! len (u32 LE)`; the trailing length lets ZREVRANGE and ZPOPMAX walk
//! backwards as a listpack does.

use hashbrown::HashTable;
use smallvec::SmallVec;

use crate::util::smallbytes::SmallBytes;
use std::hash::{BuildHasher, Hasher};

/// The two config knobs that decide the encoding (redis.conf
/// `zset-max-listpack-entries` and `zset-max-listpack-value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZSetLimits {
    pub max_listpack_entries: usize,
    pub max_listpack_value: usize,
}

impl Default for ZSetLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        ZSetLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        }
    }
}

/// Redis `LISTPACK_MAX_SAFETY_SIZE`: a listpack is converted rather than
/// allowed to grow past 1 GiB, whatever the limits say.
const PACKED_MAX_SAFE_BYTES: usize = 1 << 30;

// ---------------------------------------------------------------------------
// Ranges

/// A score interval as ZRANGEBYSCORE and friends take it (Redis
/// `zrangespec`); `minex`/`maxex` mark a `(` bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub minex: bool,
    pub max: f64,
    pub maxex: bool,
}

impl ScoreRange {
    /// Redis `zslValueGteMin`.
    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    /// Redis `zslValueLteMax`.
    pub fn lte_max(&self, v: f64) -> bool {
        if self.maxex {
            v < self.max
        } else {
            v <= self.max
        }
    }

    /// A range nothing can be in (min above max, or equal with an open end).
    pub fn is_empty(&self) -> bool {
        self.min > self.max || (self.min == self.max && (self.minex || self.maxex))
    }
}

/// One end of a ZRANGEBYLEX interval: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LexBound<'a> {
    /// `-`: below every string.
    NegInf,
    /// `+`: above every string.
    PosInf,
    /// `[x`
    Incl(&'a [u8]),
    /// `(x`
    Excl(&'a [u8]),
}

impl LexBound<'_> {
    fn exclusive(&self) -> bool {
        // Redis marks `-` and `+` exclusive too (`zslParseLexRangeItem`).
        !matches!(self, LexBound::Incl(_))
    }
}

/// A ZRANGEBYLEX interval (Redis `zlexrangespec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LexRange<'a> {
    pub min: LexBound<'a>,
    pub max: LexBound<'a>,
}

/// Redis `sdscmplex` of a member against a bound.
fn cmp_lex(value: &[u8], bound: &LexBound) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match bound {
        LexBound::NegInf => Greater,
        LexBound::PosInf => Less,
        LexBound::Incl(b) | LexBound::Excl(b) => value.cmp(b),
    }
}

impl LexRange<'_> {
    /// Redis `zslLexValueGteMin`.
    pub fn gte_min(&self, v: &[u8]) -> bool {
        let c = cmp_lex(v, &self.min);
        if self.min.exclusive() {
            c.is_gt()
        } else {
            c.is_ge()
        }
    }

    /// Redis `zslLexValueLteMax`.
    pub fn lte_max(&self, v: &[u8]) -> bool {
        let c = cmp_lex(v, &self.max);
        if self.max.exclusive() {
            c.is_lt()
        } else {
            c.is_le()
        }
    }

    /// Redis's "always empty" test (`zslIsInLexRange`): `sdscmplex(min,
    /// max)`, where `-` equals only `-` and `+` only `+`.
    pub fn is_empty(&self) -> bool {
        use std::cmp::Ordering::*;
        use LexBound::*;
        let c = match (&self.min, &self.max) {
            (NegInf, NegInf) | (PosInf, PosInf) => Equal,
            (NegInf, _) | (_, PosInf) => Less,
            (PosInf, _) | (_, NegInf) => Greater,
            (Incl(a) | Excl(a), Incl(b) | Excl(b)) => a.cmp(b),
        };
        c.is_gt() || (c.is_eq() && (self.min.exclusive() || self.max.exclusive()))
    }
}

// ---------------------------------------------------------------------------
// ZADD flags and outcome

/// ZADD's options (`ZADD_IN_*`). The caller has rejected the invalid
/// combinations (NX with XX, GT, LT; GT with LT).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddFlags {
    pub incr: bool,
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
}

/// What [`ZSetValue::add`] did with one member (`ZADD_OUT_*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Added {
    /// New member, with this score.
    Added(f64),
    /// Existing member, score changed to this.
    Updated(f64),
    /// Existing member, same score as before (counts as processed).
    Same(f64),
    /// NX/XX/GT/LT said no: nothing done.
    Nop,
}

/// The score would be NaN ("resulting score is not a number (NaN)").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotANumber;

// ---------------------------------------------------------------------------
// Packed encoding

const SCORE_BYTES: usize = 8;
const LEN_BYTES: usize = 4;
/// Bytes of an entry besides its member.
const ENTRY_OVERHEAD: usize = SCORE_BYTES + 2 * LEN_BYTES;

/// The listpack-like encoding: one buffer, sorted.
#[derive(Clone, Debug, Default)]
pub struct Packed {
    buf: Vec<u8>,
    len: usize,
}

fn read_u32(buf: &[u8], at: usize) -> usize {
    u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize
}

fn read_f64(buf: &[u8], at: usize) -> f64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    f64::from_le_bytes(b)
}

/// The entry starting at `pos`: (member, score, start of the next entry).
fn packed_entry(buf: &[u8], pos: usize) -> (&[u8], f64, usize) {
    let score = read_f64(buf, pos);
    let mlen = read_u32(buf, pos + SCORE_BYTES);
    let start = pos + SCORE_BYTES + LEN_BYTES;
    (&buf[start..start + mlen], score, start + mlen + LEN_BYTES)
}

/// Start of the entry that ends at `end`.
fn packed_prev(buf: &[u8], end: usize) -> usize {
    let mlen = read_u32(buf, end - LEN_BYTES);
    end - ENTRY_OVERHEAD - mlen
}

/// The score a listpack keeps for `score`: Redis stores scores as text
/// (`d2string`), writing an integral value as an integer, so -0 comes back
/// as 0; every other double survives the round trip exactly.
fn packed_score(score: f64) -> f64 {
    if score == 0.0 {
        0.0
    } else {
        score
    }
}

/// True if the entry (s, m) sorts before (score, member).
fn before(s: f64, m: &[u8], score: f64, member: &[u8]) -> bool {
    s < score || (s == score && m < member)
}

impl Packed {
    /// Byte position of the `i`th entry (`buf.len()` for `i == len`),
    /// walking from whichever end is nearer.
    fn pos_of(&self, i: usize) -> usize {
        if i >= self.len {
            return self.buf.len();
        }
        if i <= self.len / 2 {
            let mut pos = 0;
            for _ in 0..i {
                pos = packed_entry(&self.buf, pos).2;
            }
            pos
        } else {
            let mut pos = self.buf.len();
            for _ in i..self.len {
                pos = packed_prev(&self.buf, pos);
            }
            pos
        }
    }

    /// Index and score of `member`.
    fn find(&self, member: &[u8]) -> Option<(usize, f64)> {
        let mut pos = 0;
        let mut i = 0;
        while pos < self.buf.len() {
            let (m, s, next) = packed_entry(&self.buf, pos);
            if m == member {
                return Some((i, s));
            }
            pos = next;
            i += 1;
        }
        None
    }

    /// Inserts a member known to be absent at its sorted place (Redis
    /// `zzlInsert`).
    fn insert(&mut self, member: &[u8], score: f64) {
        let mut pos = 0;
        while pos < self.buf.len() {
            let (m, s, next) = packed_entry(&self.buf, pos);
            if !before(s, m, score, member) {
                break;
            }
            pos = next;
        }
        let score = packed_score(score);
        let n = ENTRY_OVERHEAD + member.len();
        let old = self.buf.len();
        self.buf.resize(old + n, 0);
        self.buf.copy_within(pos..old, pos + n);
        let len = (member.len() as u32).to_le_bytes();
        let e = &mut self.buf[pos..pos + n];
        e[..SCORE_BYTES].copy_from_slice(&score.to_le_bytes());
        e[SCORE_BYTES..SCORE_BYTES + LEN_BYTES].copy_from_slice(&len);
        e[SCORE_BYTES + LEN_BYTES..n - LEN_BYTES].copy_from_slice(member);
        e[n - LEN_BYTES..].copy_from_slice(&len);
        self.len += 1;
    }

    /// Removes the entries with index `start..=end` (both valid).
    fn remove_range(&mut self, start: usize, end: usize) {
        let from = self.pos_of(start);
        let mut to = from;
        for _ in start..=end {
            to = packed_entry(&self.buf, to).2;
        }
        self.buf.drain(from..to);
        self.len -= end - start + 1;
    }

    fn first(&self) -> Option<(&[u8], f64)> {
        (self.len > 0).then(|| {
            let (m, s, _) = packed_entry(&self.buf, 0);
            (m, s)
        })
    }

    fn last(&self) -> Option<(&[u8], f64)> {
        (self.len > 0).then(|| {
            let (m, s, _) = packed_entry(&self.buf, packed_prev(&self.buf, self.buf.len()));
            (m, s)
        })
    }
}

// ---------------------------------------------------------------------------
// Skiplist encoding

/// Redis `ZSKIPLIST_MAXLEVEL`.
const MAX_LEVEL: usize = 32;
/// No node (a NULL pointer in Redis).
const NIL: u32 = u32::MAX;
/// The header node: arena slot 0.
const HEAD: u32 = 0;

/// One level of a node: the next node at this level and how many nodes
/// that step passes (Redis `zskiplistLevel`). A step to NIL spans the
/// nodes left to the end, as in Redis.
#[derive(Clone, Copy, Debug)]
struct Level {
    forward: u32,
    span: u32,
}

const EMPTY_LEVEL: Level = Level {
    forward: NIL,
    span: 0,
};

/// A skiplist node. Most nodes have one or two levels (p = 1/4), which fit
/// inline; only taller ones allocate.
/// `repr(C)` so docs/design.md's drawing (member 0, score 24, backward 32,
/// levels 40; 64 bytes) is the real layout.
#[derive(Clone)]
#[repr(C)]
struct Node {
    /// Inline up to 23 bytes (`SmallBytes`): no block of its own.
    member: SmallBytes,
    score: f64,
    backward: u32,
    levels: SmallVec<[Level; 2]>,
}

/// Nodes per arena chunk (64 bytes each: 256 KiB).
const CHUNK: usize = 4096;

/// The skiplist's node arena: chunks of `CHUNK` nodes, so a big sorted set
/// wastes at most one partly used chunk instead of up to half of a doubled
/// `Vec` (at 200,000 members a `Vec` holds 262,144 slots: 31% slack). The
/// first chunk grows like a `Vec` so a small skiplist stays small.
#[derive(Clone, Default)]
struct Arena {
    chunks: Vec<Vec<Node>>,
}

impl Arena {
    fn len(&self) -> usize {
        match self.chunks.last() {
            None => 0,
            Some(last) => (self.chunks.len() - 1) * CHUNK + last.len(),
        }
    }

    fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Node>>()
                / std::mem::size_of::<Node>()
    }

    /// Room for `n` nodes in the first chunk (a hint for bulk builds).
    fn reserve(&mut self, n: usize) {
        if self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(n.min(CHUNK)));
        }
    }

    fn push(&mut self, node: Node) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => {
                if last.len() == last.capacity() {
                    // Grow the first chunk by doubling, never past CHUNK.
                    let want = (last.capacity() * 2).clamp(4, CHUNK);
                    last.reserve_exact(want - last.len());
                }
                last.push(node);
            }
            _ => {
                let mut c = Vec::with_capacity(if self.chunks.is_empty() { 4 } else { CHUNK });
                c.push(node);
                self.chunks.push(c);
            }
        }
    }
}

impl Arena {
    /// The node in slot `i`, without bounds checks, for the descent loops.
    ///
    /// # Safety
    /// `i` must be a slot of this arena (`i < self.len()`): the skiplist
    /// only follows forward links, which always name live slots, and
    /// `HEAD`, which is slot 0 from the start.
    #[inline(always)]
    unsafe fn get_unchecked(&self, i: u32) -> &Node {
        let i = i as usize;
        debug_assert!(i < self.len());
        // SAFETY: `i < len()`, so chunk `i / CHUNK` exists and holds slot
        // `i % CHUNK` (every chunk but the last is full).
        unsafe {
            self.chunks
                .get_unchecked(i / CHUNK)
                .get_unchecked(i % CHUNK)
        }
    }
}

impl Arena {
    /// Mutable [`get_unchecked`](Self::get_unchecked).
    ///
    /// # Safety
    /// As for `get_unchecked`: `i < self.len()`.
    #[inline(always)]
    unsafe fn get_unchecked_mut(&mut self, i: u32) -> &mut Node {
        let i = i as usize;
        debug_assert!(i < self.len());
        // SAFETY: as in `get_unchecked`.
        unsafe {
            self.chunks
                .get_unchecked_mut(i / CHUNK)
                .get_unchecked_mut(i % CHUNK)
        }
    }
}

impl std::ops::Index<usize> for Arena {
    type Output = Node;
    fn index(&self, i: usize) -> &Node {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

impl std::ops::IndexMut<usize> for Arena {
    fn index_mut(&mut self, i: usize) -> &mut Node {
        &mut self.chunks[i / CHUNK][i % CHUNK]
    }
}

/// The skiplist encoding: Redis's skiplist with spans, its nodes in an
/// arena addressed by `u32` (so a sorted set holds at most about 4 billion
/// members, far beyond any memory it could use), plus a hash index from
/// member to node.
///
/// The header is arena slot 0 ([`HEAD`]), a node with `MAX_LEVEL` levels
/// and no member, so the descent loops read every level the same way,
/// without a branch for the header. A node keeps its slot (and so its
/// index entry and its levels) for as long as its member is in the set:
/// a score change that moves it unlinks and relinks the same node, as a
/// fresh insert with the same random level would (the level is drawn
/// independently of the position, so reusing it keeps the distribution).
#[derive(Clone)]
pub struct SkipList {
    nodes: Arena,
    /// Arena slots free for reuse (never `HEAD`).
    free: Vec<u32>,
    /// Levels in use (Redis `zsl->level`), at least 1.
    level: usize,
    len: usize,
    tail: u32,
    index: HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
    /// xorshift64 state for node levels.
    rng: u64,
    /// Heap bytes of members longer than 23 bytes plus spilled level
    /// arrays (the header's included), for `mem_bytes`.
    payload: usize,
}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        let mut x = self.lv(HEAD, 0).forward;
        while x != NIL {
            let n = &self.nodes[x as usize];
            l.entry(&(String::from_utf8_lossy(&n.member), n.score));
            x = n.levels[0].forward;
        }
        l.finish()
    }
}

/// The predecessor of a position on every level (Redis's `update[]`).
type Path = [u32; MAX_LEVEL];

impl SkipList {
    fn new() -> SkipList {
        let mut nodes = Arena::default();
        nodes.push(Node {
            member: SmallBytes::default(),
            score: 0.0,
            backward: NIL,
            levels: SmallVec::from_elem(EMPTY_LEVEL, MAX_LEVEL),
        });
        SkipList {
            nodes,
            free: Vec::new(),
            level: 1,
            len: 0,
            tail: NIL,
            index: HashTable::new(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            // Any nonzero seed works; vary it so that sets do not share
            // level patterns.
            rng: rand::random::<u64>() | 1,
            payload: MAX_LEVEL * std::mem::size_of::<Level>(),
        }
    }

    #[inline(always)]
    fn lv(&self, x: u32, i: usize) -> Level {
        self.nodes[x as usize].levels[i]
    }

    #[inline(always)]
    fn lv_mut(&mut self, x: u32, i: usize) -> &mut Level {
        &mut self.nodes[x as usize].levels[i]
    }

    /// Level `i` of a node on a search path, without bounds checks.
    ///
    /// # Safety
    /// `x` is `HEAD` or a live node, and has more than `i` levels: true of
    /// every `update[i]` a [`search`](Self::search) returned (with `i <
    /// self.level`) until the list is next changed on level `i`.
    #[inline(always)]
    unsafe fn path_lv(&mut self, x: u32, i: usize) -> &mut Level {
        // SAFETY: the caller's promise.
        unsafe {
            let n = self.nodes.get_unchecked_mut(x);
            debug_assert!(i < n.levels.len());
            n.levels.get_unchecked_mut(i)
        }
    }

    #[inline(always)]
    fn node(&self, x: u32) -> &Node {
        &self.nodes[x as usize]
    }

    /// Redis `zslRandomLevel`: 1 + the number of successes at p = 1/4.
    fn random_level(&mut self) -> usize {
        let mut level = 1;
        loop {
            let mut x = self.rng;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.rng = x;
            if (x & 0xFFFF) < 0xFFFF / 4 && level < MAX_LEVEL {
                level += 1;
            } else {
                return level;
            }
        }
    }

    /// A new, unlinked node in a free or fresh arena slot.
    fn alloc(&mut self, member: SmallBytes, score: f64, level: usize) -> u32 {
        self.payload += member.heap_bytes();
        if level > 2 {
            self.payload += level * std::mem::size_of::<Level>();
        }
        let levels = SmallVec::from_elem(EMPTY_LEVEL, level);
        let node = Node {
            member,
            score,
            backward: NIL,
            levels,
        };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Returns the slot to the arena and hands back the member.
    fn release(&mut self, x: u32) -> SmallBytes {
        let n = &mut self.nodes[x as usize];
        let member = std::mem::take(&mut n.member);
        self.payload -= member.heap_bytes();
        if n.levels.len() > 2 {
            self.payload -= n.levels.len() * std::mem::size_of::<Level>();
        }
        n.levels = SmallVec::new();
        self.free.push(x);
        member
    }

    fn hash(&self, member: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(member);
        h.finish()
    }

    fn find(&self, member: &[u8]) -> Option<u32> {
        let h = self.hash(member);
        let nodes = &self.nodes;
        self.index
            .find(h, |&i| *nodes[i as usize].member == *member)
            .copied()
    }

    fn index_insert(&mut self, x: u32) {
        let h = self.hash(&self.nodes[x as usize].member);
        let SkipList {
            index,
            nodes,
            hasher,
            ..
        } = self;
        index.insert_unique(h, x, |&i| {
            let mut s = hasher.build_hasher();
            s.write(&nodes[i as usize].member);
            s.finish()
        });
    }

    fn index_remove(&mut self, member: &[u8]) -> Option<u32> {
        let h = self.hash(member);
        let nodes = &self.nodes;
        match self
            .index
            .find_entry(h, |&i| *nodes[i as usize].member == *member)
        {
            Ok(e) => Some(e.remove().0),
            Err(_) => None,
        }
    }

    /// Drops node `x` from the index (while it still holds its member).
    fn index_remove_node(&mut self, x: u32) {
        let h = self.hash(&self.nodes[x as usize].member);
        if let Ok(e) = self.index.find_entry(h, |&i| i == x) {
            e.remove();
        }
    }

    /// The descent of Redis's `zslInsert`/`zslDelete`: on every level in
    /// use, the last node before node `x`'s (score, member) (`x` itself
    /// may be linked or not), and, when `RANKS`, its 1-based rank (0 for
    /// the header). Members are compared only on a score tie, and never
    /// against `x` itself; the current node is carried as a reference so
    /// each step costs one arena lookup.
    #[inline(always)]
    fn search<const RANKS: bool>(&self, x: u32, update: &mut Path, rank: &mut [u32]) {
        let key = self.node(x);
        let (score, member, target) = (key.score, &*key.member, x);
        let mut x = HEAD;
        let mut xn = self.node(HEAD);
        let mut r = 0u32;
        for i in (0..self.level).rev() {
            loop {
                debug_assert!(i < xn.levels.len());
                // SAFETY: the descent is on level `i` of node `xn`, which is
                // the header (MAX_LEVEL levels, and `i < self.level <=
                // MAX_LEVEL`) or a node reached by a level-`i` or higher
                // forward link, and a node is linked only on levels it has.
                let l = unsafe { *xn.levels.get_unchecked(i) };
                if l.forward == NIL {
                    break;
                }
                // SAFETY: a forward link other than NIL names a live slot.
                let f = unsafe { self.nodes.get_unchecked(l.forward) };
                if f.score < score
                    || (f.score == score && l.forward != target && *f.member < *member)
                {
                    if RANKS {
                        r += l.span;
                    }
                    x = l.forward;
                    xn = f;
                } else {
                    break;
                }
            }
            update[i] = x;
            if RANKS {
                rank[i] = r;
            }
        }
    }

    /// Redis `zslInsert` for a node already in the arena but not linked
    /// (new, or just unlinked by a score change): finds its place by its
    /// score and member and links it on each of its levels.
    fn link(&mut self, x: u32) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        self.search::<true>(x, &mut update, &mut rank);
        let level = self.nodes[x as usize].levels.len();
        if level > self.level {
            for i in self.level..level {
                rank[i] = 0;
                update[i] = HEAD;
                self.lv_mut(HEAD, i).span = self.len as u32;
            }
            self.level = level;
        }
        for i in 0..level {
            let passed = rank[0] - rank[i];
            // SAFETY: `update[i]` comes from the search above, or is HEAD
            // on a level just added; nothing has changed on level `i` yet.
            let ul = unsafe { self.path_lv(update[i], i) };
            let u = *ul;
            *ul = Level {
                forward: x,
                span: passed + 1,
            };
            self.nodes[x as usize].levels[i] = Level {
                forward: u.forward,
                span: u.span - passed,
            };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(level) {
            // SAFETY: as above; levels at or above `level` are untouched.
            unsafe { self.path_lv(u, i) }.span += 1;
        }
        let back = if update[0] == HEAD { NIL } else { update[0] };
        let n = &mut self.nodes[x as usize];
        n.backward = back;
        let next = n.levels[0].forward;
        if next != NIL {
            self.nodes[next as usize].backward = x;
        } else {
            self.tail = x;
        }
        self.len += 1;
    }

    /// Adds a new node for a member known to be absent (from the index
    /// too: the caller adds it there).
    fn insert(&mut self, score: f64, member: SmallBytes) -> u32 {
        let level = self.random_level();
        let x = self.alloc(member, score, level);
        self.link(x);
        x
    }

    /// Redis `zslDeleteNode`: unlinks `x`, whose predecessors per level are
    /// `update`, which must be the path a [`search`](Self::search) for `x`
    /// returned (or one built the same way, as `remove_range` does). The
    /// node keeps its slot, member and level count.
    fn unlink(&mut self, x: u32, update: &Path) {
        let height = self.nodes[x as usize].levels.len();
        for (i, &u) in update.iter().enumerate().take(self.level) {
            // SAFETY: `update` is a search path (the caller's promise), and
            // each step changes only level `i`.
            let ul = unsafe { self.path_lv(u, i) };
            if i < height && ul.forward == x {
                let ul = *ul;
                let xl = self.lv(x, i);
                // SAFETY: as above.
                *unsafe { self.path_lv(u, i) } = Level {
                    forward: xl.forward,
                    span: ul.span - 1 + xl.span,
                };
            } else {
                ul.span -= 1;
            }
        }
        let (next, back) = {
            let n = &self.nodes[x as usize];
            (n.levels[0].forward, n.backward)
        };
        if next != NIL {
            self.nodes[next as usize].backward = back;
        } else {
            self.tail = back;
        }
        while self.level > 1 && self.lv(HEAD, self.level - 1).forward == NIL {
            self.level -= 1;
        }
        self.len -= 1;
    }

    /// Unlinks the node `x` (found through the index) from the list.
    fn unlink_node(&mut self, x: u32) {
        let mut update = [HEAD; MAX_LEVEL];
        self.search::<false>(x, &mut update, &mut []);
        debug_assert_eq!(self.lv(update[0], 0).forward, x);
        self.unlink(x, &update);
    }

    /// Redis `zslUpdateScore`: moves node `x` to `new`, in place when its
    /// position does not change, else by unlinking and relinking the same
    /// node (so the index entry stays valid).
    fn update_score(&mut self, x: u32, new: f64) {
        let (back, next) = {
            let n = self.node(x);
            (n.backward, n.levels[0].forward)
        };
        if (back == NIL || self.node(back).score < new)
            && (next == NIL || self.node(next).score > new)
        {
            self.nodes[x as usize].score = new;
            return;
        }
        self.unlink_node(x);
        self.nodes[x as usize].score = new;
        self.link(x);
    }

    /// Redis `zslGetRank` for a member found through the index: the
    /// 1-based rank of node `x`, by the same descent as an insert (one
    /// past the rank of its predecessor).
    fn rank_of(&self, x: u32) -> usize {
        let mut update = [HEAD; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        self.search::<true>(x, &mut update, &mut rank);
        rank[0] as usize + 1
    }

    /// Redis `zslGetElementByRank` (1-based); NIL if out of range.
    fn by_rank(&self, rank: usize) -> u32 {
        let mut traversed = 0usize;
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(x, i);
                if l.forward != NIL && traversed + l.span as usize <= rank {
                    traversed += l.span as usize;
                    x = l.forward;
                } else {
                    break;
                }
            }
            if traversed == rank {
                return if x == HEAD { NIL } else { x };
            }
        }
        NIL
    }

    /// Descends while `go` holds for the next node: the last node for
    /// which it held (HEAD if none) and its 1-based rank (0 for HEAD).
    /// With a predicate that holds for a prefix of the order this is a
    /// binary search; otherwise it is what Redis's descent finds.
    fn descend_while(&self, mut go: impl FnMut(&Node) -> bool) -> (u32, usize) {
        let mut rank = 0usize;
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(x, i);
                if l.forward != NIL && go(self.node(l.forward)) {
                    rank += l.span as usize;
                    x = l.forward;
                } else {
                    break;
                }
            }
        }
        (x, rank)
    }

    /// Redis `zslDeleteRangeByRank` with 0-based inclusive indexes (both
    /// valid): unlinks and frees the nodes, and drops them from the index.
    fn remove_range(&mut self, start: usize, end: usize) {
        let mut update = [HEAD; MAX_LEVEL];
        let mut traversed = 0usize;
        let mut x = HEAD;
        for i in (0..self.level).rev() {
            loop {
                let l = self.lv(x, i);
                if l.forward != NIL && traversed + (l.span as usize) < start + 1 {
                    traversed += l.span as usize;
                    x = l.forward;
                } else {
                    break;
                }
            }
            update[i] = x;
        }
        let mut x = self.lv(x, 0).forward;
        for _ in start..=end {
            if x == NIL {
                break;
            }
            let next = self.nodes[x as usize].levels[0].forward;
            self.unlink(x, &update);
            self.index_remove_node(x);
            self.release(x);
            x = next;
        }
        self.maybe_compact();
    }

    /// Adds a member known to be absent.
    fn add_new(&mut self, member: &[u8], score: f64) {
        let x = self.insert(score, SmallBytes::new(member));
        self.index_insert(x);
    }

    /// Removes `member`; true if it was there.
    fn remove(&mut self, member: &[u8]) -> bool {
        match self.index_remove(member) {
            Some(x) => {
                self.unlink_node(x);
                self.release(x);
                self.maybe_compact();
                true
            }
            None => false,
        }
    }

    /// Keeps memory proportional to the live members after many removals:
    /// rebuilds the arena once most of it is free, and shrinks the index
    /// (Redis shrinks its dict the same way, `htNeedsResize`). Amortized
    /// O(1) per removal.
    fn maybe_compact(&mut self) {
        if self.nodes.len() >= 64 && self.free.len() * 2 > self.nodes.len() {
            self.compact();
        }
        if self.index.capacity() > 64 && self.index.len() * 8 < self.index.capacity() {
            self.shrink_index(self.index.len() * 2);
        }
    }

    /// Moves the live nodes, in order, into a fresh arena with no free
    /// slots, in one pass: each node keeps its height, and its levels are
    /// relinked from the ranks as it is placed (no searches, no hashing;
    /// the index is renumbered in place), then the index is resized to
    /// the live count.
    fn compact(&mut self) {
        let mut fresh = Arena::default();
        fresh.reserve(self.len + 1);
        fresh.push(Node {
            member: SmallBytes::default(),
            score: 0.0,
            backward: NIL,
            levels: SmallVec::from_elem(EMPTY_LEVEL, MAX_LEVEL),
        });
        let mut remap = vec![NIL; self.nodes.len()];
        let mut last = [HEAD; MAX_LEVEL];
        let mut last_rank = [0u32; MAX_LEVEL];
        let mut rank = 0u32;
        let mut back = NIL;
        let mut x = self.lv(HEAD, 0).forward;
        while x != NIL {
            let old = &mut self.nodes[x as usize];
            let next = old.levels[0].forward;
            let mut n = Node {
                member: std::mem::take(&mut old.member),
                score: old.score,
                backward: back,
                levels: std::mem::take(&mut old.levels),
            };
            rank += 1;
            let y = fresh.len() as u32;
            remap[x as usize] = y;
            for (i, l) in n.levels.iter_mut().enumerate() {
                fresh[last[i] as usize].levels[i] = Level {
                    forward: y,
                    span: rank - last_rank[i],
                };
                last[i] = y;
                last_rank[i] = rank;
                *l = EMPTY_LEVEL;
            }
            fresh.push(n);
            back = y;
            x = next;
        }
        for i in 0..self.level {
            fresh[last[i] as usize].levels[i] = Level {
                forward: NIL,
                span: rank - last_rank[i],
            };
        }
        for slot in self.index.iter_mut() {
            *slot = remap[*slot as usize];
        }
        self.nodes = fresh;
        self.free = Vec::new();
        self.tail = back;
        self.shrink_index(self.len);
    }

    /// Resizes the index for `n` entries (never below its length).
    fn shrink_index(&mut self, n: usize) {
        let SkipList {
            index,
            nodes,
            hasher,
            ..
        } = self;
        index.shrink_to(n, |&i| {
            let mut s = hasher.build_hasher();
            s.write(&nodes[i as usize].member);
            s.finish()
        });
    }
}

// ---------------------------------------------------------------------------
// Public API

/// A sorted set value. See the module docs for when each encoding is used.
///
/// The skiplist variant is much larger than the packed one (its header
/// levels are inline), but a `ZSetValue` always sits behind the `Box` of
/// `Value::ZSet`, so the size costs nothing in the keyspace, and keeping
/// the skiplist inline saves a pointer chase on every operation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum ZSetValue {
    Packed(Packed),
    Skip(SkipList),
}

impl Default for ZSetValue {
    fn default() -> Self {
        ZSetValue::new()
    }
}

impl ZSetValue {
    /// An empty sorted set, packed (Redis `createZsetListpackObject`).
    pub fn new() -> Self {
        ZSetValue::Packed(Packed::default())
    }

    /// An empty sorted set in the skiplist encoding (`createZsetObject`).
    pub fn new_skiplist() -> Self {
        ZSetValue::Skip(SkipList::new())
    }

    /// The empty set ZADD creates for a missing key, whose first member
    /// has `first_len` bytes: a skiplist if `zset-max-listpack-entries` is
    /// 0 or that member is too long for a listpack, else packed. (Only the
    /// first member counts here; later ones convert on insert.)
    pub fn for_first_member(first_len: usize, limits: &ZSetLimits) -> Self {
        if limits.max_listpack_entries == 0 || limits.max_listpack_value < first_len {
            ZSetValue::new_skiplist()
        } else {
            ZSetValue::new()
        }
    }

    /// The empty set ZRANGESTORE fills with a result of `hint` members
    /// (`None`: not known in advance, as for BYSCORE/BYLEX): a skiplist if
    /// the hint exceeds `zset-max-listpack-entries`, else packed
    /// (`zrangeResultBeginStore`).
    pub fn for_size_hint(hint: Option<usize>, limits: &ZSetLimits) -> Self {
        match hint {
            Some(n) if n > limits.max_listpack_entries => ZSetValue::new_skiplist(),
            _ => ZSetValue::new(),
        }
    }

    /// A set holding `items`, which must be sorted by (score, member) and
    /// free of duplicate members and NaN scores: the way ZUNIONSTORE,
    /// ZINTERSTORE and ZDIFFSTORE build their result (a skiplist, packed
    /// when the count, the longest member and the total member bytes fit
    /// the limits: `zsetConvertToListpackIfNeeded`). Also a constructor for
    /// SORT and the tests.
    pub fn from_sorted<M: AsRef<[u8]>>(items: &[(f64, M)], limits: &ZSetLimits) -> Self {
        let max = items.iter().map(|i| i.1.as_ref().len()).max().unwrap_or(0);
        let total: usize = items.iter().map(|i| i.1.as_ref().len()).sum();
        let packed = items.len() <= limits.max_listpack_entries
            && max <= limits.max_listpack_value
            && total <= PACKED_MAX_SAFE_BYTES;
        if packed {
            let mut p = Packed::default();
            p.buf
                .reserve(total.saturating_add(items.len() * ENTRY_OVERHEAD));
            for (score, m) in items {
                let m = m.as_ref();
                let len = (m.len() as u32).to_le_bytes();
                p.buf.extend_from_slice(&packed_score(*score).to_le_bytes());
                p.buf.extend_from_slice(&len);
                p.buf.extend_from_slice(m);
                p.buf.extend_from_slice(&len);
            }
            p.len = items.len();
            ZSetValue::Packed(p)
        } else {
            let mut s = SkipList::new();
            s.nodes.reserve(items.len());
            // Tail to head keeps each insert at the header: linear.
            for (score, m) in items.iter().rev() {
                s.add_new(m.as_ref(), *score);
            }
            ZSetValue::Skip(s)
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSetValue::Packed(p) => p.len,
            ZSetValue::Skip(s) => s.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's answer, with Redis 7.0's names.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSetValue::Packed(_) => "listpack",
            ZSetValue::Skip(_) => "skiplist",
        }
    }

    pub fn is_packed(&self) -> bool {
        matches!(self, ZSetValue::Packed(_))
    }

    /// Approximate heap bytes held (not counting `size_of::<ZSetValue>()`),
    /// for MEMORY USAGE and memory accounting. O(1).
    pub fn mem_bytes(&self) -> usize {
        match self {
            ZSetValue::Packed(p) => p.buf.capacity(),
            ZSetValue::Skip(s) => {
                s.nodes.capacity() * std::mem::size_of::<Node>()
                    + s.free.capacity() * 4
                    + s.index.capacity() * (std::mem::size_of::<u32>() + 1)
                    + s.payload
            }
        }
    }

    /// ZSCORE: the member's score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSetValue::Packed(p) => p.find(member).map(|f| f.1),
            ZSetValue::Skip(s) => s.find(member).map(|x| s.node(x).score),
        }
    }

    /// Redis `zsetAdd`: adds `member` or updates its score under `flags`.
    /// Converts a packed set before adding a member that would not fit it.
    pub fn add(
        &mut self,
        member: &[u8],
        score: f64,
        flags: AddFlags,
        limits: &ZSetLimits,
    ) -> Result<Added, NotANumber> {
        if score.is_nan() {
            return Err(NotANumber);
        }
        if let ZSetValue::Packed(p) = self {
            match p.find(member) {
                Some((i, cur)) => {
                    let new = match next_score(cur, score, flags)? {
                        Some(new) => new,
                        None => return Ok(Added::Nop),
                    };
                    if new == cur {
                        return Ok(Added::Same(new));
                    }
                    p.remove_range(i, i);
                    p.insert(member, new);
                    return Ok(Added::Updated(new));
                }
                None if flags.xx => return Ok(Added::Nop),
                None => {
                    let fits = p.len < limits.max_listpack_entries
                        && member.len() <= limits.max_listpack_value
                        && p.buf.len() + member.len() + ENTRY_OVERHEAD <= PACKED_MAX_SAFE_BYTES;
                    if fits {
                        p.insert(member, score);
                        return Ok(Added::Added(score));
                    }
                    self.convert_to_skiplist();
                }
            }
        }
        let ZSetValue::Skip(s) = self else {
            unreachable!("converted above");
        };
        match s.find(member) {
            Some(x) => {
                let cur = s.node(x).score;
                let new = match next_score(cur, score, flags)? {
                    Some(new) => new,
                    None => return Ok(Added::Nop),
                };
                if new == cur {
                    return Ok(Added::Same(new));
                }
                s.update_score(x, new);
                Ok(Added::Updated(new))
            }
            None if flags.xx => Ok(Added::Nop),
            None => {
                s.add_new(member, score);
                Ok(Added::Added(score))
            }
        }
    }

    /// ZREM of one member; true if it was there. Never changes the
    /// encoding; the caller deletes a key left empty.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            ZSetValue::Packed(p) => match p.find(member) {
                Some((i, _)) => {
                    p.remove_range(i, i);
                    true
                }
                None => false,
            },
            ZSetValue::Skip(s) => s.remove(member),
        }
    }

    /// 0-based ascending rank and score of `member`.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match self {
            ZSetValue::Packed(p) => p.find(member),
            ZSetValue::Skip(s) => {
                let x = s.find(member)?;
                Some((s.rank_of(x) - 1, s.node(x).score))
            }
        }
    }

    /// The `i`th member in ascending order.
    pub fn get(&self, i: usize) -> Option<(&[u8], f64)> {
        self.iter_from(i, false).next()
    }

    /// Lowest (score, member).
    pub fn first(&self) -> Option<(&[u8], f64)> {
        match self {
            ZSetValue::Packed(p) => p.first(),
            ZSetValue::Skip(s) => {
                let x = s.lv(HEAD, 0).forward;
                (x != NIL).then(|| (&*s.node(x).member, s.node(x).score))
            }
        }
    }

    /// Highest (score, member).
    pub fn last(&self) -> Option<(&[u8], f64)> {
        match self {
            ZSetValue::Packed(p) => p.last(),
            ZSetValue::Skip(s) => {
                (s.tail != NIL).then(|| (&*s.node(s.tail).member, s.node(s.tail).score))
            }
        }
    }

    /// All members in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        self.iter_from(0, false)
    }

    /// Members from index `i` (ascending order) on, going up, or down when
    /// `rev`. Empty if `i` is out of range. O(log n) to start for a
    /// skiplist, O(n) for a packed set (as a listpack seek is).
    pub fn iter_from(&self, i: usize, rev: bool) -> Iter<'_> {
        let n = self.len();
        if i >= n {
            return Iter(IterInner::Done);
        }
        match self {
            ZSetValue::Packed(p) => {
                if rev {
                    // Position just past entry `i`.
                    Iter(IterInner::PackedRev {
                        buf: &p.buf,
                        end: p.pos_of(i + 1),
                    })
                } else {
                    Iter(IterInner::Packed {
                        buf: &p.buf,
                        pos: p.pos_of(i),
                    })
                }
            }
            ZSetValue::Skip(s) => Iter(IterInner::Skip {
                s,
                x: s.by_rank(i + 1),
                rev,
            }),
        }
    }

    /// Index of the first member in the score range (Redis
    /// `zzlFirstInRange` / `zslFirstInRange`).
    pub fn first_in_score(&self, r: &ScoreRange) -> Option<usize> {
        if r.is_empty() {
            return None;
        }
        self.first_in(|s, _| r.gte_min(s), |s, _| r.lte_max(s))
    }

    /// Members from the first one meeting `r`'s minimum on, ascending; the
    /// caller stops at the maximum (what geo.c does with
    /// `zslFirstInRange` and `level[0].forward`). A skiplist is descended
    /// once, where `first_in_score` then `iter_from` descend twice.
    pub fn iter_from_score(&self, r: &ScoreRange) -> Iter<'_> {
        match self {
            ZSetValue::Packed(p) => {
                let mut pos = 0;
                while pos < p.buf.len() {
                    let (_, score, next) = packed_entry(&p.buf, pos);
                    if r.gte_min(score) {
                        break;
                    }
                    pos = next;
                }
                Iter(IterInner::Packed { buf: &p.buf, pos })
            }
            ZSetValue::Skip(sl) => {
                let (x, _) = sl.descend_while(|n| !r.gte_min(n.score));
                Iter(IterInner::Skip {
                    s: sl,
                    x: sl.lv(x, 0).forward,
                    rev: false,
                })
            }
        }
    }

    /// Index of the last member in the score range (`z*LastInRange`).
    pub fn last_in_score(&self, r: &ScoreRange) -> Option<usize> {
        if r.is_empty() {
            return None;
        }
        self.last_in(|s, _| r.gte_min(s), |s, _| r.lte_max(s))
    }

    /// Index of the first member in the lex range (`z*FirstInLexRange`).
    pub fn first_in_lex(&self, r: &LexRange) -> Option<usize> {
        if r.is_empty() {
            return None;
        }
        self.first_in(|_, m| r.gte_min(m), |_, m| r.lte_max(m))
    }

    /// Index of the last member in the lex range (`z*LastInLexRange`).
    pub fn last_in_lex(&self, r: &LexRange) -> Option<usize> {
        if r.is_empty() {
            return None;
        }
        self.last_in(|_, m| r.gte_min(m), |_, m| r.lte_max(m))
    }

    /// The shared shape of Redis's four "first/last in range" functions:
    /// nothing if the highest member is below the minimum or the lowest
    /// above the maximum; else the first member meeting the minimum, if it
    /// also meets the maximum.
    fn first_in(
        &self,
        gte_min: impl Fn(f64, &[u8]) -> bool,
        lte_max: impl Fn(f64, &[u8]) -> bool,
    ) -> Option<usize> {
        let (lo, hi) = (self.first()?, self.last()?);
        if !gte_min(hi.1, hi.0) || !lte_max(lo.1, lo.0) {
            return None;
        }
        let (i, m, s) = match self {
            ZSetValue::Packed(_) => {
                let (i, (m, s)) = self.iter().enumerate().find(|(_, (m, s))| gte_min(*s, m))?;
                (i, m, s)
            }
            ZSetValue::Skip(sl) => {
                let (x, rank) = sl.descend_while(|n| !gte_min(n.score, &n.member));
                let next = sl.lv(x, 0).forward;
                if next == NIL {
                    return None;
                }
                let n = sl.node(next);
                (rank, &*n.member, n.score)
            }
        };
        lte_max(s, m).then_some(i)
    }

    /// Mirror of [`first_in`](Self::first_in) from the top end.
    fn last_in(
        &self,
        gte_min: impl Fn(f64, &[u8]) -> bool,
        lte_max: impl Fn(f64, &[u8]) -> bool,
    ) -> Option<usize> {
        let (lo, hi) = (self.first()?, self.last()?);
        if !gte_min(hi.1, hi.0) || !lte_max(lo.1, lo.0) {
            return None;
        }
        let n = self.len();
        let (i, m, s) = match self {
            ZSetValue::Packed(_) => {
                let (k, (m, s)) = self
                    .iter_from(n - 1, true)
                    .enumerate()
                    .find(|(_, (m, s))| lte_max(*s, m))?;
                (n - 1 - k, m, s)
            }
            ZSetValue::Skip(sl) => {
                let (x, rank) = sl.descend_while(|node| lte_max(node.score, &node.member));
                if x == HEAD {
                    return None;
                }
                let node = sl.node(x);
                (rank - 1, &*node.member, node.score)
            }
        };
        gte_min(s, m).then_some(i)
    }

    /// ZCOUNT: members in the score range. Packed: counted from the first
    /// one in range while in range; skiplist: from the ranks of the first
    /// and last in range (Redis `zcountCommand`).
    pub fn count_in_score(&self, r: &ScoreRange) -> usize {
        self.count_in(
            self.first_in_score(r),
            || self.last_in_score(r),
            |s, _| r.lte_max(s),
        )
    }

    /// ZLEXCOUNT, the same way as [`count_in_score`](Self::count_in_score).
    pub fn count_in_lex(&self, r: &LexRange) -> usize {
        self.count_in(
            self.first_in_lex(r),
            || self.last_in_lex(r),
            |_, m| r.lte_max(m),
        )
    }

    fn count_in(
        &self,
        first: Option<usize>,
        last: impl FnOnce() -> Option<usize>,
        lte_max: impl Fn(f64, &[u8]) -> bool,
    ) -> usize {
        let Some(first) = first else { return 0 };
        match self {
            ZSetValue::Packed(_) => self
                .iter_from(first, false)
                .take_while(|(m, s)| lte_max(*s, m))
                .count(),
            ZSetValue::Skip(_) => {
                let len = self.len();
                let mut count = len - first;
                if let Some(last) = last() {
                    count -= len - (last + 1);
                }
                count
            }
        }
    }

    /// ZREMRANGEBYRANK with valid 0-based inclusive indexes: the number of
    /// members removed.
    pub fn remove_range(&mut self, start: usize, end: usize) -> usize {
        if start > end || end >= self.len() {
            return 0;
        }
        match self {
            ZSetValue::Packed(p) => p.remove_range(start, end),
            ZSetValue::Skip(s) => s.remove_range(start, end),
        }
        end - start + 1
    }

    /// ZREMRANGEBYSCORE: removes from the first member meeting the minimum
    /// while members meet the maximum.
    pub fn remove_in_score(&mut self, r: &ScoreRange) -> usize {
        let start = match self {
            ZSetValue::Packed(_) => self.first_in_score(r),
            // zslDeleteRangeByScore descends without the range pre-checks.
            ZSetValue::Skip(s) => Some(s.descend_while(|n| !r.gte_min(n.score)).1),
        };
        self.remove_run(start, |s, _| r.lte_max(s))
    }

    /// ZREMRANGEBYLEX, the same way as ZREMRANGEBYSCORE.
    pub fn remove_in_lex(&mut self, r: &LexRange) -> usize {
        let start = match self {
            ZSetValue::Packed(_) => self.first_in_lex(r),
            ZSetValue::Skip(s) => Some(s.descend_while(|n| !r.gte_min(&n.member)).1),
        };
        self.remove_run(start, |_, m| r.lte_max(m))
    }

    fn remove_run(&mut self, start: Option<usize>, keep: impl Fn(f64, &[u8]) -> bool) -> usize {
        let Some(start) = start else { return 0 };
        let n = self
            .iter_from(start, false)
            .take_while(|(m, s)| keep(*s, m))
            .count();
        if n == 0 {
            return 0;
        }
        self.remove_range(start, start + n - 1)
    }

    /// One ZSCAN step: appends (member, score) pairs to `out` and returns
    /// the next cursor (0 when done). A packed set comes back whole with
    /// cursor 0, whatever `cursor` is, as Redis does for a listpack; a
    /// skiplist is walked in ascending [`scan_hash`] order of its members,
    /// the cursor being the hash to resume at, so a member present for the
    /// whole scan is returned at least once. Cost O(n) per step (see
    /// `HashValue::scan`, which works the same way).
    pub fn scan(&self, cursor: u64, count: usize, out: &mut Vec<(Vec<u8>, f64)>) -> u64 {
        let s = match self {
            ZSetValue::Packed(_) => {
                out.extend(self.iter().map(|(m, s)| (m.to_vec(), s)));
                return 0;
            }
            ZSetValue::Skip(s) => s,
        };
        let count = count.max(1);
        let mut cand: Vec<(u64, u32)> = s
            .index
            .iter()
            .map(|&x| (scan_hash(&s.node(x).member), x))
            .filter(|(h, _)| *h >= cursor)
            .collect();
        let next = if cand.len() > count {
            cand.select_nth_unstable_by_key(count - 1, |c| c.0);
            let last = cand[..count].iter().map(|c| c.0).max().unwrap_or(cursor);
            let next = cand.iter().map(|c| c.0).filter(|&h| h > last).min();
            cand.retain(|c| c.0 <= last);
            next.unwrap_or(0)
        } else {
            0
        };
        out.extend(cand.iter().map(|&(_, x)| {
            let n = s.node(x);
            (n.member.to_vec(), n.score)
        }));
        next
    }

    /// Switches to the skiplist encoding (no-op if already there).
    pub fn convert_to_skiplist(&mut self) {
        if let ZSetValue::Packed(p) = self {
            let mut s = SkipList::new();
            s.nodes.reserve(p.len);
            let mut end = p.buf.len();
            while end > 0 {
                let start = packed_prev(&p.buf, end);
                let (m, score, _) = packed_entry(&p.buf, start);
                s.add_new(m, score);
                end = start;
            }
            *self = ZSetValue::Skip(s);
        }
    }
}

/// The score ZADD would set for an existing member at `cur`, or None when
/// NX/GT/LT forbid the update (`zsetAdd`'s checks, in its order).
fn next_score(cur: f64, score: f64, flags: AddFlags) -> Result<Option<f64>, NotANumber> {
    if flags.nx {
        return Ok(None);
    }
    let new = if flags.incr {
        let s = score + cur;
        if s.is_nan() {
            return Err(NotANumber);
        }
        s
    } else {
        score
    };
    if (flags.lt && new >= cur) || (flags.gt && new <= cur) {
        return Ok(None);
    }
    Ok(Some(new))
}

/// The order a skiplist-encoded set is scanned in: a fixed hash of the
/// member, reduced to 63 bits so every cursor also fits a signed 64-bit
/// integer. `DefaultHasher::new()` is SipHash with fixed keys: stable for
/// the life of the process, which is all a cursor needs.
fn scan_hash(member: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(member);
    h.finish() >> 1
}

/// Iterator over (member, score) returned by [`ZSetValue::iter_from`].
pub struct Iter<'a>(IterInner<'a>);

enum IterInner<'a> {
    Done,
    Packed {
        buf: &'a [u8],
        pos: usize,
    },
    /// Walks down; `end` is the position just past the next entry.
    PackedRev {
        buf: &'a [u8],
        end: usize,
    },
    Skip {
        s: &'a SkipList,
        x: u32,
        rev: bool,
    },
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterInner::Done => None,
            IterInner::Packed { buf, pos } => {
                let buf: &'a [u8] = buf;
                if *pos >= buf.len() {
                    return None;
                }
                let (m, s, next) = packed_entry(buf, *pos);
                *pos = next;
                Some((m, s))
            }
            IterInner::PackedRev { buf, end } => {
                let buf: &'a [u8] = buf;
                if *end == 0 {
                    return None;
                }
                let start = packed_prev(buf, *end);
                let (m, s, _) = packed_entry(buf, start);
                *end = start;
                Some((m, s))
            }
            IterInner::Skip { s, x, rev } => {
                let s: &'a SkipList = s;
                if *x == NIL {
                    return None;
                }
                let n = s.node(*x);
                *x = if *rev {
                    n.backward
                } else {
                    n.levels[0].forward
                };
                Some((&n.member, n.score))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn lim(entries: usize, value: usize) -> ZSetLimits {
        ZSetLimits {
            max_listpack_entries: entries,
            max_listpack_value: value,
        }
    }

    const PLAIN: AddFlags = AddFlags {
        incr: false,
        nx: false,
        xx: false,
        gt: false,
        lt: false,
    };

    fn all(z: &ZSetValue) -> Vec<(Vec<u8>, f64)> {
        z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    /// Checks the skiplist's internal invariants: spans, backward links,
    /// tail, index, and the order.
    fn check_skiplist(s: &SkipList) {
        let mut order = Vec::new();
        let mut x = s.lv(HEAD, 0).forward;
        let mut back = NIL;
        while x != NIL {
            let n = s.node(x);
            assert_eq!(n.backward, back);
            order.push(x);
            back = x;
            x = n.levels[0].forward;
        }
        assert_eq!(order.len(), s.len);
        assert_eq!(s.tail, back);
        let pos: std::collections::HashMap<u32, usize> =
            order.iter().enumerate().map(|(i, &x)| (x, i + 1)).collect();
        for i in 0..s.level {
            let mut x = HEAD;
            let mut rank = 0;
            loop {
                let l = s.lv(x, i);
                if l.forward == NIL {
                    assert_eq!(l.span as usize, s.len - rank, "span to end, level {i}");
                    break;
                }
                let r = pos[&l.forward];
                assert_eq!(l.span as usize, r - rank, "span level {i}");
                rank = r;
                x = l.forward;
            }
        }
        for w in order.windows(2) {
            let (a, b) = (s.node(w[0]), s.node(w[1]));
            assert!(before(a.score, &a.member, b.score, &b.member));
        }
        assert_eq!(s.index.len(), s.len);
        for &x in &order {
            assert_eq!(s.find(&s.node(x).member), Some(x));
        }
    }

    fn check(z: &ZSetValue) {
        if let ZSetValue::Skip(s) = z {
            check_skiplist(s);
        }
    }

    #[test]
    fn packed_basics_and_order() {
        let l = ZSetLimits::default();
        let mut z = ZSetValue::new();
        assert_eq!(z.add(b"b", 1.0, PLAIN, &l), Ok(Added::Added(1.0)));
        assert_eq!(z.add(b"a", 1.0, PLAIN, &l), Ok(Added::Added(1.0)));
        assert_eq!(z.add(b"c", 0.5, PLAIN, &l), Ok(Added::Added(0.5)));
        assert_eq!(z.add(b"", 1.0, PLAIN, &l), Ok(Added::Added(1.0)));
        assert_eq!(
            all(&z),
            vec![
                (b"c".to_vec(), 0.5),
                (b"".to_vec(), 1.0),
                (b"a".to_vec(), 1.0),
                (b"b".to_vec(), 1.0)
            ]
        );
        assert_eq!(z.add(b"c", 2.0, PLAIN, &l), Ok(Added::Updated(2.0)));
        assert_eq!(z.add(b"c", 2.0, PLAIN, &l), Ok(Added::Same(2.0)));
        assert_eq!(z.last(), Some((&b"c"[..], 2.0)));
        assert_eq!(z.first(), Some((&b""[..], 1.0)));
        assert_eq!(z.rank(b"b"), Some((2, 1.0)));
        assert_eq!(z.score(b"zz"), None);
        let rev: Vec<_> = z.iter_from(3, true).map(|(m, _)| m.to_vec()).collect();
        assert_eq!(
            rev,
            vec![b"c".to_vec(), b"b".to_vec(), b"a".to_vec(), b"".to_vec()]
        );
        assert!(z.remove(b"a"));
        assert!(!z.remove(b"a"));
        assert_eq!(z.len(), 3);
        assert_eq!(z.encoding(), "listpack");
    }

    #[test]
    fn add_flags_like_redis() {
        let l = ZSetLimits::default();
        for mut z in [ZSetValue::new(), ZSetValue::new_skiplist()] {
            let f = |incr, nx, xx, gt, lt| AddFlags {
                incr,
                nx,
                xx,
                gt,
                lt,
            };
            assert_eq!(
                z.add(b"m", 5.0, f(false, false, true, false, false), &l),
                Ok(Added::Nop)
            );
            assert_eq!(
                z.add(b"m", 5.0, f(false, true, false, false, false), &l),
                Ok(Added::Added(5.0))
            );
            assert_eq!(
                z.add(b"m", 6.0, f(false, true, false, false, false), &l),
                Ok(Added::Nop)
            );
            assert_eq!(
                z.add(b"m", 4.0, f(false, false, false, true, false), &l),
                Ok(Added::Nop)
            );
            assert_eq!(
                z.add(b"m", 7.0, f(false, false, false, true, false), &l),
                Ok(Added::Updated(7.0))
            );
            assert_eq!(
                z.add(b"m", 7.0, f(false, false, false, false, true), &l),
                Ok(Added::Nop)
            );
            assert_eq!(
                z.add(b"m", 1.0, f(true, false, false, false, true), &l),
                Ok(Added::Nop)
            );
            assert_eq!(
                z.add(b"m", -1.0, f(true, false, false, false, true), &l),
                Ok(Added::Updated(6.0))
            );
            assert_eq!(
                z.add(b"m", 0.0, f(true, false, false, false, false), &l),
                Ok(Added::Same(6.0))
            );
            assert_eq!(
                z.add(b"n", f64::INFINITY, PLAIN, &l),
                Ok(Added::Added(f64::INFINITY))
            );
            assert_eq!(
                z.add(
                    b"n",
                    f64::NEG_INFINITY,
                    f(true, false, false, false, false),
                    &l
                ),
                Err(NotANumber)
            );
            assert_eq!(z.add(b"n", f64::NAN, PLAIN, &l), Err(NotANumber));
            assert_eq!(z.score(b"n"), Some(f64::INFINITY));
            // GT on a new member still adds it.
            assert_eq!(
                z.add(b"o", 1.0, f(false, false, false, true, false), &l),
                Ok(Added::Added(1.0))
            );
            check(&z);
        }
    }

    #[test]
    fn conversions_like_redis() {
        let l = lim(3, 4);
        let mut z = ZSetValue::for_first_member(2, &l);
        assert!(z.is_packed());
        for m in [&b"a"[..], b"b", b"c"] {
            z.add(m, 1.0, PLAIN, &l).unwrap();
        }
        assert!(z.is_packed());
        // Updating never converts, even with a long existing member.
        z.add(b"a", 9.0, PLAIN, &l).unwrap();
        assert!(z.is_packed());
        z.add(b"d", 1.0, PLAIN, &l).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        for m in [&b"a"[..], b"b", b"c"] {
            z.remove(m);
        }
        assert_eq!((z.len(), z.encoding()), (1, "skiplist"));
        // A long member converts.
        let mut z = ZSetValue::new();
        z.add(b"abcd", 1.0, PLAIN, &l).unwrap();
        assert!(z.is_packed());
        z.add(b"abcde", 1.0, PLAIN, &l).unwrap();
        assert!(!z.is_packed());
        // Creation rules.
        assert!(!ZSetValue::for_first_member(5, &l).is_packed());
        assert!(!ZSetValue::for_first_member(0, &lim(0, 64)).is_packed());
        assert!(ZSetValue::for_size_hint(Some(3), &l).is_packed());
        assert!(!ZSetValue::for_size_hint(Some(4), &l).is_packed());
        assert!(ZSetValue::for_size_hint(None, &lim(0, 0)).is_packed());
        // Store results.
        let items = vec![(1.0, b"a".to_vec()), (2.0, b"b".to_vec())];
        assert!(ZSetValue::from_sorted(&items, &l).is_packed());
        assert!(!ZSetValue::from_sorted(&items, &lim(1, 4)).is_packed());
        assert!(!ZSetValue::from_sorted(&[(1.0, b"abcde")], &l).is_packed());
        let z = ZSetValue::from_sorted(&items, &lim(0, 0));
        check(&z);
        let want: Vec<(Vec<u8>, f64)> = items.into_iter().map(|(s, m)| (m, s)).collect();
        assert_eq!(all(&z), want);
    }

    #[test]
    fn negative_zero_and_infinities_keep_their_place() {
        let l = ZSetLimits::default();
        for mut z in [ZSetValue::new(), ZSetValue::new_skiplist()] {
            z.add(b"b", -0.0, PLAIN, &l).unwrap();
            z.add(b"a", 0.0, PLAIN, &l).unwrap();
            z.add(b"inf", f64::INFINITY, PLAIN, &l).unwrap();
            z.add(b"-inf", f64::NEG_INFINITY, PLAIN, &l).unwrap();
            let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
            assert_eq!(
                order,
                vec![
                    b"-inf".to_vec(),
                    b"a".to_vec(),
                    b"b".to_vec(),
                    b"inf".to_vec()
                ]
            );
            // A listpack keeps -0 as "0"; the skiplist keeps the double.
            assert_eq!(z.score(b"b").unwrap().is_sign_negative(), !z.is_packed());
            // -0 -> 0 is "the same score" for Redis (0 == -0).
            assert_eq!(z.add(b"b", 0.0, PLAIN, &l), Ok(Added::Same(0.0)));
        }
    }

    #[test]
    fn ranges_on_both_encodings() {
        let l = ZSetLimits::default();
        for skip in [false, true] {
            let mut z = if skip {
                ZSetValue::new_skiplist()
            } else {
                ZSetValue::new()
            };
            for (i, m) in [&b"a"[..], b"b", b"c", b"d", b"e"].iter().enumerate() {
                z.add(m, i as f64, PLAIN, &l).unwrap();
            }
            let r = |min, minex, max, maxex| ScoreRange {
                min,
                minex,
                max,
                maxex,
            };
            assert_eq!(z.first_in_score(&r(1.0, false, 3.0, false)), Some(1));
            assert_eq!(z.first_in_score(&r(1.0, true, 3.0, false)), Some(2));
            assert_eq!(z.last_in_score(&r(1.0, false, 3.0, true)), Some(2));
            assert_eq!(z.count_in_score(&r(1.0, false, 3.0, false)), 3);
            assert_eq!(
                z.count_in_score(&r(f64::NEG_INFINITY, false, f64::INFINITY, false)),
                5
            );
            assert_eq!(z.count_in_score(&r(5.0, false, 9.0, false)), 0);
            assert_eq!(z.count_in_score(&r(2.0, true, 2.0, false)), 0);
            assert_eq!(z.first_in_score(&r(3.5, false, 3.9, false)), None);
            let lx = |min, max| LexRange { min, max };
            use LexBound::*;
            assert_eq!(z.first_in_lex(&lx(NegInf, PosInf)), Some(0));
            assert_eq!(z.last_in_lex(&lx(NegInf, PosInf)), Some(4));
            assert_eq!(z.first_in_lex(&lx(Excl(b"b"), Incl(b"d"))), Some(2));
            assert_eq!(z.last_in_lex(&lx(Excl(b"b"), Excl(b"d"))), Some(2));
            assert_eq!(z.count_in_lex(&lx(Incl(b"b"), Incl(b"d"))), 3);
            assert_eq!(z.count_in_lex(&lx(PosInf, NegInf)), 0);
            assert_eq!(z.count_in_lex(&lx(Incl(b"x"), PosInf)), 0);
            assert_eq!(z.remove_in_lex(&lx(Incl(b"b"), Excl(b"d"))), 2);
            assert_eq!(z.remove_in_score(&r(3.0, false, 3.0, false)), 1);
            assert_eq!(z.remove_in_score(&r(30.0, false, 31.0, false)), 0);
            assert_eq!(all(&z), vec![(b"a".to_vec(), 0.0), (b"e".to_vec(), 4.0)]);
            check(&z);
        }
    }

    #[test]
    fn lex_bounds_compare_like_sdscmplex() {
        use LexBound::*;
        let r = LexRange {
            min: NegInf,
            max: NegInf,
        };
        assert!(r.is_empty());
        assert!(LexRange {
            min: PosInf,
            max: PosInf
        }
        .is_empty());
        assert!(!LexRange {
            min: NegInf,
            max: PosInf
        }
        .is_empty());
        assert!(LexRange {
            min: PosInf,
            max: NegInf
        }
        .is_empty());
        assert!(LexRange {
            min: Incl(b"a"),
            max: Excl(b"a")
        }
        .is_empty());
        assert!(!LexRange {
            min: Incl(b"a"),
            max: Incl(b"a")
        }
        .is_empty());
        assert!(LexRange {
            min: Incl(b"b"),
            max: Incl(b"a")
        }
        .is_empty());
        assert!(LexRange {
            min: Incl(b"a"),
            max: NegInf
        }
        .is_empty());
        assert!(LexRange {
            min: PosInf,
            max: Incl(b"a")
        }
        .is_empty());
        let r = LexRange {
            min: Incl(b""),
            max: Excl(b"b"),
        };
        assert!(r.gte_min(b""));
        assert!(r.lte_max(b"a\xff"));
        assert!(!r.lte_max(b"b"));
    }

    #[test]
    fn skiplist_node_is_64_bytes() {
        // member inline (24) + score + backward + two inline levels.
        assert_eq!(std::mem::size_of::<Node>(), 64);
        assert_eq!(std::mem::offset_of!(Node, score), 24);
        assert_eq!(std::mem::offset_of!(Node, backward), 32);
        assert_eq!(std::mem::offset_of!(Node, levels), 40);
    }

    #[test]
    fn big_skiplist_ranks_and_compaction() {
        let l = lim(0, 0);
        let mut z = ZSetValue::new_skiplist();
        for i in 0..5000u32 {
            z.add(format!("m{i:05}").as_bytes(), (i % 100) as f64, PLAIN, &l)
                .unwrap();
        }
        check(&z);
        let v = all(&z);
        for (i, (m, s)) in v.iter().enumerate().step_by(97) {
            assert_eq!(z.rank(m), Some((i, *s)));
            assert_eq!(z.get(i), Some((&m[..], *s)));
        }
        // Remove most of it, one by one and by ranges; memory shrinks.
        let before = z.mem_bytes();
        for i in 0..3000u32 {
            assert!(z.remove(format!("m{i:05}").as_bytes()));
        }
        assert_eq!(z.remove_range(0, 999), 1000);
        check(&z);
        assert_eq!(z.len(), 1000);
        assert!(z.mem_bytes() < before / 2, "{} vs {before}", z.mem_bytes());
        // Score updates in place and moving.
        let (m, s) = z.get(500).map(|(m, s)| (m.to_vec(), s)).unwrap();
        z.add(&m, s, PLAIN, &l).unwrap();
        z.add(&m, -5.0, PLAIN, &l).unwrap();
        assert_eq!(z.rank(&m), Some((0, -5.0)));
        check(&z);
    }

    #[test]
    fn scan_covers_a_skiplist() {
        let l = lim(0, 0);
        let mut z = ZSetValue::new_skiplist();
        for i in 0..500 {
            z.add(format!("m{i}").as_bytes(), i as f64, PLAIN, &l)
                .unwrap();
        }
        for count in [1, 7, 500, 1000] {
            let mut seen = BTreeMap::new();
            let mut cursor = 0;
            loop {
                let mut out = Vec::new();
                cursor = z.scan(cursor, count, &mut out);
                for (m, s) in out {
                    assert!(seen.insert(m, s).is_none());
                }
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(seen.len(), 500);
        }
        let mut p = ZSetValue::new();
        p.add(b"x", 1.0, PLAIN, &ZSetLimits::default()).unwrap();
        let mut out = Vec::new();
        assert_eq!(p.scan(99, 1, &mut out), 0);
        assert_eq!(out, vec![(b"x".to_vec(), 1.0)]);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u8, i8, AddFlags),
        Remove(u8),
        RemoveRange(u8, u8),
        RemoveScore(i8, bool, i8, bool),
        RemoveLex(u8, u8),
    }

    fn member(m: u8) -> Vec<u8> {
        // Some long names (> 6 bytes) force conversions under lim(5, 6).
        if m % 9 == 8 {
            format!("long-{m}").into_bytes()
        } else if m % 9 == 7 {
            // Past SmallBytes's 23 inline bytes: the member is on the heap.
            format!("a-member-name-longer-than-23-bytes-{m}").into_bytes()
        } else {
            vec![b'a' + m % 13]
        }
    }

    fn flags() -> impl Strategy<Value = AddFlags> {
        prop_oneof![
            6 => Just(PLAIN),
            1 => Just(AddFlags { nx: true, ..PLAIN }),
            1 => Just(AddFlags { xx: true, ..PLAIN }),
            1 => Just(AddFlags { gt: true, ..PLAIN }),
            1 => Just(AddFlags { lt: true, xx: true, ..PLAIN }),
            2 => Just(AddFlags { incr: true, ..PLAIN }),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u8..30, -5i8..5, flags()).prop_map(|(m, s, f)| Op::Add(m, s, f)),
            3 => (0u8..30).prop_map(Op::Remove),
            1 => (0u8..10, 0u8..10).prop_map(|(a, b)| Op::RemoveRange(a, b)),
            1 => (-5i8..5, any::<bool>(), -5i8..5, any::<bool>())
                .prop_map(|(a, ax, b, bx)| Op::RemoveScore(a, ax, b, bx)),
            1 => (0u8..30, 0u8..30).prop_map(|(a, b)| Op::RemoveLex(a, b)),
        ]
    }

    /// The model: a sorted Vec of (score, member).
    fn model_sorted(m: &BTreeMap<Vec<u8>, f64>) -> Vec<(Vec<u8>, f64)> {
        let mut v: Vec<(Vec<u8>, f64)> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
        v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]

        /// A big skiplist (hundreds of members, so nodes of many levels)
        /// under score moves, removals, pops and range removals, against a
        /// map model: the moved-in-place nodes, the relinking and the
        /// compaction keep every invariant, the order and the ranks.
        #[test]
        fn big_skiplist_matches_a_map(ops in proptest::collection::vec((0u8..4, 0u16..400, -60i16..60), 200..1500)) {
            let l = lim(0, 0);
            let mut z = ZSetValue::new_skiplist();
            let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            for (step, (kind, m, s)) in ops.into_iter().enumerate() {
                let m = format!("member:{m}").into_bytes();
                let s = f64::from(s) / 4.0;
                match kind {
                    0 | 1 => {
                        let want = match model.insert(m.clone(), s) {
                            None => Added::Added(s),
                            Some(old) if old == s => Added::Same(s),
                            Some(_) => Added::Updated(s),
                        };
                        prop_assert_eq!(z.add(&m, s, PLAIN, &l), Ok(want));
                    }
                    2 => prop_assert_eq!(z.remove(&m), model.remove(&m).is_some()),
                    _ => {
                        // ZPOPMIN of one, or a short rank range.
                        let v = model_sorted(&model);
                        let n = (usize::from(s.abs() as u8) % 3 + 1).min(v.len());
                        for (m, _) in &v[..n] {
                            model.remove(m);
                        }
                        if n > 0 {
                            prop_assert_eq!(z.remove_range(0, n - 1), n);
                        }
                    }
                }
                if step % 97 == 0 {
                    check(&z);
                }
            }
            check(&z);
            let v = model_sorted(&model);
            prop_assert_eq!(&all(&z), &v);
            for (i, (m, s)) in v.iter().enumerate() {
                prop_assert_eq!(z.rank(m), Some((i, *s)));
                prop_assert_eq!(z.get(i), Some((&m[..], *s)));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Random operations on a set starting in either encoding, under
        /// small limits, against a map model: contents, order, ranks,
        /// ranges, and when the encoding converts.
        #[test]
        fn behaves_like_a_sorted_vec(start_skip in any::<bool>(), ops in proptest::collection::vec(op(), 0..120)) {
            let l = lim(5, 6);
            let mut z = if start_skip { ZSetValue::new_skiplist() } else { ZSetValue::new() };
            let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
            let mut skip = start_skip;
            for op in ops {
                match op {
                    Op::Add(m, s, f) => {
                        let m = member(m);
                        let s = s as f64;
                        let want = match model.get(&m) {
                            None if f.xx => Ok(Added::Nop),
                            None => {
                                if model.len() + 1 > 5 || m.len() > 6 {
                                    skip = true;
                                }
                                model.insert(m.clone(), s);
                                Ok(Added::Added(s))
                            }
                            Some(&cur) => match next_score(cur, s, f) {
                                Ok(None) => Ok(Added::Nop),
                                Ok(Some(n)) if n == cur => Ok(Added::Same(n)),
                                Ok(Some(n)) => { model.insert(m.clone(), n); Ok(Added::Updated(n)) }
                                Err(e) => Err(e),
                            },
                        };
                        prop_assert_eq!(z.add(&m, s, f, &l), want);
                    }
                    Op::Remove(m) => {
                        let m = member(m);
                        prop_assert_eq!(z.remove(&m), model.remove(&m).is_some());
                    }
                    Op::RemoveRange(a, b) => {
                        let v = model_sorted(&model);
                        let (a, b) = (a as usize, b as usize);
                        let want = if a <= b && b < v.len() { b - a + 1 } else { 0 };
                        if want > 0 {
                            for (m, _) in &v[a..=b] { model.remove(m); }
                        }
                        prop_assert_eq!(z.remove_range(a, b), want);
                    }
                    Op::RemoveScore(a, ax, b, bx) => {
                        let r = ScoreRange { min: a as f64, minex: ax, max: b as f64, maxex: bx };
                        let v = model_sorted(&model);
                        let gone: Vec<_> = v.iter().filter(|(_, s)| r.gte_min(*s) && r.lte_max(*s)).collect();
                        let want = gone.len();
                        prop_assert_eq!(z.count_in_score(&r), want);
                        for (m, _) in gone { model.remove(m); }
                        prop_assert_eq!(z.remove_in_score(&r), want);
                    }
                    Op::RemoveLex(a, b) => {
                        // Lex ranges are only meaningful with equal
                        // scores; check the count against the model then.
                        let (ma, mb) = (member(a), member(b));
                        let r = LexRange { min: LexBound::Incl(&ma), max: LexBound::Excl(&mb) };
                        let v = model_sorted(&model);
                        if v.iter().all(|(_, s)| *s == v[0].1) {
                            let gone: Vec<_> = v.iter().filter(|(m, _)| r.gte_min(m) && r.lte_max(m)).collect();
                            prop_assert_eq!(z.count_in_lex(&r), gone.len());
                            let want = gone.len();
                            for (m, _) in gone { model.remove(m); }
                            prop_assert_eq!(z.remove_in_lex(&r), want);
                        }
                    }
                }
                if model.is_empty() {
                    // The key would be deleted; start over like a new key.
                    z = if start_skip { ZSetValue::new_skiplist() } else { ZSetValue::new() };
                    skip = start_skip;
                }
                check(&z);
                prop_assert_eq!(z.encoding(), if skip { "skiplist" } else { "listpack" });
                let v = model_sorted(&model);
                prop_assert_eq!(&all(&z), &v);
                prop_assert_eq!(z.len(), v.len());
                let rev: Vec<_> = z.iter_from(v.len().saturating_sub(1), true).map(|(m, s)| (m.to_vec(), s)).collect();
                let mut vr = v.clone();
                vr.reverse();
                prop_assert_eq!(rev, vr);
                for (i, (m, s)) in v.iter().enumerate() {
                    prop_assert_eq!(z.rank(m), Some((i, *s)));
                    prop_assert_eq!(z.score(m), Some(*s));
                    prop_assert_eq!(z.get(i), Some((&m[..], *s)));
                    let from: Vec<_> = z.iter_from(i, false).map(|(m, _)| m.to_vec()).collect();
                    prop_assert_eq!(from.len(), v.len() - i);
                }
                for lo in -5i8..5 {
                    for hi in [lo, lo + 2] {
                        let r = ScoreRange { min: lo as f64, minex: false, max: hi as f64, maxex: lo == hi };
                        let inr: Vec<usize> = v.iter().enumerate()
                            .filter(|(_, (_, s))| r.gte_min(*s) && r.lte_max(*s)).map(|(i, _)| i).collect();
                        prop_assert_eq!(z.first_in_score(&r), inr.first().copied());
                        prop_assert_eq!(z.last_in_score(&r), inr.last().copied());
                        prop_assert_eq!(z.count_in_score(&r), inr.len());
                        let from_min = v.iter().position(|(_, s)| r.gte_min(*s)).unwrap_or(v.len());
                        let walked: Vec<Vec<u8>> = z.iter_from_score(&r).map(|(m, _)| m.to_vec()).collect();
                        let want: Vec<Vec<u8>> = v[from_min..].iter().map(|(m, _)| m.clone()).collect();
                        prop_assert_eq!(walked, want);
                    }
                }
                // Converting a packed copy gives the same contents.
                let mut c = z.clone();
                c.convert_to_skiplist();
                check(&c);
                prop_assert_eq!(all(&c), v.clone());
                let rebuilt = ZSetValue::from_sorted(&v.iter().map(|(m, s)| (*s, m.clone())).collect::<Vec<_>>(), &l);
                check(&rebuilt);
                prop_assert_eq!(all(&rebuilt), v);
            }
        }
    }
}
