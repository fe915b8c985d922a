//! Cluster mode (issue 24, item 5a): Cairn with `cluster-enabled yes`
//! answers as a Redis Cluster of one node owning every slot.
//!
//! The replies are checked against a reference `redis-server 7.0` started
//! with `--cluster-enabled yes` and given every slot (`CLUSTER
//! ADDSLOTSRANGE 0 16383`): the same commands go to both and the reply
//! bytes must match once the node IDs and ports are masked
//! (`cluster_mode_answers_as_redis_cluster`). The differential corpus
//! (tests/diff) runs standalone servers only, so this file is cluster
//! mode's differential test. Then real cluster clients: redis-py's
//! `RedisCluster` (tests/clients/cluster_check.py) and `redis-cli -c` /
//! `redis-cli --cluster check`; and the node ID kept in
//! `cluster-config-file` across restarts.
mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use support::clients::{client_command, expect_success, python, run_with_timeout};
use support::{escape, start_cairn, start_redis, RawConn, Server};

/// A fresh directory under the system's temp dir.
fn tmpdir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let d = std::env::temp_dir().join(format!(
        "cairn-cluster-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The value of a bulk-string reply.
fn bulk(reply: &[u8]) -> String {
    let s = text(reply);
    assert!(s.starts_with('$'), "not a bulk string: {s:?}");
    s.split("\r\n").nth(1).unwrap().to_string()
}

/// Starts Cairn in cluster mode with its config file in `dir`.
fn start_cluster_cairn(dir: &std::path::Path, bus: u16, extra: &[&str]) -> Server {
    let dir = dir.to_str().unwrap().to_string();
    let bus = bus.to_string();
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--dir",
        &dir,
        "--cluster-port",
        &bus,
    ];
    args.extend_from_slice(extra);
    start_cairn(&args)
}

/// One side of the comparison: a server, a connection, and what masks its
/// node ID and ports.
struct Side {
    _server: Server,
    conn: RawConn,
    id: String,
    port: u16,
    bus: u16,
}

impl Side {
    fn new(server: Server, bus: u16) -> Side {
        let mut conn = RawConn::connect(server.port);
        let id = bulk(&conn.cmd(&["CLUSTER", "MYID"]));
        assert_eq!(id.len(), 40, "node id {id:?}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        Side {
            port: server.port,
            _server: server,
            conn,
            id,
            bus,
        }
    }

    /// Runs `args` (where `<ID>` stands for this node's ID) and returns
    /// the reply with the node ID and ports masked.
    fn run(&mut self, args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|a| a.replace("<ID>", &self.id)).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = text(&self.conn.cmd(&args));
        reply
            .replace(&self.id, "<ID>")
            .replace(&format!("{}@{}", self.port, self.bus), "<PORT>@<BUS>")
            .replace(&format!(":{}\r\n", self.port), ":<PORT>\r\n")
    }
}

/// A reference redis-server in cluster mode owning every slot, or None
/// (outside CI) when none is installed.
fn reference() -> Option<Side> {
    let dir = tmpdir("redis");
    let bus = free_port();
    let conf = dir.join("nodes.conf");
    let redis = start_redis(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        conf.to_str().unwrap(),
        "--cluster-port",
        &bus.to_string(),
    ])?;
    let mut side = Side::new(redis, bus);
    assert_eq!(
        side.run(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]),
        "+OK\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !side.run(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(
            Instant::now() < deadline,
            "redis cluster state never became ok"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(side)
}

fn cairn_side() -> Side {
    let dir = tmpdir("cairn");
    let bus = free_port();
    Side::new(start_cluster_cairn(&dir, bus, &[]), bus)
}

/// Sends each line to both servers and compares the masked replies.
fn compare(redis: &mut Side, cairn: &mut Side, lines: &[&[&str]]) {
    let mut diffs = Vec::new();
    for args in lines {
        let want = redis.run(args);
        let got = cairn.run(args);
        if want != got {
            diffs.push(format!(
                "{args:?}\n  redis: {}\n  cairn: {}",
                escape(want.as_bytes()),
                escape(got.as_bytes())
            ));
        }
    }
    assert!(diffs.is_empty(), "replies differ:\n{}", diffs.join("\n"));
}

