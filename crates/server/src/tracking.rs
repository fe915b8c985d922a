//! Server-assisted client-side caching (Redis 7.0 `tracking.c`): the
//! tracking table, BCAST prefixes, and delivery of invalidation messages
//! to clients on any worker.
//!
//! State, in two places as for pub/sub:
//! - the table (`Tracking`, in `Shared`), behind one mutex: key -> the ids
//!   of clients that may cache it (default mode), prefix -> its BCAST
//!   clients and the keys changed under it since the last broadcast, and
//!   the tracking clients themselves. Keys are names only, in no database,
//!   as in Redis.
//! - per connection: the mode bits and redirect in `ClientInfo` (other
//!   threads deliver by them and CLIENT LIST shows them), the prefixes and
//!   the CLIENT CACHING answer in `Client`.
//!
//! Invalidation. The engine calls `Invalidate::key` wherever WATCH is told
//! of a change (`cairn_engine::tracking`), with the key's shard locked.
//! Under that lock the key's entry leaves the table and its message is
//! appended to each target connection's inbox (`ClientInfo::inbox`); the
//! target's worker is woken (`Msg::Invalidate`) to write it. A target's own
//! commands also empty its inbox: before running (so a message that was
//! queued before a command reads the new value precedes that command's
//! reply) and after (so a client's invalidation of its own write follows
//! the write's reply, as Redis 7.0 sends `tracking_pending_keys` after the
//! command). Keys a client reads are registered before its command runs
//! and again after: before, so a write on another thread between the read
//! and the registration cannot be missed; after, so a key the command
//! itself invalidated (a lazily expired key it read) is tracked again.
//!
//! BCAST keys are collected per prefix and sent once the writing command
//! ends (Redis: in `beforeSleep`), one message per prefix, keys sorted.
//!
//! The table is bounded by `tracking-table-max-keys`: past it, random keys
//! leave the table and their clients get an invalidation, as Redis's
//! `trackingLimitUsedSlots` does.
use crate::client::{Client, ClientInfo};
use crate::resp::errors::CmdError;
use crate::shared::{Msg, Shared};
use cairn_engine::Cx;
use cairn_protocol::resp::{Protocol, ReplyWriter};
use indexmap::IndexMap;
use parking_lot::Mutex;
use rand::Rng;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

/// Mode bits in `ClientInfo::tracking` (Redis's `CLIENT_TRACKING*` flags).
pub mod mode {
    pub const ON: u8 = 1;
    pub const BROKEN_REDIR: u8 = 2;
    pub const BCAST: u8 = 4;
    pub const OPTIN: u8 = 8;
    pub const OPTOUT: u8 = 16;
    pub const NOLOOP: u8 = 32;
}

/// The RESP2 channel a redirect client receives invalidations on.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One BCAST prefix: who listens, and what changed since the last send
/// (key -> the client that changed it last, for NOLOOP).
#[derive(Default)]
struct Bcast {
    clients: SmallVec<[u64; 2]>,
    keys: BTreeMap<Box<[u8]>, u64>,
}

#[derive(Default)]
struct Table {
    /// Key -> ids of the clients that read it (default mode).
    keys: IndexMap<Box<[u8]>, SmallVec<[u64; 2]>>,
    /// Client ids across `keys` (INFO `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Box<[u8]>, Bcast>,
    /// Some prefix holds changed keys.
    bcast_pending: bool,
    /// Every tracking client.
    clients: hashbrown::HashMap<u64, Arc<ClientInfo>>,
}

/// The server-wide tracking table.
#[derive(Default)]
pub struct Tracking {
    table: Mutex<Table>,
    /// Tracking clients (INFO `tracking_clients`), readable without the lock.
    count: AtomicUsize,
    /// Mirrors of the table's sizes for INFO.
    keys: AtomicUsize,
    items: AtomicUsize,
    prefixes: AtomicUsize,
    shared: OnceLock<Weak<Shared>>,
    /// `tracking-table-max-keys` (0: no limit).
    pub max_keys: AtomicUsize,
}

