//! Full syncs that share one image (issue 24): replicas asking for a full
//! sync within `repl-diskless-sync-delay` get ONE cut streamed to all of
//! them, not before the delay unless `repl-diskless-sync-max-replicas`
//! wait; in disk mode a replica arriving while the file for another is
//! written attaches to that save. INFO stats `repl_full_sync_images`
//! counts images (Redis's `total_forks` stays 1 in the same runs),
//! `sync_full` the replicas; DEBUG DIGEST agrees everywhere. The tests
//! need redis-server and skip without it (outside CI).
mod support;

use redis::Connection;
use std::time::{Duration, Instant};
use support::{
    digest, info_field, int, ok, redis_client, start_cairn, start_redis, wait_for, Server, TestDir,
};

fn images(c: &mut Connection) -> i64 {
    info_field(c, "stats", "repl_full_sync_images")
        .unwrap()
        .parse()
        .unwrap()
}

fn stat(c: &mut Connection, name: &str) -> Option<String> {
    info_field(c, "stats", name)
}

fn fill(c: &mut Connection, n: usize) {
    for chunk in 0..n / 100 {
        let mut args = vec!["MSET".to_string()];
        for i in chunk * 100..(chunk + 1) * 100 {
            args.push(format!("key:{i}"));
            args.push(format!("value {i}"));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(c, &refs);
    }
    int(c, &["RPUSH", "list", "a", "b", "c"]);
}

/// A redis-server replica of `master` (not waited for).
fn redis_replica(master: &Server, dir: &TestDir, name: &str) -> Option<Server> {
    start_redis(&[
        "--dir",
        &dir.sub(name),
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
    ])
}

/// The master's replicas in INFO replication: (connected, online).
fn replicas(c: &mut Connection) -> (usize, usize) {
    let n: usize = info_field(c, "replication", "connected_slaves")
        .unwrap()
        .parse()
        .unwrap();
    let online = (0..n)
        .filter(|i| {
            info_field(c, "replication", &format!("slave{i}"))
                .is_some_and(|l| l.contains("state=online"))
        })
        .count();
    (n, online)
}

fn link_up(c: &mut Connection) -> bool {
    info_field(c, "replication", "master_link_status").as_deref() == Some("up")
}

#[test]
fn replicas_within_the_delay_share_one_diskless_image() {
    let dir = TestDir::new("replshare", "delay");
    let master = start_cairn(&[
        "--dir",
        dir.s(),
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "5",
    ]);
    let mut mc = redis_client(master.port);
    fill(&mut mc, 2000);
    let t0 = Instant::now();
    let Some(r1) = redis_replica(&master, &dir, "r1") else {
        return;
    };
    let Some(r2) = redis_replica(&master, &dir, "r2") else {
        return;
    };
    let r3 = start_cairn(&[
        "--enable-debug-command",
        "yes",
        "--replicaof",
        "127.0.0.1",
        &master.port.to_string(),
    ]);
    wait_for("three waiting replicas", Duration::from_secs(10), || {
        replicas(&mut mc).0 == 3
    });
    // All three asked within the delay: nothing is cut yet.
    assert_eq!(images(&mut mc), 0);
    let mut cut_seen = None;
    wait_for("three online replicas", Duration::from_secs(30), || {
        if cut_seen.is_none() && images(&mut mc) > 0 {
            cut_seen = Some(t0.elapsed());
        }
        replicas(&mut mc).1 == 3
    });
    let cut_at = cut_seen.unwrap_or_else(|| t0.elapsed());
    assert!(
        cut_at >= Duration::from_millis(4950),
        "the image was made {cut_at:?} after the first replica asked, before the 5 s delay"
    );
    assert_eq!(images(&mut mc), 1);
    assert_eq!(stat(&mut mc, "sync_full").as_deref(), Some("3"));
    assert!(master.log().contains("(3 replicas)"), "{}", master.log());
    fill(&mut mc, 300);
    assert_eq!(int(&mut mc, &["WAIT", "3", "5000"]), 3);
    let want = digest(&mut mc);
    for s in [&r1, &r2, &r3] {
        let mut c = redis_client(s.port);
        assert!(link_up(&mut c));
        assert_eq!(digest(&mut c), want);
    }
}

#[test]
fn max_replicas_starts_the_shared_image_before_the_delay() {
    let dir = TestDir::new("replshare", "max");
    let master = start_cairn(&[
        "--dir",
        dir.s(),
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "60",
        "--repl-diskless-sync-max-replicas",
        "2",
    ]);
    let mut mc = redis_client(master.port);
    fill(&mut mc, 1000);
    let Some(r1) = redis_replica(&master, &dir, "r1") else {
        return;
    };
    let Some(r2) = redis_replica(&master, &dir, "r2") else {
        return;
    };
    wait_for("two online replicas", Duration::from_secs(20), || {
        replicas(&mut mc).1 == 2
    });
    assert_eq!(images(&mut mc), 1);
    assert_eq!(stat(&mut mc, "sync_full").as_deref(), Some("2"));
    assert_eq!(int(&mut mc, &["WAIT", "2", "5000"]), 2);
    let want = digest(&mut mc);
    for s in [&r1, &r2] {
        assert_eq!(digest(&mut redis_client(s.port)), want);
    }
}

#[test]
fn redis_server_forks_once_for_replicas_within_its_delay() {
    // The reference this counter mirrors: two replicas of a redis-server
    // master within its delay cost one fork.
    let dir = TestDir::new("replshare", "redis");
    let Some(master) = start_redis(&["--dir", &dir.sub("m"), "--repl-diskless-sync-delay", "2"])
    else {
        return;
    };
    let mut mc = redis_client(master.port);
    fill(&mut mc, 1000);
    let forks: i64 = stat(&mut mc, "total_forks").unwrap().parse().unwrap();
    let Some(_r1) = redis_replica(&master, &dir, "r1") else {
        return;
    };
    let Some(_r2) = redis_replica(&master, &dir, "r2") else {
        return;
    };
    wait_for("two online replicas", Duration::from_secs(20), || {
        replicas(&mut mc).1 == 2
    });
    let after: i64 = stat(&mut mc, "total_forks").unwrap().parse().unwrap();
    assert_eq!(after - forks, 1);
    assert_eq!(stat(&mut mc, "sync_full").as_deref(), Some("2"));
}

#[test]
fn a_disk_replica_attaches_to_the_save_in_progress() {
    let dir = TestDir::new("replshare", "disk");
    // 2000 keys at 1 ms each: the file takes about two seconds to write.
    let master = start_cairn(&[
        "--dir",
        dir.s(),
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync",
        "no",
        "--rdb-key-save-delay",
        "1000",
    ]);
    let mut mc = redis_client(master.port);
    fill(&mut mc, 2000);
    let Some(r1) = redis_replica(&master, &dir, "r1") else {
        return;
    };
    wait_for("the first replica's cut", Duration::from_secs(10), || {
        info_field(&mut mc, "replication", "slave0").is_some_and(|l| l.contains("send_bulk"))
    });
    assert_eq!(images(&mut mc), 1);
    // Writes after the cut reach both replicas through the stream.
    ok(&mut mc, &["SET", "after-the-cut", "1"]);
    let Some(r2) = redis_replica(&master, &dir, "r2") else {
        return;
    };
    wait_for("two online replicas", Duration::from_secs(30), || {
        replicas(&mut mc).1 == 2
    });
    assert!(
        master.log().contains("Waiting for end of BGSAVE for SYNC"),
        "{}",
        master.log()
    );
    assert_eq!(images(&mut mc), 1);
    assert_eq!(stat(&mut mc, "sync_full").as_deref(), Some("2"));
    assert_eq!(int(&mut mc, &["WAIT", "2", "5000"]), 2);
    let want = digest(&mut mc);
    for s in [&r1, &r2] {
        assert_eq!(digest(&mut redis_client(s.port)), want);
    }
    // The file went with its last reader.
    wait_for("the temporary file to go", Duration::from_secs(5), || {
        !dir.names().iter().any(|n| n.starts_with("temp-repl-"))
    });
}
