//! Runs one parsed RESP request: finds the command, checks arity, auth and
//! MULTI's rules, asks `admission` (memory, MISCONF, loading, pause), times
//! the handler, and keeps the statistics, the slow log and MONITOR fed.
//! Steps 3 and 7 of the request path in shared/STYLE.md.
use crate::client::{Client, ReplyMode};
use crate::exec::admission;
use crate::exec::table::{flags, Command};
use crate::resp::ctx::{Args, Ctx};
use crate::resp::errors::{unknown_command, CmdError};
use crate::shared::{bump, Msg, Shared, WorkerStats};
use cairn_engine::{CmdState, Cx};
use cairn_protocol::resp::{ArgList, ReplyWriter};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What became of a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It ran (or was refused with an error reply).
    Done,
    /// CLIENT PAUSE holds it back; run it again later, unchanged.
    Paused,
    /// A blocking command found nothing: it waits on the keys in
    /// `Client::wants_block` and runs again, unchanged, when one is ready.
    Blocked,
    /// A value it reads is on disk and not in the page cache: it runs
    /// again, unchanged, once the I/O threads have read it
    /// (`crate::tier_io`).
    Parked,
}

/// Finds the command (or subcommand) a request names, or the error to send.
/// As in Redis (`lookupCommandLogic`), a command with subcommands picks one
/// whenever a second argument is present; run on its own it runs its own
/// handler if it has one (COMMAND), else fails the arity check (CONFIG).
pub fn resolve<'t>(shared: &'t Shared, args: &Args) -> Result<&'t Command, CmdError> {
    let name = args.get(0);
    let Some(cmd) = shared.table.lookup(name) else {
        return Err(unknown_command(name, args.iter_from(1)));
    };
    if cmd.subs.is_empty() || (args.len() < 2 && cmd.handler.is_some()) {
        return Ok(cmd);
    }
    if args.len() < 2 {
        return Err(CmdError::WrongArity(cmd.name));
    }
    let sub = args.get(1);
    shared
        .table
        .lookup_sub(cmd, sub)
        .ok_or_else(|| CmdError::UnknownSubcommand {
            sub: sub.to_vec(),
            parent: cmd.name,
        })
}

/// Executes one request and appends its reply (if any) to `out`.
pub fn execute(
    shared: &Shared,
    client: &mut Client,
    args: Args,
    out: &mut Vec<u8>,
    stats: &WorkerStats,
) -> Outcome {
    // CLIENT REPLY SKIP drops whatever the next command answers, errors
    // raised before it runs included.
    let skip_this = client.reply_mode == ReplyMode::Skip;
    if skip_this {
        client.reply_mode = ReplyMode::On;
    }
    // Invalidations other threads queued before this command go before its
    // reply: if it reads a key they name, it reads the new value.
    crate::tracking::drain_inbox(&client.info, out);
    let start_len = out.len();
    client.redact = 0;
    crate::pubsub::begin_command(client);
    // The command's state in the engine (staged records, events, journal
    // end): a local, so a command run inside this one shares it and
    // nothing of it is left on the thread.
    let state = CmdState::new();
    state.set_client(client.id);
    let base = Cx::command(client.db, None, 0, &state);
    let fed_before = shared.replication.end_hint();
    let outcome = run(shared, client, args, out, stats, &base);
    // Redis's `call`: the stream moved during the command, so its end is
    // the client's write offset (another client's write in between only
    // makes WAIT wait a little longer, never less).
    let fed_after = shared.replication.end_hint();
    if fed_after != fed_before {
        client.woff = fed_after;
    }
    // CLIENT CACHING applies to the next command only (a transaction's
    // commands count as one, up to EXEC); CLIENT's own subcommands keep it
    // (Redis `resetClient`).
    if client.tracking.caching
        && client.multi.is_none()
        && !args.get(0).eq_ignore_ascii_case(b"client")
    {
        client.tracking.caching = false;
    }
    crate::keyevents::after_command(shared, &state, Some(&mut *client));
    crate::served::settle(client);
    client.note_journal_end(state.take_journal_end());
    if outcome != Outcome::Done {
        if skip_this {
            client.reply_mode = ReplyMode::Skip;
        }
        return outcome;
    }
    // CLIENT REPLY ON clears a pending SKIP before it answers, so its own
    // +OK is sent (Redis clears CLIENT_REPLY_SKIP in the command).
    let skip_this = skip_this && !is_reply_on(&args);
    if skip_this || client.reply_mode == ReplyMode::Off {
        out.truncate(start_len);
        client.out_refs.truncate(start_len);
    }
    if let Some((at, len)) = crate::pubsub::place_pushes(client, out, start_len) {
        client.out_refs.shift(at, len);
    }
    // A tracking client's invalidations of its own writes (and any that
    // arrived while it ran) follow its reply, as Redis 7.0 sends
    // `tracking_pending_keys` after the command.
    crate::tracking::drain_inbox(&client.info, out);
    outcome
}

