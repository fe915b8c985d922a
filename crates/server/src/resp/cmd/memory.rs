//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP (issue 5).
use crate::resp::table::Def;

/// The MEMORY container command and its subcommands.
pub const COMMANDS: &[Def] = &[];
