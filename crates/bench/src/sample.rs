//! Memory and disk sampled while a run goes on (issue 25: E4 and E5 report
//! memory and disk per key over the whole run, not only at its end): a
//! thread that every interval reads the target's own accounting over a
//! connection of its own (RESP `INFO`: used_memory, evicted_keys, the
//! keyspace line, every `tier*` field; memcached `stats`: bytes,
//! curr_items, evictions, every `extstore_*` stat), the process's RSS from
//! /proc when the server is local, and the bytes allocated under a data
//! directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::runner::connect;
use crate::sys;
use crate::target::{info_field, Conn, Target};

/// One reading.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub t_s: f64,
    pub rss_bytes: Option<u64>,
    /// used_memory (RESP) or `bytes` (memcached).
    pub server_bytes: Option<u64>,
    /// Keys (db0's keys, memcached curr_items).
    pub items: Option<u64>,
    pub evictions: Option<u64>,
    /// Bytes allocated on disk under the data directory.
    pub disk_bytes: Option<u64>,
    /// Disk-tier figures as the server names them (Cairn's `tier*` INFO
    /// fields, memcached's `extstore_*` stats).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tier: BTreeMap<String, u64>,
}

/// Reads one [`Sample`]; a failed connection leaves the server's figures
/// empty (the next reading reconnects).
pub fn read(conn: &mut Option<Conn>, t: &Target, disk: Option<&Path>, t_s: f64) -> Sample {
    let mut s = Sample {
        t_s,
        rss_bytes: t.pid.and_then(sys::rss_bytes),
        disk_bytes: disk.and_then(disk_usage),
        ..Default::default()
    };
    if conn.is_none() {
        *conn = connect(t, Duration::from_secs(5)).ok();
    }
    let Some(c) = conn.as_mut() else { return s };
    let ok = match c {
        Conn::Resp(_) => match c.info("default") {
            Ok(info) => {
                fill_from_info(&mut s, &info);
                // Cairn prints its disk tier only under `INFO tier` (or
                // `all`, too costly each second); Redis answers it empty.
                c.info("tier").map(|t| tier_fields(&mut s, &t)).is_ok()
            }
            Err(_) => false,
        },
        Conn::Mc(m) => match m.stats() {
            Ok(st) => {
                fill_from_stats(&mut s, &st);
                true
            }
            Err(_) => false,
        },
    };
    if !ok {
        *conn = None;
    }
    s
}

fn num(v: Option<&str>) -> Option<u64> {
    v.and_then(|v| v.parse().ok())
}

/// The figures of an `INFO` reply.
pub fn fill_from_info(s: &mut Sample, info: &str) {
    s.server_bytes = num(info_field(info, "used_memory"));
    s.evictions = num(info_field(info, "evicted_keys"));
    // `db0:keys=N,expires=...`; every database counts.
    let mut keys = None;
    for l in info.lines() {
        if let Some((db, rest)) = l.split_once(':') {
            if db.starts_with("db") && db[2..].bytes().all(|b| b.is_ascii_digit()) {
                let n = rest
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("keys="))
                    .and_then(|v| v.parse::<u64>().ok());
                if let Some(n) = n {
                    keys = Some(keys.unwrap_or(0) + n);
                }
            }
        }
    }
    tier_fields(s, info);
    // An empty keyspace has no db line at all.
    s.items = Some(keys.unwrap_or(0));
}

/// The integer `tier*` fields of an INFO reply (Cairn's disk tier).
pub fn tier_fields(s: &mut Sample, info: &str) {
    for l in info.lines() {
        if let Some((k, v)) = l.split_once(':') {
            if k.starts_with("tier") {
                if let Ok(n) = v.trim().parse::<u64>() {
                    s.tier.insert(k.to_string(), n);
                }
            }
        }
    }
}

/// The figures of memcached's `stats`.
pub fn fill_from_stats(s: &mut Sample, st: &[(String, String)]) {
    let get = |k: &str| {
        st.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.parse().ok())
    };
    s.server_bytes = get("bytes");
    s.items = get("curr_items");
    s.evictions = get("evictions");
    for (k, v) in st {
        if k.starts_with("extstore_") {
            if let Ok(n) = v.parse::<u64>() {
                s.tier.insert(k.clone(), n);
            }
        }
    }
}

