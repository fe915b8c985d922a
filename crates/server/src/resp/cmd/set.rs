//! Set commands (Redis 7.0 `src/t_set.c`, and `scanGenericCommand` in
//! `src/db.c` for SSCAN): argument parsing in Redis's order (so the same
//! bad request fails with the same error), and the replies in RESP2 and
//! RESP3. The keyspace work is `cairn_engine::ops::set`.
//!
//! Reply shapes follow Redis 7.0 exactly: SMEMBERS, SINTER, SUNION, SDIFF
//! and SPOP with a count answer a set (`~` in RESP3), SRANDMEMBER with a
//! count and SMISMEMBER an array. Members are written while the shards are
//! locked, straight from the stored set.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::set::{self as op, SetOp, Sink};
use cairn_engine::rewrite;
use cairn_engine::value::set::Elem;
use cairn_engine::Key;
use cairn_protocol::resp::ReplyWriter;

pub const COMMANDS: &[Def] = &[
    Def::new("sadd", sadd),
    Def::new("srem", srem),
    Def::new("smove", smove),
    Def::new("sismember", sismember),
    Def::new("smismember", smismember),
    Def::new("scard", scard),
    Def::new("spop", spop),
    Def::new("srandmember", srandmember),
    Def::new("sinter", sinter),
    Def::new("sintercard", sintercard),
    Def::new("sinterstore", sinterstore),
    Def::new("sunion", sunion),
    Def::new("sunionstore", sunionstore),
    Def::new("sdiff", sdiff),
    Def::new("sdiffstore", sdiffstore),
    Def::new("smembers", smembers),
    Def::new("sscan", sscan),
];

/// Writes members as bulk strings under a set (RESP3 `~`) or array header.
/// With a byte budget, it refuses members once the reply has grown past
/// it (see [`srandmember`]).
struct Members<'w> {
    w: ReplyWriter<'w>,
    as_set: bool,
    start: usize,
    budget: usize,
    over: bool,
}

impl<'w> Members<'w> {
    fn new(w: ReplyWriter<'w>, as_set: bool) -> Self {
        let start = w.out.len();
        Members {
            w,
            as_set,
            start,
            budget: usize::MAX,
            over: false,
        }
    }
}

impl Sink for Members<'_> {
    fn len(&mut self, n: usize) {
        if self.as_set {
            self.w.set(n);
        } else {
            self.w.array(n);
        }
    }

    fn elem(&mut self, e: Elem<'_>) -> bool {
        match e {
            Elem::Int(n) => self.w.bulk_int(n),
            Elem::Bytes(b) => self.w.bulk(b),
        }
        if self.w.out.len() - self.start > self.budget {
            self.over = true;
            return false;
        }
        true
    }
}

/// SADD key member [member ...] → integer: members added.
fn sadd(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::sadd(&mut g, ctx.db(), &k, ctx.args.iter_from(2))?;
    drop(g);
    ctx.int(n as i64)
}

/// SREM key member [member ...] → integer: members removed. Removing the
/// last member deletes the key.
fn srem(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::srem(&mut g, ctx.db(), &k, ctx.args.iter_from(2))?;
    drop(g);
    ctx.int(n as i64)
}

/// SMOVE source destination member → integer 1 if moved, else 0.
fn smove(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let (src, dst) = (e.key(ctx.arg(1)), e.key(ctx.arg(2)));
    let mut g = e.lock_keys(&ctx.cx, &[src, dst]);
    let moved = op::smove(&mut g, ctx.db(), &src, &dst, ctx.arg(3))?;
    drop(g);
    ctx.int(i64::from(moved))
}

/// SISMEMBER key member → integer 1 or 0.
fn sismember(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let found = op::sismember(&mut g, ctx.db(), &k, ctx.arg(2))?;
    drop(g);
    ctx.int(i64::from(found))
}

/// SMISMEMBER key member [member ...] → array of integers 1 or 0, all 0
/// for a missing key.
fn smismember(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let (db, a) = (ctx.db(), ctx.args);
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |s| {
        let mut w = ReplyWriter::new(out, proto);
        w.array(a.len() - 2);
        for m in a.iter_from(2) {
            w.int(i64::from(s.is_some_and(|s| s.contains(m))));
        }
    })?;
    Ok(())
}

/// SCARD key → integer: members, 0 for a missing key.
fn scard(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::scard(&mut g, ctx.db(), &k)?;
    drop(g);
    ctx.int(n as i64)
}

/// SMEMBERS key → set of members (ascending for an intset), empty for a
/// missing key.
fn smembers(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let mut g = e.lock(&ctx.cx, &k);
    op::smembers(&mut g, db, &k, &mut Members::new(ctx.reply(), true))?;
    Ok(())
}

