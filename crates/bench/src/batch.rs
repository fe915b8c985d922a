//! `cairn-bench batch` (E4): MSET and MGET of B keys per call (32 by
//! default), in sequential or random key order, values of a given average
//! size (generated text, or the lines of a file), many threads; reports
//! average throughput (calls and keys per second) and the speed in every
//! second of the run.
//!
//! Sequential order: thread i writes or reads its contiguous slice of the
//! key space in order. Random order: a fixed permutation of all keys (an
//! affine bijection modulo the key count), so every key is still visited
//! once and every MGET should find all its keys; a missing key or a value of
//! the wrong length is counted as an error. On memcached an MSET is B `set`
//! commands sent in one write and an MGET one `get` of B keys.

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cli::{make_ctx, parse_list, report_files, BatchCmd};
use crate::report::{make_run, Record};
use crate::resp::Head;
use crate::runner::{self, connect, run_threads, Ctx, Throttle};
use crate::stats::Recorder;
use crate::target::{Conn, Target};
use crate::wire::OpError;

const MSET: &[&str] = &["MSET"];
const MGET: &[&str] = &["MGET"];

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
    fn write(self) -> bool {
        matches!(self, Phase::MsetSeq | Phase::MsetRand)
    }
    fn random(self) -> bool {
        matches!(self, Phase::MsetRand | Phase::MgetRand)
    }
    fn parse(s: &str) -> Result<Phase, String> {
        Ok(match s {
            "mset-seq" => Phase::MsetSeq,
            "mget-seq" => Phase::MgetSeq,
            "mset-rand" => Phase::MsetRand,
            "mget-rand" => Phase::MgetRand,
            _ => return Err(format!("--phases: unknown phase {s:?}")),
        })
    }
}

/// The values: a pool of bytes and, per key, a slice of it.
pub struct Values {
    pool: Vec<u8>,
    lines: Option<Vec<(usize, usize)>>,
    avg: usize,
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
        }
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
        })
    }

    /// The value of key `k`: generated values have lengths spread evenly
    /// over avg/2 ..= 3avg/2 (mean avg) at a key-dependent place in the pool.
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

/// Writes the key of record `k`.
#[inline]
fn key(k: u64, out: &mut Vec<u8>) {
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
    keys: u64,
    batch: usize,
    pipeline: usize,
    values: &'a Values,
    perm: Perm,
    max_time: Option<Duration>,
}

