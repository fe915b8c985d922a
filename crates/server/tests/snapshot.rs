//! Snapshots through real clients: SAVE, BGSAVE, LASTSAVE replies; a
//! restart that loads every type with its TTL and memcached flags; save
//! rules; `-LOADING` during a slow load; a BGSAVE under concurrent writes
//! equal to one instant; failed writes that keep the previous file and
//! answer `-MISCONF`; SHUTDOWN, SIGTERM and FLUSHALL saves; a corrupt file
//! that stops start-up; `cairn check-snapshot`.
mod mc_support;
mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{redis_client, start_cairn, start_cairn_env, RawConn, TestDir};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits until the server answers PING with PONG (the load is over).
fn wait_ready(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut c) = RawConn::try_connect(port) {
            if c.cmd(&["PING"]) == b"+PONG\r\n" {
                return;
            }
        }
        assert!(Instant::now() < deadline, "server never finished loading");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn info_field(c: &mut RawConn, name: &str) -> String {
    let raw = text(&c.cmd(&["INFO", "persistence"]));
    raw.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {raw}"))
        .trim()
        .to_string()
}

fn wait_bgsave_done(c: &mut RawConn) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(c, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn save_bgsave_lastsave_replies() {
    let dir = TestDir::new("snapshot", "replies");
    let s = start_cairn(&["--dir", dir.s(), "--rdb-key-save-delay", "0"]);
    let mut c = s.conn();
    let started = text(&c.cmd(&["LASTSAVE"]));
    assert!(started.starts_with(':'), "{started}");
    for i in 0..200 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "200");
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert!(dir.file("dump.cairn").exists());
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "1");
    assert_eq!(c.cmd(&["BGSAVE", "x"]), b"-ERR syntax error\r\n".to_vec());
    assert_eq!(
        c.cmd(&["BGSAVE", "SCHEDULE", "x"]),
        b"-ERR syntax error\r\n".to_vec()
    );
    // A slow BGSAVE (20 ms per key written): meanwhile everything else
    // says a save is running.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "20000"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    let busy = b"-ERR Background save already in progress\r\n".to_vec();
    assert_eq!(c.cmd(&["BGSAVE"]), busy);
    assert_eq!(c.cmd(&["BGSAVE", "SCHEDULE"]), busy);
    assert_eq!(c.cmd(&["SAVE"]), busy);
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    assert_ne!(info_field(&mut c, "rdb_current_bgsave_time_sec"), "-1");
    // Writes go on while it runs.
    assert_eq!(c.cmd(&["SET", "during", "x"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        b"+OK\r\n"
    );
    wait_bgsave_done(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_saves"), "2");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    // Inside EXEC, BGSAVE is scheduled and then runs.
    c.cmd(&["MULTI"]);
    c.cmd(&["BGSAVE"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        b"*1\r\n+Background saving scheduled\r\n".to_vec()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_saves") != "3" {
        assert!(Instant::now() < deadline, "scheduled BGSAVE never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_bgsave_done(&mut c);
    let last = text(&c.cmd(&["LASTSAVE"]));
    let n = |s: &str| s.trim()[1..].parse::<u64>().unwrap();
    assert!(n(&last) >= n(&started));
    assert_eq!(dir.names(), vec!["dump.cairn".to_string()], "no temp files");
    assert_eq!(
        c.cmd(&["MULTI"]),
        b"+OK\r\n".to_vec(),
        "SAVE is refused inside MULTI"
    );
    assert_eq!(
        c.cmd(&["SAVE"]),
        b"-ERR Command not allowed inside a transaction\r\n".to_vec()
    );
}

/// A memcached text-protocol line exchange.
fn mc(port: u16, req: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut out = String::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let done = line == "END\r\n" || line == "STORED\r\n" || line.starts_with("SERVER_ERROR");
        out.push_str(&line);
        if done || line.is_empty() {
            return out;
        }
    }
}

fn populate(c: &mut RawConn) {
    let ok = |r: Vec<u8>| assert!(r.starts_with(b"+OK") || r.starts_with(b":"), "{}", text(&r));
    ok(c.cmd(&["SET", "int", "12345"]));
    ok(c.cmd(&["SET", "emb", "hello"]));
    ok(c.cmd(&["SET", "raw", &"r".repeat(100)]));
    ok(c.cmd(&["SET", "ttl", "x", "EX", "1000"]));
    ok(c.cmd(&["SET", "pttl", "x", "PX", "100000000"]));
    ok(c.cmd(&["HSET", "hsmall", "f", "v", "g", "w"]));
    for i in 0..600 {
        ok(c.cmd(&["HSET", "hbig", &format!("f{i}"), &format!("v{i}")]));
        ok(c.cmd(&["SADD", "sbig", &format!("{i}")]));
        ok(c.cmd(&["ZADD", "zbig", &format!("{i}.5"), &format!("m{i}")]));
        ok(c.cmd(&["RPUSH", "list", &format!("e{i}")]));
    }
    ok(c.cmd(&["SADD", "sint", "1", "2", "3"]));
    ok(c.cmd(&["SADD", "sstr", "a", "b"]));
    ok(c.cmd(&["ZADD", "zsmall", "1", "a", "-inf", "b", "2.5", "c"]));
    ok(c.cmd(&["SELECT", "7"]));
    ok(c.cmd(&["SET", "in7", "seven"]));
    ok(c.cmd(&["EXPIRE", "in7", "500"]));
    ok(c.cmd(&["SELECT", "0"]));
}

/// Everything `populate` wrote, as replies (TTLs rounded to tens).
fn observe(c: &mut RawConn) -> Vec<String> {
    let mut out = Vec::new();
    let mut q = |args: &[&str]| out.push(text(&c.cmd(args)));
    for k in [
        "int", "emb", "raw", "ttl", "hsmall", "hbig", "sbig", "zbig", "list", "sint", "sstr",
        "zsmall",
    ] {
        q(&["TYPE", k]);
        q(&["OBJECT", "ENCODING", k]);
    }
    q(&["GET", "int"]);
    q(&["GET", "raw"]);
    q(&["HGETALL", "hsmall"]);
    q(&["HLEN", "hbig"]);
    q(&["HGET", "hbig", "f599"]);
    q(&["SCARD", "sbig"]);
    q(&["SMEMBERS", "sint"]);
    q(&["ZRANGE", "zsmall", "0", "-1", "WITHSCORES"]);
    q(&["ZRANGE", "zbig", "595", "-1", "WITHSCORES"]);
    q(&["LRANGE", "list", "0", "3"]);
    q(&["LLEN", "list"]);
    q(&["DBSIZE"]);
    q(&["SELECT", "7"]);
    q(&["GET", "in7"]);
    q(&["SELECT", "0"]);
    out
}

fn ttl(c: &mut RawConn, db: &str, key: &str) -> i64 {
    c.cmd(&["SELECT", db]);
    let r = text(&c.cmd(&["PTTL", key]));
    c.cmd(&["SELECT", "0"]);
    r.trim()[1..].parse().unwrap()
}

#[test]
fn restart_loads_every_type_ttl_and_memcached_flags() {
    let dir = TestDir::new("snapshot", "restart");
    let args = ["--dir", dir.s(), "--save", "3600 1"];
    let (a, mport) = mc_support::cairn(&args);
    let mut c = a.conn();
    populate(&mut c);
    assert_eq!(mc(mport, "set item 0 0 3\r\nabc\r\n").trim(), "STORED");
    assert_eq!(
        mc(mport, "set flagged 4294967295 1000 2\r\nxy\r\n").trim(),
        "STORED"
    );
    let before = observe(&mut c);
    let mc_before = mc(mport, "get item flagged\r\n");
    assert!(
        mc_before.contains("VALUE flagged 4294967295 2"),
        "{mc_before}"
    );
    let ttl_before = ttl(&mut c, "0", "ttl");
    // SHUTDOWN with save rules saves first.
    c.send(&[b"SHUTDOWN"]);
    let mut a = a;
    assert!(a.wait_exit(Duration::from_secs(10)).is_some());
    assert!(dir.file("dump.cairn").exists(), "{}", a.log_tail(20));
    let (b, mport) = mc_support::cairn(&args);
    wait_ready(b.port);
    let mut c = b.conn();
    assert_eq!(observe(&mut c), before);
    assert_eq!(mc(mport, "get item flagged\r\n"), mc_before);
    let t = ttl(&mut c, "0", "ttl");
    assert!(
        t <= ttl_before && t > ttl_before - 10_000,
        "{t} vs {ttl_before}"
    );
    let t7 = ttl(&mut c, "7", "in7");
    assert!(t7 > 490_000 && t7 <= 500_000, "{t7}");
    assert_eq!(ttl(&mut c, "0", "emb"), -1);
    assert!(
        b.log().contains("DB loaded from disk"),
        "{}",
        b.log_tail(10)
    );
    assert_eq!(info_field(&mut c, "rdb_last_load_keys_loaded"), "16");
}

#[test]
fn save_rules_trigger_a_background_save() {
    let dir = TestDir::new("snapshot", "rules");
    let s = start_cairn(&["--dir", dir.s(), "--save", "1 3"]);
    let mut c = s.conn();
    c.cmd(&["SET", "a", "1"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !dir.file("dump.cairn").exists(),
        "1 change < 3: no save yet"
    );
    c.cmd(&["SET", "b", "1"]);
    c.cmd(&["SET", "c", "1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_changes_since_last_save") != "0" {
        assert!(
            Instant::now() < deadline,
            "the rule never fired: {}",
            s.log_tail(10)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_bgsave_done(&mut c);
    assert!(dir.file("dump.cairn").exists());
    assert!(
        s.log().contains("3 changes in 1 seconds. Saving..."),
        "{}",
        s.log_tail(10)
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "save"]),
        b"*2\r\n$4\r\nsave\r\n$3\r\n1 3\r\n".to_vec()
    );
}

#[test]
fn clients_get_loading_during_a_slow_load() {
    let dir = TestDir::new("snapshot", "loading");
    {
        let s = start_cairn(&["--dir", dir.s()]);
        let mut c = s.conn();
        for i in 0..300 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    }
    // 5 ms per key: the load takes about 1.5 s.
    let s = start_cairn(&["--dir", dir.s(), "--key-load-delay", "5000"]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["GET", "k1"]),
        b"-LOADING Redis is loading the dataset in memory\r\n".to_vec()
    );
    assert_eq!(
        c.cmd(&["PING"]),
        b"-LOADING Redis is loading the dataset in memory\r\n".to_vec()
    );
    // INFO is allowed while loading and says so.
    assert_eq!(info_field(&mut c, "loading"), "1");
    assert!(
        info_field(&mut c, "loading_total_bytes")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    wait_ready(s.port);
    assert_eq!(c.cmd(&["DBSIZE"]), b":300\r\n");
    assert_eq!(info_field(&mut c, "loading"), "0");
}

#[test]
fn a_bgsave_under_concurrent_writes_is_one_instant() {
    // One writer sets k0..k{N-1} to round r, in order, each SET answered
    // before the next: at any instant the keys read r for a prefix and
    // r-1 after it. A snapshot (taken while the writer runs, and written
    // slowly so most shards are dumped by the writer's locks) must be
    // such a state.
    const N: usize = 400;
    let dir = TestDir::new("snapshot", "consistent");
    let s = start_cairn(&["--dir", dir.s(), "--rdb-key-save-delay", "200"]);
    let port = s.port;
    let mut c = s.conn();
    for i in 0..N {
        c.cmd(&["SET", &format!("k{i}"), "0"]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut w = RawConn::connect(port);
            let mut r = 0u64;
            while !stop.load(Ordering::Relaxed) {
                r += 1;
                for i in 0..N {
                    assert_eq!(
                        w.cmd(&["SET", &format!("k{i}"), &r.to_string()]),
                        b"+OK\r\n"
                    );
                }
            }
            r
        })
    };
    let mut peaks = Vec::new();
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
        wait_bgsave_done(&mut c);
        peaks.push(
            info_field(&mut c, "rdb_last_cow_size")
                .parse::<u64>()
                .unwrap(),
        );
        let copy = TestDir::new("snapshot", "consistent-copy");
        std::fs::copy(dir.file("dump.cairn"), copy.file("dump.cairn")).unwrap();
        let check = start_cairn(&["--dir", copy.s()]);
        wait_ready(check.port);
        let mut cc = check.conn();
        let vals: Vec<u64> = (0..N)
            .map(|i| {
                let r = text(&cc.cmd(&["GET", &format!("k{i}")]));
                r.lines().nth(1).unwrap().parse().unwrap()
            })
            .collect();
        let first = vals[0];
        let split = vals.iter().position(|&v| v != first).unwrap_or(N);
        assert!(
            vals[split..].iter().all(|&v| v + 1 == first),
            "round {round}: not one instant: {first} for {split} keys, then {:?}",
            &vals[split..(split + 5).min(N)]
        );
    }
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().unwrap() > 1);
    assert!(peaks.iter().all(|&p| p > 0), "{peaks:?}");
}

#[test]
fn a_failed_save_keeps_the_previous_file_and_stops_writes() {
    let dir = TestDir::new("snapshot", "fault");
    {
        let s = start_cairn(&["--dir", dir.s()]);
        let mut c = s.conn();
        c.cmd(&["SET", "old", "1"]);
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    }
    let good = std::fs::read(dir.file("dump.cairn")).unwrap();
    // Every write of a snapshot fails after 40 bytes, as on a full disk.
    let s = start_cairn_env(
        &["--dir", dir.s(), "--save", "3600 1"],
        &[("CAIRN_TEST_SNAPSHOT_FAULT_AFTER", "40")],
    );
    wait_ready(s.port);
    let mut c = s.conn();
    c.cmd(&["SET", "new", "1"]);
    assert_eq!(c.cmd(&["SAVE"]), b"-ERR\r\n");
    assert_eq!(std::fs::read(dir.file("dump.cairn")).unwrap(), good);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_bgsave_done(&mut c);
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "err");
    assert_eq!(std::fs::read(dir.file("dump.cairn")).unwrap(), good);
    assert_eq!(
        dir.names(),
        vec!["dump.cairn".to_string()],
        "temp file removed"
    );
    assert!(
        s.log().contains("No space left on device"),
        "{}",
        s.log_tail(10)
    );
    // With save rules, writes (and PING) are refused; reads work.
    let misconf = c.cmd(&["SET", "x", "1"]);
    assert!(
        misconf.starts_with(b"-MISCONF Redis is configured to save RDB snapshots"),
        "{}",
        text(&misconf)
    );
    assert!(c.cmd(&["PING"]).starts_with(b"-MISCONF"));
    assert_eq!(c.cmd(&["GET", "old"]), b"$1\r\n1\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["SET", "x", "1"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"]),
        b"+OK\r\n"
    );
    assert!(c.cmd(&["SET", "x", "1"]).starts_with(b"-MISCONF"));
    // SHUTDOWN cannot save: it refuses to exit, unless NOSAVE or FORCE.
    assert_eq!(
        c.cmd(&["SHUTDOWN"]),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n".to_vec()
    );
    assert_eq!(c.cmd(&["GET", "old"]), b"$1\r\n1\r\n");
    c.send(&[b"SHUTDOWN", b"FORCE"]);
    let mut s = s;
    assert!(s.wait_exit(Duration::from_secs(10)).is_some());
    assert_eq!(std::fs::read(dir.file("dump.cairn")).unwrap(), good);
}

