//! Pub/Sub: channels, patterns and shard channels, and delivery to
//! subscribers on any worker (Redis 7.0 `pubsub.c`, `notify.c`).
//!
//! Two sides hold the subscriptions, as in Redis:
//! - the registry (`PubSub`, in `Shared`): name -> subscribers, each
//!   subscriber a (client id, worker) pair, behind one mutex. PUBLISH looks
//!   the channel up and matches every pattern under that lock;
//!   (un)subscribing changes it under the same lock.
//! - the client side (`ClientSubs`, in `Client`): what one connection is
//!   subscribed to, touched only by its own worker. It gives the counts in
//!   the replies, the order of an argument-less (P|S)UNSUBSCRIBE, the
//!   subscribed-state checks, and lets a worker drop a message that raced
//!   with an UNSUBSCRIBE.
//!
//! Delivery. A published message is encoded once, as its RESP3 push frame
//! (`>3` / `>4`); the RESP2 form differs only in the first byte (`*`), so
//! each subscriber gets the frame with its own protocol's header byte. The
//! subscribers are grouped by worker, and each worker gets one mailbox
//! message (`Msg::Pubsub`) per PUBLISH holding the shared frames and its
//! (client, frame) targets; it appends to those connections' output
//! buffers and writes them at the end of its loop turn. The mailboxes are
//! filled while the registry lock is held, so every subscriber sees
//! messages in one global order, as with Redis's single thread.
//!
//! The connection running the command is served without the mailbox: its
//! pushes (subscribe confirmations, a message a RESP3 client publishes to
//! itself, keyspace notifications of its own writes) are collected on the
//! side (`begin_command` / `place_pushes`, called by the dispatcher) and put
//! before the command's reply, where Redis writes them. They are pushes,
//! so CLIENT REPLY OFF/SKIP does not drop them (Redis's `CLIENT_PUSHING`).
//!
//! Slow subscribers: each delivery checks the connection's unsent output
//! against `client-output-buffer-limit pubsub` (hard limit, or soft limit
//! held for longer than its seconds) and closes the connection with
//! Redis's log line when it is over, so a subscriber that never reads
//! cannot make the server's memory grow without bound.
use crate::client::Client;
use crate::exec::table::Command;
use crate::resp::ctx::Args;
use crate::resp::errors::CmdError;
use crate::shared::{Msg, Shared};
use cairn_engine::events::class as notify_class;
use cairn_engine::util::glob::glob_match;
use cairn_protocol::resp::{Protocol, ReplyWriter};
use parking_lot::Mutex;
use smallvec::SmallVec;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The three kinds of subscription. Each has its own namespace: a channel,
/// a pattern and a shard channel may share a name without meeting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Channel = 0,
    /// PSUBSCRIBE: a glob pattern matched against PUBLISH's channel.
    Pattern = 1,
    /// SSUBSCRIBE / SPUBLISH (never matched by patterns).
    Shard = 2,
}

impl Kind {
    fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// Subscribers of one name: client id -> the worker owning the connection.
/// Delivery order between different clients is not observable, so a hash
/// map (O(1) to join and leave) is enough.
type Subscribers = hashbrown::HashMap<u64, usize>;

/// Name -> subscribers, one map per `Kind`.
#[derive(Default)]
struct Registry {
    maps: [hashbrown::HashMap<Box<[u8]>, Subscribers>; 3],
}

impl Registry {
    /// Adds a subscriber; the caller knows it was not subscribed yet.
    fn add(&mut self, kind: Kind, name: &[u8], id: u64, worker: usize) {
        let map = &mut self.maps[kind as usize];
        match map.get_mut(name) {
            Some(subs) => {
                subs.insert(id, worker);
            }
            None => {
                let mut subs = Subscribers::new();
                subs.insert(id, worker);
                map.insert(name.into(), subs);
            }
        }
    }

