//! Server and introspection commands: COMMAND, CONFIG, TIME, SHUTDOWN,
//! DEBUG, SLOWLOG and MONITOR (Redis 7.0 server.c `commandCommand` and
//! friends, config.c `configGetCommand`..., debug.c, slowlog.c,
//! replication.c `monitorCommand`). INFO lives in `info.rs`.
//!
//! COMMAND's replies are rendered from the metadata Redis itself publishes
//! (`exec::meta`), so they are byte-identical to Redis 7.0 for every command
//! in Cairn's table; commands Cairn does not implement do not exist here.
use crate::client::Client;
use crate::config::{Config, MaxmemoryPolicy};
use crate::exec::keys;
use crate::exec::meta;
use crate::exec::table::{Command, CommandTable, Def};
use crate::log;
use crate::resp::args;
use crate::resp::cmd::info;
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use crate::shared::Shared;
use cairn_engine::value::{HashValue, SetValue, StrValue};
use cairn_engine::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;

pub const COMMANDS: &[Def] = &[
    // COMMAND runs on its own (all commands' info) and has subcommands, so
    // it is registered with both a handler and subcommands.
    Def {
        name: "command",
        handler: Some(command),
        subs: &[
            Def::new("count", command_count),
            Def::new("docs", command_docs),
            Def::new("getkeys", command_getkeys),
            Def::new("getkeysandflags", command_getkeysandflags),
            Def::new("help", command_help),
            Def::new("info", command_info),
            Def::new("list", command_list),
        ],
    },
    Def::container(
        "config",
        &[
            Def::new("get", config_get),
            Def::new("set", config_set),
            Def::new("resetstat", config_resetstat),
            Def::new("rewrite", config_rewrite),
            Def::new("help", config_help),
        ],
    ),
    Def::new("time", time),
    Def::new("shutdown", shutdown),
    Def::new("debug", debug),
    Def::container(
        "slowlog",
        &[
            Def::new("get", slowlog_get),
            Def::new("len", slowlog_len),
            Def::new("reset", slowlog_reset),
            Def::new("help", slowlog_help),
        ],
    ),
    Def::new("monitor", monitor),
];

// ---------------------------------------------------------------- shared ---

/// Redis's `islocalClient`: connected from 127.0.0.1 or ::1.
fn is_local(client: &Client) -> bool {
    match client.info.addr.ip() {
        IpAddr::V4(a) => a == Ipv4Addr::LOCALHOST,
        IpAddr::V6(a) => a == Ipv6Addr::LOCALHOST,
    }
}

// --------------------------------------------------------------- COMMAND ---

/// COMMAND → array of every command's COMMAND INFO entry.
///
/// Also routes `COMMAND <sub> ...`: the dispatcher runs a command that has
/// a handler without looking at its subcommands, while Redis
/// (`lookupCommandLogic`) picks the subcommand whenever there is a second
/// argument. Resolving it here keeps Redis's behaviour, including the
/// subcommand's arity check and error texts.
/// COMMAND → array of every top-level command's info. Its subcommands
/// (COMMAND INFO, ...) are dispatched to their own handlers.
fn command(ctx: &mut Ctx) -> CmdResult {
    all_info(ctx)
}

fn all_info(ctx: &mut Ctx) -> CmdResult {
    let table = &ctx.shared.table;
    let mut w = ctx.reply();
    w.array(table.top_level().count());
    for c in table.top_level() {
        meta::render(&c.meta.info, &mut w);
    }
    Ok(())
}

/// COMMAND COUNT → integer: the number of top-level commands.
fn command_count(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.shared.table.top_level().count();
    ctx.int(n as i64)
}

/// Finds a command by its full name, `name` or `parent|sub`, any case
/// (server.c `lookupCommandBySds`, strict): a container's name alone is the
/// container; a `|` after a command without subcommands finds nothing.
pub(super) fn lookup_full<'t>(table: &'t CommandTable, name: &[u8]) -> Option<&'t Command> {
    let mut parts = name.split(|&b| b == b'|');
    let top = table.lookup(parts.next()?)?;
    match (parts.next(), parts.next()) {
        (None, _) => Some(top),
        (Some(sub), None) if !top.subs.is_empty() => table.lookup_sub(top, sub),
        _ => None,
    }
}

/// COMMAND INFO [name ...] → array of COMMAND INFO entries, null for an
/// unknown name; no names: every command.
fn command_info(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() == 2 {
        return all_info(ctx);
    }
    let (table, args) = (&ctx.shared.table, ctx.args);
    let mut w = ctx.reply();
    w.array(args.len() - 2);
    for name in args.iter_from(2) {
        match lookup_full(table, name) {
            Some(c) => meta::render(&c.meta.info, &mut w),
            None => w.null(),
        }
    }
    Ok(())
}

