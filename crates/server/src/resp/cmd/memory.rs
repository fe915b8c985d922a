//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP (issue 5),
//! after Redis 7.0's `memoryCommand` (object.c). The figures come from
//! `crate::memory` (jemalloc's per-thread counters: every live byte) and
//! from jemalloc's arena statistics.
use crate::exec::table::Def;
use crate::memory;
use crate::resp::cmd::reply_help;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::shared::Shared;
use cairn_engine::Cx;
use std::sync::atomic::Ordering;

/// The MEMORY container command and its subcommands.
pub const COMMANDS: &[Def] = &[Def::container(
    "memory",
    &[
        Def::new("doctor", doctor),
        Def::new("help", help),
        Def::new("malloc-stats", malloc_stats),
        Def::new("purge", purge),
        Def::new("stats", stats),
        Def::new("usage", usage),
    ],
)];

/// Bytes of one table slot (hash tag + entry pointer), the index's share
/// of a key; see engine/src/table.rs.
const SLOT_BYTES: u64 = 16;

/// MEMORY USAGE key [SAMPLES count] → integer bytes, or null if missing.
///
/// Redis estimates an aggregate from `count` sampled elements (default 5,
/// 0 = all). Cairn's values keep their heap size up to date as they
/// change, so the answer is the whole value's size at O(1) whatever the
/// count; SAMPLES is still parsed and checked as Redis does.
fn usage(ctx: &mut Ctx) -> CmdResult {
    let mut j = 3;
    while j < ctx.argc() {
        if crate::resp::args::is(ctx.arg(j), "samples") && j + 1 < ctx.argc() {
            let n = crate::resp::args::int(ctx.arg(j + 1))?;
            if n < 0 {
                return Err(CmdError::Syntax);
            }
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let size = {
        let mut g = e.lock(&ctx.cx, &k);
        g.peek_ref(ctx.db(), &k).map(|en| en.mem_bytes() as u64)
    };
    match size {
        Some(n) => ctx.int((n + SLOT_BYTES) as i64),
        None => ctx.null(),
    }
}

/// Everything MEMORY STATS and MEMORY DOCTOR report (Redis's
/// `struct redisMemOverhead`).
struct Overhead {
    peak: u64,
    used: u64,
    startup: u64,
    clients_normal: u64,
    clients: usize,
    /// (db, index bytes, keys) of every database holding keys.
    dbs: Vec<(usize, u64, u64)>,
    total: u64,
    keys: u64,
    dataset: u64,
    allocated: u64,
    active: u64,
    resident: u64,
    rss: u64,
}

impl Overhead {
    fn read(shared: &Shared, cx: &Cx) -> Overhead {
        use tikv_jemalloc_ctl::{epoch, stats};
        let used = shared.memory.refresh();
        let peak = (shared.memory.peak.load(Ordering::Relaxed) as u64).max(used);
        let startup = shared.memory.startup.load(Ordering::Relaxed) as u64;
        let (clients, clients_normal) = {
            let cl = shared.clients.lock();
            let bytes = cl
                .values()
                .map(|c| {
                    (c.qbuf.load(Ordering::Relaxed)
                        + c.qbuf_free.load(Ordering::Relaxed)
                        + c.omem.load(Ordering::Relaxed)) as u64
                })
                .sum();
            (cl.len(), bytes)
        };
        let n = shared.engine.databases();
        let mut index = vec![0u64; n];
        let mut keys = vec![0u64; n];
        shared.engine.for_each_shard_read(cx, |_, s| {
            for db in 0..n {
                let t = s.db(db);
                index[db] += t.index_bytes() as u64;
                keys[db] += t.len() as u64;
            }
        });
        let dbs: Vec<(usize, u64, u64)> = (0..n)
            .filter(|&d| keys[d] > 0)
            .map(|d| (d, index[d], keys[d]))
            .collect();
        let total = startup + clients_normal + index.iter().sum::<u64>();
        let _ = epoch::advance();
        Overhead {
            peak,
            used,
            startup,
            clients_normal,
            clients,
            total,
            keys: keys.iter().sum(),
            dataset: used.saturating_sub(total),
            dbs,
            allocated: stats::allocated::read().unwrap_or(0) as u64,
            active: stats::active::read().unwrap_or(0) as u64,
            resident: stats::resident::read().unwrap_or(0) as u64,
            rss: rss_bytes(),
        }
    }

    fn net(&self) -> u64 {
        self.used.saturating_sub(self.startup)
    }
}

/// Resident set size (`/proc/self/statm`, as Redis's `zmalloc_get_rss`).
fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * if page > 0 { page as u64 } else { 4096 }
}

/// `a / b` as Redis computes it: in `float`, 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f32 / b as f32) as f64
    }
}

