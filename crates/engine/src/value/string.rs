//! String values: integers stored as i64, other bytes as a buffer, and
//! strings that carry memcached item metadata.
//!
//! Encodings mirror Redis's three so OBJECT ENCODING answers the same:
//! `int` (the text is exactly what `string2l` accepts, at most 20 bytes),
//! `embstr` (a short string created whole, at most 44 bytes) and `raw` (longer,
//! or produced by in-place edits such as APPEND and SETRANGE).
//!
//! A string stored or read over the memcached protocol is the `Mc` variant:
//! its bytes plus memcached's 32-bit client flags, its CAS and a few item
//! bits, in the same 32 bytes as the other variants (so no key pays for
//! memcached, used or not). Any write that replaces the `StrValue` drops the
//! CAS: that is how a change over RESP (SET, APPEND, INCR, SETRANGE, SETBIT,
//! ...) is seen by `gets`. A CAS is drawn lazily from a global counter the
//! first time memcached needs one after a change (`StrValue::cas`).
//!
//! Large strings (at least [`LARGE_MIN`] bytes) are the `Large` variant: the
//! bytes in a reference-counted buffer ([`BigBytes`]), so that GET takes a
//! reference under the shard lock (no copy of megabytes while it is held)
//! and the connection writes from it as the socket accepts; SET stores the
//! buffer the request was read into, without copying it; and the last
//! owner of a buffer of megabytes frees it on the lazyfree thread. An edit
//! (APPEND, SETRANGE, SETBIT) changes the buffer in place when nobody else
//! holds it and copies it first when a reply still does (copy-on-write).
//! `Large` carries the memcached item fields too, so a big item needs no
//! second representation.
use crate::util::num;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Longest string Redis stores as `embstr` (object.c).
pub const EMBSTR_MAX: usize = 44;

/// Strings at least this long are stored as `Large` (a shared buffer).
/// Redis's threshold for a "big argument" read into its own buffer
/// (`PROTO_MBULK_BIG_ARG`) is the same 32 KiB: below it, copying costs
/// less than a microsecond or two and an extra allocation is not worth it.
pub const LARGE_MIN: usize = 32 * 1024;

/// A large string's bytes: a shared, reference-counted buffer. The last
/// owner of a buffer of megabytes frees it on the lazyfree thread
/// (`crate::lazyfree`), never under a shard lock or on a worker. A clone is
/// a reference (a reply in flight, a COPY); changes go through
/// [`BigBytes::make_mut`], which copies only while another reference lives.
pub struct BigBytes(Option<Arc<Vec<u8>>>);

impl BigBytes {
    pub fn new(v: Vec<u8>) -> BigBytes {
        BigBytes(Some(Arc::new(v)))
    }

    /// Adopts a buffer already shared (a request argument read into a
    /// buffer of its own): no copy.
    pub fn from_arc(a: Arc<Vec<u8>>) -> BigBytes {
        BigBytes(Some(a))
    }

    fn arc(&self) -> &Arc<Vec<u8>> {
        self.0.as_ref().expect("present until dropped")
    }

    pub fn as_slice(&self) -> &[u8] {
        self.arc()
    }

    /// The allocated bytes (capacity), for memory accounting.
    pub fn capacity(&self) -> usize {
        self.arc().capacity()
    }

    /// The buffer for editing: in place if this is the only reference,
    /// else a private copy first (a reply still being written keeps the
    /// old bytes).
    pub fn make_mut(&mut self) -> &mut Vec<u8> {
        Arc::make_mut(self.0.as_mut().expect("present until dropped"))
    }

    /// The bytes as an owned buffer: moved if this is the only reference,
    /// else copied.
    pub fn into_vec(mut self) -> Vec<u8> {
        let a = self.0.take().expect("present until dropped");
        match Arc::try_unwrap(a) {
            Ok(v) => v,
            Err(a) => {
                let v = a.to_vec();
                crate::lazyfree::release(a);
                v
            }
        }
    }
}

