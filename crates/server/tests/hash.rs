//! The hash family end to end (Redis 7.0 `t_hash.c` behaviour): every
//! command, option and error of HSET, HSETNX, HGET, HMSET, HMGET, HGETALL,
//! HDEL, HLEN, HEXISTS, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HSTRLEN,
//! HRANDFIELD and HSCAN, driven through the `redis` crate, with raw bytes
//! where the exact reply shape matters (RESP3 maps and nested arrays).
//! Encodings are checked with OBJECT ENCODING around the
//! `hash-max-listpack-*` limits, set both with CONFIG SET and at start-up.

mod support;

use std::collections::{HashMap, HashSet};

use redis::{Connection, Value};
use support::{cmd, err, q, server, start_cairn, RawConn};

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

/// A flat [f1, v1, f2, v2, ...] reply as (field, value) pairs.
fn pairs(flat: Vec<String>) -> Vec<(String, String)> {
    assert_eq!(flat.len() % 2, 0, "odd flat pair list {flat:?}");
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

/// One HSCAN step: (next cursor, flat pairs).
fn hscan(con: &mut Connection, args: &[&str]) -> (String, Vec<String>) {
    let mut all = vec!["HSCAN"];
    all.extend_from_slice(args);
    q(con, &all)
}

/// Fills `key` with `n` fields `f<i>` = `v<i>`, in batches.
fn fill(con: &mut Connection, key: &str, from: usize, n: usize) {
    let mut i = from;
    while i < from + n {
        let end = (i + 500).min(from + n);
        let mut c = redis::cmd("HSET");
        c.arg(key);
        for j in i..end {
            c.arg(format!("f{j}")).arg(format!("v{j}"));
        }
        let _: i64 = c.query(con).unwrap();
        i = end;
    }
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

#[test]
fn set_get_and_friends() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]), 2);
    // One new field; the repeated one keeps its last value.
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "x", "c", "3", "c", "4"]),
        1
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "a"]).as_deref(),
        Some("x")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "c"]).as_deref(),
        Some("4")
    );
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "h", "nosuch"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", "nosuch", "a"]), None);
    // Names are case-insensitive, fields are not.
    assert_eq!(q::<i64>(&mut c, &["hset", "h", "A", "upper"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]), 4);
    // A packed hash lists in insertion order; an update keeps its place.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HKEYS", "h"]),
        strs(&["a", "b", "c", "A"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HVALS", "h"]),
        strs(&["x", "2", "4", "upper"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "h"]),
        strs(&["a", "x", "b", "2", "c", "4", "A", "upper"])
    );
    let as_map: HashMap<String, String> = q(&mut c, &["HGETALL", "h"]);
    assert_eq!(as_map.len(), 4);

    assert_eq!(
        q::<String>(&mut c, &["HMSET", "h", "d", "5", "a", "y"]),
        "OK"
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "h", "a", "nosuch", "d", "a"]),
        vec![Some("y".into()), None, Some("5".into()), Some("y".into())]
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "nosuch", "a", "b"]),
        vec![None, None]
    );

    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "a", "zzz"]), 0);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "a"]).as_deref(),
        Some("y")
    );
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "h", "e", "6"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HSETNX", "fresh", "f", "v"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "fresh"]), 1);

    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "nosuch"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "nosuch", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "A"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "nosuch"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "nosuch", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "nosuch"]), 0);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HKEYS", "nosuch"]),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HVALS", "nosuch"]),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "nosuch"]),
        Vec::<String>::new()
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");
}

#[test]
fn binary_and_empty_fields_and_values() {
    let (_s, mut c) = server();
    let f: &[u8] = b"f\x00\r\n\xff";
    let v: &[u8] = b"v\x00\r\nbin\xfe";
    let n: i64 = cmd(&[b"HSET", b"h", f, v, b"", b"empty-field", b"ev", b""])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
    let got: Option<Vec<u8>> = cmd(&[b"HGET", b"h", f]).query(&mut c).unwrap();
    assert_eq!(got.as_deref(), Some(v));
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", ""]).as_deref(),
        Some("empty-field")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "ev"]).as_deref(),
        Some("")
    );
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", "h", "ev"]), 0);
    let len: i64 = cmd(&[b"HSTRLEN", b"h", f]).query(&mut c).unwrap();
    assert_eq!(len, v.len() as i64);
    let all: Vec<Vec<u8>> = q(&mut c, &["HGETALL", "h"]);
    assert_eq!(
        all,
        vec![
            f.to_vec(),
            v.to_vec(),
            vec![],
            b"empty-field".to_vec(),
            b"ev".to_vec(),
            vec![]
        ]
    );
    let deleted: i64 = cmd(&[b"HDEL", b"h", f, b""]).query(&mut c).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "h"]), strs(&["ev"]));
}

