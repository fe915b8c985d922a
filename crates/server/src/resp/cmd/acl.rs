//! ACL and its subcommands, as Redis 7.0's `aclCommand` (acl.c): users are
//! changed on a copy and swapped in whole, so a SETUSER with one bad rule
//! changes nothing; a deleted user's connections are closed; a changed
//! user's subscribers that may no longer read one of their channels are
//! closed. The rules themselves are `crate::auth::acl`'s.
use crate::auth::acl::{self, User};
use crate::exec::table::Def;
use crate::resp::cmd::reply_help;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use std::sync::atomic::Ordering;

pub const COMMANDS: &[Def] = &[Def::container(
    "acl",
    &[
        Def::new("cat", cat),
        Def::new("deluser", deluser),
        Def::new("dryrun", dryrun),
        Def::new("genpass", genpass),
        Def::new("getuser", getuser),
        Def::new("list", list),
        Def::new("load", load),
        Def::new("log", log),
        Def::new("save", save),
        Def::new("setuser", setuser),
        Def::new("users", users),
        Def::new("whoami", whoami),
        Def::new("help", help),
    ],
)];

fn err(msg: String) -> CmdError {
    CmdError::text(msg)
}

/// ACL SETUSER name rule... → +OK.
fn setuser(ctx: &mut Ctx) -> CmdResult {
    // Rules carry passwords: none of them reaches MONITOR or SLOWLOG.
    for i in 2..ctx.argc() {
        ctx.client.redact_arg(i);
    }
    let name = ctx.arg(2).to_vec();
    if acl::has_spaces(&name) {
        return Err(err(
            "ERR Usernames can't contain spaces or null characters".into()
        ));
    }
    let rules: Vec<&[u8]> = (3..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let merged = match acl::merge_selector_args(&rules) {
        Ok(m) => m,
        Err(i) => {
            return Err(err(format!(
                "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(ctx.arg(i + 3))
            )))
        }
    };
    let shared = ctx.shared;
    let pubsub_all = shared.acl.pubsub_all.load(Ordering::Relaxed);
    let old = shared.acl.get(&name);
    let mut u = match &old {
        Some(o) => (**o).clone(),
        None => User::new(&name, &shared.table, pubsub_all),
    };
    for r in &merged {
        if let Err(e) = u.apply(&shared.table, r, pubsub_all) {
            return Err(err(format!(
                "ERR Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(r),
                e.message()
            )));
        }
    }
    if let Some(old) = &old {
        close_subscribers_losing_channels(ctx, &u, old);
    }
    shared.acl.put(u);
    if name == b"default" {
        crate::auth::note_default_user(shared);
    }
    ctx.ok()
}

/// `ACLKillPubsubClientsIfNeeded`: when a user's channel rules shrink,
/// its subscribers that hold a channel or pattern the new rules do not
/// allow are closed.
fn close_subscribers_losing_channels(ctx: &mut Ctx, new: &User, old: &User) {
    if new.keeps_channels_of(old) {
        return;
    }
    let allowed = new.all_channel_patterns();
    let name = old.name.clone();
    let me = ctx.client.id;
    let pubsub = &ctx.shared.pubsub;
    let (_, kill_me) = crate::resp::cmd::client::kill_matching(ctx.shared, me, |c| {
        if *c.user.lock() != name || !crate::client::is_subscriber(c) {
            return false;
        }
        let (channels, patterns) = pubsub.subscriptions_of(c.id);
        patterns
            .iter()
            .any(|p| !allowed.iter().any(|a| a[..] == p[..]))
            || channels.iter().any(|ch| {
                !allowed
                    .iter()
                    .any(|a| cairn_engine::util::glob::glob_match(a, ch, false))
            })
    });
    if kill_me {
        ctx.client.close_after_reply = true;
    }
}

/// ACL DELUSER name... → the number deleted; their connections close.
fn deluser(ctx: &mut Ctx) -> CmdResult {
    if (2..ctx.argc()).any(|i| ctx.arg(i) == b"default") {
        return Err(err("ERR The 'default' user cannot be removed".into()));
    }
    let mut deleted = 0;
    for i in 2..ctx.argc() {
        let name = ctx.arg(i).to_vec();
        if ctx.shared.acl.remove(&name).is_some() {
            deleted += 1;
            let me = ctx.client.id;
            let (_, kill_me) =
                crate::resp::cmd::client::kill_matching(ctx.shared, me, |c| *c.user.lock() == name);
            if kill_me {
                ctx.client.close_after_reply = true;
            }
        }
    }
    ctx.int(deleted)
}

/// ACL GETUSER name → a map of flags, passwords, the root selector's
/// commands, keys and channels, and the other selectors; nil if unknown.
fn getuser(ctx: &mut Ctx) -> CmdResult {
    let Some(u) = ctx.shared.acl.get(ctx.arg(2)) else {
        // Redis 7.0 replies with a null here.
        ctx.reply().null();
        return Ok(());
    };
    let t = &ctx.shared.table;
    let mut w = ctx.reply();
    w.map(6);
    w.bulk(b"flags");
    let flags = u.flag_names();
    w.set(flags.len());
    for f in flags {
        w.bulk(f.as_bytes());
    }
    w.bulk(b"passwords");
    w.array(u.passwords().len());
    for p in u.passwords() {
        w.bulk(p.as_bytes());
    }
    let describe = |w: &mut cairn_protocol::resp::ReplyWriter, s: &acl::Selector| {
        w.bulk(b"commands");
        w.bulk(s.describe_commands(t).as_bytes());
        w.bulk(b"keys");
        w.bulk(&s.describe_keys());
        w.bulk(b"channels");
        w.bulk(&s.describe_channels());
    };
    describe(&mut w, &u.selectors()[0]);
    w.bulk(b"selectors");
    w.array(u.selectors().len() - 1);
    for s in &u.selectors()[1..] {
        w.map(3);
        describe(&mut w, s);
    }
    Ok(())
}

/// ACL LIST → every user as a `user <name> <rules>` line.
fn list(ctx: &mut Ctx) -> CmdResult {
    let users = ctx.shared.acl.all();
    let t = &ctx.shared.table;
    let mut w = ctx.reply();
    w.array(users.len());
    for u in users {
        let mut line = b"user ".to_vec();
        line.extend_from_slice(&u.name);
        line.push(b' ');
        line.extend_from_slice(&u.describe(t));
        w.bulk(&line);
    }
    Ok(())
}

/// ACL USERS → the user names, sorted.
fn users(ctx: &mut Ctx) -> CmdResult {
    let users = ctx.shared.acl.all();
    let mut w = ctx.reply();
    w.array(users.len());
    for u in users {
        w.bulk(&u.name);
    }
    Ok(())
}

/// ACL WHOAMI → the connection's user.
fn whoami(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.client.user.as_ref().map(|u| u.name.clone());
    match name {
        Some(n) => ctx.reply().bulk(&n),
        None => ctx.reply().null(),
    }
    Ok(())
}

/// ACL CAT [category] → the categories, or the commands of one.
fn cat(ctx: &mut Ctx) -> CmdResult {
    match ctx.argc() {
        2 => {
            let mut w = ctx.reply();
            w.array(acl::CATEGORIES.len());
            for c in acl::CATEGORIES {
                w.bulk(c.as_bytes());
            }
            Ok(())
        }
        3 => {
            let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
            let Some(bit) = acl::category_bit(&name) else {
                let shown: String = name.chars().take(128).collect();
                return Err(err(format!("ERR Unknown category '{shown}'")));
            };
            let t = &ctx.shared.table;
            let names: Vec<&str> = t
                .all()
                .iter()
                .filter(|c| acl::command_categories(c) & bit != 0)
                .map(|c| c.name)
                .collect();
            let mut w = ctx.reply();
            w.array(names.len());
            for n in names {
                w.bulk(n.as_bytes());
            }
            Ok(())
        }
        _ => Err(crate::resp::cmd::subcommand_syntax_error(ctx)),
    }
}

/// ACL GENPASS [bits] → random hex, 256 bits by default.
fn genpass(ctx: &mut Ctx) -> CmdResult {
    const MAX_BITS: i64 = 4096;
    let bits = match ctx.argc() {
        2 => 256,
        3 => cairn_engine::util::num::parse_i64(ctx.arg(2)).ok_or(CmdError::NotInteger)?,
        _ => return Err(crate::resp::cmd::subcommand_syntax_error(ctx)),
    };
    if bits <= 0 || bits > MAX_BITS {
        return Err(err(format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}"
        )));
    }
    let chars = ((bits + 3) / 4) as usize;
    let mut raw = vec![0u8; chars.div_ceil(2)];
    random_bytes(&mut raw);
    let hex: Vec<u8> = raw
        .iter()
        .flat_map(|b| [b >> 4, b & 15])
        .take(chars)
        .map(|n| b"0123456789abcdef"[usize::from(n)])
        .collect();
    ctx.reply().bulk(&hex);
    Ok(())
}

