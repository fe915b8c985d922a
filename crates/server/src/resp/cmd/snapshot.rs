//! SAVE, BGSAVE, LASTSAVE: point-in-time snapshots (issue 6). Replies and
//! error texts are Redis 7.0's (`rdb.c` saveCommand, bgsaveCommand,
//! lastsaveCommand); the scheduling lives in `crate::snapshots`.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use crate::snapshots::{self, BgError};
use std::sync::atomic::Ordering;

pub const COMMANDS: &[Def] = &[
    Def::new("save", save),
    Def::new("bgsave", bgsave),
    Def::new("lastsave", lastsave),
];

/// SAVE → +OK once the snapshot is on disk, or `-ERR` (Redis's bare
/// error; the log says why). Runs on this client's worker thread: other
/// workers keep serving while it writes.
fn save(ctx: &mut Ctx) -> CmdResult {
    let st = &ctx.shared.snapshots;
    if st.in_progress.load(Ordering::Relaxed) {
        return Err(CmdError::text(errors::BGSAVE_IN_PROGRESS));
    }
    match snapshots::save(ctx.shared, &ctx.cx, false) {
        Ok(_) => ctx.ok(),
        Err(_) => Err(CmdError::text(errors::SAVE_FAILED)),
    }
}

/// BGSAVE [SCHEDULE] → +Background saving started, or +Background saving
/// scheduled when another snapshot (a journal rewrite) holds the engine
/// and SCHEDULE was given, or inside EXEC.
fn bgsave(ctx: &mut Ctx) -> CmdResult {
    let schedule = match ctx.argc() {
        1 => false,
        2 if args::is(ctx.arg(1), "schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    let st = &ctx.shared.snapshots;
    if st.in_progress.load(Ordering::Relaxed) {
        return Err(CmdError::text(errors::BGSAVE_IN_PROGRESS));
    }
    // Redis refuses (or schedules) a BGSAVE while any child runs, an AOF
    // rewrite's from the moment it starts (`hasActiveChildProcess`); here
    // the rewrite counts before its compaction has made its cut too, so
    // the answer does not depend on how far that thread has got.
    let busy = ctx.shared.engine.snapshot_running()
        || ctx
            .shared
            .journal
            .rewrite
            .in_progress
            .load(Ordering::Acquire);
    if busy || ctx.client.in_exec {
        if schedule || ctx.client.in_exec {
            st.scheduled.store(true, Ordering::Relaxed);
            ctx.reply().simple("Background saving scheduled");
            return Ok(());
        }
        return Err(another_child());
    }
    match snapshots::bgsave(ctx.shared, &ctx.cx) {
        Ok(()) => {
            ctx.reply().simple("Background saving started");
            Ok(())
        }
        Err(BgError::InProgress) => Err(CmdError::text(errors::BGSAVE_IN_PROGRESS)),
        Err(BgError::Busy) if schedule => {
            st.scheduled.store(true, Ordering::Relaxed);
            ctx.reply().simple("Background saving scheduled");
            Ok(())
        }
        Err(BgError::Busy) => Err(another_child()),
        Err(BgError::InsideHold) => {
            st.scheduled.store(true, Ordering::Relaxed);
            ctx.reply().simple("Background saving scheduled");
            Ok(())
        }
        Err(BgError::Failed(_)) => Err(CmdError::text(errors::SAVE_FAILED)),
    }
}

fn another_child() -> CmdError {
    CmdError::text(errors::BGSAVE_BUSY)
}

/// LASTSAVE → integer: Unix time of the last successful save (the start
/// time until the first one).
fn lastsave(ctx: &mut Ctx) -> CmdResult {
    let t = ctx.shared.snapshots.lastsave.load(Ordering::Relaxed);
    ctx.int(t as i64)
}