#[test]
fn arity_errors() {
    let (_s, mut c) = server();
    // Odd pair counts are found by the command, with its own name.
    assert_eq!(
        err(&mut c, &["HSET", "h", "f", "v", "g"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err(&mut c, &["HMSET", "h", "f", "v", "g"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    // The rest by the dispatcher, from Redis's arities.
    for (args, name) in [
        (&["HSET", "h", "f"][..], "hset"),
        (&["HSET", "h"], "hset"),
        (&["HMSET", "h", "f"], "hmset"),
        (&["HSETNX", "h", "f"], "hsetnx"),
        (&["HSETNX", "h", "f", "v", "x"], "hsetnx"),
        (&["HGET", "h"], "hget"),
        (&["HGET", "h", "a", "b"], "hget"),
        (&["HMGET", "h"], "hmget"),
        (&["HGETALL", "a", "b"], "hgetall"),
        (&["HDEL", "h"], "hdel"),
        (&["HLEN"], "hlen"),
        (&["HEXISTS", "h"], "hexists"),
        (&["HKEYS"], "hkeys"),
        (&["HVALS", "a", "b"], "hvals"),
        (&["HINCRBY", "h", "f"], "hincrby"),
        (&["HINCRBYFLOAT", "h", "f", "1", "2"], "hincrbyfloat"),
        (&["HSTRLEN", "h"], "hstrlen"),
        (&["HRANDFIELD"], "hrandfield"),
        (&["HSCAN", "h"], "hscan"),
    ] {
        assert_eq!(
            err(&mut c, args),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{args:?}"
        );
    }
}

#[test]
fn hdel_of_the_last_field_deletes_the_key() {
    let (_s, mut c) = server();
    q::<i64>(
        &mut c,
        &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"],
    );
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "b", "b", "nosuch"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nosuch", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "c", "d", "c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "none");
    // The name is free for another type now.
    assert_eq!(q::<String>(&mut c, &["SET", "h", "s"]), "OK");

    // Same for a hashtable-encoded hash (more than the default 512 fields).
    fill(&mut c, "big", 0, 600);
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    let mut del = redis::cmd("HDEL");
    del.arg("big");
    for i in 0..600 {
        del.arg(format!("f{i}"));
    }
    assert_eq!(del.query::<i64>(&mut c).unwrap(), 600);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0);
}

#[test]
fn hincrby() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "10"]), 11);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "-20"]), -9);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "n", "0"]), -9);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "n"]), "-9");
    q::<i64>(
        &mut c,
        &[
            "HSET",
            "h",
            "max",
            "9223372036854775807",
            "min",
            "-9223372036854775808",
        ],
    );
    let overflow = "ERR increment or decrement would overflow";
    assert_eq!(err(&mut c, &["HINCRBY", "h", "max", "1"]), overflow);
    assert_eq!(err(&mut c, &["HINCRBY", "h", "min", "-1"]), overflow);
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "min", "-9223372036854775808"]),
        overflow
    );
    assert_eq!(
        q::<i64>(&mut c, &["HINCRBY", "h", "max", "-9223372036854775808"]),
        -1
    );
    assert_eq!(
        q::<String>(&mut c, &["HGET", "h", "min"]),
        "-9223372036854775808"
    );
    for bad in ["abc", "1.5", "", "9223372036854775808", " 1", "+1", "01"] {
        assert_eq!(err(&mut c, &["HINCRBY", "h", "n", bad]), NOT_INT, "{bad:?}");
    }
    q::<i64>(
        &mut c,
        &[
            "HSET", "h", "s", "abc", "fl", "1.5", "sp", " 1", "e", "", "lz", "01", "plus", "+1",
        ],
    );
    for f in ["s", "fl", "sp", "e", "lz", "plus"] {
        assert_eq!(
            err(&mut c, &["HINCRBY", "h", f, "1"]),
            "ERR hash value is not an integer",
            "{f}"
        );
    }
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "lz"]), "01");
    // A new key is created with the field.
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "new", "f", "5"]), 5);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HGETALL", "new"]),
        strs(&["f", "5"])
    );
    // The increment is checked before the key's type.
    q::<String>(&mut c, &["SET", "str", "v"]);
    assert_eq!(err(&mut c, &["HINCRBY", "str", "f", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["HINCRBY", "str", "f", "1"]), WRONGTYPE);
    // A bad increment on a missing key creates nothing.
    assert_eq!(err(&mut c, &["HINCRBY", "ghost", "f", "x"]), NOT_INT);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "ghost"]), 0);
}

