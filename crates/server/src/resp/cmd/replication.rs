//! The master's side of Redis 7.0's replication commands (replication.c):
//! REPLCONF (`replconfCommand`), PSYNC and SYNC (`syncCommand`, which hand
//! the connection to `replication::link`), WAIT (`waitCommand`, counting
//! the replicas' acknowledgements) and ROLE as a master (`roleCommand`);
//! and READONLY, READWRITE and ASKING (cluster.c, which refuses them when
//! `cluster-enabled` is off; CLUSTER itself is in `cluster.rs`). The
//! replica's side (REPLICAOF) is `replicaof.rs`.
use crate::client::Unblock;
use crate::exec::table::Def;
use crate::replication::link::{self, Request};
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx, OnTimeout};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use std::sync::atomic::Ordering;

pub const COMMANDS: &[Def] = &[
    Def::new("wait", wait),
    Def::new("role", role),
    Def::new("replconf", replconf),
    Def::new("psync", psync),
    Def::new("sync", sync),
    Def::new("readonly", cluster_disabled),
    Def::new("readwrite", cluster_disabled),
    Def::new("asking", cluster_disabled),
];

/// WAIT numreplicas timeout-ms → integer: how many replicas acknowledged
/// this client's writes. At once when enough have (or inside MULTI or a
/// script, where Redis does not block); otherwise `REPLCONF GETACK *`
/// goes into the stream and the client blocks, without holding its
/// worker, until the acks are enough (a replica's ack reader wakes it),
/// `timeout` ms pass (0: never, as in Redis), or CLIENT UNBLOCK.
///
/// The offset waited for is the client's own `woff` (the stream's end
/// after its last command that fed it, as Redis's): a client that wrote
/// nothing gets the count of online replicas at once.
fn wait(ctx: &mut Ctx) -> CmdResult {
    if ctx.shared.replication.replica_mode() {
        return Err(CmdError::text(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        ));
    }
    let numreplicas = args::int(ctx.arg(1))?;
    // getTimeoutFromObjectOrReply with UNIT_MILLISECONDS.
    let timeout = cairn_engine::util::num::parse_i64(ctx.arg(2))
        .ok_or(CmdError::text(errors::TIMEOUT_NOT_INTEGER))?;
    if timeout < 0 {
        return Err(CmdError::text(errors::TIMEOUT_NEGATIVE));
    }
    // Redis 7.0 has no "out of range" check here: a deadline past the end
    // of time is never reached (the block saturates it).
    let r = &ctx.shared.replication;
    let id = ctx.client.id;
    let first = ctx.client.blocked.is_none();
    let target = if first {
        ctx.client.woff
    } else {
        r.waiters
            .lock()
            .iter()
            .find(|w| w.0 == id)
            .map_or(ctx.client.woff, |w| w.2)
    };
    let acked = r.acked(target) as i64;
    let done = acked >= numreplicas
        || ctx.client.in_exec
        || ctx.client.in_script
        || ctx.client.unblock.is_some();
    if done {
        r.waiters.lock().retain(|w| w.0 != id);
    }
    if acked >= numreplicas || ctx.client.in_exec || ctx.client.in_script {
        return ctx.int(acked);
    }
    match ctx.client.unblock {
        // Timed out, or CLIENT UNBLOCK ... TIMEOUT: the count so far.
        Some(Unblock::Timeout) => ctx.int(acked),
        Some(Unblock::Error) => Err(CmdError::text(errors::UNBLOCKED)),
        None => {
            {
                let mut w = r.waiters.lock();
                w.retain(|w| w.0 != id);
                w.push((id, ctx.client.info.worker(), target));
            }
            if first {
                r.feed_raw(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n");
            }
            ctx.block(std::iter::empty(), timeout as u64, OnTimeout::NullArray)
        }
    }
}

/// ROLE → ["master", replication offset, [[ip, port, acked offset], ...]]
/// with the replicas that are online, as Redis lists them.
fn role(ctx: &mut Ctx) -> CmdResult {
    let shared = ctx.shared;
    let offset = ctx.shared.replication.offset();
    let replicas: Vec<_> = ctx
        .shared
        .replication
        .replicas
        .lock()
        .iter()
        .filter(|r| r.online())
        .cloned()
        .collect();
    let mut w = ctx.reply();
    if crate::replication::replica::role(shared, &mut w) {
        return Ok(());
    }
    w.array(3);
    w.bulk(b"master");
    w.int(offset as i64);
    w.array(replicas.len());
    for r in &replicas {
        w.array(3);
        w.bulk(r.ip.as_bytes());
        w.bulk(r.port.to_string().as_bytes());
        w.bulk(r.ack_offset().to_string().as_bytes());
    }
    Ok(())
}

/// REPLCONF <option> <value> [<option> <value> ...] → +OK: what a replica
/// tells of itself before PSYNC (`replconfCommand`). `ACK` and `GETACK`
/// answer nothing: a replica's acks are read by its link
/// (`replication::link`), and GETACK means something only to a replica
/// (whose link answers it).
fn replconf(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    if argc.is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut conf = ctx.client.replconf.as_deref().cloned().unwrap_or_default();
    let mut j = 1;
    while j < argc {
        let (opt, val) = (ctx.arg(j), ctx.arg(j + 1));
        if args::is(opt, "listening-port") {
            // Redis stores any long and shows it as given.
            conf.port = args::int(val)?;
        } else if args::is(opt, "ip-address") {
            // NET_HOST_STR_LEN.
            if val.len() >= 256 {
                return Err(CmdError::text(format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    val.len()
                )));
            }
            conf.ip = Some(String::from_utf8_lossy(val).into_owned());
        } else if args::is(opt, "capa") {
            if args::is(val, "eof") {
                conf.capa_eof = true;
            } else if args::is(val, "psync2") {
                conf.capa_psync2 = true;
            }
        } else if args::is(opt, "ack") || args::is(opt, "getack") {
            return Ok(());
        } else if args::is(opt, "rdb-only") {
            match args::int(val)? {
                0 => conf.rdb_only = false,
                1 => conf.rdb_only = true,
                _ => {
                    return Err(CmdError::text(
                        "ERR value is out of range, value must between 0 and 1",
                    ))
                }
            }
        } else if args::is(opt, "rdb-filter-only") {
            // Redis 7.0 filters only functions out ("functions" or ""):
            // accepted, the image is sent whole.
        } else {
            return Err(CmdError::text(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 2;
    }
    ctx.client.replconf = Some(Box::new(conf));
    ctx.ok()
}

/// PSYNC <replid> <offset>: the connection becomes a replica link.
fn psync(ctx: &mut Ctx) -> CmdResult {
    let offset = args::int(ctx.arg(2))?;
    let replid = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    become_replica(ctx, Request::Psync { replid, offset })
}

/// SYNC: the old full sync (no `+FULLRESYNC` line, no backlog position).
fn sync(ctx: &mut Ctx) -> CmdResult {
    become_replica(ctx, Request::Sync)
}

/// Hands the connection to a replica link once this reply-less command
/// is done (`syncCommand`): it is a replica from now on.
fn become_replica(ctx: &mut Ctx, req: Request) -> CmdResult {
    if ctx.client.info.replica.load(Ordering::Relaxed) {
        // A replica's further SYNC is ignored, as in Redis.
        return Ok(());
    }
    // `PSYNC <our replid> <offset> FAILOVER`: our master hands over to us
    // (its FAILOVER); we become a master, then serve it as a replica.
    if ctx.argc() > 3
        && ctx.arg(0).eq_ignore_ascii_case(b"psync")
        && args::is(ctx.arg(3), "failover")
    {
        if !ctx.shared.replication.replica_mode() {
            return Err(CmdError::text(
                "ERR PSYNC FAILOVER can't be sent to a master.",
            ));
        }
        let (ours, _) = ctx.shared.replication.id_and_offset();
        if !ctx.arg(1).eq_ignore_ascii_case(ours.as_bytes()) {
            return Err(CmdError::text(
                "ERR PSYNC FAILOVER replid must match my replid.",
            ));
        }
        let worker = ctx.client.info.worker();
        crate::replication::replica::unset_master(ctx.shared, &ctx.cx, Some(worker));
        crate::log::notice(&format!(
            "MASTER MODE enabled (failover request from 'addr={}')",
            ctx.client.info.addr
        ));
    }
    // Replicas do not sync with a master handing over.
    if crate::replication::failover::active() {
        return Err(CmdError::text("NOMASTERLINK Can't SYNC while failing over"));
    }
    let conf = ctx.client.replconf.as_deref().cloned().unwrap_or_default();
    let info = ctx.client.info.clone();
    let Some(take) = link::handoff(ctx.shared, info, conf, req) else {
        return Err(CmdError::text("ERR the server is shutting down"));
    };
    ctx.client.info.replica.store(true, Ordering::Relaxed);
    ctx.client.handoff = Some(take);
    ctx.client.close_after_reply = true;
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
