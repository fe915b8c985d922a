//! `cairn-bench batch` (E4): MSET and MGET of B keys per call (32 by
//! default), in sequential or random key order, values of a given average
//! size (generated text, the lines of a file, or real text cut from files
//! Debian packages ship: [`crate::corpus`]), many threads; reports average
//! throughput (calls and keys per second), the speed in every second of the
//! run with stalls (spans over a second in which no call completed), and
//! memory and disk per key sampled over the run ([`crate::sample`]).
//!
//! Sequential order: thread i writes or reads its contiguous slice of the
//! key space in order. Random order: a fixed permutation of all keys (an
//! affine bijection modulo the key count), so every key is still visited
//! once and every MGET should find all its keys; every value returned is
//! compared byte for byte with the one written, and a missing key or a
//! value that differs is counted as an error (and each such key counted).
//! On memcached an MSET is B `set` commands sent in one write and an MGET
//! one `get` of B keys.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use std::path::PathBuf;

use crate::cli::{make_ctx, parse_list, report_files, BatchCmd};
use crate::corpus::{compare, Corpus, TextValues};
use crate::curve::{stalls, summarize};
use crate::report::{make_run, Record};
use crate::resp::Head;
use crate::runner::{self, connect, run_threads, Ctx, Throttle};
use crate::sample::{peak, per_item, Sample, Sampler};
use crate::stats::Recorder;
use crate::sys::{box_ticks, cpu_seconds, Who};
use crate::target::{Conn, Target};
use crate::wire::OpError;

const MSET: &[&str] = &["MSET"];
const MGET: &[&str] = &["MGET"];
const SET: &[&str] = &["SET"];
const GET: &[&str] = &["GET"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    MsetSeq,
    MgetSeq,
    MsetRand,
    MgetRand,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::MsetSeq => "mset-seq",
            Phase::MgetSeq => "mget-seq",
            Phase::MsetRand => "mset-rand",
            Phase::MgetRand => "mget-rand",
        }
    }
    /// The name reports give the phase: `set-seq` ... under `--single`.
    pub fn shown(self, single: bool) -> &'static str {
        if !single {
            return self.name();
        }
        match self {
            Phase::MsetSeq => "set-seq",
            Phase::MgetSeq => "get-seq",
            Phase::MsetRand => "set-rand",
            Phase::MgetRand => "get-rand",
        }
    }
    fn write(self) -> bool {
        matches!(self, Phase::MsetSeq | Phase::MsetRand)
    }
    fn random(self) -> bool {
        matches!(self, Phase::MsetRand | Phase::MgetRand)
    }
    fn parse(s: &str, single: bool) -> Result<Phase, String> {
        Ok(match s {
            "mset-seq" => Phase::MsetSeq,
            "mget-seq" => Phase::MgetSeq,
            "mset-rand" => Phase::MsetRand,
            "mget-rand" => Phase::MgetRand,
            "set-seq" if single => Phase::MsetSeq,
            "get-seq" if single => Phase::MgetSeq,
            "set-rand" if single => Phase::MsetRand,
            "get-rand" if single => Phase::MgetRand,
            "set-seq" | "get-seq" | "set-rand" | "get-rand" => {
                return Err(format!("--phases: {s:?} is a phase of --single"))
            }
            _ => return Err(format!("--phases: unknown phase {s:?}")),
        })
    }
}

/// The values: a pool of bytes and, per key, a slice of it; or real text
/// made per key.
pub struct Values {
    pool: Vec<u8>,
    lines: Option<Vec<(usize, usize)>>,
    avg: usize,
    text: Option<TextValues>,
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "in",
    "to",
    "was",
    "is",
    "for",
    "on",
    "as",
    "by",
    "with",
    "he",
    "at",
    "from",
    "his",
    "that",
    "it",
    "an",
    "were",
    "which",
    "are",
    "this",
    "also",
    "be",
    "first",
    "had",
    "or",
    "has",
    "its",
    "new",
    "after",
    "who",
    "they",
    "two",
    "their",
    "her",
    "one",
    "she",
    "but",
    "not",
    "been",
    "time",
    "all",
    "during",
    "other",
    "into",
    "when",
    "more",
    "there",
    "city",
    "between",
    "school",
    "years",
    "world",
    "national",
    "history",
    "river",
    "county",
    "university",
    "population",
    "album",
    "football",
    "season",
    "government",
    "war",
    "district",
    "village",
    "church",
    "station",
    "film",
    "music",
    "series",
    "company",
    "state",
];

impl Values {
    /// Generated text (Wikipedia-like words) averaging `avg` bytes a value.
    pub fn text(avg: usize, seed: u64) -> Values {
        let mut rng = SmallRng::seed_from_u64(seed);
        let size = (avg * 3).max(4 << 20);
        let mut pool = Vec::with_capacity(size + 16);
        while pool.len() < size {
            let w = WORDS[rng.random_range(0..WORDS.len())];
            pool.extend_from_slice(w.as_bytes());
            pool.push(if rng.random_range(0..12) == 0 {
                b'.'
            } else {
                b' '
            });
        }
        Values {
            pool,
            lines: None,
            avg: avg.max(1),
            text: None,
        }
    }

