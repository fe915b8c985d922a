//! Sorted set commands (Redis 7.0 `src/t_zset.c`, and `scanGenericCommand`
//! in `src/db.c` for ZSCAN): argument parsing in Redis's order (so the
//! same bad request fails with the same error), and the replies in RESP2
//! and RESP3: scores are bulk strings in RESP2 and doubles in RESP3;
//! WITHSCORES lists are flat in RESP2 and [member, score] pairs in RESP3,
//! exactly where Redis 7.0 nests them. The keyspace work is
//! `cairn_engine::ops::zset`.
//!
//! Replies that list members are written while the shard is locked,
//! straight from the stored bytes, so reading a sorted set copies nothing.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx, OnTimeout};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::zset::{self as op, Aggregate, RangeSpec, RemoveRange, SetOp};
use cairn_engine::util::num;
use cairn_engine::value::zset::AddFlags;
use cairn_engine::{Error, Key};
use cairn_protocol::resp::{Protocol, ReplyWriter};
use smallvec::SmallVec;

pub const COMMANDS: &[Def] = &[
    Def::new("zadd", zadd),
    Def::new("zincrby", zincrby),
    Def::new("zrem", zrem),
    Def::new("zcard", zcard),
    Def::new("zcount", zcount),
    Def::new("zlexcount", zlexcount),
    Def::new("zscore", zscore),
    Def::new("zmscore", zmscore),
    Def::new("zrank", zrank),
    Def::new("zrevrank", zrevrank),
    Def::new("zrange", zrange),
    Def::new("zrangestore", zrangestore),
    Def::new("zrangebyscore", zrangebyscore),
    Def::new("zrevrangebyscore", zrevrangebyscore),
    Def::new("zrangebylex", zrangebylex),
    Def::new("zrevrangebylex", zrevrangebylex),
    Def::new("zrevrange", zrevrange),
    Def::new("zpopmin", zpopmin),
    Def::new("zpopmax", zpopmax),
    Def::new("zmpop", zmpop),
    Def::new("bzpopmin", bzpopmin),
    Def::new("bzpopmax", bzpopmax),
    Def::new("bzmpop", bzmpop),
    Def::new("zrandmember", zrandmember),
    Def::new("zremrangebyrank", zremrangebyrank),
    Def::new("zremrangebyscore", zremrangebyscore),
    Def::new("zremrangebylex", zremrangebylex),
    Def::new("zunion", zunion),
    Def::new("zinter", zinter),
    Def::new("zdiff", zdiff),
    Def::new("zunionstore", zunionstore),
    Def::new("zinterstore", zinterstore),
    Def::new("zdiffstore", zdiffstore),
    Def::new("zintercard", zintercard),
    Def::new("zscan", zscan),
];

/// A score argument (`getDoubleFromObjectOrReply`: Redis `string2d`).
fn score_arg(arg: &[u8]) -> Result<f64, CmdError> {
    num::parse_f64_strict(arg).ok_or(CmdError::NotFloat)
}

/// `getRangeLongFromObjectOrReply(min, max, msg)`: Redis answers `msg`
/// both for a non-integer and for a value out of range (so "x" and "0"
/// both get "numkeys should be greater than 0").
fn ranged_int(arg: &[u8], min: i64, max: i64, msg: &'static str) -> Result<i64, CmdError> {
    match num::parse_i64(arg) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(CmdError::text(msg)),
    }
}

/// `getPositiveLongFromObjectOrReply` with Redis's default message, which
/// also covers a non-integer.
fn positive_int(arg: &[u8]) -> Result<i64, CmdError> {
    ranged_int(arg, 0, i64::MAX, errors::MUST_BE_POSITIVE)
}

// ---------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
/// → integer: members added (with CH: added or updated); with INCR the new
/// score, or null when NX/XX/GT/LT stopped it.
fn zadd(ctx: &mut Ctx) -> CmdResult {
    zadd_generic(ctx, false)
}

