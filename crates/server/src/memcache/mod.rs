//! The memcached protocol on Cairn's engine (issue 7). A connection
//! accepted on `memcached-port` is served by the same workers, event loop,
//! buffers, backpressure and limits as a RESP connection; only its bytes
//! are parsed by `cairn_protocol::memcache` and its commands run here
//! instead of in the RESP dispatcher. One file per command group:
//! `retrieval` (get, gets, gat, gats), `storage` (set, add, replace,
//! append, prepend, cas), `arith` (incr, decr), `keys` (delete, touch),
//! `meta` (mg, ms, md, ma, mn, me), `admin` (flush_all, version,
//! verbosity, quit, auth) and `stats`.
//!
//! Every item lives in database 0 as a Redis string (the mapping is in
//! `cairn_engine::ops::memcache` and docs/design.md, "memcached"). Commands
//! lock the shards of their keys like RESP commands, record keyspace events
//! and WATCH changes through the same engine hooks, and hand the events to
//! pub/sub after each command.
mod admin;
mod arith;
mod keys;
mod meta;
mod retrieval;
pub mod stats;
mod storage;

use crate::client::Client;
use crate::shared::{bump, Shared};
use cairn_engine::{CmdState, Cx, Expiry};
use cairn_protocol::memcache::{Auth, DataBlock, Decoded, Decoder, Limits, MetaCmd, Request};
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

/// Per-connection memcached state.
#[derive(Default)]
pub struct McConn {
    decoder: Decoder,
    /// The large data block of the request at the head of the buffer,
    /// read into a buffer of its own (`Stop::Block`).
    block: Option<DataBlock>,
}

impl McConn {
    pub fn new() -> Box<McConn> {
        Box::default()
    }

    /// The data block asked for by `Stop::Block` has fully arrived.
    pub fn set_block(&mut self, block: DataBlock) {
        self.block = Some(block);
    }
}

/// Large data blocks that have not fully arrived are read into a buffer of
/// their own by the worker (the same threshold as for RESP bulks).
const BIG_VALUE: usize = cairn_engine::value::string::LARGE_MIN;

/// Why `process` stopped.
pub enum Stop {
    /// Every complete request ran; more bytes are needed.
    NeedInput,
    /// Enough replies are pending that the rest must wait for the socket.
    OutputFull,
    /// A large data block starts at `at` (from `rpos`) and is `len` bytes
    /// long: read it into a buffer of its own, then `McConn::set_block`.
    Block { at: usize, len: usize },
    /// Close once the replies are written (quit).
    Closing,
    /// Close now, without a reply (a line too long to be a command).
    Abort,
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
        !crate::memory::make_room(self.shared, &self.ecx, 0)
    }
}

/// A memcached exptime at time `now_ms` (see `ops::memcache::expiry`).
pub fn expiry(exptime: i32, now_ms: u64) -> Expiry {
    cairn_engine::ops::memcache::expiry(exptime as i64, now_ms)
}

/// Parses and runs every complete request in `input[*rpos..]`, appending
/// replies to `out`. Mirrors the worker's RESP loop: stop when more bytes
/// are needed (`need` says how many), when `high_water` bytes of replies
/// are unsent (backpressure), or when the connection is to close.
#[allow(clippy::too_many_arguments)]
pub fn process(
    st: &mut McConn,
    input: &[u8],
    rpos: &mut usize,
    need: &mut usize,
    out: &mut Vec<u8>,
    unsent_from: usize,
    high_water: usize,
    client: &mut Client,
    shared: &Shared,
    worker: usize,
) -> Stop {
    let stats = &shared.memcache.stats[worker];
    let wstats = &shared.worker_stats[worker];
    while *rpos < input.len() {
        if out.len() - unsent_from + client.out_refs.pending() >= high_water {
            return Stop::OutputFull;
        }
        let buf = &input[*rpos..];
        if buf.len() < *need {
            break;
        }
        if !client.authenticated {
            match st.decoder.decode_auth(buf) {
                Auth::Incomplete { min_total } => {
                    *need = min_total;
                    break;
                }
                Auth::Close => return Stop::Abort,
                Auth::Reply { consumed, msg } => {
                    *need = 0;
                    *rpos += consumed;
                    out.extend_from_slice(msg.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                Auth::Credentials {
                    consumed,
                    user,
                    pass,
                } => {
                    *need = 0;
                    *rpos += consumed;
                    admin::authenticate(shared, client, stats, user, pass, out);
                }
            }
            continue;
        }
        // Eviction runs before each request, as for RESP commands.
        let evicted = CmdState::new();
        let no_memory = !crate::memory::make_room(shared, &Cx::background(&evicted), 0);
        crate::keyevents::after_command(shared, &evicted, None);
        let limits = Limits {
            max_value: shared.hot.proto_max_bulk_len.load(Ordering::Relaxed),
            no_memory,
            big_value: BIG_VALUE,
        };
        match st.decoder.decode_with(buf, &limits, st.block.as_ref()) {
            Decoded::Incomplete { min_total } => {
                *need = min_total;
                break;
            }
            Decoded::Block { at, len } => return Stop::Block { at, len },
            Decoded::Skipped { consumed } => {
                *need = 0;
                *rpos += consumed;
                stats.add(stats::Stat::BytesRead, consumed as u64);
            }
            Decoded::Close => return Stop::Abort,
            Decoded::Request { consumed, req } => {
                *need = 0;
                let before = out.len() + client.out_refs.pending();
                // One clock reading for the request and its state in the
                // engine, as for a RESP command (`dispatch::invoke`).
                let state = CmdState::new();
                let ecx = Cx::command(DB, None, cairn_engine::clock::now_ms(), &state);
                run_due_flush(shared, &ecx);
                let mut cx = Ctx {
                    shared,
                    out: &mut *out,
                    stats,
                    client: &mut *client,
                    ecx,
                };
                execute(&mut cx, req);
                crate::keyevents::after_command(shared, &state, None);
                client.note_journal_end(state.take_journal_end());
                bump(&wstats.commands, 1);
                let block_len = st.block.as_ref().map_or(0, |b| b.data.len() + 2);
                stats.add(stats::Stat::BytesRead, (consumed + block_len) as u64);
                let after = out.len() + client.out_refs.pending();
                stats.add(stats::Stat::BytesWritten, (after - before) as u64);
                *rpos += consumed;
                if let Some(b) = st.block.take() {
                    cairn_engine::lazyfree::release(b.data);
                }
                if client.close_after_reply {
                    return Stop::Closing;
                }
            }
        }
    }
    Stop::NeedInput
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

fn execute(cx: &mut Ctx, req: Request) {
    if cx.shared.snapshots.loading.load(Ordering::Relaxed) {
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
            cx.reply("SERVER_ERROR loading the dataset in memory", noreply);
            return;
        }
    }
    if let Some(noreply) = write_of(&req) {
        if let Some(why) = crate::resp::dispatch::writes_denied(cx.shared) {
            // As RESP writes get MISCONF: nothing is stored that the
            // journal or the save rules could not keep. memcached has no
            // disk; its error line for "cannot store now" is SERVER_ERROR.
            cx.reply(&format!("SERVER_ERROR {why}"), noreply);
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
