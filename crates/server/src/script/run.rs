//! Running a script: the worker's interpreter, the shards a script holds,
//! and the host through which its `redis.call`s run as commands inside the
//! EVAL (or FCALL) that started it.
//!
//! Atomicity. A script runs under one `Hold` for its whole run, so no
//! other client sees anything between its calls. Its first run takes every
//! shard and learns whether it touches keys it did not declare
//! (`footprint`); later runs hold only the declared keys' shards
//! (`Engine::hold_keys`) or, if it did, every shard. A key outside the
//! held shards is taken into the hold before the call runs (`Hold::add`):
//! waited for when it lies above every held shard (all threads lock in
//! ascending order, so no deadlock), taken only if free otherwise; when it
//! is not free and the script has done nothing others could see, the
//! script starts again under `hold_all`. Inside MULTI/EXEC the
//! transaction's `hold_all` serves it all. docs/design.md ("Scripts")
//! gives the case left and the measurements.
//!
//! Effects, not scripts, reach the journal: each call is a command with
//! its own arguments (and deterministic rewrite) recorded into the hold,
//! which commits them as one unit when the script ends.
use super::{flag, RunSlot};
use crate::client::Client;
use crate::exec::dispatch;
use crate::exec::table::{flags, Command};
use crate::resp::ctx::{Args, CmdResult, Ctx};
use crate::resp::errors::{self, CmdError};
use crate::shared::{Shared, WorkerStats};
use cairn_engine::{Cx, Hold};
use cairn_lua::vm::{Host, LogLevel, Refusal, RunError, Vm};
use cairn_protocol::resp::{ArgList, Protocol};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// A worker's interpreter and what it has compiled.
pub struct WorkerVm {
    pub vm: Vm,
    /// The script cache generation its compiled scripts belong to.
    generation: u64,
    /// The function libraries loaded into it (`functions`).
    pub functions: super::functions::Loaded,
    /// The scripts this worker ran, from the shared cache: a lookup here
    /// takes no lock and touches no reference count another worker also
    /// writes (the shared cache's read lock and an `Arc` clone per
    /// EVALSHA were two cache lines both workers bounced).
    scripts: hashbrown::HashMap<Box<str>, LocalScript>,
}

/// A cached script as a worker holds it: the `Rc` is counted on this
/// thread only, where cloning the `Arc` would write a count the other
/// workers write too.
#[allow(clippy::redundant_allocation)]
pub type LocalScript = Rc<Arc<super::Script>>;

impl WorkerVm {
    /// The cached script `sha` (lower-case hex), from this worker's map or
    /// else the shared cache.
    pub fn script(&mut self, sha: &str, shared: &super::Scripts) -> Option<LocalScript> {
        if let Some(s) = self.scripts.get(sha) {
            return Some(s.clone());
        }
        let s = Rc::new(shared.get(sha)?);
        self.scripts.insert(sha.into(), s.clone());
        Some(s)
    }
}

// The Lua state is not `Send` and belongs to the worker thread, not to a
// command: each worker has its own, made at its first script (see
// docs/design.md, "Scripts", for this departure from the no-thread-local
// rule).
thread_local! {
    static WORKER_VM: RefCell<Option<WorkerVm>> = const { RefCell::new(None) };
}

/// Runs `f` with this worker's interpreter, made on first use, its
/// compiled scripts dropped if SCRIPT FLUSH ran since.
pub fn with_vm<R>(shared: &Shared, f: impl FnOnce(&mut WorkerVm) -> R) -> Result<R, CmdError> {
    WORKER_VM.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err(CmdError::text(errors::SCRIPT_NESTED));
        };
        if slot.is_none() {
            let limit = shared.config.read().lua_heap_limit as usize;
            let vm = Vm::new(limit)
                .map_err(|e| CmdError::Bytes(format!("ERR cannot start Lua: {e}").into_bytes()))?;
            *slot = Some(WorkerVm {
                vm,
                generation: shared.scripts.generation(),
                functions: Default::default(),
                scripts: Default::default(),
            });
        }
        let wvm = slot.as_mut().expect("made above");
        let generation = shared.scripts.generation();
        if wvm.generation != generation {
            wvm.vm.flush_scripts();
            wvm.scripts.clear();
            wvm.generation = generation;
        }
        Ok(f(wvm))
    })
}

/// Drops this thread's interpreter now (a SCRIPT DEBUG YES session's
/// thread, before it ends: freed while the thread still counts in the
/// server's memory accounting).
pub fn drop_vm() {
    WORKER_VM.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            slot.take();
        }
    });
}

