//! The list family end to end (Redis 7.0 `t_list.c` behaviour): every
//! command, option and error of LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP,
//! LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE,
//! RPOPLPUSH, LMPOP and the blocking forms where they find data, driven
//! through the `redis` crate, with raw bytes where the reply shape matters
//! (RESP2 and RESP3 nulls). The quicklist's node layout is checked through
//! DEBUG OBJECT against the numbers Redis 7.0 gives, and, when a
//! redis-server is installed, against a live Redis for random operations.

mod support;

use redis::{Connection, Value};
use support::{err, int, ok, q, server, start_cairn, start_redis, RawConn};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn range(c: &mut Connection, key: &str) -> Vec<String> {
    q(c, &["LRANGE", key, "0", "-1"])
}

/// DEBUG OBJECT's `name:value` field.
fn debug_field(c: &mut Connection, key: &str, name: &str) -> String {
    let text: String = q(c, &["DEBUG", "OBJECT", key]);
    text.split(' ')
        .find_map(|f| f.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn nodes(c: &mut Connection, key: &str) -> i64 {
    debug_field(c, key, "ql_nodes").parse().unwrap()
}

#[test]
fn pushes_and_pops() {
    let (_s, mut c) = server();
    assert_eq!(int(&mut c, &["LPUSH", "l", "a", "b"]), 2);
    assert_eq!(int(&mut c, &["RPUSH", "l", "c", "d"]), 4);
    assert_eq!(range(&mut c, "l"), strs(&["b", "a", "c", "d"]));
    assert_eq!(int(&mut c, &["LPUSHX", "l", "x"]), 5);
    assert_eq!(int(&mut c, &["RPUSHX", "l", "y", "z"]), 7);
    assert_eq!(int(&mut c, &["LPUSHX", "nosuch", "x"]), 0);
    assert_eq!(int(&mut c, &["RPUSHX", "nosuch", "x"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "nosuch"]), 0);
    assert_eq!(int(&mut c, &["LLEN", "l"]), 7);
    assert_eq!(int(&mut c, &["LLEN", "nosuch"]), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "l"]), "list");

    assert_eq!(
        q::<Option<String>>(&mut c, &["LPOP", "l"]).as_deref(),
        Some("x")
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["RPOP", "l"]).as_deref(),
        Some("z")
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LPOP", "l", "2"]),
        strs(&["b", "a"])
    );
    // RPOP with a count lists the elements in the order they leave.
    assert_eq!(
        q::<Vec<String>>(&mut c, &["RPOP", "l", "2"]),
        strs(&["y", "d"])
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["LPOP", "l", "0"]), strs(&[]));
    assert_eq!(
        q::<Vec<String>>(&mut c, &["RPOP", "l", "100"]),
        strs(&["c"])
    );
    // The last element gone deletes the key.
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["LPOP", "l"]), None);
    assert_eq!(q::<Option<Vec<String>>>(&mut c, &["LPOP", "l", "3"]), None);

    // Integers come back as the text that was pushed; non-canonical
    // integer text stays as it was.
    let vals = [
        "0",
        "-1",
        "127",
        "128",
        "-4096",
        "4095",
        "32767",
        "-32768",
        "8388607",
        "-8388608",
        "2147483647",
        "-2147483648",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-0",
        "01",
        "+5",
        " 7",
        "1.5",
    ];
    let mut args = vec!["RPUSH", "n"];
    args.extend_from_slice(&vals);
    assert_eq!(int(&mut c, &args), vals.len() as i64);
    assert_eq!(range(&mut c, "n"), strs(&vals));
    for (i, v) in vals.iter().enumerate() {
        let got: String = q(&mut c, &["LINDEX", "n", &i.to_string()]);
        assert_eq!(&got, v);
    }
    // Binary-safe.
    let bin: &[u8] = b"a\x00b\r\n\xff";
    let _: i64 = support::cmd(&[b"RPUSH", b"bin", bin, b""])
        .query(&mut c)
        .unwrap();
    let got: Vec<Vec<u8>> = support::cmd(&[b"LRANGE", b"bin", b"0", b"-1"])
        .query(&mut c)
        .unwrap();
    assert_eq!(got, vec![bin.to_vec(), vec![]]);
}

