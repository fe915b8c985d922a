//! delete, touch.
use super::stats::Stat;
use super::{expiry, Ctx, DB};
use cairn_engine::ops::memcache as mc;

/// `delete <key> [0] [noreply]` → DELETED or NOT_FOUND. Removes the key
/// whatever its type, as DEL does.
pub fn delete(cx: &mut Ctx, key: &[u8], noreply: bool) {
    let engine = &cx.shared.engine;
    let k = engine.key(key);
    let outcome = {
        let mut g = engine.lock(&cx.ecx, &k);
        mc::delete(&mut g, DB, &k, None, None)
    };
    if outcome == mc::Deleted::Deleted {
        cx.stats.inc(Stat::DeleteHits);
        cx.reply("DELETED", noreply);
    } else {
        cx.stats.inc(Stat::DeleteMisses);
        cx.reply("NOT_FOUND", noreply);
    }
}

/// `touch <key> <exptime> [noreply]` → TOUCHED or NOT_FOUND.
pub fn touch(cx: &mut Ctx, key: &[u8], exptime: i32, noreply: bool) {
    let engine = &cx.shared.engine;
    let k = engine.key(key);
    let hit = {
        let mut g = engine.lock(&cx.ecx, &k);
        let exp = expiry(exptime, g.now);
        mc::touch(&mut g, DB, &k, exp)
    };
    cx.stats.inc(Stat::CmdTouch);
    if hit {
        cx.stats.inc(Stat::TouchHits);
        cx.reply("TOUCHED", noreply);
    } else {
        cx.stats.inc(Stat::TouchMisses);
        cx.reply("NOT_FOUND", noreply);
    }
}
