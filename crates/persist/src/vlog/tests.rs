//! Tests of the value log as a whole: a property test against a model,
//! files truncated and flipped at every offset, full disks (injected and
//! a real 1 MiB tmpfs), readers beside the appender, and a throughput
//! sanity run without timing asserts.
use super::format::{self, Kind, Ptr};
use super::{Faults, Fsync, Log, Options};
use proptest::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn scratch(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "cairn-vlog-{}-{name}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn small() -> Options {
    Options {
        segment_size: 4096,
        buffer_size: 512,
        fsync: Fsync::No,
        ..Options::default()
    }
}

/// Deterministic bytes for record `i`, `len` long.
fn value(i: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|j| (i.wrapping_mul(2_654_435_761) ^ j.wrapping_mul(40_503)) as u8)
        .collect()
}

fn key(i: u64) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

#[derive(Clone, Debug)]
struct Rec {
    ptr: Ptr,
    db: u8,
    kind: Kind,
    key: Vec<u8>,
    value: Vec<u8>,
}

fn append(log: &Log, i: u64, len: usize) -> Rec {
    let (db, kind, k, v) = (
        (i % 16) as u8,
        if i.is_multiple_of(3) {
            Kind::Coded
        } else {
            Kind::Plain
        },
        key(i),
        value(i, len),
    );
    let ptr = log.append(db, kind, &k, &v).unwrap();
    Rec {
        ptr,
        db,
        kind,
        key: k,
        value: v,
    }
}

fn assert_reads(log: &Log, r: &Rec) {
    let f = log
        .read(r.ptr)
        .unwrap_or_else(|e| panic!("{:?}: {e}", r.ptr));
    assert_eq!(
        (f.db(), f.kind(), f.key(), f.value()),
        (r.db, r.kind, &r.key[..], &r.value[..]),
        "{:?}",
        r.ptr
    );
}

fn live_sum(recs: &[Rec]) -> (u64, u64) {
    (
        recs.iter().map(|r| u64::from(r.ptr.len)).sum(),
        recs.len() as u64,
    )
}

fn assert_live(log: &Log, recs: &[Rec]) {
    let s = log.stats();
    assert_eq!((s.live_bytes, s.live_records), live_sum(recs));
}