    /// Real text of exactly `t.size()` bytes a value.
    pub fn real_text(t: TextValues) -> Values {
        Values {
            pool: Vec::new(),
            lines: None,
            avg: t.size(),
            text: Some(t),
        }
    }

    /// Key `k`'s value: a slice of the pool, or real text made into `buf`.
    #[inline]
    pub fn value<'a>(&'a self, k: u64, buf: &'a mut Vec<u8>) -> &'a [u8] {
        match &self.text {
            Some(t) => {
                t.value_into(k, buf);
                buf
            }
            None => self.get(k),
        }
    }

    pub fn real(&self) -> Option<&TextValues> {
        self.text.as_ref()
    }

    /// The non-empty lines of a file; key i gets line i mod n.
    pub fn file(bytes: Vec<u8>) -> Result<Values, String> {
        let mut lines = Vec::new();
        let mut start = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                if i > start {
                    lines.push((start, i));
                }
                start = i + 1;
            }
        }
        if start < bytes.len() {
            lines.push((start, bytes.len()));
        }
        if lines.is_empty() {
            return Err("--value-file has no non-empty lines".into());
        }
        let avg = lines.iter().map(|(a, b)| b - a).sum::<usize>() / lines.len();
        Ok(Values {
            pool: bytes,
            lines: Some(lines),
            avg: avg.max(1),
            text: None,
        })
    }

    /// The value of key `k` from the pool (not for real text, see
    /// [`Values::value`]): generated values have lengths spread evenly over
    /// avg/2 ..= 3avg/2 (mean avg) at a key-dependent place in the pool.
    #[inline]
    pub fn get(&self, k: u64) -> &[u8] {
        match &self.lines {
            Some(l) => {
                let (a, b) = l[(k % l.len() as u64) as usize];
                &self.pool[a..b]
            }
            None => {
                let h = crate::gen::fnvhash64(k as i64) as u64;
                let len = self.avg / 2 + (h % (self.avg as u64 + 1)) as usize;
                let len = len.max(1);
                let off = ((h >> 20) % (self.pool.len() - len) as u64) as usize;
                &self.pool[off..off + len]
            }
        }
    }

    pub fn avg(&self) -> usize {
        self.avg
    }
}

/// An affine bijection on 0..n: j → (a·j + c) mod n with gcd(a, n) = 1.
#[derive(Debug, Clone, Copy)]
pub struct Perm {
    n: u64,
    a: u64,
    c: u64,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Perm {
    pub fn new(n: u64, seed: u64) -> Perm {
        let n = n.max(1);
        let mut rng = SmallRng::seed_from_u64(seed);
        // A multiplier near n·0.618 spreads neighbours far apart.
        let mut a = ((n as f64 * 0.618_033_988_75) as u64).max(1) | 1;
        while gcd(a, n) != 1 {
            a += 1;
        }
        Perm {
            n,
            a: a % n.max(2),
            c: rng.random_range(0..n),
        }
    }

    #[inline]
    pub fn at(&self, j: u64) -> u64 {
        ((self.a as u128 * j as u128 + self.c as u128) % self.n as u128) as u64
    }
}

/// Writes the key of record `k` (also `load-curve --string-values`'s).
#[inline]
pub(crate) fn key(k: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"batch:");
    let mut b = itoa::Buffer::new();
    let s = b.format(k);
    for _ in s.len()..10 {
        out.push(b'0');
    }
    out.extend_from_slice(s.as_bytes());
}

struct Job<'a> {
    phase: Phase,
    /// SET/GET of one key a call instead of MSET/MGET (`--single`).
    single: bool,
    keys: u64,
    batch: usize,
    pipeline: usize,
    values: &'a Values,
    perm: Perm,
    max_time: Option<Duration>,
    /// Times each thread goes over its keys (`--read-passes` in a read
    /// phase, else 1).
    passes: u64,
    /// Every thread's start and call completion times, for the stalls.
    times: Mutex<Vec<Instant>>,
    starts: Mutex<Vec<Instant>>,
    /// Keys an MGET did not return, and keys returned with other bytes.
    missing_keys: AtomicU64,
    wrong_keys: AtomicU64,
}

/// Per-thread buffers.
struct Bufs {
    key: Vec<u8>,
    value: Vec<u8>,
}

