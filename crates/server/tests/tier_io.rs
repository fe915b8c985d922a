//! Disk tier reads that do not hold up the worker (issue 25; docs/design.md,
//! "Waiting for I/O without holding up a worker"). One worker
//! (`server-threads 1`) serves every connection, and `DEBUG TIER-FAULT
//! DELAY` makes each read of the tier wait on the I/O threads: a client
//! whose GET waits for the disk is parked while the other clients of the
//! worker are served; pipelined requests behind a parked one answer in
//! order; a value rewritten while its read is in flight answers the new
//! value; an MGET of many tiered keys reads them all at once; EXEC and
//! scripts read synchronously; and with the segments' pages dropped from
//! the page cache (`DEBUG TIER-DROP-CACHE`) reads still come back right.
mod support;

use redis::Connection;
use std::time::{Duration, Instant};
use support::{redis_client, start_cairn, RawConn, Server, TestDir};

/// Keys `t:0..TIERED` hold values that move to the tier; `ram:*` stay in
/// RAM (under `tier-min-size`).
const TIERED: usize = 120;

fn value(i: usize) -> Vec<u8> {
    cairn_engine::value::zcomp::sample_text(i as u64 * 7 + 1, 1_500)
}

fn info(c: &mut Connection, name: &str) -> u64 {
    support::tier::info_u64(c, "tier", name)
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "waited for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One worker, a tier that takes every value of 100 bytes or more at
/// once (the threshold, 1% of 64 MiB, is below the server's own use), and
/// `t:*` written and moved out.
fn start(dir: &TestDir) -> (Server, Connection) {
    let server = start_cairn(&[
        "--dir",
        dir.s(),
        "--server-threads",
        "1",
        "--maxmemory",
        "64mb",
        "--tier-enabled",
        "yes",
        "--tier-threshold",
        "1",
        "--tier-min-size",
        "100",
        "--tier-segment-size",
        "256kb",
        "--tier-io-threads",
        "2",
        "--enable-debug-command",
        "yes",
    ]);
    let mut c = redis_client(server.port);
    let mut p = redis::pipe();
    for i in 0..TIERED {
        p.cmd("SET").arg(format!("t:{i}")).arg(value(i)).ignore();
    }
    p.cmd("SET").arg("ram:1").arg("small value").ignore();
    p.query::<()>(&mut c).unwrap();
    wait_for("every t:* moved out", || {
        info(&mut c, "tiered_keys") == TIERED as u64
    });
    (server, c)
}

fn bulk(v: &[u8]) -> Vec<u8> {
    let mut b = format!("${}\r\n", v.len()).into_bytes();
    b.extend_from_slice(v);
    b.extend_from_slice(b"\r\n");
    b
}

fn delay(c: &mut Connection, ms: u64) {
    let _: () = redis::cmd("DEBUG")
        .arg("TIER-FAULT")
        .arg("DELAY")
        .arg(ms)
        .query(c)
        .unwrap();
}

#[test]
fn a_parked_read_does_not_hold_up_the_other_clients_of_its_worker() {
    let dir = TestDir::new("tierio", "nostall");
    let (server, mut c) = start(&dir);
    delay(&mut c, 1_000);
    let parked_before = info(&mut c, "tier_parked_commands");
    let mut slow = RawConn::connect(server.port);
    let sent = Instant::now();
    slow.send(&[b"GET", b"t:3"]);
    wait_for("the GET parked", || {
        info(&mut c, "tier_parked_commands") > parked_before
    });
    // Same worker, served while the GET waits on the I/O threads.
    let mut other = RawConn::connect(server.port);
    for _ in 0..20 {
        assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
        assert_eq!(other.cmd(&["GET", "ram:1"]), bulk(b"small value"));
    }
    assert_eq!(other.cmd(&["SET", "ram:2", "x"]), b"+OK\r\n");
    let others_done = sent.elapsed();
    assert_eq!(info(&mut c, "tier_io_queue_depth"), 1, "still in flight");
    assert_eq!(slow.read_raw_reply(), bulk(&value(3)));
    let slow_done = sent.elapsed();
    assert!(
        others_done < slow_done && slow_done >= Duration::from_millis(1_000),
        "others answered at {others_done:?}, the parked GET at {slow_done:?}"
    );
    delay(&mut c, 0);
    assert_eq!(info(&mut c, "tier_io_queue_depth"), 0);
}

#[test]
fn pipelined_requests_behind_a_parked_one_answer_in_order() {
    let dir = TestDir::new("tierio", "pipeline");
    let (server, mut c) = start(&dir);
    delay(&mut c, 100);
    let mut raw = RawConn::connect(server.port);
    let mut batch = Vec::new();
    let reqs: [&[&[u8]]; 7] = [
        &[b"GET", b"t:1"],
        &[b"GET", b"ram:1"],
        &[b"PING"],
        &[b"GET", b"t:2"],
        &[b"SET", b"t:1", b"changed"],
        &[b"GET", b"t:1"],
        &[b"GETRANGE", b"t:4", b"0", b"9"],
    ];
    for r in reqs {
        cairn_protocol::resp::encode_command(r, &mut batch);
    }
    raw.send_raw(&batch);
    assert_eq!(raw.read_raw_reply(), bulk(&value(1)));
    assert_eq!(raw.read_raw_reply(), bulk(b"small value"));
    assert_eq!(raw.read_raw_reply(), b"+PONG\r\n");
    assert_eq!(raw.read_raw_reply(), bulk(&value(2)));
    assert_eq!(raw.read_raw_reply(), b"+OK\r\n");
    assert_eq!(raw.read_raw_reply(), bulk(b"changed"));
    assert_eq!(raw.read_raw_reply(), bulk(&value(4)[..10]));
    // GETEX and GETDEL park too, and still do their writes.
    assert_eq!(raw.cmd(&["GETEX", "t:5", "PX", "100000"]), bulk(&value(5)));
    let ttl: i64 = redis::cmd("PTTL").arg("t:5").query(&mut c).unwrap();
    assert!(ttl > 0, "{ttl}");
    assert_eq!(raw.cmd(&["GETDEL", "t:6"]), bulk(&value(6)));
    assert_eq!(raw.cmd(&["EXISTS", "t:6"]), b":0\r\n");
    assert!(info(&mut c, "tier_parked_commands") >= 5);
    delay(&mut c, 0);
}

#[test]
fn a_value_rewritten_while_its_read_is_in_flight_answers_the_new_value() {
    let dir = TestDir::new("tierio", "rewrite");
    let (server, mut c) = start(&dir);
    delay(&mut c, 500);
    let parked = info(&mut c, "tier_parked_commands");
    let mut raw = RawConn::connect(server.port);
    raw.send(&[b"GET", b"t:7"]);
    raw.send(&[b"MGET", b"t:8", b"t:9", b"ram:1"]);
    wait_for("the GET parked", || {
        info(&mut c, "tier_parked_commands") > parked
    });
    // Served on the same worker while the GET waits; the GET then finds
    // t:7 in RAM, and the MGET behind it finds t:9 gone.
    let _: () = redis::cmd("SET")
        .arg("t:7")
        .arg("rewritten")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("DEL").arg("t:9").query(&mut c).unwrap();
    assert_eq!(raw.read_raw_reply(), bulk(b"rewritten"));
    let mut want = b"*3\r\n".to_vec();
    want.extend(bulk(&value(8)));
    want.extend_from_slice(b"$-1\r\n");
    want.extend(bulk(b"small value"));
    assert_eq!(raw.read_raw_reply(), want);
    delay(&mut c, 0);
}

#[test]
fn an_mget_of_many_tiered_keys_reads_them_all_at_once() {
    let dir = TestDir::new("tierio", "mget");
    let (server, mut c) = start(&dir);
    delay(&mut c, 20);
    let reads_before = info(&mut c, "tier_reads_parked");
    let parked_before = info(&mut c, "tier_parked_commands");
    let keys: Vec<String> = (0..100).map(|i| format!("t:{i}")).collect();
    let t = Instant::now();
    let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query(&mut c).unwrap();
    let took = t.elapsed();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(v.as_deref(), Some(&value(i)[..]), "t:{i}");
    }
    assert_eq!(info(&mut c, "tier_reads_parked") - reads_before, 100);
    assert_eq!(
        info(&mut c, "tier_parked_commands") - parked_before,
        1,
        "one park for the whole MGET"
    );
    // Two threads sleeping 20 ms before each of 100 reads: about 1 s, not
    // the 2 s of one read after another.
    assert!(took < Duration::from_millis(1_900), "{took:?}");
    drop(server);
}