impl Clone for BigBytes {
    fn clone(&self) -> Self {
        BigBytes(Some(self.arc().clone()))
    }
}

impl Drop for BigBytes {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            crate::lazyfree::release(a);
        }
    }
}

impl std::ops::Deref for BigBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for BigBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for BigBytes {}

impl std::fmt::Debug for BigBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BigBytes({} bytes)", self.len())
    }
}

/// Memcached item bits kept in an `Mc` string (memcached's `it_flags`).
pub mod mc_bits {
    /// Fetched since it was stored (`mg h`, `me fetch=`).
    pub const FETCHED: u8 = 1;
    /// Marked stale by `md I` or an `ms I` with an older CAS (`mg` flag X).
    pub const STALE: u8 = 2;
    /// A client was told it won the right to recache (`mg` flags W / Z).
    pub const TOKEN_SENT: u8 = 4;
    /// Stored with a base64 (`b`) key: `k` returns the key in base64.
    pub const KEY_BINARY: u8 = 8;
}

/// The next CAS value. Starts at 1: 0 means "none assigned yet".
static NEXT_CAS: AtomicU64 = AtomicU64::new(1);

/// A fresh CAS, unique for the life of the process.
pub fn next_cas() -> u64 {
    NEXT_CAS.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug, PartialEq, Eq)]
pub enum StrValue {
    Int(i64),
    Bytes {
        data: Vec<u8>,
        raw: bool,
    },
    /// A memcached item's value. The fields sit inline (not in a struct)
    /// so the enum's tag fits beside `bits` and the variant stays 32 bytes.
    Mc {
        data: Box<[u8]>,
        /// The CAS of this version; 0 until memcached asks for one.
        cas: u64,
        /// memcached's opaque client flags.
        flags: u32,
        /// `mc_bits`.
        bits: u8,
    },
    /// A string of at least `LARGE_MIN` bytes, plain or a memcached item
    /// (a plain string has flags 0 and CAS 0, which no `cas` matches).
    Large {
        data: BigBytes,
        cas: u64,
        flags: u32,
        bits: u8,
    },
}

/// A copy is a new item (COPY): it keeps the bytes and the client flags
/// but gets its own CAS later and none of the item's fetch/stale state.
impl Clone for StrValue {
    fn clone(&self) -> Self {
        match self {
            StrValue::Int(n) => StrValue::Int(*n),
            StrValue::Bytes { data, raw } => StrValue::Bytes {
                data: data.clone(),
                raw: *raw,
            },
            StrValue::Mc {
                data, flags, bits, ..
            } => StrValue::Mc {
                data: data.clone(),
                cas: 0,
                flags: *flags,
                bits: bits & mc_bits::KEY_BINARY,
            },
            // The copy shares the buffer until one side is edited.
            StrValue::Large {
                data, flags, bits, ..
            } => StrValue::Large {
                data: data.clone(),
                cas: 0,
                flags: *flags,
                bits: bits & mc_bits::KEY_BINARY,
            },
        }
    }
}

impl StrValue {
    /// A string created whole (SET, GETSET, ...): picks the encoding the way
    /// Redis's `tryObjectEncoding` does.
    pub fn from_bytes(b: &[u8]) -> StrValue {
        if let Some(n) = num::should_store_as_int(b) {
            return StrValue::Int(n);
        }
        if b.len() >= LARGE_MIN {
            return StrValue::large(BigBytes::new(b.to_vec()), 0);
        }
        StrValue::Bytes {
            data: b.to_vec(),
            raw: b.len() > EMBSTR_MAX,
        }
    }

