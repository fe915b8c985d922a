//! The report: every run's figures, a summary per phase × threads × target
//! × operation (median throughput over rounds, latency from the merged
//! histograms, ratio against the first target), the text table, and the
//! JSON file (schema [`SCHEMA`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::{latency, median, new_hist, rate, Latency, Merged};
use crate::sys::Machine;
use crate::target::Protocol;

/// Identifies the JSON layout; bumped on any incompatible change.
pub const SCHEMA: &str = "cairn-bench/1";

/// The whole JSON document.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub schema: String,
    pub tool: String,
    pub subcommand: String,
    pub command_line: Vec<String>,
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
    pub started_unix: f64,
    pub finished_unix: f64,
    pub machine: Machine,
    pub targets: Vec<TargetInfo>,
    /// The subcommand's parameters after defaults were applied.
    pub config: serde_json::Value,
    pub runs: Vec<Run>,
    pub summary: Vec<SummaryRow>,
    /// Warnings worth keeping with the figures (evictions, refusals...).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TargetInfo {
    pub name: String,
    pub url: String,
    pub protocol: Protocol,
    pub server_version: Option<String>,
    pub pid: Option<u32>,
    pub pid_source: Option<String>,
}

/// One measured run: one target, one phase, one thread count, one round.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Run {
    pub target: String,
    pub phase: String,
    pub round: u32,
    pub threads: u32,
    pub started_unix: f64,
    pub duration_s: f64,
    /// Successful operations (errors are never counted here).
    pub ops: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub ops_per_sec: f64,
    /// What `units` counts: "ops", "keys" or "bytes".
    pub unit: String,
    pub units: u64,
    pub units_per_sec: f64,
    pub per_op: Vec<OpReport>,
    /// Successful units completed in each whole second of the run.
    pub timeline: Vec<u64>,
    pub server_cpu: Option<ServerCpu>,
    /// Subcommand-specific figures (memory, value sizes, ...).
    pub extra: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OpReport {
    pub op: String,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub latency: Latency,
    pub errors: BTreeMap<String, u64>,
    pub error_samples: BTreeMap<String, String>,
}

/// Server CPU over a run, from /proc/<pid>/stat utime + stime.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerCpu {
    pub pid: u32,
    pub cpu_seconds: f64,
    /// CPU microseconds per successful operation.
    pub us_per_op: Option<f64>,
    /// CPU time over wall time, in percent of one core.
    pub percent: f64,
}

/// One line of the final table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SummaryRow {
    pub phase: String,
    pub threads: u32,
    pub target: String,
    /// An operation type, or "ALL" for the run as a whole.
    pub op: String,
    pub rounds: u32,
    /// Median over rounds.
    pub ops_per_sec: f64,
    /// `ops_per_sec` over the first target's, same phase, threads and op.
    pub ratio: Option<f64>,
    pub unit: String,
    /// Median over rounds.
    pub units_per_sec: f64,
    /// From the histograms of all rounds merged.
    pub latency: Latency,
    pub errors: u64,
    /// Errors by kind (timeout, refused, missing, wrong_value, ...).
    pub error_kinds: BTreeMap<String, u64>,
    pub timeouts: u64,
    /// Median over rounds.
    pub cpu_us_per_op: Option<f64>,
    /// Latency of the probe clients' PINGs while this op ran (`values
    /// --probe`): how long other clients waited on the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
}

/// Probe latencies: the worst and the 99th percentile over all rounds
/// (the worst round's figure), and how many probes were answered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    pub p99_us: f64,
    pub max_us: f64,
    pub samples: u64,
}

impl Probe {
    /// The probe figures a run recorded for `op` in its `extra` map
    /// (`<op>_probe_p99_us`, `<op>_probe_max_us`, `<op>_probe_samples`).
    fn from_run(r: &Run, op: &str) -> Option<Probe> {
        let op = op.to_ascii_lowercase();
        let f = |k: &str| r.extra.get(&format!("{op}_probe_{k}"))?.as_f64();
        Some(Probe {
            p99_us: f("p99_us")?,
            max_us: f("max_us")?,
            samples: f("samples")? as u64,
        })
    }
}

