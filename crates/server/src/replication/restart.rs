//! Replication across a restart (Redis 7.0 `rdbPopulateSaveInfo` and
//! `loadDataFromDisk`): a snapshot saves where its data stands in the
//! replication history (ID, offset, the stream's database), and a server
//! that loads it continues that history, so its replicas, or its master,
//! need only a partial resynchronisation (`+CONTINUE`).
//!
//! Saved by a master with a backlog (a master without one is in no
//! replication chain: its next replica gets a new ID anyway) and by a
//! replica. Loaded by a master as Redis 7.0 does: a new backlog with a
//! new ID, the saved ID as ID2 up to the saved offset, and
//! `master_repl_offset` where it was; by a replica (`replicaof` in the
//! config) as its master's ID and offset, so its first PSYNC asks for the
//! byte after the saved ones. The journal (`appendonly yes`) saves none of
//! it, as Redis's AOF does not.
use super::buffer::Buffer;
use crate::log;
use crate::shared::Shared;
use cairn_engine::Cx;
use cairn_persist::snapshot::ReplInfo;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The database the master's stream selected last, as the replica's link
/// applies it (the `repl-stream-db` a replica saves; at start-up, the one
/// its restored link continues in).
static REPLICA_DB: AtomicUsize = AtomicUsize::new(0);

/// The replica link's database changed (a SELECT applied, a full sync).
pub fn note_stream_db(db: usize) {
    REPLICA_DB.store(db, Ordering::Relaxed);
}

/// The database the replica link starts in.
pub fn stream_db() -> usize {
    REPLICA_DB.load(Ordering::Relaxed)
}

/// What to save with a snapshot cut now. Called at the cut (every shard
/// locked; on a replica also with the link's applying held, `hold`), so
/// the offset counts exactly the writes the data holds.
pub fn at_cut(shared: &Shared) -> Option<ReplInfo> {
    let r = &shared.replication;
    let s = r.state.lock();
    if r.replica_mode() {
        return Some(ReplInfo {
            stream_db: stream_db(),
            replid: s.replid.clone(),
            offset: s.buffer.as_ref().map_or(s.offset, Buffer::end),
        });
    }
    let b = s.buffer.as_ref()?;
    Some(ReplInfo {
        // Redis: a stream that selected nothing yet saves 0; the next
        // write after the load selects its database anyway.
        stream_db: s.db.unwrap_or(0),
        replid: s.replid.clone(),
        offset: b.end(),
    })
}

/// On a replica, holds off the link's applying (a command applied and not
/// yet counted in the offset) while a snapshot makes its cut. None on a
/// master, or if the link's command does not finish in time.
pub fn hold(shared: &Shared) -> Option<parking_lot::MutexGuard<'static, ()>> {
    if !shared.replication.replica_mode() {
        return None;
    }
    super::replica::hold_apply()
}

/// Start-up, after the snapshot is loaded and before clients may write.
pub fn restore(shared: &Shared, info: Option<ReplInfo>) {
    let Some(info) = info else {
        return;
    };
    if info.replid.len() != 40 || info.stream_db >= shared.engine.databases() {
        log::warning("Ignoring the snapshot's replication info: it is not valid");
        return;
    }
    let r = &shared.replication;
    if !shared.config.read().replicaof.trim().is_empty() {
        r.adopt_master(shared, &info.replid, info.offset);
        note_stream_db(info.stream_db);
        log::notice(&format!(
            "Loaded the replication ID {} and offset {} of my master from the snapshot",
            info.replid, info.offset
        ));
        return;
    }
    super::create_backlog(shared, &Cx::DETACHED, None);
    let size = shared.config.read().repl_backlog_size;
    let mut s = r.state.lock();
    // No client wrote since the backlog was made (they get -LOADING).
    s.replid2 = info.replid.clone();
    s.second_offset = info.offset as i64 + 1;
    s.offset = info.offset;
    s.buffer = Some(Buffer::new(info.offset, size));
    s.db = None;
    drop(s);
    log::notice(&format!(
        "Loaded the replication ID {} and offset {} from the snapshot: replicas of it may continue",
        info.replid, info.offset
    ));
}