#[test]
fn hincrbyfloat() {
    let (_s, mut c) = server();
    let incr =
        |c: &mut Connection, f: &str, by: &str| -> String { q(c, &["HINCRBYFLOAT", "h", f, by]) };
    assert_eq!(incr(&mut c, "x", "1.5"), "1.5");
    assert_eq!(incr(&mut c, "x", "0.1"), "1.6");
    assert_eq!(incr(&mut c, "x", "-1.6"), "0");
    assert_eq!(incr(&mut c, "x", "1e3"), "1000");
    // Long double arithmetic, printed with 17 decimals like Redis.
    assert_eq!(incr(&mut c, "x", "3.0e-5"), "1000.00002999999999997");
    assert_eq!(incr(&mut c, "y", "0.1"), "0.1");
    assert_eq!(incr(&mut c, "y", "0.2"), "0.3");
    assert_eq!(incr(&mut c, "r", "0x10"), "16");
    assert_eq!(incr(&mut c, "r", ".5"), "16.5");
    assert_eq!(incr(&mut c, "z", "-0"), "0");
    assert_eq!(
        q::<String>(&mut c, &["HGET", "h", "x"]),
        "1000.00002999999999997"
    );
    // An integer field works too, and the result may be integral.
    q::<i64>(&mut c, &["HSET", "h", "i", "5"]);
    assert_eq!(incr(&mut c, "i", "1.5"), "6.5");
    assert_eq!(incr(&mut c, "i", "0.5"), "7");
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "h", "i", "1"]), 8);
    assert_eq!(
        err(&mut c, &["HINCRBY", "h", "x", "1"]),
        "ERR hash value is not an integer"
    );

    // Increment checks come first, in Redis's order and texts.
    let invalid = "ERR value is not a valid float";
    let nan_inf = "ERR value is NaN or Infinity";
    for bad in ["abc", "", " 1", "1 ", "nan", "1e5000"] {
        assert_eq!(
            err(&mut c, &["HINCRBYFLOAT", "h", "x", bad]),
            invalid,
            "{bad:?}"
        );
    }
    for inf in ["inf", "-inf", "+inf", "infinity", "-Infinity"] {
        assert_eq!(
            err(&mut c, &["HINCRBYFLOAT", "h", "x", inf]),
            nan_inf,
            "{inf:?}"
        );
    }
    q::<String>(&mut c, &["SET", "str", "v"]);
    assert_eq!(err(&mut c, &["HINCRBYFLOAT", "str", "f", "inf"]), nan_inf);
    assert_eq!(err(&mut c, &["HINCRBYFLOAT", "str", "f", "x"]), invalid);
    assert_eq!(err(&mut c, &["HINCRBYFLOAT", "str", "f", "1"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["HINCRBYFLOAT", "ghost", "f", "nan"]), invalid);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "ghost"]), 0);

    // Then the stored value, then the sum.
    q::<i64>(
        &mut c,
        &["HSET", "h", "s", "abc", "sp", "1 ", "big", "1e4932"],
    );
    for f in ["s", "sp"] {
        assert_eq!(
            err(&mut c, &["HINCRBYFLOAT", "h", f, "1"]),
            "ERR hash value is not a float"
        );
    }
    assert_eq!(
        err(&mut c, &["HINCRBYFLOAT", "h", "big", "1e4932"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "big"]), "1e4932");
}

#[test]
fn wrong_type() {
    let (_s, mut c) = server();
    q::<String>(&mut c, &["SET", "str", "v"]);
    for args in [
        &["HSET", "str", "f", "v"][..],
        &["HSETNX", "str", "f", "v"],
        &["HGET", "str", "f"],
        &["HMSET", "str", "f", "v"],
        &["HMGET", "str", "f"],
        &["HGETALL", "str"],
        &["HDEL", "str", "f"],
        &["HLEN", "str"],
        &["HEXISTS", "str", "f"],
        &["HKEYS", "str"],
        &["HVALS", "str"],
        &["HINCRBY", "str", "f", "1"],
        &["HINCRBYFLOAT", "str", "f", "1"],
        &["HSTRLEN", "str", "f"],
        &["HRANDFIELD", "str"],
        &["HRANDFIELD", "str", "2"],
        &["HRANDFIELD", "str", "-2", "WITHVALUES"],
        &["HSCAN", "str", "0"],
        &["HSCAN", "str", "0", "MATCH", "*", "COUNT", "5"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    assert_eq!(q::<String>(&mut c, &["GET", "str"]), "v");
    // And the other way round.
    q::<i64>(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["GET", "h"]), WRONGTYPE);
}

#[test]
fn hrandfield() {
    let (_s, mut c) = server();
    // Missing key: null without a count, an empty array with one.
    assert_eq!(q::<Option<String>>(&mut c, &["HRANDFIELD", "nosuch"]), None);
    for count in ["5", "-5", "0"] {
        assert_eq!(
            q::<Vec<String>>(&mut c, &["HRANDFIELD", "nosuch", count]),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "nosuch", "5", "WITHVALUES"]),
        Vec::<String>::new()
    );

    // Both encodings: packed (5 fields) and hashtable (600).
    q::<i64>(
        &mut c,
        &[
            "HSET", "small", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5",
        ],
    );
    fill(&mut c, "big", 0, 600);
    assert_eq!(encoding(&mut c, "small"), "listpack");
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    for (key, size) in [("small", 5usize), ("big", 600)] {
        let all: HashMap<String, String> = q(&mut c, &["HGETALL", key]);
        let one: String = q(&mut c, &["HRANDFIELD", key]);
        assert!(all.contains_key(&one));
        assert_eq!(
            q::<Vec<String>>(&mut c, &["HRANDFIELD", key, "0"]),
            Vec::<String>::new()
        );
        assert_eq!(
            q::<Vec<String>>(&mut c, &["HRANDFIELD", key, "0", "WITHVALUES"]),
            Vec::<String>::new()
        );
        // Positive count: distinct fields, at most the size.
        for count in [1, 2, 3, size - 1, size, size + 1, 10 * size] {
            let got: Vec<String> = q(&mut c, &["HRANDFIELD", key, &count.to_string()]);
            assert_eq!(got.len(), count.min(size), "{key} {count}");
            let set: HashSet<&String> = got.iter().collect();
            assert_eq!(set.len(), got.len(), "{key} {count}: repeats");
            assert!(got.iter().all(|f| all.contains_key(f)));
            let with: Vec<String> = q(
                &mut c,
                &["HRANDFIELD", key, &count.to_string(), "WITHVALUES"],
            );
            let with = pairs(with);
            assert_eq!(with.len(), count.min(size));
            assert!(with.iter().all(|(f, v)| all.get(f) == Some(v)));
            let set: HashSet<&String> = with.iter().map(|(f, _)| f).collect();
            assert_eq!(set.len(), with.len());
        }
        // count >= size returns everything.
        let every: Vec<String> = q(&mut c, &["HRANDFIELD", key, "9223372036854775807"]);
        assert_eq!(every.len(), size);
        // Negative count: exactly |count| picks, repeats allowed.
        let many: Vec<String> = q(&mut c, &["HRANDFIELD", key, "-1000"]);
        assert_eq!(many.len(), 1000);
        assert!(many.iter().all(|f| all.contains_key(f)));
        let distinct: HashSet<&String> = many.iter().collect();
        assert!(distinct.len() > 1 && distinct.len() <= size);
        let with = pairs(q(&mut c, &["HRANDFIELD", key, "-7", "WITHVALUES"]));
        assert_eq!(with.len(), 7);
        assert!(with.iter().all(|(f, v)| all.get(f) == Some(v)));
    }
    // With enough draws every field of the small hash shows up.
    let mut seen = HashSet::new();
    for _ in 0..200 {
        seen.insert(q::<String>(&mut c, &["HRANDFIELD", "small"]));
    }
    assert_eq!(seen.len(), 5);
    // A one-field hash has forced answers.
    q::<i64>(&mut c, &["HSET", "one", "f", "v"]);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "one", "-3"]),
        strs(&["f", "f", "f"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["HRANDFIELD", "one", "-2", "WITHVALUES"]),
        strs(&["f", "v", "f", "v"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["hrandfield", "one", "2", "withvalues"]),
        strs(&["f", "v"])
    );
}

