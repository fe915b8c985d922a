//! FAILOVER (issue 24 item 3; Redis 6.2+ `failoverCommand`): a master
//! pauses writes, waits for a replica to reach its offset, becomes that
//! replica's replica and sends it `PSYNC <replid> <offset> FAILOVER`, which
//! makes it a master. Tested: the refusals that need a replica (unknown
//! target, FORCE without TIMEOUT, already in progress, REPLICAOF while
//! failing over); the wait, ABORT and TIMEOUT against a replica that never
//! acknowledges; FORCE handing over after the timeout; hand-overs between
//! Cairn servers (the other replica stays a chained replica of the old
//! master), from Cairn to a real redis-server and from a redis-server to
//! Cairn. The argument errors are in tests/diff/failover.txt.
mod support;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use redis::Connection;
use support::{err, ok, q, redis_client, start_cairn, start_redis, RawConn, Server, TestDir};

fn info(c: &mut Connection, field: &str) -> String {
    let text: String = q(c, &["INFO", "replication"]);
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replica_of(args: &[&str], master: u16) -> Server {
    let port = master.to_string();
    let mut all = vec!["--replicaof", "127.0.0.1", &port];
    all.extend_from_slice(args);
    start_cairn(&all)
}

/// `n` replicas online on the master at `c`.
fn wait_online(c: &mut Connection, n: usize) {
    wait_for("replicas online", Duration::from_secs(20), || {
        info(c, "connected_slaves") == n.to_string()
            && (0..n).all(|i| info(c, &format!("slave{i}")).contains("state=online"))
    });
}

/// A replica by hand that announces `port` and never acknowledges: the
/// master's offset stays ahead of it.
fn silent_replica(master: u16, port: &str) -> RawConn {
    let mut raw = RawConn::connect(master);
    assert_eq!(raw.cmd(&["REPLCONF", "listening-port", port]), b"+OK\r\n");
    raw.send(&[b"PSYNC", b"?", b"-1"]);
    let mut r = BufReader::new(raw.stream().try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    raw
}

/// A write from a second connection, which a failover's pause holds.
fn held_write(port: u16) -> RawConn {
    let mut raw = RawConn::connect(port);
    raw.send(&[b"SET", b"held", b"1"]);
    raw
}

#[test]
fn waits_aborts_times_out_and_forces() {
    let dir = TestDir::new("failover", "silent");
    let master = start_cairn(&["--dir", dir.s()]);
    let mut c = redis_client(master.port);
    let fake = silent_replica(master.port, "4444");
    wait_online(&mut c, 1);
    // The replica's ACK is 0: a write puts the master ahead of it.
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(
        err(&mut c, &["FAILOVER", "TO", "127.0.0.1", "4445"]),
        "ERR FAILOVER target HOST and PORT is not a replica."
    );
    assert_eq!(
        err(&mut c, &["FAILOVER", "TO", "127.0.0.1", "4444", "FORCE"]),
        "ERR FAILOVER with force option requires both a timeout and target HOST and IP."
    );
    assert_eq!(
        err(&mut c, &["FAILOVER", "TIMEOUT", "100", "FORCE"]),
        "ERR FAILOVER with force option requires both a timeout and target HOST and IP."
    );

    // The wait, then ABORT: the held write runs.
    ok(&mut c, &["FAILOVER", "TO", "127.0.0.1", "4444"]);
    assert_eq!(info(&mut c, "master_failover_state"), "waiting-for-sync");
    assert_eq!(
        err(&mut c, &["FAILOVER"]),
        "ERR FAILOVER already in progress."
    );
    assert_eq!(
        err(&mut c, &["REPLICAOF", "127.0.0.1", "4444"]),
        "ERR REPLICAOF not allowed while failing over."
    );
    let mut held = held_write(master.port);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(info(&mut c, "master_failover_state"), "waiting-for-sync");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "held"]), None);
    // CLIENT UNPAUSE lifts clients' pauses, not a failover's.
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "held"]), None);
    ok(&mut c, &["FAILOVER", "ABORT"]);
    assert_eq!(held.read_raw_reply(), b"+OK\r\n");
    assert_eq!(info(&mut c, "master_failover_state"), "no-failover");
    assert_eq!(
        err(&mut c, &["FAILOVER", "ABORT"]),
        "ERR No failover in progress."
    );

    // TIMEOUT without FORCE: aborted, still a master.
    ok(&mut c, &["FAILOVER", "TIMEOUT", "300"]);
    let mut held = held_write(master.port);
    wait_for("the timeout", Duration::from_secs(5), || {
        info(&mut c, "master_failover_state") == "no-failover"
    });
    assert_eq!(held.read_raw_reply(), b"+OK\r\n");
    assert_eq!(info(&mut c, "role"), "master");
    assert!(master
        .log()
        .contains("FAILOVER to any replica aborted: Replica never caught up before timeout"));

    // FORCE: after the timeout this server becomes the target's replica
    // (nobody listens there, so it stays in progress) until ABORT.
    ok(&mut c, &["SET", "k", "v2"]);
    ok(
        &mut c,
        &[
            "FAILOVER",
            "TO",
            "127.0.0.1",
            "4444",
            "TIMEOUT",
            "200",
            "FORCE",
        ],
    );
    wait_for("the forced hand-over", Duration::from_secs(5), || {
        info(&mut c, "master_failover_state") == "failover-in-progress"
    });
    assert_eq!(info(&mut c, "role"), "slave");
    assert_eq!(info(&mut c, "master_port"), "4444");
    ok(&mut c, &["FAILOVER", "ABORT"]);
    assert_eq!(info(&mut c, "role"), "master");
    assert_eq!(info(&mut c, "master_failover_state"), "no-failover");
    ok(&mut c, &["SET", "after", "1"]);
    drop(fake);
}

