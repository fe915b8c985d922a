//! Command-line interface and the glue from arguments to runs, tables,
//! JSON and charts.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::chart::{self, Series};
use crate::report::{Report, SummaryRow};
use crate::runner::{self, Ctx};
use crate::target::parse_target;

#[derive(Parser, Debug)]
#[command(
    name = "cairn-bench",
    version,
    about = "Benchmark client for RESP (Redis, Cairn) and memcached servers: YCSB, memory per record, large values, MSET/MGET batches, redis-benchmark-style GET/SET",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// YCSB core workloads A-F: load phase, then run phase per thread count.
    Ycsb(YcsbCmd),
    /// Bytes per YCSB record, from INFO memory / stats and the process RSS.
    Memory(MemoryCmd),
    /// E3: SET then GET of large values, every byte verified.
    Values(ValuesCmd),
    /// E4: MSET/MGET of N keys per call, sequential and random order.
    Batch(BatchCmd),
    /// E5: inserts/s per 1% of a load growing to N x maxmemory, memory
    /// and disk per record, last tenth over first.
    LoadCurve(LoadCurveCmd),
    /// GET/SET as redis-benchmark does them (-c, -P, -n, -r, -d).
    GetSet(GetSetCmd),
    /// Hit ratio of a zipfian GET / SET-on-miss cache workload under
    /// maxmemory, per eviction policy (issue 5).
    #[command(name = "hitratio")]
    HitRatio(HitRatioCmd),
    /// New connections per second: connect, PING, close, in a loop per
    /// thread (with rediss://, a full TLS handshake each time).
    ConnRate(ConnRateCmd),
    /// The real-text corpus of `batch --real-text` and `load-curve
    /// --string-values`: its files, words and fingerprint, and how its
    /// values code under the server's coders (zstd, LZ4 fast and HC).
    Corpus(CorpusCmd),
    /// Checks a JSON report file against the schema.
    CheckJson {
        /// The report to check.
        file: PathBuf,
    },
}

/// Options shared by every benchmark.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// A server to measure, NAME=URL (redis://host:port[/db],
    /// redis://:password@host:port, rediss://... for TLS,
    /// memcached://host:port). Repeat for several; ratios are against the
    /// first.
    #[arg(long = "target", value_name = "NAME=URL", required = true)]
    pub targets: Vec<String>,
    /// rediss:// targets: the CA certificate (PEM) their certificates are
    /// checked against.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// rediss:// targets: the client certificate (PEM) to present.
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// rediss:// targets: the client certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The process of target NAME, for CPU and memory figures (default:
    /// found through the listening port when the server is local).
    #[arg(long = "pid", value_name = "NAME=PID")]
    pub pids: Vec<String>,
    /// Rounds; each round runs every target in turn (A, B, A, B, ...).
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Client time-out in seconds; expiries count as errors.
    #[arg(long, default_value_t = 1.0)]
    pub timeout: f64,
    /// Total operations per second to aim for (split over the threads).
    #[arg(long)]
    pub target_rate: Option<f64>,
    /// Write every figure, the machine and the command line to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write charts as PREFIX-<name>.svg and .png.
    #[arg(long, value_name = "PREFIX")]
    pub chart: Option<PathBuf>,
    /// A server data directory whose file system the report records.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// No progress or notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// TrueType font for the charts (default: a system font).
    #[arg(long)]
    pub font: Option<PathBuf>,
    /// Seed for the random generators (default: random).
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Args, Debug)]
pub struct YcsbCmd {
    #[command(flatten)]
    pub common: Common,
    /// a-f (YCSB's workloada..f) or a YCSB workload file.
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// A workload property, as YCSB's -p (e.g. -p fieldlength=100).
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    pub props: Vec<String>,
    /// recordcount.
    #[arg(long)]
    pub records: Option<u64>,
    /// operationcount (per run).
    #[arg(long)]
    pub operations: Option<u64>,
    /// Client threads per run, a comma-separated sweep.
    #[arg(long, default_value = "8")]
    pub threads: String,
    /// Threads of the load phase (default: the first of --threads).
    #[arg(long)]
    pub load_threads: Option<usize>,
    /// Do not load (the records are there already).
    #[arg(long)]
    pub skip_load: bool,
    /// Do not empty the targets (FLUSHALL / flush_all) before loading.
    #[arg(long)]
    pub no_flush: bool,
    /// Stop each run after this many seconds (YCSB's maxexecutiontime).
    #[arg(long)]
    pub max_time: Option<f64>,
    /// Connections (YCSB threads) one OS thread drives, in waves: it
    /// sends one operation on each, then reads their replies. 1 (the
    /// default) is YCSB's one thread per client; more leaves a small
    /// machine's cores to the servers.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub conns_per_thread: u64,
}

