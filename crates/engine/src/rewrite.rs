//! The deterministic forms of writes whose effect depends on the clock, on
//! chance or on waiting: what the journal records in their place (and what
//! replication will send), following Redis 7.0's propagation rules
//! (`alsoPropagate`, `rewriteClientCommandVector`). This file is the one
//! owner of those forms; a handler names the form, never spells its words.
//!
//! | the write | is recorded as |
//! |---|---|
//! | SET/SETEX/PSETEX with a relative or absolute TTL | `SET key value PXAT ms` |
//! | GETEX with a TTL / with a TTL already past / PERSIST | `PEXPIREAT key ms` / `DEL key` / `PERSIST key` |
//! | GETDEL | `DEL key` |
//! | EXPIRE family (relative or absolute) / past deadline | `PEXPIREAT key ms [flags]` / `DEL key` |
//! | INCRBYFLOAT, HINCRBYFLOAT | `SET key value KEEPTTL`, `HSET key field value` |
//! | SPOP | `SREM key member...` |
//! | BLPOP/BRPOP | `LPOP`/`RPOP key` |
//! | BLMOVE/BRPOPLPUSH | `LMOVE src dst LEFT\|RIGHT LEFT\|RIGHT` |
//! | LMPOP/BLMPOP | `LPOP key n` / `RPOP key n` (Redis 7.0's `mpopGenericCommand`) |
//! | BZPOPMIN/BZPOPMAX/ZMPOP/BZMPOP | `ZPOPMIN`/`ZPOPMAX key n` |
//! | memcached delete by refusal, flush_all | `DEL key`, `FLUSHDB` |
//! | RESTORE with a relative TTL / a deadline already past with REPLACE | `RESTORE key at_ms payload ... ABSTTL` / `DEL key` |
//! | MIGRATE without COPY | `DEL key...` of the keys the target took |
//!
//! Each function stages its form for the next guard of `cx` that writes
//! (`record::stage`): a guard that changes nothing records nothing. With
//! the journal off, each costs one relaxed load: nothing is formatted or
//! collected for a record nobody keeps.
use crate::cx::Cx;
use crate::keyspace::Engine;
use crate::ops::list::End;
use crate::record::stage;

fn side(end: End) -> &'static [u8] {
    match end {
        End::Left => b"LEFT",
        End::Right => b"RIGHT",
    }
}

/// `DEL key`: a write that removed the key (a deadline already past).
pub fn del(e: &Engine, cx: &Cx, db: usize, key: &[u8]) {
    stage(e, cx, db, &[b"DEL", key]);
}

/// `PERSIST key`: GETEX PERSIST that removed a TTL.
pub fn persist(e: &Engine, cx: &Cx, db: usize, key: &[u8]) {
    stage(e, cx, db, &[b"PERSIST", key]);
}

/// `DEL key...`: MIGRATE's removal of the keys the target acknowledged.
pub fn del_keys(e: &Engine, cx: &Cx, db: usize, keys: &[&[u8]]) {
    if !e.journal_on() {
        return;
    }
    let mut rec: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
    rec.push(b"DEL");
    rec.extend_from_slice(keys);
    stage(e, cx, db, &rec);
}

/// `RESTORE key at_ms payload [options...] ABSTTL`: a RESTORE whose TTL was
/// relative, made absolute (Redis rewrites the TTL argument and appends
/// ABSTTL). `args` is the command as sent, name first.
pub fn restore_absttl(e: &Engine, cx: &Cx, db: usize, args: &[&[u8]], at_ms: u64) {
    if !e.journal_on() {
        return;
    }
    let mut at = itoa::Buffer::new();
    let mut rec: Vec<&[u8]> = args.to_vec();
    rec[2] = at.format(at_ms).as_bytes();
    rec.push(b"ABSTTL");
    stage(e, cx, db, &rec);
}

/// `FLUSHDB` in `db` (memcached's flush_all).
pub fn flushdb(e: &Engine, cx: &Cx, db: usize) {
    stage(e, cx, db, &[b"FLUSHDB"]);
}

