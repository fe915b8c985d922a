//! The string family end to end (Redis 7.0 `t_string.c` behaviour): every
//! command, option and error of GET, SET, SETNX, SETEX, PSETEX, GETSET,
//! GETDEL, GETEX, MGET, MSET, MSETNX, APPEND, STRLEN, GETRANGE, SUBSTR,
//! SETRANGE, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT and LCS, driven
//! through the `redis` crate, with raw bytes where the exact reply shape
//! matters (LCS in RESP2 and RESP3). Expiry is tested by moving the
//! server's clock with `DEBUG JUMP-CLOCK` instead of sleeping.

mod support;

use redis::{Connection, Value};
use support::{cmd, err, q, server, start_cairn};

fn get(con: &mut Connection, key: &str) -> Option<Vec<u8>> {
    q(con, &["GET", key])
}

fn s(v: &str) -> Option<Vec<u8>> {
    Some(v.as_bytes().to_vec())
}

fn encoding(con: &mut Connection, key: &str) -> String {
    q(con, &["OBJECT", "ENCODING", key])
}

fn jump(con: &mut Connection, ms: i64) {
    let _: () = q(con, &["DEBUG", "JUMP-CLOCK", &ms.to_string()]);
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

#[test]
fn get_and_set_basics() {
    let (_s, mut c) = server();
    assert_eq!(get(&mut c, "missing"), None);
    let ok: String = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(ok, "OK");
    assert_eq!(get(&mut c, "k"), s("v"));
    let bin: &[u8] = b"a\x00b\r\nc\xff";
    let _: () = cmd(&[b"SET", b"bin", bin]).query(&mut c).unwrap();
    let back: Vec<u8> = cmd(&[b"GET", b"bin"]).query(&mut c).unwrap();
    assert_eq!(back, bin);
    let _: () = q(&mut c, &["SET", "", ""]);
    assert_eq!(get(&mut c, ""), s(""));
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["GET", "h"]), WRONGTYPE);
    assert_eq!(
        err(&mut c, &["GET", "a", "b"]),
        "ERR wrong number of arguments for 'get' command"
    );
    // Plain SET replaces a value of another type.
    let _: () = q(&mut c, &["SET", "h", "v"]);
    assert_eq!(get(&mut c, "h"), s("v"));
}

#[test]
fn set_encodings() {
    let (_s, mut c) = server();
    let long = "x".repeat(45);
    let cases = [
        ("12345", "int"),
        ("-1", "int"),
        ("012", "embstr"),
        ("1.5", "embstr"),
        (&long[..44], "embstr"),
        (&long[..], "raw"),
    ];
    for (v, enc) in cases {
        let _: () = q(&mut c, &["SET", "k", v]);
        assert_eq!(encoding(&mut c, "k"), enc, "{v}");
    }
}

#[test]
fn set_nx_xx_get() {
    let (_s, mut c) = server();
    let r: Option<String> = q(&mut c, &["SET", "k", "v", "XX"]);
    assert_eq!(r, None);
    let r: Option<String> = q(&mut c, &["SET", "k", "v", "NX"]);
    assert_eq!(r.as_deref(), Some("OK"));
    let r: Option<String> = q(&mut c, &["SET", "k", "w", "NX"]);
    assert_eq!(r, None);
    let r: Option<String> = q(&mut c, &["SET", "k", "w", "xx"]);
    assert_eq!(r.as_deref(), Some("OK"));
    assert_eq!(get(&mut c, "k"), s("w"));
    // NX NX and XX XX are fine; NX with XX is not.
    let _: () = q(&mut c, &["SET", "k", "w", "XX", "XX"]);
    assert_eq!(err(&mut c, &["SET", "k", "v", "NX", "XX"]), SYNTAX);
    assert_eq!(err(&mut c, &["SET", "k", "v", "XX", "NX"]), SYNTAX);

    // GET returns the old value, also when NX/XX stops the write.
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["SET", "g", "1", "GET"]),
        None
    );
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["SET", "g", "2", "GET"]),
        s("1")
    );
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["SET", "g", "3", "NX", "GET"]),
        s("2")
    );
    assert_eq!(get(&mut c, "g"), s("2"));
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["SET", "none", "3", "XX", "GET"]),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["SET", "g", "4", "GET", "GET"]),
        s("2")
    );

    // SET .. GET on another type is WRONGTYPE, and nothing is written.
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["SET", "h", "v", "GET"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["SET", "h", "v", "XX", "GET"]), WRONGTYPE);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");
    // Syntax and time errors come before the type check.
    assert_eq!(err(&mut c, &["SET", "h", "v", "GET", "FOO"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SET", "h", "v", "GET", "EX", "0"]),
        "ERR invalid expire time in 'set' command"
    );
    // Options are case-insensitive and may come in any order.
    let _: () = q(&mut c, &["SET", "o", "v", "nx", "ex", "100"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "o"]), 100);
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["SET", "o", "w", "Get", "Xx", "Px", "5000"]),
        s("v")
    );
    assert!(q::<i64>(&mut c, &["PTTL", "o"]) <= 5000);
}