/// SPOP key [count] → without count: a bulk member, or null for a missing
/// key; with count: a set of the popped members. The count is checked
/// before the key ("must be positive" for anything but a non-negative
/// integer); a third argument is a syntax error.
fn spop(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let cx = ctx.cx;
    match ctx.argc() {
        2 => {
            let mut g = e.lock(&cx, &k);
            let mut w = ctx.reply();
            let popped = op::spop_one(&mut g, db, &k, |m| {
                // Journaled as its outcome (Redis: SREM key member).
                if e.journal_on() {
                    let mut b = itoa::Buffer::new();
                    let m: &[u8] = match m {
                        Elem::Int(n) => b.format(n).as_bytes(),
                        Elem::Bytes(b) => b,
                    };
                    rewrite::srem(e, &cx, db, k.bytes, std::iter::once(m));
                }
                match m {
                    Elem::Int(n) => w.bulk_int(n),
                    Elem::Bytes(b) => w.bulk(b),
                }
            })?;
            if popped.is_none() {
                w.null();
            }
            Ok(())
        }
        3 => {
            let count = positive(ctx.arg(2))?;
            let mut g = e.lock(&ctx.cx, &k);
            let mut sink = Recording {
                inner: Members::new(ctx.reply(), true),
                popped: e.journal_on().then(Vec::new),
            };
            op::spop_count(&mut g, db, &k, count, &mut sink)?;
            // Journaled as its outcome (Redis: SREM of the popped members).
            if let Some(popped) = sink.popped.filter(|p| !p.is_empty()) {
                rewrite::srem(e, &ctx.cx, db, k.bytes, popped.iter().map(|m| m.as_slice()));
            }
            drop(g);
            Ok(())
        }
        _ => Err(CmdError::Syntax),
    }
}

/// A sink that also keeps the members it passes on (SPOP's journal record).
struct Recording<S> {
    inner: S,
    popped: Option<Vec<Vec<u8>>>,
}

impl<S: Sink> Sink for Recording<S> {
    fn len(&mut self, n: usize) {
        self.inner.len(n);
    }

    fn elem(&mut self, e: Elem<'_>) -> bool {
        if let Some(p) = &mut self.popped {
            p.push(match e {
                Elem::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
                Elem::Bytes(b) => b.to_vec(),
            });
        }
        self.inner.elem(e)
    }
}

/// Redis `getPositiveLongFromObjectOrReply` without a custom message: one
/// text for both a non-integer and a negative value.
fn positive(arg: &[u8]) -> Result<u64, CmdError> {
    match args::int(arg) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(CmdError::text(errors::MUST_BE_POSITIVE)),
    }
}

/// Smallest RESP a member can take in a reply (`$0\r\n\r\n`).
const MIN_MEMBER_REPLY: usize = 6;

/// SRANDMEMBER key [count] → without count: a bulk member, or null for a
/// missing key; with count: an array (RESP3 too, as in Redis 7.0) of
/// distinct members for a positive count, of `|count|` independent picks
/// for a negative one, empty for a missing key or 0.
///
/// The count must be within `-i64::MAX..=i64::MAX` (Redis's range, with
/// its error text). A negative count is the one reply the set does not
/// bound: Redis builds all of it in memory and, for a count in the
/// billions, runs out of memory. Cairn caps that reply at
/// `proto-max-bulk-len` bytes (the most a client may send as one
/// argument) and answers an error instead of a larger one, checked up front
/// from the smallest possible member and while writing.
fn srandmember(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let count = match ctx.argc() {
        2 => {
            let mut g = e.lock(&ctx.cx, &k);
            let mut w = ctx.reply();
            op::view(&mut g, db, &k, |s| match s.and_then(|s| s.random()) {
                Some(Elem::Int(n)) => w.bulk_int(n),
                Some(Elem::Bytes(b)) => w.bulk(b),
                None => w.null(),
            })?;
            return Ok(());
        }
        3 => args::int(ctx.arg(2))?,
        _ => return Err(CmdError::Syntax),
    };
    if count == i64::MIN {
        return Err(CmdError::text(errors::OUT_OF_LONG_RANGE));
    }
    let budget = e.limits.max_string();
    let mut g = e.lock(&ctx.cx, &k);
    let mut sink = Members::new(ctx.reply(), false);
    sink.budget = budget;
    let start = sink.start;
    let too_big = op::view(&mut g, db, &k, |s| {
        let huge = count < 0
            && s.is_some_and(|s| !s.is_empty())
            && count.unsigned_abs() > (budget / MIN_MEMBER_REPLY) as u64;
        if !huge {
            op::srandmember_count(s, count, &mut sink);
        }
        huge || sink.over
    })?;
    drop(g);
    if too_big {
        ctx.out.truncate(start);
        return Err(CmdError::text(errors::REPLY_TOO_BIG));
    }
    Ok(())
}

/// The keys named from argument `from` to the end.
fn keys_from<'a>(ctx: &Ctx<'a>, from: usize) -> Vec<Key<'a>> {
    let e = ctx.engine();
    ctx.args.iter_from(from).map(|a| e.key(a)).collect()
}

