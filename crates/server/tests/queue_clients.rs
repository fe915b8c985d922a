//! Issue 22 through real clients: BullMQ (Node.js), python-rq (a program of
//! ours and rq's own test suite) and redis-py's RESP3 client-side caching.
//! BullMQ and rq keep their job events and results in streams (XADD inside
//! scripts and MULTI, XREAD BLOCK, XREVRANGE) and redis-py's cache lives on
//! CLIENT TRACKING's invalidation pushes, so these are what "streams and
//! client-side caching work" means to a user.
//!
//! The programs are in `tests/clients/` (`bullmq/check.js`, `rq_check.py`,
//! `client_cache.py`, `rq_suite.sh`), installed and pinned by
//! `scripts/install_test_clients.sh`; `support/clients.rs` runs them, each
//! against its own server, with a timeout, in its own process group.
//!
//! Environment (besides `support/clients.rs`'s `CAIRN_CLIENTS_TARGET`,
//! `CAIRN_CLIENTS_VENV`, `CAIRN_CLIENTS_NODE`, `CAIRN_CLIENTS_RQ_SRC`, `CI`):
//! - `CAIRN_RQ_SUITE=full` runs rq's whole suite, not the default subset
//!   (`tests/clients/rq_suite_deselect.txt` lists what the subset leaves out
//!   and why); `CAIRN_RQ_PYTEST_ARGS` passes extra arguments to its pytest.
//!
//! All four pass against redis-server 7.0.15 (`CAIRN_CLIENTS_TARGET=redis`).
//! Against Cairn they need issue 22's streams and tracking: run them with
//! `cargo test -p cairn-server --test queue_clients` once those are merged.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use support::clients::{
    client_command, clients_dir, command_calls, expect_success, install_dir, missing, python,
    start_target, target, Target, REDIS_NEEDED,
};

/// Longest one of our client programs may run; each takes under 5 s against
/// redis-server, and bounds its own waits well inside this.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest rq's default subset may run: about 100 s against redis-server on
/// a loaded 2-core machine.
const RQ_SUITE_TIMEOUT: Duration = Duration::from_secs(240);
/// rq's whole suite (`CAIRN_RQ_SUITE=full`): about 4 minutes there.
const RQ_FULL_SUITE_TIMEOUT: Duration = Duration::from_secs(900);

/// True when `program --version`-style `args` runs and exits 0.
fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `args` (a program in tests/clients) through the venv's Python
/// against a fresh server; returns the server for checks of what it saw.
fn run_python(name: &str, modules: &str, args: &[&str]) -> Option<support::Server> {
    let py = python(modules)?;
    let server = start_target();
    let url = format!("redis://127.0.0.1:{}/0", server.port);
    let run = expect_success(
        name,
        Some(&server),
        client_command(&py, args, &url),
        CLIENT_TIMEOUT,
    );
    eprintln!(
        "queue_clients: {name} passed against {:?} in {:.1} s:\n{}",
        target(),
        run.elapsed.as_secs_f64(),
        run.output.trim_end()
    );
    Some(server)
}

/// BullMQ's Queue, Worker, QueueEvents and FlowProducer: plain, delayed,
/// retried, rate-limited and parent/child jobs all finish.
#[test]
fn bullmq() {
    let node_modules =
        install_dir("CAIRN_CLIENTS_NODE", "target/clients-node").join("node_modules");
    if !runs("node", &["--version"]) || !node_modules.join("bullmq/package.json").is_file() {
        missing::<()>(&format!(
            "BullMQ (node and {})",
            node_modules.join("bullmq").display()
        ));
        return;
    }
    let server = start_target();
    let url = format!("redis://127.0.0.1:{}/0", server.port);
    let mut cmd = client_command(Path::new("node"), &["bullmq/check.js"], &url);
    cmd.env("NODE_PATH", &node_modules);
    let run = expect_success("BullMQ", Some(&server), cmd, CLIENT_TIMEOUT);
    // What makes BullMQ a test of issue 22: its scripts log every job event
    // to a stream and QueueEvents blocks reading it.
    let scripts = command_calls(&server, &["evalsha", "eval"]);
    let xadds = command_calls(&server, &["xadd"]);
    let xreads = command_calls(&server, &["xread"]);
    assert!(
        scripts > 0 && xadds > 0 && xreads > 0,
        "BullMQ passed without scripts and streams ({scripts} EVAL/EVALSHA, {xadds} XADD, {xreads} XREAD calls); its output:\n{}",
        run.output
    );
    eprintln!(
        "queue_clients: BullMQ passed against {:?} in {:.1} s ({scripts} script, {xadds} XADD, {xreads} XREAD calls):\n{}",
        target(),
        run.elapsed.as_secs_f64(),
        run.output.trim_end()
    );
}

