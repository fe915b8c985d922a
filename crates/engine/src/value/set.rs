//! The set value type and its two encodings.
//!
//! Mirrors Redis 7.0 `src/t_set.c` and `src/intset.c`:
//!
//! * **intset**: while every member is an integer in canonical form (what
//!   Redis's `string2ll` accepts: no sign on zero, no leading zeros, no
//!   spaces, within i64) and there are at most `set-max-intset-entries`
//!   members (capped at 2^30 as Redis caps it), the set is a sorted packed
//!   array of integers, 2, 4 or 8 bytes wide. The width grows when a member
//!   needs it and never shrinks, as in `intsetUpgradeAndAdd`.
//! * **hashtable**: otherwise. Redis never converts a set back while the
//!   key lives; only commands that build a new set (the STORE commands,
//!   SMOVE to a new key, SPOP's "keep the rest" strategy) can produce an
//!   intset again, because they start from `setTypeCreate` /
//!   `createIntsetObject` and convert on the way like any other set.
//!
//! Observable consequences reproduced here: OBJECT ENCODING says "intset"
//! or "hashtable" at the same moments as Redis; everything that lists an
//! intset (SMEMBERS, SSCAN, SPOP/SRANDMEMBER of the whole set, the
//! SINTER/SUNION/SDIFF family when the result is an intset) does so in
//! ascending numeric order; SSCAN of an intset returns everything in one
//! call with cursor 0.
//!
//! The hashtable is a dense vector of members plus a `hashbrown::HashTable`
//! of positions into it (the `indexmap` layout). Members up to 22 bytes live
//! inline in their 24-byte slot, so the common short member costs no
//! allocation of its own. The dense vector gives O(1) uniform random picks
//! (SPOP, SRANDMEMBER) and a SCAN cursor with Redis's guarantee that needs
//! no access to hash buckets (see [`SetValue::scan`]). Removal swaps the
//! last member into the hole, so positions change only for that member.
use std::fmt;
use std::hash::BuildHasher;
use std::sync::LazyLock;

use hashbrown::hash_table::Entry as TableEntry;
use hashbrown::HashTable;

use crate::util::num;

/// Redis caps `set-max-intset-entries` at 2^30 (intset internals in
/// `setTypeAdd`): a larger setting behaves like 2^30.
pub const INTSET_MAX_ENTRIES_CAP: usize = 1 << 30;

/// Bytes of an intset's header in Redis (`encoding` + `length`), for the
/// sizes DEBUG OBJECT and MEMORY USAGE report.
pub const INTSET_HEADER: usize = 8;

/// The effective intset limit for a configured `set-max-intset-entries`.
fn intset_cap(max_intset: usize) -> usize {
    max_intset.min(INTSET_MAX_ENTRIES_CAP)
}

// ---------------------------------------------------------------------------
// Elements as callers see them

/// One member of a set, as stored: an integer for an intset, bytes for a
/// hashtable. A hashtable member that spells an integer is still `Bytes`;
/// both forms mean the same member, and [`Elem::with_bytes`] gives the
/// member's bytes either way (Redis replies an intset member with
/// `addReplyBulkLongLong`, which sends the same bytes).
#[derive(Clone, Copy, Debug)]
pub enum Elem<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl Elem<'_> {
    /// Calls `f` with the member's bytes, formatting an integer on the
    /// stack (no allocation).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Int(n) => f(itoa::Buffer::new().format(n).as_bytes()),
            Elem::Bytes(b) => f(b),
        }
    }

    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(<[u8]>::to_vec)
    }

    /// The member as an integer, if it is one in canonical form.
    pub fn as_int(self) -> Option<i64> {
        match self {
            Elem::Int(n) => Some(n),
            Elem::Bytes(b) => num::parse_i64(b),
        }
    }
}

/// Equality of members: `Int(5)` equals `Bytes(b"5")`.
impl PartialEq for Elem<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            (Elem::Int(a), Elem::Int(b)) => a == b,
            (Elem::Bytes(a), Elem::Bytes(b)) => a == b,
            (Elem::Int(n), Elem::Bytes(b)) | (Elem::Bytes(b), Elem::Int(n)) => {
                num::parse_i64(b) == Some(n)
            }
        }
    }
}

impl Eq for Elem<'_> {}

// ---------------------------------------------------------------------------
// intset

/// Redis's intset: sorted, no duplicates, every element in the narrowest of
/// 16, 32 or 64 bits that fits all of them.
#[derive(Clone, Debug)]
enum IntSet {
    W16(Vec<i16>),
    W32(Vec<i32>),
    W64(Vec<i64>),
}

