//! One database's slice of one shard: an open-addressing hash table with
//! linear probing and backward-shift deletion.
//!
//! Why not `hashbrown`: SCAN must return every key that is present for the
//! whole scan even while the table grows or shrinks between calls. Redis gets
//! that from power-of-two tables and a reverse-binary cursor over buckets
//! (dict.c, `dictScan`). The same argument holds for linear probing when the
//! cursor walks *home* buckets: every entry whose home is `b` sits in the run
//! of occupied slots that starts at `b`, because insertion takes the first free
//! slot at or after the home and backward-shift deletion never moves an entry
//! before its home. So a home bucket can be visited in full, and the
//! reverse-binary order gives Redis's guarantee across resizes.
//!
//! A slot is 8 bytes: the entry's address in the low 48 bits and a 16-bit
//! tag (bits 32..48 of the key's hash) in the high 16, so most probes that
//! land on another key are rejected without touching its entry; 0 is an
//! empty slot. The home bucket comes from the low 32 bits of the hash, kept
//! in the entry (`Entry::hash`), and is read only when an entry moves. The
//! table never holds more than 3/4 of its slots, and shrinks below 1/10 as
//! Redis's dict does, which also keeps random sampling cheap.
//!
//! Why the address fits in 48 bits: user-space addresses on x86-64 and
//! aarch64 Linux are below 2^47 (2^48 with 52-bit VA only on request via
//! an mmap hint, which jemalloc does not give); `pack` checks it.
//!
//! A slot's lowest address bit tells which form the key has (`entry`): 0
//! for a `Box<Entry>`, 1 for a compact block (both are 8-byte aligned, so
//! the bit is free). Both forms start with the same `Meta`, so reading a
//! home bucket, an expire time or access data needs no branch on it. The
//! next bit (`TIERED`) marks a compact block whose value is in the disk
//! tier, so the tier's cursor (`walk_untiered`) passes the keys it already
//! moved without touching their blocks: a block's tiered flag is fixed
//! when it is made, and every block enters a slot through `raw_of`.
use crate::compact::{Block, CRef, Meta};
use crate::entry::{Entry, Owned, Ref};

const MIN_SLOTS: usize = 8;

const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;
/// The address bit that marks a compact block.
const COMPACT: u64 = 1;
/// The address bit that marks a compact block holding a tier pointer.
const TIERED: u64 = 2;
/// Both marks: what is not address.
const MARKS: u64 = COMPACT | TIERED;

/// An 8-byte slot: 0 (empty) or `tag << 48 | address | compact bit`.
type Slot = u64;

fn tag_of(hash: u64) -> u64 {
    (hash >> 32) & 0xffff
}

/// A hint that `p` will be read soon; never faults, whatever `p` is.
#[inline]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing a program can see and
    // does not fault on any address.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Turns an owned key into a slot, taking ownership of it.
fn pack(hash: u64, owned: Owned) -> Slot {
    let addr = raw_of(owned);
    assert!(
        addr & !ADDR_MASK == 0 && addr & !MARKS != 0,
        "entry address above 2^48"
    );
    addr | (tag_of(hash) << ADDR_BITS)
}

/// The address (with the compact bit) of an owned key, given up.
fn raw_of(owned: Owned) -> u64 {
    match owned {
        Owned::Full(e) => {
            let a = Box::into_raw(e) as u64;
            debug_assert!(a & COMPACT == 0);
            a
        }
        Owned::Compact(b) => {
            let tiered = if b.as_ref().is_tiered() { TIERED } else { 0 };
            b.into_raw() as u64 | COMPACT | tiered
        }
    }
}

/// The metadata every occupied slot points at (offset 0 of either form).
fn meta_ptr(slot: Slot) -> *mut Meta {
    (slot & ADDR_MASK & !MARKS) as usize as *mut Meta
}

fn ptr_of(slot: Slot) -> *mut Entry {
    debug_assert!(slot & COMPACT == 0);
    (slot & ADDR_MASK) as usize as *mut Entry
}

