//! CLIENT and its subcommands: ID SETNAME GETNAME LIST INFO KILL PAUSE
//! UNPAUSE REPLY NO-EVICT HELP. Mirrors Redis 7.0 `networking.c`
//! (`clientCommand`, `catClientInfoString`, `clientSetNameOrReply`), with
//! its error texts.
//!
//! What the event loop does with the state set here: the dispatcher drops
//! replies per `Client::reply_mode` and holds commands back while
//! `Shared::pause` is in force; a worker closes a connection whose
//! `close_after_reply` is set once its replies are written, and one whose
//! `ClientInfo::killed` is set when it next looks (a `Msg::Poke` makes that
//! immediate).
//!
//! CACHING, GETREDIR, TRACKING and TRACKINGINFO are client-side caching's,
//! in `tracking.rs`.
use crate::client::{client_line, is_subscriber, Client, ClientInfo, ReplyMode, Running};
use crate::exec::table::Def;
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{Args, CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use crate::shared::{Msg, Shared};
use cairn_engine::util::num;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub const COMMANDS: &[Def] = &[Def::container(
    "client",
    &[
        Def::new("id", id),
        Def::new("setname", setname),
        Def::new("getname", getname),
        Def::new("list", list),
        Def::new("info", info),
        Def::new("kill", kill),
        Def::new("pause", pause),
        Def::new("unpause", unpause),
        Def::new("reply", reply),
        Def::new("no-evict", no_evict),
        Def::new("unblock", unblock),
        Def::new("tracking", super::tracking::tracking),
        Def::new("caching", super::tracking::caching),
        Def::new("trackinginfo", super::tracking::trackinginfo),
        Def::new("getredir", super::tracking::getredir),
        Def::new("help", help),
    ],
)];

/// CLIENT UNBLOCK id [TIMEOUT|ERROR] → 1 if the client was blocked in a
/// blocking command and is now released (as if timed out, or with
/// Redis's UNBLOCKED error), else 0.
fn unblock(ctx: &mut Ctx) -> CmdResult {
    let how = match ctx.args.len() {
        3 => 1,
        4 if ctx.arg(3).eq_ignore_ascii_case(b"timeout") => 1,
        4 if ctx.arg(3).eq_ignore_ascii_case(b"error") => 2,
        4 => return Err(CmdError::text(errors::CLIENT_UNBLOCK_REASON)),
        _ => return Err(subcommand_syntax_error(ctx)),
    };
    let id = num::parse_i64(ctx.arg(2)).ok_or(CmdError::NotInteger)?;
    let target = ctx.shared.clients.lock().get(&(id as u64)).cloned();
    let Some(info) = target.filter(|i| i.blocked.load(Ordering::Relaxed)) else {
        return ctx.int(0);
    };
    info.unblock_req.store(how, Ordering::Relaxed);
    ctx.shared.worker(info.worker()).send(Msg::Wake(info.id));
    ctx.int(1)
}

/// CLIENT ID → integer.
fn id(ctx: &mut Ctx) -> CmdResult {
    ctx.int(ctx.client.id as i64)
}

/// CLIENT SETNAME name → +OK. An empty name removes the name.
fn setname(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.arg(2);
    validate_name(name)?;
    set_name(ctx.client, name);
    ctx.ok()
}

/// CLIENT GETNAME → bulk string, or null when unnamed.
fn getname(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.client.info.name.lock().clone();
    ctx.bulk_or_null(name.as_deref())
}

/// Refuses names that would break CLIENT LIST's space-separated format:
/// only `!`..`~` are allowed (bytes >= 0x80 are negative `char`s in Redis's
/// check, so they are refused too).
pub fn validate_name(name: &[u8]) -> Result<(), CmdError> {
    if name.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
        Ok(())
    } else {
        Err(CmdError::text(errors::CLIENT_NAME_INVALID))
    }
}

