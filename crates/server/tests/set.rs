//! The set family end to end (Redis 7.0 `t_set.c` behaviour): every
//! command, option and error of SADD, SREM, SMEMBERS, SISMEMBER,
//! SMISMEMBER, SCARD, SMOVE, SPOP, SRANDMEMBER, SINTER, SINTERCARD,
//! SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE and SSCAN, driven
//! through the `redis` crate, with raw bytes where the exact reply shape
//! matters (RESP3 sets, nulls). Encodings are checked with OBJECT ENCODING
//! around `set-max-intset-entries`, set both with CONFIG SET and at
//! start-up; every expectation about encodings and orders was checked
//! against redis-server 7.0.15.

mod support;

use std::collections::{BTreeSet, HashSet};

use redis::{Connection, Value};
use support::{cmd, err, q, server, start_cairn, RawConn};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

fn encoding(con: &mut Connection, key: &str) -> String {
    q(con, &["OBJECT", "ENCODING", key])
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn members(c: &mut Connection, key: &str) -> Vec<String> {
    q(c, &["SMEMBERS", key])
}

/// SADD of many arguments at once.
fn sadd(c: &mut Connection, key: &str, members: impl IntoIterator<Item = String>) -> i64 {
    let mut cmd = redis::cmd("SADD");
    cmd.arg(key);
    for m in members {
        cmd.arg(m);
    }
    cmd.query(c).unwrap()
}

fn range(from: i64, to: i64) -> impl Iterator<Item = String> {
    (from..to).map(|i| i.to_string())
}

#[test]
fn add_remove_and_read() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "3", "1", "2", "1"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SADD", "s", "3", "4"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 4);
    // An intset lists ascending.
    assert_eq!(members(&mut c, "s"), strs(&["1", "2", "3", "4"]));
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "02"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "s", "x"]), 0);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "s", "1", "9", "4", "1"]),
        vec![1, 0, 1, 1]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["SMISMEMBER", "nosuch", "1", "2"]),
        vec![0, 0]
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "s"]), "set");
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "1", "9", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "2", "3", "4", "5"]), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SREM", "s", "1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "nosuch"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "nosuch", "a"]), 0);
    assert_eq!(members(&mut c, "nosuch"), Vec::<String>::new());
    // Strings: a hashtable.
    assert_eq!(q::<i64>(&mut c, &["SADD", "h", "b", "a", "1"]), 3);
    assert_eq!(sorted(members(&mut c, "h")), strs(&["1", "a", "b"]));
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "h", "1"]), 1);
    // A set keeps its TTL through writes.
    q::<i64>(&mut c, &["EXPIRE", "h", "100"]);
    q::<i64>(&mut c, &["SADD", "h", "c"]);
    q::<i64>(&mut c, &["SREM", "h", "a"]);
    assert!(q::<i64>(&mut c, &["TTL", "h"]) > 0);
}

#[test]
fn binary_empty_and_long_members() {
    let (_s, mut c) = server();
    let weird: &[&[u8]] = &[b"", b"\x00", b"a\r\nb", b"\xff\xfe\xfd", &[b'L'; 5000]];
    let mut args: Vec<&[u8]> = vec![b"SADD", b"b"];
    args.extend_from_slice(weird);
    assert_eq!(cmd(&args).query::<i64>(&mut c).unwrap(), 5);
    let got: Vec<Vec<u8>> = cmd(&[b"SMEMBERS", b"b"]).query(&mut c).unwrap();
    let got: BTreeSet<Vec<u8>> = got.into_iter().collect();
    let want: BTreeSet<Vec<u8>> = weird.iter().map(|w| w.to_vec()).collect();
    assert_eq!(got, want);
    for w in weird {
        let is: i64 = cmd(&[b"SISMEMBER", b"b", w]).query(&mut c).unwrap();
        assert_eq!(is, 1);
    }
    let long_miss = [b'L'; 4999];
    let is: i64 = cmd(&[b"SISMEMBER", b"b", &long_miss])
        .query(&mut c)
        .unwrap();
    assert_eq!(is, 0);
    // Members just around the inline size are told apart.
    for len in 20..26 {
        let m = "m".repeat(len);
        assert_eq!(q::<i64>(&mut c, &["SADD", "edge", &m]), 1);
    }
    for len in 20..26 {
        let m = "m".repeat(len);
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "edge", &m]), 1);
        assert_eq!(q::<i64>(&mut c, &["SADD", "edge", &m]), 0);
    }
}