#[test]
fn index_set_insert_rem_trim() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e"]);
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "l", "-1"]).as_deref(),
        Some("e")
    );
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "l", "5"]), None);
    assert_eq!(q::<Option<String>>(&mut c, &["LINDEX", "l", "-6"]), None);
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "nosuch", "x"]),
        None
    );
    assert_eq!(err(&mut c, &["LINDEX", "l", "x"]), NOT_INT);

    ok(&mut c, &["LSET", "l", "0", "A"]);
    ok(&mut c, &["LSET", "l", "-1", "E"]);
    assert_eq!(
        err(&mut c, &["LSET", "l", "5", "x"]),
        "ERR index out of range"
    );
    assert_eq!(
        err(&mut c, &["LSET", "nosuch", "0", "x"]),
        "ERR no such key"
    );
    assert_eq!(
        err(&mut c, &["LSET", "nosuch", "x", "x"]),
        "ERR no such key"
    );
    assert_eq!(err(&mut c, &["LSET", "l", "x", "x"]), NOT_INT);
    assert_eq!(range(&mut c, "l"), strs(&["A", "b", "c", "d", "E"]));

    assert_eq!(int(&mut c, &["LINSERT", "l", "BEFORE", "c", "x"]), 6);
    assert_eq!(int(&mut c, &["LINSERT", "l", "after", "c", "y"]), 7);
    assert_eq!(int(&mut c, &["LINSERT", "l", "AFTER", "nope", "y"]), -1);
    assert_eq!(int(&mut c, &["LINSERT", "nosuch", "AFTER", "c", "y"]), 0);
    assert_eq!(err(&mut c, &["LINSERT", "l", "MIDDLE", "c", "y"]), SYNTAX);
    assert_eq!(
        range(&mut c, "l"),
        strs(&["A", "b", "x", "c", "y", "d", "E"])
    );

    q::<i64>(&mut c, &["RPUSH", "r", "a", "b", "a", "c", "a", "b", "a"]);
    assert_eq!(int(&mut c, &["LREM", "r", "1", "a"]), 1);
    assert_eq!(int(&mut c, &["LREM", "r", "-2", "a"]), 2);
    assert_eq!(range(&mut c, "r"), strs(&["b", "a", "c", "b"]));
    assert_eq!(int(&mut c, &["LREM", "r", "0", "b"]), 2);
    assert_eq!(int(&mut c, &["LREM", "r", "0", "zz"]), 0);
    assert_eq!(int(&mut c, &["LREM", "nosuch", "0", "zz"]), 0);
    assert_eq!(err(&mut c, &["LREM", "r", "x", "a"]), NOT_INT);
    assert_eq!(int(&mut c, &["LREM", "r", "-9223372036854775808", "a"]), 1);
    assert_eq!(int(&mut c, &["LREM", "r", "5", "c"]), 1);
    assert_eq!(int(&mut c, &["EXISTS", "r"]), 0);

    q::<i64>(&mut c, &["RPUSH", "t", "0", "1", "2", "3", "4", "5"]);
    ok(&mut c, &["LTRIM", "t", "1", "-2"]);
    assert_eq!(range(&mut c, "t"), strs(&["1", "2", "3", "4"]));
    ok(&mut c, &["LTRIM", "t", "-100", "100"]);
    assert_eq!(range(&mut c, "t"), strs(&["1", "2", "3", "4"]));
    ok(&mut c, &["LTRIM", "nosuch", "0", "1"]);
    assert_eq!(err(&mut c, &["LTRIM", "nosuch", "a", "1"]), NOT_INT);
    ok(&mut c, &["LTRIM", "t", "3", "1"]);
    assert_eq!(int(&mut c, &["EXISTS", "t"]), 0);

    q::<i64>(&mut c, &["RPUSH", "g", "0", "1", "2", "3", "4"]);
    let r = |c: &mut Connection, a: &str, b: &str| -> Vec<String> { q(c, &["LRANGE", "g", a, b]) };
    assert_eq!(r(&mut c, "-2", "-1"), strs(&["3", "4"]));
    assert_eq!(r(&mut c, "3", "1"), strs(&[]));
    assert_eq!(
        r(&mut c, "-9223372036854775808", "9223372036854775807").len(),
        5
    );
    assert_eq!(r(&mut c, "5", "9"), strs(&[]));
    assert_eq!(err(&mut c, &["LRANGE", "nosuch", "0", "x"]), NOT_INT);
}

#[test]
fn lpos_options() {
    let (_s, mut c) = server();
    q::<i64>(
        &mut c,
        &["RPUSH", "p", "a", "b", "c", "1", "2", "3", "c", "c"],
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "p", "c"]), Some(2));
    assert_eq!(
        q::<Option<i64>>(&mut c, &["LPOS", "p", "c", "RANK", "-1"]),
        Some(7)
    );
    assert_eq!(
        q::<Option<i64>>(&mut c, &["LPOS", "p", "c", "RANK", "4"]),
        None
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "p", "3"]), Some(5));
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "COUNT", "0"]),
        vec![2, 6, 7]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "RANK", "-2", "COUNT", "0"]),
        vec![6, 2]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "c", "COUNT", "0", "MAXLEN", "7"]),
        vec![2, 6]
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "p", "zz", "COUNT", "1"]),
        Vec::<i64>::new()
    );
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "nosuch", "zz", "COUNT", "1"]),
        Vec::<i64>::new()
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "nosuch", "zz"]), None);
    // Redis 7.0 negates RANK in a C long: the lowest value finds every
    // match from the tail, whatever COUNT says.
    assert_eq!(
        q::<Vec<i64>>(
            &mut c,
            &[
                "LPOS",
                "p",
                "c",
                "RANK",
                "-9223372036854775808",
                "COUNT",
                "1"
            ]
        ),
        vec![7, 6, 2]
    );
    assert_eq!(
        err(&mut c, &["LPOS", "p", "c", "RANK", "0"]),
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
         negative to start from the end of the list"
    );
    assert_eq!(err(&mut c, &["LPOS", "p", "c", "RANK", "x"]), NOT_INT);
    assert_eq!(
        err(&mut c, &["LPOS", "p", "c", "COUNT", "-1"]),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        err(&mut c, &["LPOS", "p", "c", "COUNT", "x"]),
        "ERR COUNT can't be negative"
    );
    assert_eq!(
        err(&mut c, &["LPOS", "p", "c", "MAXLEN", "-1"]),
        "ERR MAXLEN can't be negative"
    );
    assert_eq!(err(&mut c, &["LPOS", "p", "c", "RANK"]), SYNTAX);
    assert_eq!(err(&mut c, &["LPOS", "p", "c", "FOO", "1"]), SYNTAX);
    // Options are checked before the key.
    q::<String>(&mut c, &["SET", "s", "v"]);
    assert!(err(&mut c, &["LPOS", "s", "c", "RANK", "0"]).starts_with("ERR RANK"));
    assert_eq!(err(&mut c, &["LPOS", "s", "c"]), WRONGTYPE);
}

