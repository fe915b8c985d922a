//! Disk and diskless full syncs as Redis 7.0.15 does them, checked against
//! redis-server in both roles (issue 24):
//!
//! - `repl-diskless-sync no` on the master sends the image from a file,
//!   framed `$<len>`, even to a replica that says `capa eof` (as every
//!   redis-server replica does); `yes` streams it `$EOF:<mark>`. A raw
//!   replica asks a Cairn master and a redis-server master the same.
//! - `repl-diskless-load` on a replica decides what its clients see while
//!   the image arrives: the old data (`disabled`, or `on-empty-db` on a
//!   replica holding keys: Redis writes the image to disk first) or
//!   `-LOADING` (`on-empty-db` on an empty replica, `swapdb` from another
//!   history: Redis parses the image from the socket). A Cairn replica and
//!   a redis-server replica of one slow master are watched side by side.
//!
//! The tests need redis-server and skip without it (outside CI).
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{digest, info_field, ok, redis_client, start_cairn, start_redis, Server, TestDir};

/// A replica's handshake on a raw socket; returns the `+FULLRESYNC` line
/// and the line that opens the image (`$<len>` or `$EOF:<mark>`), with the
/// reader positioned at the image's first byte.
fn psync(port: u16) -> (String, String, BufReader<TcpStream>) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    for cmd in [
        "REPLCONF listening-port 7777\r\n",
        "REPLCONF capa eof capa psync2\r\n",
    ] {
        w.write_all(cmd.as_bytes()).unwrap();
        assert_eq!(line(&mut r), "+OK", "{cmd}");
    }
    w.write_all(b"PSYNC ? -1\r\n").unwrap();
    let full = line(&mut r);
    // A master preparing the image sends newlines to keep the link alive.
    let head = loop {
        let l = line(&mut r);
        if !l.is_empty() {
            break l;
        }
    };
    (full, head, r)
}

/// One line, without its line end.
fn line(r: &mut BufReader<TcpStream>) -> String {
    let mut l = String::new();
    r.read_line(&mut l).unwrap();
    l.trim_end().to_string()
}

/// The framing a master uses with `repl-diskless-sync` `yes` and `no` for
/// a replica that says `capa eof`: (disk header, its image's first 9 bytes
/// and whether its length matched, diskless header kind).
fn framings(master: &Server) -> (bool, Vec<u8>, bool) {
    let mut c = redis_client(master.port);
    ok(&mut c, &["CONFIG", "SET", "repl-diskless-sync", "no"]);
    let (full, head, mut r) = psync(master.port);
    assert!(full.starts_with("+FULLRESYNC "), "{full}");
    let len = head.strip_prefix('$').and_then(|n| n.parse::<usize>().ok());
    let mut image = Vec::new();
    let whole = match len {
        Some(n) => {
            image.resize(n, 0);
            r.read_exact(&mut image).is_ok()
        }
        None => false,
    };
    drop(r);
    ok(&mut c, &["CONFIG", "SET", "repl-diskless-sync", "yes"]);
    let (full, head, _r) = psync(master.port);
    assert!(full.starts_with("+FULLRESYNC "), "{full}");
    let eof = head.strip_prefix("$EOF:").is_some_and(|m| m.len() == 40);
    image.truncate(9);
    (whole, image, eof)
}

/// `n` keys of `size` bytes each that do not compress (the image's
/// size is what the test needs; Redis's LZF would shrink repeated bytes).
fn fill(c: &mut redis::Connection, n: usize, size: usize) {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for chunk in 0..n / 100 {
        let mut args = vec!["MSET".to_string()];
        for i in chunk * 100..(chunk + 1) * 100 {
            args.push(format!("key:{i}"));
            let v: String = (0..size)
                .map(|_| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    char::from(b'!' + (x >> 58) as u8)
                })
                .collect();
            args.push(v);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(c, &refs);
    }
}

#[test]
fn disk_mode_sends_a_file_even_to_a_replica_that_reads_eof_framing() {
    let dir = TestDir::new("repldisk", "framing");
    let cairn = start_cairn(&["--dir", &dir.sub("cairn")]);
    let Some(redis) = start_redis(&[
        "--dir",
        &dir.sub("redis"),
        "--repl-diskless-sync-delay",
        "0",
    ]) else {
        return;
    };
    for m in [&cairn, &redis] {
        fill(&mut redis_client(m.port), 300, 10);
    }
    let want = framings(&redis);
    // The reference: a file of the length announced, then diskless.
    assert_eq!(want, (true, b"REDIS0010".to_vec(), true));
    assert_eq!(framings(&cairn), want);
    assert!(
        cairn
            .log()
            .contains("starting a fork-less RDB transfer (disk)"),
        "{}",
        cairn.log()
    );
    // The file went once sent.
    let cdir = std::path::PathBuf::from(dir.sub("cairn"));
    support::wait_for("the temporary file to go", Duration::from_secs(5), || {
        std::fs::read_dir(&cdir)
            .map(|d| {
                !d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with("temp-repl-"))
            })
            .unwrap_or(true)
    });
}

