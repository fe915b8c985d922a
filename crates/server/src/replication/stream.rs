//! The replication stream's bytes: the engine's records of one unit (one
//! command's, one transaction's: `cairn_engine::record`) written as the
//! RESP commands a Redis master propagates (server.c
//! `propagatePendingCommands`, replication.c `replicationFeedSlaves`):
//!
//! - `SELECT <db>` before a record whose database is not the one the
//!   stream last selected (the stream starts with none selected, so its
//!   first command is preceded by one, as after Redis creates a backlog);
//! - a unit of several records inside `MULTI` ... `EXEC`, with the SELECT
//!   for the first record before the MULTI (Redis selects the first
//!   command's database for the MULTI), so the replica applies it whole;
//! - a `Wire` record as the request's own bytes (always one RESP
//!   multibulk: the worker records inline commands as `Command`);
//! - a `Command` record as a multibulk of its arguments;
//! - an `Item` record (a memcached write's resulting state) as
//!   `SET key value [PXAT <ms>]`: the memcached client flags are not sent,
//!   so a replica holds the value as a plain string (a Cairn replica will
//!   get a private form keeping them once it announces itself; next step).
//!
//! This knows no sockets and no locks: `Replication` calls it under its
//! stream lock.
use cairn_engine::record::{decode_unit, Tag};

/// Appends `unit`'s records to `out` as RESP commands; `db` is the
/// database the stream last selected, updated. A unit that does not decode
/// (a bug in the engine) writes nothing and is an Err naming why.
pub fn unit(unit: &[u8], db: &mut Option<usize>, out: &mut Vec<u8>) -> Result<(), &'static str> {
    let (len, was) = (out.len(), *db);
    let r = unit_into(unit, db, out);
    if r.is_err() {
        out.truncate(len);
        *db = was;
    }
    r
}

fn unit_into(unit: &[u8], db: &mut Option<usize>, out: &mut Vec<u8>) -> Result<(), &'static str> {
    let recs = decode_unit(unit).map_err(|(_, why)| why)?;
    let multi = recs.len() > 1;
    if multi {
        select(recs[0].db, db, out);
        command(out, &[b"MULTI"]);
    }
    for r in &recs {
        select(r.db, db, out);
        match r.tag {
            Tag::Wire => out.extend_from_slice(r.args[0]),
            Tag::Command => command(out, &r.args),
            Tag::Item => item(out, &r.args)?,
        }
    }
    if multi {
        command(out, &[b"EXEC"]);
    }
    Ok(())
}

/// `SELECT <to>` if the stream is not there yet.
pub fn select(to: usize, db: &mut Option<usize>, out: &mut Vec<u8>) {
    if *db != Some(to) {
        let n = to.to_string();
        command(out, &[b"SELECT", n.as_bytes()]);
        *db = Some(to);
    }
}

/// One command as a RESP multibulk.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// An item record (key, value, flags u32 LE, expire ms u64 LE, 0 = none)
/// as `SET key value [PXAT ms]`.
fn item(out: &mut Vec<u8>, args: &[&[u8]]) -> Result<(), &'static str> {
    let [key, value, _flags, at] = args[..] else {
        return Err("an item record needs 4 fields");
    };
    let at: [u8; 8] = at.try_into().map_err(|_| "bad item expire time")?;
    match u64::from_le_bytes(at) {
        0 => command(out, &[b"SET", key, value]),
        ms => {
            let ms = ms.to_string();
            command(out, &[b"SET", key, value, b"PXAT", ms.as_bytes()]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_engine::record::{encode, put_wire};

    const INCR: &[u8] = b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n";

    /// A lone `Wire` record as `State::feed_wire` writes it.
    fn wire(rec_db: usize, raw: &[u8], db: &mut Option<usize>, out: &mut Vec<u8>) {
        select(rec_db, db, out);
        out.extend_from_slice(raw);
    }

    fn cmd(args: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        command(&mut v, args);
        v
    }

    #[test]
    fn a_lone_record_is_selected_once() {
        let mut db = None;
        let mut out = Vec::new();
        wire(0, INCR, &mut db, &mut out);
        wire(0, INCR, &mut db, &mut out);
        let mut want = cmd(&[b"SELECT", b"0"]);
        want.extend_from_slice(INCR);
        want.extend_from_slice(INCR);
        assert_eq!(out, want);
        // The same through the general path, into another database.
        let mut u = Vec::new();
        put_wire(&mut u, 3, INCR);
        out.clear();
        unit(&u, &mut db, &mut out).unwrap();
        let mut want = cmd(&[b"SELECT", b"3"]);
        want.extend_from_slice(INCR);
        assert_eq!(out, want);
        assert_eq!(db, Some(3));
    }

    #[test]
    fn a_unit_of_several_records_is_a_transaction() {
        let mut u = Vec::new();
        encode(&mut u, Tag::Command, 1, [&b"DEL"[..], b"old"].into_iter());
        put_wire(&mut u, 2, INCR);
        let mut db = Some(0);
        let mut out = Vec::new();
        unit(&u, &mut db, &mut out).unwrap();
        let mut want = cmd(&[b"SELECT", b"1"]);
        want.extend(cmd(&[b"MULTI"]));
        want.extend(cmd(&[b"DEL", b"old"]));
        want.extend(cmd(&[b"SELECT", b"2"]));
        want.extend_from_slice(INCR);
        want.extend(cmd(&[b"EXEC"]));
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want)
        );
    }

    #[test]
    fn items_are_sets_with_absolute_expiry() {
        let mut u = Vec::new();
        let flags = 7u32.to_le_bytes();
        let never = 0u64.to_le_bytes();
        let at = 1_700_000_000_123u64.to_le_bytes();
        encode(
            &mut u,
            Tag::Item,
            0,
            [&b"k"[..], b"v", &flags, &never].into_iter(),
        );
        let mut db = Some(0);
        let mut out = Vec::new();
        unit(&u, &mut db, &mut out).unwrap();
        assert_eq!(out, cmd(&[b"SET", b"k", b"v"]));
        u.clear();
        encode(
            &mut u,
            Tag::Item,
            0,
            [&b"k"[..], b"v", &flags, &at].into_iter(),
        );
        out.clear();
        unit(&u, &mut db, &mut out).unwrap();
        assert_eq!(out, cmd(&[b"SET", b"k", b"v", b"PXAT", b"1700000000123"]));
        // A broken unit writes nothing.
        out.clear();
        assert!(unit(&u[..u.len() - 1], &mut db, &mut out).is_err());
        assert!(out.is_empty());
    }
}
