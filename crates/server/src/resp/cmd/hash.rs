//! Hash commands (Redis 7.0 `src/t_hash.c`, and `scanGenericCommand` in
//! `src/db.c` for HSCAN): argument parsing in Redis's order (so the same
//! bad request fails with the same error), and the replies in RESP2 and
//! RESP3. The keyspace work is `cairn_engine::ops::hash`.
//!
//! Replies that list a hash are written while the shard is locked, straight
//! from the stored bytes, so reading a hash copies nothing.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::hash::{self as op, FloatIncr};
use cairn_engine::util::num::LdClass;
use cairn_engine::value::hash::ValueRef;
use cairn_protocol::resp::{Protocol, ReplyWriter};

pub const COMMANDS: &[Def] = &[
    Def::new("hset", hset),
    Def::new("hsetnx", hsetnx),
    Def::new("hget", hget),
    Def::new("hmset", hmset),
    Def::new("hmget", hmget),
    Def::new("hgetall", hgetall),
    Def::new("hdel", hdel),
    Def::new("hlen", hlen),
    Def::new("hexists", hexists),
    Def::new("hkeys", hkeys),
    Def::new("hvals", hvals),
    Def::new("hincrby", hincrby),
    Def::new("hincrbyfloat", hincrbyfloat),
    Def::new("hstrlen", hstrlen),
    Def::new("hrandfield", hrandfield),
    Def::new("hscan", hscan),
];

/// HSET key field value [field value ...] → integer: fields created.
fn hset(ctx: &mut Ctx) -> CmdResult {
    let created = set_pairs(ctx, "hset")?;
    ctx.int(created as i64)
}

/// HMSET key field value [field value ...] → +OK.
fn hmset(ctx: &mut Ctx) -> CmdResult {
    set_pairs(ctx, "hmset")?;
    ctx.ok()
}

/// HSET and HMSET: the pairs from argument 2 on. An odd argument count is
/// an arity error named after the command (`addReplyErrorArity`), found
/// before the key is looked at; the dispatcher has already ensured there
/// is at least one pair.
fn set_pairs(ctx: &mut Ctx, name: &'static str) -> Result<usize, CmdError> {
    if ctx.argc() % 2 == 1 {
        return Err(CmdError::WrongArity(name));
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let a = ctx.args;
    let pairs = (2..a.len()).step_by(2).map(|i| (a.get(i), a.get(i + 1)));
    let mut g = e.lock(&ctx.cx, &k);
    Ok(op::hset(&mut g, ctx.db(), &k, pairs)?)
}

/// HSETNX key field value → integer: 1 if set, 0 if the field existed.
fn hsetnx(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let set = op::hsetnx(&mut g, ctx.db(), &k, ctx.arg(2), ctx.arg(3))?;
    drop(g);
    ctx.int(i64::from(set))
}

/// HGET key field → bulk string, or null if the key or field is absent.
fn hget(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let (db, field) = (ctx.db(), ctx.arg(2));
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |h| {
        let mut w = ReplyWriter::new(out, proto);
        match h.and_then(|h| h.get_ref(field)) {
            Some(v) => bulk_value(&mut w, v),
            None => w.null(),
        }
    })?;
    Ok(())
}

/// A value as a bulk string; a coded one decodes straight into the reply
/// (issue 20).
#[inline]
fn bulk_value(w: &mut ReplyWriter<'_>, v: ValueRef<'_>) {
    match v {
        ValueRef::Bytes(b) => w.bulk(b),
        v => {
            w.bulk_len(v.len());
            w.out.reserve(v.len() + 2);
            v.append_to(w.out);
            w.out.extend_from_slice(b"\r\n");
        }
    }
}

/// HMGET key field [field ...] → array of bulk strings, null for each
/// absent field (all null for a missing key).
fn hmget(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let (db, a) = (ctx.db(), ctx.args);
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |h| {
        let mut w = ReplyWriter::new(out, proto);
        w.array(a.len() - 2);
        for field in a.iter_from(2) {
            match h.and_then(|h| h.get_ref(field)) {
                Some(v) => bulk_value(&mut w, v),
                None => w.null(),
            }
        }
    })?;
    Ok(())
}

/// What HGETALL, HKEYS and HVALS list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Both,
    Fields,
    Values,
}

/// HGETALL key → map of field → value (RESP2: flat array), empty for a
/// missing key.
fn hgetall(ctx: &mut Ctx) -> CmdResult {
    list(ctx, Part::Both)
}

/// HKEYS key → array of fields.
fn hkeys(ctx: &mut Ctx) -> CmdResult {
    list(ctx, Part::Fields)
}

/// HVALS key → array of values.
fn hvals(ctx: &mut Ctx) -> CmdResult {
    list(ctx, Part::Values)
}

/// Redis `genericHgetallCommand`: a map when both parts are asked for,
/// else an array; a packed hash lists in insertion order.
fn list(ctx: &mut Ctx, part: Part) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |h| {
        let mut w = ReplyWriter::new(out, proto);
        let n = h.map_or(0, |h| h.len());
        if part == Part::Both {
            w.map(n);
        } else {
            w.array(n);
        }
        // A coded value decodes straight into the reply (issue 20).
        if let Some(h) = h {
            h.for_each(|f, v| {
                if part != Part::Values {
                    w.bulk(f);
                }
                if part != Part::Fields {
                    bulk_value(&mut w, v);
                }
            });
        }
    })?;
    Ok(())
}

