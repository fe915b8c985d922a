//! set, add, replace, append, prepend, cas; and storage commands refused
//! before their data (too large, or memory full).
use super::stats::Stat;
use super::{expiry, Ctx, DB};
use cairn_engine::ops::memcache as mc;
use cairn_protocol::memcache::{Refusal, Store, StoreMode};

/// The engine's mode for the codec's.
pub fn mode(m: StoreMode) -> mc::StoreMode {
    match m {
        StoreMode::Set => mc::StoreMode::Set,
        StoreMode::Add => mc::StoreMode::Add,
        StoreMode::Replace => mc::StoreMode::Replace,
        StoreMode::Append => mc::StoreMode::Append,
        StoreMode::Prepend => mc::StoreMode::Prepend,
        StoreMode::Cas => mc::StoreMode::Cas,
    }
}

/// A text storage command whose data block arrived whole.
pub fn store(cx: &mut Ctx, s: &Store) {
    cx.stats.inc(Stat::CmdSet);
    // The value's bytes must fit under maxmemory (evicting first if the
    // policy allows), as for a RESP write.
    if !crate::exec::admission::room_for(cx.shared, &cx.ecx, s.data.len() as u64) {
        refused(
            cx,
            Refusal::NoMemory,
            s.key,
            s.mode == StoreMode::Set,
            s.noreply,
        );
        return;
    }
    let engine = &cx.shared.engine;
    let k = engine.key(s.key);
    let max_len = cx.max_value();
    let outcome = {
        let mut g = engine.lock(&cx.ecx, &k);
        let req = mc::Store {
            mode: mode(s.mode),
            data: s.data,
            shared: s.shared,
            flags: s.flags,
            expiry: expiry(s.exptime, g.now),
            cas: s.cas,
            invalidate: false,
            want_cas: false,
            key_binary: false,
            max_len,
        };
        mc::store(&mut g, DB, &k, &req)
    };
    count(cx, s.mode == StoreMode::Cas, outcome);
    let line = match outcome {
        mc::Stored::Stored(_) => "STORED",
        // memcached cannot allocate the combined item: not stored.
        mc::Stored::NotStored | mc::Stored::TooLarge => "NOT_STORED",
        mc::Stored::Exists => "EXISTS",
        mc::Stored::NotFound => "NOT_FOUND",
    };
    cx.reply(line, s.noreply);
}

/// Statistics of a storage outcome (shared with `ms`).
pub fn count(cx: &Ctx, cas_mode: bool, outcome: mc::Stored) {
    match outcome {
        mc::Stored::Stored(_) => {
            cx.stats.inc(Stat::TotalItems);
            if cas_mode {
                cx.stats.inc(Stat::CasHits);
            }
        }
        mc::Stored::Exists if cas_mode => cx.stats.inc(Stat::CasBadval),
        mc::Stored::NotFound if cas_mode => cx.stats.inc(Stat::CasMisses),
        _ => {}
    }
}

/// A storage command refused before its data: memcached's allocation
/// failure. A failed `set` (any `ms`) also removes the key, so a client
/// never reads the value it just tried to replace.
pub fn refused(cx: &mut Ctx, why: Refusal, key: &[u8], deletes: bool, noreply: bool) {
    cx.stats.inc(match why {
        Refusal::TooLarge => Stat::StoreTooLarge,
        Refusal::NoMemory => Stat::StoreNoMemory,
    });
    if deletes {
        let engine = &cx.shared.engine;
        let k = engine.key(key);
        cairn_engine::rewrite::del(engine, &cx.ecx, DB, key);
        let mut g = engine.lock(&cx.ecx, &k);
        if g.remove(DB, &k).is_some() {
            g.notify(cairn_engine::events::class::GENERIC, "del", DB, &k);
        }
    }
    cx.reply(why.message(), noreply);
}
