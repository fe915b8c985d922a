//! FUNCTION and FCALL / FCALL_RO (Redis 7.0 `functions.c`). The registry
//! and the loading of libraries are `crate::script::functions`'s.
use crate::exec::table::Def;
use crate::resp::cmd::scripting::numkeys;
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::script::flag;
use crate::script::functions::{self, Library, Policy};
use crate::script::run::{self, Spec};
use cairn_lua::mlua::{MultiValue, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub const COMMANDS: &[Def] = &[
    Def::new("fcall", fcall),
    Def::new("fcall_ro", fcall_ro),
    Def::container(
        "function",
        &[
            Def::new("load", function_load),
            Def::new("delete", function_delete),
            Def::new("list", function_list),
            Def::new("dump", function_dump),
            Def::new("restore", function_restore),
            Def::new("flush", function_flush),
            Def::new("kill", function_kill),
            Def::new("stats", function_stats),
            Def::new("help", function_help),
        ],
    ),
];

fn fcall(ctx: &mut Ctx) -> CmdResult {
    fcall_generic(ctx, false)
}

fn fcall_ro(ctx: &mut Ctx) -> CmdResult {
    fcall_generic(ctx, true)
}

fn fcall_generic(ctx: &mut Ctx, read_only: bool) -> CmdResult {
    crate::exec::dispatch::feed_monitors_first(ctx.shared, ctx.client, &ctx.args);
    let shared = ctx.shared;
    let wanted = ctx.arg(1);
    let found = run::with_vm(shared, |wvm| {
        wvm.functions.sync(&mut wvm.vm, &shared.scripts.functions);
        wvm.functions
            .get(wanted)
            .map(|f| (f.func.clone(), f.flags, f.name.clone(), f.library.clone()))
    })?;
    let Some((func, flags, name, library)) = found else {
        return Err(CmdError::text("ERR Function not found"));
    };
    let first_arg = numkeys(ctx, 2, CmdError::text("ERR Bad number of keys provided"))?;
    let args = ctx.args;
    let keys: Vec<&[u8]> = args.iter_from(3).take(first_arg - 3).collect();
    let argv: Vec<&[u8]> = args.iter_from(first_arg).collect();
    let spec = Spec {
        name: &name,
        keys: &keys,
        flags,
        read_only,
        is_function: true,
        footprint: &library.footprint,
        debug: false,
    };
    run::execute(ctx, &spec, |wvm, host, proto, out| {
        let lua = wvm.vm.lua();
        let tables = (|| {
            let kt = lua.create_table_with_capacity(keys.len(), 0)?;
            for (i, key) in keys.iter().enumerate() {
                kt.raw_set(i + 1, lua.create_string(key)?)?;
            }
            let at = lua.create_table_with_capacity(argv.len(), 0)?;
            for (i, a) in argv.iter().enumerate() {
                at.raw_set(i + 1, lua.create_string(a)?)?;
            }
            Ok::<_, cairn_lua::mlua::Error>(MultiValue::from_iter([
                Value::Table(kt),
                Value::Table(at),
            ]))
        })();
        let call_args = match tables {
            Ok(t) => t,
            Err(e) => {
                return Err(cairn_lua::vm::RunError::Script(
                    format!("ERR {e}").into_bytes(),
                ))
            }
        };
        wvm.vm
            .call_function(&func, call_args, &name, host, proto, out)
    })
}

/// FUNCTION LOAD [REPLACE] code → the library's name.
fn function_load(ctx: &mut Ctx) -> CmdResult {
    // Options, then the code last.
    let mut replace = false;
    for i in 2..ctx.argc() - 1 {
        let a = ctx.arg(i);
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else {
            return Err(CmdError::Bytes(
                format!("ERR Unknown option given: {}", String::from_utf8_lossy(a)).into_bytes(),
            ));
        }
    }
    let code = ctx.arg(ctx.argc() - 1);
    // A client's load stops after 500 ms (Redis's LOAD_TIMEOUT_MS: a
    // library's top level only registers functions); the master's does not.
    let deadline = (!ctx.client.info.master.load(Ordering::Relaxed))
        .then(|| std::time::Instant::now() + functions::LOAD_TIMEOUT);
    let library = load_library(ctx, code, replace, deadline)?;
    let name = library.name.clone();
    let policy = if replace {
        Policy::Replace
    } else {
        Policy::Append
    };
    ctx.shared
        .scripts
        .functions
        .add(vec![library], policy)
        .map_err(CmdError::text)?;
    record(ctx);
    ctx.bulk(name.as_bytes())
}

/// Runs a library's code on this worker to learn its functions.
fn load_library(
    ctx: &Ctx,
    code: &[u8],
    replace: bool,
    deadline: Option<std::time::Instant>,
) -> Result<Library, CmdError> {
    let name = functions::library_name(code).map_err(CmdError::text)?;
    if !replace && ctx.shared.scripts.functions.contains(&name) {
        return Err(CmdError::text(format!(
            "ERR Library '{name}' already exists"
        )));
    }
    let mut host = functions::LoadHost {
        quiet: false,
        deadline,
    };
    let registered = run::with_vm(ctx.shared, |wvm| wvm.vm.load_library(code, &mut host))?
        .map_err(CmdError::Bytes)?;
    let functions = functions::describe(&registered).map_err(CmdError::text)?;
    Ok(Library {
        name,
        code: Arc::from(code),
        functions,
        footprint: Default::default(),
    })
}

/// The journal replays FUNCTION LOAD, DELETE, FLUSH and RESTORE as sent:
/// they change no shard, so no guard records them.
fn record(ctx: &Ctx) {
    let args: Vec<&[u8]> = ctx.args.iter_from(0).collect();
    cairn_engine::record::command(ctx.engine(), &ctx.cx, &args);
}

/// FUNCTION DELETE library-name → OK.
fn function_delete(ctx: &mut Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    if !ctx.shared.scripts.functions.delete(&name) {
        return Err(CmdError::text("ERR Library not found"));
    }
    record(ctx);
    ctx.ok()
}

/// FUNCTION FLUSH [ASYNC|SYNC] → OK.
fn function_flush(ctx: &mut Ctx) -> CmdResult {
    let ok = match ctx.argc() {
        2 => true,
        3 => {
            let m = ctx.arg(2);
            m.eq_ignore_ascii_case(b"sync") || m.eq_ignore_ascii_case(b"async")
        }
        _ => return Err(subcommand_syntax_error(ctx)),
    };
    if !ok {
        return Err(CmdError::text(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    ctx.shared.scripts.functions.flush();
    record(ctx);
    ctx.ok()
}

/// FUNCTION KILL → OK once the running function is asked to stop.
fn function_kill(ctx: &mut Ctx) -> CmdResult {
    ctx.shared.scripts.kill(true).map_err(CmdError::text)?;
    ctx.ok()
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn function_list(ctx: &mut Ctx) -> CmdResult {
    let mut pattern: Option<&[u8]> = None;
    let mut with_code = false;
    let mut i = 2;
    while i < ctx.argc() {
        let a = ctx.arg(i);
        if a.eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
        } else if a.eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            if i + 1 >= ctx.argc() {
                return Err(CmdError::text("ERR library name argument was not given"));
            }
            pattern = Some(ctx.arg(i + 1));
            i += 1;
        } else {
            return Err(CmdError::Bytes(
                format!("ERR Unknown argument {}", String::from_utf8_lossy(a)).into_bytes(),
            ));
        }
        i += 1;
    }
    let libs: Vec<_> = ctx
        .shared
        .scripts
        .functions
        .libraries()
        .into_iter()
        .filter(|l| {
            pattern.is_none_or(|p| cairn_engine::util::glob::glob_match(p, l.name.as_bytes(), true))
        })
        .collect();
    let mut w = ctx.reply();
    w.array(libs.len());
    for lib in libs {
        w.map(if with_code { 4 } else { 3 });
        w.bulk(b"library_name");
        w.bulk(lib.name.as_bytes());
        w.bulk(b"engine");
        w.bulk(b"LUA");
        w.bulk(b"functions");
        w.array(lib.functions.len());
        for f in &lib.functions {
            w.map(3);
            w.bulk(b"name");
            w.bulk(f.name.as_bytes());
            w.bulk(b"description");
            match &f.description {
                Some(d) => w.bulk(d),
                None => w.null(),
            }
            w.bulk(b"flags");
            let names = flag::names(f.flags);
            w.set(names.len());
            for n in names {
                w.simple(n);
            }
        }
        if with_code {
            w.bulk(b"library_code");
            w.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION DUMP → a payload FUNCTION RESTORE (here or on Redis 7.0) takes.
fn function_dump(ctx: &mut Ctx) -> CmdResult {
    let payload = functions::dump(&ctx.shared.scripts.functions);
    ctx.bulk(&payload)
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE] → OK.
fn function_restore(ctx: &mut Ctx) -> CmdResult {
    let policy = match ctx.argc() {
        3 => Policy::Append,
        4 => {
            let p = ctx.arg(3);
            if p.eq_ignore_ascii_case(b"flush") {
                Policy::Flush
            } else if p.eq_ignore_ascii_case(b"append") {
                Policy::Append
            } else if p.eq_ignore_ascii_case(b"replace") {
                Policy::Replace
            } else {
                return Err(CmdError::text(
                    "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                ));
            }
        }
        _ => return Err(subcommand_syntax_error(ctx)),
    };
    let codes = functions::undump(ctx.arg(2)).map_err(CmdError::text)?;
    let mut libs = Vec::with_capacity(codes.len());
    for code in &codes {
        libs.push(load_library(ctx, code, true, None)?);
    }
    ctx.shared
        .scripts
        .functions
        .add(libs, policy)
        .map_err(CmdError::text)?;
    record(ctx);
    ctx.ok()
}

/// FUNCTION STATS → the running function (or nil) and the engines.
fn function_stats(ctx: &mut Ctx) -> CmdResult {
    let scripts = &ctx.shared.scripts;
    let running = scripts.slots.iter().find(|s| {
        s.started_ms.load(Ordering::Relaxed) != 0 && s.is_function.load(Ordering::Relaxed)
    });
    let running = running.map(|s| {
        let started = s.started_ms.load(Ordering::Relaxed);
        (
            s.name.lock().clone(),
            s.command.lock().clone(),
            cairn_engine::clock::now_ms().saturating_sub(started),
        )
    });
    let libraries = scripts.functions.library_count();
    let functions = scripts.functions.function_count();
    let mut w = ctx.reply();
    w.map(2);
    w.bulk(b"running_script");
    match running {
        None => w.null(),
        Some((name, command, ms)) => {
            w.map(3);
            w.bulk(b"name");
            w.bulk(name.as_bytes());
            w.bulk(b"command");
            w.array(command.len());
            for a in &command {
                w.bulk(a);
            }
            w.bulk(b"duration_ms");
            w.int(ms as i64);
        }
    }
    w.bulk(b"engines");
    w.map(1);
    w.bulk(b"LUA");
    w.map(2);
    w.bulk(b"libraries_count");
    w.int(libraries as i64);
    w.bulk(b"functions_count");
    w.int(functions as i64);
    Ok(())
}

fn function_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() != 2 {
        return Err(subcommand_syntax_error(ctx));
    }
    reply_help(
        ctx,
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    )
}
