//! `cairn-bench values` (E3): for each value size and iteration count N,
//! N SETs of distinct keys, then N GETs of them, each timed, and every byte
//! read back compared with what was written. A write the server refuses, a
//! value that comes back missing, and a value that comes back different
//! are each counted under their own name and never timed as a success (E3's
//! memcached stored nothing at 2.12 MB; its RAM disk returned empty reads).
//!
//! Values are random bytes from a seed that differs per round, thread, size
//! and iteration, so a stale value from an earlier step is caught as wrong.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use crate::cli::{make_ctx, parse_list, parse_size, report_files, ValuesCmd};
use crate::report::{make_run, Record};
use crate::runner::{self, connect, run_threads, Ctx};
use crate::stats::Recorder;
use crate::target::{Conn, Target};
use crate::wire::OpError;

const NAMES: &[&str] = &["SET", "GET"];

/// The key of iteration `i` of a step.
fn key(round: u32, thread: usize, size: usize, i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(format!("cairn-bench:values:{round}:{thread}:{size}:{i}").as_bytes());
}

/// Fills `buf` with `len` bytes determined by `seed`.
fn fill(seed: u64, len: usize, buf: &mut Vec<u8>) {
    buf.resize(len, 0);
    SmallRng::seed_from_u64(seed).fill_bytes(buf);
}

fn value_seed(base: u64, round: u32, thread: usize, size: usize, i: u64) -> u64 {
    runner::thread_seed(
        base ^ (size as u64).rotate_left(40) ^ i.rotate_left(20),
        round,
        thread,
    )
}

/// Compares what came back with what was written.
pub fn verify(got: &[u8], want: &[u8]) -> Result<(), OpError> {
    if got.len() != want.len() {
        return Err(OpError::Wrong(format!(
            "{} bytes read back, {} written",
            got.len(),
            want.len()
        )));
    }
    if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Err(OpError::Wrong(format!(
            "byte {at} differs from what was written"
        )));
    }
    Ok(())
}

fn set(c: &mut Conn, key: &[u8], v: &[u8]) -> Result<(), OpError> {
    match c {
        Conn::Resp(r) => {
            r.arr(3);
            r.bulk(b"SET");
            r.bulk(key);
            r.bulk(v);
            r.send()?;
            match r.read_ok() {
                // A RESP error to a write is the server refusing it (OOM,
                // proto-max-bulk-len, ...).
                Err(OpError::Server(m)) => Err(OpError::Refused(m)),
                x => x,
            }
        }
        Conn::Mc(m) => m.store(b"set", key, 0, 0, v),
    }
}

fn get(c: &mut Conn, key: &[u8], dest: &mut Vec<u8>) -> Result<Option<usize>, OpError> {
    match c {
        Conn::Resp(r) => {
            r.arr(2);
            r.bulk(b"GET");
            r.bulk(key);
            r.send()?;
            r.read_bulk_into(dest)
        }
        Conn::Mc(m) => m.get_into(key, dest),
    }
}

struct Step {
    round: u32,
    size: usize,
    iterations: u64,
    seed: u64,
    /// Where the client threads are, for the probes: threads that started,
    /// finished their SETs, finished their GETs.
    started: AtomicUsize,
    sets_done: AtomicUsize,
    gets_done: AtomicUsize,
}

/// Probe latencies in microseconds, by the op running when each probe was
/// sent (0 SET, 1 GET).
#[derive(Default)]
struct ProbeSamples {
    by_op: [Vec<u64>; 2],
}