#[test]
fn arity_errors() {
    let (_s, mut c) = server();
    for (args, name) in [
        (&["SADD", "s"][..], "sadd"),
        (&["SREM", "s"], "srem"),
        (&["SMEMBERS"], "smembers"),
        (&["SMEMBERS", "a", "b"], "smembers"),
        (&["SISMEMBER", "s"], "sismember"),
        (&["SMISMEMBER", "s"], "smismember"),
        (&["SCARD"], "scard"),
        (&["SMOVE", "a", "b"], "smove"),
        (&["SPOP"], "spop"),
        (&["SRANDMEMBER"], "srandmember"),
        (&["SINTER"], "sinter"),
        (&["SINTERCARD", "1"], "sintercard"),
        (&["SINTERSTORE", "d"], "sinterstore"),
        (&["SUNION"], "sunion"),
        (&["SUNIONSTORE", "d"], "sunionstore"),
        (&["SDIFF"], "sdiff"),
        (&["SDIFFSTORE", "d"], "sdiffstore"),
        (&["SSCAN", "s"], "sscan"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{args:?}"
        );
    }
    assert_eq!(err(&mut c, &["SPOP", "s", "1", "2"]), SYNTAX);
    assert_eq!(err(&mut c, &["SRANDMEMBER", "s", "1", "2"]), SYNTAX);
}

#[test]
fn wrong_type() {
    let (_s, mut c) = server();
    q::<String>(&mut c, &["SET", "str", "v"]);
    q::<i64>(&mut c, &["SADD", "s", "1"]);
    for args in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SMOVE", "str", "s", "a"],
        &["SMOVE", "s", "str", "1"],
        &["SPOP", "str"],
        &["SPOP", "str", "1"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "-1"],
        &["SINTER", "nosuch", "str"],
        &["SINTERCARD", "2", "nosuch", "str"],
        &["SINTERSTORE", "d", "s", "str"],
        &["SUNION", "s", "str"],
        &["SUNIONSTORE", "d", "str"],
        &["SDIFF", "nosuch", "str"],
        &["SDIFFSTORE", "d", "s", "str"],
        &["SSCAN", "str", "0"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    // Nothing changed, and the failed STOREs left no destination.
    assert_eq!(q::<String>(&mut c, &["GET", "str"]), "v");
    assert_eq!(members(&mut c, "s"), strs(&["1"]));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
    // Argument errors come first, then the key.
    assert_eq!(err(&mut c, &["SPOP", "str", "-1"]), NOT_POSITIVE);
    assert_eq!(err(&mut c, &["SRANDMEMBER", "str", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["SSCAN", "str", "x"]), "ERR invalid cursor");
    // A missing source wins over a wrong-typed destination.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "nosuch", "str", "a"]), 0);
}

#[test]
fn smove() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["SADD", "a", "1", "2", "3"]);
    q::<i64>(&mut c, &["SADD", "b", "3"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "1"]), 1);
    assert_eq!(members(&mut c, "a"), strs(&["2", "3"]));
    assert_eq!(members(&mut c, "b"), strs(&["1", "3"]));
    // Already in the destination: still moved out of the source.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "3"]), 1);
    assert_eq!(members(&mut c, "a"), strs(&["2"]));
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "b", "9"]), 0);
    // Same key: a membership test.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "a", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "a", "9"]), 0);
    // The last member leaves: the source is deleted; a new destination
    // is created in the encoding the member needs.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "a", "new", "2"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(encoding(&mut c, "new"), "intset");
    q::<i64>(&mut c, &["SADD", "strs", "x", "y"]);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "strs", "new2", "x"]), 1);
    assert_eq!(encoding(&mut c, "new2"), "hashtable");
    // A string moved into an intset converts it.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "strs", "new", "y"]), 1);
    assert_eq!(encoding(&mut c, "new"), "hashtable");
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "nosuch", "b", "1"]), 0);
}

