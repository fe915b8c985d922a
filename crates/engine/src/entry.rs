//! A stored key: its bytes, its value, its expire time and access metadata.
//!
//! The expire time lives in the entry (no second table, unlike Redis's
//! `expires` dict), so a key with a TTL costs no extra index slot. The layout
//! is deliberately plain for now; the compact layout (one allocation per
//! small entry) is the memory issue's work and stays behind this API.
use crate::value::Value;

/// One key and everything stored with it.
#[derive(Debug)]
pub struct Entry {
    key: Box<[u8]>,
    pub value: Value,
    /// Unix milliseconds after which the key is gone; 0 means no expiry.
    expire_at: u64,
    /// Seconds on the engine's LRU clock at the last access (OBJECT IDLETIME).
    pub access: u32,
    /// Logarithmic access counter for LFU (OBJECT FREQ).
    pub freq: u8,
}

impl Entry {
    pub fn new(key: &[u8], value: Value, expire_at: u64) -> Box<Entry> {
        Box::new(Entry {
            key: key.into(),
            value,
            expire_at,
            access: lru_clock(),
            freq: LFU_INIT_VAL,
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
            self.key = key.into();
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

    /// Approximate heap bytes held by this entry (MEMORY USAGE, later
    /// replaced by allocator-exact accounting).
    pub fn mem_bytes(&self) -> usize {
        std::mem::size_of::<Entry>() + self.key.len() + self.value.mem_bytes()
    }
}

/// Redis's initial LFU counter, so new keys are not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

fn lru_clock() -> u32 {
    crate::clock::lru_secs()
}
