//! `stats`, `stats settings`, `stats items`, `stats slabs`, `stats reset`,
//! with Cairn's real figures. memcached's names are kept for what Cairn
//! has; what it has not (slab classes, LRU segments, libevent, the hash
//! table's power level...) is left out rather than made up. The
//! differences are listed in tests/memcache_diff/DIFFERENCES.md.
use super::{Ctx, DB};
use crate::shared::Shared;
use cairn_protocol::memcache::Words;
use std::sync::atomic::{AtomicU64, Ordering};

/// One counter of `stats`.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub enum Stat {
    CmdGet,
    CmdSet,
    CmdFlush,
    CmdTouch,
    CmdMeta,
    GetHits,
    GetMisses,
    DeleteMisses,
    DeleteHits,
    IncrMisses,
    IncrHits,
    DecrMisses,
    DecrHits,
    CasMisses,
    CasHits,
    CasBadval,
    TouchHits,
    TouchMisses,
    StoreTooLarge,
    StoreNoMemory,
    AuthCmds,
    AuthErrors,
    BytesRead,
    BytesWritten,
    TotalItems,
}

const COUNT: usize = Stat::TotalItems as usize + 1;

/// The general counters, in memcached's order, with its names.
const NAMES: [(&str, Stat); 19] = [
    ("cmd_get", Stat::CmdGet),
    ("cmd_set", Stat::CmdSet),
    ("cmd_flush", Stat::CmdFlush),
    ("cmd_touch", Stat::CmdTouch),
    ("cmd_meta", Stat::CmdMeta),
    ("get_hits", Stat::GetHits),
    ("get_misses", Stat::GetMisses),
    ("delete_misses", Stat::DeleteMisses),
    ("delete_hits", Stat::DeleteHits),
    ("incr_misses", Stat::IncrMisses),
    ("incr_hits", Stat::IncrHits),
    ("decr_misses", Stat::DecrMisses),
    ("decr_hits", Stat::DecrHits),
    ("cas_misses", Stat::CasMisses),
    ("cas_hits", Stat::CasHits),
    ("cas_badval", Stat::CasBadval),
    ("touch_hits", Stat::TouchHits),
    ("touch_misses", Stat::TouchMisses),
    ("store_too_large", Stat::StoreTooLarge),
];

/// Counters of one worker. Only that worker writes them (a load and a
/// store, no atomic read-modify-write on the request path); `stats` sums
/// the workers'.
pub struct McStats {
    c: [AtomicU64; COUNT],
}

