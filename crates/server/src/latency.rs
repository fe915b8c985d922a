//! The latency monitor (Redis 7.0 latency.c): for each event class
//! ("command", "fast-command", ...), the worst latency of each second in
//! which it passed `latency-monitor-threshold`, the last 160 such seconds,
//! and the all-time worst. LATENCY LATEST / HISTORY / GRAPH / DOCTOR /
//! RESET read it (`resp::cmd::latency`).
//!
//! Events Cairn records: `command` and `fast-command` (a command's run
//! time, by its `fast` flag, as Redis's `call()`), and `expire-cycle`
//! (a background expiry sweep, as Redis's `activeExpireCycle`). Redis's
//! fork, AOF, expire-del and eviction events have no Cairn counterpart
//! sampled yet.
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Samples kept per event (Redis's LATENCY_TS_LEN).
pub const HISTORY_LEN: usize = 160;

/// One second's worst latency of an event.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds; 0 for an unused slot.
    pub time: u64,
    pub latency_ms: u64,
}

/// An event's samples: a ring of `HISTORY_LEN`, `next` the slot to write.
#[derive(Clone, Debug)]
pub struct Series {
    pub samples: [Sample; HISTORY_LEN],
    pub next: usize,
    /// The worst latency ever recorded (until LATENCY RESET).
    pub max_ms: u64,
}

impl Series {
    fn new() -> Series {
        Series {
            samples: [Sample::default(); HISTORY_LEN],
            next: 0,
            max_ms: 0,
        }
    }

    /// The newest sample.
    pub fn last(&self) -> Sample {
        self.samples[(self.next + HISTORY_LEN - 1) % HISTORY_LEN]
    }

    /// The used samples, oldest first.
    pub fn in_order(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..HISTORY_LEN)
            .map(move |j| self.samples[(self.next + j) % HISTORY_LEN])
            .filter(|s| s.time != 0)
    }
}

/// Every event's series, in the order each was first seen.
#[derive(Default)]
pub struct Monitor {
    /// `latency-monitor-threshold` in ms; 0 is off. Read on every command.
    pub threshold_ms: AtomicU64,
    events: Mutex<Vec<(&'static str, Series)>>,
}

impl Monitor {
    /// Records `latency_ms` for `event` if the monitor is on and it is at
    /// least the threshold (Redis's `latencyAddSampleIfNeeded`).
    #[inline]
    pub fn sample_if_needed(&self, event: &'static str, latency_ms: u64) {
        let t = self.threshold_ms.load(Ordering::Relaxed);
        if t != 0 && latency_ms >= t {
            self.add(event, latency_ms, cairn_engine::clock::now_ms() / 1000);
        }
    }

    /// Redis's `latencyAddSample`: a sample in the same second as the
    /// previous one only raises it.
    pub fn add(&self, event: &'static str, latency_ms: u64, now_secs: u64) {
        let mut events = self.events.lock();
        let i = match events.iter().position(|(e, _)| *e == event) {
            Some(i) => i,
            None => {
                events.push((event, Series::new()));
                events.len() - 1
            }
        };
        let ts = &mut events[i].1;
        ts.max_ms = ts.max_ms.max(latency_ms);
        let prev = (ts.next + HISTORY_LEN - 1) % HISTORY_LEN;
        if ts.samples[prev].time == now_secs {
            ts.samples[prev].latency_ms = ts.samples[prev].latency_ms.max(latency_ms);
            return;
        }
        ts.samples[ts.next] = Sample {
            time: now_secs,
            latency_ms,
        };
        ts.next = (ts.next + 1) % HISTORY_LEN;
    }

    /// A copy of every event's series.
    pub fn snapshot(&self) -> Vec<(&'static str, Series)> {
        self.events.lock().clone()
    }

    /// One event's series (event names compare exactly, as Redis's dict).
    pub fn get(&self, event: &[u8]) -> Option<(&'static str, Series)> {
        self.events
            .lock()
            .iter()
            .find(|(e, _)| e.as_bytes() == event)
            .cloned()
    }

    /// Drops `event`'s series (any case), or all when None; how many went.
    pub fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut events = self.events.lock();
        let before = events.len();
        events.retain(|(e, _)| match event {
            Some(name) => !e.as_bytes().eq_ignore_ascii_case(name),
            None => false,
        });
        before - events.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.events.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let m = Monitor::default();
        m.add("command", 5, 100);
        m.add("command", 9, 100);
        m.add("command", 3, 100);
        m.add("command", 4, 101);
        let (_, s) = m.get(b"command").unwrap();
        let all: Vec<Sample> = s.in_order().collect();
        assert_eq!(
            all,
            vec![
                Sample {
                    time: 100,
                    latency_ms: 9
                },
                Sample {
                    time: 101,
                    latency_ms: 4
                }
            ]
        );
        assert_eq!(s.max_ms, 9);
        assert_eq!(s.last().latency_ms, 4);
    }

    #[test]
    fn history_keeps_the_last_160_seconds() {
        let m = Monitor::default();
        for t in 1..=200 {
            m.add("command", t, t);
        }
        let (_, s) = m.get(b"command").unwrap();
        let times: Vec<u64> = s.in_order().map(|x| x.time).collect();
        assert_eq!(times, (41..=200).collect::<Vec<_>>());
    }

    #[test]
    fn threshold_zero_is_off_and_reset_counts() {
        let m = Monitor::default();
        m.sample_if_needed("command", 1000);
        assert!(m.is_empty());
        m.threshold_ms.store(10, Ordering::Relaxed);
        m.sample_if_needed("command", 9);
        assert!(m.is_empty());
        m.sample_if_needed("command", 10);
        m.sample_if_needed("fast-command", 11);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(None), 1);
        assert!(m.is_empty());
    }
}
