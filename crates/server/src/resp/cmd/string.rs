//! String commands (Redis t_string.c): GET, SET and the rest of the family.
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::resp::table::Def;
use cairn_engine::ops::string::{self as op, Cond};
use cairn_engine::Expiry;

pub const COMMANDS: &[Def] = &[Def::new("get", get), Def::new("set", set)];

/// GET key → bulk string, or null if absent.
fn get(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&k);
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    op::get(&mut g, ctx.client.db, &k, |v| {
        let mut w = cairn_protocol::resp::ReplyWriter::new(out, proto);
        match v {
            Some(b) => w.bulk(b),
            None => w.null(),
        }
    })?;
    Ok(())
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts-ms|KEEPTTL]
/// → +OK, null when NX/XX stopped it, or with GET the old value (or null).
fn set(ctx: &mut Ctx) -> CmdResult {
    let opts = parse_set_options(ctx, 3, "set")?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let value = ctx.arg(2);
    let mut g = e.lock(&k);
    let res = op::set(&mut g, ctx.client.db, &k, value, opts.cond, opts.expiry, opts.get)?;
    drop(g);
    if opts.get {
        return ctx.bulk_or_null(res.old.as_deref());
    }
    if res.written {
        ctx.ok()
    } else {
        ctx.null()
    }
}

/// SET's parsed options.
pub struct SetOptions {
    pub cond: Cond,
    pub expiry: Expiry,
    pub get: bool,
}

/// Parses SET-style options from argument `from` on (t_string.c
/// `parseExtendedStringArgumentsOrReply`): each option at most once, NX and
/// XX exclusive, one expiry form, positive times that do not overflow.
pub fn parse_set_options(ctx: &Ctx, from: usize, cmd: &'static str) -> Result<SetOptions, CmdError> {
    let mut cond = Cond::Always;
    let mut get = false;
    let mut keepttl = false;
    let mut expire: Option<(u8, &[u8])> = None;
    let mut i = from;
    while i < ctx.argc() {
        let a = ctx.arg(i);
        let next = (i + 1 < ctx.argc()).then(|| ctx.arg(i + 1));
        if args::is(a, "nx") && cond != Cond::IfPresent {
            cond = Cond::IfAbsent;
        } else if args::is(a, "xx") && cond != Cond::IfAbsent {
            cond = Cond::IfPresent;
        } else if args::is(a, "get") {
            get = true;
        } else if args::is(a, "keepttl") && expire.is_none() {
            keepttl = true;
        } else if let (Some(kind), Some(v)) = (expiry_kind(a), next) {
            if keepttl || expire.is_some() {
                return Err(CmdError::Syntax);
            }
            expire = Some((kind, v));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let now = cairn_engine::clock::now_ms();
    let expiry = match expire {
        None if keepttl => Expiry::Keep,
        None => Expiry::Clear,
        Some((kind, v)) => {
            let n = args::int(v)?;
            if n <= 0 {
                return Err(CmdError::InvalidExpire(cmd));
            }
            let at = match kind {
                b's' => n.checked_mul(1000).and_then(|ms| ms.checked_add(now as i64)),
                b'p' => n.checked_add(now as i64),
                b'S' => n.checked_mul(1000),
                _ => Some(n),
            };
            match at {
                Some(at) if at > 0 => Expiry::At(at as u64),
                _ => return Err(CmdError::InvalidExpire(cmd)),
            }
        }
    };
    Ok(SetOptions { cond, expiry, get })
}

/// EX → 's', PX → 'p', EXAT → 'S', PXAT → 'P'.
fn expiry_kind(a: &[u8]) -> Option<u8> {
    if args::is(a, "ex") {
        Some(b's')
    } else if args::is(a, "px") {
        Some(b'p')
    } else if args::is(a, "exat") {
        Some(b'S')
    } else if args::is(a, "pxat") {
        Some(b'P')
    } else {
        None
    }
}
