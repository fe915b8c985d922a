//! The meta commands: mg, ms, md, ma (and me, mn in `mod.rs`'s dispatch).
//! Return flags are written in request order, each as memcached writes it;
//! flags that change the item (T, N) take effect at their place in that
//! order for the flags after them (a `t` before `T` shows the old TTL),
//! as in memcached, whose reply loop applies them as it goes.
use super::stats::Stat;
use super::{expiry, Ctx, DB};
use cairn_engine::ops::memcache as mc;
use cairn_engine::value::string::{mc_bits, next_cas};
use cairn_engine::{Expiry, Value};
use cairn_protocol::memcache::{base64, push_i64, push_u64, KeyBytes, Meta, MetaCmd};
use std::sync::atomic::Ordering;

pub fn run(cx: &mut Ctx, m: &Meta) {
    match m.cmd {
        MetaCmd::Get => get(cx, m),
        MetaCmd::Set => set(cx, m),
        MetaCmd::Delete => delete(cx, m),
        MetaCmd::Arith => arith(cx, m),
    }
}

/// ` k<key>`, in base64 followed by ` b` for a binary key.
fn put_key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        base64::encode(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

fn put_flag(out: &mut Vec<u8>, flag: u8) {
    out.push(b' ');
    out.push(flag);
}

/// ` t<seconds left>` for an absolute deadline (0: none, -1).
fn put_ttl(out: &mut Vec<u8>, exp_at: u64, now: u64) {
    put_flag(out, b't');
    if exp_at == 0 {
        out.extend_from_slice(b"-1");
    } else {
        push_u64(out, exp_at.saturating_sub(now).div_ceil(1000));
    }
}

/// The deadline an expiry sets (0: none).
fn deadline(e: Expiry) -> u64 {
    match e {
        Expiry::At(at) => at,
        _ => 0,
    }
}

/// The O and k flags, the only ones a miss or a failure returns.
fn put_opaque_and_key(out: &mut Vec<u8>, m: &Meta) {
    for w in m.flags.words() {
        match w[0] {
            b'O' => {
                out.push(b' ');
                out.extend_from_slice(w);
            }
            b'k' => put_key(out, m.key.as_bytes(), m.key.is_binary()),
            _ => {}
        }
    }
}

/// mg <key> <flags>*: `VA <size> <flags>` and the value with `v`, else
/// `HD <flags>`; a miss is `EN` (nothing with `q`).
fn get(cx: &mut Ctx, m: &Meta) {
    let f = &m.flags;
    let engine = &cx.shared.engine;
    let k = engine.key(m.key.as_bytes());
    let lfu = engine.limits.lfu.load(Ordering::Relaxed);
    let bump = !f.no_bump;
    // Asked before locking: making room evicts, which locks other shards.
    let room = f.vivify.is_some() && !cx.over_memory();
    let mut g = engine.lock(&cx.ecx, &k);
    let now = g.now;
    // Vivify: a stub item whose creator wins the right to fill it. Not
    // over another type's key, nor while memory is full (a miss then).
    let mut created = None;
    if let Some(n) = f.vivify {
        if room && g.peek(DB, &k).is_none() {
            let exp = expiry(n, now);
            mc::vivify(&mut g, DB, &k, exp, m.key.is_binary());
            created = Some(deadline(exp));
        }
    }
    let out = &mut *cx.out;
    let mut new_ttl = None;
    let found = g.peek(DB, &k).filter(|e| matches!(e.value, Value::Str(_)));
    let hit = found.is_some();
    if let Some(e) = found {
        let idle = e.idle_secs();
        // What `t` shows; T and N change it from their place on.
        let mut exp_at = if created.is_some() { 0 } else { e.expire_at() };
        if bump {
            e.touch(lfu);
        }
        let item = mc::item(e);
        item.as_mc();
        // A large value goes out by reference, not copied under the lock.
        let shared = if f.value { item.share() } else { None };
        let (data, cas, flags, bits) = item.as_mc();
        let fetched = *bits & mc_bits::FETCHED != 0;
        let token_sent = *bits & mc_bits::TOKEN_SENT != 0;
        let stale = *bits & mc_bits::STALE != 0;
        if f.value {
            out.extend_from_slice(b"VA ");
            push_u64(out, data.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        let mut won = false;
        for w in f.words() {
            match w[0] {
                b'T' => {
                    let exp = expiry(f.ttl.unwrap_or(0), now);
                    exp_at = deadline(exp);
                    new_ttl = Some(exp);
                }
                b'N' => {
                    if let Some(at) = created {
                        exp_at = at;
                        won = true;
                    }
                }
                b'R' => {
                    let before = deadline(expiry(f.recache.unwrap_or(0), now));
                    if !token_sent && created.is_none() && exp_at != 0 && exp_at < before {
                        won = true;
                    }
                }
                b's' => {
                    put_flag(out, b's');
                    push_u64(out, data.len() as u64);
                }
                b't' => put_ttl(out, exp_at, now),
                b'c' => {
                    if *cas == 0 {
                        *cas = next_cas();
                    }
                    put_flag(out, b'c');
                    push_u64(out, *cas);
                }
                b'f' => {
                    put_flag(out, b'f');
                    push_u64(out, *flags as u64);
                }
                b'l' => {
                    put_flag(out, b'l');
                    push_u64(out, idle);
                }
                b'h' => {
                    put_flag(out, b'h');
                    out.push(if fetched { b'1' } else { b'0' });
                }
                b'O' => {
                    out.push(b' ');
                    out.extend_from_slice(w);
                }
                b'k' => put_key(out, m.key.as_bytes(), *bits & mc_bits::KEY_BINARY != 0),
                _ => {}
            }
        }
        // Z before W, so a client never sees both.
        if token_sent {
            out.extend_from_slice(b" Z");
        }
        if stale {
            out.extend_from_slice(b" X");
            if !token_sent {
                won = true;
            }
        }
        if won {
            out.extend_from_slice(b" W");
            *bits |= mc_bits::TOKEN_SENT;
        }
        if bump {
            *bits |= mc_bits::FETCHED;
        }
        out.extend_from_slice(b"\r\n");
        if f.value {
            match shared {
                Some(b) if b.len() >= crate::outref::MIN_REF => {
                    let len = b.len();
                    cx.client.out_refs.push(out, b, 0..len);
                }
                _ => out.extend_from_slice(data),
            }
            out.extend_from_slice(b"\r\n");
        }
    }
    if let Some(exp) = new_ttl {
        mc::touch(&mut g, DB, &k, exp);
    }
    if bump {
        mc::count_read(&mut g, DB, &k, hit);
    }
    drop(g);
    // memcached counts a touch only when T met an item; a miss is a get.
    let (cmds, hits, misses) = if hit && f.ttl.is_some() {
        (Stat::CmdTouch, Stat::TouchHits, Stat::TouchMisses)
    } else {
        (Stat::CmdGet, Stat::GetHits, Stat::GetMisses)
    };
    cx.stats.inc(cmds);
    cx.stats.inc(if hit { hits } else { misses });
    if !hit && !f.quiet {
        cx.out.extend_from_slice(b"EN");
        put_opaque_and_key(cx.out, m);
        cx.out.extend_from_slice(b"\r\n");
    }
}

/// ms <key> <datalen> <flags>*: HD, NS, EX or NF, with the O, k and c
/// flags; `q` hides HD.
fn set(cx: &mut Ctx, m: &Meta) {
    use mc::StoreMode::*;
    cx.stats.inc(Stat::CmdSet);
    let f = &m.flags;
    let mode = match f.mode {
        Some(b'E') => Add,
        Some(b'A') => Append,
        Some(b'P') => Prepend,
        Some(b'R') => Replace,
        // S, or none (the codec refused any other letter).
        _ => Set,
    };
    // A CAS turns set and replace into cas (memcached does the same).
    let mode = if f.compare_cas.is_some() && matches!(mode, Set | Replace) {
        Cas
    } else {
        mode
    };
    if !crate::exec::admission::room_for(cx.shared, &cx.ecx, m.data.len() as u64) {
        super::storage::refused(
            cx,
            cairn_protocol::memcache::Refusal::NoMemory,
            m.key.as_bytes(),
            true,
            false,
        );
        return;
    }
    let engine = &cx.shared.engine;
    let k = engine.key(m.key.as_bytes());
    let max_len = cx.max_value();
    let outcome = {
        let mut g = engine.lock(&cx.ecx, &k);
        let req = mc::Store {
            mode,
            data: m.data,
            shared: m.shared,
            flags: f.client_flags,
            expiry: expiry(f.ttl.unwrap_or(0), g.now),
            cas: f.compare_cas.unwrap_or(0),
            invalidate: f.invalidate && mode == Cas,
            want_cas: f.has(b'c'),
            key_binary: m.key.is_binary(),
            max_len,
        };
        mc::store(&mut g, DB, &k, &req)
    };
    super::storage::count(cx, mode == Cas, outcome);
    let (code, cas) = match outcome {
        mc::Stored::Stored(cas) => ("HD", cas),
        // An append past the limit is not stored, as in memcached.
        mc::Stored::NotStored | mc::Stored::TooLarge => ("NS", 0),
        mc::Stored::Exists => ("EX", 0),
        mc::Stored::NotFound => ("NF", 0),
    };
    if code == "HD" && f.quiet {
        return;
    }
    let out = &mut *cx.out;
    out.extend_from_slice(code.as_bytes());
    for w in f.words() {
        match w[0] {
            b'O' => {
                out.push(b' ');
                out.extend_from_slice(w);
            }
            b'k' => put_key(out, m.key.as_bytes(), m.key.is_binary()),
            b'c' => {
                put_flag(out, b'c');
                push_u64(out, cas);
            }
            _ => {}
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// md <key> <flags>*: HD, NF or EX with the O and k flags; `q` hides HD.
/// `I` marks the item stale with a new CAS (and `T` a new TTL) instead of
/// removing it.
fn delete(cx: &mut Ctx, m: &Meta) {
    let f = &m.flags;
    let engine = &cx.shared.engine;
    let k = engine.key(m.key.as_bytes());
    let outcome = {
        let mut g = engine.lock(&cx.ecx, &k);
        let now = g.now;
        let invalidate = f
            .invalidate
            .then(|| f.ttl.map_or(Expiry::Keep, |t| expiry(t, now)));
        mc::delete(&mut g, DB, &k, f.compare_cas, invalidate)
    };
    let code = match outcome {
        mc::Deleted::Deleted => {
            cx.stats.inc(Stat::DeleteHits);
            "HD"
        }
        mc::Deleted::Invalidated => "HD",
        mc::Deleted::NotFound => {
            cx.stats.inc(Stat::DeleteMisses);
            "NF"
        }
        mc::Deleted::Exists => {
            cx.stats.inc(Stat::DeleteMisses);
            "EX"
        }
    };
    if code == "HD" && f.quiet {
        return;
    }
    cx.out.extend_from_slice(code.as_bytes());
    put_opaque_and_key(cx.out, m);
    cx.out.extend_from_slice(b"\r\n");
}

/// ma <key> <flags>*: HD (or `VA <len>` and the number with `v`), NF, NS,
/// EX, with the O, k, c and t flags; `q` hides a successful change.
fn arith(cx: &mut Ctx, m: &Meta) {
    if cx.over_memory() {
        cx.line(super::errors::OUT_OF_MEMORY);
        return;
    }
    let f = &m.flags;
    let incr = !matches!(f.mode, Some(b'D' | b'-'));
    let engine = &cx.shared.engine;
    let k = engine.key(m.key.as_bytes());
    let mut g = engine.lock(&cx.ecx, &k);
    let now = g.now;
    let vivify = f.vivify.map(|n| (expiry(n, now), f.initial));
    let outcome = mc::arith(
        &mut g,
        DB,
        &k,
        incr,
        f.delta,
        f.compare_cas.unwrap_or(0),
        vivify,
    );
    super::arith::count(cx, incr, outcome);
    let out = &mut *cx.out;
    let (n, created) = match outcome {
        mc::Arith::Value(n) => (n, false),
        mc::Arith::Created(n) => (n, true),
        mc::Arith::NotFound | mc::Arith::Exists => {
            drop(g);
            let code = if outcome == mc::Arith::NotFound {
                "NF"
            } else {
                "EX"
            };
            out.extend_from_slice(code.as_bytes());
            put_opaque_and_key(out, m);
            out.extend_from_slice(b"\r\n");
            return;
        }
        mc::Arith::NonNumeric => {
            drop(g);
            cx.line(super::errors::NON_NUMERIC);
            return;
        }
    };
    let mut new_ttl = None;
    let start = out.len();
    let text = itoa::Buffer::new().format(n).as_bytes().to_vec();
    if let Some(e) = g.peek(DB, &k) {
        let mut exp_at = if created { 0 } else { e.expire_at() };
        let s = mc::item(e);
        if f.value {
            out.extend_from_slice(b"VA ");
            push_u64(out, text.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        for w in f.words() {
            match w[0] {
                b'c' => {
                    put_flag(out, b'c');
                    push_u64(out, s.cas());
                }
                b't' => put_ttl(out, exp_at, now),
                b'T' => {
                    let exp = expiry(f.ttl.unwrap_or(0), now);
                    exp_at = deadline(exp);
                    new_ttl = Some(exp);
                }
                b'N' if created => {
                    exp_at = deadline(expiry(f.vivify.unwrap_or(0), now));
                }
                b'O' => {
                    out.push(b' ');
                    out.extend_from_slice(w);
                }
                b'k' => put_key(out, m.key.as_bytes(), m.key.is_binary()),
                _ => {}
            }
        }
        if f.value {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&text);
        }
        out.extend_from_slice(b"\r\n");
    }
    if let Some(exp) = new_ttl {
        mc::touch(&mut g, DB, &k, exp);
    }
    // memcached hides a change with q, but not an item it created.
    if f.quiet && !created {
        out.truncate(start);
    }
}

/// me <key> [b]: `ME <key> exp=.. la=.. cas=.. fetch=.. cls=.. size=..`,
/// or EN. `exp` is memcached's (now minus the expiry time: minus the
/// seconds left), `cls` is 1 (Cairn has no slab classes) and `size` the
/// entry's approximate heap bytes.
pub fn debug(cx: &mut Ctx, key: &KeyBytes) {
    cx.stats.inc(Stat::CmdMeta);
    let engine = &cx.shared.engine;
    let k = engine.key(key.as_bytes());
    let mut g = engine.lock(&cx.ecx, &k);
    let now = g.now;
    let out = &mut *cx.out;
    let Some(e) = g.peek(DB, &k).filter(|e| matches!(e.value, Value::Str(_))) else {
        out.extend_from_slice(b"EN\r\n");
        return;
    };
    let exp = match mc::ttl_secs(e, now) {
        -1 => -1,
        left => -left,
    };
    let idle = e.idle_secs();
    let size = e.mem_bytes();
    let s = mc::item(e);
    let cas = s.cas();
    let bits = s.mc_bits();
    out.extend_from_slice(b"ME ");
    if bits & mc_bits::KEY_BINARY != 0 {
        base64::encode(key.as_bytes(), out);
    } else {
        out.extend_from_slice(key.as_bytes());
    }
    out.extend_from_slice(b" exp=");
    push_i64(out, exp);
    out.extend_from_slice(b" la=");
    push_u64(out, idle);
    out.extend_from_slice(b" cas=");
    push_u64(out, cas);
    out.extend_from_slice(if bits & mc_bits::FETCHED != 0 {
        b" fetch=yes"
    } else {
        b" fetch=no"
    });
    out.extend_from_slice(b" cls=1 size=");
    push_u64(out, size as u64);
    out.extend_from_slice(b"\r\n");
}
