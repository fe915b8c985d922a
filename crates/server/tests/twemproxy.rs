//! Scale-out behind twemproxy (issue 24, item 5b): Debian's `nutcracker`
//! in front of three Cairn nodes, one pool for the Redis protocol and one
//! for memcached's, both with ketama distribution. Keys written through
//! the proxy spread over the nodes and read back the same through the
//! proxy and straight from the node that holds them; a node restarted on
//! its ports is served again (the Redis pool ejects a failed node and
//! brings it back after `server_retry_timeout`; the memcached pool keeps
//! its nodes and reconnects). docs/design.md ("Cluster mode and
//! scale-out") lists what twemproxy cannot proxy.
//!
//! Skipped with a message when `nutcracker` is not installed, except in CI
//! (`CI` set), where it must run: scripts/test installs it.
mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{start_cairn, RawConn, Server};

const KEYS: usize = 1000;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The nutcracker binary, or None (outside CI) to skip.
fn nutcracker() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nutcracker"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nutcracker (twemproxy) is required in CI: apt-get install -y nutcracker \
             (scripts/test installs it)"
        );
        eprintln!(
            "nutcracker (twemproxy) is not installed; skipping (apt-get install -y nutcracker)"
        );
    }
    found
}

/// One Cairn node: its RESP port and its memcached port.
struct Node {
    server: Server,
    mc_port: u16,
}

fn start_node(port: u16, mc_port: u16) -> Node {
    let (p, m) = (port.to_string(), mc_port.to_string());
    Node {
        server: start_cairn(&["--port", &p, "--memcached-port", &m]),
        mc_port,
    }
}

