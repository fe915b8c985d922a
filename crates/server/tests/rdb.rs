//! RDB files end to end (issue 24, item 1): Cairn with `snapshot-format
//! rdb` writes a `dump.rdb` that `redis-check-rdb` accepts and a real
//! redis-server 7.0 starts from with every key equal (value, encoding,
//! TTL, DUMP bytes where the layout is the value's), and Cairn started in
//! the directory of a redis-server's `dump.rdb` holds the same keys; a
//! truncated or corrupted file stops start-up with the file and offset.
//! The tests that need redis-server skip without it (outside CI).
mod support;

use redis::{Connection, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{int, ok, q, redis_client, start_cairn, start_redis, TestDir};

/// A test's own directory, removed on drop.
fn scratch(name: &str) -> TestDir {
    TestDir::new("rdb", name)
}

/// The RDB file a server in `dir` saves.
fn dump_file(dir: &TestDir) -> PathBuf {
    dir.0.join("dump.rdb")
}

/// Redis 7.0's encoding defaults, for both servers (Cairn's own
/// hash-max-listpack-value default is larger).
const LIMITS: &[(&str, &str)] = &[
    ("hash-max-listpack-entries", "512"),
    ("hash-max-listpack-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("set-max-intset-entries", "512"),
    ("list-max-listpack-size", "-2"),
];

fn set_limits(c: &mut Connection) {
    for (name, value) in LIMITS {
        ok(c, &["CONFIG", "SET", name, value]);
    }
}

fn run(c: &mut Connection, args: &[String]) {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    let _: Value = cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// Every type in its small and large encodings, streams with groups,
/// tombstones and pending entries, expiring keys, three databases and a
/// function library.
fn build(c: &mut Connection) {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut cmds = vec![
        s(&["SET", "s:small", "hello"]),
        s(&["SET", "s:int", "-123456"]),
        s(&["SET", "s:big-int", "9223372036854775807"]),
        s(&["SET", "s:empty", ""]),
        s(&["SET", "s:lzf", &"compress me ".repeat(200)]),
        s(&["SET", "s:ttl", "v", "PX", "100000000"]),
        s(&["RPUSH", "l:small", "a", "1", "-70000", "x"]),
        s(&["HSET", "h:small", "f", "v", "n", "12"]),
        s(&["HSET", "h:long", "f", &"v".repeat(100)]),
        s(&["ZADD", "z:small", "1", "a", "2.5", "b", "-inf", "c"]),
        s(&["SADD", "set:ints", "1", "2", "-3", "100000"]),
        s(&["SADD", "set:strs", "a", "b", "1"]),
        s(&["PEXPIRE", "set:strs", "200000000"]),
    ];
    let mut big = s(&["RPUSH", "l:big"]);
    big.extend((0..3000).map(|i| format!("element-{i}")));
    cmds.push(big);
    let mut big = s(&["HSET", "h:big"]);
    big.extend((0..700).flat_map(|i| [format!("f{i}"), format!("v{i}")]));
    cmds.push(big);
    let mut big = s(&["ZADD", "z:big"]);
    big.extend((0..300).flat_map(|i| [format!("{}", i as f64 / 7.0), format!("m{i}")]));
    cmds.push(big);
    let mut big = s(&["SADD", "set:bigints"]);
    big.extend((0..600).map(|i| i.to_string()));
    cmds.push(big);
    // Streams: 350 entries over four nodes, some with their own fields,
    // tombstones from XDEL and an exact MAXLEN trim, two groups with
    // pending entries on two consumers, one idle consumer.
    for i in 1..=350 {
        let id = format!("{}-{}", 1_700_000_000_000u64 + i / 4, i % 4);
        if i % 9 == 0 {
            cmds.push(s(&["XADD", "x:big", &id, "other", &i.to_string()]));
        } else {
            cmds.push(s(&[
                "XADD",
                "x:big",
                &id,
                "name",
                "sensor",
                "temp",
                &i.to_string(),
            ]));
        }
    }
    cmds.push(s(&["XDEL", "x:big", "1700000000010-0", "1700000000050-2"]));
    cmds.push(s(&["XTRIM", "x:big", "MAXLEN", "330"]));
    cmds.push(s(&["XGROUP", "CREATE", "x:big", "g1", "0"]));
    cmds.push(s(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "alice",
        "COUNT",
        "3",
        "STREAMS",
        "x:big",
        ">",
    ]));
    cmds.push(s(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "bob",
        "COUNT",
        "2",
        "STREAMS",
        "x:big",
        ">",
    ]));
    cmds.push(s(&["XACK", "x:big", "g1", "1700000000005-1"]));
    cmds.push(s(&["XGROUP", "CREATECONSUMER", "x:big", "g1", "idle"]));
    cmds.push(s(&["XGROUP", "CREATE", "x:big", "g0", "$"]));
    for i in 1..=5 {
        cmds.push(s(&[
            "XADD",
            "x:small",
            &format!("1-{i}"),
            "f",
            &format!("v{i}"),
        ]));
    }
    cmds.push(s(&["XGROUP", "CREATE", "x:empty", "g", "$", "MKSTREAM"]));
    cmds.push(s(&["SELECT", "3"]));
    cmds.push(s(&["SET", "db3:key", "in three"]));
    cmds.push(s(&["XADD", "db3:x", "5-5", "a", "b"]));
    cmds.push(s(&["SELECT", "9"]));
    cmds.push(s(&["HSET", "db9:h", "a", "1"]));
    cmds.push(s(&["PEXPIRE", "db9:h", "300000000"]));
    cmds.push(s(&["SELECT", "0"]));
    cmds.push(s(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=rdblib\nredis.register_function('rdbfunc', function(keys, args) return 7 end)",
    ]));
    for cmd in &cmds {
        run(c, cmd);
    }
}

