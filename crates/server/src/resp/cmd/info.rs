//! INFO: the server's report on itself, section by section, with Redis 7.0's
//! section names, field names and field order (server.c
//! `genRedisInfoString`), plus the statistics bookkeeping INFO needs:
//! the CONFIG RESETSTAT baseline, the per-error-code counters of
//! `# Errorstats`, and the instantaneous-rate sampler.
//!
//! Every value comes from a real source: worker counters, the engine's shard
//! statistics and tables, jemalloc, `/proc/self/statm`, `getrusage`, the
//! config. A field Redis reports about a subsystem Cairn does not have
//! (replication, AOF, eviction, pub/sub, defrag) is reported with the value
//! that is true of a server without it (`aof_enabled:0`, `evicted_keys:0`);
//! a field Cairn cannot measure (scripting memory, `expired_stale_perc`)
//! is left out rather than
//! invented. Cairn adds `cairn_version` and its worker fields
//! (`cairn_workers`, `cairn_active_workers`, ...) to `# Server`.
//!
//! Statistics are owned by the threads that produce them (each worker
//! writes its own counters with a plain load + store), so CONFIG RESETSTAT
//! cannot zero them from another thread without racing. Instead it takes a
//! snapshot, and INFO reports `current - snapshot`.
use crate::exec::table::Def;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::shared::Shared;
use cairn_engine::Cx;
use parking_lot::{const_mutex, Mutex};
use std::fmt::{Display, Write as _};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub const COMMANDS: &[Def] = &[Def::new("info", info)];

/// INFO [section ...] → bulk string of `# Section` blocks (RESP3: verbatim
/// string, format `txt`); an unknown section contributes nothing.
fn info(ctx: &mut Ctx) -> CmdResult {
    let sel = Selection::parse(ctx.args.iter_from(1));
    let text = report(ctx.shared, &ctx.cx, &sel);
    ctx.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

// ------------------------------------------------------------- selection ---

/// Sections INFO prints with no argument or with `default`
/// (server.c `genInfoSectionDict`).
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "module_list",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Which sections a request asked for.
struct Selection {
    /// `all` or `everything` (the same for Cairn: it has no modules).
    all: bool,
    names: Vec<String>,
}

impl Selection {
    fn parse<'a>(args: impl Iterator<Item = &'a [u8]>) -> Selection {
        let mut sel = Selection {
            all: false,
            names: Vec::new(),
        };
        let mut any = false;
        for a in args {
            any = true;
            let name = String::from_utf8_lossy(a).to_ascii_lowercase();
            match name.as_str() {
                "all" | "everything" => sel.all = true,
                "default" => sel.add_defaults(),
                _ => sel.names.push(name),
            }
        }
        if !any {
            sel.add_defaults();
        }
        sel
    }

    fn add_defaults(&mut self) {
        self.names
            .extend(DEFAULT_SECTIONS.iter().map(|s| s.to_string()));
    }

    fn wants(&self, section: &str) -> bool {
        self.all || self.names.iter().any(|n| n == section)
    }
}

