//! (Skeleton: filled in by the set work.)