/// Sets (or, when empty, clears) a validated name.
pub fn set_name(client: &mut Client, name: &[u8]) {
    *client.info.name.lock() = (!name.is_empty()).then(|| name.to_vec());
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]
/// → verbatim text, one line per client.
fn list(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    let mut out = Vec::new();
    if argc == 4 && ctx.arg(2).eq_ignore_ascii_case(b"type") {
        let ty = client_type(ctx.arg(3))?;
        for c in registry_snapshot(ctx.shared) {
            if kind(&c) == ty {
                write_line(&mut out, ctx, &c, "client|list");
            }
        }
    } else if argc > 3 && ctx.arg(2).eq_ignore_ascii_case(b"id") {
        let mut ids = Vec::with_capacity(argc - 3);
        for j in 3..argc {
            ids.push(num::parse_i64(ctx.arg(j)).ok_or(CmdError::text(errors::CLIENT_ID_INVALID))?);
        }
        for id in ids {
            let found = ctx.shared.clients.lock().get(&(id as u64)).cloned();
            if let Some(c) = found {
                write_line(&mut out, ctx, &c, "client|list");
            }
        }
    } else if argc != 2 {
        return Err(CmdError::Syntax);
    } else {
        for c in registry_snapshot(ctx.shared) {
            write_line(&mut out, ctx, &c, "client|list");
        }
    }
    ctx.reply().verbatim("txt", &out);
    Ok(())
}

/// CLIENT INFO → verbatim text: this connection's CLIENT LIST line.
fn info(ctx: &mut Ctx) -> CmdResult {
    let mut out = Vec::new();
    let me = ctx.client.info.clone();
    write_line(&mut out, ctx, &me, "client|info");
    ctx.reply().verbatim("txt", &out);
    Ok(())
}

/// Every registered client, in connection order (Redis walks its client
/// list, which is in creation order; ids grow with it).
fn registry_snapshot(shared: &Shared) -> Vec<Arc<ClientInfo>> {
    let mut all: Vec<_> = shared.clients.lock().values().cloned().collect();
    all.sort_unstable_by_key(|c| c.id);
    all
}

/// Client types as CLIENT LIST / KILL TYPE name them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Normal,
    Replica,
    Master,
    Pubsub,
}

/// `getClientTypeByName`, with its error.
fn client_type(name: &[u8]) -> Result<Kind, CmdError> {
    let k = if name.eq_ignore_ascii_case(b"normal") {
        Kind::Normal
    } else if name.eq_ignore_ascii_case(b"slave") || name.eq_ignore_ascii_case(b"replica") {
        Kind::Replica
    } else if name.eq_ignore_ascii_case(b"pubsub") {
        Kind::Pubsub
    } else if name.eq_ignore_ascii_case(b"master") {
        Kind::Master
    } else {
        return Err(errors::unknown_client_type(&c_str_lossy(name)));
    };
    Ok(k)
}

/// `getClientType`: a replica attached to this master is `replica`, this
/// replica's link to its master `master`; Redis
/// counts MONITOR clients as normal, so a connection is `pubsub` while it
/// has a subscription (Redis's `CLIENT_PUBSUB`) and normal otherwise.
fn kind(c: &ClientInfo) -> Kind {
    if c.replica.load(Ordering::Relaxed) {
        Kind::Replica
    } else if c.master.load(Ordering::Relaxed) {
        Kind::Master
    } else if is_subscriber(c) {
        Kind::Pubsub
    } else {
        Kind::Normal
    }
}

/// One CLIENT LIST line, `\n`-terminated, in Redis 7.0's field order.
///
/// Where Cairn's connection differs from Redis's, the fields approximate:
/// - `qbuf`/`qbuf-free` of other clients are what their worker last
///   recorded (every 100 ms); for the calling client `qbuf` is the size of
///   the request being run as a multibulk, which is what Redis shows for
///   a lone request (pipelined requests behind it are not counted).
/// - `argv-mem` is the calling request's argument bytes, 0 for others (a
///   client between commands holds no argv, as in Redis).
/// - Cairn has one growable reply buffer per connection, no 16 KiB static
///   buffer plus reply list: `rbs` and `rbp` are its capacity, `omem` the
///   same figure (the output memory `client-output-buffer-limit` would
///   watch), `obl` the unsent bytes last recorded, `oll` 0.
/// - `tot-mem` sums those buffers and the per-connection structures.
/// - `events` is `r`, plus `w` while replies are pending, as Redis shows.
/// - `user` is the connection's ACL user and `redir` the CLIENT TRACKING
///   redirect (-1 when not tracking).
fn write_line(out: &mut Vec<u8>, ctx: &Ctx, c: &ClientInfo, current_cmd: &'static str) {
    let me = (c.id == ctx.client.id).then_some(Running {
        client: &*ctx.client,
        qbuf: request_len(&ctx.args),
        argv_mem: args_len(&ctx.args),
        cmd: current_cmd,
    });
    client_line(out, ctx.shared, c, me);
}