/// What INFO reports.
pub struct Stats {
    pub clients: usize,
    pub keys: usize,
    pub items: usize,
    pub prefixes: usize,
}

/// A connection's own tracking state (the rest is in `ClientInfo`).
#[derive(Default)]
pub struct ClientTracking {
    /// BCAST prefixes, in the order given.
    pub prefixes: Vec<Box<[u8]>>,
    /// CLIENT CACHING YES|NO given for the next command (Redis's
    /// `CLIENT_TRACKING_CACHING`): kept until a command other than CLIENT
    /// ends outside MULTI.
    pub caching: bool,
}

/// Installs the table as the engine's sink (at start, once `shared` is
/// in its `Arc`).
pub fn install(shared: &Arc<Shared>) {
    let _ = shared.tracking.shared.set(Arc::downgrade(shared));
    shared
        .engine
        .tracking
        .install(Arc::new(Sink(Arc::downgrade(shared))));
}

struct Sink(Weak<Shared>);

impl cairn_engine::tracking::Invalidate for Sink {
    fn key(&self, key: &[u8], cx: &Cx) {
        if let Some(shared) = self.0.upgrade() {
            invalidate_key(&shared, key, cx.client(), Some(cx.client()), cx);
        }
    }

    fn expired(&self, key: &[u8], cx: &Cx) {
        if let Some(shared) = self.0.upgrade() {
            invalidate_key(&shared, key, cx.client(), Some(0), cx);
        }
    }

    fn all(&self, _cx: &Cx) {
        if let Some(shared) = self.0.upgrade() {
            invalidate_all(&shared);
        }
    }
}

impl Tracking {
    pub fn stats(&self) -> Stats {
        Stats {
            clients: self.count.load(Ordering::Relaxed),
            keys: self.keys.load(Ordering::Relaxed),
            items: self.items.load(Ordering::Relaxed),
            prefixes: self.prefixes.load(Ordering::Relaxed),
        }
    }

    fn publish_sizes(&self, t: &Table) {
        self.keys.store(t.keys.len(), Ordering::Relaxed);
        self.items.store(t.items, Ordering::Relaxed);
        self.prefixes.store(t.prefixes.len(), Ordering::Relaxed);
    }
}

// --------------------------------------------------------------------------
// Delivery.

/// Appends `frame` to `to`'s inbox and wakes its worker to write it.
fn post(shared: &Shared, to: &ClientInfo, frame: &[u8]) {
    let mut inbox = to.inbox.lock();
    let first = inbox.is_empty();
    inbox.extend_from_slice(frame);
    to.inbox_pending.store(true, Ordering::Release);
    drop(inbox);
    if first {
        if let Some(w) = shared.workers().get(to.worker()) {
            w.send(Msg::Invalidate(to.id));
        }
    }
}

/// Redis `sendTrackingMessage`: tells tracking client `c` (or its redirect)
/// that the keys in `body` (a RESP array, or a null for "all keys") are
/// invalid. A broken redirect sets flag R and tells `c` in RESP3.
fn send(shared: &Shared, c: &Arc<ClientInfo>, body: &[u8]) {
    let redir = c.redir.load(Ordering::Relaxed);
    let (target, redirected) = if redir != 0 {
        let found = shared.clients.lock().get(&redir).cloned();
        match found {
            Some(t) => (t, true),
            None => {
                c.tracking.fetch_or(mode::BROKEN_REDIR, Ordering::Relaxed);
                if c.resp.load(Ordering::Relaxed) > 2 {
                    let mut f = Vec::with_capacity(48);
                    let mut w = ReplyWriter::new(&mut f, Protocol::Resp3);
                    w.push(2);
                    w.bulk(b"tracking-redir-broken");
                    w.int(redir as i64);
                    post(shared, c, &f);
                }
                return;
            }
        }
    } else {
        (c.clone(), false)
    };
    let mut f = Vec::with_capacity(40 + body.len());
    if target.resp.load(Ordering::Relaxed) > 2 {
        let mut w = ReplyWriter::new(&mut f, Protocol::Resp3);
        w.push(2);
        w.bulk(b"invalidate");
    } else if redirected && crate::client::is_subscriber(&target) {
        let mut w = ReplyWriter::new(&mut f, Protocol::Resp2);
        w.array(3);
        w.bulk(b"message");
        w.bulk(CHANNEL);
    } else {
        // RESP2 without a subscribed redirect: there is no way to push.
        return;
    }
    f.extend_from_slice(body);
    post(shared, &target, &f);
}