#[test]
fn hrandfield_errors() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    q::<String>(&mut c, &["SET", "str", "v"]);
    assert_eq!(err(&mut c, &["HRANDFIELD", "h", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["HRANDFIELD", "h", "1.5"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "9223372036854775808"]),
        NOT_INT
    );
    assert_eq!(err(&mut c, &["HRANDFIELD", "h", "WITHVALUES"]), NOT_INT);
    let range = "ERR value is out of range, value must between -9223372036854775807 and \
                 9223372036854775807";
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        range
    );
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "nosuch", "-9223372036854775808"]),
        range
    );
    // WITHVALUES halves the range, so that 2 * count fits.
    let half = "ERR value is out of range";
    for n in [
        "-9223372036854775807",
        "-4611686018427387904",
        "4611686018427387904",
    ] {
        assert_eq!(
            err(&mut c, &["HRANDFIELD", "h", n, "WITHVALUES"]),
            half,
            "{n}"
        );
    }
    let edge: Vec<String> = q(
        &mut c,
        &["HRANDFIELD", "h", "4611686018427387903", "WITHVALUES"],
    );
    assert_eq!(edge.len(), 6);
    assert_eq!(err(&mut c, &["HRANDFIELD", "h", "1", "FOO"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["HRANDFIELD", "h", "1", "WITHVALUES", "FOO"]),
        SYNTAX
    );
    // The count is checked before the key: no WRONGTYPE yet, no empty
    // array for a missing key.
    assert_eq!(err(&mut c, &["HRANDFIELD", "nosuch", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["HRANDFIELD", "nosuch", "1", "FOO"]), SYNTAX);
    assert_eq!(err(&mut c, &["HRANDFIELD", "str", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["HRANDFIELD", "str", "1"]), WRONGTYPE);
}

#[test]
fn hscan_packed_and_options() {
    let (_s, mut c) = server();
    q::<i64>(
        &mut c,
        &[
            "HSET", "h", "a", "1", "b", "2", "c", "3", "", "empty", "sp ace", "v w",
        ],
    );
    let everything = strs(&["a", "1", "b", "2", "c", "3", "", "empty", "sp ace", "v w"]);
    // A packed hash comes back whole, in order, with cursor 0, whatever
    // the cursor and COUNT say.
    for args in [
        &["h", "0"][..],
        &["h", "0", "COUNT", "1"],
        &["h", "12345", "COUNT", "1"],
        &["h", "0", "MATCH", "*"],
        &["h", "0", "match", "*", "count", "2"],
    ] {
        assert_eq!(
            hscan(&mut c, args),
            ("0".into(), everything.clone()),
            "{args:?}"
        );
    }
    // MATCH looks at fields only.
    assert_eq!(
        hscan(&mut c, &["h", "0", "MATCH", "a"]).1,
        strs(&["a", "1"])
    );
    assert_eq!(
        hscan(&mut c, &["h", "0", "MATCH", "[bc]"]).1,
        strs(&["b", "2", "c", "3"])
    );
    assert_eq!(
        hscan(&mut c, &["h", "0", "MATCH", "1"]).1,
        Vec::<String>::new()
    );
    assert_eq!(
        hscan(&mut c, &["h", "0", "MATCH", "sp*"]).1,
        strs(&["sp ace", "v w"])
    );
    assert_eq!(
        hscan(&mut c, &["h", "0", "MATCH", ""]).1,
        strs(&["", "empty"])
    );
    // The last MATCH / COUNT wins.
    assert_eq!(
        hscan(&mut c, &["h", "0", "MATCH", "a", "MATCH", "b"]).1,
        strs(&["b", "2"])
    );
    // Cursors as strtoul reads them.
    for cur in ["", "00", "+0", "-1", "18446744073709551615", "7"] {
        assert_eq!(hscan(&mut c, &["h", cur]).0, "0", "{cur:?}");
    }
    let bad_cursor = "ERR invalid cursor";
    for cur in [
        "abc",
        "1.5",
        "-abc",
        " 0",
        "0 ",
        "18446744073709551616",
        "-",
        "0x1",
    ] {
        assert_eq!(err(&mut c, &["HSCAN", "h", cur]), bad_cursor, "{cur:?}");
    }
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "COUNT", "-1"]), SYNTAX);
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "COUNT", "abc"]), NOT_INT);
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "COUNT"]), SYNTAX);
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "MATCH"]), SYNTAX);
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "TYPE", "string"]), SYNTAX);
    // NOVALUES came with Redis 7.4.
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "NOVALUES"]), SYNTAX);
    assert_eq!(err(&mut c, &["HSCAN", "h", "0", "FOO"]), SYNTAX);
    // A missing key: the cursor is still checked, the options are not.
    assert_eq!(err(&mut c, &["HSCAN", "nosuch", "abc"]), bad_cursor);
    assert_eq!(hscan(&mut c, &["nosuch", "0"]), ("0".into(), vec![]));
    assert_eq!(
        hscan(&mut c, &["nosuch", "0", "COUNT", "0", "FOO"]),
        ("0".into(), vec![])
    );
    q::<String>(&mut c, &["SET", "str", "v"]);
    assert_eq!(err(&mut c, &["HSCAN", "str", "abc"]), bad_cursor);
}