#[test]
fn spop() {
    let (_s, mut c) = server();
    assert_eq!(q::<Option<String>>(&mut c, &["SPOP", "nosuch"]), None);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SPOP", "nosuch", "3"]),
        Vec::<String>::new()
    );
    for bad in ["-1", "x", "1.5", "9223372036854775808", ""] {
        assert_eq!(err(&mut c, &["SPOP", "nosuch", bad]), NOT_POSITIVE, "{bad}");
    }
    q::<i64>(&mut c, &["SADD", "s", "a", "b", "c"]);
    let popped: String = q(&mut c, &["SPOP", "s"]);
    assert!(["a", "b", "c"].contains(&popped.as_str()));
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 2);
    assert_eq!(q::<Vec<String>>(&mut c, &["SPOP", "s", "0"]).len(), 0);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 2);
    let rest: Vec<String> = q(&mut c, &["SPOP", "s", "9223372036854775807"]);
    assert_eq!(rest.len(), 2);
    assert!(!rest.contains(&popped));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]), 0);

    // Both strategies give distinct members and leave the rest.
    for (size, count) in [(100, 10), (100, 90), (100, 99), (1000, 500)] {
        q::<i64>(&mut c, &["DEL", "p"]);
        sadd(&mut c, "p", (0..size).map(|i| format!("m{i}")));
        let got: Vec<String> = q(&mut c, &["SPOP", "p", &count.to_string()]);
        let got: HashSet<String> = got.into_iter().collect();
        assert_eq!(got.len(), count);
        let left: HashSet<String> = members(&mut c, "p").into_iter().collect();
        assert_eq!(left.len(), size - count);
        assert!(got.is_disjoint(&left));
    }
    // The whole intset comes back ascending.
    q::<i64>(&mut c, &["SADD", "i", "5", "-2", "9"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SPOP", "i", "3"]),
        strs(&["-2", "5", "9"])
    );
}

#[test]
fn spop_rebuilds_small_remainders_as_intsets() {
    let (_s, mut c) = server();
    q::<String>(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "4"]);
    sadd(&mut c, "s", range(1, 11));
    assert_eq!(encoding(&mut c, "s"), "hashtable");
    q::<i64>(&mut c, &["EXPIRE", "s", "100"]);
    // 1 of 10 left: Redis rebuilds the survivors with SADD's rules.
    assert_eq!(q::<Vec<String>>(&mut c, &["SPOP", "s", "9"]).len(), 9);
    assert_eq!(encoding(&mut c, "s"), "intset");
    assert!(q::<i64>(&mut c, &["TTL", "s"]) > 0);
    // 2 of 10 left: picked one by one, no rebuild.
    sadd(&mut c, "t", range(1, 11));
    q::<Vec<String>>(&mut c, &["SPOP", "t", "8"]);
    assert_eq!(encoding(&mut c, "t"), "hashtable");
    assert_eq!(q::<i64>(&mut c, &["SCARD", "t"]), 2);
}

#[test]
fn srandmember() {
    let (_s, mut c) = server();
    assert_eq!(
        q::<Option<String>>(&mut c, &["SRANDMEMBER", "nosuch"]),
        None
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "nosuch", "-5"]).len(),
        0
    );
    assert_eq!(err(&mut c, &["SRANDMEMBER", "nosuch", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "nosuch", "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and \
         9223372036854775807"
    );
    sadd(&mut c, "s", (0..50).map(|i| format!("m{i}")));
    let one: String = q(&mut c, &["SRANDMEMBER", "s"]);
    assert!(one.starts_with('m'));
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "s", "0"]).len(),
        0
    );
    for count in [1, 2, 16, 17, 49, 50, 51, i64::MAX] {
        let got: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", &count.to_string()]);
        let want = (count as usize).min(50);
        assert_eq!(got.len(), want, "{count}");
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), want, "{count}");
    }
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", "s", "-1000"]);
    assert_eq!(picks.len(), 1000);
    let distinct: HashSet<&String> = picks.iter().collect();
    assert!(distinct.len() > 40, "{} distinct of 50", distinct.len());
    // Nothing was removed.
    assert_eq!(q::<i64>(&mut c, &["SCARD", "s"]), 50);
    // An intset: whole-set replies ascend.
    q::<i64>(&mut c, &["SADD", "i", "3", "1", "2"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "i", "5"]),
        strs(&["1", "2", "3"])
    );
}

