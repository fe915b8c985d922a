//! Speed-over-time arithmetic for E4 and E5 (issue 25): stalls (spans
//! longer than a threshold in which no call completed, from the completion
//! times of every thread), a summary of a per-second curve, and E5's load
//! curve by percent of the load with the ratio of its last tenth's speed to
//! its first tenth's.

use serde::Serialize;

/// A span in which nothing completed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stall {
    /// Seconds from the run's start to the span's start.
    pub at_s: f64,
    pub len_s: f64,
}

/// The spans longer than `threshold_s` between `start_s`, the sorted
/// completion times `done_s` and `end_s` (all in seconds from one origin).
pub fn stalls(done_s: &[f64], start_s: f64, end_s: f64, threshold_s: f64) -> Vec<Stall> {
    let mut out = Vec::new();
    let mut prev = start_s;
    for &t in done_s.iter().chain(std::iter::once(&end_s)) {
        if t - prev > threshold_s {
            out.push(Stall {
                at_s: prev - start_s,
                len_s: t - prev,
            });
        }
        prev = prev.max(t);
    }
    out
}

/// A per-second curve in a few numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurveSummary {
    /// Whole seconds in the curve (a last partial second is left out).
    pub seconds: usize,
    pub min: f64,
    /// The 5th percentile of the per-second speeds (nearest rank).
    pub p5: f64,
    pub median: f64,
    pub max: f64,
    /// Whole seconds in which nothing completed.
    pub zero_seconds: usize,
}

/// Summarises per-second counts of a run lasting `duration_s`.
pub fn summarize(counts: &[u64], duration_s: f64) -> Option<CurveSummary> {
    let whole = (duration_s.max(0.0).floor() as usize).min(counts.len());
    let mut v: Vec<f64> = counts[..whole].iter().map(|c| *c as f64).collect();
    if v.is_empty() {
        return None;
    }
    let zero_seconds = v.iter().filter(|x| **x == 0.0).count();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some(CurveSummary {
        seconds: v.len(),
        min: v[0],
        p5: rank(0.05),
        median: rank(0.5),
        max: v[v.len() - 1],
        zero_seconds,
    })
}

/// The number of inserts that ends percent `p` (0..=100) of a load of `n`.
#[inline]
pub fn percent_mark(p: usize, n: u64) -> u64 {
    (n as u128 * p as u128).div_ceil(100) as u64
}

/// The percent boundaries crossed when the completed count goes from
/// `before` to `after` (exclusive, inclusive], for a load of `n`.
pub fn crossed(before: u64, after: u64, n: u64) -> impl Iterator<Item = usize> {
    (1..=100usize).filter(move |p| {
        let m = percent_mark(*p, n);
        before < m && m <= after
    })
}

/// Inserts per second over percents `a..b` of a load of `n`, from the
/// times (seconds from the start) at which each percent was done
/// (`marks[p]`, `marks[0]` = 0).
pub fn rate_between(marks: &[Option<f64>], n: u64, a: usize, b: usize) -> Option<f64> {
    let (ta, tb) = (marks.get(a).copied()??, marks.get(b).copied()??);
    let inserts = percent_mark(b, n) - percent_mark(a, n);
    (tb > ta).then(|| inserts as f64 / (tb - ta))
}

/// E5's bar: the speed of the last tenth of the load over the first tenth's.
pub fn last_to_first_tenth(marks: &[Option<f64>], n: u64) -> Option<f64> {
    let first = rate_between(marks, n, 0, 10)?;
    let last = rate_between(marks, n, 90, 100)?;
    (first > 0.0).then(|| last / first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_are_gaps_longer_than_the_threshold() {
        let done = [0.1, 0.5, 0.9, 2.5, 2.6, 4.0];
        let s = stalls(&done, 0.0, 4.2, 1.0);
        assert_eq!(s.len(), 2);
        assert!((s[0].at_s - 0.9).abs() < 1e-9 && (s[0].len_s - 1.6).abs() < 1e-9);
        assert!((s[1].at_s - 2.6).abs() < 1e-9 && (s[1].len_s - 1.4).abs() < 1e-9);
        // A wait before the first completion and after the last counts.
        let s = stalls(&[1.5], 0.0, 3.0, 1.0);
        assert_eq!(s.len(), 2);
        assert!((s[0].len_s - 1.5).abs() < 1e-9);
        assert!(stalls(&[0.5, 1.0, 1.9], 0.0, 2.0, 1.0).is_empty());
        // Exactly the threshold is not a stall.
        assert!(stalls(&[1.0], 0.0, 1.0, 1.0).is_empty());
    }

    #[test]
    fn curve_summary() {
        let s = summarize(&[10, 0, 30, 20, 5], 4.5).unwrap();
        assert_eq!(s.seconds, 4);
        assert_eq!((s.min, s.max, s.zero_seconds), (0.0, 30.0, 1));
        assert_eq!(s.median, 10.0);
        assert_eq!(s.p5, 0.0);
        assert!(summarize(&[5], 0.5).is_none());
        let s = summarize(&(1..=100).collect::<Vec<u64>>(), 100.0).unwrap();
        assert_eq!((s.p5, s.median), (5.0, 50.0));
    }

    #[test]
    fn percent_marks_and_crossings() {
        assert_eq!(percent_mark(0, 1000), 0);
        assert_eq!(percent_mark(1, 1000), 10);
        assert_eq!(percent_mark(100, 1000), 1000);
        // Fewer records than percents: several percents end on one record.
        assert_eq!(percent_mark(1, 50), 1);
        assert_eq!(percent_mark(2, 50), 1);
        assert_eq!(percent_mark(3, 50), 2);
        assert_eq!(crossed(0, 25, 1000).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(crossed(20, 20, 1000).count(), 0);
        assert_eq!(crossed(990, 1000, 1000).collect::<Vec<_>>(), vec![100]);
        assert_eq!(crossed(0, 1000, 1000).count(), 100);
    }

    #[test]
    fn tenth_ratio() {
        // 1000 inserts; the first tenth (100) in 1 s, the last in 2 s.
        let mut marks: Vec<Option<f64>> = (0..=100).map(|p| Some(p as f64 * 0.1)).collect();
        assert_eq!(rate_between(&marks, 1000, 0, 10), Some(100.0));
        marks[100] = Some(marks[90].unwrap() + 2.0);
        let r = last_to_first_tenth(&marks, 1000).unwrap();
        assert!((r - 0.5).abs() < 1e-9, "{r}");
        // A flat load is 1.0; an unfinished one has no ratio.
        let flat: Vec<Option<f64>> = (0..=100).map(|p| Some(p as f64)).collect();
        assert!((last_to_first_tenth(&flat, 500).unwrap() - 1.0).abs() < 1e-9);
        let mut cut = flat.clone();
        cut[100] = None;
        assert_eq!(last_to_first_tenth(&cut, 500), None);
    }
}