#[test]
fn set_expire_forms() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["SET", "k", "v", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 100);
    let _: () = q(&mut c, &["SET", "k", "v", "PX", "100000"]);
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    let _: () = q(&mut c, &["SET", "k", "v", "EXAT", "4000000000"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), 4_000_000_000);
    let _: () = q(&mut c, &["SET", "k", "v", "PXAT", "4000000000500"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), 4_000_000_000_500);
    // The same form may repeat (the last wins); two forms may not.
    let _: () = q(&mut c, &["SET", "k", "v", "EX", "10", "EX", "100"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 100);
    // KEEPTTL keeps it, a plain SET clears it.
    let _: () = q(&mut c, &["SET", "k", "w", "KEEPTTL"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 100);
    let _: () = q(&mut c, &["SET", "k", "w", "KEEPTTL", "KEEPTTL"]);
    let _: () = q(&mut c, &["SET", "k", "x"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    // PXAT at the largest i64 is accepted as given.
    let _: () = q(&mut c, &["SET", "k", "v", "PXAT", "9223372036854775807"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), i64::MAX);
    // A deadline in the past is accepted, and the key is gone.
    let _: () = q(&mut c, &["SET", "past", "v", "EXAT", "1"]);
    assert_eq!(get(&mut c, "past"), None);

    for bad in [
        &["SET", "k", "v", "EX", "10", "PX", "100"][..],
        &["SET", "k", "v", "EX", "10", "EXAT", "10"],
        &["SET", "k", "v", "PX", "10", "PXAT", "10"],
        &["SET", "k", "v", "KEEPTTL", "EX", "10"],
        &["SET", "k", "v", "EX", "10", "KEEPTTL"],
        &["SET", "k", "v", "PERSIST"],
        &["SET", "k", "v", "EX"],
        &["SET", "k", "v", "PXAT"],
        &["SET", "k", "v", "FOO"],
        &["SET", "k", "v", "extra"],
    ] {
        assert_eq!(err(&mut c, bad), SYNTAX, "{bad:?}");
    }
    for bad in [
        "abc",
        "1.5",
        "",
        "0x10",
        " 10",
        "+10",
        "010",
        "9223372036854775808",
    ] {
        assert_eq!(
            err(&mut c, &["SET", "k", "v", "EX", bad]),
            NOT_INT,
            "{bad:?}"
        );
    }
    let invalid = "ERR invalid expire time in 'set' command";
    for (opt, n) in [
        ("EX", "0"),
        ("EX", "-1"),
        ("PX", "0"),
        ("PX", "-100"),
        ("EXAT", "0"),
        ("PXAT", "-1"),
        ("EX", "9223372036854775807"),
        ("EX", "9223372036854775"),
        ("PX", "9223372036854775807"),
        ("EXAT", "9223372036854775807"),
        ("EX", "-9223372036854775808"),
    ] {
        assert_eq!(
            err(&mut c, &["SET", "k", "v", opt, n]),
            invalid,
            "{opt} {n}"
        );
    }
}

#[test]
fn setnx_setex_psetex() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "a"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "k", "b"]), 0);
    assert_eq!(get(&mut c, "k"), s("a"));

    let _: () = q(&mut c, &["SETEX", "se", "100", "v"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "se"]), 100);
    assert_eq!(get(&mut c, "se"), s("v"));
    let _: () = q(&mut c, &["PSETEX", "ps", "100000", "v"]);
    assert!(q::<i64>(&mut c, &["PTTL", "ps"]) > 99_000);
    for n in ["0", "-5", "9223372036854775807", "9223372036854775"] {
        assert_eq!(
            err(&mut c, &["SETEX", "se", n, "v"]),
            "ERR invalid expire time in 'setex' command"
        );
    }
    for n in ["0", "-1", "9223372036854775807"] {
        assert_eq!(
            err(&mut c, &["PSETEX", "ps", n, "v"]),
            "ERR invalid expire time in 'psetex' command"
        );
    }
    assert_eq!(err(&mut c, &["SETEX", "se", "1.5", "v"]), NOT_INT);
    assert_eq!(err(&mut c, &["PSETEX", "ps", "abc", "v"]), NOT_INT);
    // A failed SETEX leaves the old value alone.
    assert_eq!(get(&mut c, "se"), s("v"));
}

#[test]
fn getset_getdel() {
    let (_s, mut c) = server();
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETSET", "k", "a"]), None);
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETSET", "k", "b"]), s("a"));
    let _: () = q(&mut c, &["SETEX", "t", "100", "v"]);
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETSET", "t", "w"]), s("v"));
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);

    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETDEL", "k"]), s("b"));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETDEL", "k"]), None);

    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["GETSET", "h", "v"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GETDEL", "h"]), WRONGTYPE);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");
}