/// Builds the INFO text for `sel`: sections in Redis's order, separated by
/// an empty line.
fn report(shared: &Shared, cx: &Cx, sel: &Selection) -> String {
    let mut out = String::with_capacity(4096);
    let needs_engine = ["memory", "stats", "keyspace", "persistence"]
        .iter()
        .any(|s| sel.wants(s));
    let engine = needs_engine.then(|| EngineTotals::read(shared, cx));
    let counters = Counters::read(shared, engine.as_ref());
    let since_reset = counters.minus(&BASELINE.lock());

    let mut sections = 0;
    let mut begin = |out: &mut String, title: &str| {
        if sections > 0 {
            out.push_str("\r\n");
        }
        sections += 1;
        out.push_str("# ");
        out.push_str(title);
        out.push_str("\r\n");
    };
    if sel.wants("server") {
        begin(&mut out, "Server");
        server_section(&mut out, shared);
    }
    if sel.wants("clients") {
        begin(&mut out, "Clients");
        clients_section(&mut out, shared);
    }
    if sel.wants("memory") {
        begin(&mut out, "Memory");
        memory_section(&mut out, shared, engine.as_ref());
    }
    if sel.wants("persistence") {
        begin(&mut out, "Persistence");
        persistence_section(&mut out, shared, &counters);
    }
    if sel.wants("stats") {
        begin(&mut out, "Stats");
        stats_section(&mut out, shared, &counters, &since_reset);
    }
    if sel.wants("replication") {
        begin(&mut out, "Replication");
        replication_section(&mut out, shared);
    }
    if sel.wants("cpu") {
        begin(&mut out, "CPU");
        cpu_section(&mut out);
    }
    if sel.wants("module_list") || sel.wants("modules") {
        // Cairn loads no modules: the section is present and empty.
        begin(&mut out, "Modules");
    }
    if sel.wants("commandstats") {
        begin(&mut out, "Commandstats");
        commandstats_section(&mut out, shared, &since_reset);
    }
    if sel.wants("errorstats") {
        begin(&mut out, "Errorstats");
        errorstats_section(&mut out);
    }
    if sel.wants("latencystats") {
        begin(&mut out, "Latencystats");
        latencystats_section(&mut out, shared);
    }
    if sel.wants("cluster") {
        begin(&mut out, "Cluster");
        field(
            &mut out,
            "cluster_enabled",
            u8::from(shared.cluster.enabled()),
        );
    }
    if sel.wants("keyspace") {
        begin(&mut out, "Keyspace");
        if let Some(e) = &engine {
            for (db, (&keys, &expires)) in e.keys.iter().zip(&e.expires).enumerate() {
                if keys > 0 {
                    // avg_ttl: Redis estimates it from the keys its expiry
                    // cycle samples; Cairn's cycle keeps no such estimate.
                    let _ = write!(out, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
                }
            }
        }
    }
    // branch zfast: compressed values (issue 25); not a Redis section, so
    // only `INFO compression` and `INFO all` print it.
    if sel.wants("compression") {
        begin(&mut out, "Compression");
        compression_section(&mut out);
    }
    // branch tier: the disk tier (issue 25); `INFO tier` and `INFO all`.
    if sel.wants("tier") {
        begin(&mut out, "Tier");
        tier_section(&mut out);
    }
    out
}

/// The disk tier (`cairn_engine::tier`, `crate::tier`): keys whose values
/// are on disk, the logs' bytes, reads and their time, appends, failures
/// and compactions.
fn tier_section(out: &mut String) {
    use cairn_engine::tier::COUNTERS as C;
    use std::sync::atomic::Ordering::Relaxed;
    let t = crate::tier::get();
    let (disk, live, segments) = t.map_or((0, 0, 0), |t| t.disk());
    let (compactions, compacted) = t.map_or((0, 0), |t| t.compactions());
    let reads = C.reads.load(Relaxed);
    let usec = C.read_usec.load(Relaxed);
    field(out, "tier_enabled", u8::from(t.is_some()));
    field(out, "tiered_keys", C.tiered_keys.load(Relaxed));
    field(
        out,
        "tiered_plain_bytes",
        C.tiered_plain_bytes.load(Relaxed),
    );
    field(out, "tier_bytes_on_disk", disk);
    field(out, "tier_live_bytes", live);
    field(out, "tier_segments", segments);
    field(out, "tier_reads", reads);
    field(out, "tier_read_usec", usec);
    field(
        out,
        "tier_read_usec_per_call",
        format!("{:.2}", usec as f64 / reads.max(1) as f64),
    );
    field(out, "tier_read_errors", C.read_errors.load(Relaxed));
    field(out, "tier_writes", C.writes.load(Relaxed));
    field(out, "tier_append_errors", C.append_errors.load(Relaxed));
    field(out, "tier_compactions", compactions);
    field(out, "tier_compacted_bytes", compacted);
    // branch tiersnap: snapshots that point into the tier.
    field(
        out,
        "tier_retired_segments",
        t.map_or(0, |t| t.retired_segments()),
    );
    field(out, "tier_loaded_pointers", C.loaded_pointers.load(Relaxed));
    // branch tierio: reads that do not hold up the worker.
    let nowait = &cairn_engine::tier::nowait::NOWAIT_COUNTERS;
    let io = &crate::tier_io::COUNTERS;
    field(out, "tier_reads_nowait", nowait.hits.load(Relaxed));
    field(out, "tier_nowait_misses", nowait.misses.load(Relaxed));
    field(out, "tier_reads_parked", io.pool_reads.load(Relaxed));
    field(out, "tier_parked_commands", io.parked.load(Relaxed));
    field(out, "tier_io_queue_depth", io.queue_depth.load(Relaxed));
    field(out, "tier_io_threads", crate::tier_io::threads());
    // branch e4write: moves coded outside the shard lock.
    field(out, "tier_move_races", C.move_races.load(Relaxed));
    field(
        out,
        "tier_moves_by_writers",
        crate::tier::WRITER_MOVES.load(Relaxed),
    );
    // branch tierw: records written coded (the rest of tier_writes went
    // out plain, `tier-compression none`).
    field(
        out,
        "tier_writes_coded_in_ram",
        C.writes_coded_in_ram.load(Relaxed),
    );
    field(
        out,
        "tier_writes_coded_on_move",
        C.writes_coded_on_move.load(Relaxed),
    );
}

/// Compressed string values (`value::zcomp`): how many, their bytes before
/// and after coding, the dictionaries and what training them cost.
fn compression_section(out: &mut String) {
    use cairn_engine::value::zcomp;
    let (values, plain, coded) = zcomp::stored();
    field(out, "compressed_values", values);
    field(out, "compressed_plain_bytes", plain);
    field(out, "compressed_coded_bytes", coded);
    field(out, "compression_ratio", ratio(plain, coded));
    field(out, "compression_dictionaries", zcomp::dict_count());
    field(out, "compression_dictionary_bytes", zcomp::dict_bytes());
    field(out, "compression_trainings", zcomp::trained());
    field(out, "compression_training_cpu_us", zcomp::training_cpu_us());
    // branch lz4code: the background coder.
    let (pending, pending_bytes) = cairn_engine::zcoder::pending();
    let (coded_bg, kept_plain) = cairn_engine::zcoder::coded();
    field(out, "compression_pending_values", pending);
    field(out, "compression_pending_bytes", pending_bytes);
    field(out, "compression_background_coded", coded_bg);
    field(out, "compression_background_kept_plain", kept_plain);
    field(out, "compression_coder_cpu_us", crate::zcoder::cpu_us());
    field(out, "compression_inline", crate::zcoder::inline());
}

fn field(out: &mut String, name: &str, value: impl Display) {
    let _ = write!(out, "{name}:{value}\r\n");
}

// -------------------------------------------------------------- counters ---

/// The engine's statistics and table sizes, summed over every shard.
struct EngineTotals {
    keys: Vec<u64>,
    expires: Vec<u64>,
    index_bytes: u64,
    hits: u64,
    misses: u64,
    expired: u64,
    evicted: u64,
}

impl EngineTotals {
    /// One pass over the shards, each locked only while it is read (or
    /// read from the hold of `cx`'s EXEC).
    fn read(shared: &Shared, cx: &Cx) -> EngineTotals {
        let dbs = shared.engine.databases();
        let mut t = EngineTotals {
            keys: vec![0; dbs],
            expires: vec![0; dbs],
            index_bytes: 0,
            hits: 0,
            misses: 0,
            expired: 0,
            evicted: 0,
        };
        shared.engine.for_each_shard_read(cx, |_, shard| {
            for db in 0..dbs {
                let table = shard.db(db);
                t.keys[db] += table.len() as u64;
                t.expires[db] += table.volatile() as u64;
                t.index_bytes += table.index_bytes() as u64;
            }
            t.hits += shard.stats.keyspace_hits;
            t.misses += shard.stats.keyspace_misses;
            t.expired += shard.stats.expired_keys;
            t.evicted += shard.stats.evicted_keys;
        });
        t
    }
}

/// Every counter CONFIG RESETSTAT resets, as totals since start.
#[derive(Clone, Default)]
struct Counters {
    commands: u64,
    net_in: u64,
    net_out: u64,
    error_replies: u64,
    connections: u64,
    rejected_connections: u64,
    hits: u64,
    misses: u64,
    expired: u64,
    evicted: u64,
    /// Per command id: calls, microseconds, rejected calls, failed calls.
    cmd: Vec<[u64; 4]>,
}

impl Counters {
    /// Sums the workers' counters. `engine` supplies the keyspace counters
    /// when the caller has read them (they stay 0 otherwise).
    fn read(shared: &Shared, engine: Option<&EngineTotals>) -> Counters {
        let mut c = Counters {
            connections: shared.total_connections.load(Ordering::Relaxed),
            rejected_connections: shared.rejected_connections.load(Ordering::Relaxed),
            cmd: vec![[0; 4]; shared.table.all().len()],
            ..Counters::default()
        };
        if let Some(e) = engine {
            c.hits = e.hits;
            c.misses = e.misses;
            c.expired = e.expired;
            c.evicted = e.evicted;
        }
        let master = shared.replication.master_stats_if_any();
        for w in shared.worker_stats.iter().chain(master) {
            c.commands += w.commands.load(Ordering::Relaxed);
            c.net_in += w.net_in.load(Ordering::Relaxed);
            c.net_out += w.net_out.load(Ordering::Relaxed);
            c.error_replies += w.error_replies.load(Ordering::Relaxed);
            for (sum, counters) in c.cmd.iter_mut().zip(w.cmd.iter()) {
                for (s, v) in sum.iter_mut().zip(counters) {
                    *s += v.load(Ordering::Relaxed);
                }
            }
        }
        c
    }

    /// `self - base`, field by field (0 where `base` has no value). The
    /// counters only grow, so this never underflows unless the baseline
    /// lacked the engine counters (then they read as totals).
    fn minus(&self, base: &Option<Counters>) -> Counters {
        let Some(b) = base else {
            return self.clone();
        };
        let d = |a: u64, b: u64| a.saturating_sub(b);
        Counters {
            commands: d(self.commands, b.commands),
            net_in: d(self.net_in, b.net_in),
            net_out: d(self.net_out, b.net_out),
            error_replies: d(self.error_replies, b.error_replies),
            connections: d(self.connections, b.connections),
            rejected_connections: d(self.rejected_connections, b.rejected_connections),
            hits: d(self.hits, b.hits),
            misses: d(self.misses, b.misses),
            expired: d(self.expired, b.expired),
            evicted: d(self.evicted, b.evicted),
            cmd: self
                .cmd
                .iter()
                .enumerate()
                .map(|(i, now)| {
                    let base = b.cmd.get(i).copied().unwrap_or_default();
                    std::array::from_fn(|k| d(now[k], base[k]))
                })
                .collect(),
        }
    }
}

/// The totals at the last CONFIG RESETSTAT (None: never reset).
static BASELINE: Mutex<Option<Counters>> = const_mutex(None);

/// CONFIG RESETSTAT: from now on INFO's stats, commandstats and errorstats
/// count from zero (server.c `resetServerStats`, `resetCommandTableStats`,
/// `resetErrorTableStats`). The slow log is not touched, as in Redis.
pub fn reset_stats(shared: &Shared, cx: &Cx) {
    let engine = EngineTotals::read(shared, cx);
    let now = Counters::read(shared, Some(&engine));
    *SAMPLE.lock() = Some(Sample::start(Instant::now(), &now));
    *BASELINE.lock() = Some(now);
    crate::exec::errorstats::reset();
    crate::cmdlatency::reset(shared);
    *shared.stat_reset_at.lock() = Instant::now();
    // Redis's `lazyfreeResetStats`.
    LAZYFREED_BASE.store(cairn_engine::lazyfree::freed(), Ordering::Relaxed);
}

/// `lazyfreed_objects` at the last CONFIG RESETSTAT.
static LAZYFREED_BASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// ------------------------------------------------------- instantaneous ---

/// The counters at one moment, and the rates measured up to it.
struct Sample {
    at: Instant,
    commands: u64,
    net_in: u64,
    net_out: u64,
    ops_per_sec: u64,
    input_kbps: f64,
    output_kbps: f64,
}

impl Sample {
    fn start(at: Instant, c: &Counters) -> Sample {
        Sample {
            at,
            commands: c.commands,
            net_in: c.net_in,
            net_out: c.net_out,
            ops_per_sec: 0,
            input_kbps: 0.0,
            output_kbps: 0.0,
        }
    }
}

/// Redis samples every 100 ms in its cron and averages the last 16
/// samples. Cairn samples when INFO runs: the rates cover the time since the
/// previous INFO (since start for the first one), and calls closer together
/// than `MIN_SAMPLE` reuse the last rates instead of dividing tiny numbers.
const MIN_SAMPLE: Duration = Duration::from_millis(100);

static SAMPLE: Mutex<Option<Sample>> = const_mutex(None);

/// (ops/sec, input KiB/s, output KiB/s).
fn rates(shared: &Shared, c: &Counters) -> (u64, f64, f64) {
    let now = Instant::now();
    let mut slot = SAMPLE.lock();
    let last = slot.get_or_insert_with(|| Sample::start(shared.started, &Counters::default()));
    let elapsed = now.duration_since(last.at);
    if elapsed >= MIN_SAMPLE {
        let secs = elapsed.as_secs_f64();
        let per_sec = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs;
        let next = Sample {
            at: now,
            commands: c.commands,
            net_in: c.net_in,
            net_out: c.net_out,
            ops_per_sec: per_sec(c.commands, last.commands) as u64,
            input_kbps: per_sec(c.net_in, last.net_in) / 1024.0,
            output_kbps: per_sec(c.net_out, last.net_out) / 1024.0,
        };
        *last = next;
    }
    (last.ops_per_sec, last.input_kbps, last.output_kbps)
}

// ----------------------------------------------------------- errorstats ---

/// `errorstat_<CODE>:count=<n>`, codes sorted as Redis's rax returns them.
fn errorstats_section(out: &mut String) {
    for (code, n) in crate::exec::errorstats::totals() {
        let _ = write!(out, "errorstat_{code}:count={n}\r\n");
    }
}

// ------------------------------------------------------------- sections ---

fn server_section(out: &mut String, shared: &Shared) {
    let (hz, config_file) = {
        let c = shared.config.read();
        let file = c
            .config_file()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        (c.hz, file)
    };
    let uptime = shared.uptime_secs();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field(out, "redis_version", crate::exec::meta::REDIS_VERSION);
    // What a Redis built outside a git checkout reports (Debian's package
    // does too); tools that print the version read them (Redis's own test
    // suite, unit/printver).
    field(out, "redis_git_sha1", "00000000");
    field(out, "redis_git_dirty", "0");
    field(out, "cairn_version", crate::VERSION);
    let mode = if shared.cluster.enabled() {
        "cluster"
    } else {
        "standalone"
    };
    field(out, "redis_mode", mode);
    field(out, "os", os_name());
    field(out, "arch_bits", usize::BITS);
    // std's Instant reads CLOCK_MONOTONIC through clock_gettime.
    field(out, "monotonic_clock", "POSIX clock_gettime");
    field(out, "multiplexing_api", multiplexing_api());
    field(out, "process_id", std::process::id());
    field(
        out,
        "process_supervised",
        crate::process::supervisor().as_str(),
    );
    field(out, "run_id", &shared.run_id);
    field(out, "tcp_port", shared.tcp_port.load(Ordering::Relaxed));
    field(out, "server_time_usec", cairn_engine::clock::now_us());
    field(out, "uptime_in_seconds", uptime);
    field(out, "uptime_in_days", uptime / 86_400);
    // Cairn's cron runs at the configured hz; there is no dynamic hz.
    field(out, "hz", hz);
    field(out, "configured_hz", hz);
    field(out, "lru_clock", lru_clock());
    field(out, "executable", exe);
    field(out, "config_file", config_file);
    // Cairn's threads (`balance.rs`): workers started, workers serving
    // clients now, connections moved between them, and the last second's
    // measurements the choice came from.
    let b = &shared.balance;
    field(out, "cairn_workers", shared.worker_stats.len());
    field(out, "cairn_active_workers", b.active());
    field(out, "cairn_worker_moves", b.moved.load(Ordering::Relaxed));
    let per_worker: Vec<String> = shared
        .worker_stats
        .iter()
        .map(|w| w.conns.load(Ordering::Relaxed).to_string())
        .collect();
    field(out, "cairn_worker_clients", per_worker.join(","));
    if let Some(s) = *b.last.lock() {
        field(out, "cairn_worker_load", format!("{:.2}", s.work));
        field(out, "cairn_cpu_others", format!("{:.2}", s.others));
        field(out, "cairn_worker_starved", u8::from(s.starved));
        field(out, "cairn_cpus_allowed", s.cores);
        field(out, "cairn_cpus_online", s.online);
    }
}

/// Redis's 24-bit LRU clock in seconds (`LRU_CLOCK_RESOLUTION` 1000 ms).
pub fn lru_clock() -> u64 {
    (cairn_engine::clock::now_ms() / 1000) & ((1 << 24) - 1)
}

/// `uname -s -r -m`, as Redis prints it.
fn os_name() -> String {
    // SAFETY: utsname is plain data; uname fills it with NUL-terminated
    // strings on success, and we read it only then.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return std::env::consts::OS.to_string();
        }
        let s = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", s(&u.sysname), s(&u.release), s(&u.machine))
    }
}

