//! The replica side of replication (issue 24 item 3), against a real
//! redis-server 7.0 master: Cairn's REPLICAOF loads the master's RDB image
//! (every type, TTLs, several databases, stream groups), applies the live
//! stream (INCR, EXPIRE, SPOP, a script, MULTI, expirations) until its
//! `slave_repl_offset` is the master's `master_repl_offset` with every key
//! equal, refuses ordinary clients' writes (READONLY), continues with a
//! partial resynchronisation after the master drops the link, and after
//! REPLICAOF NO ONE is a writable master keeping its data. Skips without
//! redis-server (outside CI).
mod support;

use redis::{Connection, Value};
use std::time::{Duration, Instant};
use support::{err, int, ok, q, redis_client, start_cairn, start_redis};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn run(c: &mut Connection, args: &[String]) {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    let _: Value = cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"));
}

/// Every type in small and large encodings, TTLs, streams with a group and
/// pending entries, in databases 0, 3 and 9.
fn build(c: &mut Connection) {
    let mut cmds = vec![
        s(&["SET", "s:small", "hello"]),
        s(&["SET", "s:int", "-123456"]),
        s(&["SET", "s:lzf", &"compress me ".repeat(200)]),
        s(&["SET", "s:ttl", "v", "PX", "100000000"]),
        s(&["SET", "counter", "10"]),
        s(&["RPUSH", "l:small", "a", "1", "-70000", "x"]),
        s(&["HSET", "h:small", "f", "v", "n", "12"]),
        s(&["ZADD", "z:small", "1", "a", "2.5", "b", "-inf", "c"]),
        s(&["SADD", "set:ints", "1", "2", "-3", "100000"]),
        s(&["SADD", "set:strs", "a", "b", "c", "d", "e"]),
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
    for i in 1..=200 {
        let id = format!("{}-{}", 1_700_000_000_000u64 + i / 4, i % 4);
        cmds.push(s(&["XADD", "x:big", &id, "temp", &i.to_string()]));
    }
    cmds.push(s(&["XGROUP", "CREATE", "x:big", "g1", "0"]));
    cmds.push(s(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "alice",
        "COUNT",
        "5",
        "STREAMS",
        "x:big",
        ">",
    ]));
    for cmd in &cmds {
        run(c, cmd);
    }
    for db in ["3", "9"] {
        ok(c, &["SELECT", db]);
        run(c, &s(&["SET", &format!("in-{db}"), db]));
        run(c, &s(&["RPUSH", "list", "a", "b", db]));
        run(c, &s(&["SET", "ttl", "x", "EX", "100000"]));
    }
    ok(c, &["SELECT", "0"]);
}

/// A key's type and contents in a canonical order.
fn describe(c: &mut Connection, key: &str) -> (String, String) {
    let t: String = q(c, &["TYPE", key]);
    let items = match t.as_str() {
        "string" => format!("{:?}", q::<Vec<u8>>(c, &["GET", key])),
        "list" => format!("{:?}", q::<Vec<Vec<u8>>>(c, &["LRANGE", key, "0", "-1"])),
        "set" => {
            let mut m: Vec<Vec<u8>> = q(c, &["SMEMBERS", key]);
            m.sort();
            format!("{m:?}")
        }
        "zset" => format!(
            "{:?}",
            q::<Vec<Vec<u8>>>(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])
        ),
        "hash" => {
            let all: Vec<Vec<u8>> = q(c, &["HGETALL", key]);
            let mut pairs: Vec<Vec<Vec<u8>>> = all.chunks(2).map(|c| c.to_vec()).collect();
            pairs.sort();
            format!("{pairs:?}")
        }
        "stream" => {
            let entries: Value = q(c, &["XRANGE", key, "-", "+"]);
            let groups: Value = q(c, &["XINFO", "GROUPS", key]);
            format!("{entries:?} {groups:?}")
        }
        other => panic!("{key}: type {other}"),
    };
    (t, items)
}

