//! flush_all, verbosity, and memcached's ASCII authentication.
use super::stats::{McStats, Stat};
use super::{Ctx, DB};
use crate::client::Client;
use crate::shared::Shared;
use std::sync::atomic::Ordering;

/// memcached's `MAX_VERBOSITY_LEVEL`.
const MAX_VERBOSITY: u32 = 2;

/// `flush_all [delay] [noreply]` → OK. Empties database 0 (memcached's
/// keyspace) now, or after a delay given like an exptime (relative
/// seconds, or a Unix time past 30 days). memcached's clock ticks in
/// seconds and it starts hiding items at the start of the second before
/// the one the delay names (so `flush_all 1` acts at once); Cairn flushes
/// at that same moment, removing the keys that exist then. A later
/// flush_all replaces a pending one, as memcached's single `oldest_live`.
pub fn flush_all(cx: &mut Ctx, delay: i32, noreply: bool) {
    cx.stats.inc(Stat::CmdFlush);
    let mc = &cx.shared.memcache;
    let now = cairn_engine::clock::now_ms();
    let at = match super::expiry(delay.max(0), now) {
        cairn_engine::Expiry::At(at) => (at / 1000).saturating_sub(1) * 1000,
        _ => 0,
    };
    if at > now {
        mc.flush_at.store(at, Ordering::Relaxed);
    } else {
        mc.flush_at.store(0, Ordering::Relaxed);
        cairn_engine::rewrite::flushdb(&cx.shared.engine, &cx.ecx, DB);
        drop(cx.shared.engine.flush(&cx.ecx, Some(DB)));
    }
    cx.reply("OK", noreply);
}

/// `verbosity <level> [noreply]` → OK. Kept for `stats settings`; Cairn's
/// log level is its `loglevel` setting.
pub fn verbosity(cx: &mut Ctx, level: u32, noreply: bool) {
    cx.shared
        .memcache
        .verbosity
        .store(level.min(MAX_VERBOSITY), Ordering::Relaxed);
    cx.reply("OK", noreply);
}

/// memcached's ASCII authentication (`-Y`), required while the default
/// user has a password: any ACL user with one of its passwords, as RESP's
/// AUTH. STORED on success; otherwise the connection stays unauthenticated.
pub fn authenticate(
    shared: &Shared,
    client: &mut Client,
    stats: &McStats,
    user: &[u8],
    pass: &[u8],
    out: &mut Vec<u8>,
) {
    stats.inc(Stat::AuthCmds);
    if let Some(u) = crate::auth::authenticate(shared, user, pass) {
        crate::resp::cmd::connection::set_user(shared, client, u);
        client.authenticated = true;
        out.extend_from_slice(b"STORED\r\n");
    } else {
        stats.inc(Stat::AuthErrors);
        out.extend_from_slice(super::errors::AUTH_FAILURE.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}