#[derive(Args, Debug)]
pub struct MemoryCmd {
    #[command(flatten)]
    pub common: Common,
    /// Records to load.
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// Loading threads.
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    /// Workload whose record layout to use (a-f or a file).
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// A workload property (fieldcount, fieldlength, ...).
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    pub props: Vec<String>,
    /// Do not empty the targets before loading.
    #[arg(long)]
    pub no_flush: bool,
}

#[derive(Args, Debug)]
pub struct HitRatioCmd {
    #[command(flatten)]
    pub common: Common,
    /// Distinct keys (`hr:` and ten digits) the GETs are drawn from.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Bytes of the value SET on a miss.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Zipfian skew (YCSB's zipfian constant).
    #[arg(long, default_value_t = 0.99)]
    pub theta: f64,
    /// maxmemory as a fraction of the data size on the first target.
    #[arg(long, default_value_t = 0.10)]
    pub fraction: f64,
    /// maxmemory in bytes (K, M, G accepted), instead of --fraction.
    #[arg(long, value_parser = parse_size)]
    pub maxmemory: Option<usize>,
    /// A maxmemory-policy to run (repeat for several; default
    /// allkeys-lru and allkeys-lfu).
    #[arg(long = "policy", value_name = "POLICY")]
    pub policies: Vec<String>,
    /// GETs before measuring (the cache fills itself on misses).
    #[arg(long, default_value_t = 1_000_000)]
    pub warmup: u64,
    /// GETs measured.
    #[arg(long, default_value_t = 2_000_000)]
    pub ops: u64,
    /// Commands per pipeline.
    #[arg(long, default_value_t = 64)]
    pub pipeline: usize,
}

#[derive(Args, Debug)]
pub struct ValuesCmd {
    #[command(flatten)]
    pub common: Common,
    /// Value sizes (K = 1024, M = 1024 K).
    #[arg(long, default_value = "4K,72K,144K,2.12M")]
    pub sizes: String,
    /// Iteration counts: for each, that many SETs then as many GETs.
    #[arg(long, default_value = "1,10,100,500")]
    pub iterations: String,
    /// Client threads (each does every iteration on its own keys).
    #[arg(long, default_value = "1")]
    pub threads: String,
    /// Keep the written keys (default: delete them after each step, so
    /// memory stays bounded).
    #[arg(long)]
    pub keep: bool,
    /// Probe connections: each sends a PING (memcached: `version`) about
    /// every millisecond while the SETs and GETs run and records how long
    /// the answer took, i.e. how long a large value stalls other clients.
    /// Their p99 and worst latency per op become table columns.
    #[arg(long, default_value_t = 0)]
    pub probe: usize,
}

