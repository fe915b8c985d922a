//! Per-command latency histograms (Redis 7.0 `latency-tracking`): each
//! command's run times, read by LATENCY HISTOGRAM and INFO latencystats
//! (`resp::cmd::latency`, `resp::cmd::info`) and reset by CONFIG
//! RESETSTAT. The event monitor of LATENCY LATEST/HISTORY is
//! `crate::latency`, a different thing.
//!
//! Redis keeps one HdrHistogram per command (server.c
//! `updateCommandLatencyHistogram`: lowest 1 ns, highest 1 s, 2
//! significant figures) and records `duration_us * 1000` ns in it. Cairn
//! keeps the same bucket layout, so the same run times give the same
//! percentiles and the same CDF buckets: 23 buckets of 128 sub-buckets
//! (256 in the first), 3072 counters, each bucket twice as wide as the one
//! before. The index arithmetic is HdrHistogram's (counts_index_for,
//! value_at_index, lowest/highest_equivalent_value), written for these
//! constants.
//!
//! Every worker records into its own counters (`WorkerStats::latency`:
//! a plain load + store, no shared atomic on the request path), each
//! command's allocated on its first call, as Redis allocates lazily; a
//! reader sums the workers' counters. CONFIG RESETSTAT frees them, as
//! Redis frees its histograms (~24 KB each): it bumps a generation; each
//! worker drops its own histograms at its next record (the only writer of
//! its slots), and readers skip a worker whose histograms are from an
//! older generation. Readers hold the worker's read lock while summing, so
//! the worker never frees what a reader is adding up. Keeping a baseline
//! instead, as INFO's other counters do, kept every histogram (and a copy)
//! forever: ~25 KB per command per worker, which after a few hundred
//! commands made MEMORY DOCTOR see a non-empty instance where Redis, having
//! freed them, does not.
use crate::shared::{bump, Shared};
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// HdrHistogram's sub_bucket_half_count_magnitude for 2 significant
/// figures: 2 * 10^2 needs 8 bits, half of them is 2^7.
const HALF_MAGNITUDE: u32 = 7;
const SUB_BUCKET_HALF: usize = 1 << HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << (HALF_MAGNITUDE + 1)) - 1;
/// Buckets needed to reach 1 s: 256 << 22 is the first power past 10^9.
const BUCKETS: usize = 23;
/// Counters per histogram: (buckets + 1) * half a bucket.
pub const COUNTS_LEN: usize = (BUCKETS + 1) * SUB_BUCKET_HALF;
/// Values are clamped to 1 ns ..= 1 s before recording, as Redis does.
const MIN_NS: u64 = 1;
const MAX_NS: u64 = 1_000_000_000;

fn bucket_index(v: u64) -> u32 {
    64 - (v | SUB_BUCKET_MASK).leading_zeros() - (HALF_MAGNITUDE + 1)
}

/// The counter a value of `v` ns goes to.
#[inline]
fn counts_index(v: u64) -> usize {
    let b = bucket_index(v);
    let sub = (v >> b) as usize;
    ((b as usize + 1) << HALF_MAGNITUDE) + sub - SUB_BUCKET_HALF
}

/// The lowest value counter `i` holds.
fn value_at_index(i: usize) -> u64 {
    let bucket = (i >> HALF_MAGNITUDE) as i64 - 1;
    let sub = (i & (SUB_BUCKET_HALF - 1)) + SUB_BUCKET_HALF;
    if bucket < 0 {
        (sub - SUB_BUCKET_HALF) as u64
    } else {
        (sub as u64) << bucket
    }
}

fn lowest_equivalent(v: u64) -> u64 {
    let b = bucket_index(v);
    (v >> b) << b
}

/// The highest value that shares `v`'s counter.
fn highest_equivalent(v: u64) -> u64 {
    // Within the layout a value's sub-bucket is always below 256, so the
    // range of its counter is 2^bucket.
    lowest_equivalent(v) + (1u64 << bucket_index(v)) - 1
}

/// One worker's histograms, one per command id, each allocated on the
/// command's first call.
/// One histogram per command id, allocated on the command's first call.
type Slots = Box<[OnceLock<Box<[AtomicU64]>>]>;

pub struct Tracks {
    slots: RwLock<Slots>,
    /// The reset generation the slots belong to.
    gen: AtomicU64,
}

/// Bumped by CONFIG RESETSTAT.
static RESET_GEN: AtomicU64 = AtomicU64::new(0);

fn empty_slots(commands: usize) -> Slots {
    (0..commands).map(|_| OnceLock::new()).collect()
}

