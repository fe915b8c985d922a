//! String commands (Redis 7.0 `t_string.c`): GET, SET and its variants
//! (SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX), MGET/MSET/MSETNX,
//! APPEND, STRLEN, GETRANGE/SUBSTR, SETRANGE, the INCR family, INCRBYFLOAT
//! and LCS. Handlers parse arguments in Redis's order (so the first error
//! Redis reports is the one we report), call `cairn_engine::ops::string`,
//! and write the reply. Multi-key commands lock all their keys at once, so
//! each runs atomically.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use crate::tier_io;
use cairn_engine::ops::string::{self as op, Cond, GetExAction, TtlKind};
use cairn_engine::rewrite;
use cairn_engine::util::lcs;
use cairn_engine::{Error, Expiry, Key};
use cairn_protocol::resp::ReplyWriter;
use smallvec::SmallVec;

pub const COMMANDS: &[Def] = &[
    Def::new("get", get),
    Def::new("set", set),
    Def::new("setnx", setnx),
    Def::new("setex", setex),
    Def::new("psetex", psetex),
    Def::new("getset", getset),
    Def::new("getdel", getdel),
    Def::new("getex", getex),
    Def::new("mget", mget),
    Def::new("mset", mset),
    Def::new("msetnx", msetnx),
    Def::new("append", append),
    Def::new("strlen", strlen),
    Def::new("getrange", getrange),
    Def::new("substr", getrange),
    Def::new("setrange", setrange),
    Def::new("incr", incr),
    Def::new("decr", decr),
    Def::new("incrby", incrby),
    Def::new("decrby", decrby),
    Def::new("incrbyfloat", incrbyfloat),
    Def::new("lcs", lcs),
];

/// Keys of a multi-key command; most name only a few.
type Keys<'a> = SmallVec<[Key<'a>; 8]>;

/// MSET's key/value pairs.
type Pairs<'a> = Vec<(Key<'a>, &'a [u8])>;

/// GET key → bulk string, or null if absent.
fn get(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let db = ctx.client.db;
    let Some(_fetched) = tier_io::prepare(ctx.client, &ctx.cx, &mut g, db, &[k])? else {
        return Ok(());
    };
    op::get_str(&mut g, db, &k, |v| ctx.bulk_str_or_null(v))?;
    Ok(())
}

/// SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ts-ms|KEEPTTL]
/// → +OK, null when NX/XX stopped it, or with GET the old value (or null).
fn set(ctx: &mut Ctx) -> CmdResult {
    let opts = parse_extended(ctx, Family::Set)?;
    // A large value keeps the buffer it was read into; a small one is
    // copied once, into its compact block (`op::set`).
    let big = ctx.args.block(2).map(|_| ctx.value_arg(2));
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    // Redis checks the time argument before GET's type check.
    let expiry = opts.expiry(g.now, "set")?;
    if let Expiry::At(at) = expiry {
        // Journaled with an absolute time (Redis: SET ... PXAT).
        rewrite::set_pxat(e, &ctx.cx, ctx.client.db, k.bytes, ctx.arg(2), at);
    }
    let db = ctx.client.db;
    let res = match big {
        Some(v) => op::set_value(&mut g, db, &k, v, opts.cond, expiry, opts.get)?,
        None => op::set(&mut g, db, &k, ctx.arg(2), opts.cond, expiry, opts.get)?,
    };
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

/// SETNX key value → :1 if set, :0 if the key existed.
fn setnx(ctx: &mut Ctx) -> CmdResult {
    let big = ctx.args.block(2).map(|_| ctx.value_arg(2));
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let (db, cond) = (ctx.client.db, Cond::IfAbsent);
    let res = match big {
        Some(v) => op::set_value(&mut g, db, &k, v, cond, Expiry::Clear, false)?,
        None => op::set(&mut g, db, &k, ctx.arg(2), cond, Expiry::Clear, false)?,
    };
    drop(g);
    ctx.int(res.written as i64)
}

/// SETEX key seconds value → +OK.
fn setex(ctx: &mut Ctx) -> CmdResult {
    set_with_ttl(ctx, TtlKind::Secs, "setex")
}

/// PSETEX key milliseconds value → +OK.
fn psetex(ctx: &mut Ctx) -> CmdResult {
    set_with_ttl(ctx, TtlKind::Millis, "psetex")
}

fn set_with_ttl(ctx: &mut Ctx, kind: TtlKind, cmd: &'static str) -> CmdResult {
    let big = ctx.args.block(3).map(|_| ctx.value_arg(3));
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let at = kind
        .parse_deadline(ctx.arg(2), g.now)
        .map_err(|err| expire_error(err, cmd))?;
    rewrite::set_pxat(e, &ctx.cx, ctx.client.db, k.bytes, ctx.arg(3), at);
    let (db, exp) = (ctx.client.db, Expiry::At(at));
    match big {
        Some(v) => op::set_value(&mut g, db, &k, v, Cond::Always, exp, false)?,
        None => op::set(&mut g, db, &k, ctx.arg(3), Cond::Always, exp, false)?,
    };
    drop(g);
    ctx.ok()
}

/// GETSET key value → the old value or null; the new value has no TTL.
fn getset(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let value = ctx.value_arg(2);
    let mut g = e.lock(&ctx.cx, &k);
    let old = op::getset_value(&mut g, ctx.client.db, &k, value)?;
    drop(g);
    ctx.bulk_str_or_null(old.as_ref());
    Ok(())
}

/// GETDEL key → the value (now deleted) or null.
fn getdel(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let db = ctx.client.db;
    let Some(_fetched) = tier_io::prepare(ctx.client, &ctx.cx, &mut g, db, &[k])? else {
        return Ok(());
    };
    // Recorded as Redis propagates it (`DEL key`), so a replica or a
    // journal that replays it needs no GETDEL of its own.
    rewrite::del(e, &ctx.cx, ctx.client.db, k.bytes);
    let old = op::getdel_value(&mut g, ctx.client.db, &k)?;
    drop(g);
    ctx.bulk_str_or_null(old.as_ref());
    Ok(())
}

/// GETEX key [EX s|PX ms|EXAT ts|PXAT ts-ms|PERSIST] → the value or null;
/// then sets or clears the TTL (a deadline already past deletes the key).
fn getex(ctx: &mut Ctx) -> CmdResult {
    let opts = parse_extended(ctx, Family::GetEx)?;
    let action = match opts.expire {
        Some((kind, raw)) => GetExAction::Expire(kind, raw),
        None if opts.persist => GetExAction::Persist,
        None => GetExAction::Keep,
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.client.db;
    // PERSIST is recorded as Redis propagates it (`PERSIST key`); a TTL is
    // staged by the engine as PEXPIREAT (or DEL when already past). With
    // no option, or no TTL to remove, nothing changes and nothing is
    // recorded.
    let mut g = e.lock(&ctx.cx, &k);
    let Some(_fetched) = tier_io::prepare(ctx.client, &ctx.cx, &mut g, db, &[k])? else {
        return Ok(());
    };
    if action == GetExAction::Persist {
        rewrite::persist(e, &ctx.cx, db, k.bytes);
    }
    op::getex_str(&mut g, db, &k, action, |v| ctx.bulk_str_or_null(v))
        .map_err(|err| expire_error(err, "getex"))?;
    Ok(())
}

/// MGET key [key ...] → an array of values, null for a missing key or one
/// of another type.
fn mget(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let keys: Keys = ctx.args.iter_from(1).map(|a| e.key(a)).collect();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let db = ctx.client.db;
    // The keys' cache misses overlap rather than queue (`Guard::prefetch`).
    g.prefetch(db, &keys);
    // Every tiered value of the MGET is read (or parked for) at once.
    let Some(_fetched) = tier_io::prepare(ctx.client, &ctx.cx, &mut g, db, &keys)? else {
        return Ok(());
    };
    ctx.reply().array(keys.len());
    op::mget_str(&mut g, db, &keys, |v| ctx.bulk_str_or_null(v));
    Ok(())
}

/// The key/value pairs of MSET and MSETNX, and their keys for locking.
/// An even argument count is Redis's arity error.
fn pairs<'a>(ctx: &Ctx<'a>, cmd: &'static str) -> Result<(Keys<'a>, Pairs<'a>), CmdError> {
    check_pairs(ctx, cmd)?;
    let e = ctx.engine();
    let pairs: Pairs = (1..ctx.argc())
        .step_by(2)
        .map(|i| (e.key(ctx.arg(i)), ctx.arg(i + 1)))
        .collect();
    let keys = pairs.iter().map(|p| p.0).collect();
    Ok((keys, pairs))
}

/// An even count (command name included) leaves a key without a value.
fn check_pairs(ctx: &Ctx, cmd: &'static str) -> Result<(), CmdError> {
    if ctx.argc() & 1 == 0 {
        return Err(CmdError::WrongArity(cmd));
    }
    Ok(())
}

/// MSET key value [key value ...] → +OK.
fn mset(ctx: &mut Ctx) -> CmdResult {
    check_pairs(ctx, "mset")?;
    let e = ctx.engine();
    // Large values keep their read buffers (built before locking); small
    // ones are copied once, into their compact blocks. One vector.
    let pairs: Vec<_> = (1..ctx.argc())
        .step_by(2)
        .map(|i| {
            let v = match ctx.args.block(i + 1) {
                Some(_) => op::NewStr::Value(ctx.value_arg(i + 1)),
                None => op::NewStr::Bytes(ctx.arg(i + 1)),
            };
            (e.key(ctx.arg(i)), v)
        })
        .collect();
    let keys: Keys = pairs.iter().map(|p| p.0).collect();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    op::mset_new(&mut g, ctx.client.db, pairs);
    drop(g);
    ctx.ok()
}

/// MSETNX key value [key value ...] → :1 if all were set, :0 if any key
/// existed (then none is).
fn msetnx(ctx: &mut Ctx) -> CmdResult {
    let (keys, pairs) = pairs(ctx, "msetnx")?;
    let mut g = ctx.engine().lock_keys(&ctx.cx, &keys);
    let done = op::msetnx(&mut g, ctx.client.db, &pairs);
    drop(g);
    ctx.int(done as i64)
}

/// APPEND key value → the new length.
fn append(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let len = op::append(&mut g, ctx.client.db, &k, ctx.arg(2))?;
    drop(g);
    ctx.int(len as i64)
}

/// STRLEN key → the length, 0 if absent.
fn strlen(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let len = op::strlen(&mut g, ctx.client.db, &k)?;
    drop(g);
    ctx.int(len as i64)
}

/// GETRANGE key start end (and its alias SUBSTR) → the bytes in the
/// inclusive range, negative indexes from the end; "" if none.
fn getrange(ctx: &mut Ctx) -> CmdResult {
    let start = args::int(ctx.arg(2))?;
    let end = args::int(ctx.arg(3))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let db = ctx.client.db;
    let Some(_fetched) = tier_io::prepare(ctx.client, &ctx.cx, &mut g, db, &[k])? else {
        return Ok(());
    };
    op::get_str(&mut g, db, &k, |v| match v {
        Some(s) => match op::range_of(s.len(), start, end) {
            Some(r) => ctx.bulk_str_range(s, Some(r)),
            None => ctx.reply().bulk(b""),
        },
        None => ctx.reply().bulk(b""),
    })?;
    Ok(())
}

/// SETRANGE key offset value → the new length (zero-padded as needed).
fn setrange(ctx: &mut Ctx) -> CmdResult {
    let offset = args::int(ctx.arg(2))?;
    let Ok(offset) = usize::try_from(offset) else {
        return Err(CmdError::text(errors::SETRANGE_OFFSET));
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let len = op::setrange(&mut g, ctx.client.db, &k, offset, ctx.arg(3))?;
    drop(g);
    ctx.int(len as i64)
}

fn incr_by(ctx: &mut Ctx, delta: i64) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let v = op::incr_by(&mut g, ctx.client.db, &k, delta)?;
    drop(g);
    ctx.int(v)
}

/// INCR key → the new value.
fn incr(ctx: &mut Ctx) -> CmdResult {
    incr_by(ctx, 1)
}

/// DECR key → the new value.
fn decr(ctx: &mut Ctx) -> CmdResult {
    incr_by(ctx, -1)
}

/// INCRBY key increment → the new value.
fn incrby(ctx: &mut Ctx) -> CmdResult {
    let delta = args::int(ctx.arg(2))?;
    incr_by(ctx, delta)
}

/// DECRBY key decrement → the new value.
fn decrby(ctx: &mut Ctx) -> CmdResult {
    let delta = args::int(ctx.arg(2))?;
    // Negating i64::MIN overflows; Redis 7.0 refuses it up front.
    if delta == i64::MIN {
        return Err(CmdError::text(errors::DECREMENT_OVERFLOW));
    }
    incr_by(ctx, -delta)
}

/// INCRBYFLOAT key increment → the new value as a bulk string.
fn incrbyfloat(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let incr = ctx.arg(2);
    let mut w = ReplyWriter::new(ctx.out, ctx.client.proto);
    let db = ctx.client.db;
    op::incr_by_float(&mut g, db, &k, incr, |b| {
        // Journaled as the result (Redis: SET key result KEEPTTL), so a
        // replay on another machine's `long double` cannot differ.
        rewrite::set_keepttl(e, &ctx.cx, db, k.bytes, b);
        w.bulk(b)
    })?;
    Ok(())
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
/// → the LCS as a bulk string; with LEN its length; with IDX
/// `matches` (ranges in key1 and key2, [length]) and `len`: a RESP2 array
/// of 4, a RESP3 map of 2.
fn lcs(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let ka = e.key(ctx.arg(1));
    let kb = e.key(ctx.arg(2));
    let mut g = e.lock_keys(&ctx.cx, &[ka, kb]);
    // The type check comes before option parsing in `lcsCommand`.
    let (a, b) = op::lcs_operands(&mut g, ctx.client.db, &ka, &kb).map_err(|err| match err {
        Error::WrongType => CmdError::text(errors::LCS_NOT_STRINGS),
        other => other.into(),
    })?;
    drop(g);

    let (mut idx, mut len, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut i = 3;
    while i < ctx.argc() {
        let a = ctx.arg(i);
        if opt_is(a, "idx") {
            idx = true;
        } else if opt_is(a, "len") {
            len = true;
        } else if opt_is(a, "withmatchlen") {
            withmatchlen = true;
        } else if opt_is(a, "minmatchlen") && i + 1 < ctx.argc() {
            minmatchlen = args::int(ctx.arg(i + 1))?.max(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if idx && len {
        return Err(CmdError::text(errors::LCS_IDX_WITH_LEN));
    }
    let r = lcs::lcs(&a, &b, e.limits.max_string() as u64).map_err(Error::Lcs)?;

    let mut w = ctx.reply();
    if idx {
        let keep = |m: &&lcs::LcsMatch| m.len as i64 >= minmatchlen;
        w.map(2);
        w.bulk(b"matches");
        w.array(r.matches.iter().filter(keep).count());
        for m in r.matches.iter().filter(keep) {
            w.array(2 + withmatchlen as usize);
            w.array(2);
            w.int(m.a.0 as i64);
            w.int(m.a.1 as i64);
            w.array(2);
            w.int(m.b.0 as i64);
            w.int(m.b.1 as i64);
            if withmatchlen {
                w.int(m.len as i64);
            }
        }
        w.bulk(b"len");
        w.int(r.len as i64);
    } else if len {
        w.int(r.len as i64);
    } else {
        w.bulk(&r.string);
    }
    Ok(())
}

/// The engine's expire-time error is worded with the command's name.
fn expire_error(err: Error, cmd: &'static str) -> CmdError {
    match err {
        Error::InvalidExpireTime => CmdError::InvalidExpire(cmd),
        other => other.into(),
    }
}

/// `strcasecmp(opt, word) == 0` on an argument as C sees it: the argument
/// ends at its first NUL byte, as Redis's option parsers read `argv[j]->ptr`.
fn opt_is(arg: &[u8], word: &str) -> bool {
    let end = memchr::memchr(0, arg).unwrap_or(arg.len());
    arg[..end].eq_ignore_ascii_case(word.as_bytes())
}

/// Which command's options `parse_extended` reads (Redis COMMAND_SET /
/// COMMAND_GET).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Set,
    GetEx,
}

/// The options of SET or GETEX, the time argument not yet parsed (its
/// errors come later in Redis).
struct Extended<'a> {
    cond: Cond,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(TtlKind, &'a [u8])>,
}

impl Extended<'_> {
    /// SET's expiry at `now_ms`: KEEPTTL, none (cleared), or a deadline.
    fn expiry(&self, now_ms: u64, cmd: &'static str) -> Result<Expiry, CmdError> {
        match self.expire {
            None if self.keepttl => Ok(Expiry::Keep),
            None => Ok(Expiry::Clear),
            Some((kind, raw)) => kind
                .parse_deadline(raw, now_ms)
                .map(Expiry::At)
                .map_err(|err| expire_error(err, cmd)),
        }
    }
}

/// Parses SET options (from argument 3) or GETEX options (from argument
/// 2) as t_string.c `parseExtendedStringArgumentsOrReply` does: NX and XX
/// exclude each other, KEEPTTL and PERSIST exclude every expire form, and
/// the expire forms exclude each other, though one form may repeat (the
/// last wins). NX, XX, GET and KEEPTTL are SET's only; PERSIST is GETEX's.
/// Anything else, or an expire form with no value after it, is a syntax
/// error.
fn parse_extended<'a>(ctx: &Ctx<'a>, family: Family) -> Result<Extended<'a>, CmdError> {
    let is_set = family == Family::Set;
    let mut o = Extended {
        cond: Cond::Always,
        get: false,
        keepttl: false,
        persist: false,
        expire: None,
    };
    let mut i = if is_set { 3 } else { 2 };
    while i < ctx.argc() {
        let a = ctx.arg(i);
        let next = (i + 1 < ctx.argc()).then(|| ctx.arg(i + 1));
        let kind = expiry_kind(a);
        if is_set && opt_is(a, "nx") && o.cond != Cond::IfPresent {
            o.cond = Cond::IfAbsent;
        } else if is_set && opt_is(a, "xx") && o.cond != Cond::IfAbsent {
            o.cond = Cond::IfPresent;
        } else if is_set && opt_is(a, "get") {
            o.get = true;
        } else if is_set && opt_is(a, "keepttl") && !o.persist && o.expire.is_none() {
            o.keepttl = true;
        } else if !is_set && opt_is(a, "persist") && !o.keepttl && o.expire.is_none() {
            o.persist = true;
        } else if let (Some(kind), Some(v)) = (kind, next) {
            let clash = o.expire.is_some_and(|(k, _)| k != kind);
            if o.keepttl || o.persist || clash {
                return Err(CmdError::Syntax);
            }
            o.expire = Some((kind, v));
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// EX, PX, EXAT, PXAT.
fn expiry_kind(a: &[u8]) -> Option<TtlKind> {
    if opt_is(a, "ex") {
        Some(TtlKind::Secs)
    } else if opt_is(a, "px") {
        Some(TtlKind::Millis)
    } else if opt_is(a, "exat") {
        Some(TtlKind::AtSecs)
    } else if opt_is(a, "pxat") {
        Some(TtlKind::AtMillis)
    } else {
        None
    }
}
