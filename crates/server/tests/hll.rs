//! The HyperLogLog family end to end (Redis 7.0 `hyperloglog.c`): PFADD,
//! PFCOUNT, PFMERGE, PFDEBUG and PFSELFTEST through the `redis` crate and
//! `RawConn`; the accuracy on a million distinct elements (pipelined); and,
//! when a reference redis-server is installed, byte-for-byte equality of
//! the stored values (GET) after the same commands on both servers.

mod support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use support::{cmd, err, int, ok, q, redis_client, server, start_redis};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

fn get(c: &mut Connection, key: &str) -> Option<Vec<u8>> {
    q(c, &["GET", key])
}

fn set_bytes(c: &mut Connection, key: &str, v: &[u8]) {
    let r: String = cmd(&[b"SET", key.as_bytes(), v]).query(c).unwrap();
    assert_eq!(r, "OK");
}

/// Adds `n` elements `prefix<i>` in pipelined batches of 1000.
fn add_many(c: &mut Connection, key: &str, prefix: &str, n: usize) {
    let mut pipe = redis::pipe();
    let mut i = 0;
    while i < n {
        let end = (i + 1000).min(n);
        let c = pipe.cmd("PFADD").arg(key);
        for j in i..end {
            c.arg(format!("{prefix}{j}"));
        }
        c.ignore();
        i = end;
    }
    pipe.query::<()>(c).unwrap();
}

#[test]
fn pfadd_pfcount_basics() {
    let (_s, mut c) = server();
    assert_eq!(int(&mut c, &["PFADD", "h", "a", "b", "c"]), 1);
    assert_eq!(int(&mut c, &["PFADD", "h", "a"]), 0);
    assert_eq!(int(&mut c, &["PFCOUNT", "h"]), 3);
    assert_eq!(int(&mut c, &["PFADD", "e"]), 1);
    assert_eq!(int(&mut c, &["PFADD", "e"]), 0);
    assert_eq!(int(&mut c, &["PFCOUNT", "e"]), 0);
    assert_eq!(int(&mut c, &["PFCOUNT", "nokey"]), 0);
    assert_eq!(int(&mut c, &["PFCOUNT", "h", "e", "nokey"]), 3);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "h"]), "raw");
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
    // The exact bytes Redis 7.0 stores for these elements (after PFCOUNT
    // cached 3 in the header).
    let mut want = b"HYLL\x01\0\0\0\x03\0\0\0\0\0\0\0".to_vec();
    want.extend_from_slice(b"\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a");
    assert_eq!(get(&mut c, "h"), Some(want));
    // The stored value is a plain string: copying it keeps it working.
    let v = get(&mut c, "h").unwrap();
    set_bytes(&mut c, "copy", &v);
    assert_eq!(int(&mut c, &["PFCOUNT", "copy"]), 3);
    assert_eq!(int(&mut c, &["PFADD", "copy", "d"]), 1);
    assert_eq!(int(&mut c, &["PFCOUNT", "copy"]), 4);
}

