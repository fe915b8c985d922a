//! Redis 7.0.15's own `tests/unit` suite against Cairn:
//! `scripts/redis_unit_tests.sh` runs, in external-server mode against this
//! build's `cairn` (a fresh one per file), the files listed in
//! `tests/redis-suite/units.txt`, with the tests of Redis internals that
//! Cairn deliberately does not copy skipped by name
//! (`tests/redis-suite/skip.txt`, each with its reason). Any other failing
//! test, an aborted file or a file over its time fails this test.
//! docs/design.md "Redis's own test suite" has the per-file table.
//!
//! Redis's source comes from Debian's package pool through
//! `scripts/redis_src.sh` into a cache dir, never into the repository; the
//! test skips, saying so, only when it cannot be fetched (the script exits
//! 3). A missing tclsh or redis-cli skips outside CI and fails in CI.
mod support;

use std::process::Command;
use std::time::Duration;

use support::clients::{missing, repo_root, run_with_timeout};
use support::{err, int, ok, q, redis_client, start_cairn, TestDir};

/// The whole run: the listed files take about 5 minutes with the test
/// build on a loaded machine; the script bounds each file itself
/// (`CAIRN_REDIS_UNIT_TIMEOUT`, 300 s).
const TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The script's exit status when Redis's source could not be fetched.
const NOT_FETCHED: i32 = 3;

#[test]
fn redis_unit_test_suite() {
    for (tool, package) in [("tclsh", "tcl"), ("redis-cli", "redis-tools")] {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
        if !found {
            missing::<()>(&format!("{tool} (Debian's {package})"));
            return;
        }
    }
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/redis_unit_tests.sh"))
        .env("CAIRN_BIN", env!("CARGO_BIN_EXE_cairn"));
    let run = run_with_timeout(cmd, TIMEOUT);
    match run.status.and_then(|s| s.code()) {
        Some(0) => eprintln!(
            "Redis's unit suite passed against Cairn in {:.0} s:\n{}",
            run.elapsed.as_secs_f64(),
            run.output
        ),
        Some(NOT_FETCHED) => eprintln!(
            "SKIPPED: Redis 7.0.15's source (its tests/unit suite) could not be \
             fetched; the suite did not run:\n{}",
            run.output
        ),
        Some(code) => panic!(
            "Redis's unit suite failed against Cairn (status {code}):\n{}",
            run.output
        ),
        None => panic!(
            "Redis's unit suite did not finish within {TIMEOUT:?} (or was killed by a \
             signal):\n{}",
            run.output
        ),
    }
}

/// What the suite found in DEBUG RELOAD (functions.tcl, "test debug reload
/// different options"): NOFLUSH without MERGE fails on a library already
/// there, as Redis's load without RDBFLAGS_ALLOW_DUP does; MERGE replaces
/// it; a plain reload empties the functions with the data first, so a
/// library loaded after the snapshot was saved is gone after NOSAVE.
#[test]
fn debug_reload_and_the_functions_already_there() {
    let dir = TestDir::new("redisunit", "reload");
    let s = start_cairn(&["--dir", dir.s(), "--enable-debug-command", "yes"]);
    let mut c = redis_client(s.port);
    let lib = |name: &str| {
        format!("#!lua name={name}\nredis.register_function('{name}', function() return 1 end)")
    };
    let loaded: String = q(&mut c, &["FUNCTION", "LOAD", &lib("one")]);
    assert_eq!(loaded, "one");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    // Redis 7.0.15 ends the text there; Cairn adds ", check server logs."
    // (as Redis 7.2 does).
    let refused = err(&mut c, &["DEBUG", "RELOAD", "NOFLUSH"]);
    assert!(
        refused.starts_with("ERR Error trying to load the RDB dump"),
        "{refused}"
    );
    ok(&mut c, &["DEBUG", "RELOAD", "NOFLUSH", "MERGE"]);
    assert_eq!(int(&mut c, &["FCALL", "one", "0"]), 1);
    let loaded: String = q(&mut c, &["FUNCTION", "LOAD", &lib("two")]);
    assert_eq!(loaded, "two");
    ok(&mut c, &["DEBUG", "RELOAD", "NOSAVE"]);
    assert_eq!(int(&mut c, &["FCALL", "one", "0"]), 1);
    assert_eq!(
        err(&mut c, &["FCALL", "two", "0"]),
        "ERR Function not found"
    );
}

/// INFO's `# Server` has Redis's build fields, as a Redis built outside a
/// git checkout reports them: Redis's unit/printver reads them, and
/// aborted on Cairn without them.
#[test]
fn info_server_has_the_git_fields() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    let info: String = q(&mut c, &["INFO", "server"]);
    let lines: Vec<&str> = info.lines().take(4).collect();
    assert_eq!(
        lines,
        [
            "# Server",
            "redis_version:7.0.15",
            "redis_git_sha1:00000000",
            "redis_git_dirty:0"
        ]
    );
}

/// UNLINK of a large collection counts in INFO's lazyfree figures, which
/// CONFIG RESETSTAT zeroes, as Redis's (unit/lazyfree "lazy free a stream
/// with all types of metadata" saw 0 freed objects).
#[test]
fn unlink_counts_in_the_lazyfree_figures() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["SADD", "big"];
    sadd.extend(members.iter().map(|m| m.as_str()));
    assert_eq!(int(&mut c, &sadd), 200);
    let freed = |c: &mut redis::Connection| -> (String, String) {
        (
            support::info_field(c, "memory", "lazyfree_pending_objects").unwrap(),
            support::info_field(c, "memory", "lazyfreed_objects").unwrap(),
        )
    };
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(int(&mut c, &["UNLINK", "big"]), 1);
    support::wait_for(
        "the lazyfree thread",
        std::time::Duration::from_secs(10),
        || freed(&mut c) == ("0".to_string(), "1".to_string()),
    );
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(freed(&mut c), ("0".to_string(), "0".to_string()));
}

/// A client's FUNCTION LOAD stops after 500 ms, as Redis's: a library
/// whose top level loops used to hold its worker for good (Redis's
/// unit/functions "LIBRARIES - load timeout" hung the file). The next load
/// and call on that worker work.
#[test]
fn function_load_times_out() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    let refused = err(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nlocal a = 1\nwhile 1 do a = a + 1 end",
        ],
    );
    assert!(refused.contains("FUNCTION LOAD timeout"), "{refused}");
    let loaded: String = q(
        &mut c,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('f', function() return 1 end)",
        ],
    );
    assert_eq!(loaded, "lib");
    assert_eq!(int(&mut c, &["FCALL", "f", "0"]), 1);
}