    /// Removes a subscriber, and the name once nobody is left (so channels
    /// nobody listens to cost nothing, as in Redis).
    fn remove(&mut self, kind: Kind, name: &[u8], id: u64) {
        let map = &mut self.maps[kind as usize];
        if let Some(subs) = map.get_mut(name) {
            subs.remove(&id);
            if subs.is_empty() {
                map.remove(name);
            }
        }
    }

    fn names(&self) -> usize {
        self.maps.iter().map(|m| m.len()).sum()
    }
}

/// Channel or pattern names.
pub type Names = Vec<Box<[u8]>>;

/// The server-wide registry of subscriptions.
#[derive(Default)]
pub struct PubSub {
    registry: Mutex<Registry>,
    /// Names with at least one subscriber, all kinds together. Zero lets
    /// PUBLISH and keyspace notifications return without taking the lock.
    active: AtomicUsize,
}

/// What INFO reports: distinct channels, patterns and shard channels.
pub struct Counts {
    pub channels: usize,
    pub patterns: usize,
    pub shard_channels: usize,
}

impl PubSub {
    /// The channels (plain and shard) and patterns client `id` holds, for
    /// ACL checks from another thread (a scan: only when rules change).
    pub fn subscriptions_of(&self, id: u64) -> (Names, Names) {
        let r = self.registry.lock();
        let of = |m: &hashbrown::HashMap<Box<[u8]>, Subscribers>| -> Vec<Box<[u8]>> {
            m.iter()
                .filter(|(_, s)| s.contains_key(&id))
                .map(|(n, _)| n.clone())
                .collect()
        };
        let mut channels = of(&r.maps[0]);
        channels.extend(of(&r.maps[2]));
        (channels, of(&r.maps[1]))
    }

    pub fn counts(&self) -> Counts {
        let r = self.registry.lock();
        Counts {
            channels: r.maps[0].len(),
            patterns: r.maps[1].len(),
            shard_channels: r.maps[2].len(),
        }
    }

    /// PUBSUB (SHARD)CHANNELS: the names of `kind` with subscribers,
    /// matching `pattern` if given (as Redis, with the matcher's quirk that
    /// `*` does not match the empty channel name).
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        let r = self.registry.lock();
        r.maps[kind as usize]
            .keys()
            .filter(|n| pattern.is_none_or(|p| glob_match(p, n, false)))
            .cloned()
            .collect()
    }

    /// PUBSUB (SHARD)NUMSUB: the subscriber count of each name.
    pub fn subscriber_counts(&self, kind: Kind, names: &[&[u8]]) -> Vec<usize> {
        let r = self.registry.lock();
        let map = &r.maps[kind as usize];
        names
            .iter()
            .map(|n| map.get(*n).map_or(0, |s| s.len()))
            .collect()
    }

    fn lock(&self) -> RegistryGuard<'_> {
        RegistryGuard {
            active: &self.active,
            reg: self.registry.lock(),
        }
    }
}

/// The locked registry; keeps `active` in step when released.
struct RegistryGuard<'a> {
    active: &'a AtomicUsize,
    reg: parking_lot::MutexGuard<'a, Registry>,
}

impl Drop for RegistryGuard<'_> {
    fn drop(&mut self) {
        self.active.store(self.reg.names(), Ordering::Release);
    }
}

/// One connection's subscriptions (Redis's `c->pubsub_channels`,
/// `c->pubsub_patterns`, `c->pubsubshard_channels`).
#[derive(Default)]
pub struct ClientSubs {
    /// Per kind: name -> when it was subscribed (a sequence number), so an
    /// argument-less unsubscribe goes in subscription order. That is
    /// Redis 7.0's order for patterns (a list); for channels Redis follows
    /// its dict's hash order, which is arbitrary, so this order is as good.
    sets: [hashbrown::HashMap<Box<[u8]>, u64>; 3],
    next: u64,
    /// Unix second at which the output first went over the soft limit
    /// while delivering (Redis `obuf_soft_limit_reached_time`); 0 if not.
    soft_since: u64,
}

