//! Compact string entries: a key holding a small plain string stored as
//! ONE variable-size heap block (header, key bytes, value bytes) instead of
//! an 80-byte `Entry` plus the value's own buffer. This is the only module
//! with the block's unsafe code; see docs/design.md, "Memory layout".
//!
//! Layout of a block (`repr(C)`, 8-byte aligned, `HEADER` = 24 bytes):
//!
//! ```text
//!  0  expire_at u64   \
//!  8  access    u32    |  `Meta`: the same 24-byte prefix starts every
//! 12  hash      u32    |  `Entry`, so the table, eviction, expiry, SCAN
//! 16  freq      u8     |  and LRU/LFU read it through either kind of
//! 17  flags     u8     |  pointer without knowing which it is
//! 18  klen      u8     |  (compact blocks only; 0 in an `Entry`)
//! 19  (pad)     u8     |
//! 20  vlen      u32   /
//! 24  key bytes [klen], then value bytes [vlen]
//! ```
//!
//! A block is allocated and freed through the global allocator with the
//! exact `Layout` (`HEADER + klen + vlen`, align 8), so jemalloc's
//! used-memory accounting sees it like any other allocation, and
//! MEMORY USAGE reports `HEADER + klen + vlen` as the requested size.
//!
//! A 13-byte key and a 100-byte value need 137 bytes: jemalloc's 160-byte
//! class, against 80 (entry) + 112 (value buffer) = 192 as two blocks.
use crate::value::string::LARGE_MIN;
use std::alloc::Layout;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes before the key in a compact block (and the `Meta` prefix of an
/// `Entry`).
pub const HEADER: usize = 24;

/// Longest key a compact block holds (its length is one byte).
pub const KEY_MAX: usize = 255;

/// A value of `LARGE_MIN` bytes or more is a shared `Large` string instead.
pub const VALUE_MAX: usize = LARGE_MIN - 1;

/// `Meta::flags`: this header starts a compact block.
pub(crate) const FLAG_COMPACT: u8 = 1;
/// `Meta::flags`: the string's Redis encoding is `raw` (else `embstr`).
pub(crate) const FLAG_RAW: u8 = 2;
/// `Meta::flags`: the value bytes are a coded value (`value::zcomp`),
/// which holds a use of its dictionary until the block is freed.
pub(crate) const FLAG_ZSTD: u8 = 4;
/// `Meta::flags`: the value is in the disk tier; the value bytes are a
/// `tier::Pointer` (16 bytes), which holds the record until the block is
/// freed (docs/design.md, "The disk tier").
pub(crate) const FLAG_TIERED: u8 = 8;
/// `Meta::flags`: a plain value the background coder is to code
/// (`crate::zcoder`; counted there from the block's creation to its drop
/// or coding).
pub(crate) const FLAG_PENDING: u8 = 16;

/// Key metadata shared by both kinds of stored key: the prefix of every
/// `Entry` and every compact block.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct Meta {
    /// Unix milliseconds after which the key is gone; 0 means no expiry.
    pub(crate) expire_at: u64,
    /// Seconds on the engine's LRU clock at the last access (OBJECT
    /// IDLETIME); under LFU, the counter's last decrement time.
    pub access: u32,
    /// Low 32 bits of the key's hash, set by the table that holds the key:
    /// its slots keep only a pointer and a 16-bit tag, and find a key's
    /// home bucket here when they move it (resize, deletion).
    pub(crate) hash: u32,
    /// Logarithmic access counter for LFU (OBJECT FREQ).
    pub freq: u8,
    pub(crate) flags: u8,
    klen: u8,
    _pad: u8,
    vlen: u32,
}

impl Meta {
    /// Fresh metadata for a new key: LRU time now, Redis's initial LFU count.
    pub fn new(expire_at: u64) -> Meta {
        Meta {
            expire_at,
            access: crate::clock::lru_secs(),
            hash: 0,
            freq: crate::entry::LFU_INIT_VAL,
            flags: 0,
            klen: 0,
            _pad: 0,
            vlen: 0,
        }
    }

    pub fn expire_at(&self) -> u64 {
        self.expire_at
    }

