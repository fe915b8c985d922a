//! server commands: being written.
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
