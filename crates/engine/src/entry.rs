//! A stored key: its bytes, its value, its expire time and access metadata.
//!
//! The expire time lives with the key (no second table, unlike Redis's
//! `expires` dict), so a key with a TTL costs no extra index slot. A key
//! is stored in one of two forms (docs/design.md, "Memory layout"):
//!
//! - an `Entry`: one 80-byte block (a jemalloc size class) holding the
//!   metadata, the value header and a key of up to 23 bytes inline
//!   (`KeyBuf`), for every value;
//! - a compact block (`crate::compact`): metadata, key and the bytes of a
//!   small plain string in ONE allocation, for the commonest cache key.
//!
//! Both start with the same 24-byte `Meta`, so everything that only needs
//! expiry and access data reads it without caring which form it has.
//! `Ref` borrows either form, `Owned` owns either; code that wants a full
//! `&mut Entry` gets one by materializing a compact block (`Table::at_mut`).
use crate::compact::{Block, CRef, Meta};
use crate::value::{Kind, StrValue, Value};

use crate::util::smallbytes::SmallBytes as KeyBuf;

/// Longest key stored inside the entry.
pub const INLINE_KEY_MAX: usize = crate::util::smallbytes::INLINE_MAX;

/// One key and everything stored with it. `repr(C)` so the layout drawn in
/// docs/design.md ("Memory layout") is the real one: meta at 0 (expire_at
/// 0, access 8, hash 12, freq 16), value at 24, key at 56..80; 80 bytes.
/// `Deref` to `Meta` gives `e.access`, `e.freq`, `e.expire_at()`, ...
#[derive(Debug)]
#[repr(C)]
pub struct Entry {
    pub(crate) meta: Meta,
    pub value: Value,
    key: KeyBuf,
}

impl std::ops::Deref for Entry {
    type Target = Meta;
    fn deref(&self) -> &Meta {
        &self.meta
    }
}

impl std::ops::DerefMut for Entry {
    fn deref_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }
}

impl Entry {
    pub fn new(key: &[u8], value: Value, expire_at: u64) -> Box<Entry> {
        Entry::with_meta(key, value, Meta::new(expire_at))
    }

    /// An entry carrying metadata from another form of the same key.
    pub(crate) fn with_meta(key: &[u8], value: Value, meta: Meta) -> Box<Entry> {
        Box::new(Entry {
            meta: meta.carried(),
            value,
            key: KeyBuf::new(key),
        })
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The same entry under another name (RENAME, MOVE).
    pub fn rekey(mut self: Box<Self>, key: &[u8]) -> Box<Entry> {
        if *self.key != *key {
            self.key = KeyBuf::new(key);
        }
        self
    }

    /// A copy of the value and TTL under another name (COPY). Access
    /// metadata starts fresh, as for any new key.
    pub fn duplicate(&self, key: &[u8], value: Value) -> Box<Entry> {
        Entry::new(key, value, self.expire_at())
    }

    /// Heap bytes held by this entry: the entry block, a key longer than
    /// `INLINE_KEY_MAX` and the value (MEMORY USAGE). Requested sizes:
    /// jemalloc rounds each block up to its size class.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Entry>() + self.key.heap_bytes() + self.value.mem_bytes()
    }
}

/// A compact block turned into a full entry (same key, value, metadata).
/// A tiered value is fetched here: every in-place edit brings it back to
/// RAM this way, and the block's drop frees its record.
pub(crate) fn materialize(c: CRef<'_>) -> Box<Entry> {
    crate::compact::count_materialized();
    let value = Value::Str(StrValue::Bytes {
        data: c.plain_vec(),
        raw: c.raw(),
    });
    Entry::with_meta(c.key(), value, *c.meta())
}