    /// True once `now_ms` is past the expire time (Redis: `now > when`).
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && now_ms > self.expire_at
    }

    /// Only the table may change this, because it counts volatile keys.
    pub(crate) fn set_expire_at_raw(&mut self, at: u64) {
        self.expire_at = at;
    }

    /// A new value for an old key: LRU time starts now, LFU counter kept.
    pub fn restart_access(&mut self) {
        self.access = crate::clock::lru_secs();
    }

    /// Records an access: the LFU counter under an LFU policy, else the
    /// LRU time (Redis updates one or the other, never both: `lookupKey`).
    pub fn touch(&mut self, lfu: bool) {
        if lfu {
            // Under LFU, `access` is the counter's last decrement time
            // (Redis keeps its "ldt" in the same field).
            self.freq = crate::evict::lfu_on_access(self.freq, self.access);
        }
        self.access = crate::clock::lru_secs();
    }

    /// Seconds since the last access.
    pub fn idle_secs(&self) -> u64 {
        crate::clock::lru_secs().wrapping_sub(self.access) as u64
    }

    /// The metadata part that moves with a key into a new block or entry:
    /// everything but the compact-block fields.
    pub(crate) fn carried(&self) -> Meta {
        Meta {
            flags: 0,
            klen: 0,
            vlen: 0,
            ..*self
        }
    }
}

/// Blocks turned into full entries since start (a write that edits a
/// compact string, or a caller that asked for `&mut Entry`). Tests use it
/// to prove the read and SET paths never do.
static MATERIALIZED: AtomicU64 = AtomicU64::new(0);

/// See `MATERIALIZED`.
pub fn materialized() -> u64 {
    MATERIALIZED.load(Ordering::Relaxed)
}

pub(crate) fn count_materialized() {
    MATERIALIZED.fetch_add(1, Ordering::Relaxed);
}

/// True if a plain string value of `vlen` bytes under a key of `klen`
/// bytes may be stored as a compact block. Integers are not: they keep
/// the `int` encoding (no buffer at all).
pub fn fits(klen: usize, vlen: usize) -> bool {
    klen <= KEY_MAX && vlen <= VALUE_MAX
}

fn layout(klen: usize, vlen: usize) -> Layout {
    debug_assert!(fits(klen, vlen));
    // Cannot fail: at most 24 + 255 + 32767 bytes, align 8.
    Layout::from_size_align(HEADER + klen + vlen, 8).expect("compact layout")
}

/// An owned compact block. Dropping it frees the block.
pub struct Block(NonNull<Meta>);

