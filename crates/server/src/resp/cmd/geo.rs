//! Geo commands (Redis 7.0 `src/geo.c`): GEOADD, GEODIST, GEOHASH, GEOPOS,
//! GEORADIUS[_RO], GEORADIUSBYMEMBER[_RO], GEOSEARCH and GEOSEARCHSTORE.
//! Argument parsing in Redis's order, interleaved with the member lookups
//! exactly where Redis does them (so the same bad request fails with the
//! same error), and the replies: distances as bulk strings of "%.4f" in both
//! protocols, coordinates as Redis's "human" long doubles (bulk strings in
//! RESP2, doubles in RESP3), hashes as integers.
//!
//! The geometry is `cairn_engine::util::geohash`; the keyspace work
//! (GEOADD's ZADD, the scan of the nine cells) is `cairn_engine::ops::geo`.
//! Search replies are written while the shard is locked, straight from the
//! stored member bytes.
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::ctx::{Args, CmdResult, Ctx};
use crate::resp::errors::{self, CmdError};
use cairn_engine::ops::geo::{self as op, Hit, Hits, Order};
use cairn_engine::ops::zset;
use cairn_engine::util::geohash::{self, Shape, ShapeKind};
use cairn_engine::util::num;
use cairn_engine::value::zset::AddFlags;
use cairn_engine::value::ZSetValue;
use cairn_protocol::resp::{Protocol, ReplyWriter};
use smallvec::SmallVec;
use std::io::Write;

pub const COMMANDS: &[Def] = &[
    Def::new("geoadd", geoadd),
    Def::new("geodist", geodist),
    Def::new("geohash", geohash_cmd),
    Def::new("geopos", geopos),
    Def::new("georadius", georadius),
    Def::new("georadius_ro", georadius_ro),
    Def::new("georadiusbymember", georadiusbymember),
    Def::new("georadiusbymember_ro", georadiusbymember_ro),
    Def::new("geosearch", geosearch),
    Def::new("geosearchstore", geosearchstore),
];

// ---------------------------------------------------------------------------
// Arguments and reply values

/// `extractLongLatOrReply`: two floats, then Redis's limits.
fn lon_lat(a: &[u8], b: &[u8]) -> Result<[f64; 2], CmdError> {
    let lon = num::parse_f64_strict(a).ok_or(CmdError::NotFloat)?;
    let lat = num::parse_f64_strict(b).ok_or(CmdError::NotFloat)?;
    if !geohash::valid_lon_lat(lon, lat) {
        return Err(errors::geo_invalid_lon_lat(lon, lat));
    }
    Ok([lon, lat])
}

/// `extractUnitOrReply`: metres per unit. Compared as a C string, without
/// case, as Redis does.
fn unit(arg: &[u8]) -> Result<f64, CmdError> {
    let u = arg.split(|&b| b == 0).next().unwrap_or_default();
    if args::is(u, "m") {
        Ok(1.0)
    } else if args::is(u, "km") {
        Ok(1000.0)
    } else if args::is(u, "ft") {
        Ok(0.3048)
    } else if args::is(u, "mi") {
        Ok(1609.34)
    } else {
        Err(CmdError::text(errors::GEO_UNIT))
    }
}

/// `extractDistanceOrReply`: radius then unit.
fn radius(r: &[u8], u: &[u8]) -> Result<(f64, f64), CmdError> {
    let r = num::parse_f64_strict(r).ok_or(CmdError::text(errors::GEO_NEED_RADIUS))?;
    if r < 0.0 {
        return Err(CmdError::text(errors::GEO_RADIUS_NEGATIVE));
    }
    Ok((r, unit(u)?))
}

/// `extractBoxOrReply`: width, height, then unit.
fn box_sides(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), CmdError> {
    let w = num::parse_f64_strict(w).ok_or(CmdError::text(errors::GEO_NEED_WIDTH))?;
    let h = num::parse_f64_strict(h).ok_or(CmdError::text(errors::GEO_NEED_HEIGHT))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::text(errors::GEO_BOX_NEGATIVE));
    }
    Ok((w, h, unit(u)?))
}