/// A string value borrowed from either form of key: the bytes of a compact
/// block, or a `StrValue` of an entry. GET and friends reply from it
/// without materializing anything.
#[derive(Clone, Copy, Debug)]
pub enum StrRef<'a> {
    Bytes(&'a [u8]),
    Value(&'a StrValue),
    /// A coded value (`value::zcomp`): decoded when its bytes are read.
    Coded(&'a [u8]),
    /// A value in the disk tier (`crate::tier`): its length is in the
    /// pointer, its bytes are fetched when read.
    Tiered {
        key: &'a [u8],
        ptr: crate::tier::Pointer,
    },
}

impl<'a> From<&'a StrValue> for StrRef<'a> {
    fn from(v: &'a StrValue) -> StrRef<'a> {
        StrRef::Value(v)
    }
}

impl StrRef<'_> {
    pub fn len(&self) -> usize {
        match self {
            StrRef::Bytes(b) => b.len(),
            StrRef::Value(v) => v.len(),
            StrRef::Coded(c) => crate::value::zcomp::plain_len(c),
            StrRef::Tiered { ptr, .. } => usize::from(ptr.plain_len),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            StrRef::Bytes(b) => f(b),
            StrRef::Value(v) => v.with_bytes(f),
            StrRef::Coded(c) => crate::value::zcomp::with_plain(c, f),
            StrRef::Tiered { key, ptr } => crate::tier::with_plain(key, *ptr, f),
        }
    }

    /// Appends the value's bytes to `out`; a coded value is decoded into it
    /// (no copy through a buffer of its own unless its codec needs one), and
    /// so is a tiered one a read command fetched beforehand.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self {
            StrRef::Coded(c) => crate::value::zcomp::decompress_into(c, out),
            StrRef::Tiered { key, ptr } => crate::tier::append_plain(key, *ptr, out),
            _ => self.with_bytes(|b| out.extend_from_slice(b)),
        }
    }

    /// A large string's shared buffer (`StrValue::share`); compact
    /// strings are small and never shared.
    pub fn share(&self) -> Option<crate::value::string::BigBytes> {
        match self {
            StrRef::Bytes(_) | StrRef::Coded(_) | StrRef::Tiered { .. } => None,
            StrRef::Value(v) => v.share(),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            StrRef::Coded(c) => crate::value::zcomp::decompress(c),
            StrRef::Tiered { key, ptr } => crate::tier::plain(key, *ptr),
            _ => self.with_bytes(|b| b.to_vec()),
        }
    }
}

/// A stored key borrowed in either form.
#[derive(Clone, Copy, Debug)]
pub enum Ref<'a> {
    Full(&'a Entry),
    Compact(CRef<'a>),
}

impl<'a> Ref<'a> {
    pub fn meta(&self) -> &'a Meta {
        match self {
            Ref::Full(e) => &e.meta,
            Ref::Compact(c) => c.meta(),
        }
    }

    pub fn key(&self) -> &'a [u8] {
        match self {
            Ref::Full(e) => e.key(),
            Ref::Compact(c) => c.key(),
        }
    }

    pub fn expire_at(&self) -> u64 {
        self.meta().expire_at()
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.meta().is_expired(now_ms)
    }

    pub fn idle_secs(&self) -> u64 {
        self.meta().idle_secs()
    }

    pub fn kind(&self) -> Kind {
        match self {
            Ref::Full(e) => e.value.kind(),
            Ref::Compact(_) => Kind::String,
        }
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            Ref::Full(e) => e.value.encoding(),
            Ref::Compact(c) if c.is_coded() => crate::value::zcomp::encoding(c.value()),
            Ref::Compact(c) if c.is_tiered() => TIERED_ENCODING,
            Ref::Compact(c) if c.raw() => "raw",
            Ref::Compact(_) => "embstr",
        }
    }

    /// The string held, None for another type.
    pub fn str(&self) -> Option<StrRef<'a>> {
        match self {
            Ref::Full(e) => match &e.value {
                Value::Str(s) => Some(StrRef::Value(s)),
                _ => None,
            },
            Ref::Compact(c) if c.is_coded() => Some(StrRef::Coded(c.value())),
            Ref::Compact(c) if c.is_tiered() => Some(StrRef::Tiered {
                key: c.key(),
                ptr: c.tier_ptr(),
            }),
            Ref::Compact(c) => Some(StrRef::Bytes(c.value())),
        }
    }

    /// The full value, when this is an `Entry`.
    pub fn value(&self) -> Option<&'a Value> {
        match self {
            Ref::Full(e) => Some(&e.value),
            Ref::Compact(_) => None,
        }
    }

    /// Heap bytes held by the key (MEMORY USAGE): for a compact block its
    /// exact requested size.
    pub fn mem_bytes(&self) -> usize {
        match self {
            Ref::Full(e) => e.mem_bytes(),
            Ref::Compact(c) => c.size(),
        }
    }

    /// True for a compact block.
    pub fn is_compact(&self) -> bool {
        matches!(self, Ref::Compact(_))
    }
}

