//! incr, decr.
use super::errors;
use super::stats::Stat;
use super::{Ctx, DB};
use cairn_engine::ops::memcache as mc;

/// `incr|decr <key> <delta> [noreply]` → the new value, NOT_FOUND, or
/// memcached's non-numeric error. Refused while memory is over maxmemory,
/// like Redis's INCRBY.
pub fn incr_decr(cx: &mut Ctx, incr: bool, key: &[u8], delta: u64, noreply: bool) {
    if cx.over_memory() {
        cx.reply(errors::OUT_OF_MEMORY, noreply);
        return;
    }
    let engine = &cx.shared.engine;
    let k = engine.key(key);
    let outcome = {
        let mut g = engine.lock(&cx.ecx, &k);
        mc::arith(&mut g, DB, &k, incr, delta, 0, None)
    };
    count(cx, incr, outcome);
    match outcome {
        mc::Arith::Value(n) | mc::Arith::Created(n) => {
            let n = itoa::Buffer::new().format(n).to_owned();
            cx.reply(&n, noreply);
        }
        mc::Arith::NotFound => cx.reply("NOT_FOUND", noreply),
        mc::Arith::NonNumeric => cx.reply(errors::NON_NUMERIC, noreply),
        // No CAS is compared here.
        mc::Arith::Exists => cx.reply("EXISTS", noreply),
    }
}

/// Statistics of an incr/decr outcome (shared with `ma`).
pub fn count(cx: &Ctx, incr: bool, outcome: mc::Arith) {
    let (hits, misses) = if incr {
        (Stat::IncrHits, Stat::IncrMisses)
    } else {
        (Stat::DecrHits, Stat::DecrMisses)
    };
    match outcome {
        mc::Arith::Value(_) => cx.stats.inc(hits),
        mc::Arith::NotFound => cx.stats.inc(misses),
        _ => {}
    }
}
