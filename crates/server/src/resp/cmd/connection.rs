//! Connection commands: PING, ECHO, HELLO, AUTH, QUIT, RESET, SELECT.
//! Mirrors Redis 7.0 `server.c` (pingCommand, echoCommand), `networking.c`
//! (helloCommand, resetCommand, clearClientConnectionState), `acl.c`
//! (authCommand) and `db.c` (selectCommand), with their error texts.
//!
//! Authentication is against the ACL users (`crate::auth`); `requirepass`
//! is the default user's password. With none the default user is `nopass`,
//! as in Redis: `AUTH default <anything>` succeeds, the one-argument form
//! is refused. CLIENT and its subcommands live in `client.rs`.
use crate::client::{discard_transaction, Client, ReplyMode};
use crate::exec::meta::REDIS_VERSION;
use crate::exec::table::Def;
use crate::resp::cmd::client::{set_name, validate_name};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::util::num;
use cairn_protocol::resp::Protocol;
use std::sync::atomic::Ordering;

pub const COMMANDS: &[Def] = &[
    Def::new("ping", ping),
    Def::new("echo", echo),
    Def::new("hello", hello),
    Def::new("auth", auth),
    Def::new("quit", quit),
    Def::new("reset", reset),
    Def::new("select", select),
];

/// PING [message] → +PONG, or the message as a bulk string. A RESP2
/// client with subscriptions gets `["pong", message or ""]` instead, the
/// shape of the messages it is reading.
fn ping(ctx: &mut Ctx) -> CmdResult {
    // Arity -1 lets any count through the table; Redis checks here.
    if ctx.argc() <= 2 && ctx.client.subs.active() && ctx.client.proto == Protocol::Resp2 {
        let msg = if ctx.argc() == 2 { ctx.arg(1) } else { b"" };
        let mut w = ctx.reply();
        w.array(2);
        w.bulk(b"pong");
        w.bulk(msg);
        return Ok(());
    }
    match ctx.argc() {
        1 => {
            ctx.reply().simple("PONG");
            Ok(())
        }
        2 => ctx.bulk(ctx.arg(1)),
        _ => Err(CmdError::WrongArity("ping")),
    }
}

/// ECHO message → the message as a bulk string.
fn echo(ctx: &mut Ctx) -> CmdResult {
    ctx.bulk(ctx.arg(1))
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
/// → map {server, version, proto, id, mode, role, modules}.
///
/// `server` is "redis" and `version` the Redis version Cairn follows, not
/// Cairn's own: client libraries gate features on these fields (RESP3,
/// CLIENT SETINFO, ...), and Cairn answers as that Redis version does.
fn hello(ctx: &mut Ctx) -> CmdResult {
    let mut proto = None;
    let mut next = 1;
    if ctx.argc() >= 2 {
        let ver =
            num::parse_i64(ctx.arg(1)).ok_or(CmdError::text(errors::HELLO_PROTO_NOT_INTEGER))?;
        proto = Some(match ver {
            2 => Protocol::Resp2,
            3 => Protocol::Resp3,
            _ => return Err(CmdError::text(errors::NOPROTO)),
        });
        next = 2;
    }
    let mut credentials = None;
    let mut name = None;
    let mut j = next;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let more = ctx.argc() - 1 - j;
        if opt.eq_ignore_ascii_case(b"auth") && more >= 2 {
            ctx.client.redact_arg(j + 1);
            ctx.client.redact_arg(j + 2);
            credentials = Some((ctx.arg(j + 1), ctx.arg(j + 2)));
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"setname") && more >= 1 {
            let n = ctx.arg(j + 1);
            validate_name(n)?;
            name = Some(n);
            j += 2;
        } else {
            return Err(errors::hello_syntax(opt));
        }
    }
    if let Some((user, pass)) = credentials {
        let (user, pass) = (user.to_vec(), pass.to_vec());
        log_in(ctx, &user, &pass)?;
    }
    if !ctx.client.authenticated {
        return Err(CmdError::text(errors::HELLO_NOAUTH));
    }
    if let Some(n) = name {
        set_name(ctx.client, n);
    }
    if let Some(p) = proto {
        set_proto(ctx.client, p);
    }
    let id = ctx.client.id as i64;
    let resp = match ctx.client.proto {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    };
    let mut w = ctx.reply();
    w.map(7);
    w.bulk(b"server");
    w.bulk(b"redis");
    w.bulk(b"version");
    w.bulk(REDIS_VERSION.as_bytes());
    w.bulk(b"proto");
    w.int(resp);
    w.bulk(b"id");
    w.int(id);
    w.bulk(b"mode");
    w.bulk(b"standalone");
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"modules");
    w.array(0);
    Ok(())
}

