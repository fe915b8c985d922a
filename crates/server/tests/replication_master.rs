//! Cairn as a master (issue 24, item 2), with real sockets: a real
//! redis-server 7.0 started with `replicaof` Cairn syncs a dataset of
//! every type (diskless `$EOF:` framing, which redis-server asks for with
//! `capa eof`), then follows live writes (INCR, EXPIRE, SPOP, a script,
//! MULTI/EXEC, expirations, other databases) until WAIT says it has them
//! and both DEBUG DIGESTs agree; `CLIENT KILL TYPE replica` and a
//! reconnect continue from the backlog (`sync_partial_ok`). A raw client
//! that omits `capa eof` gets the disk framing (`$<len>`) and then the
//! stream; `min-replicas-to-write` refuses writes with no replica. The
//! tests that need redis-server skip without it (outside CI).
mod support;

use redis::{Connection, Value};
use std::io::Read;
use std::time::{Duration, Instant};
use support::{
    digest, info_field, int, ok, q, redis_client, start_cairn, start_redis, value as run, wait_for,
    RawConn, Server, TestDir,
};

/// A test's own directory, removed on drop.
fn scratch(name: &str) -> TestDir {
    TestDir::new("replm", name)
}

/// Every type, expiring keys and three databases.
fn build(c: &mut Connection) {
    let cmds: Vec<Vec<String>> = [
        "SET s hello",
        "SET n 10",
        "SET ttl v PX 100000000",
        "RPUSH l a b c 1 2 3",
        "HSET h f v g 12",
        "SADD set a b c d e f g",
        "SADD ints 1 2 3",
        "ZADD z 1 a 2.5 b 3 c",
        "XADD x 1-1 a 1",
        "XADD x 2-1 b 2",
        "XGROUP CREATE x g 0",
        "XREADGROUP GROUP g alice COUNT 1 STREAMS x >",
        "PEXPIRE h 200000000",
        "SELECT 1",
        "SET one 1",
        "LPUSH l1 x y",
        "SELECT 2",
        "HSET h2 a b",
        "SELECT 0",
    ]
    .iter()
    .map(|l| l.split(' ').map(str::to_string).collect())
    .collect();
    for args in &cmds {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        run(c, &refs);
    }
    let mut big = vec!["RPUSH".to_string(), "biglist".to_string()];
    big.extend((0..2000).map(|i| format!("element-{i}")));
    let refs: Vec<&str> = big.iter().map(String::as_str).collect();
    run(c, &refs);
    for i in 0..300 {
        ok(c, &["SET", &format!("k:{i}"), &"v".repeat(i)]);
    }
}

/// Writes of every kind of propagation after the sync.
fn live_writes(c: &mut Connection) {
    int(c, &["INCR", "n"]);
    int(c, &["INCRBY", "n", "5"]);
    let _: String = q(c, &["INCRBYFLOAT", "n", "1.5"]);
    int(c, &["EXPIRE", "s", "1000"]);
    let _: Value = run(c, &["SPOP", "set", "2"]);
    let _: Value = run(
        c,
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])",
            "2",
            "scripted",
            "counter",
            "from a script",
        ],
    );
    ok(c, &["MULTI"]);
    let _: Value = run(c, &["LPUSH", "l", "m1"]);
    let _: Value = run(c, &["HSET", "h", "m", "2"]);
    let _: Value = run(c, &["EXEC"]);
    ok(c, &["SET", "short", "gone soon", "PX", "50"]);
    ok(c, &["SELECT", "1"]);
    int(c, &["INCR", "one"]);
    ok(c, &["SET", "also-short", "x", "PX", "60"]);
    ok(c, &["SELECT", "2"]);
    int(c, &["DEL", "h2"]);
    ok(c, &["SET", "two", "2"]);
    ok(c, &["SELECT", "0"]);
    let _: Value = run(c, &["XADD", "x", "*", "c", "3"]);
    let _: Value = run(c, &["XACK", "x", "g", "1-1"]);
    std::thread::sleep(Duration::from_millis(150));
    // The expired keys are found and deleted (lazily here, actively by
    // the cycle otherwise): either way the replica gets a DEL.
    let _: Value = run(c, &["GET", "short"]);
    ok(c, &["SELECT", "1"]);
    let _: Value = run(c, &["GET", "also-short"]);
    ok(c, &["SELECT", "0"]);
}