/// Builds a [`Run`] from merged measurements.
#[allow(clippy::too_many_arguments)]
pub fn make_run(
    target: &str,
    phase: &str,
    round: u32,
    threads: u32,
    started_unix: f64,
    duration_s: f64,
    m: &Merged,
    unit: &str,
    server_cpu: Option<ServerCpu>,
) -> Run {
    let per_op: Vec<OpReport> = m
        .names
        .iter()
        .zip(&m.ops)
        .filter(|(_, o)| o.count() > 0 || o.error_count() > 0)
        .map(|(name, o)| OpReport {
            op: name.to_string(),
            ops: o.count(),
            ops_per_sec: rate(o.count(), duration_s),
            latency: latency(o.hist.as_ref()),
            errors: o.errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error_samples: o
                .samples
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        })
        .collect();
    let ops = m.ok_count();
    let units = m.units();
    Run {
        target: target.to_string(),
        phase: phase.to_string(),
        round,
        threads,
        started_unix,
        duration_s,
        ops,
        errors: m.error_count(),
        timeouts: m.timeout_count(),
        ops_per_sec: rate(ops, duration_s),
        unit: unit.to_string(),
        units,
        units_per_sec: rate(units, duration_s),
        per_op,
        timeline: m.timeline.clone(),
        server_cpu,
        extra: BTreeMap::new(),
    }
}

/// A run plus the histograms behind it (absent for figures taken from
/// another tool, e.g. redis-benchmark).
pub struct Record {
    pub run: Run,
    pub merged: Option<Merged>,
}

/// Groups runs by phase, threads and target (in first-seen phase order,
/// thread order, and `targets` order) and summarises each group.
pub fn summarize(records: &[Record], targets: &[String]) -> Vec<SummaryRow> {
    let mut phases: Vec<&str> = Vec::new();
    for r in records {
        if !phases.contains(&r.run.phase.as_str()) {
            phases.push(&r.run.phase);
        }
    }
    let mut target_order: Vec<&str> = targets.iter().map(|s| s.as_str()).collect();
    for r in records {
        if !target_order.contains(&r.run.target.as_str()) {
            target_order.push(&r.run.target);
        }
    }
    let mut rows = Vec::new();
    for phase in &phases {
        let mut threads: Vec<u32> = records
            .iter()
            .filter(|r| r.run.phase == *phase)
            .map(|r| r.run.threads)
            .collect();
        threads.sort_unstable();
        threads.dedup();
        for t in threads {
            let first = rows.len();
            for target in &target_order {
                let group: Vec<&Record> = records
                    .iter()
                    .filter(|r| {
                        r.run.phase == *phase && r.run.threads == t && r.run.target == *target
                    })
                    .collect();
                if group.is_empty() {
                    continue;
                }
                rows.extend(summarize_group(phase, t, target, &group));
            }
            // Ratios against the first target present in this block.
            let block = &mut rows[first..];
            let base_target = block.first().map(|r| r.target.clone());
            let bases: Vec<(String, f64)> = block
                .iter()
                .filter(|r| Some(&r.target) == base_target.as_ref())
                .map(|r| (r.op.clone(), r.ops_per_sec))
                .collect();
            for row in block.iter_mut() {
                row.ratio = bases
                    .iter()
                    .find(|(op, _)| *op == row.op)
                    .and_then(|(_, b)| (*b > 0.0).then(|| row.ops_per_sec / b));
            }
        }
    }
    rows
}