#[test]
fn exec_and_scripts_read_synchronously() {
    let dir = TestDir::new("tierio", "sync");
    let (_server, mut c) = start(&dir);
    delay(&mut c, 2_000);
    let parked = info(&mut c, "tier_parked_commands");
    let (a, b): (Vec<u8>, Vec<u8>) = redis::pipe()
        .atomic()
        .cmd("GET")
        .arg("t:10")
        .cmd("GET")
        .arg("t:11")
        .query(&mut c)
        .unwrap();
    assert_eq!((a, b), (value(10), value(11)));
    let s: Vec<u8> = redis::cmd("EVAL")
        .arg("return redis.call('GET', KEYS[1])")
        .arg(1)
        .arg("t:12")
        .query(&mut c)
        .unwrap();
    assert_eq!(s, value(12));
    assert_eq!(info(&mut c, "tier_parked_commands"), parked);
    delay(&mut c, 0);
}

#[test]
fn reads_after_the_page_cache_is_dropped_come_back_right() {
    let dir = TestDir::new("tierio", "dropcache");
    let (_server, mut c) = start(&dir);
    let _: () = redis::cmd("DEBUG")
        .arg("TIER-DROP-CACHE")
        .query(&mut c)
        .unwrap();
    let resident = resident_segment_pages(std::path::Path::new(dir.s()));
    let (hits, misses) = (
        info(&mut c, "tier_reads_nowait"),
        info(&mut c, "tier_nowait_misses"),
    );
    for i in 0..TIERED {
        let v: Vec<u8> = redis::cmd("GET")
            .arg(format!("t:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, value(i), "t:{i}");
    }
    let hits = info(&mut c, "tier_reads_nowait") - hits;
    let misses = info(&mut c, "tier_nowait_misses") - misses;
    // Every read is counted once, one way or the other.
    assert_eq!(hits + misses, TIERED as u64, "{hits} hits, {misses} misses");
    // With the pages gone, reads miss the cache and park (where the file
    // system keeps a page cache to drop: not tmpfs, whose pages are the
    // file). The advice is only advice: a kernel may keep pages it could
    // not drop, so the miss count is asserted only when `mincore` showed
    // the segments' pages gone before the reads.
    if !on_tmpfs(&dir) && resident == 0 {
        assert!(misses > 0, "{hits} hits, {misses} misses");
    }
    assert_eq!(info(&mut c, "tier_reads_parked"), misses);
    if resident > 0 {
        eprintln!("note: {resident} segment pages stayed cached after the drop ({hits} hits)");
    }
}

/// Pages of the directory's value-log segments (`*.vlog`, anywhere below
/// it) that are in the page cache, by `mincore` over a read-only mapping
/// (mapping a file does not bring its pages in).
fn resident_segment_pages(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            n += resident_segment_pages(&path);
            continue;
        }
        if path.extension().is_none_or(|x| x != "vlog") {
            continue;
        }
        let f = std::fs::File::open(&path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        if len == 0 {
            continue;
        }
        use std::os::fd::AsRawFd;
        // SAFETY: a read-only shared mapping of an open file, unmapped
        // below; `vec` has one byte per page of it, as mincore requires.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "mmap {}", path.display());
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let mut vec = vec![0u8; len.div_ceil(page)];
            assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0);
            libc::munmap(p, len);
            n += vec.iter().filter(|b| **b & 1 == 1).count();
        }
    }
    n
}

