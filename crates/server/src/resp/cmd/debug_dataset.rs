//! DEBUG's dataset subcommands: DIGEST, DIGEST-VALUE and RELOAD (Redis
//! 7.0 debug.c). The digest is the engine's (`cairn_engine::ops::digest`,
//! Redis's algorithm, so the same data gives the same digits as
//! redis-server); the reload is `crate::snapshots::reload`. The DEBUG
//! dispatcher, its permission check and its other subcommands are in
//! `server.rs`.
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::snapshots::ReloadError;

fn hex(d: &[u8; 20]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// DEBUG DIGEST → status of 40 hex digits: the whole dataset's digest,
/// all zeros when every database is empty.
pub fn digest(ctx: &mut Ctx) -> CmdResult {
    let d = ctx.engine().digest(&ctx.cx);
    ctx.reply().simple(&hex(&d));
    Ok(())
}

/// DEBUG DIGEST-VALUE [key ...] → array of statuses, each the digest of
/// one key's value (zeros for a missing key), in the client's database.
pub fn digest_value(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let digests: Vec<String> = ctx
        .args
        .iter_from(2)
        .map(|k| hex(&ctx.engine().digest_value(&ctx.cx, db, k)))
        .collect();
    let mut w = ctx.reply();
    w.array(digests.len());
    for d in digests {
        w.simple(&d);
    }
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE] → +OK once the snapshot was
/// saved (not with NOSAVE), the databases emptied (not with NOFLUSH) and
/// the snapshot loaded back (MERGE: its keys replace those present).
pub fn reload(ctx: &mut Ctx) -> CmdResult {
    let (mut save, mut flush, mut merge) = (true, true, false);
    for opt in ctx.args.iter_from(2) {
        if args::is(opt, "merge") {
            merge = true;
        } else if args::is(opt, "noflush") {
            flush = false;
        } else if args::is(opt, "nosave") {
            save = false;
        } else {
            return Err(CmdError::text(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    match crate::snapshots::reload(ctx.shared, &ctx.cx, save, flush, merge) {
        Ok(()) => ctx.ok(),
        // Redis answers a failed save with its shared bare "-ERR".
        Err(ReloadError::Save) => Err(CmdError::text("ERR")),
        Err(ReloadError::Load) => Err(CmdError::text(
            "ERR Error trying to load the RDB dump, check server logs.",
        )),
    }
}
