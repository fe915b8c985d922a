//! Replication leftovers (issue 24, branch repl3), against a real
//! redis-server 7.0.15 where one applies: a master restarted from its
//! snapshot (Cairn's format and RDB) continues its replica with
//! `+CONTINUE`; WAIT counts acks of the client's own writes; a replica
//! that stops reading is closed at `client-output-buffer-limit replica`.
//! Scripts and memcached writes are refused on a read-only replica, and
//! a replica counts its master's commands in INFO commandstats. The tests that need redis-server skip without it
//! (outside CI).
mod support;

use redis::{Connection, Value};
use std::time::Duration;
use support::{
    digest, info_field, int, ok, q, redis_client, start_cairn, start_redis, wait_for, RawConn,
    Server, TestDir,
};

/// A client of a server that may still be loading (`-LOADING`).
fn client_when_loaded(port: u16) -> Connection {
    let mut c = redis_client(port);
    wait_for("the load", Duration::from_secs(20), || {
        redis::cmd("DBSIZE").query::<i64>(&mut c).is_ok()
    });
    c
}

/// A redis-server replicating from `master`, its link up.
fn start_replica(master: &Server, dir: &str) -> Option<(Server, Connection)> {
    let port = master.port.to_string();
    let replica = start_redis(&["--replicaof", "127.0.0.1", &port, "--dir", dir])?;
    let mut rc = redis_client(replica.port);
    wait_for("the replica's link", Duration::from_secs(20), || {
        info_field(&mut rc, "replication", "master_link_status").as_deref() == Some("up")
    });
    Some((replica, rc))
}

#[test]
fn a_master_restarted_from_its_snapshot_continues_its_replica() {
    for format in ["cairn", "rdb"] {
        let dir = TestDir::new("replx", &format!("restart-{format}"));
        // No PING between the replica's last byte and the save: the
        // replica must hold exactly the saved offset.
        let mut args = vec![
            "--dir",
            dir.s(),
            "--snapshot-format",
            format,
            "--enable-debug-command",
            "yes",
            "--repl-ping-replica-period",
            "3600",
        ];
        let mut master = start_cairn(&args);
        let mut mc = redis_client(master.port);
        ok(&mut mc, &["SET", "a", "1"]);
        let Some((_replica, mut rc)) = start_replica(&master, &dir.sub("replica")) else {
            return;
        };
        ok(&mut mc, &["SELECT", "2"]);
        ok(&mut mc, &["SET", "b", "2"]);
        int(&mut mc, &["INCR", "n"]);
        assert_eq!(int(&mut mc, &["WAIT", "1", "5000"]), 1);
        let replid = info_field(&mut mc, "replication", "master_replid").unwrap();
        let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<Value>(&mut mc);
        assert!(master.wait_exit(Duration::from_secs(10)).is_some());
        let port = master.port.to_string();
        args.extend(["--port", &port]);
        let master = start_cairn(&args);
        let mut mc = client_when_loaded(master.port);
        // Redis 7.0: the saved ID is ID2 up to the byte after the saved
        // offset, under a new ID.
        assert_eq!(
            info_field(&mut mc, "replication", "master_replid2").as_deref(),
            Some(replid.as_str()),
            "{format}"
        );
        ok(&mut mc, &["SELECT", "2"]);
        int(&mut mc, &["INCR", "n"]);
        wait_for("the replica's return", Duration::from_secs(20), || {
            int(&mut mc, &["WAIT", "1", "200"]) == 1
        });
        assert_eq!(
            info_field(&mut mc, "stats", "sync_partial_ok").as_deref(),
            Some("1"),
            "{format}"
        );
        assert_eq!(
            info_field(&mut mc, "stats", "sync_full").as_deref(),
            Some("0"),
            "{format}"
        );
        assert_eq!(digest(&mut rc), digest(&mut mc), "{format}");
        ok(&mut rc, &["SELECT", "2"]);
        assert_eq!(q::<i64>(&mut rc, &["GET", "n"]), 2, "{format}");
    }
}