/// `[key]` as a RESP array.
fn one_key(key: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + key.len());
    let mut w = ReplyWriter::new(&mut b, Protocol::Resp2);
    w.array(1);
    w.bulk(key);
    b
}

/// Redis `trackingInvalidateKey`: `key` changed (by client `writer`, 0 for
/// none). Its default-mode clients get a message and the key leaves the
/// table; with `bcast` (naming the client its NOLOOP filter skips, 0 for
/// none), it is also noted under each matching prefix.
fn invalidate_key(shared: &Shared, key: &[u8], writer: u64, bcast: Option<u64>, cx: &Cx) {
    let tr = &shared.tracking;
    let mut t = tr.table.lock();
    if let Some(bcast_writer) = bcast.filter(|_| !t.prefixes.is_empty()) {
        let mut any = false;
        for (p, b) in t.prefixes.iter_mut() {
            if key.starts_with(p) {
                b.keys.insert(key.into(), bcast_writer);
                any = true;
            }
        }
        if any {
            t.bcast_pending = true;
            cx.push_event(cairn_engine::events::Event::Broadcast);
        }
    }
    let Some(ids) = t.keys.swap_remove(key) else {
        return;
    };
    t.items -= ids.len();
    tr.publish_sizes(&t);
    let body = one_key(key);
    for id in ids {
        let Some(c) = t.clients.get(&id) else {
            continue;
        };
        let m = c.tracking.load(Ordering::Relaxed);
        if m & mode::ON == 0 || m & mode::BCAST != 0 {
            continue;
        }
        if m & mode::NOLOOP != 0 && id == writer {
            continue;
        }
        send(shared, c, &body);
    }
}

/// Redis `trackingInvalidateKeysOnFlush`: every tracking client gets a
/// null ("all keys"), in its own protocol's form, and the table empties.
fn invalidate_all(shared: &Shared) {
    let tr = &shared.tracking;
    let mut t = tr.table.lock();
    for c in t.clients.values() {
        let body: &[u8] = if c.resp.load(Ordering::Relaxed) > 2 {
            b"_\r\n"
        } else {
            b"$-1\r\n"
        };
        send(shared, c, body);
    }
    t.keys = IndexMap::new();
    t.items = 0;
    tr.publish_sizes(&t);
}

/// Redis `trackingBroadcastInvalidationMessages`: sends each prefix's
/// changed keys to its clients (a NOLOOP client without the keys it
/// changed itself) and forgets them. Called after the command that changed
/// them (`keyevents`), with no shard locked.
pub fn broadcast(shared: &Shared) {
    let tr = &shared.tracking;
    let mut t = tr.table.lock();
    if !t.bcast_pending {
        return;
    }
    t.bcast_pending = false;
    let Table {
        prefixes, clients, ..
    } = &mut *t;
    for b in prefixes.values_mut() {
        if b.keys.is_empty() {
            continue;
        }
        let keys = std::mem::take(&mut b.keys);
        let all = keys_array(&keys, None);
        for id in &b.clients {
            let Some(c) = clients.get(id) else {
                continue;
            };
            if c.tracking.load(Ordering::Relaxed) & mode::NOLOOP != 0 {
                if let Some(own) = keys_array(&keys, Some(*id)) {
                    send(shared, c, &own);
                }
            } else if let Some(all) = &all {
                send(shared, c, all);
            }
        }
    }
}

/// The keys as a RESP array, leaving out those `skip` changed last; None
/// when nothing is left.
fn keys_array(keys: &BTreeMap<Box<[u8]>, u64>, skip: Option<u64>) -> Option<Vec<u8>> {
    let n = keys.values().filter(|&&w| Some(w) != skip).count();
    if n == 0 {
        return None;
    }
    let mut b = Vec::new();
    let mut w = ReplyWriter::new(&mut b, Protocol::Resp2);
    w.array(n);
    for (k, &who) in keys {
        if Some(who) != skip {
            w.bulk(k);
        }
    }
    Some(b)
}