/// HDEL key field [field ...] → integer: fields removed. Removing the last
/// field deletes the key.
fn hdel(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::hdel(&mut g, ctx.db(), &k, ctx.args.iter_from(2))?;
    drop(g);
    ctx.int(n as i64)
}

/// HLEN key → integer: number of fields, 0 for a missing key.
fn hlen(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::hlen(&mut g, ctx.db(), &k)?;
    drop(g);
    ctx.int(n as i64)
}

/// HEXISTS key field → integer 1 or 0.
fn hexists(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let found = op::hexists(&mut g, ctx.db(), &k, ctx.arg(2))?;
    drop(g);
    ctx.int(i64::from(found))
}

/// HSTRLEN key field → integer: the value's length, 0 if absent.
fn hstrlen(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::hstrlen(&mut g, ctx.db(), &k, ctx.arg(2))?;
    drop(g);
    ctx.int(n as i64)
}

/// HINCRBY key field increment → integer: the new value. The increment is
/// checked before the key (so a bad one beats WRONGTYPE).
fn hincrby(ctx: &mut Ctx) -> CmdResult {
    let incr = args::int(ctx.arg(3))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::hincrby(&mut g, ctx.db(), &k, ctx.arg(2), incr)?;
    drop(g);
    ctx.int(n)
}

/// HINCRBYFLOAT key field increment → bulk string: the new value as
/// stored. The increment is checked first: "ERR value is not a valid
/// float", then "ERR value is NaN or Infinity" for an infinite one.
fn hincrbyfloat(ctx: &mut Ctx) -> CmdResult {
    let incr = match FloatIncr::parse(ctx.arg(3)) {
        Ok(incr) => incr,
        Err(LdClass::Infinite) => return Err(CmdError::text(errors::NAN_OR_INFINITY)),
        Err(_) => return Err(CmdError::NotFloat),
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let text = op::hincrbyfloat(&mut g, ctx.db(), &k, ctx.arg(2), incr)?;
    // Journaled as the result (Redis: HSET key field result).
    cairn_engine::rewrite::hset(e, &ctx.cx, ctx.db(), k.bytes, ctx.arg(2), &text);
    drop(g);
    ctx.bulk(&text)
}

/// Redis 7.0 `hrandfieldCommand` takes counts in `-LONG_MAX..=LONG_MAX`, and
/// with WITHVALUES only half that, so the reply length `2 * count` fits.
const RANDFIELD_MAX_WITHVALUES: i64 = i64::MAX / 2;

/// HRANDFIELD key [count [WITHVALUES]] → without count: a bulk field, or
/// null for a missing key; with count: an array of fields (RESP2
/// WITHVALUES: field, value, ...; RESP3 WITHVALUES: [field, value] pairs),
/// empty for a missing key or count 0. A negative count may repeat fields.
fn hrandfield(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    if ctx.args.len() == 2 {
        let mut g = e.lock(&ctx.cx, &k);
        op::view(&mut g, db, &k, |h| {
            let mut w = ReplyWriter::new(out, proto);
            match h.and_then(op::random_field) {
                Some(f) => w.bulk(f),
                None => w.null(),
            }
        })?;
        return Ok(());
    }
    // Checked in this order, all before the key is looked up.
    let count = args::int(ctx.args.get(2))?;
    if count == i64::MIN {
        return Err(CmdError::text(errors::OUT_OF_LONG_RANGE));
    }
    let with_values = match ctx.args.len() {
        3 => false,
        4 if args::is(ctx.args.get(3), "withvalues") => true,
        _ => return Err(CmdError::Syntax),
    };
    if with_values && !(-RANDFIELD_MAX_WITHVALUES..=RANDFIELD_MAX_WITHVALUES).contains(&count) {
        return Err(CmdError::text(errors::OUT_OF_RANGE));
    }
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |h| {
        let mut w = ReplyWriter::new(out, proto);
        let Some(h) = h else {
            w.array(0);
            return;
        };
        let picks = op::sample(h, count);
        let resp3 = proto == Protocol::Resp3;
        w.array(if with_values && !resp3 {
            picks.len() * 2
        } else {
            picks.len()
        });
        for (f, v) in picks {
            if with_values {
                if resp3 {
                    w.array(2);
                }
                w.bulk(f);
                w.bulk(v);
            } else {
                w.bulk(f);
            }
        }
    })?;
    Ok(())
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] → [next cursor, [field,
/// value, ...]] (an array in RESP3 too). A packed hash comes back whole
/// with cursor 0. The cursor is checked before the key; the options only
/// for an existing hash, so a missing key answers an empty scan whatever
/// follows the cursor.
fn hscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = args::cursor(ctx.arg(2))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let (db, a) = (ctx.db(), ctx.args);
    let mut pairs = Vec::new();
    let mut g = e.lock(&ctx.cx, &k);
    let next = op::view(&mut g, db, &k, |h| -> Result<u64, CmdError> {
        let Some(h) = h else { return Ok(0) };
        let (pattern, count) = args::scan_options(a.iter_from(3))?;
        Ok(op::scan_step(h, cursor, count, pattern, &mut pairs))
    })??;
    drop(g);
    let mut w = ctx.reply();
    w.array(2);
    w.bulk(itoa::Buffer::new().format(next).as_bytes());
    w.array(pairs.len() * 2);
    for (f, v) in &pairs {
        w.bulk(f);
        w.bulk(v);
    }
    Ok(())
}