fn diff(a: u64, b: u64) -> i64 {
    a as i64 - b as i64
}

/// MEMORY STATS → Redis's map of memory figures (RESP3 map, RESP2 flat
/// array), in Redis 7.0's order; a `db.N` entry for each database that
/// holds keys.
fn stats(ctx: &mut Ctx) -> CmdResult {
    let o = Overhead::read(ctx.shared, &ctx.cx);
    let net = o.net();
    let mut w = ctx.reply();
    w.map(27 + o.dbs.len());
    let int = |w: &mut cairn_protocol::resp::ReplyWriter, k: &str, v: i64| {
        w.bulk(k.as_bytes());
        w.int(v);
    };
    int(&mut w, "peak.allocated", o.peak as i64);
    int(&mut w, "total.allocated", o.used as i64);
    int(&mut w, "startup.allocated", o.startup as i64);
    int(&mut w, "replication.backlog", 0);
    int(&mut w, "clients.slaves", 0);
    int(&mut w, "clients.normal", o.clients_normal as i64);
    int(&mut w, "cluster.links", 0);
    int(&mut w, "aof.buffer", 0);
    int(&mut w, "lua.caches", 0);
    int(&mut w, "functions.caches", 0);
    for &(db, index, _) in &o.dbs {
        w.bulk(format!("db.{db}").as_bytes());
        w.map(3);
        int(&mut w, "overhead.hashtable.main", index as i64);
        // The expire time lives in the entry: no second table.
        int(&mut w, "overhead.hashtable.expires", 0);
        int(&mut w, "overhead.hashtable.slot-to-keys", 0);
    }
    int(&mut w, "overhead.total", o.total as i64);
    int(&mut w, "keys.count", o.keys as i64);
    int(
        &mut w,
        "keys.bytes-per-key",
        net.checked_div(o.keys).unwrap_or(0) as i64,
    );
    int(&mut w, "dataset.bytes", o.dataset as i64);
    let dbl = |w: &mut cairn_protocol::resp::ReplyWriter, k: &str, v: f64| {
        w.bulk(k.as_bytes());
        w.double(v);
    };
    dbl(&mut w, "dataset.percentage", ratio(o.dataset * 100, net));
    dbl(&mut w, "peak.percentage", ratio(o.used * 100, o.peak));
    int(&mut w, "allocator.allocated", o.allocated as i64);
    int(&mut w, "allocator.active", o.active as i64);
    int(&mut w, "allocator.resident", o.resident as i64);
    dbl(
        &mut w,
        "allocator-fragmentation.ratio",
        ratio(o.active, o.allocated),
    );
    int(
        &mut w,
        "allocator-fragmentation.bytes",
        diff(o.active, o.allocated),
    );
    dbl(&mut w, "allocator-rss.ratio", ratio(o.resident, o.active));
    int(&mut w, "allocator-rss.bytes", diff(o.resident, o.active));
    dbl(&mut w, "rss-overhead.ratio", ratio(o.rss, o.resident));
    int(&mut w, "rss-overhead.bytes", diff(o.rss, o.resident));
    dbl(&mut w, "fragmentation", ratio(o.rss, o.used));
    int(&mut w, "fragmentation.bytes", diff(o.rss, o.used));
    Ok(())
}

/// Redis 7.0's doctor texts (object.c `getMemoryDoctorReport`), for the
/// conditions Cairn can see (no replicas, no scripts).
mod texts {
    pub const EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n";
    pub const FINE: &str = "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n";
    pub const HEAD: &str =
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n";
    pub const PEAK: &str = " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n";
    pub const FRAG: &str = " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"";
    pub const ALLOC_FRAG: &str = " * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n";
    pub const ALLOC_RSS: &str = " * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n";
    pub const PROC_RSS: &str = " * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n";
    pub const CLIENTS: &str = " * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n";
    pub const TAIL: &str = "I'm here to keep you safe, Sam. I want to help you.\n";
}

