//! A stored key: its bytes, its value, its expire time and access metadata.
//!
//! The expire time lives in the entry (no second table, unlike Redis's
//! `expires` dict), so a key with a TTL costs no extra index slot. A key of
//! up to 23 bytes sits inside the entry (`KeyBuf`), so a small key costs no
//! allocation of its own: the entry is one 80-byte block (a jemalloc size
//! class) holding key, value header, expiry and LRU/LFU bits. See
//! docs/design.md, "Memory layout".
use crate::value::Value;

use crate::util::smallbytes::SmallBytes as KeyBuf;

/// Longest key stored inside the entry.
pub const INLINE_KEY_MAX: usize = crate::util::smallbytes::INLINE_MAX;

/// One key and everything stored with it. `repr(C)` so the layout drawn in
/// docs/design.md ("Memory layout") is the real one: value at 0, expire_at
/// at 32, access at 40, hash at 44, key at 48..72, freq at 72; 80 bytes.
#[derive(Debug)]
#[repr(C)]
pub struct Entry {
    pub value: Value,
    /// Unix milliseconds after which the key is gone; 0 means no expiry.
    expire_at: u64,
    /// Seconds on the engine's LRU clock at the last access (OBJECT IDLETIME).
    pub access: u32,
    /// Low 32 bits of the key's hash, set by the table that holds the
    /// entry: its slots keep only a pointer and a 16-bit tag, and find an
    /// entry's home bucket here when they move it (resize, deletion).
    pub(crate) hash: u32,
    key: KeyBuf,
    /// Logarithmic access counter for LFU (OBJECT FREQ).
    pub freq: u8,
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
        &self.key
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
        if *self.key != *key {
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
            // Under LFU, `access` is the counter's last decrement time
            // (Redis keeps its "ldt" in the same field).
            self.freq = crate::evict::lfu_on_access(self.freq, self.access);
            self.access = lru_clock();
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
        assert_eq!(std::mem::offset_of!(Entry, expire_at), 32);
        assert_eq!(std::mem::offset_of!(Entry, access), 40);
        assert_eq!(std::mem::offset_of!(Entry, hash), 44);
        assert_eq!(std::mem::offset_of!(Entry, key), 48);
        assert_eq!(std::mem::offset_of!(Entry, freq), 72);
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
