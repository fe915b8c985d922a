//! (Skeleton: filled in by the multi work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
