//! Redis Sentinel fails over Cairn (issue 24 item 4): three Debian
//! `redis-sentinel` 7.0 processes monitor a Cairn master and two Cairn
//! replicas, each started from a config file (Sentinel's promotion runs
//! CONFIG REWRITE). A writer sends `SET` + `WAIT 1` to whatever master the
//! sentinels name; the master is killed with SIGKILL during the writes; the
//! sentinels must agree on a promoted replica, the other replica must
//! follow it, redis-py's `redis.sentinel.Sentinel` must find and use it,
//! and the old master, restarted on its port, must be turned into a replica
//! of the new one by Sentinel. At the end every write WAIT acknowledged
//! must be on the last master, and every server must hold the same keys.
//! A second test puts a real redis-server replica in the set.
//! Skips (with a message) without redis-sentinel, outside CI.
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redis::{Connection, FromRedisValue, RedisResult};
use support::clients::{clients_dir, expect_success, python};
use support::sentinel::{fixed_port, sentinel_path, start_redis_conf, start_sentinel};
use support::{redis_server_path, start_cairn_conf, Server, TestDir};

/// How long one step of a failover may take: Sentinel needs ~1 s to see
/// the master down, a vote, and up to 2 x failover-timeout to retry when
/// its view of the replicas was stale; turning a restarted master into a
/// replica waits for its role to settle (~10 s).
const STEP: Duration = Duration::from_secs(60);

fn connect(port: u16) -> RedisResult<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let c = client.get_connection_with_timeout(Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(3)))?;
    c.set_write_timeout(Some(Duration::from_secs(3)))?;
    Ok(c)
}

fn query<T: FromRedisValue>(port: u16, args: &[&str]) -> RedisResult<T> {
    let mut c = connect(port)?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
}

/// A field of INFO replication, if the server answers.
fn info(port: u16, field: &str) -> Option<String> {
    let text: String = query(port, &["INFO", "replication"]).ok()?;
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_string())
}

/// One set at a time: two sets failing over at once on a loaded machine
/// delay PING replies past `down-after-milliseconds`.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where a sentinel says master `m` is.
fn master_of(sentinel: u16) -> Option<u16> {
    let addr: Vec<String> = query(sentinel, &["SENTINEL", "get-master-addr-by-name", "m"]).ok()?;
    addr.get(1)?.parse().ok()
}

#[derive(Clone)]
enum Kind {
    Cairn,
    Redis(PathBuf),
}

/// One data server, on a port it keeps across restarts, with its config
/// file (which Sentinel's CONFIG REWRITE edits).
struct Node {
    kind: Kind,
    port: u16,
    conf: PathBuf,
    server: Option<Server>,
}

impl Node {
    fn new(kind: Kind, dir: &TestDir, master: Option<u16>) -> Node {
        let port = fixed_port();
        let data = dir.sub(&format!("n{port}"));
        let conf = Path::new(&data).join("node.conf");
        let mut text = format!("port {port}\nbind 127.0.0.1\ndir {data}\n");
        if let Kind::Redis(_) = kind {
            text.push_str("save \"\"\nappendonly no\n");
        }
        if let Some(m) = master {
            text.push_str(&format!("replicaof 127.0.0.1 {m}\n"));
        }
        std::fs::write(&conf, text).unwrap();
        let mut node = Node {
            kind,
            port,
            conf,
            server: None,
        };
        node.start();
        node
    }

    fn start(&mut self) {
        let port = self.port.to_string();
        self.server = Some(match &self.kind {
            Kind::Cairn => start_cairn_conf(&self.conf, &["--port", &port]),
            Kind::Redis(bin) => start_redis_conf(bin, &self.conf, self.port),
        });
    }

    /// SIGKILL (Server's drop), so nothing is flushed or handed over.
    fn kill(&mut self) {
        self.server = None;
    }

    fn logs(&self) -> String {
        match &self.server {
            Some(s) => format!("--- {} log:\n{}", self.port, s.log_tail(30)),
            None => format!("--- {} (down)", self.port),
        }
    }
}