/// `CLIENT REPLY ON`, in any case.
fn is_reply_on(args: &Args) -> bool {
    args.len() == 3
        && args.get(0).eq_ignore_ascii_case(b"client")
        && args.get(1).eq_ignore_ascii_case(b"reply")
        && args.get(2).eq_ignore_ascii_case(b"on")
}

fn run(
    shared: &Shared,
    client: &mut Client,
    args: Args,
    out: &mut Vec<u8>,
    stats: &WorkerStats,
    base: &Cx,
) -> Outcome {
    crate::auth::refresh(shared, client);
    let cmd = match resolve(shared, &args) {
        Ok(c) => c,
        Err(e) => {
            flag_transaction(client);
            write_error(out, client, &e, stats);
            return Outcome::Done;
        }
    };
    client.running = cmd.name;
    if let Some(e) = refusal(shared, base, client, cmd, &args) {
        // Redis `rejectCommand`: a refusal inside MULTI dooms the
        // transaction; a refused EXEC discards it.
        bump(&stats.cmd[cmd.id][2], 1);
        flag_transaction(client);
        let e = if cmd.name == "exec" {
            crate::client::discard_transaction(shared, base, client);
            // Redis formats the refusal without its "ERR " (shared errors
            // such as OOM keep their own code).
            crate::resp::errors::exec_abort(&e)
        } else {
            e
        };
        write_error(out, client, &e, stats);
        return Outcome::Done;
    }
    if shared.cluster.enabled() && cluster_refuses(shared, client, cmd, &args) {
        // Redis `processCommand` after `getNodeByQuery` fails: EXEC drops
        // the transaction, a queued command dooms it; the reply is the
        // bare CROSSSLOT error either way (no EXECABORT).
        bump(&stats.cmd[cmd.id][2], 1);
        if cmd.name == "exec" {
            crate::client::discard_transaction(shared, base, client);
        } else {
            flag_transaction(client);
        }
        let e = CmdError::text(crate::resp::errors::CROSSSLOT);
        write_error(out, client, &e, stats);
        return Outcome::Done;
    }
    if let Some(e) = crate::pubsub::before_run(shared, client, cmd, &args) {
        bump(&stats.cmd[cmd.id][2], 1);
        write_error(out, client, &e, stats);
        return Outcome::Done;
    }
    if !cmd.has(flags::ALLOW_BUSY) {
        if let Some(busy) = shared.scripts.busy_error() {
            bump(&stats.cmd[cmd.id][2], 1);
            flag_transaction(client);
            write_error(out, client, &CmdError::text(busy), stats);
            return Outcome::Done;
        }
    }
    if admission::paused(shared, base, holds_writes(shared, client, cmd, &args)) {
        return Outcome::Paused;
    }
    if let Some(m) = &mut client.multi {
        if !RUN_IN_MULTI.contains(&cmd.name) {
            m.queued
                .push((cmd.id, ArgList::from_args(args.iter_from(0))));
            m.denyoom |= cmd.has(flags::DENYOOM);
            client
                .info
                .multi
                .store(m.queued.len() as i64, Ordering::Relaxed);
            ReplyWriter::new(out, client.proto).simple("QUEUED");
            return Outcome::Done;
        }
    }
    invoke(shared, client, cmd, args, out, stats, base)
}

/// Cluster mode: true when the keys of `cmd` (or of EXEC's queued
/// commands) hash to more than one slot (`crate::cluster::cross_slot`).
fn cluster_refuses(shared: &Shared, client: &Client, cmd: &Command, args: &Args) -> bool {
    let argv: smallvec::SmallVec<[&[u8]; 8]> = args.iter_from(0).collect();
    crate::cluster::cross_slot(shared, client, cmd, &argv)
}