/// Writes what other threads left in `client`'s inbox to `out`. Called
/// around every command: inlined to one load when the inbox is empty.
#[inline]
pub fn drain_inbox(info: &ClientInfo, out: &mut Vec<u8>) {
    if info.inbox_pending.load(Ordering::Acquire) {
        drain_inbox_slow(info, out);
    }
}

#[cold]
fn drain_inbox_slow(info: &ClientInfo, out: &mut Vec<u8>) {
    let mut inbox = info.inbox.lock();
    out.extend_from_slice(&inbox);
    inbox.clear();
    info.inbox_pending.store(false, Ordering::Relaxed);
}

// --------------------------------------------------------------------------
// Remembering keys.

/// Redis `trackingRememberKeys`: notes that `client` (default mode) may
/// cache `keys`, unless OPTIN without CACHING YES or OPTOUT with CACHING
/// NO says otherwise. Then keeps the table within `tracking-table-max-keys`.
pub fn remember<'a>(shared: &Shared, client: &Client, keys: impl Iterator<Item = &'a [u8]>) {
    let m = client.info.tracking.load(Ordering::Relaxed);
    if m & mode::ON == 0 || m & mode::BCAST != 0 {
        return;
    }
    let caching = client.tracking.caching;
    if (m & mode::OPTIN != 0 && !caching) || (m & mode::OPTOUT != 0 && caching) {
        return;
    }
    let tr = &shared.tracking;
    let mut t = tr.table.lock();
    for key in keys {
        let ids = match t.keys.get_mut(key) {
            Some(ids) => ids,
            None => {
                t.keys.insert(key.into(), SmallVec::new());
                t.keys.get_mut(key).expect("just inserted")
            }
        };
        if !ids.contains(&client.id) {
            ids.push(client.id);
            t.items += 1;
        }
    }
    limit(shared, &mut t);
    tr.publish_sizes(&t);
}

/// Redis `trackingLimitUsedSlots`: while over `tracking-table-max-keys`,
/// a random key leaves the table and its clients are told, as if it had
/// changed (not broadcast: it did not change).
fn limit(shared: &Shared, t: &mut Table) {
    let max = shared.tracking.max_keys.load(Ordering::Relaxed);
    if max == 0 {
        return;
    }
    let mut rng = rand::rng();
    while t.keys.len() > max {
        let i = rng.random_range(0..t.keys.len());
        let Some((key, ids)) = t.keys.swap_remove_index(i) else {
            break;
        };
        t.items -= ids.len();
        let body = one_key(&key);
        for id in ids {
            if let Some(c) = t.clients.get(&id) {
                let m = c.tracking.load(Ordering::Relaxed);
                if m & mode::ON != 0 && m & mode::BCAST == 0 {
                    send(shared, c, &body);
                }
            }
        }
    }
}

/// Applies a lowered `tracking-table-max-keys` at once (CONFIG SET).
pub fn enforce_limit(shared: &Shared) {
    let mut t = shared.tracking.table.lock();
    limit(shared, &mut t);
    shared.tracking.publish_sizes(&t);
}

// --------------------------------------------------------------------------
// Turning tracking on and off.

/// CLIENT TRACKING ON's options.
pub struct Options {
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Box<[u8]>>,
}