/// A negative count makes a reply the set does not bound; Redis would
/// build it in memory until it runs out. Cairn refuses one larger than
/// `proto-max-bulk-len` (see DIFFERENCES.md).
#[test]
fn srandmember_huge_negative_counts_are_refused() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["SADD", "s", "a"]);
    let refused = "ERR value is out of range, the reply would exceed proto-max-bulk-len";
    assert_eq!(
        err(&mut c, &["SRANDMEMBER", "s", "-9223372036854775807"]),
        refused
    );
    // Within the up-front estimate, stopped while writing: 100 picks of a
    // 100000-byte member exceed a 1 MB limit.
    q::<String>(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    q::<i64>(&mut c, &["SADD", "big", &"x".repeat(100_000)]);
    assert_eq!(err(&mut c, &["SRANDMEMBER", "big", "-100"]), refused);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "big", "-5"]).len(),
        5
    );
    // The connection is still in step, and a missing key is still empty.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SRANDMEMBER", "nosuch", "-9223372036854775807"]).len(),
        0
    );
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}

#[test]
fn intersections_unions_differences() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["SADD", "a", "1", "2", "3", "4"]);
    q::<i64>(&mut c, &["SADD", "b", "3", "4", "5"]);
    q::<i64>(&mut c, &["SADD", "x", "x", "3", "y"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SINTER", "a", "b"]),
        strs(&["3", "4"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SINTER", "a", "x"]),
        strs(&["3"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SINTER", "a", "nosuch"]).len(),
        0
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SUNION", "a", "b", "nosuch"]),
        strs(&["1", "2", "3", "4", "5"])
    );
    assert_eq!(
        sorted(q(&mut c, &["SUNION", "a", "x"])),
        strs(&["1", "2", "3", "4", "x", "y"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["SDIFF", "a", "b"]),
        strs(&["1", "2"])
    );
    assert_eq!(
        sorted(q(&mut c, &["SDIFF", "x", "a", "b"])),
        strs(&["x", "y"])
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["SDIFF", "a", "a"]).len(), 0);
    assert_eq!(q::<Vec<String>>(&mut c, &["SDIFF", "nosuch", "a"]).len(), 0);

    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b", "LIMIT", "1"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["SINTERCARD", "2", "a", "b", "limit", "0"]),
        2
    );
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "1", "a"]), 4);
    for (args, e) in [
        (
            &["SINTERCARD", "0", "a"][..],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "x", "a"],
            "ERR numkeys should be greater than 0",
        ),
        (
            &["SINTERCARD", "3", "a", "b"],
            "ERR Number of keys can't be greater than number of args",
        ),
        (
            &["SINTERCARD", "1", "a", "LIMIT", "-1"],
            "ERR LIMIT can't be negative",
        ),
        (
            &["SINTERCARD", "1", "a", "LIMIT", "x"],
            "ERR LIMIT can't be negative",
        ),
        (&["SINTERCARD", "1", "a", "LIMIT"], SYNTAX),
        (&["SINTERCARD", "1", "a", "b"], SYNTAX),
    ] {
        assert_eq!(err(&mut c, args), e, "{args:?}");
    }

    // STORE: the size, the result under the destination, TTL cleared.
    q::<String>(&mut c, &["SET", "d", "old"]);
    q::<i64>(&mut c, &["EXPIRE", "d", "100"]);
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "d", "a", "b"]), 2);
    assert_eq!(members(&mut c, "d"), strs(&["3", "4"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "d"]), -1);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "d", "a", "b"]), 5);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "d", "a", "b"]), 2);
    assert_eq!(members(&mut c, "d"), strs(&["1", "2"]));
    // The destination may be a source.
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "d", "d", "b"]), 5);
    // Empty results delete it.
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "d", "a", "nosuch"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "d", "a", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "d", "nosuch"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
    // The sources are untouched.
    assert_eq!(members(&mut c, "a"), strs(&["1", "2", "3", "4"]));
}

#[test]
fn many_keys_in_one_command() {
    let (_s, mut c) = server();
    let keys: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        sadd(&mut c, k, [i.to_string(), "common".to_string()]);
    }
    let mut union = redis::cmd("SUNION");
    let mut inter = redis::cmd("SINTER");
    for k in keys.iter().chain(keys.iter()) {
        union.arg(k);
        inter.arg(k);
    }
    let u: Vec<String> = union.query(&mut c).unwrap();
    assert_eq!(u.len(), 201);
    let i: Vec<String> = inter.query(&mut c).unwrap();
    assert_eq!(i, strs(&["common"]));
    // Every set is back in place.
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            sorted(members(&mut c, k)),
            sorted(vec![i.to_string(), "common".to_string()])
        );
    }
}

/// One SSCAN step: (next cursor, members).
fn sscan(c: &mut Connection, args: &[&str]) -> (String, Vec<String>) {
    let mut all = vec!["SSCAN"];
    all.extend_from_slice(args);
    q(c, &all)
}