#[test]
fn getex_options() {
    let (_s, mut c) = server();
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETEX", "missing"]), None);
    // A missing key answers null even with a bad time argument.
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["GETEX", "missing", "EX", "abc"]),
        None
    );
    let _: () = q(&mut c, &["SET", "k", "v"]);
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GETEX", "k"]), s("v"));
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["GETEX", "k", "EX", "100"]),
        s("v")
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 100);
    let _: Vec<u8> = q(&mut c, &["GETEX", "k", "PX", "200000"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 200);
    let _: Vec<u8> = q(&mut c, &["GETEX", "k", "EXAT", "4000000000"]);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), 4_000_000_000);
    let _: Vec<u8> = q(&mut c, &["GETEX", "k", "PXAT", "4000000000123"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), 4_000_000_000_123);
    let _: Vec<u8> = q(&mut c, &["GETEX", "k", "PERSIST"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    let _: Vec<u8> = q(&mut c, &["getex", "k", "ex", "10", "ex", "100"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), 100);

    let invalid = "ERR invalid expire time in 'getex' command";
    for (opt, n) in [
        ("EX", "0"),
        ("EX", "-1"),
        ("PX", "0"),
        ("EXAT", "0"),
        ("PXAT", "-1"),
        ("EX", "9223372036854775807"),
        ("PX", "9223372036854775807"),
    ] {
        assert_eq!(err(&mut c, &["GETEX", "k", opt, n]), invalid, "{opt} {n}");
    }
    assert_eq!(err(&mut c, &["GETEX", "k", "EX", "1.5"]), NOT_INT);
    for bad in [
        &["GETEX", "k", "EX"][..],
        &["GETEX", "k", "EX", "10", "PX", "100"],
        &["GETEX", "k", "PERSIST", "EX", "10"],
        &["GETEX", "k", "EX", "10", "PERSIST"],
        &["GETEX", "k", "KEEPTTL"],
        &["GETEX", "k", "NX"],
        &["GETEX", "k", "GET"],
        &["GETEX", "k", "FOO"],
    ] {
        assert_eq!(err(&mut c, bad), SYNTAX, "{bad:?}");
    }
    let _: Vec<u8> = q(&mut c, &["GETEX", "k", "PERSIST", "PERSIST"]);
    // The failed calls left the TTL alone... until PERSIST above.
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);

    // PXAT at i64::MAX is stored; EXAT in the past deletes after replying.
    let _: Vec<u8> = q(&mut c, &["GETEX", "k", "PXAT", "9223372036854775807"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), i64::MAX);
    assert_eq!(
        q::<Option<Vec<u8>>>(&mut c, &["GETEX", "k", "EXAT", "1"]),
        s("v")
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);

    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["GETEX", "h"]), WRONGTYPE);
    // The type check comes before the time argument's checks.
    assert_eq!(err(&mut c, &["GETEX", "h", "EX", "abc"]), WRONGTYPE);
    // ...but after the syntax check.
    assert_eq!(err(&mut c, &["GETEX", "h", "FOO"]), SYNTAX);
}

#[test]
fn expiry_with_jump_clock() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["SET", "ex", "v", "EX", "10"]);
    let _: () = q(&mut c, &["SET", "px", "v", "PX", "10000"]);
    let _: () = q(&mut c, &["SETEX", "setex", "10", "v"]);
    let _: () = q(&mut c, &["PSETEX", "psetex", "10000", "v"]);
    let _: () = q(&mut c, &["SET", "getex", "v"]);
    let _: Vec<u8> = q(&mut c, &["GETEX", "getex", "EX", "10"]);
    let _: () = q(&mut c, &["SET", "keep", "v", "EX", "10"]);
    let _: () = q(&mut c, &["SET", "keep", "w", "KEEPTTL"]);
    let _: () = q(&mut c, &["SET", "long", "v", "EX", "30"]);
    let _: () = q(&mut c, &["SET", "incr", "1", "EX", "10"]);
    let _: i64 = q(&mut c, &["INCR", "incr"]);
    let _: i64 = q(&mut c, &["APPEND", "keep", "x"]);
    let _: () = q(&mut c, &["SET", "persist", "v", "EX", "10"]);
    let _: Vec<u8> = q(&mut c, &["GETEX", "persist", "PERSIST"]);

    jump(&mut c, 5_000);
    for k in ["ex", "px", "setex", "psetex", "getex", "keep", "incr"] {
        assert!(get(&mut c, k).is_some(), "{k} expired too early");
    }
    jump(&mut c, 6_000);
    for k in ["ex", "px", "setex", "psetex", "getex", "keep", "incr"] {
        assert_eq!(get(&mut c, k), None, "{k} should have expired");
    }
    assert_eq!(get(&mut c, "long"), s("v"));
    assert_eq!(get(&mut c, "persist"), s("v"));
    jump(&mut c, 20_000);
    assert_eq!(get(&mut c, "long"), None);
    assert_eq!(get(&mut c, "persist"), s("v"));
    // Relative times count from the moved clock.
    let _: () = q(&mut c, &["SET", "after", "v", "EX", "10"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "after"]), 10);
}