#[test]
fn cluster_mode_answers_as_redis_cluster() {
    let Some(mut redis) = reference() else {
        eprintln!("redis-server not installed; skipping");
        return;
    };
    let mut cairn = cairn_side();
    compare(
        &mut redis,
        &mut cairn,
        &[
            // The topology of one node owning every slot.
            &["CLUSTER", "INFO"],
            &["CLUSTER", "NODES"],
            &["CLUSTER", "SLOTS"],
            &["CLUSTER", "SHARDS"],
            &["CLUSTER", "LINKS"],
            &["CLUSTER", "MYID"],
            &["CLUSTER", "HELP"],
            &["INFO", "cluster"],
            // Hash slots and hash tags.
            &["CLUSTER", "KEYSLOT", "foo"],
            &["CLUSTER", "KEYSLOT", "{user1000}.following"],
            &["CLUSTER", "KEYSLOT", ""],
            &["CLUSTER", "KEYSLOT", "{}foo"],
            &["CLUSTER", "KEYSLOT", "a{b}c{d}"],
            &["CLUSTER", "KEYSLOT", "{{x}}"],
            &["CLUSTER", "KEYSLOT", "x{"],
            // Per-slot key counts follow writes, deletes and flushes.
            &["MSET", "{t}a", "1", "{t}b", "2", "{t}c", "3"],
            &["SET", "foo", "bar"],
            &["CLUSTER", "COUNTKEYSINSLOT", "15495"],
            &["CLUSTER", "COUNTKEYSINSLOT", "12182"],
            &["CLUSTER", "GETKEYSINSLOT", "12182", "10"],
            &["CLUSTER", "GETKEYSINSLOT", "15495", "0"],
            &["DEL", "{t}a"],
            &["RENAME", "{t}b", "{t}z"],
            &["CLUSTER", "COUNTKEYSINSLOT", "15495"],
            &["SET", "{t}e", "x", "PX", "1"],
            &["CLUSTER", "COUNTKEYSINSLOT", "0"],
            &["CLUSTER", "COUNTKEYSINSLOT", "16383"],
            &["CLUSTER", "COUNTKEYSINSLOT", "-1"],
            &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
            &["CLUSTER", "COUNTKEYSINSLOT", "x"],
            &["CLUSTER", "GETKEYSINSLOT", "0", "-1"],
            &["CLUSTER", "GETKEYSINSLOT", "16384", "1"],
            &["CLUSTER", "GETKEYSINSLOT", "x", "1"],
            &["CLUSTER", "GETKEYSINSLOT", "0", "x"],
            // Multi-key commands must stay in one slot.
            &["MSET", "a", "1", "b", "2"],
            &["MGET", "a", "b"],
            &["MGET", "{t}c", "{t}z"],
            &["DEL", "a", "a"],
            &["EXISTS", "{t}c", "foo"],
            &["SINTERSTORE", "{t}d", "{t}c", "x"],
            &["RENAME", "{t}c", "c"],
            &["BLPOP", "a", "b", "1"],
            &["XREAD", "STREAMS", "a", "b", "0", "0"],
            &["ZUNIONSTORE", "{t}u", "2", "{t}c", "zz"],
            &["OBJECT", "ENCODING", "foo"],
            &["SSUBSCRIBE", "a", "b"],
            &["SPUBLISH", "a", "b"],
            &["PFCOUNT", "a", "b"],
            &["COPY", "a", "b", "DB", "1"],
            &["PING"],
            // Transactions: each queued command, then EXEC over them all.
            &["MULTI"],
            &["SET", "a", "1"],
            &["SET", "b", "2"],
            &["EXEC"],
            &["GET", "a"],
            &["MULTI"],
            &["MSET", "a", "1", "b", "2"],
            &["SET", "a", "1"],
            &["EXEC"],
            &["MULTI"],
            &["SET", "{t}x", "1"],
            &["INCR", "{t}x"],
            &["EXEC"],
            // Scripts: declared keys, then what the calls touch.
            &["EVAL", "return 1", "2", "a", "b"],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "{t}x"],
            &["EVAL", "return redis.call('get', 'b')", "1", "{t}x"],
            &["EVAL", "redis.call('get', 'a'); return redis.call('get', 'b')", "0"],
            &["EVAL", "return redis.call('mget', 'a', 'b')", "0"],
            &["EVAL", "return redis.call('get', '{t}x')", "0"],
            &["EVAL", "#!lua flags=no-cluster\nreturn 1", "0"],
            &[
                "EVAL",
                "#!lua flags=allow-cross-slot-keys\nredis.call('set', 'a', 1); return redis.call('get', 'b')",
                "0",
            ],
            &["EVAL", "#!lua\nreturn redis.call('mget', 'a', 'b')", "0"],
            // Database 0 only.
            &["SELECT", "0"],
            &["SELECT", "1"],
            &["SELECT", "x"],
            &["SELECT", "99999999999"],
            &["MOVE", "foo", "1"],
            &["SWAPDB", "0", "1"],
            &["COPY", "{t}x", "{t}y", "DB", "1"],
            &["COPY", "{t}x", "{t}y", "DB", "0"],
            &["COPY", "{t}x", "{t}y2"],
            // The client commands of cluster mode.
            &["READONLY"],
            &["READWRITE"],
            &["ASKING"],
            // What a node that owns every slot answers about slots.
            &["CLUSTER", "ADDSLOTS", "0"],
            &["CLUSTER", "ADDSLOTS", "16384"],
            &["CLUSTER", "ADDSLOTS", "x", "1"],
            &["CLUSTER", "ADDSLOTSRANGE", "0", "10"],
            &["CLUSTER", "ADDSLOTSRANGE", "10", "0"],
            &["CLUSTER", "ADDSLOTSRANGE", "0", "1", "2"],
            &["CLUSTER", "ADDSLOTSRANGE", "0"],
            &["CLUSTER", "SETSLOT", "0", "STABLE"],
            &["CLUSTER", "SETSLOT", "0", "NODE", "<ID>"],
            &["CLUSTER", "SETSLOT", "0", "NODE", "abc"],
            &["CLUSTER", "SETSLOT", "0", "IMPORTING", "<ID>"],
            &["CLUSTER", "SETSLOT", "0", "MIGRATING", "abc"],
            &["CLUSTER", "SETSLOT", "0", "FOO"],
            &["CLUSTER", "SETSLOT", "0", "STABLE", "x"],
            &["CLUSTER", "SETSLOT", "16384", "STABLE"],
            &["CLUSTER", "DELSLOTS", "x"],
            &["CLUSTER", "DELSLOTSRANGE", "5", "1"],
            &["CLUSTER", "FLUSHSLOTS"],
            // Other nodes: this one is the only one known.
            &["CLUSTER", "FORGET", "<ID>"],
            &["CLUSTER", "FORGET", "abc"],
            &["CLUSTER", "REPLICATE", "<ID>"],
            &["CLUSTER", "REPLICATE", "abc"],
            &["CLUSTER", "REPLICAS", "<ID>"],
            &["CLUSTER", "SLAVES", "<ID>"],
            &["CLUSTER", "REPLICAS", "abc"],
            &["CLUSTER", "COUNT-FAILURE-REPORTS", "<ID>"],
            &["CLUSTER", "COUNT-FAILURE-REPORTS", "abc"],
            &["CLUSTER", "FAILOVER"],
            &["CLUSTER", "FAILOVER", "TAKEOVER"],
            &["CLUSTER", "FAILOVER", "x"],
            &["CLUSTER", "FAILOVER", "x", "y"],
            &["CLUSTER", "MEET", "127.0.0.1", "x"],
            &["CLUSTER", "MEET", "127.0.0.1", "1", "x"],
            &["CLUSTER", "RESET", "x"],
            &["CLUSTER", "RESET", "SOFT"],
            &["CLUSTER", "NOPE"],
            &["CLUSTER"],
            &["CLUSTER", "KEYSLOT"],
            &["CLUSTER", "SAVECONFIG"],
            // Epochs.
            &["CLUSTER", "SET-CONFIG-EPOCH", "-1"],
            &["CLUSTER", "SET-CONFIG-EPOCH", "x"],
            &["CLUSTER", "BUMPEPOCH"],
            &["CLUSTER", "BUMPEPOCH"],
            &["CLUSTER", "SET-CONFIG-EPOCH", "5"],
            &["CLUSTER", "INFO"],
            &["CLUSTER", "NODES"],
            // An empty database: FLUSHSLOTS and RESET get further.
            &["FLUSHALL"],
            &["CLUSTER", "COUNTKEYSINSLOT", "15495"],
            &["CLUSTER", "GETKEYSINSLOT", "15495", "10"],
        ],
    );
}

