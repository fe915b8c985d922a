//! Bad input and limits: a malformed or oversized request gets an error and
//! closes only its own connection; idle, slow and huge clients do not stall
//! anyone else; `maxclients`, `timeout`, `client-query-buffer-limit` and
//! `proto-max-bulk-len` behave as in Redis.
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{start_cairn, start_cairn_nofile, RawConn};

#[test]
fn malformed_frame_closes_only_that_connection() {
    let s = start_cairn(&[]);
    let mut bystander = RawConn::connect(s.port);
    bystander.cmd(&["SET", "k", "v"]);
    for bad in [
        &b"*1\r\n$abc\r\n"[..],
        b"*2\r\n$3\r\nGET\r\n:1\r\n",
        b"*-5x\r\n",
        b"SET \"unbalanced\r\n",
    ] {
        let mut c = RawConn::connect(s.port);
        c.send_raw(bad);
        let reply = c.read_raw_reply();
        assert!(
            reply.starts_with(b"-ERR Protocol error: "),
            "{:?} → {:?}",
            String::from_utf8_lossy(bad),
            String::from_utf8_lossy(&reply)
        );
        assert!(
            c.is_closed_within(Duration::from_secs(2)),
            "connection stays open after {bad:?}"
        );
    }
    assert_eq!(bystander.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
}

#[test]
fn bulk_longer_than_proto_max_bulk_len_is_refused() {
    let s = start_cairn(&["--proto-max-bulk-len", "1mb"]);
    let mut c = RawConn::connect(s.port);
    c.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n");
    assert_eq!(
        c.read_raw_reply(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(c.is_closed_within(Duration::from_secs(2)));
}

#[test]
fn query_buffer_limit_closes_the_client() {
    let s = start_cairn(&["--client-query-buffer-limit", "1mb"]);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // A bulk that is legal by itself (under proto-max-bulk-len) but larger
    // than the query buffer may hold.
    let _ = c.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..40 {
        if c.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut buf = [0u8; 64];
    let closed = matches!(c.read(&mut buf), Ok(0) | Err(_));
    assert!(
        closed,
        "client past client-query-buffer-limit must be closed"
    );
    let mut ok = RawConn::connect(s.port);
    assert_eq!(ok.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn maxclients_refuses_with_redis_error() {
    let s = start_cairn(&["--maxclients", "3"]);
    let held: Vec<RawConn> = (0..3).map(|_| RawConn::connect(s.port)).collect();
    let mut extra = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let _ = extra.read_to_end(&mut got);
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    drop(held);
    // Slots free up once the held connections close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = RawConn::connect(s.port);
        c.send_raw(b"PING\r\n");
        if c.read_raw_reply() == b"+PONG\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "slots never freed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_low_ulimit_lowers_maxclients_and_refuses_the_rest() {
    // Issue 23, defect 3: with `ulimit -n 64`, clients past the limit
    // waited in the accept backlog forever and the log got a line every
    // 10 ms. As Redis does, maxclients drops to the limit less 32 reserved
    // descriptors, with a log line, and the next client is told why.
    let s = start_cairn_nofile(&[], 64);
    assert!(
        s.log()
            .contains("maxclients has been reduced to 32 to compensate for low ulimit"),
        "{}",
        s.log_tail(5)
    );
    let mut c = RawConn::connect(s.port);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]),
        b"*2\r\n$10\r\nmaxclients\r\n$2\r\n32\r\n"
    );
    let held: Vec<RawConn> = (0..31).map(|_| RawConn::connect(s.port)).collect();
    let started = Instant::now();
    let mut extra = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let _ = extra.read_to_end(&mut got);
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the refusal took {:?}",
        started.elapsed()
    );
    drop(held);
    assert!(
        !s.log().contains("Accepting client connection"),
        "accept failed: {}",
        s.log_tail(5)
    );
    // Not even one client fits: the server says so and does not start.
    let bin = env!("CARGO_BIN_EXE_cairn");
    let out = std::process::Command::new("prlimit")
        .args(["--nofile=16:16", bin, "--port", "0"])
        .output();
    if let Ok(out) = out {
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text}");
        assert!(
            text.contains("is not enough for the server to start"),
            "{text}"
        );
    }
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let s = start_cairn(&["--timeout", "1"]);
    let mut idle = RawConn::connect(s.port);
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    assert!(
        idle.is_closed_within(Duration::from_secs(4)),
        "idle client survived timeout 1"
    );
}

#[test]
fn a_slow_sender_does_not_stall_others() {
    let s = start_cairn(&["--server-threads", "1"]);
    // Half a request, then silence: the only worker must keep serving.
    let mut slow = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    slow.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nxxxx")
        .unwrap();
    let mut fast = RawConn::connect(s.port);
    for i in 0..100 {
        let v = i.to_string();
        assert_eq!(fast.cmd(&["SET", "f", &v]), b"+OK\r\n");
    }
    drop(slow);
}

#[test]
fn a_client_that_never_reads_does_not_stall_others() {
    let s = start_cairn(&["--server-threads", "1"]);
    let mut setup = RawConn::connect(s.port);
    let big = "x".repeat(512 * 1024);
    assert_eq!(setup.cmd(&["SET", "big", &big]), b"+OK\r\n");
    // Pipeline many GETs of a large value and never read the replies: the
    // server must stop at its output high-water mark, not buffer it all,
    // and not block its thread.
    let mut hog = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    hog.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(2000);
    let _ = hog.write_all(&req);
    let mut other = RawConn::connect(s.port);
    let started = Instant::now();
    for _ in 0..50 {
        assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(hog);
}

#[test]
fn large_values_round_trip_intact() {
    let s = start_cairn(&[]);
    let mut c = support::redis_client(s.port);
    for size in [4 * 1024, 72 * 1024, 144 * 1024, 2_120_000, 20 * 1024 * 1024] {
        let v: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
        let _: () = redis::cmd("SET").arg("v").arg(&v).query(&mut c).unwrap();
        let back: Vec<u8> = redis::cmd("GET").arg("v").query(&mut c).unwrap();
        assert!(back == v, "value of {size} bytes came back different");
    }
}

#[test]
fn inline_commands_work_like_telnet() {
    let s = start_cairn(&[]);
    let mut c = RawConn::connect(s.port);
    c.send_raw(b"SET greeting \"hello world\"\r\nGET greeting\r\n\r\nPING\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), b"$11\r\nhello world\r\n");
    assert_eq!(c.read_raw_reply(), b"+PONG\r\n");
}

#[test]
fn ten_thousand_pipelined_commands_in_one_write() {
    let s = start_cairn(&[]);
    let mut c = RawConn::connect(s.port);
    let mut req = Vec::new();
    for i in 0..10_000 {
        let k = format!("k{i}");
        cairn_protocol::resp::encode_command(&[b"SET", k.as_bytes(), k.as_bytes()], &mut req);
    }
    c.send_raw(&req);
    for _ in 0..10_000 {
        assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    }
    assert_eq!(c.cmd(&["GET", "k9999"]), b"$5\r\nk9999\r\n");
}

#[test]
fn unknown_directive_stops_startup_with_file_and_line() {
    let dir = std::env::temp_dir().join(format!("cairn-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.conf");
    std::fs::write(&path, "port 0\n# comment\nno-such-directive yes\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("no-such-directive"), "{err}");
    assert!(err.contains(path.to_str().unwrap()), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_and_version() {
    for flag in ["--help", "-h"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg(flag)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Cairn server v="));
}

#[test]
fn maxmemory_refuses_writes_with_oom_and_keeps_data() {
    let s = start_cairn(&["--maxmemory", "30mb"]);
    let mut c = RawConn::connect(s.port);
    let v = "x".repeat(100 * 1024);
    let mut stored = 0;
    let mut refused = false;
    for i in 0..2000 {
        let k = format!("k{i}");
        let r = c.cmd(&["SET", &k, &v]);
        if r == b"+OK\r\n" {
            stored = i + 1;
        } else {
            assert_eq!(
                r,
                b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
            );
            refused = true;
            break;
        }
        if i % 50 == 0 {
            // Let the 10 ms allocator check catch up with the writes.
            std::thread::sleep(Duration::from_millis(15));
        }
    }
    assert!(
        refused,
        "30 MB limit never reached after {stored} writes of 100 KB"
    );
    // Nothing already stored was lost, and reads and deletes still work.
    for i in 0..stored {
        let r = c.cmd(&["STRLEN", &format!("k{i}")]);
        assert_eq!(r, b":102400\r\n", "k{i}");
    }
    assert_eq!(c.cmd(&["DEL", "k0"]), b":1\r\n");
}

#[test]
fn memcached_port_in_use_fails_at_start() {
    // The memcached listener (issue 7) binds like the RESP one: a port in
    // use stops the start with the reason, instead of serving half.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--memcached-port",
            &port,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("Failed listening on port {port}")),
        "{text}"
    );
}

#[test]
fn unauthenticated_clients_get_small_request_limits() {
    let s = start_cairn(&["--requirepass", "pw"]);
    // More than 10 arguments before AUTH: refused, connection closed.
    let mut c = RawConn::connect(s.port);
    let many: Vec<&[u8]> = std::iter::repeat_n(&b"x"[..], 11).collect();
    c.send(&many);
    assert_eq!(
        c.read_raw_reply(),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    assert!(c.is_closed_within(Duration::from_secs(2)));
    // A bulk over 16 KiB before AUTH: refused as soon as its header arrives.
    let mut c = RawConn::connect(s.port);
    c.send_raw(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n");
    assert_eq!(
        c.read_raw_reply(),
        b"-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert!(c.is_closed_within(Duration::from_secs(2)));
    // After AUTH, in the same pipeline, both are fine.
    let mut c = RawConn::connect(s.port);
    let big = "v".repeat(20_000);
    let mut req = Vec::new();
    cairn_protocol::resp::encode_command(&[b"AUTH", b"pw"], &mut req);
    cairn_protocol::resp::encode_command(&[b"SET", b"k", big.as_bytes()], &mut req);
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    mset.extend(std::iter::repeat_n(&b"a"[..], 12));
    cairn_protocol::resp::encode_command(&mset, &mut req);
    c.send_raw(&req);
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
}

#[test]
fn worker_spin_is_a_runtime_directive() {
    let s = start_cairn(&["--worker-spin-us", "0"]);
    let mut c = RawConn::connect(s.port);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "worker-spin-us"]),
        b"*2\r\n$14\r\nworker-spin-us\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "worker-spin-us", "50"]),
        b"+OK\r\n"
    );
    // Serving goes on with the new value, spinning or not.
    for _ in 0..100 {
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "worker-spin-us"]),
        b"*2\r\n$14\r\nworker-spin-us\r\n$2\r\n50\r\n"
    );
}

/// The server process's CPU time (user + system) from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[test]
fn many_small_arguments_in_small_writes_cost_linear_time() {
    // Issue 23, defect 2: an unfinished multibulk request was parsed again
    // from its first byte on every read (2.4 s of CPU for this request,
    // during which the worker's other clients waited).
    let s = start_cairn(&["--server-threads", "1"]);
    let n = 200_000;
    let mut req = format!("*{}\r\n$5\r\nRPUSH\r\n$4\r\nlist\r\n", n + 2).into_bytes();
    for i in 0..n {
        let item = format!("item{i}");
        req.extend_from_slice(format!("${}\r\n{item}\r\n", item.len()).as_bytes());
    }
    let before = cpu_seconds(s.pid());
    let mut conn = RawConn::connect(s.port);
    conn.stream().set_nodelay(true).unwrap();
    let mut bystander = RawConn::connect(s.port);
    // A PING answered after each segment: the server has then read that
    // segment by itself, as it would from a slow link.
    let mut slowest = Duration::ZERO;
    for seg in req.chunks(1400) {
        conn.stream().write_all(seg).unwrap();
        let t = Instant::now();
        assert_eq!(bystander.cmd(&["PING"]), b"+PONG\r\n");
        slowest = slowest.max(t.elapsed());
    }
    assert_eq!(conn.read_raw_reply(), format!(":{n}\r\n").as_bytes());
    let used = cpu_seconds(s.pid()) - before;
    // The bounds: linear parsing needs well under 0.3 s here (the
    // quadratic one took 3.9 s on the development machine), and the other
    // client is answered within 100 ms throughout.
    eprintln!("server CPU {used:.3} s, slowest PING {slowest:?}");
    assert!(used < 0.3, "server used {used:.2} s of CPU for one request");
    assert!(
        slowest < Duration::from_millis(100),
        "a PING took {slowest:?}"
    );
    assert_eq!(
        bystander.cmd(&["LLEN", "list"]),
        format!(":{n}\r\n").as_bytes()
    );
}

#[test]
fn the_argument_table_counts_against_the_query_buffer_limit() {
    // `*2147483647` then small arguments without end: each 7-byte argument
    // costs a 24-byte entry in the argument table, so the input alone
    // (600 KB here) stays under the limit while the memory does not.
    let s = start_cairn(&["--client-query-buffer-limit", "1mb"]);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = c.write_all(b"*2147483647\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n");
    let chunk = b"$1\r\na\r\n".repeat(1000);
    for _ in 0..(600_000 / chunk.len()) {
        if c.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut buf = [0u8; 64];
    let r = c.read(&mut buf);
    assert!(
        matches!(&r, Ok(0))
            || matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the client must be closed at the query buffer limit, got {r:?}"
    );
    let mut ok = RawConn::connect(s.port);
    assert_eq!(ok.cmd(&["PING"]), b"+PONG\r\n");
}
