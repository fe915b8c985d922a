//! Snapshots that point into the disk tier (issue 25 item 2, branch
//! tiersnap) through a real client: a restart takes the tiered keys'
//! pointers from the snapshot without reading their records (INFO's
//! `tier_reads` stays 0 through the load) and every value reads back,
//! coded with dictionaries the snapshot carried; SIGKILL after a snapshot
//! while compaction empties the segments it names (they are retired, not
//! deleted, until a newer snapshot is durable), with and without the
//! journal; a bad pointer in a snapshot stops start-up naming the file
//! and the offset; DEBUG RELOAD, SWAPDB and FLUSHALL over tiered keys;
//! eviction that takes values in RAM before tiered keys; RENAME of a
//! tiered key whose read fails.
mod support;

use redis::Connection;
use std::time::{Duration, Instant};
use support::tier::{info, start, MAXMEMORY};
use support::{redis_client, Server, TestDir};

const VALUE_BYTES: usize = 2_000;
const VALUES: usize = 2 * (MAXMEMORY as usize) / VALUE_BYTES;

fn value(i: usize, round: u64) -> Vec<u8> {
    cairn_engine::value::zcomp::sample_text(i as u64 * 31 + round, VALUE_BYTES)
}

/// Writes values `range` of `round`, retrying a chunk refused with -OOM
/// for up to 10 s (a 16 MiB server is full for a moment while the first
/// values move out).
fn write(c: &mut Connection, range: std::ops::Range<usize>, round: u64) {
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
                    assert!(started.elapsed() < Duration::from_secs(10), "{e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
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

/// The keys of `range` whose values are on disk now.
fn tiered(c: &mut Connection, range: std::ops::Range<usize>) -> Vec<usize> {
    let mut p = redis::pipe();
    for i in range.clone() {
        p.cmd("OBJECT").arg("ENCODING").arg(format!("v:{i}"));
    }
    let enc: Vec<Option<String>> = p.query(c).unwrap();
    range
        .zip(enc)
        .filter(|(_, e)| e.as_deref() == Some("tiered"))
        .map(|(i, _)| i)
        .collect()
}

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

fn ok(c: &mut Connection, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query(c).unwrap();
}

#[test]
fn a_restart_takes_pointers_and_keeps_the_segments_they_name() {
    let dir = TestDir::new("tier_restart", "save");
    let server = start(&dir, &[]);
    let mut c = client(&server);
    write(&mut c, 0..VALUES, 0);
    wait_for("values to move out", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    let tiered_at_save = info(&mut c, "tiered_keys");
    assert!(tiered_at_save as usize > VALUES / 3, "{tiered_at_save}");
    ok(&mut c, &["SAVE"]);
    drop(c);
    drop(server); // SIGKILL

    let server = start(&dir, &[]);
    let mut c = client(&server);
    // The pointers came from the file: no record was read to load them.
    let loaded = info(&mut c, "tier_loaded_pointers");
    assert!(
        loaded + 200 >= tiered_at_save,
        "{loaded} of {tiered_at_save}"
    );
    assert!(info(&mut c, "tiered_keys") >= loaded);
    assert_eq!(info(&mut c, "tier_reads"), 0, "the load read no record");
    check(&mut c, 0..VALUES, 0);
    assert!(info(&mut c, "tier_reads") >= loaded);
    // Overwrites kill the records the snapshot names; compaction empties
    // their segments, which the snapshot still needs: retired, not gone.
    write(&mut c, 0..VALUES / 2, 1);
    wait_for("a compaction", || info(&mut c, "tier_compactions") > 0);
    wait_for("a retired segment", || {
        info(&mut c, "tier_retired_segments") > 0
    });
    drop(c);
    drop(server); // SIGKILL during compaction: the SAVE's data comes back

    let server = start(&dir, &[]);
    let mut c = client(&server);
    check(&mut c, 0..VALUES, 0);
    write(&mut c, 0..VALUES / 2, 1);
    wait_for("a compaction", || info(&mut c, "tier_compactions") > 0);
    wait_for("a retired segment", || {
        info(&mut c, "tier_retired_segments") > 0
    });
    // A newer snapshot is durable: the segments retired before its cut
    // go (compaction may retire more meanwhile: save until none is left).
    wait_for("the retired segments to go", || {
        ok(&mut c, &["SAVE"]);
        info(&mut c, "tier_retired_segments") == 0
    });
    drop(c);
    drop(server);

    let server = start(&dir, &[]);
    let mut c = client(&server);
    check(&mut c, 0..VALUES / 2, 1);
    check(&mut c, VALUES / 2..VALUES, 0);
}

#[test]
fn sigkill_after_a_journal_rewrite_loses_nothing_acknowledged() {
    let dir = TestDir::new("tier_restart", "journal");
    let journal = ["--appendonly", "yes", "--appendfsync", "always"];
    let server = start(&dir, &journal);
    let mut c = client(&server);
    write(&mut c, 0..VALUES, 0);
    wait_for("values to move out", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    let rewrites = info(&mut c, "aof_rewrites");
    ok(&mut c, &["BGREWRITEAOF"]);
    wait_for("the rewrite", || {
        info(&mut c, "aof_rewrite_in_progress") == 0 && info(&mut c, "aof_rewrites") > rewrites
    });
    write(&mut c, 0..VALUES / 2, 1);
    wait_for("a compaction", || info(&mut c, "tier_compactions") > 0);
    drop(c);
    drop(server); // SIGKILL: the base points into retired segments

    let server = start(&dir, &journal);
    let mut c = client(&server);
    assert!(info(&mut c, "tier_loaded_pointers") > 0);
    check(&mut c, 0..VALUES / 2, 1);
    check(&mut c, VALUES / 2..VALUES, 0);
}

#[test]
fn a_bad_pointer_stops_start_up_naming_file_and_offset() {
    let dir = TestDir::new("tier_restart", "bad");
    // Without checksums, so the damage reaches the pointer check.
    let args = ["--rdbchecksum", "no"];
    let server = start(&dir, &args);
    let mut c = client(&server);
    write(&mut c, 0..VALUES, 0);
    wait_for("values to move out", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    let on_disk = tiered(&mut c, 0..VALUES);
    ok(&mut c, &["SAVE"]);
    drop(c);
    drop(server);
    // A tiered record: tag 8, db 0, no expiry, the key, then the pointer
    // (segment u32, offset u32, ...): point it past its segment's end.
    let mut bytes = std::fs::read(dir.file("dump.cairn")).unwrap();
    let at = on_disk
        .iter()
        .find_map(|i| {
            let k = format!("v:{i}");
            let mut pat = vec![8u8, 0, 0, k.len() as u8];
            pat.extend_from_slice(k.as_bytes());
            bytes
                .windows(pat.len())
                .position(|w| w == pat.as_slice())
                .map(|p| p + pat.len())
        })
        .expect("a tiered record in the snapshot");
    bytes[at + 4..at + 8].copy_from_slice(&0x7fff_fff8u32.to_le_bytes());
    std::fs::write(dir.file("dump.cairn"), &bytes).unwrap();
    let mut s = start(&dir, &args);
    let st = s
        .wait_exit(Duration::from_secs(20))
        .expect("start-up must stop");
    assert!(!st.success());
    let log = s.log();
    assert!(log.contains("Fatal error loading the snapshot"), "{log}");
    assert!(log.contains("dump.cairn at offset"), "{log}");
    assert!(log.contains(".vlog"), "{log}");
    assert!(log.contains("2147483640"), "{log}");
}

#[test]
fn reload_swapdb_and_flushall_over_tiered_keys() {
    let dir = TestDir::new("tier_restart", "reload");
    let server = start(&dir, &[]);
    let mut c = client(&server);
    write(&mut c, 0..VALUES, 0);
    wait_for("values to move out", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    ok(&mut c, &["SWAPDB", "0", "1"]);
    ok(&mut c, &["SELECT", "1"]);
    check(&mut c, 0..VALUES, 0);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    check(&mut c, 0..VALUES, 0);
    assert!(info(&mut c, "tiered_keys") > 0);
    ok(&mut c, &["SAVE"]);
    drop(c);
    drop(server);

    let server = start(&dir, &[]);
    let mut c = client(&server);
    ok(&mut c, &["SELECT", "1"]);
    check(&mut c, 0..VALUES, 0);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(info(&mut c, "tiered_keys"), 0);
    let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn eviction_takes_values_in_ram_and_keeps_tiered_keys() {
    let dir = TestDir::new("tier_restart", "evict");
    let server = start(&dir, &["--maxmemory-policy", "allkeys-lru"]);
    let mut c = client(&server);
    write(&mut c, 0..VALUES, 0);
    wait_for("values to move out", || {
        info(&mut c, "used_memory") <= MAXMEMORY
    });
    let on_disk = tiered(&mut c, 0..VALUES);
    assert!(on_disk.len() > VALUES / 3, "{}", on_disk.len());

    // The disk refuses appends: memory can only be reclaimed by evicting,
    // and it must take values in RAM, not the keys already on disk.
    ok(&mut c, &["DEBUG", "TIER-FAULT", "WRITE", "1000000"]);
    for chunk in (VALUES..VALUES + VALUES / 4)
        .collect::<Vec<_>>()
        .chunks(100)
    {
        let mut p = redis::pipe();
        for &i in chunk {
            p.cmd("SET").arg(format!("v:{i}")).arg(value(i, 0));
        }
        let _: Vec<redis::Value> = p.query(&mut c).unwrap();
    }
    assert!(info(&mut c, "evicted_keys") > 0);
    let mut p = redis::pipe();
    for i in &on_disk {
        p.cmd("EXISTS").arg(format!("v:{i}"));
    }
    let there: Vec<u64> = p.query(&mut c).unwrap();
    let lost = there.iter().filter(|&&n| n == 0).count();
    assert_eq!(lost, 0, "tiered keys evicted: {lost} of {}", on_disk.len());
    // RENAME of a tiered key whose read fails leaves it where it was.
    // Last: the failed read panics (answered as an error), and a test
    // build's backtrace loads its debug info into used_memory.
    ok(&mut c, &["DEBUG", "TIER-FAULT", "WRITE", "0"]);
    let k = format!("v:{}", on_disk[0]);
    ok(&mut c, &["DEBUG", "TIER-FAULT", "READ", "1"]);
    let e = redis::cmd("RENAME")
        .arg(&k)
        .arg("renamed")
        .query::<()>(&mut c)
        .unwrap_err();
    assert!(e.to_string().contains("disk tier read failed"), "{e}");
    check(&mut c, on_disk[0]..on_disk[0] + 1, 0);
    let n: u64 = redis::cmd("EXISTS").arg("renamed").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

/// `tier-compression` (branch tierw): values go out LZ4-coded under
/// `lz4`, as they are under `none` (the default, switched by CONFIG SET
/// while the server runs), and coded in RAM (`value-compression yes`,
/// zstd at SET) they go out coded under `none`, not coded again; INFO
/// counts each kind. Both kinds of record read back, and again after a
/// restart from SAVE, which takes their pointers without reading them.
#[test]
fn plain_and_coded_records_read_back_across_a_restart() {
    let dir = TestDir::new("tier_restart", "codings");
    let server = start(&dir, &["--tier-compression", "lz4"]);
    let mut c = client(&server);
    let get = |c: &mut Connection| -> String {
        let v: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("tier-compression")
            .query(c)
            .unwrap();
        v[1].clone()
    };
    // The three counters from one INFO: the tier goes on writing between
    // two calls, so counters read apart need not add up.
    let plain = |c: &mut Connection| {
        let text: String = redis::cmd("INFO").arg("all").query(c).unwrap();
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .unwrap_or_else(|| panic!("{name} not in INFO"))
                .trim()
                .parse()
                .unwrap()
        };
        field("tier_writes")
            - field("tier_writes_coded_in_ram")
            - field("tier_writes_coded_on_move")
    };
    assert_eq!(get(&mut c), "lz4");
    // Three ranges: LZ4 on the move, plain, coded in RAM (a third more
    // than maxmemory each at least, so that each moves values out).
    let (a, b, z) = (0..VALUES / 2, VALUES / 2..VALUES, VALUES..2 * VALUES);
    write(&mut c, a.clone(), 0);
    wait_for("values to move out coded", || {
        info(&mut c, "tier_writes_coded_on_move") > 0
    });
    assert_eq!(info(&mut c, "tier_writes_coded_in_ram"), 0);
    // A setting that is not a codec is refused; `none` takes effect at
    // the next move.
    assert!(redis::cmd("CONFIG")
        .arg("SET")
        .arg("tier-compression")
        .arg("zstd")
        .query::<()>(&mut c)
        .is_err());
    ok(&mut c, &["CONFIG", "SET", "tier-compression", "none"]);
    assert_eq!(get(&mut c), "none");
    let plain_before = plain(&mut c);
    write(&mut c, b.clone(), 0);
    wait_for("values to move out plain", || {
        plain(&mut c) > plain_before + 100
    });
    let coded = info(&mut c, "tier_writes_coded_on_move");
    // Coded in RAM at SET: out as they are under `none`.
    ok(&mut c, &["CONFIG", "SET", "value-compression", "yes"]);
    ok(
        &mut c,
        &["CONFIG", "SET", "value-compression-codec", "zstd"],
    );
    ok(
        &mut c,
        &["CONFIG", "SET", "value-compression-min-size", "64"],
    );
    write(&mut c, z.clone(), 0);
    wait_for("values coded in RAM to move out", || {
        info(&mut c, "tier_writes_coded_in_ram") > 0
    });
    assert_eq!(
        info(&mut c, "tier_writes_coded_on_move"),
        coded,
        "nothing coded on the move under none"
    );
    let on_disk: Vec<usize> = tiered(&mut c, 0..2 * VALUES);
    for part in [a, b, z] {
        assert!(
            on_disk.iter().any(|i| part.contains(i)),
            "no tiered key in {part:?}"
        );
    }
    check(&mut c, 0..2 * VALUES, 0);
    ok(&mut c, &["SAVE"]);
    drop(c);
    drop(server); // SIGKILL

    let server = start(&dir, &[]);
    let mut c = client(&server);
    assert_eq!(get(&mut c), "none");
    assert!(info(&mut c, "tier_loaded_pointers") > 0);
    assert_eq!(info(&mut c, "tier_reads"), 0, "the load read no record");
    check(&mut c, 0..2 * VALUES, 0);
}