#[test]
fn cluster_config_directives_have_redis_defaults() {
    let Some(mut redis) = reference() else {
        return;
    };
    let mut cairn = cairn_side();
    let names = [
        "cluster-enabled",
        "cluster-node-timeout",
        "cluster-announce-ip",
        "cluster-announce-hostname",
        "cluster-announce-port",
        "cluster-announce-bus-port",
        "cluster-announce-tls-port",
        "cluster-require-full-coverage",
        "cluster-allow-reads-when-down",
        "cluster-allow-pubsubshard-when-down",
        "cluster-link-sendbuf-limit",
        "cluster-preferred-endpoint-type",
        "cluster-replica-validity-factor",
        "cluster-slave-validity-factor",
        "cluster-migration-barrier",
        "cluster-replica-no-failover",
        "cluster-slave-no-failover",
        "cluster-allow-replica-migration",
    ];
    let mut lines: Vec<Vec<&str>> = names.iter().map(|n| vec!["CONFIG", "GET", n]).collect();
    lines.extend([
        vec!["CONFIG", "SET", "cluster-enabled", "no"],
        vec!["CONFIG", "SET", "cluster-port", "1"],
        vec!["CONFIG", "SET", "cluster-announce-hostname", "bad_name"],
        vec!["CONFIG", "SET", "cluster-preferred-endpoint-type", "x"],
        vec!["CONFIG", "SET", "cluster-node-timeout", "5000"],
        vec!["CONFIG", "GET", "cluster-node-timeout"],
    ]);
    let lines: Vec<&[&str]> = lines.iter().map(Vec::as_slice).collect();
    compare(&mut redis, &mut cairn, &lines);
}

