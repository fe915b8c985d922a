//! Generic keyspace commands (Redis 7.0 `src/db.c`, `src/expire.c`,
//! `src/object.c`, `src/lazyfree.c`): DEL UNLINK EXISTS TYPE TOUCH, the
//! EXPIRE family, TTL and friends, PERSIST, RENAME RENAMENX MOVE COPY, KEYS
//! SCAN RANDOMKEY DBSIZE, FLUSHDB FLUSHALL SWAPDB, and OBJECT. Arguments
//! are parsed in Redis's order, so a request with several faults fails with
//! the error Redis would give first; the keyspace work is
//! `cairn_engine::ops::keys` and `cairn_engine::iterate`.
//!
//! Values whose freeing is expensive (UNLINK, FLUSH ASYNC, and the lazyfree
//! options) are dropped on one background thread, Redis's lazyfree bio
//! thread, after the shard locks are released.
use crate::config::MaxmemoryPolicy;
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::cmd::reply_help;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::keys::{self as op, ExpireCond, ExpireOutcome, ScanFilter, Ttl, TypeFilter};
use cairn_engine::rewrite;
use cairn_engine::{Error as EngineError, Key, Kind, Owned};
use cairn_protocol::resp::ReplyWriter;
use smallvec::SmallVec;
use std::sync::mpsc;
use std::sync::OnceLock;

pub const COMMANDS: &[Def] = &[
    Def::new("del", del),
    Def::new("unlink", unlink),
    Def::new("exists", exists),
    Def::new("type", type_),
    Def::new("touch", touch),
    Def::new("expire", expire),
    Def::new("pexpire", pexpire),
    Def::new("expireat", expireat),
    Def::new("pexpireat", pexpireat),
    Def::new("ttl", ttl),
    Def::new("pttl", pttl),
    Def::new("expiretime", expiretime),
    Def::new("pexpiretime", pexpiretime),
    Def::new("persist", persist),
    Def::new("rename", rename),
    Def::new("renamenx", renamenx),
    Def::new("move", move_),
    Def::new("copy", copy),
    Def::new("keys", keys),
    Def::new("scan", scan),
    Def::new("randomkey", randomkey),
    Def::new("dbsize", dbsize),
    Def::new("flushdb", flushdb),
    Def::new("flushall", flushall),
    Def::new("swapdb", swapdb),
    Def::container(
        "object",
        &[
            Def::new("encoding", object_encoding),
            Def::new("freq", object_freq),
            Def::new("help", object_help),
            Def::new("idletime", object_idletime),
            Def::new("refcount", object_refcount),
        ],
    ),
];

/// Keys of a multi-key command; eight fit without allocating.
type Keys<'a> = SmallVec<[Key<'a>; 8]>;

/// Keys from argument `from` on, each hashed once.
fn keys_from<'a>(ctx: &Ctx<'a>, from: usize) -> Keys<'a> {
    let e = ctx.engine();
    ctx.args.iter_from(from).map(|a| e.key(a)).collect()
}

/// DEL key [key ...] → integer: keys removed.
fn del(ctx: &mut Ctx) -> CmdResult {
    remove_keys(ctx, false)
}

/// UNLINK key [key ...] → integer: keys removed; large values are freed in
/// the background.
fn unlink(ctx: &mut Ctx) -> CmdResult {
    remove_keys(ctx, true)
}

/// DEL and UNLINK under one lock of all the keys' shards, so the command is
/// atomic. DEL frees in the background too when `lazyfree-lazy-user-del` is
/// set (Redis `delCommand`).
fn remove_keys(ctx: &mut Ctx, lazy: bool) -> CmdResult {
    let keys = keys_from(ctx, 1);
    let mut removed: SmallVec<[Owned; 4]> = SmallVec::new();
    let n = op::del(
        &mut ctx.engine().lock_keys(&ctx.cx, &keys),
        ctx.db(),
        &keys,
        |e| removed.push(e),
    );
    for e in removed {
        free_entry(ctx, e, lazy);
    }
    ctx.int(n as i64)
}

