//! The keyspace side of DUMP / RESTORE / MIGRATE (Redis 7.0 `cluster.c`'s
//! `dumpCommand`, `restoreCommand`, `migrateCommand`): reading a key for
//! serialization, installing a restored value with its TTL and access
//! metadata, and removing migrated keys. The payload format itself is the
//! persistence crate's (`cairn_persist::rdb::object`); this module sees
//! only values.
use crate::entry::{Owned, Ref};
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::value::Value;

/// The access metadata RESTORE gives the new key (`objectSetLRUOrLFU`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// As any new key: accessed now, the initial LFU counter.
    Fresh,
    /// IDLETIME s: last accessed `s` seconds ago (used unless the policy
    /// is LFU, where it is ignored).
    Idle(u64),
    /// FREQ f: the LFU counter (used only under an LFU policy).
    Freq(u8),
}

/// What RESTORE did once its checks passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// The key now holds the value.
    Created,
    /// The absolute expire time was already past: nothing was created, and
    /// `replaced` says whether REPLACE deleted an old key (Redis then
    /// records `DEL key`).
    AlreadyExpired { replaced: bool },
}

/// DUMP's lookup (`lookupKeyRead`: counts a hit or miss and records the
/// access): the key's entry, to serialize under the lock.
pub fn lookup<'g>(g: &'g mut Guard, db: usize, k: &Key) -> Option<Ref<'g>> {
    g.read_ref(db, k)
}

/// RESTORE's existence check without REPLACE (`lookupKeyWrite`: an expired
/// key is removed and does not count).
pub fn exists(g: &mut Guard, db: usize, k: &Key) -> bool {
    g.exists(db, k)
}

/// RESTORE once the payload decoded: with `replace`, deletes the old key
/// first (handed to `removed`); then, unless `expire_at` (Unix ms, 0 for
/// none) is not after `now_ms` (the command's clock), stores `value` with that expire time and the
/// `access` metadata, and notifies `restore`. The caller checked that the
/// key is absent when `replace` is off.
#[allow(clippy::too_many_arguments)] // RESTORE's arguments, one each
pub fn restore(
    g: &mut Guard,
    db: usize,
    k: &Key,
    value: Value,
    expire_at: u64,
    replace: bool,
    access: Access,
    now_ms: u64,
    removed: impl FnOnce(Owned),
) -> Restored {
    let mut replaced = false;
    if replace {
        if let Some(old) = g.remove(db, k) {
            replaced = true;
            removed(old);
        }
    }
    // Redis `checkAlreadyExpired`: `when <= now`.
    if expire_at != 0 && expire_at <= now_ms {
        if replaced {
            g.modified(db, k);
            g.notify(class::GENERIC, "del", db, k);
        }
        return Restored::AlreadyExpired { replaced };
    }
    let expiry = if expire_at == 0 {
        Expiry::Clear
    } else {
        Expiry::At(expire_at)
    };
    drop(g.set(db, k, value, expiry));
    let lfu = g
        .engine()
        .limits
        .lfu
        .load(std::sync::atomic::Ordering::Relaxed);
    if let Some(m) = g.write_meta(db, k) {
        m.freq = crate::entry::LFU_INIT_VAL;
        m.access = crate::clock::lru_secs();
        match access {
            Access::Fresh => {}
            Access::Freq(f) if lfu => m.freq = f,
            // The LRU clock wraps as Redis's does; so does the subtraction.
            Access::Idle(s) if !lfu => {
                m.access = m.access.wrapping_sub(s.min(u32::MAX as u64) as u32)
            }
            Access::Freq(_) | Access::Idle(_) => {}
        }
    }
    g.notify(class::GENERIC, "restore", db, k);
    Restored::Created
}

/// MIGRATE without COPY: removes each key the target acknowledged, as
/// `dbDelete` plus the `del` notification. Returns the removed entries for
/// the caller to free after unlocking.
pub fn remove_migrated(g: &mut Guard, db: usize, keys: &[Key]) -> Vec<Owned> {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(e) = g.remove(db, k) {
            g.notify(class::GENERIC, "del", db, k);
            out.push(e);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::{engine, with};
    use crate::value::StrValue;

    fn s(v: &str) -> Value {
        Value::Str(StrValue::from_bytes(v.as_bytes()))
    }

    #[test]
    fn restore_sets_ttl_and_idle_time_and_replaces() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            assert!(!exists(g, 0, &k));
            let at = crate::clock::now_ms() + 100_000;
            assert_eq!(
                restore(
                    g,
                    0,
                    &k,
                    s("v1"),
                    at,
                    false,
                    Access::Idle(1000),
                    crate::clock::now_ms(),
                    drop
                ),
                Restored::Created
            );
            assert!(exists(g, 0, &k));
            let r = g.peek_ref(0, &k).unwrap();
            assert_eq!(r.expire_at(), at);
            assert!(r.idle_secs() >= 1000);
            let mut old = None;
            assert_eq!(
                restore(
                    g,
                    0,
                    &k,
                    s("v2"),
                    0,
                    true,
                    Access::Fresh,
                    crate::clock::now_ms(),
                    |o| old = Some(o)
                ),
                Restored::Created
            );
            assert!(old.is_some());
            let r = g.peek_ref(0, &k).unwrap();
            assert_eq!(r.expire_at(), 0);
            assert_eq!(r.str().unwrap().to_vec(), b"v2");
        });
    }

    #[test]
    fn a_past_deadline_creates_nothing_and_reports_the_replaced_key() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            assert_eq!(
                restore(
                    g,
                    0,
                    &k,
                    s("v"),
                    1,
                    false,
                    Access::Fresh,
                    crate::clock::now_ms(),
                    drop
                ),
                Restored::AlreadyExpired { replaced: false }
            );
            assert!(!exists(g, 0, &k));
            restore(
                g,
                0,
                &k,
                s("v"),
                0,
                false,
                Access::Fresh,
                crate::clock::now_ms(),
                drop,
            );
            assert_eq!(
                restore(
                    g,
                    0,
                    &k,
                    s("w"),
                    1,
                    true,
                    Access::Fresh,
                    crate::clock::now_ms(),
                    drop
                ),
                Restored::AlreadyExpired { replaced: true }
            );
            assert!(!exists(g, 0, &k));
        });
    }

    #[test]
    fn migrated_keys_are_removed() {
        let e = engine();
        with(&e, |g| {
            let (a, b) = (g.key(b"a"), g.key(b"b"));
            restore(
                g,
                0,
                &a,
                s("1"),
                0,
                false,
                Access::Fresh,
                crate::clock::now_ms(),
                drop,
            );
            assert_eq!(remove_migrated(g, 0, &[a, b]).len(), 1);
            assert!(!exists(g, 0, &a));
        });
    }
}
