//! Scripting (issue 21) through real clients: the `redis` crate's `Script`,
//! redis-py's `Lock`, Celery on its Redis broker and result backend, dramatiq
//! with Redis results, the `limits` rate limiter and Sidekiq 6.4. Each of them
//! runs Lua through EVAL/EVALSHA and relies on `NOSCRIPT` to reload a script
//! the server does not have, so these tests are what "a Redis replacement
//! with scripting" means to a user.
//!
//! The Python and Ruby programs live in `tests/clients/`; each takes the
//! server's URL, exits 0 when every check passed and prints what failed
//! otherwise. This file starts a server per test on an ephemeral port, runs
//! the program with a timeout in its own process group (so the workers it
//! starts die with it), and kills the server when the test ends, pass or fail.
//!
//! Environment:
//! - `CAIRN_CLIENTS_TARGET=redis` runs everything against a reference
//!   redis-server (how these tests were validated); the default is Cairn.
//! - `CAIRN_CLIENTS_VENV`: the virtualenv holding the Python clients
//!   (default `target/clients-venv`, made by `scripts/install_test_clients.sh`).
//! - `CI`: missing clients fail instead of skipping, as a missing
//!   redis-server does in diff.rs.

mod support;

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::{ErrorKind, ServerErrorKind, Value};
use support::{q, redis_client, redis_client_resp3, Server};

const INSTALL_HINT: &str = "run scripts/install_test_clients.sh (scripts/test runs it)";

/// Longest a client program may run; the slowest (Sidekiq, whose scheduler
/// first polls up to 5 s after start) takes about 10 s against redis-server.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Target {
    Cairn,
    Redis,
}

fn target() -> Target {
    match std::env::var("CAIRN_CLIENTS_TARGET").as_deref() {
        Err(_) | Ok("") | Ok("cairn") => Target::Cairn,
        Ok("redis") => Target::Redis,
        Ok(other) => panic!("CAIRN_CLIENTS_TARGET={other:?}: expected `cairn` or `redis`"),
    }
}