/// What mio polls with on this platform.
fn multiplexing_api() -> &'static str {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        "epoll"
    } else if cfg!(any(
        target_os = "macos",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd"
    )) {
        "kqueue"
    } else {
        "poll"
    }
}

fn clients_section(out: &mut String, shared: &Shared) {
    let (mut max_in, mut max_out) = (0usize, 0usize);
    for c in shared.clients.lock().values() {
        let input = c.qbuf.load(Ordering::Relaxed) + c.qbuf_free.load(Ordering::Relaxed);
        max_in = max_in.max(input);
        max_out = max_out.max(c.omem.load(Ordering::Relaxed));
    }
    let monitors = shared.monitor_count.load(Ordering::Relaxed);
    let maxclients = shared.config.read().maxclients;
    // Redis counts MONITOR clients as replicas, not as connected clients.
    field(
        out,
        "connected_clients",
        shared
            .connected
            .load(Ordering::Relaxed)
            .saturating_sub(monitors),
    );
    field(out, "cluster_connections", 0);
    field(out, "maxclients", maxclients);
    // The workers refresh each client's buffer sizes every 100 ms.
    field(out, "client_recent_max_input_buffer", max_in);
    field(out, "client_recent_max_output_buffer", max_out);
    field(
        out,
        "blocked_clients",
        shared.engine.blocked.load(Ordering::Relaxed) + shared.pause.held.load(Ordering::Relaxed),
    );
    field(out, "tracking_clients", shared.tracking.stats().clients);
    field(out, "clients_in_timeout_table", 0);
}

