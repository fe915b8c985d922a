//! Transactions end to end: MULTI/EXEC atomicity across shards and threads,
//! WATCH races between clients, WATCH and expiry, and the CLIENT LIST view
//! of a transaction. Reply bytes of every error path are covered by the
//! differential corpus (`tests/diff/multi.txt`); this file covers what needs
//! several connections running at once.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use support::{q, redis_client, server, start_cairn, RawConn};

/// Keys spread over many shards, so a transaction spans several locks.
fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("acct:{i}")).collect()
}

/// While writers move units between accounts inside MULTI/EXEC, a reader's
/// MGET (itself atomic) must always see the same total: no one may see
/// half of a transaction, whichever threads the clients land on.
#[test]
fn exec_is_atomic_across_shards() {
    let s = start_cairn(&["--server-threads", "2"]);
    let accounts = keys(16);
    let mut c = redis_client(s.port);
    for a in &accounts {
        let _: () = redis::cmd("SET").arg(a).arg(100).query(&mut c).unwrap();
    }
    let total = 100 * accounts.len() as i64;
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3 {
        let (port, accounts, stop) = (s.port, accounts.clone(), stop.clone());
        writers.push(thread::spawn(move || {
            let mut c = redis_client(port);
            let mut i = w;
            while !stop.load(Ordering::Relaxed) {
                let from = &accounts[i % accounts.len()];
                let to = &accounts[(i * 7 + 3) % accounts.len()];
                let r: Vec<i64> = redis::pipe()
                    .atomic()
                    .cmd("DECRBY")
                    .arg(from)
                    .arg(5)
                    .cmd("INCRBY")
                    .arg(to)
                    .arg(5)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(r.len(), 2);
                i += 1;
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut reads = 0;
    while Instant::now() < deadline {
        let vals: Vec<i64> = redis::cmd("MGET").arg(&accounts).query(&mut c).unwrap();
        assert_eq!(vals.iter().sum::<i64>(), total, "saw half a transaction");
        reads += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(reads > 10, "only {reads} reads");
    let vals: Vec<i64> = redis::cmd("MGET").arg(&accounts).query(&mut c).unwrap();
    assert_eq!(vals.iter().sum::<i64>(), total);
}

/// Optimistic locking: many clients increment one counter with WATCH/GET/
/// MULTI/SET/EXEC, retrying when EXEC answers null. No increment may be
/// lost, and some retries must have happened (the race was real).
#[test]
fn watch_makes_read_modify_write_safe() {
    let s = start_cairn(&["--server-threads", "2"]);
    let per_client = 150;
    let clients = 4;
    let mut handles = Vec::new();
    for _ in 0..clients {
        let port = s.port;
        handles.push(thread::spawn(move || {
            let mut c = redis_client(port);
            let mut retries = 0;
            for _ in 0..per_client {
                loop {
                    let _: () = redis::cmd("WATCH").arg("counter").query(&mut c).unwrap();
                    let v: Option<i64> = redis::cmd("GET").arg("counter").query(&mut c).unwrap();
                    let r: Option<Vec<Value>> = redis::pipe()
                        .atomic()
                        .cmd("SET")
                        .arg("counter")
                        .arg(v.unwrap_or(0) + 1)
                        .query(&mut c)
                        .unwrap();
                    if r.is_some() {
                        break;
                    }
                    retries += 1;
                }
            }
            retries
        }));
    }
    let retries: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let mut c = redis_client(s.port);
    let v: i64 = q(&mut c, &["GET", "counter"]);
    assert_eq!(v, (per_client * clients) as i64);
    // With four clients racing on one key, some EXECs must have failed;
    // if none did, WATCH was not exercised.
    assert!(retries > 0, "no EXEC ever failed");
}

/// A watched key removed by the active expiry cycle (nobody reads it)
/// fails EXEC, as does one merely past its expire time at EXEC.
#[test]
fn watched_key_expiry_fails_exec() {
    let (_s, mut c) = server();
    for (key, wait) in [("active", 400), ("lazy", 120)] {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(1)
            .arg("PX")
            .arg(60)
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("WATCH").arg(key).query(&mut c).unwrap();
        thread::sleep(Duration::from_millis(wait));
        let r: Option<Vec<Value>> = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
        assert_eq!(r, None, "{key}: EXEC should fail");
    }
}

/// CLIENT LIST shows the transaction: flag x and the queued count, then
/// flag d once a watched key changed.
#[test]
fn client_list_shows_multi_and_dirty() {
    let (s, _c) = server();
    let mut a = RawConn::connect(s.port);
    let mut b = RawConn::connect(s.port);
    assert_eq!(a.cmd(&["WATCH", "k"]), b"+OK\r\n");
    assert_eq!(a.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(a.cmd(&["SET", "k", "1"]), b"+QUEUED\r\n");
    assert_eq!(a.cmd(&["GET", "k"]), b"+QUEUED\r\n");
    let info = |b: &mut RawConn| {
        let r = b.cmd(&["CLIENT", "LIST"]);
        let text = String::from_utf8_lossy(&r).into_owned();
        text.lines()
            .find(|l| l.contains("cmd=multi") || l.contains("cmd=set") || l.contains("cmd=get"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let line = info(&mut b);
    assert!(line.contains(" flags=x "), "{line}");
    assert!(line.contains(" multi=2 "), "{line}");
    assert_eq!(b.cmd(&["SET", "k", "2"]), b"+OK\r\n");
    let line = info(&mut b);
    assert!(line.contains(" flags=xd "), "{line}");
    assert_eq!(a.cmd(&["EXEC"]), b"*-1\r\n");
    let line = b.cmd(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(&line);
    assert!(
        text.lines()
            .filter(|l| l.starts_with("id="))
            .all(|l| l.contains("multi=-1")),
        "after EXEC: {text}"
    );
}

/// A connection that closes with keys watched leaves nothing behind: a
/// later write to the key must not touch a dead client's flag, and a new
/// watcher is unaffected by the old one.
#[test]
fn closing_a_watcher_drops_its_watches() {
    let (s, mut c) = server();
    for _ in 0..50 {
        let mut a = RawConn::connect(s.port);
        assert_eq!(a.cmd(&["WATCH", "x", "y"]), b"+OK\r\n");
        drop(a);
    }
    let _: () = redis::cmd("SET").arg("x").arg(1).query(&mut c).unwrap();
    let _: () = redis::cmd("WATCH").arg("x").query(&mut c).unwrap();
    let r: Option<Vec<Value>> = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("x")
        .query(&mut c)
        .unwrap();
    assert!(r.is_some());
}
