//! `cairn-bench memory` (E1, appendix B): loads N YCSB records into each
//! target and reports bytes per record, from the server's own accounting
//! (`INFO memory` used_memory for RESP, `stats` bytes for memcached) and,
//! for a server on this machine, from its resident set size (/proc), before
//! and after the load. It also checks that the records are all there
//! (DBSIZE / curr_items) and reports evictions: a cache that silently drops
//! data to stay under its limit (memcached's -m) is not holding N records.

use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::{make_ctx, report_files, MemoryCmd};
use crate::report::{make_run, Record, Run};
use crate::runner::{self, connect, Ctx};
use crate::sys;
use crate::target::{info_field, stat_u64, Conn, Protocol, Target};
use crate::ycsb::{load, Workload};

/// The server's view of its memory and item count.
#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    server_bytes: Option<u64>,
    rss: Option<u64>,
    items: Option<u64>,
    evictions: Option<u64>,
}

fn snapshot(c: &mut Conn, t: &Target) -> Snapshot {
    let mut s = Snapshot {
        rss: t.pid.and_then(sys::rss_bytes),
        ..Default::default()
    };
    match t.protocol {
        Protocol::Redis => {
            if let Ok(info) = c.info("memory") {
                s.server_bytes = info_field(&info, "used_memory").and_then(|v| v.parse().ok());
            }
            if let Ok(info) = c.info("stats") {
                s.evictions = info_field(&info, "evicted_keys").and_then(|v| v.parse().ok());
            }
            s.items = c.dbsize().ok();
        }
        Protocol::Memcached => {
            if let Conn::Mc(m) = c {
                if let Ok(st) = m.stats() {
                    s.server_bytes = stat_u64(&st, "bytes");
                    s.items = stat_u64(&st, "curr_items");
                    s.evictions = stat_u64(&st, "evictions");
                }
            }
        }
    }
    s
}

fn per_record(before: Option<u64>, after: Option<u64>, n: u64) -> Option<f64> {
    match (before, after) {
        (Some(b), Some(a)) if n > 0 => Some((a as f64 - b as f64) / n as f64),
        _ => None,
    }
}

