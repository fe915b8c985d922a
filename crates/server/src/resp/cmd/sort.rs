//! SORT and SORT_RO (Redis 7.0 `src/sort.c`, `sortCommandGeneric`):
//! options parsed left to right in Redis's order, so the same bad request
//! fails with the same error. The sorting itself is
//! `cairn_engine::ops::sort`.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;
use cairn_engine::ops::sort::{self as op, SortSpec, Sorted};

pub const COMMANDS: &[Def] = &[Def::new("sort", sort), Def::new("sort_ro", sort_ro)];

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
/// [ALPHA] [STORE destination] → the sorted elements, or with STORE the
/// length of the stored list.
fn sort(ctx: &mut Ctx) -> CmdResult {
    generic(ctx, false)
}

/// SORT_RO: SORT without STORE.
fn sort_ro(ctx: &mut Ctx) -> CmdResult {
    generic(ctx, true)
}

fn generic(ctx: &mut Ctx, readonly: bool) -> CmdResult {
    let e = ctx.engine();
    let mut spec = SortSpec {
        by: None,
        limit: None,
        gets: Vec::new(),
        desc: false,
        alpha: false,
        store: None,
        script: ctx.client.in_script,
    };
    let argc = ctx.argc();
    let mut j = 2;
    while j < argc {
        let a = ctx.arg(j);
        let left = argc - j - 1;
        if args::is(a, "asc") {
            spec.desc = false;
        } else if args::is(a, "desc") {
            spec.desc = true;
        } else if args::is(a, "alpha") {
            spec.alpha = true;
        } else if args::is(a, "limit") && left >= 2 {
            // getLongFromObjectOrReply: a long long, then the long range
            // (the same on 64-bit Linux).
            let start = args::int(ctx.arg(j + 1))?;
            let count = args::int(ctx.arg(j + 2))?;
            spec.limit = Some((start, count));
            j += 2;
        } else if !readonly && args::is(a, "store") && left >= 1 {
            spec.store = Some(e.key(ctx.arg(j + 1)));
            j += 1;
        } else if args::is(a, "by") && left >= 1 {
            spec.by = Some(ctx.arg(j + 1));
            j += 1;
        } else if args::is(a, "get") && left >= 1 {
            spec.gets.push(ctx.arg(j + 1));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let result = {
        let mut g = if spec.uses_patterns() {
            e.lock_all(&ctx.cx)
        } else {
            match &spec.store {
                Some(dest) => e.lock_keys(&ctx.cx, &[k, *dest]),
                None => e.lock(&ctx.cx, &k),
            }
        };
        op::sort(&mut g, db, &k, &spec)?
    };
    match result {
        Sorted::Stored(n) => ctx.int(n as i64),
        Sorted::Items(items) => {
            let mut w = ctx.reply();
            w.array(items.len());
            for it in &items {
                match it {
                    Some(b) => w.bulk(b),
                    None => w.null(),
                }
            }
            Ok(())
        }
    }
}
