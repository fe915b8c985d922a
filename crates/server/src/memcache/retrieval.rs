//! get, gets, gat, gats (and memcached's old alias bget).
use super::stats::Stat;
use super::{expiry, Ctx, DB};
use cairn_engine::ops::memcache as mc;
use cairn_engine::value::string::mc_bits;
use cairn_protocol::memcache::{key_ok, value_line, Keys};

/// Each key in turn, each under its own shard lock (memcached's multi-get
/// is not atomic across keys either). A hit is one `VALUE` block, a miss
/// nothing; `END` closes the reply. A bad key replaces everything written
/// for this command with the error, as memcached does (the keys before it
/// were still looked up, and gat still touched them).
pub fn get(cx: &mut Ctx, want_cas: bool, touch: Option<i32>, keys: Keys) {
    let start = cx.out.len();
    let engine = &cx.shared.engine;
    for key in keys {
        if !key_ok(key) {
            cx.out.truncate(start);
            cx.client.out_refs.truncate(start);
            cx.line(super::errors::BAD_FORMAT);
            return;
        }
        let k = engine.key(key);
        let mut g = engine.lock(&cx.ecx, &k);
        let found = mc::lookup(&mut g, DB, &k, true);
        match found {
            Some(e) => {
                let item = mc::item(e);
                let (data, cas, flags, bits) = item.as_mc();
                *bits |= mc_bits::FETCHED;
                let cas = want_cas.then(|| {
                    if *cas == 0 {
                        *cas = cairn_engine::value::string::next_cas();
                    }
                    *cas
                });
                value_line(cx.out, key, *flags, data.len(), cas);
                // A large value goes out by reference: no copy under the
                // lock (`crate::outref`).
                match item.share() {
                    Some(b) if b.len() >= crate::outref::MIN_REF => {
                        let len = b.len();
                        cx.client.out_refs.push(cx.out, b, 0..len);
                    }
                    _ => item.with_bytes(|d| cx.out.extend_from_slice(d)),
                }
                cx.out.extend_from_slice(b"\r\n");
                if let Some(t) = touch {
                    // After the reply is built: even an exptime that
                    // expires the item returns it this once (memcached).
                    let exp = expiry(t, g.now);
                    mc::touch(&mut g, DB, &k, exp);
                    cx.stats.inc(Stat::CmdTouch);
                    cx.stats.inc(Stat::TouchHits);
                } else {
                    cx.stats.inc(Stat::CmdGet);
                    cx.stats.inc(Stat::GetHits);
                }
            }
            None => {
                if touch.is_some() {
                    cx.stats.inc(Stat::CmdTouch);
                    cx.stats.inc(Stat::TouchMisses);
                } else {
                    cx.stats.inc(Stat::CmdGet);
                    cx.stats.inc(Stat::GetMisses);
                }
            }
        }
    }
    cx.out.extend_from_slice(b"END\r\n");
}
