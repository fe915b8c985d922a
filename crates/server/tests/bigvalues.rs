//! Large values (issue 5, item 4): values of 2.12 MB (E3's size) and
//! 100 MB stored and read back byte for byte over RESP (the `redis` crate)
//! and memcached (the `memcache` crate); string edits near the end of a
//! large value; a hash field with a large value; `proto-max-bulk-len` and
//! `client-query-buffer-limit` enforced as Redis does; pipelined mixes of
//! large and small requests; and other clients on the same worker served
//! while a 100 MB value trickles in or out. Progress is asserted
//! functionally (other clients get answers between the chunks of a large
//! transfer), not with timings: stalls are measured by `cairn-bench values
//! --probe`.

mod mc_support;
mod support;

use redis::Commands;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{redis_client, start_cairn, RawConn};

const MB_2_12: usize = 2_120_000;
const MB_100: usize = 100 * 1024 * 1024;

/// Deterministic, non-repeating-looking bytes (a different `seed` gives a
/// different value), cheap to make in a debug build.
fn value(len: usize, seed: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = 0x9e37_79b9_u32 ^ seed as u32;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let n = (len - v.len()).min(4);
        v.extend_from_slice(&x.to_le_bytes()[..n]);
    }
    v
}

/// Compares without printing megabytes on failure.
fn same(what: &str, got: &[u8], want: &[u8]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i}");
    }
}

#[test]
fn resp_strings_2_12_mb_and_100_mb() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    for (key, len) in [("e3", MB_2_12), ("huge", MB_100)] {
        let mut v = value(len, len as u8);
        let _: () = c.set(key, &v).unwrap();
        let back: Vec<u8> = c.get(key).unwrap();
        same(key, &back, &v);
        assert_eq!(c.strlen::<_, usize>(key).unwrap(), len);
        assert_eq!(
            redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(key)
                .query::<String>(&mut c)
                .unwrap(),
            "raw"
        );
        // GETRANGE at the start, across the middle and at the very end.
        for (a, b) in [
            (0, 9),
            (len as isize / 2 - 70_000, len as isize / 2 + 70_000),
            (-5, -1),
        ] {
            let got: Vec<u8> = c.getrange(key, a, b).unwrap();
            let (a, b) = (
                if a < 0 { len as isize + a } else { a } as usize,
                if b < 0 { len as isize + b } else { b } as usize,
            );
            same("GETRANGE", &got, &v[a..=b]);
        }
        // APPEND grows it; SETRANGE near the end edits in place and past
        // the end extends it.
        assert_eq!(c.append::<_, _, usize>(key, b"tail").unwrap(), len + 4);
        v.extend_from_slice(b"tail");
        let n: usize = c.setrange(key, len as isize - 2, b"XYZ").unwrap();
        assert_eq!(n, len + 4);
        v[len - 2..len + 1].copy_from_slice(b"XYZ");
        let n: usize = c.setrange(key, len as isize + 6, b"!").unwrap();
        assert_eq!(n, len + 7);
        v.extend_from_slice(b"\0\0!");
        let back: Vec<u8> = c.get(key).unwrap();
        same("after APPEND and SETRANGE", &back, &v);
        let tail: Vec<u8> = c.getrange(key, -20, -1).unwrap();
        same("tail", &tail, &v[v.len() - 20..]);
    }
    // MGET of several large values and a missing key, in order.
    let parts: Vec<Vec<u8>> = (0..3).map(|i| value(MB_2_12, 50 + i)).collect();
    for (i, p) in parts.iter().enumerate() {
        let _: () = c.set(format!("m{i}"), p).unwrap();
    }
    let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
        .arg("m0")
        .arg("missing")
        .arg("m1")
        .arg("m2")
        .arg("huge")
        .query(&mut c)
        .unwrap();
    assert_eq!(got.len(), 5);
    assert!(got[1].is_none());
    same("m0", got[0].as_deref().unwrap(), &parts[0]);
    same("m1", got[2].as_deref().unwrap(), &parts[1]);
    same("m2", got[3].as_deref().unwrap(), &parts[2]);
    assert_eq!(got[4].as_ref().unwrap().len(), MB_100 + 7);
    // GETDEL, GETSET, COPY, DEL of large values.
    let old: Vec<u8> = redis::cmd("GETSET")
        .arg("m0")
        .arg(&parts[1])
        .query(&mut c)
        .unwrap();
    same("GETSET old", &old, &parts[0]);
    let _: () = redis::cmd("COPY")
        .arg("m0")
        .arg("m0copy")
        .query(&mut c)
        .unwrap();
    let _: usize = c.append("m0", b"!").unwrap();
    let copy: Vec<u8> = redis::cmd("GETDEL").arg("m0copy").query(&mut c).unwrap();
    same("COPY keeps its own bytes", &copy, &parts[1]);
    assert!(!c.exists::<_, bool>("m0copy").unwrap());
    assert_eq!(
        c.del::<_, usize>(&["huge", "e3", "m0", "m1", "m2"])
            .unwrap(),
        5
    );
}