/// `SET w:<i> <i>` then `WAIT 1 1000` in a loop against the master the
/// sentinels name, reconnecting on any error; `acked` gets every `i` that
/// WAIT counted on a replica. Stopped and joined on drop.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<u64>>>,
    handle: Option<JoinHandle<()>>,
}

impl Writer {
    fn start(sentinels: Vec<u16>) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Vec::new()));
        let (s, a) = (stop.clone(), acked.clone());
        let handle = std::thread::spawn(move || {
            let mut i = 0u64;
            while !s.load(Ordering::Relaxed) {
                let Some(port) = sentinels.iter().find_map(|&p| master_of(p)) else {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                let Ok(mut c) = connect(port) else {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                while !s.load(Ordering::Relaxed) {
                    i += 1;
                    let set: RedisResult<()> =
                        redis::cmd("SET").arg(format!("w:{i}")).arg(i).query(&mut c);
                    if set.is_err() {
                        break;
                    }
                    let n: RedisResult<i64> = redis::cmd("WAIT").arg(1).arg(1000).query(&mut c);
                    match n {
                        Ok(n) if n >= 1 => a.lock().unwrap().push(i),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                    // A steady stream, not a flood that slows everything.
                    std::thread::sleep(Duration::from_millis(2));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Writer {
            stop,
            acked,
            handle: Some(handle),
        }
    }

    fn acked(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    fn finish(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.join().unwrap();
        }
        std::mem::take(&mut *self.acked.lock().unwrap())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// redis-py's Sentinel client finds `master` and writes and reads through
/// it (tests/clients/sentinel_check.py).
fn redis_py_follows(sentinels: &[u16], master: u16) {
    let Some(py) = python("redis.sentinel") else {
        return;
    };
    let ports: Vec<String> = sentinels.iter().map(|p| p.to_string()).collect();
    let mut cmd = Command::new(py);
    cmd.arg(clients_dir().join("sentinel_check.py"))
        .arg(ports.join(","))
        .arg(format!("127.0.0.1:{master}"))
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    expect_success("redis-py Sentinel", None, cmd, Duration::from_secs(30));
}

/// The set: master `nodes[0]`, replicas of it, three sentinels that see
/// each other and both replicas.
fn start_set(kinds: &[Kind], dir: &TestDir, bin: &Path) -> (Vec<Node>, Vec<Server>) {
    let mut nodes = vec![Node::new(kinds[0].clone(), dir, None)];
    let master = nodes[0].port;
    for k in &kinds[1..] {
        nodes.push(Node::new(k.clone(), dir, Some(master)));
    }
    let want = kinds.len() - 1;
    wait_until("replicas online", STEP, || {
        info(master, "connected_slaves").as_deref() == Some(&want.to_string())
            && (0..want).all(|i| {
                info(master, &format!("slave{i}")).is_some_and(|l| l.contains("state=online"))
            })
    });
    let sentinels: Vec<Server> = (0..3)
        .map(|_| start_sentinel(bin, &dir.0, master, 2))
        .collect();
    for s in &sentinels {
        wait_until("sentinels see each other and the replicas", STEP, || {
            let quorum: RedisResult<String> = query(s.port, &["SENTINEL", "CKQUORUM", "m"]);
            let replicas: RedisResult<Vec<redis::Value>> =
                query(s.port, &["SENTINEL", "REPLICAS", "m"]);
            quorum.is_ok_and(|q| q.starts_with("OK 3 usable"))
                && replicas.is_ok_and(|r| r.len() == want)
        });
    }
    (nodes, sentinels)
}

/// Kills the master during the writes; checks the promotion, the other
/// replicas, redis-py, and the old master's return as a replica. Returns
/// the new master's index.
fn fail_over(nodes: &mut [Node], sentinels: &[Server], master: usize, writer: &Writer) -> usize {
    let ports: Vec<u16> = sentinels.iter().map(|s| s.port).collect();
    let before = writer.acked();
    wait_until("acknowledged writes on the master", STEP, || {
        writer.acked() >= before + 50
    });
    let old = nodes[master].port;
    nodes[master].kill();
    let t0 = Instant::now();
    let mut new = old;
    wait_until("the sentinels agree on a new master", STEP, || {
        let seen: Vec<Option<u16>> = ports.iter().map(|&p| master_of(p)).collect();
        match seen[0] {
            Some(p) if p != old && seen.iter().all(|s| *s == Some(p)) => {
                new = p;
                true
            }
            _ => false,
        }
    });
    let snapshot = nodes.iter().map(Node::logs).collect::<Vec<_>>().join("\n");
    // The master the sentinels name now (they may change their mind on a
    // slow machine) is a master, and the other live servers its replicas.
    wait_until(
        &format!("{new} a master, the others its replicas\n{snapshot}"),
        STEP,
        || {
            new = master_of(ports[0]).unwrap_or(new);
            info(new, "role").as_deref() == Some("master")
                && nodes
                    .iter()
                    .filter(|n| n.port != new && n.server.is_some())
                    .all(|n| {
                        info(n.port, "master_port") == Some(new.to_string())
                            && info(n.port, "master_link_status").as_deref() == Some("up")
                    })
        },
    );
    eprintln!("failover {old} -> {new} in {:?}", t0.elapsed());
    let after = writer.acked();
    wait_until("acknowledged writes on the new master", STEP, || {
        writer.acked() >= after + 20
    });
    redis_py_follows(&ports, new);
    // The old master comes back as a master with its old data; Sentinel
    // sees it and makes it a replica of the new one.
    nodes[master].start();
    let t1 = Instant::now();
    wait_until("Sentinel turns the old master into a replica", STEP, || {
        let now = master_of(ports[0]);
        now.is_some_and(|m| m != old)
            && info(old, "master_port") == now.map(|m| m.to_string())
            && info(old, "master_link_status").as_deref() == Some("up")
    });
    eprintln!("{old} a replica of {new} after {:?}", t1.elapsed());
    let now = master_of(ports[0]).unwrap();
    nodes.iter().position(|n| n.port == now).unwrap_or_else(|| {
        panic!("the sentinels named {now}, not one of ours");
    })
}

/// Every acknowledged write is on the master; after `WAIT`, every server
/// holds as many keys.
fn check_no_loss(nodes: &[Node], master: usize, acked: &[u64]) {
    let port = nodes[master].port;
    let mut c = connect(port).unwrap();
    for chunk in acked.chunks(500) {
        let keys: Vec<String> = chunk.iter().map(|i| format!("w:{i}")).collect();
        let got: Vec<Option<u64>> = redis::cmd("MGET").arg(&keys).query(&mut c).unwrap();
        for (i, v) in chunk.iter().zip(got) {
            assert_eq!(v, Some(*i), "acknowledged write w:{i} lost on {port}");
        }
    }
    let replicas = (nodes.len() - 1) as i64;
    let n: i64 = redis::cmd("WAIT")
        .arg(replicas)
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, replicas, "WAIT on the last master");
    let size: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    for n in nodes {
        let theirs: i64 = query(n.port, &["DBSIZE"]).unwrap();
        assert_eq!(theirs, size, "DBSIZE of {} vs the master {port}", n.port);
    }
}

fn run(kinds: &[Kind], rounds: usize, name: &str) {
    let Some(bin) = sentinel_path() else {
        return;
    };
    let _one_at_a_time = serial();
    let dir = TestDir::new("sentinel", name);
    let (mut nodes, sentinels) = start_set(kinds, &dir, &bin);
    let writer = Writer::start(sentinels.iter().map(|s| s.port).collect());
    let mut master = 0;
    for _ in 0..rounds {
        master = fail_over(&mut nodes, &sentinels, master, &writer);
    }
    let acked = writer.finish();
    assert!(!acked.is_empty());
    check_no_loss(&nodes, master, &acked);
    eprintln!("{} writes acknowledged by WAIT 1, none lost", acked.len());
}

#[test]
fn sentinel_fails_over_cairn() {
    run(&[Kind::Cairn, Kind::Cairn, Kind::Cairn], 2, "cairn");
}

#[test]
fn sentinel_fails_over_with_a_redis_replica() {
    let Some(redis) = redis_server_path() else {
        return;
    };
    run(&[Kind::Cairn, Kind::Cairn, Kind::Redis(redis)], 1, "mixed");
}