fn summarize_group(phase: &str, threads: u32, target: &str, group: &[&Record]) -> Vec<SummaryRow> {
    let rounds = group.len() as u32;
    let unit = group[0].run.unit.clone();
    let cpu: Vec<f64> = group
        .iter()
        .filter_map(|r| r.run.server_cpu.as_ref().and_then(|c| c.us_per_op))
        .collect();
    let mut all_hist = None;
    let mut op_names: Vec<String> = Vec::new();
    for r in group {
        for o in &r.run.per_op {
            if !op_names.contains(&o.op) {
                op_names.push(o.op.clone());
            }
        }
    }
    let have_hists = group.iter().all(|r| r.merged.is_some());
    let mut per_op_rows = Vec::new();
    for name in &op_names {
        let ops_rates: Vec<f64> = group
            .iter()
            .map(|r| {
                r.run
                    .per_op
                    .iter()
                    .find(|o| &o.op == name)
                    .map_or(0.0, |o| o.ops_per_sec)
            })
            .collect();
        let lat = if have_hists {
            let mut h = new_hist();
            for r in group {
                let m = r.merged.as_ref().expect("checked");
                if let Some(i) = m.names.iter().position(|n| n == name) {
                    if let Some(x) = &m.ops[i].hist {
                        h.add(x).expect("equal bounds");
                    }
                }
            }
            all_hist
                .get_or_insert_with(new_hist)
                .add(&h)
                .expect("equal bounds");
            latency(Some(&h))
        } else {
            median_latency(group.iter().filter_map(|r| {
                r.run
                    .per_op
                    .iter()
                    .find(|o| &o.op == name)
                    .map(|o| &o.latency)
            }))
        };
        let mut error_kinds: BTreeMap<String, u64> = BTreeMap::new();
        for o in group
            .iter()
            .filter_map(|r| r.run.per_op.iter().find(|o| &o.op == name))
        {
            for (k, v) in &o.errors {
                *error_kinds.entry(k.clone()).or_default() += v;
            }
        }
        let errors = error_kinds.values().sum();
        let timeouts = error_kinds.get("timeout").copied().unwrap_or(0);
        let probe = group
            .iter()
            .filter_map(|r| Probe::from_run(&r.run, name))
            .reduce(|a, b| Probe {
                p99_us: a.p99_us.max(b.p99_us),
                max_us: a.max_us.max(b.max_us),
                samples: a.samples + b.samples,
            });
        per_op_rows.push(SummaryRow {
            phase: phase.to_string(),
            threads,
            target: target.to_string(),
            op: name.clone(),
            rounds,
            ops_per_sec: median(&ops_rates).unwrap_or(0.0),
            ratio: None,
            unit: "ops".into(),
            units_per_sec: median(&ops_rates).unwrap_or(0.0),
            latency: lat,
            errors,
            error_kinds,
            timeouts,
            cpu_us_per_op: None,
            probe,
        });
    }
    let all_rates: Vec<f64> = group.iter().map(|r| r.run.ops_per_sec).collect();
    let unit_rates: Vec<f64> = group.iter().map(|r| r.run.units_per_sec).collect();
    let all_lat = match (&all_hist, have_hists) {
        (Some(h), true) => latency(Some(h)),
        _ if per_op_rows.len() == 1 => per_op_rows[0].latency.clone(),
        _ => Latency::default(),
    };
    let mut all_kinds: BTreeMap<String, u64> = BTreeMap::new();
    for row in &per_op_rows {
        for (k, v) in &row.error_kinds {
            *all_kinds.entry(k.clone()).or_default() += v;
        }
    }
    let all = SummaryRow {
        phase: phase.to_string(),
        threads,
        target: target.to_string(),
        op: "ALL".into(),
        rounds,
        ops_per_sec: median(&all_rates).unwrap_or(0.0),
        ratio: None,
        unit,
        units_per_sec: median(&unit_rates).unwrap_or(0.0),
        latency: all_lat,
        errors: group.iter().map(|r| r.run.errors).sum(),
        error_kinds: all_kinds,
        timeouts: group.iter().map(|r| r.run.timeouts).sum(),
        cpu_us_per_op: median(&cpu),
        probe: per_op_rows
            .iter()
            .filter_map(|r| r.probe.clone())
            .reduce(|a, b| Probe {
                p99_us: a.p99_us.max(b.p99_us),
                max_us: a.max_us.max(b.max_us),
                samples: a.samples + b.samples,
            }),
    };
    let mut out = vec![all];
    // A run with a single operation type needs no separate per-op line.
    if per_op_rows.len() > 1 {
        out.extend(per_op_rows);
    } else if let Some(only) = per_op_rows.pop() {
        out[0].op = only.op;
    }
    out
}