#[test]
fn errors() {
    let (_s, mut c) = server();
    int(&mut c, &["HSET", "hash", "f", "v"]);
    assert_eq!(err(&mut c, &["PFADD", "hash", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["PFCOUNT", "hash"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["PFMERGE", "d", "hash"]), WRONGTYPE);
    ok(&mut c, &["SET", "s", "hello"]);
    assert_eq!(err(&mut c, &["PFADD", "s", "a"]), NOT_HLL);
    assert_eq!(err(&mut c, &["PFCOUNT", "s"]), NOT_HLL);
    assert_eq!(err(&mut c, &["PFCOUNT", "nokey", "s"]), NOT_HLL);
    assert_eq!(err(&mut c, &["PFMERGE", "s", "nokey"]), NOT_HLL);
    assert_eq!(err(&mut c, &["PFDEBUG", "ENCODING", "s"]), NOT_HLL);
    ok(&mut c, &["SET", "i", "1234567890"]);
    assert_eq!(err(&mut c, &["PFCOUNT", "i"]), NOT_HLL);
    // A sparse header with no registers after it.
    set_bytes(&mut c, "bad", b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80");
    assert_eq!(err(&mut c, &["PFCOUNT", "bad"]), CORRUPT);
    assert_eq!(err(&mut c, &["PFCOUNT", "bad", "nokey"]), CORRUPT);
    assert_eq!(err(&mut c, &["PFADD", "bad", "x"]), CORRUPT);
    assert_eq!(err(&mut c, &["PFMERGE", "d", "bad"]), CORRUPT);
    assert_eq!(err(&mut c, &["PFDEBUG", "TODENSE", "bad"]), CORRUPT);
    // A dense header must come with exactly 12288 register bytes.
    set_bytes(&mut c, "dense", b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
    assert_eq!(err(&mut c, &["PFADD", "dense", "x"]), NOT_HLL);
    assert_eq!(
        err(&mut c, &["PFDEBUG", "GETREG", "nokey"]),
        "ERR The specified key does not exist"
    );
    int(&mut c, &["PFADD", "h", "a"]);
    assert_eq!(
        err(&mut c, &["PFDEBUG", "NOPE", "h"]),
        "ERR Unknown PFDEBUG subcommand 'NOPE'"
    );
    assert_eq!(
        err(&mut c, &["PFDEBUG", "GETREG", "h", "x"]),
        "ERR wrong number of arguments for 'pfdebug' command"
    );
    assert_eq!(
        err(&mut c, &["PFMERGE"]),
        "ERR wrong number of arguments for 'pfmerge' command"
    );
}

#[test]
fn pfdebug_and_pfmerge() {
    let (_s, mut c) = server();
    int(&mut c, &["PFADD", "a", "1", "2", "3"]);
    int(&mut c, &["PFADD", "b", "3", "4"]);
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "a"]), "sparse");
    let decoded: String = q(&mut c, &["PFDEBUG", "DECODE", "a"]);
    assert!(
        decoded.starts_with('Z') && decoded.contains("v:"),
        "{decoded}"
    );
    ok(&mut c, &["PFMERGE", "m", "a", "b", "nokey"]);
    assert_eq!(int(&mut c, &["PFCOUNT", "m"]), 4);
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "m"]), "sparse");
    assert_eq!(int(&mut c, &["PFDEBUG", "TODENSE", "b"]), 1);
    assert_eq!(int(&mut c, &["PFDEBUG", "TODENSE", "b"]), 0);
    assert_eq!(int(&mut c, &["STRLEN", "b"]), 12304);
    assert_eq!(
        err(&mut c, &["PFDEBUG", "DECODE", "b"]),
        "ERR HLL encoding is not sparse"
    );
    // A dense input makes the destination dense.
    ok(&mut c, &["PFMERGE", "m", "b"]);
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "m"]), "dense");
    assert_eq!(int(&mut c, &["PFCOUNT", "m"]), 4);
    let regs: Vec<i64> = q(&mut c, &["PFDEBUG", "GETREG", "a"]);
    assert_eq!(regs.len(), 16384);
    assert_eq!(regs.iter().filter(|&&r| r > 0).count(), 3);
    // GETREG converted it.
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "a"]), "dense");
    // PFMERGE with only a destination creates an empty HyperLogLog.
    ok(&mut c, &["PFMERGE", "solo"]);
    assert_eq!(int(&mut c, &["PFCOUNT", "solo"]), 0);
    assert_eq!(q::<String>(&mut c, &["PFSELFTEST"]), "OK");
}

#[test]
fn promotion_to_dense() {
    let (_s, mut c) = server();
    add_many(&mut c, "h", "e", 500);
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "h"]), "sparse");
    let len = int(&mut c, &["STRLEN", "h"]);
    assert!(len <= 3000, "{len}");
    add_many(&mut c, "h", "f", 3000);
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "h"]), "dense");
    assert_eq!(int(&mut c, &["STRLEN", "h"]), 12304);
    let n = int(&mut c, &["PFCOUNT", "h"]);
    assert!((n - 3500).abs() < 3500 / 50, "{n}");
}

