//! The rest of Redis 7.0's commands (issue 22) end to end: COMMAND INFO
//! and DOCS of every command Cairn has against a reference redis-server,
//! byte for byte in RESP2 and RESP3; COMMAND GETKEYSANDFLAGS on argument
//! vectors of every movable-key command, also against Redis; WAIT, ROLE,
//! READONLY/READWRITE/ASKING, LOLWUT and LATENCY through the `redis`
//! crate. Without redis-server on PATH the cross-checks print why and
//! pass (unless `CI` is set, as in `support::start_redis`).
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cairn_protocol::resp::Frame;
use support::{err, escape, int, q, start_cairn, start_redis, RawConn, Server};

fn cairn() -> Server {
    start_cairn(&["--enable-debug-command", "yes"])
}

fn bulk_text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

/// The names in a COMMAND LIST reply.
fn command_list(conn: &mut RawConn) -> Vec<String> {
    conn.send(&[b"COMMAND", b"LIST"]);
    match conn.read_frame() {
        Frame::Array(items) => items.iter().map(bulk_text).collect(),
        other => panic!("COMMAND LIST: {other:?}"),
    }
}

/// A container's COMMAND INFO entry with its subcommand entries (element
/// 9) cut to `keep` and sorted: Redis lists them in hash-table order.
fn norm_info(entry: Frame, keep: &BTreeSet<String>) -> Frame {
    let Frame::Array(outer) = entry else {
        return entry;
    };
    let mut outer: Vec<Frame> = outer
        .into_iter()
        .map(|e| match e {
            Frame::Array(mut f) if f.len() == 10 => {
                if let Frame::Array(subs) | Frame::Set(subs) = &mut f[9] {
                    subs.retain(
                        |s| matches!(s, Frame::Array(x) if keep.contains(&bulk_text(&x[0]))),
                    );
                    subs.sort_by_key(|s| match s {
                        Frame::Array(x) => bulk_text(&x[0]),
                        _ => String::new(),
                    });
                }
                Frame::Array(f)
            }
            other => other,
        })
        .collect();
    outer.shrink_to_fit();
    Frame::Array(outer)
}

/// The same for COMMAND DOCS: its "subcommands" map, in RESP2 a flat
/// array of name, docs pairs.
fn norm_docs(reply: Frame, keep: &BTreeSet<String>) -> Frame {
    fn fix_pairs(pairs: &mut Vec<(Frame, Frame)>, keep: &BTreeSet<String>) {
        pairs.retain(|(k, _)| keep.contains(&bulk_text(k)));
        pairs.sort_by_key(|(k, _)| bulk_text(k));
    }
    fn fix_doc(doc: &mut Frame, keep: &BTreeSet<String>) {
        match doc {
            Frame::Map(fields) => {
                for (k, v) in fields.iter_mut() {
                    if bulk_text(k) == "subcommands" {
                        if let Frame::Map(pairs) = v {
                            fix_pairs(pairs, keep);
                        }
                    }
                }
            }
            Frame::Array(flat) => {
                for i in (0..flat.len()).step_by(2) {
                    if matches!(&flat[i], Frame::Bulk(b) if b == b"subcommands") {
                        if let Frame::Array(inner) = &mut flat[i + 1] {
                            let mut pairs: Vec<(Frame, Frame)> = Vec::new();
                            let mut it = std::mem::take(inner).into_iter();
                            while let (Some(a), Some(b)) = (it.next(), it.next()) {
                                pairs.push((a, b));
                            }
                            fix_pairs(&mut pairs, keep);
                            *inner = pairs.into_iter().flat_map(|(a, b)| [a, b]).collect();
                        }
                    }
                }
            }
            _ => {}
        }
    }
    match reply {
        Frame::Map(mut entries) => {
            for (_, doc) in entries.iter_mut() {
                fix_doc(doc, keep);
            }
            Frame::Map(entries)
        }
        Frame::Array(mut flat) => {
            for i in (1..flat.len()).step_by(2) {
                fix_doc(&mut flat[i], keep);
            }
            Frame::Array(flat)
        }
        other => other,
    }
}