#[test]
fn moves_and_mpop() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["RPUSH", "src", "a", "b", "c"]);
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "src", "dst", "LEFT", "RIGHT"]),
        "a"
    );
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "src", "dst"]), "c");
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "src", "dst", "right", "left"]),
        "b"
    );
    assert_eq!(int(&mut c, &["EXISTS", "src"]), 0);
    assert_eq!(range(&mut c, "dst"), strs(&["b", "c", "a"]));
    assert_eq!(
        q::<Option<String>>(&mut c, &["LMOVE", "src", "dst", "LEFT", "LEFT"]),
        None
    );
    // Same key: rotation.
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "dst", "dst", "LEFT", "RIGHT"]),
        "b"
    );
    assert_eq!(range(&mut c, "dst"), strs(&["c", "a", "b"]));
    assert_eq!(q::<String>(&mut c, &["RPOPLPUSH", "dst", "dst"]), "b");
    assert_eq!(range(&mut c, "dst"), strs(&["b", "c", "a"]));
    assert_eq!(err(&mut c, &["LMOVE", "dst", "dst", "UP", "LEFT"]), SYNTAX);
    q::<String>(&mut c, &["SET", "s", "v"]);
    assert_eq!(
        err(&mut c, &["LMOVE", "s", "dst", "LEFT", "LEFT"]),
        WRONGTYPE
    );
    assert_eq!(
        err(&mut c, &["LMOVE", "dst", "s", "LEFT", "LEFT"]),
        WRONGTYPE
    );
    // Neither moved anything; a missing source wins over a bad destination.
    assert_eq!(int(&mut c, &["LLEN", "dst"]), 3);
    assert_eq!(
        q::<Option<String>>(&mut c, &["LMOVE", "nosuch", "s", "LEFT", "LEFT"]),
        None
    );

    q::<i64>(&mut c, &["RPUSH", "m2", "1", "2", "3"]);
    let v: Value = q(
        &mut c,
        &["LMPOP", "3", "nosuch", "m2", "dst", "RIGHT", "COUNT", "2"],
    );
    assert_eq!(
        v,
        Value::Array(vec![
            Value::BulkString(b"m2".to_vec()),
            Value::Array(vec![
                Value::BulkString(b"3".to_vec()),
                Value::BulkString(b"2".to_vec())
            ])
        ])
    );
    let v: Value = q(&mut c, &["LMPOP", "1", "nosuch", "LEFT"]);
    assert_eq!(v, Value::Nil);
    assert_eq!(
        err(&mut c, &["LMPOP", "0", "m2", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["LMPOP", "1", "m2", "LEFT", "COUNT", "0"]),
        "ERR count should be greater than 0"
    );
    assert_eq!(err(&mut c, &["LMPOP", "2", "m2", "LEFT"]), SYNTAX);
    assert_eq!(
        err(
            &mut c,
            &["LMPOP", "1", "m2", "LEFT", "COUNT", "1", "COUNT", "1"]
        ),
        SYNTAX
    );
    assert_eq!(err(&mut c, &["LMPOP", "2", "s", "m2", "LEFT"]), WRONGTYPE);
}