/// Runs a full HSCAN with `extra` options, returning every pair seen and
/// the number of calls it took.
fn scan_all(c: &mut Connection, key: &str, extra: &[&str]) -> (Vec<(String, String)>, usize) {
    let mut cursor = "0".to_string();
    let mut out = Vec::new();
    let mut calls = 0;
    loop {
        let mut args = vec![key, cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, flat) = hscan(c, &args);
        out.extend(pairs(flat));
        calls += 1;
        cursor = next;
        if cursor == "0" {
            return (out, calls);
        }
        assert!(calls < 100_000, "HSCAN does not terminate");
    }
}

#[test]
fn hscan_hashtable() {
    let (_s, mut c) = server();
    fill(&mut c, "big", 0, 1000);
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    let want: HashSet<(String, String)> = (0..1000)
        .map(|i| (format!("f{i}"), format!("v{i}")))
        .collect();
    for count in ["1", "10", "99", "1000", "5000"] {
        let (got, calls) = scan_all(&mut c, "big", &["COUNT", count]);
        let set: HashSet<(String, String)> = got.iter().cloned().collect();
        assert_eq!(set.len(), got.len(), "COUNT {count}: duplicates");
        assert_eq!(set, want, "COUNT {count}");
        let n: usize = count.parse().unwrap();
        if n < 1000 {
            assert!(calls > 1, "COUNT {count} took one call");
        }
    }
    let (got, _) = scan_all(&mut c, "big", &[]);
    assert_eq!(got.len(), 1000);
    // MATCH on a hashtable: exactly the matching fields, over the scan.
    let (got, _) = scan_all(&mut c, "big", &["MATCH", "f1*", "COUNT", "7"]);
    let fields: HashSet<String> = got.into_iter().map(|(f, _)| f).collect();
    let want: HashSet<String> = (0..1000)
        .map(|i| format!("f{i}"))
        .filter(|f| f.starts_with("f1"))
        .collect();
    assert_eq!(fields, want);
    let (got, _) = scan_all(&mut c, "big", &["MATCH", "nosuch", "COUNT", "50"]);
    assert!(got.is_empty());
    // Resuming from a cursor far beyond every field ends the scan.
    assert_eq!(hscan(&mut c, &["big", "-1"]), ("0".into(), vec![]));
}