impl ClientSubs {
    /// Subscriptions of every kind; non-zero is Redis's `CLIENT_PUBSUB`.
    pub fn total(&self) -> usize {
        self.sets.iter().map(|s| s.len()).sum()
    }

    pub fn count(&self, kind: Kind) -> usize {
        self.sets[kind as usize].len()
    }

    /// True while subscribed to anything (CLIENT LIST flag `P`).
    pub fn active(&self) -> bool {
        self.total() > 0
    }

    /// The count in a confirmation: channels + patterns for those
    /// (`clientSubscriptionsCount`), shard channels for shard ones.
    fn reply_count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.count(Kind::Channel) + self.count(Kind::Pattern),
            Kind::Shard => self.count(Kind::Shard),
        }
    }

    fn contains(&self, kind: Kind, name: &[u8]) -> bool {
        self.sets[kind as usize].contains_key(name)
    }

    /// Adds a subscription; false if it was there already.
    fn add(&mut self, kind: Kind, name: &[u8]) -> bool {
        let set = &mut self.sets[kind as usize];
        if set.contains_key(name) {
            return false;
        }
        self.next += 1;
        set.insert(name.into(), self.next);
        true
    }

    fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        self.sets[kind as usize].remove(name).is_some()
    }

    /// The names of one kind, in subscription order.
    fn ordered(&self, kind: Kind) -> Vec<Box<[u8]>> {
        let mut all: Vec<(&Box<[u8]>, u64)> = self.sets[kind as usize]
            .iter()
            .map(|(n, &seq)| (n, seq))
            .collect();
        all.sort_unstable_by_key(|&(_, seq)| seq);
        all.into_iter().map(|(n, _)| n.clone()).collect()
    }
}

/// Copies the client's counts where CLIENT LIST and CLIENT KILL TYPE read
/// them from other threads.
fn sync_info(c: &Client) {
    let s = &c.subs;
    let i = &c.info;
    i.sub.store(s.count(Kind::Channel), Ordering::Relaxed);
    i.psub.store(s.count(Kind::Pattern), Ordering::Relaxed);
    i.ssub.store(s.count(Kind::Shard), Ordering::Relaxed);
}

// --------------------------------------------------------------------------
// The running command's own pushes.

/// Pushes a client's own running command addressed to it (kept in its
/// `Client`), so they land around that command's reply instead of going
/// through the worker's mailbox after it.
#[derive(Default)]
pub struct SelfPushes {
    out: Vec<u8>,
    /// The pushes go after the command's reply instead of before it.
    after_reply: bool,
}

/// Called by the dispatcher before a command runs: from now on, pushes to
/// `client` are collected for `place_pushes`.
pub fn begin_command(client: &mut Client) {
    client.pushes.out.clear();
    client.pushes.after_reply = false;
}

/// Puts the pushes collected so far for the running client in front of
/// the reply that starts at `reply_start` in `out`, or after it for the
/// commands where Redis replies first (see `before_run`). They are pushes,
/// so CLIENT REPLY OFF/SKIP keeps them. EXEC calls it after each queued
/// command, so a queued SUBSCRIBE's confirmations land inside EXEC's
/// reply where Redis writes them. Returns where bytes were inserted before
/// the end of `out`, and how many, so references to large values placed
/// after that point (`crate::outref`) can move with them.
pub fn place_pushes(
    client: &mut Client,
    out: &mut Vec<u8>,
    reply_start: usize,
) -> Option<(usize, usize)> {
    let s = &mut client.pushes;
    let after = std::mem::take(&mut s.after_reply);
    if s.out.is_empty() {
        return None;
    }
    let at = if after {
        out.len()
    } else {
        reply_start.min(out.len())
    };
    let inserted = if at == out.len() {
        out.extend_from_slice(&s.out);
        None
    } else {
        out.splice(at..at, s.out.iter().copied());
        Some((at, s.out.len()))
    };
    s.out.clear();
    inserted
}