fn median_latency<'a>(it: impl Iterator<Item = &'a Latency>) -> Latency {
    let v: Vec<&Latency> = it.collect();
    let m =
        |f: fn(&Latency) -> f64| median(&v.iter().map(|l| f(l)).collect::<Vec<_>>()).unwrap_or(0.0);
    Latency {
        count: v.iter().map(|l| l.count).sum(),
        mean_us: m(|l| l.mean_us),
        min_us: m(|l| l.min_us),
        p50_us: m(|l| l.p50_us),
        p95_us: m(|l| l.p95_us),
        p99_us: m(|l| l.p99_us),
        p999_us: m(|l| l.p999_us),
        max_us: m(|l| l.max_us),
    }
}

/// Formats a number with thousands separators.
pub fn thousands(v: f64) -> String {
    let n = v.round() as i64;
    let s = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Formats microseconds: one decimal below 1000, none above.
pub fn micros(v: f64) -> String {
    if v == 0.0 {
        "-".into()
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        thousands(v)
    }
}

/// The final table, as Markdown (it pastes straight into BENCHMARKS.md).
pub fn render_table(rows: &[SummaryRow]) -> String {
    let show_units = rows.iter().any(|r| r.op == "ALL" && r.unit != "ops")
        || rows.iter().any(|r| r.unit != "ops");
    let unit_name = rows
        .iter()
        .find(|r| r.unit != "ops")
        .map(|r| r.unit.clone())
        .unwrap_or_default();
    let mut header = vec![
        "phase".to_string(),
        "threads".into(),
        "target".into(),
        "op".into(),
        "ops/s".into(),
    ];
    if show_units {
        header.push(format!("{unit_name}/s"));
    }
    header.extend(
        [
            "ratio",
            "p50 µs",
            "p95 µs",
            "p99 µs",
            "p99.9 µs",
            "max µs",
            "errors",
            "timeouts",
            "CPU µs/op",
        ]
        .map(String::from),
    );
    let show_probe = rows.iter().any(|r| r.probe.is_some());
    if show_probe {
        header.extend(["probe p99 µs", "probe max µs"].map(String::from));
    }
    let mut lines: Vec<Vec<String>> = vec![header];
    for r in rows {
        let mut l = vec![
            r.phase.clone(),
            r.threads.to_string(),
            r.target.clone(),
            r.op.clone(),
            thousands(r.ops_per_sec),
        ];
        if show_units {
            l.push(if r.unit != "ops" {
                thousands(r.units_per_sec)
            } else {
                String::new()
            });
        }
        l.push(r.ratio.map(|x| format!("{x:.2}")).unwrap_or_default());
        for v in [
            r.latency.p50_us,
            r.latency.p95_us,
            r.latency.p99_us,
            r.latency.p999_us,
            r.latency.max_us,
        ] {
            l.push(micros(v));
        }
        l.push(errors_cell(r));
        l.push(r.timeouts.to_string());
        l.push(
            r.cpu_us_per_op
                .map(|c| format!("{c:.2}"))
                .unwrap_or_default(),
        );
        if show_probe {
            match &r.probe {
                Some(p) => {
                    l.push(micros(p.p99_us));
                    l.push(micros(p.max_us));
                }
                None => l.extend([String::new(), String::new()]),
            }
        }
        lines.push(l);
    }
    let cols = lines[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push('|');
        for (c, cell) in l.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            // Text columns left-aligned, figures right-aligned.
            if c < 4 {
                let _ = write!(out, " {cell}{} |", " ".repeat(pad));
            } else {
                let _ = write!(out, " {}{cell} |", " ".repeat(pad));
            }
        }
        out.push('\n');
        if i == 0 {
            out.push('|');
            for (c, w) in widths.iter().enumerate() {
                if c < 4 {
                    let _ = write!(out, "{}|", "-".repeat(w + 2));
                } else {
                    let _ = write!(out, "{}:|", "-".repeat(w + 1));
                }
            }
            out.push('\n');
        }
    }
    out
}

