//! Stream commands (Redis 7.0 `src/t_stream.c`): argument parsing in
//! Redis's order (so the same bad request fails with the same error, and
//! errors that Redis raises after its key lookups come after ours), the
//! replies in RESP2 and RESP3, and the journal forms of the commands whose
//! effect depends on the clock or on what they found (XADD with `*` or
//! `~`, XTRIM `~`, XREADGROUP, XCLAIM, XAUTOCLAIM). The keyspace work is
//! `cairn_engine::ops::stream`.
//!
//! XREAD BLOCK and XREADGROUP BLOCK wait through `Ctx::block` like BLPOP:
//! the request runs again when a key is ready (an XADD, a deleted key or
//! a destroyed group), on timeout, or on CLIENT UNBLOCK. XREAD's IDs are
//! resolved once, when the command first runs (`$`), and kept in the
//! wait (`BlockOn::stream_ids`).
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{CmdResult, Ctx, OnTimeout};
use crate::resp::errors::{self, CmdError};
use cairn_engine::ops::stream::{
    self as op, AddId, ClaimOptions, GroupRead, GroupRecords, GroupStart, ReadItem, TrimSpec,
};
use cairn_engine::value::stream::{EntryRef, StreamId, StreamValue, Trim};
use cairn_engine::{record, Error as EngineError, Key};
use cairn_protocol::resp::{Protocol, ReplyWriter};
use smallvec::SmallVec;

pub const COMMANDS: &[Def] = &[
    Def::new("xadd", xadd),
    Def::new("xrange", xrange),
    Def::new("xrevrange", xrevrange),
    Def::new("xlen", xlen),
    Def::new("xdel", xdel),
    Def::new("xtrim", xtrim),
    Def::new("xsetid", xsetid),
    Def::new("xread", xread),
    Def::new("xreadgroup", xreadgroup),
    Def::new("xack", xack),
    Def::new("xpending", xpending),
    Def::new("xclaim", xclaim),
    Def::new("xautoclaim", xautoclaim),
    Def::container(
        "xgroup",
        &[
            Def::new("create", xgroup_create),
            Def::new("setid", xgroup_setid),
            Def::new("destroy", xgroup_destroy),
            Def::new("createconsumer", xgroup_createconsumer),
            Def::new("delconsumer", xgroup_delconsumer),
            Def::new("help", xgroup_help),
        ],
    ),
    Def::container(
        "xinfo",
        &[
            Def::new("stream", xinfo_stream),
            Def::new("groups", xinfo_groups),
            Def::new("consumers", xinfo_consumers),
            Def::new("help", xinfo_help),
        ],
    ),
];

// ------------------------------------------------------------- arguments

/// Redis `string2ull`: a canonical `long long` that is not negative, or
/// what `strtoull` accepts in full (leading spaces, a sign, digits).
fn parse_u64(b: &[u8]) -> Option<u64> {
    if let Some(n) = cairn_engine::util::num::parse_i64(b) {
        return u64::try_from(n).ok();
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: u64 = digits.parse().ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis `streamGenericParseIDOrReply`: `ms[-seq]`, or `-`/`+` unless
/// `strict`; a missing seq is `missing_seq`. With `star`, `ms-*` is
/// accepted and reported as Err(Some(ms)) (XADD only).
fn parse_id_ext(arg: &[u8], missing_seq: u64, strict: bool, star: bool) -> Result<AddId, CmdError> {
    let bad = || CmdError::text(errors::STREAM_INVALID_ID);
    if arg.len() > 127 {
        return Err(bad());
    }
    // C-string semantics: the argument ends at a NUL.
    let arg = match arg.iter().position(|&c| c == 0) {
        Some(i) => &arg[..i],
        None => arg,
    };
    if arg == b"-" || arg == b"+" {
        if strict {
            return Err(bad());
        }
        return Ok(AddId::Exact(if arg == b"-" {
            StreamId::MIN
        } else {
            StreamId::MAX
        }));
    }
    let (ms, seq) = match arg.iter().position(|&c| c == b'-') {
        Some(i) => (&arg[..i], Some(&arg[i + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(bad)?;
    match seq {
        Some(b"*") if star => Ok(AddId::Ms(ms)),
        Some(seq) => Ok(AddId::Exact(StreamId::new(
            ms,
            parse_u64(seq).ok_or_else(bad)?,
        ))),
        None => Ok(AddId::Exact(StreamId::new(ms, missing_seq))),
    }
}

fn parse_id(arg: &[u8], missing_seq: u64, strict: bool) -> Result<StreamId, CmdError> {
    match parse_id_ext(arg, missing_seq, strict, false)? {
        AddId::Exact(i) => Ok(i),
        _ => unreachable!("`ms-*` is only accepted with star"),
    }
}

/// A strict ID (`-` and `+` refused), missing seq 0.
fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id(arg, 0, true)
}

/// Redis `streamParseIntervalIDOrReply`: `(id` is exclusive (and strict).
fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_id(&arg[1..], missing_seq, true)?, true))
    } else {
        Ok((parse_id(arg, missing_seq, false)?, false))
    }
}

/// A range's start: exclusive means the next ID.
fn range_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = interval_id(arg, 0)?;
    if ex {
        return id
            .incr()
            .ok_or_else(|| CmdError::text(errors::STREAM_BAD_START));
    }
    Ok(id)
}

/// A range's end: exclusive means the previous ID.
fn range_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = interval_id(arg, u64::MAX)?;
    if ex {
        return id
            .decr()
            .ok_or_else(|| CmdError::text(errors::STREAM_BAD_END));
    }
    Ok(id)
}

