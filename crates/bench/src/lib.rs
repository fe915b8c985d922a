//! cairn-bench: a benchmark client for RESP and memcached servers. It talks
//! to servers over the wire only, like any client, and re-runs the
//! experiments in EXPERIMENTS.md (YCSB, memory per record, large values,
//! MSET/MGET batches, cache hit ratio under maxmemory) against any number of targets side by side.
//! For data larger than memory (issue 25): `batch --real-text` (E4: values
//! cut from text Debian ships, verified byte for byte; speed per second
//! with stalls; memory and disk per key sampled over the run) and
//! `load-curve` (E5: inserts/s per 1% of a load growing past maxmemory).
//! scripts/bench_tier.sh and scripts/bench_fs.sh (E2) drive them.

pub mod batch;
pub mod chart;
pub mod cli;
pub mod connrate;
pub mod corpus;
pub mod curve;
pub mod gen;
pub mod getset;
pub mod hitratio;
pub mod loadcurve;
pub mod memcache;
pub mod memory;
pub mod report;
pub mod resp;
pub mod runner;
pub mod sample;
pub mod stats;
pub mod sys;
pub mod target;
pub mod values;
pub mod wire;
pub mod ycsb;