// --------------------------------------------------------------------------
// Subscribing.

/// Writes a (p|s)(un)subscribe confirmation: `[word, name or null, count]`.
fn confirm(w: &mut ReplyWriter, word: &[u8], name: Option<&[u8]>, count: usize) {
    w.push(3);
    w.bulk(word);
    match name {
        Some(n) => w.bulk(n),
        None => w.null(),
    }
    w.int(count as i64);
}

/// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE name [name ...]: subscribes to each
/// name not yet subscribed and confirms every one, in order.
pub fn subscribe<'a>(
    shared: &Shared,
    client: &mut Client,
    kind: Kind,
    names: impl Iterator<Item = &'a [u8]>,
) {
    let mut reg = shared.pubsub.lock();
    let (id, worker) = (client.id, client.info.worker());
    let w = &mut ReplyWriter::new(&mut client.pushes.out, client.proto);
    for name in names {
        if client.subs.add(kind, name) {
            reg.reg.add(kind, name, id, worker);
        }
        confirm(
            w,
            kind.subscribe_word(),
            Some(name),
            client.subs.reply_count(kind),
        );
    }
    drop(reg);
    sync_info(client);
}

/// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE [name ...]: leaves each name
/// (or, with none given, every name of the kind, in subscription order)
/// and confirms each; with nothing to leave, one confirmation with a null
/// name.
pub fn unsubscribe(shared: &Shared, client: &mut Client, kind: Kind, names: &[&[u8]]) {
    let mut reg = shared.pubsub.lock();
    let id = client.id;
    let word = kind.unsubscribe_word();
    let w = &mut ReplyWriter::new(&mut client.pushes.out, client.proto);
    if names.is_empty() {
        let all = client.subs.ordered(kind);
        if all.is_empty() {
            confirm(w, word, None, client.subs.reply_count(kind));
        }
        for name in all {
            client.subs.remove(kind, &name);
            reg.reg.remove(kind, &name, id);
            confirm(w, word, Some(&name), client.subs.reply_count(kind));
        }
    } else {
        for &name in names {
            if client.subs.remove(kind, name) {
                reg.reg.remove(kind, name, id);
            }
            confirm(w, word, Some(name), client.subs.reply_count(kind));
        }
    }
    drop(reg);
    sync_info(client);
}

/// Drops every subscription of the client without a word to it: on
/// disconnect and RESET (`pubsubUnsubscribeAll*(c, 0)`).
pub fn drop_client(shared: &Shared, client: &mut Client) {
    if !client.subs.active() {
        return;
    }
    let mut reg = shared.pubsub.lock();
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for (name, _) in client.subs.sets[kind as usize].drain() {
            reg.reg.remove(kind, &name, client.id);
        }
    }
    drop(reg);
    client.subs.soft_since = 0;
    sync_info(client);
}

/// Removes clients `ids` from the registry, from another thread than
/// their own (CLIENT KILL): no PUBLISH reaches them any more, as after
/// Redis's synchronous `freeClient`. Their own worker calls `drop_client`
/// when it closes them, which then finds nothing left to remove.
pub fn forget(shared: &Shared, ids: &[u64]) {
    if ids.is_empty() {
        return;
    }
    let mut reg = shared.pubsub.lock();
    for map in reg.reg.maps.iter_mut() {
        map.retain(|_, subs| {
            for id in ids {
                subs.remove(id);
            }
            !subs.is_empty()
        });
    }
}