fn scan_all(c: &mut Connection, key: &str, extra: &[&str]) -> (Vec<String>, usize) {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec![key, cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, got) = sscan(c, &args);
        out.extend(got);
        calls += 1;
        if next == "0" {
            return (out, calls);
        }
        cursor = next;
    }
}

#[test]
fn sscan_intset_and_options() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["SADD", "i", "10", "2", "1", "-5"]);
    assert_eq!(
        sscan(&mut c, &["i", "0"]),
        ("0".into(), strs(&["-5", "1", "2", "10"]))
    );
    assert_eq!(
        sscan(&mut c, &["i", "99", "COUNT", "1"]),
        ("0".into(), strs(&["-5", "1", "2", "10"]))
    );
    assert_eq!(
        sscan(&mut c, &["i", "0", "MATCH", "1*"]),
        ("0".into(), strs(&["1", "10"]))
    );
    assert_eq!(sscan(&mut c, &["nosuch", "0", "BAD"]), ("0".into(), vec![]));
    for (args, e) in [
        (&["i", "x"][..], "ERR invalid cursor"),
        (&["i", "0", "COUNT", "0"], SYNTAX),
        (&["i", "0", "COUNT", "x"], NOT_INT),
        (&["i", "0", "MATCH"], SYNTAX),
        (&["i", "0", "TYPE", "set"], SYNTAX),
    ] {
        let mut all = vec!["SSCAN"];
        all.extend_from_slice(args);
        assert_eq!(err(&mut c, &all), e, "{args:?}");
    }
}

#[test]
fn sscan_hashtable() {
    let (_s, mut c) = server();
    sadd(&mut c, "h", (0..1000).map(|i| format!("m{i}")));
    for count in ["1", "10", "999", "5000"] {
        let (got, calls) = scan_all(&mut c, "h", &["COUNT", count]);
        assert_eq!(got.len(), 1000, "COUNT {count}");
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), 1000);
        let count: usize = count.parse().unwrap();
        assert_eq!(calls, 1000usize.div_ceil(count).max(1));
    }
    let (got, _) = scan_all(&mut c, "h", &["MATCH", "m99*"]);
    assert_eq!(
        sorted(got),
        strs(&[
            "m99", "m990", "m991", "m992", "m993", "m994", "m995", "m996", "m997", "m998", "m999"
        ])
    );
}

/// Members present for the whole scan are all returned, however the set
/// changes between calls.
#[test]
fn sscan_while_members_come_and_go() {
    let (_s, mut c) = server();
    sadd(&mut c, "h", (0..500).map(|i| format!("stable{i}")));
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    let mut round = 0;
    loop {
        let (next, got) = sscan(&mut c, &["h", &cursor, "COUNT", "7"]);
        seen.extend(got);
        sadd(&mut c, "h", (0..10).map(|j| format!("churn{round}-{j}")));
        if round > 0 {
            let mut srem = redis::cmd("SREM");
            srem.arg("h");
            for j in 0..10 {
                srem.arg(format!("churn{}-{j}", round - 1));
            }
            let _: i64 = srem.query(&mut c).unwrap();
        }
        round += 1;
        if next == "0" {
            break;
        }
        cursor = next;
    }
    for i in 0..500 {
        assert!(seen.contains(&format!("stable{i}")), "stable{i} missed");
    }
}

#[test]
fn encodings_follow_config_set() {
    let (_s, mut c) = server();
    assert_eq!(
        q::<String>(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "4"]),
        "OK"
    );
    check_encoding_rules(&mut c);
}

#[test]
fn encodings_follow_startup_options() {
    let s = start_cairn(&["--set-max-intset-entries", "4"]);
    let mut c = support::redis_client(s.port);
    check_encoding_rules(&mut c);
}

