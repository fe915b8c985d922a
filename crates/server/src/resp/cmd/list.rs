//! List commands (Redis 7.0 `src/t_list.c`): argument parsing in Redis's
//! order (so the same bad request fails with the same error), and the
//! replies in RESP2 and RESP3. The keyspace work is
//! `cairn_engine::ops::list`.
//!
//! Replies that list elements are written while the shard is locked,
//! straight from the stored nodes, so LRANGE and the pops copy nothing.
//!
//! The blocking forms (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH) try once
//! like their plain forms; finding nothing, they call `Ctx::block`, and
//! the server runs them again when a key is ready, on timeout (then
//! `block` answers the null reply) or on CLIENT UNBLOCK. On such a retry a
//! watched key of another type is skipped rather than an error: Redis 7.0
//! keeps the client blocked until a list appears there.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx, OnTimeout};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::list::{self as op, Elem, End, Iter, LposOptions};
use cairn_engine::rewrite;
use cairn_engine::Key;
use cairn_protocol::resp::ReplyWriter;
use smallvec::SmallVec;

pub const COMMANDS: &[Def] = &[
    Def::new("lpush", lpush),
    Def::new("rpush", rpush),
    Def::new("lpushx", lpushx),
    Def::new("rpushx", rpushx),
    Def::new("lpop", lpop),
    Def::new("rpop", rpop),
    Def::new("llen", llen),
    Def::new("lrange", lrange),
    Def::new("lindex", lindex),
    Def::new("lset", lset),
    Def::new("linsert", linsert),
    Def::new("lrem", lrem),
    Def::new("ltrim", ltrim),
    Def::new("lpos", lpos),
    Def::new("lmove", lmove),
    Def::new("rpoplpush", rpoplpush),
    Def::new("lmpop", lmpop),
    Def::new("blpop", blpop),
    Def::new("brpop", brpop),
    Def::new("blmove", blmove),
    Def::new("brpoplpush", brpoplpush),
    Def::new("blmpop", blmpop),
];

/// One element as a bulk string (`addReplyBulkCBuffer` /
/// `addReplyBulkLongLong`).
fn bulk_elem(w: &mut ReplyWriter, e: Elem) {
    match e {
        Elem::Bytes(b) => w.bulk(b),
        Elem::Int(n) => w.bulk_int(n),
    }
}

/// An array of elements.
fn elems(w: &mut ReplyWriter, it: Iter) {
    w.array(it.len());
    for e in it {
        bulk_elem(w, e);
    }
}