impl Tracks {
    pub fn new(commands: usize) -> Tracks {
        Tracks {
            slots: RwLock::new(empty_slots(commands)),
            gen: AtomicU64::new(RESET_GEN.load(Ordering::Relaxed)),
        }
    }

    /// Records one call of command `cmd` that took `micros` µs. Only the
    /// worker that owns these tracks calls it.
    #[inline]
    pub fn record(&self, cmd: usize, micros: u64) {
        let gen = RESET_GEN.load(Ordering::Acquire);
        if self.gen.load(Ordering::Relaxed) != gen {
            let mut slots = self.slots.write();
            let n = slots.len();
            *slots = empty_slots(n);
            self.gen.store(gen, Ordering::Release);
        }
        let ns = micros.saturating_mul(1000).clamp(MIN_NS, MAX_NS);
        // SAFETY: this worker is the only thread that ever takes the write
        // lock (just above), so while it runs here nothing can mutate the
        // slots; other threads only hold read locks, i.e. shared access, as
        // this is. Not locking keeps two atomic RMWs off every command.
        let slots = unsafe { &*self.slots.data_ptr() };
        let counts =
            slots[cmd].get_or_init(|| (0..COUNTS_LEN).map(|_| AtomicU64::new(0)).collect());
        bump(&counts[counts_index(ns)], 1);
    }

    fn add_to(&self, cmd: usize, sum: &mut Option<Box<[u64]>>) {
        let slots = self.slots.read();
        // Counts from before the last reset read as none.
        if self.gen.load(Ordering::Acquire) != RESET_GEN.load(Ordering::Acquire) {
            return;
        }
        if let Some(counts) = slots[cmd].get() {
            let sum = sum.get_or_insert_with(|| vec![0; COUNTS_LEN].into_boxed_slice());
            for (s, c) in sum.iter_mut().zip(counts.iter()) {
                *s += c.load(Ordering::Relaxed);
            }
        }
    }
}

/// A command's histogram as read: every worker's counters summed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
}

fn sum_workers(shared: &Shared, cmd: usize) -> Option<Box<[u64]>> {
    let mut sum = None;
    let master = shared.replication.master_stats_if_any();
    for w in shared.worker_stats.iter().chain(master) {
        w.latency.add_to(cmd, &mut sum);
    }
    sum
}

/// Command `cmd`'s histogram since the last CONFIG RESETSTAT; None if it
/// has not run since (Redis frees the histograms on reset and makes one
/// at the next call).
pub fn read(shared: &Shared, cmd: usize) -> Option<Histogram> {
    let counts = sum_workers(shared, cmd)?;
    let total = counts.iter().sum();
    (total > 0).then_some(Histogram { counts, total })
}

/// CONFIG RESETSTAT: every histogram starts again from nothing.
/// Each worker frees its histograms at its next record.
pub fn reset(_shared: &Shared) {
    RESET_GEN.fetch_add(1, Ordering::AcqRel);
}

impl Histogram {
    #[cfg(test)]
    fn from_values(values: &[u64]) -> Histogram {
        let mut counts = vec![0; COUNTS_LEN].into_boxed_slice();
        for &v in values {
            counts[counts_index(v.clamp(MIN_NS, MAX_NS))] += 1;
        }
        Histogram {
            counts,
            total: values.len() as u64,
        }
    }

    /// Calls recorded.
    pub fn calls(&self) -> u64 {
        self.total
    }