/// ZINCRBY key increment member → the new score. Shares ZADD's parser, as
/// in Redis, so an increment spelled like an option ("nx") is one.
fn zincrby(ctx: &mut Ctx) -> CmdResult {
    zadd_generic(ctx, true)
}

/// Redis `zaddGenericCommand`: options, then the shape checks and option
/// conflicts, then every score, all before the key is looked up.
fn zadd_generic(ctx: &mut Ctx, incr: bool) -> CmdResult {
    let mut flags = AddFlags {
        incr,
        ..AddFlags::default()
    };
    let mut ch = false;
    let mut i = 2;
    while i < ctx.argc() {
        let a = ctx.arg(i);
        if args::is(a, "nx") {
            flags.nx = true;
        } else if args::is(a, "xx") {
            flags.xx = true;
        } else if args::is(a, "ch") {
            ch = true;
        } else if args::is(a, "incr") {
            flags.incr = true;
        } else if args::is(a, "gt") {
            flags.gt = true;
        } else if args::is(a, "lt") {
            flags.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = ctx.argc() - i;
    if elements % 2 == 1 || elements == 0 {
        return Err(CmdError::Syntax);
    }
    if flags.nx && flags.xx {
        return Err(CmdError::text(errors::ZADD_XX_AND_NX));
    }
    // NX with GT or LT, or GT with LT (XX goes with either).
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Err(CmdError::text(errors::ZADD_GT_LT_NX));
    }
    if flags.incr && elements > 2 {
        return Err(CmdError::text(errors::ZADD_INCR_ONE_PAIR));
    }
    let mut pairs: SmallVec<[(f64, &[u8]); 4]> = SmallVec::with_capacity(elements / 2);
    for j in (i..ctx.argc()).step_by(2) {
        pairs.push((score_arg(ctx.arg(j))?, ctx.arg(j + 1)));
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let out = op::zadd(&mut g, ctx.db(), &k, flags, &pairs)?;
    drop(g);
    if flags.incr {
        if out.processed > 0 {
            ctx.reply().double(out.score);
            Ok(())
        } else {
            ctx.null()
        }
    } else {
        let n = if ch {
            out.added + out.updated
        } else {
            out.added
        };
        ctx.int(n as i64)
    }
}

/// ZREM key member [member ...] → integer: members removed.
fn zrem(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::zrem(&mut g, ctx.db(), &k, ctx.args.iter_from(2))?;
    drop(g);
    ctx.int(n as i64)
}

// ---------------------------------------------------------------------------
// Single-member reads and counts

/// Runs `f` on the sorted set under argument 1 (a read lookup), with a
/// reply writer, while the shard is locked.
fn with_zset<R>(
    ctx: &mut Ctx,
    f: impl FnOnce(Option<&cairn_engine::value::ZSetValue>, &mut ReplyWriter) -> R,
) -> Result<R, CmdError> {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    Ok(op::view(&mut g, db, &k, |z| {
        let mut w = ReplyWriter::new(out, proto);
        f(z, &mut w)
    })?)
}

/// ZCARD key → integer.
fn zcard(ctx: &mut Ctx) -> CmdResult {
    with_zset(ctx, |z, w| w.int(z.map_or(0, |z| z.len()) as i64))
}

/// ZCOUNT key min max → integer: members with a score in range. The range
/// is checked before the key.
fn zcount(ctx: &mut Ctx) -> CmdResult {
    let (a, b) = (ctx.arg(2), ctx.arg(3));
    let r = op::parse_score_range(a, b).ok_or(CmdError::text(errors::MIN_MAX_NOT_FLOAT))?;
    with_zset(ctx, |z, w| {
        w.int(z.map_or(0, |z| z.count_in_score(&r)) as i64)
    })
}

/// ZLEXCOUNT key min max → integer: members in the lex range.
fn zlexcount(ctx: &mut Ctx) -> CmdResult {
    let (a, b) = (ctx.arg(2), ctx.arg(3));
    let r = op::parse_lex_range(a, b).ok_or(CmdError::text(errors::MIN_MAX_NOT_LEX))?;
    with_zset(ctx, |z, w| {
        w.int(z.map_or(0, |z| z.count_in_lex(&r)) as i64)
    })
}

/// ZSCORE key member → the score, or null.
fn zscore(ctx: &mut Ctx) -> CmdResult {
    let m = ctx.arg(2);
    with_zset(ctx, |z, w| match z.and_then(|z| z.score(m)) {
        Some(s) => w.double(s),
        None => w.null(),
    })
}

/// ZMSCORE key member [member ...] → array of scores, null for each absent
/// member (all null for a missing key).
fn zmscore(ctx: &mut Ctx) -> CmdResult {
    let a = ctx.args;
    with_zset(ctx, |z, w| {
        w.array(a.len() - 2);
        for m in a.iter_from(2) {
            match z.and_then(|z| z.score(m)) {
                Some(s) => w.double(s),
                None => w.null(),
            }
        }
    })
}

/// ZRANK key member → integer rank from the lowest score, or null.
/// (WITHSCORE is Redis 7.2; 7.0's arity refuses it.)
fn zrank(ctx: &mut Ctx) -> CmdResult {
    rank(ctx, false)
}

/// ZREVRANK key member → integer rank from the highest score, or null.
fn zrevrank(ctx: &mut Ctx) -> CmdResult {
    rank(ctx, true)
}

fn rank(ctx: &mut Ctx, rev: bool) -> CmdResult {
    let m = ctx.arg(2);
    with_zset(ctx, |z, w| {
        let Some(z) = z else { return w.null() };
        match z.rank(m) {
            Some((r, _)) if rev => w.int((z.len() - 1 - r) as i64),
            Some((r, _)) => w.int(r as i64),
            None => w.null(),
        }
    })
}

// ---------------------------------------------------------------------------
// The ZRANGE family

/// Redis `zrange_type`: AUTO until BYSCORE/BYLEX says otherwise.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Redis `zrange_direction`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Auto,
    Forward,
    Reverse,
}

/// ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
/// [WITHSCORES] → array of members (with scores).
fn zrange(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, false, By::Auto, Dir::Auto)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
/// → integer: members stored.
fn zrangestore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 2, true, By::Auto, Dir::Auto)
}