/// `getLongLongFromObjectOrReply` with an optional message.
fn ll(arg: &[u8], msg: Option<&'static str>) -> Result<i64, CmdError> {
    cairn_engine::util::num::parse_i64(arg).ok_or_else(|| match msg {
        Some(m) => CmdError::text(m),
        None => CmdError::NotInteger,
    })
}

/// BLOCK's milliseconds (`getTimeoutFromObjectOrReply` in
/// `UNIT_MILLISECONDS`): an integer, not negative; 0 waits forever.
fn block_ms(arg: &[u8]) -> Result<u64, CmdError> {
    let n = ll(arg, Some(errors::TIMEOUT_NOT_INTEGER))?;
    if n < 0 {
        return Err(CmdError::text(errors::TIMEOUT_NEGATIVE));
    }
    Ok(n as u64)
}

/// XADD's and XTRIM's options (`streamParseAddOrTrimArgsOrReply`).
struct AddTrim {
    trim: Option<TrimSpec>,
    /// Index of the trim's `~`/`=` slot and value, for the journal form.
    trim_arg: usize,
    nomkstream: bool,
    /// XADD: the ID argument's index and value.
    id_at: usize,
    id: AddId,
}

fn parse_add_trim(ctx: &Ctx, xadd: bool) -> Result<AddTrim, CmdError> {
    let argc = ctx.argc();
    let mut out = AddTrim {
        trim: None,
        trim_arg: 0,
        nomkstream: false,
        id_at: argc,
        id: AddId::Auto,
    };
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < argc {
        let more = argc - 1 - i;
        let opt = ctx.arg(i);
        if xadd && opt == b"*" {
            out.id_at = i;
            break;
        } else if (args::is(opt, "maxlen") || args::is(opt, "minid")) && more > 0 {
            if out.trim.is_some() {
                return Err(CmdError::text(errors::STREAM_MAXLEN_MINID));
            }
            approx = false;
            let next = ctx.arg(i + 1);
            if more >= 2 && (next == b"~" || next == b"=") {
                approx = next == b"~";
                i += 1;
            }
            let how = if args::is(opt, "maxlen") {
                let n = ll(ctx.arg(i + 1), None)?;
                if n < 0 {
                    return Err(CmdError::text(errors::STREAM_MAXLEN_NEGATIVE));
                }
                Trim::MaxLen(n as u64)
            } else {
                Trim::MinId(strict_id(ctx.arg(i + 1))?)
            };
            i += 1;
            out.trim = Some(TrimSpec {
                how,
                approx,
                limit: 0,
            });
            out.trim_arg = i;
        } else if args::is(opt, "limit") && more > 0 {
            let n = ll(ctx.arg(i + 1), None)?;
            if n < 0 {
                return Err(CmdError::text(errors::STREAM_LIMIT_NEGATIVE));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && args::is(opt, "nomkstream") {
            out.nomkstream = true;
        } else if xadd {
            out.id = parse_id_ext(opt, 0, true, true)?;
            out.id_at = i;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if limit.is_some_and(|n| n != 0) && out.trim.is_none() {
        return Err(CmdError::text(errors::STREAM_LIMIT_NO_STRATEGY));
    }
    if !xadd && out.trim.is_none() {
        return Err(CmdError::text(errors::XTRIM_NO_STRATEGY));
    }
    if let Some(t) = out.trim.as_mut() {
        match limit {
            Some(_) if !approx => {
                return Err(CmdError::text(errors::STREAM_LIMIT_NO_APPROX));
            }
            Some(n) => t.limit = n as u64,
            None if approx => {
                let per = ctx
                    .engine()
                    .limits
                    .stream_node_max_entries
                    .load(std::sync::atomic::Ordering::Relaxed);
                t.limit = (100 * per as u64).clamp(1, 1_000_000);
                if per == 0 {
                    t.limit = 10_000;
                }
            }
            None => t.limit = 0,
        }
    } else if limit.is_some() && !approx {
        // LIMIT 0 without a strategy: Redis checks `args->limit` (zero
        // passes) and then that LIMIT came with `~`.
        return Err(CmdError::text(errors::STREAM_LIMIT_NO_APPROX));
    }
    Ok(out)
}

// --------------------------------------------------------------- replies

/// One entry: `[id, [field, value, ...]]` (arrays in RESP3 too).
fn entry(w: &mut ReplyWriter, e: &EntryRef) {
    w.array(2);
    w.bulk(e.id.to_string().as_bytes());
    w.array(2 * e.len());
    for (f, v) in e.pairs() {
        w.bulk(f);
        w.bulk(v);
    }
}

fn id_bulk(w: &mut ReplyWriter, id: StreamId) {
    w.bulk(id.to_string().as_bytes());
}

/// Read items: entries, and `[id, nil]` for history entries since deleted.
fn items(w: &mut ReplyWriter, it: &[ReadItem]) {
    w.array(it.len());
    for (id, e) in it {
        match e {
            Some(e) => entry(w, e),
            None => {
                w.array(2);
                id_bulk(w, *id);
                w.null_array();
            }
        }
    }
}

/// A map in RESP3, a flat array of pairs in RESP2.
fn map(w: &mut ReplyWriter, pairs: usize) {
    w.map(pairs);
}

// ------------------------------------------------------------- the writes

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...] → the ID added (bulk), or null with
/// NOMKSTREAM on a missing key.
fn xadd(ctx: &mut Ctx) -> CmdResult {
    let p = parse_add_trim(ctx, true)?;
    let field_at = p.id_at + 1;
    let argc = ctx.argc();
    if argc < field_at + 2 || !(argc - field_at).is_multiple_of(2) {
        return Err(CmdError::WrongArity("xadd"));
    }
    if p.id == AddId::Exact(StreamId::MIN) {
        return Err(CmdError::text(errors::XADD_ID_ZERO));
    }
    let a = ctx.args;
    let pairs: SmallVec<[(&[u8], &[u8]); 8]> = (field_at..argc)
        .step_by(2)
        .map(|i| (a.get(i), a.get(i + 1)))
        .collect();
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let now = ctx.now_ms();
    let mut g = e.lock(&ctx.cx, &k);
    let added = op::xadd(&mut g, db, &k, p.id, p.nomkstream, p.trim, &pairs, now)?;
    let Some(added) = added else {
        drop(g);
        return ctx.null();
    };
    // Journaled with the ID it chose and the exact form of a `~` trim
    // (Redis's `rewriteClientCommandArgument` of both).
    if e.journal_on() && (!matches!(p.id, AddId::Exact(_)) || added.exact_trim.is_some()) {
        let id = added.id.to_string();
        let mut v: Vec<&[u8]> = a.iter_from(0).collect();
        v[p.id_at] = id.as_bytes();
        if let Some(t) = &added.exact_trim {
            v[p.trim_arg - 1] = b"=";
            v[p.trim_arg] = t.as_bytes();
        }
        record::stage(e, &ctx.cx, db, &v);
    }
    drop(g);
    ctx.bulk(added.id.to_string().as_bytes())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count] → integer: the
/// entries removed.
fn xtrim(ctx: &mut Ctx) -> CmdResult {
    let p = parse_add_trim(ctx, false)?;
    let t = p.trim.expect("XTRIM's parse requires a strategy");
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let a = ctx.args;
    let mut g = e.lock(&ctx.cx, &k);
    let (n, exact) = op::xtrim(&mut g, db, &k, t)?;
    if let Some(x) = exact {
        let mut v: Vec<&[u8]> = a.iter_from(0).collect();
        v[p.trim_arg - 1] = b"=";
        v[p.trim_arg] = x.as_bytes();
        record::stage(e, &ctx.cx, db, &v);
    }
    drop(g);
    ctx.int(n as i64)
}

/// XDEL key id [id ...] → integer: entries deleted. Every ID is parsed
/// before anything is deleted.
fn xdel(ctx: &mut Ctx) -> CmdResult {
    let ids: Vec<StreamId> = (2..ctx.argc())
        .map(|i| strict_id(ctx.arg(i)))
        .collect::<Result<_, _>>()?;
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::xdel(&mut g, ctx.db(), &k, &ids)?;
    drop(g);
    ctx.int(n as i64)
}

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id] → +OK.
fn xsetid(ctx: &mut Ctx) -> CmdResult {
    let id = strict_id(ctx.arg(2))?;
    let mut added = None;
    let mut maxdel = None;
    let argc = ctx.argc();
    let mut i = 3;
    while i < argc {
        let more = argc - 1 - i;
        let opt = ctx.arg(i);
        if args::is(opt, "entriesadded") && more > 0 {
            let n = ll(ctx.arg(i + 1), None)?;
            if n < 0 {
                return Err(CmdError::text(errors::XSETID_ENTRIES_ADDED_NEGATIVE));
            }
            added = Some(n as u64);
        } else if args::is(opt, "maxdeletedid") && more > 0 {
            let m = strict_id(ctx.arg(i + 1))?;
            if id < m {
                return Err(CmdError::text(errors::XSETID_BELOW_PROVIDED_MAX_DELETED));
            }
            maxdel = Some(m);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    op::xsetid(&mut g, ctx.db(), &k, id, added, maxdel)?;
    drop(g);
    ctx.ok()
}

// -------------------------------------------------------------- the reads

/// XLEN key → integer.
fn xlen(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::xlen(&mut g, ctx.db(), &k)?;
    drop(g);
    ctx.int(n as i64)
}

/// XRANGE key start end [COUNT count] → array of entries; COUNT 0 gives
/// a null array (Redis 7.0), a missing key an empty array.
fn xrange(ctx: &mut Ctx) -> CmdResult {
    range(ctx, false)
}

/// XREVRANGE key end start [COUNT count] → as XRANGE, newest first.
fn xrevrange(ctx: &mut Ctx) -> CmdResult {
    range(ctx, true)
}

fn range(ctx: &mut Ctx, rev: bool) -> CmdResult {
    let (sa, ea) = if rev { (3, 2) } else { (2, 3) };
    let start = range_start(ctx.arg(sa))?;
    let end = range_end(ctx.arg(ea))?;
    let mut count: i64 = -1;
    let argc = ctx.argc();
    let mut j = 4;
    while j < argc {
        if args::is(ctx.arg(j), "count") && j + 1 < argc {
            count = ll(ctx.arg(j + 1), None)?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |s| {
        let mut w = ReplyWriter::new(out, proto);
        let Some(s) = s else {
            w.array(0);
            return;
        };
        if count == 0 {
            w.null_array();
            return;
        }
        let n = if count < 0 { 0 } else { count as usize };
        let got = s.range(start, end, n, rev);
        w.array(got.len());
        for en in &got {
            entry(&mut w, en);
        }
    })?;
    Ok(())
}

/// XREAD/XREADGROUP's parsed options.
struct ReadArgs<'a> {
    count: usize,
    /// None: no BLOCK.
    block_ms: Option<u64>,
    group: Option<GroupRead<'a>>,
    streams_at: usize,
    nstreams: usize,
}

fn parse_read<'a>(ctx: &Ctx<'a>, group_cmd: bool) -> Result<ReadArgs<'a>, CmdError> {
    let name = if group_cmd { "xreadgroup" } else { "xread" };
    let argc = ctx.argc();
    let mut r = ReadArgs {
        count: 0,
        block_ms: None,
        group: None,
        streams_at: 0,
        nstreams: 0,
    };
    let mut noack = false;
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        let o = ctx.arg(i);
        if args::is(o, "block") && more > 0 {
            if ctx.client.in_script {
                // Named as the script called it (`c->argv[0]`).
                return Err(errors::xread_block_in_script(&String::from_utf8_lossy(
                    ctx.arg(0),
                )));
            }
            i += 1;
            r.block_ms = Some(block_ms(ctx.arg(i))?);
        } else if args::is(o, "count") && more > 0 {
            i += 1;
            r.count = ll(ctx.arg(i), None)?.max(0) as usize;
        } else if args::is(o, "streams") && more > 0 {
            r.streams_at = i + 1;
            let n = argc - r.streams_at;
            if !n.is_multiple_of(2) {
                return Err(errors::xread_unbalanced(
                    name,
                    if group_cmd { '>' } else { '$' },
                ));
            }
            r.nstreams = n / 2;
            break;
        } else if args::is(o, "group") && more >= 2 {
            if !group_cmd {
                return Err(CmdError::text(errors::XREAD_GROUP_OPTION));
            }
            r.group = Some(GroupRead {
                group: ctx.arg(i + 1),
                consumer: ctx.arg(i + 2),
                noack: false,
            });
            i += 2;
        } else if args::is(o, "noack") {
            if !group_cmd {
                return Err(CmdError::text(errors::XREAD_NOACK_OPTION));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if r.streams_at == 0 {
        return Err(CmdError::Syntax);
    }
    if group_cmd && r.group.is_none() {
        return Err(CmdError::text(errors::XREADGROUP_MISSING_GROUP));
    }
    if let Some(g) = r.group.as_mut() {
        g.noack = noack;
    }
    Ok(r)
}

/// XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...] →
/// for each stream with entries after its ID, `[key, entries]` (a map in
/// RESP3); a null array when none has any (after BLOCK's timeout).
fn xread(ctx: &mut Ctx) -> CmdResult {
    read(ctx, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK ms] [NOACK]
/// STREAMS key [key ...] id [id ...] → as XREAD: with `>` the group's new
/// entries (added to the PEL unless NOACK), with an ID the consumer's own
/// pending entries after it (`[id, nil]` for those since deleted).
fn xreadgroup(ctx: &mut Ctx) -> CmdResult {
    read(ctx, true)
}

fn read(ctx: &mut Ctx, group_cmd: bool) -> CmdResult {
    let r = parse_read(ctx, group_cmd)?;
    let a = ctx.args;
    let e = ctx.engine();
    let db = ctx.db();
    let keys: SmallVec<[Key; 4]> = (r.streams_at..r.streams_at + r.nstreams)
        .map(|i| e.key(a.get(i)))
        .collect();
    let retry = ctx.is_retry();
    let remembered: Vec<StreamId> = match &ctx.client.blocked {
        Some(b) if !group_cmd => b.stream_ids.clone(),
        _ => Vec::new(),
    };
    let now = ctx.now_ms();
    let mut g = e.lock_keys(&ctx.cx, &keys);
    // On a retry of XREADGROUP the key or group may have gone while it
    // waited: Redis unblocks it with an error then.
    if retry && group_cmd {
        let grp = r.group.expect("parsed").group;
        for k in &keys {
            match op::peek(&mut g, db, k, |s| s.map(|s| s.groups.contains_key(grp))) {
                Ok(Some(true)) => {}
                Ok(Some(false)) => return Err(CmdError::text(errors::XREADGROUP_GROUP_GONE)),
                Ok(None) | Err(_) => return Err(CmdError::text(errors::XREADGROUP_KEY_GONE)),
            }
        }
    }
    // IDs, checked key by key as Redis does (type, group, then the ID).
    // None stands for `>`.
    let mut ids: SmallVec<[Option<StreamId>; 4]> = SmallVec::new();
    // A woken XREAD whose key now holds another type reads nothing from
    // it and goes on waiting, as Redis serves blocked readers from streams
    // only (a MULTI of XADD, DEL, LPUSH must not wake it with WRONGTYPE).
    let mut other_type: SmallVec<[bool; 4]> = SmallVec::from_elem(false, keys.len());
    for (n, k) in keys.iter().enumerate() {
        let last = match (&r.group, group_cmd) {
            (Some(gr), _) => {
                let found = op::view(&mut g, db, k, |s| {
                    s.and_then(|s| s.groups.contains_key(gr.group).then_some(s.last_id))
                })?;
                match found {
                    Some(l) => Some(l),
                    None => return Err(errors::xreadgroup_nogroup(k.bytes, gr.group)),
                }
            }
            (None, _) => match op::view(&mut g, db, k, |s| s.map(|s| s.last_id)) {
                Err(EngineError::WrongType) if retry => {
                    other_type[n] = true;
                    None
                }
                found => found?,
            },
        };
        let arg = a.get(r.streams_at + r.nstreams + n);
        let id = if arg == b"$" {
            if group_cmd {
                return Err(CmdError::text(errors::XREADGROUP_DOLLAR));
            }
            Some(last.unwrap_or(StreamId::MIN))
        } else if arg == b">" {
            if !group_cmd {
                return Err(CmdError::text(errors::XREAD_GT));
            }
            None
        } else {
            Some(strict_id(arg)?)
        };
        ids.push(match remembered.get(n) {
            Some(&m) if retry => Some(m),
            _ => id,
        });
    }
    let count = match (r.block_ms, retry) {
        // A blocked reader woken with no COUNT takes at most 1000
        // (`XREAD_BLOCKED_DEFAULT_COUNT`).
        (Some(_), true) if r.count == 0 => 1000,
        _ => r.count,
    };
    let proto = ctx.client.proto;
    let mut body: Vec<u8> = Vec::new();
    let mut served = 0usize;
    let mut rec = GroupRecords::default();
    for (n, k) in keys.iter().enumerate() {
        let emit = |it: &[ReadItem]| {
            let mut w = ReplyWriter::new(&mut body, proto);
            if proto == Protocol::Resp2 {
                w.array(2);
            }
            w.bulk(k.bytes);
            items(&mut w, it);
        };
        if other_type[n] {
            continue;
        }
        let did = match &r.group {
            Some(gr) => op::group_read(&mut g, db, k, *gr, ids[n], count, now, &mut rec, emit)?,
            None => op::read_after(&mut g, db, k, ids[n].expect("XREAD has IDs"), count, emit)?,
        };
        served += usize::from(did);
    }
    if !rec.cmds.is_empty() {
        stage_records(ctx, db, &rec);
    }
    drop(g);
    if served > 0 {
        let mut w = ctx.reply();
        if proto == Protocol::Resp2 {
            w.array(served);
        } else {
            w.map(served);
        }
        ctx.out.extend_from_slice(&body);
        return Ok(());
    }
    match r.block_ms {
        None => {
            ctx.reply().null_array();
            Ok(())
        }
        Some(ms) => {
            let resolved: Vec<StreamId> = ids.iter().map(|i| i.unwrap_or(StreamId::MAX)).collect();
            ctx.block(keys.iter().map(|k| k.bytes), ms, OnTimeout::NullArray)?;
            if let Some(b) = ctx.client.wants_block.as_mut() {
                b.stream_ids = resolved;
            }
            Ok(())
        }
    }
}

/// Stages a group write's records in place of the command.
fn stage_records(ctx: &Ctx, db: usize, rec: &GroupRecords) {
    let e = ctx.engine();
    if !e.journal_on() {
        return;
    }
    let cmds: Vec<Vec<&[u8]>> = rec
        .cmds
        .iter()
        .map(|c| c.iter().map(|a| &a[..]).collect())
        .collect();
    record::stage_all(e, &ctx.cx, db, &cmds);
}

// ------------------------------------------------------------------ groups

/// XACK key group id [id ...] → integer: entries acknowledged (0 for a
/// missing key or group, checked before the IDs).
fn xack(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let mut g = e.lock(&ctx.cx, &k);
    let has = op::view(&mut g, db, &k, |s| {
        s.is_some_and(|s| s.groups.contains_key(ctx.args.get(2)))
    })?;
    if !has {
        drop(g);
        return ctx.int(0);
    }
    let ids: Vec<StreamId> = (3..ctx.argc())
        .map(|i| strict_id(ctx.arg(i)))
        .collect::<Result<_, _>>()?;
    let n = op::xack(&mut g, db, &k, ctx.arg(2), &ids)?;
    drop(g);
    ctx.int(n as i64)
}

/// XPENDING key group → [count, first, last, [[consumer, count-bulk]...]]
/// (nulls when nothing is pending); XPENDING key group [IDLE ms] start
/// end count [consumer] → [[id, consumer, idle-ms, deliveries]...].
fn xpending(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut ext = None;
    if argc >= 6 {
        let mut at = 3;
        let mut idle = 0;
        if args::is(ctx.arg(3), "idle") {
            idle = ll(ctx.arg(4), None)?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = ll(ctx.arg(at + 2), None)?.max(0) as usize;
        let start = range_start(ctx.arg(at))?;
        let end = range_end(ctx.arg(at + 1))?;
        let consumer = (at + 3 < argc).then(|| ctx.arg(at + 3));
        ext = Some((idle, start, end, count, consumer));
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let group = ctx.arg(2);
    let now = ctx.now_ms();
    let mut g = e.lock(&ctx.cx, &k);
    let nogroup = |err: EngineError| match err {
        EngineError::NoGroup => errors::nogroup_key_or_group(k.bytes, group),
        other => CmdError::Engine(other),
    };
    match ext {
        None => {
            let sum = op::pending_summary(&mut g, db, &k, group).map_err(nogroup)?;
            drop(g);
            let mut w = ctx.reply();
            w.array(4);
            w.int(sum.count as i64);
            match sum.bounds {
                None => {
                    w.null();
                    w.null();
                    w.null_array();
                }
                Some((a, b)) => {
                    id_bulk(&mut w, a);
                    id_bulk(&mut w, b);
                    w.array(sum.consumers.len());
                    for (name, n) in &sum.consumers {
                        w.array(2);
                        w.bulk(name);
                        w.bulk_int(*n as i64);
                    }
                }
            }
        }
        Some((idle, start, end, count, consumer)) => {
            let rows = op::pending_range(
                &mut g, db, &k, group, idle, start, end, count, consumer, now,
            )
            .map_err(nogroup)?;
            drop(g);
            let mut w = ctx.reply();
            w.array(rows.len());
            for r in &rows {
                w.array(4);
                id_bulk(&mut w, r.id);
                w.bulk(&r.consumer);
                w.int(r.idle_ms as i64);
                w.int(r.deliveries as i64);
            }
        }
    }
    Ok(())
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms]
/// [TIME unix-ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id] → the
/// entries claimed (or their IDs with JUSTID).
fn xclaim(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let group = ctx.arg(2);
    let consumer = ctx.arg(3);
    let now = ctx.now_ms();
    let mut g = e.lock(&ctx.cx, &k);
    let has = op::view(&mut g, db, &k, |s| s.map(|s| s.groups.contains_key(group)))?;
    if has != Some(true) {
        return Err(errors::nogroup_key_or_group(k.bytes, group));
    }
    let min_idle = ll(ctx.arg(4), Some(errors::XCLAIM_MIN_IDLE))?.max(0);
    let argc = ctx.argc();
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argc {
        match strict_id(ctx.arg(j)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let mut o = ClaimOptions {
        min_idle_ms: min_idle,
        ..ClaimOptions::default()
    };
    let mut delivery: Option<i64> = None;
    while j < argc {
        let more = argc - 1 - j;
        let opt = ctx.arg(j);
        if args::is(opt, "force") {
            o.force = true;
        } else if args::is(opt, "justid") {
            o.justid = true;
        } else if args::is(opt, "idle") && more > 0 {
            j += 1;
            delivery = Some(now as i64 - ll(ctx.arg(j), Some(errors::XCLAIM_IDLE))?);
        } else if args::is(opt, "time") && more > 0 {
            j += 1;
            delivery = Some(ll(ctx.arg(j), Some(errors::XCLAIM_TIME))?);
        } else if args::is(opt, "retrycount") && more > 0 {
            j += 1;
            let n = ll(ctx.arg(j), Some(errors::XCLAIM_RETRYCOUNT))?;
            // A negative count means "not given" in Redis.
            o.retry_count = u64::try_from(n).ok();
        } else if args::is(opt, "lastid") && more > 0 {
            j += 1;
            o.last_id = strict_id(ctx.arg(j))?;
        } else {
            return Err(errors::xclaim_option(opt));
        }
        j += 1;
    }
    o.delivery_time_ms = delivery.map(|d| {
        if d < 0 || d > now as i64 {
            now
        } else {
            d as u64
        }
    });
    let justid = o.justid;
    let proto = ctx.client.proto;
    let mut body = Vec::new();
    let mut rec = GroupRecords::default();
    op::xclaim(
        &mut g,
        db,
        &k,
        group,
        consumer,
        &ids,
        o,
        now,
        &mut rec,
        |it| {
            let mut w = ReplyWriter::new(&mut body, proto);
            w.array(it.len());
            for (id, en) in it {
                match (justid, en) {
                    (false, Some(en)) => entry(&mut w, en),
                    _ => id_bulk(&mut w, *id),
                }
            }
        },
    )?;
    stage_records(ctx, db, &rec);
    drop(g);
    ctx.out.extend_from_slice(&body);
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID]
/// → [next-cursor, claimed entries (or IDs), IDs found deleted].
fn xautoclaim(ctx: &mut Ctx) -> CmdResult {
    let min_idle = ll(ctx.arg(4), Some(errors::XAUTOCLAIM_MIN_IDLE))?.max(0);
    let start = range_start(ctx.arg(5))?;
    let argc = ctx.argc();
    let mut count = 100usize;
    let mut justid = false;
    let mut j = 6;
    while j < argc {
        let more = argc - 1 - j;
        let opt = ctx.arg(j);
        if args::is(opt, "count") && more > 0 {
            let max = i64::MAX / 16;
            match cairn_engine::util::num::parse_i64(ctx.arg(j + 1)) {
                Some(n) if (1..=max).contains(&n) => count = n as usize,
                _ => return Err(CmdError::text(errors::XAUTOCLAIM_COUNT)),
            }
            j += 1;
        } else if args::is(opt, "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let group = ctx.arg(2);
    let consumer = ctx.arg(3);
    let now = ctx.now_ms();
    let proto = ctx.client.proto;
    let mut body = Vec::new();
    let mut rec = GroupRecords::default();
    let mut g = e.lock(&ctx.cx, &k);
    op::xautoclaim(
        &mut g,
        db,
        &k,
        group,
        consumer,
        min_idle,
        start,
        count,
        justid,
        now,
        &mut rec,
        |res, it| {
            let mut w = ReplyWriter::new(&mut body, proto);
            w.array(3);
            id_bulk(&mut w, res.next);
            w.array(it.len());
            for (id, en) in it {
                match (justid, en) {
                    (false, Some(en)) => entry(&mut w, en),
                    _ => id_bulk(&mut w, *id),
                }
            }
            w.array(res.deleted.len());
            for id in &res.deleted {
                id_bulk(&mut w, *id);
            }
        },
    )
    .map_err(|err| match err {
        EngineError::NoGroup => errors::nogroup_key_or_group(k.bytes, group),
        other => CmdError::Engine(other),
    })?;
    stage_records(ctx, db, &rec);
    drop(g);
    ctx.out.extend_from_slice(&body);
    Ok(())
}

/// XGROUP CREATE/SETID's trailing options: MKSTREAM (CREATE only) and
/// ENTRIESREAD n (-1: unknown).
fn group_extras(ctx: &Ctx, create: bool) -> Result<(bool, Option<u64>), CmdError> {
    let mut mk = false;
    let mut read = None;
    let argc = ctx.argc();
    let mut i = 5;
    while i < argc {
        if create && args::is(ctx.arg(i), "mkstream") {
            mk = true;
            i += 1;
        } else if args::is(ctx.arg(i), "entriesread") && i + 1 < argc {
            let n = ll(ctx.arg(i + 1), None)?;
            if n < 0 && n != -1 {
                return Err(CmdError::text(errors::ENTRIESREAD_NEGATIVE));
            }
            read = u64::try_from(n).ok();
            i += 2;
        } else {
            return Err(subcommand_syntax_error(ctx));
        }
    }
    Ok((mk, read))
}

/// Maps a group op's errors to XGROUP's wording.
fn xgroup_err(ctx: &Ctx, err: EngineError) -> CmdError {
    match err {
        EngineError::NoSuchKey => CmdError::text(errors::XGROUP_NEEDS_KEY),
        EngineError::NoGroup => errors::nogroup_for_key(ctx.arg(3), ctx.arg(2)),
        other => CmdError::Engine(other),
    }
}

fn group_start(arg: &[u8], strict: bool) -> GroupStart {
    if arg == b"$" {
        return GroupStart::Last;
    }
    match parse_id(arg, 0, strict) {
        Ok(id) => GroupStart::Id(id),
        Err(_) => GroupStart::Invalid,
    }
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n] → +OK.
fn xgroup_create(ctx: &mut Ctx) -> CmdResult {
    if ctx.argc() > 8 {
        return Err(subcommand_syntax_error(ctx));
    }
    let (mk, read) = group_extras(ctx, true)?;
    let at = group_start(ctx.arg(4), true);
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let mut g = e.lock(&ctx.cx, &k);
    op::group_create(&mut g, ctx.db(), &k, ctx.arg(3), at, mk, read)
        .map_err(|err| xgroup_err(ctx, err))?;
    drop(g);
    ctx.ok()
}

/// XGROUP SETID key group id|$ [ENTRIESREAD n] → +OK.
fn xgroup_setid(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.argc();
    let (_, read) = group_extras(ctx, false)?;
    if argc != 5 && argc != 7 {
        return Err(subcommand_syntax_error(ctx));
    }
    let at = group_start(ctx.arg(4), false);
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let mut g = e.lock(&ctx.cx, &k);
    op::group_setid(&mut g, ctx.db(), &k, ctx.arg(3), at, read)
        .map_err(|err| xgroup_err(ctx, err))?;
    drop(g);
    ctx.ok()
}

/// XGROUP DESTROY key group → integer: 1 if destroyed, 0 if absent.
fn xgroup_destroy(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let mut g = e.lock(&ctx.cx, &k);
    let done =
        op::group_destroy(&mut g, ctx.db(), &k, ctx.arg(3)).map_err(|err| xgroup_err(ctx, err))?;
    drop(g);
    ctx.int(i64::from(done))
}

/// XGROUP CREATECONSUMER key group consumer → integer: 1 if created.
fn xgroup_createconsumer(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let now = ctx.now_ms();
    let mut g = e.lock(&ctx.cx, &k);
    let done = op::create_consumer(&mut g, ctx.db(), &k, ctx.arg(3), ctx.arg(4), now)
        .map_err(|err| xgroup_err(ctx, err))?;
    drop(g);
    ctx.int(i64::from(done))
}

/// XGROUP DELCONSUMER key group consumer → integer: its pending entries.
fn xgroup_delconsumer(ctx: &mut Ctx) -> CmdResult {
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let mut g = e.lock(&ctx.cx, &k);
    let n = op::delete_consumer(&mut g, ctx.db(), &k, ctx.arg(3), ctx.arg(4))
        .map_err(|err| xgroup_err(ctx, err))?;
    drop(g);
    ctx.int(n as i64)
}

/// XGROUP HELP.
fn xgroup_help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    )
}

// ------------------------------------------------------------------- XINFO

/// XINFO's key lookup: "ERR no such key" when absent.
fn with_stream<R>(
    ctx: &mut Ctx,
    f: impl FnOnce(&mut ReplyWriter, &StreamValue, u64) -> Result<R, CmdError>,
) -> Result<R, CmdError> {
    let e = ctx.engine();
    let k = e.key(ctx.arg(2));
    let db = ctx.db();
    let now = ctx.now_ms();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    op::view(&mut g, db, &k, |s| match s {
        None => Err(CmdError::Engine(EngineError::NoSuchKey)),
        Some(s) => {
            let mut w = ReplyWriter::new(out, proto);
            f(&mut w, s, now)
        }
    })?
}

fn opt_int(w: &mut ReplyWriter, v: Option<u64>) {
    match v {
        Some(n) => w.int(n as i64),
        None => w.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT n]] → a map of the stream's counters and
/// first and last entries; FULL lists entries (COUNT, default 10, 0 for
/// all) and every group with its PEL and consumers.
fn xinfo_stream(ctx: &mut Ctx) -> CmdResult {
    // Redis looks the key up first, then parses the options.
    let opts: SmallVec<[&[u8]; 3]> = ctx.args.iter_from(3).collect();
    let syntax = subcommand_syntax_error(ctx);
    let parse = move || -> Result<(bool, usize), CmdError> {
        if opts.is_empty() {
            return Ok((false, 10));
        }
        if (opts.len() != 1 && opts.len() != 3) || !args::is(opts[0], "full") {
            return Err(syntax.clone());
        }
        if opts.len() == 3 {
            if !args::is(opts[1], "count") {
                return Err(syntax);
            }
            let n = ll(opts[2], None)?;
            // A negative COUNT means the default (`xinfoReplyWithStreamInfo`).
            return Ok((true, if n < 0 { 10 } else { n as usize }));
        }
        Ok((true, 10))
    };
    with_stream(ctx, |w, s, _| {
        let (full, count) = parse()?;
        map(w, if full { 9 } else { 10 });
        w.bulk(b"length");
        w.int(s.len() as i64);
        w.bulk(b"radix-tree-keys");
        w.int(s.node_count() as i64);
        w.bulk(b"radix-tree-nodes");
        w.int(radix_nodes(s) as i64);
        w.bulk(b"last-generated-id");
        id_bulk(w, s.last_id);
        w.bulk(b"max-deleted-entry-id");
        id_bulk(w, s.max_deleted_id);
        w.bulk(b"entries-added");
        w.int(s.entries_added as i64);
        w.bulk(b"recorded-first-entry-id");
        id_bulk(w, s.first_id);
        if !full {
            w.bulk(b"groups");
            w.int(s.groups.len() as i64);
            for (name, rev) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
                w.bulk(name);
                match s.range(StreamId::MIN, StreamId::MAX, 1, rev).first() {
                    Some(en) => entry(w, en),
                    None => w.null(),
                }
            }
            return Ok(());
        }
        w.bulk(b"entries");
        let got = s.range(StreamId::MIN, StreamId::MAX, count, false);
        w.array(got.len());
        for en in &got {
            entry(w, en);
        }
        w.bulk(b"groups");
        w.array(s.groups.len());
        for (name, grp) in &s.groups {
            map(w, 7);
            w.bulk(b"name");
            w.bulk(name);
            w.bulk(b"last-delivered-id");
            id_bulk(w, grp.last_id);
            w.bulk(b"entries-read");
            opt_int(w, grp.entries_read);
            w.bulk(b"lag");
            opt_int(w, s.lag(grp));
            w.bulk(b"pel-count");
            w.int(grp.pel.len() as i64);
            w.bulk(b"pending");
            let pel: Vec<_> = grp
                .pel
                .iter()
                .take(if count == 0 { usize::MAX } else { count })
                .collect();
            w.array(pel.len());
            for (id, n) in pel {
                w.array(4);
                id_bulk(w, *id);
                w.bulk(&n.consumer);
                w.int(n.delivery_time_ms as i64);
                w.int(n.delivery_count as i64);
            }
            w.bulk(b"consumers");
            w.array(grp.consumers.len());
            for (cname, c) in &grp.consumers {
                map(w, 4);
                w.bulk(b"name");
                w.bulk(cname);
                w.bulk(b"seen-time");
                w.int(c.seen_time_ms as i64);
                w.bulk(b"pel-count");
                w.int(c.pel.len() as i64);
                w.bulk(b"pending");
                let mine: Vec<_> = c
                    .pel
                    .iter()
                    .take(if count == 0 { usize::MAX } else { count })
                    .collect();
                w.array(mine.len());
                for id in mine {
                    let n = &grp.pel[id];
                    w.array(3);
                    id_bulk(w, *id);
                    w.int(n.delivery_time_ms as i64);
                    w.int(n.delivery_count as i64);
                }
            }
        }
        Ok(())
    })
}

/// XINFO's radix-tree-nodes: Redis's rax node count cannot be known
/// without a rax; for keys of 16 bytes it is close to one more than the
/// keys (1 for an empty stream, 2 for one node), which is what we report.
fn radix_nodes(s: &StreamValue) -> usize {
    s.node_count() + 1
}

/// XINFO GROUPS key → per group a map: name, consumers, pending,
/// last-delivered-id, entries-read, lag.
fn xinfo_groups(ctx: &mut Ctx) -> CmdResult {
    with_stream(ctx, |w, s, _| {
        w.array(s.groups.len());
        for (name, grp) in &s.groups {
            map(w, 6);
            w.bulk(b"name");
            w.bulk(name);
            w.bulk(b"consumers");
            w.int(grp.consumers.len() as i64);
            w.bulk(b"pending");
            w.int(grp.pel.len() as i64);
            w.bulk(b"last-delivered-id");
            id_bulk(w, grp.last_id);
            w.bulk(b"entries-read");
            opt_int(w, grp.entries_read);
            w.bulk(b"lag");
            opt_int(w, s.lag(grp));
        }
        Ok(())
    })
}

/// XINFO CONSUMERS key group → per consumer a map: name, pending, idle
/// (Redis 7.0's three fields).
fn xinfo_consumers(ctx: &mut Ctx) -> CmdResult {
    let group = ctx.arg(3);
    let key = ctx.arg(2);
    with_stream(ctx, |w, s, now| {
        let Some(grp) = s.groups.get(group) else {
            return Err(errors::nogroup_for_key(group, key));
        };
        w.array(grp.consumers.len());
        for (name, c) in &grp.consumers {
            map(w, 3);
            w.bulk(b"name");
            w.bulk(name);
            w.bulk(b"pending");
            w.int(c.pel.len() as i64);
            w.bulk(b"idle");
            w.int((now as i64 - c.seen_time_ms as i64).max(0));
        }
        Ok(())
    })
}

/// XINFO HELP.
fn xinfo_help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_does() {
        let id = |s: &str| parse_id(s.as_bytes(), 0, false);
        assert_eq!(id("5"), Ok(StreamId::new(5, 0)));
        assert_eq!(id("5-3"), Ok(StreamId::new(5, 3)));
        assert_eq!(id("-"), Ok(StreamId::MIN));
        assert_eq!(id("+"), Ok(StreamId::MAX));
        assert!(parse_id(b"-", 0, true).is_err());
        assert!(id("-5").is_err());
        assert!(id("5-").is_err());
        assert!(id("a").is_err());
        assert!(id("").is_err());
        assert_eq!(id("18446744073709551615-1"), Ok(StreamId::new(u64::MAX, 1)));
        assert!(id("18446744073709551616").is_err());
        assert_eq!(parse_id_ext(b"7-*", 0, true, true), Ok(AddId::Ms(7)));
        assert!(parse_id(b"7-*", 0, true).is_err());
        assert_eq!(range_start(b"(5-1"), Ok(StreamId::new(5, 2)));
        assert_eq!(range_end(b"(5-0"), Ok(StreamId::new(4, u64::MAX)));
        assert_eq!(range_end(b"5"), Ok(StreamId::new(5, u64::MAX)));
        assert!(range_start(b"(18446744073709551615-18446744073709551615").is_err());
    }
}
