//! Geo operations (Redis 7.0 `src/geo.c`): a geo set is a sorted set whose
//! scores are 52-bit geohashes (`util::geohash`), so TYPE says zset and
//! every sorted-set command works on it.
//!
//! Owns the keyspace side of GEOADD (ZADD's work with computed scores: the
//! same "zadd" notification, as Redis runs `zaddCommand` for it), the
//! position of a member, the scan of a search's nine cells over the score
//! index, the ordering of the hits, and the sorted set GEORADIUS STORE /
//! GEOSEARCHSTORE build. Parsing and replies live in the server.
use crate::keyspace::{Guard, Key};
use crate::ops::zset::{self, ZaddOutcome};
use crate::util::geohash::{self, Shape};
use crate::value::zset::{AddFlags, ScoreRange, ZSetLimits};
use crate::value::ZSetValue;
use crate::Result;
use smallvec::SmallVec;

/// GEOADD key [NX|XX] [CH] lon lat member ...: each point (already checked
/// against the limits) is turned into its score and added as ZADD would.
pub fn geoadd(
    g: &mut Guard,
    db: usize,
    k: &Key,
    flags: AddFlags,
    points: &[([f64; 2], &[u8])],
) -> Result<ZaddOutcome> {
    let pairs: SmallVec<[(f64, &[u8]); 4]> = points
        .iter()
        .map(|&([lon, lat], m)| {
            let score = geohash::encode_score(lon, lat).expect("the handler checked the limits");
            (score, m)
        })
        .collect();
    zset::zadd(g, db, k, flags, &pairs)
}

/// The point a member stands for (`longLatFromMember`), None if it is not
/// in the set.
pub fn position(z: &ZSetValue, member: &[u8]) -> Option<[f64; 2]> {
    z.score(member).map(geohash::decode_score)
}

/// One member inside a search area (`geoPoint`): its score, its decoded
/// position and its distance from the centre in metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit<'a> {
    pub member: &'a [u8],
    pub score: f64,
    pub xy: [f64; 2],
    pub dist_m: f64,
}

/// A search's hits: on the stack up to 64 (3 KiB; most searches), so a
/// search allocates nothing beyond its reply. (Redis allocates the array
/// and copies every member.)
pub type Hits<'z> = SmallVec<[Hit<'z>; 64]>;

/// Collects into `out` the members of `z` inside `shape`
/// (`membersOfAllNeighbors`): the nine cells in Redis's order, a cell
/// equal to the one scanned just before it skipped (huge radii make
/// neighbours coincide), each cell's members found by their score range
/// `[min, max)` on the sorted index. With `limit` > 0 (COUNT n ANY) the
/// scan stops once that many were found. Hits come in scan order.
pub fn search<'z>(z: &'z ZSetValue, shape: &Shape, limit: usize, out: &mut Hits<'z>) {
    let cells = geohash::areas_by_shape(shape).in_scan_order();
    let mut last: Option<geohash::Cell> = None;
    for cell in cells {
        if cell.is_zero() {
            continue;
        }
        if last == Some(cell) {
            continue;
        }
        if limit > 0 && out.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        scan_range(z, min as f64, max as f64, shape, limit, out);
        last = Some(cell);
    }
}

/// `geoGetPointsInRange`: the members with `min <= score < max` that lie
/// inside the shape.
fn scan_range<'z>(
    z: &'z ZSetValue,
    min: f64,
    max: f64,
    shape: &Shape,
    limit: usize,
    out: &mut Hits<'z>,
) {
    let range = ScoreRange {
        min,
        minex: false,
        max,
        maxex: true,
    };
    for (member, score) in z.iter_from_score(&range) {
        if !range.lte_max(score) {
            break;
        }
        let xy = geohash::decode_score(score);
        if let Some(dist_m) = geohash::within(shape, xy[0], xy[1]) {
            out.push(Hit {
                member,
                score,
                xy,
                dist_m,
            });
        }
        if limit > 0 && out.len() >= limit {
            break;
        }
    }
}

/// ASC / DESC, or the scan order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Unsorted,
    Asc,
    Desc,
}

/// Orders hits by distance. A stable sort: glibc's `qsort`, which Redis
/// 7.0 calls, is a merge sort for arrays of this size, so equal distances
/// keep their scan order there too.
pub fn sort_hits(hits: &mut [Hit], order: Order) {
    match order {
        Order::Unsorted => {}
        Order::Asc => hits.sort_by(|a, b| a.dist_m.total_cmp(&b.dist_m)),
        Order::Desc => hits.sort_by(|a, b| b.dist_m.total_cmp(&a.dist_m)),
    }
}