/// True if CLIENT PAUSE WRITE holds `cmd` back: it writes or may
/// replicate (a script by its flags), or it is an EXEC whose queued
/// commands do (Redis 7.0 `processCommand`'s `is_may_replicate_command`).
fn holds_writes(shared: &Shared, client: &Client, cmd: &Command, args: &Args) -> bool {
    may_replicate(shared, cmd, args)
        || (cmd.name == "exec"
            && client.multi.as_ref().is_some_and(|m| {
                m.queued.iter().any(|(id, list)| {
                    may_replicate(shared, shared.table.get(*id), &Args::new(&[], list))
                })
            }))
}

/// `cmd` writes or may replicate; a script (EVAL, EVALSHA, FCALL) by the
/// flags it declared (`crate::script::may_write`).
fn may_replicate(shared: &Shared, cmd: &Command, args: &Args) -> bool {
    const WRITES: u32 = flags::WRITE | flags::MAY_REPLICATE;
    cmd.has(WRITES)
        || (matches!(cmd.name, "eval" | "evalsha" | "fcall")
            && args.len() > 1
            && crate::script::may_write(shared, cmd.name, args.get(1)))
}

/// An EXEC with a queued command that writes (Redis's `is_write_command`
/// for EXEC: `mstate.cmd_flags & CMD_WRITE`).
fn exec_writes(shared: &Shared, client: &Client, cmd: &Command) -> bool {
    cmd.name == "exec"
        && client.multi.as_ref().is_some_and(|m| {
            m.queued
                .iter()
                .any(|(id, _)| shared.table.get(*id).has(flags::WRITE))
        })
}

/// An EXEC on a replica is refused for its queued commands as Redis's
/// `processCommand` refuses it: READONLY if one writes, else MASTERDOWN
/// if one may not run while the link is down and stale data is not
/// served (`cmd_inv_flags & CMD_STALE`), whatever the state was when they
/// were queued.
fn exec_replica_refusal(shared: &Shared, client: &Client, cmd: &Command) -> Option<&'static str> {
    use crate::replication::replica::{refusal, READONLY};
    if cmd.name != "exec" || !shared.replication.replica_mode() {
        return None;
    }
    let m = client.multi.as_ref()?;
    let queued = || m.queued.iter().map(|(id, _)| shared.table.get(*id));
    queued()
        .find_map(|c| refusal(shared, c).filter(|e| *e == READONLY))
        .or_else(|| queued().find_map(|c| refusal(shared, c)))
}

/// Commands that run at once inside MULTI instead of being queued.
const RUN_IN_MULTI: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// Why `cmd` may not run now, checked in Redis 7.0 `processCommand`'s
/// order: arity, authentication, MULTI restrictions, memory.
fn refusal(
    shared: &Shared,
    cx: &Cx,
    client: &Client,
    cmd: &Command,
    args: &Args,
) -> Option<CmdError> {
    if !cmd.arity_ok(args.len()) {
        return Some(CmdError::WrongArity(cmd.name));
    }
    if !client.authenticated && !cmd.has(flags::NO_AUTH) {
        return Some(CmdError::text(crate::resp::errors::NOAUTH));
    }
    if crate::auth::restricted(client) {
        // The check reads the arguments it needs from the request by
        // index: gathering them first (a Vec, or even a stack array)
        // cost ~70-200 instructions per command of a restricted user
        // (callgrind, SET -P 16).
        let context = if client.multi.is_some() {
            crate::auth::Context::Multi
        } else {
            crate::auth::Context::TopLevel
        };
        if let Err(d) = crate::auth::check(shared, client, cmd, args, context) {
            return Some(CmdError::text(crate::auth::noperm(cmd, d)));
        }
    }
    if client.multi.is_some() && cmd.has(flags::NO_MULTI) {
        return Some(CmdError::text(crate::resp::errors::NOT_IN_MULTI));
    }
    // Redis's performEvictions before every command while maxmemory is
    // set; a command that may grow memory brings its arguments' bytes.
    let incoming = if cmd.has(flags::DENYOOM) {
        args.iter_from(1).map(|a| a.len() as u64).sum()
    } else {
        0
    };
    if !admission::room_for(shared, cx, incoming) {
        // Queueing may itself use unbounded memory, so under the limit
        // every command but EXEC/DISCARD/QUIT/RESET is refused in MULTI;
        // EXEC is refused if it would run a command that may grow memory.
        let oom = match (&client.multi, cmd.name) {
            (Some(m), "exec") => m.denyoom || cmd.has(flags::DENYOOM),
            (Some(_), "discard" | "quit" | "reset") => false,
            (Some(_), _) => true,
            (None, _) => cmd.has(flags::DENYOOM),
        };
        if oom {
            return Some(CmdError::text(crate::resp::errors::OOM));
        }
    }
    if cmd.has(flags::WRITE) || cmd.name == "ping" {
        if let Some(why) = admission::writes_denied(shared) {
            return Some(CmdError::text(crate::resp::errors::writes_denied(&why)));
        }
    }
    // Redis's processCommand: a master with too few good replicas refuses
    // writes (`min-replicas-to-write`, `min-replicas-max-lag`), an EXEC
    // whose queued commands write among them (they were queued while the
    // replicas were there).
    if (cmd.has(flags::WRITE) || exec_writes(shared, client, cmd))
        && shared.replication.too_few_replicas()
    {
        return Some(CmdError::text(crate::resp::errors::NOREPLICAS));
    }
    // READONLY, MASTERDOWN: on a replica only (the master's own commands
    // do not come through here).
    if let Some(e) = crate::replication::replica::refusal(shared, cmd) {
        return Some(CmdError::text(e));
    }
    if let Some(e) = exec_replica_refusal(shared, client, cmd) {
        return Some(CmdError::text(e));
    }
    if admission::loading(shared) && !cmd.has(flags::LOADING) {
        return Some(CmdError::text(crate::resp::errors::LOADING));
    }
    None
}

