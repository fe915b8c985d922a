//! (Skeleton: filled in by the zset work.)
