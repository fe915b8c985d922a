//! What the keyspace tells the server after a command: keyspace
//! notifications (`notify-keyspace-events`) and keys that became ready for
//! clients blocked on them (BLPOP, BZPOPMIN, ...).
//!
//! The engine knows no pub/sub and no connections, so operations only
//! record events, in the running command's state (`crate::cx::CmdState`,
//! through its guard's context); the server drains it once the command is
//! over (and its shard locks are released) and publishes or wakes. Nothing is recorded unless someone
//! listens: a notification class must be enabled, and a ready key needs a
//! blocked client somewhere (`Engine::blocked`), so a server without
//! listeners pays one relaxed load per event site.
/// Redis's `NOTIFY_*` classes (server.h); the bits match
/// `notify-keyspace-events`' parsing in the server's config.
pub mod class {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    pub const LOADED: u32 = 1 << 12;
    pub const MODULE: u32 = 1 << 13;
    pub const NEW: u32 = 1 << 14;
}

/// One thing that happened to a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A keyspace notification: `event` (Redis's name, e.g. `lpush`,
    /// `expired`) of `class` on `key` in `db`.
    Notify {
        class: u32,
        event: &'static str,
        db: usize,
        key: Box<[u8]>,
    },
    /// `key` in `db` now holds a list or sorted set: clients blocked on it
    /// may be served.
    Ready { db: usize, key: Box<[u8]> },
    /// Every key of `db` may have changed at once (SWAPDB, FLUSHDB): wake
    /// every client blocked on a key of it, to look again.
    ReadyDb { db: usize },
    /// Keys changed under a client-side caching BCAST prefix: send the
    /// prefixes' invalidations (`cairn_engine::tracking`'s sink raises it).
    Broadcast,
}