fn measure(
    ctx: &Ctx,
    t: &Target,
    w: &Workload,
    a: &MemoryCmd,
    round: u32,
    seed: u64,
    notes: &mut Vec<String>,
) -> Result<Record, String> {
    let mut c = connect(t, ctx.timeout.max(Duration::from_secs(5)))
        .map_err(|e| format!("{}: {e}", t.name))?;
    if !a.no_flush {
        c.flush_all()
            .map_err(|e| format!("{}: flush: {e}", t.name))?;
        // Give the allocator a moment to return freed pages.
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = snapshot(&mut c, t);
    let label = format!("{} memory load r{round}", t.name);
    let clients = crate::ycsb::Clients {
        total: a.threads,
        per_thread: 1,
    };
    let out = load(ctx, t, w, 0, a.records, clients, seed, &label);
    let after = snapshot(&mut c, t);
    let mut run: Run = make_run(
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
    // RESP keeps the scan index (_indices) as one more key.
    let stored = after.items.map(|n| match t.protocol {
        Protocol::Redis => n.saturating_sub(u64::from(n > 0)),
        Protocol::Memcached => n,
    });
    let server_pr = per_record(before.server_bytes, after.server_bytes, a.records);
    let rss_pr = per_record(before.rss, after.rss, a.records);
    let ev = match (before.evictions, after.evictions) {
        (Some(b), Some(x)) => Some(x.saturating_sub(b)),
        (None, Some(x)) => Some(x),
        _ => None,
    };
    run.extra
        .insert("records".into(), serde_json::json!(a.records));
    run.extra
        .insert("records_stored".into(), serde_json::json!(stored));
    run.extra.insert(
        "server_bytes_before".into(),
        serde_json::json!(before.server_bytes),
    );
    run.extra.insert(
        "server_bytes_after".into(),
        serde_json::json!(after.server_bytes),
    );
    run.extra.insert(
        "server_bytes_per_record".into(),
        serde_json::json!(server_pr),
    );
    run.extra
        .insert("rss_before".into(), serde_json::json!(before.rss));
    run.extra
        .insert("rss_after".into(), serde_json::json!(after.rss));
    run.extra
        .insert("rss_bytes_per_record".into(), serde_json::json!(rss_pr));
    run.extra.insert("evictions".into(), serde_json::json!(ev));
    if let Some(s) = stored {
        if s < a.records {
            notes.push(format!(
                "{} round {round}: only {s} of {} records are stored{}",
                t.name,
                a.records,
                match ev {
                    Some(e) if e > 0 =>
                        format!(" ({e} evicted: the server's memory limit is below the data)"),
                    _ => String::new(),
                }
            ));
        }
    }
    if run.errors > 0 {
        notes.push(format!(
            "{} round {round}: {} inserts failed",
            t.name, run.errors
        ));
    }
    ctx.say(&format!(
        "{}: {} records, {} stored, server {} B/record, RSS {} B/record",
        t.name,
        a.records,
        stored.map_or("?".into(), |s| s.to_string()),
        server_pr.map_or("?".into(), |v| format!("{v:.0}")),
        rss_pr.map_or("?".into(), |v| format!("{v:.0}")),
    ));
    Ok(Record {
        run,
        merged: Some(out.merged),
    })
}

/// The memory table (Markdown).
pub fn memory_table(runs: &[Run]) -> String {
    let mut s = String::from(
        "| target | round | records | stored | server B/record | RSS B/record | server bytes after | RSS after | evictions |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let f = |r: &Run, k: &str| -> String {
        match r.extra.get(k) {
            Some(serde_json::Value::Number(n)) => {
                crate::report::thousands(n.as_f64().unwrap_or(0.0))
            }
            _ => "-".into(),
        }
    };
    for r in runs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.target,
            r.round,
            f(r, "records"),
            f(r, "records_stored"),
            f(r, "server_bytes_per_record"),
            f(r, "rss_bytes_per_record"),
            f(r, "server_bytes_after"),
            f(r, "rss_after"),
            f(r, "evictions"),
        );
    }
    s
}

pub fn command(a: MemoryCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    if a.records == 0 || a.threads == 0 {
        return Err("--records and --threads must be at least 1".into());
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
    w.recordcount = a.records;
    let started = sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    let seed = runner::seed_base(&ctx);
    let mut records = Vec::new();
    let mut notes = Vec::new();
    for round in 1..=ctx.rounds {
        for t in &ctx.targets {
            records.push(measure(&ctx, t, &w, &a, round, seed, &mut notes)?);
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
        "records": a.records,
        "threads": a.threads,
        "workload": w,
        "rounds": ctx.rounds,
        "flush": !a.no_flush,
        "server_bytes_source": "RESP: INFO memory used_memory; memcached: stats bytes",
        "rss_source": "/proc/<pid>/status VmRSS",
    });
    let rep = runner::finish(&ctx, "memory", infos, config, &records, notes, started)?;
    println!();
    print!("{}", memory_table(&rep.runs));
    if let Some(prefix) = &ctx.chart {
        let num = |r: &Run, k: &str| r.extra.get(k).and_then(|v| v.as_f64());
        let left: Vec<crate::chart::Series> = rep
            .runs
            .iter()
            .filter(|r| r.round == 1)
            .enumerate()
            .map(|(g, r)| crate::chart::Series {
                name: r.target.clone(),
                group: g,
                values: vec![
                    num(r, "server_bytes_per_record"),
                    num(r, "rss_bytes_per_record"),
                ],
            })
            .collect();
        crate::chart::init_font(ctx.font.as_deref())?;
        let files = crate::chart::category_chart(
            &crate::chart::with_suffix(prefix, "memory"),
            &format!("Memory per YCSB record ({} records)", a.records),
            "",
            &["server's own count".to_string(), "process RSS".to_string()],
            "bytes per record",
            &left,
            "",
            &[],
        )?;
        report_files(&ctx, &files);
    }
    Ok(())
}
