//! Active expiry: a background sweep that removes expired keys nobody reads.
//!
//! Lazy expiry (in `Guard` lookups) already hides expired keys from every
//! reply; this sweep reclaims their memory. Because the expire time lives in
//! the entry, the sweep walks each table's home buckets with the same
//! reverse-binary cursor SCAN uses, skipping tables with no volatile keys, a
//! small chunk of buckets per lock acquisition so no client waits on a shard
//! for more than a few microseconds. The caller gives it a time budget per
//! tick (Redis spends up to 25% of a core: `ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC`);
//! within it the sweep keeps going round the keyspace, so the share of
//! expired-but-unread keys stays bounded by how fast one pass completes.
use crate::cx::Cx;
use crate::entry::Owned;
use crate::keyspace::Engine;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Buckets visited per lock acquisition.
const CHUNK_BUCKETS: usize = 128;

/// Where the sweep stopped, kept by the thread that runs it.
#[derive(Default)]
pub struct ExpireCycle {
    shard: usize,
}

/// What one call of the sweep did.
#[derive(Default, Debug, Clone, Copy)]
pub struct ExpireReport {
    pub buckets: u64,
    pub removed: u64,
}

impl Engine {
    /// Sweeps until `deadline` or until one full pass over all shards is
    /// done, whichever comes first. `expired` notifications go to `cx`'s
    /// events (`Cx::background`).
    pub fn active_expire(
        &self,
        cx: &Cx,
        state: &mut ExpireCycle,
        deadline: Instant,
    ) -> ExpireReport {
        let mut report = ExpireReport::default();
        // Nothing expires while the journal is replayed (`record`).
        if self.journal.loading.load(Ordering::Relaxed) {
            return report;
        }
        let n = self.shard_count();
        for _ in 0..n {
            let i = state.shard % n;
            // While a snapshot runs, a shard with nothing that can expire
            // is passed over without the lock that would serialize it.
            if self.snapshot_running()
                && self.with_shard_read(cx, i, |s| s.dbs.iter().all(|t| t.volatile() == 0))
            {
                state.shard = (i + 1) % n;
                continue;
            }
            // Each shard is finished (all its tables' cursors back at 0)
            // before moving on, releasing the lock between chunks.
            loop {
                let done = self.with_shard(cx, i, |shard| {
                    let now = crate::clock::now_ms();
                    let mut all_done = true;
                    let shard_watched_empty = shard.watched.is_empty();
                    for db in 0..shard.dbs.len() {
                        if shard.dbs[db].volatile() == 0 {
                            shard.expire_cursor[db] = 0;
                            continue;
                        }
                        let mut cursor = shard.expire_cursor[db];
                        let mut removed = 0u64;
                        let notify = self.limits.notify.load(Ordering::Relaxed)
                            & crate::events::class::EXPIRED
                            != 0;
                        let journal = self.journal_on();
                        let mut gone: Vec<Owned> = Vec::new();
                        for _ in 0..CHUNK_BUCKETS {
                            cursor = shard.dbs[db].retain_bucket(
                                cursor,
                                |e| e.is_expired(now),
                                |e| {
                                    removed += 1;
                                    self.slot_removed(db, e.key());
                                    if notify
                                        || journal
                                        || !shard_watched_empty
                                        || self.tracking.on()
                                    {
                                        gone.push(e);
                                    }
                                },
                            );
                            report.buckets += 1;
                            if cursor == 0 {
                                break;
                            }
                        }
                        // Journaled as DEL, under the shard's lock (Redis
                        // propagates an expiry as a DEL: `deleteExpiredKeyAndPropagate`).
                        if journal {
                            crate::record::deleted(self, db, gone.iter().map(|e| e.key()));
                        }
                        // As a lookup that finds the key expired: WATCH
                        // sees a change, `expired` is notified.
                        for e in gone {
                            shard.touch_watched(db, e.key());
                            self.tracking.key(e.key(), cx);
                            if notify {
                                cx.push_event(crate::events::Event::Notify {
                                    class: crate::events::class::EXPIRED,
                                    event: "expired",
                                    db,
                                    key: e.key().into(),
                                });
                            }
                        }
                        shard.expire_cursor[db] = cursor;
                        shard.stats.expired_keys += removed;
                        shard.stats.expired_active += removed;
                        report.removed += removed;
                        if cursor != 0 {
                            all_done = false;
                        }
                    }
                    all_done
                });
                if done {
                    break;
                }
                if Instant::now() >= deadline {
                    return report;
                }
            }
            state.shard = (i + 1) % n;
            if Instant::now() >= deadline {
                break;
            }
        }
        report
    }
}
