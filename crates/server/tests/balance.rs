//! Connections moving between workers (`worker-balance`, balance.rs): a
//! client must never notice. Its database, name, protocol, transaction and
//! WATCH survive a move; a pipelined client loses and reorders nothing
//! while workers are retired and brought back under it; blocked clients
//! and subscribers stay where they are and keep working; an idle server
//! gathers its clients on one worker by itself.
//!
//! And how many workers serve under a CPU burner: a server whose cores are
//! shared with busy threads keeps its clients on one worker (the 2-core
//! case `worker-balance` exists for), while a server pinned to cores of its
//! own spreads over all of them however busy the other cores are (issue
//! 19: the first rule counted the clients' cores against the server's).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::{q, redis_client, redis_client_resp3, start_cairn, RawConn};

/// One field of INFO server.
fn info_field(c: &mut redis::Connection, name: &str) -> String {
    let info: String = q(c, &["INFO", "server"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")[..]))
        .unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
        .trim()
        .to_string()
}

/// Connections per worker, from INFO `cairn_worker_clients`.
fn per_worker(c: &mut redis::Connection) -> Vec<usize> {
    info_field(c, "cairn_worker_clients")
        .split(',')
        .map(|n| n.parse().unwrap())
        .collect()
}

/// Waits until `f` holds, for up to `secs`; panics with `what` otherwise.
fn wait_for(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn mc_roundtrip(s: &mut TcpStream, req: &[u8], want: &[u8]) {
    s.write_all(req).unwrap();
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(want),
        "memcached reply"
    );
}

#[test]
fn a_moved_client_keeps_its_state() {
    let s = start_cairn(&[
        "--server-threads",
        "4",
        "--worker-balance",
        "yes",
        "--enable-debug-command",
        "yes",
    ]);
    let mut admin = redis_client(s.port);
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "4"]);
    // Round-robin over four workers: these land on all of them.
    let mut plain: Vec<redis::Connection> = (0..6).map(|_| redis_client(s.port)).collect();
    for (i, c) in plain.iter_mut().enumerate() {
        let _: () = q(c, &["SELECT", &(i % 16).to_string()]);
        let _: () = q(c, &["CLIENT", "SETNAME", &format!("c{i}")]);
        let _: () = q(c, &["SET", "k", &format!("v{i}")]);
    }
    let mut resp3 = redis_client_resp3(s.port);
    let _: () = q(&mut resp3, &["HSET", "h", "f", "v"]);
    // A transaction under way and a WATCH, both left open across the move.
    let mut tx = RawConn::connect(s.port);
    assert_eq!(tx.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(tx.cmd(&["INCR", "n"]), b"+QUEUED\r\n");
    let mut watcher = RawConn::connect(s.port);
    assert_eq!(watcher.cmd(&["WATCH", "w"]), b"+OK\r\n");
    let spread = per_worker(&mut admin);
    assert!(
        spread.iter().filter(|&&n| n > 0).count() >= 3,
        "clients spread: {spread:?}"
    );

    let moves_before: u64 = info_field(&mut admin, "cairn_worker_moves")
        .parse()
        .unwrap();
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "1"]);
    wait_for(10, "every client on worker 0", || {
        let p = per_worker(&mut admin);
        p[1..].iter().all(|&n| n == 0)
    });
    let moves: u64 = info_field(&mut admin, "cairn_worker_moves")
        .parse()
        .unwrap();
    assert!(moves > moves_before, "moves {moves_before} -> {moves}");
    assert_eq!(info_field(&mut admin, "cairn_active_workers"), "1");

    for (i, c) in plain.iter_mut().enumerate() {
        let v: String = q(c, &["GET", "k"]);
        assert_eq!(v, format!("v{i}"), "database of client {i}");
        let name: String = q(c, &["CLIENT", "GETNAME"]);
        assert_eq!(name, format!("c{i}"));
    }
    // RESP3 survives: HGETALL is a map.
    let map: redis::Value = q(&mut resp3, &["HGETALL", "h"]);
    assert!(matches!(map, redis::Value::Map(_)), "{map:?}");
    let _: () = q(&mut admin, &["SET", "w", "changed"]);
    assert_eq!(watcher.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(watcher.cmd(&["SET", "x", "1"]), b"+QUEUED\r\n");
    assert_eq!(watcher.cmd(&["EXEC"]), b"*-1\r\n", "WATCH kept its key");
    assert_eq!(tx.cmd(&["EXEC"]), b"*1\r\n:1\r\n", "queued command kept");

    // And back out over four workers: the plan spreads them again.
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "4"]);
    wait_for(10, "clients spread again", || {
        per_worker(&mut admin).iter().filter(|&&n| n > 0).count() >= 3
    });
    for (i, c) in plain.iter_mut().enumerate() {
        let v: String = q(c, &["GET", "k"]);
        assert_eq!(v, format!("v{i}"));
    }
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 10, "{list}");
}