/// Inside MULTI, an error while queueing makes EXEC fail (`flagTransaction`).
fn flag_transaction(client: &mut Client) {
    if let Some(m) = &mut client.multi {
        m.aborted = true;
    }
}

/// Runs `cmd` (already checked) and keeps the statistics, the slow log and
/// MONITOR fed. EXEC calls it for each queued command. `outer` is the
/// context the command runs in: its caller's (the dispatcher's, or EXEC's
/// with the transaction's hold), whose state it shares.
pub fn invoke(
    shared: &Shared,
    client: &mut Client,
    cmd: &Command,
    args: Args,
    out: &mut Vec<u8>,
    stats: &WorkerStats,
    outer: &Cx,
) -> Outcome {
    if !cmd.has(flags::FAST) {
        // A shard lock kept from the previous command (`retain_locks`)
        // goes before anything that may wait for another thread (SAVE,
        // DEBUG SLEEP, CONFIG SET appendonly's barrier, FLUSHALL, EXEC,
        // blocking commands); "fast" commands only lock their keys.
        cairn_engine::keyspace::release_retained();
    }
    // One clock reading for the command's timing and all its expiry
    // checks (Redis 7.0 `call()`).
    let started_us = cairn_engine::clock::now_us();
    let handler = cmd.handler.expect("resolve returns runnable commands");
    let reply_start = out.len();
    // The journal records the command as sent unless its handler stages
    // another form: the context lends the engine the arguments for the
    // call, a plain borrow of this parameter.
    // A script's commands all see the time the script started (Redis
    // 7.0's `scriptTimeSnapshot`): a key cannot expire halfway through
    // a script, so what it read and what it propagates agree.
    let now_ms = if client.in_script {
        outer.now_ms()
    } else {
        started_us / 1000
    };
    let cx = outer.nested(client.db, Some(&args), now_ms);
    // A tracking client's read: its keys go in the table before the
    // handler reads them (and again after: `crate::tracking`).
    // A script's commands register the script's declared keys instead
    // (`script::run`), as Redis 7.0's `call` remembers the caller's keys.
    let tracked_read = client.info.tracking.load(Ordering::Relaxed) != 0
        && !client.in_script
        && crate::tracking::tracks_reads(cmd);
    if tracked_read {
        crate::tracking::note_read(shared, client, cmd, &args);
    }
    let result = {
        let mut ctx = Ctx {
            shared,
            client,
            args,
            out,
            cx,
        };
        // A bug in one command must not take down the worker thread and
        // every connection on it: the client gets an error, the log gets
        // the panic (the default hook has printed it), the server goes on.
        // Shard locks are released by unwinding (parking_lot does not
        // poison), and a half-written reply is dropped.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&mut ctx))).unwrap_or_else(
            |payload| {
                ctx.out.truncate(reply_start);
                ctx.client.out_refs.truncate(reply_start);
                // A disk tier read that failed (EIO, a bad checksum) where
                // the reader could not return it (`tier::fail_read`: no
                // panic hook ran) is not a bug: the client gets its text,
                // which names the record, and the key is as it was.
                if let Some(r) = payload.downcast_ref::<cairn_engine::tier::ReadFailed>() {
                    return Err(crate::tier_io::read_failed(&r.0));
                }
                crate::log::warning(&format!(
                    "BUG: command '{}' panicked; the client got an error and the server goes on",
                    cmd.name
                ));
                Err(CmdError::text(crate::resp::errors::INTERNAL))
            },
        )
    };
    let micros = cairn_engine::clock::now_us().saturating_sub(started_us);
    if tracked_read {
        crate::tracking::note_read(shared, client, cmd, &args);
    }
    if result.is_ok() && client.wants_block.is_some() {
        // Counted when it finally answers, not for each wait.
        return Outcome::Blocked;
    }
    if client.tier.take_parked(result.is_ok()) {
        return Outcome::Parked;
    }
    if let Err(e) = &result {
        bump(&stats.cmd[cmd.id][3], 1);
        write_error(out, client, e, stats);
    }
    bump(&stats.cmd[cmd.id][0], 1);
    bump(&stats.cmd[cmd.id][1], micros);
    if shared.hot.latency_tracking.load(Ordering::Relaxed) {
        stats.latency.record(cmd.id, micros);
    }
    let event = if cmd.has(flags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    shared.latency.sample_if_needed(event, micros / 1000);
    bump(&stats.commands, 1);
    client.info.last_cmd.store(cmd.id, Ordering::Relaxed);

    if shared.hot.slowlog_enabled.load(Ordering::Relaxed)
        && micros >= shared.hot.slowlog_slower_than_us.load(Ordering::Relaxed)
        && !cmd.has(flags::SKIP_SLOWLOG)
        && !client.in_script
    {
        let name = client.info.name.lock().clone().unwrap_or_default();
        let redact = client.redact;
        shared.slowlog.lock().push(
            (0..args.len()).map(|i| shown_arg(&args, i, redact)),
            micros,
            client.info.addr.to_string(),
            name,
        );
    }
    if shared.monitor_count.load(Ordering::Relaxed) > 0
        && !cmd.has(flags::SKIP_MONITOR)
        && !cmd.has(flags::ADMIN)
    {
        feed_monitors(shared, client, &args);
    }
    Outcome::Done
}