/// jemalloc's view of the heap.
struct Allocator {
    allocated: u64,
    active: u64,
    resident: u64,
}

fn allocator_stats() -> Allocator {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The statistics are cached until the epoch advances.
    let _ = epoch::advance();
    Allocator {
        allocated: stats::allocated::read().unwrap_or(0) as u64,
        active: stats::active::read().unwrap_or(0) as u64,
        resident: stats::resident::read().unwrap_or(0) as u64,
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// Resident set size from `/proc/self/statm` (Redis `zmalloc_get_rss`).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

fn total_system_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages > 0 {
        pages as u64 * page_size()
    } else {
        0
    }
}

/// Redis's `bytesToHuman`.
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, char); 5] = [
        (1 << 10, 'K'),
        (1 << 20, 'M'),
        (1 << 30, 'G'),
        (1 << 40, 'T'),
        (1 << 50, 'P'),
    ];
    if n < 1024 {
        return format!("{n}B");
    }
    for &(unit, suffix) in &UNITS {
        if n < unit * 1024 {
            return format!("{:.2}{suffix}", n as f64 / unit as f64);
        }
    }
    format!("{n}B")
}

/// `a / b` with Redis's two decimals; 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "0.00".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

fn memory_section(out: &mut String, shared: &Shared, engine: Option<&EngineTotals>) {
    let alloc = allocator_stats();
    // Every byte live in the heap, from jemalloc's per-thread counters
    // (see memory.rs); the watcher keeps the peak between readings.
    let used = shared.memory.refresh();
    let startup = shared.memory.startup.load(Ordering::Relaxed) as u64;
    let rss = rss_bytes().unwrap_or(alloc.resident);
    let peak = (shared.memory.peak.load(Ordering::Relaxed) as u64).max(used);
    let client_buffers: u64 = shared
        .clients
        .lock()
        .values()
        .map(|c| {
            (c.qbuf.load(Ordering::Relaxed)
                + c.qbuf_free.load(Ordering::Relaxed)
                + c.omem.load(Ordering::Relaxed)) as u64
        })
        .sum();
    // Overhead: what is not the data itself: the startup footprint, the
    // keyspace's hash indexes and the clients' buffers, as Redis counts it.
    let overhead = startup + engine.map_or(0, |e| e.index_bytes) + client_buffers;
    let dataset = used.saturating_sub(overhead);
    let net = used.saturating_sub(startup);
    let (maxmemory, policy) = {
        let c = shared.config.read();
        (c.maxmemory, c.maxmemory_policy.as_str())
    };
    let percent = |a: u64, b: u64| {
        if b == 0 {
            "0.00%".to_string()
        } else {
            format!("{:.2}%", a as f64 * 100.0 / b as f64)
        }
    };
    let signed_diff = |a: u64, b: u64| a as i64 - b as i64;
    let system = total_system_memory();
    field(out, "used_memory", used);
    field(out, "used_memory_human", bytes_to_human(used));
    field(out, "used_memory_rss", rss);
    field(out, "used_memory_rss_human", bytes_to_human(rss));
    field(out, "used_memory_peak", peak);
    field(out, "used_memory_peak_human", bytes_to_human(peak));
    field(out, "used_memory_peak_perc", percent(used, peak));
    field(out, "used_memory_overhead", overhead);
    field(out, "used_memory_startup", startup);
    field(out, "used_memory_dataset", dataset);
    field(out, "used_memory_dataset_perc", percent(dataset, net));
    field(out, "allocator_allocated", alloc.allocated);
    field(out, "allocator_active", alloc.active);
    field(out, "allocator_resident", alloc.resident);
    field(out, "total_system_memory", system);
    field(out, "total_system_memory_human", bytes_to_human(system));
    let scripting = crate::script::memory_info(shared);
    field(out, "used_memory_lua", scripting.lua);
    field(out, "used_memory_vm_eval", scripting.lua);
    field(
        out,
        "used_memory_lua_human",
        bytes_to_human(scripting.lua as u64),
    );
    field(out, "used_memory_scripts_eval", scripting.scripts);
    field(out, "number_of_cached_scripts", scripting.cached_scripts);
    field(out, "number_of_functions", scripting.functions_count);
    field(out, "number_of_libraries", scripting.libraries);
    field(out, "used_memory_vm_functions", 0);
    field(out, "used_memory_vm_total", scripting.lua);
    field(
        out,
        "used_memory_vm_total_human",
        bytes_to_human(scripting.lua as u64),
    );
    field(out, "used_memory_functions", scripting.functions);
    let script_bytes = (scripting.scripts + scripting.functions) as u64;
    field(out, "used_memory_scripts", script_bytes);
    field(
        out,
        "used_memory_scripts_human",
        bytes_to_human(script_bytes),
    );
    field(out, "maxmemory", maxmemory);
    field(out, "maxmemory_human", bytes_to_human(maxmemory));
    field(out, "maxmemory_policy", policy);
    field(
        out,
        "allocator_frag_ratio",
        ratio(alloc.active, alloc.allocated),
    );
    field(
        out,
        "allocator_frag_bytes",
        signed_diff(alloc.active, alloc.allocated),
    );
    field(
        out,
        "allocator_rss_ratio",
        ratio(alloc.resident, alloc.active),
    );
    field(
        out,
        "allocator_rss_bytes",
        signed_diff(alloc.resident, alloc.active),
    );
    field(out, "rss_overhead_ratio", ratio(rss, alloc.resident));
    field(out, "rss_overhead_bytes", signed_diff(rss, alloc.resident));
    field(out, "mem_fragmentation_ratio", ratio(rss, used));
    field(out, "mem_fragmentation_bytes", signed_diff(rss, used));
    field(out, "mem_not_counted_for_evict", 0);
    // One buffer holds the backlog and every replica's unsent output
    // (Redis 7.0's shared replication buffer), so the two are one figure.
    let repl_bytes = shared.replication.info().backlog_bytes;
    field(out, "mem_replication_backlog", repl_bytes);
    field(out, "mem_total_replication_buffers", repl_bytes);
    field(out, "mem_clients_slaves", 0);
    field(out, "mem_clients_normal", client_buffers);
    field(out, "mem_cluster_links", 0);
    field(out, "mem_aof_buffer", 0);
    field(out, "mem_allocator", allocator_name());
    field(out, "active_defrag_running", 0);
    // Large buffers handed to the lazyfree thread (docs/design.md,
    // "Large values").
    field(
        out,
        "lazyfree_pending_objects",
        cairn_engine::lazyfree::pending(),
    );
    let freed = cairn_engine::lazyfree::freed();
    let base = LAZYFREED_BASE.load(Ordering::Relaxed);
    field(out, "lazyfreed_objects", freed.saturating_sub(base));
}