#[test]
fn announced_address_shows_in_the_topology() {
    let Some(mut redis) = reference() else {
        return;
    };
    let mut cairn = cairn_side();
    for side in [&mut redis, &mut cairn] {
        for (name, value) in [
            ("cluster-announce-ip", "10.1.2.3"),
            ("cluster-announce-hostname", "node-a.example"),
        ] {
            assert_eq!(side.run(&["CONFIG", "SET", name, value]), "+OK\r\n");
        }
    }
    // Redis picks up the announced IP in its cluster cron (every 100 ms).
    std::thread::sleep(Duration::from_millis(500));
    let topology: &[&[&str]] = &[
        &["CLUSTER", "NODES"],
        &["CLUSTER", "SLOTS"],
        &["CLUSTER", "SHARDS"],
    ];
    compare(&mut redis, &mut cairn, topology);
    for kind in ["hostname", "unknown-endpoint", "ip"] {
        for side in [&mut redis, &mut cairn] {
            let set = side.run(&["CONFIG", "SET", "cluster-preferred-endpoint-type", kind]);
            assert_eq!(set, "+OK\r\n");
        }
        compare(&mut redis, &mut cairn, &topology[1..]);
    }
}

#[test]
fn resp3_replies_match() {
    let Some(mut redis) = reference() else {
        return;
    };
    let mut cairn = cairn_side();
    for side in [&mut redis, &mut cairn] {
        side.run(&["HELLO", "3"]);
    }
    compare(
        &mut redis,
        &mut cairn,
        &[
            &["CLUSTER", "INFO"],
            &["CLUSTER", "NODES"],
            &["CLUSTER", "SLOTS"],
            &["CLUSTER", "SHARDS"],
            &["CLUSTER", "LINKS"],
        ],
    );
}