/// A key's type, contents (canonical order) and encoding.
fn describe(c: &mut Connection, key: &str) -> (String, Vec<Vec<u8>>, String) {
    let t: String = q(c, &["TYPE", key]);
    let mut items: Vec<Vec<u8>> = match t.as_str() {
        "string" => vec![q(c, &["GET", key])],
        "list" => q(c, &["LRANGE", key, "0", "-1"]),
        "set" => q(c, &["SMEMBERS", key]),
        "zset" => q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "hash" => q(c, &["HGETALL", key]),
        "stream" => {
            let entries: Value = q(c, &["XRANGE", key, "-", "+"]);
            let groups: Value = q(c, &["XINFO", "GROUPS", key]);
            let len: i64 = int(c, &["XLEN", key]);
            vec![
                format!("{entries:?}").into_bytes(),
                format!("{groups:?}").into_bytes(),
                len.to_string().into_bytes(),
            ]
        }
        other => panic!("{key}: type {other}"),
    };
    if t == "set" {
        items.sort();
    }
    if t == "hash" {
        let mut pairs: Vec<Vec<Vec<u8>>> = items.chunks(2).map(|c| c.to_vec()).collect();
        pairs.sort();
        items = pairs.concat();
    }
    let enc: String = q(c, &["OBJECT", "ENCODING", key]);
    let enc = if enc == "embstr" { "raw".into() } else { enc };
    (t, items, enc)
}

/// Every key of every database of `from` is in `to` with the same type,
/// contents, encoding and TTL (within a few seconds), and the same DUMP
/// bytes unless a hash table's own order shows in them.
fn compare(from: &mut Connection, to: &mut Connection) -> usize {
    let mut n = 0;
    for db in 0..16 {
        let d = db.to_string();
        ok(from, &["SELECT", &d]);
        ok(to, &["SELECT", &d]);
        let mut keys: Vec<String> = q(from, &["KEYS", "*"]);
        keys.sort();
        let mut theirs: Vec<String> = q(to, &["KEYS", "*"]);
        theirs.sort();
        assert_eq!(theirs, keys, "keys of db {db}");
        for k in &keys {
            let want = describe(from, k);
            assert_eq!(describe(to, k), want, "db {db} key {k}");
            let (a, b) = (int(from, &["PTTL", k]), int(to, &["PTTL", k]));
            assert_eq!(a < 0, b < 0, "TTL of {k}: {a} vs {b}");
            assert!((a - b).abs() < 5_000, "TTL of {k}: {a} vs {b}");
            if want.2 != "hashtable" {
                let da: Vec<u8> = q(from, &["DUMP", k]);
                let db_: Vec<u8> = q(to, &["DUMP", k]);
                assert_eq!(db_, da, "DUMP of {k}");
            }
            n += 1;
        }
    }
    ok(from, &["SELECT", "0"]);
    ok(to, &["SELECT", "0"]);
    let fa: Value = q(from, &["FUNCTION", "LIST"]);
    let fb: Value = q(to, &["FUNCTION", "LIST"]);
    assert_eq!(format!("{fb:?}"), format!("{fa:?}"), "FUNCTION LIST");
    n
}

/// Waits until a freshly started server has loaded its file.
fn wait_loaded(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match redis::cmd("PING").query::<String>(c) {
            Ok(_) => return,
            Err(e)
                if Instant::now() < deadline
                    && e.to_string().to_lowercase().contains("loading") =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("PING: {e}"),
        }
    }
}

fn redis_check_rdb(file: &Path) -> Option<(bool, String)> {
    let out = std::process::Command::new("redis-check-rdb")
        .arg(file)
        .output()
        .ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    ))
}

