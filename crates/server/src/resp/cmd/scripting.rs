//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (Redis 7.0 `eval.c`).
//! The script cache and the running of scripts are `crate::script`'s.
use crate::exec::table::Def;
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::{self, CmdError};
use crate::script::run::{self, LocalScript, Spec};
use crate::script::shebang_flags;

pub const COMMANDS: &[Def] = &[
    Def::new("eval", eval),
    Def::new("evalsha", evalsha),
    Def::new("eval_ro", eval_ro),
    Def::new("evalsha_ro", evalsha_ro),
    Def::container(
        "script",
        &[
            Def::new("load", script_load),
            Def::new("exists", script_exists),
            Def::new("flush", script_flush),
            Def::new("kill", script_kill),
            Def::new("debug", script_debug),
            Def::new("help", script_help),
        ],
    ),
];

fn eval(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.script_debug {
        return eval_debug(ctx, false);
    }
    eval_generic(ctx, false, false, None)
}

fn evalsha(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, true, false, None)
}

fn eval_ro(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.script_debug {
        return eval_debug(ctx, true);
    }
    eval_generic(ctx, false, true, None)
}

fn evalsha_ro(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, true, true, None)
}

/// EVAL under SCRIPT DEBUG: the run is a debugging session over the
/// client's connection (`crate::script::debug`), which closes after it;
/// under YES on its own thread, against a copy of the dataset.
fn eval_debug(ctx: &mut Ctx, read_only: bool) -> CmdResult {
    if ctx.client.script_debug_fork {
        return crate::script::debug::fork(ctx);
    }
    crate::script::debug::session(ctx, |ctx, console| {
        eval_generic(ctx, false, read_only, Some(console))
    })
}

/// The key count at `at` and the keys after it (EVAL's and FCALL's
/// `numkeys key [key ...] arg [arg ...]`): the index of the first
/// argument after the keys.
pub fn numkeys(ctx: &Ctx, at: usize, not_integer: CmdError) -> Result<usize, CmdError> {
    let n = cairn_engine::util::num::parse_i64(ctx.arg(at)).ok_or(not_integer)?;
    if n > (ctx.argc() - at - 1) as i64 {
        return Err(CmdError::text(errors::NUMKEYS_TOO_MANY));
    }
    if n < 0 {
        return Err(CmdError::text(errors::NUMKEYS_NEGATIVE));
    }
    Ok(at + 1 + n as usize)
}

/// The cached script for an EVAL body, compiled on this worker and cached
/// if new; Redis's errors for a bad shebang or a compile error.
fn script_for_body(ctx: &Ctx, body: &[u8]) -> Result<(String, LocalScript), CmdError> {
    let sha = cairn_lua::sha1hex(body);
    let shared = ctx.shared;
    if let Some(s) = run::with_vm(shared, |wvm| wvm.script(&sha, &shared.scripts))? {
        return Ok((sha, s));
    }
    let flags = shebang_flags(body).map_err(CmdError::text)?;
    run::with_vm(shared, |wvm| wvm.vm.compile(&sha, body))?.map_err(CmdError::Bytes)?;
    shared.scripts.insert(&sha, body, flags);
    let script =
        run::with_vm(shared, |wvm| wvm.script(&sha, &shared.scripts))?.expect("just inserted");
    Ok((sha, script))
}

