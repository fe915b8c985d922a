//! The sorted-set family end to end (Redis 7.0 `t_zset.c` behaviour):
//! every command through the `redis` crate, exact reply bytes in RESP2
//! and RESP3 through `RawConn`, both encodings checked against a model at
//! sizes the differential corpus does not reach, OBJECT ENCODING around
//! the `zset-max-listpack-*` limits (CONFIG SET and start-up options),
//! WATCH/MULTI interplay, and blocking pops across connections (wake-up,
//! timeout, FIFO order, CLIENT UNBLOCK). Error texts and the long tail of
//! option combinations are in the differential corpus (`tests/diff/zset*`).

mod support;

use std::collections::{BTreeMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use support::{err, q, redis_client, server, start_cairn, RawConn};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SYNTAX: &str = "ERR syntax error";

fn encoding(con: &mut Connection, key: &str) -> String {
    q(con, &["OBJECT", "ENCODING", key])
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Adds `members` with the given scores in batches.
fn zadd_many(con: &mut Connection, key: &str, items: &[(f64, String)]) {
    for chunk in items.chunks(500) {
        let mut c = redis::cmd("ZADD");
        c.arg(key);
        for (s, m) in chunk {
            c.arg(s.to_string()).arg(m);
        }
        let _: i64 = c.query(con).unwrap();
    }
}

/// A flat [member, score, ...] reply as pairs with parsed scores.
fn pairs(flat: Vec<String>) -> Vec<(String, f64)> {
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].parse().unwrap()))
        .collect()
}