/// Runs `$e` with `$v` bound to the vector of whatever width `$s` has.
macro_rules! each_width {
    ($s:expr, $v:ident => $e:expr) => {
        match $s {
            IntSet::W16($v) => $e,
            IntSet::W32($v) => $e,
            IntSet::W64($v) => $e,
        }
    };
}

impl Default for IntSet {
    /// Redis's `intsetNew` starts at 16 bits.
    fn default() -> Self {
        IntSet::W16(Vec::new())
    }
}

/// Gives back memory after removals once at most a quarter is used, so a
/// set that shrank does not keep its peak size (Redis reallocates an
/// intset on every removal and shrinks a dict below 10% fill).
fn maybe_shrink<T>(v: &mut Vec<T>) {
    if v.capacity() > 16 && v.len() * 4 <= v.capacity() {
        v.shrink_to(v.len() * 2);
    }
}

impl IntSet {
    fn len(&self) -> usize {
        each_width!(self, v => v.len())
    }

    /// Element width in bytes (2, 4 or 8).
    fn width(&self) -> usize {
        match self {
            IntSet::W16(_) => 2,
            IntSet::W32(_) => 4,
            IntSet::W64(_) => 8,
        }
    }

    fn capacity_bytes(&self) -> usize {
        each_width!(self, v => v.capacity()) * self.width()
    }

    fn get(&self, i: usize) -> Option<i64> {
        match self {
            IntSet::W16(v) => v.get(i).map(|&x| i64::from(x)),
            IntSet::W32(v) => v.get(i).map(|&x| i64::from(x)),
            IntSet::W64(v) => v.get(i).copied(),
        }
    }

    /// Position of `n`, if present.
    fn find(&self, n: i64) -> Option<usize> {
        // A value wider than the current encoding cannot be present.
        match self {
            IntSet::W16(v) => v.binary_search(&i16::try_from(n).ok()?).ok(),
            IntSet::W32(v) => v.binary_search(&i32::try_from(n).ok()?).ok(),
            IntSet::W64(v) => v.binary_search(&n).ok(),
        }
    }

    fn contains(&self, n: i64) -> bool {
        self.find(n).is_some()
    }

    /// Adds `n`; false if it was already there. Widens the encoding first
    /// when `n` does not fit it.
    fn insert(&mut self, n: i64) -> bool {
        let fits = match self {
            IntSet::W16(_) => i16::try_from(n).is_ok(),
            IntSet::W32(_) => i32::try_from(n).is_ok(),
            IntSet::W64(_) => true,
        };
        if !fits {
            self.upgrade_for(n);
        }
        // The casts are exact: the width now holds `n`.
        match self {
            IntSet::W16(v) => insert_sorted(v, n as i16),
            IntSet::W32(v) => insert_sorted(v, n as i32),
            IntSet::W64(v) => insert_sorted(v, n),
        }
    }

    /// Re-encodes every element in the narrowest width holding `n` too
    /// (Redis `_intsetValueEncoding` + `intsetUpgradeAndAdd`).
    fn upgrade_for(&mut self, n: i64) {
        let want = if i32::try_from(n).is_ok() { 4 } else { 8 };
        if want <= self.width() {
            return;
        }
        let len = self.len();
        *self = if want == 4 {
            let mut out = Vec::with_capacity(len + 1);
            if let IntSet::W16(v) = self {
                out.extend(v.iter().map(|&x| i32::from(x)));
            }
            IntSet::W32(out)
        } else {
            let mut out = Vec::with_capacity(len + 1);
            out.extend(self.iter());
            IntSet::W64(out)
        };
    }

    fn remove(&mut self, n: i64) -> bool {
        match self.find(n) {
            Some(i) => {
                self.remove_at(i);
                true
            }
            None => false,
        }
    }

    fn remove_at(&mut self, i: usize) {
        each_width!(self, v => {
            v.remove(i);
            maybe_shrink(v);
        })
    }

    fn iter(&self) -> IntIter<'_> {
        match self {
            IntSet::W16(v) => IntIter::W16(v.iter()),
            IntSet::W32(v) => IntIter::W32(v.iter()),
            IntSet::W64(v) => IntIter::W64(v.iter()),
        }
    }
}

/// Inserts `x` into the sorted `v` unless present; true if inserted.
fn insert_sorted<T: Ord>(v: &mut Vec<T>, x: T) -> bool {
    match v.binary_search(&x) {
        Ok(_) => false,
        Err(pos) => {
            v.insert(pos, x);
            true
        }
    }
}