#[test]
fn wait_counts_acks_of_the_clients_own_writes() {
    let dir = TestDir::new("replx", "wait");
    let master = start_cairn(&["--dir", dir.s()]);
    let mut writer = redis_client(master.port);
    let mut idle = redis_client(master.port);
    ok(&mut writer, &["SET", "a", "1"]);
    let Some((replica, _rc)) = start_replica(&master, &dir.sub("replica")) else {
        return;
    };
    assert_eq!(int(&mut writer, &["WAIT", "1", "5000"]), 1);
    // The replica stops acknowledging: the writer's next write is not
    // acked, but a client that wrote nothing waits for nothing (Redis's
    // `woff` is 0), even with no timeout.
    // SAFETY: signals a child process this test started.
    unsafe { libc::kill(replica.pid() as i32, libc::SIGSTOP) };
    ok(&mut writer, &["SET", "a", "2"]);
    assert_eq!(int(&mut writer, &["WAIT", "1", "300"]), 0);
    assert_eq!(int(&mut idle, &["WAIT", "1", "0"]), 1);
    // A read does not make it wait either.
    let _: Option<String> = q(&mut idle, &["GET", "a"]);
    assert_eq!(int(&mut idle, &["WAIT", "1", "0"]), 1);
    // SAFETY: as above.
    unsafe { libc::kill(replica.pid() as i32, libc::SIGCONT) };
    assert_eq!(int(&mut writer, &["WAIT", "1", "5000"]), 1);
}

#[test]
fn a_replica_that_stops_reading_is_closed_at_its_output_limit() {
    let dir = TestDir::new("replx", "obuf");
    let master = start_cairn(&["--dir", dir.s()]);
    let mut mc = redis_client(master.port);
    ok(
        &mut mc,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 1mb 0 0",
        ],
    );
    let limits: Vec<String> = q(&mut mc, &["CONFIG", "GET", "client-output-buffer-limit"]);
    assert!(limits[1].contains("slave 1048576 0 0"), "{limits:?}");
    // A replica that asks for a sync, then reads nothing.
    let mut raw = RawConn::connect(master.port);
    raw.send(&[b"PSYNC", b"?", b"-1"]);
    wait_for("the replica", Duration::from_secs(10), || {
        info_field(&mut mc, "replication", "connected_slaves").as_deref() == Some("1")
    });
    let value = "x".repeat(512 * 1024);
    for i in 0..60 {
        ok(&mut mc, &["SET", &format!("big:{i}"), &value]);
    }
    wait_for("the replica's close", Duration::from_secs(10), || {
        info_field(&mut mc, "replication", "connected_slaves").as_deref() == Some("0")
    });
    assert!(
        master
            .log()
            .contains("scheduled to be closed ASAP for overcoming of output buffer limits."),
        "{}",
        master.log_tail(20)
    );
    drop(raw);
}

/// A Cairn replica of a redis-server master, in sync after `SET a 1`.
fn cairn_replica_of_redis(extra: &[&str]) -> Option<(Server, Connection, Server, Connection)> {
    let redis = start_redis(&[])?;
    let mut m = redis_client(redis.port);
    ok(&mut m, &["SET", "a", "1"]);
    let port = redis.port.to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", &port];
    args.extend_from_slice(extra);
    let cairn = start_cairn(&args);
    let mut c = redis_client(cairn.port);
    wait_for("the sync", Duration::from_secs(20), || {
        redis::cmd("GET")
            .arg("a")
            .query::<Option<String>>(&mut c)
            .ok()
            .flatten()
            .is_some()
    });
    Some((redis, m, cairn, c))
}