/// Redis 7.0's conversion points with set-max-intset-entries 4.
fn check_encoding_rules(c: &mut Connection) {
    sadd(c, "s", range(1, 5));
    assert_eq!(encoding(c, "s"), "intset");
    q::<i64>(c, &["SADD", "s", "4"]);
    assert_eq!(encoding(c, "s"), "intset");
    q::<i64>(c, &["SADD", "s", "5"]);
    assert_eq!(encoding(c, "s"), "hashtable");
    q::<i64>(c, &["SREM", "s", "1", "2", "3", "4"]);
    assert_eq!(encoding(c, "s"), "hashtable", "never back");
    for m in [
        "01",
        "-0",
        "+1",
        " 1",
        "1.0",
        "",
        "9223372036854775808",
        "a",
    ] {
        q::<i64>(c, &["DEL", "n"]);
        q::<i64>(c, &["SADD", "n", "1"]);
        q::<i64>(c, &["SADD", "n", m]);
        assert_eq!(encoding(c, "n"), "hashtable", "{m:?}");
    }
    q::<i64>(
        c,
        &["SADD", "x", "-9223372036854775808", "9223372036854775807"],
    );
    assert_eq!(encoding(c, "x"), "intset");
    // STORE results start as intsets and convert on the way.
    q::<i64>(c, &["SADD", "y", "1", "2"]);
    assert_eq!(q::<i64>(c, &["SUNIONSTORE", "d", "y", "x"]), 4);
    assert_eq!(encoding(c, "d"), "intset");
    q::<i64>(c, &["SADD", "y", "3"]);
    assert_eq!(q::<i64>(c, &["SUNIONSTORE", "d", "y", "x"]), 5);
    assert_eq!(encoding(c, "d"), "hashtable");
    // A hashtable's intersection with itself, small again: an intset.
    assert_eq!(q::<i64>(c, &["SINTERSTORE", "d", "s", "s"]), 1);
    assert_eq!(encoding(c, "d"), "intset");
    assert_eq!(q::<i64>(c, &["SDIFFSTORE", "d", "s", "nosuch"]), 1);
    assert_eq!(encoding(c, "d"), "intset");
    // SMOVE to a new key.
    q::<i64>(c, &["SMOVE", "s", "m", "5"]);
    assert_eq!(encoding(c, "m"), "intset");
}

#[test]
fn large_sets() {
    let (_s, mut c) = server();
    for batch in 0..10 {
        let from = batch * 10_000;
        sadd(
            &mut c,
            "big",
            (from..from + 10_000).map(|i| format!("member:{i}")),
        );
    }
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 100_000);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "big", "member:99999"]), 1);
    let some: Vec<String> = q(&mut c, &["SRANDMEMBER", "big", "1000"]);
    assert_eq!(some.iter().collect::<HashSet<_>>().len(), 1000);
    let popped: Vec<String> = q(&mut c, &["SPOP", "big", "60000"]);
    assert_eq!(popped.len(), 60_000);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 40_000);
    for m in popped.iter().take(100) {
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "big", m]), 0);
    }
    let popped: Vec<String> = q(&mut c, &["SPOP", "big", "39999"]);
    assert_eq!(popped.len(), 39_999);
    assert_eq!(q::<i64>(&mut c, &["SCARD", "big"]), 1);
    // An intset with a high limit: 20000 sorted integers.
    q::<String>(
        &mut c,
        &["CONFIG", "SET", "set-max-intset-entries", "100000"],
    );
    sadd(
        &mut c,
        "ints",
        (0..20_000).rev().map(|i| (i * 3).to_string()),
    );
    assert_eq!(encoding(&mut c, "ints"), "intset");
    let all = members(&mut c, "ints");
    assert_eq!(all.len(), 20_000);
    assert!(all
        .windows(2)
        .all(|w| w[0].parse::<i64>().unwrap() < w[1].parse::<i64>().unwrap()));
}

#[test]
fn watch_sees_only_real_changes() {
    let s = start_cairn(&[]);
    let mut w = support::redis_client(s.port);
    let mut other = support::redis_client(s.port);
    q::<i64>(&mut w, &["SADD", "k", "1", "2"]);
    q::<i64>(&mut w, &["SADD", "d", "1"]);
    // Each write, and whether it must fail the watcher's EXEC.
    let cases: &[(&[&str], &str, bool)] = &[
        (&["SADD", "k", "1"], "k", false),
        (&["SREM", "k", "9"], "k", false),
        (&["SPOP", "k", "0"], "k", false),
        (&["SISMEMBER", "k", "1"], "k", false),
        (&["SUNION", "k", "d"], "k", false),
        (&["SADD", "k", "3"], "k", true),
        (&["SREM", "k", "3"], "k", true),
        // The destination already has the member: only the source changes.
        (&["SMOVE", "k", "d", "1"], "d", false),
        (&["SMOVE", "k", "d", "2"], "d", true),
        (&["SINTERSTORE", "nothing", "nosuch"], "nothing", false),
        (&["SUNIONSTORE", "u", "d"], "u", true),
        (&["SDIFFSTORE", "u", "d", "d"], "u", true),
    ];
    for (write, watched, fails) in cases {
        q::<String>(&mut w, &["WATCH", watched]);
        q::<Value>(&mut other, write);
        let r: Option<Vec<i64>> = redis::pipe()
            .atomic()
            .cmd("EXISTS")
            .arg(*watched)
            .query(&mut w)
            .unwrap();
        assert_eq!(r.is_none(), *fails, "{write:?} watching {watched}");
    }
}