    /// Like `from_bytes` but takes ownership of a buffer already built.
    pub fn from_vec(b: Vec<u8>) -> StrValue {
        if let Some(n) = num::should_store_as_int(&b) {
            return StrValue::Int(n);
        }
        if b.len() >= LARGE_MIN {
            return StrValue::large(BigBytes::new(b), 0);
        }
        let raw = b.len() > EMBSTR_MAX;
        StrValue::Bytes { data: b, raw }
    }

    /// A string created whole from a shared buffer (a request argument
    /// read into a buffer of its own): kept as is when large, so a 100 MB
    /// SET stores the bytes it read without copying them.
    pub fn from_shared(a: Arc<Vec<u8>>) -> StrValue {
        if a.len() >= LARGE_MIN {
            return StrValue::large(BigBytes::from_arc(a), 0);
        }
        let v = StrValue::from_bytes(&a);
        crate::lazyfree::release(a);
        v
    }

    /// A large string (or memcached item with client `flags`), no CAS yet.
    pub fn large(data: BigBytes, flags: u32) -> StrValue {
        StrValue::Large {
            data,
            cas: 0,
            flags,
            bits: 0,
        }
    }

    /// The result of an in-place edit (APPEND, SETRANGE): always `raw`.
    pub fn edited(b: Vec<u8>) -> StrValue {
        if b.len() >= LARGE_MIN {
            return StrValue::large(BigBytes::new(b), 0);
        }
        StrValue::Bytes { data: b, raw: true }
    }

    /// A reference to the bytes of a large string, for a reply written
    /// after the shard lock is released; None for other strings (copy
    /// them: they are short).
    pub fn share(&self) -> Option<BigBytes> {
        match self {
            StrValue::Large { data, .. } => Some(data.clone()),
            _ => None,
        }
    }

    /// The bytes opened for an edit that makes the value a plain string
    /// (SETBIT, BITFIELD, ...): an `int` becomes its text, a memcached item
    /// loses its client flags and CAS (a new version that is no longer the
    /// client's data), a large string is edited in place when no reply
    /// holds it. The result is `raw`.
    pub fn plain_bytes_mut(&mut self) -> &mut Vec<u8> {
        match self {
            StrValue::Bytes { .. } => {}
            StrValue::Large {
                cas, flags, bits, ..
            } => {
                *cas = 0;
                *flags = 0;
                *bits = 0;
            }
            _ => {
                let v = std::mem::replace(self, StrValue::Int(0)).into_vec();
                *self = StrValue::edited(v);
            }
        }
        match self {
            StrValue::Bytes { data, raw } => {
                *raw = true;
                data
            }
            StrValue::Large { data, .. } => data.make_mut(),
            _ => unreachable!("converted to bytes just above"),
        }
    }