#[test]
fn hscan_while_fields_are_added() {
    let (s, mut c) = server();
    let mut writer = support::redis_client(s.port);
    fill(&mut c, "h", 0, 2000);
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut next_new = 2000;
    let mut calls = 0;
    loop {
        let (next, flat) = hscan(&mut c, &["h", &cursor, "COUNT", "20"]);
        for (f, _) in pairs(flat) {
            seen.insert(f);
        }
        // Between steps another client adds fields (and churns some of
        // its own), growing the table through several resizes.
        fill(&mut writer, "h", next_new, 50);
        let _: i64 = redis::cmd("HDEL")
            .arg("h")
            .arg(format!("f{}", next_new + 10))
            .query(&mut writer)
            .unwrap();
        next_new += 50;
        calls += 1;
        cursor = next;
        if cursor == "0" {
            break;
        }
        assert!(calls < 10_000, "HSCAN does not terminate");
    }
    for i in 0..2000 {
        assert!(
            seen.contains(&format!("f{i}")),
            "f{i} present throughout but missed"
        );
    }
    assert!(q::<i64>(&mut c, &["HLEN", "h"]) > 4000);
}

#[test]
fn encodings_follow_config_set() {
    let (_s, mut c) = server();
    assert_eq!(
        q::<String>(&mut c, &["CONFIG", "SET", "hash-max-listpack-entries", "4"]),
        "OK"
    );
    assert_eq!(
        q::<String>(&mut c, &["CONFIG", "SET", "hash-max-listpack-value", "8"]),
        "OK"
    );
    check_encoding_rules(&mut c);
}

#[test]
fn encodings_follow_startup_options() {
    let s = start_cairn(&[
        "--hash-max-listpack-entries",
        "4",
        "--hash-max-listpack-value",
        "8",
    ]);
    let mut c = support::redis_client(s.port);
    check_encoding_rules(&mut c);
}

/// Redis 7.0's conversion points with entries = 4 and value = 8 (each one
/// checked against redis-server 7.0.15 with the same limits).
fn check_encoding_rules(c: &mut Connection) {
    // The entry limit: 4 stay packed, the 5th converts, deleting does not
    // convert back.
    q::<i64>(c, &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"]);
    assert_eq!(encoding(c, "h"), "listpack");
    q::<i64>(c, &["HSET", "h", "a", "updated"]);
    assert_eq!(encoding(c, "h"), "listpack");
    q::<i64>(c, &["HSET", "h", "e", "5"]);
    assert_eq!(encoding(c, "h"), "hashtable");
    q::<i64>(c, &["HDEL", "h", "a", "b", "c", "d"]);
    assert_eq!(encoding(c, "h"), "hashtable");
    assert_eq!(q::<Vec<String>>(c, &["HGETALL", "h"]), strs(&["e", "5"]));
    // Once the key is gone, a new hash starts packed again.
    q::<i64>(c, &["HDEL", "h", "e"]);
    q::<i64>(c, &["HSET", "h", "a", "1"]);
    assert_eq!(encoding(c, "h"), "listpack");

    // The value limit counts bytes of fields and of values: 8 fits, 9 not.
    q::<i64>(c, &["HSET", "v", "f", "12345678", "12345678", "v"]);
    assert_eq!(encoding(c, "v"), "listpack");
    q::<i64>(c, &["HSET", "v", "f", "123456789"]);
    assert_eq!(encoding(c, "v"), "hashtable");
    q::<i64>(c, &["HSET", "k", "123456789", "v"]);
    assert_eq!(encoding(c, "k"), "hashtable");
    // HMSET converts on any long argument of the command.
    q::<String>(c, &["HMSET", "m", "a", "1", "b", "123456789"]);
    assert_eq!(encoding(c, "m"), "hashtable");
    assert_eq!(
        q::<Vec<String>>(c, &["HMGET", "m", "a", "b"]),
        strs(&["1", "123456789"])
    );

    // HSETNX of an existing field never converts; of a new one it does.
    q::<i64>(c, &["HSET", "nx", "f", "1"]);
    assert_eq!(q::<i64>(c, &["HSETNX", "nx", "f", "123456789"]), 0);
    assert_eq!(encoding(c, "nx"), "listpack");
    assert_eq!(q::<i64>(c, &["HSETNX", "nx", "g", "123456789"]), 1);
    assert_eq!(encoding(c, "nx"), "hashtable");

    // HINCRBY / HINCRBYFLOAT results count like any value.
    q::<i64>(c, &["HINCRBY", "i", "n", "9999999"]);
    assert_eq!(q::<i64>(c, &["HINCRBY", "i", "n", "1"]), 10_000_000);
    assert_eq!(encoding(c, "i"), "listpack");
    assert_eq!(q::<i64>(c, &["HINCRBY", "i", "n", "90000000"]), 100_000_000);
    assert_eq!(encoding(c, "i"), "hashtable");
    q::<String>(c, &["HINCRBYFLOAT", "fl", "n", "1.5"]);
    assert_eq!(
        q::<String>(c, &["HINCRBYFLOAT", "fl", "n", "0.00001"]),
        "1.50001"
    );
    assert_eq!(encoding(c, "fl"), "listpack");
    assert_eq!(
        q::<String>(c, &["HINCRBYFLOAT", "fl", "n", "0.0000001"]),
        "1.5000101"
    );
    assert_eq!(encoding(c, "fl"), "hashtable");

    // A hashtable keeps answering like a packed hash, order aside.
    let all: HashMap<String, String> = q(c, &["HGETALL", "v"]);
    assert_eq!(all.get("f").map(String::as_str), Some("123456789"));
    assert_eq!(all.get("12345678").map(String::as_str), Some("v"));
}

#[test]
fn ten_thousand_fields() {
    let (_s, mut c) = server();
    fill(&mut c, "big", 0, 10_000);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 10_000);
    assert_eq!(encoding(&mut c, "big"), "hashtable");
    let all: HashMap<String, String> = q(&mut c, &["HGETALL", "big"]);
    assert_eq!(all.len(), 10_000);
    assert!((0..10_000).all(|i| all.get(&format!("f{i}")) == Some(&format!("v{i}"))));
    let keys: Vec<String> = q(&mut c, &["HKEYS", "big"]);
    let vals: Vec<String> = q(&mut c, &["HVALS", "big"]);
    assert_eq!(keys.len(), 10_000);
    assert_eq!(
        sorted(keys.iter().map(|k| k.replace('f', "v")).collect()),
        sorted(vals)
    );
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["HMGET", "big", "f0", "f9999", "f10000"]),
        vec![Some("v0".into()), Some("v9999".into()), None]
    );
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", "big", "counter", "7"]), 7);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 10_001);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "big", "counter"]), 1);
    let (got, _) = scan_all(&mut c, "big", &["COUNT", "100"]);
    assert_eq!(got.into_iter().collect::<HashMap<_, _>>(), all);
    let picks: Vec<String> = q(&mut c, &["HRANDFIELD", "big", "-20000"]);
    assert_eq!(picks.len(), 20_000);
    let distinct: Vec<String> = q(&mut c, &["HRANDFIELD", "big", "5000"]);
    assert_eq!(distinct.iter().collect::<HashSet<_>>().len(), 5000);
    let whole: Vec<String> = q(&mut c, &["HRANDFIELD", "big", "20000"]);
    assert_eq!(whole.len(), 10_000);
    // Deleting every field deletes the key.
    for chunk in (0..10_000).collect::<Vec<_>>().chunks(1000) {
        let mut del = redis::cmd("HDEL");
        del.arg("big");
        for i in chunk {
            del.arg(format!("f{i}"));
        }
        assert_eq!(del.query::<i64>(&mut c).unwrap(), 1000);
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0);
}

