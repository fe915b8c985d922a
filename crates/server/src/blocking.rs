//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN, ...). (Being written.)
use crate::shared::Shared;

/// `key` of `db` now holds a list or sorted set: wake the first client
/// blocked on it.
pub fn key_ready(_shared: &Shared, _db: usize, _key: &[u8]) {}

/// Every key of `db` may have changed (SWAPDB): wake every client blocked
/// on a key of it.
pub fn db_ready(_shared: &Shared, _db: usize) {}
