//! The disk tier's value log (issue 25 item 2): append-only segment files
//! per shard group that hold values moved out of RAM, while the keyspace
//! keeps the key, its TTL and a 12-byte `Ptr` (plus the plain length).
//! A library so far: nothing in the engine or the server calls it yet
//! (docs/design.md, "The disk tier", says how they will).
//!
//! - `format`: the segment header, the record (CRC-32C via `crate::crc`),
//!   the pointer; byte layouts pinned by tests.
//! - `segment`: one file: recovery at open (torn tail cut, corruption
//!   refused with file and offset) and the sequential walk.
//! - `log`: `Log`, one group's log: appender with write buffer and the
//!   journal's fsync policies, `read` by pread from any thread, live
//!   counters, compaction, space accounting, injected faults.
pub mod format;
mod log;
mod segment;
#[cfg(test)]
mod tests;

pub use format::{Kind, Ptr, RecordRef};
pub use log::{
    Compaction, Faults, Fetched, Fsync, Log, Moved, Options, Placed, SegmentStats, Stats,
};
