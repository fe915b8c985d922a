//! BGREWRITEAOF: journal compaction (issue 6).
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
