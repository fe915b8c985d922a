//! Running real third-party client programs (Python, Ruby, Node.js) against
//! a server, for scripting_clients.rs (issue 21) and queue_clients.rs
//! (issue 22): which server they target, where the installed clients live,
//! and a runner that bounds a program's time and kills everything it
//! started. The programs themselves are in `tests/clients/`; each takes the
//! server's URL, exits 0 when its checks passed and prints what failed.
//! `scripts/install_test_clients.sh` installs the clients, all pinned.
//!
//! Environment:
//! - `CAIRN_CLIENTS_TARGET=redis` runs against a reference redis-server
//!   (how the programs were validated); `cairn` or unset runs against Cairn.
//! - `CAIRN_CLIENTS_VENV`, `CAIRN_CLIENTS_NODE`, `CAIRN_CLIENTS_RQ_SRC`: where
//!   the install script put the Python venv, BullMQ's node_modules and
//!   python-rq's unpacked sdist (defaults under `target/`).
//! - `CI`: a missing client fails instead of skipping, as a missing
//!   redis-server does in diff.rs.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{q, redis_client, Server};

pub const INSTALL_HINT: &str = "run scripts/install_test_clients.sh (scripts/test runs it)";

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    Cairn,
    Redis,
}

pub fn target() -> Target {
    match std::env::var("CAIRN_CLIENTS_TARGET").as_deref() {
        Err(_) | Ok("") | Ok("cairn") => Target::Cairn,
        Ok("redis") => Target::Redis,
        Ok(other) => panic!("CAIRN_CLIENTS_TARGET={other:?}: expected `cairn` or `redis`"),
    }
}

/// A fresh server of the chosen target on an ephemeral port.
pub fn start_target() -> Server {
    match target() {
        Target::Cairn => super::start_cairn(&[]),
        Target::Redis => super::start_redis(&[]).expect(REDIS_NEEDED),
    }
}

pub const REDIS_NEEDED: &str =
    "CAIRN_CLIENTS_TARGET=redis needs redis-server (PATH or $REDIS_SERVER; apt-get install -y redis-server)";

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn clients_dir() -> PathBuf {
    repo_root().join("tests/clients")
}

/// `$var`, or `default` under the repository root.
pub fn install_dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(default))
}

/// `None` (a skip) when a client is missing outside CI; in CI a failure.
pub fn missing<T>(what: &str) -> Option<T> {
    let msg = format!("{what} is not installed; {INSTALL_HINT}");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("{msg}; skipping");
    None
}

/// The venv's interpreter, once it imports every module in `modules`
/// (comma-separated, as in a Python `import` statement).
pub fn python(modules: &str) -> Option<PathBuf> {
    let venv = install_dir("CAIRN_CLIENTS_VENV", "target/clients-venv");
    let py = venv.join("bin/python");
    let imports = Command::new(&py)
        .args(["-c", &format!("import {modules}")])
        .stdin(Stdio::null())
        .output();
    match imports {
        Ok(out) if out.status.success() => Some(py),
        _ => missing(&format!(
            "the Python clients venv ({}: {modules})",
            venv.display()
        )),
    }
}

/// Kills a whole process group when dropped: the client program and any
/// worker it started, even if the test panics or the program hangs.
struct Group(libc::pid_t);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals the group we created
        // with process_group(0); ESRCH (already gone) is fine. The kernel
        // keeps a group id from reuse while any member lives, so after the
        // leader is reaped this still reaches only its leftover workers.
        unsafe {
            libc::kill(-self.0, libc::SIGKILL);
        }
    }
}

pub struct Run {
    pub status: Option<ExitStatus>,
    pub output: String,
    pub elapsed: Duration,
}

/// Runs `cmd` with a timeout, stdout and stderr merged into one log.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Run {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let log_path = std::env::temp_dir().join(format!(
        "cairn-client-{}-{}.log",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let log = File::create(&log_path).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let group = Group(child.id() as libc::pid_t);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() >= timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    drop(group);
    let _ = child.wait();
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_file(&log_path);
    Run {
        status,
        output,
        elapsed,
    }
}

/// `program args... URL` in tests/clients, with the URL also in
/// `$CAIRN_CLIENTS_URL`.
pub fn client_command(program: &Path, args: &[&str], url: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .arg(url)
        .current_dir(clients_dir())
        .env("CAIRN_CLIENTS_URL", url)
        // Print as it goes, so a timeout shows how far it got; and leave no
        // __pycache__ in the source tree.
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// Runs `cmd` and panics, with its output and the server's log (when the
/// server is one of ours), unless it exits 0 within `timeout`.
pub fn expect_success(name: &str, server: Option<&Server>, cmd: Command, timeout: Duration) -> Run {
    let run = run_with_timeout(cmd, timeout);
    let failed = match run.status {
        Some(st) if st.success() => None,
        Some(st) => Some(format!("exited with {st}")),
        None => Some(format!("timed out after {timeout:?}")),
    };
    if let Some(why) = failed {
        let log = server
            .map(|s| format!("\n--- server log (last 30 lines):\n{}", s.log_tail(30)))
            .unwrap_or_default();
        panic!(
            "{name} against {:?} {why}; its output:\n{}{log}",
            target(),
            run.output,
        );
    }
    run
}

/// Sum of the calls of the commands in `names` (lower case) that INFO
/// commandstats reports; commands a script ran count, as in Redis.
pub fn command_calls(server: &Server, names: &[&str]) -> u64 {
    let mut con = redis_client(server.port);
    let info: String = q(&mut con, &["INFO", "commandstats"]);
    info.lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|f| f.strip_prefix("calls="))?;
            names
                .contains(&name)
                .then(|| calls.parse::<u64>().ok())
                .flatten()
        })
        .sum()
}
