//! SAVE, BGSAVE, LASTSAVE: point-in-time snapshots (issue 6).
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