#[derive(Args, Debug)]
pub struct BatchCmd {
    #[command(flatten)]
    pub common: Common,
    /// Distinct keys.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Keys per MSET/MGET.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// SET and GET, one key a call, instead of MSET and MGET (implies
    /// --batch 1; the phases are then named set-seq, get-seq, ..., and
    /// --phases takes either name).
    #[arg(long)]
    pub single: bool,
    /// Average value size in bytes (generated text).
    #[arg(long, default_value_t = 2800)]
    pub value_size: usize,
    /// Take values from this file's lines instead (key i gets line i mod n).
    #[arg(long)]
    pub value_file: Option<PathBuf>,
    /// Real text: values of exactly --value-size bytes cut from text files
    /// Debian packages ship (/usr/share/common-licenses/*,
    /// /usr/share/doc/*/copyright), a function of (--seed, key), every MGET
    /// checked byte for byte.
    #[arg(long, conflicts_with = "value_file")]
    pub real_text: bool,
    /// Real text from these files or directories instead (repeat; implies
    /// --real-text).
    #[arg(
        long = "text-source",
        value_name = "PATH",
        conflicts_with = "value_file"
    )]
    pub text_sources: Vec<PathBuf>,
    /// A directory whose allocated bytes count as target NAME's disk use
    /// (its data directory, memcached's extstore file), NAME=PATH; repeat.
    #[arg(long = "disk-dir", value_name = "NAME=PATH")]
    pub disk_dirs: Vec<String>,
    /// Seconds between memory and disk samples.
    #[arg(long, default_value_t = 1.0)]
    pub sample_every: f64,
    /// A span with no call completed longer than this many seconds is a
    /// stall.
    #[arg(long, default_value_t = 1.0)]
    pub stall: f64,
    /// Phases in order: mset-seq, mget-seq, mset-rand, mget-rand.
    #[arg(long, default_value = "mset-seq,mget-seq,mset-rand,mget-rand")]
    pub phases: String,
    /// Client threads, a comma-separated sweep.
    #[arg(long, default_value = "8")]
    pub threads: String,
    /// Calls in flight per connection.
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// Stop each phase after this many seconds.
    #[arg(long)]
    pub max_time: Option<f64>,
    /// Do not empty the targets before the first phase.
    #[arg(long)]
    pub no_flush: bool,
    /// Read phases go over the keys this many times (write phases once):
    /// a read phase of a few hundred thousand keys ends in a fraction of a
    /// second, too short to measure. Missing and wrong keys count per read.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub read_passes: u64,
    /// Cold reads: before each read phase of each target, write back and
    /// drop the page cache (`sync`, then 3 into /proc/sys/vm/drop_caches;
    /// root only), so the disk tiers' files are read from the disk. The
    /// report says per run whether it was done.
    #[arg(long)]
    pub drop_caches: bool,
}

#[derive(Args, Debug)]
pub struct CorpusCmd {
    /// Text from these files or directories instead of the default
    /// corpus (repeat), as `batch --text-source`.
    #[arg(long = "text-source", value_name = "PATH")]
    pub text_sources: Vec<PathBuf>,
    /// Bytes per value.
    #[arg(long, default_value_t = 2800)]
    pub value_size: usize,
    /// The values' seed (a run's `--seed`).
    #[arg(long, default_value_t = 25)]
    pub seed: u64,
    /// Values coded (keys 0..N).
    #[arg(long, default_value_t = 1000)]
    pub values: usize,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct LoadCurveCmd {
    #[command(flatten)]
    pub common: Common,
    /// Records to insert (default: --times x maxmemory over a record's
    /// raw size).
    #[arg(long)]
    pub records: Option<u64>,
    /// Load size as a multiple of the first target's maxmemory.
    #[arg(long, default_value_t = 3.0)]
    pub times: f64,
    /// The memory limit to size the load by, instead of asking the first
    /// target (K, M, G accepted).
    #[arg(long, value_parser = parse_size)]
    pub maxmemory: Option<usize>,
    /// Workload whose record layout to use (a-f or a file).
    #[arg(long, default_value = "a")]
    pub workload: String,
    /// A workload property (fieldcount, fieldlength, ...).
    #[arg(short = 'p', value_name = "NAME=VALUE")]
    pub props: Vec<String>,
    /// Inserting threads.
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    /// A directory whose allocated bytes count as target NAME's disk use,
    /// NAME=PATH; repeat.
    #[arg(long = "disk-dir", value_name = "NAME=PATH")]
    pub disk_dirs: Vec<String>,
    /// Seconds between memory and disk samples.
    #[arg(long, default_value_t = 1.0)]
    pub sample_every: f64,
    /// Do not empty the targets before loading.
    #[arg(long)]
    pub no_flush: bool,
    /// Records are single string values of this many bytes of real text
    /// (`batch --real-text`'s values and keys), one SET (memcached: set)
    /// each and no index, instead of YCSB hashes: the shape Cairn's disk
    /// tier moves out (E5 at 3x maxmemory with the tier on).
    #[arg(long, value_name = "BYTES")]
    pub string_values: Option<usize>,
    /// The real text of --string-values from these files or directories
    /// instead of Debian's licences and copyright files (repeat).
    #[arg(long = "text-source", value_name = "PATH", requires = "string_values")]
    pub text_sources: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct GetSetCmd {
    #[command(flatten)]
    pub common: Common,
    /// Connections (redis-benchmark -c).
    #[arg(short = 'c', long, default_value_t = 50)]
    pub clients: usize,
    /// Requests in flight per connection (redis-benchmark -P).
    #[arg(short = 'P', long, default_value_t = 1)]
    pub pipeline: usize,
    /// Requests per test (redis-benchmark -n).
    #[arg(short = 'n', long, default_value_t = 100_000)]
    pub requests: u64,
    /// Random keys in 0..R (redis-benchmark -r); 0 = one key.
    #[arg(short = 'r', long, default_value_t = 100_000)]
    pub keyspace: u64,
    /// SET value size (redis-benchmark -d).
    #[arg(short = 'd', long, default_value_t = 3)]
    pub data_size: usize,
    /// Tests to run, in order (redis-benchmark -t).
    #[arg(short = 't', long, default_value = "set,get")]
    pub tests: String,
    /// Event-loop threads the connections are spread over
    /// (redis-benchmark --threads; default 1 like redis-benchmark).
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Also run redis-benchmark with the same options against each RESP
    /// target, interleaved, and report it beside (this executable).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "redis-benchmark")]
    pub vs_redis_benchmark: Option<String>,
    /// With --vs-redis-benchmark: run redis-benchmark first, then
    /// cairn-bench at the same load, and compare the two clients' p50/p99
    /// (flagged beyond 10%). `paced` (the default): cairn-bench paced to
    /// the rate redis-benchmark reached (for one connection, or a server far
    /// from busy). `closed`: both closed-loop with the same connections; the
    /// same load when the rates agree within 5% (a saturated server).
    /// `concurrent`: both at once, same options each, against the one
    /// server (the same load while both run; drift between runs cancels).
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        num_args = 0..=1,
        default_missing_value = "paced"
    )]
    pub equal_load: Option<crate::getset::EqualLoad>,
    /// Write a connection's next pipeline after the other events of the
    /// same poll round, as redis-benchmark's event loop does (its next
    /// write waits for the next epoll_wait), not as soon as its replies are
    /// in: the server gets requests in the same bursts. Implied by
    /// `--equal-load closed`.
    #[arg(long)]
    pub defer_writes: bool,
    /// End each request's interval at the kernel's receive time of its
    /// first reply segment (SO_TIMESTAMPNS) instead of when the event loop
    /// reaches the connection: the reply's wait inside this client (wake-up,
    /// the other ready connections of the poll round) is left out, as a
    /// packet capture on loopback leaves it out. Not redis-benchmark's
    /// interval, so not with --vs-redis-benchmark comparisons in mind.
    #[arg(long)]
    pub rx_timestamps: bool,
}