/// `jemalloc-5.3.0`, as Redis names its allocator.
fn allocator_name() -> String {
    let v = tikv_jemalloc_ctl::version::read().unwrap_or("unknown");
    format!("jemalloc-{}", v.split('-').next().unwrap_or(v))
}

fn persistence_section(out: &mut String, shared: &Shared, totals: &Counters) {
    rdb_fields(out, shared, totals);
    aof_fields(out, shared);
}

/// Loading state and snapshot (`rdb_*`) fields: the snapshot work owns these.
fn rdb_fields(out: &mut String, shared: &Shared, _totals: &Counters) {
    crate::snapshots::info_fields(shared, &mut |name, value| field(out, name, value));
}

/// Journal (`aof_*`) fields: the journal work owns these.
/// (With `module_fork_*`, which Redis prints between them.)
fn aof_fields(out: &mut String, shared: &Shared) {
    crate::journal::info_fields(shared, &mut |name, value| field(out, name, value));
}

fn stats_section(out: &mut String, shared: &Shared, raw: &Counters, c: &Counters) {
    let (ops, in_kbps, out_kbps) = rates(shared, raw);
    field(out, "total_connections_received", c.connections);
    field(out, "total_commands_processed", c.commands);
    field(out, "instantaneous_ops_per_sec", ops);
    field(out, "total_net_input_bytes", c.net_in);
    field(out, "total_net_output_bytes", c.net_out);
    field(out, "total_net_repl_input_bytes", 0);
    field(out, "total_net_repl_output_bytes", 0);
    field(out, "instantaneous_input_kbps", format!("{in_kbps:.2}"));
    field(out, "instantaneous_output_kbps", format!("{out_kbps:.2}"));
    field(out, "instantaneous_input_repl_kbps", "0.00");
    field(out, "instantaneous_output_repl_kbps", "0.00");
    field(out, "rejected_connections", c.rejected_connections);
    let r = &shared.replication;
    field(out, "sync_full", r.sync_full.load(Ordering::Relaxed));
    field(
        out,
        "sync_partial_ok",
        r.sync_partial_ok.load(Ordering::Relaxed),
    );
    field(
        out,
        "sync_partial_err",
        r.sync_partial_err.load(Ordering::Relaxed),
    );
    field(out, "expired_keys", c.expired);
    field(out, "evicted_keys", c.evicted);
    field(out, "evicted_clients", 0);
    field(out, "total_eviction_exceeded_time", 0);
    field(out, "current_eviction_exceeded_time", 0);
    field(out, "keyspace_hits", c.hits);
    field(out, "keyspace_misses", c.misses);
    let ps = shared.pubsub.counts();
    field(out, "pubsub_channels", ps.channels);
    field(out, "pubsub_patterns", ps.patterns);
    field(out, "pubsubshard_channels", ps.shard_channels);
    field(out, "latest_fork_usec", 0);
    field(out, "total_forks", 0);
    // Cairn's own: images made for full syncs (one per cut, however many
    // replicas share it), where Redis counts the forks that make them.
    field(
        out,
        "repl_full_sync_images",
        crate::replication::shared_sync::IMAGES.load(Ordering::Relaxed),
    );
    field(out, "migrate_cached_sockets", 0);
    field(out, "slave_expires_tracked_keys", 0);
    field(out, "active_defrag_hits", 0);
    field(out, "active_defrag_misses", 0);
    field(out, "active_defrag_key_hits", 0);
    field(out, "active_defrag_key_misses", 0);
    field(out, "total_active_defrag_time", 0);
    field(out, "current_active_defrag_time", 0);
    let tracking = shared.tracking.stats();
    field(out, "tracking_total_keys", tracking.keys);
    field(out, "tracking_total_items", tracking.items);
    field(out, "tracking_total_prefixes", tracking.prefixes);
    field(out, "unexpected_error_replies", 0);
    field(out, "total_error_replies", c.error_replies);
    field(out, "dump_payload_sanitizations", 0);
    field(out, "io_threaded_reads_processed", 0);
    field(out, "io_threaded_writes_processed", 0);
}

