//! SCRIPT DEBUG sessions (Redis 7.0 `ldbStartSession`/`ldbEndSession`,
//! SYNC mode): an EVAL run with the debugger (`cairn_lua::debugger`)
//! talking to the client over the connection's own socket, which the
//! connection layer lends (`crate::client::DebugLink`) only while a client
//! with SCRIPT DEBUG on runs its requests.
//!
//! As in Redis's SYNC mode the script keeps its hold for the whole
//! session, writes stay, and other clients wait: once the session has
//! lasted `busy-reply-threshold`, those on other workers get BUSY, as
//! during any long script. The connection closes after the EVAL's reply.
//! Redis's YES mode forks and throws the child's writes away; Cairn has no
//! fork and refuses it (SCRIPT DEBUG answers an error, never a silent
//! SYNC; tests/diff/DIFFERENCES.md).
use crate::client::DebugLink;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::shared::Shared;
use cairn_lua::debugger::Console;
use std::time::Duration;

/// How long a read waits before the session checks on the server
/// (busy marking, shutdown).
const POLL_WAIT: Duration = Duration::from_millis(100);

/// The client's connection as the debugger's console.
pub struct LinkConsole<'a> {
    link: &'a mut dyn DebugLink,
    shared: &'a Shared,
    worker: usize,
    /// The script's SHA, as the slow-script warning names it.
    pub name: String,
    /// The debugger ran (it sent `<endsession>` itself).
    pub ran: bool,
}

impl Console for LinkConsole<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(n) = self.link.read(buf, POLL_WAIT)? {
                return Ok(n);
            }
            if self
                .shared
                .shutdown
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                return Ok(0);
            }
            let slot = &self.shared.scripts.slots[self.worker];
            let started = slot.started_ms.load(std::sync::atomic::Ordering::Relaxed);
            if started > 0 {
                super::run::note_slow(self.shared, slot, started, &self.name, false);
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        // As Redis: a failed write shows up at the next read.
        let _ = self.link.write_all(bytes);
    }
}

/// Runs `eval` (the EVAL's own work, which runs the script with
/// `Vm::run_debug` over the console) as a debugging session: whatever
/// ends it (a script error, a bad key count, a compile error), the client
/// gets `<endsession>` before the reply and the connection closes after.
pub fn session(
    ctx: &mut Ctx,
    eval: impl FnOnce(&mut Ctx, &mut LinkConsole) -> CmdResult,
) -> CmdResult {
    let shared = ctx.shared;
    let worker = ctx.client.info.worker();
    let mut slot = std::mem::take(&mut ctx.client.link);
    let result = slot.with(|link| {
        let Some(link) = link else {
            return Err(CmdError::text(
                "ERR SCRIPT DEBUG needs the client's own connection",
            ));
        };
        crate::log::warning("Redis synchronous debugging eval session started");
        let mut console = LinkConsole {
            link,
            shared,
            worker,
            name: String::new(),
            ran: false,
        };
        let r = eval(ctx, &mut console);
        if !console.ran {
            console.write(&cairn_lua::debugger::encode_logs(&[
                b"<endsession>".to_vec()
            ]));
        }
        crate::log::warning("Redis synchronous debugging eval session ended");
        r
    });
    ctx.client.link = slot;
    ctx.client.close_after_reply = true;
    result
}
