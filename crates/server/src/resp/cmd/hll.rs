//! (Skeleton: filled in by the hll work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