/// Frees a removed entry: on the background thread when it is costly and
/// lazy freeing applies (Redis `dbAsyncDelete`: effort above
/// `LAZYFREE_THRESHOLD`), here otherwise. The config is read only for the
/// costly case, so small deletes never touch its lock.
fn free_entry(ctx: &Ctx, e: Owned, lazy: bool) {
    let effort = match &e {
        Owned::Full(e) => op::free_effort(&e.value),
        Owned::Compact(_) => 1,
    };
    if effort > op::LAZYFREE_THRESHOLD && (lazy || ctx.shared.config.read().lazyfree_lazy_user_del)
    {
        free_in_background(Box::new(e));
    } else {
        drop(e);
    }
}

/// Hands `garbage` to the lazyfree thread, started on first use. If the
/// thread cannot be started the value is dropped here: slower, not wrong.
fn free_in_background(garbage: Box<dyn Send>) {
    static QUEUE: OnceLock<Option<mpsc::Sender<Box<dyn Send>>>> = OnceLock::new();
    let tx = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Box<dyn Send>>();
        std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                crate::memory::register_thread();
                for garbage in rx {
                    drop(garbage);
                    cairn_engine::lazyfree::freed_elsewhere(true);
                }
            })
            .ok()
            .map(|_| tx)
    });
    if let Some(tx) = tx {
        // INFO's lazyfree_pending_objects and lazyfreed_objects count these
        // as Redis counts its lazyfree jobs.
        cairn_engine::lazyfree::queued_elsewhere();
        // A send fails only if the thread is gone; then `garbage` comes back
        // in the error and is dropped here.
        if tx.send(garbage).is_err() {
            cairn_engine::lazyfree::freed_elsewhere(false);
        }
    }
}

/// EXISTS key [key ...] → integer: how many exist, repeats counted.
fn exists(ctx: &mut Ctx) -> CmdResult {
    let keys = keys_from(ctx, 1);
    let n = op::exists(&mut ctx.engine().lock_keys(&ctx.cx, &keys), ctx.db(), &keys);
    ctx.int(n as i64)
}

/// TOUCH key [key ...] → integer: how many exist (access time updated).
fn touch(ctx: &mut Ctx) -> CmdResult {
    let keys = keys_from(ctx, 1);
    let n = op::touch(&mut ctx.engine().lock_keys(&ctx.cx, &keys), ctx.db(), &keys);
    ctx.int(n as i64)
}

/// TYPE key → +string | +hash | ... | +none.
fn type_(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let kind = op::key_type(&mut e.lock(&ctx.cx, &k), ctx.db(), &k);
    ctx.reply().simple(kind.map_or("none", Kind::name));
    Ok(())
}

/// EXPIRE key seconds [NX|XX|GT|LT] → 1 if set (or the key was deleted by a
/// time not in the future), 0 if missing or a condition failed.
fn expire(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, Unit::Seconds, true, "expire")
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT] → 1 | 0, as EXPIRE.
fn pexpire(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, Unit::Millis, true, "pexpire")
}

/// EXPIREAT key unix-seconds [NX|XX|GT|LT] → 1 | 0, as EXPIRE.
fn expireat(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, Unit::Seconds, false, "expireat")
}

/// PEXPIREAT key unix-ms [NX|XX|GT|LT] → 1 | 0, as EXPIRE.
fn pexpireat(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, Unit::Millis, false, "pexpireat")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

/// Redis `expireGenericCommand`: options first, then the number, then the
/// overflow checks, then the key. Negative and zero times are accepted and
/// delete the key.
fn expire_generic(ctx: &mut Ctx, unit: Unit, relative: bool, name: &'static str) -> CmdResult {
    let cond = parse_expire_cond(ctx)?;
    let n = args::int(ctx.arg(2))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let base = if relative { g.now as i64 } else { 0 };
    let when = deadline(n, unit, base).ok_or(CmdError::InvalidExpire(name))?;
    // Journaled with an absolute time, options kept (Redis: PEXPIREAT),
    // or as DEL when the time has already passed and the key goes now.
    if e.journal_on() {
        if when <= g.now as i64 {
            rewrite::del(e, &ctx.cx, ctx.db(), k.bytes);
        } else {
            let flags = ctx.args.iter_from(3);
            rewrite::pexpireat(e, &ctx.cx, ctx.db(), k.bytes, when as u64, flags);
        }
    }
    let outcome = op::expire(&mut g, ctx.db(), &k, when, cond);
    drop(g);
    ctx.int(match outcome {
        ExpireOutcome::Unchanged => 0,
        ExpireOutcome::Set => 1,
        // Redis frees here synchronously unless lazyfree-lazy-expire.
        ExpireOutcome::Deleted(old) => {
            drop(old);
            1
        }
    })
}