/// The proxy process, killed when dropped.
struct Proxy {
    child: Child,
    log: PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proxy {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// nutcracker.yml: a Redis pool that ejects a failed node and a memcached
/// pool that keeps its nodes, both ketama over the three nodes.
fn config(redis_listen: u16, mc_listen: u16, nodes: &[(u16, u16)]) -> String {
    let servers = |pick: fn(&(u16, u16)) -> u16| {
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("   - 127.0.0.1:{}:1 cairn{i}\n", pick(n)))
            .collect::<String>()
    };
    format!(
        "redis_pool:\n  listen: 127.0.0.1:{redis_listen}\n  hash: murmur\n  hash_tag: \"{{}}\"\n  \
         distribution: ketama\n  redis: true\n  timeout: 2000\n  auto_eject_hosts: true\n  \
         server_failure_limit: 1\n  server_retry_timeout: 500\n  servers:\n{}\
         memcache_pool:\n  listen: 127.0.0.1:{mc_listen}\n  hash: murmur\n  \
         distribution: ketama\n  redis: false\n  timeout: 2000\n  auto_eject_hosts: false\n  \
         servers:\n{}",
        servers(|n| n.0),
        servers(|n| n.1),
    )
}

fn start_proxy(bin: &PathBuf, conf: &str, listen: &[u16]) -> Proxy {
    let dir = std::env::temp_dir().join(format!("cairn-twemproxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf_path = dir.join("nutcracker.yml");
    std::fs::write(&conf_path, conf).unwrap();
    let log = dir.join("nutcracker.log");
    let stats = free_port().to_string();
    let mut cmd = Command::new(bin);
    cmd.arg("-c")
        .arg(&conf_path)
        .args(["-s", &stats, "-a", "127.0.0.1", "-v", "6", "-o"])
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn().expect("start nutcracker");
    let proxy = Proxy { child, log };
    let deadline = Instant::now() + Duration::from_secs(10);
    for &port in listen {
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "nutcracker never listened on {port}; its log:\n{}",
                proxy.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    proxy
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A memcached text-protocol connection.
struct Mc {
    r: BufReader<TcpStream>,
}

impl Mc {
    fn connect(port: u16) -> Mc {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Mc {
            r: BufReader::new(s),
        }
    }

    /// One reply line; empty when the connection failed or closed.
    fn line(&mut self) -> String {
        let mut l = String::new();
        if self.r.read_line(&mut l).is_err() {
            l.clear();
        }
        l
    }

    fn send(&mut self, req: &str) {
        // A failed write shows as an empty reply line.
        let _ = self.r.get_mut().write_all(req.as_bytes());
    }

    fn set(&mut self, key: &str, value: &str) -> String {
        self.send(&format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()));
        self.line()
    }

    /// The value, None for a miss, Err with the reply line otherwise.
    fn get(&mut self, key: &str) -> Result<Option<String>, String> {
        self.send(&format!("get {key}\r\n"));
        let first = self.line();
        if first == "END\r\n" {
            return Ok(None);
        }
        if !first.starts_with("VALUE ") {
            return Err(first);
        }
        let value = self.line().trim_end_matches("\r\n").to_string();
        let end = self.line();
        assert_eq!(end, "END\r\n");
        Ok(Some(value))
    }
}

/// Runs `f` until it returns Some, reconnecting through `connect` after a
/// failure (the proxy may close a connection whose server failed), for
/// at most 10 s.
fn retry<C, T>(
    conn: &mut C,
    connect: impl Fn() -> C,
    what: &str,
    mut f: impl FnMut(&mut C) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f(conn) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the proxy never served it"
        );
        std::thread::sleep(Duration::from_millis(50));
        *conn = connect();
    }
}

/// A RESP command through a connection that may fail: None on an error
/// reply or a closed connection.
fn try_cmd(conn: &mut RawConn, args: &[&str]) -> Option<Vec<u8>> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    conn.try_send_raw(&encode(&args)).ok()?;
    let reply = conn.try_read_raw_reply().ok()??;
    (!reply.starts_with(b"-")).then_some(reply)
}

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn bulk(v: &str) -> Vec<u8> {
    format!("${}\r\n{v}\r\n", v.len()).into_bytes()
}

/// Which node holds `key` (RESP), checking it is exactly one with `value`.
fn owner(nodes: &[Node], key: &str, value: &str) -> usize {
    let holders: Vec<usize> = (0..nodes.len())
        .filter(|&i| {
            let got = RawConn::connect(nodes[i].server.port).cmd(&["GET", key]);
            if got == b"$-1\r\n" {
                return false;
            }
            assert_eq!(text(&got), text(&bulk(value)), "{key} on node {i}");
            true
        })
        .collect();
    assert_eq!(holders.len(), 1, "{key} is on nodes {holders:?}");
    holders[0]
}

fn dbsize(node: &Node) -> i64 {
    let r = text(&RawConn::connect(node.server.port).cmd(&["DBSIZE"]));
    r.trim_start_matches(':').trim().parse().unwrap()
}

#[test]
fn twemproxy_spreads_keys_over_three_nodes_and_survives_a_restart() {
    let Some(bin) = nutcracker() else {
        return;
    };
    let mut nodes: Vec<Node> = (0..3).map(|_| start_node(0, free_port())).collect();
    let ports: Vec<(u16, u16)> = nodes.iter().map(|n| (n.server.port, n.mc_port)).collect();
    let (rp, mp) = (free_port(), free_port());
    let proxy = start_proxy(&bin, &config(rp, mp, &ports), &[rp, mp]);
    let connect = || RawConn::connect(rp);
    let mut p = connect();

    // Redis protocol: 1,000 keys through the proxy.
    for i in 0..KEYS {
        let r = p.cmd(&["SET", &format!("r:{i}"), &format!("v{i}")]);
        assert_eq!(text(&r), "+OK\r\n", "SET r:{i} through the proxy");
    }
    let mut per_node = [0usize; 3];
    for i in 0..KEYS {
        let (k, v) = (format!("r:{i}"), format!("v{i}"));
        assert_eq!(p.cmd(&["GET", &k]), bulk(&v), "GET {k} through the proxy");
        per_node[owner(&nodes, &k, &v)] += 1;
    }
    assert!(
        per_node.iter().all(|&n| n > 0),
        "ketama spread: {per_node:?}"
    );
    let sizes: Vec<i64> = nodes.iter().map(dbsize).collect();
    assert_eq!(sizes.iter().sum::<i64>(), KEYS as i64, "{sizes:?}");
    // A write straight to the owner is what the proxy reads.
    let o = owner(&nodes, "r:7", "v7");
    RawConn::connect(nodes[o].server.port).cmd(&["SET", "r:7", "direct"]);
    assert_eq!(p.cmd(&["GET", "r:7"]), bulk("direct"));
    // Multi-key commands the proxy splits by node, and hash tags keep
    // related keys on one node.
    let mget = text(&p.cmd(&["MGET", "r:1", "r:2", "r:3", "nokey"]));
    assert_eq!(mget, "*4\r\n$2\r\nv1\r\n$2\r\nv2\r\n$2\r\nv3\r\n$-1\r\n");
    assert_eq!(text(&p.cmd(&["DEL", "r:1", "r:2"])), ":2\r\n");
    p.cmd(&["SET", "{user9}:a", "1"]);
    p.cmd(&["SET", "{user9}:b", "2"]);
    let a = owner(&nodes, "{user9}:a", "1");
    assert_eq!(owner(&nodes, "{user9}:b", "2"), a);
    // What twemproxy does not proxy: it closes the connection (or errors).
    let mut q = connect();
    assert!(
        try_cmd(&mut q, &["MULTI"]).is_none(),
        "twemproxy proxied MULTI"
    );

    // memcached protocol: 1,000 keys through the proxy.
    let mut m = Mc::connect(mp);
    for i in 0..KEYS {
        assert_eq!(m.set(&format!("m:{i}"), &format!("w{i}")), "STORED\r\n");
    }
    let mut mc_nodes: Vec<Mc> = nodes.iter().map(|n| Mc::connect(n.mc_port)).collect();
    let mut mc_per_node = [0usize; 3];
    for i in 0..KEYS {
        let (k, v) = (format!("m:{i}"), format!("w{i}"));
        assert_eq!(m.get(&k), Ok(Some(v.clone())), "get {k} through the proxy");
        let holders: Vec<usize> = (0..3)
            .filter(|&n| match mc_nodes[n].get(&k) {
                Ok(Some(got)) => {
                    assert_eq!(got, v);
                    true
                }
                Ok(None) => false,
                Err(e) => panic!("get {k} on node {n}: {e}"),
            })
            .collect();
        assert_eq!(holders.len(), 1, "{k} on {holders:?}");
        mc_per_node[holders[0]] += 1;
    }
    assert!(mc_per_node.iter().all(|&n| n > 0), "{mc_per_node:?}");

    // Node 1 goes down. The Redis pool ejects it after one failure: every
    // key is served by the other two (retrying the request that failed).
    let (port1, mc1) = ports[1];
    drop(nodes.remove(1));
    for i in 0..KEYS {
        let (k, v) = (format!("r:{i}"), format!("down{i}"));
        retry(&mut p, connect, &k, |c| try_cmd(c, &["SET", &k, &v]));
    }
    for i in 0..KEYS {
        let (k, v) = (format!("r:{i}"), format!("down{i}"));
        let got = retry(&mut p, connect, &k, |c| try_cmd(c, &["GET", &k]));
        assert_eq!(got, bulk(&v), "{k} while node 1 is down");
    }
    // The memcached pool keeps the node: its keys fail, the others' work.
    let mut served = 0;
    let mut m = Mc::connect(mp);
    for i in 0..50 {
        match m.get(&format!("m:{i}")) {
            Ok(_) => served += 1,
            Err(_) => m = Mc::connect(mp),
        }
    }
    assert!(
        served > 0 && served < 50,
        "memcached pool during the outage: {served}/50"
    );

    // Back on its ports: both pools serve it again.
    nodes.insert(1, start_node(port1, mc1));
    std::thread::sleep(Duration::from_millis(700));
    for i in 0..KEYS {
        let (k, v) = (format!("up:{i}"), format!("u{i}"));
        retry(&mut p, connect, &k, |c| {
            try_cmd(c, &["SET", &k, &v]).filter(|r| r == b"+OK\r\n")
        });
    }
    for i in 0..KEYS {
        let (k, v) = (format!("up:{i}"), format!("u{i}"));
        let got = retry(&mut p, connect, &k, |c| try_cmd(c, &["GET", &k]));
        assert_eq!(got, bulk(&v), "{k}");
    }
    assert!(
        dbsize(&nodes[1]) > 0,
        "the restarted node gets its share again"
    );
    let mc_connect = || Mc::connect(mp);
    let mut m = mc_connect();
    for i in 0..KEYS {
        let (k, v) = (format!("m:{i}"), format!("again{i}"));
        retry(&mut m, mc_connect, &k, |c| {
            (c.set(&k, &v) == "STORED\r\n").then_some(())
        });
        assert_eq!(m.get(&k), Ok(Some(v)));
    }
    let mut restarted = Mc::connect(mc1);
    let held = (0..KEYS)
        .filter(|i| matches!(restarted.get(&format!("m:{i}")), Ok(Some(_))))
        .count();
    assert_eq!(
        held, mc_per_node[1],
        "the memcached pool's node 1 holds its keys again"
    );
    drop(proxy);
}