/// Ascending iterator over an intset, widening to i64.
#[derive(Clone)]
enum IntIter<'a> {
    W16(std::slice::Iter<'a, i16>),
    W32(std::slice::Iter<'a, i32>),
    W64(std::slice::Iter<'a, i64>),
}

impl Iterator for IntIter<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        match self {
            IntIter::W16(it) => it.next().map(|&x| i64::from(x)),
            IntIter::W32(it) => it.next().map(|&x| i64::from(x)),
            IntIter::W64(it) => it.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            IntIter::W16(it) => it.len(),
            IntIter::W32(it) => it.len(),
            IntIter::W64(it) => it.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for IntIter<'_> {}

// ---------------------------------------------------------------------------
// hashtable

/// Longest member kept inline in its slot.
const INLINE_CAP: usize = 22;

/// A member of a hashtable-encoded set: inline up to [`INLINE_CAP`] bytes,
/// else on the heap. 24 bytes either way.
#[derive(Clone)]
enum Member {
    Inline { len: u8, buf: [u8; INLINE_CAP] },
    Heap(Box<[u8]>),
}

const _: () = assert!(std::mem::size_of::<Member>() == 24);

impl Member {
    fn new(b: &[u8]) -> Member {
        if b.len() <= INLINE_CAP {
            let mut buf = [0u8; INLINE_CAP];
            buf[..b.len()].copy_from_slice(b);
            Member::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            Member::Heap(b.into())
        }
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            Member::Inline { len, buf } => &buf[..usize::from(*len)],
            Member::Heap(b) => b,
        }
    }

    /// Bytes this member holds outside its slot.
    fn heap_len(&self) -> usize {
        match self {
            Member::Inline { .. } => 0,
            Member::Heap(b) => b.len(),
        }
    }
}

impl fmt::Debug for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// One process-wide seeded hasher for every set: random per process (hash
/// flooding needs the seed), free per set.
static HASHER: LazyLock<hashbrown::DefaultHashBuilder> = LazyLock::new(Default::default);

fn hash(b: &[u8]) -> u64 {
    HASHER.hash_one(b)
}

/// Positions in `members` are stored as u32 to halve the index; a set
/// would need over 4 billion members (hundreds of GiB) to exceed it.
type Pos = u32;

/// The hashtable encoding: members in a dense vector, looked up through a
/// table of their positions.
#[derive(Clone, Debug, Default)]
struct TableSet {
    members: Vec<Member>,
    index: HashTable<Pos>,
    /// Sum of `Member::heap_len`, so `mem_bytes` is O(1).
    heap_bytes: usize,
}

fn pos(i: usize) -> Pos {
    Pos::try_from(i).expect("a set holds fewer than 2^32 members")
}

impl TableSet {
    fn with_capacity(n: usize) -> TableSet {
        TableSet {
            members: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
            heap_bytes: 0,
        }
    }

    fn len(&self) -> usize {
        self.members.len()
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        let members = &self.members;
        self.index
            .find(hash(m), |&p| members[p as usize].as_bytes() == m)
            .map(|&p| p as usize)
    }

    fn contains(&self, m: &[u8]) -> bool {
        self.find(m).is_some()
    }

    /// Adds `m`; false if it was already there.
    fn insert(&mut self, m: &[u8]) -> bool {
        let TableSet {
            members,
            index,
            heap_bytes,
        } = self;
        let entry = index.entry(
            hash(m),
            |&p| members[p as usize].as_bytes() == m,
            |&p| hash(members[p as usize].as_bytes()),
        );
        match entry {
            TableEntry::Occupied(_) => false,
            TableEntry::Vacant(slot) => {
                slot.insert(pos(members.len()));
                let member = Member::new(m);
                *heap_bytes += member.heap_len();
                members.push(member);
                true
            }
        }
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        let members = &self.members;
        match self
            .index
            .find_entry(hash(m), |&p| members[p as usize].as_bytes() == m)
        {
            Ok(found) => {
                let (p, _) = found.remove();
                self.remove_slot(p as usize);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes the member at position `i` (index entry included).
    fn remove_at(&mut self, i: usize) {
        let Some(m) = self.members.get(i) else {
            return;
        };
        if let Ok(found) = self
            .index
            .find_entry(hash(m.as_bytes()), |&p| p as usize == i)
        {
            found.remove();
        }
        self.remove_slot(i);
    }

    /// Drops the member at `i`, whose index entry is already gone, moving
    /// the last member into its place and repointing that one's entry.
    fn remove_slot(&mut self, i: usize) {
        let last = self.members.len() - 1;
        if i != last {
            let moved = hash(self.members[last].as_bytes());
            if let Some(p) = self.index.find_mut(moved, |&p| p as usize == last) {
                *p = pos(i);
            }
        }
        let gone = self.members.swap_remove(i);
        self.heap_bytes -= gone.heap_len();
        self.shrink_if_sparse();
    }

    fn shrink_if_sparse(&mut self) {
        maybe_shrink(&mut self.members);
        let len = self.members.len();
        if self.index.capacity() > 64 && len * 10 < self.index.capacity() {
            let members = &self.members;
            self.index
                .shrink_to(len * 2, |&p| hash(members[p as usize].as_bytes()));
        }
    }

    fn mem_bytes(&self) -> usize {
        self.members.capacity() * std::mem::size_of::<Member>()
            + self.index.allocation_size()
            + self.heap_bytes
    }
}

// ---------------------------------------------------------------------------
// The set

#[derive(Clone, Debug)]
enum Repr {
    Ints(IntSet),
    Table(TableSet),
}

/// A set value. See the module docs for the encodings.
#[derive(Clone, Debug)]
pub struct SetValue(Repr);

impl Default for SetValue {
    fn default() -> Self {
        SetValue::new()
    }
}

impl SetValue {
    /// An empty intset (Redis `createIntsetObject`), which is how the
    /// STORE commands start their result.
    pub fn new() -> Self {
        SetValue(Repr::Ints(IntSet::default()))
    }

    /// An empty set in the encoding that can hold `first` (Redis
    /// `setTypeCreate`): an intset for an integer, else a hashtable. The
    /// caller then adds `first` and the rest; creating a key this way is
    /// what SADD and SMOVE do.
    pub fn for_member(first: &[u8]) -> Self {
        if num::parse_i64(first).is_some() {
            SetValue::new()
        } else {
            SetValue(Repr::Table(TableSet::default()))
        }
    }

    /// A set of `members` (duplicates allowed), encoded as SADD on a new
    /// key would leave it: created for the first member, then added one by
    /// one with conversions at `max_intset` (`set-max-intset-entries`).
    pub fn from_members<'a>(
        members: impl IntoIterator<Item = &'a [u8]>,
        max_intset: usize,
    ) -> Self {
        let mut members = members.into_iter().peekable();
        let mut s = match members.peek() {
            Some(first) => SetValue::for_member(first),
            None => SetValue::new(),
        };
        for m in members {
            s.add(m, max_intset);
        }
        s
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Ints(i) => i.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's answer, with Redis 7.0's names.
    pub fn encoding(&self) -> &'static str {
        match &self.0 {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_intset(&self) -> bool {
        matches!(self.0, Repr::Ints(_))
    }

    /// Size of Redis's intset blob for this set (header plus elements at
    /// the current width), None for a hashtable. RDB saves an intset as this
    /// blob, so DEBUG OBJECT's serializedlength depends on it.
    pub fn intset_blob_len(&self) -> Option<usize> {
        match &self.0 {
            Repr::Ints(i) => Some(INTSET_HEADER + i.len() * i.width()),
            Repr::Table(_) => None,
        }
    }

    /// Approximate heap bytes held (not counting `size_of::<SetValue>()`),
    /// for MEMORY USAGE. O(1).
    pub fn mem_bytes(&self) -> usize {
        match &self.0 {
            Repr::Ints(i) => INTSET_HEADER + i.capacity_bytes(),
            Repr::Table(t) => t.mem_bytes(),
        }
    }

    /// SISMEMBER: an intset only holds canonical integers, so anything
    /// else is absent without a search.
    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.0 {
            Repr::Ints(i) => num::parse_i64(m).is_some_and(|n| i.contains(n)),
            Repr::Table(t) => t.contains(m),
        }
    }

    /// Like `contains`, for a member taken from another set.
    pub fn contains_elem(&self, e: Elem) -> bool {
        match (&self.0, e) {
            (Repr::Ints(i), Elem::Int(n)) => i.contains(n),
            (_, Elem::Bytes(b)) => self.contains(b),
            (Repr::Table(t), Elem::Int(n)) => t.contains(itoa::Buffer::new().format(n).as_bytes()),
        }
    }

    /// SADD of one member (Redis `setTypeAdd`); true if it is new. An
    /// intset turns into a hashtable before a non-integer is added, and
    /// after an integer is added if it then holds more than `max_intset`
    /// members (capped at 2^30).
    pub fn add(&mut self, m: &[u8], max_intset: usize) -> bool {
        if let Repr::Ints(_) = self.0 {
            match num::parse_i64(m) {
                Some(n) => return self.add_int(n, max_intset),
                None => self.convert_to_table(),
            }
        }
        match &mut self.0 {
            Repr::Table(t) => t.insert(m),
            // Unreachable: converted above.
            Repr::Ints(_) => false,
        }
    }

    /// `add` of a member taken from another set.
    pub fn add_elem(&mut self, e: Elem, max_intset: usize) -> bool {
        match e {
            Elem::Int(n) => self.add_int(n, max_intset),
            Elem::Bytes(b) => self.add(b, max_intset),
        }
    }

    fn add_int(&mut self, n: i64, max_intset: usize) -> bool {
        match &mut self.0 {
            Repr::Ints(i) => {
                if !i.insert(n) {
                    return false;
                }
                if i.len() > intset_cap(max_intset) {
                    self.convert_to_table();
                }
                true
            }
            Repr::Table(t) => t.insert(itoa::Buffer::new().format(n).as_bytes()),
        }
    }

    /// SREM of one member; true if it was there. Never changes the
    /// encoding; the caller deletes a key whose set became empty.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Ints(i) => num::parse_i64(m).is_some_and(|n| i.remove(n)),
            Repr::Table(t) => t.remove(m),
        }
    }

    /// `remove` of a member taken from another set.
    pub fn remove_elem(&mut self, e: Elem) -> bool {
        match (&mut self.0, e) {
            (_, Elem::Bytes(b)) => self.remove(b),
            (Repr::Ints(i), Elem::Int(n)) => i.remove(n),
            (Repr::Table(t), Elem::Int(n)) => t.remove(itoa::Buffer::new().format(n).as_bytes()),
        }
    }

    /// The member at position `i` of [`iter`](Self::iter) order. O(1).
    pub fn get(&self, i: usize) -> Option<Elem<'_>> {
        match &self.0 {
            Repr::Ints(s) => s.get(i).map(Elem::Int),
            Repr::Table(t) => t.members.get(i).map(|m| Elem::Bytes(m.as_bytes())),
        }
    }

    /// A position chosen uniformly at random, None for an empty set. O(1)
    /// for both encodings (Redis: `intsetRandom`, `dictGetFairRandomKey`).
    pub fn random_index(&self) -> Option<usize> {
        match self.len() {
            0 => None,
            n => Some(rand::random_range(0..n)),
        }
    }

    /// A member chosen uniformly at random (SRANDMEMBER, SPOP).
    pub fn random(&self) -> Option<Elem<'_>> {
        self.random_index().and_then(|i| self.get(i))
    }

    /// Removes the member at position `i` (see [`get`](Self::get)); other
    /// members may change position. O(1) for a hashtable, O(n) for an
    /// intset, as in Redis.
    pub fn remove_at(&mut self, i: usize) {
        if i >= self.len() {
            return;
        }
        match &mut self.0 {
            Repr::Ints(s) => s.remove_at(i),
            Repr::Table(t) => t.remove_at(i),
        }
    }

    /// Every member: ascending for an intset (what Redis's iterator gives),
    /// storage order for a hashtable.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Repr::Ints(i) => Iter(IterInner::Ints(i.iter())),
            Repr::Table(t) => Iter(IterInner::Table(t.members.iter())),
        }
    }

    /// One SSCAN step: calls `f` for the members visited from `cursor` and
    /// returns the next cursor, 0 when done.
    ///
    /// Intset: everything at once and cursor 0, whatever `cursor` is, as
    /// Redis does.
    ///
    /// Hashtable: walks positions from the end of the dense vector towards
    /// the front, `count` per call (0 counts as 1); the cursor is the
    /// number of positions still to visit (0 to start: all of them). A
    /// removal moves only the last member, into the hole, so a member not
    /// yet visited stays below the cursor, and one present for the whole
    /// scan is returned (Redis's guarantee); a member moved from the
    /// visited end into the unvisited part may come back twice, which SCAN
    /// allows; members added during the scan may or may not be returned.
    /// O(count) per call.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(Elem<'a>)) -> u64 {
        match &self.0 {
            Repr::Ints(i) => {
                i.iter().for_each(|n| f(Elem::Int(n)));
                0
            }
            Repr::Table(t) => {
                let len = t.len();
                let start = match usize::try_from(cursor) {
                    Ok(0) => len,
                    Ok(c) => c.min(len),
                    Err(_) => len,
                };
                let end = start.saturating_sub(count.max(1));
                for m in t.members[end..start].iter().rev() {
                    f(Elem::Bytes(m.as_bytes()));
                }
                end as u64
            }
        }
    }

    /// Switches to the hashtable encoding (no-op if already there),
    /// presized as Redis's `setTypeConvert` presizes its dict.
    pub fn convert_to_table(&mut self) {
        if let Repr::Ints(i) = &self.0 {
            let mut t = TableSet::with_capacity(i.len());
            for n in i.iter() {
                t.insert(itoa::Buffer::new().format(n).as_bytes());
            }
            self.0 = Repr::Table(t);
        }
    }
}

