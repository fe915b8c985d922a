//! (Skeleton: filled in by the list work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