#[test]
fn resp3_replies_through_the_client() {
    let s = start_cairn(&[]);
    let mut c = support::redis_client_resp3(s.port);
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let v: Value = q(&mut c, &["HGETALL", "h"]);
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(
        v,
        Value::Map(vec![(bulk("a"), bulk("1")), (bulk("b"), bulk("2"))])
    );
    assert_eq!(
        q::<Value>(&mut c, &["HGETALL", "nosuch"]),
        Value::Map(vec![])
    );
    assert_eq!(q::<Value>(&mut c, &["HGET", "h", "nosuch"]), Value::Nil);
    assert_eq!(
        q::<Value>(&mut c, &["HMGET", "h", "a", "nosuch"]),
        Value::Array(vec![bulk("1"), Value::Nil])
    );
    assert_eq!(q::<Value>(&mut c, &["HRANDFIELD", "nosuch"]), Value::Nil);
    assert_eq!(
        q::<Value>(&mut c, &["HRANDFIELD", "nosuch", "3"]),
        Value::Array(vec![])
    );
    // WITHVALUES: an array of [field, value] pairs in RESP3.
    let v: Value = q(&mut c, &["HRANDFIELD", "h", "5", "WITHVALUES"]);
    let Value::Array(items) = v else {
        panic!("array expected, got {v:?}")
    };
    assert_eq!(items.len(), 2);
    let mut got: Vec<(Value, Value)> = items
        .into_iter()
        .map(|p| match p {
            Value::Array(mut kv) if kv.len() == 2 => {
                let v = kv.pop().unwrap();
                (kv.pop().unwrap(), v)
            }
            other => panic!("pair expected, got {other:?}"),
        })
        .collect();
    got.sort_by_key(|(f, _)| format!("{f:?}"));
    assert_eq!(got, vec![(bulk("a"), bulk("1")), (bulk("b"), bulk("2"))]);
    let v: Value = q(&mut c, &["HRANDFIELD", "h", "-3", "WITHVALUES"]);
    let Value::Array(items) = v else {
        panic!("array expected")
    };
    assert_eq!(items.len(), 3);
    assert!(items
        .iter()
        .all(|p| matches!(p, Value::Array(kv) if kv.len() == 2)));
    // HINCRBYFLOAT is a bulk string, not a double, in RESP3 too.
    assert_eq!(
        q::<Value>(&mut c, &["HINCRBYFLOAT", "h", "x", "2.5"]),
        bulk("2.5")
    );
}

