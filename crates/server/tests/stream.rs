//! Streams end to end (issue 22, Redis 7.0 `t_stream.c` behaviour) through
//! the `redis` crate: every command with its main options and errors,
//! blocking XREAD and XREADGROUP served from clients on other workers in
//! the order they blocked, consumer-group failover with XAUTOCLAIM across
//! several clients, keyspace notifications, and streams with their groups
//! surviving a restart through a snapshot and through the journal. The
//! byte-exact replies are compared with redis-server by the differential
//! corpus (`tests/diff/stream*.txt`).

mod support;

use redis::{Connection, Value};
use std::time::{Duration, Instant};
use support::{err, int, ok, q, redis_client, server, start_cairn, RawConn, TestDir};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// XRANGE's entries as (id, [field, value, ...]).
type Entries = Vec<(String, Vec<String>)>;

/// XPENDING's extended rows: (id, consumer, idle ms, deliveries).
type Pending = Vec<(String, String, i64, i64)>;

fn range(c: &mut Connection, key: &str) -> Entries {
    q(c, &["XRANGE", key, "-", "+"])
}

fn ids(e: &Entries) -> Vec<&str> {
    e.iter().map(|(i, _)| i.as_str()).collect()
}

#[test]
fn add_range_len_del_trim() {
    let (_s, mut c) = server();
    assert_eq!(q::<String>(&mut c, &["XADD", "s", "1-1", "a", "1"]), "1-1");
    assert_eq!(q::<String>(&mut c, &["XADD", "s", "1-*", "a", "2"]), "1-2");
    assert_eq!(q::<String>(&mut c, &["XADD", "s", "5", "a", "3"]), "5-0");
    let auto: String = q(&mut c, &["XADD", "s", "*", "b", "4"]);
    assert!(auto.ends_with("-0") && auto.len() > 10, "{auto}");
    assert_eq!(
        err(&mut c, &["XADD", "s", "2-0", "a", "1"]),
        "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    );
    assert_eq!(
        err(&mut c, &["XADD", "z", "0-0", "a", "1"]),
        "ERR The ID specified in XADD must be greater than 0-0"
    );
    assert_eq!(int(&mut c, &["EXISTS", "z"]), 0);
    assert_eq!(
        err(&mut c, &["XADD", "s", "x-1", "a", "1"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(&mut c, &["XADD", "s", "9-9", "a"]),
        "ERR wrong number of arguments for 'xadd' command"
    );
    let none: Option<String> = q(&mut c, &["XADD", "nokey", "NOMKSTREAM", "*", "a", "1"]);
    assert_eq!(none, None);
    assert_eq!(int(&mut c, &["XLEN", "s"]), 4);
    assert_eq!(int(&mut c, &["XLEN", "nokey"]), 0);

    let all = range(&mut c, "s");
    assert_eq!(ids(&all), vec!["1-1", "1-2", "5-0", auto.as_str()]);
    assert_eq!(all[0].1, vec!["a", "1"]);
    let rev: Entries = q(&mut c, &["XREVRANGE", "s", "+", "-", "COUNT", "2"]);
    assert_eq!(ids(&rev), vec![auto.as_str(), "5-0"]);
    let excl: Entries = q(&mut c, &["XRANGE", "s", "(1-1", "(5-0"]);
    assert_eq!(ids(&excl), vec!["1-2"]);
    let nil: Value = q(&mut c, &["XRANGE", "s", "-", "+", "COUNT", "0"]);
    assert_eq!(nil, Value::Nil);
    assert_eq!(
        err(&mut c, &["XRANGE", "s", "(-", "+"]),
        "ERR Invalid stream ID specified as stream command argument"
    );

    assert_eq!(int(&mut c, &["XDEL", "s", "1-2", "7-7"]), 1);
    assert_eq!(int(&mut c, &["XLEN", "s"]), 3);
    assert_eq!(int(&mut c, &["XTRIM", "s", "MAXLEN", "1"]), 2);
    assert_eq!(ids(&range(&mut c, "s")), vec![auto.as_str()]);
    assert_eq!(int(&mut c, &["XTRIM", "s", "MINID", "0"]), 0);
    assert_eq!(
        err(&mut c, &["XTRIM", "s", "MAXLEN", "1", "LIMIT", "5"]),
        "ERR syntax error, LIMIT cannot be used without the special ~ option"
    );
    assert_eq!(
        err(&mut c, &["XTRIM", "s"]),
        "ERR wrong number of arguments for 'xtrim' command"
    );
    assert_eq!(err(&mut c, &["XTRIM", "s", "FOO", "1"]), "ERR syntax error");

    // `~` trims whole nodes of 100 entries, as Redis's listpacks.
    for i in 1..=250 {
        let id = format!("{i}-0");
        let _: String = q(&mut c, &["XADD", "big", &id, "f", "v"]);
    }
    assert_eq!(int(&mut c, &["XTRIM", "big", "MAXLEN", "~", "120"]), 100);
    assert_eq!(int(&mut c, &["XLEN", "big"]), 150);
    let _: String = q(
        &mut c,
        &["XADD", "big", "MAXLEN", "=", "10", "251", "f", "v"],
    );
    assert_eq!(int(&mut c, &["XLEN", "big"]), 10);

    ok(&mut c, &["SET", "str", "x"]);
    assert_eq!(err(&mut c, &["XADD", "str", "*", "a", "1"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["XRANGE", "str", "-", "+"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["XLEN", "str"]), WRONGTYPE);

    // XSETID and the counters XINFO shows.
    ok(
        &mut c,
        &[
            "XSETID",
            "big",
            "999-0",
            "ENTRIESADDED",
            "500",
            "MAXDELETEDID",
            "3-0",
        ],
    );
    let info: std::collections::HashMap<String, Value> = q(&mut c, &["XINFO", "STREAM", "big"]);
    assert_eq!(info["length"], Value::Int(10));
    assert_eq!(info["entries-added"], Value::Int(500));
    assert_eq!(
        info["last-generated-id"],
        Value::BulkString(b"999-0".to_vec())
    );
    assert_eq!(
        info["max-deleted-entry-id"],
        Value::BulkString(b"3-0".to_vec())
    );
    assert_eq!(
        err(&mut c, &["XSETID", "big", "1-0"]),
        "ERR The ID specified in XSETID is smaller than the target stream top item"
    );
    assert_eq!(err(&mut c, &["XSETID", "nokey", "1-0"]), "ERR no such key");
    assert_eq!(q::<String>(&mut c, &["TYPE", "big"]), "stream");
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "big"]),
        "stream"
    );
    assert!(int(&mut c, &["MEMORY", "USAGE", "big"]) > 100);
}

#[test]
fn groups_pending_claims_and_info() {
    let (_s, mut c) = server();
    for i in 1..=4 {
        let id = format!("{i}-0");
        let _: String = q(&mut c, &["XADD", "s", &id, "n", &i.to_string()]);
    }
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    assert_eq!(
        err(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]),
        "BUSYGROUP Consumer Group name already exists"
    );
    assert!(err(&mut c, &["XGROUP", "CREATE", "nokey", "g", "$"])
        .starts_with("ERR The XGROUP subcommand requires the key to exist."));
    ok(&mut c, &["XGROUP", "CREATE", "nokey", "g", "$", "MKSTREAM"]);
    assert_eq!(int(&mut c, &["XLEN", "nokey"]), 0);

    let got: Value = q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "3",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let Value::Array(streams) = got else {
        panic!("{got:?}")
    };
    assert_eq!(streams.len(), 1);
    assert_eq!(
        err(
            &mut c,
            &["XREADGROUP", "GROUP", "nog", "a", "STREAMS", "s", ">"]
        ),
        "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"
    );
    // The summary: 3 pending, all alice's.
    let sum: (i64, String, String, Vec<(String, String)>) = q(&mut c, &["XPENDING", "s", "g"]);
    assert_eq!(sum.0, 3);
    assert_eq!((sum.1.as_str(), sum.2.as_str()), ("1-0", "3-0"));
    assert_eq!(sum.3, vec![("alice".to_string(), "3".to_string())]);
    let rows: Pending = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10"]);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.1 == "alice" && r.3 == 1));

    // History: alice's own pending entries again, counting deliveries.
    let _: Value = q(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
    );
    let rows: Pending = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "alice"]);
    assert!(rows.iter().all(|r| r.3 == 2), "{rows:?}");

    assert_eq!(int(&mut c, &["XACK", "s", "g", "1-0", "9-0"]), 1);
    assert_eq!(int(&mut c, &["XACK", "s", "nog", "1-0"]), 0);
    let claimed: Vec<String> = q(&mut c, &["XCLAIM", "s", "g", "bob", "0", "2-0", "JUSTID"]);
    assert_eq!(claimed, vec!["2-0"]);
    let rows: Pending = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10", "bob"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].3, 2, "JUSTID keeps the count");
    let claimed: Entries = q(
        &mut c,
        &["XCLAIM", "s", "g", "bob", "0", "3-0", "RETRYCOUNT", "9"],
    );
    assert_eq!(claimed[0].1, vec!["n", "3"]);
    assert_eq!(
        err(&mut c, &["XCLAIM", "s", "g", "bob", "0", "3-0", "BOGUS"]),
        "ERR Unrecognized XCLAIM option 'BOGUS'"
    );
    assert_eq!(
        err(&mut c, &["XCLAIM", "s", "nog", "bob", "0", "3-0"]),
        "NOGROUP No such key 's' or consumer group 'nog'"
    );

    // A deleted pending entry: XAUTOCLAIM drops and reports it.
    assert_eq!(int(&mut c, &["XDEL", "s", "2-0"]), 1);
    let (next, got, deleted): (String, Vec<String>, Vec<String>) = q(
        &mut c,
        &["XAUTOCLAIM", "s", "g", "carol", "0", "0", "JUSTID"],
    );
    assert_eq!(next, "0-0");
    assert_eq!(got, vec!["3-0"]);
    assert_eq!(deleted, vec!["2-0"]);
    assert_eq!(
        err(
            &mut c,
            &["XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0"]
        ),
        "ERR COUNT must be > 0"
    );

    let groups: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "GROUPS", "s"]);
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0]["pending"], Value::Int(1));
    assert_eq!(
        groups[0]["last-delivered-id"],
        Value::BulkString(b"3-0".to_vec())
    );
    assert_eq!(groups[0]["consumers"], Value::Int(3));
    let consumers: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "CONSUMERS", "s", "g"]);
    let names: Vec<&Value> = consumers.iter().map(|m| &m["name"]).collect();
    assert_eq!(
        names,
        vec![
            &Value::BulkString(b"alice".to_vec()),
            &Value::BulkString(b"bob".to_vec()),
            &Value::BulkString(b"carol".to_vec())
        ]
    );
    assert_eq!(
        err(&mut c, &["XINFO", "CONSUMERS", "s", "nog"]),
        "NOGROUP No such consumer group 'nog' for key name 's'"
    );
    assert_eq!(
        int(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "dave"]),
        1
    );
    assert_eq!(
        int(&mut c, &["XGROUP", "DELCONSUMER", "s", "g", "carol"]),
        1
    );
    assert_eq!(int(&mut c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    assert_eq!(int(&mut c, &["XGROUP", "DESTROY", "s", "g"]), 0);

    // XREAD: several streams, `$`, COUNT.
    let none: Value = q(&mut c, &["XREAD", "STREAMS", "s", "$"]);
    assert_eq!(none, Value::Nil);
    let got: Vec<(String, Entries)> = q(
        &mut c,
        &["XREAD", "COUNT", "1", "STREAMS", "s", "nokey", "0", "0"],
    );
    assert_eq!(got.len(), 1);
    assert_eq!(ids(&got[0].1), vec!["1-0"]);
    assert!(err(&mut c, &["XREAD", "STREAMS", "s", "t", "0"])
        .starts_with("ERR Unbalanced 'xread' list"));
}

/// A second connection to the same server (on another worker when the
/// server runs several: connections are spread round-robin).
fn blocked(port: u16, args: &[&str]) -> std::thread::JoinHandle<Vec<u8>> {
    let mut c = RawConn::connect(port);
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    // Sent now, so the order of blocking is the order of the calls.
    let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&refs);
    std::thread::spawn(move || c.read_raw_reply())
}