/// Fills `buf` from the kernel's random source (passwords must not be
/// guessable from the server's other random numbers).
fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_ok();
    if !ok {
        // No /dev/urandom: the OS-seeded generator rand uses.
        use rand::RngCore;
        rand::rng().fill_bytes(buf);
    }
}

/// ACL LOG [count | RESET] → the newest entries (10 by default).
fn log(ctx: &mut Ctx) -> CmdResult {
    let mut count: usize = 10;
    if ctx.argc() == 3 {
        if ctx.arg(2).eq_ignore_ascii_case(b"reset") {
            ctx.shared.acl.log.lock().reset();
            return ctx.ok();
        }
        let n = cairn_engine::util::num::parse_i64(ctx.arg(2)).ok_or(CmdError::NotInteger)?;
        count = n.max(0) as usize;
    } else if ctx.argc() > 3 {
        return Err(crate::resp::cmd::subcommand_syntax_error(ctx));
    }
    let entries: Vec<crate::auth::LogEntry> = ctx
        .shared
        .acl
        .log
        .lock()
        .entries()
        .take(count)
        .cloned()
        .collect();
    let now = cairn_engine::clock::now_ms();
    let mut w = ctx.reply();
    w.array(entries.len());
    for e in entries {
        w.map(7);
        w.bulk(b"count");
        w.int(e.count as i64);
        w.bulk(b"reason");
        w.bulk(e.reason.name().as_bytes());
        w.bulk(b"context");
        w.bulk(e.context.name().as_bytes());
        w.bulk(b"object");
        w.bulk(&e.object);
        w.bulk(b"username");
        w.bulk(&e.username);
        w.bulk(b"age-seconds");
        w.double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0);
        w.bulk(b"client-info");
        w.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL LOAD → replaces every user with the file's, or changes nothing.
fn load(ctx: &mut Ctx) -> CmdResult {
    let path = ctx.shared.config.read().aclfile.clone();
    if path.is_empty() {
        return Err(err(NO_ACLFILE.into()));
    }
    let users = crate::auth::load_file(ctx.shared, &path).map_err(|e| err(format!("ERR {e}")))?;
    // Connections of users that are gone close, as with DELUSER.
    let gone: Vec<Vec<u8>> = ctx
        .shared
        .acl
        .all()
        .iter()
        .filter(|u| !users.contains_key(&u.name))
        .map(|u| u.name.clone())
        .collect();
    ctx.shared.acl.replace_all(users);
    crate::auth::note_default_user(ctx.shared);
    let me = ctx.client.id;
    let (_, kill_me) = crate::resp::cmd::client::kill_matching(ctx.shared, me, |c| {
        gone.iter().any(|g| *c.user.lock() == *g)
    });
    if kill_me {
        ctx.client.close_after_reply = true;
    }
    ctx.ok()
}

/// ACL SAVE → writes every user to the ACL file.
fn save(ctx: &mut Ctx) -> CmdResult {
    let path = ctx.shared.config.read().aclfile.clone();
    if path.is_empty() {
        return Err(err(NO_ACLFILE.into()));
    }
    if let Err(e) = crate::auth::save_file(ctx.shared, &path) {
        crate::log::warning(&format!(
            "Writing ACL file for ACL SAVE: {}",
            crate::config::os_error_text(&e)
        ));
        return Err(err("ERR There was an error trying to save the ACLs. Please check the server logs for more information".into()));
    }
    ctx.ok()
}

/// ACL DRYRUN user command arg... → OK, or why the user may not run it.
fn dryrun(ctx: &mut Ctx) -> CmdResult {
    let Some(u) = ctx.shared.acl.get(ctx.arg(2)) else {
        return Err(err(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(ctx.arg(2))
        )));
    };
    let argv: Vec<&[u8]> = (3..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let Some(cmd) = crate::auth::lookup_command(ctx.shared, &argv) else {
        return Err(err(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(argv[0])
        )));
    };
    let keys = crate::auth::key_rights(cmd, &argv);
    let verdict = match u.check(cmd, &argv, &keys) {
        Ok(()) => return ctx.ok(),
        Err(acl::Denied::Command) => {
            format!(
                "This user has no permissions to run the '{}' command",
                cmd.name
            )
        }
        Err(acl::Denied::Key(i)) => format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(argv[i])
        ),
        Err(acl::Denied::Channel(i)) => format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(argv[i])
        ),
    };
    ctx.reply().bulk(verdict.as_bytes());
    Ok(())
}

fn help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    )
}
