//! Cairn's persistence, beside the engine: it reads and writes files of
//! the keyspace and knows no protocol and no sockets (shared/STYLE.md).
//!
//! - `snapshot`: point-in-time snapshot files (SAVE, BGSAVE, start-up
//!   loading, and the base file of a journal rewrite).
//! - `journal`: the journal's file formats (framing, manifest, checker);
//!   the server runs the writer and the replay.
pub mod journal;
pub mod snapshot;