#[test]
fn mget_mset_msetnx() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]);
    let v: Vec<Option<Vec<u8>>> = q(&mut c, &["MGET", "a", "b", "missing", "c"]);
    assert_eq!(v, vec![s("1"), s("2"), None, s("3")]);
    // A repeated key keeps the last value; MSET clears TTLs.
    let _: () = q(&mut c, &["SETEX", "t", "100", "v"]);
    let _: () = q(&mut c, &["MSET", "a", "10", "a", "20", "t", "w"]);
    assert_eq!(get(&mut c, "a"), s("20"));
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);
    // MGET answers null for another type instead of failing.
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    let v: Vec<Option<Vec<u8>>> = q(&mut c, &["MGET", "h", "a"]);
    assert_eq!(v, vec![None, s("20")]);
    assert_eq!(
        err(&mut c, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSET", "a"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSETNX", "a", "1", "b"]),
        "ERR wrong number of arguments for 'msetnx' command"
    );

    assert_eq!(q::<i64>(&mut c, &["MSETNX", "x", "1", "y", "2"]), 1);
    // All or nothing: y exists, so z is not set either.
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "z", "3", "y", "9"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    assert_eq!(get(&mut c, "y"), s("2"));
    // Another type counts as existing.
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "z", "3", "h", "9"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "n", "1", "n", "2"]), 1);
    assert_eq!(get(&mut c, "n"), s("2"));
}

#[test]
fn pipelined_sets_then_mget() {
    let (_s, mut c) = server();
    let n = 10_000;
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("value:{i}"))
            .ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let mut m = redis::cmd("MGET");
    for i in 0..n {
        m.arg(format!("key:{i}"));
    }
    m.arg("key:missing");
    let v: Vec<Option<String>> = m.query(&mut c).unwrap();
    assert_eq!(v.len(), n + 1);
    for (i, x) in v[..n].iter().enumerate() {
        assert_eq!(x.as_deref(), Some(format!("value:{i}").as_str()));
    }
    assert_eq!(v[n], None);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), n as i64);
}

#[test]
fn mset_is_atomic_for_mget() {
    let (srv, mut c) = server();
    let _: () = q(&mut c, &["MSET", "a", "0", "b", "0", "c", "0"]);
    let port = srv.port;
    let writer = std::thread::spawn(move || {
        let mut w = support::redis_client(port);
        for i in 1..=2000 {
            let i = i.to_string();
            let _: () = q(&mut w, &["MSET", "a", &i, "b", &i, "c", &i]);
        }
    });
    for _ in 0..2000 {
        let v: Vec<String> = q(&mut c, &["MGET", "a", "b", "c"]);
        assert!(v[0] == v[1] && v[1] == v[2], "torn MSET seen: {v:?}");
    }
    writer.join().unwrap();
}

#[test]
fn append_and_strlen() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", "hello"]), 5);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", " world"]), 11);
    assert_eq!(get(&mut c, "k"), s("hello world"));
    assert_eq!(encoding(&mut c, "k"), "raw");
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 11);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "missing"]), 0);
    // A new key from APPEND "" exists and is empty.
    assert_eq!(q::<i64>(&mut c, &["APPEND", "e", ""]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "e"]), 1);
    // A new key is encoded like SET would; any APPEND to it makes it raw.
    assert_eq!(q::<i64>(&mut c, &["APPEND", "n", "10"]), 2);
    assert_eq!(encoding(&mut c, "n"), "int");
    assert_eq!(q::<i64>(&mut c, &["APPEND", "n", ""]), 2);
    assert_eq!(encoding(&mut c, "n"), "raw");
    assert_eq!(q::<i64>(&mut c, &["APPEND", "n", "5"]), 3);
    assert_eq!(get(&mut c, "n"), s("105"));
    // STRLEN of an int-encoded value is its text length.
    let _: () = q(&mut c, &["SET", "i", "-12345"]);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "i"]), 6);
    // APPEND keeps the TTL.
    let _: () = q(&mut c, &["SETEX", "t", "100", "v"]);
    let _: i64 = q(&mut c, &["APPEND", "t", "x"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), 100);
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["APPEND", "h", "x"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["STRLEN", "h"]), WRONGTYPE);
}