#[test]
fn a_moved_memcached_client_keeps_working() {
    // The memcached port needs a number: pick one the OS says is free.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let s = start_cairn(&[
        "--server-threads",
        "2",
        "--worker-balance",
        "yes",
        "--enable-debug-command",
        "yes",
        "--memcached-port",
        &port.to_string(),
    ]);
    let mut admin = redis_client(s.port);
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "2"]);
    let mut mcs: Vec<TcpStream> = (0..4)
        .map(|_| {
            let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c
        })
        .collect();
    for (i, m) in mcs.iter_mut().enumerate() {
        mc_roundtrip(
            m,
            format!("set m{i} 7 0 1\r\n{i}\r\n").as_bytes(),
            b"STORED\r\n",
        );
    }
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "1"]);
    wait_for(10, "memcached clients on worker 0", || {
        per_worker(&mut admin)[1] == 0
    });
    for (i, m) in mcs.iter_mut().enumerate() {
        mc_roundtrip(
            m,
            format!("get m{i}\r\n").as_bytes(),
            format!("VALUE m{i} 7 1\r\n{i}\r\nEND\r\n").as_bytes(),
        );
    }
}

/// Four clients pipeline INCRs on their own counters while the active
/// worker count changes every few milliseconds: every reply must arrive,
/// in order, with the next value.
#[test]
fn pipelined_clients_lose_nothing_while_workers_change() {
    let s = start_cairn(&[
        "--server-threads",
        "4",
        "--worker-balance",
        "yes",
        "--enable-debug-command",
        "yes",
    ]);
    let port = s.port;
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..4 {
        let stop = stop.clone();
        clients.push(thread::spawn(move || {
            let mut conn = redis_client(port);
            let key = format!("counter{c}");
            let mut expect = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let mut p = redis::pipe();
                for _ in 0..50 {
                    p.cmd("INCR").arg(&key);
                }
                let got: Vec<i64> = p.query(&mut conn).unwrap();
                for v in got {
                    expect += 1;
                    assert_eq!(v, expect, "client {c}: reply out of order or lost");
                }
            }
            expect
        }));
    }
    let mut admin = redis_client(port);
    let deadline = Instant::now() + Duration::from_millis(2500);
    let mut k = 1;
    while Instant::now() < deadline {
        let _: () = q(&mut admin, &["DEBUG", "BALANCE", &k.to_string()]);
        k = k % 4 + 1;
        thread::sleep(Duration::from_millis(15));
    }
    stop.store(true, Ordering::Relaxed);
    let sent: Vec<i64> = clients.into_iter().map(|h| h.join().unwrap()).collect();
    for (c, n) in sent.iter().enumerate() {
        let v: i64 = q(&mut admin, &["GET", &format!("counter{c}")]);
        assert_eq!(v, *n, "counter{c}");
    }
    let moves: u64 = info_field(&mut admin, "cairn_worker_moves")
        .parse()
        .unwrap();
    assert!(moves >= 8, "only {moves} connections moved");
}

/// A blocked client and a subscriber are registered under their worker:
/// they stay on a retired worker, are still served there, and the blocked
/// one moves once its wait is over.
#[test]
fn blocked_clients_and_subscribers_stay_and_work() {
    let s = start_cairn(&[
        "--server-threads",
        "2",
        "--worker-balance",
        "yes",
        "--enable-debug-command",
        "yes",
    ]);
    let mut admin = redis_client(s.port);
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "2"]);
    // admin went to one worker; open clients until each worker has a
    // blocked client and a subscriber.
    let mut blocked: Vec<RawConn> = (0..2).map(|_| RawConn::connect(s.port)).collect();
    for (i, b) in blocked.iter_mut().enumerate() {
        let key = format!("q{i}");
        b.send(&[b"BLPOP", key.as_bytes(), b"0"]);
    }
    let mut subs: Vec<RawConn> = (0..2).map(|_| RawConn::connect(s.port)).collect();
    for sub in subs.iter_mut() {
        assert!(sub
            .cmd(&["SUBSCRIBE", "ch"])
            .starts_with(b"*3\r\n$9\r\nsubscribe"));
    }
    wait_for(10, "two blocked clients", || {
        let info: String = q(&mut admin, &["INFO", "clients"]);
        info.contains("blocked_clients:2")
    });
    let _: () = q(&mut admin, &["DEBUG", "BALANCE", "1"]);
    thread::sleep(Duration::from_millis(300));
    assert!(
        per_worker(&mut admin)[1] >= 2,
        "blocked and subscribed clients stay"
    );
    let n: i64 = q(&mut admin, &["PUBLISH", "ch", "hello"]);
    assert_eq!(n, 2);
    for sub in subs.iter_mut() {
        assert_eq!(
            sub.read_raw_reply(),
            b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n"
        );
    }
    for (i, b) in blocked.iter_mut().enumerate() {
        let key = format!("q{i}");
        let _: i64 = q(&mut admin, &["RPUSH", &key, "job"]);
        let want = format!("*2\r\n$2\r\n{key}\r\n$3\r\njob\r\n");
        assert_eq!(b.read_raw_reply(), want.as_bytes());
    }
    // Their waits are over: the blocked clients move; only the
    // subscriber on worker 1 is left there.
    wait_for(10, "unblocked clients moved", || {
        per_worker(&mut admin)[1] <= 1
    });
    for b in blocked.iter_mut() {
        assert_eq!(b.cmd(&["PING"]), b"+PONG\r\n");
    }
}

