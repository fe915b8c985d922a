//! Shared execution: what runs a command once a front end has parsed it.
//! The command table and its metadata (`table`, `meta`), dispatch (find the
//! command, check it, time the handler, feed the statistics, the slow log
//! and MONITOR) and admission (the server-wide reasons to refuse or hold a
//! command: MISCONF, OOM, loading, CLIENT PAUSE; later ACL), which every
//! front end asks before it runs a command.
//!
//! Handlers call services, services use state, never the reverse: nothing
//! here or below imports a command handler (`crate::resp::cmd`).
pub mod admission;
pub mod dispatch;
pub mod errorstats;
pub mod keys;
pub mod meta;
pub mod table;