/// Bytes allocated (st_blocks × 512, as `du` counts them) by every file
/// under `path`; sparse and preallocated files count what they hold on disk.
pub fn disk_usage(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::symlink_metadata(path).ok()?;
    if !md.is_dir() {
        return Some(md.blocks() * 512);
    }
    let mut total = md.blocks() * 512;
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            // Files vanish under a compacting server: skip, do not fail.
            let Ok(m) = e.metadata() else { continue };
            total += m.blocks() * 512;
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    Some(total)
}

/// A background sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Starts sampling `t` every `every` (the first reading at once).
    pub fn start(t: &Target, disk: Option<PathBuf>, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let t = t.clone();
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || {
                let start = Instant::now();
                let mut conn = None;
                let mut out = Vec::new();
                loop {
                    out.push(read(
                        &mut conn,
                        &t,
                        disk.as_deref(),
                        start.elapsed().as_secs_f64(),
                    ));
                    // Sleep in short steps so stop() returns promptly.
                    let due = Instant::now() + every;
                    while Instant::now() < due {
                        if flag.load(Ordering::Relaxed) {
                            out.push(read(
                                &mut conn,
                                &t,
                                disk.as_deref(),
                                start.elapsed().as_secs_f64(),
                            ));
                            return out;
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            })
            .expect("spawn sampler thread");
        Sampler { stop, handle }
    }

    /// Stops and returns every reading (the last taken at the stop).
    pub fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Peak of a field over the samples.
pub fn peak(samples: &[Sample], f: impl Fn(&Sample) -> Option<u64>) -> Option<u64> {
    samples.iter().filter_map(f).max()
}

/// `(after - before) / n`, when both are known and n > 0.
pub fn per_item(before: Option<u64>, after: Option<u64>, n: u64) -> Option<f64> {
    match (before, after) {
        (Some(b), Some(a)) if n > 0 => Some((a as f64 - b as f64) / n as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_and_stats_fields() {
        let info = "# Memory\r\nused_memory:1000\r\n# Stats\r\nevicted_keys:7\r\n\
                    tiered_keys:12\r\ntier_bytes_on_disk:4096\r\ntier_state:on\r\n\
                    # Keyspace\r\ndb0:keys=5,expires=0,avg_ttl=0\r\ndb3:keys=2,expires=1\r\n";
        let mut s = Sample::default();
        fill_from_info(&mut s, info);
        assert_eq!(s.server_bytes, Some(1000));
        assert_eq!(s.evictions, Some(7));
        assert_eq!(s.items, Some(7));
        assert_eq!(s.tier.get("tiered_keys"), Some(&12));
        assert_eq!(s.tier.get("tier_bytes_on_disk"), Some(&4096));
        assert!(!s.tier.contains_key("tier_state"));
        let mut e = Sample::default();
        fill_from_info(&mut e, "used_memory:5\r\n");
        assert_eq!(e.items, Some(0));

        let st: Vec<(String, String)> = [
            ("bytes", "300"),
            ("curr_items", "3"),
            ("evictions", "0"),
            ("extstore_bytes_written", "8192"),
            ("extstore_page_size", "x"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let mut m = Sample::default();
        fill_from_stats(&mut m, &st);
        assert_eq!(
            (m.server_bytes, m.items, m.evictions),
            (Some(300), Some(3), Some(0))
        );
        assert_eq!(m.tier.len(), 1);
    }

    #[test]
    fn disk_usage_counts_allocated_bytes() {
        let d = std::env::temp_dir().join(format!("cairn-bench-du-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let before = disk_usage(&d).unwrap();
        std::fs::write(d.join("sub/a"), vec![7u8; 64 * 1024]).unwrap();
        let after = disk_usage(&d).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        // tmpfs and every disk file system allocate at least the data.
        assert!(after - before >= 64 * 1024, "{before} -> {after}");
        assert_eq!(disk_usage(Path::new("/nonexistent/cairn-bench")), None);
        assert_eq!(per_item(Some(100), Some(300), 4), Some(50.0));
        assert_eq!(per_item(None, Some(300), 4), None);
        assert_eq!(per_item(Some(1), Some(3), 0), None);
    }
}