/// AUTH [username] password → +OK, or WRONGPASS.
fn auth(ctx: &mut Ctx) -> CmdResult {
    // Credentials never reach MONITOR or SLOWLOG (Redis: `authCommand`).
    for i in 1..ctx.argc() {
        ctx.client.redact_arg(i);
    }
    let (user, pass) = match ctx.argc() {
        2 => {
            // Redis keeps the pre-ACL error for the one-argument form when
            // the default user has no password.
            if ctx.shared.acl.default_user().nopass {
                return Err(CmdError::text(errors::AUTH_WITHOUT_PASSWORD));
            }
            (b"default".to_vec(), ctx.arg(1).to_vec())
        }
        3 => (ctx.arg(1).to_vec(), ctx.arg(2).to_vec()),
        _ => return Err(CmdError::Syntax),
    };
    log_in(ctx, &user, &pass)?;
    ctx.ok()
}

/// Authenticates the connection as `user`, or logs the failure in the ACL
/// log (reason auth, the command's own name as object) and answers
/// WRONGPASS (`ACLAuthenticateUser`).
fn log_in(ctx: &mut Ctx, user: &[u8], pass: &[u8]) -> Result<(), CmdError> {
    let Some(u) = crate::auth::authenticate(ctx.shared, user, pass) else {
        let context = if ctx.client.multi.is_some() {
            crate::auth::Context::Multi
        } else {
            crate::auth::Context::TopLevel
        };
        let object = ctx.arg(0).to_vec();
        let cmd = if object.eq_ignore_ascii_case(b"hello") {
            "hello"
        } else {
            "auth"
        };
        crate::auth::log_denial(
            ctx.shared,
            ctx.client,
            cmd,
            crate::auth::Reason::Auth,
            context,
            &object,
            Some(user),
        );
        return Err(CmdError::text(errors::WRONGPASS));
    };
    crate::auth::set_user(ctx.shared, ctx.client, u);
    ctx.client.authenticated = true;
    Ok(())
}

/// QUIT → +OK, then the connection closes once the reply is written.
fn quit(ctx: &mut Ctx) -> CmdResult {
    ctx.client.close_after_reply = true;
    ctx.ok()
}

/// RESET → +RESET, in RESP2. Back to db 0, RESP2, no name, replies on, not
/// a monitor, no subscriptions, no client-side caching, and
/// unauthenticated if the default user
/// has a password (`clearClientConnectionState`). CLIENT NO-EVICT is kept,
/// as in Redis.
fn reset(ctx: &mut Ctx) -> CmdResult {
    let shared = ctx.shared;
    let c = &mut *ctx.client;
    crate::pubsub::drop_client(shared, c);
    crate::tracking::disable(shared, c);
    if c.info.monitor.swap(false, Ordering::Relaxed) {
        let mut m = shared.monitors.lock();
        m.retain(|(id, _)| *id != c.id);
        shared.monitor_count.store(m.len(), Ordering::Relaxed);
    }
    discard_transaction(shared, &ctx.cx, c);
    c.set_db(0);
    set_proto(c, Protocol::Resp2);
    *c.info.name.lock() = None;
    c.reply_mode = ReplyMode::On;
    // Back to the default user, authenticated only if it needs no password.
    let d = shared.acl.default_user();
    c.authenticated = d.nopass && d.enabled;
    crate::auth::set_user(shared, c, d);
    ctx.reply().simple("RESET");
    Ok(())
}

/// SELECT index → +OK.
fn select(ctx: &mut Ctx) -> CmdResult {
    // getIntFromObjectOrReply: a long long first, then the int range.
    let n = num::parse_i64(ctx.arg(1)).ok_or(CmdError::NotInteger)?;
    if n < i64::from(i32::MIN) || n > i64::from(i32::MAX) {
        return Err(CmdError::text(errors::OUT_OF_INT_RANGE));
    }
    if ctx.shared.cluster.enabled() && n != 0 {
        return Err(CmdError::text(errors::SELECT_IN_CLUSTER));
    }
    if n < 0 || n as usize >= ctx.engine().databases() {
        return Err(CmdError::text(errors::DB_INDEX_OUT_OF_RANGE));
    }
    ctx.client.set_db(n as usize);
    ctx.ok()
}

/// Switches the connection's protocol, keeping CLIENT LIST's `resp=` in step.
fn set_proto(c: &mut Client, p: Protocol) {
    c.proto = p;
    let n = match p {
        Protocol::Resp2 => 2,
        Protocol::Resp3 => 3,
    };
    c.info.resp.store(n, Ordering::Relaxed);
}