/// Takes ownership back from a slot.
///
/// # Safety
/// `slot` must be occupied and owned by the caller, and taken back once.
unsafe fn unpack(slot: Slot) -> Owned {
    if slot & COMPACT != 0 {
        Owned::Compact(Block::from_raw(meta_ptr(slot)))
    } else {
        Owned::Full(Box::from_raw(ptr_of(slot)))
    }
}

/// Borrows the key a slot holds.
///
/// # Safety
/// `slot` must be occupied by a key that outlives `'a` unchanged.
unsafe fn borrow<'a>(slot: Slot) -> Ref<'a> {
    if slot & COMPACT != 0 {
        Ref::Compact(CRef::from_raw(meta_ptr(slot)))
    } else {
        Ref::Full(&*ptr_of(slot))
    }
}

/// The keys of one database that hash to one shard. Owns its entries.
#[derive(Default)]
pub struct Table {
    // A boxed slice and u32 counts keep the header at 24 bytes: every
    // shard holds one table per database (16,384 of them by default),
    // which is most of an empty keyspace's memory. A table never holds
    // 2^32 keys (that would be hundreds of GB in one shard's database).
    slots: Box<[Slot]>,
    len: u32,
    volatile: u32,
}

impl Drop for Table {
    fn drop(&mut self) {
        for &s in &self.slots {
            if s != 0 {
                // SAFETY: every nonzero slot holds a key this table owns.
                drop(unsafe { unpack(s) });
            }
        }
    }
}

impl Table {
    /// Number of keys, expired-but-not-yet-removed ones included.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of keys that carry an expire time.
    pub fn volatile(&self) -> usize {
        self.volatile as usize
    }