/// Waits until `n` clients are blocked.
fn wait_blocked(c: &mut Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = q(c, &["INFO", "clients"]);
        let now = info
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if now >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{n} clients never blocked: {info}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn blocking_reads_across_workers() {
    let s = start_cairn(&["--server-threads", "4", "--worker-balance", "no"]);
    let mut c = redis_client(s.port);
    let _: String = q(&mut c, &["XADD", "s", "1-0", "a", "1"]);
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]);
    // Three XREADs on `$` (resolved when they block) and two group readers,
    // on different workers.
    let readers: Vec<_> = (0..3)
        .map(|_| blocked(s.port, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]))
        .collect();
    let g1 = blocked(
        s.port,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c1",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 4);
    let g2 = blocked(
        s.port,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c2",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 5);
    let _: String = q(&mut c, &["XADD", "s", "2-0", "b", "2"]);
    let want = b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-0\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n";
    for r in readers {
        assert_eq!(r.join().unwrap(), want.to_vec());
    }
    // The first group reader (FIFO) gets the entry; the second waits on.
    assert_eq!(g1.join().unwrap(), want.to_vec());
    let _: String = q(&mut c, &["XADD", "s", "3-0", "c", "3"]);
    let r2 = g2.join().unwrap();
    assert!(
        String::from_utf8_lossy(&r2).contains("3-0"),
        "{:?}",
        String::from_utf8_lossy(&r2)
    );
    let rows: Pending = q(&mut c, &["XPENDING", "s", "g", "-", "+", "10"]);
    let owners: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(owners, vec![("2-0", "c1"), ("3-0", "c2")]);

    // Timeouts, and the errors of a group or key gone while waiting.
    let t = Instant::now();
    let nil: Value = q(&mut c, &["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]);
    assert_eq!(nil, Value::Nil);
    assert!(t.elapsed() >= Duration::from_millis(45));
    let gone = blocked(
        s.port,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c3",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 1);
    assert_eq!(int(&mut c, &["XGROUP", "DESTROY", "s", "g"]), 1);
    assert_eq!(
        gone.join().unwrap(),
        b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n".to_vec()
    );
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$"]);
    let gone = blocked(
        s.port,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c3",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 1);
    assert_eq!(int(&mut c, &["DEL", "s"]), 1);
    assert_eq!(
        gone.join().unwrap(),
        b"-UNBLOCKED the stream key no longer exists\r\n".to_vec()
    );
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    let gone = blocked(
        s.port,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c3",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
    );
    wait_blocked(&mut c, 1);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(
        gone.join().unwrap(),
        b"-UNBLOCKED the stream key no longer exists\r\n".to_vec()
    );
    // Inside MULTI, BLOCK does not block.
    let mut tx = RawConn::connect(s.port);
    assert_eq!(tx.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(
        tx.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        b"+QUEUED\r\n"
    );
    assert_eq!(tx.cmd(&["EXEC"]), b"*1\r\n*-1\r\n");
}

/// A blocked XREAD is served from streams only: a key that becomes a list
/// meanwhile (a MULTI of XADD, DEL, LPUSH) leaves it waiting, not answered
/// WRONGTYPE, and the stream made after that serves it (Redis's
/// "XREAD: XADD + DEL + LPUSH should not awake client").
#[test]
fn a_key_turned_list_leaves_xread_waiting() {
    let (s, mut c) = server();
    let reader = blocked(s.port, &["XREAD", "BLOCK", "20000", "STREAMS", "s1", "$"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["MULTI"]);
    for cmd in [
        &["XADD", "s1", "*", "old", "abcd1234"][..],
        &["DEL", "s1"],
        &["LPUSH", "s1", "foo", "bar"],
    ] {
        let queued: String = q(&mut c, cmd);
        assert_eq!(queued, "QUEUED");
    }
    let _: Value = q(&mut c, &["EXEC"]);
    wait_blocked(&mut c, 1);
    assert_eq!(int(&mut c, &["DEL", "s1"]), 1);
    let _: String = q(&mut c, &["XADD", "s1", "5-1", "new", "abcd1234"]);
    let got = reader.join().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        "*1\r\n*2\r\n$2\r\ns1\r\n*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$3\r\nnew\r\n$8\r\nabcd1234\r\n"
    );
}

/// Consumers fail over: a consumer that read entries dies without
/// acknowledging them, and the others take them over with XAUTOCLAIM
/// until every entry is acknowledged exactly once.
#[test]
fn consumer_group_failover_with_xautoclaim() {
    let s = start_cairn(&["--server-threads", "2", "--worker-balance", "no"]);
    let mut c = redis_client(s.port);
    ok(
        &mut c,
        &["XGROUP", "CREATE", "jobs", "workers", "0", "MKSTREAM"],
    );
    for i in 0..60 {
        let _: String = q(&mut c, &["XADD", "jobs", "*", "job", &i.to_string()]);
    }
    // The doomed consumer reads 20 and never acknowledges them.
    let mut doomed = redis_client(s.port);
    let _: Value = q(
        &mut doomed,
        &[
            "XREADGROUP",
            "GROUP",
            "workers",
            "doomed",
            "COUNT",
            "20",
            "STREAMS",
            "jobs",
            ">",
        ],
    );
    drop(doomed);
    std::thread::sleep(Duration::from_millis(30));
    let done = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let handles: Vec<_> = (0..3)
        .map(|w| {
            let done = done.clone();
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = redis_client(port);
                let name = format!("w{w}");
                loop {
                    let mut ids: Vec<String> = Vec::new();
                    let (_, claimed, _): (String, Vec<String>, Vec<String>) = q(
                        &mut c,
                        &[
                            "XAUTOCLAIM",
                            "jobs",
                            "workers",
                            &name,
                            "20",
                            "0",
                            "COUNT",
                            "5",
                            "JUSTID",
                        ],
                    );
                    ids.extend(claimed);
                    let fresh: Option<Vec<(String, Entries)>> = q(
                        &mut c,
                        &[
                            "XREADGROUP",
                            "GROUP",
                            "workers",
                            &name,
                            "COUNT",
                            "5",
                            "STREAMS",
                            "jobs",
                            ">",
                        ],
                    );
                    if let Some(f) = fresh {
                        ids.extend(f[0].1.iter().map(|(i, _)| i.clone()));
                    }
                    if ids.is_empty() {
                        let pending: (i64, Value, Value, Value) =
                            q(&mut c, &["XPENDING", "jobs", "workers"]);
                        if pending.0 == 0 {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    for id in &ids {
                        let n = int(&mut c, &["XACK", "jobs", "workers", id]);
                        if n == 1 {
                            done.lock().unwrap().push(id.clone());
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut done = done.lock().unwrap().clone();
    done.sort();
    let total = done.len();
    done.dedup();
    assert_eq!(total, 60, "every job acknowledged exactly once");
    assert_eq!(done.len(), 60);
    let sum: (i64, Value, Value, Value) = q(&mut c, &["XPENDING", "jobs", "workers"]);
    assert_eq!(sum.0, 0);
}

#[test]
fn keyspace_notifications() {
    let (s, mut c) = server();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = RawConn::connect(s.port);
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    let _: String = q(&mut c, &["XADD", "s", "MAXLEN", "1", "1-0", "a", "1"]);
    let _: String = q(&mut c, &["XADD", "s", "MAXLEN", "1", "2-0", "a", "1"]);
    ok(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    let _: i64 = q(&mut c, &["XGROUP", "CREATECONSUMER", "s", "g", "c"]);
    ok(&mut c, &["XGROUP", "SETID", "s", "g", "0"]);
    let _: i64 = q(&mut c, &["XGROUP", "DELCONSUMER", "s", "g", "c"]);
    let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "s", "g"]);
    let _: i64 = q(&mut c, &["XDEL", "s", "2-0"]);
    ok(&mut c, &["XSETID", "s", "5-0"]);
    let mut events = Vec::new();
    for _ in 0..10 {
        let f = String::from_utf8_lossy(&sub.read_raw_reply()).into_owned();
        events.push(f.lines().nth(6).unwrap_or_default().to_string());
    }
    let want = [
        "xadd",
        "xadd",
        "xtrim",
        "xgroup-create",
        "xgroup-createconsumer",
        "xgroup-setid",
        "xgroup-delconsumer",
        "xgroup-destroy",
        "xdel",
        "xsetid",
    ];
    let want: Vec<String> = want.iter().map(|e| format!("__keyevent@0__:{e}")).collect();
    assert_eq!(events, want);
}

/// Connects once the server answers PING (not -LOADING).
fn loaded(port: u16) -> Connection {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut c = redis_client(port);
        if redis::cmd("PING").query::<String>(&mut c).is_ok() {
            return c;
        }
        assert!(Instant::now() < deadline, "never loaded");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Builds a stream with deletions, a group with pending entries owned by
/// two consumers, and custom counters.
fn fill(c: &mut Connection) {
    for i in 1..=150 {
        let id = format!("{i}-1");
        let _: String = q(c, &["XADD", "s", &id, "f", &i.to_string(), "g", "x"]);
    }
    let _: i64 = q(c, &["XDEL", "s", "3-1", "149-1"]);
    ok(c, &["XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "0"]);
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "a",
            "COUNT",
            "5",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let _: Value = q(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "b",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    let _: Value = q(
        c,
        &[
            "XCLAIM",
            "s",
            "g",
            "b",
            "0",
            "1-1",
            "TIME",
            "12345",
            "RETRYCOUNT",
            "7",
        ],
    );
    let _: i64 = q(c, &["XACK", "s", "g", "2-1"]);
    ok(c, &["XGROUP", "CREATE", "s", "other", "$"]);
    let _: i64 = q(c, &["XGROUP", "CREATECONSUMER", "s", "other", "idle"]);
    let _: String = q(c, &["XADD", "t", "MAXLEN", "~", "10", "*", "a", "1"]);
}

/// What must survive a restart: entries, counters and groups as XINFO
/// STREAM FULL shows them, seen times masked (they are kept, but the
/// journal replays them at replay time).
fn state(c: &mut Connection) -> (Entries, Value, Value, Pending) {
    let info: Value = q(c, &["XINFO", "STREAM", "s"]);
    let groups: Value = q(c, &["XINFO", "GROUPS", "s"]);
    let pel: Pending = q(c, &["XPENDING", "s", "g", "-", "+", "100"]);
    let pel = pel.into_iter().map(|(i, o, _, n)| (i, o, 0, n)).collect();
    (range(c, "s"), info, groups, pel)
}

#[test]
fn restart_through_snapshot_keeps_streams_and_groups() {
    let dir = TestDir::new("stream", "snap");
    let s = start_cairn(&["--dir", dir.s()]);
    let mut c = redis_client(s.port);
    fill(&mut c);
    let before = state(&mut c);
    ok(&mut c, &["SAVE"]);
    drop(s);
    let s = start_cairn(&["--dir", dir.s()]);
    let mut c = loaded(s.port);
    assert_eq!(state(&mut c), before);
    assert_eq!(q::<String>(&mut c, &["TYPE", "t"]), "stream");
}

#[test]
fn restart_through_journal_keeps_streams_and_groups() {
    let dir = TestDir::new("stream", "journal");
    let args = [
        "--dir",
        dir.s(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let s = start_cairn(&args);
    let mut c = loaded(s.port);
    fill(&mut c);
    let before = state(&mut c);
    drop(s); // SIGKILL: only the journal holds the writes.
    let s = start_cairn(&args);
    let mut c = loaded(s.port);
    assert_eq!(state(&mut c), before);
    // The journal compacted into a base snapshot replays the same.
    let started: String = q(&mut c, &["BGREWRITEAOF"]);
    assert_eq!(started, "Background append only file rewriting started");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = q(&mut c, &["INFO", "persistence"]);
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            break;
        }
        assert!(Instant::now() < deadline, "rewrite never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _: String = q(&mut c, &["XADD", "s", "500-0", "after", "rewrite"]);
    let before = state(&mut c);
    drop(s);
    let s = start_cairn(&args);
    let mut c = loaded(s.port);
    assert_eq!(state(&mut c), before);
}