/// ZREVRANGE key start stop [WITHSCORES].
fn zrevrange(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, false, By::Rank, Dir::Reverse)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count].
fn zrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, false, By::Score, Dir::Forward)
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count].
fn zrevrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, false, By::Score, Dir::Reverse)
}

/// ZRANGEBYLEX key min max [LIMIT offset count].
fn zrangebylex(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, false, By::Lex, Dir::Forward)
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count].
fn zrevrangebylex(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, 1, false, By::Lex, Dir::Reverse)
}

/// Redis `zrangeGenericCommand`: options (the legacy commands fix the
/// type and direction, so BYSCORE/BYLEX/REV are syntax errors there), then
/// the conflict checks, then the range (min and max swapped for a reverse
/// score or lex range), then the key. `src` is the source key's index.
fn zrange_generic(ctx: &mut Ctx, src: usize, store: bool, mut by: By, mut dir: Dir) -> CmdResult {
    let (mut minidx, mut maxidx) = (src + 1, src + 2);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = src + 3;
    while j < ctx.argc() {
        let a = ctx.arg(j);
        let left = ctx.argc() - j - 1;
        if !store && args::is(a, "withscores") {
            withscores = true;
        } else if args::is(a, "limit") && left >= 2 {
            offset = args::int(ctx.arg(j + 1))?;
            limit = args::int(ctx.arg(j + 2))?;
            j += 2;
        } else if dir == Dir::Auto && args::is(a, "rev") {
            dir = Dir::Reverse;
        } else if by == By::Auto && args::is(a, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && args::is(a, "byscore") {
            by = By::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if by == By::Auto {
        by = By::Rank;
    }
    let rev = dir == Dir::Reverse;
    // Redis tests the value, so an explicit LIMIT 0 -1 passes.
    if limit != -1 && by == By::Rank {
        return Err(CmdError::text(errors::ZRANGE_LIMIT_BY_RANK));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::text(errors::ZRANGE_WITHSCORES_BYLEX));
    }
    if rev && by != By::Rank {
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let (min, max) = (ctx.arg(minidx), ctx.arg(maxidx));
    let spec = match by {
        By::Score => RangeSpec::Score {
            range: op::parse_score_range(min, max)
                .ok_or(CmdError::text(errors::MIN_MAX_NOT_FLOAT))?,
            offset,
            limit,
        },
        By::Lex => RangeSpec::Lex {
            range: op::parse_lex_range(min, max).ok_or(CmdError::text(errors::MIN_MAX_NOT_LEX))?,
            offset,
            limit,
        },
        By::Rank | By::Auto => RangeSpec::Rank {
            start: args::int(min)?,
            end: args::int(max)?,
        },
    };
    let e = ctx.engine();
    let db = ctx.db();
    if store {
        let keys = [e.key(ctx.arg(1)), e.key(ctx.arg(2))];
        let mut g = e.lock_keys(&ctx.cx, &keys);
        let n = op::zrangestore(&mut g, db, &keys[0], &keys[1], &spec, rev)?;
        drop(g);
        return ctx.int(n as i64);
    }
    let k = e.key(ctx.arg(src));
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |z| {
        let mut w = ReplyWriter::new(out, proto);
        let Some(z) = z else {
            w.array(0);
            return;
        };
        let (start, count) = op::resolve_range(z, &spec, rev);
        write_members(
            &mut w,
            withscores,
            count,
            z.iter_from(start, rev).take(count),
        );
    })?;
    Ok(())
}

/// A list of members, with scores when asked: RESP2 one flat array, RESP3
/// an array of [member, score] pairs (Redis's ZRANGE, ZUNION, ZRANDMEMBER
/// WITHSCORES replies).
fn write_members<'a>(
    w: &mut ReplyWriter,
    withscores: bool,
    n: usize,
    items: impl Iterator<Item = (&'a [u8], f64)>,
) {
    let resp3 = w.proto == Protocol::Resp3;
    w.array(if withscores && !resp3 { n * 2 } else { n });
    for (m, s) in items {
        if withscores && resp3 {
            w.array(2);
        }
        w.bulk(m);
        if withscores {
            w.double(s);
        }
    }
}

// ---------------------------------------------------------------------------
// ZREMRANGEBY*

/// ZREMRANGEBYRANK key start stop → integer: members removed.
fn zremrangebyrank(ctx: &mut Ctx) -> CmdResult {
    let start = args::int(ctx.arg(2))?;
    let end = args::int(ctx.arg(3))?;
    remove_range(ctx, RemoveRange::Rank(start, end))
}

/// ZREMRANGEBYSCORE key min max → integer.
fn zremrangebyscore(ctx: &mut Ctx) -> CmdResult {
    let (a, b) = (ctx.arg(2), ctx.arg(3));
    let r = op::parse_score_range(a, b).ok_or(CmdError::text(errors::MIN_MAX_NOT_FLOAT))?;
    remove_range(ctx, RemoveRange::Score(r))
}

/// ZREMRANGEBYLEX key min max → integer.
fn zremrangebylex(ctx: &mut Ctx) -> CmdResult {
    let (a, b) = (ctx.arg(2), ctx.arg(3));
    let r = op::parse_lex_range(a, b).ok_or(CmdError::text(errors::MIN_MAX_NOT_LEX))?;
    remove_range(ctx, RemoveRange::Lex(r))
}

fn remove_range(ctx: &mut Ctx, r: RemoveRange) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::zremrange(&mut g, ctx.db(), &k, r)?;
    drop(g);
    ctx.int(n as i64)
}

// ---------------------------------------------------------------------------
// Pops

/// How a pop reply is shaped (Redis `genericZpopCommand`'s `emitkey` and
/// `use_nested_array`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PopReply {
    /// ZPOPMIN/ZPOPMAX: [m, s, ...] (RESP3 with a count: [[m, s], ...]).
    Plain { nested: bool },
    /// BZPOPMIN/BZPOPMAX: [key, m, s].
    WithKey,
    /// ZMPOP/BZMPOP: [key, [[m, s], ...]].
    Nested,
}