impl Default for McStats {
    fn default() -> Self {
        McStats {
            c: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl McStats {
    pub fn add(&self, s: Stat, n: u64) {
        crate::shared::bump(&self.c[s as usize], n);
    }

    pub fn inc(&self, s: Stat) {
        self.add(s, 1);
    }
}

/// The sum of counter `s` over every worker.
fn total(shared: &Shared, s: Stat) -> u64 {
    shared
        .memcache
        .stats
        .iter()
        .map(|w| w.c[s as usize].load(Ordering::Relaxed))
        .sum()
}

/// `stats [group]`.
pub fn command(cx: &mut Ctx, mut args: Words) {
    let mut out = String::new();
    match args.next() {
        None => general(cx.shared, &mut out),
        Some(b"reset") => {
            for w in cx.shared.memcache.stats.iter() {
                for c in &w.c {
                    c.store(0, Ordering::Relaxed);
                }
            }
            cx.line("RESET");
            return;
        }
        Some(b"settings") => settings(cx.shared, &mut out),
        Some(b"items") => items(cx.shared, &mut out),
        Some(b"slabs") => slabs(cx.shared, &mut out),
        // Prefix statistics, item dumps, size histograms, per-connection
        // listings: not kept by Cairn. memcached answers an unknown group
        // this way.
        Some(_) => {
            cx.line(super::errors::UNKNOWN_STATS_GROUP);
            return;
        }
    }
    out.push_str("END\r\n");
    cx.out.extend_from_slice(out.as_bytes());
}

fn stat(out: &mut String, name: &str, value: impl std::fmt::Display) {
    use std::fmt::Write;
    let _ = write!(out, "STAT {name} {value}\r\n");
}

fn general(shared: &Shared, out: &mut String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (sys, user) = crate::process::rusage(libc::RUSAGE_SELF);
    stat(out, "pid", std::process::id());
    stat(out, "uptime", shared.started.elapsed().as_secs());
    stat(out, "time", now);
    stat(out, "version", super::version());
    stat(out, "pointer_size", usize::BITS);
    stat(out, "rusage_user", user);
    stat(out, "rusage_system", sys);
    let h = &shared.hot;
    stat(out, "max_connections", h.maxclients.load(Ordering::Relaxed));
    // Both protocols' clients: they share maxclients.
    stat(
        out,
        "curr_connections",
        shared.connected.load(Ordering::Relaxed),
    );
    stat(
        out,
        "total_connections",
        shared.total_connections.load(Ordering::Relaxed),
    );
    stat(
        out,
        "rejected_connections",
        shared.rejected_connections.load(Ordering::Relaxed),
    );
    for (name, s) in NAMES {
        stat(out, name, total(shared, s));
    }
    stat(out, "store_no_memory", total(shared, Stat::StoreNoMemory));
    stat(out, "auth_cmds", total(shared, Stat::AuthCmds));
    stat(out, "auth_errors", total(shared, Stat::AuthErrors));
    stat(out, "bytes_read", total(shared, Stat::BytesRead));
    stat(out, "bytes_written", total(shared, Stat::BytesWritten));
    stat(out, "limit_maxbytes", h.maxmemory.load(Ordering::Relaxed));
    stat(out, "accepting_conns", 1);
    stat(out, "threads", shared.worker_stats.len());
    // Cairn's whole allocation (jemalloc), not only item bytes.
    stat(out, "bytes", crate::memory::used_exact());
    stat(
        out,
        "curr_items",
        shared.engine.db_counts(&cairn_engine::Cx::DETACHED, DB).0,
    );
    stat(out, "total_items", total(shared, Stat::TotalItems));
    // Keys evicted under maxmemory (every database: one counter).
    stat(
        out,
        "evictions",
        crate::memory::evicted_total(shared, &cairn_engine::Cx::DETACHED),
    );
}

fn settings(shared: &Shared, out: &mut String) {
    let cfg = shared.config.read();
    stat(out, "maxbytes", cfg.maxmemory);
    stat(out, "maxconns", cfg.maxclients);
    stat(out, "tcpport", cfg.memcached_port);
    stat(out, "udpport", 0);
    stat(out, "inter", cfg.bind.join(","));
    stat(
        out,
        "verbosity",
        shared.memcache.verbosity.load(Ordering::Relaxed),
    );
    // memcached's -M turns evictions off; Cairn's switch is the policy.
    let evicts = cfg.maxmemory_policy != crate::config::MaxmemoryPolicy::Noeviction;
    stat(out, "evictions", if evicts { "on" } else { "off" });
    stat(out, "domain_socket", "NULL");
    stat(out, "num_threads", shared.worker_stats.len());
    stat(out, "cas_enabled", "yes");
    stat(out, "tcp_backlog", cfg.tcp_backlog);
    stat(out, "binding_protocol", "ascii");
    stat(out, "auth_enabled_sasl", "no");
    stat(
        out,
        "auth_enabled_ascii",
        if cfg.requirepass.is_empty() {
            "no"
        } else {
            "yes"
        },
    );
    stat(out, "item_size_max", cfg.proto_max_bulk_len);
    stat(out, "flush_enabled", "yes");
    stat(out, "idle_timeout", cfg.timeout);
}

/// One pseudo slab class holding every item of database 0.
fn items(shared: &Shared, out: &mut String) {
    let n = shared.engine.db_counts(&cairn_engine::Cx::DETACHED, DB).0;
    if n == 0 {
        return;
    }
    stat(out, "items:1:number", n);
    stat(
        out,
        "items:1:evicted",
        crate::memory::evicted_total(shared, &cairn_engine::Cx::DETACHED),
    );
    stat(
        out,
        "items:1:outofmemory",
        total(shared, Stat::StoreNoMemory),
    );
}

/// Cairn has no slabs: values are allocated by jemalloc one by one.
fn slabs(_shared: &Shared, out: &mut String) {
    stat(out, "active_slabs", 0);
    stat(out, "total_malloced", crate::memory::used_exact());
}
