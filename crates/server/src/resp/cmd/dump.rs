//! DUMP, RESTORE, RESTORE-ASKING and MIGRATE (Redis 7.0 `cluster.c`).
//! Arguments are parsed and errors raised in Redis's order; the payload is
//! `cairn_persist::rdb::object`'s (RDB version 10 object + CRC-64 footer,
//! byte for byte as Redis writes it), the keyspace work is
//! `cairn_engine::ops::dump`, and MIGRATE's connections are
//! `crate::net::migrate`'s.
//!
//! MIGRATE holds its keys' shards for the whole exchange with the target,
//! so it is atomic as in Redis, and blocks its worker for the round trips
//! as Redis blocks its main thread (bounded by its timeout); commands on
//! other shards go on meanwhile.
use crate::exec::table::Def;
use crate::net::migrate;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::{self, CmdError};
use cairn_engine::ops::dump::{self as op, Access, Restored};
use cairn_engine::rewrite;
use cairn_engine::Key;
use cairn_persist::rdb::object::{self, RestoreError};
use cairn_persist::snapshot::format::BuildLimits;
use std::time::Duration;

pub const COMMANDS: &[Def] = &[
    Def::new("dump", dump),
    Def::new("restore", restore),
    Def::new("restore-asking", restore),
    Def::new("migrate", migrate),
];

