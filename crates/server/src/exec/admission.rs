//! Admission: the server-wide reasons a command may not run now, asked by
//! every front end before it runs one (RESP through `dispatch::refusal`,
//! memcached in `memcache::execute`). Each protocol words the refusal its
//! own way; the decision is made here, once. What belongs to one protocol
//! stays with it (RESP's arity, NOAUTH and MULTI rules in `dispatch`).
//! Later: ACL (`crate::auth`) decides here which commands a user may run.
use crate::shared::Shared;
use cairn_engine::Cx;
use std::sync::atomic::Ordering;

/// Why writes are refused now; each protocol words it (RESP: MISCONF,
/// `resp::errors::writes_denied`; memcached: SERVER_ERROR).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WritesDenied {
    /// A background save failed while save rules exist
    /// (`stop-writes-on-bgsave-error`, Redis's `processCommand`).
    SnapshotFailed,
    /// The journal cannot be written (Redis's
    /// `writeCommandsDeniedByDiskError`); the system's error text.
    JournalFailed(String),
}

/// Why writes (and PING) are refused now, or None. Reads go on.
#[inline]
pub fn writes_denied(shared: &Shared) -> Option<WritesDenied> {
    if shared.snapshots.deny_writes.load(Ordering::Relaxed) {
        return Some(WritesDenied::SnapshotFailed);
    }
    shared.journal.failure().map(WritesDenied::JournalFailed)
}

/// True while CLIENT PAUSE holds a command back (`writes`: it writes or
/// may replicate). As in Redis 7.0 (`processCommand`), PAUSE ALL holds
/// every command of a normal client and PAUSE WRITE holds the ones that
/// write or may replicate; the pause ends when its time runs out or
/// another client sends CLIENT UNPAUSE.
#[inline]
pub fn paused(shared: &Shared, cx: &Cx, writes: bool) -> bool {
    let until = shared.pause.until_ms.load(Ordering::Relaxed);
    if until == 0 || cx.now_ms() >= until {
        return false;
    }
    shared.pause.all.load(Ordering::Relaxed) || writes
}

/// True while any CLIENT PAUSE is in force. Redis 7.0 keeps the dataset
/// still then (`checkClientPauseTimeoutAndReturnIfPaused`): the active
/// expiry cycle and eviction do not run, so a paused server neither
/// expires nor evicts keys in the background.
#[inline]
pub fn pause_in_force(shared: &Shared) -> bool {
    let until = shared.pause.until_ms.load(Ordering::Relaxed);
    until != 0 && cairn_engine::clock::now_ms() < until
}

/// The keyspace is being loaded (snapshot or journal at start-up): only
/// commands that do not touch it may run.
#[inline]
pub fn loading(shared: &Shared) -> bool {
    shared.snapshots.loading.load(Ordering::Relaxed)
}

/// Redis's performEvictions before a command while `maxmemory` is set:
/// evicts if needed and says whether `incoming` more bytes fit (false:
/// over the limit and no room can be made, so commands that may grow
/// memory are refused with OOM). `cx`: the command's context, which the
/// evictions' events and records join.
#[inline]
pub fn room_for(shared: &Shared, cx: &Cx, incoming: u64) -> bool {
    crate::memory::make_room(shared, cx, incoming)
}