#[derive(Args, Debug)]
pub struct ConnRateCmd {
    #[command(flatten)]
    pub common: Common,
    /// Client threads, each connecting in a loop.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
}

/// Parses "8,16,32".
pub fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>, String> {
    let v: Result<Vec<T>, _> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<T>())
        .collect();
    let v = v.map_err(|_| format!("{what}: cannot parse {s:?}"))?;
    if v.is_empty() {
        return Err(format!("{what}: empty list"));
    }
    Ok(v)
}

/// Parses a size: 4096, 4K, 72K, 2.12M, 1G (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1024.0),
        Some('M') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('G') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        Some('B') => return parse_size(&t[..t.len() - 1]),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("bad size {s:?}"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("bad size {s:?}"));
    }
    Ok((v * mult).round() as usize)
}

fn threads_list(s: &str) -> Result<Vec<usize>, String> {
    let v: Vec<usize> = parse_list(s, "--threads")?;
    if v.iter().any(|t| *t == 0 || *t > 4096) {
        return Err("--threads: each count must be 1..=4096".into());
    }
    Ok(v)
}

fn kv(s: &str, what: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("{what} {s:?}: expected NAME=VALUE"))
}

/// Builds the shared context and pid list from the common options.
pub fn make_ctx(c: &Common) -> Result<(Ctx, Vec<(String, u32)>), String> {
    let mut targets = Vec::new();
    let mut tls = None;
    for t in &c.targets {
        let mut t = parse_target(t)?;
        if t.wants_tls {
            if tls.is_none() {
                let ca = c.cacert.as_deref().ok_or(
                    "rediss:// targets need --cacert (the CA that signed the server's certificate)",
                )?;
                tls = Some(crate::target::tls_client(
                    ca,
                    c.cert.as_deref(),
                    c.key.as_deref(),
                )?);
            }
            t.with_tls(tls.as_ref().expect("set just above"))?;
        }
        if targets
            .iter()
            .any(|x: &crate::target::Target| x.name == t.name)
        {
            return Err(format!("two targets named {}", t.name));
        }
        targets.push(t);
    }
    let mut pids = Vec::new();
    for p in &c.pids {
        let (n, v) = kv(p, "--pid")?;
        let pid: u32 = v.parse().map_err(|_| format!("--pid {p}: not a pid"))?;
        pids.push((n, pid));
    }
    if c.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if !(c.timeout.is_finite() && c.timeout > 0.0) {
        return Err("--timeout must be positive".into());
    }
    Ok((
        Ctx {
            targets,
            rounds: c.rounds,
            timeout: Duration::from_secs_f64(c.timeout),
            target_rate: c.target_rate,
            json: c.json.clone(),
            chart: c.chart.clone(),
            data_dir: c.data_dir.clone(),
            quiet: c.quiet,
            font: c.font.clone(),
            seed: c.seed,
        },
        pids,
    ))
}

