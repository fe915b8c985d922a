//! `cairn-bench load-curve` (E5, issue 25): inserts YCSB records while the
//! data grows to N times the server's memory limit and reports the insert
//! rate over every 1% of the load, memory and disk per record at every
//! tenth, and the speed of the last tenth over the first (the bar: at least
//! 0.7; MongoDB's collapsed once its indexes outgrew RAM).
//!
//! Records are YCSB's, inserted as its load phase inserts them
//! ([`crate::ycsb::Inserter`]): on RESP a hash of `fieldcount` fields
//! (`HMSET`) plus its entry in the `_indices` sorted set (`ZADD`), which is
//! E5's secondary index; on memcached one JSON document (`add`). The load
//! size is `--records`, or `--times` × maxmemory (`CONFIG GET maxmemory`,
//! memcached's `limit_maxbytes`, or `--maxmemory`) over a record's raw size
//! (fields plus key).
//!
//! With `--string-values BYTES` a record is instead one string of real
//! text (`batch --real-text`'s values under `batch`'s keys), one SET
//! (memcached: `set`) and no index: Cairn's disk tier moves only string
//! values, so this is the load that shows whether the tier keeps up.
//!
//! Progress counts every insert answered, refused or not: a server that
//! refuses inserts at its limit finishes fast, so every refusal is an error
//! in the table and a note says the ratio then means nothing.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::batch::Values;
use crate::cli::{make_ctx, report_files, LoadCurveCmd};
use crate::curve::{crossed, last_to_first_tenth, percent_mark, rate_between};
use crate::report::{make_run, Record};
use crate::runner::{self, connect, run_threads, thread_seed, Ctx};
use crate::sample::{per_item, Sample, Sampler};
use crate::target::{stat_u64, Conn, Protocol, Target};
use crate::wire::OpError;
use crate::ycsb::{Inserter, Workload};

const NAMES: &[&str] = &["INSERT"];

/// E5's bar.
pub const BAR: f64 = 0.7;

/// The server's memory limit in bytes (0: none).
pub fn maxmemory(c: &mut Conn) -> Result<u64, OpError> {
    match c {
        Conn::Resp(r) => {
            r.cmd(&[b"CONFIG", b"GET", b"maxmemory"]);
            r.send()?;
            let mut data = Vec::new();
            let mut offs = Vec::new();
            let n = r.read_bulk_array(&mut data, &mut offs)?;
            if n < 2 {
                return Err(OpError::Protocol("CONFIG GET maxmemory: no value".into()));
            }
            let (a, b) = offs[1];
            crate::wire::parse_u64(&data[a..b])
                .ok_or_else(|| OpError::Protocol("CONFIG GET maxmemory: not a number".into()))
        }
        Conn::Mc(m) => Ok(stat_u64(&m.stats()?, "limit_maxbytes").unwrap_or(0)),
    }
}

/// A record's raw size: its fields plus its key (`user` and up to 19
/// digits, YCSB's hashed key).
pub fn record_bytes(w: &Workload) -> u64 {
    w.fieldcount as u64 * w.fieldlength + 23
}

/// A string record's raw size: its value plus `batch`'s 16-byte key.
pub fn string_record_bytes(size: usize) -> u64 {
    size as u64 + 16
}

/// What one thread inserts: YCSB records, or real-text strings.
// One per inserting thread, made once: the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
enum Loader<'a> {
    Ycsb(Inserter<'a>),
    Text {
        values: &'a Values,
        key: Vec<u8>,
        value: Vec<u8>,
    },
}

impl Loader<'_> {
    fn insert(&mut self, c: &mut Conn, k: u64) -> Result<(), OpError> {
        match self {
            Loader::Ycsb(ins) => ins.insert(c, k),
            Loader::Text { values, key, value } => {
                key.clear();
                crate::batch::key(k, key);
                let v = values.value(k, value);
                match c {
                    Conn::Resp(r) => {
                        r.cmd(&[b"SET", key.as_slice(), v]);
                        r.send()?;
                        r.read_ok()
                    }
                    Conn::Mc(m) => m.store(b"set", key, 0, 0, v),
                }
            }
        }
    }
}

