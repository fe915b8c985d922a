//! DEBUG DIGEST and DEBUG DIGEST-VALUE: a SHA1 digest of the dataset, or
//! of single values, computed exactly as Redis 7.0 does (debug.c
//! `computeDatasetDigest`, `xorObjectDigest`), so a Cairn and a
//! redis-server holding the same data give the same 40 hex digits.
//!
//! The scheme: `mix(d, data)` is `d = SHA1(d ^ SHA1(data))`, order
//! dependent; `xor(d, data)` is `d ^= SHA1(data)`, order independent.
//! A key's digest mixes its name, its type (4 bytes, big endian) and its
//! value; the keys' digests are xored (hashed first, as every xor here)
//! together, so the hash table's order
//! does not matter, and each non-empty database first mixes its number.
//! Within a value, ordered types (strings, lists, streams) mix their
//! elements; unordered ones (sets, hashes, sorted sets) xor a digest per
//! element. A key with a TTL xors in "!!expire!!" (the time itself is not
//! part of the digest).
use crate::cx::Cx;
use crate::entry::Ref;
use crate::keyspace::Engine;
use crate::value::Value;
use sha1_smol::Sha1;

pub type Digest = [u8; 20];

fn sha1(data: &[u8]) -> Digest {
    Sha1::from(data).digest().bytes()
}

/// `xorDigest`: `d ^= SHA1(data)`.
fn xor(d: &mut Digest, data: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(data)) {
        *a ^= b;
    }
}

/// `mixDigest`: `d = SHA1(d ^ SHA1(data))`.
fn mix(d: &mut Digest, data: &[u8]) {
    xor(d, data);
    *d = sha1(d);
}

/// Redis's type numbers (OBJ_STRING ... OBJ_STREAM).
fn type_code(v: Option<&Value>) -> u32 {
    match v {
        None | Some(Value::Str(_)) => 0,
        Some(Value::List(_)) => 1,
        Some(Value::Set(_)) => 2,
        Some(Value::ZSet(_)) => 3,
        Some(Value::Hash(_)) => 4,
        Some(Value::Stream(_)) => 6,
    }
}

/// `xorObjectDigest`: mixes the key's type and value into `d`.
fn value_digest(d: &mut Digest, r: Ref<'_>) {
    mix(d, &type_code(r.value()).to_be_bytes());
    match r.value() {
        None => r
            .str()
            .expect("a compact entry is a string")
            .with_bytes(|b| mix(d, b)),
        Some(Value::Str(s)) => s.with_bytes(|b| mix(d, b)),
        Some(Value::List(l)) => {
            for e in l.iter() {
                e.with_bytes(|b| mix(d, b));
            }
        }
        Some(Value::Set(s)) => {
            for m in s.iter() {
                m.with_bytes(|b| xor(d, b));
            }
        }
        Some(Value::ZSet(z)) => {
            let mut score = Vec::with_capacity(24);
            for (m, s) in z.iter() {
                let mut e = [0u8; 20];
                mix(&mut e, m);
                score.clear();
                // Redis 7.0 prints the score with "%.17g" here.
                crate::util::num::fmt_f64(s, &mut score);
                mix(&mut e, &score);
                xor(d, &e);
            }
        }
        Some(Value::Hash(h)) => {
            let mut buf = Vec::new();
            h.view().for_each(|f, v| {
                let mut e = [0u8; 20];
                mix(&mut e, f);
                buf.clear();
                v.append_to(&mut buf);
                mix(&mut e, &buf);
                xor(d, &e);
            });
        }
        Some(Value::Stream(s)) => {
            // Entries only: groups, consumers and the last ID are not part
            // of Redis 7.0's digest.
            for e in s.entries() {
                mix(d, format!("{}.{}", e.id.ms, e.id.seq).as_bytes());
                for (f, v) in e.pairs() {
                    mix(d, f);
                    mix(d, v);
                }
            }
        }
    }
    if r.expire_at() != 0 {
        xor(d, b"!!expire!!");
    }
}

impl Engine {
    /// DEBUG DIGEST: the digest of every database, all zeros when empty.
    /// Every shard is locked for the walk, so it sees one moment. Keys
    /// past their expire time but not yet removed count, as in Redis.
    pub fn digest(&self, cx: &Cx) -> Digest {
        let mut out = [0u8; 20];
        let mut g = self.lock_all(cx);
        let mut shards: Vec<_> = g.shards_mut().collect();
        for db in 0..self.databases() {
            if shards.iter().all(|s| s.db(db).is_empty()) {
                continue;
            }
            mix(&mut out, &(db as u32).to_be_bytes());
            for s in shards.iter_mut() {
                for r in s.db(db).iter() {
                    let mut d = [0u8; 20];
                    mix(&mut d, r.key());
                    value_digest(&mut d, r);
                    xor(&mut out, &d);
                }
            }
        }
        out
    }

    /// DEBUG DIGEST-VALUE: the digest of one key's value (type and value,
    /// not its name), all zeros for a missing key. Like Redis it looks the
    /// key up without expiring it.
    pub fn digest_value(&self, cx: &Cx, db: usize, key: &[u8]) -> Digest {
        let k = self.key(key);
        self.with_shard_read(cx, self.shard_index(&k), |s| {
            let t = s.db(db);
            let mut d = [0u8; 20];
            if let Some(i) = t.find(k.hash(), key) {
                value_digest(&mut d, t.at(i));
            }
            d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: &Digest) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn mix_is_sha1_of_the_xor() {
        // SHA1("") = da39a3ee..., so mixing "" into zeros is SHA1 of it.
        let mut d = [0u8; 20];
        mix(&mut d, b"");
        assert_eq!(hex(&d), hex(&sha1(&sha1(b""))));
        let mut x = [0u8; 20];
        xor(&mut x, b"a");
        xor(&mut x, b"a");
        assert_eq!(x, [0u8; 20]);
    }
}