/// What a client of the replica saw at one probe during the sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Old,
    Missing,
    Loading,
    Other,
}

/// Probes `GET probe` on each replica every 20 ms (a thread each: a
/// redis-server parsing an image holds a request for a while) until it
/// reports the link up and the sync over; what each saw, in order.
fn watch(replicas: &[&Server]) -> Vec<Vec<Seen>> {
    let ports: Vec<u16> = replicas.iter().map(|s| s.port).collect();
    let threads: Vec<_> = ports
        .into_iter()
        .map(|port| {
            std::thread::spawn(move || {
                let mut c = redis_client(port);
                let mut seen = Vec::new();
                let t0 = Instant::now();
                loop {
                    let got: redis::RedisResult<Option<String>> =
                        redis::cmd("GET").arg("probe").query(&mut c);
                    seen.push(match got {
                        Ok(Some(v)) if v == "old" => Seen::Old,
                        Ok(None) => Seen::Missing,
                        Err(e) if e.code() == Some("LOADING") => Seen::Loading,
                        _ => Seen::Other,
                    });
                    let field = |c: &mut redis::Connection, f| info_field(c, "replication", f);
                    if field(&mut c, "master_link_status").as_deref() == Some("up")
                        && field(&mut c, "master_sync_in_progress").as_deref() == Some("0")
                    {
                        return seen;
                    }
                    assert!(
                        t0.elapsed() < Duration::from_secs(60),
                        "the replica on port {port} did not sync: {seen:?}"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn count(seen: &[Seen], what: Seen) -> usize {
    seen.iter().filter(|&&s| s == what).count()
}

#[test]
fn repl_diskless_load_decides_what_clients_see_during_the_transfer() {
    let dir = TestDir::new("repldisk", "load");
    // 2000 keys at 1 ms each: the image streams for about two seconds, in
    // ~30 of the master's 64 KB writes (1 KB values), so the replicas get
    // its bytes all along. The two replicas of each case share one image
    // (max-replicas 2).
    let master = start_cairn(&[
        "--dir",
        &dir.sub("m"),
        "--enable-debug-command",
        "yes",
        "--rdb-key-save-delay",
        "1000",
        "--repl-diskless-sync-delay",
        "10",
        "--repl-diskless-sync-max-replicas",
        "2",
    ]);
    let mut mc = redis_client(master.port);
    fill(&mut mc, 2000, 1000);
    let want = digest(&mut mc);
    // (mode, the replica holds a key first, what its clients see meanwhile)
    let cases = [
        ("disabled", true, Seen::Old),
        ("on-empty-db", true, Seen::Old),
        ("on-empty-db", false, Seen::Loading),
        ("swapdb", true, Seen::Loading),
    ];
    for (i, (mode, holds, expect)) in cases.into_iter().enumerate() {
        let args = ["--repl-diskless-load", mode];
        // Redis answers clients while it parses an image only every
        // `loading-process-events-interval-bytes` (2 MB by default; this
        // image is ~40 KB); its own tests lower it so.
        let rdir = dir.sub(&format!("r{i}"));
        let Some(redis) = start_redis(
            &[
                &args[..],
                &[
                    "--dir",
                    &rdir,
                    "--loading-process-events-interval-bytes",
                    "1024",
                ],
            ]
            .concat(),
        ) else {
            return;
        };
        let cairn = start_cairn(
            &[
                &args[..],
                &[
                    "--dir",
                    &dir.sub(&format!("c{i}")),
                    "--enable-debug-command",
                    "yes",
                ],
            ]
            .concat(),
        );
        for s in [&redis, &cairn] {
            let mut c = redis_client(s.port);
            if holds {
                ok(&mut c, &["SET", "probe", "old"]);
            }
            ok(
                &mut c,
                &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
            );
        }
        let seen = watch(&[&redis, &cairn]);
        // Redis parses a "to parser" image on its one thread, blocked in
        // the socket's read while the master's bytes are slow (this
        // master's image arrives in large pieces): a client waits, then is
        // answered -LOADING when Redis looks at events. Cairn's workers
        // answer at once all through.
        for (name, s, at_least) in [("redis-server", &seen[0], 1), ("Cairn", &seen[1], 5)] {
            let want = if expect == Seen::Loading { at_least } else { 5 };
            assert!(
                count(s, expect) >= want,
                "{mode} (holding a key: {holds}): {name}'s clients should see {expect:?} \
                 during the transfer; saw {s:?}"
            );
            assert_eq!(count(s, Seen::Other), 0, "{mode}: {name}: {s:?}");
            // The old data is not served once the replica is loading.
            if expect == Seen::Loading {
                let first = s.iter().position(|&x| x == Seen::Loading).unwrap();
                assert!(!s[first..].contains(&Seen::Old), "{mode}: {name}: {s:?}");
            }
        }
        for s in [&redis, &cairn] {
            let mut c = redis_client(s.port);
            assert_eq!(digest(&mut c), want, "{mode}");
        }
    }
}