/// Redis 7.0's master fields (replication.c `genRedisInfoString`), from
/// the replication stream's state (`crate::replication`).
fn replication_section(out: &mut String, shared: &Shared) {
    let r = shared.replication.info();
    let size = shared.config.read().repl_backlog_size;
    match crate::replication::replica::info_fields(shared) {
        Some(fields) => fields.iter().for_each(|(k, v)| field(out, k, v)),
        None => field(out, "role", "master"),
    }
    let replicas: Vec<_> = shared.replication.replicas.lock().clone();
    field(out, "connected_slaves", replicas.len());
    let min = shared.replication.min_to_write.load(Ordering::Relaxed);
    if min > 0 && shared.replication.min_max_lag.load(Ordering::Relaxed) > 0 {
        field(
            out,
            "min_slaves_good_slaves",
            shared.replication.good_replicas(),
        );
    }
    for (i, rep) in replicas.iter().enumerate() {
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
            rep.ip,
            rep.port,
            rep.state_name(),
            rep.ack_offset(),
            rep.lag_secs()
        );
    }
    field(
        out,
        "master_failover_state",
        crate::replication::failover::state_name(),
    );
    field(out, "master_replid", &r.replid);
    field(out, "master_replid2", &r.replid2);
    field(out, "master_repl_offset", r.offset);
    field(out, "second_repl_offset", r.second_offset);
    field(out, "repl_backlog_active", u8::from(r.backlog_active));
    field(out, "repl_backlog_size", size);
    field(out, "repl_backlog_first_byte_offset", r.backlog_first_byte);
    field(out, "repl_backlog_histlen", r.backlog_histlen);
}

