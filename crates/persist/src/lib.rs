//! Cairn's persistence, beside the engine: it reads and writes files of
//! the keyspace and knows no protocol and no sockets (shared/STYLE.md).
//!
//! - `snapshot`: point-in-time snapshot files (SAVE, BGSAVE, start-up
//!   loading, and the base file of a journal rewrite).
//! - `journal`: the journal's file formats (framing, manifest, checker);
//!   the server runs the writer and the replay.
//! - `vlog`: the disk tier's value log (segments of values moved out of
//!   RAM; a library the engine does not use yet).
//! - `crc`: the one checksum both formats use; `Error`: what any of them
//!   reports when a file cannot be used (file, offset, reason).
pub mod crc;
mod error;
pub mod journal;
pub mod rdb;
pub mod snapshot;
pub mod vlog;

pub use error::{Error, ErrorKind};