/// Bytes of the request as a RESP multibulk.
fn request_len(args: &Args) -> usize {
    let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as usize + 1;
    let header = 1 + digits(args.len()) + 2;
    header
        + args
            .iter_from(0)
            .map(|a| 1 + digits(a.len()) + 2 + a.len() + 2)
            .sum::<usize>()
}

fn args_len(args: &Args) -> usize {
    args.iter_from(0).map(<[u8]>::len).sum()
}

/// CLIENT KILL ip:port → +OK | CLIENT KILL <filter> <value> ... → killed
/// count. Filters: ID, ADDR, LADDR, TYPE, USER, SKIPME. (MAXAGE came with
/// Redis 7.4; 7.0 answers it with a syntax error, and so does Cairn.)
///
/// The caller is closed after its reply (`close_after_reply`); others are
/// flagged, dropped from the registry and their socket shut down at once,
/// so that, as with Redis's synchronous `freeClient`, a later CLIENT LIST
/// no longer shows them and they get no further replies.
fn kill(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    let mut addr: Option<&[u8]> = None;
    let mut laddr: Option<&[u8]> = None;
    let mut ty: Option<Kind> = None;
    let mut id: Option<u64> = None;
    let mut user: Option<&[u8]> = None;
    let mut skipme = true;
    if argc == 3 {
        addr = Some(ctx.arg(2));
        // The old form may kill the caller.
        skipme = false;
    } else {
        let mut i = 2;
        while i < argc {
            if i + 1 >= argc {
                return Err(CmdError::Syntax);
            }
            let (opt, val) = (ctx.arg(i), ctx.arg(i + 1));
            if opt.eq_ignore_ascii_case(b"id") {
                match num::parse_i64(val) {
                    Some(n) if n >= 1 => id = Some(n as u64),
                    _ => return Err(CmdError::text(errors::CLIENT_ID_NOT_POSITIVE)),
                }
            } else if opt.eq_ignore_ascii_case(b"type") {
                ty = Some(client_type(val)?);
            } else if opt.eq_ignore_ascii_case(b"addr") {
                addr = Some(val);
            } else if opt.eq_ignore_ascii_case(b"laddr") {
                laddr = Some(val);
            } else if opt.eq_ignore_ascii_case(b"user") {
                if ctx.shared.acl.get(val).is_none() {
                    return Err(errors::no_such_user(&c_str_lossy(val)));
                }
                user = Some(val);
            } else if opt.eq_ignore_ascii_case(b"skipme") {
                skipme = if val.eq_ignore_ascii_case(b"yes") {
                    true
                } else if val.eq_ignore_ascii_case(b"no") {
                    false
                } else {
                    return Err(CmdError::Syntax);
                };
            } else {
                return Err(CmdError::Syntax);
            }
            i += 2;
        }
    }

    let me = ctx.client.id;
    let (killed, kill_me) = kill_matching(ctx.shared, me, |c| {
        !(addr.is_some_and(|a| a != c.addr.to_string().as_bytes())
            || laddr.is_some_and(|a| a != c.laddr.to_string().as_bytes())
            || ty.is_some_and(|t| t != kind(c))
            || id.is_some_and(|i| i != c.id)
            || user.is_some_and(|u| u != c.user.lock().as_slice())
            || (c.id == me && skipme))
    });
    if argc == 3 {
        if killed == 0 {
            return Err(CmdError::text(errors::NO_SUCH_CLIENT));
        }
        ctx.ok()?;
    } else {
        ctx.int(killed)?;
    }
    // After the reply is queued, as Redis sets CLIENT_CLOSE_AFTER_REPLY.
    if kill_me {
        ctx.client.close_after_reply = true;
    }
    Ok(())
}

