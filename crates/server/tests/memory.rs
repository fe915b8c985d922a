//! Memory accounting, maxmemory and eviction (issue 5), through real
//! clients: memory stays under the limit after write bursts under every
//! policy, the right class of keys goes, noeviction refuses and keeps
//! everything, evictions are counted and notified, and the MEMORY command's
//! replies and errors.
mod mc_support;
mod support;

use redis::{Connection, Value};
use std::time::Duration;
use support::*;

/// How far used memory may be over the limit once a burst is over. The
/// check before each command is exact near the limit, so what can pass it
/// is what the last command adds after its check (a 400-byte value, its
/// entry and reply: under 1 KiB) plus what other threads allocate in the
/// meantime (the cron and memory threads: a few KiB). 64 KiB leaves room
/// for an allocator size class rounding of the index growing.
const TOLERANCE: u64 = 64 << 10;

/// How long a burst's leftovers may take to go: the connection's query
/// buffer, grown to hold a pipelined burst (~100 KiB, counted in used
/// memory as in Redis), is returned by the worker's cron, and eviction a
/// command left over its time budget is finished by the memory thread.
const SETTLE: Duration = Duration::from_millis(1000);

/// Waits until used memory is within `TOLERANCE` of `max`; panics with the
/// last figure if it does not get there within `SETTLE`.
fn assert_settles(c: &mut Connection, max: u64) {
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let u = used(c);
        if u <= max + TOLERANCE {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "used {u} over the limit {max} by {} after {SETTLE:?}",
            u - max
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn info_u64(c: &mut Connection, section: &str, name: &str) -> u64 {
    let text: String = q(c, &["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} not in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

fn used(c: &mut Connection) -> u64 {
    info_u64(c, "memory", "used_memory")
}

fn evicted(c: &mut Connection) -> u64 {
    info_u64(c, "stats", "evicted_keys")
}

/// A server with `policy` and a limit `room` bytes above what it uses now.
fn limited(policy: &str, room: u64) -> (Server, Connection, u64) {
    let s = start_cairn(&["--enable-debug-command", "yes"]);
    let mut c = redis_client(s.port);
    let max = used(&mut c) + room;
    ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &max.to_string()]);
    (s, c, max)
}

/// Writes keys `prefix0..n` with `size`-byte values in pipelined bursts,
/// checking after each burst that memory is within the limit. Returns the
/// replies that were errors.
fn burst_writes(
    c: &mut Connection,
    max: u64,
    prefix: &str,
    n: usize,
    size: usize,
    ttl: Option<u64>,
) -> Vec<String> {
    let v = "v".repeat(size);
    let mut errors = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(250) {
        let mut p = redis::pipe();
        for i in chunk {
            let mut cmd = redis::cmd("SET");
            cmd.arg(format!("{prefix}{i}")).arg(&v);
            if let Some(t) = ttl {
                cmd.arg("EX").arg(t + *i as u64);
            }
            p.add_command(cmd);
        }
        let replies: Vec<redis::RedisResult<Value>> = p.ignore_errors().query(c).unwrap();
        assert_eq!(replies.len(), chunk.len());
        for r in replies {
            if let Err(e) = r {
                errors.push(err_line(&e));
            }
        }
        assert_settles(c, max);
    }
    errors
}

fn exists(c: &mut Connection, key: &str) -> bool {
    int(c, &["EXISTS", key]) == 1
}

#[test]
fn every_evicting_policy_keeps_memory_under_the_limit() {
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let (_s, mut c, max) = limited(policy, 3 << 20);
        // 8 MB of values into 3 MB of room: most must be evicted.
        let errors = burst_writes(&mut c, max, "k", 20_000, 400, Some(1000));
        assert!(errors.is_empty(), "{policy}: {:?}", &errors[..1]);
        // The memory thread may still be evicting in the background: read
        // the count on both sides of DBSIZE until nothing moved between.
        let (ev, keys) = loop {
            let before = evicted(&mut c);
            let keys = int(&mut c, &["DBSIZE"]) as u64;
            if evicted(&mut c) == before {
                break (before, keys);
            }
        };
        assert!(ev > 5_000, "{policy}: only {ev} evicted");
        assert_eq!(ev + keys, 20_000, "{policy}: evicted + kept");
    }
}

#[test]
fn volatile_policies_never_evict_keys_without_ttl() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let (_s, mut c, max) = limited(policy, 3 << 20);
        // 1 MB of keys without a TTL, then 6 MB with one.
        assert!(burst_writes(&mut c, max, "p", 2_500, 400, None).is_empty());
        assert!(burst_writes(&mut c, max, "v", 15_000, 400, Some(1000)).is_empty());
        assert!(evicted(&mut c) > 5_000, "{policy}");
        for i in 0..2_500 {
            assert!(exists(&mut c, &format!("p{i}")), "{policy} evicted p{i}");
        }
        // Only persistent keys left to fill: nothing evictable, so writes
        // are refused and nothing is lost.
        let errors = burst_writes(&mut c, max, "q", 10_000, 400, None);
        assert!(!errors.is_empty(), "{policy}: no refusal");
        assert!(errors
            .iter()
            .all(|e| e == "OOM command not allowed when used memory > 'maxmemory'."));
        for i in 0..2_500 {
            assert!(exists(&mut c, &format!("p{i}")), "{policy} lost p{i}");
        }
    }
}

