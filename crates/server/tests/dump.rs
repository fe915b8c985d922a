//! DUMP, RESTORE and MIGRATE end to end (Redis 7.0 `cluster.c`), through
//! the `redis` crate: payloads of every type and encoding (streams with
//! groups, tombstones and pending entries included) dumped by a real
//! redis-server 7.0 and restored into Cairn and the reverse, with TTL,
//! ABSTTL, IDLETIME and FREQ; the errors in Redis's order; MIGRATE from
//! Cairn to Redis, from Redis to Cairn (Redis's own MIGRATE client against
//! Cairn's RESTORE) and from Cairn to Cairn, with COPY, REPLACE, AUTH,
//! AUTH2 and KEYS. The tests that need redis-server skip without it
//! (outside CI).
mod support;

use redis::{Connection, Value};
use support::{err, int, ok, q, redis_client, start_cairn, start_redis, Server};

/// Every key the type tests build, as (name, commands to build it).
fn fixtures() -> Vec<(String, Vec<Vec<String>>)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut f: Vec<(String, Vec<Vec<String>>)> = vec![
        ("s:small".into(), vec![s(&["SET", "s:small", "hello"])]),
        ("s:int".into(), vec![s(&["SET", "s:int", "-123456"])]),
        (
            "s:big-int".into(),
            vec![s(&["SET", "s:big-int", "9223372036854775807"])],
        ),
        ("s:empty".into(), vec![s(&["SET", "s:empty", ""])]),
        (
            "s:lzf".into(),
            vec![s(&["SET", "s:lzf", &"compress me ".repeat(200)])],
        ),
        (
            "l:small".into(),
            vec![s(&["RPUSH", "l:small", "a", "1", "-70000", "x"])],
        ),
        (
            "h:small".into(),
            vec![s(&["HSET", "h:small", "f", "v", "n", "12"])],
        ),
        (
            "z:small".into(),
            vec![s(&["ZADD", "z:small", "1", "a", "2.5", "b", "-inf", "c"])],
        ),
        (
            "set:ints".into(),
            vec![s(&["SADD", "set:ints", "1", "2", "-3", "100000"])],
        ),
        (
            "set:strs".into(),
            vec![s(&["SADD", "set:strs", "a", "b", "1"])],
        ),
    ];
    let mut big_list = s(&["RPUSH", "l:big"]);
    big_list.extend((0..3000).map(|i| format!("element-{i}")));
    f.push(("l:big".into(), vec![big_list]));
    let mut big_hash = s(&["HSET", "h:big"]);
    big_hash.extend((0..700).flat_map(|i| [format!("f{i}"), format!("v{i}")]));
    f.push(("h:big".into(), vec![big_hash]));
    f.push((
        "h:long".into(),
        vec![s(&["HSET", "h:long", "f", &"v".repeat(100)])],
    ));
    let mut big_zset = s(&["ZADD", "z:big"]);
    big_zset.extend((0..300).flat_map(|i| [format!("{}", i as f64 / 7.0), format!("m{i}")]));
    f.push(("z:big".into(), vec![big_zset]));
    let mut big_set = s(&["SADD", "set:bigints"]);
    big_set.extend((0..600).map(|i| i.to_string()));
    f.push(("set:bigints".into(), vec![big_set]));
    // Streams: several nodes, entries with their own fields, tombstones
    // (XDEL, exact trim), groups with pending entries and consumers.
    let mut x = Vec::new();
    for i in 1..=260u64 {
        let id = format!("{}-{}", 1_700_000_000_000 + i / 3, i % 3);
        let v = i.to_string();
        x.push(if i % 11 == 0 {
            s(&["XADD", "x:groups", &id, "own", &v])
        } else {
            s(&["XADD", "x:groups", &id, "f", "v", "n", &v])
        });
    }
    x.push(s(&[
        "XDEL",
        "x:groups",
        "1700000000020-0",
        "1700000000070-1",
    ]));
    x.push(s(&["XTRIM", "x:groups", "MAXLEN", "250"]));
    x.push(s(&["XGROUP", "CREATE", "x:groups", "g", "0"]));
    x.push(s(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "COUNT",
        "4",
        "STREAMS",
        "x:groups",
        ">",
    ]));
    x.push(s(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c2",
        "COUNT",
        "2",
        "STREAMS",
        "x:groups",
        ">",
    ]));
    x.push(s(&["XGROUP", "CREATE", "x:groups", "later", "$"]));
    f.push(("x:groups".into(), x));
    f.push((
        "x:small".into(),
        vec![s(&["XADD", "x:small", "5-1", "a", "1", "b", "two"])],
    ));
    f.push((
        "x:empty".into(),
        vec![s(&["XGROUP", "CREATE", "x:empty", "g", "$", "MKSTREAM"])],
    ));
    f
}

