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
//! starts die with it), and kills the server when the test ends, pass or fail
//! (the runner is `support/clients.rs`, shared with queue_clients.rs).
//!
//! Environment (see `support/clients.rs`): `CAIRN_CLIENTS_TARGET=redis` runs
//! everything against a reference redis-server (how these tests were
//! validated), the default is Cairn; `CAIRN_CLIENTS_VENV` is the Python
//! clients' virtualenv; under `CI` missing clients fail instead of skipping.

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use redis::{ErrorKind, ServerErrorKind, Value};
use support::clients::{
    client_command, command_calls, expect_success, missing, python, start_target, target,
};
use support::{q, redis_client, redis_client_resp3};

/// Longest a client program may run; the slowest (Sidekiq, whose scheduler
/// first polls up to 5 s after start) takes about 10 s against redis-server.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// The modules the Python programs here import.
const PY_CLIENTS: &str = "redis, celery, kombu, dramatiq, limits";

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

/// Sum of the calls of every script-running command in INFO commandstats.
fn script_calls(server: &support::Server) -> u64 {
    command_calls(
        server,
        &[
            "eval",
            "evalsha",
            "eval_ro",
            "evalsha_ro",
            "fcall",
            "fcall_ro",
        ],
    )
}

/// Runs a client program against a fresh server and checks that it passed
/// and that it really ran scripts there.
fn check_client(name: &str, program: PathBuf, args: &[&str]) {
    let server = start_target();
    let url = format!("redis://127.0.0.1:{}/0", server.port);
    let cmd = client_command(&program, args, &url);
    let run = expect_success(name, Some(&server), cmd, CLIENT_TIMEOUT);
    let tgt = target();
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
    let Some(py) = python(PY_CLIENTS) else { return };
    check_client("redis-py Lock", py, &["redis_lock.py"]);
}

#[test]
fn limits_rate_limiters() {
    let Some(py) = python(PY_CLIENTS) else { return };
    check_client("limits", py, &["limits_check.py"]);
}

#[test]
fn celery_worker() {
    let Some(py) = python(PY_CLIENTS) else { return };
    check_client("Celery", py, &["celery_check.py"]);
}

#[test]
fn dramatiq_worker() {
    let Some(py) = python(PY_CLIENTS) else { return };
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
