//! (Skeleton: filled in by the sort work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