#[test]
fn hash_field_with_a_large_value() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    for len in [MB_2_12, MB_100] {
        let v = value(len, 7);
        let _: () = c.hset("h", "small", "x").unwrap();
        let _: () = c.hset("h", "big", &v).unwrap();
        let back: Vec<u8> = c.hget("h", "big").unwrap();
        same("HGET", &back, &v);
        assert_eq!(c.hget::<_, _, String>("h", "small").unwrap(), "x");
        assert_eq!(
            redis::cmd("HSTRLEN")
                .arg("h")
                .arg("big")
                .query::<usize>(&mut c)
                .unwrap(),
            len
        );
    }
}

#[test]
fn memcached_2_12_mb_and_100_mb_set_get_cas_append() {
    let (s, port) = mc_support::cairn(&[]);
    let mc = memcache::Client::connect(format!(
        "memcache://127.0.0.1:{port}?protocol=ascii&timeout=60"
    ))
    .unwrap();
    let mut r = redis_client(s.port);
    for (key, len) in [("e3", MB_2_12), ("huge", MB_100)] {
        let v = value(len, 3);
        mc.set(key, &v[..], 0).unwrap();
        let back: Vec<u8> = mc.get(key).unwrap().unwrap();
        same("get", &back, &v);
        // cas: a stale unique fails, the current one stores.
        let (_, _, cas): (Vec<u8>, u32, Option<u64>) = mc.get(key).unwrap().unwrap();
        let cas = cas.expect("gets returns a CAS");
        let v2 = value(len, 4);
        assert!(!mc.cas(key, &v2[..], 0, cas + 1_000_000).unwrap());
        assert!(mc.cas(key, &v2[..], 0, cas).unwrap());
        let back: Vec<u8> = mc.get(key).unwrap().unwrap();
        same("after cas", &back, &v2);
        mc.append(key, &b"-appended"[..]).unwrap();
        let back: Vec<u8> = mc.get(key).unwrap().unwrap();
        same("after append", &back[..len], &v2);
        assert_eq!(&back[len..], b"-appended");
        // One keyspace: the same bytes over RESP.
        let over_resp: Vec<u8> = r.get(key).unwrap();
        same("over RESP", &over_resp, &back);
    }
    // A large value written over RESP reads back over memcached.
    let v = value(MB_2_12, 9);
    let _: () = r.set("fromresp", &v).unwrap();
    let back: Vec<u8> = mc.get("fromresp").unwrap().unwrap();
    same("RESP -> memcached", &back, &v);
    mc.delete("huge").unwrap();
}

