//! What a server without replicas answers to Redis 7.0's replication and
//! cluster client commands: WAIT and ROLE (replication.c `waitCommand`,
//! `roleCommand`), READONLY, READWRITE and ASKING (cluster.c, which
//! refuses them when `cluster-enabled` is off; CLUSTER itself is in
//! `cluster.rs`). Replication itself (REPLICAOF, PSYNC, ...) belongs to a
//! later issue; when replicas arrive, WAIT counts their acknowledgements
//! here.
use crate::client::Unblock;
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx, OnTimeout};
use crate::resp::errors;
use crate::resp::errors::CmdError;

pub const COMMANDS: &[Def] = &[
    Def::new("wait", wait),
    Def::new("role", role),
    Def::new("readonly", cluster_disabled),
    Def::new("readwrite", cluster_disabled),
    Def::new("asking", cluster_disabled),
];

/// WAIT numreplicas timeout-ms → integer: how many replicas acknowledged
/// this client's writes. With no replicas that is 0: at once when 0 are
/// asked for (or inside MULTI, where Redis does not block), otherwise
/// after `timeout` ms (0: never, as in Redis), or on CLIENT UNBLOCK.
fn wait(ctx: &mut Ctx) -> CmdResult {
    let numreplicas = args::int(ctx.arg(1))?;
    // getTimeoutFromObjectOrReply with UNIT_MILLISECONDS.
    let timeout = cairn_engine::util::num::parse_i64(ctx.arg(2))
        .ok_or(CmdError::text(errors::TIMEOUT_NOT_INTEGER))?;
    if timeout < 0 {
        return Err(CmdError::text(errors::TIMEOUT_NEGATIVE));
    }
    // Redis 7.0 has no "out of range" check here: a deadline past the end
    // of time is never reached (the block saturates it).
    let acked = 0;
    if acked >= numreplicas || ctx.client.in_exec || ctx.client.in_script {
        return ctx.int(acked);
    }
    match ctx.client.unblock {
        // Timed out, or CLIENT UNBLOCK ... TIMEOUT: the count so far.
        Some(Unblock::Timeout) => ctx.int(acked),
        Some(Unblock::Error) => Err(CmdError::text(errors::UNBLOCKED)),
        // Waits on no key: only the deadline or CLIENT UNBLOCK wakes it.
        None => ctx.block(std::iter::empty(), timeout as u64, OnTimeout::NullArray),
    }
}

/// ROLE → ["master", replication offset, [replicas]]: a master with no
/// replicas yet.
fn role(ctx: &mut Ctx) -> CmdResult {
    let (shared, offset) = (ctx.shared, ctx.shared.replication.offset());
    let mut w = ctx.reply();
    if crate::replication::replica::role(shared, &mut w) {
        return Ok(());
    }
    w.array(3);
    w.bulk(b"master");
    w.int(offset as i64);
    w.array(0);
    Ok(())
}

/// READONLY, READWRITE, ASKING → +OK in cluster mode, else the error a
/// Redis without cluster support answers. They change nothing here: this
/// node is a master that owns every slot, so a replica read (READONLY) or
/// an import in progress (ASKING) never arises.
fn cluster_disabled(ctx: &mut Ctx) -> CmdResult {
    if !ctx.shared.cluster.enabled() {
        return Err(CmdError::text(errors::CLUSTER_DISABLED));
    }
    ctx.ok()
}