/// What a script's runs taught of its keys (`Spec::footprint`).
pub mod footprint {
    /// Never run: the first run takes every shard and watches whether
    /// the script touches keys it did not declare.
    pub const UNKNOWN: u8 = 0;
    /// Its runs touched only declared keys: later runs hold their shards.
    pub const DECLARED: u8 = 1;
    /// It touched undeclared keys: every run takes every shard.
    pub const UNDECLARED: u8 = 2;
}

/// What is being run and under which rules.
pub struct Spec<'s> {
    /// What errors and the slow-script warning name it by: the SHA of an
    /// EVAL script, a function's name.
    pub name: &'s str,
    pub keys: &'s [&'s [u8]],
    /// Shebang or function flags (`super::flag`).
    pub flags: u32,
    /// EVAL_RO, EVALSHA_RO, FCALL_RO.
    pub read_only: bool,
    pub is_function: bool,
    /// What runs so far taught of the script's keys (`footprint`).
    pub footprint: &'s AtomicU8,
    /// A SCRIPT DEBUG session: it holds every shard (it may call anything
    /// from the debugger's prompt, and must never start again) and
    /// teaches nothing.
    pub debug: bool,
}

/// Runs a script for the command in `ctx` under `spec`: `body` runs it on
/// the interpreter with a host and writes its reply. Checks first what
/// Redis checks before a script with flags starts.
pub fn execute(
    ctx: &mut Ctx,
    spec: &Spec,
    mut body: impl FnMut(&mut WorkerVm, &mut dyn Host, Protocol, &mut Vec<u8>) -> Result<(), RunError>,
) -> CmdResult {
    let shared = ctx.shared;
    if spec.flags & flag::EVAL_COMPAT == 0 {
        if spec.flags & flag::NO_CLUSTER != 0 && shared.cluster.enabled() {
            return Err(CmdError::text(errors::SCRIPT_NO_CLUSTER));
        }
        if spec.read_only && spec.flags & flag::NO_WRITES == 0 {
            return Err(CmdError::text(errors::SCRIPT_RO_WITH_WRITE_FLAG));
        }
        let may_write = spec.flags & flag::NO_WRITES == 0 && !spec.read_only;
        if may_write {
            if crate::replication::replica::read_only(shared)
                && !ctx.client.info.master.load(Ordering::Relaxed)
            {
                return Err(CmdError::text(crate::replication::replica::SCRIPT_READONLY));
            }
            if let Some(why) = crate::exec::admission::writes_denied(shared) {
                return Err(CmdError::text(errors::writes_denied(&why)));
            }
            // Redis's `scriptPrepareForRun`: a script that may write does
            // not start with too few good replicas.
            if shared.replication.too_few_replicas() {
                return Err(CmdError::text(errors::NOREPLICAS));
            }
            if spec.flags & flag::ALLOW_OOM == 0
                && !crate::exec::admission::room_for(shared, &ctx.cx, 0)
            {
                return Err(CmdError::text(errors::OOM));
            }
        }
    }
    let worker = ctx.client.info.worker();
    let slot = &shared.scripts.slots[worker];
    let started_ms = cairn_engine::clock::now_ms();
    slot.is_function.store(spec.is_function, Ordering::Relaxed);
    if spec.is_function {
        *slot.name.lock() = spec.name.to_string();
        *slot.command.lock() = ctx.args.iter_from(0).map(<[u8]>::to_vec).collect();
    }
    slot.wrote.store(false, Ordering::Relaxed);
    slot.kill.store(false, Ordering::Relaxed);
    slot.started_ms.store(started_ms, Ordering::Relaxed);
    let saved_db = ctx.client.db;
    let saved_in_exec = ctx.client.in_exec;
    // Blocking commands answer at once inside a script, as inside EXEC.
    ctx.client.in_exec = true;
    ctx.client.in_script = true;
    let proto = ctx.client.proto;
    let start = ctx.out.len();
    let stats = &shared.worker_stats[worker];
    let mut known = if spec.debug {
        footprint::UNDECLARED
    } else {
        spec.footprint.load(Ordering::Relaxed)
    };
    let result = loop {
        let global = known != footprint::DECLARED;
        let e = &shared.engine;
        let keys: SmallVec<[cairn_engine::Key; 8]> = spec.keys.iter().map(|k| e.key(k)).collect();
        let hold = if ctx.cx.in_hold() {
            None
        } else if global {
            Some(e.hold_all(&ctx.cx))
        } else {
            Some(e.hold_keys(&ctx.cx, &keys))
        };
        let cx = match &hold {
            Some(h) => ctx.cx.with_hold(h),
            None => ctx.cx,
        };
        let mut host = ScriptHost {
            shared,
            client: ctx.client,
            cx,
            hold: hold.as_ref(),
            stats,
            slot,
            spec,
            started_ms,
            wrote: false,
            side_effect: false,
            restart: false,
            learning: (known == footprint::UNKNOWN).then(|| {
                let mut shards: SmallVec<[usize; 8]> =
                    keys.iter().map(|k| e.shard_index(k)).collect();
                shards.sort_unstable();
                shards
            }),
            undeclared: false,
        };
        let out = &mut *ctx.out;
        let r = with_vm(shared, |wvm| body(wvm, &mut host, proto, out));
        let restart = host.restart;
        let learned = if host.undeclared || restart {
            footprint::UNDECLARED
        } else {
            footprint::DECLARED
        };
        // Inside EXEC the transaction's hold served everything: nothing
        // was learned.
        let own_hold = hold.is_some();
        drop(hold);
        if own_hold
            && known != footprint::UNDECLARED
            && (learned == footprint::UNDECLARED || known == footprint::UNKNOWN)
        {
            spec.footprint.store(learned, Ordering::Relaxed);
        }
        if restart {
            ctx.out.truncate(start);
            ctx.client.out_refs.truncate(start);
            ctx.client.db = saved_db;
            known = footprint::UNDECLARED;
            continue;
        }
        break r;
    };
    ctx.client.db = saved_db;
    ctx.client.in_exec = saved_in_exec;
    ctx.client.in_script = false;
    slot.started_ms.store(0, Ordering::Relaxed);
    if slot.busy.swap(false, Ordering::Relaxed) {
        shared.scripts.busy.fetch_sub(1, Ordering::Relaxed);
    }
    let _ = with_vm(shared, |wvm| {
        shared.scripts.heap[worker].store(wvm.vm.used_memory(), Ordering::Relaxed)
    });
    match result? {
        Ok(()) => Ok(()),
        Err(RunError::Script(text) | RunError::Killed(text)) => Err(CmdError::Bytes(text)),
    }
}