// SAFETY: a block is plain bytes owned by this handle alone.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Block {
    /// A new block holding `key` and `value`, with `meta`'s expire time
    /// and access fields. Panics (like any allocation) only on OOM.
    pub fn new(key: &[u8], value: &[u8], raw: bool, meta: Meta) -> Block {
        Block::with_flags(key, value, if raw { FLAG_RAW } else { 0 }, meta)
    }

    /// A new block holding a coded value (`value::zcomp`). The block takes
    /// over one use of the value's dictionary: the caller took it
    /// (`zcomp::compress`, or `zcomp::retain` for a copy).
    pub fn new_coded(key: &[u8], coded: &[u8], meta: Meta) -> Block {
        crate::value::zcomp::note_stored(coded);
        Block::with_flags(key, coded, FLAG_RAW | FLAG_ZSTD, meta)
    }

    /// A new block whose value is in the disk tier at `ptr`. The block
    /// takes over the record (freed with the block) and the use of the
    /// pointer's dictionary (the caller took it). `raw` keeps the
    /// encoding bit the value had, for when it is brought back.
    pub fn new_tiered(key: &[u8], ptr: crate::tier::Pointer, raw: bool, meta: Meta) -> Block {
        crate::tier::note_tiered(ptr);
        let raw = if raw { FLAG_RAW } else { 0 };
        Block::with_flags(key, &ptr.to_bytes(), raw | FLAG_TIERED, meta)
    }

    /// A new block holding a plain value for the background coder.
    pub fn new_pending(key: &[u8], value: &[u8], raw: bool, meta: Meta) -> Block {
        crate::zcoder::note_pending(value.len());
        let raw = if raw { FLAG_RAW } else { 0 };
        Block::with_flags(key, value, raw | FLAG_PENDING, meta)
    }

    fn with_flags(key: &[u8], value: &[u8], flags: u8, meta: Meta) -> Block {
        assert!(fits(key.len(), value.len()), "compact bounds");
        let lay = layout(key.len(), value.len());
        // SAFETY: the layout has a nonzero size (at least HEADER).
        let p = unsafe { std::alloc::alloc(lay) };
        let Some(p) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(lay);
        };
        let header = Meta {
            flags: FLAG_COMPACT | flags,
            klen: key.len() as u8,
            _pad: 0,
            vlen: value.len() as u32,
            ..meta
        };
        // SAFETY: the block is `lay.size()` bytes, 8-aligned: the header
        // fits at 0, the key right after it and the value after the key.
        unsafe {
            p.as_ptr().cast::<Meta>().write(header);
            let data = p.as_ptr().add(HEADER);
            std::ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), data.add(key.len()), value.len());
        }
        Block(p.cast())
    }

    pub fn as_ref(&self) -> CRef<'_> {
        CRef(self.0, PhantomData)
    }

    pub fn meta_mut(&mut self) -> &mut Meta {
        // SAFETY: the block starts with an initialized header, and `&mut
        // self` makes this the only access.
        unsafe { self.0.as_mut() }
    }

    /// Gives up ownership: the address goes into a table slot.
    pub(crate) fn into_raw(self) -> *mut Meta {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }

    /// Takes back a block given up by `into_raw`.
    ///
    /// # Safety
    /// `p` must come from `into_raw` and not have been taken back before.
    pub(crate) unsafe fn from_raw(p: *mut Meta) -> Block {
        debug_assert!(!p.is_null() && (*p).flags & FLAG_COMPACT != 0);
        Block(NonNull::new_unchecked(p))
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        let c = self.as_ref();
        if c.is_coded() {
            crate::value::zcomp::note_freed(c.value());
        } else if c.is_tiered() {
            crate::tier::release(c.tier_ptr());
        } else if c.is_pending() {
            crate::zcoder::note_unpending(c.value().len());
        }
        let lay = layout(c.key().len(), c.value().len());
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { std::alloc::dealloc(self.0.as_ptr().cast(), lay) }
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// A borrowed compact block.
#[derive(Clone, Copy)]
pub struct CRef<'a>(NonNull<Meta>, PhantomData<&'a Meta>);

impl<'a> CRef<'a> {
    /// # Safety
    /// `p` must point to a live compact block that outlives `'a` and is
    /// not written meanwhile.
    pub(crate) unsafe fn from_raw(p: *const Meta) -> CRef<'a> {
        debug_assert!((*p).flags & FLAG_COMPACT != 0);
        CRef(NonNull::new_unchecked(p as *mut Meta), PhantomData)
    }

    pub fn meta(&self) -> &'a Meta {
        // SAFETY: a live block starts with an initialized header.
        unsafe { &*self.0.as_ptr() }
    }

    fn data(&self) -> *const u8 {
        // SAFETY: the key starts HEADER bytes into the block. The pointer
        // keeps the whole block's provenance (not the header reference's).
        unsafe { self.0.as_ptr().cast::<u8>().add(HEADER) }
    }

    pub fn key(&self) -> &'a [u8] {
        let m = self.meta();
        // SAFETY: `klen` key bytes follow the header (written in `new`).
        unsafe { std::slice::from_raw_parts(self.data(), m.klen as usize) }
    }

    pub fn value(&self) -> &'a [u8] {
        let m = self.meta();
        // SAFETY: `vlen` value bytes follow the key (written in `new`).
        unsafe { std::slice::from_raw_parts(self.data().add(m.klen as usize), m.vlen as usize) }
    }

    /// Redis's encoding bit: `raw` rather than `embstr`.
    pub fn raw(&self) -> bool {
        self.meta().flags & FLAG_RAW != 0
    }

    /// The value bytes are a coded value (`value::zcomp`), not the string.
    pub fn is_coded(&self) -> bool {
        self.meta().flags & FLAG_ZSTD != 0
    }

    /// A plain value waiting for the background coder.
    pub fn is_pending(&self) -> bool {
        self.meta().flags & FLAG_PENDING != 0
    }

    /// The value is in the disk tier: the value bytes are its pointer.
    pub fn is_tiered(&self) -> bool {
        self.meta().flags & FLAG_TIERED != 0
    }

    /// The pointer of a tiered block.
    pub fn tier_ptr(&self) -> crate::tier::Pointer {
        debug_assert!(self.is_tiered());
        crate::tier::Pointer::from_bytes(self.value())
    }

    /// The string's bytes: borrowed, decoded when coded, fetched from the
    /// disk tier when tiered.
    pub fn with_plain<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.is_coded() {
            crate::value::zcomp::with_plain(self.value(), f)
        } else if self.is_tiered() {
            crate::tier::with_plain(self.key(), self.tier_ptr(), f)
        } else {
            f(self.value())
        }
    }

    /// The string's length (a coded value's from its header, a tiered
    /// one's from its pointer: no I/O).
    pub fn plain_len(&self) -> usize {
        if self.is_coded() {
            crate::value::zcomp::plain_len(self.value())
        } else if self.is_tiered() {
            usize::from(self.tier_ptr().plain_len)
        } else {
            self.value().len()
        }
    }

    /// The string's bytes, copied (decoded when coded, fetched when
    /// tiered).
    pub fn plain_vec(&self) -> Vec<u8> {
        if self.is_coded() {
            crate::value::zcomp::decompress(self.value())
        } else if self.is_tiered() {
            crate::tier::plain(self.key(), self.tier_ptr())
        } else {
            self.value().to_vec()
        }
    }

    /// The block's requested size (MEMORY USAGE).
    pub fn size(&self) -> usize {
        let m = self.meta();
        HEADER + m.klen as usize + m.vlen as usize
    }
}