    /// Heap bytes held by the index itself (not the entries).
    pub fn index_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn entry(&self, i: usize) -> Option<Ref<'_>> {
        let s = self.slots[i];
        // SAFETY: a nonzero slot points to a live key owned by the table,
        // and `&self` keeps it from being removed meanwhile.
        (s != 0).then(|| unsafe { borrow(s) })
    }

    fn home(&self, i: usize) -> usize {
        let s = self.slots[i];
        // SAFETY: as in `meta`.
        let h = if s == 0 {
            0
        } else {
            unsafe { (*meta_ptr(s)).hash }
        };
        h as usize & self.mask()
    }

    /// Asks the CPU to bring the home slot of `hash` toward the cache:
    /// the first of `Guard::prefetch`'s passes over a batch of keys.
    pub fn prefetch_home(&self, hash: u64) {
        if let Some(s) = self.slots.get(hash as u32 as usize & self.mask_or_zero()) {
            prefetch(std::ptr::from_ref(s).cast());
        }
    }

    /// The second pass: the entry in the home slot of `hash`, if its tag
    /// matches (the key itself, or a key sharing its tag; a key further
    /// along the probe run is not fetched ahead).
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(&s) = self.slots.get(hash as u32 as usize & self.mask_or_zero()) {
            if s != 0 && s >> ADDR_BITS == tag_of(hash) {
                prefetch(meta_ptr(s).cast_const().cast());
            }
        }
    }

    fn mask_or_zero(&self) -> usize {
        self.slots.len().saturating_sub(1)
    }

    /// Slot index of `key`, if present.
    pub fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let tag = tag_of(hash);
        let mask = self.mask();
        let mut i = hash as u32 as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> ADDR_BITS == tag && self.entry(i).is_some_and(|e| e.key() == key) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    pub fn at(&self, i: usize) -> Ref<'_> {
        self.entry(i).expect("slot index came from find")
    }

    /// The metadata of the key in slot `i`, for access tracking. Its
    /// expire time must change through `set_expire_at` (volatile count).
    pub fn meta_mut(&mut self, i: usize) -> &mut Meta {
        let s = self.slots[i];
        assert!(s != 0, "slot index came from find");
        // SAFETY: as in `meta`, and `&mut self` makes the access unique.
        unsafe { &mut *meta_ptr(s) }
    }

    /// The full entry in slot `i`, materializing a compact block first:
    /// every caller that edits a value in place works on either form.
    pub fn at_mut(&mut self, i: usize) -> &mut Entry {
        let s = self.slots[i];
        assert!(s != 0, "slot index came from find");
        if s & COMPACT != 0 {
            // The entry is made from the block while the slot still owns
            // it: a tiered value's read can fail (a panic the command's
            // guard catches), and the key must then be as it was.
            // SAFETY: the slot holds a live block, unchanged meanwhile.
            let entry = crate::entry::materialize(unsafe { CRef::from_raw(meta_ptr(s)) });
            let addr = Box::into_raw(entry) as u64;
            self.slots[i] = (s & !ADDR_MASK) | addr;
            // SAFETY: the slot owned the block and now holds the entry made
            // from it (same key: same hash, tag and home); freed once.
            drop(unsafe { unpack(s) });
        }
        // SAFETY: as in `entry`, and `&mut self` makes the access unique.
        unsafe { &mut *ptr_of(self.slots[i]) }
    }

    /// Inserts a key known to be absent; returns its slot.
    pub fn insert_new(&mut self, hash: u64, entry: impl Into<Owned>) -> usize {
        let mut entry = entry.into();
        entry.meta_mut().hash = hash as u32;
        if (self.len as usize + 1) * 4 > self.slots.len() * 3 {
            let cap = (self.slots.len() * 2).max(MIN_SLOTS);
            self.resize(cap);
        }
        if entry.expire_at() != 0 {
            self.volatile += 1;
        }
        self.len += 1;
        self.place(pack(hash, entry))
    }

    /// Puts an occupied slot at the first free place from its home.
    fn place(&mut self, slot: Slot) -> usize {
        let mask = self.mask();
        // SAFETY: `slot` is occupied and owned by this table.
        let home = unsafe { (*meta_ptr(slot)).hash } as usize;
        let mut i = home & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
        i
    }

    /// Removes the entry at slot `i` and returns it. Shrinks if sparse.
    pub fn remove_at(&mut self, i: usize) -> Owned {
        let e = self.take_at(i);
        self.maybe_shrink();
        e
    }

    /// Removes without shrinking, so slot positions of other entries in the
    /// same run stay meaningful to a caller that is walking the run.
    fn take_at(&mut self, i: usize) -> Owned {
        let mask = self.mask();
        let s = std::mem::take(&mut self.slots[i]);
        assert!(s != 0, "remove_at on an occupied slot");
        // SAFETY: the slot owned this key; it is now out of the table.
        let entry = unsafe { unpack(s) };
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.slots[j] != 0 {
            let home = self.home(j);
            // The entry at j may fill the hole unless its home lies
            // cyclically in (hole, j]: moving it before its home would hide it.
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots.swap(hole, j);
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.len -= 1;
        if entry.expire_at() != 0 {
            self.volatile -= 1;
        }
        entry
    }

    /// Shrinks a sparse table; an empty one gives its slot array back
    /// (the next insert allocates it again), so emptied tables cost only
    /// their header.
    fn maybe_shrink(&mut self) {
        if self.len == 0 {
            if !self.slots.is_empty() {
                self.slots = Box::default();
            }
        } else if self.slots.len() > MIN_SLOTS && self.len() * 10 < self.slots.len() {
            let cap = (self.len() * 2).next_power_of_two().max(MIN_SLOTS);
            self.resize(cap);
        }
    }

    fn resize(&mut self, cap: usize) {
        debug_assert!(cap.is_power_of_two() && cap * 3 >= self.len() * 4);
        let old = std::mem::replace(&mut self.slots, vec![0; cap].into_boxed_slice());
        for slot in old {
            if slot != 0 {
                self.place(slot);
            }
        }
    }

    /// Sets the expire time of the entry at slot `i` (0 clears it), keeping
    /// the count of volatile keys right.
    pub fn set_expire_at(&mut self, i: usize, at_ms: u64) {
        let e = self.meta_mut(i);
        let was = e.expire_at() != 0;
        e.set_expire_at_raw(at_ms);
        match (was, at_ms != 0) {
            (false, true) => self.volatile += 1,
            (true, false) => self.volatile -= 1,
            _ => {}
        }
    }

    /// Replaces the entry at slot `i` (same key), returning the old one.
    pub fn replace_at(&mut self, i: usize, entry: impl Into<Owned>) -> Owned {
        let mut entry = entry.into();
        let new_volatile = entry.expire_at() != 0;
        let s = self.slots[i];
        assert!(s != 0, "replace_at on occupied");
        // SAFETY: the slot owned this key; the new one takes its place
        // (same key, so same hash and tag).
        let old = unsafe { unpack(s) };
        entry.meta_mut().hash = old.as_ref().meta().hash;
        self.slots[i] = (s & !ADDR_MASK) | (raw_of(entry) & ADDR_MASK);
        match (old.expire_at() != 0, new_volatile) {
            (false, true) => self.volatile += 1,
            (true, false) => self.volatile -= 1,
            _ => {}
        }
        old
    }

    /// Visits every entry whose home bucket is `cursor & mask` and returns
    /// the next cursor in reverse-binary order, 0 when the walk is complete.
    /// `visit` may not remove entries; see `retain_bucket` for that.
    pub fn scan_bucket(&self, cursor: u64, mut visit: impl FnMut(Ref<'_>)) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        let mask = self.mask();
        let b = cursor as usize & mask;
        let mut i = b;
        while let Some(e) = self.entry(i) {
            if e.meta().hash as usize & mask == b {
                visit(e);
            }
            i = (i + 1) & mask;
            if i == b {
                break;
            }
        }
        next_cursor(cursor, mask as u64)
    }

    /// Like `scan_bucket`, but removes the entries for which `drop_it`
    /// answers true, returning them through `removed`.
    pub fn retain_bucket(
        &mut self,
        cursor: u64,
        mut drop_it: impl FnMut(Ref<'_>) -> bool,
        mut removed: impl FnMut(Owned),
    ) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        let mask = self.mask();
        let b = cursor as usize & mask;
        let mut i = b;
        let mut steps = 0;
        while self.slots[i] != 0 && steps <= mask {
            if self.home(i) == b && drop_it(self.at(i)) {
                // Backward shift may pull a later member of this run into
                // slot i, so look at i again rather than moving on.
                removed(self.take_at(i));
                continue;
            }
            i = (i + 1) & mask;
            steps += 1;
        }
        let next = next_cursor(cursor, mask as u64);
        self.maybe_shrink();
        next
    }

    /// A uniformly chosen occupied slot, or None if empty.
    pub fn random_slot(&self, mut rand: impl FnMut() -> u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        loop {
            let i = rand() as usize & mask;
            if self.slots[i] != 0 {
                return Some(i);
            }
        }
    }

    /// Every entry, in slot order. Each entry is a separate allocation, so
    /// a walk over a table is a walk of cache misses; the entry a few
    /// slots ahead is prefetched while this one is read. Measured on a
    /// compaction (perf): without it ~95% of the dump loop's own time was
    /// the first load of each entry; with it three compactions of 200k
    /// keys, a 1M-element list and a 100k-field hash took ~800 samples
    /// against 1,077.
    pub fn iter(&self) -> impl Iterator<Item = Ref<'_>> {
        (0..self.slots.len()).filter_map(move |i| {
            if let Some(&ahead) = self.slots.get(i + crate::util::PREFETCH_AHEAD) {
                if ahead != 0 {
                    // The metadata and, for most small keys, the key and
                    // value: two lines.
                    let p = meta_ptr(ahead) as *const u8;
                    crate::util::prefetch(p);
                    crate::util::prefetch(p.wrapping_add(64));
                }
            }
            self.entry(i)
        })
    }

    /// Removes everything, returning the old contents so the caller can drop
    /// them outside its lock.
    pub fn take_all(&mut self) -> Table {
        std::mem::take(self)
    }
}