#[test]
fn memcached_meta_set_and_get_of_a_large_value() {
    let (_s, port) = mc_support::cairn(&[]);
    let mut c = mc_support::Conn::connect(port);
    let v = value(MB_2_12, 11);
    let mut req = format!("ms big {} F5 T0\r\n", v.len()).into_bytes();
    req.extend_from_slice(&v);
    req.extend_from_slice(b"\r\n");
    assert_eq!(c.step(&req), b"HD\r\n");
    c.send(b"mg big v f s\r\n");
    let head = format!("VA {} f5 s{}\r\n", v.len(), v.len());
    assert_eq!(c.read_exact(head.len()), head.as_bytes());
    same("mg", &c.read_exact(v.len()), &v);
    assert_eq!(c.read_exact(2), b"\r\n");
    // A bad terminator after a large block is the usual error.
    let mut bad = format!("set b 0 0 {}\r\n", v.len()).into_bytes();
    bad.extend_from_slice(&v);
    bad.extend_from_slice(b"xx");
    assert_eq!(c.step(&bad), b"CLIENT_ERROR bad data chunk\r\n");
    assert_eq!(c.cmd("mn"), "MN\r\n");
}

/// Writes `req` in `chunk`-byte pieces; after each piece `between` runs
/// (another client's round trip), proving the server answered it while
/// this request was still incomplete.
fn trickle(w: &mut TcpStream, req: &[u8], chunk: usize, mut between: impl FnMut(usize)) {
    for (i, piece) in req.chunks(chunk).enumerate() {
        w.write_all(piece).unwrap();
        between(i);
    }
}