#[test]
fn a_read_only_replica_refuses_writes_from_scripts_and_memcached() {
    let mc_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
        .to_string();
    let Some((_redis, _m, cairn, mut c)) = cairn_replica_of_redis(&["--memcached-port", &mc_port])
    else {
        return;
    };
    let e = support::err(
        &mut c,
        &["EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k"],
    );
    assert!(
        e.contains("READONLY You can't write against a read only replica."),
        "{e}"
    );
    let e = support::err(
        &mut c,
        &["EVAL", "#!lua\nreturn redis.call('GET', KEYS[1])", "1", "a"],
    );
    assert!(
        e.contains("READONLY Can not run script with write flag on readonly replica"),
        "{e}"
    );
    // Reads in scripts still run.
    let got: String = q(
        &mut c,
        &["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "a"],
    );
    assert_eq!(got, "1");
    let got: String = q(
        &mut c,
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('GET', KEYS[1])",
            "1",
            "a",
        ],
    );
    assert_eq!(got, "1");
    let got: String = q(
        &mut c,
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", "a"],
    );
    assert_eq!(got, "1");
    // memcached: SERVER_ERROR with the same reason; reads still work.
    let mut mc =
        std::net::TcpStream::connect(("127.0.0.1", mc_port.parse::<u16>().unwrap())).unwrap();
    mc.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    use std::io::{Read, Write};
    let line = |mc: &mut std::net::TcpStream, req: &[u8]| {
        mc.write_all(req).unwrap();
        let mut buf = Vec::new();
        let mut b = [0u8; 256];
        while !buf.ends_with(b"\r\n") {
            let n = mc.read(&mut b).unwrap();
            assert!(n > 0);
            buf.extend_from_slice(&b[..n]);
        }
        String::from_utf8_lossy(&buf).into_owned()
    };
    assert_eq!(
        line(&mut mc, b"set k 0 0 1\r\nx\r\n"),
        "SERVER_ERROR READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(line(&mut mc, b"get nothing\r\n"), "END\r\n");
    drop(cairn);
}

#[test]
fn a_replica_counts_its_masters_commands_in_commandstats() {
    let Some((_redis, mut m, _cairn, mut c)) = cairn_replica_of_redis(&[]) else {
        return;
    };
    for _ in 0..3 {
        int(&mut m, &["INCR", "n"]);
    }
    wait_for("the INCRs", Duration::from_secs(10), || {
        redis::cmd("GET")
            .arg("n")
            .query::<Option<i64>>(&mut c)
            .ok()
            .flatten()
            == Some(3)
    });
    let stats: String = q(&mut c, &["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_incr:calls=3,"), "{stats}");
}

#[test]
fn a_replica_hides_keys_past_their_time_until_the_masters_del() {
    let Some((_redis, mut m, _cairn, mut c)) = cairn_replica_of_redis(&[]) else {
        return;
    };
    // The master keeps the key past its time until a lookup of its own.
    ok(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    ok(&mut m, &["SET", "k", "v", "PX", "300"]);
    wait_for("the key", Duration::from_secs(10), || {
        int(&mut c, &["DBSIZE"]) == 2
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    assert_eq!(int(&mut c, &["EXISTS", "k"]), 0);
    // Hidden, not deleted: it waits for the master's DEL.
    assert_eq!(int(&mut c, &["DBSIZE"]), 2);
    assert_eq!(q::<Option<String>>(&mut m, &["GET", "k"]), None);
    wait_for("the master's DEL", Duration::from_secs(10), || {
        int(&mut c, &["DBSIZE"]) == 1
    });
}

#[test]
fn a_replica_restarted_from_its_snapshot_continues_from_its_master() {
    let Some(redis) = start_redis(&[]) else {
        return;
    };
    let mut m = redis_client(redis.port);
    let dir = TestDir::new("replx", "replica-restart");
    let port = redis.port.to_string();
    let args = ["--replicaof", "127.0.0.1", &port, "--dir", dir.s()];
    let mut cairn = start_cairn(&args);
    let mut c = redis_client(cairn.port);
    ok(&mut m, &["SELECT", "3"]);
    ok(&mut m, &["SET", "a", "1"]);
    // The first sync may take seconds on a loaded machine.
    wait_for("the replica's ack", Duration::from_secs(30), || {
        int(&mut m, &["WAIT", "1", "1000"]) == 1
    });
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<Value>(&mut c);
    assert!(cairn.wait_exit(Duration::from_secs(10)).is_some());
    // Written while the replica is down: the backlog has it.
    int(&mut m, &["INCR", "n"]);
    let cairn = start_cairn(&args);
    let mut c = client_when_loaded(cairn.port);
    wait_for("the INCR", Duration::from_secs(20), || {
        int(&mut m, &["WAIT", "1", "100"]) == 1
    });
    assert_eq!(
        info_field(&mut m, "stats", "sync_partial_ok").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut m, "stats", "sync_full").as_deref(),
        Some("1")
    );
    // The stream went on in the database the master had selected.
    ok(&mut c, &["SELECT", "3"]);
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 1);
}