/// `n` units after `base` ms (`base` >= 0), or None where Redis reports
/// overflow: a seconds value that cannot be multiplied by 1000 (`when >
/// LLONG_MAX / 1000 || when < LLONG_MIN / 1000`), or a sum above
/// `i64::MAX`. A negative result is allowed; it deletes the key.
fn deadline(n: i64, unit: Unit, base: i64) -> Option<i64> {
    let per_unit = match unit {
        Unit::Seconds => 1000,
        Unit::Millis => 1,
    };
    n.checked_mul(per_unit)?.checked_add(base)
}

/// Redis `parseExtendedExpireArgumentsOrReply`: any of NX XX GT LT, repeats
/// allowed, in any case; NX excludes the others, GT excludes LT.
fn parse_expire_cond(ctx: &Ctx) -> Result<ExpireCond, CmdError> {
    let mut c = ExpireCond::default();
    for opt in ctx.args.iter_from(3) {
        if args::is(opt, "nx") {
            c.nx = true;
        } else if args::is(opt, "xx") {
            c.xx = true;
        } else if args::is(opt, "gt") {
            c.gt = true;
        } else if args::is(opt, "lt") {
            c.lt = true;
        } else {
            return Err(errors::expire_unsupported_option(&c_str(opt)));
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(CmdError::text(errors::EXPIRE_NX_WITH_OTHERS));
    }
    if c.gt && c.lt {
        return Err(CmdError::text(errors::EXPIRE_GT_WITH_LT));
    }
    Ok(c)
}

/// An argument as C's `%s` prints it: up to the first NUL.
fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// TTL key → seconds left (rounded), -1 without expiry, -2 if missing.
fn ttl(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, Unit::Seconds, false)
}

/// PTTL key → milliseconds left, -1 without expiry, -2 if missing.
fn pttl(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, Unit::Millis, false)
}

/// EXPIRETIME key → Unix seconds (rounded) of the expiry, -1, or -2.
fn expiretime(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, Unit::Seconds, true)
}

/// PEXPIRETIME key → Unix milliseconds of the expiry, -1, or -2.
fn pexpiretime(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, Unit::Millis, true)
}

/// Redis `ttlGenericCommand`: seconds are `(ms + 500) / 1000` (wrapping as
/// C does for a deadline near `i64::MAX`).
fn ttl_generic(ctx: &mut Ctx, unit: Unit, absolute: bool) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let t = op::ttl(&mut g, ctx.db(), &k);
    let now = g.now as i64;
    drop(g);
    let n = match t {
        Ttl::Missing => -2,
        Ttl::Persistent => -1,
        Ttl::At(at) => {
            let at = at as i64;
            let ms = if absolute { at } else { (at - now).max(0) };
            match unit {
                Unit::Millis => ms,
                Unit::Seconds => ms.wrapping_add(500) / 1000,
            }
        }
    };
    ctx.int(n)
}

/// PERSIST key → 1 if an expiry was removed, else 0.
fn persist(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let done = op::persist(&mut e.lock(&ctx.cx, &k), ctx.db(), &k);
    ctx.int(i64::from(done))
}

/// RENAME key newkey → +OK, or "ERR no such key".
fn rename(ctx: &mut Ctx) -> CmdResult {
    rename_generic(ctx, false)?;
    ctx.ok()
}

/// RENAMENX key newkey → 1 if renamed, 0 if newkey exists (or is key).
fn renamenx(ctx: &mut Ctx) -> CmdResult {
    let done = rename_generic(ctx, true)?;
    ctx.int(i64::from(done))
}