#[test]
fn zadd_variants_and_point_reads() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "z", "3", "a", "4", "c"]), 1);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "CH", "5", "a", "4", "c"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "NX", "9", "a", "9", "d"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "XX", "CH", "9", "a", "1", "zz"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "GT", "CH", "1", "a", "10", "b"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "LT", "CH", "100", "a", "0", "b"]),
        1
    );
    assert_eq!(
        q::<String>(&mut c, &["ZADD", "z", "INCR", "0.5", "a"]),
        "9.5"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZADD", "z", "NX", "INCR", "1", "a"]),
        None
    );
    assert_eq!(q::<String>(&mut c, &["ZINCRBY", "z", "-0.5", "a"]), "9");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "z", "a"]), "9");
    assert_eq!(q::<Option<String>>(&mut c, &["ZSCORE", "z", "nope"]), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "z", "b", "nope", "c"]),
        vec![Some("0".into()), None, Some("4".into())]
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]), 4);
    assert_eq!(q::<i64>(&mut c, &["ZRANK", "z", "a"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREVRANK", "z", "a"]), 1);
    assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", "z", "nope"]), None);
    assert_eq!(q::<i64>(&mut c, &["ZCOUNT", "z", "(0", "9"]), 3);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "a", "b", "x"]), 2);
    assert_eq!(q::<i64>(&mut c, &["ZREM", "z", "c", "d"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    // Errors.
    assert_eq!(
        err(&mut c, &["ZADD", "z", "NX", "XX", "1", "a"]),
        "ERR XX and NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "GT", "LT", "1", "a"]),
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "INCR", "1", "a", "2", "b"]),
        "ERR INCR option supports a single increment-element pair"
    );
    assert_eq!(err(&mut c, &["ZADD", "z", "1", "a", "2"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["ZADD", "z", "x", "a"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(&mut c, &["ZADD", "z", "nan", "a"]),
        "ERR value is not a valid float"
    );
    q::<i64>(&mut c, &["ZADD", "n", "inf", "a"]);
    assert_eq!(
        err(&mut c, &["ZINCRBY", "n", "-inf", "a"]),
        "ERR resulting score is not a number (NaN)"
    );
    let _: () = q(&mut c, &["SET", "s", "x"]);
    for args in [
        &["ZADD", "s", "1", "a"][..],
        &["ZSCORE", "s", "a"],
        &["ZRANGE", "s", "0", "-1"],
        &["ZPOPMIN", "s"],
        &["ZUNION", "1", "s"],
        &["ZSCAN", "s", "0"],
        &["ZRANDMEMBER", "s"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
}

/// Ranges, ranks, counts and removals on both encodings against a sorted
/// Vec model, at sizes (500 and 3000 members) beyond the corpus.
#[test]
fn ranges_match_a_model_on_both_encodings() {
    let (_s, mut c) = server();
    for (key, n, entries) in [("small", 120usize, "128"), ("big", 3000, "0")] {
        let _: () = q(
            &mut c,
            &["CONFIG", "SET", "zset-max-listpack-entries", entries],
        );
        let items: Vec<(f64, String)> = (0..n)
            .map(|i| (((i * 7919) % 97) as f64 - 40.0, format!("m{i:05}")))
            .collect();
        zadd_many(&mut c, key, &items);
        let want_enc = if entries == "0" {
            "skiplist"
        } else {
            "listpack"
        };
        assert_eq!(encoding(&mut c, key), want_enc);
        let mut model: Vec<(f64, String)> = items.clone();
        model.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
        let names = |v: &[(f64, String)]| v.iter().map(|x| x.1.clone()).collect::<Vec<_>>();

        let all: Vec<String> = q(&mut c, &["ZRANGE", key, "0", "-1"]);
        assert_eq!(all, names(&model));
        let ws: Vec<String> = q(&mut c, &["ZRANGE", key, "10", "19", "WITHSCORES"]);
        let got = pairs(ws);
        let want: Vec<(String, f64)> = model[10..20].iter().map(|(s, m)| (m.clone(), *s)).collect();
        assert_eq!(got, want);
        let rev: Vec<String> = q(&mut c, &["ZREVRANGE", key, "0", "4"]);
        let mut rmodel = names(&model);
        rmodel.reverse();
        assert_eq!(rev, rmodel[..5].to_vec());
        for (i, (_, m)) in model.iter().enumerate().step_by(n / 37) {
            assert_eq!(q::<i64>(&mut c, &["ZRANK", key, m]), i as i64);
            assert_eq!(q::<i64>(&mut c, &["ZREVRANK", key, m]), (n - 1 - i) as i64);
        }
        for (lo, hi) in [(-40, -30), (0, 0), (5, 56), (-100, 100)] {
            let inr: Vec<String> = model
                .iter()
                .filter(|(s, _)| *s >= lo as f64 && *s < hi as f64)
                .map(|x| x.1.clone())
                .collect();
            let (lo_s, hi_s) = (lo.to_string(), format!("({hi}"));
            assert_eq!(
                q::<i64>(&mut c, &["ZCOUNT", key, &lo_s, &hi_s]),
                inr.len() as i64
            );
            let got: Vec<String> = q(&mut c, &["ZRANGEBYSCORE", key, &lo_s, &hi_s]);
            assert_eq!(got, inr);
            let got: Vec<String> = q(
                &mut c,
                &["ZRANGEBYSCORE", key, &lo_s, &hi_s, "LIMIT", "3", "5"],
            );
            assert_eq!(got, inr.iter().skip(3).take(5).cloned().collect::<Vec<_>>());
            let got: Vec<String> = q(
                &mut c,
                &["ZREVRANGEBYSCORE", key, &hi_s, &lo_s, "LIMIT", "2", "-1"],
            );
            let mut r = inr.clone();
            r.reverse();
            assert_eq!(got, r.iter().skip(2).cloned().collect::<Vec<_>>());
        }
        // Removals keep ranks right.
        let removed: i64 = q(&mut c, &["ZREMRANGEBYSCORE", key, "(0", "10"]);
        model.retain(|(s, _)| !(*s > 0.0 && *s <= 10.0));
        assert_eq!(removed as usize, n - model.len());
        let removed: i64 = q(&mut c, &["ZREMRANGEBYRANK", key, "5", "14"]);
        assert_eq!(removed, 10);
        model.drain(5..15);
        let popped: Vec<String> = q(&mut c, &["ZPOPMAX", key, "3"]);
        let popped_names: Vec<String> = popped.chunks(2).map(|p| p[0].clone()).collect();
        let tail: Vec<String> = model.iter().rev().take(3).map(|x| x.1.clone()).collect();
        assert_eq!(popped_names, tail);
        model.truncate(model.len() - 3);
        let all: Vec<String> = q(&mut c, &["ZRANGE", key, "0", "-1"]);
        assert_eq!(all, names(&model));
        assert_eq!(q::<i64>(&mut c, &["ZCARD", key]), model.len() as i64);
        assert_eq!(encoding(&mut c, key), want_enc);
    }
}

#[test]
fn encodings_at_the_limits() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "3"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "zset-max-listpack-value", "5"]);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(encoding(&mut c, "z"), "listpack");
    q::<i64>(&mut c, &["ZADD", "z", "9", "a"]);
    assert_eq!(encoding(&mut c, "z"), "listpack");
    q::<i64>(&mut c, &["ZADD", "z", "4", "d"]);
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    q::<i64>(&mut c, &["ZREM", "z", "a", "b", "c"]);
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    q::<i64>(&mut c, &["ZADD", "v", "1", "12345"]);
    assert_eq!(encoding(&mut c, "v"), "listpack");
    q::<i64>(&mut c, &["ZADD", "v", "1", "123456"]);
    assert_eq!(encoding(&mut c, "v"), "skiplist");
    q::<i64>(&mut c, &["ZADD", "w", "1", "123456", "2", "a"]);
    assert_eq!(encoding(&mut c, "w"), "skiplist");
    // Store results come back packed when they fit.
    q::<i64>(&mut c, &["ZUNIONSTORE", "u", "1", "z"]);
    assert_eq!(encoding(&mut c, "u"), "listpack");
    q::<i64>(&mut c, &["ZRANGESTORE", "r", "w", "0", "-1"]);
    assert_eq!(encoding(&mut c, "r"), "skiplist");
    q::<i64>(&mut c, &["ZRANGESTORE", "r", "w", "1", "1"]);
    assert_eq!(encoding(&mut c, "r"), "listpack");

    // The same limits given at start-up, under their old names too.
    let s = start_cairn(&[
        "--zset-max-ziplist-entries",
        "2",
        "--zset-max-listpack-value",
        "3",
    ]);
    let mut c = redis_client(s.port);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    assert_eq!(encoding(&mut c, "z"), "listpack");
    q::<i64>(&mut c, &["ZADD", "z", "3", "c"]);
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    q::<i64>(&mut c, &["ZADD", "y", "1", "abcd"]);
    assert_eq!(encoding(&mut c, "y"), "skiplist");
}

#[test]
fn exact_reply_bytes_resp2_and_resp3() {
    let (s, mut c) = server();
    q::<i64>(&mut c, &["ZADD", "z", "1.5", "a", "2", "b", "-inf", "n"]);
    let mut r = RawConn::connect(s.port);
    let cases2: &[(&[&str], &[u8])] = &[
        (&["ZSCORE", "z", "a"], b"$3\r\n1.5\r\n"),
        (&["ZSCORE", "z", "n"], b"$4\r\n-inf\r\n"),
        (&["ZSCORE", "z", "x"], b"$-1\r\n"),
        (
            &["ZRANGE", "z", "0", "0", "WITHSCORES"],
            b"*2\r\n$1\r\nn\r\n$4\r\n-inf\r\n",
        ),
        (&["ZRANGE", "nosuch", "0", "-1", "WITHSCORES"], b"*0\r\n"),
        (&["ZADD", "z", "XX", "INCR", "1", "x"], b"$-1\r\n"),
        (
            &["ZINCRBY", "z", "0.1", "b"],
            b"$18\r\n2.1000000000000001\r\n",
        ),
        (&["ZMPOP", "1", "nosuch", "MIN"], b"*-1\r\n"),
        (&["ZPOPMIN", "nosuch"], b"*0\r\n"),
        (&["ZRANDMEMBER", "nosuch"], b"$-1\r\n"),
        (&["ZSCAN", "nosuch", "0"], b"*2\r\n$1\r\n0\r\n*0\r\n"),
        (
            &["ZPOPMAX", "z", "1"],
            b"*2\r\n$1\r\nb\r\n$18\r\n2.1000000000000001\r\n",
        ),
        (
            &["ZMPOP", "1", "z", "MAX"],
            b"*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$3\r\n1.5\r\n",
        ),
    ];
    for (args, want) in cases2 {
        assert_eq!(r.cmd(args), want.to_vec(), "RESP2 {args:?}");
    }
    q::<i64>(&mut c, &["ZADD", "z", "1.5", "a", "2", "b"]);
    r.cmd(&["HELLO", "3"]);
    let cases3: &[(&[&str], &[u8])] = &[
        (&["ZSCORE", "z", "a"], b",1.5\r\n"),
        (&["ZSCORE", "z", "n"], b",-inf\r\n"),
        (&["ZSCORE", "z", "x"], b"_\r\n"),
        (&["ZMSCORE", "z", "a", "x"], b"*2\r\n,1.5\r\n_\r\n"),
        (
            &["ZRANGE", "z", "0", "1", "WITHSCORES"],
            b"*2\r\n*2\r\n$1\r\nn\r\n,-inf\r\n*2\r\n$1\r\na\r\n,1.5\r\n",
        ),
        (&["ZRANGE", "z", "0", "0"], b"*1\r\n$1\r\nn\r\n"),
        (&["ZADD", "z", "XX", "INCR", "1", "x"], b"_\r\n"),
        (&["ZADD", "z", "INCR", "1", "b"], b",3\r\n"),
        (&["ZMPOP", "1", "nosuch", "MIN"], b"_\r\n"),
        (&["ZPOPMIN", "z"], b"*2\r\n$1\r\nn\r\n,-inf\r\n"),
        (&["ZPOPMIN", "z", "1"], b"*1\r\n*2\r\n$1\r\na\r\n,1.5\r\n"),
        (
            &["ZRANDMEMBER", "z", "1", "WITHSCORES"],
            b"*1\r\n*2\r\n$1\r\nb\r\n,3\r\n",
        ),
        (
            &["ZSCAN", "z", "0"],
            b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$1\r\n3\r\n",
        ),
        (
            &["ZUNION", "1", "z", "WITHSCORES"],
            b"*1\r\n*2\r\n$1\r\nb\r\n,3\r\n",
        ),
        (&["ZINTERCARD", "1", "z"], b":1\r\n"),
    ];
    for (args, want) in cases3 {
        assert_eq!(r.cmd(args), want.to_vec(), "RESP3 {args:?}");
    }
}

/// WATCH sees a sorted set change only when it really changed, as Redis's
/// `signalModifiedKey` is only called then.
#[test]
fn watch_and_transactions() {
    let (s, mut c) = server();
    let mut other = redis_client(s.port);
    q::<i64>(&mut c, &["ZADD", "z", "1", "a", "2", "b"]);
    let exec = |c: &mut Connection, other: &mut Connection, args: &[&str]| -> Value {
        let _: () = q(c, &["WATCH", "z"]);
        let _: Value = q(other, args);
        let _: () = q(c, &["MULTI"]);
        let _: Value = q(c, &["ZCARD", "z"]);
        q(c, &["EXEC"])
    };
    // No change: same score, NX on an existing member, missing member.
    for args in [
        &["ZADD", "z", "1", "a"][..],
        &["ZADD", "z", "NX", "5", "a"],
        &["ZREM", "z", "nope"],
        &["ZREMRANGEBYSCORE", "z", "10", "20"],
        &["ZRANGE", "z", "0", "-1"],
    ] {
        let v = exec(&mut c, &mut other, args);
        assert_eq!(v, Value::Array(vec![Value::Int(2)]), "{args:?}");
    }
    // Real changes abort the transaction.
    for args in [
        &["ZADD", "z", "5", "a"][..],
        &["ZINCRBY", "z", "1", "b"],
        &["ZADD", "z", "1", "c"],
        &["ZREM", "z", "c"],
    ] {
        let v = exec(&mut c, &mut other, args);
        assert_eq!(v, Value::Nil, "{args:?}");
    }
    // A store over the watched key, and a pop.
    q::<i64>(&mut other, &["ZADD", "src", "1", "x"]);
    assert_eq!(
        exec(&mut c, &mut other, &["ZUNIONSTORE", "z", "2", "z", "src"]),
        Value::Nil
    );
    assert_eq!(exec(&mut c, &mut other, &["ZPOPMIN", "z"]), Value::Nil);
    // Sorted set commands inside MULTI, blocking ones answering at once.
    let _: () = q(&mut c, &["MULTI"]);
    for args in [
        &["ZADD", "m", "1", "a"][..],
        &["ZRANGE", "m", "0", "-1", "WITHSCORES"],
        &["BZPOPMIN", "m", "0"],
        &["BZPOPMIN", "m", "0"],
    ] {
        let _: String = q(&mut c, args);
    }
    let v: Value = q(&mut c, &["EXEC"]);
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    assert_eq!(items.len(), 4);
    assert_eq!(items[3], Value::Nil);
}

/// Clients blocked in BZPOPMIN/BZPOPMAX/BZMPOP are served by writes from
/// other connections, first come first served, and time out on time.
#[test]
fn blocking_pops_across_connections() {
    let s = start_cairn(&["--server-threads", "2"]);
    let port = s.port;
    let mut c = redis_client(port);

    // Wake-up by ZADD on the second of two keys.
    let waiter = thread::spawn(move || {
        let mut r = RawConn::connect(port);
        let t = Instant::now();
        let reply = r.cmd(&["BZPOPMIN", "k1", "k2", "5"]);
        (reply, t.elapsed())
    });
    thread::sleep(Duration::from_millis(150));
    q::<i64>(&mut c, &["ZADD", "k2", "3", "c", "1", "a"]);
    let (reply, took) = waiter.join().unwrap();
    assert_eq!(reply, b"*3\r\n$2\r\nk2\r\n$1\r\na\r\n$1\r\n1\r\n".to_vec());
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "k2", "0", "-1"]),
        strs(&["c"])
    );

    // Timeout: a null array after about the time asked for.
    let mut r = RawConn::connect(port);
    let t = Instant::now();
    assert_eq!(r.cmd(&["BZPOPMAX", "nothing", "0.3"]), b"*-1\r\n".to_vec());
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(290), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let t = Instant::now();
    assert_eq!(
        r.cmd(&["BZMPOP", "0.2", "1", "nothing", "MIN"]),
        b"*-1\r\n".to_vec()
    );
    assert!(t.elapsed() >= Duration::from_millis(190));

    // Three waiters on one key are served in the order they came.
    let mut handles = Vec::new();
    for i in 0..3 {
        handles.push(thread::spawn(move || {
            let mut r = RawConn::connect(port);
            thread::sleep(Duration::from_millis(100 * i));
            r.cmd(&["BZMPOP", "5", "1", "fifo", "MAX", "COUNT", "2"])
        }));
    }
    thread::sleep(Duration::from_millis(500));
    q::<i64>(
        &mut c,
        &[
            "ZADD", "fifo", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    let got: Vec<Vec<u8>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        got[0],
        b"*2\r\n$4\r\nfifo\r\n*2\r\n*2\r\n$1\r\ne\r\n$1\r\n5\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n"
            .to_vec()
    );
    assert_eq!(
        got[1],
        b"*2\r\n$4\r\nfifo\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
            .to_vec()
    );
    assert_eq!(
        got[2],
        b"*2\r\n$4\r\nfifo\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n".to_vec()
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "fifo"]), 0);

    // A key that turns into a string does not end the wait; CLIENT UNBLOCK
    // does (null array, or the UNBLOCKED error).
    let mut r = RawConn::connect(port);
    let id: i64 = {
        let reply = r.cmd(&["CLIENT", "ID"]);
        std::str::from_utf8(&reply[1..reply.len() - 2])
            .unwrap()
            .parse()
            .unwrap()
    };
    let waiter = thread::spawn(move || {
        let a = r.cmd(&["BZPOPMIN", "typed", "0"]);
        let b = r.cmd(&["BZPOPMIN", "typed", "0"]);
        (a, b)
    });
    thread::sleep(Duration::from_millis(150));
    let _: () = q(&mut c, &["SET", "typed", "x"]);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string()]), 1);
    thread::sleep(Duration::from_millis(150));
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"]),
        0,
        "second call: the string makes BZPOPMIN fail at once"
    );
    let (a, b) = waiter.join().unwrap();
    assert_eq!(a, b"*-1\r\n".to_vec());
    assert_eq!(b, format!("-{WRONGTYPE}\r\n").into_bytes());

    // The UNBLOCKED error.
    let mut r = RawConn::connect(port);
    let reply = r.cmd(&["CLIENT", "ID"]);
    let id = String::from_utf8(reply[1..reply.len() - 2].to_vec()).unwrap();
    let waiter = thread::spawn(move || r.cmd(&["BZPOPMAX", "never", "0"]));
    thread::sleep(Duration::from_millis(150));
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]), 1);
    assert_eq!(
        waiter.join().unwrap(),
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_vec()
    );
}

