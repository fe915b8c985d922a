//! `repl-diskless-load` on a replica: what clients see while a full sync's
//! image arrives, as Redis 7.0's `readSyncBulkPayload` shows it.
//!
//! Redis reads the image "to disk" (`disabled`, or `on-empty-db` on a
//! replica holding keys) and serves the old data until the file is whole,
//! then flushes and loads it; or "to the parser" (`swapdb`, or
//! `on-empty-db` on an empty replica, `useDisklessLoad`) straight from the
//! socket, and clients get `-LOADING` from the image's first bytes to its
//! end, unless `swapdb` loads asynchronously (the master's replication ID
//! is already ours: the old data is an earlier point of the same history,
//! and reads are served from it until the swap).
//!
//! Cairn always receives the image into a file and loads it from there
//! (its loader reads files), so the two differ only in what clients see
//! meanwhile: for the "to parser" cases `loading` is set when the image's
//! first bytes arrive, as Redis's is, and cleared if the transfer fails
//! (the old data is still there, flushed only at the load). What is not
//! built: `swapdb` keeping the old data when the load itself fails, and
//! serving it during the load of an asynchronous sync
//! (tests/diff/DIFFERENCES.md).
use crate::config::ReplDisklessLoad;
use crate::log;
use crate::shared::Shared;
use cairn_engine::Cx;
use std::sync::atomic::Ordering;

/// The image whose first line (`size`: `EOF:<mark>` or `<len>`, without
/// the `$`) just came, after `+FULLRESYNC <replid> ...`: logs how Redis
/// would take it, and says whether clients get `-LOADING` from its first
/// bytes on (`start`): the "to parser" cases that are not asynchronous.
pub fn begin(shared: &Shared, replid: &str, size: &str) -> bool {
    let mode = shared.config.read().repl_diskless_load;
    let to_parser = match mode {
        ReplDisklessLoad::Disabled => false,
        ReplDisklessLoad::OnEmptyDb => {
            let cx = Cx::DETACHED;
            (0..shared.engine.databases()).all(|db| shared.engine.dbsize(&cx, db) == 0)
        }
        ReplDisklessLoad::Swapdb => true,
    };
    let to = if to_parser { "to parser" } else { "to disk" };
    match size.strip_prefix("EOF:") {
        Some(_) => log::notice(&format!(
            "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {to}"
        )),
        None => log::notice(&format!(
            "MASTER <-> REPLICA sync: receiving {size} bytes from master {to}"
        )),
    }
    // Redis 7.0: asynchronous loading when the master's ID is ours.
    let asynchronous =
        mode == ReplDisklessLoad::Swapdb && shared.replication.id_and_offset().0 == replid;
    to_parser && !asynchronous
}

/// The image's first bytes are in (Redis starts parsing at the first
/// readable event after the line): clients get `-LOADING` until the load
/// ends, or until the caller clears it when the transfer fails.
pub fn start(shared: &Shared) {
    shared.snapshots.loading.store(true, Ordering::Relaxed);
}