/// `SET key value PXAT at_ms`: a SET with any TTL, made absolute.
pub fn set_pxat(e: &Engine, cx: &Cx, db: usize, key: &[u8], value: &[u8], at_ms: u64) {
    if !e.journal_on() {
        return;
    }
    let mut at = itoa::Buffer::new();
    let at = at.format(at_ms).as_bytes();
    stage(e, cx, db, &[b"SET", key, value, b"PXAT", at]);
}

/// `SET key value KEEPTTL`: a computed string value (INCRBYFLOAT), so
/// replay does not redo float arithmetic.
pub fn set_keepttl(e: &Engine, cx: &Cx, db: usize, key: &[u8], value: &[u8]) {
    stage(e, cx, db, &[b"SET", key, value, b"KEEPTTL"]);
}

/// `PEXPIREAT key at_ms [flags...]`: a TTL set relatively or in seconds,
/// made absolute in milliseconds; `flags` (NX, XX, GT, LT) as given.
pub fn pexpireat<'a>(
    e: &Engine,
    cx: &Cx,
    db: usize,
    key: &[u8],
    at_ms: u64,
    flags: impl Iterator<Item = &'a [u8]>,
) {
    if !e.journal_on() {
        return;
    }
    let mut at = itoa::Buffer::new();
    let mut rec: Vec<&[u8]> = vec![b"PEXPIREAT", key, at.format(at_ms).as_bytes()];
    for f in flags {
        rec.push(f);
    }
    stage(e, cx, db, &rec);
}

/// `HSET key field value`: a computed field value (HINCRBYFLOAT).
pub fn hset(e: &Engine, cx: &Cx, db: usize, key: &[u8], field: &[u8], value: &[u8]) {
    stage(e, cx, db, &[b"HSET", key, field, value]);
}

/// `SREM key member...`: the members SPOP chose at random.
pub fn srem<'a>(
    e: &Engine,
    cx: &Cx,
    db: usize,
    key: &[u8],
    members: impl Iterator<Item = &'a [u8]>,
) {
    if !e.journal_on() {
        return;
    }
    let mut rec: Vec<&[u8]> = vec![b"SREM", key];
    for m in members {
        rec.push(m);
    }
    stage(e, cx, db, &rec);
}

/// `LPOP key` / `RPOP key`: a served BLPOP/BRPOP, on the key it served.
pub fn pop(e: &Engine, cx: &Cx, db: usize, end: End, key: &[u8]) {
    let name: &[u8] = match end {
        End::Left => b"LPOP",
        End::Right => b"RPOP",
    };
    stage(e, cx, db, &[name, key]);
}

/// `LMOVE src dst FROM TO`: a served BLMOVE/BRPOPLPUSH.
pub fn lmove(e: &Engine, cx: &Cx, db: usize, src: &[u8], dst: &[u8], from: End, to: End) {
    stage(e, cx, db, &[b"LMOVE", src, dst, side(from), side(to)]);
}

/// `LPOP key n` / `RPOP key n`: LMPOP/BLMPOP on the key it served, as
/// Redis 7.0 propagates them (`mpopGenericCommand`).
pub fn lmpop(e: &Engine, cx: &Cx, db: usize, key: &[u8], end: End, count: usize) {
    if !e.journal_on() {
        return;
    }
    let mut c = itoa::Buffer::new();
    let c = c.format(count).as_bytes();
    let name: &[u8] = match end {
        End::Left => b"LPOP",
        End::Right => b"RPOP",
    };
    stage(e, cx, db, &[name, key, c]);
}