/// COMMAND DOCS [name ...] → map of name → docs, unknown names left out;
/// no names: every command.
fn command_docs(ctx: &mut Ctx) -> CmdResult {
    let table = &ctx.shared.table;
    let found: Vec<&Command> = if ctx.argc() == 2 {
        table.top_level().collect()
    } else {
        ctx.args
            .iter_from(2)
            .filter_map(|name| lookup_full(table, name))
            .collect()
    };
    let mut w = ctx.reply();
    w.map(found.len());
    for c in found {
        w.bulk(c.name.as_bytes());
        meta::render(&c.meta.docs, &mut w);
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]
/// → array of command names, each container followed by its subcommands.
fn command_list(ctx: &mut Ctx) -> CmdResult {
    enum Filter<'a> {
        None,
        /// Cairn has no modules: nothing matches.
        Module,
        AclCat(String),
        Pattern(&'a [u8]),
    }
    let mut filter = Filter::None;
    let mut i = 2;
    while i < ctx.argc() {
        // Redis accepts FILTERBY only with exactly two arguments after it.
        if !(args::is(ctx.arg(i), "filterby") && ctx.argc() - 1 - i == 2) {
            return Err(CmdError::Syntax);
        }
        let (kind, arg) = (ctx.arg(i + 1), ctx.arg(i + 2));
        filter = if args::is(kind, "module") {
            Filter::Module
        } else if args::is(kind, "aclcat") {
            Filter::AclCat(format!("@{}", String::from_utf8_lossy(arg)))
        } else if args::is(kind, "pattern") {
            Filter::Pattern(arg)
        } else {
            return Err(CmdError::Syntax);
        };
        i += 3;
    }
    let keep = |c: &Command| match &filter {
        Filter::None => true,
        Filter::Module => false,
        Filter::AclCat(cat) => c
            .meta
            .acl_categories
            .iter()
            .any(|a| a.eq_ignore_ascii_case(cat)),
        Filter::Pattern(p) => cairn_engine::util::glob::glob_match(p, c.name.as_bytes(), true),
    };
    let table = &ctx.shared.table;
    let mut names: Vec<&str> = Vec::new();
    for top in table.top_level() {
        for c in std::iter::once(top).chain(top.subs.values().map(|&id| table.get(id))) {
            if keep(c) {
                names.push(c.name);
            }
        }
    }
    let mut w = ctx.reply();
    w.array(names.len());
    for n in names {
        w.bulk(n.as_bytes());
    }
    Ok(())
}

/// COMMAND GETKEYS command [arg ...] → array of the key arguments.
fn command_getkeys(ctx: &mut Ctx) -> CmdResult {
    getkeys(ctx, false)
}

/// COMMAND GETKEYSANDFLAGS command [arg ...] → array of [key, set of the
/// key's flags] pairs.
fn command_getkeysandflags(ctx: &mut Ctx) -> CmdResult {
    getkeys(ctx, true)
}

/// Both GETKEYS forms (server.c `getKeysSubcommandImpl`): the keys come
/// from the command's key specs or its callback (`exec::keys`).
fn getkeys(ctx: &mut Ctx, with_flags: bool) -> CmdResult {
    let table = &ctx.shared.table;
    // lookupCommand (not strict): a container with a second argument
    // means its subcommand.
    let top = table.lookup(ctx.arg(2));
    let cmd = match top {
        Some(t) if !t.subs.is_empty() && ctx.argc() > 3 => table.lookup_sub(t, ctx.arg(3)),
        other => other,
    };
    let Some(cmd) = cmd else {
        return Err(CmdError::text(errors::GETKEYS_INVALID_COMMAND));
    };
    if !keys::has_keys(cmd.name, &cmd.key_specs) {
        return Err(CmdError::text(errors::GETKEYS_NO_KEYS));
    }
    let argc = ctx.argc() - 2;
    if !cmd.arity_ok(argc) {
        return Err(CmdError::text(errors::GETKEYS_BAD_ARITY));
    }
    let argv: Vec<&[u8]> = ctx.args.iter_from(2).collect();
    let found = keys::command_keys(cmd.name, &cmd.key_specs, &argv);
    if found.is_empty() {
        if cmd.meta.flags.contains(&"no_mandatory_keys") {
            ctx.reply().array(0);
            return Ok(());
        }
        return Err(CmdError::text(errors::GETKEYS_BAD_ARGS));
    }
    let mut w = ctx.reply();
    w.array(found.len());
    for (at, flags) in found {
        if with_flags {
            w.array(2);
            w.bulk(argv[at]);
            flags.render(&mut w);
        } else {
            w.bulk(argv[at]);
        }
    }
    Ok(())
}

/// COMMAND HELP → Redis 7.0's help lines.
fn command_help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    )
}

// ---------------------------------------------------------------- CONFIG ---

/// CONFIG GET pattern [pattern ...] → map of directive → value, each
/// directive once (RESP2: flat array).
fn config_get(ctx: &mut Ctx) -> CmdResult {
    let patterns: Vec<String> = ctx
        .args
        .iter_from(2)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
    let pairs = ctx.shared.config.read().get_many(&refs);
    let mut w = ctx.reply();
    w.map(pairs.len());
    for (name, value) in &pairs {
        w.bulk(name.as_bytes());
        w.bulk(value.as_bytes());
    }
    Ok(())
}

