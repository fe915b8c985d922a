//! Small value-level helpers shared by the engine's commands: glob matching
//! (Redis `stringmatchlen`), integer/float text (Redis `util.c` and the
//! long double arithmetic of INCRBYFLOAT), and LCS (Redis `lcsCommand`).
//! None of them knows about keys, shards or the wire format.
pub mod glob;
pub mod huff;
pub mod lcs;
pub mod num;
pub mod smallbytes;