/// The curve of one target's load.
struct Curve {
    /// Seconds from the load's start at which each percent was done.
    marks: Vec<Option<f64>>,
    samples: Vec<Sample>,
    /// Seconds from the sampler's start to the load's start.
    offset_s: f64,
    /// RESP: the `_indices` sorted set is one more key than the records.
    index_key: bool,
}

#[allow(clippy::too_many_arguments)]
fn load_one(
    ctx: &Ctx,
    t: &Target,
    w: &Workload,
    a: &LoadCurveCmd,
    n: u64,
    round: u32,
    seed: u64,
    disk: Option<std::path::PathBuf>,
    strings: Option<&Values>,
) -> Result<(Record, Curve, Sample), String> {
    let mut c = connect(t, ctx.timeout.max(Duration::from_secs(5)))
        .map_err(|e| format!("{}: {e}", t.name))?;
    if !a.no_flush {
        c.flush_all()
            .map_err(|e| format!("{}: flush: {e}", t.name))?;
        std::thread::sleep(Duration::from_millis(200));
    }
    let baseline = crate::sample::read(&mut Some(c), t, disk.as_deref(), 0.0);
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    // Nanoseconds since `base` + 1 at which each percent was done (0: not yet).
    let marks: Vec<AtomicU64> = (0..=100).map(|_| AtomicU64::new(0)).collect();
    let base: OnceLock<Instant> = OnceLock::new();
    let sampler_start = Instant::now();
    let sampler = Sampler::start(t, disk, Duration::from_secs_f64(a.sample_every));
    let label = format!("{} load-curve r{round}", t.name);
    let out = run_threads(
        ctx,
        t,
        &label,
        a.threads,
        Some(n),
        NAMES,
        |i, start, rec| {
            let mut ins = match strings {
                Some(values) => Loader::Text {
                    values,
                    key: Vec::with_capacity(32),
                    value: Vec::with_capacity(values.avg() + 16),
                },
                None => Loader::Ycsb(Inserter::new(w, ctx.timeout, thread_seed(seed, round, i))),
            };
            let mut conn = connect(t, ctx.timeout).ok();
            start.ready(rec);
            let base = *base.get_or_init(Instant::now);
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= n {
                    break;
                }
                if conn.is_none() {
                    conn = connect(t, ctx.timeout).ok();
                }
                let t0 = Instant::now();
                let r = match conn.as_mut() {
                    Some(c) => ins.insert(c, k),
                    None => Err(OpError::Io("cannot connect".into())),
                };
                let now = Instant::now();
                let lat = now.duration_since(t0);
                match r {
                    Ok(()) if lat <= ctx.timeout => rec.ok(0, lat, 1, 1, now),
                    Ok(()) => rec.err(0, &OpError::Timeout, 1),
                    Err(e) => {
                        if e.breaks_connection() {
                            conn = None;
                        }
                        rec.err(0, &e, 1);
                    }
                }
                let before = done.fetch_add(1, Ordering::Relaxed);
                let ns = now.saturating_duration_since(base).as_nanos() as u64 + 1;
                for p in crossed(before, before + 1, n) {
                    marks[p].store(ns, Ordering::Relaxed);
                }
            }
        },
    );
    let samples = sampler.stop();
    let mut marks: Vec<Option<f64>> = marks
        .iter()
        .map(|m| match m.load(Ordering::Relaxed) {
            0 => None,
            ns => Some((ns - 1) as f64 / 1e9),
        })
        .collect();
    marks[0] = Some(0.0);
    let offset_s = base.get().map_or(0.0, |b| {
        b.saturating_duration_since(sampler_start).as_secs_f64()
    });
    let run = make_run(
        &t.name,
        "load",
        round,
        a.threads as u32,
        out.started_unix,
        out.duration_s,
        &out.merged,
        "ops",
        out.server_cpu,
    );
    Ok((
        Record {
            run,
            merged: Some(out.merged),
        },
        Curve {
            marks,
            samples,
            offset_s,
            index_key: t.protocol == Protocol::Redis && strings.is_none(),
        },
        baseline,
    ))
}

