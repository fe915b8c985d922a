//! cairn-bench: a benchmark client for RESP and memcached servers. It talks
//! to servers over the wire only, like any client, and re-runs the
//! experiments in EXPERIMENTS.md (YCSB, memory per record, large values,
//! MSET/MGET batches, cache hit ratio under maxmemory) against any number of targets side by side.

pub mod batch;
pub mod chart;
pub mod cli;
pub mod connrate;
pub mod gen;
pub mod getset;
pub mod hitratio;
pub mod memcache;
pub mod memory;
pub mod report;
pub mod resp;
pub mod runner;
pub mod stats;
pub mod sys;
pub mod target;
pub mod values;
pub mod wire;
pub mod ycsb;