/// A server with balancing starts on one active worker; `worker-balance
/// no` spreads new clients over both; back on, with nothing to do, it
/// gathers them on one again within a few seconds (three one-second
/// windows of measurement).
#[test]
fn an_idle_server_gathers_its_clients_on_one_worker() {
    let s = start_cairn(&[
        "--server-threads",
        "2",
        "--worker-balance",
        "yes",
        "--enable-debug-command",
        "yes",
    ]);
    let mut admin = redis_client(s.port);
    let mut first: Vec<redis::Connection> = (0..4).map(|_| redis_client(s.port)).collect();
    assert_eq!(info_field(&mut admin, "cairn_active_workers"), "1");
    assert_eq!(per_worker(&mut admin)[1], 0, "worker 1 is not active yet");
    let _: () = q(&mut admin, &["CONFIG", "SET", "worker-balance", "no"]);
    wait_for(10, "both workers active", || {
        info_field(&mut admin, "cairn_active_workers") == "2"
    });
    // New clients go to both.
    let mut more: Vec<redis::Connection> = (0..4).map(|_| redis_client(s.port)).collect();
    wait_for(10, "clients on worker 1", || per_worker(&mut admin)[1] > 0);
    let _: () = q(&mut admin, &["CONFIG", "SET", "worker-balance", "yes"]);
    wait_for(15, "one active worker", || {
        info_field(&mut admin, "cairn_active_workers") == "1" && per_worker(&mut admin)[1] == 0
    });
    for c in first.iter_mut().chain(more.iter_mut()) {
        let pong: String = q(c, &["PING"]);
        assert_eq!(pong, "PONG");
    }
}

/// The CPUs this process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for the
    // calling thread and we read it only on success.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Confines the calling thread (and what it spawns) to `cpus`.
fn pin_this_thread(cpus: &[usize]) {
    // SAFETY: as above; the set outlives the call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        let r = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(r, 0, "sched_setaffinity({cpus:?})");
    }
}

/// A server confined to `cpus` (a child inherits the affinity of the
/// thread that starts it).
fn start_pinned(cpus: Vec<usize>, threads: usize) -> support::Server {
    thread::spawn(move || {
        pin_this_thread(&cpus);
        let threads = threads.to_string();
        start_cairn(&["--server-threads", &threads, "--worker-balance", "yes"])
    })
    .join()
    .unwrap()
}

/// Threads that run until the value is dropped, which stops and joins
/// them, also when an assertion fails first.
struct Threads {
    stop: Arc<AtomicBool>,
    handles: Vec<thread::JoinHandle<()>>,
}

impl Threads {
    /// One thread spinning on each of `cpus`, at the lowest priority: it
    /// takes every cycle nobody else wants, and where it shares a core
    /// with a worker the worker still runs when it has work, so the
    /// worker's load is not hidden by its wait for the core.
    fn burn(cpus: &[usize]) -> Threads {
        Threads::spawn(
            cpus.len(),
            |i| Some(vec![cpus[i]]),
            |stop| {
                // SAFETY: no preconditions; on Linux `who` is a thread id
                // and the nice value is that thread's own.
                unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            },
        )
    }