/// A redis-server replicating from `master`, its link up.
fn start_replica(master: &Server, dir: &str) -> Option<(Server, Connection)> {
    let port = master.port.to_string();
    // A fixed file name in the test's own directory: a restarted replica
    // must find the RDB its first run saved.
    let replica = start_redis(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--dir",
        dir,
        "--dbfilename",
        "dump.rdb",
    ])?;
    let mut rc = redis_client(replica.port);
    wait_for("the replica's link", Duration::from_secs(20), || {
        info_field(&mut rc, "replication", "master_link_status").as_deref() == Some("up")
    });
    Some((replica, rc))
}

#[test]
fn redis_server_replicates_every_type_and_the_live_stream() {
    let dir = scratch("full");
    let master = start_cairn(&["--dir", dir.s(), "--enable-debug-command", "yes"]);
    let mut mc = redis_client(master.port);
    build(&mut mc);
    // 100,000 more keys, so the image takes a while to send, and writes
    // from another client all through the sync: each must reach the
    // replica exactly once (in the image or in the stream, never both).
    for chunk in 0..100 {
        let mut mset = vec!["MSET".to_string()];
        for i in chunk * 1000..(chunk + 1) * 1000 {
            mset.push(format!("bulk:{i}"));
            mset.push(format!("value of key {i}"));
        }
        let refs: Vec<&str> = mset.iter().map(String::as_str).collect();
        ok(&mut mc, &refs);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let mut wc = redis_client(master.port);
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n = int(&mut wc, &["INCR", "during"]);
                let _: Value = run(&mut wc, &["RPUSH", "during:list", &n.to_string()]);
            }
            n
        })
    };
    let Some((replica, mut rc)) = start_replica(&master, &dir.sub("replica")) else {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        return;
    };
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let n = writer.join().unwrap();
    assert!(n > 0);
    assert_eq!(int(&mut mc, &["WAIT", "1", "5000"]), 1);
    assert_eq!(digest(&mut rc), digest(&mut mc), "after the full sync");
    let during: i64 = q(&mut rc, &["GET", "during"]);
    assert_eq!(during, n);
    assert_eq!(int(&mut rc, &["LLEN", "during:list"]), n);
    assert_eq!(int(&mut rc, &["DBSIZE"]), int(&mut mc, &["DBSIZE"]));
    assert_eq!(
        info_field(&mut mc, "stats", "sync_full").as_deref(),
        Some("1")
    );
    let slave0 = info_field(&mut mc, "replication", "slave0").unwrap();
    assert!(
        slave0.starts_with(&format!("ip=127.0.0.1,port={},state=online,", replica.port)),
        "{slave0}"
    );
    assert_eq!(
        info_field(&mut mc, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let list: String = q(&mut mc, &["CLIENT", "LIST", "TYPE", "replica"]);
    assert!(list.contains(" flags=S "), "{list}");

    live_writes(&mut mc);
    assert_eq!(int(&mut mc, &["WAIT", "1", "5000"]), 1);
    assert_eq!(digest(&mut rc), digest(&mut mc), "after the live writes");
    // The replica's offset is the master's, byte for byte.
    let offset = info_field(&mut mc, "replication", "master_repl_offset").unwrap();
    wait_for("the replica's offset", Duration::from_secs(5), || {
        info_field(&mut rc, "replication", "master_repl_offset").as_deref() == Some(&offset)
    });
    // ROLE lists the replica with its acknowledged offset.
    let role: Vec<Value> = q(&mut mc, &["ROLE"]);
    assert_eq!(role[0], Value::BulkString(b"master".to_vec()));
    let Value::Array(replicas) = &role[2] else {
        panic!("{role:?}")
    };
    assert_eq!(replicas.len(), 1);
}

#[test]
fn a_killed_replica_continues_from_the_backlog() {
    let dir = scratch("partial");
    let master = start_cairn(&["--dir", dir.s(), "--enable-debug-command", "yes"]);
    let mut mc = redis_client(master.port);
    build(&mut mc);
    let Some((_replica, mut rc)) = start_replica(&master, &dir.sub("replica")) else {
        return;
    };
    assert_eq!(int(&mut mc, &["CLIENT", "KILL", "TYPE", "replica"]), 1);
    live_writes(&mut mc);
    // redis-server reconnects within a second and asks for PSYNC from
    // its offset; the writes made meanwhile come from the backlog.
    wait_for("the partial resync", Duration::from_secs(20), || {
        info_field(&mut mc, "stats", "sync_partial_ok").as_deref() == Some("1")
    });
    assert_eq!(int(&mut mc, &["WAIT", "1", "5000"]), 1);
    assert_eq!(digest(&mut rc), digest(&mut mc));
    assert_eq!(
        info_field(&mut mc, "stats", "sync_full").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut mc, "stats", "sync_partial_err").as_deref(),
        Some("0")
    );
}

