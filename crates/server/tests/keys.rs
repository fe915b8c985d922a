//! The generic keyspace family end to end (Redis 7.0 `db.c`, `expire.c`,
//! `object.c`): DEL UNLINK EXISTS TYPE TOUCH, EXPIRE PEXPIRE EXPIREAT
//! PEXPIREAT with NX XX GT LT, TTL PTTL EXPIRETIME PEXPIRETIME PERSIST,
//! RENAME RENAMENX MOVE COPY, KEYS SCAN RANDOMKEY DBSIZE, FLUSHDB FLUSHALL
//! SWAPDB, and OBJECT, driven through the `redis` crate, with raw bytes
//! where the RESP3 reply shape matters. Expiry moves the server's clock
//! with `DEBUG JUMP-CLOCK`; only the active-expiry test waits in real time,
//! because it tests the background sweep.

mod support;

use redis::{Connection, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{err, int, ok, q, server};

fn get(con: &mut Connection, key: &str) -> Option<String> {
    q(con, &["GET", key])
}

fn jump(con: &mut Connection, ms: i64) {
    ok(con, &["DEBUG", "JUMP-CLOCK", &ms.to_string()]);
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn arity(cmd: &str) -> String {
    format!("ERR wrong number of arguments for '{cmd}' command")
}

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_INT32: &str = "ERR value is out of range, value must between -2147483648 and 2147483647";
const DB_RANGE: &str = "ERR DB index is out of range";
const SAME: &str = "ERR source and destination objects are the same";

#[test]
fn del_unlink_exists_touch_type() {
    let (_s, mut c) = server();
    ok(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(int(&mut c, &["EXISTS", "a"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "a", "a", "a", "nosuch"]), 3);
    assert_eq!(int(&mut c, &["EXISTS", "nosuch", "nosuch"]), 0);
    assert_eq!(int(&mut c, &["TOUCH", "a", "b", "nosuch", "a"]), 3);
    assert_eq!(int(&mut c, &["DEL", "a", "a", "b", "nosuch"]), 2);
    assert_eq!(int(&mut c, &["DEL", "a"]), 0);
    assert_eq!(int(&mut c, &["UNLINK", "c", "c"]), 1);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    for name in ["del", "unlink", "exists", "touch", "type"] {
        assert_eq!(err(&mut c, &[name]), arity(name));
    }
    assert_eq!(err(&mut c, &["TYPE", "a", "b"]), arity("type"));

    ok(&mut c, &["SET", "s", "v"]);
    ok(&mut c, &["SET", "i", "12"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    for (key, ty) in [
        ("s", "string"),
        ("i", "string"),
        ("h", "hash"),
        ("nosuch", "none"),
    ] {
        let t: String = q(&mut c, &["TYPE", key]);
        assert_eq!(t, ty);
    }

    // A hash big enough to be freed in the background by UNLINK (and by DEL
    // with lazyfree-lazy-user-del) is gone at once all the same.
    for (i, verb) in ["UNLINK", "DEL"].into_iter().enumerate() {
        let key = format!("big{i}");
        let mut hset = redis::cmd("HSET");
        hset.arg(&key);
        for f in 0..500 {
            hset.arg(format!("f{f}")).arg("v");
        }
        let _: i64 = hset.query(&mut c).unwrap();
        if verb == "DEL" {
            ok(&mut c, &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]);
        }
        assert_eq!(int(&mut c, &[verb, &key, "s"]), 2 - i as i64);
        assert_eq!(int(&mut c, &["EXISTS", &key]), 0);
    }
}

#[test]
fn expire_sets_and_ttl_reports() {
    let (_s, mut c) = server();
    for name in ["ttl", "pttl", "expiretime", "pexpiretime"] {
        assert_eq!(int(&mut c, &[name, "nosuch"]), -2, "{name}");
    }
    ok(&mut c, &["SET", "k", "v"]);
    for name in ["ttl", "pttl", "expiretime", "pexpiretime"] {
        assert_eq!(int(&mut c, &[name, "k"]), -1, "{name}");
    }
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(int(&mut c, &["PERSIST", "nosuch"]), 0);
    for name in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        assert_eq!(int(&mut c, &[name, "nosuch", "4000000000"]), 0, "{name}");
    }

    assert_eq!(int(&mut c, &["EXPIRE", "k", "100"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), 100);
    let pttl = int(&mut c, &["PTTL", "k"]);
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    let at = int(&mut c, &["PEXPIRETIME", "k"]);
    assert!((at - (now_ms() + 100_000)).abs() < 2_000, "{at}");
    // TTL rounds to the nearest second: (ms + 500) / 1000.
    assert_eq!(int(&mut c, &["PEXPIRE", "k", "2600"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), 3);
    assert_eq!(int(&mut c, &["PEXPIRE", "k", "2400"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), 2);
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), -1);

    // Absolute times, and EXPIRETIME's rounding of the stored milliseconds.
    assert_eq!(int(&mut c, &["EXPIREAT", "k", "4000000000"]), 1);
    assert_eq!(int(&mut c, &["EXPIRETIME", "k"]), 4_000_000_000);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), 4_000_000_000_000);
    for (ms, secs) in [
        ("499", 4_000_000_000),
        ("500", 4_000_000_001),
        ("999", 4_000_000_001),
    ] {
        let at = format!("4000000000{ms}");
        assert_eq!(int(&mut c, &["PEXPIREAT", "k", &at]), 1);
        assert_eq!(int(&mut c, &["EXPIRETIME", "k"]), secs, "{at}");
    }
    assert_eq!(int(&mut c, &["PEXPIREAT", "k", "9223372036854775807"]), 1);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "k"]), i64::MAX);

    // A value written by SET loses the TTL; commands that modify keep it.
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100"]), 1);
    let _: i64 = q(&mut c, &["APPEND", "k", "x"]);
    assert_eq!(int(&mut c, &["TTL", "k"]), 100);
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn expire_in_the_past_deletes() {
    let (_s, mut c) = server();
    let cases: &[&[&str]] = &[
        &["EXPIRE", "k", "0"],
        &["EXPIRE", "k", "-1"],
        &["PEXPIRE", "k", "0"],
        &["PEXPIRE", "k", "-100"],
        &["EXPIREAT", "k", "1"],
        &["EXPIREAT", "k", "0"],
        &["PEXPIREAT", "k", "-5"],
        &["PEXPIRE", "k", "-9223372036854775808"],
        &["EXPIRE", "k", "-1", "LT"],
        &["EXPIRE", "k", "0", "NX"],
    ];
    for args in cases {
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(int(&mut c, args), 1, "{args:?}");
        assert_eq!(int(&mut c, &["EXISTS", "k"]), 0, "{args:?}");
    }
    // GT against "no TTL" (infinite) fails, so the key survives.
    ok(&mut c, &["SET", "k", "v"]);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "-1", "GT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "-1", "XX"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 1);
}

