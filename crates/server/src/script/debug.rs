//! SCRIPT DEBUG sessions (Redis 7.0 `ldbStartSession`/`ldbEndSession`):
//! an EVAL run with the debugger (`cairn_lua::debugger`) talking to the
//! client over the connection's own socket, which the connection layer
//! lends (`crate::client::DebugLink`) only while a client with SCRIPT
//! DEBUG on runs its requests.
//!
//! SYNC (`session`): as in Redis the script keeps its hold for the whole
//! session, writes stay, and other clients wait: once the session has
//! lasted `busy-reply-threshold`, those on other workers get BUSY, as
//! during any long script. The connection closes after the EVAL's reply.
//!
//! YES (`fork`): Redis forks and runs the session in the child, whose
//! writes vanish with it. Cairn has no fork: the worker hands the whole
//! connection over (`Client::take_transport`) and a thread of its own
//! builds a private server around a copy of the dataset taken from one
//! snapshot cut (`copy`), runs the EVAL there as a SYNC session, sends
//! the reply, and drops the copy and the connection (docs/design.md).
use crate::client::{Client, DebugLink};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::shared::Shared;
use cairn_engine::Cx;
use cairn_lua::debugger::Console;
use cairn_persist::snapshot::{self as snap, SaveError};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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
    /// What ends the session when the server shuts down: the server's own
    /// flag, also for a YES session running on its copy.
    stop: &'a AtomicBool,
    /// A YES session whose server is shutting down: as Redis kills its
    /// forked children, nothing more is sent.
    dead: bool,
}

impl Console for LinkConsole<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(n) = self.link.read(buf, POLL_WAIT)? {
                return Ok(n);
            }
            if self.stop.load(Ordering::Relaxed) {
                self.dead = !std::ptr::eq(self.stop, &self.shared.shutdown);
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
        if self.dead {
            return;
        }
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
    let parent = PARENT.with(|p| p.borrow().clone());
    let (stop, started, ended) = match &parent {
        Some(p) => (
            &p.shutdown,
            "Redis forked for debugging eval",
            "Lua debugging session child exiting",
        ),
        None => (
            &shared.shutdown,
            "Redis synchronous debugging eval session started",
            "Redis synchronous debugging eval session ended",
        ),
    };
    let mut slot = std::mem::take(&mut ctx.client.link);
    let result = slot.with(|link| {
        let Some(link) = link else {
            return Err(CmdError::text(
                "ERR SCRIPT DEBUG needs the client's own connection",
            ));
        };
        crate::log::warning(started);
        let mut console = LinkConsole {
            link,
            shared,
            worker,
            name: String::new(),
            ran: false,
            stop,
            dead: false,
        };
        let r = eval(ctx, &mut console);
        if !console.ran {
            console.write(&cairn_lua::debugger::encode_logs(&[
                b"<endsession>".to_vec()
            ]));
        }
        crate::log::warning(ended);
        r
    });
    ctx.client.link = slot;
    ctx.client.close_after_reply = true;
    result
}

