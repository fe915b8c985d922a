//! Small value-level helpers shared by the engine's commands: glob matching
//! (Redis `stringmatchlen`), integer/float text (Redis `util.c` and the
//! long double arithmetic of INCRBYFLOAT), LCS (Redis `lcsCommand`) and the
//! geohash of the geo commands (Redis `geohash.c`, `geohash_helper.c`).
//! None of them knows about keys, shards or the wire format.
pub mod geohash;
pub mod glob;
pub mod huff;
pub mod lcs;
pub mod num;
pub mod smallbytes;

/// How many items ahead walks over separately allocated items prefetch
/// (`prefetch`): a few items' work covers one miss.
pub const PREFETCH_AHEAD: usize = 8;

/// A hint to load the cache line at `p` ahead of use (never faults,
/// whatever `p` is). Walks over separately allocated items (a table's
/// entries, a large hash's fields) use it a few items ahead.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it reads nothing and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