/// Writes `v` rounded to `frac` decimals as C's "%.*f" does (the exact
/// binary value, ties to even) into `buf`, returning the length. Values
/// below 2^53 in magnitude (every coordinate and distance) are done with
/// integer arithmetic: `v = m / 2^k` exactly, so `v * 10^frac` is the
/// u128 `m * 10^frac` shifted right by `k`, and the bits shifted out decide
/// the rounding. That is a few dozen instructions where core's exact float
/// formatting falls back to bignum arithmetic for 17 digits (callgrind:
/// ~3,500 instructions per coordinate). Larger values take core's path,
/// which prints the same digits.
fn fixed(v: f64, frac: u32, buf: &mut [u8; 400]) -> usize {
    let pow10 = 10u128.pow(frac);
    let bits = v.abs().to_bits();
    let (exp, mant) = ((bits >> 52) as i32, bits & ((1u64 << 52) - 1));
    // v = m * 2^-k, with k from the exponent (subnormals have no hidden bit).
    let (m, k) = if exp == 0 {
        (mant, 1074)
    } else {
        (mant | (1u64 << 52), 1075 - exp)
    };
    if !v.is_finite() || k <= 0 {
        let mut cur = &mut buf[..];
        write!(cur, "{v:.prec$}", prec = frac as usize).expect("%f of a double fits 400 bytes");
        return 400 - cur.len();
    }
    let scaled = u128::from(m) * pow10;
    let q = if k >= 128 {
        // Below 2^-74: under half of the last place for every frac we use.
        0
    } else {
        let k = k as u32;
        let q = scaled >> k;
        let rest = scaled & ((1u128 << k) - 1);
        let half = 1u128 << (k - 1);
        if rest > half || (rest == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    let (int_part, frac_part) = (q / pow10, q % pow10);
    let mut len = 0;
    if v.is_sign_negative() {
        buf[0] = b'-';
        len = 1;
    }
    let mut ib = itoa::Buffer::new();
    let digits = ib.format(int_part).as_bytes();
    buf[len..len + digits.len()].copy_from_slice(digits);
    len += digits.len();
    if frac > 0 {
        buf[len] = b'.';
        len += 1;
        let mut f = frac_part;
        for i in (0..frac as usize).rev() {
            buf[len + i] = b'0' + (f % 10) as u8;
            f /= 10;
        }
        len += frac as usize;
    }
    len
}

/// `addReplyDoubleDistance`: "%.4f", a bulk string in both protocols.
fn reply_distance(w: &mut ReplyWriter, d: f64) {
    let mut buf = [0u8; 400];
    let len = fixed(d, 4, &mut buf);
    w.bulk(&buf[..len]);
}

/// `addReplyHumanLongDouble` of a coordinate: "%.17Lf" with the trailing
/// zeros (and a trailing point) removed, "-0" as "0"; a bulk string in
/// RESP2, a double in RESP3. The long double holds the double exactly, so
/// the decimal expansion is the double's own.
fn reply_coord(w: &mut ReplyWriter, v: f64) {
    let mut buf = [0u8; 400];
    let mut len = fixed(v, 17, &mut buf);
    if buf[..len].contains(&b'.') {
        while buf[len - 1] == b'0' {
            len -= 1;
        }
        if buf[len - 1] == b'.' {
            len -= 1;
        }
    }
    if &buf[..len] == b"-0" {
        buf[0] = b'0';
        len = 1;
    }
    let text = &buf[..len];
    if w.proto == Protocol::Resp3 {
        w.out.reserve(len + 3);
        w.out.push(b',');
        w.out.extend_from_slice(text);
        w.out.extend_from_slice(b"\r\n");
    } else {
        w.bulk(text);
    }
}

/// Runs `f` on the sorted set under argument 1 (a read lookup: WRONGTYPE
/// for another type), with a reply writer, while the shard is locked.
fn with_set<R>(
    ctx: &mut Ctx,
    f: impl FnOnce(Option<&ZSetValue>, &mut ReplyWriter) -> R,
) -> Result<R, CmdError> {
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let db = ctx.db();
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let mut g = e.lock(&ctx.cx, &k);
    Ok(zset::view(&mut g, db, &k, |z| {
        let mut w = ReplyWriter::new(out, proto);
        f(z, &mut w)
    })?)
}

// ---------------------------------------------------------------------------
// GEOADD, GEODIST, GEOHASH, GEOPOS

/// GEOADD key [NX|XX] [CH] longitude latitude member [...] → integer:
/// members added (with CH: added or moved). Every pair is checked before
/// anything is written; the set is a sorted set and the notification is
/// ZADD's "zadd".
fn geoadd(ctx: &mut Ctx) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < ctx.argc() {
        let a = ctx.arg(i);
        if args::is(a, "nx") {
            nx = true;
        } else if args::is(a, "xx") {
            xx = true;
        } else if args::is(a, "ch") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    // Redis hands an empty list on to ZADD, whose own check refuses it
    // with the same error.
    if !(ctx.argc() - i).is_multiple_of(3) || (xx && nx) || i == ctx.argc() {
        return Err(CmdError::Syntax);
    }
    let mut points: SmallVec<[([f64; 2], &[u8]); 4]> = SmallVec::new();
    for j in (i..ctx.argc()).step_by(3) {
        points.push((lon_lat(ctx.arg(j), ctx.arg(j + 1))?, ctx.arg(j + 2)));
    }
    let flags = AddFlags {
        nx,
        xx,
        ..AddFlags::default()
    };
    let e = ctx.engine();
    let k = e.key(ctx.arg(1));
    let mut g = e.lock(&ctx.cx, &k);
    let out = op::geoadd(&mut g, ctx.db(), &k, flags, &points)?;
    drop(g);
    let n = if ch {
        out.added + out.updated
    } else {
        out.added
    };
    ctx.int(n as i64)
}

/// GEODIST key member1 member2 [M|KM|FT|MI] → the distance as a bulk
/// string, or null when the key or either member is missing. The unit is
/// checked before the key.
fn geodist(ctx: &mut Ctx) -> CmdResult {
    let to_meter = match ctx.argc() {
        5 => unit(ctx.arg(4))?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let (m1, m2) = (ctx.arg(2), ctx.arg(3));
    with_set(ctx, |z, w| {
        let pair = z.and_then(|z| Some((op::position(z, m1)?, op::position(z, m2)?)));
        match pair {
            Some(([x1, y1], [x2, y2])) => {
                reply_distance(w, geohash::distance(x1, y1, x2, y2) / to_meter)
            }
            None => w.null(),
        }
    })
}

/// GEOHASH key member [...] → array of 11-character geohash strings, null
/// for a missing member (all null for a missing key).
fn geohash_cmd(ctx: &mut Ctx) -> CmdResult {
    let a = ctx.args;
    with_set(ctx, |z, w| {
        w.array(a.len() - 2);
        for m in a.iter_from(2) {
            match z.and_then(|z| z.score(m)) {
                Some(s) => w.bulk(&geohash::hash_string(s)),
                None => w.null(),
            }
        }
    })
}

/// GEOPOS key member [...] → array of [longitude, latitude] pairs, a null
/// array for a missing member.
fn geopos(ctx: &mut Ctx) -> CmdResult {
    let a = ctx.args;
    with_set(ctx, |z, w| {
        w.array(a.len() - 2);
        for m in a.iter_from(2) {
            match z.and_then(|z| op::position(z, m)) {
                Some([lon, lat]) => {
                    w.array(2);
                    reply_coord(w, lon);
                    reply_coord(w, lat);
                }
                None => w.null_array(),
            }
        }
    })
}

// ---------------------------------------------------------------------------
// The search commands

/// Which command is searching (Redis's `RADIUS_*` / `GEOSEARCH*` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS[_RO] key lon lat radius unit ...
    Radius { store: bool },
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    ByMember { store: bool },
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE dst src ...
    SearchStore,
}

impl Form {
    fn src(self) -> usize {
        if self == Form::SearchStore {
            2
        } else {
            1
        }
    }

    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    /// Whether STORE / STOREDIST key are options (the non-_RO GEORADIUS
    /// forms).
    fn store_option(self) -> bool {
        matches!(
            self,
            Form::Radius { store: true } | Form::ByMember { store: true }
        )
    }
}

/// A parsed search request (the locals of `georadiusGeneric`).
struct Request<'a> {
    center: Option<[f64; 2]>,
    kind: Option<ShapeKind>,
    conversion: f64,
    store: Option<&'a [u8]>,
    storedist: bool,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    order: Order,
    count: usize,
    any: bool,
}

/// `georadiusGeneric` up to the search: the fixed arguments, the options,
/// and the checks after them, with `z` the source set (None when the key
/// is missing). A member's position is looked up where Redis looks it up,
/// so "could not decode requested zset member" wins over any later error
/// and loses to any earlier one. With `z` None, BYMEMBER's radius is not
/// even parsed, as in Redis.
fn parse<'a>(a: Args<'a>, form: Form, z: Option<&ZSetValue>) -> Result<Request<'a>, CmdError> {
    let mut q = Request {
        center: None,
        kind: None,
        conversion: 1.0,
        store: None,
        storedist: false,
        withdist: false,
        withhash: false,
        withcoord: false,
        order: Order::Unsorted,
        count: 0,
        any: false,
    };
    let base = match form {
        Form::Radius { .. } => {
            q.center = Some(lon_lat(a.get(2), a.get(3))?);
            let (r, conv) = radius(a.get(4), a.get(5))?;
            q.kind = Some(ShapeKind::Radius(r));
            q.conversion = conv;
            6
        }
        Form::ByMember { .. } => {
            if let Some(z) = z {
                let xy = op::position(z, a.get(2)).ok_or(CmdError::text(errors::GEO_NO_MEMBER))?;
                q.center = Some(xy);
                let (r, conv) = radius(a.get(3), a.get(4))?;
                q.kind = Some(ShapeKind::Radius(r));
                q.conversion = conv;
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            q.store = Some(a.get(1));
            3
        }
    };
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let remaining = a.len() - base;
    let mut i = 0;
    while i < remaining {
        let arg = a.get(base + i);
        let has = |n: usize| i + n < remaining;
        let next = |n: usize| a.get(base + i + n);
        if args::is(arg, "withdist") {
            q.withdist = true;
        } else if args::is(arg, "withhash") {
            q.withhash = true;
        } else if args::is(arg, "withcoord") {
            q.withcoord = true;
        } else if args::is(arg, "any") {
            q.any = true;
        } else if args::is(arg, "asc") {
            q.order = Order::Asc;
        } else if args::is(arg, "desc") {
            q.order = Order::Desc;
        } else if args::is(arg, "count") && has(1) {
            let n = args::int(next(1))?;
            if n <= 0 {
                return Err(CmdError::text(errors::GEO_COUNT));
            }
            q.count = n as usize;
            i += 1;
        } else if args::is(arg, "store") && has(1) && form.store_option() {
            q.store = Some(next(1));
            q.storedist = false;
            i += 1;
        } else if args::is(arg, "storedist") && has(1) && form.store_option() {
            q.store = Some(next(1));
            q.storedist = true;
            i += 1;
        } else if args::is(arg, "storedist") && form == Form::SearchStore {
            q.storedist = true;
        } else if args::is(arg, "frommember") && has(1) && form.is_search() && !fromloc {
            if let Some(z) = z {
                let xy = op::position(z, next(1)).ok_or(CmdError::text(errors::GEO_NO_MEMBER))?;
                q.center = Some(xy);
            }
            frommember = true;
            i += 1;
        } else if args::is(arg, "fromlonlat") && has(2) && form.is_search() && !frommember {
            q.center = Some(lon_lat(next(1), next(2))?);
            fromloc = true;
            i += 2;
        } else if args::is(arg, "byradius") && has(2) && form.is_search() && !bybox {
            let (r, conv) = radius(next(1), next(2))?;
            q.kind = Some(ShapeKind::Radius(r));
            q.conversion = conv;
            byradius = true;
            i += 2;
        } else if args::is(arg, "bybox") && has(3) && form.is_search() && !byradius {
            let (w, h, conv) = box_sides(next(1), next(2), next(3))?;
            q.kind = Some(ShapeKind::Box {
                width: w,
                height: h,
            });
            q.conversion = conv;
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if q.store.is_some() && (q.withdist || q.withhash || q.withcoord) {
        return Err(CmdError::text(if form == Form::SearchStore {
            errors::GEOSEARCHSTORE_WITH
        } else {
            errors::GEORADIUS_STORE_WITH
        }));
    }
    let name = || String::from_utf8_lossy(a.get(0)).into_owned();
    if form.is_search() && !(frommember || fromloc) {
        return Err(errors::geo_from_missing(&name()));
    }
    if form.is_search() && !(byradius || bybox) {
        return Err(errors::geo_by_missing(&name()));
    }
    if q.any && q.count == 0 {
        return Err(CmdError::text(errors::GEO_ANY_NEEDS_COUNT));
    }
    // COUNT alone means the nearest ones: ascending (not with ANY, which
    // takes the first found).
    if q.count != 0 && q.order == Order::Unsorted && !q.any {
        q.order = Order::Asc;
    }
    Ok(q)
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key |
/// STOREDIST key] → array of members, each with its extras as
/// [member, dist, hash, [lon, lat]]; with STORE the count stored.
fn georadius(ctx: &mut Ctx) -> CmdResult {
    search(ctx, Form::Radius { store: true })
}

/// GEORADIUS_RO: GEORADIUS without STORE / STOREDIST.
fn georadius_ro(ctx: &mut Ctx) -> CmdResult {
    search(ctx, Form::Radius { store: false })
}

/// GEORADIUSBYMEMBER key member radius unit [options as GEORADIUS].
fn georadiusbymember(ctx: &mut Ctx) -> CmdResult {
    search(ctx, Form::ByMember { store: true })
}

/// GEORADIUSBYMEMBER_RO: GEORADIUSBYMEMBER without STORE / STOREDIST.
fn georadiusbymember_ro(ctx: &mut Ctx) -> CmdResult {
    search(ctx, Form::ByMember { store: false })
}

/// GEOSEARCH key FROMMEMBER member | FROMLONLAT lon lat BYRADIUS r unit |
/// BYBOX w h unit [ASC|DESC] [COUNT n [ANY]] [WITHCOORD] [WITHDIST]
/// [WITHHASH] → as GEORADIUS.
fn geosearch(ctx: &mut Ctx) -> CmdResult {
    search(ctx, Form::Search)
}

/// GEOSEARCHSTORE dst src [options as GEOSEARCH, no WITH*] [STOREDIST] →
/// integer: members stored.
fn geosearchstore(ctx: &mut Ctx) -> CmdResult {
    search(ctx, Form::SearchStore)
}

/// What the search did under the lock.
enum Outcome {
    /// The reply was written.
    Replied,
    /// A set to store under the destination (empty: delete it).
    Store(ZSetValue),
}

/// `georadiusGeneric`. The destination of STORE is an option, so the
/// arguments are read once without the set (which finds the same
/// destination whenever the real parse succeeds: only member lookups and
/// BYMEMBER's radius depend on the set) to know which keys to lock; the
/// real parse then runs under the lock, after the source's type check.
fn search(ctx: &mut Ctx, form: Form) -> CmdResult {
    let a = ctx.args;
    let dst = parse(a, form, None).ok().and_then(|q| q.store);
    let e = ctx.engine();
    let db = ctx.db();
    let src = e.key(a.get(form.src()));
    let keys: SmallVec<[_; 2]> = match dst {
        Some(d) => [src, e.key(d)].into_iter().collect(),
        None => [src].into_iter().collect(),
    };
    let mut g = e.lock_keys(&ctx.cx, &keys);
    let limits = zset::limits(&g);
    let (out, proto) = (&mut *ctx.out, ctx.client.proto);
    let outcome = zset::view(&mut g, db, &keys[0], |z| -> Result<Outcome, CmdError> {
        let q = parse(a, form, z)?;
        let mut w = ReplyWriter::new(out, proto);
        let Some(z) = z else {
            if q.store.is_some() {
                return Ok(Outcome::Store(ZSetValue::new()));
            }
            w.array(0);
            return Ok(Outcome::Replied);
        };
        let shape = Shape {
            center: q.center.expect("parse requires a centre"),
            kind: q.kind.expect("parse requires a shape"),
            conversion: q.conversion,
        };
        let mut hits = Hits::new();
        op::search(z, &shape, if q.any { q.count } else { 0 }, &mut hits);
        op::sort_hits(&mut hits, q.order);
        let returned = if q.count == 0 {
            hits.len()
        } else {
            hits.len().min(q.count)
        };
        let hits = &hits[..returned];
        if q.store.is_some() {
            return Ok(Outcome::Store(op::result_set(
                hits,
                q.storedist,
                q.conversion,
                &limits,
            )));
        }
        reply_hits(&mut w, &q, hits);
        Ok(Outcome::Replied)
    })??;
    match outcome {
        Outcome::Replied => Ok(()),
        Outcome::Store(z) => {
            let event = if form.is_search() {
                "geosearchstore"
            } else {
                "georadiusstore"
            };
            let n = zset::store(&mut g, db, &keys[1], z, event);
            drop(g);
            ctx.int(n as i64)
        }
    }
}

/// The search reply: a plain array of members, or with any WITH* option
/// one array per member of [member, dist, hash, [lon, lat]] (those asked).
fn reply_hits(w: &mut ReplyWriter, q: &Request, hits: &[Hit]) {
    let extras = usize::from(q.withdist) + usize::from(q.withhash) + usize::from(q.withcoord);
    w.array(hits.len());
    for h in hits {
        if extras > 0 {
            w.array(extras + 1);
        }
        w.bulk(h.member);
        if q.withdist {
            reply_distance(w, h.dist_m / q.conversion);
        }
        if q.withhash {
            w.int(h.score as i64);
        }
        if q.withcoord {
            w.array(2);
            reply_coord(w, h.xy[0]);
            reply_coord(w, h.xy[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coord(v: f64, proto: Protocol) -> Vec<u8> {
        let mut out = Vec::new();
        reply_coord(&mut ReplyWriter::new(&mut out, proto), v);
        out
    }

    fn dist(v: f64) -> Vec<u8> {
        let mut out = Vec::new();
        reply_distance(&mut ReplyWriter::new(&mut out, Protocol::Resp2), v);
        out
    }

    #[test]
    fn coordinates_print_like_redis() {
        // Palermo's score, as GEOPOS answers it on Redis 7.0.15.
        let [lon, lat] = geohash::decode_score(3479099956230698.0);
        assert_eq!(
            coord(lon, Protocol::Resp2),
            b"$20\r\n13.36138933897018433\r\n"
        );
        assert_eq!(coord(lat, Protocol::Resp3), b",38.11555639549629859\r\n");
        assert_eq!(coord(180.0, Protocol::Resp2), b"$3\r\n180\r\n");
        assert_eq!(coord(-0.0, Protocol::Resp2), b"$1\r\n0\r\n");
        assert_eq!(coord(0.5, Protocol::Resp2), b"$3\r\n0.5\r\n");
    }

    /// `fixed` against core's exact formatting (the same digits as glibc's
    /// "%.*f") over many doubles of every magnitude a reply can carry.
    #[test]
    fn fixed_matches_exact_formatting() {
        let mut x: u64 = 0x9E3779B97F4A7C15;
        let check = |v: f64| {
            for frac in [4u32, 17] {
                let mut buf = [0u8; 400];
                let len = fixed(v, frac, &mut buf);
                let want = format!("{v:.prec$}", prec = frac as usize);
                assert_eq!(
                    std::str::from_utf8(&buf[..len]).unwrap(),
                    want,
                    "{v:e} frac {frac}"
                );
            }
        };
        for v in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            0.25,
            0.125,
            0.03125,
            0.00005,
            1.00625,
            180.0,
            -180.0,
            85.05112878,
            -85.05112878,
            1e-20,
            -1e-20,
            5e-324,
            1e-5,
            0.99999999999999999,
            9007199254740991.0,
            9007199254740992.0,
            1e300,
            2.5e-5,
        ] {
            check(v);
        }
        for _ in 0..200_000 {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545F4914F6CDD1D);
            // Random bits within the coordinate and distance ranges, and
            // random small exponents.
            let v = f64::from_bits(r);
            if v.is_finite() && v.abs() < 1e17 {
                check(v);
            }
            check((r >> 11) as f64 / (1u64 << 53) as f64 * 360.0 - 180.0);
            check((r >> 11) as f64 / (1u64 << 53) as f64 * 4e7);
        }
    }

    #[test]
    fn distances_print_like_redis() {
        assert_eq!(dist(166274.15156960033), b"$11\r\n166274.1516\r\n");
        assert_eq!(dist(0.0), b"$6\r\n0.0000\r\n");
    }
}
