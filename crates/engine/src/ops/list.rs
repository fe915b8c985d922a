//! (Skeleton: filled in by the list work.)