/// Redis `renameGenericCommand`, under one lock of both keys.
fn rename_generic(ctx: &mut Ctx, nx: bool) -> Result<bool, CmdError> {
    let e = ctx.engine();
    let (from, to) = (e.key(ctx.arg(1)), e.key(ctx.arg(2)));
    let mut g = e.lock_keys(&ctx.cx, &[from, to]);
    Ok(op::rename(&mut g, ctx.db(), &from, &to, nx)?)
}

/// MOVE key db → 1 if moved, 0 if missing or already in the target db.
fn move_(ctx: &mut Ctx) -> CmdResult {
    if ctx.shared.cluster.enabled() {
        return Err(CmdError::text(errors::MOVE_IN_CLUSTER));
    }
    let to = db_arg(ctx, ctx.arg(2))?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let moved = op::move_key(&mut e.lock(&ctx.cx, &k), ctx.db(), to, &k)?;
    ctx.int(i64::from(moved))
}

/// COPY source destination [DB db] [REPLACE] → 1 if copied, else 0.
fn copy(ctx: &mut Ctx) -> CmdResult {
    let mut replace = false;
    let mut dst_db = ctx.db();
    let mut i = 3;
    while i < ctx.argc() {
        let a = ctx.arg(i);
        if args::is(a, "replace") {
            replace = true;
        } else if args::is(a, "db") && i + 1 < ctx.argc() {
            dst_db = db_arg(ctx, ctx.arg(i + 1))?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if ctx.shared.cluster.enabled() && (ctx.db() != 0 || dst_db != 0) {
        return Err(CmdError::text(errors::COPY_DB_IN_CLUSTER));
    }
    let e = ctx.engine();
    let (from, to) = (e.key(ctx.arg(1)), e.key(ctx.arg(2)));
    let mut replaced = None;
    let mut g = e.lock_keys(&ctx.cx, &[from, to]);
    let copied = op::copy(&mut g, ctx.db(), &from, dst_db, &to, replace, |old| {
        replaced = Some(old)
    })?;
    drop(g);
    if let Some(old) = replaced {
        // Redis's dbDelete of the replaced key: lazy only with
        // lazyfree-lazy-server-del, which Cairn does not have, so here.
        drop(old);
    }
    ctx.int(i64::from(copied))
}

/// A database index as MOVE and COPY read it: an int
/// (`getIntFromObjectOrReply`), then in range (`selectDb`).
fn db_arg(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let n = int32(arg)?;
    usize::try_from(n)
        .ok()
        .filter(|&d| d < ctx.engine().databases())
        .ok_or(CmdError::Engine(EngineError::DbIndexOutOfRange))
}

/// Redis `getIntFromObjectOrReply` with its default messages.
fn int32(arg: &[u8]) -> Result<i32, CmdError> {
    let n = args::int(arg)?;
    i32::try_from(n).map_err(|_| CmdError::text(errors::OUT_OF_INT_RANGE))
}

/// KEYS pattern → array of every matching key, in no particular order.
fn keys(ctx: &mut Ctx) -> CmdResult {
    let (db, proto) = (ctx.db(), ctx.client.proto);
    let mut body = Vec::new();
    let mut n = 0usize;
    op::keys(ctx.engine(), &ctx.cx, db, ctx.arg(1), |k| {
        ReplyWriter::new(&mut body, proto).bulk(k);
        n += 1;
    });
    ctx.reply().array(n);
    ctx.out.extend_from_slice(&body);
    Ok(())
}

/// The COUNT hint when none is given (Redis `scanGenericCommand`).
const SCAN_DEFAULT_COUNT: usize = 10;

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] → [next cursor,
/// [key ...]]. The cursor is checked first; options may repeat, the last
/// one winning; COUNT must be an integer of at least 1; a TYPE no value
/// has still walks the keyspace and returns no keys.
fn scan(ctx: &mut Ctx) -> CmdResult {
    let cursor = args::cursor(ctx.arg(1))?;
    let mut filter = ScanFilter {
        pattern: None,
        kind: TypeFilter::Any,
    };
    let mut count = SCAN_DEFAULT_COUNT;
    let mut i = 2;
    while i < ctx.argc() {
        let (opt, has_value) = (ctx.arg(i), i + 1 < ctx.argc());
        if args::is(opt, "count") && has_value {
            let n = args::int(ctx.arg(i + 1))?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if args::is(opt, "match") && has_value {
            // Redis skips matching for the pattern "*" alone.
            let p = ctx.arg(i + 1);
            filter.pattern = (p != b"*").then_some(p);
        } else if args::is(opt, "type") && has_value {
            filter.kind =
                Kind::from_name(ctx.arg(i + 1)).map_or(TypeFilter::Nothing, TypeFilter::Only);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let (db, proto) = (ctx.db(), ctx.client.proto);
    let mut body = Vec::new();
    let mut n = 0usize;
    let next = op::scan(ctx.engine(), &ctx.cx, db, cursor, count, filter, |k| {
        ReplyWriter::new(&mut body, proto).bulk(k);
        n += 1;
    });
    let mut w = ctx.reply();
    w.array(2);
    w.bulk(itoa::Buffer::new().format(next).as_bytes());
    w.array(n);
    w.raw(&body);
    Ok(())
}

/// RANDOMKEY → a random key, or null when the database is empty.
fn randomkey(ctx: &mut Ctx) -> CmdResult {
    let k = op::random_key(ctx.engine(), &ctx.cx, ctx.db());
    ctx.bulk_or_null(k.as_deref())
}

/// DBSIZE → integer: keys in the current database.
fn dbsize(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.engine().dbsize(&ctx.cx, ctx.db());
    ctx.int(n as i64)
}

/// FLUSHDB [ASYNC|SYNC] → +OK.
fn flushdb(ctx: &mut Ctx) -> CmdResult {
    let lazy = flush_mode(ctx)?;
    let old = ctx.engine().flush(&ctx.cx, Some(ctx.db()));
    free_tables(old, lazy);
    ctx.ok()
}

/// FLUSHALL [ASYNC|SYNC] → +OK.
fn flushall(ctx: &mut Ctx) -> CmdResult {
    let lazy = flush_mode(ctx)?;
    crate::snapshots::before_flushall(ctx.shared, ctx.client.in_exec);
    let old = ctx.engine().flush(&ctx.cx, None);
    free_tables(old, lazy);
    crate::snapshots::after_flushall(ctx.shared, &ctx.cx, ctx.client.in_exec);
    ctx.ok()
}

/// Redis `getFlushCommandFlags`: one optional ASYNC or SYNC; with neither,
/// `lazyfree-lazy-user-flush` decides. True means free in the background.
fn flush_mode(ctx: &Ctx) -> Result<bool, CmdError> {
    match ctx.argc() {
        1 => Ok(ctx.shared.config.read().lazyfree_lazy_user_flush),
        2 if args::is(ctx.arg(1), "sync") => Ok(false),
        2 if args::is(ctx.arg(1), "async") => Ok(true),
        _ => Err(CmdError::Syntax),
    }
}

/// Frees flushed tables: on the lazyfree thread for ASYNC, else here (after
/// the flush released its locks).
fn free_tables(old: Vec<cairn_engine::table::Table>, lazy: bool) {
    if lazy && old.iter().any(|t| !t.is_empty()) {
        free_in_background(Box::new(old));
    }
}

/// SWAPDB index1 index2 → +OK. Each index must be an int (else "invalid
/// first/second DB index"), then both in range.
fn swapdb(ctx: &mut Ctx) -> CmdResult {
    // Cluster mode has database 0 only.
    if ctx.shared.cluster.enabled() {
        return Err(CmdError::text(errors::SWAPDB_IN_CLUSTER));
    }
    let a = int32(ctx.arg(1)).map_err(|_| CmdError::text(errors::SWAPDB_FIRST_INVALID))?;
    let b = int32(ctx.arg(2)).map_err(|_| CmdError::text(errors::SWAPDB_SECOND_INVALID))?;
    let n = ctx.engine().databases();
    let (Some(a), Some(b)) = (
        usize::try_from(a).ok().filter(|&d| d < n),
        usize::try_from(b).ok().filter(|&d| d < n),
    ) else {
        return Err(EngineError::DbIndexOutOfRange.into());
    };
    if a != b {
        ctx.engine().swap_dbs(&ctx.cx, a, b);
    }
    ctx.ok()
}

/// OBJECT's key lookup (`objectCommandLookup`): no access recorded.
fn object_info(ctx: &Ctx) -> Option<op::ObjectInfo> {
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    op::object(&mut e.lock(&ctx.cx, &k), ctx.db(), &k)
}

/// OBJECT ENCODING key → bulk encoding name, or null if missing.
fn object_encoding(ctx: &mut Ctx) -> CmdResult {
    match object_info(ctx) {
        Some(info) => ctx.bulk(info.encoding.as_bytes()),
        None => ctx.null(),
    }
}

/// Redis's refcount of a shared object (`OBJ_SHARED_REFCOUNT`).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// OBJECT REFCOUNT key → integer, or null if missing. Values are never
/// shared in Cairn, but Redis shares the integers 0..9999 unless maxmemory
/// is set with an LRU or LFU policy (`canUseSharedObject`), and clients see
/// that, so the answer follows Redis.
fn object_refcount(ctx: &mut Ctx) -> CmdResult {
    let Some(info) = object_info(ctx) else {
        return ctx.null();
    };
    let shared = info.shared_integer && {
        let c = ctx.shared.config.read();
        c.maxmemory == 0 || !(is_lfu(c.maxmemory_policy) || is_lru(c.maxmemory_policy))
    };
    ctx.int(if shared { SHARED_REFCOUNT } else { 1 })
}

/// OBJECT IDLETIME key → seconds since last access, or null if missing;
/// an error under an LFU policy.
fn object_idletime(ctx: &mut Ctx) -> CmdResult {
    let Some(info) = object_info(ctx) else {
        return ctx.null();
    };
    if is_lfu(ctx.shared.config.read().maxmemory_policy) {
        return Err(CmdError::text(errors::OBJECT_IDLETIME_UNDER_LFU));
    }
    ctx.int(info.idle_secs as i64)
}

/// OBJECT FREQ key → the logarithmic access counter, or null if missing;
/// an error unless an LFU policy is selected.
fn object_freq(ctx: &mut Ctx) -> CmdResult {
    let Some(info) = object_info(ctx) else {
        return ctx.null();
    };
    if !is_lfu(ctx.shared.config.read().maxmemory_policy) {
        return Err(CmdError::text(errors::OBJECT_FREQ_WITHOUT_LFU));
    }
    ctx.int(i64::from(info.freq))
}

fn is_lfu(p: MaxmemoryPolicy) -> bool {
    matches!(
        p,
        MaxmemoryPolicy::VolatileLfu | MaxmemoryPolicy::AllkeysLfu
    )
}

fn is_lru(p: MaxmemoryPolicy) -> bool {
    matches!(
        p,
        MaxmemoryPolicy::VolatileLru | MaxmemoryPolicy::AllkeysLru
    )
}

/// OBJECT HELP → array of status lines (`addReplyHelp`, object.c).
fn object_help(ctx: &mut Ctx) -> CmdResult {
    const LINES: &[&str] = &[
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
    ];
    reply_help(ctx, LINES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_overflow_like_redis() {
        assert_eq!(deadline(5, Unit::Seconds, 1000), Some(6000));
        assert_eq!(deadline(-5, Unit::Millis, 1000), Some(995));
        assert_eq!(deadline(i64::MAX / 1000 + 1, Unit::Seconds, 0), None);
        assert_eq!(deadline(i64::MIN / 1000 - 1, Unit::Seconds, 0), None);
        assert_eq!(
            deadline(i64::MIN / 1000, Unit::Seconds, 0),
            Some(i64::MIN / 1000 * 1000)
        );
        assert_eq!(deadline(i64::MAX, Unit::Millis, 0), Some(i64::MAX));
        assert_eq!(deadline(i64::MAX, Unit::Millis, 1), None);
        assert_eq!(deadline(i64::MIN, Unit::Millis, 1), Some(i64::MIN + 1));
    }
}
