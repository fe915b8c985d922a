//! `cairn-bench hitratio` (issue 5): how well a server's eviction keeps the
//! keys that matter when the data does not fit in `maxmemory`.
//!
//! The workload is a cache in front of a slower store: a GET of a key drawn
//! from a zipfian distribution (YCSB's, theta 0.99 by default) over `keys`
//! keys, and on a miss a SET of that key with a `value-size`-byte value (the
//! "load from the database" step). Nothing is loaded first: the cache fills
//! itself during a warm-up phase, then a measured phase counts hits.
//!
//! Before each run the targets are emptied and given the SAME absolute
//! `maxmemory` (CONFIG SET) and the policy under test, so two servers that
//! store a key at different costs are compared on the same memory. The
//! limit is `fraction` of the data size *as the first target stores it*:
//! the first target is loaded with every key once (no limit), its
//! `used_memory` growth is the data size, and it is emptied again
//! (`--maxmemory` sets the limit directly and skips this). Each target's
//! `maxmemory` and policy are restored afterwards.
//!
//! Reported per target and policy: the client's hit ratio over the measured
//! GETs, the server's own (keyspace_hits / misses over the same phase),
//! evictions, and `used_memory` and key count at the end.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::cli::{make_ctx, report_files, HitRatioCmd};
use crate::gen::Zipfian;
use crate::report::{make_run, Record, Run};
use crate::resp::RespConn;
use crate::runner::{self, Ctx};
use crate::stats::{Merged, Progress, Recorder};
use crate::sys;
use crate::target::{info_field, Conn, Protocol, Target};
use crate::wire::OpError;

const NAMES: &[&str] = &["GET", "SET"];
const GET: usize = 0;
const SET: usize = 1;

/// The key of item `i`: `hr:` and ten digits (13 bytes).
pub fn key(i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"hr:");
    let mut b = itoa::Buffer::new();
    let digits = b.format(i);
    out.resize(3 + 10usize.saturating_sub(digits.len()), b'0');
    out.extend_from_slice(digits.as_bytes());
}

/// The value stored on a miss: `n` printable bytes, the same for every key
/// (hit ratio does not depend on the bytes).
pub fn value(n: usize) -> Vec<u8> {
    crate::getset::benchmark_data(n)
}

/// Counts of one phase.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Tally {
    pub gets: u64,
    pub hits: u64,
    pub sets: u64,
    pub set_errors: u64,
}

impl Tally {
    pub fn ratio(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}

fn resp<'a>(c: &'a mut Conn, t: &Target) -> Result<&'a mut RespConn, String> {
    match c {
        Conn::Resp(r) => Ok(r),
        Conn::Mc(_) => Err(format!(
            "{}: hitratio needs a RESP target (it sets maxmemory with CONFIG SET)",
            t.name
        )),
    }
}

fn simple(c: &mut RespConn, args: &[&[u8]]) -> Result<(), OpError> {
    c.cmd(args);
    c.send()?;
    c.read_ok()
}

/// CONFIG GET of one directive.
fn config_get(c: &mut RespConn, name: &str) -> Result<String, OpError> {
    c.cmd(&[b"CONFIG", b"GET", name.as_bytes()]);
    c.send()?;
    let mut v = Vec::new();
    let n = match c.head()? {
        crate::resp::Head::Array(Some(n)) => n,
        h => return Err(OpError::Protocol(format!("CONFIG GET: {h:?}"))),
    };
    let mut out = String::new();
    for i in 0..n {
        c.read_bulk_into(&mut v)?;
        if i == 1 {
            out = String::from_utf8_lossy(&v).into_owned();
        }
    }
    Ok(out)
}

fn info_u64(c: &mut Conn, section: &str, name: &str) -> Option<u64> {
    let info = c.info(section).ok()?;
    info_field(&info, name)?.parse().ok()
}

