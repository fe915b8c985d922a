//! `cairn`: a Redis-compatible data store. Starts like `redis-server`:
//! `cairn [config-file] [--directive value ...]`.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's start-up options (read once, before the first allocation;
/// `_RJEM_MALLOC_CONF` in the environment still overrides them).
///
/// `narenas:1`: every thread allocates from one arena. jemalloc's default
/// gives each thread one of 4 x cores arenas, each with its own partly
/// used slabs and dirty pages; Cairn's values are made by one thread (the
/// worker that parsed them) and freed by another (the tier's mover, a
/// worker overwriting, lazyfree), so with several arenas a freed slot
/// waits in an arena nobody allocates from. In E4 (a 1 GiB maxmemory
/// with the tier moving ~120,000 values/s to disk) that held 150-320 MB
/// of RSS above used_memory once a second worker joined; with one arena,
/// 60 MB. One arena costs nothing measurable at 2 workers (redis-benchmark
/// -P 16, 50 clients, 5 rounds: SET/GET 915k/995k against 875k/879k with
/// the default arenas). docs/design.md, "Allocator arenas".
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"narenas:1\0";

mod auth;
mod blocking;
mod client;
mod cluster;
mod cmdlatency;
mod config;
mod exec;
mod journal;
mod keyevents;
mod latency;
#[cfg(test)]
mod layout;
mod log;
mod memcache;
mod memory;
mod net;
mod outref;
mod process;
mod pubsub;
#[cfg(test)]
mod readme;
// The backlog is created by the first replica's PSYNC, the next step of
// issue 24 (docs/design.md, "Replication"); until then only tests reach
// `create_backlog` and the readers.
#[allow(dead_code)]
mod replication;
mod resp;
mod script;
mod served;
mod server;
mod shared;
mod slowlog;
mod snapshots;
mod tier;
mod tier_io;
mod tracking;
mod util;
mod zcoder;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("--help" | "-h") => {
            print!("{}", config::usage());
            return;
        }
        Some("check-journal") => std::process::exit(journal::check::run(&argv[1..])),
        Some("check-snapshot") => std::process::exit(check_snapshot(&argv[1..])),
        Some("--version" | "-v") => {
            println!(
                "Cairn server v={VERSION} redis-compat={} malloc=jemalloc bits={}",
                exec::meta::REDIS_VERSION,
                usize::BITS
            );
            return;
        }
        _ => {}
    }
    let mut cfg = match config::load(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    // Before daemonizing: a supervised server stays in the foreground.
    let (mode, supervised) = process::supervise(cfg.supervised);
    cfg.supervised = mode;
    if cfg.daemonize && !supervised {
        // As Redis: a daemon always has a pid file.
        if cfg.pidfile.is_empty() {
            cfg.pidfile = process::DEFAULT_PIDFILE.to_string();
        }
        // Before any thread exists (see `process::daemonize`).
        if let Err(e) = process::daemonize() {
            eprintln!("Can't daemonize: {e}");
            std::process::exit(1);
        }
    }
    if let Err(e) = server::run(cfg) {
        log::warning(&e);
        std::process::exit(1);
    }
}

/// `cairn check-snapshot FILE`: reads and verifies a snapshot file (every
/// checksum, every record, the end counts; or a Redis RDB file, by its
/// magic) without loading it, and says
/// what it holds or where and why it is damaged. Exit status 0 if good.
fn check_snapshot(args: &[String]) -> i32 {
    let [file] = args else {
        eprintln!("Usage: cairn check-snapshot FILE");
        return 2;
    };
    let path = std::path::Path::new(file);
    if cairn_persist::rdb::file::is_rdb(path) {
        return match cairn_persist::rdb::file::check(path) {
            Ok(s) => {
                println!(
                    "{file}: OK: RDB file, {} keys, {} functions, {} bytes",
                    s.keys,
                    s.functions.len(),
                    s.bytes
                );
                0
            }
            Err(e) => {
                println!("{e}");
                1
            }
        };
    }
    match cairn_persist::snapshot::check(path) {
        Ok(s) => {
            println!(
                "{file}: OK: {} keys in {} blocks, {} bytes, cut at unix ms {}",
                s.keys, s.blocks, s.bytes, s.cut_ms
            );
            0
        }
        Err(e) => {
            println!("{e}");
            1
        }
    }
}
