//! Wall-clock milliseconds for expiry, with an offset that tests can move.
//!
//! Expiry compares against Unix milliseconds, as Redis does (`mstime()`), so
//! absolute deadlines (EXPIREAT, PXAT) and relative ones share one scale. The
//! offset exists so integration tests can jump the clock forward through
//! `DEBUG JUMP-CLOCK` instead of sleeping; it is zero in production.
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static OFFSET_MS: AtomicI64 = AtomicI64::new(0);
/// Seconds for LRU bookkeeping, refreshed by `tick` (Redis's cached
/// `server.lruclock`): reading the time on every key access would cost a
/// clock call per command for a value only precise to the second.
static LRU_SECS: AtomicU32 = AtomicU32::new(0);
/// Non-zero: the clock stands still at this Unix millisecond (tests only).
static FROZEN_MS: AtomicI64 = AtomicI64::new(0);

/// Current Unix time in milliseconds (with the test offset). A running
/// command reads its own fixed time from its context instead
/// (`crate::cx::Cx::now_ms`, Redis 7.0 `call()`'s cached time), so one
/// command reads the clock once for its timing and all its expiry checks.
pub fn now_ms() -> u64 {
    now_us() / 1000
}

/// Current Unix time in microseconds, including the test offset.
pub fn now_us() -> u64 {
    let frozen = FROZEN_MS.load(Ordering::Relaxed);
    let base = if frozen != 0 {
        frozen * 1000
    } else {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0)
    };
    (base + OFFSET_MS.load(Ordering::Relaxed) * 1000).max(0) as u64
}

/// Stops the clock at the current time (true) or lets it run again
/// (false), so model tests can compare expiry without racing real time.
pub fn freeze(on: bool) {
    let now = if on {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(1)
    } else {
        0
    };
    FROZEN_MS.store(now, Ordering::Relaxed);
}

/// Moves the clock forward (or back) by `delta_ms` for every later reading.
pub fn jump(delta_ms: i64) {
    OFFSET_MS.fetch_add(delta_ms, Ordering::Relaxed);
    tick();
}

/// The offset currently applied, in milliseconds.
pub fn offset_ms() -> i64 {
    OFFSET_MS.load(Ordering::Relaxed)
}

/// Refreshes the cached LRU clock; the server's cron calls it every tick.
pub fn tick() {
    LRU_SECS.store((now_us() / 1_000_000) as u32, Ordering::Relaxed);
}

/// The LRU clock in seconds, as of the last `tick` (never 0 once read).
pub fn lru_secs() -> u32 {
    match LRU_SECS.load(Ordering::Relaxed) {
        0 => {
            tick();
            LRU_SECS.load(Ordering::Relaxed)
        }
        s => s,
    }
}
