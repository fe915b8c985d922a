//! Redis Cluster's hash slots: which of the 16,384 slots a key belongs to
//! (cluster.c `keyHashSlot`: CRC16-XMODEM of the key, or of the part
//! between the first `{` and the next `}` when that part is not empty),
//! and the per-slot key counts a node in cluster mode keeps for CLUSTER
//! COUNTKEYSINSLOT and GETKEYSINSLOT.
//!
//! Only database 0 is counted: cluster mode has no other. The index exists
//! only when cluster mode is on (`Engine::enable_slot_index`, before any
//! key is stored), so a standalone server pays nothing for it, not even
//! the CRC. The count is kept beside the shard locks, not under them: each
//! slot's counter is an atomic changed by whichever thread inserts or
//! removes one of its keys while it holds that key's shard, so a count is
//! exact once the writes that changed it are done.
//!
//! Why counters and not Redis's per-slot list of keys (7.0 keeps a doubly
//! linked list through the dict entries' metadata): the list costs two
//! pointers per key and a third of a cache line written on every insert
//! and delete, for GETKEYSINSLOT, which only resharding tools call. A
//! counter answers COUNTKEYSINSLOT at once and lets GETKEYSINSLOT skip an
//! empty slot and stop the scan as soon as it has every key the slot
//! holds (`crate::iterate`'s `keys_in_slot`).
use std::sync::atomic::{AtomicU32, Ordering};

/// Redis Cluster's slot count (cluster.h `CLUSTER_SLOTS`).
pub const SLOTS: usize = 16384;

/// CRC16-CCITT as Redis Cluster uses it (XMODEM: polynomial 0x1021, initial
/// value 0, no reflection), one table lookup per byte. A 512-byte table
/// built at compile time rather than a crate: it is the whole algorithm.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-XMODEM of `bytes` (Redis crc16.c).
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[(((crc >> 8) as u8) ^ b) as usize]
    })
}

/// The hash slot of `key` (cluster.c `keyHashSlot`): only the hash tag is
/// hashed when the key has one, so `{user1}.name` and `{user1}.mail` share
/// a slot; `{}` is no tag, and only the first `{` counts.
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter()
            .position(|&b| b == b'}')
            .filter(|&close| close > 0)
            .map(|close| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) & (SLOTS as u16 - 1)
}

/// How many keys of database 0 each slot holds.
pub struct SlotIndex {
    counts: Box<[AtomicU32]>,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            counts: (0..SLOTS).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl SlotIndex {
    /// A key was stored.
    pub fn added(&self, key: &[u8]) {
        self.counts[key_hash_slot(key) as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A key was removed (deleted, expired, evicted, renamed away).
    pub fn removed(&self, key: &[u8]) {
        self.counts[key_hash_slot(key) as usize].fetch_sub(1, Ordering::Relaxed);
    }

    /// Keys in `slot` (expired ones not yet removed included, as Redis
    /// counts them).
    pub fn count(&self, slot: u16) -> u32 {
        self.counts[slot as usize].load(Ordering::Relaxed)
    }

    /// Database 0 was emptied (FLUSHALL, FLUSHDB): called with every shard
    /// locked, so no insert races the reset.
    pub fn clear(&self) {
        for c in self.counts.iter() {
            c.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_redis() {
        // The check value of CRC-16/XMODEM, and crc16.c's own test vector.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_match_redis_cluster() {
        // Values from `CLUSTER KEYSLOT` of redis-server 7.0.15.
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(key_hash_slot(b"somekey"), 11058);
        assert_eq!(key_hash_slot(b"{user1000}.following"), 3443);
        assert_eq!(key_hash_slot(b"{user1000}.followers"), 3443);
        assert_eq!(key_hash_slot(b""), 0);
    }

    #[test]
    fn hash_tags_follow_keyhashslot() {
        let foo = key_hash_slot(b"foo");
        assert_eq!(key_hash_slot(b"{foo}bar"), foo);
        assert_eq!(key_hash_slot(b"x{foo}y{bar}"), foo);
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(key_hash_slot(b"{}foo"), crc16(b"{}foo") & 16383);
        // Only the first `{` opens a tag, and the first `}` after it closes it.
        assert_eq!(key_hash_slot(b"{{foo}}"), crc16(b"{foo") & 16383);
        // No closing brace: no tag.
        assert_eq!(key_hash_slot(b"{foo"), crc16(b"{foo") & 16383);
    }

    #[test]
    fn index_counts_and_clears() {
        let ix = SlotIndex::default();
        ix.added(b"{a}1");
        ix.added(b"{a}2");
        ix.added(b"b");
        let a = key_hash_slot(b"a");
        assert_eq!(ix.count(a), 2);
        ix.removed(b"{a}1");
        assert_eq!(ix.count(a), 1);
        assert_eq!(ix.count(key_hash_slot(b"b")), 1);
        ix.clear();
        assert_eq!(ix.count(a), 0);
    }
    #[test]
    fn engine_keeps_the_index_through_writes_expiry_and_flush() {
        use crate::keyspace::{Engine, Expiry, Options};
        use crate::value::{StrValue, Value};
        use crate::Cx;
        let e = Engine::new(Options {
            databases: 2,
            shards: 16,
        });
        e.enable_slot_index();
        let put = |db: usize, key: &[u8], exp: Expiry| {
            let k = e.key(key);
            let mut g = e.lock(&Cx::DETACHED, &k);
            g.set(db, &k, Value::Str(StrValue::from_bytes(b"v")), exp);
        };
        let slot = key_hash_slot(b"t");
        for i in 0..50 {
            put(0, format!("{{t}}{i}").as_bytes(), Expiry::Clear);
        }
        // Overwrites and other databases do not count.
        put(0, b"{t}0", Expiry::Clear);
        put(1, b"{t}x", Expiry::Clear);
        let ix = e.slot_index().unwrap();
        assert_eq!(ix.count(slot), 50);
        let mut keys = e.keys_in_slot(&Cx::DETACHED, slot, 1000);
        keys.sort();
        assert_eq!(keys.len(), 50);
        assert!(keys.iter().all(|k| k.starts_with(b"{t}")));
        assert_eq!(e.keys_in_slot(&Cx::DETACHED, slot, 7).len(), 7);
        assert!(e.keys_in_slot(&Cx::DETACHED, slot ^ 1, 10).is_empty());
        // A delete, and a lookup that finds a key expired.
        let k = e.key(b"{t}1");
        assert!(e.lock(&Cx::DETACHED, &k).remove(0, &k).is_some());
        put(0, b"{t}2", Expiry::At(1));
        let k = e.key(b"{t}2");
        assert!(!e.lock(&Cx::DETACHED, &k).exists(0, &k));
        assert_eq!(ix.count(slot), 48);
        e.flush(&Cx::DETACHED, Some(1));
        assert_eq!(ix.count(slot), 48);
        e.flush(&Cx::DETACHED, Some(0));
        assert_eq!(ix.count(slot), 0);
    }
}