/// Entry point; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cairn-bench: {e}");
            1
        }
    }
}

pub fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Ycsb(a) => cmd_ycsb(a),
        Cmd::Memory(a) => crate::memory::command(a),
        Cmd::Values(a) => crate::values::command(a),
        Cmd::Batch(a) => crate::batch::command(a),
        Cmd::LoadCurve(a) => crate::loadcurve::command(a),
        Cmd::GetSet(a) => crate::getset::command(a),
        Cmd::HitRatio(a) => crate::hitratio::command(a),
        Cmd::ConnRate(a) => crate::connrate::command(a),
        Cmd::Corpus(a) => crate::batch::corpus_command(a),
        Cmd::CheckJson { file } => {
            let text =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let r: Report =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            crate::report::validate(&r)?;
            println!(
                "{}: valid {} report, {} runs",
                file.display(),
                r.schema,
                r.runs.len()
            );
            Ok(())
        }
    }
}

fn cmd_ycsb(a: YcsbCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    let mut props: Vec<(String, String)> = a
        .props
        .iter()
        .map(|p| kv(p, "-p"))
        .collect::<Result<_, _>>()?;
    if let Some(n) = a.records {
        props.push(("recordcount".into(), n.to_string()));
    }
    if let Some(n) = a.operations {
        props.push(("operationcount".into(), n.to_string()));
    }
    let workload = crate::ycsb::Workload::build(&a.workload, &props)?;
    let threads = threads_list(&a.threads)?;
    let started = crate::sys::unix_now();
    let infos = runner::prepare_targets(&mut ctx, &pids)?;
    let args = crate::ycsb::YcsbArgs {
        workload: workload.clone(),
        load_threads: a.load_threads.unwrap_or(threads[0]).max(1),
        threads,
        skip_load: a.skip_load,
        no_flush: a.no_flush,
        max_time: a.max_time.map(Duration::from_secs_f64),
        conns_per_thread: a.conns_per_thread as usize,
    };
    let (records, notes) = crate::ycsb::command(&ctx, &args)?;
    let config = serde_json::json!({
        "workload": workload,
        "threads": args.threads,
        "load_threads": args.load_threads,
        "skip_load": args.skip_load,
        "rounds": ctx.rounds,
        "timeout_s": ctx.timeout.as_secs_f64(),
        "target_rate": ctx.target_rate,
        "max_time_s": a.max_time,
        "conns_per_thread": args.conns_per_thread,
        "pipeline": 1,
    });
    let rep = runner::finish(&ctx, "ycsb", infos, config, &records, notes, started)?;
    if let Some(prefix) = &ctx.chart {
        let name = format!("ycsb-{}", workload.name);
        let mut files = threads_chart(
            &ctx,
            prefix,
            &name,
            &format!("YCSB {}", workload.name),
            "run",
            &rep.summary,
        )?;
        files.extend(timeline_for_phase(
            &ctx,
            prefix,
            &format!("{name}-timeline"),
            &format!("YCSB {} throughput over time", workload.name),
            "run",
            &rep,
            "ops/s",
        )?);
        report_files(&ctx, &files);
    }
    Ok(())
}

