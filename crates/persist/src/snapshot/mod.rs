//! Point-in-time snapshots of the whole keyspace, without fork() and
//! without a second copy of the data (the cut is the engine's copy-on-lock
//! scheme, `cairn_engine::snapshot`).
//!
//! The API, in the order a caller uses it:
//! - `begin(engine, opts, on_cut)` makes the cut (every shard locked for
//!   a moment; `on_cut` runs then) and returns a `Cut`;
//! - `write(engine, cut, path)` writes it to `path` atomically (temporary
//!   file, fsync, rename, directory fsync), on whatever thread the caller
//!   likes; `Cut::progress()` gives live figures meanwhile; `write_to`
//!   writes it into any stream instead (`Options::format` picks Cairn's
//!   format or RDB);
//! - `save(engine, path, opts, on_cut)` is both on the calling thread;
//! - `load(engine, path, opts, progress)` reads a snapshot into an empty
//!   engine; `check(path)` verifies one without loading it.
//!
//! The format is in `format` (and drawn in docs/design.md).
pub mod format;
pub mod reader;
pub mod writer;

pub use reader::{check, load, LoadOptions, LoadProgress, LoadStats};
pub use writer::{
    begin, save, wait_free, write, write_to, Cut, Format, Options, Progress, ReplInfo, SaveError,
    Stats,
};

#[cfg(test)]
mod tests;