/// One phase of the cache workload: `ops` GETs in pipelines of `depth`,
/// each miss followed by a SET. `rec` gets both operations' latencies
/// (per pipeline, as redis-benchmark counts them).
#[allow(clippy::too_many_arguments)]
pub fn cache_phase(
    c: &mut RespConn,
    zipf: &mut Zipfian,
    rng: &mut SmallRng,
    ops: u64,
    depth: usize,
    val: &[u8],
    mut rec: Option<&mut Recorder>,
    mut progress: impl FnMut(&Tally),
) -> Result<Tally, OpError> {
    let mut t = Tally::default();
    let mut ids: Vec<u64> = Vec::with_capacity(depth);
    let mut missed: Vec<u64> = Vec::with_capacity(depth);
    let mut k = Vec::with_capacity(16);
    let mut sink = Vec::new();
    let mut last_note = Instant::now();
    while t.gets < ops {
        let n = depth.min((ops - t.gets) as usize);
        ids.clear();
        missed.clear();
        for _ in 0..n {
            let id = zipf.next(rng);
            ids.push(id);
            key(id, &mut k);
            c.cmd(&[b"GET", &k]);
        }
        let started = Instant::now();
        c.send()?;
        for &id in &ids {
            match c.read_bulk_into(&mut sink)? {
                Some(_) => t.hits += 1,
                None => missed.push(id),
            }
        }
        t.gets += n as u64;
        let now = Instant::now();
        if let Some(r) = rec.as_deref_mut() {
            r.ok(GET, now - started, n as u64, n as u64, now);
        }
        if missed.is_empty() {
            continue;
        }
        for &id in &missed {
            key(id, &mut k);
            c.cmd(&[b"SET", &k, val]);
        }
        let started = Instant::now();
        c.send()?;
        let mut errors = Vec::new();
        for _ in &missed {
            match c.read_ok() {
                Ok(()) => t.sets += 1,
                // An OOM refusal (noeviction) is a result, not a failure.
                Err(OpError::Server(e)) => {
                    t.set_errors += 1;
                    errors.push(e);
                }
                Err(e) => return Err(e),
            }
        }
        let now = Instant::now();
        if let Some(r) = rec.as_deref_mut() {
            let ok = (missed.len() - errors.len()) as u64;
            if ok > 0 {
                r.ok(SET, now - started, ok, ok, now);
            }
            for e in &errors {
                r.err(SET, &OpError::Server(e.clone()), 1);
            }
        }
        if last_note.elapsed() >= Duration::from_secs(2) {
            last_note = Instant::now();
            progress(&t);
        }
    }
    Ok(t)
}

