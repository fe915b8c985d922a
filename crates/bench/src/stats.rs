//! Per-thread measurement: an HDR histogram per operation type, error counts
//! by kind, and completed units per second. Each client thread owns its
//! [`Recorder`] (no locks, no shared writes except a relaxed progress
//! counter it alone stores to); recorders are merged after the run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::wire::OpError;

/// Histogram range: 1 ns to 100 s, 3 significant digits.
pub const HIST_LOW_NS: u64 = 1;
pub const HIST_HIGH_NS: u64 = 100_000_000_000;
pub const HIST_SIGFIG: u8 = 3;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG)
        .expect("valid histogram bounds")
}

/// Progress counters, one cache line per thread, read by the progress
/// display.
#[repr(align(64))]
#[derive(Default)]
pub struct Slot {
    pub done: AtomicU64,
    pub errors: AtomicU64,
}

/// The counters of every thread of a run.
pub struct Progress {
    pub slots: Vec<Slot>,
}

impl Progress {
    pub fn new(threads: usize) -> Arc<Progress> {
        Arc::new(Progress {
            slots: (0..threads).map(|_| Slot::default()).collect(),
        })
    }

    pub fn done(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.done.load(Ordering::Relaxed))
            .sum()
    }

    pub fn errors(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| s.errors.load(Ordering::Relaxed))
            .sum()
    }
}

/// One operation type's measurements.
#[derive(Clone)]
pub struct OpRec {
    pub hist: Option<Histogram<u64>>,
    /// Units (keys, bytes, operations) of successful operations.
    pub units: u64,
    pub errors: BTreeMap<&'static str, u64>,
    /// The first message seen for each error kind.
    pub samples: BTreeMap<&'static str, String>,
}

impl OpRec {
    fn new() -> OpRec {
        OpRec {
            hist: None,
            units: 0,
            errors: BTreeMap::new(),
            samples: BTreeMap::new(),
        }
    }

    /// Successful operations.
    pub fn count(&self) -> u64 {
        self.hist.as_ref().map_or(0, |h| h.len())
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    fn merge(&mut self, o: &OpRec) {
        if let Some(h) = &o.hist {
            match &mut self.hist {
                Some(mine) => mine.add(h).expect("histograms with equal bounds"),
                None => self.hist = Some(h.clone()),
            }
        }
        self.units += o.units;
        for (k, v) in &o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        for (k, v) in &o.samples {
            self.samples.entry(k).or_insert_with(|| v.clone());
        }
    }
}

/// A thread's measurements.
pub struct Recorder {
    pub names: &'static [&'static str],
    pub ops: Vec<OpRec>,
    pub start: Instant,
    /// Successful units completed in each second since `start`.
    pub timeline: Vec<u64>,
    done: u64,
    errors: u64,
    progress: Arc<Progress>,
    slot: usize,
}

impl Recorder {
    pub fn new(names: &'static [&'static str], progress: Arc<Progress>, slot: usize) -> Recorder {
        Recorder {
            names,
            ops: names.iter().map(|_| OpRec::new()).collect(),
            start: Instant::now(),
            timeline: Vec::with_capacity(600),
            done: 0,
            errors: 0,
            progress,
            slot,
        }
    }

    /// Restarts the clock (after the start barrier).
    pub fn start_now(&mut self) {
        self.start = Instant::now();
    }

    #[inline]
    fn tick(&mut self, now: Instant, units: u64) {
        let sec = now.saturating_duration_since(self.start).as_secs() as usize;
        if sec >= self.timeline.len() {
            self.timeline.resize(sec + 1, 0);
        }
        self.timeline[sec] += units;
    }

    /// `count` operations of type `op` succeeded, each taking `latency`,
    /// moving `units` units in all; `now` is when they completed.
    #[inline]
    pub fn ok(&mut self, op: usize, latency: Duration, count: u64, units: u64, now: Instant) {
        let ns = (latency.as_nanos() as u64).clamp(HIST_LOW_NS, HIST_HIGH_NS);
        let rec = &mut self.ops[op];
        let h = rec.hist.get_or_insert_with(new_hist);
        // Cannot fail: the value is clamped into range.
        let _ = h.record_n(ns, count);
        rec.units += units;
        self.tick(now, units);
        self.done += count;
        self.progress.slots[self.slot]
            .done
            .store(self.done, Ordering::Relaxed);
    }

    /// `count` operations of type `op` failed with `e`.
    pub fn err(&mut self, op: usize, e: &OpError, count: u64) {
        let rec = &mut self.ops[op];
        let kind = e.kind();
        *rec.errors.entry(kind).or_default() += count;
        rec.samples.entry(kind).or_insert_with(|| e.detail());
        self.errors += count;
        self.done += count;
        let slot = &self.progress.slots[self.slot];
        slot.errors.store(self.errors, Ordering::Relaxed);
        slot.done.store(self.done, Ordering::Relaxed);
    }

    /// Operations finished so far (successful or not).
    pub fn done(&self) -> u64 {
        self.done
    }
}

