//! Running N client threads against one target: connection set-up before a
//! start barrier, per-thread recorders merged afterwards, server CPU from
//! /proc around the run, a live progress line on a terminal, and the
//! finishing steps shared by every subcommand (table, JSON, charts).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::report::{self, Record, Report, ServerCpu, TargetInfo};
use crate::stats::{Merged, Progress, Recorder};
use crate::sys;
use crate::target::{Conn, Target};

/// Options every subcommand shares.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub targets: Vec<Target>,
    pub rounds: u32,
    pub timeout: Duration,
    pub target_rate: Option<f64>,
    pub json: Option<PathBuf>,
    pub chart: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub quiet: bool,
    pub font: Option<PathBuf>,
    pub seed: Option<u64>,
}

impl Ctx {
    /// Live output goes to stderr only when it is a terminal.
    pub fn live(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }

    /// A note on stderr (suppressed by --quiet).
    pub fn say(&self, msg: &str) {
        if !self.quiet {
            eprintln!("{msg}");
        }
    }
}

/// What a thread gets: its index, and `ready()` to call once connected,
/// which waits for every other thread and starts the clock.
pub struct Start<'a> {
    barrier: &'a Barrier,
    waited: bool,
}

impl Start<'_> {
    pub fn ready(&mut self, rec: &mut Recorder) {
        if !self.waited {
            self.waited = true;
            self.barrier.wait();
            rec.start_now();
        }
    }
}

/// The outcome of [`run_threads`].
pub struct Outcome {
    pub merged: Merged,
    pub duration_s: f64,
    pub started_unix: f64,
    pub server_cpu: Option<ServerCpu>,
}

/// Runs `threads` client threads. Each calls `f(i, start, rec)`, which
/// connects, calls `start.ready(rec)`, then works and records. The run's
/// duration is from the common start to the last thread's end.
pub fn run_threads<F>(
    ctx: &Ctx,
    target: &Target,
    label: &str,
    threads: usize,
    total: Option<u64>,
    names: &'static [&'static str],
    f: F,
) -> Outcome
where
    F: Fn(usize, &mut Start, &mut Recorder) + Sync,
{
    let progress = Progress::new(threads);
    let barrier = Barrier::new(threads + 1);
    let bar = progress_bar(ctx, label, total);
    let (recs, start, end, started_unix, cpu0) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let progress = progress.clone();
                let barrier = &barrier;
                let f = &f;
                std::thread::Builder::new()
                    .name(format!("client-{i}"))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || {
                        let mut rec = Recorder::new(names, progress, i);
                        let mut st = Start {
                            barrier,
                            waited: false,
                        };
                        f(i, &mut st, &mut rec);
                        // A thread that failed before ready() must still
                        // release the others.
                        if !st.waited {
                            barrier.wait();
                        }
                        (rec, Instant::now())
                    })
                    .expect("spawn client thread")
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let started_unix = sys::unix_now();
        let cpu0 = target.pid.and_then(sys::cpu_ticks);
        let mut last = (Instant::now(), 0u64);
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(if bar.is_some() { 200 } else { 20 }));
            if let Some(b) = &bar {
                let now = Instant::now();
                let done = progress.done();
                let dt = now.duration_since(last.0).as_secs_f64();
                let rate = if dt > 0.0 {
                    (done - last.1.min(done)) as f64 / dt
                } else {
                    0.0
                };
                last = (now, done);
                b.set_position(done);
                b.set_message(format!(
                    "{} ops/s, {} errors",
                    report::thousands(rate),
                    progress.errors()
                ));
            }
        }
        let mut recs = Vec::with_capacity(threads);
        let mut end = start;
        for h in handles {
            match h.join() {
                Ok((r, e)) => {
                    end = end.max(e);
                    recs.push(r);
                }
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        (recs, start, end, started_unix, cpu0)
    });
    let cpu1 = target.pid.and_then(sys::cpu_ticks);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let duration_s = end.duration_since(start).as_secs_f64();
    let mut merged = Merged::new(names);
    for r in &recs {
        // Thread clocks start within microseconds of each other; align the
        // per-second buckets on whole seconds from the common start.
        let offset = r.start.saturating_duration_since(start).as_secs() as usize;
        merged.add_recorder(r, offset);
    }
    let server_cpu = match (target.pid, cpu0, cpu1) {
        (Some(pid), Some(a), Some(b)) => {
            let tck = sys::clk_tck();
            let secs = b.saturating_sub(a) as f64 / tck as f64;
            Some(ServerCpu {
                pid,
                cpu_seconds: secs,
                us_per_op: crate::stats::cpu_us_per_op(b.saturating_sub(a), tck, merged.ok_count()),
                percent: if duration_s > 0.0 {
                    secs / duration_s * 100.0
                } else {
                    0.0
                },
            })
        }
        _ => None,
    };
    Outcome {
        merged,
        duration_s,
        started_unix,
        server_cpu,
    }
}