/// FAILOVER on `from` (whose replica `to` is) hands over; `from` ends a
/// replica of `to` with the link up, and a write on `to` reaches `from`.
fn hand_over(from: u16, to: u16, args: &[&str]) {
    let mut f = redis_client(from);
    let mut t = redis_client(to);
    ok(&mut f, &["SET", "before", &from.to_string()]);
    let mut cmd = vec!["FAILOVER"];
    cmd.extend_from_slice(args);
    ok(&mut f, &cmd);
    wait_for(
        &format!("{from} hands over to {to}"),
        Duration::from_secs(20),
        || {
            info(&mut t, "role") == "master"
                && info(&mut f, "role") == "slave"
                && info(&mut f, "master_port") == to.to_string()
                && info(&mut f, "master_link_status") == "up"
                && info(&mut f, "master_failover_state") == "no-failover"
        },
    );
    assert_eq!(q::<String>(&mut t, &["GET", "before"]), from.to_string());
    ok(&mut t, &["SET", "after", &to.to_string()]);
    wait_for(
        "the new master's write on the old",
        Duration::from_secs(10),
        || q::<Option<String>>(&mut f, &["GET", "after"]) == Some(to.to_string()),
    );
}

#[test]
fn cairn_hands_over_to_cairn_and_back() {
    let m = start_cairn(&[]);
    let r1 = replica_of(&[], m.port);
    let r2 = replica_of(&[], m.port);
    let mut mc = redis_client(m.port);
    wait_online(&mut mc, 2);
    for i in 0..100 {
        ok(&mut mc, &["SET", &format!("k{i}"), &i.to_string()]);
    }
    let to = r1.port.to_string();
    hand_over(m.port, r1.port, &["TO", "127.0.0.1", &to]);
    assert!(r1
        .log()
        .contains("MASTER MODE enabled (failover request from"));
    // The old master's other replica goes on as a chained replica.
    let mut c2 = redis_client(r2.port);
    wait_for("the chained replica", Duration::from_secs(10), || {
        q::<Option<String>>(&mut c2, &["GET", "after"]) == Some(r1.port.to_string())
            && info(&mut c2, "master_port") == m.port.to_string()
    });
    // And back, to any replica (the old master is r1's only one).
    hand_over(r1.port, m.port, &[]);
    let mut c1 = redis_client(r1.port);
    assert_eq!(q::<String>(&mut c1, &["GET", "k99"]), "99");
    // PSYNC FAILOVER with another replid is refused by a replica.
    assert_eq!(
        err(&mut c1, &["PSYNC", &"0".repeat(40), "1", "FAILOVER"]),
        "ERR PSYNC FAILOVER replid must match my replid."
    );
}

#[test]
fn cairn_hands_over_to_redis_and_redis_to_cairn() {
    let m = start_cairn(&[]);
    let port = m.port.to_string();
    let Some(r) = start_redis(&["--replicaof", "127.0.0.1", &port]) else {
        eprintln!("redis-server is not installed; skipping");
        return;
    };
    let mut mc = redis_client(m.port);
    wait_online(&mut mc, 1);
    hand_over(m.port, r.port, &[]);
    let port = m.port.to_string();
    hand_over(
        r.port,
        m.port,
        &["TO", "127.0.0.1", &port, "TIMEOUT", "5000"],
    );
}