#[test]
fn a_restarted_replica_continues_from_its_own_rdb() {
    let dir = scratch("restart");
    let master = start_cairn(&["--dir", dir.s(), "--enable-debug-command", "yes"]);
    let mut mc = redis_client(master.port);
    build(&mut mc);
    let rdir = dir.sub("replica");
    let Some((replica, mut rc)) = start_replica(&master, &rdir) else {
        return;
    };
    live_writes(&mut mc);
    assert_eq!(int(&mut mc, &["WAIT", "1", "5000"]), 1);
    // The replica saves its data with the master's ID and offset, stops,
    // and starts again from that file while the master takes writes.
    let _ = run_maybe(&mut rc, &["SHUTDOWN", "SAVE"]);
    drop(replica);
    ok(&mut mc, &["SET", "while-down", "1"]);
    int(&mut mc, &["INCR", "n2"]);
    let Some((_replica, mut rc)) = start_replica(&master, &rdir) else {
        return;
    };
    assert_eq!(int(&mut mc, &["WAIT", "1", "5000"]), 1);
    assert_eq!(digest(&mut rc), digest(&mut mc));
    assert_eq!(
        info_field(&mut mc, "stats", "sync_full").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut mc, "stats", "sync_partial_ok").as_deref(),
        Some("1")
    );
}

fn run_maybe(c: &mut Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// Reads one `\r\n`-terminated line.
fn read_line(s: &mut std::net::TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        s.read_exact(&mut b).unwrap();
        line.push(b[0]);
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).unwrap()
}