fn eval_generic(
    ctx: &mut Ctx,
    by_sha: bool,
    read_only: bool,
    mut debug: Option<&mut crate::script::debug::LinkConsole>,
) -> CmdResult {
    crate::exec::dispatch::feed_monitors_first(ctx.shared, ctx.client, &ctx.args);
    let first_arg = numkeys(ctx, 2, CmdError::NotInteger)?;
    let (sha, script) = if by_sha {
        // A SHA is 40 hex digits, any case: lower-cased on the stack.
        let given = ctx.arg(1);
        let mut buf = [0u8; 40];
        if given.len() != 40 {
            return Err(CmdError::text(errors::NOSCRIPT));
        }
        if ctx.client.script_debug {
            return Err(CmdError::text(
                "ERR Please use EVAL instead of EVALSHA for debugging",
            ));
        }
        for (b, g) in buf.iter_mut().zip(given) {
            *b = g.to_ascii_lowercase();
        }
        let sha = std::str::from_utf8(&buf).map_err(|_| CmdError::text(errors::NOSCRIPT))?;
        let shared = ctx.shared;
        match run::with_vm(shared, |wvm| wvm.script(sha, &shared.scripts))? {
            Some(s) => (sha.to_owned(), s),
            None => return Err(CmdError::text(errors::NOSCRIPT)),
        }
    } else {
        script_for_body(ctx, ctx.arg(1))?
    };
    let args = ctx.args;
    let keys: smallvec::SmallVec<[&[u8]; 4]> = args.iter_from(3).take(first_arg - 3).collect();
    let argv: smallvec::SmallVec<[&[u8]; 8]> = args.iter_from(first_arg).collect();
    let spec = Spec {
        name: &sha,
        keys: &keys,
        flags: script.flags,
        read_only,
        is_function: false,
        footprint: &script.footprint,
        debug: debug.is_some(),
    };
    let timeout_ms = ctx
        .shared
        .hot
        .busy_reply_threshold_ms
        .load(std::sync::atomic::Ordering::Relaxed);
    run::execute(ctx, &spec, |wvm, host, proto, out| {
        if !wvm.vm.has(&sha) {
            if let Err(e) = wvm.vm.compile(&sha, &script.body) {
                return Err(cairn_lua::vm::RunError::Script(e));
            }
        }
        match debug.as_deref_mut() {
            None => wvm.vm.run(&sha, &keys, &argv, host, proto, out),
            Some(console) => {
                console.ran = true;
                console.name.clone_from(&sha);
                let body = &script.body;
                wvm.vm.run_debug(
                    &sha, body, &keys, &argv, host, console, timeout_ms, proto, out,
                )
            }
        }
    })
}

/// SCRIPT DEBUG YES|SYNC|NO → OK: SYNC makes the client's next EVAL a
/// debugging session whose writes stay; YES one run against a private
/// copy of the dataset, whose writes vanish (Redis forks; docs/design.md).
fn script_debug(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() != 3 {
        return Err(subcommand_syntax_error(ctx));
    }
    // Redis's `clientHasPendingReplies`: replies of this connection not
    // yet written (a pipeline, or MULTI's +OK and +QUEUED before EXEC's).
    if !ctx.out.is_empty() || !ctx.client.out_refs.is_empty() {
        return Err(CmdError::text(
            "ERR SCRIPT DEBUG must be called outside a pipeline",
        ));
    }
    let mode = ctx.arg(2);
    if mode.eq_ignore_ascii_case(b"no") {
        ctx.client.script_debug = false;
        ctx.client.script_debug_fork = false;
    } else if mode.eq_ignore_ascii_case(b"sync") {
        ctx.client.script_debug = true;
        ctx.client.script_debug_fork = false;
    } else if mode.eq_ignore_ascii_case(b"yes") {
        ctx.client.script_debug = true;
        ctx.client.script_debug_fork = true;
    } else {
        return Err(CmdError::text("ERR Use SCRIPT DEBUG YES/SYNC/NO"));
    }
    ctx.ok()
}

/// SCRIPT LOAD script → its SHA-1, once it compiles.
fn script_load(ctx: &mut Ctx) -> CmdResult {
    let (sha, _) = script_for_body(ctx, ctx.arg(2))?;
    ctx.bulk(sha.as_bytes())
}

/// SCRIPT EXISTS sha [sha ...] → 1 or 0 for each.
fn script_exists(ctx: &mut Ctx) -> CmdResult {
    let found: Vec<bool> = ctx
        .args
        .iter_from(2)
        .map(|sha| ctx.shared.scripts.exists(sha))
        .collect();
    let mut w = ctx.reply();
    w.array(found.len());
    for f in found {
        w.int(f as i64);
    }
    Ok(())
}

/// SCRIPT FLUSH [ASYNC|SYNC] → OK.
fn script_flush(ctx: &mut Ctx) -> CmdResult {
    let ok = match ctx.argc() {
        2 => true,
        3 => {
            let m = ctx.arg(2);
            m.eq_ignore_ascii_case(b"sync") || m.eq_ignore_ascii_case(b"async")
        }
        _ => false,
    };
    if !ok {
        return Err(CmdError::text(
            "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
        ));
    }
    ctx.shared.scripts.flush();
    // This worker's compiled scripts go now; the others' at their next
    // script.
    run::with_vm(ctx.shared, |_| ())?;
    ctx.ok()
}

/// SCRIPT KILL → OK once the running script is asked to stop.
fn script_kill(ctx: &mut Ctx) -> CmdResult {
    ctx.shared.scripts.kill(false).map_err(CmdError::text)?;
    ctx.ok()
}

fn script_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() != 2 {
        return Err(subcommand_syntax_error(ctx));
    }
    reply_help(
        ctx,
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    )
}