fn start_target() -> Server {
    match target() {
        Target::Cairn => support::start_cairn(&[]),
        Target::Redis => support::start_redis(&[]).expect(
            "CAIRN_CLIENTS_TARGET=redis needs redis-server (PATH or $REDIS_SERVER; apt-get install -y redis-server)",
        ),
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn clients_dir() -> PathBuf {
    repo_root().join("tests/clients")
}

/// `None` (a skip) when a client is missing outside CI; in CI a failure.
fn missing(what: &str) -> Option<PathBuf> {
    let msg = format!("scripting_clients: {what} is not installed; {INSTALL_HINT}");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("{msg}; skipping");
    None
}

/// The venv's interpreter, once it imports every Python client.
fn python() -> Option<PathBuf> {
    let venv = std::env::var_os("CAIRN_CLIENTS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/clients-venv"));
    let py = venv.join("bin/python");
    let imports = Command::new(&py)
        .args(["-c", "import redis, celery, kombu, dramatiq, limits"])
        .stdin(Stdio::null())
        .output();
    match imports {
        Ok(out) if out.status.success() => Some(py),
        _ => missing(&format!(
            "the Python clients venv ({}: redis, celery, dramatiq, limits)",
            venv.display()
        )),
    }
}

/// `ruby`, once it can load Debian's Sidekiq and the `sidekiq` command exists.
fn ruby() -> Option<PathBuf> {
    let loads = Command::new("ruby")
        .args(["-e", "require 'sidekiq'; require 'redis'"])
        .stdin(Stdio::null())
        .output();
    let cli = Command::new("sidekiq")
        .arg("--version")
        .stdin(Stdio::null())
        .output();
    match (loads, cli) {
        (Ok(a), Ok(b)) if a.status.success() && b.status.success() => Some(PathBuf::from("ruby")),
        _ => missing("Sidekiq 6.4 (Debian's ruby-sidekiq and ruby-redis)"),
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

struct Run {
    status: Option<ExitStatus>,
    output: String,
    elapsed: Duration,
}

/// Runs `cmd` with a timeout, stdout and stderr merged into one log.
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Run {
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

/// Sum of the calls of every script-running command in INFO commandstats.
fn script_calls(server: &Server) -> u64 {
    let mut con = redis_client(server.port);
    let info: String = q(&mut con, &["INFO", "commandstats"]);
    info.lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let scripted = matches!(
                name,
                "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
            );
            let calls = stats.split(',').find_map(|f| f.strip_prefix("calls="))?;
            scripted.then(|| calls.parse::<u64>().ok()).flatten()
        })
        .sum()
}

/// Runs a client program against a fresh server and checks that it passed
/// and that it really ran scripts there.
fn check_client(name: &str, program: PathBuf, args: &[&str]) {
    let server = start_target();
    let url = format!("redis://127.0.0.1:{}/0", server.port);
    let mut cmd = Command::new(&program);
    cmd.args(args)
        .arg(&url)
        .current_dir(clients_dir())
        .env("CAIRN_CLIENTS_URL", &url)
        // Print as it goes, so a timeout shows how far it got; and leave no
        // __pycache__ in the source tree.
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let run = run_with_timeout(cmd, CLIENT_TIMEOUT);
    let tgt = target();
    let failed = match run.status {
        Some(st) if st.success() => None,
        Some(st) => Some(format!("exited with {st}")),
        None => Some(format!("timed out after {CLIENT_TIMEOUT:?}")),
    };
    if let Some(why) = failed {
        panic!(
            "{name} against {tgt:?} {why}; its output:\n{}\n--- server log (last 30 lines):\n{}",
            run.output,
            server.log_tail(30)
        );
    }
    let calls = script_calls(&server);
    assert!(
        calls > 0,
        "{name} passed against {tgt:?} without running a script (INFO commandstats has no EVAL/EVALSHA calls); its output:\n{}",
        run.output
    );
    eprintln!(
        "scripting_clients: {name} passed against {tgt:?} in {:.1} s ({calls} script calls)",
        run.elapsed.as_secs_f64()
    );
}

#[test]
fn redis_py_lock() {
    let Some(py) = python() else { return };
    check_client("redis-py Lock", py, &["redis_lock.py"]);
}

#[test]
fn limits_rate_limiters() {
    let Some(py) = python() else { return };
    check_client("limits", py, &["limits_check.py"]);
}

#[test]
fn celery_worker() {
    let Some(py) = python() else { return };
    check_client("Celery", py, &["celery_check.py"]);
}

#[test]
fn dramatiq_worker() {
    let Some(py) = python() else { return };
    check_client("dramatiq", py, &["dramatiq_check.py"]);
}

#[test]
fn sidekiq_worker() {
    let Some(rb) = ruby() else { return };
    check_client("Sidekiq", rb, &["sidekiq_check.rb"]);
}

// ------------------------------------------------ the redis crate's Script ---

fn script_exists(con: &mut redis::Connection, sha: &str) -> bool {
    let r: Vec<i64> = q(con, &["SCRIPT", "EXISTS", sha]);
    r == [1]
}

fn invoke(con: &mut redis::Connection, src: &str, keys: &[&str], args: &[&[u8]]) -> Value {
    let script = redis::Script::new(src);
    let mut inv = script.prepare_invoke();
    for k in keys {
        inv.key(*k);
    }
    for a in args {
        inv.arg(*a);
    }
    inv.invoke(con)
        .unwrap_or_else(|e| panic!("{src:?} failed: {e}"))
}

fn invoke_err(con: &mut redis::Connection, src: &str, keys: &[&str]) -> redis::RedisError {
    let script = redis::Script::new(src);
    let mut inv = script.prepare_invoke();
    for k in keys {
        inv.key(*k);
    }
    match inv.invoke::<Value>(con) {
        Ok(v) => panic!("{src:?} should fail, got {v:?}"),
        Err(e) => e,
    }
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// The crate sends EVALSHA first and, on `NOSCRIPT`, SCRIPT LOAD and EVALSHA
/// again: an unknown SHA must answer `NOSCRIPT` (not "unknown command"), and a
/// SCRIPT FLUSH must send the client down the same path again.
#[test]
fn redis_crate_script_loads_on_noscript() {
    let server = start_target();
    let mut con = redis_client(server.port);
    let incr = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    assert!(!script_exists(&mut con, incr.get_hash()));

    let raw = redis::cmd("EVALSHA")
        .arg(incr.get_hash())
        .arg(1)
        .arg("counter")
        .arg(5)
        .query::<Value>(&mut con)
        .expect_err("EVALSHA of a script never loaded");
    assert_eq!(
        raw.kind(),
        ErrorKind::Server(ServerErrorKind::NoScript),
        "an unknown SHA must answer NOSCRIPT so clients fall back: {raw}"
    );

    let n: i64 = incr.key("counter").arg(5).invoke(&mut con).unwrap();
    assert_eq!(n, 5);
    assert!(script_exists(&mut con, incr.get_hash()), "invoke loads it");
    let n: i64 = incr.key("counter").arg(2).invoke(&mut con).unwrap();
    assert_eq!(n, 7);

    let flushed: String = q(&mut con, &["SCRIPT", "FLUSH"]);
    assert_eq!(flushed, "OK");
    assert!(!script_exists(&mut con, incr.get_hash()));
    let n: i64 = incr.key("counter").arg(3).invoke(&mut con).unwrap();
    assert_eq!(n, 10, "reloaded after SCRIPT FLUSH");
    let v: String = q(&mut con, &["GET", "counter"]);
    assert_eq!(v, "10");

    // SCRIPT LOAD answers the same SHA1 the client computes.
    let sha: String = q(&mut con, &["SCRIPT", "LOAD", "return 1"]);
    assert_eq!(sha, redis::Script::new("return 1").get_hash());
}

/// Lua values to RESP2 as Redis 7.0 converts them.
#[test]
fn redis_crate_script_return_types() {
    let server = start_target();
    let mut con = redis_client(server.port);
    let mut ev = |src: &str| invoke(&mut con, src, &[], &[]);

    assert_eq!(ev("return 42"), Value::Int(42));
    assert_eq!(ev("return 3.99"), Value::Int(3), "numbers truncate");
    assert_eq!(ev("return -2.5"), Value::Int(-2));
    assert_eq!(ev("return 'hello'"), bulk("hello"));
    assert_eq!(ev("return true"), Value::Int(1));
    assert_eq!(ev("return false"), Value::Nil);
    assert_eq!(ev("return nil"), Value::Nil);
    assert_eq!(
        ev("return tostring(10/2)"),
        bulk("5"),
        "Lua 5.1 number format"
    );
    assert_eq!(ev("return tostring(0.1)"), bulk("0.1"));
    assert_eq!(
        ev("return {1, 'two', {3, 'four'}, 5.5, true, false, 'after'}"),
        Value::Array(vec![
            Value::Int(1),
            bulk("two"),
            Value::Array(vec![Value::Int(3), bulk("four")]),
            Value::Int(5),
            Value::Int(1),
            Value::Nil,
            bulk("after"),
        ])
    );
    assert_eq!(
        ev("return {1, 2, nil, 4}"),
        Value::Array(vec![Value::Int(1), Value::Int(2)]),
        "an array stops at the first nil"
    );
    assert_eq!(ev("return {}"), Value::Array(vec![]));
    assert_eq!(ev("return {ok='FINE'}"), Value::SimpleString("FINE".into()));
    assert_eq!(
        ev("return redis.status_reply('DONE')"),
        Value::SimpleString("DONE".into())
    );
    assert_eq!(ev("return redis.status_reply('OK')"), Value::Okay);
    assert_eq!(ev("return redis.call('GET', 'no-such-key')"), Value::Nil);
    assert_eq!(ev("return redis.call('SET', 'k', 'v')"), Value::Okay);
    assert_eq!(ev("return redis.call('EXISTS', 'k')"), Value::Int(1));
    assert_eq!(
        ev("return redis.sha1hex('')"),
        bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );

    // KEYS and ARGV arrive in order, binary safe.
    let binary: &[u8] = b"\x00\xff\r\nz";
    assert_eq!(
        invoke(
            &mut con,
            "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}",
            &["k1", "k2"],
            &[b"a1", binary],
        ),
        Value::Array(vec![
            bulk("k1"),
            bulk("k2"),
            bulk("a1"),
            Value::BulkString(binary.to_vec()),
            Value::Int(2),
            Value::Int(2),
        ])
    );

    // Typed conversions the crate's users rely on.
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f1")
        .arg("v1")
        .arg("f2")
        .arg("v2")
        .query(&mut con)
        .unwrap();
    let all: HashMap<String, String> = redis::Script::new("return redis.call('HGETALL', KEYS[1])")
        .key("h")
        .invoke(&mut con)
        .unwrap();
    assert_eq!(
        all,
        HashMap::from([("f1".into(), "v1".into()), ("f2".into(), "v2".into())])
    );
    let missing: Option<String> = redis::Script::new("return redis.call('GET', KEYS[1])")
        .key("nothing")
        .invoke(&mut con)
        .unwrap();
    assert_eq!(missing, None);
    let list: Vec<String> = redis::Script::new("return {ARGV[2], ARGV[1]}")
        .arg("x")
        .arg("y")
        .invoke(&mut con)
        .unwrap();
    assert_eq!(list, ["y", "x"]);
}

/// Errors a script returns or raises, as the client sees them.
#[test]
fn redis_crate_script_errors() {
    let server = start_target();
    let mut con = redis_client(server.port);

    let e = invoke_err(&mut con, "return {err='MYERR something bad'}", &[]);
    assert_eq!(e.code(), Some("MYERR"), "{e}");
    assert_eq!(e.detail(), Some("something bad"), "{e}");

    let e = invoke_err(&mut con, "return redis.error_reply('E2 nope')", &[]);
    assert_eq!(e.code(), Some("E2"), "{e}");

    let e = invoke_err(&mut con, "error('boom')", &[]);
    assert_eq!(e.code(), Some("ERR"), "{e}");
    assert!(e.to_string().contains("boom"), "{e}");

    let _: () = redis::cmd("SET")
        .arg("str")
        .arg("v")
        .query(&mut con)
        .unwrap();
    // redis.call raises the command's error, keeping its code.
    let e = invoke_err(
        &mut con,
        "return redis.call('LPUSH', KEYS[1], 'x')",
        &["str"],
    );
    assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
    // redis.pcall hands it to the script as an {err=...} table instead.
    assert_eq!(
        invoke(
            &mut con,
            "local r = redis.pcall('LPUSH', KEYS[1], 'x'); return type(r) .. ' ' .. string.sub(r['err'], 1, 9)",
            &["str"],
            &[],
        ),
        bulk("table WRONGTYPE")
    );
    // A script that fails after a write keeps the write (no rollback).
    let e = invoke_err(
        &mut con,
        "redis.call('SET', KEYS[1], 'written'); return redis.call('NOSUCHCOMMAND')",
        &["w"],
    );
    assert_eq!(e.code(), Some("ERR"), "{e}");
    let v: String = q(&mut con, &["GET", "w"]);
    assert_eq!(v, "written");
}

/// RESP3 replies from a script after `redis.setresp(3)`, to a RESP3 client.
#[test]
fn redis_crate_script_resp3() {
    let server = start_target();
    let mut con = redis_client_resp3(server.port);
    let _: () = redis::cmd("HSET")
        .arg("h")
        .arg("f")
        .arg("v")
        .query(&mut con)
        .unwrap();
    let map = invoke(
        &mut con,
        "redis.setresp(3); return redis.call('HGETALL', KEYS[1])",
        &["h"],
        &[],
    );
    assert_eq!(map, Value::Map(vec![(bulk("f"), bulk("v"))]));
    assert_eq!(
        invoke(&mut con, "return {double=3.5}", &[], &[]),
        Value::Double(3.5)
    );
    // The same script to a RESP2 client: the map is flattened, the double a string.
    let mut con2 = redis_client(server.port);
    assert_eq!(
        invoke(
            &mut con2,
            "redis.setresp(3); return redis.call('HGETALL', KEYS[1])",
            &["h"],
            &[],
        ),
        Value::Array(vec![bulk("f"), bulk("v")])
    );
    assert_eq!(
        invoke(&mut con2, "return {double=3.5}", &[], &[]),
        bulk("3.5")
    );
}