/// Closes every client `pred` picks (CLIENT KILL, ACL DELUSER): each is
/// flagged, its socket shut down so its worker closes it, and it is gone
/// from the registry and from PUBLISH at once, as with Redis's synchronous
/// `freeClient`. The caller (`me`) is only counted: it closes after its
/// reply. Returns (clients picked, whether `me` was one).
pub fn kill_matching(
    shared: &crate::shared::Shared,
    me: u64,
    pred: impl Fn(&ClientInfo) -> bool,
) -> (i64, bool) {
    let mut killed = 0i64;
    let mut kill_me = false;
    let mut wake = Vec::new();
    {
        let mut clients = shared.clients.lock();
        let mut victims = Vec::new();
        let mut subscribers = Vec::new();
        for c in clients.values() {
            if !pred(c) {
                continue;
            }
            killed += 1;
            if c.id == me {
                kill_me = true;
                continue;
            }
            c.killed.store(true, Ordering::Relaxed);
            shut_down(c);
            if is_subscriber(c) {
                subscribers.push(c.id);
            }
            victims.push(c.id);
            if !wake.contains(&c.worker()) {
                wake.push(c.worker());
            }
        }
        for v in victims {
            clients.remove(&v);
        }
        crate::pubsub::forget(shared, &subscribers);
    }
    for w in wake {
        shared.worker(w).send(Msg::Poke);
    }
    (killed, kill_me)
}

/// Shuts the client's socket down in both directions, so its peer sees
/// the connection end now and its worker reads EOF and closes it.
///
/// Must be called with `shared.clients` locked and `c` still in it: a
/// worker removes a connection from the registry (under that lock) before
/// it closes the socket, so the fd is still this connection's and cannot
/// have been reused by another one.
fn shut_down(c: &ClientInfo) {
    // SAFETY: shutdown(2) takes no pointers; the fd is open (see above).
    unsafe {
        libc::shutdown(c.fd, libc::SHUT_RDWR);
    }
}

/// CLIENT PAUSE timeout-ms [WRITE|ALL] → +OK. The default mode is ALL. A
/// pause only lengthens (or widens from WRITE to ALL) one in force.
fn pause(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() > 4 {
        return Err(subcommand_syntax_error(ctx));
    }
    let all = if ctx.argc() == 4 {
        let mode = ctx.arg(3);
        if mode.eq_ignore_ascii_case(b"write") {
            false
        } else if mode.eq_ignore_ascii_case(b"all") {
            true
        } else {
            return Err(CmdError::text(errors::CLIENT_PAUSE_MODE));
        }
    } else {
        true
    };
    let timeout = num::parse_i64(ctx.arg(2)).ok_or(CmdError::text(errors::TIMEOUT_NOT_INTEGER))?;
    if timeout < 0 {
        return Err(CmdError::text(errors::TIMEOUT_NEGATIVE));
    }
    let now = cairn_engine::clock::now_ms() as i64;
    // Redis 7.0 adds without an overflow check: a huge timeout wraps to a
    // deadline in the past, which pauses nothing. 0 is also "no pause".
    let end = if timeout == 0 {
        0
    } else {
        timeout.wrapping_add(now)
    };
    if end > now {
        let p = &ctx.shared.pause;
        let until = p.until_ms.load(Ordering::Relaxed);
        if until as i64 > now {
            p.all.fetch_or(all, Ordering::Relaxed);
            p.until_ms.fetch_max(end as u64, Ordering::Relaxed);
        } else {
            p.all.store(all, Ordering::Relaxed);
            p.until_ms.store(end as u64, Ordering::Relaxed);
        }
    }
    ctx.ok()
}

/// CLIENT UNPAUSE → +OK; held commands run at once.
fn unpause(ctx: &mut Ctx) -> CmdResult {
    let p = &ctx.shared.pause;
    // Only the clients' pause: a FAILOVER's stays (writes, until its end).
    let failover = p.failover.load(Ordering::Relaxed);
    p.until_ms
        .store(if failover { u64::MAX } else { 0 }, Ordering::Relaxed);
    p.all.store(false, Ordering::Relaxed);
    for w in ctx.shared.workers() {
        w.send(Msg::Poke);
    }
    ctx.ok()
}