impl std::fmt::Debug for CRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compact")
            .field("meta", self.meta())
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value_len", &self.value().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_the_drawn_one() {
        assert_eq!(std::mem::size_of::<Meta>(), HEADER);
        assert_eq!(std::mem::align_of::<Meta>(), 8);
        assert_eq!(std::mem::offset_of!(Meta, expire_at), 0);
        assert_eq!(std::mem::offset_of!(Meta, access), 8);
        assert_eq!(std::mem::offset_of!(Meta, hash), 12);
        assert_eq!(std::mem::offset_of!(Meta, freq), 16);
        assert_eq!(std::mem::offset_of!(Meta, flags), 17);
        assert_eq!(std::mem::offset_of!(Meta, klen), 18);
        assert_eq!(std::mem::offset_of!(Meta, vlen), 20);
        // The hit-ratio bench's key: 13 + 100 bytes fit jemalloc's 160 class.
        const { assert!(HEADER + 13 + 100 <= 160) };
    }

    #[test]
    fn blocks_hold_key_value_and_meta_at_the_bounds() {
        for (kl, vl) in [
            (0, 0),
            (1, 0),
            (0, 1),
            (13, 100),
            (255, 0),
            (255, VALUE_MAX),
            (23, 44),
        ] {
            let key: Vec<u8> = (0..kl).map(|i| (i * 3) as u8).collect();
            let val: Vec<u8> = (0..vl).map(|i| (i * 7) as u8).collect();
            let mut m = Meta::new(1234);
            m.freq = 9;
            m.hash = 77;
            let mut b = Block::new(&key, &val, vl % 2 == 1, m);
            let r = b.as_ref();
            assert_eq!(r.key(), &key[..]);
            assert_eq!(r.value(), &val[..]);
            assert_eq!(r.raw(), vl % 2 == 1);
            assert_eq!(r.size(), HEADER + kl + vl);
            assert_eq!(r.meta().expire_at(), 1234);
            assert_eq!((r.meta().freq, r.meta().hash), (9, 77));
            b.meta_mut().set_expire_at_raw(5);
            assert_eq!(b.as_ref().meta().expire_at(), 5);
            assert_eq!(b.as_ref().value(), &val[..]);
            // Through a raw round trip, as a table slot holds it.
            let p = b.into_raw();
            // SAFETY: `p` came from `into_raw` just above.
            let b = unsafe { Block::from_raw(p) };
            assert_eq!(b.as_ref().key(), &key[..]);
            assert_eq!(b.as_ref().meta().carried().flags, 0);
        }
        assert!(fits(KEY_MAX, VALUE_MAX));
        assert!(!fits(KEY_MAX + 1, 0));
        assert!(!fits(0, VALUE_MAX + 1));
    }
}