#[test]
fn volatile_ttl_evicts_the_nearest_expiry_first() {
    let (_s, mut c, max) = limited("volatile-ttl", 2 << 20);
    // TTLs grow with the key number: k0 expires first.
    assert!(burst_writes(&mut c, max, "k", 10_000, 400, Some(10_000)).is_empty());
    let ev = evicted(&mut c);
    assert!(ev > 3_000, "{ev}");
    // The evicted keys are the early ones: of the last quarter, almost
    // all survive, of the first quarter almost none.
    let alive = |c: &mut Connection, r: std::ops::Range<usize>| {
        r.filter(|i| exists(c, &format!("k{i}"))).count()
    };
    let first = alive(&mut c, 0..2_500);
    let last = alive(&mut c, 7_500..10_000);
    assert!(first < 500, "first quarter alive: {first}");
    assert!(last > 2_200, "last quarter alive: {last}");
}

#[test]
fn lru_keeps_recently_read_keys() {
    // A 400-byte string key costs ~466 bytes: old + hot (~1.9 MB) fit in
    // 3 MB. New keys must push old ones out, but not nearly all of them:
    // the tables grown by the burst and the freed entries' slots cost
    // room too, so 4,000 new keys evicted ~2,900 (nearly every old key),
    // and once few idle keys are left, samples miss them (in Redis too)
    // and the test measured sampling luck. 3,000 evict ~2,000. (With
    // 2,500 new keys they barely overflowed it, and how many went
    // depended on buffer timing.)
    let (_s, mut c, max) = limited("allkeys-lru", 3 << 20);
    assert!(burst_writes(&mut c, max, "old", 3_000, 400, None).is_empty());
    assert!(burst_writes(&mut c, max, "hot", 1_000, 400, None).is_empty());
    // A minute passes; the hot keys are read, the old ones are not.
    ok(&mut c, &["DEBUG", "JUMP-CLOCK", "60000"]);
    let mut p = redis::pipe();
    for i in 0..1_000 {
        p.cmd("GET").arg(format!("hot{i}")).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    // New writes push memory over: the idle old keys go first. (Sampling
    // is approximate, as in Redis: once few old keys are left, a sample
    // may hold none of them, and then a recent key goes.)
    let before = evicted(&mut c);
    assert!(burst_writes(&mut c, max, "new", 3_000, 400, None).is_empty());
    let gone = evicted(&mut c) - before;
    assert!(gone > 600, "{gone} evicted");
    let hot = (0..1_000)
        .filter(|i| exists(&mut c, &format!("hot{i}")))
        .count();
    let old = (0..3_000)
        .filter(|i| exists(&mut c, &format!("old{i}")))
        .count();
    // Approximate sampling lets a few hot keys go (947 kept once in CI);
    // evicting without regard to use would keep about two in three.
    assert!(hot >= 900, "hot keys kept: {hot} ({gone} evicted)");
    let old_gone = 3_000 - old as u64;
    assert!(
        old_gone * 10 >= gone * 9,
        "{old_gone} of {gone} evicted keys were idle ones"
    );
}

#[test]
fn lfu_keeps_frequently_read_keys() {
    let (_s, mut c, max) = limited("allkeys-lfu", 3 << 20);
    assert!(burst_writes(&mut c, max, "cold", 3_000, 400, None).is_empty());
    assert!(burst_writes(&mut c, max, "hot", 1_000, 400, None).is_empty());
    // The hot keys are read 30 times each: their counters climb above the
    // initial 5 that every new key starts with.
    for _ in 0..30 {
        let mut p = redis::pipe();
        for i in 0..1_000 {
            p.cmd("GET").arg(format!("hot{i}")).ignore();
        }
        let _: () = p.query(&mut c).unwrap();
    }
    let f = int(&mut c, &["OBJECT", "FREQ", "hot1"]);
    assert!(f > 5, "OBJECT FREQ {f}");
    assert!(burst_writes(&mut c, max, "new", 4_000, 400, None).is_empty());
    let hot = (0..1_000)
        .filter(|i| exists(&mut c, &format!("hot{i}")))
        .count();
    assert!(hot >= 950, "hot keys kept: {hot}");
}

#[test]
fn noeviction_refuses_writes_and_keeps_everything() {
    let (_s, mut c, max) = limited("noeviction", 2 << 20);
    let errors = burst_writes(&mut c, max, "k", 10_000, 400, None);
    assert!(!errors.is_empty());
    let stored = int(&mut c, &["DBSIZE"]) as usize;
    assert_eq!(stored + errors.len(), 10_000);
    assert_eq!(evicted(&mut c), 0);
    // Every acknowledged write is there (the refusals are the last ones:
    // once full, every later write is refused too).
    for i in 0..stored {
        let v: Option<String> = q(&mut c, &["GET", &format!("k{i}")]);
        assert_eq!(v.map(|v| v.len()), Some(400), "k{i}");
    }
    assert_eq!(
        err(&mut c, &["SET", "more", "x"]),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    // Deletes work, and make room again. 300 keys (~150 KB): the first DEL
    // also allocates DEL's latency histogram (~25 KB, counted in
    // used_memory as Redis counts its own), which 100 keys barely covered.
    for i in 0..300 {
        assert_eq!(int(&mut c, &["DEL", &format!("k{i}")]), 1);
    }
    ok(&mut c, &["SET", "more", "x"]);
}

#[test]
fn a_value_larger_than_the_remaining_room() {
    // noeviction: 1.5 MB does not fit in what is left of 2 MB; refused,
    // and nothing is lost.
    let (_s, mut c, max) = limited("noeviction", 2 << 20);
    assert!(burst_writes(&mut c, max, "k", 2_000, 400, None).is_empty());
    let big = "b".repeat(1_500_000);
    let e = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(
        err_line(&e),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    assert_eq!(int(&mut c, &["DBSIZE"]), 2_000);

    // allkeys-lru: room is made first, then the value is stored. While
    // the command runs its bytes are held twice (in the query buffer,
    // counted as used memory as in Redis, and in the keyspace), so a value
    // needs twice its size of room: 600 KB here. Without
    // a time budget (tenacity 100) the room is made in full before the
    // write, whatever the build's speed; with one, the rest would be made
    // in the background.
    let (_s, mut c, max) = limited("allkeys-lru", 2 << 20);
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-eviction-tenacity", "100"],
    );
    assert!(burst_writes(&mut c, max, "k", 4_000, 400, None).is_empty());
    let before = evicted(&mut c);
    let big = "b".repeat(600_000);
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    assert!(evicted(&mut c) > before + 600, "room was made by evicting");
    assert_settles(&mut c, max);
    let n: usize = q(&mut c, &["STRLEN", "big"]);
    assert_eq!(n, 600_000);
    // Larger than the whole limit: nothing could make room.
    let huge = "h".repeat(max as usize + 1);
    let e = redis::cmd("SET")
        .arg("huge")
        .arg(&huge)
        .query::<()>(&mut c)
        .unwrap_err();
    assert_eq!(
        err_line(&e),
        "OOM command not allowed when used memory > 'maxmemory'."
    );
    // (While it arrived, its bytes in the query buffer counted as used
    // memory, as in Redis, so the background eviction may have emptied the
    // keyspace meanwhile: `big` is not checked here.)
    assert_eq!(int(&mut c, &["EXISTS", "huge"]), 0);
}

#[test]
fn evictions_are_counted_notified_and_seen_by_watch() {
    let (s, mut c, max) = limited("volatile-ttl", 2 << 20);
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    let mut sub = RawConn::connect(s.port);
    sub.send(&[b"SUBSCRIBE", b"__keyevent@0__:evicted"]);
    let _ = sub.read_frame();
    // A watched key with the nearest TTL: it goes early (within the first
    // evictions: sampling is approximate).
    let mut w = redis_client(s.port);
    ok(&mut w, &["SET", "watched", "x", "EX", "100"]);
    ok(&mut w, &["WATCH", "watched"]);
    assert!(burst_writes(&mut c, max, "k", 8_000, 400, Some(1000)).is_empty());
    // Sampling is approximate (5 keys from random shards per eviction):
    // now and then ~1,000 evictions never sample the watched key's shard
    // (seen once in CI). More writes, with later TTLs, until it goes.
    for round in 0..20 {
        if int(&mut c, &["EXISTS", "watched"]) == 0 {
            break;
        }
        let more = format!("more{round}-");
        assert!(burst_writes(&mut c, max, &more, 1_000, 400, Some(5000)).is_empty());
    }
    let ev = evicted(&mut c);
    assert!(ev > 1_000, "{ev}");
    assert_eq!(int(&mut c, &["EXISTS", "watched"]), 0);
    ok(&mut w, &["MULTI"]);
    let _: String = q(&mut w, &["SET", "watched", "y"]);
    let r: Value = q(&mut w, &["EXEC"]);
    assert_eq!(r, Value::Nil, "EXEC after the watched key was evicted");
    // One notification per evicted key, `watched` among them.
    sub.stream()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut keys = Vec::new();
    while (keys.len() as u64) < ev {
        match sub.read_frame() {
            cairn_protocol::resp::Frame::Array(items)
            | cairn_protocol::resp::Frame::Push(items) => {
                if let Some(cairn_protocol::resp::Frame::Bulk(k)) = items.get(2) {
                    keys.push(String::from_utf8_lossy(k).into_owned());
                }
            }
            f => panic!("unexpected {f:?}"),
        }
    }
    assert!(keys.iter().any(|k| k == "watched"));
    // No limit, so no more background eviction, then the reset.
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let reset: String = q(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(reset, "OK");
    assert_eq!(evicted(&mut c), 0);
}

#[test]
fn used_memory_is_the_allocators_count() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    let before = used(&mut c);
    let v = "x".repeat(1000);
    let mut p = redis::pipe();
    for i in 0..10_000 {
        p.cmd("SET").arg(format!("k{i}")).arg(&v).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    let after = used(&mut c);
    let alloc = info_u64(&mut c, "memory", "allocator_allocated");
    // 10 MB of values are all counted (plus keys, entries and index).
    assert!(after >= before + 10_000_000, "{before} -> {after}");
    assert!(after < before + 14_000_000, "{before} -> {after}");
    // jemalloc's stats.allocated also counts objects parked in thread
    // caches, so it is a little above, never below by more than a race.
    assert!(
        alloc + (256 << 10) >= after,
        "allocated {alloc} used {after}"
    );
    assert!(
        alloc - after < (4 << 20).max(after / 10),
        "allocated {alloc} used {after}"
    );
    // MEMORY STATS agrees with INFO.
    let stats: Vec<Value> = q(&mut c, &["MEMORY", "STATS"]);
    let total = stats
        .chunks(2)
        .find(|kv| kv[0] == Value::BulkString(b"total.allocated".to_vec()))
        .map(|kv| match kv[1] {
            Value::Int(n) => n as u64,
            _ => panic!(),
        })
        .unwrap();
    assert!(total.abs_diff(after) < 64 << 10, "{total} vs {after}");
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    let flushed = used(&mut c);
    assert!(flushed < before + 1_000_000, "{before} -> {flushed}");
}

#[test]
fn memory_command_replies_and_errors() {
    let s = start_cairn(&[]);
    let mut r = RawConn::connect(s.port);
    assert_eq!(r.cmd(&["SET", "a", "hello"]), b"+OK\r\n");
    let u = r.cmd(&["MEMORY", "USAGE", "a"]);
    assert!(u.starts_with(b":"), "{}", escape(&u));
    assert_eq!(r.cmd(&["MEMORY", "USAGE", "a", "SAMPLES", "0"]), u);
    assert_eq!(r.cmd(&["MEMORY", "USAGE", "nokey"]), b"$-1\r\n");
    for (args, want) in [
        (
            &["MEMORY", "USAGE", "a", "SAMPLES"][..],
            "-ERR syntax error\r\n",
        ),
        (
            &["MEMORY", "USAGE", "a", "SAMPLES", "-1"],
            "-ERR syntax error\r\n",
        ),
        (
            &["MEMORY", "USAGE", "a", "SAMPLES", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["MEMORY", "USAGE", "a", "foo", "1"],
            "-ERR syntax error\r\n",
        ),
        (
            &["MEMORY", "USAGE"],
            "-ERR wrong number of arguments for 'memory|usage' command\r\n",
        ),
        (
            &["MEMORY", "STATS", "x"],
            "-ERR wrong number of arguments for 'memory|stats' command\r\n",
        ),
        (
            &["MEMORY", "FOO"],
            "-ERR unknown subcommand 'FOO'. Try MEMORY HELP.\r\n",
        ),
        (&["MEMORY", "PURGE"], "+OK\r\n"),
    ] {
        assert_eq!(escape(&r.cmd(args)), escape(want.as_bytes()), "{args:?}");
    }
    // A value grows: so does its usage.
    let n = |b: &[u8]| -> i64 {
        std::str::from_utf8(&b[1..b.len() - 2])
            .unwrap()
            .parse()
            .unwrap()
    };
    r.cmd(&["SET", "big", &"x".repeat(10_000)]);
    assert!(n(&r.cmd(&["MEMORY", "USAGE", "big"])) > 10_000);

    // STATS: a RESP2 flat array of name/value pairs; RESP3 a map with
    // doubles, and db.0 a nested map.
    let stats = r.cmd(&["MEMORY", "STATS"]);
    assert!(
        stats.starts_with(b"*56\r\n$14\r\npeak.allocated\r\n:"),
        "{}",
        escape(&stats)
    );
    let text = String::from_utf8_lossy(&stats).into_owned();
    assert!(text.contains("$4\r\ndb.0\r\n*6\r\n$23\r\noverhead.hashtable.main\r\n:"));
    assert!(text.contains("$18\r\ndataset.percentage\r\n$"));
    let hello = r.cmd(&["HELLO", "3"]);
    assert!(hello.starts_with(b"%"), "{}", escape(&hello));
    let stats3 = r.cmd(&["MEMORY", "STATS"]);
    let text3 = String::from_utf8_lossy(&stats3).into_owned();
    assert!(stats3.starts_with(b"%28\r\n"), "{text3}");
    assert!(text3.contains("$4\r\ndb.0\r\n%3\r\n"));
    assert!(text3.contains("$18\r\ndataset.percentage\r\n,"));
    assert!(text3.contains("$13\r\nfragmentation\r\n,"));
    // DOCTOR and MALLOC-STATS: verbatim text in RESP3, bulk in RESP2.
    let d3 = r.cmd(&["MEMORY", "DOCTOR"]);
    assert!(
        String::from_utf8_lossy(&d3).contains("=txt:Hi Sam, this instance is empty")
            || String::from_utf8_lossy(&d3).starts_with("="),
        "{}",
        escape(&d3)
    );
    let m3 = r.cmd(&["MEMORY", "MALLOC-STATS"]);
    assert!(String::from_utf8_lossy(&m3).contains("txt:___ Begin jemalloc statistics ___"));
    assert!(r.cmd(&["HELLO", "2"]).starts_with(b"*"));
    let d2 = r.cmd(&["MEMORY", "DOCTOR"]);
    assert!(
        String::from_utf8_lossy(&d2).contains("\r\nHi Sam, this instance is empty"),
        "{}",
        escape(&d2)
    );
    let h = r.cmd(&["MEMORY", "HELP"]);
    assert!(h.starts_with(
        b"*14\r\n+MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+DOCTOR\r\n"
    ));
}

#[test]
fn memcached_writes_evict_or_are_refused() {
    let (s, port) = mc_support::cairn(&[]);
    let mut c = redis_client(s.port);
    let max = used(&mut c) + (2 << 20);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &max.to_string()]);
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    let mut mc = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    mc.set_nodelay(true).unwrap();
    use std::io::{BufRead, BufReader, Write};
    let mut rd = BufReader::new(mc.try_clone().unwrap());
    let v = "m".repeat(400);
    let mut line = String::new();
    for i in 0..10_000 {
        mc.write_all(format!("set mk{i} 0 0 400\r\n{v}\r\n").as_bytes())
            .unwrap();
        line.clear();
        rd.read_line(&mut line).unwrap();
        assert_eq!(line, "STORED\r\n", "mk{i}");
    }
    assert_settles(&mut c, max);
    assert!(evicted(&mut c) > 3_000);
    mc.write_all(b"stats\r\n").unwrap();
    let mut stats = String::new();
    loop {
        line.clear();
        rd.read_line(&mut line).unwrap();
        if line == "END\r\n" {
            break;
        }
        stats.push_str(&line);
    }
    // memcached's counter is the same as INFO's (the memory thread may
    // evict between the two readings, so only the order is checked).
    let mc_ev: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("STAT evictions "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ev = evicted(&mut c);
    assert!(mc_ev > 3_000 && mc_ev <= ev, "{mc_ev} vs {ev}");
    // noeviction: full, so a set is refused (and removes the old value).
    ok(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    let big = "B".repeat(1 << 20);
    mc.write_all(format!("set mk9999 0 0 {}\r\n{big}\r\n", big.len()).as_bytes())
        .unwrap();
    line.clear();
    rd.read_line(&mut line).unwrap();
    assert_eq!(line, "SERVER_ERROR out of memory storing object\r\n");
}

/// The hit-ratio bench's keys (13 bytes, 100-byte values) cost one compact
/// block each: used memory per key, index included, stays near 170 bytes
/// (jemalloc's 160 class plus a slot at 3/4 load at worst) after a SET and
/// a GET of every key, where a full entry and a value buffer took ~206.
/// OBJECT ENCODING and MEMORY USAGE answer as before.
#[test]
fn small_string_keys_cost_one_block() {
    let s = start_cairn(&[]);
    let mut c = redis_client(s.port);
    let before = used(&mut c);
    let n = 60_000u32;
    let v = "v".repeat(100);
    for chunk in (0..n).collect::<Vec<_>>().chunks(2000) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET").arg(format!("hr:{i:010}")).arg(&v).ignore();
        }
        let _: () = p.query(&mut c).unwrap();
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("GET").arg(format!("hr:{i:010}"));
        }
        let got: Vec<String> = p.query(&mut c).unwrap();
        assert!(got.iter().all(|g| *g == v));
    }
    // The connection's grown buffers go back at the next cron.
    std::thread::sleep(Duration::from_millis(300));
    let per_key = (used(&mut c) - before) / n as u64;
    assert!(per_key <= 180, "{per_key} bytes per key");
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "hr:0000000001"]);
    assert_eq!(enc, "raw");
    ok(&mut c, &["SET", "short", "hello"]);
    let enc: String = q(&mut c, &["OBJECT", "ENCODING", "short"]);
    assert_eq!(enc, "embstr");
    // Block (24-byte header + key + value) plus its slot.
    let usage: i64 = q(&mut c, &["MEMORY", "USAGE", "hr:0000000001"]);
    let usage_short: i64 = q(&mut c, &["MEMORY", "USAGE", "short"]);
    assert_eq!(usage - usage_short, (13 + 100) - (5 + 5));
    // 24-byte header, key and value, plus MEMORY USAGE's 16 for the slot.
    assert_eq!(usage, 24 + 13 + 100 + 16);
}