/// Encodes one call for the keys `ks` into the connection's buffer.
fn encode(c: &mut Conn, job: &Job, ks: &[u64], scratch: &mut Vec<u8>) {
    match c {
        Conn::Resp(r) => {
            if job.phase.write() {
                r.arr(1 + 2 * ks.len());
                r.bulk(b"MSET");
                for &k in ks {
                    scratch.clear();
                    key(k, scratch);
                    r.bulk(scratch);
                    r.bulk(job.values.get(k));
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
                    m.queue_store(b"set", scratch, 0, 0, job.values.get(k));
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

/// Reads one call's reply and checks it: every key present with its
/// value's length.
fn read_reply(c: &mut Conn, job: &Job, ks: &[u64], scratch: &mut Vec<u8>) -> Result<(), OpError> {
    match c {
        Conn::Resp(r) => {
            if job.phase.write() {
                return r.read_ok();
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
                        r.wire.skip(len)?;
                        let want = job.values.get(k).len();
                        if len != want && err.is_none() {
                            err = Some(OpError::Wrong(format!(
                                "key {i}: {len} bytes, {want} written"
                            )));
                        }
                    }
                    Head::Bulk(None) => {
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
            m.read_values(|kb, len| {
                while next < ks.len() {
                    scratch.clear();
                    key(ks[next], scratch);
                    next += 1;
                    if scratch.as_slice() == kb {
                        let want = job.values.get(ks[next - 1]).len();
                        if len != want && err.is_none() {
                            err = Some(OpError::Wrong(format!("{len} bytes, {want} written")));
                        }
                        return;
                    }
                    err.get_or_insert(OpError::Missing);
                }
            })?;
            if next < ks.len() {
                err.get_or_insert(OpError::Missing);
            }
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
    let mut scratch = Vec::with_capacity(64);
    let mut ks: Vec<u64> = Vec::with_capacity(job.batch * job.pipeline);
    let mut throttle = Throttle::new(ctx.target_rate, threads);
    start.ready(rec);
    throttle.restart();
    let deadline = job.max_time.map(|d| Instant::now() + d);
    let mut pos = lo;
    while pos < hi {
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
            encode(c, job, ch, &mut scratch);
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
            let r = read_reply(c, job, ch, &mut scratch);
            let now = Instant::now();
            let lat = now.duration_since(t0);
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
}

pub fn command(a: BatchCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    let phases: Vec<String> = parse_list(&a.phases, "--phases")?;
    let phases: Vec<Phase> = phases
        .iter()
        .map(|p| Phase::parse(p))
        .collect::<Result<_, _>>()?;
    let threads: Vec<usize> = parse_list(&a.threads, "--threads")?;
    if threads.iter().any(|t| *t == 0 || *t > 4096) {
        return Err("--threads: each count must be 1..=4096".into());
    }
    if a.keys == 0 || a.batch == 0 || a.pipeline == 0 || a.value_size == 0 {
        return Err("--keys, --batch, --pipeline and --value-size must be at least 1".into());
    }
    let seed = runner::seed_base(&ctx);
    let values = match &a.value_file {
        Some(p) => Values::file(std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?)?,
        None => Values::text(a.value_size, seed),
    };
    let started = crate::sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    if !a.no_flush {
        for t in &ctx.targets {
            let mut c = connect(t, ctx.timeout.max(Duration::from_secs(5)))
                .map_err(|e| format!("{}: {e}", t.name))?;
            c.flush_all()
                .map_err(|e| format!("{}: flush: {e}", t.name))?;
        }
    }
    let mut records = Vec::new();
    let mut notes = Vec::new();
    for round in 1..=ctx.rounds {
        for &th in &threads {
            for &phase in &phases {
                for t in &ctx.targets {
                    let job = Job {
                        phase,
                        keys: a.keys,
                        batch: a.batch,
                        pipeline: a.pipeline,
                        values: &values,
                        perm: Perm::new(a.keys, seed ^ if phase.write() { 1 } else { 2 }),
                        max_time: a.max_time.map(Duration::from_secs_f64),
                    };
                    let calls = a.keys.div_ceil(a.batch as u64);
                    let label = format!("{} {} r{round} t{th}", t.name, phase.name());
                    let names = if phase.write() { MSET } else { MGET };
                    let out =
                        run_threads(&ctx, t, &label, th, Some(calls), names, |i, start, rec| {
                            thread_body(&ctx, t, &job, i, th, start, rec)
                        });
                    let mut run = make_run(
                        &t.name,
                        phase.name(),
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
                    if run.errors > 0 {
                        let o = &run.per_op[0];
                        notes.push(format!(
                            "{} {} round {round} t{th}: {} errors {:?} ({})",
                            t.name,
                            phase.name(),
                            run.errors,
                            o.errors,
                            o.error_samples.values().next().cloned().unwrap_or_default()
                        ));
                    }
                    ctx.say(&format!(
                        "{} {} t{th} round {round}: {} calls/s, {} keys/s, {} errors",
                        t.name,
                        phase.name(),
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
    let config = serde_json::json!({
        "keys": a.keys,
        "batch": a.batch,
        "value_size": a.value_size,
        "value_avg_bytes": values.avg(),
        "value_file": a.value_file,
        "phases": phases.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "threads": threads,
        "pipeline": a.pipeline,
        "rounds": ctx.rounds,
        "timeout_s": ctx.timeout.as_secs_f64(),
        "target_rate": ctx.target_rate,
        "max_time_s": a.max_time,
    });
    let rep = runner::finish(&ctx, "batch", infos, config, &records, notes, started)?;
    if let Some(prefix) = &ctx.chart {
        let mut files = crate::cli::phases_chart(
            &ctx,
            prefix,
            "batch",
            &format!("MSET/MGET of {} keys, average speed", a.batch),
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