/// An argument as MONITOR and SLOWLOG show it.
fn shown_arg<'a>(args: &Args<'a>, i: usize, redact: u64) -> &'a [u8] {
    if i < 64 && redact & (1 << i) != 0 {
        b"(redacted)"
    } else {
        args.get(i)
    }
}

fn write_error(out: &mut Vec<u8>, client: &Client, e: &CmdError, stats: &WorkerStats) {
    bump(&stats.error_replies, 1);
    let msg = e.message_bytes();
    crate::exec::errorstats::record_error(client.info.worker(), &msg);
    // Client bytes may sit in the text; CR and LF become spaces so the
    // reply stays one line (Redis: `addReplyErrorLength`).
    out.push(b'-');
    out.extend(
        msg.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Feeds MONITOR the running command now: EVAL, EVALSHA and FCALL skip the
/// usual feed after the command (`skip_monitor`) and call this before the
/// script runs, so their line comes before the lines of the commands the
/// script calls, as Redis orders them.
pub fn feed_monitors_first(shared: &Shared, client: &Client, args: &Args) {
    if shared.monitor_count.load(Ordering::Relaxed) > 0 {
        feed_monitors(shared, client, args);
    }
}

/// Sends the MONITOR line for this command to every monitor
/// (`replicationFeedMonitors`: `+<secs>.<usecs> [<db> <addr>] "arg" ...`).
fn feed_monitors(shared: &Shared, client: &Client, args: &Args) {
    let us = cairn_engine::clock::now_us();
    let source = if client.in_script {
        "lua".to_string()
    } else {
        client.info.addr.to_string()
    };
    let mut line = format!(
        "+{}.{:06} [{} {source}]",
        us / 1_000_000,
        us % 1_000_000,
        client.db,
    )
    .into_bytes();
    for i in 0..args.len() {
        line.push(b' ');
        crate::util::repr(shown_arg(args, i, client.redact), &mut line);
    }
    line.extend_from_slice(b"\r\n");
    let line: Arc<[u8]> = line.into();
    let monitors = shared.monitors.lock().clone();
    for (id, worker) in monitors {
        if id != client.id {
            shared.worker(worker).send(Msg::Monitor(id, line.clone()));
        }
    }
}