/// SINTER key [key ...] → set: the intersection, empty if any key is
/// missing (every key is still type-checked first).
fn sinter(ctx: &mut Ctx) -> CmdResult {
    let keys = keys_from(ctx, 1);
    let e = ctx.engine();
    let db = ctx.db();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    op::sinter(&mut g, db, &keys, &mut Members::new(ctx.reply(), true))?;
    Ok(())
}

/// SUNION key [key ...] → set.
fn sunion(ctx: &mut Ctx) -> CmdResult {
    union_diff(ctx, SetOp::Union)
}

/// SDIFF key [key ...] → set: members of the first key in none of the
/// others.
fn sdiff(ctx: &mut Ctx) -> CmdResult {
    union_diff(ctx, SetOp::Diff)
}

fn union_diff(ctx: &mut Ctx, set_op: SetOp) -> CmdResult {
    let keys = keys_from(ctx, 1);
    let e = ctx.engine();
    let db = ctx.db();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    op::sunion_diff(
        &mut g,
        db,
        &keys,
        set_op,
        &mut Members::new(ctx.reply(), true),
    )?;
    Ok(())
}

/// SINTERSTORE destination key [key ...] → integer: the size of the
/// stored intersection (an empty one deletes the destination).
fn sinterstore(ctx: &mut Ctx) -> CmdResult {
    store(ctx, None)
}

/// SUNIONSTORE destination key [key ...] → integer.
fn sunionstore(ctx: &mut Ctx) -> CmdResult {
    store(ctx, Some(SetOp::Union))
}

/// SDIFFSTORE destination key [key ...] → integer.
fn sdiffstore(ctx: &mut Ctx) -> CmdResult {
    store(ctx, Some(SetOp::Diff))
}

/// The STORE commands: `None` is SINTERSTORE.
fn store(ctx: &mut Ctx, set_op: Option<SetOp>) -> CmdResult {
    let mut keys = keys_from(ctx, 1);
    let db = ctx.db();
    let g_keys = keys.clone();
    let dst = keys.remove(0);
    let e = ctx.engine();
    let mut g = e.lock_keys(&ctx.cx, &g_keys);
    let n = match set_op {
        None => op::sinterstore(&mut g, db, &dst, &keys)?,
        Some(o) => op::sunion_diff_store(&mut g, db, &dst, &keys, o)?,
    };
    drop(g);
    ctx.int(n as i64)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit] → integer: the size of
/// the intersection, counting no further than a non-zero limit. Checked
/// in Redis's order: numkeys (1 or more), numkeys against the arguments,
/// then the options (LIMIT must be a non-negative integer; anything else is
/// a syntax error), all before any key is looked at.
fn sintercard(ctx: &mut Ctx) -> CmdResult {
    let numkeys = match args::int(ctx.arg(1)) {
        Ok(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::text(errors::NUMKEYS_NOT_POSITIVE)),
    };
    let argc = ctx.argc();
    if numkeys > (argc - 2) as u64 {
        return Err(CmdError::text(errors::NUMKEYS_OVER_ARGS));
    }
    let numkeys = numkeys as usize;
    let mut limit = 0usize;
    let mut i = 2 + numkeys;
    while i < argc {
        if args::is(ctx.arg(i), "limit") && i + 1 < argc {
            limit = match args::int(ctx.arg(i + 1)) {
                Ok(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                _ => return Err(CmdError::text(errors::LIMIT_NEGATIVE)),
            };
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let e = ctx.engine();
    let keys: Vec<Key> = (2..2 + numkeys).map(|i| e.key(ctx.arg(i))).collect();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let n = op::sintercard(&mut g, ctx.db(), &keys, limit)?;
    drop(g);
    ctx.int(n as i64)
}

/// SSCAN key cursor [MATCH pattern] [COUNT count] → [next cursor,
/// [member, ...]] (an array in RESP3 too). An intset comes back whole with
/// cursor 0. The cursor is checked before the key; the options only for
/// an existing set, so a missing key answers an empty scan whatever
/// follows the cursor.
fn sscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = args::cursor(ctx.arg(2))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let (db, a) = (ctx.db(), ctx.args);
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |s| -> CmdResult {
        let mut found = Vec::new();
        let next = match s {
            None => 0,
            Some(s) => {
                let (pattern, count) = args::scan_options(a.iter_from(3))?;
                op::scan_step(s, cursor, count, pattern, &mut found)
            }
        };
        let mut w = ReplyWriter::new(out, proto);
        w.array(2);
        w.bulk(itoa::Buffer::new().format(next).as_bytes());
        w.array(found.len());
        for m in found {
            match m {
                Elem::Int(n) => w.bulk_int(n),
                Elem::Bytes(b) => w.bulk(b),
            }
        }
        Ok(())
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_counts() {
        assert_eq!(positive(b"0"), Ok(0));
        assert_eq!(positive(b"9223372036854775807"), Ok(i64::MAX as u64));
        let err = Err(CmdError::text(errors::MUST_BE_POSITIVE));
        assert_eq!(positive(b"-1"), err);
        assert_eq!(positive(b"x"), err);
        assert_eq!(positive(b"9223372036854775808"), err);
    }
}
