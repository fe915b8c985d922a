//! FAILOVER (replication.c `failoverCommand`, Redis 6.2+): a coordinated
//! hand-over from this master to one of its replicas. This file parses
//! the arguments with Redis's errors; the state and the hand-over are
//! `crate::replication::failover`'s.
use crate::exec::table::Def;
use crate::replication::failover;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;

pub const COMMANDS: &[Def] = &[Def::new("failover", failover_cmd)];

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] → +OK once the
/// failover has started (it goes on in the background; INFO's
/// `master_failover_state` follows it).
fn failover_cmd(ctx: &mut Ctx) -> CmdResult {
    if ctx.shared.cluster.enabled() {
        return Err(CmdError::text("ERR FAILOVER not allowed in cluster mode."));
    }
    if ctx.argc() == 2 && args::is(ctx.arg(1), "abort") {
        if !failover::active() {
            return Err(CmdError::text("ERR No failover in progress."));
        }
        let worker = ctx.client.info.worker();
        failover::abort(
            ctx.shared,
            &ctx.cx,
            Some(worker),
            "Failover manually aborted",
        );
        return ctx.ok();
    }
    let mut timeout_ms = 0i64;
    let mut force = false;
    let mut target: Option<(String, i64)> = None;
    let mut j = 1;
    while j < ctx.argc() {
        let a = ctx.arg(j);
        if args::is(a, "timeout") && j + 1 < ctx.argc() && timeout_ms == 0 {
            timeout_ms = args::int(ctx.arg(j + 1))?;
            if timeout_ms <= 0 {
                return Err(CmdError::text(
                    "ERR FAILOVER timeout must be greater than 0",
                ));
            }
            j += 2;
        } else if args::is(a, "to") && j + 2 < ctx.argc() && target.is_none() {
            let port = args::int(ctx.arg(j + 2))?;
            target = Some((String::from_utf8_lossy(ctx.arg(j + 1)).into_owned(), port));
            j += 3;
        } else if args::is(a, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    failover::start(ctx.shared, target, timeout_ms as u64, force).map_err(CmdError::text)?;
    ctx.ok()
}