/// Redis `enableTracking`: (re)enables tracking for `client` with
/// `opts`, which the caller checked.
pub fn enable(shared: &Shared, client: &mut Client, opts: Options) {
    let info = &client.info;
    let mut m = mode::ON;
    if opts.bcast {
        m |= mode::BCAST;
    }
    if opts.optin {
        m |= mode::OPTIN;
    }
    if opts.optout {
        m |= mode::OPTOUT;
    }
    if opts.noloop {
        m |= mode::NOLOOP;
    }
    let tr = &shared.tracking;
    let mut t = tr.table.lock();
    if t.clients.insert(client.id, info.clone()).is_none() {
        tr.count.fetch_add(1, Ordering::Relaxed);
    }
    info.redir.store(opts.redirect, Ordering::Relaxed);
    info.tracking.store(m, Ordering::Relaxed);
    if opts.bcast {
        let mut prefixes = opts.prefixes;
        if prefixes.is_empty() && client.tracking.prefixes.is_empty() {
            prefixes.push(Box::default());
        }
        for p in prefixes {
            let b = t.prefixes.entry(p.clone()).or_default();
            if !b.clients.contains(&client.id) {
                b.clients.push(client.id);
                client.tracking.prefixes.push(p);
            }
        }
    }
    tr.publish_sizes(&t);
    shared.engine.tracking.set_on(true);
}

/// Redis `disableTracking`, plus what Redis leaves for later: the
/// client's ids leave the key table now, so a closed client leaves nothing
/// behind. On CLIENT TRACKING OFF, RESET and disconnect.
pub fn disable(shared: &Shared, client: &mut Client) {
    let info = &client.info;
    if info.tracking.load(Ordering::Relaxed) & mode::ON == 0 {
        return;
    }
    let tr = &shared.tracking;
    let mut t = tr.table.lock();
    for p in client.tracking.prefixes.drain(..) {
        if let Some(b) = t.prefixes.get_mut(&p) {
            b.clients.retain(|id| *id != client.id);
            if b.clients.is_empty() {
                t.prefixes.remove(&p);
            }
        }
    }
    let id = client.id;
    let mut removed = 0;
    t.keys.retain(|_, ids| {
        let before = ids.len();
        ids.retain(|x| *x != id);
        removed += before - ids.len();
        !ids.is_empty()
    });
    t.items -= removed;
    if t.clients.remove(&id).is_some() {
        tr.count.fetch_sub(1, Ordering::Relaxed);
    }
    info.tracking.store(0, Ordering::Relaxed);
    info.redir.store(0, Ordering::Relaxed);
    client.tracking.caching = false;
    if t.clients.is_empty() {
        shared.engine.tracking.set_on(false);
    }
    tr.publish_sizes(&t);
}

/// Redis `checkPrefixCollisionsOrReply`: a new prefix may not be a prefix
/// of another one of the client's, old or new, nor the reverse.
pub fn check_prefixes(client: &Client, new: &[Box<[u8]>]) -> Result<(), CmdError> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    for (i, p) in new.iter().enumerate() {
        if let Some(old) = client.tracking.prefixes.iter().find(|o| overlap(o, p)) {
            return Err(CmdError::Bytes(
                [
                    b"ERR Prefix '".as_slice(),
                    p,
                    b"' overlaps with an existing prefix '",
                    old,
                    b"'. Prefixes for a single client must not overlap.",
                ]
                .concat(),
            ));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Err(CmdError::Bytes(
                [
                    b"ERR Prefix '".as_slice(),
                    p,
                    b"' overlaps with another provided prefix '",
                    q,
                    b"'. Prefixes for a single client must not overlap.",
                ]
                .concat(),
            ));
        }
    }
    Ok(())
}

/// Called by the dispatcher around each command that runs (EXEC's and a
/// script's commands included): registers a read-only command's keys for
/// a tracking client (see the module comment for why twice).
pub fn note_read(
    shared: &Shared,
    client: &Client,
    cmd: &crate::exec::table::Command,
    args: &crate::resp::ctx::Args,
) {
    let argv: SmallVec<[&[u8]; 8]> = args.iter_from(0).collect();
    if let Some(pos) = crate::exec::keys::keys_from_specs(&cmd.key_specs, &argv) {
        remember(shared, client, pos.into_iter().map(|i| argv[i]));
    }
}

/// True for a command whose keys a tracking client may cache: read-only,
/// not pub/sub (shard channels are keys only for routing), not a
/// read-only script (its commands register their own keys).
pub fn tracks_reads(cmd: &crate::exec::table::Command) -> bool {
    use crate::exec::table::flags;
    cmd.has(flags::READONLY)
        && !cmd.has(flags::PUBSUB)
        && !matches!(cmd.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
}