#[test]
fn proto_max_bulk_len_is_enforced_like_redis() {
    let s = start_cairn(&["--proto-max-bulk-len", "2mb"]);
    let limit = 2 * 1024 * 1024;
    let mut c = RawConn::connect(s.port);
    // Exactly the limit is fine, through the large-bulk path.
    let v = value(limit, 1);
    c.send(&[b"SET", b"k", &v]);
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.cmd(&["STRLEN", "k"]), format!(":{limit}\r\n").as_bytes());
    // APPEND past the limit: Redis's string-size error, nothing changed.
    assert_eq!(
        c.cmd(&["APPEND", "k", "x"]),
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
    assert_eq!(
        c.cmd(&["SETRANGE", "k", &limit.to_string(), "x"]),
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n"
    );
    // One byte over: the bulk length itself is refused, the connection
    // closed after the reply, before any of the payload is read.
    let mut over = RawConn::connect(s.port);
    over.send_raw(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", limit + 1).as_bytes());
    assert_eq!(
        over.read_raw_reply(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(over.is_closed_within(Duration::from_secs(5)));
    assert_eq!(c.cmd(&["STRLEN", "k"]), format!(":{limit}\r\n").as_bytes());
    // Over memcached the same limit, and the connection stays usable.
    let (_m, port) = mc_support::cairn(&["--proto-max-bulk-len", "2mb"]);
    let mut m = mc_support::Conn::connect(port);
    let mut req = format!("set k 0 0 {}\r\n", limit + 1).into_bytes();
    req.extend_from_slice(&value(limit + 1, 2));
    req.extend_from_slice(b"\r\n");
    assert_eq!(m.step(&req), b"SERVER_ERROR object too large for cache\r\n");
    let mut req = format!("set k 0 0 {limit}\r\n").into_bytes();
    req.extend_from_slice(&v);
    req.extend_from_slice(b"\r\n");
    assert_eq!(m.step(&req), b"STORED\r\n");
}

#[test]
fn query_buffer_limit_counts_a_large_bulk_in_progress() {
    let s = start_cairn(&[
        "--client-query-buffer-limit",
        "1mb",
        "--proto-max-bulk-len",
        "8mb",
    ]);
    let mut hog = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut other = RawConn::connect(s.port);
    let len = 4 * 1024 * 1024;
    let mut req = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${len}\r\n").into_bytes();
    req.extend_from_slice(&value(len, 5));
    req.extend_from_slice(b"\r\n");
    // The server closes the connection once 1 MB of the bulk is buffered;
    // writes after that fail, which is the expected outcome.
    let _ = hog.set_write_timeout(Some(Duration::from_secs(10)));
    let mut closed = false;
    for piece in req.chunks(256 * 1024) {
        if hog.write_all(piece).is_err() {
            closed = true;
            break;
        }
    }
    if !closed {
        let _ = hog.set_read_timeout(Some(Duration::from_secs(10)));
        let mut buf = [0u8; 64];
        closed = matches!(hog.read(&mut buf), Ok(0) | Err(_));
    }
    assert!(
        closed,
        "the connection over the query buffer limit is closed"
    );
    assert_eq!(other.cmd(&["EXISTS", "k"]), b":0\r\n");
    assert!(s.log().contains("reached max query buffer length"));
}

#[test]
fn pipelined_mix_of_large_and_small_requests() {
    let s = start_cairn(&[]);
    let mut c = RawConn::connect(s.port);
    let big = value(MB_2_12, 21);
    let mid = value(100_000, 22);
    let mut req = Vec::new();
    let enc = |args: &[&[u8]], out: &mut Vec<u8>| cairn_protocol::resp::encode_command(args, out);
    enc(&[b"SET", b"small", b"1"], &mut req);
    enc(&[b"SET", b"big", &big], &mut req);
    enc(&[b"INCR", b"small"], &mut req);
    enc(&[b"MSET", b"mid", &mid, b"big2", &big], &mut req);
    enc(&[b"GET", b"big"], &mut req);
    enc(&[b"PING"], &mut req);
    enc(&[b"GET", b"mid"], &mut req);
    enc(&[b"STRLEN", b"big2"], &mut req);
    enc(&[b"GET", b"small"], &mut req);
    req.extend_from_slice(b"PING inline\r\n");
    // Odd piece sizes, so bulk boundaries fall everywhere.
    let mut w = c.stream().try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        for piece in req.chunks(77_777) {
            w.write_all(piece).unwrap();
        }
    });
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), b":2\r\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    let mut want = format!("${}\r\n", big.len()).into_bytes();
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\n");
    same("GET big", &c.read_raw_reply(), &want);
    assert_eq!(c.read_raw_reply(), b"+PONG\r\n");
    let mut want = format!("${}\r\n", mid.len()).into_bytes();
    want.extend_from_slice(&mid);
    want.extend_from_slice(b"\r\n");
    same("GET mid", &c.read_raw_reply(), &want);
    assert_eq!(c.read_raw_reply(), format!(":{}\r\n", big.len()).as_bytes());
    assert_eq!(c.read_raw_reply(), b"$1\r\n2\r\n");
    assert_eq!(c.read_raw_reply(), b"$6\r\ninline\r\n");
    writer.join().unwrap();
}