fn cpu_section(out: &mut String) {
    let (sys, user) = crate::process::rusage(libc::RUSAGE_SELF);
    let (sys_children, user_children) = crate::process::rusage(libc::RUSAGE_CHILDREN);
    field(out, "used_cpu_sys", &sys);
    field(out, "used_cpu_user", &user);
    field(out, "used_cpu_sys_children", sys_children);
    field(out, "used_cpu_user_children", user_children);
    // Redis's main thread runs every command; in Cairn every worker does,
    // and RUSAGE_THREAD only measures the calling thread, so the
    // "main thread" figures are the process's.
    field(out, "used_cpu_sys_main_thread", sys);
    field(out, "used_cpu_user_main_thread", user);
}

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..`
/// for every command that ran or was refused since the last reset.
fn commandstats_section(out: &mut String, shared: &Shared, c: &Counters) {
    for (cmd, s) in shared.table.all().iter().zip(&c.cmd) {
        let [calls, usec, rejected, failed] = *s;
        if calls == 0 && rejected == 0 && failed == 0 {
            continue;
        }
        let per_call = if calls == 0 {
            0.0
        } else {
            usec as f64 / calls as f64
        };
        let _ = write!(
            out,
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
            cmd.name
        );
    }
}

/// `latency_percentiles_usec_<name>:p50=..,p99=..,p99.9=..` for every
/// command that ran since the last reset, at the percentiles of
/// `latency-tracking-info-percentiles`, in µs with three decimals
/// (server.c `fillPercentileDistributionLatencies`); nothing while
/// `latency-tracking` is off.
fn latencystats_section(out: &mut String, shared: &Shared) {
    let percentiles: Vec<f64> = {
        let c = shared.config.read();
        if !c.latency_tracking {
            return;
        }
        c.latency_tracking_info_percentiles
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    for cmd in shared.table.all() {
        let Some(h) = crate::cmdlatency::read(shared, cmd.id) else {
            continue;
        };
        let _ = write!(out, "latency_percentiles_usec_{}:", cmd.name);
        for (j, &p) in percentiles.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                "p{}={:.3}",
                crate::cmdlatency::percentile_label(p),
                h.value_at_percentile(p) as f64 / 1000.0
            );
        }
        out.push_str("\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::errorstats::record_error;

    #[test]
    fn human_sizes_match_redis() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1015160), "991.37K");
        assert_eq!(bytes_to_human(12296192), "11.73M");
        assert_eq!(bytes_to_human(25274793984), "23.54G");
    }

    #[test]
    fn selection_defaults_and_keywords() {
        let s = Selection::parse(std::iter::empty());
        assert!(s.wants("server") && s.wants("keyspace") && !s.wants("commandstats"));
        let s = Selection::parse([&b"CommandStats"[..]].into_iter());
        assert!(s.wants("commandstats") && !s.wants("server"));
        let s = Selection::parse([&b"everything"[..]].into_iter());
        assert!(s.wants("commandstats") && s.wants("server"));
        let s = Selection::parse([&b"default"[..], &b"commandstats"[..]].into_iter());
        assert!(s.wants("commandstats") && s.wants("server"));
    }

    #[test]
    fn error_codes_are_the_first_word() {
        record_error(
            5,
            b"WRONGTYPE Operation against a key holding the wrong kind of value",
        );
        record_error(6, b"WRONGTYPE x");
        record_error(5, b"nospace");
        record_error(5, b"ERR syntax error");
        record_error(5, b"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ later space");
        let mut out = String::new();
        errorstats_section(&mut out);
        assert!(out.contains("errorstat_WRONGTYPE:count=2\r\n"), "{out}");
        assert!(out.contains("errorstat_ERR:count="), "{out}");
        assert!(!out.contains("ABCDEF"), "{out}");
        let codes: Vec<&str> = out.lines().map(|l| l.split(':').next().unwrap()).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        assert_eq!(codes, sorted);
    }

    #[test]
    fn counters_subtract_baseline() {
        let now = Counters {
            commands: 10,
            cmd: vec![[5, 50, 1, 2], [3, 3, 0, 0]],
            ..Counters::default()
        };
        let base = Counters {
            commands: 4,
            cmd: vec![[5, 40, 1, 0]],
            ..Counters::default()
        };
        let d = now.minus(&Some(base));
        assert_eq!(d.commands, 6);
        assert_eq!(d.cmd, vec![[0, 10, 0, 2], [3, 3, 0, 0]]);
        assert_eq!(now.minus(&None).commands, 10);
    }
}