#[test]
fn errors_and_arity() {
    let (_s, mut c) = server();
    q::<String>(&mut c, &["SET", "s", "v"]);
    for cmd in [
        &["LPUSH", "s", "a"][..],
        &["RPUSH", "s", "a"],
        &["LPUSHX", "s", "a"],
        &["RPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["RPOP", "s", "2"],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "1"],
        &["LINDEX", "s", "0"],
        &["LINDEX", "s", "x"],
        &["LSET", "s", "0", "x"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LPOS", "s", "a"],
        &["RPOPLPUSH", "s", "d"],
        &["LMPOP", "1", "s", "LEFT"],
        &["BLPOP", "s", "0"],
        &["BRPOP", "s", "0"],
        &["BLMPOP", "0", "1", "s", "LEFT"],
        &["BLMOVE", "s", "d", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "s", "d", "0"],
    ] {
        assert_eq!(err(&mut c, cmd), WRONGTYPE, "{cmd:?}");
    }
    assert_eq!(
        err(&mut c, &["LPOP", "s", "-1"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(&mut c, &["LPOP", "s", "x"]),
        "ERR value is out of range, must be positive"
    );
    assert_eq!(
        err(&mut c, &["LPOP", "s", "1", "2"]),
        "ERR wrong number of arguments for 'lpop' command"
    );
    assert_eq!(
        err(&mut c, &["RPOP", "s", "1", "2"]),
        "ERR wrong number of arguments for 'rpop' command"
    );
    for (cmd, name) in [
        (&["LPUSH", "k"][..], "lpush"),
        (&["LINSERT", "k", "BEFORE", "a"], "linsert"),
        (&["LMOVE", "a", "b", "LEFT"], "lmove"),
        (&["BLPOP", "k"], "blpop"),
        (&["BLMPOP", "0", "1", "k"], "blmpop"),
        (&["LPOS", "k"], "lpos"),
    ] {
        assert_eq!(
            err(&mut c, cmd),
            format!("ERR wrong number of arguments for '{name}' command")
        );
    }
    assert_eq!(
        err(&mut c, &["BLPOP", "k", "-1"]),
        "ERR timeout is negative"
    );
    assert_eq!(
        err(&mut c, &["BLPOP", "k", "x"]),
        "ERR timeout is not a float or out of range"
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "x", "0", "k", "LEFT"]),
        "ERR numkeys should be greater than 0"
    );
    assert_eq!(
        err(&mut c, &["BLMPOP", "x", "1", "k", "LEFT"]),
        "ERR timeout is not a float or out of range"
    );
    assert_eq!(
        err(&mut c, &["BLMOVE", "a", "b", "UP", "LEFT", "x"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["BRPOPLPUSH", "a", "b", "-0.5"]),
        "ERR timeout is negative"
    );
}

#[test]
fn reply_shapes_resp2_and_resp3() {
    let s = start_cairn(&[]);
    let mut c = RawConn::connect(s.port);
    c.cmd(&["RPUSH", "l", "a", "12", "b"]);
    c.cmd(&["SET", "s", "v"]);
    let cases: [(&[&str], &[u8], &[u8]); 16] = [
        (&["LPOP", "nosuch"], b"$-1\r\n", b"_\r\n"),
        (&["LPOP", "nosuch", "2"], b"*-1\r\n", b"_\r\n"),
        (&["LPOP", "nosuch", "0"], b"*-1\r\n", b"_\r\n"),
        (&["LPOP", "l", "0"], b"*0\r\n", b"*0\r\n"),
        (&["LINDEX", "l", "1"], b"$2\r\n12\r\n", b"$2\r\n12\r\n"),
        (&["LINDEX", "l", "9"], b"$-1\r\n", b"_\r\n"),
        (
            &["LRANGE", "l", "0", "1"],
            b"*2\r\n$1\r\na\r\n$2\r\n12\r\n",
            b"*2\r\n$1\r\na\r\n$2\r\n12\r\n",
        ),
        (&["LRANGE", "nosuch", "0", "1"], b"*0\r\n", b"*0\r\n"),
        (&["LPOS", "l", "zz"], b"$-1\r\n", b"_\r\n"),
        (&["LPOS", "l", "12"], b":1\r\n", b":1\r\n"),
        (&["LPOS", "l", "zz", "COUNT", "0"], b"*0\r\n", b"*0\r\n"),
        (&["LMPOP", "1", "nosuch", "LEFT"], b"*-1\r\n", b"_\r\n"),
        (
            &["LMOVE", "nosuch", "l", "LEFT", "LEFT"],
            b"$-1\r\n",
            b"_\r\n",
        ),
        (&["LTRIM", "nosuch", "0", "1"], b"+OK\r\n", b"+OK\r\n"),
        (
            &["LINSERT", "l", "BEFORE", "zz", "x"],
            b":-1\r\n",
            b":-1\r\n",
        ),
        (
            &["LLEN", "s"],
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
    ];
    for (args, r2, _) in &cases {
        assert_eq!(
            support::escape(&c.cmd(args)),
            support::escape(r2),
            "{args:?}"
        );
    }
    c.cmd(&["HELLO", "3"]);
    for (args, _, r3) in &cases {
        assert_eq!(
            support::escape(&c.cmd(args)),
            support::escape(r3),
            "{args:?}"
        );
    }
    // Pops that find data, in RESP3.
    assert_eq!(c.cmd(&["RPOP", "l", "2"]), b"*2\r\n$1\r\nb\r\n$2\r\n12\r\n");
    c.cmd(&["RPUSH", "l", "b"]);
    assert_eq!(
        c.cmd(&["LMPOP", "1", "l", "RIGHT"]),
        b"*2\r\n$1\r\nl\r\n*1\r\n$1\r\nb\r\n"
    );
    assert_eq!(c.cmd(&["BLPOP", "l", "0"]), b"*2\r\n$1\r\nl\r\n$1\r\na\r\n");
}

#[test]
fn encoding_and_nodes_follow_list_max_listpack_size() {
    let (_s, mut c) = server();
    let push_n = |c: &mut Connection, key: &str, n: usize, v: &str| {
        let mut args = vec!["RPUSH", key];
        args.extend(std::iter::repeat_n(v, n));
        q::<i64>(c, &args);
    };
    // Numbers from Redis 7.0.15's DEBUG OBJECT for the same commands.
    push_n(&mut c, "a", 681, "aaaaaaaaaa");
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "a"]),
        "quicklist"
    );
    assert_eq!(nodes(&mut c, "a"), 1);
    assert_eq!(debug_field(&mut c, "a", "ql_uncompressed_size"), "8179");
    push_n(&mut c, "a", 1, "aaaaaaaaaa");
    assert_eq!(nodes(&mut c, "a"), 2);
    assert_eq!(debug_field(&mut c, "a", "ql_avg_node"), "341.00");
    assert_eq!(debug_field(&mut c, "a", "ql_listpack_max"), "-2");

    ok(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "3"]);
    push_n(&mut c, "b", 10, "x");
    assert_eq!(nodes(&mut c, "b"), 4);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "b"]),
        "quicklist"
    );
    // The old list keeps its fill.
    push_n(&mut c, "a", 1, "aaaaaaaaaa");
    assert_eq!(debug_field(&mut c, "a", "ql_listpack_max"), "-2");
    assert_eq!(debug_field(&mut c, "b", "ql_listpack_max"), "3");
    ok(&mut c, &["CONFIG", "SET", "list-max-ziplist-size", "-100"]);
    push_n(&mut c, "c", 3, "x");
    assert_eq!(debug_field(&mut c, "c", "ql_listpack_max"), "-5");
    ok(
        &mut c,
        &["CONFIG", "SET", "list-max-listpack-size", "100000"],
    );
    push_n(&mut c, "d", 3, "x");
    assert_eq!(debug_field(&mut c, "d", "ql_listpack_max"), "32767");
    ok(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "0"]);
    push_n(&mut c, "e", 3, "x");
    assert_eq!(nodes(&mut c, "e"), 3);
    assert_eq!(
        q::<String>(&mut c, &["OBJECT", "ENCODING", "e"]),
        "quicklist"
    );

    // Set at start-up, under the old name.
    let s2 = start_cairn(&[
        "--list-max-ziplist-size",
        "2",
        "--enable-debug-command",
        "yes",
    ]);
    let mut c2 = support::redis_client(s2.port);
    push_n(&mut c2, "l", 5, "v");
    assert_eq!(nodes(&mut c2, "l"), 3);
    assert_eq!(
        q::<String>(&mut c2, &["OBJECT", "ENCODING", "l"]),
        "quicklist"
    );
    // A small list's serialized length is exact (Redis compresses only
    // strings over 20 bytes): count 1, container 1, length 1, 12 bytes.
    q::<i64>(&mut c2, &["RPUSH", "small", "a", "12"]);
    assert_eq!(debug_field(&mut c2, "small", "serializedlength"), "15");
}

#[test]
fn huge_counts_are_bounded() {
    let (_s, mut c) = server();
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let max = "9223372036854775807";
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["LPOS", "l", "b", "COUNT", max, "MAXLEN", max]),
        vec![1]
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", max]).len(),
        3
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["LPOP", "l", max]).len(), 3);
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c"]);
    let v: Value = q(&mut c, &["LMPOP", "1", "l", "LEFT", "COUNT", max]);
    assert!(matches!(v, Value::Array(ref a) if a.len() == 2));
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
}