/// Called by the dispatcher once `cmd` passed the arity, auth and memory
/// checks. Returns Redis 7.0's refusal (`processCommand`) if the client is
/// in RESP2 with subscriptions: it may then only run the (un)subscribe
/// commands, PING, QUIT and RESET (in RESP3, replies and pushes are told
/// apart, so everything is allowed).
///
/// Also notes where the command's own pushes go: Redis writes keyspace
/// notifications where the command raises them, which for most writes is
/// before the reply, but GETSET, GETDEL, GETEX, SET ... GET, HSET, HMSET,
/// HSETNX, HINCRBY and HINCRBYFLOAT reply first.
pub fn before_run(
    shared: &Shared,
    client: &mut Client,
    cmd: &Command,
    args: &Args,
) -> Option<CmdError> {
    if shared.pubsub.active.load(Ordering::Relaxed) > 0 && replies_first(cmd.name, args) {
        client.pushes.after_reply = true;
    }
    if client.proto != Protocol::Resp2 || !client.subs.active() {
        return None;
    }
    let top = match cmd.name.split_once('|') {
        Some((parent, _)) => parent,
        None => cmd.name,
    };
    match top {
        "ping" | "subscribe" | "ssubscribe" | "unsubscribe" | "sunsubscribe" | "psubscribe"
        | "punsubscribe" | "quit" | "reset" => None,
        _ => Some(crate::resp::errors::subscribed_context(cmd.name)),
    }
}

/// True for the commands whose reply Redis writes before the keyspace
/// notifications they raise (see `before_run`).
fn replies_first(name: &str, args: &Args) -> bool {
    match name {
        "getset" | "getdel" | "getex" | "hset" | "hmset" | "hsetnx" | "hincrby"
        | "hincrbyfloat" => true,
        "set" => args.iter_from(3).any(|a| a.eq_ignore_ascii_case(b"get")),
        _ => false,
    }
}

// --------------------------------------------------------------------------
// Publishing.

/// One frame of a published message: `message`/`smessage` (channel
/// subscribers) or `pmessage` (subscribers of `pattern`).
struct Frame {
    /// The RESP3 push; RESP2 replaces the leading `>` with `*`.
    bytes: Box<[u8]>,
    /// The pattern a `pmessage` frame is for.
    pattern: Option<Box<[u8]>>,
}

/// A published message as every worker shares it.
pub struct Published {
    /// `Channel` or `Shard`: which subscriptions the message frame is for.
    kind: Kind,
    channel: Box<[u8]>,
    frames: Vec<Frame>,
}

/// One worker's part of a PUBLISH: the shared frames and, in delivery
/// order, which client gets which frame.
pub struct Batch {
    msg: Arc<Published>,
    targets: Vec<(u64, u32)>,
}

impl Batch {
    /// The (client id, frame) pairs, in delivery order.
    pub fn targets(&self) -> &[(u64, u32)] {
        &self.targets
    }

    /// Appends frame `frame` to `out` for `client`, unless the client has
    /// left the channel or pattern since the message was published (its
    /// UNSUBSCRIBE ran while the message was on its way). True if written.
    pub fn write(&self, frame: u32, client: &Client, out: &mut Vec<u8>) -> bool {
        let Some(f) = self.msg.frames.get(frame as usize) else {
            return false;
        };
        let still = match &f.pattern {
            Some(p) => client.subs.contains(Kind::Pattern, p),
            None => client.subs.contains(self.msg.kind, &self.msg.channel),
        };
        if !still {
            return false;
        }
        write_frame(&f.bytes, client.proto, out);
        true
    }
}

fn write_frame(bytes: &[u8], proto: Protocol, out: &mut Vec<u8>) {
    out.reserve(bytes.len());
    out.push(match proto {
        Protocol::Resp2 => b'*',
        Protocol::Resp3 => b'>',
    });
    out.extend_from_slice(&bytes[1..]);
}

/// Encodes `[word, pattern?, channel, message]` as a RESP3 push.
fn encode(word: &[u8], pattern: Option<&[u8]>, channel: &[u8], message: &[u8]) -> Box<[u8]> {
    let mut out = Vec::with_capacity(48 + word.len() + channel.len() + message.len());
    let mut w = ReplyWriter::new(&mut out, Protocol::Resp3);
    w.push(if pattern.is_some() { 4 } else { 3 });
    w.bulk(word);
    if let Some(p) = pattern {
        w.bulk(p);
    }
    w.bulk(channel);
    w.bulk(message);
    out.into_boxed_slice()
}