    /// `conns` clients, on `cpus` if given, each sending pipelines of 256
    /// PINGs and reading the replies: the server does far more per batch
    /// than the client, so a few clients keep a worker busy.
    fn load(port: u16, conns: usize, cpus: Option<&[usize]>, sent: Arc<AtomicU64>) -> Threads {
        const BATCH: usize = 256;
        let pin = cpus.map(|c| c.to_vec());
        Threads::spawn(
            conns,
            |_| pin.clone(),
            move |stop| {
                let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else {
                    return;
                };
                conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let batch = b"PING\r\n".repeat(BATCH);
                let mut replies = vec![0u8; b"+PONG\r\n".len() * BATCH];
                while !stop.load(Ordering::Relaxed) {
                    if conn.write_all(&batch).is_err() || conn.read_exact(&mut replies).is_err() {
                        return;
                    }
                    sent.fetch_add(BATCH as u64, Ordering::Relaxed);
                }
            },
        )
    }

    fn spawn(
        n: usize,
        pin: impl Fn(usize) -> Option<Vec<usize>>,
        body: impl Fn(&AtomicBool) + Clone + Send + 'static,
    ) -> Threads {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..n)
            .map(|i| {
                let stop = stop.clone();
                let body = body.clone();
                let cpus = pin(i);
                thread::spawn(move || {
                    if let Some(cpus) = cpus {
                        pin_this_thread(&cpus);
                    }
                    body(&stop)
                })
            })
            .collect();
        Threads { stop, handles }
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Held by the tests that burn CPU: one's burners would crowd the other's
/// server.
static CPU_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The CPUs a CPU test may use, with the lock held; `None` (the test is
/// skipped, and says so) when there are fewer than `need`.
fn cpus_for_test(need: usize) -> Option<(std::sync::MutexGuard<'static, ()>, Vec<usize>)> {
    let lock = CPU_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = allowed_cpus();
    if cpus.len() < need {
        eprintln!("skipped: needs {need} CPUs, this process may use {cpus:?}");
        return None;
    }
    Some((lock, cpus))
}

fn info_f64(c: &mut redis::Connection, name: &str) -> f64 {
    info_field(c, name).parse().unwrap()
}

/// The 2-core case: a server whose two cores are shared with busy threads
/// keeps its clients on one worker while many connections load it (one
/// worker served redis-benchmark faster than two beside the client on the
/// 2-vCPU machine: BENCHMARKS.md, session 5).
#[test]
fn a_server_sharing_its_cores_with_busy_threads_keeps_one_worker() {
    let Some((_cpu, cpus)) = cpus_for_test(2) else {
        return;
    };
    let s = start_pinned(cpus[..2].to_vec(), 2);
    // Every CPU busy, the server's two included.
    let _burn = Threads::burn(&cpus);
    let sent = Arc::new(AtomicU64::new(0));
    let _load = Threads::load(s.port, 16, None, sent.clone());
    let mut admin = redis_client(s.port);
    wait_for(10, "a window measured", || {
        q::<String>(&mut admin, &["INFO", "server"]).contains("cairn_cpu_others:")
    });
    assert_eq!(info_f64(&mut admin, "cairn_cpus_allowed"), 2.0);
    assert!(info_f64(&mut admin, "cairn_cpus_online") >= cpus.len() as f64);
    // Five one-second windows, each of which could have spread.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert_eq!(info_field(&mut admin, "cairn_active_workers"), "1");
        assert_eq!(per_worker(&mut admin)[1], 0, "a client on worker 1");
        thread::sleep(Duration::from_millis(200));
    }
    let others = info_f64(&mut admin, "cairn_cpu_others");
    assert!(others >= 0.75, "the burners were not seen: others {others}");
    assert!(sent.load(Ordering::Relaxed) > 0, "the load got no replies");
}

/// Issue 19's machine in small: the server pinned to half the CPUs, the
/// other half busy with clients and burners. Every worker the server has
/// cores for serves clients. Needs 4 CPUs (a 2-core box cannot pin the
/// server to two cores and keep others busy beside it).
#[test]
fn a_pinned_server_spreads_over_its_cores_while_the_others_are_busy() {
    let Some((_cpu, cpus)) = cpus_for_test(4) else {
        return;
    };
    // At most 4 workers: enough to show the spread, light on a big CI box.
    let h = (cpus.len() / 2).min(4);
    let (mine, theirs) = (cpus[..h].to_vec(), cpus[h..].to_vec());
    let s = start_pinned(mine, h);
    let _burn = Threads::burn(&theirs);
    let sent = Arc::new(AtomicU64::new(0));
    let _load = Threads::load(s.port, 8 * h, Some(&theirs), sent.clone());
    let mut admin = redis_client(s.port);
    wait_for(20, "every worker active and serving", || {
        info_field(&mut admin, "cairn_active_workers") == h.to_string()
            && per_worker(&mut admin).iter().all(|&n| n > 0)
    });
    assert_eq!(info_f64(&mut admin, "cairn_cpus_allowed"), h as f64);
    assert!(sent.load(Ordering::Relaxed) > 0, "the load got no replies");
}
