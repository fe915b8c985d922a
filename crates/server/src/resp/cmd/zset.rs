//! (Skeleton: filled in by the zset work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