/// Who gets one frame of a message: subscribers of the channel (pattern
/// None) or of one matching pattern.
type Group<'a> = (&'a Subscribers, Option<&'a [u8]>);

/// PUBLISH (`shard` false) or SPUBLISH (`shard` true): delivers `message`
/// to the subscribers of `channel` and, for PUBLISH, to those of every
/// matching pattern (a client subscribed both ways gets both, the channel's
/// first). Returns the number of deliveries, as Redis counts receivers.
/// `me` is the client whose command publishes, if any: what it receives
/// itself lands around that command's reply (`SelfPushes`).
pub fn publish(
    shared: &Shared,
    mut me: Option<&mut Client>,
    shard: bool,
    channel: &[u8],
    message: &[u8],
) -> usize {
    let ps = &shared.pubsub;
    if ps.active.load(Ordering::Acquire) == 0 {
        return 0;
    }
    let reg = ps.registry.lock();
    let kind = if shard { Kind::Shard } else { Kind::Channel };
    // Who gets what: the message frame, then each matching pattern's.
    let mut groups: SmallVec<[Group; 4]> = SmallVec::new();
    if let Some(subs) = reg.maps[kind as usize].get(channel) {
        groups.push((subs, None));
    }
    if !shard {
        for (pattern, subs) in &reg.maps[Kind::Pattern as usize] {
            if glob_match(pattern, channel, false) {
                groups.push((subs, Some(&**pattern)));
            }
        }
    }
    if groups.is_empty() {
        return 0;
    }
    let word: &[u8] = if shard { b"smessage" } else { b"message" };
    let msg = Arc::new(Published {
        kind,
        channel: channel.into(),
        frames: groups
            .iter()
            .map(|&(_, pattern)| Frame {
                bytes: match pattern {
                    None => encode(word, None, channel, message),
                    Some(p) => encode(b"pmessage", Some(p), channel, message),
                },
                pattern: pattern.map(Into::into),
            })
            .collect(),
    });
    let workers = shared.workers();
    let mut per_worker: SmallVec<[Vec<(u64, u32)>; 8]> =
        (0..workers.len()).map(|_| Vec::new()).collect();
    let my_id = me.as_ref().map_or(0, |c| c.id);
    let mut receivers = 0;
    for (frame, (subs, _)) in groups.iter().enumerate() {
        for (&id, &worker) in subs.iter() {
            receivers += 1;
            if id == my_id {
                if let Some(c) = me.as_deref_mut() {
                    write_frame(&msg.frames[frame].bytes, c.proto, &mut c.pushes.out);
                }
            } else if let Some(list) = per_worker.get_mut(worker) {
                list.push((id, frame as u32));
            }
        }
    }
    // Filled under the registry lock (one global order); woken after it.
    let mut wake: SmallVec<[usize; 8]> = SmallVec::new();
    for (w, targets) in per_worker.into_iter().enumerate() {
        if !targets.is_empty() {
            workers[w].mailbox.lock().push(Msg::Pubsub(Batch {
                msg: msg.clone(),
                targets,
            }));
            wake.push(w);
        }
    }
    drop(groups);
    drop(reg);
    for w in wake {
        // A failed wake means the worker is shutting down.
        let _ = workers[w].waker.wake();
    }
    receivers
}

/// Publishes a keyspace notification (Redis `notifyKeyspaceEvent`): on
/// `__keyspace@<db>__:<key>` and/or `__keyevent@<db>__:<event>` as
/// `notify-keyspace-events` enables them. `class` is already known to be
/// enabled.
pub fn keyspace_event(
    shared: &Shared,
    mut me: Option<&mut Client>,
    class: u32,
    event: &str,
    db: usize,
    key: &[u8],
) {
    let flags = shared.engine.limits.notify.load(Ordering::Relaxed);
    if flags & class == 0 || shared.pubsub.active.load(Ordering::Acquire) == 0 {
        return;
    }
    if flags & notify_class::KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        publish(shared, me.as_deref_mut(), false, &channel, event.as_bytes());
    }
    if flags & notify_class::KEYEVENT != 0 {
        let channel = format!("__keyevent@{db}__:{event}");
        publish(shared, me, false, channel.as_bytes(), key);
    }
}

