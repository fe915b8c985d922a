//! The hook through which client-side caching learns that keys changed
//! (Redis `trackingInvalidateKey`, `trackingInvalidateKeysOnFlush`).
//!
//! Redis's `signalModifiedKey` calls both `touchWatchedKey` and
//! `trackingInvalidateKey`; here every place that flags WATCHers (a write
//! through a guard, lazy and active expiry, eviction, FLUSHDB/FLUSHALL)
//! calls the hook too, while the shard of the key is still locked. That
//! lock is what orders invalidations against reads on other threads: a
//! reader that sees the new value locked the shard after the writer let it
//! go, so the invalidation was handed to the tracking table first.
//!
//! The engine knows nothing of clients or connections: the server installs
//! an `Invalidate` sink and turns `on` while any client tracks. With no
//! tracking client a write pays one relaxed load of `on`.
use crate::cx::Cx;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Where the engine reports changed keys (the server's tracking table).
/// Called with the key's shard locked: it must not lock a shard.
pub trait Invalidate: Send + Sync {
    /// `key` changed or left the keyspace (any database: Redis tracks key
    /// names, not databases). `cx` is the command that changed it
    /// (`Cx::client` names its client, 0 for expiry and eviction).
    fn key(&self, key: &[u8], cx: &Cx);
    /// `key` was deleted by `cx`'s lookup because its time had passed:
    /// Redis's `signalModifiedKey(NULL, ...)`, so a BCAST prefix records
    /// no client for it (a NOLOOP reader is told), while a tracking
    /// client that reads it counts as the one that changed it.
    fn expired(&self, key: &[u8], cx: &Cx) {
        self.key(key, cx)
    }
    /// Every key may have changed (FLUSHDB, FLUSHALL).
    fn all(&self, cx: &Cx);
}

/// The engine's end of the hook.
#[derive(Default)]
pub struct Hook {
    on: AtomicBool,
    sink: OnceLock<Arc<dyn Invalidate>>,
}

impl Hook {
    /// Installs the sink (once, at start).
    pub fn install(&self, sink: Arc<dyn Invalidate>) {
        let _ = self.sink.set(sink);
    }

    /// Turns reporting on or off (on while any client tracks keys).
    pub fn set_on(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Reports `key` as changed, if anyone tracks: on every write path,
    /// so inlined to a load and a branch.
    #[inline]
    pub(crate) fn key(&self, key: &[u8], cx: &Cx) {
        if self.on() {
            self.report(key, cx);
        }
    }

    #[cold]
    #[inline(never)]
    fn report(&self, key: &[u8], cx: &Cx) {
        if let Some(s) = self.sink.get() {
            s.key(key, cx);
        }
    }

    /// Reports `key` as deleted by a lookup that found it past its time.
    #[inline]
    pub(crate) fn expired(&self, key: &[u8], cx: &Cx) {
        if self.on() {
            if let Some(s) = self.sink.get() {
                s.expired(key, cx);
            }
        }
    }

    /// Reports that every key may have changed, if anyone tracks.
    pub(crate) fn all(&self, cx: &Cx) {
        if self.on() {
            if let Some(s) = self.sink.get() {
                s.all(cx);
            }
        }
    }
}
