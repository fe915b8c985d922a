//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH (Redis 7.0 `multi.c`).
//!
//! Queueing happens in the dispatcher (`dispatch::run`): inside MULTI every
//! command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET is checked
//! (arity, auth, memory) and stored; a refusal marks the transaction so
//! EXEC answers EXECABORT.
//!
//! EXEC is atomic across shards: it takes every shard lock at once
//! (`Engine::hold_all`), and the queued commands' own lock calls are served
//! from that hold, so no other client sees anything between them.
//!
//! WATCH registers a flag per client in the watched key's shard
//! (`Guard::watch`); any write to the key, expiry and FLUSHDB/FLUSHALL/
//! SWAPDB included, sets the flag (`Guard::modified`), and EXEC fails with
//! a null reply if it is set. A watched key that merely passes its expire
//! time is caught at EXEC, which looks every watched key that existed at
//! WATCH up under the hold (a lookup of an expired key deletes it and sets
//! the flag), as Redis's `isWatchedKeyExpired` does.
use crate::client::{discard_transaction, unwatch_all};
use crate::exec::dispatch;
use crate::exec::table::Def;
use crate::resp::ctx::{Args, CmdResult, Ctx};
use crate::resp::errors::CmdError;
use std::sync::atomic::Ordering;

pub const COMMANDS: &[Def] = &[
    Def::new("multi", multi),
    Def::new("exec", exec),
    Def::new("discard", discard),
    Def::new("watch", watch),
    Def::new("unwatch", unwatch),
];

/// MULTI → +OK; later commands are queued until EXEC or DISCARD.
fn multi(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::text(crate::resp::errors::MULTI_NESTED));
    }
    ctx.client.multi = Some(Default::default());
    ctx.client.info.multi.store(0, Ordering::Relaxed);
    ctx.ok()
}

/// DISCARD → +OK; drops the queue and every WATCH.
fn discard(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::text(crate::resp::errors::DISCARD_WITHOUT_MULTI));
    }
    discard_transaction(ctx.shared, &ctx.cx, ctx.client);
    ctx.ok()
}

/// WATCH key [key ...] → +OK.
fn watch(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::text(crate::resp::errors::WATCH_INSIDE_MULTI));
    }
    let e = ctx.engine();
    let db = ctx.db();
    for key in ctx.args.iter_from(1) {
        if ctx
            .client
            .watched
            .iter()
            .any(|(d, k, _)| *d == db && **k == *key)
        {
            continue;
        }
        let k = e.key(key);
        let mut g = e.lock(&ctx.cx, &k);
        // A key already past its expire time is deleted now, before the
        // watch starts, so its (logically old) expiry fails no EXEC
        // (Redis: "WATCH stale keys should not fail EXEC").
        let existed = g.exists(db, &k);
        g.watch(db, &k, &ctx.client.info.dirty_cas);
        drop(g);
        ctx.client.watched.push((db, key.into(), existed));
    }
    ctx.client
        .info
        .watching
        .store(ctx.client.watched.len(), Ordering::Relaxed);
    ctx.ok()
}

/// UNWATCH → +OK.
fn unwatch(ctx: &mut Ctx) -> CmdResult {
    unwatch_all(ctx.shared, &ctx.cx, ctx.client);
    ctx.ok()
}

/// EXEC → an array of the queued commands' replies; a null array if a
/// watched key changed; EXECABORT if queueing failed.
fn exec(ctx: &mut Ctx) -> CmdResult {
    let Some(m) = ctx.client.multi.take() else {
        return Err(CmdError::text(crate::resp::errors::EXEC_WITHOUT_MULTI));
    };
    ctx.client.info.multi.store(-1, Ordering::Relaxed);
    if m.aborted {
        unwatch_all(ctx.shared, &ctx.cx, ctx.client);
        return Err(CmdError::text(crate::resp::errors::EXEC_ABORTED));
    }
    let shared = ctx.shared;
    let e = &shared.engine;
    let hold = e.hold_all(&ctx.cx);
    // Every lock of the transaction, its queued commands' included, is
    // served from the hold through this context.
    let cx = ctx.cx.with_hold(&hold);
    // Only a key that existed at WATCH can have expired since. One that
    // did not and is now there past its time came stale through SWAPDB
    // (a write would have set the flag): no logical change, as Redis
    // marks such a watch expired (`touchAllWatchedKeysInDb`), so it is
    // not looked up, which would delete it and fail the EXEC.
    for (db, key, existed) in &ctx.client.watched {
        if *existed {
            let k = e.key(key);
            e.lock(&cx, &k).exists(*db, &k);
        }
    }
    if ctx.client.info.dirty_cas.load(Ordering::Relaxed) {
        drop(hold);
        unwatch_all(shared, &ctx.cx, ctx.client);
        ctx.reply().null_array();
        return Ok(());
    }
    unwatch_all(shared, &cx, ctx.client);
    ctx.reply().array(m.queued.len());
    let stats = &shared.worker_stats[ctx.client.info.worker()];
    ctx.client.in_exec = true;
    // The rules may have changed since the commands were queued: each is
    // checked against them as they stand when EXEC starts (in Redis
    // nothing else runs during EXEC).
    crate::auth::refresh(shared, ctx.client);
    let restricted = crate::auth::restricted(ctx.client);
    let mut broadcast = false;
    for (id, list) in &m.queued {
        let cmd = shared.table.get(*id);
        let start = ctx.out.len();
        // Read by index from the queued list, as the dispatcher's check
        // reads the request (a Vec per queued command cost an allocation).
        let denied = restricted.then(|| {
            let argv = Args::new(&[], list);
            crate::auth::check(shared, ctx.client, cmd, &argv, crate::auth::Context::Multi)
        });
        if let Some(Err(d)) = denied {
            let reason = match d {
                crate::auth::acl::Denied::Command => {
                    "no permission to execute the command or subcommand"
                }
                crate::auth::acl::Denied::Key(_) => "no permission to touch the specified keys",
                crate::auth::acl::Denied::Channel(_) => {
                    "no permission to access one of the channels used as arguments"
                }
            };
            ctx.reply().error(&format!(
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
            ));
            continue;
        }
        dispatch::invoke(
            shared,
            ctx.client,
            cmd,
            Args::new(&[], list),
            ctx.out,
            stats,
            &cx,
        );
        // Each command's notifications and pushes to this very client go
        // out where Redis sends them: inside EXEC's reply, after that
        // command. (Publishing and waking touch no shard, so this is safe
        // under the hold.)
        if let Some(state) = cx.state() {
            broadcast |= crate::keyevents::after_queued_command(shared, state, ctx.client);
        }
        if let Some((at, len)) = crate::pubsub::place_pushes(ctx.client, ctx.out, start) {
            ctx.client.out_refs.shift(at, len);
        }
    }
    ctx.client.in_exec = false;
    drop(hold);
    // One BCAST message per prefix for the whole transaction.
    if broadcast {
        crate::tracking::broadcast(shared);
    }
    Ok(())
}
