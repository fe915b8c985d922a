//! Debian's `redis-sentinel` (7.0) for sentinel.rs (issue 24 item 4):
//! finding it, starting one on a free port from its own config file (it
//! rewrites that file as it learns the set), and asking it where the
//! master is. Each runs as a [`Server`], so a failing test kills it.
//! `scripts/install_test_clients.sh` installs the package.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{free_port, spawn_logged, Server};

/// `$REDIS_SENTINEL` or `redis-sentinel` on PATH. `None` outside CI when
/// absent (the caller skips and says so); in CI a missing one fails.
pub fn sentinel_path() -> Option<PathBuf> {
    let found = std::env::var_os("REDIS_SENTINEL")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("redis-sentinel"))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        let msg = "redis-sentinel is not installed (apt-get install -y redis-sentinel, \
                   or scripts/install_test_clients.sh)";
        if std::env::var_os("CI").is_some() {
            panic!("{msg}");
        }
        eprintln!("{msg}; skipping");
    }
    found
}

/// Timing for a fast test: down after 2 s (1 s made a loaded machine's
/// slow PING replies look like a dead master, and Sentinel then fails
/// over a live one), a failover retried after 2 x 3 s, every replica
/// reconfigured at once.
pub const FAST: &[&str] = &[
    "down-after-milliseconds m 2000",
    "failover-timeout m 3000",
    "parallel-syncs m 2",
];

/// A sentinel monitoring master `m` at 127.0.0.1:`master_port` with quorum
/// `quorum`, its config and working directory in `dir`.
pub fn start_sentinel(bin: &Path, dir: &Path, master_port: u16, quorum: u32) -> Server {
    let mut last_log = String::new();
    for _attempt in 0..5 {
        let port = free_port();
        let conf = dir.join(format!("sentinel-{port}.conf"));
        let mut text = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nloglevel verbose\n\
             sentinel monitor m 127.0.0.1 {master_port} {quorum}\n",
            dir.display()
        );
        for line in FAST {
            text.push_str(&format!("sentinel {line}\n"));
        }
        std::fs::write(&conf, text).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg(&conf);
        let (child, log_path) = spawn_logged(cmd, "sentinel")
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let mut server = Server {
            port,
            child,
            log_path,
            name: "redis-sentinel",
            scratch: None,
        };
        if server.answers_ping() {
            return server;
        }
        last_log = server.log();
    }
    panic!("redis-sentinel did not start after 5 attempts; last output:\n{last_log}");
}

/// A redis-server started from `conf` (so CONFIG REWRITE has a file), on
/// `port`, in the foreground.
pub fn start_redis_conf(bin: &Path, conf: &Path, port: u16) -> Server {
    let mut cmd = Command::new(bin);
    cmd.arg(conf)
        .args(["--port", &port.to_string(), "--daemonize", "no"]);
    let (child, log_path) =
        spawn_logged(cmd, "redis").unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let mut server = Server {
        port,
        child,
        log_path,
        name: "redis-server",
        scratch: None,
    };
    if server.answers_ping() {
        return server;
    }
    panic!(
        "redis-server {} did not start:\n{}",
        conf.display(),
        server.log()
    );
}

/// A port nobody listens on now, for a server that must come back on the
/// same port after a kill (Sentinel knows instances by address).
pub fn fixed_port() -> u16 {
    free_port()
}
