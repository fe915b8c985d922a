//! The disk tier (issue 25 item 2) through a real client: a server with a
//! small `maxmemory` and `tier-enabled yes` takes three times its memory
//! of text values and reads every one back (INFO's `# Tier` counters and
//! the memory bound checked); a restart from SAVE; SIGKILL while values
//! move out and while segments are compacted, with the journal on
//! (nothing acknowledged lost); and a full disk (DEBUG TIER-FAULT), which
//! gives -OOM, never a lost value.
mod support;

use redis::Connection;
use std::time::{Duration, Instant};
use support::tier::{info, start, MAXMEMORY};
use support::{redis_client, start_cairn, Server, TestDir};

const VALUE_BYTES: usize = 2_000;
const VALUES: usize = 3 * (MAXMEMORY as usize) / VALUE_BYTES;

fn value(i: usize, round: u64) -> Vec<u8> {
    cairn_engine::value::zcomp::sample_text(i as u64 * 31 + round, VALUE_BYTES)
}

/// Writes values `range` (round `round`) with pipelined SETs; returns how
/// many were acknowledged before the first -OOM (all, if none). With
/// `patient`, a chunk refused with -OOM is sent again after a pause, for
/// up to 10 s: while the first values move out (the zstd dictionary's
/// training sample and the trainer briefly take a few MB) a 16 MiB server
/// can be full for a moment.
fn write(c: &mut Connection, range: std::ops::Range<usize>, round: u64, patient: bool) -> usize {
    let mut done = range.start;
    for chunk in range.collect::<Vec<_>>().chunks(100) {
        let started = Instant::now();
        loop {
            let mut p = redis::pipe();
            for &i in chunk {
                p.cmd("SET").arg(format!("v:{i}")).arg(value(i, round));
            }
            match p.query::<Vec<redis::Value>>(c) {
                Ok(_) => break,
                Err(e) => {
                    assert!(e.to_string().contains("OOM"), "{e}");
                    if !patient || started.elapsed() > Duration::from_secs(10) {
                        return done;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        done += chunk.len();
    }
    done
}

fn check(c: &mut Connection, range: std::ops::Range<usize>, round: u64) {
    for chunk in range.collect::<Vec<_>>().chunks(200) {
        let keys: Vec<String> = chunk.iter().map(|i| format!("v:{i}")).collect();
        let got: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(&keys).query(c).unwrap();
        for (&i, v) in chunk.iter().zip(got) {
            assert_eq!(v.as_deref(), Some(&value(i, round)[..]), "v:{i}");
        }
    }
}

/// A client once the server's start-up load (snapshot or journal) is
/// over.
fn client(server: &Server) -> Connection {
    let mut c = redis_client(server.port);
    wait_for("the load", || info(&mut c, "loading") == 0);
    c
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "waited for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn three_times_maxmemory_reads_back_and_survives_a_restart() {
    let dir = TestDir::new("tier", "load");
    let server = start(&dir, &[]);
    let mut c = client(&server);
    assert_eq!(
        write(&mut c, 0..VALUES, 0, true),
        VALUES,
        "no -OOM with the tier on"
    );
    // The tier thread brings memory under the threshold (90%); a write
    // may pass maxmemory by a little for a moment, as in Redis.
    wait_for("used_memory under maxmemory", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    let used = info(&mut c, "used_memory");
    let tiered = info(&mut c, "tiered_keys");
    assert!(tiered as usize > VALUES / 2, "tiered_keys {tiered}");
    assert!(info(&mut c, "tier_writes") >= tiered);
    assert!(info(&mut c, "tier_bytes_on_disk") > 0);
    assert!(info(&mut c, "tier_live_bytes") > 0);
    // The process holds about maxmemory, not the 48 MiB written.
    let rss = info(&mut c, "used_memory_rss");
    println!("rss {rss} used {used} tiered {tiered} of {VALUES}");
    assert!(rss < 3 * MAXMEMORY + (16 << 20), "rss {rss}");
    let reads = info(&mut c, "tier_reads");
    check(&mut c, 0..VALUES, 0);
    assert!(info(&mut c, "tier_reads") >= reads + tiered / 2);
    // The keys sampled coldest went first; find one that is on disk.
    let tiered = (0..VALUES)
        .find(|i| {
            let k = format!("v:{i}");
            let enc: String = redis::cmd("OBJECT")
                .arg("ENCODING")
                .arg(&k)
                .query(&mut c)
                .unwrap();
            enc == "tiered"
        })
        .expect("a tiered key");
    let tiered_key = format!("v:{tiered}");
    let n: usize = redis::cmd("STRLEN").arg(&tiered_key).query(&mut c).unwrap();
    assert_eq!(n, VALUE_BYTES);
    // An edit brings a value back to RAM.
    let n: usize = redis::cmd("APPEND")
        .arg(&tiered_key)
        .arg("!")
        .query(&mut c)
        .unwrap();
    assert_eq!(n, VALUE_BYTES + 1);
    let _: () = redis::cmd("SET")
        .arg(&tiered_key)
        .arg(value(tiered, 0))
        .query(&mut c)
        .unwrap();

    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(c);
    drop(server);
    let server = start(&dir, &[]);
    let mut c = client(&server);
    check(&mut c, 0..VALUES, 0);
    wait_for("values to move out again", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    check(&mut c, 0..VALUES, 0);
}

#[test]
fn sigkill_while_tiering_and_compacting_loses_nothing_acknowledged() {
    let dir = TestDir::new("tier", "kill");
    let journal = ["--appendonly", "yes", "--appendfsync", "always"];
    let server = start(&dir, &journal);
    let mut c = client(&server);
    let n = VALUES / 2;
    assert_eq!(write(&mut c, 0..n, 0, true), n);
    // Overwrites leave the first segments mostly dead: compaction runs.
    assert_eq!(write(&mut c, 0..n / 2, 1, true), n / 2);
    wait_for("a compaction", || info(&mut c, "tier_compactions") > 0);
    assert_eq!(write(&mut c, n / 2..n, 2, true), n);
    drop(c);
    drop(server); // SIGKILL, with values moving out and segments dying
    let server = start(&dir, &journal);
    let mut c = client(&server);
    check(&mut c, 0..n / 2, 1);
    check(&mut c, n / 2..n, 2);
}

#[test]
fn a_full_disk_gives_oom_not_loss() {
    let dir = TestDir::new("tier", "full");
    let server = start(&dir, &[]);
    let mut c = client(&server);
    let _: () = redis::cmd("DEBUG")
        .arg("TIER-FAULT")
        .arg("WRITE")
        .arg(1_000_000)
        .query(&mut c)
        .unwrap();
    let acked = write(&mut c, 0..VALUES, 0, false);
    assert!(acked < VALUES, "the writes stopped with -OOM");
    assert!(info(&mut c, "tier_append_errors") > 0);
    check(&mut c, 0..acked, 0);
    // The disk is back: the buffer is written on the next tick and values
    // move out again.
    let _: () = redis::cmd("DEBUG")
        .arg("TIER-FAULT")
        .arg("WRITE")
        .arg(0)
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(write(&mut c, acked..VALUES, 0, true), VALUES);
    check(&mut c, 0..VALUES, 0);
    // A failed read fails its command with an error naming the record,
    // and the value is still there.
    let _: () = redis::cmd("DEBUG")
        .arg("TIER-FAULT")
        .arg("READ")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let failed = (0..VALUES).find_map(|i| {
        redis::cmd("GET")
            .arg(format!("v:{i}"))
            .query::<Vec<u8>>(&mut c)
            .err()
            .map(|e| (i, e.to_string()))
    });
    let (i, e) = failed.expect("one GET met the fault");
    assert!(e.contains("disk tier read failed"), "{e}");
    let v: Vec<u8> = redis::cmd("GET")
        .arg(format!("v:{i}"))
        .query(&mut c)
        .unwrap();
    assert_eq!(v, value(i, 0));
    let off = start_cairn(&["--enable-debug-command", "yes"]);
    let mut o = redis_client(off.port);
    let e = redis::cmd("DEBUG")
        .arg("TIER-FAULT")
        .arg("WRITE")
        .arg(1)
        .query::<()>(&mut o)
        .unwrap_err();
    assert!(e.to_string().contains("tier"), "{e}");
}
