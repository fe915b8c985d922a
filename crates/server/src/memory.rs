//! Memory figures from the allocator itself (jemalloc), and the maxmemory
//! guard. Issue "Memory" brings eviction and exact per-key accounting; until
//! then every policy behaves as `noeviction`: over the limit, commands that
//! may grow memory are refused with Redis's `-OOM` error and nothing stored
//! is lost, while reads and deletes keep working.
use crate::shared::Shared;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// Bytes the program has allocated and not freed, as jemalloc counts them.
pub fn allocated() -> usize {
    // The statistics are a snapshot taken at the last epoch advance.
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0)
}

/// The last reading, and whether it is over `maxmemory`.
#[derive(Default)]
pub struct Guard {
    pub used: AtomicUsize,
    pub peak: AtomicUsize,
    pub over_limit: AtomicBool,
}

/// How often the guard re-reads the allocator. A write burst can overshoot
/// the limit by what arrives in one interval; the memory issue replaces this
/// with accounting on the write path.
pub const CHECK_EVERY: Duration = Duration::from_millis(10);

impl Guard {
    pub fn refresh(&self, maxmemory: u64) -> usize {
        let used = allocated();
        self.used.store(used, Ordering::Relaxed);
        self.peak.fetch_max(used, Ordering::Relaxed);
        self.over_limit
            .store(maxmemory > 0 && used as u64 > maxmemory, Ordering::Relaxed);
        used
    }
}

/// Keeps `shared.memory` current; runs on its own thread. Without a
/// limit only INFO's peak needs it, so it wakes ten times less often.
pub fn watch(shared: &Shared) {
    loop {
        let max = shared.hot.maxmemory.load(Ordering::Relaxed);
        shared.memory.refresh(max);
        std::thread::sleep(if max > 0 {
            CHECK_EVERY
        } else {
            CHECK_EVERY * 10
        });
    }
}