/// A stored key owned in either form: what the table hands back when a
/// key leaves it (DEL, eviction, expiry, RENAME) and takes when one is put.
#[derive(Debug)]
pub enum Owned {
    Full(Box<Entry>),
    Compact(Block),
}

impl From<Box<Entry>> for Owned {
    fn from(e: Box<Entry>) -> Owned {
        Owned::Full(e)
    }
}

impl Owned {
    /// A new key holding the string `value`: a compact block when it fits
    /// (`compact::fits`), else an entry. `value` must not be an integer
    /// text the `int` encoding would take (the caller checked).
    pub fn string(key: &[u8], value: &[u8], raw: bool, meta: Meta) -> Owned {
        if crate::compact::fits(key.len(), value.len()) {
            Owned::Compact(Block::new(key, value, raw, meta))
        } else {
            Owned::Full(Entry::with_meta(
                key,
                Value::Str(StrValue::Bytes {
                    data: value.to_vec(),
                    raw,
                }),
                meta,
            ))
        }
    }

    /// A block's value under `key` with `meta`: a coded value stays coded
    /// (the copy takes a use of its dictionary), with no decode or re-code;
    /// a tiered value is read back into RAM (its record names the old key,
    /// and a pointer has one owner: the old block frees it).
    fn copy_block(c: CRef<'_>, key: &[u8], meta: Meta) -> Owned {
        if c.is_tiered() {
            return Owned::string(key, &c.plain_vec(), c.raw(), meta);
        }
        if c.is_pending() && crate::compact::fits(key.len(), c.value().len()) {
            // Still for the background coder under its new name.
            return Owned::Compact(Block::new_pending(key, c.value(), c.raw(), meta));
        }
        if !c.is_coded() {
            return Owned::string(key, c.value(), c.raw(), meta);
        }
        if crate::compact::fits(key.len(), c.value().len()) {
            crate::value::zcomp::retain(crate::value::zcomp::dict_id(c.value()));
            Owned::Compact(Block::new_coded(key, c.value(), meta))
        } else {
            // A key too long for a block: a plain entry.
            Owned::Full(Entry::with_meta(
                key,
                Value::Str(StrValue::Bytes {
                    data: c.plain_vec(),
                    raw: true,
                }),
                meta,
            ))
        }
    }