/// Every key of databases 0..16 of `master` is in `replica` with the same
/// type, contents and TTL (within a few seconds), and DEBUG DIGEST agrees.
fn compare(master: &mut Connection, replica: &mut Connection) -> usize {
    let mut n = 0;
    for db in 0..16 {
        let d = db.to_string();
        ok(master, &["SELECT", &d]);
        ok(replica, &["SELECT", &d]);
        let mut keys: Vec<String> = q(master, &["KEYS", "*"]);
        keys.sort();
        let mut theirs: Vec<String> = q(replica, &["KEYS", "*"]);
        theirs.sort();
        assert_eq!(theirs, keys, "keys of db {db}");
        for k in &keys {
            assert_eq!(describe(replica, k), describe(master, k), "db {db} key {k}");
            let (a, b) = (int(master, &["PTTL", k]), int(replica, &["PTTL", k]));
            assert_eq!(a < 0, b < 0, "TTL of {k}: {a} vs {b}");
            assert!((a - b).abs() < 5_000, "TTL of {k}: {a} vs {b}");
            n += 1;
        }
    }
    ok(master, &["SELECT", "0"]);
    ok(replica, &["SELECT", "0"]);
    n
}

fn info_field(c: &mut Connection, section: &str, name: &str) -> String {
    let text: String = q(c, &["INFO", section]);
    let prefix = format!("{name}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("INFO {section} has no {name}:\n{text}"))
        .trim()
        .to_string()
}

/// Waits until the link is up and the replica has applied everything the
/// master has sent.
fn wait_in_sync(master: &mut Connection, replica: &mut Connection, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up = info_field(replica, "replication", "master_link_status") == "up";
        let m = info_field(master, "replication", "master_repl_offset");
        let r = info_field(replica, "replication", "slave_repl_offset");
        if up && m == r {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: link up {up}, master offset {m}, replica offset {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn cairn_replicates_from_redis() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    build(&mut m);
    let cairn = start_cairn(&[]);
    let mut c = redis_client(cairn.port);
    assert_eq!(info_field(&mut c, "replication", "role"), "master");

    let port = redis.port.to_string();
    assert_eq!(
        err(&mut c, &["REPLICAOF", "127.0.0.1", "70000"]),
        "ERR Invalid master port"
    );
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &port]);
    let again: String = q(&mut c, &["SLAVEOF", "127.0.0.1", &port]);
    assert_eq!(again, "OK Already connected to specified master");
    wait_in_sync(&mut m, &mut c, "full sync");
    let n = compare(&mut m, &mut c);
    assert!(n > 15, "{n} keys compared");
    assert_eq!(
        int(&mut redis_client(redis.port), &["DBSIZE"]),
        int(&mut c, &["DBSIZE"])
    );

    // The live stream: each write in its propagated form.
    let _: i64 = q(&mut m, &["INCR", "counter"]);
    let _: i64 = q(&mut m, &["EXPIRE", "s:small", "5000"]);
    let _: Value = q(&mut m, &["SPOP", "set:strs", "2"]);
    let _: Value = q(
        &mut m,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); redis.call('LPUSH', KEYS[2], ARGV[1]); return 1",
            "2",
            "from-script",
            "l:small",
            "scripted",
        ],
    );
    ok(&mut m, &["MULTI"]);
    let _: String = q(&mut m, &["INCRBY", "counter", "5"]);
    let _: String = q(&mut m, &["HSET", "h:small", "added", "in-multi"]);
    let _: Value = q(&mut m, &["EXEC"]);
    ok(&mut m, &["SELECT", "3"]);
    ok(&mut m, &["SET", "short", "lived", "PX", "100"]);
    ok(&mut m, &["SET", "db3-live", "yes"]);
    ok(&mut m, &["SELECT", "0"]);
    // The master expires it and sends the DEL.
    std::thread::sleep(Duration::from_millis(400));
    ok(&mut m, &["SELECT", "3"]);
    let gone: Value = q(&mut m, &["GET", "short"]);
    assert_eq!(gone, Value::Nil);
    ok(&mut m, &["SELECT", "0"]);
    wait_in_sync(&mut m, &mut c, "live writes");
    compare(&mut m, &mut c);
    assert_eq!(int(&mut c, &["GET", "counter"]), 16);

    // Ordinary clients may not write; reads work.
    assert_eq!(
        err(&mut c, &["SET", "x", "y"]),
        "READONLY You can't write against a read only replica."
    );
    let role: Value = q(&mut c, &["ROLE"]);
    let Value::Array(role) = role else {
        panic!("ROLE: {role:?}")
    };
    assert_eq!(role[0], Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[2], Value::Int(i64::from(redis.port)));
    assert_eq!(role[3], Value::BulkString(b"connected".to_vec()));
    for (name, want) in [
        ("role", "slave"),
        ("master_host", "127.0.0.1"),
        ("master_port", port.as_str()),
        ("master_sync_in_progress", "0"),
        ("slave_read_only", "1"),
        ("slave_priority", "100"),
        ("replica_announced", "1"),
    ] {
        assert_eq!(info_field(&mut c, "replication", name), want, "{name}");
    }
    // The master sees a replica that announced Cairn's port.
    let slave0 = info_field(&mut m, "replication", "slave0");
    assert!(slave0.contains(&format!("port={}", cairn.port)), "{slave0}");

    // A replica that joins while the master's stream has database 3
    // selected starts in it (the image's repl-stream-db): the master sends
    // no SELECT before the next write there.
    let late = start_cairn(&[]);
    let mut l = redis_client(late.port);
    ok(&mut l, &["REPLICAOF", "127.0.0.1", &port]);
    wait_in_sync(&mut m, &mut l, "second replica");
    let mut m3 = redis_client(redis.port);
    ok(&mut m3, &["SELECT", "3"]);
    ok(&mut m3, &["SET", "db3-after-join", "x"]);
    wait_in_sync(&mut m, &mut l, "second replica's stream");
    ok(&mut l, &["SELECT", "3"]);
    assert_eq!(int(&mut l, &["EXISTS", "db3-after-join"]), 1);
    ok(&mut l, &["SELECT", "0"]);
    compare(&mut m, &mut l);
    ok(&mut l, &["REPLICAOF", "NO", "ONE"]);
    drop(late);

    // The master drops the link: Cairn comes back with a partial resync.
    let full = info_field(&mut m, "stats", "sync_full");
    let _: i64 = q(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    ok(&mut m, &["SET", "while-away", "1"]);
    let _: i64 = q(&mut m, &["INCR", "counter"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut m, "stats", "sync_partial_ok") != "1" {
        assert!(Instant::now() < deadline, "no partial resync");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        info_field(&mut m, "stats", "sync_full"),
        full,
        "no second full sync"
    );
    wait_in_sync(&mut m, &mut c, "partial resync");
    compare(&mut m, &mut c);
    assert_eq!(int(&mut c, &["GET", "counter"]), 17);

    // The link as Cairn's client list shows it; killing it is the same
    // partial resync, from Cairn's side.
    let list: String = q(&mut c, &["CLIENT", "LIST", "TYPE", "master"]);
    assert!(list.contains("flags=M"), "{list}");
    assert!(list.contains(&format!("addr=127.0.0.1:{port}")), "{list}");
    assert_eq!(int(&mut c, &["CLIENT", "KILL", "TYPE", "master"]), 1);
    let _: i64 = q(&mut m, &["INCR", "counter"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut m, "stats", "sync_partial_ok") != "2" {
        assert!(
            Instant::now() < deadline,
            "no partial resync after CLIENT KILL TYPE master"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        info_field(&mut m, "stats", "sync_full"),
        full,
        "no second full sync"
    );
    wait_in_sync(
        &mut m,
        &mut c,
        "partial resync after CLIENT KILL TYPE master",
    );
    compare(&mut m, &mut c);
    assert_eq!(int(&mut c, &["GET", "counter"]), 18);

    // Promoted: a master with the data, writable.
    ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(info_field(&mut c, "replication", "role"), "master");
    let role: Value = q(&mut c, &["ROLE"]);
    assert!(format!("{role:?}").contains("master"), "{role:?}");
    ok(&mut c, &["SET", "x", "y"]);
    assert_eq!(int(&mut c, &["GET", "counter"]), 18);
    // Writes on the old master no longer arrive.
    ok(&mut m, &["SET", "after-promotion", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(int(&mut c, &["EXISTS", "after-promotion"]), 0);
}

#[test]
fn serve_stale_data_no_refuses_while_the_link_is_down() {
    let cairn = start_cairn(&["--replica-serve-stale-data", "no"]);
    let mut c = redis_client(cairn.port);
    // Nothing listens on port 1: the link stays down.
    ok(&mut c, &["REPLICAOF", "127.0.0.1", "1"]);
    assert_eq!(
        err(&mut c, &["GET", "x"]),
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
    );
    assert_eq!(
        info_field(&mut c, "replication", "master_link_status"),
        "down"
    );
    let role: Value = q(&mut c, &["ROLE"]);
    let Value::Array(role) = role else {
        panic!("ROLE: {role:?}")
    };
    assert!(
        matches!(&role[3], Value::BulkString(s) if s == b"connect" || s == b"connecting" || s == b"handshake"),
        "{role:?}"
    );
    ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
    let v: Value = q(&mut c, &["GET", "x"]);
    assert_eq!(v, Value::Nil);
}

fn digest(c: &mut Connection) -> String {
    q(c, &["DEBUG", "DIGEST"])
}

/// Cairn from Cairn, chained: A <- B <- C. B feeds C the bytes it gets
/// from A, so all three have one history (offsets and IDs equal); C
/// promoted keeps the data.
#[test]
fn cairn_replicates_from_cairn_through_a_chain() {
    let debug = ["--enable-debug-command", "yes"];
    let a = start_cairn(&debug);
    let mut ca = redis_client(a.port);
    build(&mut ca);
    let b = start_cairn(&debug);
    let mut cb = redis_client(b.port);
    ok(&mut cb, &["REPLICAOF", "127.0.0.1", &a.port.to_string()]);
    wait_in_sync(&mut ca, &mut cb, "B from A");
    let c = start_cairn(&debug);
    let mut cc = redis_client(c.port);
    ok(&mut cc, &["REPLICAOF", "127.0.0.1", &b.port.to_string()]);
    wait_in_sync(&mut cb, &mut cc, "C from B");
    // Live writes on A reach C through B.
    let _: i64 = q(&mut ca, &["INCR", "counter"]);
    let _: Value = q(&mut ca, &["SPOP", "set:strs"]);
    ok(&mut ca, &["SELECT", "9"]);
    ok(&mut ca, &["SET", "nine", "9", "EX", "1000"]);
    ok(&mut ca, &["SELECT", "0"]);
    ok(&mut ca, &["MULTI"]);
    let _: String = q(&mut ca, &["INCR", "counter"]);
    let _: String = q(&mut ca, &["RPUSH", "l:small", "tail"]);
    let _: Value = q(&mut ca, &["EXEC"]);
    wait_in_sync(&mut ca, &mut cb, "B live");
    wait_in_sync(&mut cb, &mut cc, "C live");
    assert_eq!(
        info_field(&mut cc, "replication", "slave_repl_offset"),
        info_field(&mut ca, "replication", "master_repl_offset")
    );
    assert_eq!(
        info_field(&mut cc, "replication", "master_replid"),
        info_field(&mut ca, "replication", "master_replid")
    );
    let want = digest(&mut ca);
    assert_eq!(digest(&mut cb), want);
    assert_eq!(digest(&mut cc), want);
    compare(&mut ca, &mut cc);
    assert_eq!(int(&mut cc, &["GET", "counter"]), 12);
    ok(&mut cc, &["REPLICAOF", "NO", "ONE"]);
    ok(&mut cc, &["SET", "mine", "1"]);
    assert_eq!(int(&mut cc, &["GET", "counter"]), 12);
}

/// `masteruser` and `masterauth`: Cairn authenticates to a master that
/// needs a password, as an ACL user.
#[test]
fn masteruser_and_masterauth_authenticate_to_the_master() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    ok(
        &mut m,
        &["ACL", "SETUSER", "repl", "on", ">replpw", "+@all", "~*"],
    );
    ok(&mut m, &["SET", "k", "v"]);
    ok(&mut m, &["CONFIG", "SET", "requirepass", "defaultpw"]);
    ok(&mut m, &["AUTH", "defaultpw"]);
    let cairn = start_cairn(&["--masteruser", "repl", "--masterauth", "wrong"]);
    let mut c = redis_client(cairn.port);
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        info_field(&mut c, "replication", "master_link_status"),
        "down"
    );
    // CONFIG SET applies from the next connection attempt.
    ok(&mut c, &["CONFIG", "SET", "masterauth", "replpw"]);
    wait_in_sync(&mut m, &mut c, "authenticated sync");
    let v: String = q(&mut c, &["GET", "k"]);
    assert_eq!(v, "v");
}

/// With the journal on, a full sync's data becomes the journal's base
/// (a compaction after the load), so the replica restarts with it.
#[test]
fn a_replica_with_appendonly_keeps_the_synced_data_across_a_restart() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    build(&mut m);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir =
        std::env::temp_dir().join(format!("cairn-replica-aof-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    let d = dir.to_str().unwrap();
    let args = ["--dir", d, "--appendonly", "yes", "--appendfsync", "always"];
    let cairn = start_cairn(&args);
    let mut c = redis_client(cairn.port);
    wait_loaded(&mut c);
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &redis.port.to_string()]);
    wait_in_sync(&mut m, &mut c, "full sync");
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(&mut c, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "the compaction did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    ok(&mut m, &["SET", "after-sync", "1"]);
    wait_in_sync(&mut m, &mut c, "live write");
    drop(c);
    drop(cairn);
    let again = start_cairn(&args);
    let mut c = redis_client(again.port);
    wait_loaded(&mut c);
    compare(&mut m, &mut c);
}

/// Waits until a server started with data has loaded it (PING answers
/// -LOADING until then).
fn wait_loaded(c: &mut Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while redis::cmd("PING").query::<String>(c).is_err() {
        assert!(Instant::now() < deadline, "the server did not load");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `replicaof` directive: a server started with it syncs from the
/// master once its own data is loaded.
#[test]
fn the_replicaof_directive_syncs_at_start() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    ok(&mut m, &["SET", "from-start", "1"]);
    let port = redis.port.to_string();
    let cairn = start_cairn(&["--replicaof", "127.0.0.1", &port]);
    let mut c = redis_client(cairn.port);
    wait_in_sync(&mut m, &mut c, "sync at start");
    assert_eq!(int(&mut c, &["GET", "from-start"]), 1);
    assert_eq!(info_field(&mut c, "replication", "master_port"), port);
}

/// Sentinel switches roles inside a transaction (`MULTI; SLAVEOF ...;
/// CONFIG REWRITE; CLIENT KILL ...; EXEC`): REPLICAOF under EXEC's hold
/// of every shard must not wait forever for the link's command in flight.
#[test]
fn replicaof_inside_multi_as_sentinel_sends_it() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    ok(&mut m, &["SET", "k", "v"]);
    let cairn = start_cairn(&[]);
    let mut c = redis_client(cairn.port);
    let port = redis.port.to_string();
    ok(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["SLAVEOF", "127.0.0.1", &port]);
    let _: Value = q(&mut c, &["EXEC"]);
    wait_in_sync(&mut m, &mut c, "sync from MULTI");
    // The master writes without pause while the replica is promoted.
    let writer = std::thread::spawn({
        let port = redis.port;
        move || {
            let mut w = redis_client(port);
            for i in 0..3000 {
                let _: i64 = q(&mut w, &["INCR", "n"]);
                let _: String = q(&mut w, &["SET", &format!("k{}", i % 50), "x"]);
            }
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    ok(&mut c, &["MULTI"]);
    let _: String = q(&mut c, &["REPLICAOF", "NO", "ONE"]);
    let _: String = q(&mut c, &["CONFIG", "SET", "replica-read-only", "yes"]);
    let _: Value = q(&mut c, &["EXEC"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    writer.join().unwrap();
    assert_eq!(info_field(&mut c, "replication", "role"), "master");
    ok(&mut c, &["SET", "writable", "1"]);
}

/// A replica leaves expiry to its master (Redis 7.0): its background sweep
/// does not delete a key past its time; the master's DEL does. With the
/// master's own sweep off, the key stays counted on the replica until the
/// master expires it.
#[test]
fn a_replica_waits_for_the_masters_expiry() {
    let Some(redis) = start_redis(&["--enable-debug-command", "yes"]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    ok(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let port = redis.port.to_string();
    let cairn = start_cairn(&["--replicaof", "127.0.0.1", &port]);
    let mut c = redis_client(cairn.port);
    ok(&mut m, &["SET", "short", "1", "PX", "200"]);
    wait_in_sync(&mut m, &mut c, "the key reaches the replica");
    // Several sweeps of the replica's cron (hz 10) pass the key's time.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        int(&mut c, &["DBSIZE"]),
        1,
        "the replica swept the key itself"
    );
    ok(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while int(&mut c, &["DBSIZE"]) != 0 {
        assert!(Instant::now() < deadline, "the master's DEL never came");
        std::thread::sleep(Duration::from_millis(50));
    }
}