/// The errors count, with the kinds other than time-outs (which have their
/// own column) spelled out: "3 (refused 2, missing 1)".
fn errors_cell(r: &SummaryRow) -> String {
    let kinds: Vec<String> = r
        .error_kinds
        .iter()
        .filter(|(k, v)| k.as_str() != "timeout" && **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    if kinds.is_empty() {
        r.errors.to_string()
    } else {
        format!("{} ({})", r.errors, kinds.join(", "))
    }
}

/// Checks a parsed report for internal consistency (used by the tests and
/// by `cairn-bench check-json`): schema tag, every run's target listed,
/// rates equal counts over durations, percentiles ordered.
pub fn validate(r: &Report) -> Result<(), String> {
    if r.schema != SCHEMA {
        return Err(format!("schema {:?}, expected {SCHEMA:?}", r.schema));
    }
    if r.command_line.is_empty() {
        return Err("empty command_line".into());
    }
    if r.machine.cores == 0 {
        return Err("machine.cores is 0".into());
    }
    let names: Vec<&str> = r.targets.iter().map(|t| t.name.as_str()).collect();
    for run in &r.runs {
        if !names.contains(&run.target.as_str()) {
            return Err(format!("run for unknown target {:?}", run.target));
        }
        if run.duration_s < 0.0 || !run.duration_s.is_finite() {
            return Err(format!("bad duration {}", run.duration_s));
        }
        let want = rate(run.ops, run.duration_s);
        if (run.ops_per_sec - want).abs() > 1e-6 * want.max(1.0) {
            return Err(format!(
                "{} {}: ops_per_sec {} != ops / duration {}",
                run.target, run.phase, run.ops_per_sec, want
            ));
        }
        let per_op_ops: u64 = run.per_op.iter().map(|o| o.ops).sum();
        if per_op_ops != run.ops {
            return Err(format!(
                "{} {}: per-op counts {per_op_ops} != ops {}",
                run.target, run.phase, run.ops
            ));
        }
        let per_op_err: u64 = run.per_op.iter().flat_map(|o| o.errors.values()).sum();
        if per_op_err != run.errors {
            return Err(format!(
                "{} {}: per-op errors disagree",
                run.target, run.phase
            ));
        }
        for o in &run.per_op {
            check_latency(&o.latency)
                .map_err(|e| format!("{} {} {}: {e}", run.target, run.phase, o.op))?;
        }
    }
    for row in &r.summary {
        if row.error_kinds.values().sum::<u64>() != row.errors {
            return Err(format!(
                "summary {} {}: error kinds do not add up",
                row.target, row.op
            ));
        }
        check_latency(&row.latency)
            .map_err(|e| format!("summary {} {}: {e}", row.target, row.op))?;
    }
    Ok(())
}

fn check_latency(l: &Latency) -> Result<(), String> {
    if l.count == 0 {
        return Ok(());
    }
    // 0 means "not measured" (redis-benchmark reports no p99.9).
    let v: Vec<f64> = [l.min_us, l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us]
        .into_iter()
        .filter(|x| *x != 0.0)
        .collect();
    if v.windows(2).any(|w| w[0] > w[1] * 1.001 + 1e-9) {
        return Err(format!("percentiles out of order: {v:?}"));
    }
    if v.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return Err("negative or non-finite latency".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Progress, Recorder};
    use std::time::Duration;

    const NAMES: &[&str] = &["READ", "UPDATE"];

    fn record(target: &str, round: u32, reads: u64, read_us: u64, secs: f64) -> Record {
        let p = Progress::new(1);
        let mut r = Recorder::new(NAMES, p, 0);
        let s = r.start;
        for _ in 0..reads {
            r.ok(0, Duration::from_micros(read_us), 1, 1, s);
            r.ok(1, Duration::from_micros(read_us * 2), 1, 1, s);
        }
        let mut m = Merged::new(NAMES);
        m.add_recorder(&r, 0);
        let run = make_run(target, "run", round, 8, 0.0, secs, &m, "ops", None);
        Record {
            run,
            merged: Some(m),
        }
    }

    #[test]
    fn summary_medians_ratios_and_merged_latency() {
        let recs = vec![
            record("a", 1, 100, 10, 1.0),
            record("b", 1, 300, 20, 1.0),
            record("a", 2, 200, 10, 1.0),
            record("b", 2, 100, 20, 1.0),
            record("a", 3, 150, 10, 1.0),
            record("b", 3, 200, 20, 1.0),
        ];
        let rows = summarize(&recs, &["a".into(), "b".into()]);
        // Per target: ALL + READ + UPDATE.
        assert_eq!(rows.len(), 6);
        let all_a = &rows[0];
        assert_eq!((all_a.target.as_str(), all_a.op.as_str()), ("a", "ALL"));
        // a: 200, 400, 300 ops/s over rounds → median 300.
        assert_eq!(all_a.ops_per_sec, 300.0);
        assert_eq!(all_a.ratio, Some(1.0));
        assert_eq!(all_a.rounds, 3);
        let all_b = rows
            .iter()
            .find(|r| r.target == "b" && r.op == "ALL")
            .unwrap();
        // b: 600, 200, 400 → 400; ratio 400 / 300.
        assert_eq!(all_b.ops_per_sec, 400.0);
        assert!((all_b.ratio.unwrap() - 4.0 / 3.0).abs() < 1e-12);
        let read_b = rows
            .iter()
            .find(|r| r.target == "b" && r.op == "READ")
            .unwrap();
        assert_eq!(read_b.latency.count, 600);
        assert!((read_b.latency.p50_us - 20.0).abs() < 0.05);
        let upd_a = rows
            .iter()
            .find(|r| r.target == "a" && r.op == "UPDATE")
            .unwrap();
        assert!((upd_a.latency.p99_us - 20.0).abs() < 0.05);
        let table = render_table(&rows);
        assert!(table.contains("| run "));
        assert_eq!(table.lines().count(), 2 + rows.len());
        assert!(table.contains("1.33"));
    }

    #[test]
    fn formatting() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-1000.0), "-1,000");
        assert_eq!(micros(12.345), "12.3");
        assert_eq!(micros(12345.0), "12,345");
        assert_eq!(micros(0.0), "-");
    }

    fn sample_report() -> Report {
        let recs = vec![record("a", 1, 10, 10, 0.5)];
        let rows = summarize(&recs, &["a".into()]);
        Report {
            schema: SCHEMA.into(),
            tool: "cairn-bench test".into(),
            subcommand: "ycsb".into(),
            command_line: vec!["cairn-bench".into(), "ycsb".into()],
            git_commit: None,
            git_dirty: None,
            started_unix: 1.0,
            finished_unix: 2.0,
            machine: crate::sys::machine(None),
            targets: vec![TargetInfo {
                name: "a".into(),
                url: "redis://127.0.0.1:1".into(),
                protocol: Protocol::Redis,
                server_version: None,
                pid: None,
                pid_source: None,
            }],
            config: serde_json::json!({"workload": "a"}),
            runs: recs.into_iter().map(|r| r.run).collect(),
            summary: rows,
            notes: vec![],
        }
    }

    #[test]
    fn json_schema_round_trip_and_validation() {
        let r = sample_report();
        validate(&r).unwrap();
        let text = serde_json::to_string_pretty(&r).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        // The fields a reader relies on, with their JSON types.
        for key in [
            "schema",
            "tool",
            "subcommand",
            "command_line",
            "git_commit",
            "machine",
            "targets",
            "config",
            "runs",
            "summary",
            "notes",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert!(v["machine"]["cores"].is_u64());
        let run = &v["runs"][0];
        for key in [
            "target",
            "phase",
            "round",
            "threads",
            "ops",
            "ops_per_sec",
            "errors",
            "timeouts",
            "per_op",
            "timeline",
        ] {
            assert!(run.get(key).is_some(), "run missing {key}");
        }
        let lat = &run["per_op"][0]["latency"];
        for key in ["p50_us", "p95_us", "p99_us", "p999_us", "max_us"] {
            assert!(lat[key].is_f64(), "latency.{key}");
        }
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.runs, r.runs);
        assert_eq!(back.summary, r.summary);
        // Unknown fields are rejected: the schema is closed.
        let mut bad = v.clone();
        bad["runs"][0]["surprise"] = serde_json::json!(1);
        assert!(serde_json::from_value::<Report>(bad).is_err());
        // Inconsistent figures are caught.
        let mut wrong = r.clone();
        wrong.runs[0].ops_per_sec *= 2.0;
        assert!(validate(&wrong).is_err());
        let mut wrong = r.clone();
        wrong.schema = "other".into();
        assert!(validate(&wrong).is_err());
        let mut wrong = r;
        wrong.runs[0].per_op[0].latency.p50_us = wrong.runs[0].per_op[0].latency.max_us * 2.0;
        assert!(validate(&wrong).is_err());
    }
}