    /// Calls `f` with the value's bytes, formatting an integer on the stack.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            StrValue::Int(n) => f(itoa::Buffer::new().format(*n).as_bytes()),
            StrValue::Bytes { data, .. } => f(data),
            StrValue::Mc { data, .. } => f(data),
            StrValue::Large { data, .. } => f(data),
        }
    }

    /// The stored bytes, unless the value is an `int` (which has none).
    pub fn stored_bytes(&self) -> Option<&[u8]> {
        match self {
            StrValue::Int(_) => None,
            StrValue::Bytes { data, .. } => Some(data),
            StrValue::Mc { data, .. } => Some(data),
            StrValue::Large { data, .. } => Some(data),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// Moves the bytes out for editing, formatting an integer if needed.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            StrValue::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
            StrValue::Bytes { data, .. } => data,
            StrValue::Mc { data, .. } => data.into_vec(),
            StrValue::Large { data, .. } => data.into_vec(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StrValue::Int(n) => itoa::Buffer::new().format(*n).len(),
            StrValue::Bytes { data, .. } => data.len(),
            StrValue::Mc { data, .. } => data.len(),
            StrValue::Large { data, .. } => data.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value as an integer, as INCR reads it.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            StrValue::Int(n) => Some(*n),
            StrValue::Bytes { data, .. } => num::parse_i64(data),
            StrValue::Mc { data, .. } => num::parse_i64(data),
            StrValue::Large { .. } => None,
        }
    }

    /// An `Mc` string is reported like a plain one of its length: memcached
    /// metadata is not an encoding Redis clients know.
    pub fn encoding(&self) -> &'static str {
        match self {
            StrValue::Int(_) => "int",
            StrValue::Bytes { raw: false, .. } => "embstr",
            StrValue::Bytes { raw: true, .. } => "raw",
            StrValue::Mc { data, .. } if data.len() <= EMBSTR_MAX => "embstr",
            StrValue::Mc { .. } | StrValue::Large { .. } => "raw",
        }
    }

    pub fn mem_bytes(&self) -> usize {
        match self {
            StrValue::Int(_) => 0,
            StrValue::Bytes { data, .. } => data.capacity(),
            StrValue::Mc { data, .. } => data.len(),
            // The buffer, its Vec header and the Arc's two counts.
            StrValue::Large { data, .. } => data.capacity() + 40,
        }
    }

    // ----------------------------------------------------- memcached items

    /// A new memcached item: its bytes and client flags, no CAS yet.
    pub fn mc(data: Box<[u8]>, flags: u32) -> StrValue {
        if data.len() >= LARGE_MIN {
            return StrValue::large(BigBytes::new(data.into_vec()), flags);
        }
        StrValue::Mc {
            data,
            cas: 0,
            flags,
            bits: 0,
        }
    }

    /// A memcached item built from `data` with client `flags` and item
    /// `bits`: `Large` when big, so the buffer is kept, not shrunk or copied.
    pub fn mc_vec(data: Vec<u8>, flags: u32, bits: u8) -> StrValue {
        if data.len() >= LARGE_MIN {
            return StrValue::Large {
                data: BigBytes::new(data),
                cas: 0,
                flags,
                bits,
            };
        }
        StrValue::Mc {
            data: data.into_boxed_slice(),
            cas: 0,
            flags,
            bits,
        }
    }

    /// The client flags memcached reports (0 for a string written over RESP).
    pub fn mc_flags(&self) -> u32 {
        match self {
            StrValue::Mc { flags, .. } | StrValue::Large { flags, .. } => *flags,
            _ => 0,
        }
    }

    /// The memcached item bits (`mc_bits`); none for a plain string.
    pub fn mc_bits(&self) -> u8 {
        match self {
            StrValue::Mc { bits, .. } | StrValue::Large { bits, .. } => *bits,
            _ => 0,
        }
    }

    /// The result of an in-place RESP edit (APPEND, SETRANGE, INCR...) of a
    /// string that had client `flags`: memcached's own append and incr keep
    /// an item's flags, so these do too. With no flags, `self` unchanged.
    /// The CAS is new (unassigned), as for any change.
    pub fn with_mc_flags(self, flags: u32) -> StrValue {
        if flags == 0 {
            return self;
        }
        if let StrValue::Large { data, .. } = self {
            return StrValue::large(data, flags);
        }
        StrValue::mc(self.into_vec().into_boxed_slice(), flags)
    }

    /// Makes the value an `Mc` item in place (a plain string read over
    /// memcached gets flags 0 and the item state memcached tracks), and
    /// returns its parts. The bytes move; an `int` is formatted.
    pub fn as_mc(&mut self) -> (&[u8], &mut u64, &mut u32, &mut u8) {
        if !matches!(self, StrValue::Mc { .. } | StrValue::Large { .. }) {
            let data = std::mem::replace(self, StrValue::Int(0)).into_vec();
            *self = if data.len() >= LARGE_MIN {
                StrValue::large(BigBytes::new(data), 0)
            } else {
                StrValue::mc(data.into_boxed_slice(), 0)
            };
        }
        match self {
            StrValue::Mc {
                data,
                cas,
                flags,
                bits,
            } => (data, cas, flags, bits),
            StrValue::Large {
                data,
                cas,
                flags,
                bits,
            } => (data, cas, flags, bits),
            _ => unreachable!("converted to Mc or Large just above"),
        }
    }

    /// The CAS of this version, drawing one from the global counter the
    /// first time it is needed after a change.
    pub fn cas(&mut self) -> u64 {
        let (_, cas, _, _) = self.as_mc();
        if *cas == 0 {
            *cas = next_cas();
        }
        *cas
    }

    /// True if `want` is this version's CAS. A version that never had its
    /// CAS read cannot match: no client can hold it.
    pub fn cas_matches(&self, want: u64) -> bool {
        matches!(self, StrValue::Mc { cas, .. } | StrValue::Large { cas, .. } if *cas != 0 && *cas == want)
    }
}