#[test]
fn cairn_rdb_files_start_redis_with_every_key() {
    let dir = scratch("to-redis");
    let cairn = start_cairn(&[
        "--dir",
        dir.s(),
        "--dbfilename",
        "dump.rdb",
        "--snapshot-format",
        "rdb",
        "--enable-protected-configs",
        "yes",
    ]);
    let mut c = redis_client(cairn.port);
    set_limits(&mut c);
    build(&mut c);
    ok(&mut c, &["SAVE"]);
    let bytes = std::fs::read(dump_file(&dir)).unwrap();
    assert_eq!(&bytes[..9], b"REDIS0010");
    match redis_check_rdb(&dump_file(&dir)) {
        Some((good, out)) => assert!(good, "redis-check-rdb refused Cairn's file:\n{out}"),
        None if std::env::var_os("CI").is_some() => panic!("redis-check-rdb is required in CI"),
        None => {}
    }
    let Some(redis) = start_redis(&["--dir", dir.s(), "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut r = redis_client(redis.port);
    wait_loaded(&mut r);
    let n = compare(&mut c, &mut r);
    assert!(n > 20, "{n} keys compared");
    // BGSAVE writes the same format from its background cut.
    ok(&mut c, &["CONFIG", "SET", "dbfilename", "bg.rdb"]);
    let _: Value = q(&mut c, &["BGSAVE"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !String::from_utf8_lossy(&q::<Vec<u8>>(&mut c, &["INFO", "persistence"]))
        .contains("rdb_bgsave_in_progress:0")
    {
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bg = dir.0.join("bg.rdb");
    assert_eq!(&std::fs::read(&bg).unwrap()[..9], b"REDIS0010");
    if let Some((good, out)) = redis_check_rdb(&bg) {
        assert!(good, "{out}");
    }
}

#[test]
fn cairn_starts_from_a_redis_dump_rdb() {
    let dir = scratch("from-redis");
    let Some(redis) = start_redis(&["--dir", dir.s(), "--dbfilename", "dump.rdb"]) else {
        return;
    };
    let mut r = redis_client(redis.port);
    set_limits(&mut r);
    build(&mut r);
    ok(&mut r, &["SAVE"]);
    let mut args = vec!["--dir", dir.s(), "--dbfilename", "dump.rdb"];
    for (name, value) in LIMITS {
        args.push(Box::leak(format!("--{name}").into_boxed_str()));
        args.push(value);
    }
    let cairn = start_cairn(&args);
    let mut c = redis_client(cairn.port);
    wait_loaded(&mut c);
    let n = compare(&mut r, &mut c);
    assert!(n > 20, "{n} keys compared");
    // The stream's groups work on: a new reader gets the next entry
    // (the trim left entries from 1700000000004-3 on; alice and bob had
    // the first five).
    let v: Value = q(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g1",
            "carol",
            "COUNT",
            "1",
            "STREAMS",
            "x:big",
            ">",
        ],
    );
    assert!(format!("{v:?}").contains("1700000000006-0"), "{v:?}");
    assert_eq!(
        int(&mut c, &["FCALL", "rdbfunc", "0"]),
        7,
        "the library came with the file"
    );
    // `cairn check-snapshot` reads RDB files too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["check-snapshot", dump_file(&dir).to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("OK: RDB file"), "{text}");
}

#[test]
fn a_damaged_rdb_stops_start_up_with_file_and_offset() {
    let dir = scratch("damaged");
    {
        let cairn = start_cairn(&[
            "--dir",
            dir.s(),
            "--dbfilename",
            "dump.rdb",
            "--snapshot-format",
            "rdb",
        ]);
        let mut c = redis_client(cairn.port);
        for i in 0..50 {
            ok(&mut c, &["SET", &format!("key{i}"), &format!("value{i}")]);
        }
        ok(&mut c, &["SAVE"]);
    }
    let good = std::fs::read(dump_file(&dir)).unwrap();
    // Cairn -> Cairn through its own RDB file.
    {
        let cairn = start_cairn(&["--dir", dir.s(), "--dbfilename", "dump.rdb"]);
        let mut c = redis_client(cairn.port);
        wait_loaded(&mut c);
        assert_eq!(int(&mut c, &["DBSIZE"]), 50);
        let v: String = q(&mut c, &["GET", "key7"]);
        assert_eq!(v, "value7");
    }
    let truncated = &good[..good.len() - 20];
    let mut flipped = good.clone();
    let mid = good.len() / 2;
    flipped[mid] ^= 0x01;
    for (what, bytes) in [("truncated", truncated), ("flipped", &flipped[..])] {
        std::fs::write(dump_file(&dir), bytes).unwrap();
        let mut s = start_cairn(&["--dir", dir.s(), "--dbfilename", "dump.rdb"]);
        let st = s
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{what}: start-up must stop"));
        assert!(!st.success(), "{what}");
        let log = s.log();
        assert!(
            log.contains("Fatal error loading the snapshot"),
            "{what}: {log}"
        );
        assert!(log.contains("dump.rdb at offset"), "{what}: {log}");
    }
}