#[test]
fn resp3_exact_bytes() {
    let s = start_cairn(&[]);
    let mut r = s.conn();
    r.cmd(&["HELLO", "3"]);
    assert_eq!(r.cmd(&["HSET", "h", "f", "v"]), b":1\r\n");
    assert_eq!(r.cmd(&["HGETALL", "h"]), b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    assert_eq!(r.cmd(&["HGETALL", "nosuch"]), b"%0\r\n");
    assert_eq!(r.cmd(&["HKEYS", "nosuch"]), b"*0\r\n");
    assert_eq!(r.cmd(&["HGET", "h", "x"]), b"_\r\n");
    assert_eq!(r.cmd(&["HMGET", "h", "x", "f"]), b"*2\r\n_\r\n$1\r\nv\r\n");
    assert_eq!(r.cmd(&["HRANDFIELD", "nosuch"]), b"_\r\n");
    assert_eq!(r.cmd(&["HRANDFIELD", "nosuch", "1"]), b"*0\r\n");
    assert_eq!(
        r.cmd(&["HRANDFIELD", "h", "1", "WITHVALUES"]),
        b"*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        r.cmd(&["HRANDFIELD", "h", "-2", "WITHVALUES"]),
        b"*2\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(r.cmd(&["HRANDFIELD", "h", "0", "WITHVALUES"]), b"*0\r\n");
    // HSCAN stays a plain array of arrays.
    assert_eq!(
        r.cmd(&["HSCAN", "h", "0"]),
        b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(r.cmd(&["HSCAN", "nosuch", "0"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(r.cmd(&["HEXISTS", "h", "f"]), b":1\r\n");
    assert_eq!(r.cmd(&["HINCRBYFLOAT", "h", "n", "1.5"]), b"$3\r\n1.5\r\n");

    // The same in RESP2.
    let mut r2 = RawConn::connect(s.port);
    assert_eq!(
        r2.cmd(&["HGETALL", "h"]),
        b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nn\r\n$3\r\n1.5\r\n"
    );
    assert_eq!(r2.cmd(&["HGETALL", "nosuch"]), b"*0\r\n");
    assert_eq!(r2.cmd(&["HGET", "h", "x"]), b"$-1\r\n");
    assert_eq!(r2.cmd(&["HRANDFIELD", "nosuch"]), b"$-1\r\n");
    r2.cmd(&["HSET", "one", "f", "v"]);
    assert_eq!(
        r2.cmd(&["HRANDFIELD", "one", "-2", "WITHVALUES"]),
        b"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        r2.cmd(&["HSCAN", "one", "0"]),
        b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        r2.cmd(&["HSET", "h", "odd"]),
        b"-ERR wrong number of arguments for 'hset' command\r\n"
    );
}

/// Issue 5: Cairn's own default `hash-max-listpack-value` (1024) keeps a
/// YCSB record (ten 100-byte values) packed, and the compressed buffer it is
/// stored in reads and writes back exactly through every hash command.
#[test]
fn ycsb_records_stay_packed_and_compressed_round_trips() {
    let (_s, mut c) = server();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "hash-max-listpack-value"]),
        strs(&["hash-max-listpack-value", "1024"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "zset-max-listpack-value"]),
        strs(&["zset-max-listpack-value", "1024"])
    );
    let mut seed = 3u64;
    let mut value = || -> String {
        (0..100)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (b' ' + (seed >> 58) as u8) as char
            })
            .collect()
    };
    let rec: Vec<(String, String)> = (0..10).map(|i| (format!("field{i}"), value())).collect();
    let mut args = vec!["HSET".to_string(), "user1234567890123456789".to_string()];
    for (f, v) in &rec {
        args.push(f.clone());
        args.push(v.clone());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(q::<i64>(&mut c, &args), 10);
    let key = "user1234567890123456789";
    assert_eq!(encoding(&mut c, key), "listpack");
    assert_eq!(pairs(q(&mut c, &["HGETALL", key])), rec);
    assert_eq!(q::<String>(&mut c, &["HGET", key, "field4"]), rec[4].1);
    assert_eq!(q::<i64>(&mut c, &["HSTRLEN", key, "field9"]), 100);
    // Writes on the compressed record: update, add, delete, increment.
    assert_eq!(q::<i64>(&mut c, &["HSET", key, "field4", "new"]), 0);
    assert_eq!(q::<i64>(&mut c, &["HINCRBY", key, "counter", "5"]), 5);
    assert_eq!(q::<i64>(&mut c, &["HDEL", key, "field0", "nope"]), 1);
    let mut want: Vec<(String, String)> = rec[1..].to_vec();
    want[3].1 = "new".into();
    want.push(("counter".into(), "5".into()));
    assert_eq!(pairs(q(&mut c, &["HGETALL", key])), want);
    assert_eq!(q::<i64>(&mut c, &["HLEN", key]), 10);
    // A value over the limit still converts, as in Redis.
    let long = "x".repeat(1025);
    q::<i64>(&mut c, &["HSET", key, "big", &long]);
    assert_eq!(encoding(&mut c, key), "hashtable");
    assert_eq!(q::<String>(&mut c, &["HGET", key, "field1"]), rec[1].1);
    assert_eq!(q::<String>(&mut c, &["HGET", key, "big"]), long);
}
