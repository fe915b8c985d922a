//! The memcached protocol on Cairn's engine (issue 7). A connection
//! accepted on `memcached-port` is served by the same workers, event loop,
//! buffers, backpressure and limits as a RESP connection; only its session
//! differs (`session`): its bytes are parsed by `cairn_protocol::memcache`
//! and its commands run here instead of in the RESP dispatcher, after the
//! same admission checks (`exec::admission`). One file per command group:
//! `retrieval` (get, gets, gat, gats), `storage` (set, add, replace,
//! append, prepend, cas), `arith` (incr, decr), `keys` (delete, touch),
//! `meta` (mg, ms, md, ma, mn, me), `admin` (flush_all, version,
//! verbosity, quit, auth) and `stats`; `acl` checks each request against
//! the connection's ACL user as the Redis command it amounts to.
//!
//! Every item lives in database 0 as a Redis string (the mapping is in
//! `cairn_engine::ops::memcache` and docs/design.md, "memcached"). Commands
//! lock the shards of their keys like RESP commands, record keyspace events
//! and WATCH changes through the same engine hooks, and hand the events to
//! pub/sub after each command.
mod acl;
mod admin;
mod arith;
mod errors;
mod keys;
mod meta;
mod retrieval;
pub mod session;
pub mod stats;
mod storage;

use crate::client::Client;
use crate::exec::admission;
use crate::shared::Shared;
use cairn_engine::{Cx, Expiry};
use cairn_protocol::memcache::{MetaCmd, Request};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The database memcached items live in.
pub const DB: usize = 0;

/// The version `version` and `stats` report: the memcached release whose
/// behaviour Cairn reproduces (clients compare it to enable features such
/// as the meta commands), then Cairn's own.
pub fn version() -> String {
    format!("1.6.18-cairn-{}", crate::VERSION)
}

/// Server-wide memcached state.
pub struct McShared {
    /// Per-worker counters for `stats`.
    pub stats: Box<[stats::McStats]>,
    /// `verbosity`'s level (memcached caps it at 2); only reported.
    pub verbosity: AtomicU32,
    /// `flush_all <delay>`: the Unix ms at which database 0 is flushed,
    /// 0 when none is pending.
    pub flush_at: AtomicU64,
}

impl McShared {
    pub fn new(workers: usize) -> McShared {
        McShared {
            stats: (0..workers).map(|_| stats::McStats::default()).collect(),
            verbosity: AtomicU32::new(0),
            flush_at: AtomicU64::new(0),
        }
    }
}

/// Runs a delayed `flush_all` whose time has come. Called before each
/// memcached command and from the server's cron, so RESP clients see the
/// flush on time too (within one cron period).
pub fn run_due_flush(shared: &Shared, cx: &Cx) {
    let at = shared.memcache.flush_at.load(Ordering::Relaxed);
    if at == 0 || cairn_engine::clock::now_ms() < at {
        return;
    }
    if shared
        .memcache
        .flush_at
        .compare_exchange(at, 0, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
    {
        cairn_engine::rewrite::flushdb(&shared.engine, cx, DB);
        drop(shared.engine.flush(cx, Some(DB)));
    }
}

/// What a handler works with.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub out: &'a mut Vec<u8>,
    pub stats: &'a stats::McStats,
    pub client: &'a mut Client,
    /// The request's context in the engine (`cairn_engine::Cx`): every
    /// lock passes it, so its records and events reach the journal and
    /// the server.
    pub ecx: Cx<'a>,
}

impl Ctx<'_> {
    /// Appends a reply line ("\r\n" added).
    pub fn line(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    /// A reply line unless the command asked for noreply (memcached's
    /// `out_string`: errors are silenced too).
    pub fn reply(&mut self, s: &str, noreply: bool) {
        if !noreply {
            self.line(s);
        }
    }

    /// `proto-max-bulk-len`: the longest value an item may reach.
    pub fn max_value(&self) -> usize {
        self.shared.hot.proto_max_bulk_len.load(Ordering::Relaxed)
    }

    /// Over `maxmemory` and no room can be made (noeviction, or nothing
    /// evictable): writes that may grow memory fail.
    pub fn over_memory(&self) -> bool {
        !admission::room_for(self.shared, &self.ecx, 0)
    }
}