#[test]
fn without_cluster_mode_cluster_commands_are_refused_as_redis_does() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let cairn = start_cairn(&[]);
    let (mut r, mut c) = (RawConn::connect(redis.port), RawConn::connect(cairn.port));
    for args in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "KEYSLOT", "foo"],
        &["CLUSTER", "HELP"],
        &["CLUSTER", "NOPE"],
        &["CLUSTER", "KEYSLOT"],
        &["READONLY"],
        &["READWRITE"],
        &["ASKING"],
        &["MSET", "a", "1", "b", "2"],
        &["SELECT", "1"],
        &["INFO", "cluster"],
    ] {
        assert_eq!(text(&c.cmd(args)), text(&r.cmd(args)), "{args:?}");
    }
}

#[test]
fn node_id_and_epochs_survive_a_restart() {
    let dir = tmpdir("restart");
    let bus = free_port();
    let (id, bumped) = {
        let cairn = start_cluster_cairn(&dir, bus, &[]);
        let mut c = RawConn::connect(cairn.port);
        let id = bulk(&c.cmd(&["CLUSTER", "MYID"]));
        assert_eq!(text(&c.cmd(&["CLUSTER", "BUMPEPOCH"])), "+BUMPED 1\r\n");
        let conf = text(&c.cmd(&["CONFIG", "GET", "cluster-config-file"]));
        assert!(conf.ends_with("$10\r\nnodes.conf\r\n"), "{conf}");
        let file = std::fs::read_to_string(dir.join("nodes.conf")).unwrap();
        let port = cairn.port;
        assert_eq!(
            file,
            format!(
                "{id} :{port}@{bus} myself,master - 0 0 1 connected 0-16383\n\
                 vars currentEpoch 1 lastVoteEpoch 0\n"
            )
        );
        // A second node may not use the same file while this one runs.
        let mut second = Command::new(env!("CARGO_BIN_EXE_cairn"));
        second.args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
        ]);
        second.arg("--dir").arg(&dir);
        let run = run_with_timeout(second, Duration::from_secs(20));
        assert!(
            run.status.is_some_and(|s| !s.success()),
            "a second node started on a locked nodes.conf: {}",
            run.output
        );
        assert!(run
            .output
            .contains("is already used by a different Redis Cluster node"));
        (id, c.cmd(&["CLUSTER", "INFO"]))
    };
    let cairn = start_cluster_cairn(&dir, bus, &[]);
    let mut c = RawConn::connect(cairn.port);
    assert_eq!(bulk(&c.cmd(&["CLUSTER", "MYID"])), id);
    assert_eq!(c.cmd(&["CLUSTER", "INFO"]), bumped);
    assert!(text(&bumped).contains("cluster_my_epoch:1\r\n"));
    // RESET HARD: a new identity, kept in the file.
    assert_eq!(text(&c.cmd(&["CLUSTER", "RESET", "HARD"])), "+OK\r\n");
    let new_id = bulk(&c.cmd(&["CLUSTER", "MYID"]));
    assert_ne!(new_id, id);
    assert!(std::fs::read_to_string(dir.join("nodes.conf"))
        .unwrap()
        .starts_with(&new_id));
    drop(cairn);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keys_outside_db_0_refuse_cluster_mode_at_start() {
    let dir = tmpdir("db1");
    {
        let dir_s = dir.to_str().unwrap();
        let cairn = start_cairn(&[
            "--dir",
            dir_s,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]);
        let mut c = RawConn::connect(cairn.port);
        // The journal opens after the listeners: -LOADING until then.
        assert_eq!(text(&c.cmd(&["SELECT", "1"])), "+OK\r\n");
        let mut set = c.cmd(&["SET", "k", "v"]);
        while set.starts_with(b"-LOADING") {
            std::thread::sleep(Duration::from_millis(20));
            set = c.cmd(&["SET", "k", "v"]);
        }
        assert_eq!(text(&set), "+OK\r\n");
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(["--port", "0", "--bind", "127.0.0.1", "--appendonly", "yes"])
        .args(["--cluster-enabled", "yes", "--dir"])
        .arg(&dir);
    let run = run_with_timeout(cmd, Duration::from_secs(20));
    assert!(run.status.is_some_and(|s| !s.success()), "{}", run.output);
    assert!(
        run.output
            .contains("You can't have keys in a DB different than DB 0"),
        "{}",
        run.output
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_py_cluster_client_works() {
    let Some(py) = python("redis.cluster") else {
        return;
    };
    let dir = tmpdir("redis-py");
    let cairn = start_cluster_cairn(&dir, free_port(), &[]);
    let url = format!("redis://127.0.0.1:{}", cairn.port);
    let cmd = client_command(&py, &["cluster_check.py"], &url);
    let run = expect_success(
        "cluster_check.py",
        Some(&cairn),
        cmd,
        Duration::from_secs(120),
    );
    assert!(
        run.output.contains("ok: redis-py RedisCluster"),
        "{}",
        run.output
    );
}

/// `redis-cli` on PATH, or None (outside CI) to skip.
fn redis_cli() -> Option<&'static str> {
    let found = Command::new("redis-cli").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-cli is required in CI (apt-get install -y redis-tools)"
        );
        eprintln!("redis-cli not installed; skipping");
        return None;
    }
    Some("redis-cli")
}