/// Marks the worker's running script busy once it has run past
/// `busy-reply-threshold`: other workers' clients then get BUSY.
pub fn note_slow(shared: &Shared, slot: &RunSlot, started_ms: u64, name: &str, is_function: bool) {
    let threshold = shared.hot.busy_reply_threshold_ms.load(Ordering::Relaxed);
    let elapsed = cairn_engine::clock::now_ms().saturating_sub(started_ms);
    if threshold > 0 && elapsed >= threshold && !slot.busy.swap(true, Ordering::Relaxed) {
        shared.scripts.busy.fetch_add(1, Ordering::Relaxed);
        crate::log::warning(&format!(
            "Slow script detected: still in execution after {elapsed} milliseconds. \
             You can try killing the script using the {} command. Script name is: {name}.",
            if is_function {
                "FUNCTION KILL"
            } else {
                "SCRIPT KILL"
            },
        ));
    }
}

/// `redis.log`: the server's log at the matching level.
pub fn log(level: LogLevel, msg: &[u8]) {
    let text = String::from_utf8_lossy(msg);
    match level {
        LogLevel::Warning => crate::log::warning(&text),
        LogLevel::Notice => crate::log::notice(&text),
        LogLevel::Verbose | LogLevel::Debug => crate::log::verbose(&text),
    }
}

/// Commands that walk the whole keyspace, so need every shard in a script.
const WHOLE_KEYSPACE: &[&str] = &[
    "keys",
    "scan",
    "randomkey",
    "dbsize",
    "flushdb",
    "flushall",
    "swapdb",
    "info",
    "sort",
    "sort_ro",
];

/// The argument positions of `cmd`'s keys, or None if it may touch any
/// key (it walks the keyspace, or its key specs do not fit).
fn whole_or_keys(cmd: &Command, args: &[&[u8]]) -> Option<Vec<usize>> {
    if WHOLE_KEYSPACE.contains(&cmd.name) {
        None
    } else {
        crate::exec::keys::keys_from_specs(&cmd.key_specs, args)
    }
}

