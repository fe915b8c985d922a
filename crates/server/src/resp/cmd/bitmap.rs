//! (Skeleton: filled in by the bitmap work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