#[test]
fn without_capa_eof_the_image_comes_from_a_file_with_its_length() {
    let dir = scratch("disk");
    let master = start_cairn(&["--dir", dir.s(), "--enable-debug-command", "yes"]);
    let mut mc = redis_client(master.port);
    ok(&mut mc, &["SET", "before", "1"]);
    let mut raw = RawConn::connect(master.port);
    assert_eq!(raw.cmd(&["REPLCONF", "listening-port", "4321"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&["REPLCONF", "capa", "psync2"]), b"+OK\r\n");
    assert_eq!(
        raw.cmd(&["REPLCONF", "bogus", "1"]),
        b"-ERR Unrecognized REPLCONF option: bogus\r\n"
    );
    assert_eq!(
        raw.cmd(&["REPLCONF", "rdb-only", "2"]),
        b"-ERR value is out of range, value must between 0 and 1\r\n"
    );
    assert_eq!(
        raw.cmd(&["REPLCONF", "listening-port"]),
        b"-ERR syntax error\r\n"
    );
    raw.send(&[b"PSYNC", b"?", b"-1"]);
    let mut s = raw.stream().try_clone().unwrap();
    let full = read_line(&mut s);
    let parts: Vec<&str> = full.split(' ').collect();
    assert_eq!(parts[0], "+FULLRESYNC", "{full}");
    assert_eq!(parts[1].len(), 40);
    let offset: u64 = parts[2].parse().unwrap();
    let len = read_line(&mut s);
    let len: usize = len.strip_prefix('$').unwrap().parse().unwrap();
    let mut rdb = vec![0u8; len];
    s.read_exact(&mut rdb).unwrap();
    assert!(rdb.starts_with(b"REDIS0010"), "{:?}", &rdb[..9]);
    // The temporary file goes once sent.
    wait_for("the temporary file to go", Duration::from_secs(5), || {
        !std::fs::read_dir(dir.s())
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with("temp-repl"))
    });

    // The link turns online once its sender has written the last byte,
    // which may be a moment after the reader has it all.
    wait_for("the replica to be online", Duration::from_secs(5), || {
        info_field(&mut mc, "replication", "slave0")
            .is_some_and(|s| s.starts_with("ip=127.0.0.1,port=4321,state=online,"))
    });
    ok(&mut mc, &["SET", "after", "2"]);
    let want = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$5\r\nafter\r\n$1\r\n2\r\n";
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    let end: u64 = info_field(&mut mc, "replication", "master_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(end, offset + want.len() as u64);

    // An ACK counts for WAIT.
    let ack = format!(
        "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{end}\r\n",
        end.to_string().len()
    );
    std::io::Write::write_all(&mut s, ack.as_bytes()).unwrap();
    assert_eq!(int(&mut mc, &["WAIT", "1", "2000"]), 1);

    assert_eq!(int(&mut mc, &["CLIENT", "KILL", "TYPE", "slave"]), 1);
    wait_for("the link to close", Duration::from_secs(5), || {
        info_field(&mut mc, "replication", "connected_slaves").as_deref() == Some("0")
    });
}

#[test]
fn a_silent_replica_gets_pings_then_is_dropped() {
    let dir = scratch("silent");
    let master = start_cairn(&["--dir", dir.s()]);
    let mut mc = redis_client(master.port);
    ok(&mut mc, &["CONFIG", "SET", "repl-ping-replica-period", "1"]);
    ok(&mut mc, &["CONFIG", "SET", "repl-timeout", "2"]);
    ok(&mut mc, &["SET", "k", "v"]);
    let mut raw = RawConn::connect(master.port);
    assert_eq!(
        raw.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
        b"+OK\r\n"
    );
    raw.send(&[b"PSYNC", b"?", b"-1"]);
    let mut s = raw.stream().try_clone().unwrap();
    let full = read_line(&mut s);
    assert!(full.starts_with("+FULLRESYNC "), "{full}");
    // Diskless: `$EOF:<mark>`, the image, the same mark.
    let eof = read_line(&mut s);
    let mark = eof.strip_prefix("$EOF:").unwrap().as_bytes().to_vec();
    assert_eq!(mark.len(), 40);
    let mut image = Vec::new();
    let mut b = [0u8; 1];
    while !image.ends_with(&mark) {
        s.read_exact(&mut b).unwrap();
        image.push(b[0]);
    }
    assert!(image.starts_with(b"REDIS0010"));
    // The stream starts at the replica's first ACK (so that no stream byte
    // shares a read with the mark), then the first PING comes within the
    // period (and a second or so).
    let ack = b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$1\r\n0\r\n";
    std::io::Write::write_all(&mut s, ack).unwrap();
    let ping = b"*1\r\n$4\r\nPING\r\n";
    let mut got = vec![0u8; ping.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, ping);
    // No ACK for repl-timeout: the master drops the link.
    wait_for("the silent replica to go", Duration::from_secs(8), || {
        info_field(&mut mc, "replication", "connected_slaves").as_deref() == Some("0")
    });
    assert!(master.log().contains("Disconnecting timedout replica"));
}

#[test]
fn wait_blocks_without_holding_the_worker_and_times_out() {
    let master = start_cairn(&["--server-threads", "1"]);
    let mut mc = redis_client(master.port);
    let mut other = redis_client(master.port);
    ok(&mut mc, &["SET", "k", "v"]);
    let t = std::thread::spawn(move || {
        let started = Instant::now();
        let n = int(&mut mc, &["WAIT", "1", "500"]);
        (n, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    // The same (only) worker still serves others meanwhile.
    let pong: String = q(&mut other, &["PING"]);
    assert_eq!(pong, "PONG");
    let (n, took) = t.join().unwrap();
    assert_eq!(n, 0);
    assert!(took >= Duration::from_millis(450), "{took:?}");
}

#[test]
fn min_replicas_to_write_refuses_writes_without_replicas() {
    let master = start_cairn(&[]);
    let mut mc = redis_client(master.port);
    ok(&mut mc, &["CONFIG", "SET", "min-replicas-to-write", "1"]);
    let e = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query::<Value>(&mut mc)
        .unwrap_err();
    assert_eq!(e.code(), Some("NOREPLICAS"), "{e}");
    // Reads go on.
    let v: Option<String> = q(&mut mc, &["GET", "k"]);
    assert_eq!(v, None);
    assert_eq!(
        info_field(&mut mc, "replication", "min_slaves_good_slaves").as_deref(),
        Some("0")
    );
    ok(&mut mc, &["CONFIG", "SET", "min-replicas-to-write", "0"]);
    ok(&mut mc, &["SET", "k", "v"]);
}