/// python-rq as a user meets it: enqueue, a burst worker, return values,
/// result TTL, the failed-job registry with the exception text, and a
/// blocking wait for a result that a worker process writes.
#[test]
fn rq_jobs() {
    let Some(server) = run_python("python-rq", "redis, rq", &["rq_check.py"]) else {
        return;
    };
    let xadds = command_calls(&server, &["xadd"]);
    assert!(xadds > 0, "rq stored its results without XADD");
}

/// redis-py's client-side cache (RESP3, CLIENT TRACKING): local hits, and
/// invalidation by another connection's write, FLUSHALL and expiry.
#[test]
fn redis_py_client_side_caching() {
    run_python(
        "redis-py client-side caching",
        "redis",
        &["client_cache.py"],
    );
}

/// The server command line for rq's suite: port 6379 (rq's tests connect
/// there and to nothing else), inside rq_suite.sh's network namespace.
fn rq_suite_server() -> Vec<String> {
    let mut cmd: Vec<String> = match target() {
        Target::Cairn => vec![env!("CARGO_BIN_EXE_cairn").into()],
        Target::Redis => {
            let bin = support::redis_server_path().expect(REDIS_NEEDED);
            vec![
                bin.display().to_string(),
                "--save".into(),
                "".into(),
                "--appendonly".into(),
                "no".into(),
            ]
        }
    };
    cmd.extend(["--port", "6379", "--bind", "127.0.0.1"].map(String::from));
    cmd
}

/// python-rq's own test suite, from its sdist, against a server on
/// 127.0.0.1:6379 in a private network namespace (rq_suite.sh).
#[test]
fn rq_test_suite() {
    let Some(py) = python("redis, rq, pytest, psutil") else {
        return;
    };
    let rq_src = install_dir("CAIRN_CLIENTS_RQ_SRC", "target/rq-src");
    let suite: Option<PathBuf> = std::fs::read_dir(&rq_src)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("tests/__init__.py").is_file());
    let Some(suite) = suite else {
        missing::<()>(&format!(
            "python-rq's sdist (unpacked under {})",
            rq_src.display()
        ));
        return;
    };
    if !runs("unshare", &["--version"]) || !runs("ip", &["-V"]) {
        missing::<()>("unshare (util-linux) and ip (iproute2)");
        return;
    }
    let full = std::env::var("CAIRN_RQ_SUITE").as_deref() == Ok("full");
    let timeout = if full {
        RQ_FULL_SUITE_TIMEOUT
    } else {
        RQ_SUITE_TIMEOUT
    };
    let mut cmd = Command::new("bash");
    cmd.arg(clients_dir().join("rq_suite.sh"))
        .arg(&py)
        .arg(&suite)
        .arg("--")
        .args(rq_suite_server())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let run = expect_success("python-rq's test suite", None, cmd, timeout);
    let summary: Vec<&str> = run
        .output
        .lines()
        .filter(|l| l.starts_with("rq_suite:") || l.contains(" passed"))
        .collect();
    eprintln!(
        "queue_clients: python-rq's test suite passed against {:?} in {:.1} s:\n{}",
        target(),
        run.elapsed.as_secs_f64(),
        summary.join("\n")
    );
}