/// Redis's reverse-binary cursor increment (dict.c): set the bits above the
/// mask, reverse, add one, reverse back. Buckets of a larger or smaller table
/// are then visited in an order that never skips a bucket already due.
fn next_cursor(cursor: u64, mask: u64) -> u64 {
    let v = cursor | !mask;
    v.reverse_bits().wrapping_add(1).reverse_bits()
}

/// Eviction sampling (issue 5), kept apart from the table's core so
/// layout changes above merge cleanly.
impl Table {
    /// Number of slots (occupied or not).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The metadata in slot `i`, if that slot is occupied.
    pub fn slot_mut(&mut self, i: usize) -> Option<&mut Meta> {
        let s = *self.slots.get(i)?;
        if s == 0 {
            return None;
        }
        Some(self.meta_mut(i))
    }

    /// The key in slot `i`, if that slot is occupied.
    pub fn slot(&self, i: usize) -> Option<Ref<'_>> {
        if i >= self.slots.len() {
            return None;
        }
        self.entry(i)
    }

    /// The disk tier's cursor: visits the occupied slots from `from` that
    /// hold keys in RAM (not tiered blocks, which are passed by their
    /// slot's mark without touching them), at most `max_steps` slots,
    /// until `visit` answers false. Returns where the walk stopped (the
    /// slot after the last visited), `capacity()` at the end of the table.
    pub fn walk_untiered(
        &self,
        from: usize,
        max_steps: usize,
        mut visit: impl FnMut(Ref<'_>) -> bool,
    ) -> usize {
        let end = from.saturating_add(max_steps).min(self.slots.len());
        let mut i = from;
        while i < end {
            let s = self.slots[i];
            i += 1;
            if s != 0 && s & TIERED == 0 {
                // SAFETY: as in `entry`.
                if !visit(unsafe { borrow(s) }) {
                    break;
                }
            }
        }
        i.max(from)
    }

    /// Walks at most `max_steps` consecutive slots from slot `start` (taken
    /// modulo the capacity, wrapping), calling `visit` on each occupied one
    /// until it answers false. Consecutive slots hold keys of unrelated
    /// hashes, so this samples like Redis's `dictGetSomeKeys` (which walks
    /// consecutive buckets) at one cache-friendly pass.
    pub fn sample_walk(
        &self,
        start: u64,
        max_steps: usize,
        mut visit: impl FnMut(Ref<'_>) -> bool,
    ) {
        if self.len == 0 {
            return;
        }
        let mask = self.mask();
        let mut i = start as usize & mask;
        for _ in 0..max_steps.min(self.slots.len()) {
            if let Some(e) = self.entry(i) {
                if !visit(e) {
                    return;
                }
            }
            i = (i + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{StrValue, Value};
    use std::collections::{BTreeSet, HashMap};

    fn entry(key: &[u8], at: u64) -> Box<Entry> {
        Entry::new(key, Value::Str(StrValue::from_bytes(b"v")), at)
    }

    fn hash(k: &[u8]) -> u64 {
        // A deliberately weak hash puts many keys in one run, which is where
        // backward-shift deletion and bucket scans can go wrong.
        let h = k.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
        });
        h & 0xffff_0000_0000_00ff
    }

    #[test]
    fn insert_find_remove_against_model() {
        let mut t = Table::default();
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut seed = 7u64;
        for step in 0..20_000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("k{}", (seed >> 33) % 600).into_bytes();
            let h = hash(&k);
            match (seed >> 20) % 3 {
                0 | 1 => {
                    if t.find(h, &k).is_none() {
                        t.insert_new(h, entry(&k, step % 2));
                        model.insert(k, step % 2);
                    }
                }
                _ => {
                    if let Some(i) = t.find(h, &k) {
                        t.remove_at(i);
                        model.remove(&k);
                    }
                }
            }
            assert_eq!(t.len(), model.len());
        }
        for (k, at) in &model {
            let i = t.find(hash(k), k).expect("present");
            assert_eq!(t.at(i).expire_at(), *at);
        }
        assert_eq!(t.volatile(), model.values().filter(|a| **a != 0).count());
        assert_eq!(t.iter().count(), model.len());
    }

    #[test]
    fn scan_sees_every_stable_key_across_resizes() {
        let mut t = Table::default();
        let stable: Vec<Vec<u8>> = (0..300).map(|i| format!("s{i}").into_bytes()).collect();
        for k in &stable {
            t.insert_new(hash(k), entry(k, 0));
        }
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut round = 0u32;
        loop {
            cursor = t.scan_bucket(cursor, |e| {
                seen.insert(e.key().to_vec());
            });
            // Churn between calls: grow the table a lot, then shrink it back.
            round += 1;
            if round.is_multiple_of(7) {
                for j in 0..500 {
                    let k = format!("t{round}-{j}").into_bytes();
                    t.insert_new(hash(&k), entry(&k, 0));
                }
            } else if round % 7 == 3 {
                let victims: Vec<Vec<u8>> = t
                    .iter()
                    .filter(|e| e.key().starts_with(b"t"))
                    .map(|e| e.key().to_vec())
                    .collect();
                for k in victims {
                    let i = t.find(hash(&k), &k).unwrap();
                    t.remove_at(i);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for k in &stable {
            assert!(
                seen.contains(k),
                "scan missed {:?}",
                String::from_utf8_lossy(k)
            );
        }
    }

    #[test]
    fn slot_array_exists_only_while_keys_do() {
        // The header every (shard, database) pays even when empty.
        assert_eq!(std::mem::size_of::<Table>(), 24);
        let mut t = Table::default();
        assert_eq!(t.index_bytes(), 0);
        let keys: Vec<Vec<u8>> = (0..100).map(|i| format!("k{i}").into_bytes()).collect();
        for k in &keys {
            t.insert_new(hash(k), entry(k, 0));
        }
        assert!(t.index_bytes() >= 100 * 8);
        for k in &keys {
            let i = t.find(hash(k), k).unwrap();
            t.remove_at(i);
        }
        assert_eq!(t.index_bytes(), 0, "emptied table keeps its slots");
        // Compact blocks and entries side by side, moved by growth.
        for (n, k) in keys.iter().enumerate() {
            let m = crate::compact::Meta::new(0);
            let o = if n % 2 == 0 {
                Owned::string(k, b"value", false, m)
            } else {
                Owned::Full(entry(k, 0))
            };
            t.insert_new(hash(k), o);
        }
        for (n, k) in keys.iter().enumerate() {
            let i = t.find(hash(k), k).unwrap();
            assert_eq!(t.at(i).is_compact(), n % 2 == 0);
            assert_eq!(
                t.at(i).str().unwrap().to_vec(),
                if n % 2 == 0 { &b"value"[..] } else { b"v" }
            );
        }
        // Materializing keeps the key where it is, with its metadata.
        let i = t.find(hash(&keys[0]), &keys[0]).unwrap();
        t.meta_mut(i).freq = 42;
        assert_eq!(t.at_mut(i).freq, 42);
        assert!(!t.at(i).is_compact());
        assert_eq!(t.find(hash(&keys[0]), &keys[0]), Some(i));
        let old = t.take_all();
        assert_eq!(old.len(), 100);
        assert_eq!(t.index_bytes(), 0);
    }

    #[test]
    fn retain_bucket_removes_only_matching() {
        let mut t = Table::default();
        for i in 0..1000u64 {
            let k = format!("k{i}").into_bytes();
            t.insert_new(hash(&k), entry(&k, if i % 2 == 0 { 5 } else { 0 }));
        }
        let mut cursor = 0;
        let mut removed = 0;
        loop {
            cursor = t.retain_bucket(cursor, |e| e.expire_at() == 5, |_| removed += 1);
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(removed, 500);
        assert_eq!(t.len(), 500);
        assert_eq!(t.volatile(), 0);
        for i in (1..1000u64).step_by(2) {
            let k = format!("k{i}").into_bytes();
            assert!(t.find(hash(&k), &k).is_some());
        }
    }
}
