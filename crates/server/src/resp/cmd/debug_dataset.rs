//! DEBUG's dataset subcommands: DIGEST, DIGEST-VALUE, RELOAD and POPULATE
//! (Redis 7.0 debug.c). The digest is the engine's
//! (`cairn_engine::ops::digest`, Redis's algorithm, so the same data gives
//! the same digits as redis-server); the reload is
//! `crate::snapshots::reload`. The DEBUG dispatcher, its permission check
//! and its other subcommands are in `server.rs`.
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use crate::snapshots::ReloadError;
use cairn_engine::record;
use cairn_engine::util::num;
use cairn_engine::value::StrValue;
use cairn_engine::{Expiry, Value};

fn hex(d: &[u8; 20]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// DEBUG DIGEST → status of 40 hex digits: the whole dataset's digest,
/// all zeros when every database is empty.
pub fn digest(ctx: &mut Ctx) -> CmdResult {
    let d = ctx.engine().digest(&ctx.cx);
    ctx.reply().simple(&hex(&d));
    Ok(())
}

/// DEBUG DIGEST-VALUE [key ...] → array of statuses, each the digest of
/// one key's value (zeros for a missing key), in the client's database.
pub fn digest_value(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.client.db;
    let digests: Vec<String> = ctx
        .args
        .iter_from(2)
        .map(|k| hex(&ctx.engine().digest_value(&ctx.cx, db, k)))
        .collect();
    let mut w = ctx.reply();
    w.array(digests.len());
    for d in digests {
        w.simple(&d);
    }
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE] → +OK once the snapshot was
/// saved (not with NOSAVE), the databases emptied (not with NOFLUSH) and
/// the snapshot loaded back (MERGE: its keys replace those present).
pub fn reload(ctx: &mut Ctx) -> CmdResult {
    let (mut save, mut flush, mut merge) = (true, true, false);
    for opt in ctx.args.iter_from(2) {
        if args::is(opt, "merge") {
            merge = true;
        } else if args::is(opt, "noflush") {
            flush = false;
        } else if args::is(opt, "nosave") {
            save = false;
        } else {
            return Err(CmdError::text(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    match crate::snapshots::reload(ctx.shared, &ctx.cx, save, flush, merge) {
        Ok(()) => ctx.ok(),
        // Redis answers a failed save with its shared bare "-ERR".
        Err(ReloadError::Save) => Err(CmdError::text("ERR")),
        Err(ReloadError::Load) => Err(CmdError::text(
            "ERR Error trying to load the RDB dump, check server logs.",
        )),
    }
}

/// Redis formats POPULATE's key names and values into a 128-byte buffer
/// (`snprintf`), so a longer name is cut to 127 bytes.
const POPULATE_BUF: usize = 127;

/// DEBUG POPULATE count [prefix] [size] → +OK once `count` string keys
/// `prefix:0` .. `prefix:count-1` (prefix `key`) exist in the client's
/// database, each holding `value:<n>` (with `size`: cut or zero-padded to
/// `size` bytes). Keys already present keep their values. As in Redis the
/// keys are not propagated: neither replicas nor the journal see them (a
/// snapshot does). Sentinel's tests fill a master with it before a reboot.
pub fn populate(ctx: &mut Ctx) -> CmdResult {
    // `getPositiveLongFromObjectOrReply`: one message for "not a number"
    // and "negative".
    let positive = |arg: &[u8]| {
        num::parse_i64(arg)
            .filter(|n| *n >= 0)
            .ok_or_else(|| CmdError::text("ERR value is out of range, must be positive"))
    };
    let count = positive(ctx.arg(2))?;
    let size = if ctx.argc() == 5 {
        positive(ctx.arg(4))? as usize
    } else {
        0
    };
    // `%s` stops at a NUL byte.
    let prefix: &[u8] = if ctx.argc() >= 4 {
        let p = ctx.arg(3);
        &p[..p.iter().position(|&b| b == 0).unwrap_or(p.len())]
    } else {
        b"key"
    };
    let (e, db) = (ctx.engine(), ctx.client.db);
    let mut name = Vec::with_capacity(POPULATE_BUF);
    for n in 0..count {
        name.clear();
        name.extend_from_slice(prefix);
        name.extend_from_slice(format!(":{n}").as_bytes());
        name.truncate(POPULATE_BUF);
        let k = e.key(&name);
        let mut g = e.lock(&ctx.cx, &k);
        if g.exists(db, &k) {
            continue;
        }
        let text = format!("value:{n}");
        let mut value = text.into_bytes();
        if size != 0 {
            value.resize(size, 0);
        }
        // An empty record in place of the command: Redis's dbAdd here
        // propagates nothing. (It counts no change either; the guard
        // does: tests/diff/DIFFERENCES.md.)
        record::stage_all(e, &ctx.cx, db, &[]);
        drop(g.set(
            db,
            &k,
            Value::Str(StrValue::from_bytes(&value)),
            Expiry::Clear,
        ));
    }
    ctx.ok()
}