/// Makes room in `v` for `extra` more bytes before an append (APPEND,
/// SETRANGE past the end, memcached append). Like Redis's
/// `sdsMakeRoomFor`, small strings double; past 1 MiB the headroom is an
/// eighth of the new length instead of as much again, so a 100 MB string
/// appended to does not hold 100 MB of spare room, while repeated appends
/// still reallocate (and maybe copy) only O(log n) times.
pub fn reserve(v: &mut Vec<u8>, extra: usize) {
    let Some(need) = v.len().checked_add(extra) else {
        return;
    };
    if need <= v.capacity() {
        return;
    }
    let target = if need < 1024 * 1024 {
        need.saturating_mul(2)
    } else {
        need.saturating_add(need / 8)
    };
    v.reserve_exact(target - v.len());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_is_32_bytes() {
        // Memcached metadata must cost nothing for other keys.
        assert_eq!(std::mem::size_of::<StrValue>(), 32);
        assert_eq!(std::mem::size_of::<crate::value::Value>(), 32);
    }

    #[test]
    fn mc_reads_like_its_bytes() {
        let v = StrValue::mc(b"12".to_vec().into_boxed_slice(), 7);
        assert_eq!(v.to_vec(), b"12");
        assert_eq!(v.len(), 2);
        assert_eq!(v.as_i64(), Some(12));
        assert_eq!(v.encoding(), "embstr");
        assert_eq!(v.mc_flags(), 7);
        assert_eq!(v.stored_bytes(), Some(&b"12"[..]));
        let big = StrValue::mc(vec![b'x'; 45].into_boxed_slice(), 0);
        assert_eq!(big.encoding(), "raw");
        assert_eq!(v.into_vec(), b"12");
    }

    #[test]
    fn cas_is_lazy_unique_and_dropped_by_replacement() {
        let mut a = StrValue::from_bytes(b"v");
        assert!(!a.cas_matches(0));
        let c1 = a.cas();
        assert!(c1 > 0);
        assert_eq!(a.cas(), c1, "stable until the value changes");
        assert!(a.cas_matches(c1));
        let mut b = StrValue::Int(5);
        let c2 = b.cas();
        assert_ne!(c1, c2);
        assert_eq!(b.to_vec(), b"5");
        // A replacement (what every write does) has no CAS until asked.
        a = StrValue::from_bytes(b"v");
        assert!(!a.cas_matches(c1));
        assert!(a.cas() > c2);
    }

    #[test]
    fn flags_survive_edits_and_clone_is_a_new_item() {
        let v = StrValue::Int(10).with_mc_flags(3);
        assert_eq!(v.mc_flags(), 3);
        assert_eq!(v.to_vec(), b"10");
        assert_eq!(StrValue::Int(10).with_mc_flags(0), StrValue::Int(10));
        let mut v = v;
        let cas = v.cas();
        if let StrValue::Mc { bits, .. } = &mut v {
            *bits = mc_bits::STALE | mc_bits::KEY_BINARY;
        }
        let c = v.clone();
        assert!(!c.cas_matches(cas));
        assert_eq!(c.mc_flags(), 3);
        assert_eq!(c.mc_bits(), mc_bits::KEY_BINARY);
    }

    #[test]
    fn large_strings_share_their_buffer_and_copy_on_write() {
        let bytes = vec![7u8; LARGE_MIN];
        let arc = Arc::new(bytes);
        let ptr = arc.as_ptr();
        let v = StrValue::from_shared(arc);
        assert!(matches!(v, StrValue::Large { .. }));
        assert_eq!(
            v.stored_bytes().unwrap().as_ptr(),
            ptr,
            "stored without a copy"
        );
        assert_eq!(v.encoding(), "raw");
        assert_eq!(v.len(), LARGE_MIN);
        assert_eq!(v.as_i64(), None);
        // A reply's reference sees the old bytes after an edit.
        let reply = v.share().unwrap();
        let mut v = v;
        v.plain_bytes_mut()[0] = 1;
        assert_eq!(reply[0], 7);
        assert_eq!(v.stored_bytes().unwrap()[0], 1);
        drop(reply);
        // Alone again: edited in place, and into_vec moves.
        let p2 = v.stored_bytes().unwrap().as_ptr();
        v.plain_bytes_mut()[1] = 2;
        assert_eq!(v.stored_bytes().unwrap().as_ptr(), p2);
        let moved = v.into_vec();
        assert_eq!(moved.as_ptr(), p2);
        // Small shared buffers are copied into the ordinary encodings.
        assert_eq!(
            StrValue::from_shared(Arc::new(b"12".to_vec())),
            StrValue::Int(12)
        );
        assert!(StrValue::share(&StrValue::from_bytes(b"short")).is_none());
    }

    #[test]
    fn large_strings_carry_memcached_metadata() {
        let mut v = StrValue::from_vec(vec![b'x'; LARGE_MIN + 1]);
        assert_eq!(v.mc_flags(), 0);
        assert!(!v.cas_matches(0));
        let cas = v.cas();
        assert!(v.cas_matches(cas));
        assert!(
            matches!(v, StrValue::Large { .. }),
            "stays large as an item"
        );
        let v = StrValue::mc_vec(vec![b'y'; LARGE_MIN], 9, mc_bits::KEY_BINARY);
        assert_eq!(v.mc_flags(), 9);
        let c = v.clone();
        assert_eq!(c.mc_flags(), 9);
        assert_eq!(c.mc_bits(), mc_bits::KEY_BINARY);
        assert_eq!(c, v);
        let edited = StrValue::edited(c.into_vec()).with_mc_flags(4);
        assert_eq!(edited.mc_flags(), 4);
        assert!(matches!(edited, StrValue::Large { .. }));
        // A big plain string read over memcached becomes an item in place.
        let mut p = StrValue::Bytes {
            data: vec![b'z'; LARGE_MIN],
            raw: true,
        };
        let (data, _, flags, _) = p.as_mc();
        assert_eq!((data.len(), *flags), (LARGE_MIN, 0));
        assert!(matches!(p, StrValue::Large { .. }));
    }

    #[test]
    fn reserve_doubles_small_and_adds_an_eighth_to_large() {
        let mut v = vec![0u8; 100];
        reserve(&mut v, 10);
        assert!(v.capacity() >= 220);
        let mut big = vec![0u8; 8 << 20];
        reserve(&mut big, 1);
        let cap = big.capacity();
        assert!(
            cap > (8 << 20) && cap <= (8 << 20) + (8 << 20) / 8 + 64,
            "{cap}"
        );
        // Repeated small appends reallocate only when the headroom is used.
        let mut reallocs = 0;
        for _ in 0..1000 {
            let before = big.capacity();
            reserve(&mut big, 1024);
            big.extend_from_slice(&[1u8; 1024]);
            reallocs += (big.capacity() != before) as u32;
        }
        assert!(reallocs <= 1, "{reallocs}");
    }
}