/// How long a script that already wrote waits for an undeclared key's
/// busy shard before that call fails.
const UNDECLARED_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The server as a running script sees it.
struct ScriptHost<'a, 'c> {
    shared: &'a Shared,
    client: &'c mut Client,
    cx: Cx<'a>,
    /// The script's own hold (None inside EXEC, whose hold serves all).
    hold: Option<&'a Hold<'a>>,
    stats: &'a WorkerStats,
    slot: &'a RunSlot,
    spec: &'a Spec<'a>,
    started_ms: u64,
    /// A write command ran (SCRIPT KILL answers UNKILLABLE).
    wrote: bool,
    /// Something others could see happened (a write, a PUBLISH): the
    /// script can no longer start again.
    side_effect: bool,
    /// The script must start again under `hold_all`.
    restart: bool,
    /// On a script's first run (under `hold_all`): its declared keys'
    /// shards, sorted, to see whether it touches others.
    learning: Option<SmallVec<[usize; 8]>>,
    /// It touched a key outside its declared keys' shards.
    undeclared: bool,
}

impl ScriptHost<'_, '_> {
    /// Takes the shards `cmd` needs into the script's hold.
    fn take_shards(&mut self, cmd: &Command, args: &[&[u8]]) -> Result<(), Refusal> {
        let Some(hold) = self.hold else {
            return Ok(());
        };
        let e = &self.shared.engine;
        if hold.is_all() {
            if let Some(declared) = &self.learning {
                if !self.undeclared {
                    self.undeclared = match whole_or_keys(cmd, args) {
                        None => true,
                        Some(positions) => positions.into_iter().any(|p| {
                            declared
                                .binary_search(&e.shard_index(&e.key(args[p])))
                                .is_err()
                        }),
                    };
                }
            }
            return Ok(());
        }
        let positions = whole_or_keys(cmd, args);
        let Some(positions) = positions else {
            if !self.side_effect {
                return Err(self.start_again());
            }
            for i in 0..e.shard_count() {
                self.take(hold, i)?;
            }
            return Ok(());
        };
        for p in positions {
            let i = e.shard_index(&e.key(args[p]));
            if !hold.has(i) {
                // A key it did not declare, on a run after runs that
                // touched only declared ones: runs from now on take every
                // shard.
                self.undeclared = true;
            }
            if hold.add(i).is_err() {
                if !self.side_effect {
                    return Err(self.start_again());
                }
                self.take(hold, i)?;
            }
        }
        Ok(())
    }

    /// `Hold::add`, retried for a while when the shard is busy.
    fn take(&self, hold: &Hold, i: usize) -> Result<(), Refusal> {
        let deadline = std::time::Instant::now() + UNDECLARED_WAIT;
        loop {
            if hold.add(i).is_ok() {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(Refusal::Error(
                    errors::SCRIPT_UNDECLARED_BUSY.as_bytes().to_vec(),
                ));
            }
            std::thread::yield_now();
        }
    }

    fn start_again(&mut self) -> Refusal {
        self.restart = true;
        Refusal::Abort(b"ERR script restarted under a whole-keyspace hold".to_vec())
    }

    fn refuse(text: &str) -> Result<(), Refusal> {
        Err(Refusal::Error(text.as_bytes().to_vec()))
    }
}