fn build(con: &mut Connection, cmds: &[Vec<String>]) {
    for c in cmds {
        let mut cmd = redis::cmd(&c[0]);
        for a in &c[1..] {
            cmd.arg(a);
        }
        let _: Value = cmd.query(con).unwrap();
    }
}

/// A key's type, contents (in a canonical order) and encoding.
fn describe(con: &mut Connection, key: &str) -> (String, Vec<Vec<u8>>, String) {
    let t: String = q(con, &["TYPE", key]);
    let mut items: Vec<Vec<u8>> = match t.as_str() {
        "string" => vec![q(con, &["GET", key])],
        "list" => q(con, &["LRANGE", key, "0", "-1"]),
        "set" => q(con, &["SMEMBERS", key]),
        "zset" => q(con, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "hash" => q(con, &["HGETALL", key]),
        "stream" => {
            let entries: Value = q(con, &["XRANGE", key, "-", "+"]);
            let groups: Value = q(con, &["XINFO", "GROUPS", key]);
            vec![
                format!("{entries:?}").into_bytes(),
                format!("{groups:?}").into_bytes(),
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
    let enc: String = q(con, &["OBJECT", "ENCODING", key]);
    // Redis names short strings embstr; Cairn has no such encoding.
    let enc = if enc == "embstr" {
        "raw".to_string()
    } else {
        enc
    };
    (t, items, enc)
}

fn dump(con: &mut Connection, key: &str) -> Vec<u8> {
    let v: Option<Vec<u8>> = q(con, &["DUMP", key]);
    v.unwrap_or_else(|| panic!("DUMP {key}: nil"))
}

fn restore(
    con: &mut Connection,
    key: &str,
    ttl: &str,
    payload: &[u8],
    opts: &[&str],
) -> redis::RedisResult<String> {
    let mut c = redis::cmd("RESTORE");
    c.arg(key).arg(ttl).arg(payload);
    for o in opts {
        c.arg(*o);
    }
    c.query(con)
}

/// Both servers with the same encoding limits, Redis 7.0's defaults
/// (Cairn's own hash-max-listpack-value default is larger).
fn pair() -> Option<(Server, Server)> {
    let redis = start_redis(&[])?;
    let cairn = start_cairn(&["--enable-debug-command", "yes"]);
    for port in [redis.port, cairn.port] {
        let mut c = redis_client(port);
        for (name, value) in [
            ("hash-max-listpack-entries", "512"),
            ("hash-max-listpack-value", "64"),
            ("zset-max-listpack-entries", "128"),
            ("zset-max-listpack-value", "64"),
            ("set-max-intset-entries", "512"),
            ("list-max-listpack-size", "-2"),
        ] {
            ok(&mut c, &["CONFIG", "SET", name, value]);
        }
    }
    Some((redis, cairn))
}

#[test]
fn every_type_moves_from_redis_to_cairn_and_back() {
    let Some((redis, cairn)) = pair() else { return };
    let (mut r, mut c) = (redis_client(redis.port), redis_client(cairn.port));
    for (key, cmds) in fixtures() {
        build(&mut r, &cmds);
        let want = describe(&mut r, &key);
        let payload = dump(&mut r, &key);
        assert_eq!(
            restore(&mut c, &key, "0", &payload, &[]).unwrap(),
            "OK",
            "{key}"
        );
        assert_eq!(describe(&mut c, &key), want, "Redis -> Cairn {key}");
        // Back again, under another name, into Redis.
        let back = dump(&mut c, &key);
        let other = format!("{key}:back");
        assert_eq!(
            restore(&mut r, &other, "0", &back, &[]).unwrap(),
            "OK",
            "{key}"
        );
        assert_eq!(describe(&mut r, &other), want, "Cairn -> Redis {key}");
        // Byte-identical payloads where the layout is the value's (hash
        // tables iterate in their own order).
        if !matches!(want.2.as_str(), "hashtable") {
            assert_eq!(back, payload, "payload of {key}");
        }
    }
}

#[test]
fn keys_built_on_cairn_restore_into_redis() {
    let Some((redis, cairn)) = pair() else { return };
    let (mut r, mut c) = (redis_client(redis.port), redis_client(cairn.port));
    for (key, cmds) in fixtures() {
        build(&mut c, &cmds);
        let want = describe(&mut c, &key);
        let payload = dump(&mut c, &key);
        assert_eq!(
            restore(&mut r, &key, "0", &payload, &[]).unwrap(),
            "OK",
            "{key}"
        );
        assert_eq!(describe(&mut r, &key), want, "Cairn -> Redis {key}");
    }
}

#[test]
fn ttl_absttl_idletime_and_freq() {
    let cairn = start_cairn(&["--enable-debug-command", "yes"]);
    let mut c = redis_client(cairn.port);
    ok(&mut c, &["SET", "src", "v"]);
    let p = dump(&mut c, "src");
    restore(&mut c, "rel", "100000", &p, &[]).unwrap();
    let pttl = int(&mut c, &["PTTL", "rel"]);
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let at = (now_ms + 50_000).to_string();
    restore(&mut c, "abs", &at, &p, &["ABSTTL"]).unwrap();
    assert_eq!(int(&mut c, &["PEXPIRETIME", "abs"]), now_ms as i64 + 50_000);
    // A deadline already past creates nothing; with REPLACE it deletes.
    assert_eq!(restore(&mut c, "gone", "1", &p, &["ABSTTL"]).unwrap(), "OK");
    assert_eq!(int(&mut c, &["EXISTS", "gone"]), 0);
    assert_eq!(
        restore(&mut c, "abs", "1", &p, &["ABSTTL", "REPLACE"]).unwrap(),
        "OK"
    );
    assert_eq!(int(&mut c, &["EXISTS", "abs"]), 0);
    restore(&mut c, "idle", "0", &p, &["IDLETIME", "1000"]).unwrap();
    let idle = int(&mut c, &["OBJECT", "IDLETIME", "idle"]);
    assert!((1000..1010).contains(&idle), "{idle}");
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    restore(&mut c, "hot", "0", &p, &["FREQ", "100"]).unwrap();
    assert_eq!(int(&mut c, &["OBJECT", "FREQ", "hot"]), 100);
    // Under LFU, IDLETIME is accepted and ignored (objectSetLRUOrLFU).
    restore(&mut c, "idle2", "0", &p, &["IDLETIME", "5"]).unwrap();
}

#[test]
fn restore_errors_in_redis_order() {
    let cairn = start_cairn(&[]);
    let mut c = redis_client(cairn.port);
    ok(&mut c, &["SET", "k", "v"]);
    let p = dump(&mut c, "k");
    let e = |r: redis::RedisResult<String>| support::err_line(&r.unwrap_err());
    assert_eq!(
        e(restore(&mut c, "k", "0", &p, &[])),
        "BUSYKEY Target key name already exists."
    );
    // BUSYKEY comes before a bad TTL and a bad payload.
    assert_eq!(
        e(restore(&mut c, "k", "-1", b"junk", &[])),
        "BUSYKEY Target key name already exists."
    );
    assert_eq!(
        e(restore(&mut c, "n", "-1", &p, &[])),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(
        e(restore(&mut c, "n", "x", &p, &[])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        e(restore(&mut c, "n", "0", b"junk", &[])),
        "ERR DUMP payload version or checksum are wrong"
    );
    let mut bad = p.clone();
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    assert_eq!(
        e(restore(&mut c, "n", "0", &bad, &[])),
        "ERR DUMP payload version or checksum are wrong"
    );
    // A well-sealed payload whose object is broken.
    let mut body = vec![2u8, 5, 1, b'a'];
    seal(&mut body);
    assert_eq!(
        e(restore(&mut c, "n", "0", &body, &[])),
        "ERR Bad data format"
    );
    assert_eq!(
        e(restore(&mut c, "n", "0", &p, &["IDLETIME", "-1"])),
        "ERR Invalid IDLETIME value, must be >= 0"
    );
    assert_eq!(
        e(restore(&mut c, "n", "0", &p, &["FREQ", "256"])),
        "ERR Invalid FREQ value, must be >= 0 and <= 255"
    );
    assert_eq!(
        e(restore(
            &mut c,
            "n",
            "0",
            &p,
            &["IDLETIME", "1", "FREQ", "1"]
        )),
        "ERR syntax error"
    );
    assert_eq!(
        e(restore(
            &mut c,
            "n",
            "0",
            &p,
            &["FREQ", "1", "IDLETIME", "1"]
        )),
        "ERR syntax error"
    );
    assert_eq!(
        e(restore(&mut c, "n", "0", &p, &["BOGUS"])),
        "ERR syntax error"
    );
    assert_eq!(
        e(restore(&mut c, "n", "0", &p, &["IDLETIME"])),
        "ERR syntax error"
    );
    let nil: Option<Vec<u8>> = q(&mut c, &["DUMP", "missing"]);
    assert_eq!(nil, None);
    // RESTORE-ASKING is RESTORE outside a cluster.
    let r: String = redis::cmd("RESTORE-ASKING")
        .arg("ask")
        .arg(0)
        .arg(&p)
        .query(&mut c)
        .unwrap();
    assert_eq!(r, "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "ask"]), "v");
}

/// DUMP's footer: RDB version 10 and the CRC-64 (Jones) of the rest.
fn seal(p: &mut Vec<u8>) {
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = cairn_persist::rdb::crc64(0, p);
    p.extend_from_slice(&crc.to_le_bytes());
}

fn migrate(con: &mut Connection, args: &[&str]) -> redis::RedisResult<String> {
    let mut c = redis::cmd("MIGRATE");
    for a in args {
        c.arg(*a);
    }
    c.query(con)
}

#[test]
fn migrate_cairn_to_redis_and_redis_to_cairn() {
    let Some((redis, cairn)) = pair() else { return };
    let (mut r, mut c) = (redis_client(redis.port), redis_client(cairn.port));
    let (rp, cp) = (redis.port.to_string(), cairn.port.to_string());
    for (_, cmds) in fixtures() {
        build(&mut c, &cmds);
    }
    assert_eq!(int(&mut c, &["PEXPIRE", "s:small", "100000"]), 1);
    let keys: Vec<String> = fixtures().into_iter().map(|f| f.0).collect();
    let wants: Vec<_> = keys.iter().map(|k| describe(&mut c, k)).collect();
    let mut args = vec!["127.0.0.1", &rp, "", "3", "5000", "KEYS"];
    args.extend(keys.iter().map(String::as_str));
    assert_eq!(migrate(&mut c, &args).unwrap(), "OK");
    assert_eq!(int(&mut c, &["DBSIZE"]), 0, "MIGRATE without COPY deletes");
    ok(&mut r, &["SELECT", "3"]);
    for (k, want) in keys.iter().zip(&wants) {
        assert_eq!(&describe(&mut r, k), want, "{k} on Redis");
    }
    let pttl = int(&mut r, &["PTTL", "s:small"]);
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
    // And back: Redis's MIGRATE client against Cairn's RESTORE.
    let mut args = vec!["127.0.0.1", &cp, "", "0", "5000", "KEYS"];
    args.extend(keys.iter().map(String::as_str));
    assert_eq!(migrate(&mut r, &args).unwrap(), "OK");
    for (k, want) in keys.iter().zip(&wants) {
        assert_eq!(&describe(&mut c, k), want, "{k} back on Cairn");
    }
    assert!(int(&mut c, &["PTTL", "s:small"]) > 80_000);
    // Redis -> Cairn once more with COPY and REPLACE of a key Cairn has.
    ok(&mut r, &["SET", "one", "redis"]);
    ok(&mut c, &["SET", "one", "cairn"]);
    let e = migrate(&mut r, &["127.0.0.1", &cp, "one", "0", "5000", "COPY"]).unwrap_err();
    assert!(support::err_line(&e).contains("BUSYKEY"), "{e}");
    assert_eq!(
        migrate(
            &mut r,
            &["127.0.0.1", &cp, "one", "0", "5000", "COPY", "REPLACE"]
        )
        .unwrap(),
        "OK"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "one"]), "redis");
    assert_eq!(q::<String>(&mut r, &["GET", "one"]), "redis");
}

#[test]
fn migrate_cairn_to_cairn_with_options_and_errors() {
    let a = start_cairn(&[]);
    let b = start_cairn(&["--requirepass", "secret"]);
    let mut ca = redis_client(a.port);
    let bp = b.port.to_string();
    let mut cb = redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", b.port))
        .unwrap()
        .get_connection()
        .unwrap();
    ok(&mut ca, &["SET", "k1", "v1"]);
    assert_eq!(int(&mut ca, &["RPUSH", "k2", "a", "b"]), 2);
    // No password: the target's error, nothing deleted.
    let e = migrate(&mut ca, &["127.0.0.1", &bp, "k1", "0", "5000"]).unwrap_err();
    assert_eq!(
        support::err_line(&e),
        "ERR Target instance replied with error: NOAUTH Authentication required."
    );
    assert_eq!(int(&mut ca, &["EXISTS", "k1"]), 1);
    // AUTH and COPY: the source keeps its key.
    assert_eq!(
        migrate(
            &mut ca,
            &[
                "127.0.0.1",
                &bp,
                "k1",
                "0",
                "5000",
                "COPY",
                "AUTH",
                "secret"
            ]
        )
        .unwrap(),
        "OK"
    );
    assert_eq!(int(&mut ca, &["EXISTS", "k1"]), 1);
    assert_eq!(q::<String>(&mut cb, &["GET", "k1"]), "v1");
    // Again: BUSYKEY from the target, reported as Redis words it.
    let e = migrate(
        &mut ca,
        &["127.0.0.1", &bp, "k1", "0", "5000", "AUTH", "secret"],
    )
    .unwrap_err();
    assert_eq!(
        support::err_line(&e),
        "ERR Target instance replied with error: BUSYKEY Target key name already exists."
    );
    // AUTH2 with the default user, REPLACE, KEYS, a missing key among them.
    ok(&mut ca, &["SET", "k1", "v1-new"]);
    let r = migrate(
        &mut ca,
        &[
            "127.0.0.1",
            &bp,
            "",
            "2",
            "5000",
            "REPLACE",
            "AUTH2",
            "default",
            "secret",
            "KEYS",
            "k1",
            "k2",
            "nope",
        ],
    );
    assert_eq!(r.unwrap(), "OK");
    assert_eq!(int(&mut ca, &["EXISTS", "k1", "k2"]), 0);
    ok(&mut cb, &["SELECT", "2"]);
    assert_eq!(q::<String>(&mut cb, &["GET", "k1"]), "v1-new");
    assert_eq!(
        q::<Vec<String>>(&mut cb, &["LRANGE", "k2", "0", "-1"]),
        ["a", "b"]
    );
    // Nothing to move; argument errors; nobody listening.
    let r = migrate(&mut ca, &["127.0.0.1", &bp, "k1", "0", "5000"]).unwrap();
    assert_eq!(r, "NOKEY");
    assert_eq!(
        err(
            &mut ca,
            &["MIGRATE", "127.0.0.1", &bp, "k1", "0", "5000", "KEYS", "x"]
        ),
        "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
    );
    assert_eq!(
        err(
            &mut ca,
            &["MIGRATE", "127.0.0.1", &bp, "k1", "0", "5000", "AUTH"]
        ),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut ca, &["MIGRATE", "127.0.0.1", &bp, "k1", "0", "x"]),
        "ERR value is not an integer or out of range"
    );
    ok(&mut ca, &["SET", "k3", "v"]);
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    // Redis's blocking connect reports success and the write fails.
    assert_eq!(
        err(&mut ca, &["MIGRATE", "127.0.0.1", &dead, "k3", "0", "1000"]),
        "IOERR error or timeout writing to target instance"
    );
    assert_eq!(
        err(
            &mut ca,
            &["MIGRATE", "no-such-host.invalid", "1", "k3", "0", "1000"]
        ),
        "IOERR error or timeout connecting to the client"
    );
    assert_eq!(int(&mut ca, &["EXISTS", "k3"]), 1);
}

/// RESTORE journals itself with its TTL made absolute (or `DEL` when a
/// past deadline replaced a key), MIGRATE the `DEL` of the keys it moved:
/// after a restart from the journal every key is as it was, TTLs to the
/// millisecond.
#[test]
fn restore_and_migrate_replay_from_the_journal() {
    let dir = std::env::temp_dir().join(format!("cairn-dump-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let args = [
        "--dir",
        d,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ];
    let target = start_cairn(&[]);
    let tp = target.port.to_string();
    let (rel_at, kept) = {
        let cairn = start_cairn(&args);
        let mut c = redis_client(cairn.port);
        wait_ready(&mut c);
        assert_eq!(int(&mut c, &["RPUSH", "src", "a", "b", "c"]), 3);
        let p = dump(&mut c, "src");
        restore(&mut c, "rel", "500000", &p, &[]).unwrap();
        restore(&mut c, "plain", "0", &p, &["IDLETIME", "50"]).unwrap();
        restore(&mut c, "doomed", "0", &p, &[]).unwrap();
        restore(&mut c, "doomed", "1", &p, &["ABSTTL", "REPLACE"]).unwrap();
        ok(&mut c, &["SET", "moved", "m"]);
        ok(&mut c, &["SET", "copied", "c"]);
        assert_eq!(
            migrate(&mut c, &["127.0.0.1", &tp, "moved", "0", "5000"]).unwrap(),
            "OK"
        );
        assert_eq!(
            migrate(&mut c, &["127.0.0.1", &tp, "copied", "0", "5000", "COPY"]).unwrap(),
            "OK"
        );
        let rel_at = int(&mut c, &["PEXPIRETIME", "rel"]);
        let kept: Vec<String> = q(&mut c, &["LRANGE", "plain", "0", "-1"]);
        (rel_at, kept)
        // Dropping the server kills it (SIGKILL): only the journal remains.
    };
    let cairn = start_cairn(&args);
    let mut c = redis_client(cairn.port);
    wait_ready(&mut c);
    assert_eq!(int(&mut c, &["PEXPIRETIME", "rel"]), rel_at);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "plain", "0", "-1"]),
        kept
    );
    assert_eq!(int(&mut c, &["EXISTS", "doomed", "moved"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "copied"]), "c");
    drop(cairn);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Clients get -LOADING until the journal is replayed.
fn wait_ready(c: &mut Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while redis::cmd("PING").query::<String>(c).is_err() {
        assert!(std::time::Instant::now() < deadline, "still loading");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