/// The first sample taken at or after `t_s` seconds into the load (the
/// sampler's last reading is taken when the load is over), else the last
/// one. A reading from before the mark would miss records the tenth
/// stored: a short load, on a busy machine, can end before the sampler's
/// second reading, and the nearest reading was then the empty first one.
fn sample_at(l: &Curve, t_s: f64) -> Option<&Sample> {
    l.samples
        .iter()
        .find(|s| s.t_s - l.offset_s >= t_s)
        .or_else(|| l.samples.last())
}

/// One row per tenth of the load.
#[derive(Debug, Clone, serde::Serialize)]
struct Tenth {
    percent: usize,
    inserts_per_sec: Option<f64>,
    records_stored: Option<u64>,
    rss_bytes: Option<u64>,
    rss_bytes_per_record: Option<f64>,
    server_bytes_per_record: Option<f64>,
    disk_bytes_per_record: Option<f64>,
    evictions: Option<u64>,
}

fn tenths(l: &Curve, baseline: &Sample, n: u64) -> Vec<Tenth> {
    (1..=10)
        .map(|d| {
            let p = d * 10;
            let s = l.marks[p].and_then(|t| sample_at(l, t));
            let stored = s.and_then(|s| s.items).map(|i| {
                i.saturating_sub(baseline.items.unwrap_or(0))
                    // RESP: the `_indices` sorted set is one more key.
                    .saturating_sub(u64::from(i > 0 && l.index_key))
            });
            let per = |f: fn(&Sample) -> Option<u64>| {
                s.and_then(|s| per_item(f(baseline), f(s), stored.unwrap_or(0)))
            };
            Tenth {
                percent: p,
                inserts_per_sec: rate_between(&l.marks, n, p - 10, p),
                records_stored: stored,
                rss_bytes: s.and_then(|s| s.rss_bytes),
                rss_bytes_per_record: per(|s| s.rss_bytes),
                server_bytes_per_record: per(|s| s.server_bytes),
                disk_bytes_per_record: per(|s| s.disk_bytes),
                evictions: s
                    .and_then(|s| s.evictions)
                    .map(|e| e.saturating_sub(baseline.evictions.unwrap_or(0))),
            }
        })
        .collect()
}

/// E5's table for one target; `lost` is the inserts refused plus the
/// records evicted, which make the ratio no measure of a load.
fn table(target: &str, rows: &[Tenth], ratio: Option<f64>, lost: u64) -> String {
    let opt = |v: Option<f64>| v.map_or("-".into(), crate::report::thousands);
    let optu = |v: Option<u64>| v.map_or("-".into(), |x| crate::report::thousands(x as f64));
    let mut s = format!(
        "{target}: inserts/s by tenth of the load (memory and disk from the sample nearest each tenth's end)\n\n| loaded | inserts/s (that tenth) | records stored | evictions | RSS | RSS B/record | server B/record | disk B/record |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {}% | {} | {} | {} | {} | {} | {} | {} |",
            r.percent,
            opt(r.inserts_per_sec),
            optu(r.records_stored),
            optu(r.evictions),
            optu(r.rss_bytes),
            opt(r.rss_bytes_per_record),
            opt(r.server_bytes_per_record),
            opt(r.disk_bytes_per_record),
        );
    }
    let _ = writeln!(
        s,
        "\nlast tenth / first tenth: {} (bar: at least {BAR})",
        ratio.map_or("- (the load did not finish)".into(), |r| format!(
            "{r:.2} ({})",
            if lost > 0 {
                format!("no verdict: {lost} records refused or evicted")
            } else if r >= BAR {
                "meets the bar".into()
            } else {
                "below the bar".into()
            }
        ))
    );
    s
}