/// CONFIG SET directive value [directive value ...] → +OK; all or nothing.
fn config_set(ctx: &mut Ctx) -> CmdResult {
    if !ctx.argc().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    // Secrets never reach the slow log or MONITOR, even when the command
    // fails (config.c `configSetCommand` redacts before validating).
    for i in (2..ctx.argc()).step_by(2) {
        if crate::config::is_sensitive(&String::from_utf8_lossy(ctx.arg(i))) {
            ctx.client.redact_arg(i + 1);
        }
    }
    let pairs: Vec<(String, String)> = (2..ctx.argc())
        .step_by(2)
        .map(|i| {
            (
                String::from_utf8_lossy(ctx.arg(i)).into_owned(),
                String::from_utf8_lossy(ctx.arg(i + 1)).into_owned(),
            )
        })
        .collect();
    let local = is_local(ctx.client);
    let (before, changed) = {
        let mut cfg = ctx.shared.config.write();
        let before = cfg.clone();
        let changed = cfg.set_from(&pairs, local).map_err(CmdError::text)?;
        if let Err(e) = apply_config_changes(ctx.shared, &cfg, &changed) {
            *cfg = before;
            return Err(e);
        }
        (before, changed)
    };
    // Starting or stopping the journal needs the config lock released
    // (it locks every shard).
    if changed.contains(&"appendonly") {
        if let Err(why) =
            crate::journal::on_config_appendonly(ctx.shared, &ctx.cx, ctx.client.info.worker())
        {
            *ctx.shared.config.write() = before;
            return Err(errors::config_set_failed("appendonly", why));
        }
    }
    ctx.shared.refresh_hot();
    if changed.contains(&"requirepass") {
        let pass = ctx.shared.config.read().requirepass.clone();
        crate::auth::set_default_password(ctx.shared, &pass);
    }
    if changed.contains(&"acl-pubsub-default") {
        let all = ctx.shared.config.read().acl_pubsub_default
            == crate::config::PubsubDefault::AllChannels;
        ctx.shared.acl.pubsub_all.store(all, Ordering::Relaxed);
    }
    ctx.ok()
}

/// The side effects of changed directives that the request path does not
/// pick up by itself (`Shared::refresh_hot` covers the rest). On error the
/// caller restores the previous config; the checks that can fail come
/// before any effect is applied.
fn apply_config_changes(shared: &Shared, cfg: &Config, changed: &[&str]) -> Result<(), CmdError> {
    let failed = |name: &str, why: &str| errors::config_set_failed(name, why);
    // New certificates or settings for connections accepted from now on
    // (Redis's applyTlsCfg); a context that cannot be built leaves the old
    // one, and the reason goes to the log as in Redis.
    let tls_change = changed
        .iter()
        .find(|n| n.starts_with("tls-") && !TLS_STORED_ONLY.contains(n));
    if let Some(name) = tls_change {
        if crate::net::tls_config::wanted(cfg) {
            if let Err(why) = shared.tls.reload(cfg) {
                log::warning(&format!("Failed to configure TLS: {why}"));
                return Err(failed(
                    name,
                    "Unable to update TLS configuration. Check server logs.",
                ));
            }
        }
    }
    if changed.contains(&"bind") {
        // The listeners are bound once at start; rebinding them needs the
        // acceptor threads to be replaceable, which they are not yet.
        return Err(failed(
            "bind",
            "Cairn can't change bind at runtime; set it in the config file and restart",
        ));
    }
    if changed.contains(&"dir") {
        std::env::set_current_dir(&cfg.dir).map_err(|e| failed("dir", &strerror(&e)))?;
    }
    if changed.contains(&"loglevel") {
        if let Some(level) = log::Level::parse(cfg.loglevel.as_str()) {
            log::set_level(level);
        }
    }
    if changed.contains(&"jemalloc-bg-thread") {
        // Redis ignores a failure here too (updateJemallocBgThread).
        if let Err(e) = crate::process::set_jemalloc_bg_thread(cfg.jemalloc_bg_thread) {
            log::warning(&format!("Failed to set jemalloc background_thread: {e}"));
        }
    }
    // Last, as it can fail: the effects above are not undone if it does.
    for name in ["oom-score-adj", "oom-score-adj-values"] {
        if changed.contains(&name) {
            if cfg.oom_score_adj_values.0[1] < cfg.oom_score_adj_values.0[0]
                || cfg.oom_score_adj_values.0[2] < cfg.oom_score_adj_values.0[1]
            {
                log::warning("The oom-score-adj-values configuration may not work for non-privileged processes! Please consult the documentation.");
            }
            crate::process::set_oom_score_adj(cfg).map_err(|()| {
                failed(
                    name,
                    "Failed to set current oom_score_adj. Check server logs.",
                )
            })?;
            break;
        }
    }
    Ok(())
}

/// `tls-*` directives that do not shape the server's TLS context.
const TLS_STORED_ONLY: &[&str] = &[
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-replication",
    "tls-cluster",
];

/// An io::Error's text without Rust's " (os error N)" suffix: strerror().
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// CONFIG RESETSTAT → +OK; INFO's statistics restart from zero.
fn config_resetstat(ctx: &mut Ctx) -> CmdResult {
    info::reset_stats(ctx.shared, &ctx.cx);
    ctx.ok()
}

/// CONFIG REWRITE → +OK once the config file reflects the running config.
fn config_rewrite(ctx: &mut Ctx) -> CmdResult {
    // Write from a copy, so CONFIG SET and readers never wait on the disk.
    let mut cfg = ctx.shared.config.read().clone();
    // The users as they are now, not as the file had them.
    cfg.user_lines = crate::auth::config_lines(ctx.shared);
    // The master as REPLICAOF last set it, not as the file named it:
    // Sentinel's failover rewrites after SLAVEOF, so a restart must follow
    // the new master (and a promoted server must lose the line).
    cfg.replicaof = crate::replication::replica::master()
        .map(|(host, port)| format!("{host} {port}"))
        .unwrap_or_default();
    let Some(path) = cfg.config_file() else {
        return Err(CmdError::text(errors::NO_CONFIG_FILE));
    };
    match cfg.rewrite(path) {
        Ok(()) => {
            log::notice("CONFIG REWRITE executed with success.");
            ctx.ok()
        }
        Err(e) => {
            let why = strerror(&e);
            log::warning(&format!("CONFIG REWRITE failed: {why}"));
            Err(errors::config_rewrite_failed(why))
        }
    }
}

/// CONFIG HELP → help lines.
fn config_help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    )
}