#[test]
fn command_info_and_docs_match_redis_for_every_command() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let cairn = cairn();
    let (mut c, mut r) = (cairn.conn(), redis.conn());
    let names = command_list(&mut c);
    let all: BTreeSet<String> = names.iter().cloned().collect();
    assert!(names.len() > 200, "{}", names.len());
    for proto in ["2", "3"] {
        c.cmd(&["HELLO", proto]);
        r.cmd(&["HELLO", proto]);
        let mut checked = 0;
        for name in &names {
            let container = all.iter().any(|n| n.starts_with(&format!("{name}|")));
            for sub in ["INFO", "DOCS"] {
                let args = ["COMMAND", sub, name.as_str()];
                if container {
                    c.send(&[b"COMMAND", sub.as_bytes(), name.as_bytes()]);
                    r.send(&[b"COMMAND", sub.as_bytes(), name.as_bytes()]);
                    let (fc, fr) = (c.read_frame(), r.read_frame());
                    let (fc, fr) = if sub == "INFO" {
                        (norm_info(fc, &all), norm_info(fr, &all))
                    } else {
                        (norm_docs(fc, &all), norm_docs(fr, &all))
                    };
                    assert_eq!(fc, fr, "RESP{proto} {args:?}");
                } else {
                    let (bc, br) = (c.cmd(&args), r.cmd(&args));
                    assert!(
                        bc == br,
                        "RESP{proto} {args:?}\n redis: {}\n cairn: {}",
                        escape(&br),
                        escape(&bc)
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, names.len() * 2);
    }
}

/// Argument vectors for every command whose keys are not at fixed
/// positions, and the callbacks' corner cases.
const GETKEYS_CASES: &[&[&str]] = &[
    &["sort", "k"],
    &["sort", "k", "STORE", "d"],
    &[
        "sort", "k", "LIMIT", "0", "1", "GET", "#", "BY", "w", "STORE", "d",
    ],
    &["sort", "k", "STORE", "d", "STORE", "e"],
    &["sort", "k", "GET", "store", "x"],
    &["sort_ro", "k", "BY", "w"],
    &["eval", "s", "0"],
    &["eval", "s", "2", "a", "b", "c"],
    &["eval", "s", "3", "a", "b"],
    &["eval", "s", "2x", "a", "b"],
    &["evalsha", "s", "1", "a"],
    &["eval_ro", "s", "1", "a"],
    &["evalsha_ro", "s", "1", "a"],
    &["fcall", "f", "1", "a"],
    &["fcall_ro", "f", "2", "a", "b"],
    &["zunionstore", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
    &["zinterstore", "d", "1", "a"],
    &["zdiffstore", "d", "2", "a", "b"],
    &["zunionstore", "d", "2x", "a", "b"],
    &["zunion", "2", "a", "b"],
    &["zinter", "1", "a"],
    &["zdiff", "3", "a", "b"],
    &["zintercard", "2", "a", "b", "LIMIT", "1"],
    &["sintercard", "2", "a", "b"],
    &["lmpop", "2", "a", "b", "LEFT"],
    &["blmpop", "0", "2", "a", "b", "LEFT"],
    &["zmpop", "1", "a", "MIN"],
    &["bzmpop", "0", "2", "a", "b", "MAX"],
    &["set", "k", "v", "GET"],
    &["set", "k", "v", "EX", "1"],
    &["bitfield", "k", "GET", "u8", "0"],
    &["bitfield", "k", "SET", "u8", "0", "1"],
    &["bitfield_ro", "k", "GET", "u8", "0"],
    &["mset", "a", "1", "b", "2"],
    &["georadius", "g", "1", "2", "3", "km"],
    &["georadius", "g", "1", "2", "3", "km", "STORE", "d"],
    &[
        "georadius",
        "g",
        "1",
        "2",
        "3",
        "km",
        "STORE",
        "d",
        "STOREDIST",
        "e",
    ],
    &["georadiusbymember", "g", "m", "3", "km", "STOREDIST", "d"],
    &["georadius_ro", "g", "1", "2", "3", "km"],
    &[
        "geosearchstore",
        "d",
        "s",
        "FROMMEMBER",
        "m",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["xread", "STREAMS", "a", "b", "0", "0"],
    &["xread", "COUNT", "2", "BLOCK", "0", "STREAMS", "a", "0"],
    &["xread", "STREAMS", "a", "b", "0"],
    &[
        "xreadgroup",
        "GROUP",
        "g",
        "c",
        "NOACK",
        "STREAMS",
        "a",
        ">",
    ],
    &["xreadgroup", "GROUP", "streams", "c", "STREAMS", "a", ">"],
    &["migrate", "h", "1", "k", "0", "10"],
    &["migrate", "h", "1", "", "0", "10", "KEYS", "a", "b"],
    &[
        "migrate", "h", "1", "", "0", "10", "COPY", "AUTH", "p", "KEYS", "a",
    ],
];

#[test]
fn getkeysandflags_matches_redis_for_movable_keys() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    let cairn = cairn();
    let (mut c, mut r) = (cairn.conn(), redis.conn());
    let have: BTreeSet<String> = command_list(&mut c).into_iter().collect();
    let mut skipped = Vec::new();
    for proto in ["2", "3"] {
        c.cmd(&["HELLO", proto]);
        r.cmd(&["HELLO", proto]);
        for case in GETKEYS_CASES {
            if !have.contains(case[0]) {
                // A command another part of issue 22 adds: checked once
                // it exists.
                skipped.push(case[0]);
                continue;
            }
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                let args: Vec<&str> = ["COMMAND", sub]
                    .iter()
                    .chain(case.iter())
                    .copied()
                    .collect();
                let (bc, br) = (c.cmd(&args), r.cmd(&args));
                assert!(
                    bc == br,
                    "RESP{proto} {args:?}\n redis: {}\n cairn: {}",
                    escape(&br),
                    escape(&bc)
                );
            }
        }
    }
    if !skipped.is_empty() {
        skipped.dedup();
        eprintln!("not in Cairn yet, not compared: {skipped:?}");
    }
}

#[test]
fn wait_role_and_cluster_commands() {
    let s = cairn();
    let mut con = support::redis_client(s.port);
    assert_eq!(int(&mut con, &["WAIT", "0", "0"]), 0);
    // No replica will ever acknowledge: WAIT runs to its timeout.
    let t = Instant::now();
    assert_eq!(int(&mut con, &["WAIT", "1", "150"]), 0);
    assert!(
        t.elapsed() >= Duration::from_millis(140),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        err(&mut con, &["WAIT", "x", "0"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["WAIT", "1", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(&mut con, &["WAIT", "1", "1.5"]),
        "ERR timeout is not an integer or out of range"
    );
    // Inside MULTI it does not block.
    let (n,): (i64,) = redis::pipe()
        .atomic()
        .cmd("WAIT")
        .arg(3)
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 0);
    // A WAIT with no timeout ends on CLIENT UNBLOCK, with the count or
    // with an error. Each wait is on a fresh connection: a second CLIENT
    // UNBLOCK soon after a first on the same connection can be lost (a
    // bug of the blocking layer that BLPOP shares, not WAIT's).
    for (reason, want) in [
        ("TIMEOUT", "0"),
        ("ERROR", "UNBLOCKED client unblocked via CLIENT UNBLOCK"),
    ] {
        let mut waiter = support::redis_client(s.port);
        let id = int(&mut waiter, &["CLIENT", "ID"]);
        let h = std::thread::spawn(move || {
            let r: redis::RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(0).query(&mut waiter);
            match r {
                Ok(n) => n.to_string(),
                Err(e) => support::err_line(&e),
            }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while int(&mut con, &["CLIENT", "UNBLOCK", &id.to_string(), reason]) == 0 {
            assert!(Instant::now() < deadline, "WAIT never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(h.join().unwrap(), want);
    }

    let role: redis::Value = q(&mut con, &["ROLE"]);
    assert_eq!(
        role,
        redis::Value::Array(vec![
            redis::Value::BulkString(b"master".to_vec()),
            redis::Value::Int(0),
            redis::Value::Array(vec![]),
        ])
    );
    for c in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(
            err(&mut con, &[c]),
            "ERR This instance has cluster support disabled"
        );
    }
}

#[test]
fn lolwut_versions() {
    let s = cairn();
    let mut con = support::redis_client(s.port);
    let plain: String = q(&mut con, &["LOLWUT"]);
    assert_eq!(plain, "Redis ver. 7.0.15\n");
    let v7: String = q(&mut con, &["LOLWUT", "VERSION", "7"]);
    assert_eq!(v7, plain);
    let five: String = q(&mut con, &["LOLWUT", "VERSION", "5", "10", "3", "2"]);
    assert_eq!(
        five,
        "⢰⠒⠒⢲⠒⠒⣶⠒⠒⡆\n⢸⣀⣀⣸⣀⣀⣿⣀⣀⡇\n⢸⠀⠀⢸⠀⠀⣿⠀⠀⡇\n⠘⠒⠒⠚⠒⠒⠛⠒⠒⠃\n\n\
         Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15\n"
    );
    let six: String = q(&mut con, &["LOLWUT", "VERSION", "6", "12", "4"]);
    let rows: Vec<&str> = six.split('\n').collect();
    assert_eq!(rows.len(), 4 + 3);
    assert!(rows[5].starts_with("Original 8 bit image from Plaguemon"));
    assert_eq!(
        err(&mut con, &["LOLWUT", "VERSION", "5", "x"]),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn latency_monitor_records_slow_commands() {
    let s = cairn();
    let mut con = support::redis_client(s.port);
    let doctor: String = q(&mut con, &["LATENCY", "DOCTOR"]);
    assert!(doctor.starts_with("I'm sorry, Dave"), "{doctor}");
    support::ok(
        &mut con,
        &["CONFIG", "SET", "latency-monitor-threshold", "20"],
    );
    support::ok(&mut con, &["DEBUG", "SLEEP", "0.05"]);
    assert_eq!(int(&mut con, &["DBSIZE"]), 0);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut con, &["LATENCY", "LATEST"]);
    assert_eq!(latest.len(), 1);
    let (event, _, last, max) = &latest[0];
    assert_eq!(event, "command");
    assert!(*last >= 50 && *max >= 50, "{latest:?}");
    let history: Vec<(i64, i64)> = q(&mut con, &["LATENCY", "HISTORY", "command"]);
    assert_eq!(history.len(), 1);
    let graph: String = q(&mut con, &["LATENCY", "GRAPH", "command"]);
    assert!(graph.starts_with("command - high "), "{graph}");
    let doctor: String = q(&mut con, &["LATENCY", "DOCTOR"]);
    assert!(doctor.contains("1. command: 1 latency spikes"), "{doctor}");
    assert_eq!(
        err(&mut con, &["LATENCY", "GRAPH", "nosuch"]),
        "ERR No samples available for event 'nosuch'"
    );
    assert_eq!(int(&mut con, &["LATENCY", "RESET", "nosuch", "COMMAND"]), 1);
    let latest: Vec<redis::Value> = q(&mut con, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty());
}

/// True if no reply arrives on `c` within `wait`.
fn silent_for(c: &mut RawConn, wait: Duration) -> bool {
    c.stream().set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    let silent = match c.stream().peek(&mut b) {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    c.stream()
        .set_read_timeout(Some(support::IO_TIMEOUT))
        .unwrap();
    silent
}

#[test]
fn client_pause_write_holds_exec_of_writes_and_stops_expiry() {
    let s = cairn();
    let mut admin = s.conn();
    let (mut w, mut r) = (s.conn(), s.conn());
    // Queued before the pause: EXEC is what waits, as in Redis 7.0.
    assert_eq!(w.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(w.cmd(&["SET", "k", "v"]), b"+QUEUED\r\n");
    assert_eq!(r.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["GET", "k"]), b"+QUEUED\r\n");
    assert_eq!(admin.cmd(&["SET", "short", "v", "PX", "100"]), b"+OK\r\n");
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        b"+OK\r\n"
    );
    w.send(&[b"EXEC"]);
    assert!(
        silent_for(&mut w, Duration::from_millis(400)),
        "an EXEC of writes ran during PAUSE WRITE"
    );
    // An EXEC of reads runs.
    assert_eq!(r.cmd(&["EXEC"]), b"*1\r\n$-1\r\n");
    // The key's time has passed, but the sweep does not remove it while
    // clients are paused: it is still counted.
    assert_eq!(admin.cmd(&["DBSIZE"]), b":1\r\n");
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    assert_eq!(w.read_raw_reply(), b"*1\r\n+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while admin.cmd(&["DBSIZE"]) != b":1\r\n" {
        assert!(Instant::now() < deadline, "the sweep never ran again");
        std::thread::sleep(Duration::from_millis(20));
    }
    // DEBUG SET-ACTIVE-EXPIRE 0 stops the sweep too.
    assert_eq!(admin.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    assert_eq!(admin.cmd(&["SET", "short", "v", "PX", "50"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(admin.cmd(&["DBSIZE"]), b":2\r\n");
    assert_eq!(admin.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
}