/// ZSCAN of a skiplist returns every member exactly once, also while the
/// set changes between steps (members present throughout are all seen).
#[test]
fn zscan_covers_a_changing_skiplist() {
    let (_s, mut c) = server();
    let items: Vec<(f64, String)> = (0..4000).map(|i| (i as f64, format!("m{i}"))).collect();
    zadd_many(&mut c, "z", &items);
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    let mut seen: BTreeMap<String, f64> = BTreeMap::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let (next, flat): (String, Vec<String>) =
            q(&mut c, &["ZSCAN", "z", &cursor, "COUNT", "50"]);
        for (m, s) in pairs(flat) {
            if m.starts_with('m') {
                assert!(seen.insert(m, s).is_none(), "member seen twice");
            }
        }
        // Churn: add and remove other members between steps.
        q::<i64>(&mut c, &["ZADD", "z", "1", &format!("churn{round}")]);
        q::<i64>(
            &mut c,
            &["ZREM", "z", &format!("churn{}", round.max(1) - 1)],
        );
        round += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 4000);
    assert!(round > 40, "only {round} steps");
    for (m, s) in &seen {
        assert_eq!(format!("m{s}"), *m);
    }
    // MATCH filters members.
    let mut got = HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, flat): (String, Vec<String>) = q(
            &mut c,
            &["ZSCAN", "z", &cursor, "MATCH", "m39*", "COUNT", "500"],
        );
        got.extend(pairs(flat).into_iter().map(|p| p.0));
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(got.len(), 111); // m39, m390..m399, m3900..m3999
}