impl Host for ScriptHost<'_, '_> {
    fn call(&mut self, args: &[&[u8]], resp3: bool, out: &mut Vec<u8>) -> Result<(), Refusal> {
        if self.slot.kill.load(Ordering::Relaxed) {
            return Err(Refusal::Abort(errors::SCRIPT_KILLED.as_bytes().to_vec()));
        }
        let list = ArgList::from_args(args.iter().copied());
        let a = Args::new(&[], &list);
        let Ok(cmd) = dispatch::resolve(self.shared, &a) else {
            return Self::refuse(errors::SCRIPT_UNKNOWN_COMMAND);
        };
        if !cmd.arity_ok(args.len()) {
            return Self::refuse(errors::SCRIPT_WRONG_ARITY);
        }
        if cmd.has(flags::NOSCRIPT) && !self.shared.hot.script_allow_denied.load(Ordering::Relaxed)
        {
            return Self::refuse(errors::SCRIPT_NOT_ALLOWED);
        }
        if let Err(d) = crate::auth::check(
            self.shared,
            self.client,
            cmd,
            args,
            crate::auth::Context::Lua,
        ) {
            return Self::refuse(match d {
                crate::auth::acl::Denied::Command => {
                    "The user executing the script can't run this command or subcommand"
                }
                crate::auth::acl::Denied::Key(_) => {
                    "The user executing the script can't access at least one of the keys mentioned in the command"
                }
                crate::auth::acl::Denied::Channel(_) => {
                    "The user executing the script can't publish to the channel mentioned in the command"
                }
            });
        }
        let writes = cmd.has(flags::WRITE);
        let read_only = self.spec.read_only || self.spec.flags & flag::NO_WRITES != 0;
        // Redis counts may-replicate commands as writes here, PUBLISH
        // among them (its COMMAND INFO does not show that flag).
        let may_replicate =
            cmd.has(flags::MAY_REPLICATE) || matches!(cmd.name, "publish" | "spublish");
        if read_only && (writes || may_replicate) {
            return Self::refuse(errors::SCRIPT_WRITE_IN_READ_ONLY);
        }
        if writes {
            // Redis's `scriptVerifyWriteCommandAllow`: a read-only replica
            // refuses the write (its master's client is obeyed).
            if crate::replication::replica::read_only(self.shared)
                && !self.client.info.master.load(Ordering::Relaxed)
            {
                return Self::refuse(&format!("-{}", crate::replication::replica::READONLY));
            }
            if let Some(why) = crate::exec::admission::writes_denied(self.shared) {
                return Self::refuse(&format!("-{}", errors::writes_denied(&why)));
            }
            // Redis's `scriptVerifyWriteCommandAllow` (reached by scripts
            // that declared no flags; the others were checked at start),
            // which lets a script that already wrote finish its writes.
            if !self.wrote && self.shared.replication.too_few_replicas() {
                return Self::refuse(&format!("-{}", errors::NOREPLICAS));
            }
        }
        if cmd.has(flags::DENYOOM)
            && self.spec.flags & flag::ALLOW_OOM == 0
            && !self.wrote
            && !crate::exec::admission::room_for(self.shared, &self.cx, 0)
        {
            return Self::refuse(&format!("-{}", errors::OOM));
        }
        if self.shared.cluster.enabled() {
            if let Some(text) = crate::cluster::script_call_refusal(cmd, args) {
                return Self::refuse(text);
            }
        }
        self.take_shards(cmd, args)?;
        let proto = self.client.proto;
        self.client.proto = if resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        // A read by the script of a tracking client registers the keys
        // the script declared, not those the command names (Redis 7.0
        // `call`: trackingRememberKeys of the script's caller), before and
        // after the read as for any tracked read (`crate::tracking`).
        let tracked = self.client.info.tracking.load(Ordering::Relaxed) != 0
            && crate::tracking::tracks_reads(cmd);
        if tracked {
            crate::tracking::remember(self.shared, self.client, self.spec.keys.iter().copied());
        }
        dispatch::invoke(self.shared, self.client, cmd, a, out, self.stats, &self.cx);
        if tracked {
            crate::tracking::remember(self.shared, self.client, self.spec.keys.iter().copied());
        }
        self.client.proto = proto;
        if writes {
            self.wrote = true;
            self.slot.wrote.store(true, Ordering::Relaxed);
        }
        if writes || may_replicate {
            self.side_effect = true;
        }
        Ok(())
    }

    fn log(&mut self, level: LogLevel, msg: &[u8]) {
        log(level, msg);
    }

    fn tick(&mut self) -> Result<(), Vec<u8>> {
        if self.slot.kill.load(Ordering::Relaxed) {
            crate::log::warning("Lua script killed by user with SCRIPT KILL.");
            return Err(errors::SCRIPT_KILLED.as_bytes().to_vec());
        }
        if self.shared.shutdown.load(Ordering::Relaxed) {
            return Err(errors::SCRIPT_KILLED.as_bytes().to_vec());
        }
        note_slow(
            self.shared,
            self.slot,
            self.started_ms,
            self.spec.name,
            self.spec.is_function,
        );
        Ok(())
    }

    fn acl_check(&mut self, args: &[&[u8]]) -> Result<bool, Vec<u8>> {
        // redis.acl_check_cmd: the caller's rules, without logging.
        let list = ArgList::from_args(args.iter().copied());
        let Ok(cmd) = dispatch::resolve(self.shared, &Args::new(&[], &list)) else {
            return Err(b"Invalid command passed to redis.acl_check_cmd()".to_vec());
        };
        let Some(u) = &self.client.user else {
            return Ok(true);
        };
        let keys = crate::auth::key_rights(cmd, args);
        Ok(u.check(cmd, args, &keys).is_ok())
    }

    fn set_repl(&mut self, _flags: i64) {
        // Effects always reach the journal as they ran: dropping some
        // (REPL_NONE) would make a replay differ from what clients saw.
    }
}