// ------------------------------------------------------ TIME / SHUTDOWN ---

/// TIME → [unix seconds, microseconds] as bulk strings. Read from the same
/// clock as expiry, so DEBUG JUMP-CLOCK moves it too and TIME stays
/// consistent with TTLs.
fn time(ctx: &mut Ctx) -> CmdResult {
    let us = cairn_engine::clock::now_us();
    let mut w = ctx.reply();
    w.array(2);
    w.bulk_int((us / 1_000_000) as i64);
    w.bulk_int((us % 1_000_000) as i64);
    Ok(())
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT] → no reply: the process
/// exits. As in Redis, it first saves a snapshot when save rules exist
/// (unless NOSAVE) or SAVE is given; if that fails it answers an error
/// and keeps running, unless FORCE. Shutdown is immediate, so there is
/// never one in progress to ABORT.
fn shutdown(ctx: &mut Ctx) -> CmdResult {
    let (mut save, mut nosave, mut force, mut abort, mut now) = (false, false, false, false, false);
    for a in ctx.args.iter_from(1) {
        if args::is(a, "nosave") {
            nosave = true;
        } else if args::is(a, "save") {
            save = true;
        } else if args::is(a, "now") {
            now = true;
        } else if args::is(a, "force") {
            force = true;
        } else if args::is(a, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && (save || nosave || now || force)) || (save && nosave) {
        return Err(CmdError::Syntax);
    }
    if abort {
        return Err(CmdError::text(errors::NO_SHUTDOWN));
    }
    if crate::snapshots::final_save(ctx.shared, &ctx.cx, save, nosave, force).is_err() {
        return Err(CmdError::text(errors::SHUTDOWN_FAILED));
    }
    // NOW (don't wait for replicas) changes nothing: there are none.
    let pidfile = ctx.shared.config.read().pidfile.clone();
    crate::process::shutdown(ctx.shared, &pidfile)
}

// ----------------------------------------------------------------- DEBUG ---

/// DEBUG subcommand [arg ...]: SLEEP, OBJECT, DIGEST, DIGEST-VALUE,
/// RELOAD, POPULATE (`debug_dataset`), JUMP-CLOCK (Cairn), HELP.
/// Refused unless `enable-debug-command` allows this client.
fn debug(ctx: &mut Ctx) -> CmdResult {
    let allowed = ctx
        .shared
        .config
        .read()
        .enable_debug_command
        .allows(is_local(ctx.client));
    if !allowed {
        return Err(CmdError::text(errors::DEBUG_NOT_ALLOWED));
    }
    let sub = ctx.arg(1);
    match ctx.argc() {
        2 if args::is(sub, "help") => debug_help(ctx),
        3 if args::is(sub, "sleep") => debug_sleep(ctx),
        3 if args::is(sub, "object") => debug_object(ctx),
        3 if args::is(sub, "jump-clock") => debug_jump_clock(ctx),
        4 if args::is(sub, "journal-fault") => debug_journal_fault(ctx),
        4 if args::is(sub, "tier-fault") => debug_tier_fault(ctx),
        2 if args::is(sub, "tier-drop-cache") => debug_tier_drop_cache(ctx),
        3 if args::is(sub, "balance") => debug_balance(ctx),
        3 if args::is(sub, "error") => debug_error(ctx),
        3 if args::is(sub, "protocol") => debug_protocol(ctx),
        3 if args::is(sub, "set-active-expire") => debug_set_active_expire(ctx),
        3 if args::is(sub, "set-disable-deny-scripts") => debug_set_disable_deny_scripts(ctx),
        2 if args::is(sub, "change-repl-id") => ctx.ok(),
        2 if args::is(sub, "digest") => super::debug_dataset::digest(ctx),
        _ if args::is(sub, "digest-value") => super::debug_dataset::digest_value(ctx),
        _ if args::is(sub, "reload") => super::debug_dataset::reload(ctx),
        3..=5 if args::is(sub, "populate") => super::debug_dataset::populate(ctx),
        _ => Err(subcommand_syntax_error(ctx)),
    }
}

fn debug_help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "BALANCE <workers>|AUTO",
            "    Cairn test extension: serve clients on workers 0..<workers-1> only, moving",
            "    connections now, or (AUTO) let the load choose again (`worker-balance`).",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "JOURNAL-FAULT WRITE|FSYNC <count> | FSYNC-DELAY|WRITE-DELAY <ms> | BEHIND-LIMIT <bytes>",
            "    Cairn test extension: make the next <count> journal writes (or fsyncs)",
            "    fail with EIO, as a full or failing disk would.",
            "TIER-FAULT WRITE|FSYNC|READ <count>",
            "    Cairn test extension: make the next <count> disk tier writes (or fsyncs,",
            "    or reads) fail with ENOSPC (reads: EIO), as a full or failing disk would.",
            "TIER-FAULT DELAY <ms>",
            "    Cairn test extension: no disk tier read is served from the page cache, and",
            "    the I/O threads sleep <ms> before each read (0: off).",
            "TIER-DROP-CACHE",
            "    Cairn test extension: write and fsync the disk tier's logs, then drop their",
            "    pages from the page cache.",
            "JUMP-CLOCK <milliseconds>",
            "    Cairn test extension: move the clock used for expiry, TIME and the slow",
            "    log by <milliseconds> (negative: back), so tests need not sleep.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the worker thread serving this connection for <seconds>.",
            "    Decimals allowed. Connections on other workers are still served.",
        ],
    )
}