/// Iterator returned by [`SetValue::iter`].
#[derive(Clone)]
pub struct Iter<'a>(IterInner<'a>);

#[derive(Clone)]
enum IterInner<'a> {
    Ints(IntIter<'a>),
    Table(std::slice::Iter<'a, Member>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Elem<'a>;

    fn next(&mut self) -> Option<Elem<'a>> {
        match &mut self.0 {
            IterInner::Ints(it) => it.next().map(Elem::Int),
            IterInner::Table(it) => it.next().map(|m| Elem::Bytes(m.as_bytes())),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IterInner::Ints(it) => it.size_hint(),
            IterInner::Table(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashSet};

    fn bytes(s: &SetValue) -> Vec<Vec<u8>> {
        s.iter().map(Elem::to_vec).collect()
    }

    fn ints(s: &SetValue) -> Vec<i64> {
        s.iter().map(|e| e.as_int().unwrap()).collect()
    }

    fn width(s: &SetValue) -> usize {
        match &s.0 {
            Repr::Ints(i) => i.width(),
            Repr::Table(_) => 0,
        }
    }

    #[test]
    fn member_layout() {
        for len in [0, 1, 21, 22, 23, 100] {
            let b: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let m = Member::new(&b);
            assert_eq!(m.as_bytes(), &b[..]);
            assert_eq!(m.heap_len(), if len > INLINE_CAP { len } else { 0 });
        }
    }

    #[test]
    fn elem_equality_and_bytes() {
        assert_eq!(Elem::Int(5), Elem::Bytes(b"5"));
        assert_eq!(Elem::Bytes(b"-12"), Elem::Int(-12));
        assert_ne!(Elem::Int(5), Elem::Bytes(b"05"));
        assert_ne!(Elem::Bytes(b"a"), Elem::Bytes(b"b"));
        assert_eq!(Elem::Int(i64::MIN).to_vec(), b"-9223372036854775808");
        assert_eq!(Elem::Bytes(b"x").as_int(), None);
        assert_eq!(Elem::Bytes(b"77").as_int(), Some(77));
    }

    #[test]
    fn intset_widths_grow_and_stay_sorted() {
        let mut s = SetValue::new();
        assert_eq!((s.encoding(), width(&s)), ("intset", 2));
        assert!(s.add(b"5", 512));
        assert!(s.add(b"-3", 512));
        assert!(!s.add(b"5", 512));
        assert_eq!(width(&s), 2);
        assert!(s.add(b"32768", 512));
        assert_eq!(width(&s), 4);
        assert!(s.add(b"-2147483649", 512));
        assert_eq!(width(&s), 8);
        assert_eq!(ints(&s), vec![-2147483649, -3, 5, 32768]);
        // Removing the wide value does not narrow the encoding (Redis).
        assert!(s.remove(b"-2147483649"));
        assert!(s.remove(b"32768"));
        assert_eq!((ints(&s), width(&s)), (vec![-3, 5], 8));
        assert_eq!(s.intset_blob_len(), Some(8 + 2 * 8));
        assert!(s.add(b"9223372036854775807", 512));
        assert!(s.add(b"-9223372036854775808", 512));
        assert_eq!(
            bytes(&s),
            vec![
                b"-9223372036854775808".to_vec(),
                b"-3".to_vec(),
                b"5".to_vec(),
                b"9223372036854775807".to_vec()
            ]
        );
        // Values that do not fit the current width are not members.
        let mut small = SetValue::new();
        small.add(b"1", 512);
        assert!(!small.contains(b"100000"));
        assert!(!small.remove(b"100000"));
        assert!(!small.contains_elem(Elem::Int(i64::MAX)));
    }

    #[test]
    fn non_canonical_integers_convert() {
        for m in [
            &b"01"[..],
            b"-0",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"9223372036854775808",
            b"1.0",
        ] {
            let mut s = SetValue::new();
            s.add(b"1", 512);
            assert!(s.add(m, 512), "{m:?}");
            assert_eq!(s.encoding(), "hashtable", "{m:?}");
            assert!(s.contains(m));
            assert!(s.contains(b"1"));
            assert!(s.contains_elem(Elem::Int(1)));
            assert_eq!(SetValue::for_member(m).encoding(), "hashtable");
        }
        assert_eq!(SetValue::for_member(b"-7").encoding(), "intset");
    }

    #[test]
    fn conversion_at_the_limit() {
        let mut s = SetValue::new();
        for i in 0..4 {
            assert!(s.add(i.to_string().as_bytes(), 4));
        }
        assert_eq!(s.encoding(), "intset");
        // An existing member changes nothing.
        assert!(!s.add(b"3", 4));
        assert_eq!(s.encoding(), "intset");
        assert!(s.add(b"4", 4));
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 5);
        // Never back, even when small and all-integer again.
        for i in 0..4 {
            assert!(s.remove(i.to_string().as_bytes()));
        }
        assert_eq!((s.len(), s.encoding()), (1, "hashtable"));
        assert!(s.contains_elem(Elem::Int(4)));
        // Limit 0: the first integer converts.
        let mut z = SetValue::new();
        z.add(b"1", 0);
        assert_eq!(z.encoding(), "hashtable");
        // A huge limit is capped at 2^30 (checked without building one).
        assert_eq!(intset_cap(usize::MAX), 1 << 30);
        assert_eq!(intset_cap(512), 512);
    }

    #[test]
    fn from_members_like_sadd() {
        let s = SetValue::from_members([&b"3"[..], b"1", b"2", b"1"], 512);
        assert_eq!((s.encoding(), ints(&s)), ("intset", vec![1, 2, 3]));
        let s = SetValue::from_members([&b"a"[..], b"1"], 512);
        assert_eq!((s.encoding(), s.len()), ("hashtable", 2));
        let s = SetValue::from_members([&b"1"[..], b"2", b"3"], 2);
        assert_eq!(s.encoding(), "hashtable");
        let s = SetValue::from_members(std::iter::empty(), 2);
        assert!(s.is_empty());
    }

    #[test]
    fn table_remove_keeps_index_consistent() {
        let mut s = SetValue::for_member(b"x");
        for i in 0..1000 {
            assert!(s.add(format!("m{i}").as_bytes(), 512));
        }
        for i in (0..1000).step_by(3) {
            assert!(s.remove(format!("m{i}").as_bytes()));
        }
        for i in 0..1000 {
            assert_eq!(s.contains(format!("m{i}").as_bytes()), i % 3 != 0, "m{i}");
        }
        // Pop from random positions until empty: every lookup stays right.
        let mut left: HashSet<Vec<u8>> = bytes(&s).into_iter().collect();
        while let Some(i) = s.random_index() {
            let m = s.get(i).unwrap().to_vec();
            s.remove_at(i);
            assert!(left.remove(&m));
            assert!(!s.contains(&m));
            assert_eq!(s.len(), left.len());
        }
        assert!(left.is_empty());
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.mem_bytes() < 64 * 40, "shrunk: {}", s.mem_bytes());
    }

    #[test]
    fn long_members_and_memory() {
        let mut s = SetValue::for_member(b"x");
        let long = vec![b'L'; 1000];
        s.add(&long, 512);
        assert!(s.mem_bytes() >= 1000);
        assert!(s.contains(&long));
        s.remove(&long);
        assert!(s.mem_bytes() < 1000);
        let i = SetValue::from_members([&b"1"[..], b"2"], 512);
        assert!(i.mem_bytes() >= INTSET_HEADER + 4);
    }

    fn scan_all(s: &SetValue, count: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = s.scan(cursor, count, |e| out.push(e.to_vec()));
            if cursor == 0 {
                return out;
            }
        }
    }

    #[test]
    fn intset_scan_is_one_shot_and_sorted() {
        let s = SetValue::from_members([&b"3"[..], b"-1", b"2"], 512);
        let mut out = Vec::new();
        assert_eq!(s.scan(12345, 1, |e| out.push(e.to_vec())), 0);
        assert_eq!(out, vec![b"-1".to_vec(), b"2".to_vec(), b"3".to_vec()]);
    }

    #[test]
    fn table_scan_sees_everything_once_without_changes() {
        let mut s = SetValue::for_member(b"x");
        for i in 0..257 {
            s.add(format!("m{i}").as_bytes(), 512);
        }
        for count in [0, 1, 7, 256, 257, 1000] {
            let got = scan_all(&s, count);
            let uniq: HashSet<_> = got.iter().cloned().collect();
            assert_eq!((got.len(), uniq.len()), (257, 257), "count {count}");
        }
        // A stale cursor beyond the end is clamped.
        let mut n = 0;
        assert_eq!(s.scan(u64::MAX, 1000, |_| n += 1), 0);
        assert_eq!(n, 257);
    }

    #[test]
    fn table_scan_guarantee_under_churn() {
        let mut s = SetValue::for_member(b"x");
        for i in 0..300 {
            s.add(format!("stable{i}").as_bytes(), 512);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = s.scan(cursor, 5, |e| {
                seen.insert(e.to_vec());
            });
            // Churn: add some, remove some others (never a stable one).
            for j in 0..7 {
                s.add(format!("churn{round}-{j}").as_bytes(), 512);
            }
            if round > 0 {
                for j in 0..7 {
                    s.remove(format!("churn{}-{j}", round - 1).as_bytes());
                }
            }
            round += 1;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..300 {
            assert!(seen.contains(format!("stable{i}").as_bytes()), "stable{i}");
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(Vec<u8>),
        Remove(Vec<u8>),
        PopAt(usize),
        Has(Vec<u8>),
    }

    fn member() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            // Small integers: hits and intset work.
            6 => (-20i64..20).prop_map(|n| n.to_string().into_bytes()),
            // Extreme integers: width upgrades.
            1 => prop::sample::select(vec![
                i64::MIN, i64::MAX, -32769, 32768, -2147483649, 2147483648
            ]).prop_map(|n| n.to_string().into_bytes()),
            // Non-canonical integers and strings: conversions.
            1 => prop::sample::select(vec!["01", "-0", "+1", "a", "", "1 "])
                .prop_map(|s| s.as_bytes().to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 0..30),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => member().prop_map(Op::Add),
            3 => member().prop_map(Op::Remove),
            1 => any::<usize>().prop_map(Op::PopAt),
            2 => member().prop_map(Op::Has),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random adds, removes and positional pops against a BTreeSet,
        /// checking contents, order (sorted while an intset), encoding
        /// (Redis's rules at limit 6), random access and a full scan.
        #[test]
        fn behaves_like_a_set(ops in proptest::collection::vec(op(), 0..120)) {
            const LIMIT: usize = 6;
            let mut s = SetValue::new();
            let mut model: BTreeSet<Vec<u8>> = BTreeSet::new();
            let mut converted = false;
            for op in ops {
                match op {
                    Op::Add(m) => {
                        let fresh = !model.contains(&m);
                        prop_assert_eq!(s.add(&m, LIMIT), fresh);
                        if num::parse_i64(&m).is_none() {
                            converted = true;
                        }
                        model.insert(m);
                        if model.len() > LIMIT {
                            converted = true;
                        }
                    }
                    Op::Remove(m) => {
                        prop_assert_eq!(s.remove(&m), model.remove(&m));
                    }
                    Op::PopAt(i) => {
                        if !model.is_empty() {
                            let i = i % model.len();
                            let m = s.get(i).unwrap().to_vec();
                            s.remove_at(i);
                            prop_assert!(model.remove(&m));
                        }
                    }
                    Op::Has(m) => {
                        prop_assert_eq!(s.contains(&m), model.contains(&m));
                        if let Some(n) = num::parse_i64(&m) {
                            prop_assert_eq!(s.contains_elem(Elem::Int(n)), model.contains(&m));
                        }
                    }
                }
                prop_assert_eq!(s.len(), model.len());
                prop_assert_eq!(s.encoding(), if converted { "hashtable" } else { "intset" });
                let got = bytes(&s);
                if s.is_intset() {
                    let mut want: Vec<i64> =
                        model.iter().map(|m| num::parse_i64(m).unwrap()).collect();
                    want.sort_unstable();
                    prop_assert_eq!(ints(&s), want);
                } else {
                    let got: BTreeSet<Vec<u8>> = got.iter().cloned().collect();
                    prop_assert_eq!(&got, &model);
                }
                prop_assert_eq!(got.len(), model.len());
                for (i, m) in got.iter().enumerate() {
                    let at = s.get(i).map(Elem::to_vec);
                    prop_assert_eq!(at.as_ref(), Some(m));
                }
                prop_assert!(s.get(model.len()).is_none());
                let scanned: BTreeSet<Vec<u8>> = scan_all(&s, 3).into_iter().collect();
                prop_assert_eq!(&scanned, &model);
                if let Some(r) = s.random() {
                    prop_assert!(model.contains(&r.to_vec()));
                }
                // A clone is equal and independent.
                let c = s.clone();
                prop_assert_eq!(bytes(&c), bytes(&s));
            }
        }

        /// Converting keeps every member; adds and removes by `Elem` agree
        /// with the byte forms.
        #[test]
        fn elem_forms_agree(ns in proptest::collection::vec(-1000i64..1000, 0..40)) {
            let mut a = SetValue::new();
            let mut b = SetValue::for_member(b"x");
            b.remove(b"x");
            for &n in &ns {
                let text = n.to_string();
                prop_assert_eq!(a.add_elem(Elem::Int(n), 512), b.add(text.as_bytes(), 512));
            }
            let mut c = a.clone();
            c.convert_to_table();
            prop_assert_eq!(c.len(), a.len());
            for &n in &ns {
                prop_assert!(c.contains_elem(Elem::Int(n)));
                prop_assert!(b.contains_elem(Elem::Int(n)));
            }
            for &n in &ns {
                let first = c.remove_elem(Elem::Int(n));
                prop_assert_eq!(a.remove_elem(Elem::Bytes(n.to_string().as_bytes())), first);
            }
            prop_assert!(a.is_empty() && c.is_empty());
        }
    }
}
