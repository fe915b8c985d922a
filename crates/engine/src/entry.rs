//! A stored key: its bytes, its value, its expire time and access metadata.
//!
//! The expire time lives in the entry (no second table, unlike Redis's
//! `expires` dict), so a key with a TTL costs no extra index slot. A key of
//! up to 23 bytes sits inside the entry (`KeyBuf`), so a small key costs no
//! allocation of its own: the entry is one 80-byte block (a jemalloc size
//! class) holding key, value header, expiry and LRU/LFU bits. See
//! docs/design.md, "Memory layout".
use crate::value::Value;

/// Longest key stored inside the entry.
pub const INLINE_KEY_MAX: usize = 23;

/// `KeyBuf::len` value meaning "the bytes are on the heap".
const HEAP: u8 = 0xff;

/// A key's bytes: inline up to `INLINE_KEY_MAX` bytes, else a heap block.
///
/// Inline: `bytes[..len]`. Heap (`len == HEAP`): `bytes[0..8]` is the
/// pointer and `bytes[8..16]` the length of a leaked `Box<[u8]>`, which
/// this value owns and frees on drop. Plain bytes rather than an enum so
/// all 23 bytes are usable (an enum would spend one on its tag): YCSB keys
/// (`user` + 19 digits) are exactly 23 bytes.
struct KeyBuf {
    bytes: [u8; INLINE_KEY_MAX],
    len: u8,
}

impl KeyBuf {
    fn new(key: &[u8]) -> KeyBuf {
        let mut bytes = [0u8; INLINE_KEY_MAX];
        if key.len() <= INLINE_KEY_MAX {
            bytes[..key.len()].copy_from_slice(key);
            return KeyBuf {
                bytes,
                len: key.len() as u8,
            };
        }
        let boxed: Box<[u8]> = key.into();
        let len = boxed.len();
        let ptr = Box::into_raw(boxed) as *mut u8 as usize;
        bytes[0..8].copy_from_slice(&(ptr as u64).to_ne_bytes());
        bytes[8..16].copy_from_slice(&(len as u64).to_ne_bytes());
        KeyBuf { bytes, len: HEAP }
    }

    fn heap_parts(&self) -> (*mut u8, usize) {
        let ptr = u64::from_ne_bytes(self.bytes[0..8].try_into().expect("8 bytes"));
        let len = u64::from_ne_bytes(self.bytes[8..16].try_into().expect("8 bytes"));
        (ptr as usize as *mut u8, len as usize)
    }

    fn as_slice(&self) -> &[u8] {
        if self.len == HEAP {
            let (ptr, len) = self.heap_parts();
            // SAFETY: `ptr`/`len` came from `Box::into_raw` of a `Box<[u8]>`
            // in `new`, which this value owns until drop.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        } else {
            &self.bytes[..self.len as usize]
        }
    }

    /// Heap bytes held apart from the entry.
    fn heap_bytes(&self) -> usize {
        if self.len == HEAP {
            self.heap_parts().1
        } else {
            0
        }
    }
}

impl Drop for KeyBuf {
    fn drop(&mut self) {
        if self.len == HEAP {
            let (ptr, len) = self.heap_parts();
            // SAFETY: as in `as_slice`; this is the one place it is freed.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        }
    }
}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

/// One key and everything stored with it.
#[derive(Debug)]
pub struct Entry {
    key: KeyBuf,
    pub value: Value,
    /// Unix milliseconds after which the key is gone; 0 means no expiry.
    expire_at: u64,
    /// Seconds on the engine's LRU clock at the last access (OBJECT IDLETIME).
    pub access: u32,
    /// Logarithmic access counter for LFU (OBJECT FREQ).
    pub freq: u8,
    /// Low 32 bits of the key's hash, set by the table that holds the
    /// entry: its slots keep only a pointer and a 16-bit tag, and find an
    /// entry's home bucket here when they move it (resize, deletion).
    pub(crate) hash: u32,
}

impl Entry {
    pub fn new(key: &[u8], value: Value, expire_at: u64) -> Box<Entry> {
        Box::new(Entry {
            key: KeyBuf::new(key),
            value,
            expire_at,
            access: lru_clock(),
            freq: LFU_INIT_VAL,
            hash: 0,
        })
    }

    pub fn key(&self) -> &[u8] {
        self.key.as_slice()
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

    /// The same entry under another name (RENAME, MOVE).
    pub fn rekey(mut self: Box<Self>, key: &[u8]) -> Box<Entry> {
        if self.key.as_slice() != key {
            self.key = KeyBuf::new(key);
        }
        self
    }

    /// A copy of the value and TTL under another name (COPY). Access
    /// metadata starts fresh, as for any new key.
    pub fn duplicate(&self, key: &[u8], value: Value) -> Box<Entry> {
        Entry::new(key, value, self.expire_at)
    }

    /// A new value in an old entry: LRU time starts now, LFU counter kept.
    pub fn restart_access(&mut self) {
        self.access = lru_clock();
    }

    /// Records an access: the LFU counter under an LFU policy, else the
    /// LRU time (Redis updates one or the other, never both: `lookupKey`).
    pub fn touch(&mut self, lfu: bool) {
        if lfu {
            self.freq = lfu_log_incr(self.freq);
        } else {
            self.access = lru_clock();
        }
    }

    /// Seconds since the last access.
    pub fn idle_secs(&self) -> u64 {
        lru_clock().wrapping_sub(self.access) as u64
    }

    /// Heap bytes held by this entry: the entry block, a key longer than
    /// `INLINE_KEY_MAX` and the value (MEMORY USAGE). Requested sizes:
    /// jemalloc rounds each block up to its size class.
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Entry>() + self.key.heap_bytes() + self.value.mem_bytes()
    }
}

/// Redis's initial LFU counter, so new keys are not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

fn lru_clock() -> u32 {
    crate::clock::lru_secs()
}

/// Redis's logarithmic counter increment (evict.c `LFULogIncr`, factor 10).
fn lfu_log_incr(counter: u8) -> u8 {
    if counter == 255 {
        return 255;
    }
    let r: f64 = rand::random();
    let base = (counter.saturating_sub(LFU_INIT_VAL)) as f64;
    let p = 1.0 / (base * 10.0 + 1.0);
    if r < p {
        counter + 1
    } else {
        counter
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::StrValue;

    #[test]
    fn entry_is_one_small_block() {
        // jemalloc's 80-byte class holds key, value and metadata.
        assert!(std::mem::size_of::<Entry>() <= 80);
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