/// DEBUG ERROR string → an error reply whose whole line is `string` (no
/// "ERR" added; CR and LF become spaces), for clients' own tests. Written
/// as Redis writes it, outside the error statistics.
fn debug_error(ctx: &mut Ctx) -> CmdResult {
    let mut line = Vec::with_capacity(ctx.arg(2).len() + 3);
    line.push(b'-');
    line.extend(ctx.arg(2).iter().map(|&c| match c {
        b'\r' | b'\n' => b' ',
        c => c,
    }));
    line.extend_from_slice(b"\r\n");
    ctx.reply().raw(&line);
    Ok(())
}

/// DEBUG PROTOCOL type → a sample reply of that RESP type, as Redis 7.0
/// sends it (RESP2 clients get its RESP2 form; `push` needs RESP3).
fn debug_protocol(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.arg(2);
    let resp3 = ctx.client.proto == cairn_protocol::resp::Protocol::Resp3;
    let is = |t: &str| args::is(name, t);
    if is("push") && !resp3 {
        return Err(CmdError::text("ERR RESP2 is not supported by this command"));
    }
    let mut w = ctx.reply();
    if is("string") {
        w.bulk(b"Hello World");
    } else if is("integer") {
        w.int(12345);
    } else if is("double") {
        // Redis's sample value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        w.double(3.141);
    } else if is("bignum") {
        w.big_number("1234567999999999999999999999999999999");
    } else if is("null") {
        w.null();
    } else if is("array") || is("set") {
        if is("set") {
            w.set(3);
        } else {
            w.array(3);
        }
        for j in 0..3 {
            w.int(j);
        }
    } else if is("map") {
        w.map(3);
        for j in 0..3 {
            w.int(j);
            w.boolean(j == 1);
        }
    } else if is("attrib") {
        // An attribute precedes a real reply; RESP2 has no attributes.
        if resp3 {
            w.raw(b"|1\r\n");
            w.bulk(b"key-popularity");
            w.array(2);
            w.bulk(b"key:123");
            w.int(90);
        }
        w.bulk(b"Some real reply following the attribute");
    } else if is("push") {
        w.push(2);
        w.bulk(b"server-cpu-usage");
        w.int(42);
        w.bulk(b"Some real reply following the push reply");
    } else if is("verbatim") {
        w.verbatim("txt", b"This is a verbatim\nstring");
    } else if is("true") {
        w.boolean(true);
    } else if is("false") {
        w.boolean(false);
    } else {
        return Err(CmdError::text(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ));
    }
    Ok(())
}

