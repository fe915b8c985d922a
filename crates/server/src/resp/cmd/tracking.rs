//! CLIENT TRACKING, CACHING, TRACKINGINFO and GETREDIR: client-side
//! caching's commands (Redis 7.0 `networking.c` `clientCommand`), with its
//! error texts and checks in its order. The table and the invalidations
//! are `crate::tracking`'s.
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::{self, CmdError};
use crate::tracking::{self, mode, Options};
use cairn_engine::util::num;
use std::sync::atomic::Ordering;

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP] → +OK.
pub fn tracking(ctx: &mut Ctx) -> CmdResult {
    let mut opts = Options {
        redirect: 0,
        bcast: false,
        optin: false,
        optout: false,
        noloop: false,
        prefixes: Vec::new(),
    };
    let argc = ctx.argc();
    let mut j = 3;
    while j < argc {
        let a = ctx.arg(j);
        let more = j + 1 < argc;
        if a.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if opts.redirect != 0 {
                return Err(CmdError::text(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            let id = num::parse_i64(ctx.arg(j)).ok_or(CmdError::NotInteger)?;
            // Checked now although the client may leave later (Redis: "a
            // valid sanity check"); a later invalidation finds it gone.
            if id == 0 || !ctx.shared.clients.lock().contains_key(&(id as u64)) {
                return Err(CmdError::text(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
            opts.redirect = id as u64;
        } else if a.eq_ignore_ascii_case(b"bcast") {
            opts.bcast = true;
        } else if a.eq_ignore_ascii_case(b"optin") {
            opts.optin = true;
        } else if a.eq_ignore_ascii_case(b"optout") {
            opts.optout = true;
        } else if a.eq_ignore_ascii_case(b"noloop") {
            opts.noloop = true;
        } else if a.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            opts.prefixes.push(ctx.arg(j).into());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let on = ctx.arg(2);
    if on.eq_ignore_ascii_case(b"off") {
        tracking::disable(ctx.shared, ctx.client);
        return ctx.ok();
    }
    if !on.eq_ignore_ascii_case(b"on") {
        return Err(CmdError::Syntax);
    }
    if !opts.bcast && !opts.prefixes.is_empty() {
        return Err(CmdError::text(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    let cur = ctx.client.info.tracking.load(Ordering::Relaxed);
    if cur & mode::ON != 0 && (cur & mode::BCAST != 0) != opts.bcast {
        return Err(CmdError::text(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this \
             client, and then re-enabling it with a different mode.",
        ));
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return Err(CmdError::text(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if opts.optin && opts.optout {
        return Err(CmdError::text(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if (opts.optin && cur & mode::OPTOUT != 0) || (opts.optout && cur & mode::OPTIN != 0) {
        return Err(CmdError::text(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this \
             client, and then re-enabling it with a different mode.",
        ));
    }
    if opts.bcast {
        tracking::check_prefixes(ctx.client, &opts.prefixes)?;
    }
    tracking::enable(ctx.shared, ctx.client, opts);
    ctx.ok()
}

/// CLIENT CACHING YES|NO → +OK: whether the next command's keys are
/// tracked, in OPTIN (YES) or OPTOUT (NO) mode.
pub fn caching(ctx: &mut Ctx) -> CmdResult {
    let m = ctx.client.info.tracking.load(Ordering::Relaxed);
    if m & mode::ON == 0 {
        return Err(CmdError::text(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode \
             with OPTIN or OPTOUT mode enabled",
        ));
    }
    let a = ctx.arg(2);
    if a.eq_ignore_ascii_case(b"yes") {
        if m & mode::OPTIN == 0 {
            return Err(CmdError::text(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if a.eq_ignore_ascii_case(b"no") {
        if m & mode::OPTOUT == 0 {
            return Err(CmdError::text(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::text(errors::SYNTAX));
    }
    ctx.client.tracking.caching = true;
    ctx.ok()
}

/// CLIENT GETREDIR → the redirect id, 0 without one, -1 when not tracking.
pub fn getredir(ctx: &mut Ctx) -> CmdResult {
    let info = &ctx.client.info;
    let n = if info.tracking.load(Ordering::Relaxed) & mode::ON != 0 {
        info.redir.load(Ordering::Relaxed) as i64
    } else {
        -1
    };
    ctx.int(n)
}

/// CLIENT TRACKINGINFO → map (RESP3) or flat array (RESP2) of `flags`
/// (a set), `redirect` and `prefixes`.
pub fn trackinginfo(ctx: &mut Ctx) -> CmdResult {
    let m = ctx.client.info.tracking.load(Ordering::Relaxed);
    let caching = ctx.client.tracking.caching;
    let mut flags: Vec<&[u8]> = Vec::new();
    if m & mode::ON == 0 {
        flags.push(b"off");
    } else {
        flags.push(b"on");
        if m & mode::BCAST != 0 {
            flags.push(b"bcast");
        }
        if m & mode::OPTIN != 0 {
            flags.push(b"optin");
            if caching {
                flags.push(b"caching-yes");
            }
        }
        if m & mode::OPTOUT != 0 {
            flags.push(b"optout");
            if caching {
                flags.push(b"caching-no");
            }
        }
        if m & mode::NOLOOP != 0 {
            flags.push(b"noloop");
        }
        if m & mode::BROKEN_REDIR != 0 {
            flags.push(b"broken_redirect");
        }
    }
    let redirect = if m & mode::ON != 0 {
        ctx.client.info.redir.load(Ordering::Relaxed) as i64
    } else {
        -1
    };
    let prefixes = ctx.client.tracking.prefixes.clone();
    let mut w = ctx.reply();
    w.map(3);
    w.bulk(b"flags");
    w.set(flags.len());
    for f in flags {
        w.bulk(f);
    }
    w.bulk(b"redirect");
    w.int(redirect);
    w.bulk(b"prefixes");
    w.array(prefixes.len());
    for p in &prefixes {
        w.bulk(p);
    }
    Ok(())
}