#[test]
fn random_members_and_stores() {
    let (_s, mut c) = server();
    q::<i64>(
        &mut c,
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
        ],
    );
    for _ in 0..20 {
        let m: String = q(&mut c, &["ZRANDMEMBER", "z"]);
        assert!(["a", "b", "c", "d", "e"].contains(&m.as_str()));
        let v: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "3"]);
        assert_eq!(v.iter().collect::<HashSet<_>>().len(), 3);
        let v: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "-8", "WITHSCORES"]);
        assert_eq!(v.len(), 16);
        for p in v.chunks(2) {
            let want = (p[0].as_bytes()[0] - b'a' + 1).to_string();
            assert_eq!(p[1], want);
        }
    }
    let whole: Vec<String> = q(&mut c, &["ZRANDMEMBER", "z", "5"]);
    assert_eq!(whole, strs(&["e", "d", "c", "b", "a"]));
    // Repeats are capped by proto-max-bulk-len instead of exhausting memory.
    const TOO_BIG: &str = "ERR value is out of range, the reply would exceed proto-max-bulk-len";
    assert_eq!(
        err(&mut c, &["ZRANDMEMBER", "z", "-9223372036854775807"]),
        TOO_BIG
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "nosuch", "-9223372036854775807"]),
        Vec::<String>::new()
    );
    let _: () = q(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1048576"]);
    q::<i64>(&mut c, &["ZADD", "long", "1", "a-ten-byte"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANDMEMBER", "long", "-1000"]).len(),
        1000
    );
    // Passes the up-front test (6 bytes each would fit), fails while written.
    assert_eq!(err(&mut c, &["ZRANDMEMBER", "long", "-100000"]), TOO_BIG);
    assert_eq!(
        err(&mut c, &["ZRANDMEMBER", "long", "-200000", "WITHSCORES"]),
        TOO_BIG
    );
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    // Stores clear the TTL and replace any type.
    let _: () = q(&mut c, &["SET", "dst", "x", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", "dst", "1", "z"]), 5);
    assert_eq!(q::<i64>(&mut c, &["TTL", "dst"]), -1);
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERSTORE", "dst", "2", "z", "nosuch"]),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "dst"]), 0);
    assert_eq!(
        q::<i64>(&mut c, &["ZRANGESTORE", "dst", "z", "(1", "4", "BYSCORE"]),
        3
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "dst", "0", "-1"]),
        strs(&["b", "c", "d"])
    );
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", "dst", "2", "z", "dst"]), 2);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "dst", "0", "-1"]),
        strs(&["a", "e"])
    );
}