/// Tells where charts went.
pub fn report_files(ctx: &Ctx, files: &[PathBuf]) {
    for f in files {
        ctx.say(&format!("wrote {}", f.display()));
    }
}

/// E1's chart for one phase: x = client threads, left = ops/s per target,
/// right = p99 latency per target and operation.
pub fn threads_chart(
    ctx: &Ctx,
    prefix: &std::path::Path,
    name: &str,
    title: &str,
    phase: &str,
    rows: &[SummaryRow],
) -> Result<Vec<PathBuf>, String> {
    chart::init_font(ctx.font.as_deref())?;
    let rows: Vec<&SummaryRow> = rows.iter().filter(|r| r.phase == phase).collect();
    let mut threads: Vec<u32> = rows.iter().map(|r| r.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut targets: Vec<&str> = Vec::new();
    for r in &rows {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    // The first row of a target × threads block is its whole-run row.
    let first_row =
        |target: &str, t: u32| rows.iter().find(|r| r.target == target && r.threads == t);
    let op_row = |target: &str, op: &str, t: u32| {
        rows.iter()
            .find(|r| r.target == target && r.threads == t && r.op == op)
    };
    let left: Vec<Series> = targets
        .iter()
        .enumerate()
        .map(|(g, t)| Series {
            name: format!("{t} ops/s"),
            group: g,
            values: threads
                .iter()
                .map(|th| first_row(t, *th).map(|r| r.ops_per_sec))
                .collect(),
        })
        .collect();
    let mut right = Vec::new();
    for (g, t) in targets.iter().enumerate() {
        let mut ops: Vec<&str> = Vec::new();
        for r in rows.iter().filter(|r| r.target == *t && r.op != "ALL") {
            if !ops.contains(&r.op.as_str()) {
                ops.push(&r.op);
            }
        }
        if ops.is_empty() {
            ops.push("ALL");
        }
        for op in ops {
            right.push(Series {
                name: if op == "ALL" {
                    format!("{t} p99")
                } else {
                    format!("{t} {op} p99")
                },
                group: g,
                values: threads
                    .iter()
                    .map(|th| {
                        op_row(t, op, *th)
                            .map(|r| r.latency.p99_us)
                            .filter(|v| *v > 0.0)
                    })
                    .collect(),
            });
        }
    }
    let labels: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
    chart::category_chart(
        &chart::with_suffix(prefix, name),
        title,
        "client threads",
        &labels,
        "throughput (ops/s)",
        &left,
        "p99 latency (µs)",
        &right,
    )
}

/// A chart over phases (x = each phase in `phases`, in order): left = ops/s
/// (or units/s) per target, right = p99 per target and operation.
pub fn phases_chart(
    ctx: &Ctx,
    prefix: &std::path::Path,
    name: &str,
    title: &str,
    rows: &[SummaryRow],
    phases: Option<&[String]>,
    use_units: bool,
) -> Result<Vec<PathBuf>, String> {
    chart::init_font(ctx.font.as_deref())?;
    let mut order: Vec<String> = Vec::new();
    for r in rows {
        if phases.is_none_or(|p| p.contains(&r.phase)) && !order.contains(&r.phase) {
            order.push(r.phase.clone());
        }
    }
    let mut targets: Vec<&str> = Vec::new();
    let mut ops: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| order.contains(&r.phase)) {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
        if r.op != "ALL" && !ops.contains(&r.op.as_str()) {
            ops.push(&r.op);
        }
    }
    let first_row = |t: &str, ph: &str| rows.iter().find(|r| r.target == t && r.phase == ph);
    let unit = rows
        .iter()
        .find(|r| r.unit != "ops")
        .map(|r| r.unit.clone());
    let left: Vec<Series> = targets
        .iter()
        .enumerate()
        .map(|(g, t)| Series {
            name: t.to_string(),
            group: g,
            values: order
                .iter()
                .map(|ph| {
                    first_row(t, ph).map(|r| {
                        if use_units {
                            r.units_per_sec
                        } else {
                            r.ops_per_sec
                        }
                    })
                })
                .collect(),
        })
        .collect();
    // One latency line per target when each phase is one operation (GET,
    // SET, MSET...), else one per target and operation.
    let multi_op = rows
        .iter()
        .filter(|r| order.contains(&r.phase))
        .any(|r| r.op == "ALL");
    let mut right = Vec::new();
    for (g, t) in targets.iter().enumerate() {
        if !multi_op {
            right.push(Series {
                name: format!("{t} p99"),
                group: g,
                values: order
                    .iter()
                    .map(|ph| {
                        first_row(t, ph)
                            .map(|r| r.latency.p99_us)
                            .filter(|v| *v > 0.0)
                    })
                    .collect(),
            });
            continue;
        }
        for op in &ops {
            let values: Vec<Option<f64>> = order
                .iter()
                .map(|ph| {
                    rows.iter()
                        .find(|r| r.target == *t && r.phase == *ph && r.op == *op)
                        .map(|r| r.latency.p99_us)
                        .filter(|v| *v > 0.0)
                })
                .collect();
            if values.iter().any(|v| v.is_some()) {
                right.push(Series {
                    name: format!("{t} {op} p99"),
                    group: g,
                    values,
                });
            }
        }
    }
    let left_desc = match (&unit, use_units) {
        (Some(u), true) => format!("throughput ({u}/s)"),
        _ => "throughput (ops/s)".to_string(),
    };
    chart::category_chart(
        &chart::with_suffix(prefix, name),
        title,
        "",
        &order,
        &left_desc,
        &left,
        "p99 latency (µs)",
        &right,
    )
}

/// E4's chart: units per second over time for every run of `phase` in
/// round 1 (one line per target and thread count).
pub fn timeline_for_phase(
    ctx: &Ctx,
    prefix: &std::path::Path,
    name: &str,
    title: &str,
    phase: &str,
    rep: &Report,
    y_desc: &str,
) -> Result<Vec<PathBuf>, String> {
    chart::init_font(ctx.font.as_deref())?;
    let runs: Vec<_> = rep
        .runs
        .iter()
        .filter(|r| r.phase == phase && r.round == 1)
        .collect();
    let many_threads = runs.iter().any(|r| r.threads != runs[0].threads);
    let series: Vec<chart::Timeline> = runs
        .iter()
        .map(|r| chart::Timeline {
            name: if many_threads {
                format!("{} t={}", r.target, r.threads)
            } else {
                r.target.clone()
            },
            points: timeline_rates(&r.timeline, r.duration_s),
            average: r.units_per_sec,
        })
        .collect();
    if series.is_empty() {
        return Ok(vec![]);
    }
    chart::timeline_chart(&chart::with_suffix(prefix, name), title, y_desc, &series)
}

/// Speeds from per-second counts: full seconds as they are, a last partial
/// second scaled to its length (dropped when under a quarter second, too
/// short to say much); each point at its interval's middle.
pub fn timeline_rates(counts: &[u64], duration_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(counts.len());
    for (i, c) in counts.iter().enumerate() {
        let start = i as f64;
        let len = (duration_s - start).min(1.0);
        if len >= 1.0 - 1e-9 {
            out.push((start + 0.5, *c as f64));
        } else if len >= 0.25 || (i == 0 && len > 0.0) {
            out.push((start + len / 2.0, *c as f64 / len));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_from_counts() {
        assert_eq!(
            timeline_rates(&[100, 200], 2.0),
            vec![(0.5, 100.0), (1.5, 200.0)]
        );
        assert_eq!(
            timeline_rates(&[100, 50], 1.5),
            vec![(0.5, 100.0), (1.25, 100.0)]
        );
        assert_eq!(timeline_rates(&[100, 5], 1.1), vec![(0.5, 100.0)]);
        assert_eq!(timeline_rates(&[40], 0.5), vec![(0.25, 80.0)]);
        // A run shorter than a quarter second still gets its one point.
        assert_eq!(timeline_rates(&[10], 0.1).len(), 1);
    }

    #[test]
    fn lists_and_sizes() {
        assert_eq!(
            parse_list::<usize>("8,16, 32", "x").unwrap(),
            vec![8, 16, 32]
        );
        assert!(parse_list::<usize>("8,x", "x").is_err());
        assert!(parse_list::<usize>("", "x").is_err());
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("72k").unwrap(), 73728);
        assert_eq!(parse_size("2.12M").unwrap(), 2_222_981);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert_eq!(parse_size("1KB").unwrap(), 1024);
        assert!(parse_size("0").is_err());
        assert!(parse_size("abc").is_err());
        assert!(threads_list("0").is_err());
    }

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
