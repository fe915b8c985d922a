//! The disk tier's tests (tier.rs, tier_restart.rs, tier_io.rs): a Cairn
//! with a small `maxmemory`, the tier on and small segments (so
//! compaction has several to work on), and INFO's tier counters.
#![allow(dead_code)]

use super::{info_field, start_cairn_env, Server, TestDir};
use redis::Connection;

/// 16 MiB of RAM: tens of MB of values put most of them on disk.
pub const MAXMEMORY: u64 = 16 << 20;

/// Cairn in `dir` with `MAXMEMORY`, `tier-enabled yes`, 256 KiB segments
/// and DEBUG on, plus `extra`.
pub fn start(dir: &TestDir, extra: &[&str]) -> Server {
    start_env(dir, extra, &[])
}

/// `start` with environment variables for the process.
pub fn start_env(dir: &TestDir, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let max = MAXMEMORY.to_string();
    let mut args = vec![
        "--dir",
        dir.s(),
        "--maxmemory",
        &max,
        "--tier-enabled",
        "yes",
        "--tier-segment-size",
        "256kb",
        "--enable-debug-command",
        "yes",
    ];
    args.extend_from_slice(extra);
    start_cairn_env(&args, env)
}

/// A numeric INFO field of `section`.
pub fn info_u64(c: &mut Connection, section: &str, name: &str) -> u64 {
    info_field(c, section, name)
        .unwrap_or_else(|| panic!("{name} not in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// A numeric field of `INFO all`.
pub fn info(c: &mut Connection, name: &str) -> u64 {
    info_u64(c, "all", name)
}