thread_local! {
    /// On a YES session's thread: the real server, whose shutdown ends
    /// the session running on the copy.
    static PARENT: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

/// Why the copy a YES session needs is refused now: it would take the
/// server's memory past `maxmemory` (a copy costs about what the dataset
/// does, as a fork whose pages all get written; past the limit the real
/// keyspace would be evicted or refuse writes for the session's sake).
fn copy_refused(shared: &Shared) -> Option<String> {
    let max = shared.hot.maxmemory.load(Ordering::Relaxed);
    if max == 0 {
        return None;
    }
    let used = crate::memory::used_exact();
    let startup = shared.memory.startup.load(Ordering::Relaxed) as u64;
    let copy = used.saturating_sub(startup);
    (used.saturating_add(copy) > max).then(|| {
        format!(
            "a private copy of the dataset ({copy} bytes) would take used memory ({used} bytes) past maxmemory ({max} bytes)"
        )
    })
}

/// EVAL under SCRIPT DEBUG YES (Redis's `ldbStartSession` with `fork`):
/// answers nothing here; once the worker has written what came before,
/// it hands the connection over and `forked` runs the session on a
/// thread of its own. As when Redis's fork fails, a refused copy answers
/// an error and turns debugging off, the connection kept.
pub fn fork(ctx: &mut Ctx) -> CmdResult {
    if let Some(why) = copy_refused(ctx.shared) {
        ctx.client.script_debug = false;
        ctx.client.script_debug_fork = false;
        return Err(CmdError::Bytes(
            format!("ERR Can't run EVAL in debugging mode: {why}").into_bytes(),
        ));
    }
    let Some(real) = ctx.shared.journal.server.get().and_then(|w| w.upgrade()) else {
        return Err(CmdError::text("ERR the server is shutting down"));
    };
    let mut request = Vec::new();
    request.extend_from_slice(format!("*{}\r\n", ctx.argc()).as_bytes());
    for a in ctx.args.iter_from(0) {
        request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        request.extend_from_slice(a);
        request.extend_from_slice(b"\r\n");
    }
    ctx.client.take_transport = Some(Box::new(move |link, client| {
        let spawned = std::thread::Builder::new()
            .name("cairn-ldb".into())
            .spawn(move || forked(&real, link, client, &request));
        if let Err(e) = spawned {
            crate::log::warning(&format!("Can't start a debugging session's thread: {e}"));
        }
    }));
    ctx.client.close_after_reply = true;
    Ok(())
}

/// The session's thread: the copy, the EVAL on it over the connection,
/// the reply; the copy and the connection go when it returns.
fn forked(
    real: &Arc<Shared>,
    mut link: Box<dyn DebugLink + Send>,
    mut client: Box<Client>,
    request: &[u8],
) {
    crate::memory::register_thread();
    let copy = match copy(real) {
        Ok(c) => c,
        Err(e) => {
            crate::log::warning(&format!("Can't run EVAL in debugging mode: {e}"));
            let msg = format!("-ERR Can't run EVAL in debugging mode: {e}\r\n");
            let _ = link.write_all(msg.as_bytes());
            return;
        }
    };
    // The copy is a server of one worker; on it the EVAL runs the session
    // itself, as Redis's child does.
    client.info.set_worker(0);
    client.script_debug_fork = false;
    client.close_after_reply = false;
    let mut list = cairn_protocol::resp::ArgList::new();
    let parsed = cairn_protocol::resp::parse_request(
        request,
        &cairn_protocol::resp::Limits::default(),
        &mut list,
    );
    if !matches!(parsed, Ok(cairn_protocol::resp::Parsed::Complete { .. })) {
        return;
    }
    let mut out = Vec::new();
    PARENT.with(|p| *p.borrow_mut() = Some(real.clone()));
    // SAFETY: cleared below, before `link` goes.
    unsafe { client.link.lend(&mut *link) };
    crate::exec::dispatch::execute(
        &copy,
        &mut client,
        crate::resp::ctx::Args::new(request, &list),
        &mut out,
        &copy.worker_stats[0],
    );
    client.link.clear();
    PARENT.with(|p| p.borrow_mut().take());
    if !real.shutdown.load(Ordering::Relaxed) {
        let _ = link.write_all(&out);
    }
    drop(client);
    drop(copy);
    super::run::drop_vm();
}

/// A private server holding a point-in-time copy of `real`'s dataset:
/// one snapshot cut (as BGSAVE and a replica's full sync make), written
/// to an anonymous in-memory file and loaded back into a fresh engine.
/// No hold on the real shards outlives the cut's one pass over them.
fn copy(real: &Shared) -> Result<Arc<Shared>, String> {
    let mut cfg = real.config.read().clone();
    // The copy answers to no limit of its own: the limit was checked for
    // both before it was made (`copy_refused`).
    cfg.maxmemory = 0;
    cfg.server_threads = 1;
    // Nothing the session does may reach a file: FLUSHALL saves under
    // save rules (Redis's child would overwrite the dump file so).
    cfg.save.clear();
    cfg.appendonly = false;
    let copy = crate::server::build_shared(cfg)?;
    // SAFETY: a name and flags; the fd returned is owned below.
    let fd = unsafe { libc::memfd_create(c"cairn-ldb".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh fd nothing else owns.
    let file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let opts = crate::snapshots::options(real);
    let cut = loop {
        match snap::begin(&real.engine, &Cx::DETACHED, &opts, || ()) {
            Ok(c) => break c,
            // One cut at a time: a BGSAVE or journal rewrite finishes first.
            Err(SaveError::InProgress) if !real.shutdown.load(Ordering::Relaxed) => {
                snap::wait_free(&real.engine, Duration::from_millis(100));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let sink = file.try_clone().map_err(|e| e.to_string())?;
    let path = std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
    snap::write_to(&real.engine, cut, Box::new(sink), &path).map_err(|e| e.to_string())?;
    let load = snap::LoadOptions {
        thread_start: Some(crate::memory::register_thread),
        ..Default::default()
    };
    let stats = snap::load(&copy.engine, &path, &load, &mut |_| {}).map_err(|e| e.to_string())?;
    drop(file);
    crate::script::functions::load_codes(&copy, &stats.functions)?;
    Ok(copy)
}