    pub fn as_ref(&self) -> Ref<'_> {
        match self {
            Owned::Full(e) => Ref::Full(e),
            Owned::Compact(b) => Ref::Compact(b.as_ref()),
        }
    }

    pub fn key(&self) -> &[u8] {
        self.as_ref().key()
    }

    pub fn expire_at(&self) -> u64 {
        self.as_ref().expire_at()
    }

    pub fn meta_mut(&mut self) -> &mut Meta {
        match self {
            Owned::Full(e) => &mut e.meta,
            Owned::Compact(b) => b.meta_mut(),
        }
    }

    /// The full entry, materializing a compact block.
    pub fn into_entry(self) -> Box<Entry> {
        match self {
            Owned::Full(e) => e,
            Owned::Compact(b) => materialize(b.as_ref()),
        }
    }

    /// The value, moved out of an entry or copied out of a block.
    pub fn into_value(self) -> Value {
        match self {
            Owned::Full(e) => e.value,
            Owned::Compact(b) => {
                let c = b.as_ref();
                Value::Str(StrValue::Bytes {
                    data: c.plain_vec(),
                    raw: c.raw(),
                })
            }
        }
    }

    /// The same key under another name (RENAME, MOVE), keeping value, TTL
    /// and access metadata. A compact block is rebuilt at its new size
    /// (still compact when the new name fits).
    pub fn rekey(self, key: &[u8]) -> Owned {
        match self {
            Owned::Full(e) => Owned::Full(e.rekey(key)),
            Owned::Compact(b) => {
                let c = b.as_ref();
                if c.key() == key {
                    return Owned::Compact(b);
                }
                Owned::copy_block(c, key, *c.meta())
            }
        }
    }

    /// `rekey` of a tiered block whose value the caller has read already
    /// (`plain`): the new key holds it in RAM and the old block, dropped
    /// here, frees its record.
    pub fn rekey_read(self, key: &[u8], plain: &[u8]) -> Owned {
        match &self {
            Owned::Compact(b) if b.as_ref().is_tiered() => {
                let c = b.as_ref();
                Owned::string(key, plain, c.raw(), *c.meta())
            }
            _ => self.rekey(key),
        }
    }

    /// A copy of the value and TTL under another name (COPY), with fresh
    /// access metadata and the same encoding.
    pub fn duplicate(r: Ref<'_>, key: &[u8]) -> Owned {
        match r {
            Ref::Full(e) => Owned::Full(e.duplicate(key, crate::ops::keys::clone_value(&e.value))),
            Ref::Compact(c) => Owned::copy_block(c, key, Meta::new(c.meta().expire_at())),
        }
    }

    /// Heap bytes held (MEMORY USAGE, lazyfree effort decisions).
    pub fn mem_bytes(&self) -> usize {
        self.as_ref().mem_bytes()
    }
}

/// OBJECT ENCODING of a zstd-compressed string (Redis has no such
/// encoding: tests/diff/DIFFERENCES.md); an lz4 one answers `lz4`
/// (`value::zcomp::encoding`).
pub const CODED_ENCODING: &str = "zstd";

/// OBJECT ENCODING of a string whose value is in the disk tier (Redis has
/// no such encoding: tests/diff/DIFFERENCES.md).
pub const TIERED_ENCODING: &str = "tiered";

/// Redis's initial LFU counter, so new keys are not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::StrValue;

    #[test]
    fn entry_is_one_small_block() {
        // jemalloc's 80-byte class holds key, value and metadata, laid out
        // as docs/design.md draws it.
        assert_eq!(std::mem::size_of::<Entry>(), 80);
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::size_of::<KeyBuf>(), 24);
        // The shared metadata prefix first, so a slot's pointer reads it
        // the same way for an entry and for a compact block.
        assert_eq!(std::mem::offset_of!(Entry, meta), 0);
        assert_eq!(std::mem::size_of::<Meta>(), crate::compact::HEADER);
        assert_eq!(std::mem::offset_of!(Entry, value), 24);
        assert_eq!(std::mem::offset_of!(Entry, key), 56);
        assert_eq!(std::mem::size_of::<crate::value::HashValue>(), 32);
    }

    #[test]
    fn keys_inline_and_on_the_heap() {
        let v = || Value::Str(StrValue::from_bytes(b"v"));
        for n in [0usize, 1, 22, 23, 24, 100, 70_000] {
            let key: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let e = Entry::new(&key, v(), 0);
            assert_eq!(e.key(), &key[..]);
            let inline = n <= INLINE_KEY_MAX;
            assert_eq!(e.key.heap_bytes(), if inline { 0 } else { n });
            // Renaming across the inline bound both ways.
            let e = e.rekey(b"short");
            assert_eq!(e.key(), b"short");
            let e = e.rekey(&key);
            assert_eq!(e.key(), &key[..]);
            let d = e.duplicate(b"copy-with-a-name-longer-than-23", v());
            assert_eq!(d.key(), b"copy-with-a-name-longer-than-23");
            assert_eq!(e.key(), &key[..]);
        }
    }
}