#[test]
fn debug_object_serialized_length() {
    let (_s, mut c) = server();
    // Each figure is what redis-server 7.0.15 answers for the same set.
    for (members, len) in [
        (&["1", "2"][..], 13),
        (&["1", "70000"], 17),
        (&["1", "5000000000"], 25),
        (&["a", "bb", "1", "12345678901"], 20),
    ] {
        q::<i64>(&mut c, &["DEL", "s"]);
        let mut args = vec!["SADD", "s"];
        args.extend_from_slice(members);
        q::<i64>(&mut c, &args);
        let text: String = q(&mut c, &["DEBUG", "OBJECT", "s"]);
        assert!(
            text.contains(&format!(" serializedlength:{len} ")),
            "{members:?}: {text}"
        );
    }
}

#[test]
fn resp3_exact_bytes() {
    let s = start_cairn(&[]);
    let mut r = s.conn();
    r.cmd(&["HELLO", "3"]);
    assert_eq!(r.cmd(&["SADD", "s", "2", "1"]), b":2\r\n");
    assert_eq!(r.cmd(&["SMEMBERS", "s"]), b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    assert_eq!(r.cmd(&["SMEMBERS", "nosuch"]), b"~0\r\n");
    assert_eq!(r.cmd(&["SINTER", "s", "nosuch"]), b"~0\r\n");
    assert_eq!(r.cmd(&["SUNION", "s"]), b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    assert_eq!(
        r.cmd(&["SDIFF", "s", "nosuch"]),
        b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    assert_eq!(r.cmd(&["SMISMEMBER", "s", "1", "x"]), b"*2\r\n:1\r\n:0\r\n");
    assert_eq!(r.cmd(&["SRANDMEMBER", "nosuch"]), b"_\r\n");
    assert_eq!(r.cmd(&["SRANDMEMBER", "nosuch", "2"]), b"*0\r\n");
    assert_eq!(
        r.cmd(&["SRANDMEMBER", "s", "5"]),
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    assert_eq!(r.cmd(&["SPOP", "nosuch"]), b"_\r\n");
    assert_eq!(r.cmd(&["SPOP", "nosuch", "2"]), b"~0\r\n");
    assert_eq!(r.cmd(&["SPOP", "s", "0"]), b"~0\r\n");
    assert_eq!(
        r.cmd(&["SSCAN", "s", "0"]),
        b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    assert_eq!(r.cmd(&["SINTERCARD", "1", "s"]), b":2\r\n");
    assert_eq!(r.cmd(&["SPOP", "s", "5"]), b"~2\r\n$1\r\n1\r\n$1\r\n2\r\n");

    let mut r2 = RawConn::connect(s.port);
    r2.cmd(&["SADD", "t", "-7"]);
    assert_eq!(r2.cmd(&["SMEMBERS", "t"]), b"*1\r\n$2\r\n-7\r\n");
    assert_eq!(r2.cmd(&["SMEMBERS", "nosuch"]), b"*0\r\n");
    assert_eq!(r2.cmd(&["SPOP", "nosuch"]), b"$-1\r\n");
    assert_eq!(r2.cmd(&["SRANDMEMBER", "nosuch"]), b"$-1\r\n");
    assert_eq!(r2.cmd(&["SPOP", "nosuch", "1"]), b"*0\r\n");
    assert_eq!(
        r2.cmd(&["SRANDMEMBER", "t", "-2"]),
        b"*2\r\n$2\r\n-7\r\n$2\r\n-7\r\n"
    );
    assert_eq!(r2.cmd(&["SPOP", "t", "1"]), b"*1\r\n$2\r\n-7\r\n");
    assert_eq!(
        r2.cmd(&["SINTERCARD", "0", "t"]),
        b"-ERR numkeys should be greater than 0\r\n"
    );
}