/// Loads every key once (no limit) into `t` and returns how much its
/// `used_memory` grew: the data size as that server stores it.
fn data_size(ctx: &Ctx, t: &Target, a: &HitRatioCmd) -> Result<u64, String> {
    let mut conn = runner::connect(t, ctx.timeout.max(Duration::from_secs(5)))
        .map_err(|e| format!("{}: {e}", t.name))?;
    conn.flush_all().map_err(|e| format!("{}: {e}", t.name))?;
    {
        let c = resp(&mut conn, t)?;
        simple(c, &[b"CONFIG", b"SET", b"maxmemory", b"0"]).map_err(|e| e.to_string())?;
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = info_u64(&mut conn, "memory", "used_memory").unwrap_or(0);
    let val = value(a.value_size);
    {
        let c = resp(&mut conn, t)?;
        let mut k = Vec::new();
        let mut i = 0;
        while i < a.keys {
            let n = (a.keys - i).min(a.pipeline as u64);
            for j in i..i + n {
                key(j, &mut k);
                c.cmd(&[b"SET", &k, &val]);
            }
            c.send().map_err(|e| e.to_string())?;
            for _ in 0..n {
                c.read_ok().map_err(|e| format!("{}: load: {e}", t.name))?;
            }
            i += n;
        }
    }
    let after = info_u64(&mut conn, "memory", "used_memory").unwrap_or(0);
    conn.flush_all().map_err(|e| format!("{}: {e}", t.name))?;
    std::thread::sleep(Duration::from_millis(200));
    Ok(after.saturating_sub(before))
}

/// Server-side counters read around the measured phase.
#[derive(Default, Clone, Copy)]
struct ServerCounts {
    hits: u64,
    misses: u64,
    evicted: u64,
}

fn server_counts(c: &mut Conn) -> ServerCounts {
    ServerCounts {
        hits: info_u64(c, "stats", "keyspace_hits").unwrap_or(0),
        misses: info_u64(c, "stats", "keyspace_misses").unwrap_or(0),
        evicted: info_u64(c, "stats", "evicted_keys").unwrap_or(0),
    }
}

#[allow(clippy::too_many_arguments)]
fn measure(
    ctx: &Ctx,
    t: &Target,
    a: &HitRatioCmd,
    policy: &str,
    maxmemory: u64,
    round: u32,
    seed: u64,
    zetan: f64,
    notes: &mut Vec<String>,
) -> Result<Record, String> {
    let mut conn = runner::connect(t, ctx.timeout.max(Duration::from_secs(5)))
        .map_err(|e| format!("{}: {e}", t.name))?;
    conn.flush_all().map_err(|e| format!("{}: {e}", t.name))?;
    let (old_max, old_policy) = {
        let c = resp(&mut conn, t)?;
        let old = (
            config_get(c, "maxmemory").map_err(|e| e.to_string())?,
            config_get(c, "maxmemory-policy").map_err(|e| e.to_string())?,
        );
        simple(
            c,
            &[b"CONFIG", b"SET", b"maxmemory-policy", policy.as_bytes()],
        )
        .map_err(|e| format!("{}: CONFIG SET maxmemory-policy {policy}: {e}", t.name))?;
        simple(
            c,
            &[
                b"CONFIG",
                b"SET",
                b"maxmemory",
                maxmemory.to_string().as_bytes(),
            ],
        )
        .map_err(|e| format!("{}: CONFIG SET maxmemory: {e}", t.name))?;
        old
    };
    std::thread::sleep(Duration::from_millis(200));
    let val = value(a.value_size);
    let mut zipf = Zipfian::with_zetan(0, a.keys - 1, a.theta, zetan);
    let mut rng = SmallRng::seed_from_u64(seed ^ u64::from(round));
    let label = format!("{} {policy} r{round}", t.name);
    let say = |phase: &str, x: &Tally, total: u64| {
        ctx.say(&format!(
            "{label} {phase}: {}/{} GETs, hit ratio {:.4}",
            x.gets,
            total,
            x.ratio()
        ))
    };
    let warm = {
        let c = resp(&mut conn, t)?;
        cache_phase(
            c,
            &mut zipf,
            &mut rng,
            a.warmup,
            a.pipeline,
            &val,
            None,
            |x| say("warm-up", x, a.warmup),
        )
        .map_err(|e| format!("{}: warm-up: {e}", t.name))?
    };
    let before = server_counts(&mut conn);
    let progress = Progress::new(1);
    let mut rec = Recorder::new(NAMES, Arc::clone(&progress), 0);
    let started_unix = sys::unix_now();
    rec.start_now();
    let t0 = Instant::now();
    let tally = {
        let c = resp(&mut conn, t)?;
        cache_phase(
            c,
            &mut zipf,
            &mut rng,
            a.ops,
            a.pipeline,
            &val,
            Some(&mut rec),
            |x| say("measured", x, a.ops),
        )
        .map_err(|e| format!("{}: run: {e}", t.name))?
    };
    let duration_s = t0.elapsed().as_secs_f64();
    let after = server_counts(&mut conn);
    let used_end = info_u64(&mut conn, "memory", "used_memory");
    let keys_end = conn.dbsize().ok();
    {
        let c = resp(&mut conn, t)?;
        // Back to how the target was (nothing stored is kept either way).
        let _ = simple(c, &[b"CONFIG", b"SET", b"maxmemory", old_max.as_bytes()]);
        let _ = simple(
            c,
            &[
                b"CONFIG",
                b"SET",
                b"maxmemory-policy",
                old_policy.as_bytes(),
            ],
        );
    }
    let _ = conn.flush_all();
    let mut merged = Merged::new(NAMES);
    merged.add_recorder(&rec, 0);
    // Hit ratio is not a CPU figure: no server CPU is reported.
    let server_cpu = None;
    let mut run: Run = make_run(
        &t.name,
        policy,
        round,
        1,
        started_unix,
        duration_s,
        &merged,
        "ops",
        server_cpu,
    );
    let s_hits = after.hits.saturating_sub(before.hits);
    let s_misses = after.misses.saturating_sub(before.misses);
    let server_ratio = (s_hits + s_misses > 0).then(|| s_hits as f64 / (s_hits + s_misses) as f64);
    let ex = &mut run.extra;
    ex.insert("policy".into(), serde_json::json!(policy));
    ex.insert("maxmemory".into(), serde_json::json!(maxmemory));
    ex.insert("keys".into(), serde_json::json!(a.keys));
    ex.insert("gets".into(), serde_json::json!(tally.gets));
    ex.insert("hits".into(), serde_json::json!(tally.hits));
    ex.insert("hit_ratio".into(), serde_json::json!(tally.ratio()));
    ex.insert("warmup_hit_ratio".into(), serde_json::json!(warm.ratio()));
    ex.insert("server_hit_ratio".into(), serde_json::json!(server_ratio));
    ex.insert("sets".into(), serde_json::json!(tally.sets));
    ex.insert("set_errors".into(), serde_json::json!(tally.set_errors));
    ex.insert(
        "evictions".into(),
        serde_json::json!(after.evicted.saturating_sub(before.evicted)),
    );
    ex.insert("used_memory_end".into(), serde_json::json!(used_end));
    ex.insert("keys_end".into(), serde_json::json!(keys_end));
    if tally.set_errors > 0 {
        notes.push(format!(
            "{label}: {} SETs refused (the policy does not evict)",
            tally.set_errors
        ));
    }
    if let Some(u) = used_end {
        if u > maxmemory + maxmemory / 20 {
            notes.push(format!(
                "{label}: used_memory {u} at the end is over maxmemory {maxmemory} by more than 5%"
            ));
        }
    }
    ctx.say(&format!(
        "{label}: hit ratio {:.4} (server {}), {} evictions, used_memory {} at the end",
        tally.ratio(),
        server_ratio.map_or("?".into(), |r| format!("{r:.4}")),
        after.evicted.saturating_sub(before.evicted),
        used_end.map_or("?".into(), |u| u.to_string()),
    ));
    Ok(Record {
        run,
        merged: Some(merged),
    })
}

/// The hit-ratio table (Markdown).
pub fn hitratio_table(runs: &[Run]) -> String {
    let mut s = String::from(
        "| target | policy | round | maxmemory | hit ratio | server hit ratio | evictions | used_memory at end | keys at end |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let num = |r: &Run, k: &str| r.extra.get(k).and_then(|v| v.as_f64());
    let int = |r: &Run, k: &str| num(r, k).map_or("-".into(), crate::report::thousands);
    let pct = |r: &Run, k: &str| num(r, k).map_or("-".into(), |v| format!("{:.2}%", v * 100.0));
    for r in runs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.target,
            r.phase,
            r.round,
            int(r, "maxmemory"),
            pct(r, "hit_ratio"),
            pct(r, "server_hit_ratio"),
            int(r, "evictions"),
            int(r, "used_memory_end"),
            int(r, "keys_end"),
        );
    }
    s
}