/// `ZPOPMIN key n` / `ZPOPMAX key n`: BZPOPMIN/BZPOPMAX/ZMPOP/BZMPOP on the
/// key they served.
pub fn zpop(e: &Engine, cx: &Cx, db: usize, max: bool, key: &[u8], count: usize) {
    if !e.journal_on() {
        return;
    }
    let mut c = itoa::Buffer::new();
    let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
    stage(e, cx, db, &[name, key, c.format(count).as_bytes()]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cx::CmdState;
    use crate::record::{decode_unit, Sink};
    use crate::{Expiry, Options, Value};
    use parking_lot::Mutex;
    use std::sync::Arc;

    /// A sink that keeps every unit.
    #[derive(Default)]
    struct Units(Mutex<Vec<Vec<u8>>>);

    impl Sink for Units {
        fn append_with(&self, fill: &mut dyn FnMut(&mut Vec<u8>)) -> u64 {
            let mut u = Vec::new();
            fill(&mut u);
            let n = u.len() as u64;
            if n > 0 {
                self.0.lock().push(u);
            }
            n
        }
    }

    /// Stages `form` for a write of key `k`, returns what was recorded.
    fn recorded(form: impl Fn(&Engine, &Cx)) -> Vec<Vec<Vec<u8>>> {
        let e = Engine::new(Options::default());
        let sink = Arc::new(Units::default());
        e.set_journal(Some(sink.clone()));
        let state = CmdState::new();
        let cx = Cx::command(0, None, 0, &state);
        form(&e, &cx);
        let k = e.key(b"k");
        let mut g = e.lock(&cx, &k);
        g.set(
            0,
            &k,
            Value::Str(crate::value::StrValue::from_bytes(b"v")),
            Expiry::Clear,
        );
        drop(g);
        let units = sink.0.lock();
        let recs = decode_unit(&units[0]).unwrap();
        recs.iter()
            .map(|r| r.args.iter().map(|a| a.to_vec()).collect())
            .collect()
    }

    /// A form to stage, and the words it must be recorded as.
    type Case = (Box<dyn Fn(&Engine, &Cx)>, Vec<&'static str>);

    fn words(ws: &[&str]) -> Vec<Vec<u8>> {
        ws.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn each_form_is_recorded_as_redis_propagates_it() {
        let cases: Vec<Case> = vec![
            (Box::new(|e, cx| del(e, cx, 0, b"k")), vec!["DEL", "k"]),
            (Box::new(|e, cx| flushdb(e, cx, 0)), vec!["FLUSHDB"]),
            (
                Box::new(|e, cx| persist(e, cx, 0, b"k")),
                vec!["PERSIST", "k"],
            ),
            (
                Box::new(|e, cx| set_pxat(e, cx, 0, b"k", b"v", 1234)),
                vec!["SET", "k", "v", "PXAT", "1234"],
            ),
            (
                Box::new(|e, cx| set_keepttl(e, cx, 0, b"k", b"1.5")),
                vec!["SET", "k", "1.5", "KEEPTTL"],
            ),
            (
                Box::new(|e, cx| pexpireat(e, cx, 0, b"k", 99, [&b"NX"[..]].into_iter())),
                vec!["PEXPIREAT", "k", "99", "NX"],
            ),
            (
                Box::new(|e, cx| hset(e, cx, 0, b"k", b"f", b"2.5")),
                vec!["HSET", "k", "f", "2.5"],
            ),
            (
                Box::new(|e, cx| srem(e, cx, 0, b"k", [&b"a"[..], b"b"].into_iter())),
                vec!["SREM", "k", "a", "b"],
            ),
            (
                Box::new(|e, cx| pop(e, cx, 0, End::Right, b"k")),
                vec!["RPOP", "k"],
            ),
            (
                Box::new(|e, cx| lmove(e, cx, 0, b"k", b"d", End::Left, End::Right)),
                vec!["LMOVE", "k", "d", "LEFT", "RIGHT"],
            ),
            (
                Box::new(|e, cx| lmpop(e, cx, 0, b"k", End::Left, 3)),
                vec!["LPOP", "k", "3"],
            ),
            (
                Box::new(|e, cx| lmpop(e, cx, 0, b"k", End::Right, 1)),
                vec!["RPOP", "k", "1"],
            ),
            (
                Box::new(|e, cx| zpop(e, cx, 0, true, b"k", 2)),
                vec!["ZPOPMAX", "k", "2"],
            ),
        ];
        for (form, want) in cases {
            assert_eq!(recorded(form), vec![words(&want)]);
        }
    }
}