/// DUMP key → the serialized value, or nil for a missing key.
fn dump(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let payload = op::lookup(&mut g, ctx.db(), &k).map(object::dump);
    drop(g);
    match payload {
        Some(p) => ctx.bulk(&p),
        None => ctx.null(),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f] → OK.
/// RESTORE-ASKING: the same outside a cluster.
fn restore(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < argc {
        let a = ctx.arg(j);
        let more = argc - j - 1;
        if args::is(a, "replace") {
            replace = true;
        } else if args::is(a, "absttl") {
            absttl = true;
        } else if args::is(a, "idletime") && more >= 1 && freq.is_none() {
            let v = args::int(ctx.arg(j + 1))?;
            if v < 0 {
                return Err(CmdError::text(errors::RESTORE_IDLETIME_NEGATIVE));
            }
            idle = Some(v);
            j += 1;
        } else if args::is(a, "freq") && more >= 1 && idle.is_none() {
            let v = args::int(ctx.arg(j + 1))?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::text(errors::RESTORE_FREQ_RANGE));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let e = ctx.engine();
    // Decoded before locking, reported in Redis's order below.
    let value = object::restore(ctx.arg(3), &BuildLimits::of(e));
    let (db, now) = (ctx.db(), ctx.now_ms());
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    if !replace && op::exists(&mut g, db, &k) {
        return Err(CmdError::text(errors::BUSYKEY));
    }
    let ttl = args::int(ctx.arg(2))?;
    if ttl < 0 {
        return Err(CmdError::text(errors::RESTORE_TTL_NEGATIVE));
    }
    let value = value.map_err(|e| {
        CmdError::text(match e {
            RestoreError::Footer => errors::DUMP_PAYLOAD,
            RestoreError::Format => errors::BAD_DATA_FORMAT,
        })
    })?;
    let expire_at = match ttl {
        0 => 0,
        t if absttl => t as u64,
        t => now.saturating_add(t as u64),
    };
    let access = match (idle, freq) {
        (Some(s), _) => Access::Idle(s as u64),
        (_, Some(f)) => Access::Freq(f as u8),
        _ => Access::Fresh,
    };
    let mut old = None;
    let done = op::restore(
        &mut g,
        db,
        &k,
        value,
        expire_at,
        replace,
        access,
        now,
        |o| old = Some(o),
    );
    match done {
        Restored::Created if ttl != 0 && !absttl => {
            let argv: Vec<&[u8]> = ctx.args.iter_from(0).collect();
            rewrite::restore_absttl(e, &ctx.cx, db, &argv, expire_at);
        }
        Restored::AlreadyExpired { replaced: true } => rewrite::del(e, &ctx.cx, db, k.bytes),
        _ => {}
    }
    drop(g);
    drop(old);
    ctx.ok()
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password] [AUTH2 username password] [KEYS key [key ...]]
/// → OK, NOKEY when no key exists, or an IOERR / the target's error.
fn migrate(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<&[u8]>, &[u8])> = None;
    let (mut first_key, mut num_keys) = (3, 1);
    let mut j = 6;
    while j < argc {
        let a = ctx.arg(j);
        let more = argc - j - 1;
        if args::is(a, "copy") {
            copy = true;
        } else if args::is(a, "replace") {
            replace = true;
        } else if args::is(a, "auth") {
            if more < 1 {
                return Err(CmdError::Syntax);
            }
            auth = Some((None, ctx.arg(j + 1)));
            // Shown as "(redacted)" in SLOWLOG and MONITOR, as Redis does.
            ctx.client.redact_arg(j + 1);
            j += 1;
        } else if args::is(a, "auth2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some((Some(ctx.arg(j + 1)), ctx.arg(j + 2)));
            ctx.client.redact_arg(j + 1);
            ctx.client.redact_arg(j + 2);
            j += 2;
        } else if args::is(a, "keys") {
            if !ctx.arg(3).is_empty() {
                return Err(CmdError::text(errors::MIGRATE_KEYS_WITH_KEY));
            }
            first_key = j + 1;
            num_keys = argc - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout_ms = args::int(ctx.arg(5))?;
    let target_db = args::int(ctx.arg(4))?;
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });

    let e = ctx.engine();
    let (db, now) = (ctx.db(), ctx.now_ms());
    let keys: Vec<Key> = (first_key..first_key + num_keys)
        .map(|i| e.key(ctx.arg(i)))
        .collect();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    // The keys that exist, and the RESTORE of each.
    let mut found: Vec<Key> = Vec::new();
    let mut restores = Vec::new();
    let name: &[u8] = b"RESTORE";
    for k in &keys {
        let Some(r) = op::lookup(&mut g, db, k) else {
            continue;
        };
        let ttl = match r.expire_at() {
            0 => 0,
            at => at.saturating_sub(now).max(1),
        };
        let payload = object::dump(r);
        let mut ttl_buf = itoa::Buffer::new();
        let mut cmd: Vec<&[u8]> = vec![name, k.bytes, ttl_buf.format(ttl).as_bytes(), &payload];
        if replace {
            cmd.push(b"REPLACE");
        }
        migrate::put_command(&mut restores, &cmd);
        found.push(*k);
    }
    if found.is_empty() {
        drop(g);
        ctx.reply().simple("NOKEY");
        return Ok(());
    }
    let replies = exchange(
        ctx.arg(1),
        ctx.arg(2),
        timeout,
        auth,
        target_db,
        &restores,
        found.len(),
    );
    let replies = match replies {
        Ok(r) => r,
        Err(fail) => {
            drop(g);
            return Err(CmdError::text(fail));
        }
    };
    // The first error the target gave (AUTH's or SELECT's stands for every
    // key), and the keys it took.
    let preamble_err = [&replies.auth, &replies.select]
        .into_iter()
        .flatten()
        .find(|l| l.first() == Some(&b'-'))
        .cloned();
    let mut first_err = None;
    let mut taken: Vec<Key> = Vec::new();
    for (k, line) in found.iter().zip(&replies.keys) {
        let err = preamble_err
            .as_ref()
            .or((line.first() == Some(&b'-')).then_some(line));
        match err {
            Some(l) => {
                first_err.get_or_insert_with(|| String::from_utf8_lossy(&l[1..]).into_owned());
            }
            None if !copy => taken.push(*k),
            None => {}
        }
    }
    let removed = op::remove_migrated(&mut g, db, &taken);
    if !taken.is_empty() {
        let names: Vec<&[u8]> = taken.iter().map(|k| k.bytes).collect();
        rewrite::del_keys(e, &ctx.cx, db, &names);
    }
    drop(g);
    drop(removed);
    if let Some(err) = first_err {
        return Err(errors::migrate_target_error(&err));
    }
    if replies.socket_error {
        return Err(CmdError::text(errors::MIGRATE_READ));
    }
    ctx.ok()
}

/// What the target answered: the AUTH and SELECT lines when sent, and one
/// line per RESTORE up to the first socket error.
struct Replies {
    auth: Option<Vec<u8>>,
    select: Option<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    socket_error: bool,
}

/// Sends AUTH, SELECT (unless the cached connection has `db` selected)
/// and the RESTOREs in one write and reads the replies, as
/// `migrateCommand` does, retrying once on a fresh connection after a
/// socket error that is not a timeout, before any RESTORE was answered.
/// Err is the reply text of an I/O failure.
fn exchange(
    host: &[u8],
    port: &[u8],
    timeout: Duration,
    auth: Option<(Option<&[u8]>, &[u8])>,
    db: i64,
    restores: &[u8],
    count: usize,
) -> Result<Replies, &'static str> {
    let mut may_retry = true;
    loop {
        let mut t = match migrate::take(host, port, timeout) {
            Ok(t) => t,
            Err(migrate::TakeError::Resolve) => return Err(errors::MIGRATE_CONNECT),
            Err(migrate::TakeError::Connect(e)) => {
                if may_retry && !migrate::is_timeout(&e) {
                    may_retry = false;
                    continue;
                }
                return Err(errors::MIGRATE_WRITE);
            }
        };
        let select = t.last_db != Some(db);
        let mut buf = Vec::with_capacity(restores.len() + 64);
        match auth {
            Some((Some(user), pw)) => migrate::put_command(&mut buf, &[b"AUTH", user, pw]),
            Some((None, pw)) => migrate::put_command(&mut buf, &[b"AUTH", pw]),
            None => {}
        }
        if select {
            let mut n = itoa::Buffer::new();
            migrate::put_command(&mut buf, &[b"SELECT", n.format(db).as_bytes()]);
        }
        buf.extend_from_slice(restores);
        // Dropping `t` on a failure closes the connection (Redis's
        // `migrateCloseSocket`).
        if let Err(e) = t.send(&buf, timeout) {
            if may_retry && !migrate::is_timeout(&e) {
                may_retry = false;
                continue;
            }
            return Err(errors::MIGRATE_WRITE);
        }
        let mut head = [None, None];
        let mut failed = None;
        for (slot, wanted) in head.iter_mut().zip([auth.is_some(), select]) {
            if wanted {
                match t.read_line(timeout) {
                    Ok(l) => *slot = Some(l),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
        }
        if let Some(e) = failed {
            if may_retry && !migrate::is_timeout(&e) {
                may_retry = false;
                continue;
            }
            return Err(errors::MIGRATE_READ);
        }
        let [auth_line, select_line] = head;
        let mut keys = Vec::with_capacity(count);
        let mut sock_err = None;
        for _ in 0..count {
            match t.read_line(timeout) {
                Ok(l) => keys.push(l),
                Err(e) => {
                    sock_err = Some(e);
                    break;
                }
            }
        }
        let target_error = auth_line
            .iter()
            .chain(&select_line)
            .chain(&keys)
            .any(|l| l.first() == Some(&b'-'));
        if let Some(e) = &sock_err {
            if !target_error && keys.is_empty() && may_retry && !migrate::is_timeout(e) {
                may_retry = false;
                continue;
            }
        } else {
            // An error from the target may have left another database
            // selected: SELECT again next time.
            t.last_db = (!target_error).then_some(db);
            migrate::give_back(t);
        }
        return Ok(Replies {
            auth: auth_line,
            select: select_line,
            keys,
            socket_error: sock_err.is_some(),
        });
    }
}
