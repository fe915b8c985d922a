//! (Skeleton: filled in by the pubsub work.)
use crate::resp::table::Def;

pub const COMMANDS: &[Def] = &[];
