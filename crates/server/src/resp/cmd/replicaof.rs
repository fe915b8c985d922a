//! REPLICAOF and SLAVEOF (replication.c `replicaofCommand`): make this
//! server a replica of a master, or (NO ONE) a master again keeping its
//! data. The link itself is `crate::replication::replica`'s.
use crate::exec::table::Def;
use crate::log;
use crate::replication::replica;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;

pub const COMMANDS: &[Def] = &[
    Def::new("replicaof", replicaof),
    Def::new("slaveof", replicaof),
];

/// REPLICAOF host port | NO ONE → +OK (or `+OK Already connected to
/// specified master` when nothing changes).
fn replicaof(ctx: &mut Ctx) -> CmdResult {
    if ctx.shared.cluster.enabled() {
        return Err(CmdError::text("ERR REPLICAOF not allowed in cluster mode."));
    }
    if crate::replication::failover::active() {
        return Err(CmdError::text(
            "ERR REPLICAOF not allowed while failing over.",
        ));
    }
    let who = ctx.client.info.addr.to_string();
    if ctx.arg(1).eq_ignore_ascii_case(b"no") && ctx.arg(2).eq_ignore_ascii_case(b"one") {
        if ctx.shared.replication.replica_mode() {
            replica::unset_master(ctx.shared, &ctx.cx, Some(ctx.client.info.worker()));
            log::notice(&format!(
                "MASTER MODE enabled (user request from 'addr={who}')"
            ));
        }
        return ctx.ok();
    }
    // getRangeLongFromObjectOrReply(0, 65535, "Invalid master port").
    let port = cairn_engine::util::num::parse_i64(ctx.arg(2))
        .filter(|p| (0..=65535).contains(p))
        .ok_or(CmdError::text("ERR Invalid master port"))? as u16;
    let host = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    if replica::master().is_some_and(|(h, p)| h.eq_ignore_ascii_case(&host) && p == port) {
        log::notice("REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.");
        ctx.reply()
            .simple("OK Already connected to specified master");
        return Ok(());
    }
    let worker = ctx.client.info.worker();
    replica::set_master(ctx.shared, &ctx.cx, Some(worker), &host, port);
    log::notice(&format!(
        "REPLICAOF {host}:{port} enabled (user request from 'addr={who}')"
    ));
    ctx.ok()
}