#[test]
fn big_lists_across_many_nodes() {
    let (_s, mut c) = server();
    ok(&mut c, &["CONFIG", "SET", "list-max-listpack-size", "5"]);
    let n = 20_000usize;
    let mut i = 0;
    while i < n {
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg("big");
        for j in i..(i + 1000).min(n) {
            cmd.arg(j);
        }
        let _: i64 = cmd.query(&mut c).unwrap();
        i += 1000;
    }
    assert_eq!(nodes(&mut c, "big"), 4000);
    for idx in [0i64, 1, 4, 5, 9_999, 10_000, 19_999, -1, -5, -6, -20_000] {
        let want = if idx < 0 { n as i64 + idx } else { idx };
        let got: String = q(&mut c, &["LINDEX", "big", &idx.to_string()]);
        assert_eq!(got, want.to_string());
    }
    let got: Vec<i64> = q(&mut c, &["LRANGE", "big", "9998", "10003"]);
    assert_eq!(got, (9998..=10003).collect::<Vec<_>>());
    assert_eq!(
        int(&mut c, &["LINSERT", "big", "AFTER", "10002", "x"]),
        n as i64 + 1
    );
    assert_eq!(q::<Option<i64>>(&mut c, &["LPOS", "big", "x"]), Some(10003));
    assert_eq!(int(&mut c, &["LREM", "big", "0", "x"]), 1);
    ok(&mut c, &["LTRIM", "big", "7", "-8"]);
    assert_eq!(int(&mut c, &["LLEN", "big"]), n as i64 - 14);
    assert_eq!(q::<String>(&mut c, &["LINDEX", "big", "0"]), "7");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["RPOP", "big", "2"]),
        strs(&["19992", "19991"])
    );
}