#[test]
fn string_size_limit() {
    let (_s, mut c) = server();
    let too_long = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    let _: () = q(&mut c, &["SET", "k", "abc"]);
    assert_eq!(err(&mut c, &["SETRANGE", "k", "536870912", "x"]), too_long);
    assert_eq!(err(&mut c, &["SETRANGE", "k", "536870911", "xy"]), too_long);
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "9223372036854775807", "x"]),
        too_long
    );
    assert_eq!(
        err(&mut c, &["SETRANGE", "missing", "536870912", "x"]),
        too_long
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "missing"]), 0);
    // Setting nothing is never too long.
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "536870912", ""]), 3);
    assert_eq!(
        q::<i64>(&mut c, &["SETRANGE", "missing", "536870912", ""]),
        0
    );
    // A lower proto-max-bulk-len bounds APPEND too.
    let _: () = q(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1048576"]);
    let _: () = q(&mut c, &["SETRANGE", "big", "1048570", "123456"]);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "big"]), 1_048_576);
    assert_eq!(err(&mut c, &["APPEND", "big", "x"]), too_long);
    assert_eq!(err(&mut c, &["SETRANGE", "big", "1048576", "x"]), too_long);
    assert_eq!(
        q::<i64>(&mut c, &["SETRANGE", "big", "1048575", "x"]),
        1_048_576
    );
}

#[test]
fn getrange_and_substr() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["SET", "s", "Hello World"]);
    let cases: &[(&str, &str, &str)] = &[
        ("0", "-1", "Hello World"),
        ("0", "4", "Hello"),
        ("-3", "-1", "rld"),
        ("-5", "-2", "Worl"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("10", "100", "d"),
        ("100", "200", ""),
        ("-100", "100", "Hello World"),
        ("-100", "-50", "H"),
        ("-100", "0", "H"),
        ("3", "-100", ""),
        ("0", "-12", "H"),
        ("-9223372036854775808", "9223372036854775807", "Hello World"),
        ("9223372036854775807", "9223372036854775807", ""),
    ];
    for (start, end, want) in cases {
        assert_eq!(
            q::<Vec<u8>>(&mut c, &["GETRANGE", "s", start, end]),
            want.as_bytes(),
            "{start} {end}"
        );
        assert_eq!(
            q::<Vec<u8>>(&mut c, &["SUBSTR", "s", start, end]),
            want.as_bytes(),
            "{start} {end}"
        );
    }
    // A missing key or an empty string gives "" (not null).
    assert_eq!(
        q::<Value>(&mut c, &["GETRANGE", "missing", "0", "-1"]),
        Value::BulkString(vec![])
    );
    let _: () = q(&mut c, &["SET", "e", ""]);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GETRANGE", "e", "0", "-1"]), b"");
    // An int-encoded value reads as its text.
    let _: () = q(&mut c, &["SET", "n", "-12345"]);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GETRANGE", "n", "1", "2"]), b"12");
    assert_eq!(q::<Vec<u8>>(&mut c, &["GETRANGE", "n", "-2", "-1"]), b"45");
    assert_eq!(err(&mut c, &["GETRANGE", "s", "a", "1"]), NOT_INT);
    assert_eq!(err(&mut c, &["GETRANGE", "s", "0", "1.5"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["GETRANGE", "s", "0", "9223372036854775808"]),
        NOT_INT
    );
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["GETRANGE", "h", "0", "-1"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["SUBSTR", "h", "0", "-1"]), WRONGTYPE);
    // Argument errors come before the type check.
    assert_eq!(err(&mut c, &["GETRANGE", "h", "a", "b"]), NOT_INT);
}

#[test]
fn setrange_padding_and_errors() {
    let (_s, mut c) = server();
    // Nothing to set on a missing key: 0, and no key.
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "5", ""]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // Padding with zero bytes.
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "5", "hi"]), 7);
    assert_eq!(get(&mut c, "k"), Some(b"\0\0\0\0\0hi".to_vec()));
    assert_eq!(encoding(&mut c, "k"), "raw");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "0", "HELLO"]), 7);
    assert_eq!(get(&mut c, "k"), s("HELLOhi"));
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "10", "end"]), 13);
    assert_eq!(get(&mut c, "k"), Some(b"HELLOhi\0\0\0end".to_vec()));
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "100", ""]), 13);
    let _: () = q(&mut c, &["SET", "w", "Hello World"]);
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "w", "6", "Redis"]), 11);
    assert_eq!(get(&mut c, "w"), s("Hello Redis"));
    // Int-encoded: an empty write keeps "int", a real one gives "raw".
    let _: () = q(&mut c, &["SET", "n", "123"]);
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "n", "1", ""]), 3);
    assert_eq!(encoding(&mut c, "n"), "int");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "n", "1", "9"]), 3);
    assert_eq!(get(&mut c, "n"), s("193"));
    assert_eq!(encoding(&mut c, "n"), "raw");
    // The TTL is kept.
    let _: () = q(&mut c, &["SETEX", "t", "100", "abc"]);
    let _: i64 = q(&mut c, &["SETRANGE", "t", "1", "X"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), 100);
    assert_eq!(get(&mut c, "t"), s("aXc"));

    let out_of_range = "ERR offset is out of range";
    assert_eq!(err(&mut c, &["SETRANGE", "k", "-1", "x"]), out_of_range);
    assert_eq!(err(&mut c, &["SETRANGE", "k", "-1", ""]), out_of_range);
    assert_eq!(err(&mut c, &["SETRANGE", "k", "abc", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["SETRANGE", "k", "9223372036854775808", "x"]),
        NOT_INT
    );
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["SETRANGE", "h", "0", "x"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["SETRANGE", "h", "0", ""]), WRONGTYPE);
    assert_eq!(err(&mut c, &["SETRANGE", "h", "-1", "x"]), out_of_range);
}