#[test]
fn expire_conditions() {
    let (_s, mut c) = server();
    ok(&mut c, &["SET", "k", "v"]);
    // Without a TTL: XX and GT fail, LT succeeds (no TTL is infinite).
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(int(&mut c, &["TTL", "k"]), -1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "LT"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), 100);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "200", "xx"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "GT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "300", "gt"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "400", "LT"]), 0);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "50", "LT"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "XX", "GT"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "10", "XX", "LT"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "GT", "GT"]), 1);
    assert_eq!(int(&mut c, &["TTL", "k"]), 100);
    assert_eq!(int(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(int(&mut c, &["EXPIRE", "k", "100", "NX", "NX"]), 1);
    assert_eq!(int(&mut c, &["EXPIREAT", "k", "4000000000", "GT"]), 1);
    assert_eq!(int(&mut c, &["EXPIREAT", "k", "3900000000", "GT"]), 0);
    assert_eq!(int(&mut c, &["PEXPIREAT", "k", "3900000000000", "LT"]), 1);
    assert_eq!(int(&mut c, &["EXPIRETIME", "k"]), 3_900_000_000);

    // Option errors come before the number, the overflow and the key.
    let nx_err = "ERR NX and XX, GT or LT options at the same time are not compatible";
    let gtlt_err = "ERR GT and LT options at the same time are not compatible";
    for opts in [
        &["NX", "XX"][..],
        &["XX", "NX"],
        &["NX", "GT"],
        &["lt", "nx"],
    ] {
        let mut args = vec!["EXPIRE", "nosuch", "abc"];
        args.extend_from_slice(opts);
        assert_eq!(err(&mut c, &args), nx_err, "{opts:?}");
    }
    assert_eq!(err(&mut c, &["PEXPIRE", "k", "1", "GT", "LT"]), gtlt_err);
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "1", "XX", "GT", "LT"]),
        gtlt_err
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "abc", "FOO"]),
        "ERR Unsupported option FOO"
    );
    assert_eq!(
        err(&mut c, &["EXPIREAT", "k", "1", "NX", "bar"]),
        "ERR Unsupported option bar"
    );
    assert_eq!(err(&mut c, &["EXPIRE", "nosuch", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["EXPIRE", "k", "1.5"]), NOT_INT);
    assert_eq!(err(&mut c, &["EXPIRE", "k", ""]), NOT_INT);
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "9223372036854775808"]),
        NOT_INT
    );

    // Overflow of the unit conversion or of now + time.
    let cases = [
        ("EXPIRE", "9223372036854775807", "expire"),
        ("EXPIRE", "9223372036854776", "expire"),
        ("EXPIRE", "-9223372036854776", "expire"),
        ("EXPIRE", "9223372036854775", "expire"),
        ("PEXPIRE", "9223372036854775807", "pexpire"),
        ("EXPIREAT", "9223372036854775807", "expireat"),
        ("EXPIREAT", "-9223372036854775808", "expireat"),
    ];
    for (name, n, lower) in cases {
        assert_eq!(
            err(&mut c, &[name, "nosuch", n]),
            format!("ERR invalid expire time in '{lower}' command"),
            "{name} {n}"
        );
    }
    // In range: a huge absolute time is fine.
    assert_eq!(int(&mut c, &["EXPIREAT", "k", "9223372036854775"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 1);
    for name in ["expire", "pexpire", "expireat", "pexpireat"] {
        assert_eq!(err(&mut c, &[name, "k"]), arity(name));
    }
    for name in ["ttl", "pttl", "expiretime", "pexpiretime", "persist"] {
        assert_eq!(err(&mut c, &[name, "k", "x"]), arity(name));
    }
}

#[test]
fn expiry_happens_when_the_clock_passes() {
    let (_s, mut c) = server();
    ok(&mut c, &["SET", "k", "v", "EX", "10"]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(int(&mut c, &["PEXPIRE", "h", "20000"]), 1);
    jump(&mut c, 9_000);
    assert_eq!(int(&mut c, &["TTL", "k"]), 1);
    assert_eq!(int(&mut c, &["TTL", "h"]), 11);
    jump(&mut c, 1_500);
    assert_eq!(int(&mut c, &["TTL", "k"]), -2);
    assert_eq!(get(&mut c, "k"), None);
    let keys: Vec<String> = q(&mut c, &["KEYS", "*"]);
    assert_eq!(keys, vec!["h".to_string()]);
    jump(&mut c, 10_000);
    assert_eq!(int(&mut c, &["EXISTS", "h"]), 0);
    let t: String = q(&mut c, &["TYPE", "h"]);
    assert_eq!(t, "none");
    let r: Option<String> = q(&mut c, &["RANDOMKEY"]);
    assert_eq!(r, None);
    assert_eq!(err(&mut c, &["RENAME", "h", "x"]), "ERR no such key");
}

#[test]
fn rename_and_renamenx() {
    let (_s, mut c) = server();
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["RENAME", "a", "b"]);
    assert_eq!(int(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(get(&mut c, "b").as_deref(), Some("1"));
    ok(&mut c, &["RENAME", "b", "b"]);
    assert_eq!(get(&mut c, "b").as_deref(), Some("1"));
    assert_eq!(err(&mut c, &["RENAME", "nosuch", "x"]), "ERR no such key");
    assert_eq!(
        err(&mut c, &["RENAME", "nosuch", "nosuch"]),
        "ERR no such key"
    );
    assert_eq!(
        err(&mut c, &["RENAMENX", "nosuch", "nosuch"]),
        "ERR no such key"
    );
    // RENAME replaces the destination, whatever its type, and moves the TTL.
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    ok(&mut c, &["SET", "t", "v", "EX", "100"]);
    ok(&mut c, &["RENAME", "t", "h"]);
    assert_eq!(int(&mut c, &["TTL", "h"]), 100);
    assert_eq!(get(&mut c, "h").as_deref(), Some("v"));
    ok(&mut c, &["RENAME", "b", "h"]);
    assert_eq!(
        int(&mut c, &["TTL", "h"]),
        -1,
        "the destination's TTL goes too"
    );
    // RENAMENX.
    ok(&mut c, &["MSET", "x", "1", "y", "2"]);
    assert_eq!(int(&mut c, &["RENAMENX", "x", "y"]), 0);
    assert_eq!(int(&mut c, &["RENAMENX", "x", "x"]), 0);
    assert_eq!(int(&mut c, &["RENAMENX", "x", "z"]), 1);
    assert_eq!(get(&mut c, "z").as_deref(), Some("1"));
    assert_eq!(err(&mut c, &["RENAME", "a"]), arity("rename"));
    assert_eq!(err(&mut c, &["RENAMENX", "a", "b", "c"]), arity("renamenx"));
}

#[test]
fn move_between_databases() {
    let (s, mut c) = server();
    let mut c1 = support::redis_client(s.port);
    ok(&mut c1, &["SELECT", "1"]);
    ok(&mut c, &["SET", "a", "1", "EX", "100"]);
    assert_eq!(int(&mut c, &["MOVE", "a", "1"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(get(&mut c1, "a").as_deref(), Some("1"));
    assert_eq!(int(&mut c1, &["TTL", "a"]), 100);
    // Refused when the target has the name; the source stays.
    ok(&mut c, &["SET", "a", "0"]);
    assert_eq!(int(&mut c, &["MOVE", "a", "1"]), 0);
    assert_eq!(get(&mut c, "a").as_deref(), Some("0"));
    assert_eq!(int(&mut c, &["MOVE", "nosuch", "1"]), 0);
    assert_eq!(err(&mut c, &["MOVE", "a", "0"]), SAME);
    assert_eq!(err(&mut c, &["MOVE", "nosuch", "0"]), SAME);
    assert_eq!(err(&mut c, &["MOVE", "a", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["MOVE", "a", "-1"]), DB_RANGE);
    assert_eq!(err(&mut c, &["MOVE", "a", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["MOVE", "a", "1.5"]), NOT_INT);
    assert_eq!(err(&mut c, &["MOVE", "a", "4294967296"]), NOT_INT32);
    assert_eq!(err(&mut c, &["MOVE", "a"]), arity("move"));
}

#[test]
fn copy_within_and_across_databases() {
    let (s, mut c) = server();
    ok(&mut c, &["SET", "a", "hello"]);
    assert_eq!(int(&mut c, &["COPY", "a", "b"]), 1);
    assert_eq!(int(&mut c, &["COPY", "a", "b"]), 0);
    assert_eq!(int(&mut c, &["COPY", "a", "b", "REPLACE"]), 1);
    // The copy is independent.
    let _: i64 = q(&mut c, &["APPEND", "b", " world"]);
    assert_eq!(get(&mut c, "a").as_deref(), Some("hello"));
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v", "g", "w"]);
    assert_eq!(int(&mut c, &["COPY", "h", "h2"]), 1);
    let _: i64 = q(&mut c, &["HSET", "h2", "x", "y"]);
    assert_eq!(int(&mut c, &["HLEN", "h"]), 2);
    assert_eq!(int(&mut c, &["HLEN", "h2"]), 3);
    // Encoding and TTL are kept.
    ok(&mut c, &["SET", "n", "12345", "EX", "100"]);
    assert_eq!(int(&mut c, &["COPY", "n", "n2"]), 1);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "n2"]);
    assert_eq!(enc, "int");
    assert_eq!(int(&mut c, &["TTL", "n2"]), 100);
    // Errors, in Redis's order.
    assert_eq!(err(&mut c, &["COPY", "a", "a"]), SAME);
    assert_eq!(err(&mut c, &["COPY", "nosuch", "nosuch"]), SAME);
    assert_eq!(err(&mut c, &["COPY", "a", "a", "DB", "0"]), SAME);
    assert_eq!(int(&mut c, &["COPY", "nosuch", "x"]), 0);
    assert_eq!(err(&mut c, &["COPY", "a", "b", "DB", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["COPY", "nosuch", "b", "DB", "-1"]), DB_RANGE);
    assert_eq!(err(&mut c, &["COPY", "a", "b", "DB", "abc"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["COPY", "a", "b", "DB", "99999999999"]),
        NOT_INT32
    );
    assert_eq!(err(&mut c, &["COPY", "a", "b", "DB"]), SYNTAX);
    assert_eq!(err(&mut c, &["COPY", "a", "b", "REPLACE", "FOO"]), SYNTAX);
    assert_eq!(err(&mut c, &["COPY", "a"]), arity("copy"));
    // Across databases; the last DB option wins.
    assert_eq!(int(&mut c, &["COPY", "a", "a", "DB", "1"]), 1);
    assert_eq!(int(&mut c, &["COPY", "n", "a", "DB", "3", "DB", "2"]), 1);
    let mut c2 = support::redis_client(s.port);
    ok(&mut c2, &["SELECT", "2"]);
    assert_eq!(get(&mut c2, "a").as_deref(), Some("12345"));
    assert!(int(&mut c2, &["TTL", "a"]) > 90);
    ok(&mut c2, &["SELECT", "1"]);
    assert_eq!(get(&mut c2, "a").as_deref(), Some("hello"));
    ok(&mut c2, &["SELECT", "3"]);
    assert_eq!(int(&mut c2, &["DBSIZE"]), 0);
}

#[test]
fn keys_patterns() {
    let (_s, mut c) = server();
    let names = [
        "", "a", "ab", "abc", "hello", "hallo", "hxllo", "h*llo", "x?y", "[x]", "A",
    ];
    for n in names {
        ok(&mut c, &["SET", n, "1"]);
    }
    let keys = |c: &mut Connection, p: &str| -> Vec<String> { sorted(q(c, &["KEYS", p])) };
    let mut all: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    all.sort();
    // "*" alone returns the empty key too; the matcher proper does not.
    assert_eq!(keys(&mut c, "*"), all);
    assert_eq!(keys(&mut c, "**").len(), names.len() - 1);
    assert_eq!(keys(&mut c, "h?llo"), ["h*llo", "hallo", "hello", "hxllo"]);
    assert_eq!(keys(&mut c, "h[ae]llo"), ["hallo", "hello"]);
    assert_eq!(keys(&mut c, "h[^e]llo"), ["h*llo", "hallo", "hxllo"]);
    assert_eq!(keys(&mut c, "h\\*llo"), ["h*llo"]);
    assert_eq!(keys(&mut c, "a*"), ["a", "ab", "abc"]);
    assert_eq!(keys(&mut c, "ab"), ["ab"]);
    assert_eq!(keys(&mut c, "\\[x\\]"), ["[x]"]);
    assert_eq!(keys(&mut c, "a"), ["a"]);
    assert_eq!(keys(&mut c, ""), [""]);
    assert!(keys(&mut c, "nosuch*").is_empty());
    assert!(keys(&mut c, "nosuch").is_empty());
    assert_eq!(err(&mut c, &["KEYS"]), arity("keys"));
    assert_eq!(err(&mut c, &["KEYS", "a", "b"]), arity("keys"));
}

/// All keys of a SCAN from cursor 0 with these options.
fn scan_all(c: &mut Connection, opts: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    loop {
        let mut args = vec!["SCAN", &cursor];
        args.extend_from_slice(opts);
        let (next, keys): (String, Vec<String>) = q(c, &args);
        out.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn scan_options_and_errors() {
    let (_s, mut c) = server();
    let (cur, keys): (String, Vec<String>) = q(&mut c, &["SCAN", "0"]);
    assert_eq!((cur.as_str(), keys.len()), ("0", 0));
    for i in 0..100 {
        ok(&mut c, &["SET", &format!("k:{i}"), "v"]);
    }
    for i in 0..5 {
        let _: i64 = q(&mut c, &["HSET", &format!("h:{i}"), "f", "v"]);
    }
    ok(&mut c, &["SET", "", "empty"]);
    assert_eq!(scan_all(&mut c, &[]).len(), 106);
    assert_eq!(scan_all(&mut c, &["COUNT", "1"]).len(), 106);
    assert_eq!(
        scan_all(&mut c, &["MATCH", "*"]).len(),
        106,
        "* matches the empty key"
    );
    assert_eq!(scan_all(&mut c, &["MATCH", "k:1*", "COUNT", "3"]).len(), 11);
    assert_eq!(
        scan_all(&mut c, &["MATCH", "nosuch", "MATCH", "h:?"]).len(),
        5
    );
    assert_eq!(scan_all(&mut c, &["TYPE", "hash"]).len(), 5);
    assert_eq!(scan_all(&mut c, &["TYPE", "HASH", "MATCH", "k:*"]).len(), 0);
    assert_eq!(
        scan_all(&mut c, &["TYPE", "string", "COUNT", "1000"]).len(),
        101
    );
    assert_eq!(scan_all(&mut c, &["TYPE", "list"]).len(), 0);
    assert_eq!(scan_all(&mut c, &["TYPE", "foo"]).len(), 0);
    // Expired keys are never returned.
    ok(&mut c, &["SET", "dying", "v", "PX", "50"]);
    jump(&mut c, 100);
    assert!(scan_all(&mut c, &["MATCH", "dying"]).is_empty());

    let cursor_err = "ERR invalid cursor";
    for bad in ["abc", "1.5", " 0", "0 ", "18446744073709551616", "+", "-"] {
        assert_eq!(err(&mut c, &["SCAN", bad]), cursor_err, "{bad:?}");
    }
    // strtoul accepts these.
    for fine in ["", "+0", "-0", "007"] {
        let _: (String, Vec<String>) = q(&mut c, &["SCAN", fine, "COUNT", "1"]);
    }
    assert_eq!(err(&mut c, &["SCAN", "abc", "COUNT", "0"]), cursor_err);
    for opts in [
        &["COUNT", "0"][..],
        &["COUNT", "-1"],
        &["COUNT"],
        &["MATCH"],
        &["TYPE"],
        &["FOO", "bar"],
        &["MATCH", "*", "COUNT", "0"],
    ] {
        let mut args = vec!["SCAN", "0"];
        args.extend_from_slice(opts);
        assert_eq!(err(&mut c, &args), SYNTAX, "{opts:?}");
    }
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "abc"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SCAN", "0", "COUNT", "9223372036854775808"]),
        NOT_INT
    );
    assert_eq!(err(&mut c, &["SCAN"]), arity("scan"));
}

/// SCAN's guarantee: a key present for the whole scan is returned, even
/// while other clients add and delete keys (and the tables resize).
#[test]
fn scan_returns_every_stable_key_under_churn() {
    let (s, mut c) = server();
    const STABLE: usize = 10_000;
    let mut p = redis::pipe();
    for i in 0..STABLE {
        p.cmd("SET").arg(format!("stable:{i}")).arg("v").ignore();
    }
    let _: () = p.query(&mut c).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        let port = s.port;
        std::thread::spawn(move || {
            let mut c = support::redis_client(port);
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Waves of inserts and deletes, so tables grow and shrink.
                let mut p = redis::pipe();
                for i in 0..2_000 {
                    p.cmd("SET")
                        .arg(format!("churn:{round}:{i}"))
                        .arg("v")
                        .ignore();
                }
                if round > 0 {
                    for i in 0..2_000 {
                        p.cmd("DEL")
                            .arg(format!("churn:{}:{i}", round - 1))
                            .ignore();
                    }
                }
                let _: () = p.query(&mut c).unwrap();
                round += 1;
            }
            round
        })
    };

    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "COUNT", "10"]);
        calls += 1;
        seen.extend(keys.into_iter().filter(|k| k.starts_with("stable:")));
        if next == "0" {
            break;
        }
        cursor = next;
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    assert!(
        rounds > 1,
        "the churn thread should have run during the scan"
    );
    let missing: Vec<usize> = (0..STABLE)
        .filter(|i| !seen.contains(&format!("stable:{i}")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} stable keys missed, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(
        calls > STABLE / 20,
        "COUNT 10 should take many calls, took {calls}"
    );
}

/// The background sweep reclaims expired keys nobody reads.
#[test]
fn active_expiry_reclaims_unread_keys() {
    let (_s, mut c) = server();
    const N: usize = 5_000;
    let mut p = redis::pipe();
    for i in 0..N {
        p.cmd("SET")
            .arg(format!("v:{i}"))
            .arg("x")
            .arg("PX")
            .arg(100)
            .ignore();
    }
    for i in 0..10 {
        p.cmd("SET").arg(format!("keep:{i}")).arg("x").ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    assert_eq!(int(&mut c, &["DBSIZE"]), N as i64 + 10);
    let start = Instant::now();
    std::thread::sleep(Duration::from_millis(1_000));
    // DBSIZE counts expired-but-unreclaimed keys, so it reads the sweep's
    // progress without expiring anything itself.
    let mut left = int(&mut c, &["DBSIZE"]);
    while left > 10 + N as i64 / 100 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
        left = int(&mut c, &["DBSIZE"]);
    }
    assert!(
        left <= 10 + N as i64 / 100,
        "{left} keys left after {:?}",
        start.elapsed()
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(int(&mut c, &["EXISTS", "keep:0", "keep:9"]), 2);
}

#[test]
fn randomkey_dbsize_flush() {
    let (s, mut c) = server();
    let r: Option<String> = q(&mut c, &["RANDOMKEY"]);
    assert_eq!(r, None);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    ok(&mut c, &["SET", "only", "v"]);
    let r: Option<String> = q(&mut c, &["RANDOMKEY"]);
    assert_eq!(r.as_deref(), Some("only"));
    for i in 0..50 {
        ok(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    let mut picked = HashSet::new();
    for _ in 0..200 {
        let r: Option<String> = q(&mut c, &["RANDOMKEY"]);
        picked.insert(r.unwrap());
    }
    assert!(
        picked.len() > 10,
        "RANDOMKEY should spread: {}",
        picked.len()
    );
    assert_eq!(int(&mut c, &["DBSIZE"]), 51);
    assert_eq!(err(&mut c, &["DBSIZE", "x"]), arity("dbsize"));
    assert_eq!(err(&mut c, &["RANDOMKEY", "x"]), arity("randomkey"));

    let mut c1 = support::redis_client(s.port);
    ok(&mut c1, &["SELECT", "1"]);
    ok(&mut c1, &["SET", "b", "1"]);
    ok(&mut c, &["FLUSHDB"]);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    assert_eq!(int(&mut c1, &["DBSIZE"]), 1);
    for mode in ["ASYNC", "SYNC", "async"] {
        ok(&mut c, &["SET", "a", "1"]);
        ok(&mut c, &["FLUSHDB", mode]);
        assert_eq!(int(&mut c, &["DBSIZE"]), 0);
    }
    for bad in [&["FOO"][..], &["ASYNC", "SYNC"], &["SYNC", "SYNC"], &[""]] {
        let mut args = vec!["FLUSHDB"];
        args.extend_from_slice(bad);
        assert_eq!(err(&mut c, &args), SYNTAX);
        args[0] = "FLUSHALL";
        assert_eq!(err(&mut c, &args), SYNTAX);
    }
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(int(&mut c1, &["DBSIZE"]), 0);
    // ASYNC with a big database: gone at once, freed in the background.
    let mut p = redis::pipe();
    for i in 0..20_000 {
        p.cmd("SET").arg(format!("k{i}")).arg("v").ignore();
    }
    let _: () = p.query(&mut c1).unwrap();
    ok(&mut c, &["FLUSHALL", "ASYNC"]);
    assert_eq!(int(&mut c1, &["DBSIZE"]), 0);
    ok(
        &mut c,
        &["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"],
    );
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(int(&mut c, &["DBSIZE"]), 0);
}

#[test]
fn swapdb() {
    let (s, mut c) = server();
    let mut c1 = support::redis_client(s.port);
    ok(&mut c1, &["SELECT", "1"]);
    ok(&mut c, &["SET", "k", "db0"]);
    ok(&mut c, &["SET", "t", "v", "EX", "100"]);
    ok(&mut c1, &["SET", "k", "db1"]);
    ok(&mut c, &["SWAPDB", "0", "1"]);
    // Connections stay on their index and see the other contents.
    assert_eq!(get(&mut c, "k").as_deref(), Some("db1"));
    assert_eq!(get(&mut c1, "k").as_deref(), Some("db0"));
    assert_eq!(int(&mut c1, &["TTL", "t"]), 100);
    ok(&mut c, &["SWAPDB", "1", "1"]);
    assert_eq!(get(&mut c1, "k").as_deref(), Some("db0"));
    ok(&mut c, &["swapdb", "1", "0"]);
    assert_eq!(get(&mut c, "k").as_deref(), Some("db0"));
    assert_eq!(err(&mut c, &["SWAPDB", "0", "16"]), DB_RANGE);
    assert_eq!(err(&mut c, &["SWAPDB", "-1", "0"]), DB_RANGE);
    assert_eq!(
        err(&mut c, &["SWAPDB", "abc", "def"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        err(&mut c, &["SWAPDB", "1.5", "0"]),
        "ERR invalid first DB index"
    );
    assert_eq!(
        err(&mut c, &["SWAPDB", "0", "abc"]),
        "ERR invalid second DB index"
    );
    assert_eq!(
        err(&mut c, &["SWAPDB", "0", "99999999999"]),
        "ERR invalid second DB index"
    );
    assert_eq!(err(&mut c, &["SWAPDB", "0"]), arity("swapdb"));
}

#[test]
fn object_subcommands() {
    let (s, mut c) = server();
    ok(&mut c, &["SET", "i", "123"]);
    ok(&mut c, &["SET", "big", "10000"]);
    ok(&mut c, &["SET", "s", "hello"]);
    ok(&mut c, &["SET", "r", &"x".repeat(45)]);
    let _: i64 = q(&mut c, &["HSET", "h", "f", "v"]);
    for (key, enc) in [
        ("i", "int"),
        ("big", "int"),
        ("s", "embstr"),
        ("r", "raw"),
        ("h", "listpack"),
    ] {
        let e: String = q(&mut c, &["OBJECT", "ENCODING", key]);
        assert_eq!(e, enc, "{key}");
    }
    for sub in ["ENCODING", "REFCOUNT", "IDLETIME", "FREQ"] {
        let v: Value = q(&mut c, &["OBJECT", sub, "nosuch"]);
        assert_eq!(v, Value::Nil, "{sub}");
    }
    // Integers 0..9999 are shared objects in Redis.
    assert_eq!(
        int(&mut c, &["OBJECT", "REFCOUNT", "i"]),
        i64::from(i32::MAX)
    );
    assert_eq!(int(&mut c, &["OBJECT", "REFCOUNT", "big"]), 1);
    assert_eq!(int(&mut c, &["OBJECT", "REFCOUNT", "s"]), 1);
    assert_eq!(int(&mut c, &["OBJECT", "REFCOUNT", "h"]), 1);
    // ... unless maxmemory is set with an LRU/LFU policy.
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1gb"]);
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    assert_eq!(int(&mut c, &["OBJECT", "REFCOUNT", "i"]), 1);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);

    // IDLETIME grows while nobody reads the key; OBJECT itself is no access.
    // (0 or 1: the LRU clock ticks in whole seconds.)
    assert!(int(&mut c, &["OBJECT", "IDLETIME", "s"]) <= 1);
    jump(&mut c, 5_000);
    let idle = int(&mut c, &["OBJECT", "IDLETIME", "s"]);
    assert!((5..=6).contains(&idle), "{idle}");
    assert!(int(&mut c, &["OBJECT", "IDLETIME", "s"]) >= 5);
    let _: Option<String> = q(&mut c, &["GET", "s"]);
    assert!(int(&mut c, &["OBJECT", "IDLETIME", "s"]) <= 1);
    let freq_err = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
    assert_eq!(err(&mut c, &["OBJECT", "FREQ", "s"]), freq_err);
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    let idle_err = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
    assert_eq!(err(&mut c, &["OBJECT", "IDLETIME", "s"]), idle_err);
    ok(&mut c, &["SET", "f", "v"]);
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "f"]), 5, "LFU_INIT_VAL");
    for _ in 0..50 {
        let _: Option<String> = q(&mut c, &["GET", "f"]);
    }
    let f = int(&mut c, &["OBJECT", "FREQ", "f"]);
    assert!(f > 5, "{f}");
    // The counter decays by one per idle minute.
    jump(&mut c, 3 * 60_000 + 1_000);
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "f"]), f - 3);

    let help: Vec<String> = q(&mut c, &["object", "help"]);
    assert_eq!(help.len(), 15);
    assert_eq!(
        help[0],
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(help[14], "    Prints this help.");
    assert_eq!(
        err(&mut c, &["OBJECT", "FOO", "k"]),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
    assert_eq!(
        err(&mut c, &["OBJECT", "ENCODING"]),
        arity("object|encoding")
    );
    assert_eq!(err(&mut c, &["OBJECT", "HELP", "x"]), arity("object|help"));
    assert_eq!(err(&mut c, &["OBJECT"]), arity("object"));

    // RESP3: nulls are `_`, TYPE a status, OBJECT HELP status lines.
    let mut raw = s.conn();
    let _hello = raw.cmd(&["HELLO", "3"]);
    assert_eq!(raw.cmd(&["OBJECT", "ENCODING", "nosuch"]), b"_\r\n");
    assert_eq!(raw.cmd(&["OBJECT", "REFCOUNT", "h"]), b":1\r\n");
    assert_eq!(raw.cmd(&["TYPE", "h"]), b"+hash\r\n");
    assert_eq!(raw.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&["RANDOMKEY"]), b"_\r\n");
    assert_eq!(raw.cmd(&["SCAN", "0"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(raw.cmd(&["KEYS", "*"]), b"*0\r\n");
    let help = raw.cmd(&["OBJECT", "HELP"]);
    assert!(
        help.starts_with(b"*15\r\n+OBJECT <subcommand>"),
        "{}",
        support::escape(&help)
    );
    let mut raw2 = s.conn();
    assert_eq!(raw2.cmd(&["RANDOMKEY"]), b"$-1\r\n");
    assert_eq!(raw2.cmd(&["OBJECT", "FREQ", "nosuch"]), b"$-1\r\n");
}

/// Multi-key commands lock all their keys at once: a reader checking both
/// names never sees a RENAME half done.
#[test]
fn rename_is_atomic_for_other_clients() {
    let (s, mut c) = server();
    ok(&mut c, &["SET", "{x}a", "v"]);
    let stop = Arc::new(AtomicBool::new(false));
    let renamer = {
        let stop = stop.clone();
        let port = s.port;
        std::thread::spawn(move || {
            let mut c = support::redis_client(port);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let (from, to) = if n % 2 == 0 {
                    ("{x}a", "zz")
                } else {
                    ("zz", "{x}a")
                };
                ok(&mut c, &["RENAME", from, to]);
                n += 1;
            }
            n
        })
    };
    let deadline = Instant::now() + Duration::from_millis(500);
    let mut checks = 0;
    while Instant::now() < deadline {
        assert_eq!(int(&mut c, &["EXISTS", "{x}a", "zz"]), 1);
        checks += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let renames = renamer.join().unwrap();
    assert!(
        checks > 100 && renames > 100,
        "{checks} checks, {renames} renames"
    );
}
