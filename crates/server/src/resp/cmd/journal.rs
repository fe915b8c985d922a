//! BGREWRITEAOF: journal compaction (issue 6). Replies and error texts are
//! Redis 7.0's (`aof.c` bgrewriteaofCommand); the work is
//! `crate::journal::rewrite`.
use crate::exec::table::Def;
use crate::journal::rewrite::{self, Started};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;

pub const COMMANDS: &[Def] = &[Def::new("bgrewriteaof", bgrewriteaof)];

/// BGREWRITEAOF → +Background append only file rewriting started, or
/// +...scheduled while a snapshot runs (or inside EXEC), or an error if one
/// is already running. Works with `appendonly no` too (it writes a base
/// that a later `appendonly yes` start-up loads), as in Redis.
fn bgrewriteaof(ctx: &mut Ctx) -> CmdResult {
    match rewrite::request(ctx.shared, ctx.client.in_exec) {
        Ok(Started::Started) => {
            ctx.reply()
                .simple("Background append only file rewriting started");
            Ok(())
        }
        Ok(Started::Scheduled) => {
            ctx.reply()
                .simple("Background append only file rewriting scheduled");
            Ok(())
        }
        Err(rewrite::AlreadyRunning) => Err(CmdError::text(errors::BGREWRITEAOF_IN_PROGRESS)),
    }
}