/// The sorted set GEORADIUS ... STORE / STOREDIST and GEOSEARCHSTORE write:
/// each hit with its geohash score, or with its distance in the request's
/// unit (`conversion` metres per unit) for STOREDIST. Built as Redis builds
/// it: a skiplist, turned into a listpack when it fits the limits.
pub fn result_set(
    hits: &[Hit],
    storedist: bool,
    conversion: f64,
    limits: &ZSetLimits,
) -> ZSetValue {
    let mut out = ZSetValue::for_size_hint(Some(hits.len()), limits);
    for h in hits {
        let score = if storedist {
            h.dist_m / conversion
        } else {
            h.score
        };
        // Distances and geohashes are never NaN, and members are distinct.
        let _ = out.add(h.member, score, AddFlags::default(), limits);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::{engine, with};
    use crate::util::geohash::ShapeKind;

    fn sicily(g: &mut Guard, k: &Key) {
        let points: [([f64; 2], &[u8]); 3] = [
            ([13.361389, 38.115556], b"Palermo"),
            ([15.087269, 37.502669], b"Catania"),
            ([2.349014, 48.864716], b"Paris"),
        ];
        let out = geoadd(g, 0, k, AddFlags::default(), &points).unwrap();
        assert_eq!(out.added, 3);
    }

    fn radius_km(center: [f64; 2], km: f64) -> Shape {
        Shape {
            center,
            kind: ShapeKind::Radius(km),
            conversion: 1000.0,
        }
    }

    #[test]
    fn geoadd_stores_geohash_scores() {
        let e = engine();
        let k = e.key(b"k");
        with(&e, |g| {
            sicily(g, &k);
            zset::view(g, 0, &k, |z| {
                let z = z.unwrap();
                assert_eq!(z.score(b"Palermo"), Some(3479099956230698.0));
                assert_eq!(z.score(b"Catania"), Some(3479447370796909.0));
                let [lon, lat] = position(z, b"Palermo").unwrap();
                assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
                assert_eq!(position(z, b"nosuch"), None);
            })
            .unwrap();
        });
    }

    #[test]
    fn search_finds_and_orders_like_redis() {
        let e = engine();
        let k = e.key(b"k");
        with(&e, |g| {
            sicily(g, &k);
            zset::view(g, 0, &k, |z| {
                let z = z.unwrap();
                let mut hits = Hits::new();
                search(z, &radius_km([15.0, 37.0], 200.0), 0, &mut hits);
                // Redis: GEORADIUS k 15 37 200 km -> Palermo, Catania.
                let names: Vec<_> = hits.iter().map(|h| h.member).collect();
                assert_eq!(names, [&b"Palermo"[..], b"Catania"]);
                sort_hits(&mut hits, Order::Asc);
                assert_eq!(hits[0].member, b"Catania");
                assert_eq!(format!("{:.4}", hits[0].dist_m / 1000.0), "56.4413");
                sort_hits(&mut hits, Order::Desc);
                assert_eq!(hits[0].member, b"Palermo");

                let mut any = Hits::new();
                search(z, &radius_km([15.0, 37.0], 200.0), 1, &mut any);
                assert_eq!(any.len(), 1);

                let mut none = Hits::new();
                search(z, &radius_km([15.0, 37.0], 0.0), 0, &mut none);
                assert!(none.is_empty());

                let mut all = Hits::new();
                search(z, &radius_km([15.0, 37.0], 5000.0), 0, &mut all);
                assert_eq!(all.len(), 3);
            })
            .unwrap();
        });
    }

    #[test]
    fn result_set_keeps_scores_or_distances() {
        let e = engine();
        let (k, d) = (e.key(b"k"), e.key(b"d"));
        with(&e, |g| {
            sicily(g, &k);
            let limits = zset::limits(g);
            let built = zset::view(g, 0, &k, |z| {
                let mut hits = Hits::new();
                search(z.unwrap(), &radius_km([15.0, 37.0], 200.0), 0, &mut hits);
                result_set(&hits, true, 1000.0, &limits)
            })
            .unwrap();
            assert_eq!(zset::store(g, 0, &d, built, "geosearchstore"), 2);
            zset::view(g, 0, &d, |z| {
                // Redis: ZSCORE after STOREDIST in km.
                let s = z.unwrap().score(b"Catania").unwrap();
                assert_eq!(s, "56.441257870158204".parse::<f64>().unwrap());
            })
            .unwrap();
            assert_eq!(zset::store(g, 0, &d, ZSetValue::new(), "geosearchstore"), 0);
            assert!(zset::view(g, 0, &d, |z| z.is_none()).unwrap());
        });
    }
}