#[test]
fn redis_cli_in_cluster_mode() {
    let Some(cli) = redis_cli() else {
        return;
    };
    let dir = tmpdir("redis-cli");
    let cairn = start_cluster_cairn(&dir, free_port(), &[]);
    let port = cairn.port.to_string();
    let run = |args: &[&str]| {
        let mut cmd = Command::new(cli);
        cmd.args(["-h", "127.0.0.1", "-p", &port]).args(args);
        let out = run_with_timeout(cmd, Duration::from_secs(30));
        assert!(
            out.status.is_some_and(|s| s.success()),
            "redis-cli {args:?}: {}",
            out.output
        );
        out.output
    };
    assert_eq!(run(&["-c", "SET", "foo", "bar"]).trim(), "OK");
    assert_eq!(run(&["-c", "GET", "foo"]).trim(), "bar");
    assert_eq!(run(&["-c", "MSET", "{u}a", "1", "{u}b", "2"]).trim(), "OK");
    assert_eq!(run(&["-c", "MGET", "{u}a", "{u}b"]).trim(), "1\n2");
    assert!(run(&["-c", "MSET", "a", "1", "b", "2"]).contains("CROSSSLOT"));
    // redis-cli's cluster manager reads CLUSTER NODES and INFO and checks
    // that every slot is served and none is open.
    let check = run(&["--cluster", "check", &format!("127.0.0.1:{port}")]);
    assert!(
        check.contains("[OK] All nodes agree about slots configuration."),
        "{check}"
    );
    assert!(check.contains("[OK] All 16384 slots covered."), "{check}");
    let info = run(&["--cluster", "info", &format!("127.0.0.1:{port}")]);
    assert!(info.contains("3 keys | 16384 slots | 0 slaves."), "{info}");
}

#[test]
fn redis_rs_cluster_client_works() {
    let dir = tmpdir("redis-rs");
    let cairn = start_cluster_cairn(&dir, free_port(), &[]);
    let url = format!("redis://127.0.0.1:{}/", cairn.port);
    let client = redis::cluster::ClusterClient::new(vec![url]).unwrap();
    let mut con = client.get_connection().unwrap();
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    for i in 0..200i64 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut con)
            .unwrap();
        assert_eq!(v, i);
    }
    let mut pipe = redis::cluster::cluster_pipe();
    for i in 0..50 {
        pipe.cmd("INCRBY").arg(format!("c{i}")).arg(i);
    }
    let got: Vec<i64> = pipe.query(&mut con).unwrap();
    assert_eq!(got, (0..50).collect::<Vec<i64>>());
    let _: () = redis::cmd("MSET")
        .arg("{u}a")
        .arg(1)
        .arg("{u}b")
        .arg(2)
        .query(&mut con)
        .unwrap();
    let v: Vec<i64> = redis::cmd("MGET")
        .arg("{u}a")
        .arg("{u}b")
        .query(&mut con)
        .unwrap();
    assert_eq!(v, [1, 2]);
    let n: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 252);
}