/// Pops up to `count` from the first existing key of `keys` and writes the
/// reply. Ok(false) if no key exists (nothing written). With
/// `skip_wrongtype` (a blocked client's retry) a key of another type is
/// passed over instead of failing.
fn pop_and_reply(
    ctx: &mut Ctx,
    keys: &[Key],
    max: bool,
    count: usize,
    shape: PopReply,
    skip_wrongtype: bool,
) -> Result<bool, CmdError> {
    let e = ctx.engine();
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock_keys(&ctx.cx, keys);
    let mut write = |key: &[u8], n: usize, items: &mut dyn Iterator<Item = (&[u8], f64)>| {
        // BZPOPMIN/BZPOPMAX/ZMPOP/BZMPOP are journaled as the pop they did
        // (Redis: the non-blocking form, on the key that was served).
        if !matches!(shape, PopReply::Plain { .. }) && n > 0 {
            cairn_engine::rewrite::zpop(e, &ctx.cx, db, max, key, n);
        }
        let mut w = ReplyWriter::new(&mut *out, proto);
        match shape {
            PopReply::Plain { nested } => {
                if n == 0 {
                    // ZPOPMIN key 0 (Redis's shared empty array).
                    w.array(0);
                    return;
                }
                w.array(if nested { n } else { n * 2 });
                for (m, s) in items {
                    if nested {
                        w.array(2);
                    }
                    w.bulk(m);
                    w.double(s);
                }
            }
            PopReply::WithKey => {
                w.array(n * 2 + 1);
                w.bulk(key);
                for (m, s) in items {
                    w.bulk(m);
                    w.double(s);
                }
            }
            PopReply::Nested => {
                w.array(2);
                w.bulk(key);
                w.array(n);
                for (m, s) in items {
                    w.array(2);
                    w.bulk(m);
                    w.double(s);
                }
            }
        }
    };
    if !skip_wrongtype {
        let popped = op::pop(&mut g, db, keys, max, count, |i, n, it| {
            write(keys[i].bytes, n, it)
        })?;
        return Ok(popped.is_some());
    }
    for k in keys {
        let one = std::slice::from_ref(k);
        match op::pop(&mut g, db, one, max, count, |_, n, it| {
            write(k.bytes, n, it)
        }) {
            Ok(Some(())) => return Ok(true),
            Ok(None) | Err(Error::WrongType) => {}
            Err(other) => return Err(other.into()),
        }
    }
    Ok(false)
}

