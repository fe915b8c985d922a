//! The journal's file formats: the framing of a journal file (`frame`),
//! the manifest that lists a journal directory's files (`manifest`) and
//! the checker behind `cairn check-journal` (`check`).
//!
//! Only the bytes on disk live here. The server owns everything that runs
//! while serving: the writer thread, the appendfsync policies, reply
//! holds, replay through the command table and compaction. The records in
//! a frame are the engine's (`cairn_engine::record`); this module checks
//! and splits them but knows no protocol.
pub mod check;
pub mod frame;
pub mod manifest;

pub use frame::{End, Summary};
pub use manifest::Manifest;