#[test]
fn incr_family() {
    let (_s, mut c) = server();
    assert_eq!(q::<i64>(&mut c, &["INCR", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCR", "c"]), 2);
    assert_eq!(q::<i64>(&mut c, &["DECR", "c"]), 1);
    assert_eq!(q::<i64>(&mut c, &["DECR", "new"]), -1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "c", "10"]), 11);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "c", "-3"]), 8);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "c", "4"]), 4);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "c", "-10"]), 14);
    assert_eq!(encoding(&mut c, "c"), "int");
    // INCR keeps the TTL.
    let _: () = q(&mut c, &["SETEX", "t", "100", "5"]);
    assert_eq!(q::<i64>(&mut c, &["INCR", "t"]), 6);
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), 100);
    // A stored string that is a canonical integer works; INCR makes it int.
    let _: () = q(&mut c, &["SET", "s", "41"]);
    let _: i64 = q(&mut c, &["APPEND", "s", "0"]);
    assert_eq!(encoding(&mut c, "s"), "raw");
    assert_eq!(q::<i64>(&mut c, &["INCR", "s"]), 411);
    assert_eq!(encoding(&mut c, "s"), "int");

    // The i64 limits.
    let overflow = "ERR increment or decrement would overflow";
    let _: () = q(&mut c, &["SET", "m", "9223372036854775807"]);
    assert_eq!(err(&mut c, &["INCR", "m"]), overflow);
    assert_eq!(err(&mut c, &["INCRBY", "m", "1"]), overflow);
    assert_eq!(err(&mut c, &["DECRBY", "m", "-1"]), overflow);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "m", "0"]), i64::MAX);
    assert_eq!(q::<i64>(&mut c, &["DECR", "m"]), i64::MAX - 1);
    let _: () = q(&mut c, &["SET", "m", "-9223372036854775808"]);
    assert_eq!(err(&mut c, &["DECR", "m"]), overflow);
    assert_eq!(err(&mut c, &["INCRBY", "m", "-1"]), overflow);
    assert_eq!(
        q::<i64>(&mut c, &["INCRBY", "m", "9223372036854775807"]),
        -1
    );
    let _: () = q(&mut c, &["SET", "z", "0"]);
    assert_eq!(
        q::<i64>(&mut c, &["INCRBY", "z", "-9223372036854775808"]),
        i64::MIN
    );
    assert_eq!(
        err(&mut c, &["DECRBY", "z", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    assert_eq!(get(&mut c, "z"), s("-9223372036854775808"));

    // Values and arguments that are not integers.
    for bad in [
        "1.5",
        " 1",
        "1 ",
        "01",
        "+1",
        "-0",
        "",
        "abc",
        "9223372036854775808",
        "1\0",
    ] {
        let _: () = cmd(&[b"SET", b"bad", bad.as_bytes()])
            .query(&mut c)
            .unwrap();
        assert_eq!(err(&mut c, &["INCR", "bad"]), NOT_INT, "{bad:?}");
        assert_eq!(err(&mut c, &["DECRBY", "bad", "1"]), NOT_INT, "{bad:?}");
    }
    for bad in [
        "abc",
        "1.5",
        "",
        " 1",
        "9223372036854775808",
        "-9223372036854775809",
    ] {
        assert_eq!(err(&mut c, &["INCRBY", "c", bad]), NOT_INT, "{bad:?}");
        assert_eq!(err(&mut c, &["DECRBY", "c", bad]), NOT_INT, "{bad:?}");
    }
    let _: () = q(&mut c, &["HSET", "h", "f", "1"]);
    for args in [
        &["INCR", "h"][..],
        &["DECR", "h"],
        &["INCRBY", "h", "1"],
        &["DECRBY", "h", "1"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE);
    }
    // The increment argument is checked before the key's type.
    assert_eq!(err(&mut c, &["INCRBY", "h", "x"]), NOT_INT);
}

#[test]
fn incrbyfloat() {
    let (_s, mut c) = server();
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "1.5"]), "1.5");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "0.1"]), "1.6");
    // Long double arithmetic, printed with %.17Lf as Redis does.
    assert_eq!(
        q::<String>(&mut c, &["INCRBYFLOAT", "f", "1e3"]),
        "1001.59999999999999998"
    );
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "-1001.6"]), "0");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "x", "0x10"]), "16");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "y", "-0"]), "0");
    // The result is a string, never int-encoded.
    let _: () = q(&mut c, &["SET", "i", "10"]);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "i", "0"]), "10");
    assert_eq!(encoding(&mut c, "i"), "embstr");
    let _: () = q(&mut c, &["SET", "w", "5.50"]);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "w", "0"]), "5.5");
    // A long result is raw.
    let _: String = q(&mut c, &["INCRBYFLOAT", "big", "1e50"]);
    assert_eq!(encoding(&mut c, "big"), "raw");
    // The TTL is kept.
    let _: () = q(&mut c, &["SETEX", "t", "100", "1"]);
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "t", "1.5"]), "2.5");
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), 100);

    let nan = "ERR increment would produce NaN or Infinity";
    let not_float = "ERR value is not a valid float";
    for inf in ["inf", "-inf", "+inf", "Infinity"] {
        assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", inf]), nan, "{inf}");
    }
    for bad in ["nan", "abc", "", " 1", "1 ", "1.5.5", "1e"] {
        assert_eq!(
            err(&mut c, &["INCRBYFLOAT", "f", bad]),
            not_float,
            "{bad:?}"
        );
    }
    let _: () = q(&mut c, &["SET", "bad", "1.5 "]);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "bad", "1"]), not_float);
    let _: () = q(&mut c, &["SET", "huge", "1.7976931348623157e308"]);
    // The sum is taken in long double, so this does not overflow.
    let sum: String = q(&mut c, &["INCRBYFLOAT", "huge", "1e308"]);
    assert!(
        sum.starts_with("27976931348623157") && sum.len() == 309,
        "{sum}"
    );
    assert_eq!(get(&mut c, "f"), s("0"));
    let _: () = q(&mut c, &["HSET", "h", "f", "1"]);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "h", "1"]), WRONGTYPE);
    // Here the type is checked before the increment argument.
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "h", "abc"]), WRONGTYPE);
}

