//! HyperLogLog commands (Redis 7.0 `hyperloglog.c`): PFADD, PFCOUNT,
//! PFMERGE, PFDEBUG and PFSELFTEST. The values are Redis's byte layout
//! (`cairn_engine::ops::hll`), so GET/SET move HyperLogLogs between Cairn
//! and Redis unchanged. Multi-key commands lock all their keys at once.
use super::bitmap::c_str;
use crate::exec::table::Def;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::ops::hll::{self as op, PfDebug, PfDebugReply};
use cairn_engine::{Error, Key};
use smallvec::SmallVec;

pub const COMMANDS: &[Def] = &[
    Def::new("pfadd", pfadd),
    Def::new("pfcount", pfcount),
    Def::new("pfmerge", pfmerge),
    Def::new("pfdebug", pfdebug),
    Def::new("pfselftest", pfselftest),
];

type Keys<'a> = SmallVec<[Key<'a>; 8]>;

/// `hll-sparse-max-bytes`, from the hot copy (no config lock per write).
fn sparse_max_bytes(ctx: &Ctx) -> usize {
    ctx.shared
        .hot
        .hll_sparse_max_bytes
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// PFADD key [element ...] → 1 if the key was created or a register
/// changed, else 0.
fn pfadd(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let max = sparse_max_bytes(ctx);
    let mut g = e.lock(&ctx.cx, &k);
    let changed = op::pfadd(&mut g, ctx.db(), &k, max, ctx.args.iter_from(2))?;
    drop(g);
    ctx.int(changed as i64)
}

/// PFCOUNT key [key ...] → the estimated number of distinct elements (of
/// the union, for several keys).
fn pfcount(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let keys: Keys = ctx.args.iter_from(1).map(|a| e.key(a)).collect();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let n = op::pfcount(&mut g, ctx.db(), &keys)?;
    drop(g);
    ctx.int(n as i64)
}

/// PFMERGE destkey [sourcekey ...] → +OK; destkey holds the union.
fn pfmerge(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let keys: Keys = ctx.args.iter_from(1).map(|a| e.key(a)).collect();
    let max = sparse_max_bytes(ctx);
    let mut g = e.lock_keys(&ctx.cx, &keys);
    op::pfmerge(&mut g, ctx.db(), &keys[0], max, &keys[1..])?;
    drop(g);
    ctx.ok()
}

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: the registers as an array
/// of integers, the sparse opcodes as text, the encoding as a status, or
/// 1/0 for a conversion to dense. The key is checked before the
/// subcommand name, as in Redis.
fn pfdebug(ctx: &mut Ctx) -> CmdResult {
    pfdebug_run(ctx).map_err(|err| match err {
        CmdError::Engine(Error::NoSuchKey) => CmdError::text(errors::PFDEBUG_NO_KEY),
        other => other,
    })
}

/// PFDEBUG itself; `pfdebug` words its missing key.
fn pfdebug_run(ctx: &mut Ctx) -> CmdResult {
    let sub = ctx.arg(1);
    let name = c_str(sub);
    let parsed = [
        ("getreg", PfDebug::GetReg),
        ("decode", PfDebug::Decode),
        ("encoding", PfDebug::Encoding),
        ("todense", PfDebug::ToDense),
    ]
    .into_iter()
    .find(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
    .map(|(_, s)| s);
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let mut g = e.lock(&ctx.cx, &k);
    let reply = op::pfdebug(&mut g, ctx.db(), &k, parsed)?;
    drop(g);
    let mut w = ctx.reply();
    match reply {
        PfDebugReply::Registers(regs) => {
            w.array(regs.len());
            for r in regs {
                w.int(r as i64);
            }
        }
        PfDebugReply::Decoded(text) => w.bulk(text.as_bytes()),
        PfDebugReply::Encoding(enc) => w.simple(enc),
        PfDebugReply::Converted(c) => w.int(c as i64),
        PfDebugReply::Unknown => {
            return Err(errors::pfdebug_unknown(name));
        }
    }
    Ok(())
}

/// PFSELFTEST → +OK, or a TESTFAILED error (see `ops::hll::selftest`).
fn pfselftest(ctx: &mut Ctx) -> CmdResult {
    match op::selftest() {
        Ok(()) => ctx.ok(),
        Err(failure) => Err(errors::hll_selftest(failure)),
    }
}