    /// The value (ns) at `percentile` (0..=100): the highest value of the
    /// counter where the running count reaches `percentile` of the calls,
    /// rounded half up, at least one (hdr_value_at_percentile); for
    /// percentile 0, the lowest value of that counter.
    pub fn value_at_percentile(&self, percentile: f64) -> u64 {
        let p = percentile.min(100.0);
        let wanted = (((p / 100.0) * self.total as f64) + 0.5) as u64;
        // At least one call, so percentile 0 is the lowest recorded value
        // (as Redis 7.0.15 answers it), not 0.
        let wanted = wanted.clamp(1, self.total.max(1));
        let mut seen = 0;
        let mut value = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            if seen >= wanted {
                break;
            }
            seen += c;
            value = value_at_index(i);
        }
        if percentile == 0.0 {
            lowest_equivalent(value)
        } else {
            highest_equivalent(value)
        }
    }

    /// LATENCY HISTOGRAM's `histogram_usec`: (µs, calls at or below it),
    /// cumulative, at power-of-two boundaries from 1024 ns, leaving out
    /// those that add no calls. This is HdrHistogram's logarithmic
    /// iterator (first bucket 1024, base 2) as Redis's `fillCommandCDF`
    /// walks it: each step reports the highest value of the counter where
    /// the walk stopped, which is the boundary's own counter, or the last
    /// counter once the walk runs off the end.
    pub fn cdf(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut level: u64 = 1024;
        let mut level_low = lowest_equivalent(level);
        // The walk's position: counter index (-1 before the first), the
        // calls up to it, its lowest and highest values.
        let mut index: isize = -1;
        let mut cumulative = 0;
        let mut value = 0;
        let mut highest = 0;
        let mut previous = 0;
        let mut emit = |highest: u64, cumulative: u64| {
            if cumulative > previous {
                out.push((highest / 1000, cumulative));
            }
            previous = cumulative;
        };
        loop {
            let more_after_level = (index as usize).wrapping_add(1) < COUNTS_LEN
                && value_at_index((index + 1) as usize) > level_low;
            if cumulative >= self.total && !more_after_level {
                break;
            }
            loop {
                if value >= level_low {
                    emit(highest, cumulative);
                    level *= 2;
                    level_low = lowest_equivalent(level);
                    break;
                }
                index += 1;
                if index as usize >= COUNTS_LEN {
                    emit(highest, cumulative);
                    return out;
                }
                cumulative += self.counts[index as usize];
                value = value_at_index(index as usize);
                highest = highest_equivalent(value);
            }
        }
        out
    }
}

/// INFO's percentile label: `%f` with trailing zeros (and a bare point)
/// trimmed, as Redis's `trimDoubleString` leaves it (99.9, 50).
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0');
    s.strip_suffix('.').unwrap_or(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_redis_hdr_layout() {
        assert_eq!(COUNTS_LEN, 3072);
        // Exact up to 255, then 2 significant figures.
        for v in [1, 2, 127, 128, 255] {
            assert_eq!(value_at_index(counts_index(v)), v);
        }
        assert_eq!(counts_index(1000), 506);
        assert_eq!(value_at_index(506), 1000);
        assert_eq!(highest_equivalent(1000), 1003);
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(lowest_equivalent(1_000_000_000), 998_244_352);
        assert!(counts_index(MAX_NS) < COUNTS_LEN);
        assert_eq!(counts_index(0), 0);
        // Every counter's values map back to it.
        for i in 1..COUNTS_LEN {
            let v = value_at_index(i);
            if v > 0 {
                assert_eq!(counts_index(v), i, "{v}");
                assert_eq!(counts_index(highest_equivalent(v)), i, "{v}");
            }
        }
    }

    #[test]
    fn percentiles_round_half_up_and_report_the_counter_top() {
        // 1 µs calls as Redis records them: 1000 ns.
        let h = Histogram::from_values(&[1000; 10]);
        assert_eq!(h.value_at_percentile(50.0), 1003);
        assert_eq!(h.value_at_percentile(99.9), 1003);
        let mut values = vec![1000; 99];
        values.push(50_000);
        let h = Histogram::from_values(&values);
        assert_eq!(h.value_at_percentile(50.0), 1003);
        assert_eq!(h.value_at_percentile(99.0), 1003);
        assert_eq!(h.value_at_percentile(99.9), 50_175);
        assert_eq!(h.value_at_percentile(100.0), 50_175);
        assert_eq!(h.value_at_percentile(0.0), 1000);
    }

    #[test]
    fn cdf_buckets_are_redis_power_of_two_boundaries() {
        // A 0 µs call is clamped to 1 ns: below the first boundary.
        assert_eq!(Histogram::from_values(&[1]).cdf(), vec![(1, 1)]);
        assert_eq!(Histogram::from_values(&[1000, 1000]).cdf(), vec![(1, 2)]);
        assert_eq!(Histogram::from_values(&[5000]).cdf(), vec![(8, 1)]);
        assert_eq!(
            Histogram::from_values(&[1000, 3000, 3000, 70_000]).cdf(),
            vec![(1, 1), (4, 3), (132, 4)]
        );
        // Past the last boundary below 1 s the walk ends on the last counter.
        assert_eq!(
            Histogram::from_values(&[1000, MAX_NS]).cdf(),
            vec![(1, 1), (1_073_741, 2)]
        );
    }

    #[test]
    fn labels_trim_like_redis() {
        assert_eq!(percentile_label(50.0), "50");
        assert_eq!(percentile_label(99.9), "99.9");
        assert_eq!(percentile_label(99.99), "99.99");
        assert_eq!(percentile_label(0.0), "0");
    }
}