pub fn command(a: LoadCurveCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if a.threads == 0 || !positive(a.sample_every) || !positive(a.times) {
        return Err("--threads, --times and --sample-every must be positive".into());
    }
    let props: Vec<(String, String)> = a
        .props
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("-p {p:?}: expected NAME=VALUE"))
        })
        .collect::<Result<_, _>>()?;
    let mut w = Workload::build(&a.workload, &props)?;
    let mut disks = Vec::new();
    for s in &a.disk_dirs {
        let (n, p) = s
            .split_once('=')
            .ok_or_else(|| format!("--disk-dir {s:?}: expected NAME=PATH"))?;
        if !ctx.targets.iter().any(|t| t.name == n) {
            return Err(format!("--disk-dir {s}: no target named {n}"));
        }
        disks.push((n.to_string(), std::path::PathBuf::from(p)));
    }
    let started = crate::sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    let seed = runner::seed_base(&ctx);
    let strings = match a.string_values {
        Some(0) => return Err("--string-values must be at least 1".into()),
        Some(size) => Some(crate::batch::make_values(
            None,
            true,
            &a.text_sources,
            size,
            seed,
        )?),
        None => None,
    };
    let rec_bytes = match a.string_values {
        Some(size) => string_record_bytes(size),
        None => record_bytes(&w),
    };
    // The load size: from --records, else --times the first target's limit.
    let limit = match a.maxmemory {
        Some(m) => m as u64,
        None => {
            let t = &ctx.targets[0];
            let mut c = connect(t, ctx.timeout.max(Duration::from_secs(5)))
                .map_err(|e| format!("{}: {e}", t.name))?;
            maxmemory(&mut c).map_err(|e| format!("{}: maxmemory: {e}", t.name))?
        }
    };
    let n = match a.records {
        Some(n) => n,
        None if limit > 0 => (a.times * limit as f64 / rec_bytes as f64).ceil() as u64,
        None => {
            return Err(format!(
                "{} has no maxmemory: give --records or --maxmemory",
                ctx.targets[0].name
            ))
        }
    };
    if n == 0 {
        return Err("the load has no records".into());
    }
    w.recordcount = n;
    ctx.say(&format!(
        "loading {n} records of ~{rec_bytes} B ({:.2} x maxmemory {limit})",
        n as f64 * rec_bytes as f64 / limit.max(1) as f64
    ));
    let mut records = Vec::new();
    let mut notes = Vec::new();
    let mut tables = Vec::new();
    let mut curves = Vec::new();
    for round in 1..=ctx.rounds {
        for t in &ctx.targets {
            let disk = disks
                .iter()
                .find(|(x, _)| *x == t.name)
                .map(|(_, p)| p.clone());
            let (mut rec, l, baseline) =
                load_one(&ctx, t, &w, &a, n, round, seed, disk, strings.as_ref())?;
            let run = &mut rec.run;
            let ratio = last_to_first_tenth(&l.marks, n);
            let rows = tenths(&l, &baseline, n);
            let per_percent: Vec<Option<f64>> = (1..=100)
                .map(|p| rate_between(&l.marks, n, p - 1, p))
                .collect();
            run.extra.insert("records".into(), serde_json::json!(n));
            run.extra
                .insert("last_to_first_tenth".into(), serde_json::json!(ratio));
            run.extra.insert("tenths".into(), serde_json::json!(rows));
            run.extra.insert(
                "inserts_per_sec_by_percent".into(),
                serde_json::json!(per_percent),
            );
            run.extra
                .insert("percent_done_at_s".into(), serde_json::json!(l.marks));
            run.extra
                .insert("samples".into(), serde_json::json!(l.samples));
            if run.errors > 0 {
                notes.push(format!(
                    "{} round {round}: {} of {n} inserts failed {:?} ({}); refused inserts are fast, so the curve and ratio do not measure a load",
                    t.name,
                    run.errors,
                    run.per_op[0].errors,
                    run.per_op[0].error_samples.values().next().cloned().unwrap_or_default()
                ));
            }
            if let Some(e) = rows.last().and_then(|r| r.evictions).filter(|e| *e > 0) {
                notes.push(format!(
                    "{} round {round}: {e} records evicted (the data does not fit and the server drops it)",
                    t.name
                ));
            }
            ctx.say(&format!(
                "{} round {round}: {} inserts/s, last/first tenth {}",
                t.name,
                crate::report::thousands(run.ops_per_sec),
                ratio.map_or("-".into(), |r| format!("{r:.2}"))
            ));
            let evicted = rows.last().and_then(|r| r.evictions).unwrap_or(0);
            tables.push(table(
                &format!("{} round {round}", t.name),
                &rows,
                ratio,
                run.errors + evicted,
            ));
            if round == 1 {
                let points: Vec<(f64, f64)> = per_percent
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| r.map(|r| (i as f64 + 0.5, r)))
                    .collect();
                curves.push(crate::chart::Timeline {
                    name: t.name.clone(),
                    points,
                    average: run.ops_per_sec,
                });
            }
            records.push(rec);
        }
    }
    let config = serde_json::json!({
        "records": n,
        "record_bytes": rec_bytes,
        "record": if strings.is_some() { "string" } else { "ycsb-hash" },
        "values": strings.as_ref().map(|v| crate::batch::values_config(v, seed)),
        "maxmemory": limit,
        "times": a.times,
        "workload": w,
        "threads": a.threads,
        "rounds": ctx.rounds,
        "flush": !a.no_flush,
        "sample_every_s": a.sample_every,
        "bar_last_to_first_tenth": BAR,
        "percent_marks": (0..=100).map(|p| percent_mark(p, n)).collect::<Vec<_>>(),
    });
    runner::finish(&ctx, "load-curve", infos, config, &records, notes, started)?;
    for tb in &tables {
        println!();
        print!("{tb}");
    }
    if let Some(prefix) = &ctx.chart {
        crate::chart::init_font(ctx.font.as_deref())?;
        let files = crate::chart::curve_chart(
            &crate::chart::with_suffix(prefix, "load-curve"),
            &format!("Inserts/s while loading {n} records"),
            "% of the load",
            "inserts/s (per 1%)",
            &curves,
        )?;
        report_files(&ctx, &files);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_size_and_load() {
        let w = Workload::build("a", &[]).unwrap();
        assert_eq!(record_bytes(&w), 10 * 100 + 23);
    }

    #[test]
    fn tenths_read_the_marks_and_samples() {
        let n = 1000;
        let marks: Vec<Option<f64>> = (0..=100).map(|p| Some(p as f64 * 0.1)).collect();
        let samples: Vec<Sample> = (0..12)
            .map(|s| Sample {
                t_s: s as f64 + 0.5,
                rss_bytes: Some(1000 + 100 * s),
                server_bytes: Some(500 + 50 * s),
                items: Some(100 * s),
                ..Default::default()
            })
            .collect();
        let l = Curve {
            marks,
            samples,
            offset_s: 0.5,
            index_key: false,
        };
        let base = Sample {
            rss_bytes: Some(1000),
            server_bytes: Some(500),
            items: Some(0),
            ..Default::default()
        };
        let rows = tenths(&l, &base, n);
        assert_eq!(rows.len(), 10);
        assert_eq!(rows[0].percent, 10);
        assert_eq!(rows[0].inserts_per_sec, Some(100.0));
        // 10% is done at 1 s, the sample at t_s 1.5 (1 s into the load).
        assert_eq!(rows[0].records_stored, Some(100));
        assert_eq!(rows[0].rss_bytes_per_record, Some(1.0));
        assert_eq!(rows[0].server_bytes_per_record, Some(0.5));
        assert_eq!(rows[9].records_stored, Some(1000));
        let t = table("x", &rows, Some(0.9), 0);
        assert!(t.contains("| 100% |") && t.contains("0.90 (meets the bar)"));
        assert!(table("x", &rows, Some(0.5), 0).contains("below the bar"));
        assert!(table("x", &rows, Some(0.9), 3).contains("no verdict: 3 records"));
    }
}