/// Exact reply bytes in both protocols.
#[test]
fn reply_shapes() {
    let (s, _c) = server();
    let mut raw = s.conn();
    assert_eq!(raw.cmd(&["PFADD", "h", "x"]), b":1\r\n");
    assert_eq!(raw.cmd(&["PFDEBUG", "ENCODING", "h"]), b"+sparse\r\n");
    assert_eq!(raw.cmd(&["PFMERGE", "m", "h"]), b"+OK\r\n");
    assert_eq!(
        raw.cmd(&["PFDEBUG", "DECODE", "m"]),
        raw.cmd(&["PFDEBUG", "DECODE", "h"])
    );
    raw.cmd(&["HELLO", "3"]);
    assert_eq!(raw.cmd(&["PFCOUNT", "h", "m"]), b":1\r\n");
    assert_eq!(raw.cmd(&["PFDEBUG", "TODENSE", "h"]), b":1\r\n");
    let regs = raw.cmd(&["PFDEBUG", "GETREG", "h"]);
    assert!(regs.starts_with(b"*16384\r\n:0\r\n"));
    assert_eq!(
        raw.cmd(&["PFDEBUG", "NOPE", "h"]),
        b"-ERR Unknown PFDEBUG subcommand 'NOPE'\r\n"
    );
}

/// A million distinct elements, pipelined: within 2% (Redis's standard
/// error is 0.81%).
#[test]
fn million_elements_within_two_percent() {
    let (_s, mut c) = server();
    let n = 1_000_000usize;
    add_many(&mut c, "big", "element:", n);
    let got = int(&mut c, &["PFCOUNT", "big"]);
    let err = (got as f64 - n as f64).abs() / n as f64;
    assert!(err < 0.02, "PFCOUNT {got} for {n}");
    // The union with a half-overlapping set.
    add_many(&mut c, "half", "element:", n / 2);
    add_many(&mut c, "half", "other:", n / 2);
    let union = int(&mut c, &["PFCOUNT", "big", "half"]);
    let err = (union as f64 - 1.5e6).abs() / 1.5e6;
    assert!(err < 0.02, "PFCOUNT of the union {union}");
}

fn run(c: &mut Connection, args: &[String]) -> Result<Value, String> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    cmd(&bytes)
        .query::<Value>(c)
        .map_err(|e| support::err_line(&e))
}

/// The same PFADD/PFMERGE/PFCOUNT sequence on Cairn and on redis-server
/// leaves byte-identical values and gives identical replies, through
/// sparse growth, merges and promotion to dense.
#[test]
fn same_bytes_as_redis() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("redis-server not installed: skipping");
        return;
    };
    let (_s, mut c) = server();
    let mut r = redis_client(redis.port);
    let mut rng = SmallRng::seed_from_u64(0x11_2233);
    let keys = ["h0", "h1", "h2", "h3"];
    for step in 0..1500 {
        let key = keys[rng.random_range(0..keys.len())].to_string();
        let args: Vec<String> = match rng.random_range(0..10) {
            0 => {
                let mut v = vec!["PFMERGE".to_string(), key];
                for _ in 0..rng.random_range(0..3) {
                    v.push(keys[rng.random_range(0..keys.len())].to_string());
                }
                v
            }
            1 => {
                let mut v = vec!["PFCOUNT".to_string(), key];
                if rng.random() {
                    v.push(keys[rng.random_range(0..keys.len())].to_string());
                }
                v
            }
            2 => vec!["PFDEBUG".into(), "DECODE".into(), key],
            _ => {
                let mut v = vec!["PFADD".to_string(), key];
                let spread = [50, 1000, 100_000][rng.random_range(0..3)];
                for _ in 0..rng.random_range(0..40) {
                    v.push(format!("e{}", rng.random_range(0..spread)));
                }
                v
            }
        };
        assert_eq!(
            run(&mut c, &args),
            run(&mut r, &args),
            "step {step}: {args:?}"
        );
        for k in keys {
            let (a, b): (Option<Vec<u8>>, Option<Vec<u8>>) = (get(&mut c, k), get(&mut r, k));
            assert!(a == b, "step {step}: {args:?}: {k} differs");
        }
    }
    // Everything ends dense after a large batch, still identical.
    for conn in [&mut c, &mut r] {
        add_many(conn, "h0", "x", 20_000);
    }
    assert_eq!(
        int(&mut c, &["PFCOUNT", "h0"]),
        int(&mut r, &["PFCOUNT", "h0"])
    );
    assert!(get(&mut c, "h0") == get(&mut r, "h0"));
    assert_eq!(
        int(&mut c, &["PFCOUNT", "h0", "h1", "h2"]),
        int(&mut r, &["PFCOUNT", "h0", "h1", "h2"])
    );
}