/// The merged measurements of a run.
pub struct Merged {
    pub names: &'static [&'static str],
    pub ops: Vec<OpRec>,
    pub timeline: Vec<u64>,
}

impl Merged {
    pub fn new(names: &'static [&'static str]) -> Merged {
        Merged {
            names,
            ops: names.iter().map(|_| OpRec::new()).collect(),
            timeline: Vec::new(),
        }
    }

    /// Adds a thread's (or another run's) measurements.
    pub fn add_recorder(&mut self, r: &Recorder, offset_s: usize) {
        for (m, o) in self.ops.iter_mut().zip(&r.ops) {
            m.merge(o);
        }
        if self.timeline.len() < r.timeline.len() + offset_s {
            self.timeline.resize(r.timeline.len() + offset_s, 0);
        }
        for (i, v) in r.timeline.iter().enumerate() {
            self.timeline[i + offset_s] += v;
        }
    }

    pub fn add_merged(&mut self, o: &Merged) {
        for (m, x) in self.ops.iter_mut().zip(&o.ops) {
            m.merge(x);
        }
    }

    /// Successful operations of every type.
    pub fn ok_count(&self) -> u64 {
        self.ops.iter().map(|o| o.count()).sum()
    }

    pub fn error_count(&self) -> u64 {
        self.ops.iter().map(|o| o.error_count()).sum()
    }

    pub fn timeout_count(&self) -> u64 {
        self.ops
            .iter()
            .map(|o| o.errors.get("timeout").copied().unwrap_or(0))
            .sum()
    }

    pub fn units(&self) -> u64 {
        self.ops.iter().map(|o| o.units).sum()
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// Summarises a histogram of nanoseconds. Percentiles are HDR's
/// `value_at_quantile` (the highest value equivalent to the bucket, as
/// redis-benchmark and YCSB report them).
pub fn latency(h: Option<&Histogram<u64>>) -> Latency {
    let Some(h) = h.filter(|h| !h.is_empty()) else {
        return Latency::default();
    };
    let us = |ns: u64| ns as f64 / 1000.0;
    Latency {
        count: h.len(),
        mean_us: h.mean() / 1000.0,
        min_us: us(h.min()),
        p50_us: us(h.value_at_quantile(0.50)),
        p95_us: us(h.value_at_quantile(0.95)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

/// The median of a list (mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s: Vec<f64> = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// Operations per second, 0 for an empty interval.
pub fn rate(count: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// Server CPU microseconds per operation from a tick delta.
pub fn cpu_us_per_op(ticks: u64, clk_tck: u64, ops: u64) -> Option<f64> {
    (ops > 0 && clk_tck > 0).then(|| ticks as f64 * 1e6 / clk_tck as f64 / ops as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &["GET", "SET"];

    #[test]
    fn percentiles_of_known_data() {
        let mut h = new_hist();
        // 1..=1000 µs, once each.
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let l = latency(Some(&h));
        assert_eq!(l.count, 1000);
        let close = |got: f64, want: f64| (got - want).abs() / want < 0.002;
        assert!(close(l.p50_us, 500.0), "{}", l.p50_us);
        assert!(close(l.p95_us, 950.0), "{}", l.p95_us);
        assert!(close(l.p99_us, 990.0), "{}", l.p99_us);
        assert!(close(l.p999_us, 999.0), "{}", l.p999_us);
        assert!(close(l.max_us, 1000.0));
        assert!(close(l.min_us, 1.0));
        assert!(close(l.mean_us, 500.5));
        assert_eq!(latency(None), Latency::default());
    }

    #[test]
    fn merging_threads_equals_one_histogram() {
        let p = Progress::new(2);
        let mut a = Recorder::new(NAMES, p.clone(), 0);
        let mut b = Recorder::new(NAMES, p.clone(), 1);
        let mut all = new_hist();
        let t0 = a.start;
        for i in 0..1000u64 {
            let d = Duration::from_micros(10 + i % 97);
            let r = if i % 3 == 0 { &mut a } else { &mut b };
            r.ok((i % 2) as usize, d, 1, 1, t0);
            all.record(d.as_nanos() as u64).unwrap();
        }
        a.err(0, &OpError::Timeout, 2);
        b.err(1, &OpError::Missing, 1);
        b.err(1, &OpError::Timeout, 1);
        assert_eq!(p.done(), 1004);
        assert_eq!(p.errors(), 4);
        let mut m = Merged::new(NAMES);
        m.add_recorder(&a, 0);
        m.add_recorder(&b, 0);
        assert_eq!(m.ok_count(), 1000);
        assert_eq!(m.error_count(), 4);
        assert_eq!(m.timeout_count(), 3);
        let mut merged = new_hist();
        for o in &m.ops {
            merged.add(o.hist.as_ref().unwrap()).unwrap();
        }
        assert_eq!(latency(Some(&merged)), latency(Some(&all)));
        assert_eq!(m.ops[1].errors.get("missing"), Some(&1));
        assert_eq!(m.ops[1].samples.get("missing").unwrap(), "value missing");
        assert_eq!(m.timeline, vec![1000]);
    }

    #[test]
    fn timeline_buckets_by_second() {
        let p = Progress::new(1);
        let mut r = Recorder::new(NAMES, p, 0);
        let s = r.start;
        r.ok(
            0,
            Duration::from_micros(5),
            1,
            32,
            s + Duration::from_millis(100),
        );
        r.ok(
            0,
            Duration::from_micros(5),
            1,
            32,
            s + Duration::from_millis(2500),
        );
        r.ok(
            0,
            Duration::from_micros(5),
            1,
            32,
            s + Duration::from_millis(2900),
        );
        assert_eq!(r.timeline, vec![32, 0, 64]);
        let mut m = Merged::new(NAMES);
        m.add_recorder(&r, 1);
        assert_eq!(m.timeline, vec![0, 32, 0, 64]);
        assert_eq!(m.units(), 96);
    }

    #[test]
    fn out_of_range_latencies_are_clamped() {
        let p = Progress::new(1);
        let mut r = Recorder::new(NAMES, p, 0);
        let s = r.start;
        r.ok(0, Duration::from_secs(1000), 1, 1, s);
        r.ok(0, Duration::ZERO, 1, 1, s);
        let l = latency(r.ops[0].hist.as_ref());
        assert_eq!(l.count, 2);
        assert!(l.max_us >= 99_000_000.0);
    }

    #[test]
    fn report_maths() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(rate(500, 2.0), 250.0);
        assert_eq!(rate(5, 0.0), 0.0);
        // 50 ticks at 100 Hz = 0.5 s of CPU over 100,000 ops = 5 µs/op.
        assert_eq!(cpu_us_per_op(50, 100, 100_000), Some(5.0));
        assert_eq!(cpu_us_per_op(50, 100, 0), None);
    }
}