#[test]
fn others_are_served_while_100_mb_trickles_in_and_out() {
    // One worker, so the slow client and the others share its event loop.
    let s = start_cairn(&["--server-threads", "1"]);
    let mut slow = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    slow.set_nodelay(true).unwrap();
    let mut a = RawConn::connect(s.port);
    let mut b = redis_client(s.port);
    let v = value(MB_100, 33);
    let mut req = format!("*3\r\n$3\r\nSET\r\n$4\r\nhuge\r\n${MB_100}\r\n").into_bytes();
    req.extend_from_slice(&v);
    req.extend_from_slice(b"\r\n");
    // 100 pieces of about 1 MB; between pieces the others work normally.
    let mut answered = 0;
    trickle(&mut slow, &req, req.len() / 100 + 1, |i| {
        assert_eq!(a.cmd(&["PING"]), b"+PONG\r\n");
        let _: () = b.set("n", i).unwrap();
        assert_eq!(b.get::<_, usize>("n").unwrap(), i);
        answered += 1;
        if i % 10 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let mut ok = [0u8; 5];
    slow.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    assert!(answered >= 100);
    // The 100 MB reply is read slowly, in 1 MB steps; the others keep
    // getting answers, and the value arrives intact.
    slow.write_all(b"*2\r\n$3\r\nGET\r\n$4\r\nhuge\r\n")
        .unwrap();
    let head = format!("${MB_100}\r\n");
    let mut got = vec![0u8; head.len() + MB_100 + 2];
    let mut have = 0;
    let mut rounds = 0;
    while have < got.len() {
        let end = (have + 1024 * 1024).min(got.len());
        slow.read_exact(&mut got[have..end]).unwrap();
        have = end;
        assert_eq!(a.cmd(&["PING"]), b"+PONG\r\n");
        assert_eq!(b.get::<_, usize>("n").unwrap(), answered - 1);
        rounds += 1;
    }
    assert!(rounds >= 100);
    assert_eq!(&got[..head.len()], head.as_bytes());
    same("GET huge", &got[head.len()..head.len() + MB_100], &v);
    assert_eq!(&got[head.len() + MB_100..], b"\r\n");
}

#[test]
fn output_buffer_limit_counts_a_referenced_large_value() {
    // Redis closes a normal client whose reply is over the hard limit and
    // sends none of it; a large value sent by reference counts in full.
    let s = start_cairn(&["--client-output-buffer-limit", "normal 1mb 0 0"]);
    let mut c = RawConn::connect(s.port);
    let v = value(MB_2_12, 40);
    c.send(&[b"SET", b"k", &v]);
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["GETRANGE", "k", "0", "3"]),
        [b"$4\r\n".as_slice(), &v[..4], b"\r\n"].concat()
    );
    c.send(&[b"GET", b"k"]);
    assert!(c.is_closed_within(Duration::from_secs(5)));
    assert!(s
        .log()
        .contains("scheduled to be closed ASAP for overcoming of output buffer limits"));
    // Without the limit the same reply goes out whole.
    let mut d = RawConn::connect(s.port);
    assert_eq!(
        d.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 0 0"
        ]),
        b"+OK\r\n"
    );
    d.send(&[b"GET", b"k"]);
    let mut want = format!("${}\r\n", v.len()).into_bytes();
    want.extend_from_slice(&v);
    want.extend_from_slice(b"\r\n");
    same("GET", &d.read_raw_reply(), &want);
}

#[test]
fn deleted_large_values_are_freed_by_the_lazyfree_thread() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    let freed = |c: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("lazyfreed_objects:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = freed(&mut c);
    let v = value(4 * 1024 * 1024, 60);
    for i in 0..3 {
        let _: () = c.set(format!("big{i}"), &v).unwrap();
    }
    let _: usize = c.del(&["big0", "big1"]).unwrap();
    let _: () = c.set("big2", "small now").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while freed(&mut c) < before + 3 {
        assert!(
            Instant::now() < deadline,
            "3 buffers freed in the background"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_client_that_stops_reading_meets_a_normal_limit_above_8_mib() {
    // Issue 23, defect 4: such a client used to be paused at 8 MiB of
    // unsent replies, so a larger hard limit never applied.
    let s = start_cairn(&["--client-output-buffer-limit", "normal 32mb 0 0"]);
    let mut admin = redis_client(s.port);
    let v = value(1024 * 1024, 41);
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg(&v)
        .query(&mut admin)
        .unwrap();
    let mut c = RawConn::connect(s.port);
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "reader"]), b"+OK\r\n");
    for _ in 0..100 {
        c.send(&[b"GET", b"k"]);
    }
    // 100 MB of replies, never read: the client must go at 32 MB.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
        if !list.contains("name=reader") {
            break;
        }
        assert!(Instant::now() < deadline, "client still connected: {list}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(s
        .log()
        .contains("scheduled to be closed ASAP for overcoming of output buffer limits"));
}