pub fn command(a: HitRatioCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    if a.keys < 2 || a.pipeline == 0 || a.ops == 0 {
        return Err("--keys must be at least 2, --pipeline and --ops at least 1".into());
    }
    if !(a.fraction > 0.0 && a.fraction <= 1.0) {
        return Err("--fraction must be in (0, 1]".into());
    }
    if !(a.theta > 0.0 && a.theta < 1.0) {
        return Err("--theta must be in (0, 1)".into());
    }
    if let Some(t) = ctx.targets.iter().find(|t| t.protocol != Protocol::Redis) {
        return Err(format!(
            "{}: hitratio needs RESP targets (it sets maxmemory with CONFIG SET)",
            t.name
        ));
    }
    let policies = if a.policies.is_empty() {
        vec!["allkeys-lru".to_string(), "allkeys-lfu".to_string()]
    } else {
        a.policies.clone()
    };
    let started = sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    let seed = runner::seed_base(&ctx);
    let (maxmemory, data_bytes) = match a.maxmemory {
        Some(m) => (m as u64, None),
        None => {
            let first = &ctx.targets[0];
            ctx.say(&format!(
                "sizing: loading {} keys into {} to measure the data size",
                a.keys, first.name
            ));
            let d = data_size(&ctx, first, &a)?;
            let m = ((d as f64) * a.fraction) as u64;
            ctx.say(&format!(
                "data size on {}: {d} bytes; maxmemory {m} ({}%)",
                first.name,
                a.fraction * 100.0
            ));
            (m.max(1), Some(d))
        }
    };
    ctx.say(&format!("zipfian({}) over {} keys", a.theta, a.keys));
    let zetan = Zipfian::new(0, a.keys - 1, a.theta).zetan();
    let mut records = Vec::new();
    let mut notes = Vec::new();
    for round in 1..=ctx.rounds {
        for policy in &policies {
            for t in &ctx.targets {
                records.push(measure(
                    &ctx, t, &a, policy, maxmemory, round, seed, zetan, &mut notes,
                )?);
            }
        }
    }
    let config = serde_json::json!({
        "keys": a.keys,
        "value_size": a.value_size,
        "key_size": 13,
        "theta": a.theta,
        "warmup_gets": a.warmup,
        "measured_gets": a.ops,
        "pipeline": a.pipeline,
        "policies": policies,
        "fraction": a.fraction,
        "maxmemory": maxmemory,
        "data_bytes_on_first_target": data_bytes,
        "maxmemory_source": if a.maxmemory.is_some() { "--maxmemory" } else { "fraction of the first target's used_memory growth when loaded with every key" },
        "rounds": ctx.rounds,
    });
    let rep = runner::finish(&ctx, "hitratio", infos, config, &records, notes, started)?;
    println!();
    print!("{}", hitratio_table(&rep.runs));
    if let Some(prefix) = &ctx.chart {
        let series: Vec<crate::chart::Series> = ctx
            .targets
            .iter()
            .enumerate()
            .map(|(g, t)| crate::chart::Series {
                name: t.name.clone(),
                group: g,
                values: policies
                    .iter()
                    .map(|p| {
                        rep.runs
                            .iter()
                            .find(|r| r.target == t.name && r.phase == *p && r.round == 1)
                            .and_then(|r| r.extra.get("hit_ratio")?.as_f64())
                            .map(|v| v * 100.0)
                    })
                    .collect(),
            })
            .collect();
        crate::chart::init_font(ctx.font.as_deref())?;
        let files = crate::chart::category_chart(
            &crate::chart::with_suffix(prefix, "hitratio"),
            &format!(
                "Hit ratio, zipfian({}) over {} keys, maxmemory {}",
                a.theta, a.keys, maxmemory
            ),
            "",
            &policies,
            "hit ratio (%)",
            &series,
            "",
            &[],
        )?;
        report_files(&ctx, &files);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width() {
        let mut k = Vec::new();
        key(42, &mut k);
        assert_eq!(k, b"hr:0000000042");
        key(9_999_999_999, &mut k);
        assert_eq!(k, b"hr:9999999999");
    }

    #[test]
    fn tally_ratio() {
        let t = Tally {
            gets: 4,
            hits: 3,
            ..Default::default()
        };
        assert_eq!(t.ratio(), 0.75);
        assert_eq!(Tally::default().ratio(), 0.0);
    }
}