/// Encodes one call for the keys `ks` into the connection's buffer.
fn encode(c: &mut Conn, job: &Job, ks: &[u64], b: &mut Bufs) {
    let scratch = &mut b.key;
    match c {
        Conn::Resp(r) if job.single => {
            let k = ks[0];
            scratch.clear();
            key(k, scratch);
            if job.phase.write() {
                r.arr(3);
                r.bulk(b"SET");
                r.bulk(scratch);
                r.bulk(job.values.value(k, &mut b.value));
            } else {
                r.arr(2);
                r.bulk(b"GET");
                r.bulk(scratch);
            }
        }
        Conn::Resp(r) => {
            if job.phase.write() {
                r.arr(1 + 2 * ks.len());
                r.bulk(b"MSET");
                for &k in ks {
                    scratch.clear();
                    key(k, scratch);
                    r.bulk(scratch);
                    r.bulk(job.values.value(k, &mut b.value));
                }
            } else {
                r.arr(1 + ks.len());
                r.bulk(b"MGET");
                for &k in ks {
                    scratch.clear();
                    key(k, scratch);
                    r.bulk(scratch);
                }
            }
        }
        Conn::Mc(m) => {
            if job.phase.write() {
                for &k in ks {
                    scratch.clear();
                    key(k, scratch);
                    m.queue_store(b"set", scratch, 0, 0, job.values.value(k, &mut b.value));
                }
            } else {
                m.wire.out.extend_from_slice(b"get");
                for &k in ks {
                    m.wire.out.push(b' ');
                    key(k, &mut m.wire.out);
                }
                m.wire.out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// Reads one call's reply and checks it: every key present with the bytes
/// written to it.
fn read_reply(c: &mut Conn, job: &Job, ks: &[u64], b: &mut Bufs) -> Result<(), OpError> {
    match c {
        Conn::Resp(r) => {
            if job.phase.write() {
                return r.read_ok();
            }
            if job.single {
                return match r.head()? {
                    Head::Bulk(Some(len)) => {
                        let got = r.wire.take(len)?;
                        let k = ks[0];
                        let want = job.values.value(k, &mut b.value);
                        compare(k, r.wire.slice(got), want).map_err(|m| {
                            job.wrong_keys.fetch_add(1, Ordering::Relaxed);
                            OpError::Wrong(m.to_string())
                        })
                    }
                    Head::Bulk(None) => {
                        job.missing_keys.fetch_add(1, Ordering::Relaxed);
                        Err(OpError::Missing)
                    }
                    Head::Error(e) => Err(OpError::Server(r.error_text(e))),
                    h => Err(OpError::Protocol(format!("GET answered {h:?}"))),
                };
            }
            let n = match r.head()? {
                Head::Array(Some(n)) => n,
                Head::Error(e) => return Err(OpError::Server(r.error_text(e))),
                h => return Err(OpError::Protocol(format!("MGET answered {h:?}"))),
            };
            let mut err = None;
            for (i, &k) in ks.iter().enumerate().take(n) {
                match r.head()? {
                    Head::Bulk(Some(len)) => {
                        let got = r.wire.take(len)?;
                        let want = job.values.value(k, &mut b.value);
                        if let Err(m) = compare(k, r.wire.slice(got), want) {
                            job.wrong_keys.fetch_add(1, Ordering::Relaxed);
                            err.get_or_insert(OpError::Wrong(format!("element {i}, {m}")));
                        }
                    }
                    Head::Bulk(None) => {
                        job.missing_keys.fetch_add(1, Ordering::Relaxed);
                        err.get_or_insert(OpError::Missing);
                    }
                    h => return Err(OpError::Protocol(format!("MGET element {h:?}"))),
                }
            }
            if n != ks.len() {
                return Err(OpError::Protocol(format!(
                    "MGET of {} keys returned {n}",
                    ks.len()
                )));
            }
            err.map_or(Ok(()), Err)
        }
        Conn::Mc(m) => {
            if job.phase.write() {
                let mut first = Ok(());
                for _ in ks {
                    if let Err(e) = m.read_store_reply() {
                        if e.breaks_connection() {
                            return Err(e);
                        }
                        if first.is_ok() {
                            first = Err(e);
                        }
                    }
                }
                return first;
            }
            // memcached returns the found keys in request order.
            let mut next = 0usize;
            let mut err = None;
            let mut missing = 0u64;
            let mut wrong = 0u64;
            let Bufs {
                key: scratch,
                value,
            } = b;
            m.read_values_data(|kb, data| {
                while next < ks.len() {
                    scratch.clear();
                    key(ks[next], scratch);
                    next += 1;
                    if scratch.as_slice() == kb {
                        let k = ks[next - 1];
                        if let Err(mm) = compare(k, data, job.values.value(k, value)) {
                            wrong += 1;
                            err.get_or_insert(OpError::Wrong(mm.to_string()));
                        }
                        return;
                    }
                    missing += 1;
                    err.get_or_insert(OpError::Missing);
                }
            })?;
            if next < ks.len() {
                missing += (ks.len() - next) as u64;
                err.get_or_insert(OpError::Missing);
            }
            job.missing_keys.fetch_add(missing, Ordering::Relaxed);
            job.wrong_keys.fetch_add(wrong, Ordering::Relaxed);
            err.map_or(Ok(()), Err)
        }
    }
}

fn thread_body(
    ctx: &Ctx,
    t: &Target,
    job: &Job,
    i: usize,
    threads: usize,
    start: &mut runner::Start,
    rec: &mut Recorder,
) {
    let timeout = ctx.timeout;
    // This thread's slice of positions 0..keys.
    let lo = job.keys * i as u64 / threads as u64;
    let hi = job.keys * (i as u64 + 1) / threads as u64;
    let mut conn = connect(t, timeout).ok();
    let mut bufs = Bufs {
        key: Vec::with_capacity(64),
        value: Vec::with_capacity(job.values.avg() * 2),
    };
    let mut ks: Vec<u64> = Vec::with_capacity(job.batch * job.pipeline);
    let mut done_at: Vec<Instant> = Vec::new();
    let mut throttle = Throttle::new(ctx.target_rate, threads);
    start.ready(rec);
    job.starts
        .lock()
        .expect("not poisoned")
        .push(Instant::now());
    throttle.restart();
    let deadline = job.max_time.map(|d| Instant::now() + d);
    // Positions lo..hi, `passes` times over.
    let (mut pos, mut pass) = (lo, 1);
    loop {
        if pos >= hi {
            if pass >= job.passes {
                break;
            }
            (pos, pass) = (lo, pass + 1);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        // Up to `pipeline` calls of `batch` keys.
        ks.clear();
        let mut calls = 0;
        while calls < job.pipeline && pos < hi {
            let end = (pos + job.batch as u64).min(hi);
            for j in pos..end {
                ks.push(if job.phase.random() {
                    job.perm.at(j)
                } else {
                    j
                });
            }
            pos = end;
            calls += 1;
        }
        throttle.wait();
        if conn.is_none() {
            match connect(t, timeout) {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    rec.err(0, &e, calls as u64);
                    continue;
                }
            }
        }
        let c = conn.as_mut().expect("connected");
        let nchunks = ks.len().div_ceil(job.batch);
        for ch in ks.chunks(job.batch) {
            encode(c, job, ch, &mut bufs);
        }
        let t0 = Instant::now();
        let sent = match c {
            Conn::Resp(r) => r.send(),
            Conn::Mc(m) => m.wire.send(),
        };
        if let Err(e) = sent {
            rec.err(0, &e, nchunks as u64);
            conn = None;
            continue;
        }
        for (n, ch) in ks.chunks(job.batch).enumerate() {
            let Some(c) = conn.as_mut() else {
                // The connection died mid-pipeline: the rest are lost too.
                rec.err(0, &OpError::Closed, (nchunks - n) as u64);
                break;
            };
            let r = read_reply(c, job, ch, &mut bufs);
            let now = Instant::now();
            let lat = now.duration_since(t0);
            // Any answer, error reply or not, shows the server is not
            // stalled; a time-out or a broken connection does not.
            if r.as_ref().map_or_else(|e| !e.breaks_connection(), |_| true) {
                done_at.push(now);
            }
            match r {
                Ok(()) if lat <= timeout => rec.ok(0, lat, 1, ch.len() as u64, now),
                Ok(()) => rec.err(0, &OpError::Timeout, 1),
                Err(e) => {
                    if e.breaks_connection() {
                        conn = None;
                    }
                    rec.err(0, &e, 1);
                }
            }
        }
    }
    job.times
        .lock()
        .expect("not poisoned")
        .extend_from_slice(&done_at);
}

/// What E4 reports beside the speed: stalls, the per-second curve, memory
/// and disk per key, keys lost or changed.
fn e4_extra(
    run: &mut crate::report::Run,
    job: &Job,
    samples: &[Sample],
    baseline: &Sample,
    stall_s: f64,
) {
    let mut times = std::mem::take(&mut *job.times.lock().expect("not poisoned"));
    times.sort_unstable();
    let starts = job.starts.lock().expect("not poisoned");
    if let Some(base) = starts.iter().min().copied() {
        let secs: Vec<f64> = times
            .iter()
            .map(|t| t.saturating_duration_since(base).as_secs_f64())
            .collect();
        let st = stalls(&secs, 0.0, run.duration_s, stall_s);
        let longest = st.iter().map(|s| s.len_s).fold(0.0, f64::max);
        run.extra.insert("stalls".into(), serde_json::json!(st));
        run.extra
            .insert("longest_stall_s".into(), serde_json::json!(longest));
    }
    run.extra
        .insert("stall_threshold_s".into(), serde_json::json!(stall_s));
    if let Some(c) = summarize(&run.timeline, run.duration_s) {
        run.extra.insert("curve".into(), serde_json::json!(c));
    }
    run.extra.insert(
        "missing_keys".into(),
        serde_json::json!(job.missing_keys.load(Ordering::Relaxed)),
    );
    run.extra.insert(
        "wrong_keys".into(),
        serde_json::json!(job.wrong_keys.load(Ordering::Relaxed)),
    );
    if let Some(last) = samples.last() {
        let items = last
            .items
            .map(|n| n.saturating_sub(baseline.items.unwrap_or(0)));
        let n = items.unwrap_or(0);
        let j = |v: Option<f64>| serde_json::json!(v);
        run.extra
            .insert("keys_stored".into(), serde_json::json!(items));
        run.extra.insert(
            "evictions".into(),
            serde_json::json!(last
                .evictions
                .map(|e| e.saturating_sub(baseline.evictions.unwrap_or(0)))),
        );
        run.extra.insert(
            "rss_peak".into(),
            serde_json::json!(peak(samples, |s| s.rss_bytes)),
        );
        run.extra
            .insert("rss_end".into(), serde_json::json!(last.rss_bytes));
        run.extra.insert(
            "server_bytes_end".into(),
            serde_json::json!(last.server_bytes),
        );
        run.extra
            .insert("disk_bytes_end".into(), serde_json::json!(last.disk_bytes));
        run.extra.insert(
            "rss_bytes_per_key".into(),
            j(per_item(baseline.rss_bytes, last.rss_bytes, n)),
        );
        run.extra.insert(
            "server_bytes_per_key".into(),
            j(per_item(baseline.server_bytes, last.server_bytes, n)),
        );
        run.extra.insert(
            "disk_bytes_per_key".into(),
            j(per_item(baseline.disk_bytes, last.disk_bytes, n)),
        );
        if !last.tier.is_empty() {
            run.extra
                .insert("tier_end".into(), serde_json::json!(last.tier));
        }
    }
    run.extra
        .insert("samples".into(), serde_json::json!(samples));
}

/// E4's table: one row per run.
pub fn e4_table(runs: &[crate::report::Run]) -> String {
    use std::fmt::Write as _;
    let mut s = String::from(
        "| target | phase | round | threads | keys/s | per-second min / p5 / median / max | stalls > threshold | longest stall s | keys stored | evictions | missing keys | wrong keys | RSS peak | RSS B/key | server B/key | disk B/key |\n\
         |---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let f = |r: &crate::report::Run, k: &str| -> String {
        match r.extra.get(k) {
            Some(serde_json::Value::Number(n)) => {
                crate::report::thousands(n.as_f64().unwrap_or(0.0))
            }
            _ => "-".into(),
        }
    };
    for r in runs {
        let curve = r
            .extra
            .get("curve")
            .and_then(|c| serde_json::from_value::<CurveSummaryRow>(c.clone()).ok())
            .map_or("-".into(), |c| {
                format!(
                    "{} / {} / {} / {}",
                    crate::report::thousands(c.min),
                    crate::report::thousands(c.p5),
                    crate::report::thousands(c.median),
                    crate::report::thousands(c.max)
                )
            });
        let nstalls = r
            .extra
            .get("stalls")
            .and_then(|v| v.as_array())
            .map_or("-".into(), |a| a.len().to_string());
        let longest = r
            .extra
            .get("longest_stall_s")
            .and_then(|v| v.as_f64())
            .map_or("-".into(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.target,
            r.phase,
            r.round,
            r.threads,
            crate::report::thousands(r.units_per_sec),
            curve,
            nstalls,
            longest,
            f(r, "keys_stored"),
            f(r, "evictions"),
            f(r, "missing_keys"),
            f(r, "wrong_keys"),
            f(r, "rss_peak"),
            f(r, "rss_bytes_per_key"),
            f(r, "server_bytes_per_key"),
            f(r, "disk_bytes_per_key"),
        );
    }
    s
}

/// The fields of [`crate::curve::CurveSummary`] the table reads back.
#[derive(serde::Deserialize)]
struct CurveSummaryRow {
    min: f64,
    p5: f64,
    median: f64,
    max: f64,
}

/// Parses `--disk-dir NAME=PATH` options.
fn disk_dirs(specs: &[String], ctx: &Ctx) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out = Vec::new();
    for s in specs {
        let (n, p) = s
            .split_once('=')
            .ok_or_else(|| format!("--disk-dir {s:?}: expected NAME=PATH"))?;
        if !ctx.targets.iter().any(|t| t.name == n) {
            return Err(format!("--disk-dir {s}: no target named {n}"));
        }
        out.push((n.to_string(), PathBuf::from(p)));
    }
    Ok(out)
}

/// Writes dirty pages back and drops the page cache, dentries and inodes
/// (as `sync; echo 3 > /proc/sys/vm/drop_caches`); the seconds it took.
fn drop_page_cache() -> Result<f64, String> {
    let t = Instant::now();
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n")
        .map_err(|e| format!("/proc/sys/vm/drop_caches: {e}"))?;
    Ok(t.elapsed().as_secs_f64())
}

/// The value source the options ask for.
pub fn make_values(
    value_file: Option<&std::path::Path>,
    real_text: bool,
    text_sources: &[PathBuf],
    size: usize,
    seed: u64,
) -> Result<Values, String> {
    if let Some(p) = value_file {
        return Values::file(std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    if real_text || !text_sources.is_empty() {
        let corpus = if text_sources.is_empty() {
            Corpus::debian()?
        } else {
            Corpus::from_paths(text_sources)?
        };
        return Ok(Values::real_text(TextValues::new(corpus, size, seed)));
    }
    Ok(Values::text(size, seed))
}

/// The report's account of the values (a reader needs the corpus
/// fingerprint and the seed to regenerate them).
/// Real-text values also carry how they code under the server's coders
/// (`corpus::ratios` over 1,000 values; about a second).
pub fn values_config(v: &Values, seed: u64) -> serde_json::Value {
    match v.real() {
        Some(t) => real_text_config(t, seed, crate::corpus::ratios(t, RATIO_VALUES)),
        None => serde_json::json!({ "kind": "pool", "avg": v.avg(), "seed": seed }),
    }
}

fn real_text_config(
    t: &TextValues,
    seed: u64,
    ratios: Result<crate::corpus::Ratios, String>,
) -> serde_json::Value {
    serde_json::json!({
        "kind": "real-text",
        "size": t.size(),
        "seed": seed,
        "corpus_source": t.corpus().source(),
        "corpus_files": t.corpus().files(),
        "corpus_words": t.corpus().words(),
        "corpus_bytes": t.corpus().bytes(),
        "corpus_fingerprint": t.corpus().fingerprint(),
        "ratios": ratios
            .map(|r| r.to_json())
            .unwrap_or_else(|e| serde_json::json!({ "error": e })),
    })
}

/// Values coded for the report's ratios.
const RATIO_VALUES: usize = 1000;

/// `cairn-bench corpus`: the corpus and its ratios, as text (and JSON).
pub fn corpus_command(a: crate::cli::CorpusCmd) -> Result<(), String> {
    if a.value_size == 0 || a.values == 0 {
        return Err("--value-size and --values must be at least 1".into());
    }
    let values = make_values(None, true, &a.text_sources, a.value_size, a.seed)?;
    let t = values.real().ok_or("no real-text values")?;
    let c = t.corpus();
    let r = crate::corpus::ratios(t, a.values)?;
    println!("corpus: {}", c.source());
    println!(
        "files {}, words {}, bytes of words {}, fingerprint {}",
        c.files(),
        c.words(),
        c.bytes(),
        c.fingerprint()
    );
    println!(
        "{} values of {} B (seed {}), plain / coded, each value alone:",
        r.values, a.value_size, a.seed
    );
    println!(
        "  zstd 3 {:.2}, zstd 3 + dictionary {:.2}",
        r.zstd, r.zstd_dict
    );
    println!(
        "  LZ4 fast {:.2}, LZ4 fast + dictionary {:.2} (the disk tier's), LZ4 HC 4 + dictionary {:.2} (in RAM)",
        r.lz4_fast, r.lz4_fast_dict, r.lz4_hc4_dict
    );
    if let Some(p) = &a.json {
        let j = real_text_config(t, a.seed, Ok(r));
        let text = serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?;
        std::fs::write(p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

pub fn command(mut a: BatchCmd) -> Result<(), String> {
    if a.single {
        a.batch = 1;
    }
    let (mut ctx, pids) = make_ctx(&a.common)?;
    let phases: Vec<String> = parse_list(&a.phases, "--phases")?;
    let phases: Vec<Phase> = phases
        .iter()
        .map(|p| Phase::parse(p, a.single))
        .collect::<Result<_, _>>()?;
    let threads: Vec<usize> = parse_list(&a.threads, "--threads")?;
    if threads.iter().any(|t| *t == 0 || *t > 4096) {
        return Err("--threads: each count must be 1..=4096".into());
    }
    if a.keys == 0 || a.batch == 0 || a.pipeline == 0 || a.value_size == 0 {
        return Err("--keys, --batch, --pipeline and --value-size must be at least 1".into());
    }
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !positive(a.sample_every) || !positive(a.stall) {
        return Err("--sample-every and --stall must be positive".into());
    }
    let disks = disk_dirs(&a.disk_dirs, &ctx)?;
    let seed = runner::seed_base(&ctx);
    let values = make_values(
        a.value_file.as_deref(),
        a.real_text,
        &a.text_sources,
        a.value_size,
        seed,
    )?;
    if let Some(t) = values.real() {
        ctx.say(&format!(
            "values: {} bytes of real text each, from {} files ({}), {} words, fingerprint {}",
            t.size(),
            t.corpus().files(),
            t.corpus().source(),
            t.corpus().words(),
            t.corpus().fingerprint()
        ));
    }
    let started = crate::sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    let disk_of = |t: &Target| {
        disks
            .iter()
            .find(|(n, _)| *n == t.name)
            .map(|(_, p)| p.clone())
    };
    if !a.no_flush {
        for t in &ctx.targets {
            let mut c = connect(t, ctx.timeout.max(Duration::from_secs(5)))
                .map_err(|e| format!("{}: {e}", t.name))?;
            c.flush_all()
                .map_err(|e| format!("{}: flush: {e}", t.name))?;
        }
    }
    // Memory and disk before the first write: the per-key figures count
    // what the run added.
    let baselines: Vec<Sample> = ctx
        .targets
        .iter()
        .map(|t| crate::sample::read(&mut None, t, disk_of(t).as_deref(), 0.0))
        .collect();
    let every = Duration::from_secs_f64(a.sample_every);
    let mut records = Vec::new();
    let mut notes = Vec::new();
    for round in 1..=ctx.rounds {
        for &th in &threads {
            for &phase in &phases {
                for (ti, t) in ctx.targets.iter().enumerate() {
                    let job = Job {
                        phase,
                        single: a.single,
                        keys: a.keys,
                        batch: a.batch,
                        pipeline: a.pipeline,
                        values: &values,
                        perm: Perm::new(a.keys, seed ^ if phase.write() { 1 } else { 2 }),
                        max_time: a.max_time.map(Duration::from_secs_f64),
                        passes: if phase.write() { 1 } else { a.read_passes },
                        times: Mutex::new(Vec::new()),
                        starts: Mutex::new(Vec::new()),
                        missing_keys: AtomicU64::new(0),
                        wrong_keys: AtomicU64::new(0),
                    };
                    let pname = phase.shown(a.single);
                    let calls = a.keys.div_ceil(a.batch as u64) * job.passes;
                    let label = format!("{} {} r{round} t{th}", t.name, pname);
                    let names = match (a.single, phase.write()) {
                        (true, true) => SET,
                        (true, false) => GET,
                        (false, true) => MSET,
                        (false, false) => MGET,
                    };
                    let dropped = (a.drop_caches && !phase.write()).then(|| {
                        let r = drop_page_cache();
                        match &r {
                            Ok(s) => ctx.say(&format!(
                                "{} {}: page cache dropped ({s:.1} s)",
                                t.name,
                                pname
                            )),
                            Err(e) => {
                                let n = format!(
                                    "{} {} round {round}: page cache NOT dropped ({e}): its reads may come from RAM",
                                    t.name,
                                    pname
                                );
                                ctx.say(&n);
                                notes.push(n);
                            }
                        }
                        r.is_ok()
                    });
                    let sampler = Sampler::start(t, disk_of(t), every);
                    let (own0, box0) = (cpu_seconds(Who::SelfProcess), box_ticks());
                    let out =
                        run_threads(&ctx, t, &label, th, Some(calls), names, |i, start, rec| {
                            thread_body(&ctx, t, &job, i, th, start, rec)
                        });
                    let (own1, box1) = (cpu_seconds(Who::SelfProcess), box_ticks());
                    let samples = sampler.stop();
                    let mut run = make_run(
                        &t.name,
                        pname,
                        round,
                        th as u32,
                        out.started_unix,
                        out.duration_s,
                        &out.merged,
                        "keys",
                        out.server_cpu,
                    );
                    run.extra.insert("batch".into(), serde_json::json!(a.batch));
                    run.extra
                        .insert("value_avg_bytes".into(), serde_json::json!(values.avg()));
                    run.extra
                        .insert("pipeline".into(), serde_json::json!(a.pipeline));
                    e4_extra(&mut run, &job, &samples, &baselines[ti], a.stall);
                    // The client's own CPU per call and where the machine's
                    // time went: with client and server on the same cores,
                    // keys/s follows their summed cost unless the box idles.
                    // Per call made (`--max-time` may end a phase early).
                    run.extra.extend(crate::getset::client_cpu(
                        own0,
                        own1,
                        out.duration_s,
                        th,
                        run.ops + run.errors,
                    ));
                    if let Some([busy, idle, iowait, steal]) =
                        box1.zip(box0).and_then(|(b, a)| b.shares_since(&a))
                    {
                        run.extra.insert(
                            "box_cpu_pct".into(),
                            serde_json::json!({"busy": busy, "idle": idle, "iowait": iowait, "steal": steal}),
                        );
                    }
                    if let Some(d) = dropped {
                        run.extra
                            .insert("page_cache_dropped".into(), serde_json::json!(d));
                    }
                    if run.errors > 0 {
                        let o = &run.per_op[0];
                        notes.push(format!(
                            "{} {} round {round} t{th}: {} errors {:?} ({})",
                            t.name,
                            pname,
                            run.errors,
                            o.errors,
                            o.error_samples.values().next().cloned().unwrap_or_default()
                        ));
                    }
                    let nstalls = run
                        .extra
                        .get("stalls")
                        .and_then(|v| v.as_array())
                        .map_or(0, |v| v.len());
                    if nstalls > 0 {
                        notes.push(format!(
                            "{} {} round {round} t{th}: {nstalls} stalls over {} s (longest {:.2} s)",
                            t.name,
                            pname,
                            a.stall,
                            run.extra
                                .get("longest_stall_s")
                                .and_then(|v| v.as_f64())
                                .unwrap_or(0.0)
                        ));
                    }
                    if let Some(e) = run.extra.get("evictions").and_then(|v| v.as_u64()) {
                        if e > 0 {
                            notes.push(format!(
                                "{} {} round {round} t{th}: the server evicted {e} keys (its memory limit is below the data)",
                                t.name,
                                pname
                            ));
                        }
                    }
                    ctx.say(&format!(
                        "{} {} t{th} round {round}: {} calls/s, {} keys/s, {} errors, {nstalls} stalls",
                        t.name,
                        pname,
                        crate::report::thousands(run.ops_per_sec),
                        crate::report::thousands(run.units_per_sec),
                        run.errors
                    ));
                    records.push(Record {
                        run,
                        merged: Some(out.merged),
                    });
                }
            }
        }
    }
    for t in &ctx.targets {
        if t.pid.is_none() {
            notes.push(format!(
                "{}: no local process found (pass --pid {}=PID for RSS figures)",
                t.name, t.name
            ));
        }
    }
    let config = serde_json::json!({
        "keys": a.keys,
        "batch": a.batch,
        "single": a.single,
        "value_size": a.value_size,
        "value_avg_bytes": values.avg(),
        "value_file": a.value_file,
        "values": values_config(&values, seed),
        "phases": phases.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "threads": threads,
        "pipeline": a.pipeline,
        "rounds": ctx.rounds,
        "timeout_s": ctx.timeout.as_secs_f64(),
        "target_rate": ctx.target_rate,
        "max_time_s": a.max_time,
        "sample_every_s": a.sample_every,
        "stall_threshold_s": a.stall,
        "drop_caches": a.drop_caches,
        "disk_dirs": disks.iter().map(|(n, p)| (n.clone(), p.display().to_string())).collect::<std::collections::BTreeMap<_, _>>(),
        "memory_sources": "RESP: INFO used_memory, evicted_keys, db keys; memcached: stats bytes, curr_items, evictions; RSS: /proc/<pid>/status VmRSS; disk: st_blocks x 512 under --disk-dir",
    });
    let rep = runner::finish(&ctx, "batch", infos, config, &records, notes, started)?;
    println!();
    print!("{}", e4_table(&rep.runs));
    if let Some(prefix) = &ctx.chart {
        let mut files = crate::cli::phases_chart(
            &ctx,
            prefix,
            "batch",
            &if a.single {
                "SET/GET of one key, average speed".to_string()
            } else {
                format!("MSET/MGET of {} keys, average speed", a.batch)
            },
            &rep.summary,
            None,
            true,
        )?;
        for p in &phases {
            files.extend(crate::cli::timeline_for_phase(
                &ctx,
                prefix,
                &format!("batch-{}-timeline", p.name()),
                &format!("{} speed over time", p.name()),
                p.name(),
                &rep,
                "keys/s",
            )?);
            files.extend(memory_chart(&ctx, prefix, p.name(), &rep)?);
        }
        if threads.len() > 1 {
            for p in &phases {
                files.extend(crate::cli::threads_chart(
                    &ctx,
                    prefix,
                    &format!("batch-{}", p.name()),
                    p.name(),
                    p.name(),
                    &rep.summary,
                )?);
            }
        }
        report_files(&ctx, &files);
    }
    Ok(())
}

/// RSS, the server's own count and disk over one phase (round 1), one line
/// each per target.
fn memory_chart(
    ctx: &Ctx,
    prefix: &std::path::Path,
    phase: &str,
    rep: &crate::report::Report,
) -> Result<Vec<PathBuf>, String> {
    crate::chart::init_font(ctx.font.as_deref())?;
    let mut series = Vec::new();
    for r in rep.runs.iter().filter(|r| r.phase == phase && r.round == 1) {
        let Some(samples) = r
            .extra
            .get("samples")
            .and_then(|v| serde_json::from_value::<Vec<SampleRow>>(v.clone()).ok())
        else {
            continue;
        };
        for (what, f) in [
            (
                "RSS",
                (|s: &SampleRow| s.rss_bytes) as fn(&SampleRow) -> Option<u64>,
            ),
            ("server", |s: &SampleRow| s.server_bytes),
            ("disk", |s: &SampleRow| s.disk_bytes),
        ] {
            let points: Vec<(f64, f64)> = samples
                .iter()
                .filter_map(|s| f(s).map(|v| (s.t_s, v as f64)))
                .collect();
            if points.is_empty() {
                continue;
            }
            let average = points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64;
            series.push(crate::chart::Timeline {
                name: format!("{} {what}", r.target),
                points,
                average,
            });
        }
    }
    if series.is_empty() {
        return Ok(vec![]);
    }
    crate::chart::timeline_chart(
        &crate::chart::with_suffix(prefix, &format!("batch-{phase}-memory")),
        &format!("{phase}: memory and disk over time"),
        "bytes",
        &series,
    )
}

/// The fields of a [`Sample`] the chart reads back from the report.
#[derive(serde::Deserialize)]
struct SampleRow {
    t_s: f64,
    rss_bytes: Option<u64>,
    server_bytes: Option<u64>,
    disk_bytes: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 7, 100, 1000, 1024, 99_991] {
            let p = Perm::new(n, 3);
            let mut seen = vec![false; n as usize];
            for j in 0..n {
                let k = p.at(j) as usize;
                assert!(!seen[k], "n={n}: {k} twice");
                seen[k] = true;
            }
        }
        // Neighbours in order are far apart (random order).
        let p = Perm::new(100_000, 1);
        let jumps = (0..1000)
            .filter(|j| p.at(j + 1).abs_diff(p.at(*j)) > 1000)
            .count();
        assert!(jumps > 900);
    }

    #[test]
    fn generated_values_average_the_size() {
        let v = Values::text(2800, 1);
        let n = 20_000;
        let total: usize = (0..n).map(|k| v.get(k).len()).sum();
        let avg = total as f64 / n as f64;
        assert!((avg - 2800.0).abs() < 30.0, "{avg}");
        assert_eq!(v.get(5), v.get(5));
        assert!(v.get(5).iter().all(|b| b.is_ascii()));
    }

    #[test]
    fn file_values_cycle_lines() {
        let v = Values::file(b"alpha\n\nbeta\ngamma".to_vec()).unwrap();
        assert_eq!(v.get(0), b"alpha");
        assert_eq!(v.get(1), b"beta");
        assert_eq!(v.get(2), b"gamma");
        assert_eq!(v.get(3), b"alpha");
        assert!(Values::file(b"\n\n".to_vec()).is_err());
    }

    #[test]
    fn key_format() {
        let mut k = Vec::new();
        key(42, &mut k);
        assert_eq!(k, b"batch:0000000042");
    }
}