/// A memcached exptime at time `now_ms` (see `ops::memcache::expiry`).
pub fn expiry(exptime: i32, now_ms: u64) -> Expiry {
    cairn_engine::ops::memcache::expiry(exptime as i64, now_ms)
}

/// Some(noreply) if the request changes the keyspace (so is refused while
/// writes are denied); meta commands always answer errors.
fn write_of(req: &Request) -> Option<bool> {
    match req {
        Request::Store(s) => Some(s.noreply),
        Request::Delete { noreply, .. }
        | Request::Arith { noreply, .. }
        | Request::Touch { noreply, .. }
        | Request::FlushAll { noreply, .. } => Some(*noreply),
        // A refused set still drops the old item (memcached does).
        Request::Refused {
            deletes: true,
            noreply,
            ..
        } => Some(*noreply),
        Request::Get { touch: Some(_), .. } => Some(false),
        Request::Meta(m) => match m.cmd {
            MetaCmd::Get if m.flags.ttl.is_none() && m.flags.vivify.is_none() => None,
            _ => Some(false),
        },
        _ => None,
    }
}

/// True if a text command asked for no reply: its errors are silenced too
/// (memcached's `out_string`). Meta commands always answer errors.
fn noreply_of(req: &Request) -> bool {
    match req {
        Request::Store(s) => s.noreply,
        Request::Delete { noreply, .. }
        | Request::Arith { noreply, .. }
        | Request::Touch { noreply, .. }
        | Request::FlushAll { noreply, .. }
        | Request::Verbosity { noreply, .. }
        | Request::Refused { noreply, .. } => *noreply,
        _ => false,
    }
}

pub(crate) fn execute(cx: &mut Ctx, req: Request) {
    // First, as Redis checks ACL rights before LOADING, OOM and MISCONF.
    if crate::auth::restricted(cx.client) && !acl::allowed(cx, &req) {
        cx.reply(errors::NOPERM, noreply_of(&req));
        return;
    }
    if admission::loading(cx.shared) {
        // The keyspace is half loaded: only commands that do not touch it
        // run (RESP clients get -LOADING meanwhile).
        let noreply = match &req {
            Request::Version
            | Request::Quit
            | Request::Stats { .. }
            | Request::Verbosity { .. }
            | Request::MetaNoop => None,
            Request::Store(s) => Some(s.noreply),
            Request::Delete { noreply, .. }
            | Request::Arith { noreply, .. }
            | Request::Touch { noreply, .. }
            | Request::FlushAll { noreply, .. }
            | Request::Refused { noreply, .. } => Some(*noreply),
            _ => Some(false),
        };
        if let Some(noreply) = noreply {
            cx.reply(errors::LOADING, noreply);
            return;
        }
    }
    if let Some(noreply) = write_of(&req) {
        if let Some(why) = admission::writes_denied(cx.shared) {
            // As RESP writes get MISCONF: nothing is stored that the
            // journal or the save rules could not keep.
            cx.reply(&errors::writes_denied(&why), noreply);
            return;
        }
        if crate::replication::replica::read_only(cx.shared) {
            cx.reply(errors::READONLY_REPLICA, noreply);
            return;
        }
    }
    match req {
        Request::Get { cas, touch, keys } => retrieval::get(cx, cas, touch, keys),
        Request::Store(s) => storage::store(cx, &s),
        Request::Refused {
            why,
            key,
            deletes,
            noreply,
        } => storage::refused(cx, why, key.as_bytes(), deletes, noreply),
        Request::Delete { key, noreply } => keys::delete(cx, key, noreply),
        Request::Arith {
            incr,
            key,
            delta,
            noreply,
        } => arith::incr_decr(cx, incr, key, delta, noreply),
        Request::Touch {
            key,
            exptime,
            noreply,
        } => keys::touch(cx, key, exptime, noreply),
        Request::FlushAll { delay, noreply } => admin::flush_all(cx, delay, noreply),
        Request::Version => {
            let v = format!("VERSION {}", version());
            cx.line(&v);
        }
        Request::Verbosity { level, noreply } => admin::verbosity(cx, level, noreply),
        Request::Stats { args } => stats::command(cx, args),
        Request::Quit => cx.client.close_after_reply = true,
        Request::MetaNoop => cx.line("MN"),
        Request::MetaDebug { key } => meta::debug(cx, &key),
        Request::Meta(m) => meta::run(cx, &m),
        Request::Error { msg, noreply } => cx.reply(msg, noreply),
    }
}