fn on_tmpfs(dir: &TestDir) -> bool {
    let path = std::ffi::CString::new(dir.s()).unwrap();
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(path.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statfs {}", dir.s());
    st.f_type == libc::TMPFS_MAGIC
}

/// Tiered values reply byte for byte as plain ones (branch tierr: a read
/// command's records are read into one buffer per command and a coded
/// one is decoded straight into the reply). A tier server and a plain
/// one hold the same values; every reading command's exact reply, in
/// RESP2 and RESP3, matches: MGET of tiered keys beside RAM, missing and
/// non-string keys (and the same key twice), GET, GETRANGE/SUBSTR,
/// STRLEN, GETEX, GETDEL, LCS, DUMP, the edits that bring a value back
/// (APPEND, SETRANGE, GETSET, SET ... GET, INCR's error), BITCOUNT,
/// GETBIT, COPY; then MGET inside MULTI/EXEC and a script (synchronous
/// reads), and read by the I/O threads (`DEBUG TIER-FAULT DELAY`).
#[test]
fn tiered_values_reply_byte_for_byte_as_plain_ones() {
    let dir = TestDir::new("tier-io", "bytes");
    let (server, mut c) = start(&dir);
    let plain = start_cairn(&[]);
    let mut p = redis_client(plain.port);
    let mut pipe = redis::pipe();
    for i in 0..TIERED {
        pipe.cmd("SET").arg(format!("t:{i}")).arg(value(i)).ignore();
    }
    pipe.cmd("SET").arg("ram:1").arg("small value").ignore();
    pipe.query::<()>(&mut p).unwrap();
    for conn in [&mut c, &mut p] {
        let _: () = redis::cmd("RPUSH")
            .arg("list")
            .arg("a")
            .query(conn)
            .unwrap();
    }
    let enc: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("t:5")
        .query(&mut c)
        .unwrap();
    assert_eq!(enc, "tiered");
    let mget: Vec<String> = ["MGET", "ram:1", "nosuch", "list", "t:0"]
        .iter()
        .map(|s| s.to_string())
        .chain((0..40).map(|i| format!("t:{i}")))
        .collect();
    let lines = [
        "GET t:41",
        "GET nosuch",
        "GETRANGE t:42 0 -1",
        "GETRANGE t:42 100 199",
        "GETRANGE t:43 -10 -1",
        "GETRANGE t:43 5000 6000",
        "SUBSTR t:42 5 50",
        "STRLEN t:44",
        "LCS t:45 t:46 LEN",
        "GETEX t:47 PX 100000",
        "GETDEL t:48",
        "GET t:48",
        "DUMP t:49",
        "APPEND t:50 !",
        "GET t:50",
        "SETRANGE t:51 5 abc",
        "GET t:51",
        "GETSET t:52 new",
        "SET t:53 x GET",
        "INCR t:54",
        "BITCOUNT t:55",
        "GETBIT t:55 100",
        "COPY t:56 c56",
        "GET c56",
        "HELLO 3",
        "GET t:60",
        "GETRANGE t:61 3 30",
        "GETEX t:62",
        "MULTI",
        "MGET t:63 t:64 ram:1",
        "GET t:65",
        "EXEC",
        "EVAL return_redis.call('MGET','t:66','t:67','nosuch') 0",
    ];
    let mut script: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            l.split(' ')
                .map(|w| w.replace("return_", "return "))
                .collect()
        })
        .collect();
    // The MGET in RESP2, before HELLO 3, and again in RESP3 at the end.
    let hello = script.iter().position(|a| a[0] == "HELLO").unwrap();
    script.insert(hello, mget.clone());
    script.push(mget.clone());
    let (mut rc, mut rp) = (server.conn(), plain.conn());
    let mut compare = |args: &[String]| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        rc.send(&a);
        rp.send(&a);
        let (got, want) = (rc.read_raw_reply(), rp.read_raw_reply());
        if args[0] != "HELLO" {
            assert!(
                got == want,
                "{args:?}: {} against {}",
                support::escape(&got[..got.len().min(200)]),
                support::escape(&want[..want.len().min(200)])
            );
        }
    };
    for args in &script {
        compare(args);
    }
    let reads = info(&mut c, "tier_reads");
    // The same MGET read by the I/O threads (every read parks), then
    // once more without waiting.
    delay(&mut c, 1);
    compare(&mget);
    delay(&mut c, 0);
    compare(&mget);
    assert!(info(&mut c, "tier_reads_parked") > 0, "the reads parked");
    assert!(info(&mut c, "tier_reads") > reads);
}