/// `LEFT` or `RIGHT`, any case; anything else is a syntax error
/// (`getListPositionFromObjectOrReply`).
fn end_arg(arg: &[u8]) -> Result<End, CmdError> {
    if args::is(arg, "left") {
        Ok(End::Left)
    } else if args::is(arg, "right") {
        Ok(End::Right)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Redis `getRangeLongFromObjectOrReply` with a message: anything but an
/// integer in `min..=max` answers `ERR <msg>`.
fn ranged(arg: &[u8], min: i64, max: i64, msg: &'static str) -> Result<i64, CmdError> {
    match cairn_engine::util::num::parse_i64(arg) {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(CmdError::text(msg)),
    }
}

// ------------------------------------------------------------------ pushes

/// LPUSH key element [element ...] → integer: the new length.
fn lpush(ctx: &mut Ctx) -> CmdResult {
    push(ctx, End::Left, false)
}

/// RPUSH key element [element ...] → integer: the new length.
fn rpush(ctx: &mut Ctx) -> CmdResult {
    push(ctx, End::Right, false)
}

/// LPUSHX key element [element ...] → integer: the new length, 0 (and
/// nothing created) for a missing key.
fn lpushx(ctx: &mut Ctx) -> CmdResult {
    push(ctx, End::Left, true)
}

/// RPUSHX key element [element ...] → like LPUSHX, at the tail.
fn rpushx(ctx: &mut Ctx) -> CmdResult {
    push(ctx, End::Right, true)
}

fn push(ctx: &mut Ctx, end: End, only_existing: bool) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::push(
        &mut g,
        ctx.db(),
        &k,
        end,
        only_existing,
        ctx.args.iter_from(2),
    )?;
    drop(g);
    ctx.int(n as i64)
}

// -------------------------------------------------------------------- pops

/// LPOP key [count] → without count: a bulk string, null for a missing
/// key; with count: an array (empty for count 0), a null array for a
/// missing key (RESP3 `_` for both nulls).
fn lpop(ctx: &mut Ctx) -> CmdResult {
    pop(ctx, End::Left)
}

/// RPOP key [count] → as LPOP, from the tail (the array lists elements in
/// the order they were popped).
fn rpop(ctx: &mut Ctx) -> CmdResult {
    pop(ctx, End::Right)
}

/// Redis `popGenericCommand`: more than one count argument is an arity
/// error named after the command; the count must be a non-negative
/// integer, checked before the key is looked up.
fn pop(ctx: &mut Ctx, end: End) -> CmdResult {
    let name = match end {
        End::Left => "lpop",
        End::Right => "rpop",
    };
    if ctx.argc() > 3 {
        return Err(CmdError::WrongArity(name));
    }
    let count = if ctx.argc() == 3 {
        let n = ranged(ctx.arg(2), 0, i64::MAX, errors::MUST_BE_POSITIVE)?;
        Some(usize::try_from(n).unwrap_or(usize::MAX))
    } else {
        None
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    let found = op::pop(&mut g, db, &k, end, count.unwrap_or(1), |mut it| {
        let mut w = ReplyWriter::new(out, proto);
        match count {
            Some(_) => elems(&mut w, it),
            None => match it.next() {
                Some(x) => bulk_elem(&mut w, x),
                None => w.null(),
            },
        }
    })?;
    drop(g);
    if found.is_none() {
        let mut w = ctx.reply();
        match count {
            Some(_) => w.null_array(),
            None => w.null(),
        }
    }
    Ok(())
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count] → [key, [elements]]
/// from the first non-empty list, or a null array.
fn lmpop(ctx: &mut Ctx) -> CmdResult {
    let (first, nkeys, end, count) = parse_mpop(ctx, 1)?;
    let a = ctx.args;
    let e = ctx.engine();
    let keys: SmallVec<[Key; 8]> = (first..first + nkeys).map(|i| e.key(a.get(i))).collect();
    let served = mpop(ctx, &keys, end, count, false)?;
    if !served {
        ctx.reply().null_array();
    }
    Ok(())
}

/// LMPOP/BLMPOP's arguments after the numkeys at `numkeys_idx` (Redis
/// `lmpopGenericCommand`): numkeys in 1..=LONG_MAX, then the keys and
/// LEFT|RIGHT (a numkeys that leaves no room for the direction is a syntax
/// error), then at most one COUNT >= 1. Returns (first key index, number
/// of keys, end, count).
fn parse_mpop(ctx: &Ctx, numkeys_idx: usize) -> Result<(usize, usize, End, usize), CmdError> {
    let numkeys = ranged(
        ctx.arg(numkeys_idx),
        1,
        i64::MAX,
        errors::NUMKEYS_NOT_POSITIVE,
    )?;
    let argc = ctx.argc();
    let where_idx = match usize::try_from(numkeys) {
        Ok(n) if n < argc - numkeys_idx - 1 => numkeys_idx + n + 1,
        _ => return Err(CmdError::Syntax),
    };
    let end = end_arg(ctx.arg(where_idx))?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < argc {
        if count.is_none() && args::is(ctx.arg(j), "count") && j + 1 < argc {
            let n = ranged(ctx.arg(j + 1), 1, i64::MAX, errors::COUNT_NOT_POSITIVE)?;
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((
        numkeys_idx + 1,
        where_idx - numkeys_idx - 1,
        end,
        count.unwrap_or(1),
    ))
}

/// Pops from the first of `keys` holding a list and writes LMPOP's reply;
/// false if none did (nothing written).
fn mpop(
    ctx: &mut Ctx,
    keys: &[Key],
    end: End,
    count: usize,
    retry: bool,
) -> Result<bool, CmdError> {
    let e = ctx.engine();
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock_keys(&ctx.cx, keys);
    let served = op::pop_first(&mut g, db, keys, end, count, retry, |i, it| {
        // Journaled as the pop it did, on the key served, with the number
        // of elements it took (Redis 7.0: `LPOP`/`RPOP key n`).
        if e.journal_on() {
            rewrite::lmpop(e, &ctx.cx, db, keys[i].bytes, end, it.len());
        }
        let mut w = ReplyWriter::new(out, proto);
        w.array(2);
        w.bulk(keys[i].bytes);
        elems(&mut w, it);
    })?;
    Ok(served.is_some())
}

// ------------------------------------------------------------------- reads

/// LLEN key → integer, 0 for a missing key.
fn llen(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::llen(&mut g, ctx.db(), &k)?;
    drop(g);
    ctx.int(n as i64)
}

/// LRANGE key start stop → array (empty for a missing key or an empty
/// range). Both indexes are checked before the key.
fn lrange(ctx: &mut Ctx) -> CmdResult {
    let start = args::int(ctx.arg(2))?;
    let stop = args::int(ctx.arg(3))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::lrange(&mut g, db, &k, start, stop, |it| {
        elems(&mut ReplyWriter::new(out, proto), it)
    })?;
    Ok(())
}

/// LINDEX key index → bulk string, or null (missing key, index out of
/// range). The key is looked up first: a missing key answers null even
/// for a bad index, a key of another type WRONGTYPE.
fn lindex(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let idx_arg = ctx.arg(2);
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |l| -> CmdResult {
        let mut w = ReplyWriter::new(out, proto);
        let Some(l) = l else {
            w.null();
            return Ok(());
        };
        match l.get(args::int(idx_arg)?) {
            Some(x) => bulk_elem(&mut w, x),
            None => w.null(),
        }
        Ok(())
    })?
}

/// LPOS key element [RANK rank] [COUNT num] [MAXLEN len] → without COUNT
/// an integer or null; with COUNT an array (empty for a missing key).
/// Options are parsed in order before the key is looked up.
fn lpos(ctx: &mut Ctx) -> CmdResult {
    let mut opts = LposOptions {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let argc = ctx.argc();
    let mut j = 3;
    while j < argc {
        let opt = ctx.arg(j);
        let more = j + 1 < argc;
        if args::is(opt, "rank") && more {
            // A plain `long`: RANK -9223372036854775808 is accepted (see
            // `ops::list::lpos`).
            let rank = args::int(ctx.arg(j + 1))?;
            if rank == 0 {
                return Err(CmdError::text(errors::LPOS_RANK_ZERO));
            }
            opts.rank = rank;
        } else if args::is(opt, "count") && more {
            opts.count = Some(ranged(
                ctx.arg(j + 1),
                0,
                i64::MAX,
                errors::LPOS_COUNT_NEGATIVE,
            )?);
        } else if args::is(opt, "maxlen") && more {
            opts.maxlen = ranged(ctx.arg(j + 1), 0, i64::MAX, errors::LPOS_MAXLEN_NEGATIVE)?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let found = op::lpos(&mut g, ctx.db(), &k, ctx.arg(2), opts)?;
    drop(g);
    let mut w = ctx.reply();
    match (opts.count, found) {
        (Some(_), found) => {
            let found = found.unwrap_or_default();
            w.array(found.len());
            for i in found {
                w.int(i);
            }
        }
        (None, Some(found)) if !found.is_empty() => w.int(found[0]),
        (None, _) => w.null(),
    }
    Ok(())
}

// ------------------------------------------------------------------ writes

/// LSET key index element → +OK; "ERR no such key" for a missing key
/// (checked before the index), "ERR index out of range".
fn lset(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let mut g = e.lock(&ctx.cx, &k);
    // Redis looks the key up (and type-checks it) before parsing the index.
    match g.write(db, &k) {
        None => return Err(CmdError::Engine(cairn_engine::Error::NoSuchKey)),
        Some(entry) => {
            cairn_engine::ops::as_list(&entry.value)?;
        }
    }
    let index = args::int(ctx.arg(2))?;
    op::lset(&mut g, db, &k, index, ctx.arg(3))?;
    drop(g);
    ctx.ok()
}

/// LINSERT key BEFORE|AFTER pivot element → integer: the new length, -1
/// without the pivot, 0 for a missing key. The direction is checked first.
fn linsert(ctx: &mut Ctx) -> CmdResult {
    let after = if args::is(ctx.arg(2), "after") {
        true
    } else if args::is(ctx.arg(2), "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::linsert(&mut g, ctx.db(), &k, after, ctx.arg(3), ctx.arg(4))?;
    drop(g);
    ctx.int(n)
}

/// LREM key count element → integer: elements removed.
fn lrem(ctx: &mut Ctx) -> CmdResult {
    let count = args::int(ctx.arg(2))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::lrem(&mut g, ctx.db(), &k, count, ctx.arg(3))?;
    drop(g);
    ctx.int(n as i64)
}

/// LTRIM key start stop → +OK (also for a missing key).
fn ltrim(ctx: &mut Ctx) -> CmdResult {
    let start = args::int(ctx.arg(2))?;
    let stop = args::int(ctx.arg(3))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    op::ltrim(&mut g, ctx.db(), &k, start, stop)?;
    drop(g);
    ctx.ok()
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT → the element moved,
/// or null if the source is missing.
fn lmove(ctx: &mut Ctx) -> CmdResult {
    let from = end_arg(ctx.arg(3))?;
    let to = end_arg(ctx.arg(4))?;
    move_one(ctx, from, to, None)
}

/// RPOPLPUSH source destination → LMOVE source destination RIGHT LEFT.
fn rpoplpush(ctx: &mut Ctx) -> CmdResult {
    move_one(ctx, End::Right, End::Left, None)
}

/// LMOVE's work; with `timeout_ms` (BLMOVE, BRPOPLPUSH) a missing source
/// blocks instead of answering null.
fn move_one(ctx: &mut Ctx, from: End, to: End, timeout_ms: Option<u64>) -> CmdResult {
    let e = ctx.engine();
    let src = e.key(ctx.arg(1));
    let dst = e.key(ctx.arg(2));
    let retry = timeout_ms.is_some() && ctx.is_retry();
    if timeout_ms.is_some() {
        // BLMOVE/BRPOPLPUSH are journaled as LMOVE (their non-blocking form).
        rewrite::lmove(e, &ctx.cx, ctx.db(), src.bytes, dst.bytes, from, to);
    }
    let mut g = e.lock_keys(&ctx.cx, &[src, dst]);
    let moved = op::lmove(&mut g, ctx.db(), &src, &dst, from, to, retry)?;
    drop(g);
    match (moved, timeout_ms) {
        (Some(v), _) => ctx.bulk(&v),
        (None, None) => ctx.null(),
        (None, Some(ms)) => {
            // Where Redis may not block (inside MULTI) it answers a null
            // bulk string at once; a wait that ends without data (timeout,
            // CLIENT UNBLOCK) answers a null array, as every list wait does
            // in Redis 7.0 (`replyToBlockedClientTimedOut`).
            let on_timeout = if ctx.client.in_exec {
                OnTimeout::NullBulk
            } else {
                OnTimeout::NullArray
            };
            ctx.block([src.bytes], ms, on_timeout)
        }
    }
}

// ---------------------------------------------------------------- blocking

/// BLPOP key [key ...] timeout → [key, element] from the first non-empty
/// list, blocking while all are empty; a null array on timeout.
fn blpop(ctx: &mut Ctx) -> CmdResult {
    bpop(ctx, End::Left)
}

/// BRPOP key [key ...] timeout → as BLPOP, from the tail.
fn brpop(ctx: &mut Ctx) -> CmdResult {
    bpop(ctx, End::Right)
}

fn bpop(ctx: &mut Ctx, end: End) -> CmdResult {
    let argc = ctx.argc();
    let timeout = args::timeout_ms(ctx.arg(argc - 1))?;
    let a = ctx.args;
    let e = ctx.engine();
    let keys: SmallVec<[Key; 8]> = (1..argc - 1).map(|i| e.key(a.get(i))).collect();
    let db = ctx.db();
    let retry = ctx.is_retry();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let served = op::pop_first(&mut g, db, &keys, end, 1, retry, |i, mut it| {
        // Journaled as the non-blocking pop it did, on the key served.
        rewrite::pop(e, &ctx.cx, db, end, keys[i].bytes);
        let mut w = ReplyWriter::new(out, proto);
        w.array(2);
        w.bulk(keys[i].bytes);
        match it.next() {
            Some(x) => bulk_elem(&mut w, x),
            None => w.null(),
        }
    })?;
    drop(g);
    if served.is_some() {
        return Ok(());
    }
    ctx.block(keys.iter().map(|k| k.bytes), timeout, OnTimeout::NullArray)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count] → as
/// LMPOP, blocking while all lists are empty; a null array on timeout.
/// The timeout is checked after the other arguments, as Redis does.
fn blmpop(ctx: &mut Ctx) -> CmdResult {
    let (first, nkeys, end, count) = parse_mpop(ctx, 2)?;
    let timeout = args::timeout_ms(ctx.arg(1))?;
    let a = ctx.args;
    let e = ctx.engine();
    let keys: SmallVec<[Key; 8]> = (first..first + nkeys).map(|i| e.key(a.get(i))).collect();
    let retry = ctx.is_retry();
    if mpop(ctx, &keys, end, count, retry)? {
        return Ok(());
    }
    ctx.block(keys.iter().map(|k| k.bytes), timeout, OnTimeout::NullArray)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout → as LMOVE,
/// blocking while the source is missing; on timeout a null array (RESP2
/// `*-1`, as Redis 7.0 answers every timed-out list wait), inside MULTI a
/// null bulk string.
fn blmove(ctx: &mut Ctx) -> CmdResult {
    let from = end_arg(ctx.arg(3))?;
    let to = end_arg(ctx.arg(4))?;
    let timeout = args::timeout_ms(ctx.arg(5))?;
    move_one(ctx, from, to, Some(timeout))
}

/// BRPOPLPUSH source destination timeout → BLMOVE ... RIGHT LEFT timeout.
fn brpoplpush(ctx: &mut Ctx) -> CmdResult {
    let timeout = args::timeout_ms(ctx.arg(3))?;
    move_one(ctx, End::Right, End::Left, Some(timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_ranges() {
        assert_eq!(end_arg(b"LeFt"), Ok(End::Left));
        assert_eq!(end_arg(b"right"), Ok(End::Right));
        assert_eq!(end_arg(b"up"), Err(CmdError::Syntax));
        assert_eq!(ranged(b"5", 1, 9, "ERR x"), Ok(5));
        assert_eq!(ranged(b"0", 1, 9, "ERR x"), Err(CmdError::text("ERR x")));
        assert_eq!(ranged(b"abc", 1, 9, "ERR x"), Err(CmdError::text("ERR x")));
        assert_eq!(
            ranged(b"9223372036854775808", 0, i64::MAX, "ERR x"),
            Err(CmdError::text("ERR x"))
        );
    }
}