#[test]
fn appends_read_back_from_the_buffer_the_file_and_after_reopen() {
    let d = scratch("basic");
    let log = Log::open(&d, 5, small()).unwrap();
    let mut recs = Vec::new();
    for i in 0..100 {
        let r = append(&log, i, (i as usize * 7) % 300);
        assert_reads(&log, &r);
        recs.push(r);
    }
    assert_live(&log, &recs);
    log.flush().unwrap();
    for r in &recs {
        assert_reads(&log, r);
    }
    let st = log.stats();
    assert!(st.segments > 3, "{st:?}");
    assert_eq!(st.buffered_bytes, 0);
    let on_disk: u64 = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(st.disk_bytes, on_disk);
    let last = recs.iter().map(|r| r.ptr.segment).max().unwrap();
    drop(log);

    let log = Log::open(&d, 5, small()).unwrap();
    assert_eq!(log.stats().live_records, 0, "counters start at zero");
    for r in &recs {
        assert_reads(&log, r);
        log.mark_live(r.ptr).unwrap();
    }
    assert_live(&log, &recs);
    let r = append(&log, 1000, 10);
    assert!(
        r.ptr.segment > last,
        "appends after an open go to a new segment"
    );
    assert!(log
        .mark_live(Ptr {
            segment: last,
            offset: 1 << 20,
            len: 20
        })
        .is_err());
    // A group's log refuses another group's files.
    drop(log);
    let e = Log::open(&d, 6, small()).err().unwrap();
    assert!(e.to_string().contains("expected group 6"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn compaction_moves_live_records_and_drops_the_rest() {
    let d = scratch("compact");
    let log = Log::open(&d, 0, small()).unwrap();
    let mut recs: Vec<Rec> = (0..200).map(|i| append(&log, i, 100)).collect();
    let before = log.stats();
    // Free two of every three.
    let (keep, gone): (Vec<Rec>, Vec<Rec>) = recs.drain(..).partition(|r| r.key.ends_with(b"0"));
    recs = keep;
    for r in &gone {
        log.free(r.ptr);
    }
    assert_live(&log, &recs);
    let cands = log.candidates(0.5);
    assert!(!cands.is_empty() && cands.iter().all(|c| !c.tail));
    let mut moved_to = std::collections::HashSet::new();
    for c in cands {
        let mut by_ptr: HashMap<Ptr, usize> =
            recs.iter().enumerate().map(|(i, r)| (r.ptr, i)).collect();
        let out = log
            .compact(c.seq, |ptr, rec| {
                let live = by_ptr.contains_key(&ptr);
                if live {
                    assert_eq!(rec.key, &recs[by_ptr[&ptr]].key[..]);
                }
                live
            })
            .unwrap();
        assert_eq!(out.moved.len() as u64, c.live_records);
        for m in out.moved {
            let i = by_ptr.remove(&m.old).unwrap();
            assert_eq!(m.key, recs[i].key);
            log.free(m.old);
            recs[i].ptr = m.new;
            moved_to.insert(m.new.segment);
        }
        log.drop_segment(c.seq).unwrap();
        assert!(log
            .read(Ptr {
                segment: c.seq,
                offset: 32,
                len: 16
            })
            .unwrap_err()
            .to_string()
            .contains("no such segment"));
    }
    for r in &recs {
        assert_reads(&log, r);
    }
    assert_live(&log, &recs);
    assert!(
        log.stats().disk_bytes < before.disk_bytes / 2,
        "{:?}",
        log.stats()
    );
    // Survivors have segments of their own, apart from new values; neither
    // tail is compacted or dropped.
    let fresh = append(&log, 9999, 10).ptr.segment;
    let survivors = *moved_to.iter().max().unwrap();
    assert!(fresh < survivors, "{fresh} {survivors}");
    assert!(!moved_to.contains(&fresh));
    assert!((before.segments as u32) < *moved_to.iter().min().unwrap());
    for tail in [fresh, survivors] {
        assert!(log.compact(tail, |_, _| true).is_err());
        assert!(log.drop_segment(tail).is_err());
        assert!(log.candidates(1.0).iter().all(|c| c.seq != tail));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[derive(Clone, Debug)]
enum Op {
    Append(u16),
    Free(usize),
    Read(usize),
    Compact(usize),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..700).prop_map(Op::Append),
        3 => any::<usize>().prop_map(Op::Free),
        3 => any::<usize>().prop_map(Op::Read),
        1 => any::<usize>().prop_map(Op::Compact),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random appends, frees, reads, compactions and reopens against a
    /// model of what is live: every live pointer reads its value back and
    /// the live counters are exact.
    #[test]
    fn the_log_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..160)) {
        let d = scratch("model");
        let mut log = Log::open(&d, 1, small()).unwrap();
        let mut model: Vec<Rec> = Vec::new();
        let mut dropped: Vec<Ptr> = Vec::new();
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Append(len) => model.push(append(&log, n as u64, len as usize)),
                Op::Free(i) if !model.is_empty() => {
                    let r = model.swap_remove(i % model.len());
                    log.free(r.ptr);
                }
                Op::Read(i) if !model.is_empty() => assert_reads(&log, &model[i % model.len()]),
                Op::Compact(i) => {
                    let cands = log.candidates(1.0);
                    if cands.is_empty() {
                        continue;
                    }
                    let seq = cands[i % cands.len()].seq;
                    let idx: HashMap<Ptr, usize> =
                        model.iter().enumerate().map(|(i, r)| (r.ptr, i)).collect();
                    let out = log.compact(seq, |p, _| idx.contains_key(&p)).unwrap();
                    for m in out.moved {
                        log.free(m.old);
                        model[idx[&m.old]].ptr = m.new;
                    }
                    log.drop_segment(seq).unwrap();
                    dropped.push(Ptr { segment: seq, offset: 32, len: 16 });
                }
                Op::Flush => log.flush().unwrap(),
                Op::Reopen => {
                    drop(log);
                    log = Log::open(&d, 1, small()).unwrap();
                    for r in &model {
                        log.mark_live(r.ptr).unwrap();
                    }
                }
                _ => {}
            }
            let s = log.stats();
            prop_assert_eq!((s.live_bytes, s.live_records), live_sum(&model));
        }
        for r in &model {
            assert_reads(&log, r);
        }
        for p in dropped {
            prop_assert!(log.read(p).is_err());
        }
        drop(log);
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// One segment of `n` records, written and closed; its bytes and records.
fn one_segment(d: &Path, n: u64) -> (PathBuf, Vec<u8>, Vec<Rec>) {
    let opts = Options {
        segment_size: 1 << 20,
        ..small()
    };
    let log = Log::open(d, 2, opts).unwrap();
    let recs: Vec<Rec> = (0..n)
        .map(|i| append(&log, i, (i as usize * 13) % 90))
        .collect();
    log.sync().unwrap();
    drop(log);
    let path = d.join("0000000001.vlog");
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes, recs)
}

#[test]
fn a_torn_tail_is_cut_at_every_offset_and_every_record_before_it_survives() {
    let src = scratch("torn-src");
    let (_, bytes, recs) = one_segment(&src, 20);
    let d = scratch("torn");
    let path = d.join("0000000001.vlog");
    let opts = Options {
        segment_size: 1 << 20,
        ..small()
    };
    for cut in 0..=bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let log = Log::open(&d, 2, opts.clone()).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        for r in &recs {
            if r.ptr.end() <= cut as u64 {
                assert_reads(&log, r);
            } else {
                assert!(log.read(r.ptr).is_err(), "cut {cut}: {:?} is gone", r.ptr);
            }
        }
        // The file now ends with whole records (or is gone).
        let whole = recs
            .iter()
            .map(|r| r.ptr.end())
            .filter(|&e| e <= cut as u64)
            .max()
            .unwrap_or(32);
        match std::fs::metadata(&path) {
            Ok(m) => {
                assert!(cut >= 32);
                assert!(
                    m.len() >= whole && m.len() <= format::padded(whole),
                    "cut {cut}"
                );
            }
            Err(_) => assert!(cut < 32, "cut {cut}: only a headerless file is removed"),
        }
        drop(log);
    }
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&src);
}