// --------------------------------------------------------------------------
// Output buffer limits.

/// Redis `checkClientOutputBufferLimits` for a subscriber that was just
/// handed a message, with `pending` bytes of output unsent: true if the
/// connection must be closed (at or over the hard limit, or over the soft
/// limit for longer than its seconds). Limits of 0 are off.
///
/// Redis counts only the reply list beyond its 16 KiB static buffer;
/// Cairn has one buffer and counts all unsent bytes of it.
pub fn over_output_limit(shared: &Shared, client: &mut Client, pending: usize) -> bool {
    let h = &shared.hot;
    let hard = h.pubsub_obuf_hard.load(Ordering::Relaxed);
    let soft = h.pubsub_obuf_soft.load(Ordering::Relaxed);
    let used = pending as u64;
    if hard != 0 && used >= hard {
        return true;
    }
    if soft != 0 && used >= soft {
        let now = cairn_engine::clock::now_ms() / 1000;
        let secs = h.pubsub_obuf_soft_secs.load(Ordering::Relaxed);
        let since = &mut client.subs.soft_since;
        if *since == 0 {
            *since = now;
            return false;
        }
        return now.saturating_sub(*since) > secs;
    }
    client.subs.soft_since = 0;
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_differ_only_in_the_header_byte() {
        let f = encode(b"message", None, b"ch", b"hello");
        assert_eq!(&*f, b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n");
        let mut out = Vec::new();
        write_frame(&f, Protocol::Resp2, &mut out);
        assert_eq!(out, b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n");
        let p = encode(b"pmessage", Some(b"c*"), b"ch", b"");
        assert_eq!(
            &*p,
            b">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$0\r\n\r\n"
        );
    }

    #[test]
    fn registry_drops_names_nobody_listens_to() {
        let mut r = Registry::default();
        r.add(Kind::Channel, b"a", 1, 0);
        r.add(Kind::Channel, b"a", 2, 1);
        r.add(Kind::Pattern, b"a", 1, 0);
        assert_eq!(r.names(), 2);
        r.remove(Kind::Channel, b"a", 1);
        assert_eq!(r.maps[0][&b"a"[..]].len(), 1);
        r.remove(Kind::Channel, b"a", 2);
        r.remove(Kind::Channel, b"nosuch", 2);
        assert_eq!(r.names(), 1);
        r.remove(Kind::Pattern, b"a", 1);
        assert_eq!(r.names(), 0);
    }

    #[test]
    fn client_side_keeps_subscription_order_and_counts() {
        let mut s = ClientSubs::default();
        assert!(s.add(Kind::Pattern, b"z*"));
        assert!(s.add(Kind::Pattern, b"a*"));
        assert!(!s.add(Kind::Pattern, b"z*"));
        assert!(s.add(Kind::Channel, b"c"));
        assert!(s.add(Kind::Shard, b"c"));
        assert_eq!(s.reply_count(Kind::Channel), 3);
        assert_eq!(s.reply_count(Kind::Shard), 1);
        assert_eq!(s.total(), 4);
        let order: Vec<&[u8]> = vec![b"z*", b"a*"];
        let got = s.ordered(Kind::Pattern);
        assert_eq!(got.iter().map(|b| &**b).collect::<Vec<_>>(), order);
        assert!(s.remove(Kind::Channel, b"c"));
        assert!(!s.remove(Kind::Channel, b"c"));
        assert!(s.contains(Kind::Shard, b"c"));
    }
}