/// DEBUG SET-ACTIVE-EXPIRE 0|1 → +OK: 0 stops the background expiry sweep
/// (keys still expire when read). Read with C's atoi, as Redis does.
fn debug_set_active_expire(ctx: &mut Ctx) -> CmdResult {
    let on = crate::exec::keys::atoi(ctx.arg(2)) != 0;
    ctx.shared
        .hot
        .active_expire_off
        .store(!on, Ordering::Relaxed);
    ctx.ok()
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS 0|1 → +OK: 1 lets scripts call the
/// commands they may not (`noscript`), as Redis's undocumented test knob
/// does (not in its DEBUG HELP either). Read with C's atoi.
fn debug_set_disable_deny_scripts(ctx: &mut Ctx) -> CmdResult {
    let on = crate::exec::keys::atoi(ctx.arg(2)) != 0;
    ctx.shared
        .hot
        .script_allow_denied
        .store(on, Ordering::Relaxed);
    ctx.ok()
}

/// DEBUG BALANCE k|AUTO → +OK: fixes the active worker count (1..=workers)
/// or hands the choice back to the measurements.
fn debug_balance(ctx: &mut Ctx) -> CmdResult {
    let arg = ctx.arg(2);
    let n = ctx.shared.worker_stats.len();
    let k = if args::is(arg, "auto") {
        0
    } else {
        match std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
        {
            Some(k) if (1..=n).contains(&k) => k,
            _ => return Err(errors::debug_workers_range(n)),
        }
    };
    ctx.shared.balance.force(ctx.shared, k);
    ctx.ok()
}

/// DEBUG SLEEP seconds → +OK after blocking this worker thread; the number
/// is read like C's strtod (a bad or negative one sleeps 0 s, as in Redis).
fn debug_sleep(ctx: &mut Ctx) -> CmdResult {
    let secs = strtod_prefix(ctx.arg(2));
    let micros = secs * 1_000_000.0;
    if micros >= 1.0 {
        std::thread::sleep(std::time::Duration::from_micros(micros as u64));
    }
    ctx.ok()
}

/// The number C's `strtod` reads at the start of `s` (0 if none).
fn strtod_prefix(s: &[u8]) -> f64 {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    // No number needs more bytes than this.
    let s = &s[start..s.len().min(start + 400)];
    (1..=s.len())
        .rev()
        .find_map(|end| std::str::from_utf8(&s[..end]).ok()?.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// DEBUG JUMP-CLOCK ms → +OK. Cairn's test extension: moves the engine's
/// clock (expiry, TIME) by `ms`, so tests of TTLs need not sleep.
fn debug_jump_clock(ctx: &mut Ctx) -> CmdResult {
    let ms = args::int(ctx.arg(2))?;
    cairn_engine::clock::jump(ms);
    ctx.ok()
}

/// DEBUG JOURNAL-FAULT WRITE|FSYNC count → +OK. Cairn's test extension:
/// the next `count` journal writes (or fsyncs) fail with EIO, so tests can
/// see MISCONF and the recovery without filling a disk. `FSYNC-DELAY ms`
/// makes every fsync take at least that long (0: off), so tests can look
/// at the server while an fsync runs; `WRITE-DELAY ms` does the same to
/// every write. `BEHIND-LIMIT bytes` sets how far the journal's buffer may
/// run ahead of the file before workers wait (0: the default, 128 MiB).
fn debug_journal_fault(ctx: &mut Ctx) -> CmdResult {
    let n = args::int(ctx.arg(3))?.max(0) as u64;
    let j = &ctx.shared.journal;
    let kind = ctx.arg(2);
    if args::is(kind, "write") {
        j.fault_writes
            .store(n, std::sync::atomic::Ordering::Relaxed);
    } else if args::is(kind, "fsync") {
        j.fault_fsyncs
            .store(n, std::sync::atomic::Ordering::Relaxed);
    } else if args::is(kind, "fsync-delay") {
        j.fault_fsync_delay_ms
            .store(n, std::sync::atomic::Ordering::Relaxed);
    } else if args::is(kind, "write-delay") {
        j.fault_write_delay_ms
            .store(n, std::sync::atomic::Ordering::Relaxed);
    } else if args::is(kind, "behind-limit") {
        let n = if n == 0 {
            crate::journal::BEHIND_LIMIT
        } else {
            n
        };
        j.behind_limit
            .store(n, std::sync::atomic::Ordering::Relaxed);
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.ok()
}

/// DEBUG TIER-FAULT WRITE|FSYNC|READ count | DELAY ms → +OK. Cairn's test
/// extension: the disk tier's next `count` writes or fsyncs fail with
/// ENOSPC, or its reads with EIO (`vlog::Faults`); DELAY sends every read
/// to the I/O threads, which sleep `ms` before each (`crate::tier_io`);
/// an error without `tier-enabled yes`.
fn debug_tier_fault(ctx: &mut Ctx) -> CmdResult {
    let n = u32::try_from(args::int(ctx.arg(3))?.max(0)).unwrap_or(u32::MAX);
    let Some(t) = crate::tier::get() else {
        return Err(CmdError::Text(
            "ERR the disk tier is off (tier-enabled no)".into(),
        ));
    };
    let kind = ctx.arg(2);
    if args::is(kind, "write") {
        t.faults.fail_writes(n, libc::ENOSPC);
    } else if args::is(kind, "fsync") {
        t.faults.fail_fsyncs(n, libc::ENOSPC);
    } else if args::is(kind, "read") {
        t.faults.fail_reads(n, libc::EIO);
    } else if args::is(kind, "delay") {
        crate::tier_io::set_delay(u64::from(n));
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.ok()
}

/// DEBUG TIER-DROP-CACHE → +OK. Cairn's test extension: the disk tier's
/// logs are written and fsynced, and their pages dropped from the page
/// cache, so the next reads of tiered values go to the disk.
fn debug_tier_drop_cache(ctx: &mut Ctx) -> CmdResult {
    let Some(t) = crate::tier::get() else {
        return Err(CmdError::Text(
            "ERR the disk tier is off (tier-enabled no)".into(),
        ));
    };
    t.drop_cache()
        .map_err(|e| CmdError::Text(format!("ERR {e}").into()))?;
    ctx.ok()
}

/// DEBUG OBJECT key → status `Value at:0x.. refcount:N encoding:E
/// serializedlength:N lru:N lru_seconds_idle:N`, or "ERR no such key".
fn debug_object(ctx: &mut Ctx) -> CmdResult {
    let shared_ints = {
        let c = ctx.shared.config.read();
        c.maxmemory == 0 || !policy_is_lru_or_lfu(c.maxmemory_policy)
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let mut g = e.lock(&ctx.cx, &k);
    let Some(entry) = g.peek_stored(ctx.client.db, &k) else {
        return Err(CmdError::Engine(cairn_engine::Error::NoSuchKey));
    };
    let mut text = format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
        &entry.value as *const Value,
        refcount(&entry.value, shared_ints),
        entry.value.encoding(),
        serialized_len(&entry.value),
        entry.access & ((1 << 24) - 1),
        entry.idle_secs()
    );
    if let Value::List(l) = &entry.value {
        text.push_str(&quicklist_details(l));
    }
    drop(g);
    ctx.reply().simple(&text);
    Ok(())
}

fn policy_is_lru_or_lfu(p: MaxmemoryPolicy) -> bool {
    matches!(
        p,
        MaxmemoryPolicy::VolatileLru
            | MaxmemoryPolicy::VolatileLfu
            | MaxmemoryPolicy::AllkeysLru
            | MaxmemoryPolicy::AllkeysLfu
    )
}

/// Redis keeps 0..9999 as shared integer objects with refcount INT_MAX,
/// unless an LRU/LFU maxmemory policy needs per-key access data
/// (object.c `tryObjectEncoding`); every other value has one owner.
fn refcount(v: &Value, shared_ints: bool) -> i64 {
    match v {
        Value::Str(StrValue::Int(n)) if shared_ints && (0..10_000).contains(n) => i32::MAX as i64,
        _ => 1,
    }
}

/// Bytes of `rdbSaveLen(len)`.
fn rdb_len_size(len: usize) -> usize {
    match len {
        0..=63 => 1,
        64..=16_383 => 2,
        _ if len as u64 <= u32::MAX as u64 => 5,
        _ => 9,
    }
}

/// Bytes of `rdbEncodeInteger`, if `v` fits 32 bits.
fn rdb_int_size(v: i64) -> Option<usize> {
    if (-128..=127).contains(&v) {
        Some(2)
    } else if (-32_768..=32_767).contains(&v) {
        Some(3)
    } else if i32::try_from(v).is_ok() {
        Some(5)
    } else {
        None
    }
}

/// Bytes of `rdbSaveRawString` without LZF compression.
fn rdb_string_size(s: &[u8]) -> usize {
    if s.len() <= 11 {
        if let Some(n) = cairn_engine::util::num::parse_i64(s).and_then(rdb_int_size) {
            return n;
        }
    }
    rdb_len_size(s.len()) + s.len()
}

/// DEBUG OBJECT's serializedlength: the size of the value in an RDB file
/// (rdb.c `rdbSavedObjectLen`). Cairn writes no RDB yet, so this is the
/// uncompressed size: Redis would LZF-compress strings over 20 bytes
/// (`rdbcompression yes`) and report less for compressible ones.
fn serialized_len(v: &Value) -> usize {
    match v {
        Value::Str(StrValue::Int(n)) => rdb_int_size(*n).unwrap_or_else(|| {
            let digits = itoa::Buffer::new().format(*n).len();
            rdb_len_size(digits) + digits
        }),
        Value::Str(s) => s.with_bytes(rdb_string_size),
        Value::Hash(h) => hash_serialized_len(h),
        Value::List(l) => list_serialized_len(l),
        Value::Set(s) => set_serialized_len(s),
        Value::ZSet(z) => zset_serialized_len(z),
        Value::Stream(s) => stream_serialized_len(s),
    }
}

/// A stream is saved as its listpacks (RDB_TYPE_STREAM_LISTPACKS_3);
/// without them this is an estimate: each entry's strings with their
/// listpack headers and its ID deltas, plus the counters and each group's
/// PEL (16-byte IDs, 8-byte times, a count) and consumer names.
fn stream_serialized_len(s: &cairn_engine::value::StreamValue) -> usize {
    let entries: usize = s
        .entries()
        .iter()
        .map(|e| 8 + e.pairs().map(|(f, v)| f.len() + v.len() + 2).sum::<usize>())
        .sum();
    let groups: usize = s
        .groups
        .iter()
        .map(|(n, g)| {
            n.len()
                + 24
                + g.pel.len() * 26
                + g.consumers.keys().map(|c| c.len() + 10).sum::<usize>()
        })
        .sum();
    16 * s.node_count() + entries + 40 + groups
}

/// A small sorted set is saved as its listpack blob (member, then the
/// score as the listpack holds it); a skiplist as a count and then each
/// member as a string and its score as an 8-byte binary double
/// (RDB_TYPE_ZSET_2).
fn zset_serialized_len(z: &cairn_engine::value::ZSetValue) -> usize {
    if z.is_packed() {
        let mut scores = Vec::with_capacity(z.len());
        for (_, s) in z.iter() {
            let mut t = Vec::new();
            cairn_engine::ops::zset::scan_score_text(true, s, &mut t);
            scores.push(t);
        }
        let lp = listpack_size(
            z.iter()
                .zip(&scores)
                .flat_map(|((m, _), s)| [m, s.as_slice()]),
        );
        rdb_len_size(lp) + lp
    } else {
        rdb_len_size(z.len()) + z.iter().map(|(m, _)| rdb_string_size(m) + 8).sum::<usize>()
    }
}

/// An intset is saved as its blob (header and packed integers), a
/// hashtable as a count and then each member as a string.
fn set_serialized_len(s: &SetValue) -> usize {
    match s.intset_blob_len() {
        Some(blob) => rdb_len_size(blob) + blob,
        None => {
            rdb_len_size(s.len())
                + s.iter()
                    .map(|m| m.with_bytes(rdb_string_size))
                    .sum::<usize>()
        }
    }
}

/// A list is saved as its node count, then per node the container type
/// (one byte) and the node's listpack (or a plain node's element) as a
/// string (`RDB_TYPE_LIST_QUICKLIST_2`).
fn list_serialized_len(l: &cairn_engine::value::ListValue) -> usize {
    rdb_len_size(l.node_count())
        + l.node_sizes()
            .map(|(_, sz)| 1 + rdb_len_size(sz) + sz)
            .sum::<usize>()
}

/// DEBUG OBJECT's quicklist details (debug.c): nodes, average elements per
/// node, the list's fill, whether compression is on (Cairn has no
/// `list-compress-depth`, so never), and the nodes' total size.
fn quicklist_details(l: &cairn_engine::value::ListValue) -> String {
    let nodes = l.node_count();
    format!(
        " ql_nodes:{nodes} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:0 \
         ql_uncompressed_size:{}",
        l.len() as f64 / nodes as f64,
        l.fill(),
        l.node_sizes().map(|(_, sz)| sz).sum::<usize>()
    )
}

/// A small hash is saved as its listpack blob, a large one as a count and
/// then each field and value as strings.
fn hash_serialized_len(h: &HashValue) -> usize {
    let packed = h.is_packed();
    let h = h.view();
    if packed {
        let lp = listpack_size(h.iter().flat_map(|(f, v)| [f, v]));
        rdb_len_size(lp) + lp
    } else {
        rdb_len_size(h.len())
            + h.iter()
                .map(|(f, v)| rdb_string_size(f) + rdb_string_size(v))
                .sum::<usize>()
    }
}

/// Bytes of a Redis 7.0 listpack holding `elements` (listpack.c): a 6-byte
/// header, each entry as encoding + data + back-length, and an end byte.
fn listpack_size<'a>(elements: impl Iterator<Item = &'a [u8]>) -> usize {
    let mut total = 6 + 1;
    for e in elements {
        let body = match cairn_engine::util::num::parse_i64(e) {
            Some(0..=127) => 1,
            Some(-4096..=4095) => 2,
            Some(v) if i16::try_from(v).is_ok() => 3,
            Some(-8_388_608..=8_388_607) => 4,
            Some(v) if i32::try_from(v).is_ok() => 5,
            Some(_) => 9,
            None if e.len() < 64 => 1 + e.len(),
            None if e.len() < 4096 => 2 + e.len(),
            None => 5 + e.len(),
        };
        let backlen = match body {
            0..=127 => 1,
            128..=16_382 => 2,
            16_383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        };
        total += body + backlen;
    }
    total
}

// --------------------------------------------------------------- SLOWLOG ---

/// SLOWLOG GET [count] → newest first, each entry [id, unix time,
/// microseconds, [args], "ip:port", client name]; count -1 means all,
/// default 10.
fn slowlog_get(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() > 3 {
        return Err(subcommand_syntax_error(ctx));
    }
    let count = if ctx.argc() == 3 {
        match cairn_engine::util::num::parse_i64(ctx.arg(2)) {
            Some(-1) => usize::MAX,
            Some(n) if n >= 0 => n as usize,
            _ => {
                return Err(CmdError::text(errors::COUNT_AT_LEAST_MINUS_ONE));
            }
        }
    } else {
        10
    };
    let shared = ctx.shared;
    let log = shared.slowlog.lock();
    let n = count.min(log.len());
    let mut w = ctx.reply();
    w.array(n);
    for e in log.newest(n) {
        w.array(6);
        w.int(e.id as i64);
        w.int(e.unix_secs as i64);
        w.int(e.micros as i64);
        w.array(e.args.len());
        for a in &e.args {
            w.bulk(a);
        }
        w.bulk(e.peer.as_bytes());
        w.bulk(&e.name);
    }
    Ok(())
}

/// SLOWLOG LEN → integer.
fn slowlog_len(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.shared.slowlog.lock().len();
    ctx.int(n as i64)
}

/// SLOWLOG RESET → +OK; entry ids keep counting up.
fn slowlog_reset(ctx: &mut Ctx) -> CmdResult {
    ctx.shared.slowlog.lock().reset();
    ctx.ok()
}

/// SLOWLOG HELP → help lines.
fn slowlog_help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    )
}

// --------------------------------------------------------------- MONITOR ---

/// MONITOR → +OK, then one line per command other clients run; a second
/// MONITOR on the same connection is ignored without a reply, as in Redis.
fn monitor(ctx: &mut Ctx) -> CmdResult {
    let info = &ctx.client.info;
    if info.monitor.swap(true, Ordering::Relaxed) {
        return Ok(());
    }
    {
        let mut m = ctx.shared.monitors.lock();
        m.push((info.id, info.worker()));
        ctx.shared.monitor_count.store(m.len(), Ordering::Relaxed);
    }
    ctx.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_reads_a_prefix() {
        assert_eq!(strtod_prefix(b"0.5"), 0.5);
        assert_eq!(strtod_prefix(b"  2abc"), 2.0);
        assert_eq!(strtod_prefix(b"abc"), 0.0);
        assert_eq!(strtod_prefix(b"1e3x"), 1000.0);
        assert_eq!(strtod_prefix(b"-1"), -1.0);
        assert_eq!(strtod_prefix(b""), 0.0);
    }

    #[test]
    fn serialized_lengths_match_redis() {
        // Values checked against DEBUG OBJECT on Redis 7.0.15.
        assert_eq!(serialized_len(&Value::Str(StrValue::from_bytes(b"bar"))), 4);
        assert_eq!(
            serialized_len(&Value::Str(StrValue::from_bytes(b"12345"))),
            3
        );
        let mut h = HashValue::new();
        let lim = cairn_engine::value::HashLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        };
        h.set(b"a", b"b", &lim);
        assert_eq!(serialized_len(&Value::Hash(Box::new(h))), 14);
        let l = cairn_engine::value::ListValue::from_elements(-2, [&b"a"[..], b"12"]);
        assert_eq!(serialized_len(&Value::List(Box::new(l.clone()))), 15);
        assert_eq!(
            quicklist_details(&l),
            " ql_nodes:1 ql_avg_node:2.00 ql_listpack_max:-2 ql_compressed:0 \
             ql_uncompressed_size:12"
        );
    }

    #[test]
    fn listpack_entry_sizes() {
        // header + end byte only
        assert_eq!(listpack_size(std::iter::empty()), 7);
        // 7-bit uint: 1 + backlen 1
        assert_eq!(listpack_size([&b"5"[..]].into_iter()), 9);
        // 13-bit int: 2 + 1
        assert_eq!(listpack_size([&b"-5"[..]].into_iter()), 10);
        // 16-bit int: 3 + 1
        assert_eq!(listpack_size([&b"10000"[..]].into_iter()), 11);
        // short string: 1 + 3 + 1
        assert_eq!(listpack_size([&b"abc"[..]].into_iter()), 12);
        // leading zero is a string
        assert_eq!(listpack_size([&b"01"[..]].into_iter()), 11);
    }

    #[test]
    fn rdb_sizes() {
        assert_eq!(rdb_len_size(63), 1);
        assert_eq!(rdb_len_size(64), 2);
        assert_eq!(rdb_len_size(16_384), 5);
        assert_eq!(rdb_string_size(b"127"), 2);
        assert_eq!(rdb_string_size(b"-129"), 3);
        assert_eq!(rdb_string_size(b"100000"), 5);
        assert_eq!(rdb_string_size(b"99999999999"), 12);
    }
}