fn progress_bar(ctx: &Ctx, label: &str, total: Option<u64>) -> Option<ProgressBar> {
    if !ctx.live() {
        return None;
    }
    let bar = match total {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    let style = if total.is_some() {
        "{prefix} {elapsed} {bar:16} {pos}/{len} ETA {eta} {wide_msg}"
    } else {
        "{prefix} {elapsed} {spinner} {pos} {wide_msg}"
    };
    bar.set_style(
        ProgressStyle::with_template(style).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(label.to_string());
    Some(bar)
}

/// Paces one thread to `rate` operations per second (`--target-rate` split
/// over the threads), as YCSB's throttle does: operation n starts no
/// earlier than start + n / rate.
pub struct Throttle {
    start: Instant,
    interval: Option<Duration>,
    n: u32,
}

impl Throttle {
    pub fn new(total_rate: Option<f64>, threads: usize) -> Throttle {
        let interval = total_rate
            .filter(|r| *r > 0.0)
            .map(|r| Duration::from_secs_f64(threads as f64 / r));
        Throttle {
            start: Instant::now(),
            interval,
            n: 0,
        }
    }

    pub fn restart(&mut self) {
        self.start = Instant::now();
        self.n = 0;
    }

    #[inline]
    pub fn wait(&mut self) {
        if let Some(iv) = self.interval {
            let due = self.start + iv * self.n;
            self.n = self.n.wrapping_add(1);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    }
}

/// Finds each target's pid (from `--pid`, else by its port when it is on
/// this machine) and checks every target answers; returns the targets'
/// report entries.
pub fn prepare_targets(ctx: &mut Ctx, pids: &[(String, u32)]) -> Result<Vec<TargetInfo>, String> {
    let mut infos = Vec::new();
    for t in ctx.targets.iter_mut() {
        if let Some((_, pid)) = pids.iter().find(|(n, _)| *n == t.name) {
            t.pid = Some(*pid);
            t.pid_source = Some("flag");
        } else if t.is_local() {
            if let Some(pid) = sys::pid_listening_on(t.ip(), t.port) {
                t.pid = Some(pid);
                t.pid_source = Some("port");
            }
        }
        let mut c = Conn::open(t, ctx.timeout.max(Duration::from_secs(2)))
            .map_err(|e| format!("target {} ({}): cannot connect: {e}", t.name, t.url))?;
        let version = c
            .server_version()
            .map_err(|e| format!("target {} ({}): {e}", t.name, t.url))?;
        infos.push(TargetInfo {
            name: t.name.clone(),
            url: t.url.clone(),
            protocol: t.protocol,
            server_version: Some(version),
            pid: t.pid,
            pid_source: t.pid_source.map(String::from),
        });
    }
    for p in pids {
        if !ctx.targets.iter().any(|t| t.name == p.0) {
            return Err(format!("--pid {}={}: no target named {}", p.0, p.1, p.0));
        }
    }
    Ok(infos)
}

/// Prints the table, writes the JSON; returns the report.
pub fn finish(
    ctx: &Ctx,
    subcommand: &str,
    infos: Vec<TargetInfo>,
    config: serde_json::Value,
    records: &[Record],
    notes: Vec<String>,
    started_unix: f64,
) -> Result<Report, String> {
    // Summary order (and the ratio base) follows the report's target list.
    let names: Vec<String> = infos.iter().map(|t| t.name.clone()).collect();
    let summary = report::summarize(records, &names);
    let (git_commit, git_dirty) = sys::git_commit();
    let rep = Report {
        schema: report::SCHEMA.to_string(),
        tool: format!("cairn-bench {}", env!("CARGO_PKG_VERSION")),
        subcommand: subcommand.to_string(),
        command_line: std::env::args().collect(),
        git_commit,
        git_dirty,
        started_unix,
        finished_unix: sys::unix_now(),
        machine: sys::machine(ctx.data_dir.as_deref()),
        targets: infos,
        config,
        runs: records.iter().map(|r| r.run.clone()).collect(),
        summary,
        notes,
    };
    print!("{}", report::render_table(&rep.summary));
    for n in &rep.notes {
        println!("note: {n}");
    }
    if let Some(path) = &ctx.json {
        let text = serde_json::to_string_pretty(&rep).map_err(|e| format!("json: {e}"))?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        ctx.say(&format!("wrote {}", path.display()));
    }
    Ok(rep)
}

/// Connects, retrying once (a server under overload may drop a connect).
pub fn connect(t: &Target, timeout: Duration) -> Result<Conn, crate::wire::OpError> {
    match Conn::open(t, timeout) {
        Ok(c) => Ok(c),
        Err(_) => {
            std::thread::sleep(Duration::from_millis(50));
            Conn::open(t, timeout)
        }
    }
}

/// A shared seed base so runs can be repeated (`--seed`), else random.
pub fn seed_base(ctx: &Ctx) -> u64 {
    ctx.seed.unwrap_or_else(rand::random)
}

/// A deterministic per-thread seed.
pub fn thread_seed(base: u64, round: u32, thread: usize) -> u64 {
    crate::gen::fnvhash64((base ^ ((round as u64) << 32) ^ thread as u64) as i64) as u64
        ^ base.rotate_left(17)
}