#[test]
fn lcs_forms_resp2() {
    let (srv, mut c) = server();
    let _: () = q(&mut c, &["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
    assert_eq!(q::<String>(&mut c, &["LCS", "key1", "key2"]), "mytext");
    assert_eq!(q::<i64>(&mut c, &["LCS", "key1", "key2", "LEN"]), 6);
    assert_eq!(q::<String>(&mut c, &["LCS", "key1", "missing"]), "");
    assert_eq!(q::<i64>(&mut c, &["LCS", "missing", "key1", "LEN"]), 0);

    // The exact RESP2 shape of IDX.
    let mut raw = srv.conn();
    let idx = raw.cmd(&["LCS", "key1", "key2", "IDX"]);
    assert_eq!(
        idx,
        b"*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n\
          *2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"
    );
    let with = raw.cmd(&[
        "LCS",
        "key1",
        "key2",
        "IDX",
        "MINMATCHLEN",
        "4",
        "WITHMATCHLEN",
    ]);
    assert_eq!(
        with,
        b"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"
    );
    let none = raw.cmd(&["LCS", "a", "b", "IDX"]);
    assert_eq!(none, b"*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n");
    // MINMATCHLEN 0 or negative keeps every match; a large one keeps none.
    let all = raw.cmd(&["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "-1"]);
    assert_eq!(all, idx);
    let big = raw.cmd(&["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "100"]);
    assert_eq!(big, b"*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:6\r\n");
    // WITHMATCHLEN and MINMATCHLEN without IDX are accepted and ignored.
    assert_eq!(
        q::<String>(&mut c, &["LCS", "key1", "key2", "WITHMATCHLEN"]),
        "mytext"
    );
    assert_eq!(
        q::<i64>(&mut c, &["LCS", "key1", "key2", "LEN", "MINMATCHLEN", "2"]),
        6
    );

    // Binary-safe and int-encoded operands.
    let _: () = cmd(&[b"MSET", b"a", b"x\x00y\r\nz", b"b", b"\x00\r\n"])
        .query(&mut c)
        .unwrap();
    let l: Vec<u8> = q(&mut c, &["LCS", "a", "b"]);
    assert_eq!(l, b"\x00\r\n");
    let _: () = q(&mut c, &["MSET", "a", "1234512345", "b", "5432154321"]);
    assert_eq!(q::<String>(&mut c, &["LCS", "a", "b"]), "545");
    assert_eq!(q::<i64>(&mut c, &["LCS", "a", "b", "LEN"]), 3);

    assert_eq!(
        err(&mut c, &["LCS", "key1", "key2", "IDX", "LEN"]),
        "ERR If you want both the length and indexes, please just use IDX."
    );
    assert_eq!(err(&mut c, &["LCS", "key1", "key2", "FOO"]), SYNTAX);
    assert_eq!(err(&mut c, &["LCS", "key1", "key2", "MINMATCHLEN"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["LCS", "key1", "key2", "MINMATCHLEN", "1.5"]),
        NOT_INT
    );
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    let not_strings = "ERR The specified keys must contain string values";
    assert_eq!(err(&mut c, &["LCS", "key1", "h"]), not_strings);
    assert_eq!(err(&mut c, &["LCS", "h", "missing"]), not_strings);
    // The type check comes first, before the options are even read.
    assert_eq!(err(&mut c, &["LCS", "h", "key1", "FOO"]), not_strings);

    // Transient memory is bounded by proto-max-bulk-len.
    let _: () = q(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1048576"]);
    let long = "a".repeat(600);
    let _: () = q(&mut c, &["MSET", "l1", &long, "l2", &long]);
    assert_eq!(
        err(&mut c, &["LCS", "l1", "l2"]),
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
    );
}

#[test]
fn lcs_idx_resp3_is_a_map() {
    let (srv, mut c) = server();
    let _: () = q(&mut c, &["MSET", "key1", "ohmytext", "key2", "mynewtext"]);
    let mut raw = srv.conn();
    let _hello = raw.cmd(&["HELLO", "3"]);
    let idx = raw.cmd(&["LCS", "key1", "key2", "IDX", "WITHMATCHLEN"]);
    assert_eq!(
        idx,
        b"%2\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n\
          *3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n"
    );
    assert_eq!(raw.cmd(&["LCS", "key1", "key2"]), b"$6\r\nmytext\r\n");

    // Through the redis crate's RESP3 client too.
    let mut c3 = support::redis_client_resp3(srv.port);
    let v: Value = q(&mut c3, &["LCS", "key1", "key2", "IDX"]);
    let Value::Map(pairs) = v else {
        panic!("expected a map, got {v:?}")
    };
    assert_eq!(pairs.len(), 2);
    assert_eq!(pairs[0].0, Value::BulkString(b"matches".to_vec()));
    assert_eq!(
        pairs[1],
        (Value::BulkString(b"len".to_vec()), Value::Int(6))
    );
    // Null replies are RESP3 nulls.
    assert_eq!(q::<Value>(&mut c3, &["GET", "missing"]), Value::Nil);
    let v: Vec<Option<String>> = q(&mut c3, &["MGET", "key1", "missing"]);
    assert_eq!(v, vec![Some("ohmytext".to_string()), None]);
}

#[test]
fn options_end_at_nul_like_c_strings() {
    // Redis compares option names as C strings, so "NX\0junk" is NX.
    let (_s, mut c) = server();
    let r: Option<String> = cmd(&[b"SET", b"k", b"v", b"NX\0junk"])
        .query(&mut c)
        .unwrap();
    assert_eq!(r.as_deref(), Some("OK"));
    let r: Option<String> = cmd(&[b"SET", b"k", b"v", b"nx\0"]).query(&mut c).unwrap();
    assert_eq!(r, None);
    let _: () = q(&mut c, &["SET", "k2", "ab"]);
    let n: i64 = cmd(&[b"LCS", b"k", b"k2", b"LEN\0x"])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 0);
}

/// GETDEL and GETEX reach a replica (and the journal) as Redis 7.0
/// propagates them: GETDEL as DEL, GETEX with a TTL as PEXPIREAT (DEL when
/// the deadline has passed), PERSIST as PERSIST, and nothing when nothing
/// changed. Checked against a real redis-server's stream when there is one.
#[test]
fn getdel_and_getex_propagate_as_redis_does() {
    let writes: &[&[&str]] = &[
        &["SET", "foo", "bar"],
        &["GETDEL", "foo"],
        &["GETDEL", "foo"],
        &["SET", "foo", "bar"],
        &["GETEX", "foo"],
        &["GETEX", "foo", "EX", "100"],
        &["GETEX", "foo", "PX", "100000"],
        &["GETEX", "foo", "EXAT", "4000000000"],
        &["GETEX", "foo", "PXAT", "4000000000000"],
        &["GETEX", "foo", "PERSIST"],
        &["GETEX", "foo", "PERSIST"],
        &["GETEX", "foo", "EXAT", "1"],
        &["GETEX", "nosuch", "PERSIST"],
    ];
    let want = [
        "select 0",
        "set foo bar",
        "del foo",
        "set foo bar",
        "pexpireat foo <ms>",
        "pexpireat foo <ms>",
        "pexpireat foo 4000000000000",
        "pexpireat foo 4000000000000",
        "persist foo",
        "del foo",
    ];
    let cairn = start_cairn(&[]);
    assert_eq!(support::replication_stream(cairn.port, writes), want);
    if let Some(redis) = support::start_redis(&[]) {
        assert_eq!(support::replication_stream(redis.port, writes), want);
    }
}