/// ZPOPMIN key [count].
fn zpopmin(ctx: &mut Ctx) -> CmdResult {
    zpop(ctx, false)
}

/// ZPOPMAX key [count].
fn zpopmax(ctx: &mut Ctx) -> CmdResult {
    zpop(ctx, true)
}

/// → without count one [member, score] pair (flat, also in RESP3); with
/// a count up to that many (RESP3: nested pairs); an empty array for a
/// missing key.
fn zpop(ctx: &mut Ctx, max: bool) -> CmdResult {
    if ctx.argc() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if ctx.argc() == 3 {
        Some(positive_int(ctx.arg(2))?)
    } else {
        None
    };
    let nested = count.is_some() && ctx.client.proto == Protocol::Resp3;
    let n = count.map_or(1, |c| usize::try_from(c).unwrap_or(usize::MAX));
    let e = ctx.engine();
    let keys = [e.key(ctx.arg(1))];
    if !pop_and_reply(ctx, &keys, max, n, PopReply::Plain { nested }, false)? {
        ctx.reply().array(0);
    }
    Ok(())
}

/// The parsed tail of ZMPOP/BZMPOP: `numkeys key... MIN|MAX [COUNT n]`
/// starting at argument `numkeys_idx` (Redis `zmpopGenericCommand`).
fn parse_mpop(ctx: &Ctx, numkeys_idx: usize) -> Result<(usize, bool, usize), CmdError> {
    let numkeys = ranged_int(
        ctx.arg(numkeys_idx),
        1,
        i64::MAX,
        errors::NUMKEYS_NOT_POSITIVE,
    )?;
    let where_idx = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_idx + 1))
        .filter(|&w| w < ctx.argc())
        .ok_or(CmdError::Syntax)?;
    let max = match ctx.arg(where_idx) {
        a if args::is(a, "min") => false,
        a if args::is(a, "max") => true,
        _ => return Err(CmdError::Syntax),
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < ctx.argc() {
        let more = ctx.argc() - 1 - j;
        if count.is_none() && args::is(ctx.arg(j), "count") && more > 0 {
            j += 1;
            count = Some(ranged_int(
                ctx.arg(j),
                1,
                i64::MAX,
                errors::COUNT_NOT_POSITIVE,
            )?);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let count = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    Ok((where_idx - numkeys_idx - 1, max, count))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count] → [key, [[member,
/// score], ...]] from the first non-empty key, or a null array.
fn zmpop(ctx: &mut Ctx) -> CmdResult {
    let (n, max, count) = parse_mpop(ctx, 1)?;
    let e = ctx.engine();
    let keys: Vec<Key> = (2..2 + n).map(|i| e.key(ctx.arg(i))).collect();
    if !pop_and_reply(ctx, &keys, max, count, PopReply::Nested, false)? {
        ctx.reply().null_array();
    }
    Ok(())
}

/// BZPOPMIN key [key ...] timeout.
fn bzpopmin(ctx: &mut Ctx) -> CmdResult {
    bzpop(ctx, false)
}

/// BZPOPMAX key [key ...] timeout.
fn bzpopmax(ctx: &mut Ctx) -> CmdResult {
    bzpop(ctx, true)
}

/// → [key, member, score] from the first non-empty key; otherwise waits
/// (Redis `blockingGenericZpopCommand`), answering a null array on
/// timeout. The timeout is checked first.
fn bzpop(ctx: &mut Ctx, max: bool) -> CmdResult {
    let timeout = args::timeout_ms(ctx.arg(ctx.argc() - 1))?;
    let e = ctx.engine();
    let keys: Vec<Key> = (1..ctx.argc() - 1).map(|i| e.key(ctx.arg(i))).collect();
    blocking_pop(ctx, &keys, max, 1, PopReply::WithKey, timeout)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]: ZMPOP that
/// waits. The timeout is read after the other arguments, as in Redis.
fn bzmpop(ctx: &mut Ctx) -> CmdResult {
    let (n, max, count) = parse_mpop(ctx, 2)?;
    let timeout = args::timeout_ms(ctx.arg(1))?;
    let e = ctx.engine();
    let keys: Vec<Key> = (3..3 + n).map(|i| e.key(ctx.arg(i))).collect();
    blocking_pop(ctx, &keys, max, count, PopReply::Nested, timeout)
}

/// Serves a blocking pop now if any key has members, else blocks on all of
/// them. On a retry a key of the wrong type means "keep waiting".
fn blocking_pop(
    ctx: &mut Ctx,
    keys: &[Key],
    max: bool,
    count: usize,
    shape: PopReply,
    timeout: u64,
) -> CmdResult {
    let retry = ctx.is_retry();
    if pop_and_reply(ctx, keys, max, count, shape, retry)? {
        return Ok(());
    }
    ctx.block(keys.iter().map(|k| k.bytes), timeout, OnTimeout::NullArray)
}

// ---------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN

/// Redis 7.0 `zrandmemberCommand` takes counts in `-LONG_MAX..=LONG_MAX`,
/// and with WITHSCORES only half that, so the reply length fits.
const RANDMEMBER_MAX_WITHSCORES: i64 = i64::MAX / 2;

/// ZRANDMEMBER key [count [WITHSCORES]] → without count a member (null for
/// a missing key); with count an array (negative: may repeat; at least the
/// size: the whole set, highest score first).
fn zrandmember(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() == 2 {
        return with_zset(ctx, |z, w| match z.and_then(op::random_member) {
            Some(m) => w.bulk(m),
            None => w.null(),
        });
    }
    // No message of its own: a non-integer gets the integer error.
    let count = args::int(ctx.arg(2))?;
    if count == i64::MIN {
        return Err(CmdError::text(errors::OUT_OF_LONG_RANGE));
    }
    let withscores = match ctx.argc() {
        3 => false,
        4 if args::is(ctx.arg(3), "withscores") => true,
        _ => return Err(CmdError::Syntax),
    };
    if withscores && !(-RANDMEMBER_MAX_WITHSCORES..=RANDMEMBER_MAX_WITHSCORES).contains(&count) {
        return Err(CmdError::text(errors::OUT_OF_RANGE));
    }
    let budget = ctx.engine().limits.max_string();
    with_zset(ctx, |z, w| {
        let Some(z) = z else {
            w.array(0);
            return Ok(());
        };
        // Repeats are not bounded by the set: refuse a reply that could not
        // fit proto-max-bulk-len, up front when even the smallest members
        // could not, else once it has grown past it (as SRANDMEMBER does).
        let repeats = count < 0;
        let too_big = || CmdError::text(errors::REPLY_TOO_BIG);
        if repeats && !z.is_empty() && count.unsigned_abs() > (budget / MIN_MEMBER_REPLY) as u64 {
            return Err(too_big());
        }
        let start = w.out.len();
        let picks = op::sample(z, count);
        let n = picks.len();
        let resp3 = w.proto == Protocol::Resp3;
        w.array(if withscores && !resp3 { n * 2 } else { n });
        for (m, s) in picks {
            if withscores && resp3 {
                w.array(2);
            }
            w.bulk(m);
            if withscores {
                w.double(s);
            }
            if repeats && w.out.len() - start > budget {
                w.out.truncate(start);
                return Err(too_big());
            }
        }
        Ok(())
    })?
}

/// The smallest reply of one member ("$0\r\n\r\n").
const MIN_MEMBER_REPLY: usize = 6;

/// ZSCAN key cursor [MATCH pattern] [COUNT count] → [next cursor, [member,
/// score, ...]] (scores as text, also in RESP3). The cursor is checked
/// before the key, the options only for an existing key.
fn zscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = args::cursor(ctx.arg(2))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let (db, a) = (ctx.db(), ctx.args);
    let mut pairs = Vec::new();
    let mut g = e.lock(&ctx.cx, &k);
    let (next, packed) = op::view(&mut g, db, &k, |z| -> Result<(u64, bool), CmdError> {
        let Some(z) = z else { return Ok((0, true)) };
        let (pattern, count) = args::scan_options(a.iter_from(3))?;
        let next = op::scan_step(z, cursor, count, pattern, &mut pairs);
        Ok((next, z.is_packed()))
    })??;
    drop(g);
    let mut w = ctx.reply();
    w.array(2);
    w.bulk(itoa::Buffer::new().format(next).as_bytes());
    w.array(pairs.len() * 2);
    let mut text = Vec::with_capacity(32);
    for (m, s) in &pairs {
        w.bulk(m);
        text.clear();
        op::scan_score_text(packed, *s, &mut text);
        w.bulk(&text);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF and friends

/// ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
/// [WITHSCORES].
fn zunion(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zunion", false, SetOp::Union, false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE ...]
/// [WITHSCORES].
fn zinter(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zinter", false, SetOp::Inter, false)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES].
fn zdiff(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zdiff", false, SetOp::Diff, false)
}

/// ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...].
fn zunionstore(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zunionstore", true, SetOp::Union, false)
}

/// ZINTERSTORE dst numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...].
fn zinterstore(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zinterstore", true, SetOp::Inter, false)
}

/// ZDIFFSTORE dst numkeys key [key ...].
fn zdiffstore(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zdiffstore", true, SetOp::Diff, false)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit] → integer.
fn zintercard(ctx: &mut Ctx) -> CmdResult {
    setop_generic(ctx, "zintercard", false, SetOp::Inter, true)
}

/// Redis `zunionInterDiffGenericCommand`: numkeys, then the key count,
/// then every key looked up (WRONGTYPE here), then the options, then the
/// operation. Inputs may be sorted sets or sets (members scoring 1).
fn setop_generic(ctx: &mut Ctx, name: &str, store: bool, op: SetOp, card: bool) -> CmdResult {
    let numkeys_idx = if store { 2 } else { 1 };
    let setnum = args::int(ctx.arg(numkeys_idx))?;
    if setnum < 1 {
        return Err(errors::no_input_keys(name));
    }
    let first = numkeys_idx + 1;
    let available = ctx.argc() - first;
    let setnum = match usize::try_from(setnum) {
        Ok(n) if n <= available => n,
        _ => return Err(CmdError::Syntax),
    };
    let e = ctx.engine();
    let db = ctx.db();
    // Destination (if any) first, then the inputs.
    let mut keys: Vec<Key> = Vec::with_capacity(setnum + 1);
    if store {
        keys.push(e.key(ctx.arg(1)));
    }
    keys.extend((first..first + setnum).map(|i| e.key(ctx.arg(i))));
    let inputs = if store { &keys[1..] } else { &keys[..] };
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let sizes = op::setop_sizes(&mut g, db, inputs)?;

    let mut weights: Vec<f64> = Vec::new();
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = first + setnum;
    while j < ctx.argc() {
        let remaining = ctx.argc() - j;
        let a = ctx.arg(j);
        if op != SetOp::Diff && !card && remaining > setnum && args::is(a, "weights") {
            weights.clear();
            for i in 0..setnum {
                let w = num::parse_f64_strict(ctx.arg(j + 1 + i))
                    .ok_or(CmdError::text(errors::WEIGHT_NOT_FLOAT))?;
                weights.push(w);
            }
            j += setnum + 1;
        } else if op != SetOp::Diff && !card && remaining >= 2 && args::is(a, "aggregate") {
            let v = ctx.arg(j + 1);
            agg = if args::is(v, "sum") {
                Aggregate::Sum
            } else if args::is(v, "min") {
                Aggregate::Min
            } else if args::is(v, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card && args::is(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card && remaining >= 2 && args::is(a, "limit") {
            let n = ranged_int(ctx.arg(j + 1), 0, i64::MAX, errors::LIMIT_NEGATIVE)?;
            limit = usize::try_from(n).unwrap_or(usize::MAX);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }

    if card {
        let n = op::intercard(&mut g, db, inputs, &sizes, limit);
        drop(g);
        return ctx.int(n as i64);
    }
    let result = op::setop(&mut g, db, inputs, &sizes, &weights, agg, op);
    if store {
        let n = op::store_members(&mut g, db, &keys[0], &result, op);
        drop(g);
        return ctx.int(n as i64);
    }
    drop(g);
    let mut w = ctx.reply();
    write_members(
        &mut w,
        withscores,
        result.len(),
        result.iter().map(|(s, m)| (&**m, *s)),
    );
    Ok(())
}