/// One probe connection: a PING (memcached: `version`) about every
/// millisecond until `stop`, each timed and filed under the op the client
/// threads were running when it was sent (all threads still setting: SET;
/// all done setting, some still getting: GET; probes before the start or
/// after the end are dropped).
fn probe(t: &Target, st: &Step, threads: usize, stop: &AtomicBool, out: &Mutex<ProbeSamples>) {
    // A stalled server must show as a long probe, not a probe error.
    let Ok(mut c) = connect(t, Duration::from_secs(60)) else {
        return;
    };
    let mut mine = ProbeSamples::default();
    while !stop.load(Ordering::Relaxed) {
        let op = if st.started.load(Ordering::Relaxed) < threads {
            None
        } else if st.sets_done.load(Ordering::Relaxed) < threads {
            Some(0)
        } else if st.gets_done.load(Ordering::Relaxed) < threads {
            Some(1)
        } else {
            None
        };
        let t0 = Instant::now();
        let r = match &mut c {
            Conn::Resp(r) => {
                r.cmd(&[b"PING"]);
                r.send().and_then(|_| r.read_any()).map(|_| ())
            }
            Conn::Mc(m) => m.simple(b"version").map(|_| ()),
        };
        let us = t0.elapsed().as_micros() as u64;
        if r.is_err() {
            break;
        }
        if let Some(op) = op {
            mine.by_op[op].push(us);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut all = out.lock().expect("probe samples");
    for (a, b) in all.by_op.iter_mut().zip(mine.by_op) {
        a.extend(b);
    }
}

/// (p99, max, count) of probe latencies in microseconds.
fn probe_figures(mut v: Vec<u64>) -> Option<(f64, f64, u64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    let p99 = v[((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1];
    Some((p99 as f64, v[n - 1] as f64, n as u64))
}

fn thread_body(
    ctx: &Ctx,
    t: &Target,
    st: &Step,
    i: usize,
    start: &mut runner::Start,
    rec: &mut Recorder,
) {
    let timeout = ctx.timeout;
    let mut conn = connect(t, timeout).ok();
    let mut k = Vec::new();
    let mut val = Vec::with_capacity(st.size);
    let mut got = Vec::with_capacity(st.size);
    start.ready(rec);
    st.started.fetch_add(1, Ordering::Relaxed);
    let ensure = |conn: &mut Option<Conn>| -> Result<(), OpError> {
        if conn.is_none() {
            *conn = Some(connect(t, timeout)?);
        }
        Ok(())
    };
    for n in 0..st.iterations {
        key(st.round, i, st.size, n, &mut k);
        fill(
            value_seed(st.seed, st.round, i, st.size, n),
            st.size,
            &mut val,
        );
        if let Err(e) = ensure(&mut conn) {
            rec.err(0, &e, 1);
            continue;
        }
        let c = conn.as_mut().expect("connected");
        let t0 = Instant::now();
        let r = set(c, &k, &val);
        finish(rec, 0, r, t0, timeout, st.size as u64, &mut conn);
    }
    st.sets_done.fetch_add(1, Ordering::Relaxed);
    for n in 0..st.iterations {
        key(st.round, i, st.size, n, &mut k);
        if let Err(e) = ensure(&mut conn) {
            rec.err(1, &e, 1);
            continue;
        }
        let c = conn.as_mut().expect("connected");
        let t0 = Instant::now();
        let r = get(c, &k, &mut got);
        let t1 = Instant::now();
        // Checked after the clock stopped.
        let r = r.and_then(|found| match found {
            None => Err(OpError::Missing),
            Some(_) => {
                fill(
                    value_seed(st.seed, st.round, i, st.size, n),
                    st.size,
                    &mut val,
                );
                verify(&got, &val)
            }
        });
        finish_at(rec, 1, r, t0, t1, timeout, st.size as u64, &mut conn);
    }
    st.gets_done.fetch_add(1, Ordering::Relaxed);
}

fn finish(
    rec: &mut Recorder,
    op: usize,
    r: Result<(), OpError>,
    t0: Instant,
    timeout: Duration,
    bytes: u64,
    conn: &mut Option<Conn>,
) {
    finish_at(rec, op, r, t0, Instant::now(), timeout, bytes, conn)
}

#[allow(clippy::too_many_arguments)]
fn finish_at(
    rec: &mut Recorder,
    op: usize,
    r: Result<(), OpError>,
    t0: Instant,
    t1: Instant,
    timeout: Duration,
    bytes: u64,
    conn: &mut Option<Conn>,
) {
    let lat = t1.duration_since(t0);
    match r {
        Ok(()) if lat <= timeout => rec.ok(op, lat, 1, bytes, t1),
        Ok(()) => rec.err(op, &OpError::Timeout, 1),
        Err(e) => {
            if e.breaks_connection() {
                *conn = None;
            }
            rec.err(op, &e, 1);
        }
    }
}

/// Deletes a step's keys (outside the measurement).
fn cleanup(ctx: &Ctx, t: &Target, st: &Step, threads: usize) {
    let Ok(mut c) = connect(t, ctx.timeout.max(Duration::from_secs(5))) else {
        return;
    };
    let mut k = Vec::new();
    let mut keys = Vec::new();
    for i in 0..threads {
        for n in 0..st.iterations {
            key(st.round, i, st.size, n, &mut k);
            keys.push(k.clone());
        }
    }
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let _ = c.delete(&refs);
}

pub fn command(a: ValuesCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    let size_labels: Vec<String> = parse_list(&a.sizes, "--sizes")?;
    let sizes: Vec<usize> = size_labels
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<_, _>>()?;
    let iterations: Vec<u64> = parse_list(&a.iterations, "--iterations")?;
    if iterations.contains(&0) {
        return Err("--iterations: counts must be at least 1".into());
    }
    let threads: Vec<usize> = parse_list(&a.threads, "--threads")?;
    if threads.iter().any(|t| *t == 0 || *t > 4096) {
        return Err("--threads: each count must be 1..=4096".into());
    }
    let started = crate::sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    let seed = runner::seed_base(&ctx);
    let mut records = Vec::new();
    let mut notes = Vec::new();
    for round in 1..=ctx.rounds {
        for &th in &threads {
            for (si, &size) in sizes.iter().enumerate() {
                for &iters in &iterations {
                    let phase = format!("{} x{iters}", size_labels[si]);
                    for t in &ctx.targets {
                        let st = Step {
                            round,
                            size,
                            iterations: iters,
                            seed,
                            started: AtomicUsize::new(0),
                            sets_done: AtomicUsize::new(0),
                            gets_done: AtomicUsize::new(0),
                        };
                        let label = format!("{} {phase} r{round}", t.name);
                        let stop = AtomicBool::new(false);
                        let samples = Mutex::new(ProbeSamples::default());
                        let out = std::thread::scope(|s| {
                            for _ in 0..a.probe {
                                s.spawn(|| probe(t, &st, th, &stop, &samples));
                            }
                            let out = run_threads(
                                &ctx,
                                t,
                                &label,
                                th,
                                Some(2 * iters * th as u64),
                                NAMES,
                                |i, start, rec| thread_body(&ctx, t, &st, i, start, rec),
                            );
                            stop.store(true, Ordering::Relaxed);
                            out
                        });
                        if !a.keep {
                            cleanup(&ctx, t, &st, th);
                        }
                        let mut run = make_run(
                            &t.name,
                            &phase,
                            round,
                            th as u32,
                            out.started_unix,
                            out.duration_s,
                            &out.merged,
                            "bytes",
                            out.server_cpu,
                        );
                        run.extra
                            .insert("value_bytes".into(), serde_json::json!(size));
                        run.extra
                            .insert("iterations".into(), serde_json::json!(iters));
                        let samples = samples.into_inner().expect("probe samples");
                        for (op, v) in NAMES.iter().zip(samples.by_op) {
                            if let Some((p99, max, n)) = probe_figures(v) {
                                let op = op.to_ascii_lowercase();
                                run.extra
                                    .insert(format!("{op}_probe_p99_us"), serde_json::json!(p99));
                                run.extra
                                    .insert(format!("{op}_probe_max_us"), serde_json::json!(max));
                                run.extra
                                    .insert(format!("{op}_probe_samples"), serde_json::json!(n));
                            }
                        }
                        for (op, o) in NAMES.iter().zip(&out.merged.ops) {
                            let total_ms = o
                                .hist
                                .as_ref()
                                .map_or(0.0, |h| h.mean() * h.len() as f64 / 1e6);
                            run.extra.insert(
                                format!("{}_total_ms", op.to_ascii_lowercase()),
                                serde_json::json!(total_ms),
                            );
                            for (kind, n) in &o.errors {
                                run.extra.insert(
                                    format!("{}_{kind}", op.to_ascii_lowercase()),
                                    serde_json::json!(n),
                                );
                            }
                        }
                        let bad: Vec<String> = run
                            .per_op
                            .iter()
                            .flat_map(|o| {
                                o.errors
                                    .iter()
                                    .map(move |(k, n)| format!("{} {k} x{n}", o.op))
                            })
                            .collect();
                        if !bad.is_empty() {
                            let sample = run
                                .per_op
                                .iter()
                                .flat_map(|o| o.error_samples.values())
                                .next()
                                .cloned()
                                .unwrap_or_default();
                            notes.push(format!(
                                "{} {phase} round {round}: {} ({sample})",
                                t.name,
                                bad.join(", ")
                            ));
                        }
                        ctx.say(&format!(
                            "{} {phase}: {} SET ok, {} GET ok and verified, {} errors",
                            t.name,
                            out.merged.ops[0].count(),
                            out.merged.ops[1].count(),
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
    }
    let config = serde_json::json!({
        "sizes": size_labels,
        "size_bytes": sizes,
        "iterations": iterations,
        "threads": threads,
        "rounds": ctx.rounds,
        "timeout_s": ctx.timeout.as_secs_f64(),
        "keep": a.keep,
        "probe_connections": a.probe,
        "verification": "every byte of every GET compared with the value written",
    });
    let rep = runner::finish(&ctx, "values", infos, config, &records, notes, started)?;
    if let Some(prefix) = &ctx.chart {
        let max_iter = *iterations.iter().max().expect("non-empty");
        let phases: Vec<String> = size_labels
            .iter()
            .map(|s| format!("{s} x{max_iter}"))
            .collect();
        let files = crate::cli::phases_chart(
            &ctx,
            prefix,
            "values",
            &format!("SET/GET by value size ({max_iter} iterations), bytes verified"),
            &rep.summary,
            Some(&phases),
            true,
        )?;
        report_files(&ctx, &files);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_figures_are_p99_and_worst() {
        assert_eq!(probe_figures(Vec::new()), None);
        assert_eq!(probe_figures(vec![5]), Some((5.0, 5.0, 1)));
        let v: Vec<u64> = (1..=200).rev().collect();
        assert_eq!(probe_figures(v), Some((198.0, 200.0, 200)));
    }

    #[test]
    fn verification_catches_every_difference() {
        let mut a = Vec::new();
        fill(7, 1000, &mut a);
        let mut b = Vec::new();
        fill(7, 1000, &mut b);
        assert!(verify(&a, &b).is_ok());
        b[999] ^= 1;
        assert_eq!(
            verify(&a, &b),
            Err(OpError::Wrong(
                "byte 999 differs from what was written".into()
            ))
        );
        assert!(matches!(verify(&a[..10], &b), Err(OpError::Wrong(_))));
        assert!(matches!(verify(&[], &b), Err(OpError::Wrong(_))));
        // Different seeds give different values (stale data is caught).
        let mut c = Vec::new();
        fill(8, 1000, &mut c);
        assert!(verify(&a, &c).is_err());
    }
}