#[test]
fn sigterm_and_flushall_save_with_rules_nosave_does_not() {
    let dir = TestDir::new("snapshot", "sigterm");
    let mut s = start_cairn(&["--dir", dir.s(), "--save", "3600 1000"]);
    let mut c = s.conn();
    c.cmd(&["SET", "a", "1"]);
    assert!(!dir.file("dump.cairn").exists());
    // SIGTERM: the final save, then exit.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) };
    assert!(s.wait_exit(Duration::from_secs(10)).is_some());
    assert!(dir.file("dump.cairn").exists(), "{}", s.log_tail(10));
    let s = start_cairn(&["--dir", dir.s(), "--save", "3600 1000"]);
    wait_ready(s.port);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["GET", "a"]), b"$1\r\n1\r\n");
    // FLUSHALL with save rules saves the empty dataset at once.
    c.cmd(&["SET", "b", "1"]);
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["check-snapshot", dir.file("dump.cairn").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("OK: 0 keys"),
        "{}",
        text(&out.stdout)
    );
    // NOSAVE: no save even with rules.
    c.cmd(&["SET", "c", "1"]);
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    let mut s = s;
    assert!(s.wait_exit(Duration::from_secs(10)).is_some());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["check-snapshot", dir.file("dump.cairn").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("OK: 0 keys"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_corrupt_snapshot_stops_start_up_and_check_snapshot_says_where() {
    let dir = TestDir::new("snapshot", "corrupt");
    {
        let s = start_cairn(&["--dir", dir.s()]);
        let mut c = s.conn();
        for i in 0..50 {
            c.cmd(&["SET", &format!("key{i}"), "value"]);
        }
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    }
    let check = |p: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["check-snapshot", p.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let ok = check(&dir.file("dump.cairn"));
    assert!(ok.status.success(), "{}", text(&ok.stdout));
    assert!(text(&ok.stdout).contains("OK: 50 keys"));
    let good = std::fs::read(dir.file("dump.cairn")).unwrap();
    let mut bytes = good.clone();
    // Flip a bit inside a stored value (so the block's CRC must catch it).
    let mid = bytes.len() / 2
        + bytes[bytes.len() / 2..]
            .windows(5)
            .position(|w| w == b"value")
            .unwrap();
    bytes[mid + 2] ^= 0x20;
    std::fs::write(dir.file("dump.cairn"), &bytes).unwrap();
    let bad = check(&dir.file("dump.cairn"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stdout).contains("checksum mismatch"),
        "{}",
        text(&bad.stdout)
    );
    assert!(text(&bad.stdout).contains("at offset"));
    let mut s = start_cairn(&["--dir", dir.s()]);
    let st = s
        .wait_exit(Duration::from_secs(10))
        .expect("start-up must stop");
    assert!(!st.success());
    let log = s.log();
    assert!(log.contains("Fatal error loading the snapshot"), "{log}");
    assert!(log.contains("dump.cairn at offset"), "{log}");
    // A truncated file too.
    std::fs::write(dir.file("dump.cairn"), &good[..good.len() - 5]).unwrap();
    let cut = check(&dir.file("dump.cairn"));
    assert!(
        text(&cut.stdout).contains("truncated"),
        "{}",
        text(&cut.stdout)
    );
}

#[test]
fn memcached_clients_wait_for_the_load_too() {
    let dir = TestDir::new("snapshot", "mcload");
    {
        let s = start_cairn(&["--dir", dir.s()]);
        let mut c = s.conn();
        for i in 0..300 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    }
    let (s, mport) = mc_support::cairn(&["--dir", dir.s(), "--key-load-delay", "5000"]);
    let r = mc(mport, "get k1\r\n");
    assert_eq!(r, "SERVER_ERROR loading the dataset in memory\r\n");
    wait_ready(s.port);
    assert_eq!(mc(mport, "get k1\r\n"), "VALUE k1 0 1\r\nv\r\nEND\r\n");
}

#[test]
fn flushall_stops_a_running_bgsave_even_inside_exec() {
    let dir = TestDir::new("snapshot", "flushexec");
    let s = start_cairn(&[
        "--dir",
        dir.s(),
        "--save",
        "3600 100000",
        "--rdb-key-save-delay",
        "20000",
    ]);
    let mut c = s.conn();
    for i in 0..200 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+QUEUED\r\n");
    // No deadlock: EXEC holds every shard, so FLUSHALL only flags the
    // running BGSAVE to stop and schedules the save of the empty dataset.
    assert_eq!(c.cmd(&["EXEC"]), b"*1\r\n+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_saves") != "2"
        || info_field(&mut c, "rdb_bgsave_in_progress") != "0"
    {
        assert!(Instant::now() < deadline, "{}", s.log_tail(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(s.log().contains("stopping it"), "{}", s.log_tail(10));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["check-snapshot", dir.file("dump.cairn").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("OK: 0 keys"),
        "{}",
        text(&out.stdout)
    );
    // Outside EXEC, FLUSHALL saves at once.
    c.cmd(&["SET", "a", "1"]);
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
    assert_eq!(info_field(&mut c, "rdb_saves"), "4");
}

#[test]
fn save_blocks_only_its_own_worker() {
    let dir = TestDir::new("snapshot", "saveblocks");
    let s = start_cairn(&["--dir", dir.s(), "--server-threads", "2"]);
    let mut c = s.conn();
    for i in 0..200 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    // About a second of SAVE (5 ms per key written).
    c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "5000"]);
    // Connections go to the workers in turn: `other` is on the second one.
    let mut other = s.conn();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    c.send(&[b"SAVE"]);
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    assert_eq!(other.cmd(&["SET", "during", "1"]), b"+OK\r\n");
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    // The write answered during SAVE came after its cut: not in the file.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["check-snapshot", dir.file("dump.cairn").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("OK: 200 keys"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn sigterm_during_a_load_exits_at_once() {
    let dir = TestDir::new("snapshot", "termload");
    {
        let s = start_cairn(&["--dir", dir.s()]);
        let mut c = s.conn();
        for i in 0..300 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    }
    let before = std::fs::read(dir.file("dump.cairn")).unwrap();
    // 20 ms per key: the load would take 6 s.
    let mut s = start_cairn(&[
        "--dir",
        dir.s(),
        "--save",
        "1 1",
        "--key-load-delay",
        "20000",
    ]);
    let mut c = s.conn();
    assert!(c.cmd(&["PING"]).starts_with(b"-LOADING"));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) };
    let st = s
        .wait_exit(Duration::from_secs(3))
        .expect("exits during the load");
    assert!(st.success());
    assert!(s.log().contains("during loading"), "{}", s.log_tail(5));
    // Nothing half-loaded was saved over the snapshot.
    assert_eq!(std::fs::read(dir.file("dump.cairn")).unwrap(), before);
}

/// Peak extra memory (INFO `rdb_last_cow_size`) of a slow BGSAVE while a
/// client overwrites every key, under `snapshot-queue-limit`.
fn cow_peak_under_storm(limit: &str) -> u64 {
    let dir = TestDir::new("snapshot", "cow-limit");
    let s = start_cairn(&[
        "--dir",
        dir.s(),
        "--rdb-key-save-delay",
        "100",
        "--snapshot-queue-limit",
        limit,
    ]);
    let mut c = s.conn();
    let mut r = redis_client(s.port);
    let big = "x".repeat(2000);
    let mut p = redis::pipe();
    for i in 0..4000 {
        p.cmd("SET").arg(format!("k{i}")).arg(&big).ignore();
    }
    let _: () = p.query(&mut r).unwrap();
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    std::thread::sleep(Duration::from_millis(20));
    let mut p = redis::pipe();
    for i in (0..4000).rev() {
        p.cmd("SET").arg(format!("k{i}")).arg("new").ignore();
    }
    let _: () = p.query(&mut r).unwrap();
    wait_bgsave_done(&mut c);
    info_field(&mut c, "rdb_last_cow_size").parse().unwrap()
}

#[test]
fn snapshot_queue_limit_bounds_the_extra_memory_of_a_bgsave() {
    // 8 MB of values; the overwrites reach most shards before the sweep.
    let unbounded = cow_peak_under_storm("0");
    assert!(unbounded > 3 << 20, "no limit: peak {unbounded}");
    let bounded = cow_peak_under_storm("1mb");
    assert!(
        bounded <= (1 << 20) + (64 << 10),
        "1mb limit: peak {bounded}"
    );
}