/// A tiny deterministic generator (xorshift) for the differential test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random list operations on Cairn and on a live Redis 7.0: after each,
/// the contents and the node layout DEBUG OBJECT reports (node count,
/// average fill, total node bytes) must be the same, which pins down the
/// quicklist's push, insert/split/merge, replace and delete rules.
#[test]
fn node_layout_matches_redis() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("redis-server not installed: skipping");
        return;
    };
    let cairn = start_cairn(&["--enable-debug-command", "yes"]);
    let mut r = support::redis_client(redis.port);
    let mut k = support::redis_client(cairn.port);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let value = |rng: &mut Rng| -> String {
        match rng.below(6) {
            0 => rng.below(100_000).to_string(),
            1 => format!("-{}", rng.below(1 << 40)),
            2 => "v".repeat(rng.below(40) as usize),
            3 => "w".repeat(50 + rng.below(600) as usize),
            4 => "x".repeat(1000 + rng.below(3500) as usize),
            _ => ["a", "b", "c"][rng.below(3) as usize].to_string(),
        }
    };
    for fill in ["-2", "-1", "4", "1", "-3"] {
        for con in [&mut r, &mut k] {
            ok(con, &["CONFIG", "SET", "list-max-listpack-size", fill]);
            let _: i64 = q(con, &["DEL", "l"]);
        }
        for step in 0..300 {
            let op = rng.below(10);
            let a = value(&mut rng);
            let b = value(&mut rng);
            let i = (rng.below(60) as i64 - 30).to_string();
            let j = (rng.below(60) as i64 - 30).to_string();
            let cmd: Vec<&str> = match op {
                0..=2 => vec![if op == 0 { "LPUSH" } else { "RPUSH" }, "l", &a, &b],
                3 => vec!["LINSERT", "l", "BEFORE", &a, &b],
                4 => vec!["LINSERT", "l", "AFTER", &a, &b],
                5 => vec!["LSET", "l", &i, &b],
                6 => vec!["LREM", "l", &i, &a],
                7 => vec!["LTRIM", "l", &i, &j],
                8 => vec!["LPOP", "l", "3"],
                _ => vec!["RPOP", "l", "2"],
            };
            let want: redis::RedisResult<Value> =
                support::cmd(&cmd.iter().map(|s| s.as_bytes()).collect::<Vec<_>>()).query(&mut r);
            let got: redis::RedisResult<Value> =
                support::cmd(&cmd.iter().map(|s| s.as_bytes()).collect::<Vec<_>>()).query(&mut k);
            assert_eq!(
                format!("{got:?}"),
                format!("{want:?}"),
                "fill {fill} step {step}: {cmd:?}"
            );
            // Keep the list from emptying for long.
            if int(&mut r, &["LLEN", "l"]) == 0 {
                for con in [&mut r, &mut k] {
                    let _: i64 = q(con, &["RPUSH", "l", "a", "b", "c", "1", "2", "3"]);
                }
            }
            assert_eq!(
                range(&mut k, "l"),
                range(&mut r, "l"),
                "fill {fill} step {step}"
            );
            for f in [
                "ql_nodes",
                "ql_avg_node",
                "ql_listpack_max",
                "ql_uncompressed_size",
            ] {
                assert_eq!(
                    debug_field(&mut k, "l", f),
                    debug_field(&mut r, "l", f),
                    "{f} after fill {fill} step {step}: {cmd:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------- blocking

use std::time::{Duration, Instant};

/// Runs a scenario against Cairn and, when one is installed, against a
/// reference redis-server, so every expectation below is also Redis 7.0's.
fn on_both(scenario: fn(u16)) {
    let cairn = start_cairn(&[]);
    scenario(cairn.port);
    if let Some(redis) = start_redis(&[]) {
        scenario(redis.port);
    }
}

/// Waits until the server counts `n` blocked clients (INFO clients).
fn wait_blocked(admin: &mut RawConn, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let want = format!("blocked_clients:{n}\r\n");
    loop {
        let info = admin.cmd(&["INFO", "clients"]);
        if String::from_utf8_lossy(&info).contains(&want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {want:?} in {}",
            String::from_utf8_lossy(&info)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a command without reading its reply (the client blocks).
fn send(c: &mut RawConn, args: &[&str]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&args);
}

/// True if no reply arrives within `ms`.
fn silent_for(c: &mut RawConn, ms: u64) -> bool {
    c.stream()
        .set_read_timeout(Some(Duration::from_millis(ms)))
        .unwrap();
    let silent = c.try_read_raw_reply().is_err();
    c.stream()
        .set_read_timeout(Some(support::IO_TIMEOUT))
        .unwrap();
    silent
}

/// A bulk string's bytes as RESP.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

fn pair(k: &str, v: &str) -> Vec<u8> {
    format!("*2\r\n{}{}", bulk(k), bulk(v)).into_bytes()
}

#[test]
fn push_from_another_connection_wakes_a_blocked_pop() {
    on_both(push_from_another_connection_wakes_a_blocked_pop_on);
}

fn push_from_another_connection_wakes_a_blocked_pop_on(port: u16) {
    let mut admin = RawConn::connect(port);
    // Several waiters on several connections, so that pushers and waiters
    // sit on different worker threads whatever the assignment.
    let mut waiters: Vec<RawConn> = (0..4).map(|_| RawConn::connect(port)).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        send(w, &["BLPOP", &format!("k{i}"), "0"]);
    }
    wait_blocked(&mut admin, 4);
    for i in 0..4 {
        let mut pusher = RawConn::connect(port);
        pusher.cmd(&["RPUSH", &format!("k{i}"), &format!("v{i}")]);
    }
    for (i, w) in waiters.iter_mut().enumerate() {
        assert_eq!(w.read_raw_reply(), pair(&format!("k{i}"), &format!("v{i}")));
    }
    wait_blocked(&mut admin, 0);
    // The pushed elements went to the waiters.
    for i in 0..4 {
        assert_eq!(admin.cmd(&["EXISTS", &format!("k{i}")]), b":0\r\n");
    }
    // BRPOP, BLMPOP and BRPOPLPUSH wake the same way.
    let mut a = RawConn::connect(port);
    let mut b = RawConn::connect(port);
    let mut c = RawConn::connect(port);
    send(&mut a, &["BRPOP", "r", "0"]);
    send(
        &mut b,
        &["BLMPOP", "0", "2", "m1", "m2", "RIGHT", "COUNT", "2"],
    );
    send(&mut c, &["BRPOPLPUSH", "s", "d", "0"]);
    wait_blocked(&mut admin, 3);
    admin.cmd(&["RPUSH", "r", "x", "y"]);
    admin.cmd(&["RPUSH", "m2", "1", "2", "3"]);
    admin.cmd(&["LPUSH", "s", "z"]);
    assert_eq!(a.read_raw_reply(), pair("r", "y"));
    assert_eq!(
        b.read_raw_reply(),
        format!("*2\r\n{}*2\r\n{}{}", bulk("m2"), bulk("3"), bulk("2")).into_bytes()
    );
    assert_eq!(c.read_raw_reply(), bulk("z").into_bytes());
    assert_eq!(
        admin.cmd(&["LRANGE", "d", "0", "-1"]),
        format!("*1\r\n{}", bulk("z")).into_bytes()
    );
    assert_eq!(
        admin.cmd(&["LRANGE", "r", "0", "-1"]),
        format!("*1\r\n{}", bulk("x")).into_bytes()
    );
}

#[test]
fn waiters_are_served_first_come_first_served() {
    on_both(waiters_are_served_first_come_first_served_on);
}

fn waiters_are_served_first_come_first_served_on(port: u16) {
    let mut admin = RawConn::connect(port);
    let mut w: Vec<RawConn> = (0..3).map(|_| RawConn::connect(port)).collect();
    for (i, c) in w.iter_mut().enumerate() {
        send(c, &["BLPOP", "q", "0"]);
        wait_blocked(&mut admin, i + 1);
    }
    // One push of three elements serves all three, in blocking order.
    admin.cmd(&["RPUSH", "q", "1", "2", "3"]);
    for (i, c) in w.iter_mut().enumerate() {
        assert_eq!(c.read_raw_reply(), pair("q", &(i + 1).to_string()));
    }
    assert_eq!(admin.cmd(&["EXISTS", "q"]), b":0\r\n");
    // One element at a time: the longest waiter first each time.
    for (i, c) in w.iter_mut().enumerate() {
        send(c, &["BRPOP", "q", "0"]);
        wait_blocked(&mut admin, i + 1);
    }
    for (n, i) in [0usize, 1, 2].into_iter().enumerate() {
        admin.cmd(&["LPUSH", "q", &format!("e{n}")]);
        assert_eq!(w[i].read_raw_reply(), pair("q", &format!("e{n}")));
        for later in w.iter_mut().skip(i + 1) {
            assert!(silent_for(later, 50));
        }
    }
    // More elements than waiters: the rest stays.
    send(&mut w[0], &["BLPOP", "q", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["RPUSH", "q", "a", "b"]);
    assert_eq!(w[0].read_raw_reply(), pair("q", "a"));
    assert_eq!(
        admin.cmd(&["LRANGE", "q", "0", "-1"]),
        format!("*1\r\n{}", bulk("b")).into_bytes()
    );
}

#[test]
fn timeouts_are_fractional_seconds() {
    on_both(timeouts_are_fractional_seconds_on);
}

fn timeouts_are_fractional_seconds_on(port: u16) {
    let mut c = RawConn::connect(port);
    let cases: [(&[&str], &[u8]); 5] = [
        (&["BLPOP", "nosuch", "0.2"], b"*-1\r\n"),
        (&["BRPOP", "nosuch", "other", ".2"], b"*-1\r\n"),
        (&["BLMPOP", "0.2", "1", "nosuch", "LEFT"], b"*-1\r\n"),
        // Redis 7.0 answers every timed-out list wait with a null array,
        // BLMOVE's included (inside MULTI it is a null bulk string).
        (
            &["BLMOVE", "nosuch", "d", "LEFT", "RIGHT", "0.2"],
            b"*-1\r\n",
        ),
        (&["BRPOPLPUSH", "nosuch", "d", "2e-1"], b"*-1\r\n"),
    ];
    for (args, want) in cases {
        let t = Instant::now();
        assert_eq!(c.cmd(args), want, "{args:?}");
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(190) && took < Duration::from_secs(3),
            "{args:?} took {took:?}"
        );
    }
    assert_eq!(c.cmd(&["EXISTS", "d"]), b":0\r\n");
    // RESP3: both nulls are `_`.
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["BLPOP", "nosuch", "0.05"]), b"_\r\n");
    assert_eq!(
        c.cmd(&["BLMOVE", "nosuch", "d", "LEFT", "LEFT", "0.05"]),
        b"_\r\n"
    );
    // A key of another type does not shorten the wait.
    c.cmd(&["HELLO", "2"]);
    let mut other = RawConn::connect(port);
    send(&mut c, &["BLPOP", "k", "0.3"]);
    wait_blocked(&mut other, 1);
    other.cmd(&["SET", "k", "string"]);
    let t = Instant::now();
    assert_eq!(c.read_raw_reply(), b"*-1\r\n");
    assert!(t.elapsed() > Duration::from_millis(100));
}

#[test]
fn blmove_chains_serve_each_other() {
    on_both(blmove_chains_serve_each_other_on);
}

fn blmove_chains_serve_each_other_on(port: u16) {
    let mut admin = RawConn::connect(port);
    let mut a = RawConn::connect(port);
    let mut b = RawConn::connect(port);
    let mut c = RawConn::connect(port);
    send(&mut a, &["BLMOVE", "l1", "l2", "LEFT", "RIGHT", "0"]);
    send(&mut b, &["BLMOVE", "l2", "l3", "RIGHT", "LEFT", "0"]);
    send(&mut c, &["BLPOP", "l3", "0"]);
    wait_blocked(&mut admin, 3);
    admin.cmd(&["RPUSH", "l1", "x"]);
    assert_eq!(a.read_raw_reply(), bulk("x").into_bytes());
    assert_eq!(b.read_raw_reply(), bulk("x").into_bytes());
    assert_eq!(c.read_raw_reply(), pair("l3", "x"));
    for k in ["l1", "l2", "l3"] {
        assert_eq!(admin.cmd(&["EXISTS", k]), b":0\r\n", "{k}");
    }
    // A client moving a list into itself.
    send(&mut a, &["BLMOVE", "r", "r", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["RPUSH", "r", "1", "2"]);
    assert_eq!(a.read_raw_reply(), bulk("1").into_bytes());
    assert_eq!(
        admin.cmd(&["LRANGE", "r", "0", "-1"]),
        format!("*2\r\n{}{}", bulk("2"), bulk("1")).into_bytes()
    );
    // A destination of the wrong type when the source arrives: the waiter
    // gets WRONGTYPE and the element stays (Redis 7.0).
    send(&mut a, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["SET", "dst", "string"]);
    admin.cmd(&["RPUSH", "src", "v"]);
    assert_eq!(
        a.read_raw_reply(),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    assert_eq!(admin.cmd(&["LLEN", "src"]), b":1\r\n");
    wait_blocked(&mut admin, 0);
}

#[test]
fn key_deleted_renamed_or_retyped_while_blocked() {
    on_both(key_deleted_renamed_or_retyped_while_blocked_on);
}

fn key_deleted_renamed_or_retyped_while_blocked_on(port: u16) {
    let mut admin = RawConn::connect(port);
    let mut w = RawConn::connect(port);

    // Changed type: Redis 7.0 keeps the client blocked; a list appearing
    // there later serves it.
    send(&mut w, &["BLPOP", "k", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["SET", "k", "string"]);
    assert!(silent_for(&mut w, 150));
    admin.cmd(&["HSET", "k2", "f", "v"]);
    admin.cmd(&["RENAME", "k2", "k"]);
    assert!(silent_for(&mut w, 150));
    admin.cmd(&["DEL", "k"]);
    assert!(silent_for(&mut w, 100));
    admin.cmd(&["RPUSH", "k", "v"]);
    assert_eq!(w.read_raw_reply(), pair("k", "v"));

    // A list renamed onto the awaited key serves the waiter.
    send(&mut w, &["BLPOP", "k", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["RPUSH", "other", "r1", "r2"]);
    admin.cmd(&["RENAME", "other", "k"]);
    assert_eq!(w.read_raw_reply(), pair("k", "r1"));
    assert_eq!(
        admin.cmd(&["LRANGE", "k", "0", "-1"]),
        format!("*1\r\n{}", bulk("r2")).into_bytes()
    );
    admin.cmd(&["DEL", "k"]);

    // Renamed away or deleted before anything arrives: still waiting.
    send(&mut w, &["BLPOP", "k", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["SET", "k", "x"]);
    admin.cmd(&["RENAME", "k", "gone"]);
    assert!(silent_for(&mut w, 150));
    admin.cmd(&["LPUSH", "k", "late"]);
    assert_eq!(w.read_raw_reply(), pair("k", "late"));

    // Several keys, one of another type at the start: an error at once.
    admin.cmd(&["SET", "s1", "x"]);
    assert_eq!(
        w.cmd(&["BLPOP", "e1", "s1", "e2", "0"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    // Once blocked, a key turned into another type is passed over: the
    // waiter is served from the next key.
    admin.cmd(&["DEL", "s1"]);
    send(&mut w, &["BLPOP", "e1", "s1", "e2", "0"]);
    wait_blocked(&mut admin, 1);
    admin.cmd(&["SET", "s1", "y"]);
    admin.cmd(&["RPUSH", "e2", "two"]);
    assert_eq!(w.read_raw_reply(), pair("e2", "two"));

    // The first non-empty key in argument order is served.
    send(
        &mut w,
        &["BLMPOP", "0", "3", "a", "b", "c", "LEFT", "COUNT", "5"],
    );
    wait_blocked(&mut admin, 1);
    admin.cmd(&["RPUSH", "c", "c1"]);
    assert_eq!(
        w.read_raw_reply(),
        format!("*2\r\n{}*1\r\n{}", bulk("c"), bulk("c1")).into_bytes()
    );
    wait_blocked(&mut admin, 0);
}

#[test]
fn blocking_commands_inside_multi_do_not_block() {
    on_both(blocking_commands_inside_multi_do_not_block_on);
}

fn blocking_commands_inside_multi_do_not_block_on(port: u16) {
    let mut c = RawConn::connect(port);
    c.cmd(&["RPUSH", "full", "a"]);
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    for args in [
        &["BLPOP", "empty", "0"][..],
        &["BRPOP", "empty", "10"],
        &["BLMPOP", "0", "1", "empty", "LEFT"],
        &["BLMOVE", "empty", "d", "LEFT", "LEFT", "0"],
        &["BRPOPLPUSH", "empty", "d", "0"],
        &["BLPOP", "empty", "full", "0"],
        &["BLPOP", "full", "0"],
    ] {
        assert_eq!(c.cmd(args), b"+QUEUED\r\n");
    }
    let t = Instant::now();
    assert_eq!(
        c.cmd(&["EXEC"]),
        format!(
            "*7\r\n*-1\r\n*-1\r\n*-1\r\n$-1\r\n$-1\r\n{}*-1\r\n",
            String::from_utf8(pair("full", "a")).unwrap()
        )
        .into_bytes()
    );
    assert!(t.elapsed() < Duration::from_secs(2));
    // A push inside EXEC wakes a waiter once the transaction is over.
    let mut w = RawConn::connect(port);
    send(&mut w, &["BLPOP", "t", "0"]);
    wait_blocked(&mut c, 1);
    c.cmd(&["MULTI"]);
    c.cmd(&["RPUSH", "t", "1", "2"]);
    c.cmd(&["LPOP", "t"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        format!("*2\r\n:2\r\n{}", bulk("1")).into_bytes()
    );
    assert_eq!(w.read_raw_reply(), pair("t", "2"));
}

#[test]
fn client_unblock_ends_a_list_wait() {
    on_both(client_unblock_ends_a_list_wait_on);
}

fn client_unblock_ends_a_list_wait_on(port: u16) {
    let mut admin = RawConn::connect(port);
    let mut w = RawConn::connect(port);
    let id = String::from_utf8(w.cmd(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim().to_string();
    send(&mut w, &["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]);
    wait_blocked(&mut admin, 1);
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id]), b":1\r\n");
    assert_eq!(w.read_raw_reply(), b"*-1\r\n");
    send(&mut w, &["BLPOP", "src", "0"]);
    wait_blocked(&mut admin, 1);
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]), b":1\r\n");
    assert_eq!(
        w.read_raw_reply(),
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    wait_blocked(&mut admin, 0);
    // The connection is usable afterwards, and nothing was created.
    assert_eq!(w.cmd(&["EXISTS", "src", "dst"]), b":0\r\n");
}

#[test]
fn watch_sees_every_list_write() {
    on_both(watch_sees_every_list_write_on);
}

/// Each write from another connection fails a WATCHing client's EXEC
/// (Redis `signalModifiedKey`), and the no-op forms do not.
fn watch_sees_every_list_write_on(port: u16) {
    let mut w = RawConn::connect(port);
    let mut other = RawConn::connect(port);
    let writes: [(&[&str], bool); 24] = [
        (&["LPUSH", "l", "x"], true),
        (&["RPUSH", "l", "y"], true),
        (&["LPUSHX", "l", "x"], true),
        (&["RPUSHX", "l", "x"], true),
        (&["LPOP", "l"], true),
        (&["RPOP", "l", "1"], true),
        (&["LSET", "l", "0", "q"], true),
        (&["LINSERT", "l", "AFTER", "b", "r"], true),
        (&["LREM", "l", "1", "b"], true),
        (&["LTRIM", "l", "0", "-1"], true),
        (&["LMOVE", "l", "l", "LEFT", "RIGHT"], true),
        (&["RPOPLPUSH", "l", "other"], true),
        (&["LMOVE", "other", "l", "LEFT", "RIGHT"], true),
        (&["LMPOP", "1", "l", "LEFT"], true),
        (&["BLPOP", "l", "0"], true),
        (&["BLMOVE", "l", "l", "LEFT", "LEFT", "0"], true),
        // No-ops: nothing signalled.
        (&["LPOP", "l", "0"], false),
        (&["LREM", "l", "0", "nosuch"], false),
        (&["LINSERT", "l", "AFTER", "nosuch", "r"], false),
        (&["LRANGE", "l", "0", "-1"], false),
        (&["LPOS", "l", "x"], false),
        (&["LMOVE", "nosuch", "l", "LEFT", "LEFT"], false),
        (&["LPUSHX", "nosuch", "x"], false),
        (&["LINDEX", "l", "0"], false),
    ];
    for (cmd, signals) in writes {
        other.cmd(&["DEL", "l", "other"]);
        other.cmd(&["RPUSH", "l", "a", "b", "c"]);
        other.cmd(&["RPUSH", "other", "o"]);
        assert_eq!(w.cmd(&["WATCH", "l"]), b"+OK\r\n");
        let r = other.cmd(cmd);
        assert!(!r.starts_with(b"-"), "{cmd:?}: {}", support::escape(&r));
        w.cmd(&["MULTI"]);
        w.cmd(&["PING"]);
        let exec = w.cmd(&["EXEC"]);
        let want: &[u8] = if signals {
            b"*-1\r\n"
        } else {
            b"*1\r\n+PONG\r\n"
        };
        assert_eq!(support::escape(&exec), support::escape(want), "{cmd:?}");
    }
}
