//! (Skeleton: filled in by the set work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
