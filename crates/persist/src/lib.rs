//! Cairn's persistence, beside the engine: it reads and writes files of
//! the keyspace and knows no protocol and no sockets (shared/STYLE.md).
//!
//! - `snapshot`: point-in-time snapshot files (SAVE, BGSAVE, start-up
//!   loading, and the base file of a journal rewrite).
pub mod snapshot;