/// The report, from the figures (Redis's thresholds).
fn doctor_report(o: &Overhead, allocator: &str) -> String {
    const MB10: u64 = 10 << 20;
    if o.used < 5 << 20 {
        return texts::EMPTY.into();
    }
    let over = |r: f64, bytes: i64| r > 1.1 && bytes > MB10 as i64;
    let big_peak = ratio(o.peak, o.used) > 1.5;
    let high_frag = ratio(o.rss, o.used) > 1.4 && diff(o.rss, o.used) > MB10 as i64;
    let alloc_frag = over(ratio(o.active, o.allocated), diff(o.active, o.allocated));
    let alloc_rss = over(ratio(o.resident, o.active), diff(o.resident, o.active));
    let proc_rss = over(ratio(o.rss, o.resident), diff(o.rss, o.resident));
    let big_clients = o.clients > 0 && o.clients_normal / o.clients as u64 > 200 * 1024;
    if !(big_peak || high_frag || alloc_frag || alloc_rss || proc_rss || big_clients) {
        return texts::FINE.into();
    }
    let mut s = String::from(texts::HEAD);
    if big_peak {
        s.push_str(texts::PEAK);
    }
    if high_frag {
        s.push_str(texts::FRAG);
        s.push_str(allocator);
        s.push_str("\".\n\n");
    }
    if alloc_frag {
        s.push_str(texts::ALLOC_FRAG);
    }
    if alloc_rss {
        s.push_str(texts::ALLOC_RSS);
    }
    if proc_rss {
        s.push_str(texts::PROC_RSS);
    }
    if big_clients {
        s.push_str(texts::CLIENTS);
    }
    s.push_str(texts::TAIL);
    s
}

/// MEMORY DOCTOR → verbatim text (RESP2 bulk).
fn doctor(ctx: &mut Ctx) -> CmdResult {
    let o = Overhead::read(ctx.shared, &ctx.cx);
    let v = tikv_jemalloc_ctl::version::read().unwrap_or("unknown");
    let allocator = format!("jemalloc-{}", v.split('-').next().unwrap_or(v));
    let report = doctor_report(&o, &allocator);
    ctx.reply().verbatim("txt", report.as_bytes());
    Ok(())
}

/// MEMORY MALLOC-STATS → jemalloc's statistics text (verbatim).
fn malloc_stats(ctx: &mut Ctx) -> CmdResult {
    let text = memory::malloc_stats();
    ctx.reply().verbatim("txt", &text);
    Ok(())
}

/// MEMORY PURGE → OK, after asking jemalloc to return dirty pages.
fn purge(ctx: &mut Ctx) -> CmdResult {
    memory::purge();
    ctx.ok()
}

fn help(ctx: &mut Ctx) -> CmdResult {
    const LINES: &[&str] = &[
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
    ];
    reply_help(ctx, LINES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(used: u64) -> Overhead {
        Overhead {
            peak: used,
            used,
            startup: 1 << 20,
            clients_normal: 0,
            clients: 1,
            dbs: Vec::new(),
            total: 1 << 20,
            keys: 0,
            dataset: used - (1 << 20),
            allocated: used,
            active: used,
            resident: used,
            rss: used,
        }
    }

    #[test]
    fn doctor_texts_follow_the_conditions() {
        assert_eq!(doctor_report(&figures(1 << 20), "je"), texts::EMPTY);
        assert_eq!(doctor_report(&figures(100 << 20), "je"), texts::FINE);
        let mut o = figures(100 << 20);
        o.peak = 200 << 20;
        o.rss = 300 << 20;
        o.resident = 110 << 20;
        let r = doctor_report(&o, "jemalloc-5.3.0");
        assert!(r.starts_with(texts::HEAD));
        assert!(r.contains(" * Peak memory:"));
        assert!(r.contains("The currently used allocator is \"jemalloc-5.3.0\".\n\n"));
        assert!(r.contains(" * High process RSS overhead"));
        assert!(!r.contains("High allocator RSS"), "10 MB is not over 10 MB");
        assert!(r.ends_with(texts::TAIL));
    }

    #[test]
    fn ratios_are_float_like_redis() {
        // Redis keeps these in `float`: 1/3 prints as 0.3333333432674408.
        assert_eq!(ratio(1, 3), (1.0f32 / 3.0f32) as f64);
        assert_eq!(ratio(5, 0), 0.0);
    }
}