/// CLIENT REPLY ON|OFF|SKIP → +OK for ON; OFF and SKIP reply nothing.
/// SKIP is ignored while OFF, as in Redis.
fn reply(ctx: &mut Ctx) -> CmdResult {
    let mode = ctx.arg(2);
    if mode.eq_ignore_ascii_case(b"on") {
        ctx.client.reply_mode = ReplyMode::On;
        ctx.ok()
    } else if mode.eq_ignore_ascii_case(b"off") {
        ctx.client.reply_mode = ReplyMode::Off;
        Ok(())
    } else if mode.eq_ignore_ascii_case(b"skip") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::Skip;
        }
        Ok(())
    } else {
        Err(CmdError::Syntax)
    }
}

/// CLIENT NO-EVICT ON|OFF → +OK.
fn no_evict(ctx: &mut Ctx) -> CmdResult {
    let v = ctx.arg(2);
    let on = if v.eq_ignore_ascii_case(b"on") {
        true
    } else if v.eq_ignore_ascii_case(b"off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.client.info.no_evict.store(on, Ordering::Relaxed);
    ctx.ok()
}

/// Redis 7.0's CLIENT HELP, entry by entry, keyed by the subcommand each
/// entry documents.
const HELP: &[(&str, &[&str])] = &[
    (
        "caching",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
        ],
    ),
    (
        "getredir",
        &[
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
        ],
    ),
    (
        "getname",
        &["GETNAME", "    Return the name of the current connection."],
    ),
    (
        "id",
        &["ID", "    Return the ID of the current connection."],
    ),
    (
        "info",
        &[
            "INFO",
            "    Return information about the current client connection.",
        ],
    ),
    (
        "kill",
        &[
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
        ],
    ),
    (
        "list",
        &[
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
        ],
    ),
    (
        "unpause",
        &[
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
        ],
    ),
    (
        "pause",
        &[
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
        ],
    ),
    (
        "reply",
        &[
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
        ],
    ),
    (
        "setname",
        &[
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
        ],
    ),
    (
        "unblock",
        &[
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
        ],
    ),
    (
        "tracking",
        &[
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
        ],
    ),
    (
        "trackinginfo",
        &[
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
        ],
    ),
    (
        "no-evict",
        &[
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    ),
];

/// CLIENT HELP → array of status lines.
///
/// Redis's text lists subcommands Cairn does not have (TRACKING,
/// UNBLOCK, ...). Help that advertises commands which then answer
/// "unknown subcommand" would mislead, so only the entries of registered
/// subcommands are printed, in Redis's order and wording; once every
/// subcommand is registered this is Redis's text byte for byte.
fn help(ctx: &mut Ctx) -> CmdResult {
    let table = &ctx.shared.table;
    let parent = table.lookup(b"client");
    let lines: Vec<&str> = HELP
        .iter()
        .filter(|(sub, _)| parent.is_some_and(|p| table.lookup_sub(p, sub.as_bytes()).is_some()))
        .flat_map(|(_, lines)| lines.iter().copied())
        .collect();
    reply_help(ctx, &lines)
}

/// An argument as C's `%s` prints it: up to the first NUL.
fn c_str_lossy(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_allow_printable_ascii_only() {
        assert!(validate_name(b"").is_ok());
        assert!(validate_name(b"a-b_c.1:2!~{}[]").is_ok());
        for bad in [
            &b"a b"[..],
            b"a\nb",
            b"a\rb",
            b"a\tb",
            b"a\0b",
            b"\x7f",
            b"caf\xc3\xa9",
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn help_covers_every_client_subcommand() {
        for d in COMMANDS[0].subs {
            if d.name != "help" {
                assert!(
                    HELP.iter().any(|(n, _)| *n == d.name),
                    "{} has no help",
                    d.name
                );
            }
        }
    }

    #[test]
    fn c_str_stops_at_nul() {
        assert_eq!(c_str_lossy(b"ab\0cd"), "ab");
        assert_eq!(c_str_lossy(b"abc"), "abc");
    }
}
