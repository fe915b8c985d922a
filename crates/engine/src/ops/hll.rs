//! (Skeleton: filled in by the hll work.)