#[test]
fn a_flipped_byte_anywhere_never_yields_wrong_data() {
    let src = scratch("flip-src");
    let (_, bytes, recs) = one_segment(&src, 12);
    let d = scratch("flip");
    let path = d.join("0000000001.vlog");
    let opts = Options {
        segment_size: 1 << 20,
        ..small()
    };
    let last = recs.last().unwrap().ptr;
    for at in 0..bytes.len() {
        let mut b = bytes.clone();
        b[at] ^= 0x5a;
        std::fs::write(&path, &b).unwrap();
        // The record whose checked bytes hold `at`, if any (else: padding).
        let hit = recs
            .iter()
            .find(|r| (u64::from(r.ptr.offset)..r.ptr.end()).contains(&(at as u64)));
        match Log::open(&d, 2, opts.clone()) {
            Err(e) => {
                let s = e.to_string();
                assert!(s.contains("0000000001.vlog"), "{s}");
                match hit {
                    Some(r) => {
                        assert_ne!(
                            r.ptr, last,
                            "at {at}: damage in the last record is a torn tail"
                        );
                        assert_eq!(e.offset, Some(u64::from(r.ptr.offset)), "at {at}: {s}");
                    }
                    None => assert!(at < 32, "at {at}: only the header, else padding: {s}"),
                }
            }
            Ok(log) => {
                match hit {
                    Some(r) => assert_eq!(r.ptr, last, "at {at}: a middle record's damage opened"),
                    None => assert!(at >= 32),
                }
                for r in &recs {
                    match log.read(r.ptr) {
                        Ok(f) => assert_eq!(f.value(), &r.value[..], "at {at}: wrong data"),
                        Err(_) => assert_eq!(Some(r.ptr), hit.map(|h| h.ptr), "at {at}"),
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&src);
}

#[test]
fn corruption_in_the_middle_names_the_file_and_the_offset() {
    let d = scratch("middle");
    let (path, mut bytes, recs) = one_segment(&d, 5);
    let victim = recs[2].ptr;
    bytes[victim.offset as usize + 20] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let e = Log::open(&d, 2, small()).err().unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "{} at offset {}: record checksum mismatch, and a whole record follows at offset {}",
            path.display(),
            victim.offset,
            recs[3].ptr.offset
        )
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_crash_loses_only_the_unwritten_buffer() {
    let d = scratch("crash");
    let log = Log::open(&d, 0, small()).unwrap();
    let recs: Vec<Rec> = (0..40).map(|i| append(&log, i, 60)).collect();
    let written = log.stats().disk_bytes - log.stats().buffered_bytes;
    log.crash();
    let log = Log::open(&d, 0, small()).unwrap();
    let mut lost = 0;
    for r in &recs {
        match log.read(r.ptr) {
            Ok(_) => assert_reads(&log, r),
            Err(_) => lost += 1,
        }
    }
    assert!(lost > 0 && lost < recs.len(), "lost {lost}");
    assert_eq!(log.stats().disk_bytes, written);
    let _ = std::fs::remove_dir_all(&d);
}

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

#[test]
fn a_full_disk_refuses_appends_and_loses_nothing() {
    let d = scratch("enospc");
    let faults = Arc::new(Faults::default());
    let opts = Options {
        buffer_size: 256,
        fsync: Fsync::Everysec,
        faults: Some(faults.clone()),
        ..small()
    };
    let log = Log::open(&d, 0, opts.clone()).unwrap();
    let mut recs: Vec<Rec> = (0..5).map(|i| append(&log, i, 50)).collect();
    faults.fail_writes(3, ENOSPC);
    let mut i = 5;
    let err = loop {
        match log.append(0, Kind::Plain, &key(i), &value(i, 50)) {
            Ok(ptr) => recs.push(Rec {
                ptr,
                db: 0,
                kind: Kind::Plain,
                key: key(i),
                value: value(i, 50),
            }),
            Err(e) => break e,
        }
        i += 1;
        assert!(i < 100);
    };
    let s = err.to_string();
    assert!(
        s.contains("No space left on device") && s.contains(".vlog"),
        "{s}"
    );
    // Nothing accepted is lost: the buffer keeps what could not be written.
    for r in &recs {
        assert_reads(&log, r);
    }
    assert!(log.flush().is_err());
    assert!(log.tick().is_err());
    log.flush().unwrap();
    recs.push(append(&log, 1000, 50));
    assert_live(&log, &recs);
    drop(log);
    let log = Log::open(&d, 0, opts).unwrap();
    for r in &recs {
        assert_reads(&log, r);
    }
    drop(log);

    // Under `always` an append is all or nothing.
    let opts = Options {
        fsync: Fsync::Always,
        faults: Some(faults.clone()),
        ..small()
    };
    let log = Log::open(&d, 0, opts).unwrap();
    let a = append(&log, 1, 40);
    let st = log.stats();
    faults.fail_writes(1, EIO);
    let e = log.append(0, Kind::Plain, b"k", b"v").unwrap_err();
    assert!(e.to_string().contains("Input/output error"), "{e}");
    assert_eq!(log.stats(), st, "the failed append left nothing");
    assert!(
        log.append(0, Kind::Plain, b"k", b"v").is_err(),
        "refused until a flush"
    );
    log.flush().unwrap();
    let b = append(&log, 2, 40);
    assert_reads(&log, &a);
    assert_reads(&log, &b);

    // A failed fsync fails the append, seals the segment and makes it a
    // candidate.
    let st = log.stats();
    faults.fail_fsyncs(1, EIO);
    assert!(log.append(0, Kind::Plain, b"k", b"v").is_err());
    assert_eq!(log.stats().live_bytes, st.live_bytes);
    log.flush().unwrap();
    let c = append(&log, 3, 40);
    assert_ne!(c.ptr.segment, b.ptr.segment);
    let cands = log.candidates(0.0);
    assert!(
        cands[0].suspect && cands[0].seq == b.ptr.segment,
        "{cands:?}"
    );

    // A failed read is an error, and the next one works.
    faults.fail_reads(1, EIO);
    assert!(log.read(a.ptr).is_err());
    assert_reads(&log, &a);
    let _ = std::fs::remove_dir_all(&d);
}

/// Under `everysec` a segment the tail leaves (and the new segment's
/// name) is fsynced by the next `tick`, outside the tail's lock, not by
/// the append that rolled it: an appender may be a worker making room
/// for its client's write, and an fsync under a write load takes
/// milliseconds to hundreds of them. The
/// append succeeds even though that fsync will fail; the tick reports
/// the failure, the segment turns suspect (compaction's first
/// candidate), and appends are refused until a flush succeeds.
#[test]
fn a_left_segment_is_fsynced_by_the_next_tick_not_by_the_append() {
    let d = scratch("deferred-fsync");
    let faults = Arc::new(Faults::default());
    let opts = Options {
        fsync: Fsync::Everysec,
        faults: Some(faults.clone()),
        ..small()
    };
    let log = Log::open(&d, 0, opts).unwrap();
    let first = append(&log, 0, 100);
    faults.fail_fsyncs(1, EIO);
    let mut recs = vec![first.clone()];
    for i in 1.. {
        // `append` unwraps: an fsync in the rolling append would fail it.
        recs.push(append(&log, i, 100));
        if recs.last().unwrap().ptr.segment != first.ptr.segment {
            break;
        }
    }
    let e = log.tick().unwrap_err();
    assert!(e.to_string().contains("fsync"), "{e}");
    assert!(
        log.append(0, Kind::Plain, b"k", b"v").is_err(),
        "refused until a flush"
    );
    log.flush().unwrap();
    recs.push(append(&log, 1_000, 100));
    let cands = log.candidates(0.0);
    assert!(
        cands
            .iter()
            .any(|c| c.suspect && c.seq == first.ptr.segment),
        "{cands:?}"
    );
    log.tick().unwrap();
    log.sync().unwrap();
    for r in &recs {
        assert_reads(&log, r);
    }
    drop(log);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_disk_limit_is_a_full_disk() {
    let d = scratch("limit");
    let opts = Options {
        disk_limit: Some(3000),
        ..small()
    };
    let log = Log::open(&d, 0, opts).unwrap();
    let mut recs = Vec::new();
    let e = loop {
        let i = recs.len() as u64;
        match log.append(0, Kind::Plain, &key(i), &value(i, 100)) {
            Ok(ptr) => recs.push(ptr),
            Err(e) => break e,
        }
    };
    assert!(e.to_string().contains("disk limit of 3000 bytes"), "{e}");
    assert!(log.stats().disk_bytes <= 3000);
    assert!(recs.len() > 10);
    for (i, p) in recs.iter().enumerate() {
        assert_eq!(log.read(*p).unwrap().value(), &value(i as u64, 100)[..]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// New values leave `compaction_reserve` bytes of the limit to
/// compaction (branch tierr): a log filled by new values until they are
/// refused, its records mostly freed, still compacts a sealed segment
/// into the reserve, and once that segment is dropped new values fit
/// again. Without the reserve the same log has no room for the copies.
#[test]
fn compaction_has_a_reserve_new_values_cannot_take() {
    for reserve in [0, 4096 + 64] {
        let d = scratch("reserve");
        let opts = Options {
            disk_limit: Some(16 << 10),
            compaction_reserve: reserve,
            ..small()
        };
        let log = Log::open(&d, 0, opts).unwrap();
        let mut recs = Vec::new();
        let e = loop {
            let i = recs.len() as u64;
            match log.append(0, Kind::Plain, &key(i), &value(i, 300)) {
                Ok(ptr) => recs.push(ptr),
                Err(e) => break e,
            }
        };
        assert!(e.to_string().contains("disk limit of 16384 bytes"), "{e}");
        if reserve > 0 {
            assert!(e.to_string().contains("kept for compaction"), "{e}");
        }
        let full = log.stats().disk_bytes;
        assert!(full + reserve <= 16 << 10, "{full}");
        assert!(full + reserve + 4096 > 16 << 10, "filled: {full}");
        log.tick().unwrap();
        // Three records in four freed: the oldest segment is a quarter
        // live.
        for (i, p) in recs.iter().enumerate() {
            if !i.is_multiple_of(4) {
                log.free(*p);
            }
        }
        let seg = log.candidates(0.5)[0].seq;
        let live: std::collections::HashSet<Ptr> = recs.iter().step_by(4).copied().collect();
        let r = log.compact(seg, |p, _| live.contains(&p));
        if reserve == 0 {
            // The survivors have nowhere to go: the segment stays as it was.
            assert!(r.is_err(), "no room without a reserve");
            let _ = std::fs::remove_dir_all(&d);
            continue;
        }
        let c = r.unwrap();
        assert!(!c.moved.is_empty());
        log.drop_segment(seg).unwrap();
        assert!(log.stats().disk_bytes < full, "disk given back");
        // Every survivor reads back at its new place, every other live one
        // at its old.
        let moved: HashMap<Ptr, Ptr> = c.moved.iter().map(|m| (m.old, m.new)).collect();
        for (i, p) in recs.iter().enumerate().filter(|(i, _)| i.is_multiple_of(4)) {
            let at = moved.get(p).copied().unwrap_or(*p);
            assert_eq!(log.read(at).unwrap().value(), &value(i as u64, 300)[..]);
        }
        // New values are taken again.
        log.append(0, Kind::Plain, &key(9999), &value(9999, 300))
            .unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// `read_nowait_into` appends each record after what the buffer holds,
/// from the file (page cache) or the write buffer, and says where its key
/// and value are; a bad pointer is an error and leaves the buffer as it
/// was.
#[test]
fn reads_that_do_not_wait_land_in_the_callers_buffer() {
    let d = scratch("nowait");
    let log = Log::open(&d, 0, small()).unwrap();
    let recs: Vec<Rec> = (0..40)
        .map(|i| append(&log, i, 50 + i as usize * 7))
        .collect();
    // The first ones are in the file, the last ones may still be buffered.
    let mut buf = b"before".to_vec();
    for r in &recs {
        let Some(p) = log.read_nowait_into(r.ptr, &mut buf).unwrap() else {
            // RWF_NOWAIT unsupported here (or the page is not cached): the
            // blocking read is the caller's way.
            continue;
        };
        assert_eq!(&buf[p.key.clone()], &r.key[..]);
        assert_eq!(&buf[p.value.clone()], &r.value[..]);
        assert_eq!((p.db, p.kind), (r.db, r.kind));
        assert_eq!(p.value.end, buf.len());
    }
    assert_eq!(&buf[..6], b"before");
    let len = buf.len();
    let bad = Ptr {
        offset: recs[1].ptr.offset + 8,
        ..recs[1].ptr
    };
    // An error (or, where the read would wait, nothing).
    assert!(!matches!(log.read_nowait_into(bad, &mut buf), Ok(Some(_))));
    assert_eq!(buf.len(), len, "nothing kept of a failed read");
    let _ = std::fs::remove_dir_all(&d);
}

/// Unmounts what `mount` mounted, even when the test fails.
struct Mounted(PathBuf);
impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A real ENOSPC: a 1 MiB tmpfs (root only, as CI runs; elsewhere the
/// injected faults above cover the same paths).
#[test]
fn a_real_full_file_system() {
    let d = scratch("tmpfs");
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&d)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("a_real_full_file_system: cannot mount a tmpfs here; skipped");
        let _ = std::fs::remove_dir_all(&d);
        return;
    }
    let _m = Mounted(d.clone());
    let opts = Options {
        segment_size: 256 << 10,
        buffer_size: 16 << 10,
        fsync: Fsync::No,
        ..Options::default()
    };
    let log = Log::open(&d, 0, opts).unwrap();
    let mut recs = Vec::new();
    let e = loop {
        let i = recs.len() as u64;
        match log.append(0, Kind::Plain, &key(i), &value(i, 1000)) {
            Ok(p) => recs.push(p),
            Err(e) => break e,
        }
        assert!(recs.len() < 5000, "a 1 MiB file system never filled");
    };
    assert!(e.to_string().contains("No space left on device"), "{e}");
    assert!(recs.len() > 500, "{}", recs.len());
    for (i, p) in recs.iter().enumerate() {
        assert_eq!(
            log.read(*p).unwrap().value(),
            &value(i as u64, 1000)[..],
            "{p:?}"
        );
    }
    // Freeing space (compacting away a dead segment) lets writes resume.
    for p in &recs {
        log.free(*p);
    }
    let first = log.candidates(0.0)[0].seq;
    log.compact(first, |_, _| false).unwrap();
    log.drop_segment(first).unwrap();
    log.flush().unwrap();
    log.append(0, Kind::Plain, b"after", &[7; 1000]).unwrap();
    log.sync().unwrap();
}

#[test]
fn readers_run_beside_the_appender() {
    let d = scratch("threads");
    let log = Arc::new(Log::open(&d, 0, small()).unwrap());
    let ptrs: Arc<Mutex<Vec<(u64, Ptr)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (log, ptrs, done) = (log.clone(), ptrs.clone(), done.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                let mut x = t as u64 + 1;
                while !done.load(Ordering::Relaxed) {
                    let pick = {
                        let v = ptrs.lock().unwrap();
                        if v.is_empty() {
                            continue;
                        }
                        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        // Half the time the newest: likely still in the buffer.
                        if x & 1 == 0 {
                            v[v.len() - 1]
                        } else {
                            v[(x >> 33) as usize % v.len()]
                        }
                    };
                    let f = log.read(pick.1).unwrap();
                    assert_eq!(f.value(), &value(pick.0, (pick.0 as usize * 11) % 200)[..]);
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 0..5000u64 {
        let p = log
            .append(0, Kind::Plain, &key(i), &value(i, (i as usize * 11) % 200))
            .unwrap();
        ptrs.lock().unwrap().push((i, p));
    }
    done.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads > 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// Not a benchmark (no timing asserts; the machine is shared): a load of
/// E4-shaped records through append, read and compaction, with rates
/// printed for a look.
#[test]
fn throughput_sanity() {
    let d = scratch("sanity");
    let log = Log::open(&d, 0, Options::default()).unwrap();
    let n = 20_000u64;
    let v = value(1, 1000);
    let t = std::time::Instant::now();
    let ptrs: Vec<Ptr> = (0..n)
        .map(|i| log.append(0, Kind::Coded, &key(i), &v).unwrap())
        .collect();
    log.sync().unwrap();
    let app = t.elapsed();
    let t = std::time::Instant::now();
    for p in &ptrs {
        assert_eq!(log.read(*p).unwrap().value().len(), 1000);
    }
    let rd = t.elapsed();
    let mb = (n * 1000) as f64 / 1e6;
    eprintln!(
        "vlog sanity: {n} x 1000 B: append {:.0} MB/s, read {:.0} MB/s",
        mb / app.as_secs_f64(),
        mb / rd.as_secs_f64()
    );
    assert_eq!(log.stats().live_records, n);
    assert_eq!(log.stats().segments, 1);
    drop(log);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn fsync_policies_have_the_journals_names() {
    assert_eq!(Fsync::parse("no"), Some(Fsync::No));
    assert_eq!(Fsync::parse("everysec"), Some(Fsync::Everysec));
    assert_eq!(Fsync::parse("ALWAYS"), Some(Fsync::Always));
    assert_eq!(Fsync::parse("sometimes"), None);
}
