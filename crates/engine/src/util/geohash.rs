//! Redis's geohash: the 52-bit interleaved cell index a geo set stores as a
//! sorted-set score, and the geometry of the geo commands (Redis 7.0
//! `src/geohash.c`, `src/geohash_helper.c`, and the helpers of `src/geo.c`
//! that only compute).
//!
//! Owns encoding a longitude/latitude into a 26-step cell (latitude in the
//! even bits, longitude in the odd ones), decoding a cell back to its
//! centre, the eight neighbours of a cell, the step and the nine cells a
//! radius or box search scans, the haversine distance and the radius and
//! box membership tests, and the 11-character base32 GEOHASH string. It
//! knows nothing of keys or sorted sets (`ops::geo` scans those).
//!
//! Every computation follows Redis's C expression for expression, in the
//! same order and with the same libm calls, because the commands' results
//! (coordinates to 17 decimals, distances to 4, which members fall inside a
//! radius) must match Redis's to the last digit. Where Redis 7.0.15 differs
//! from later releases (the distance and the box test), this is 7.0.15.

use std::f64::consts::PI;

/// Redis's `GEO_LONG_MIN` .. `GEO_LONG_MAX`.
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Redis's `GEO_LAT_MIN` .. `GEO_LAT_MAX`: the limits of EPSG:900913, so
/// the poles cannot be indexed.
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// `GEO_STEP_MAX`: 26 steps of two bits, 52 bits in all, which a double
/// holds exactly.
pub const STEP_MAX: u8 = 26;
/// `EARTH_RADIUS_IN_METERS`: the WGS-84 quadratic mean radius.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// `MERCATOR_MAX`, the half-circumference `geohashEstimateStepsByRadius`
/// doubles up to.
const MERCATOR_MAX: f64 = 20037726.37;
/// `D_R`, `M_PI / 180.0`.
const D_R: f64 = PI / 180.0;

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A coordinate interval (`GeoHashRange`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    fn is_zero(&self) -> bool {
        self.min == 0.0 && self.max == 0.0
    }
}

/// The ranges cells are cut from (`geohashGetCoordRange`).
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// A cell: `step` levels of subdivision, `2 * step` significant bits
/// (`GeoHashBits`). The all-zero value is Redis's "no cell" (`GZERO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

impl Cell {
    /// `HASHISZERO`.
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// `geohashAlign52Bits`: the cell's bits as the top of a 52-bit score.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }

    /// `scoresOfGeoHashBox`: the scores `[min, max)` of every point inside
    /// the cell.
    pub fn score_range(&self) -> (u64, u64) {
        let next = Cell {
            bits: self.bits.wrapping_add(1),
            step: self.step,
        };
        (self.align52(), next.align52())
    }
}

/// A cell's extent (`GeoHashArea`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub longitude: Range,
    pub latitude: Range,
}

/// Spreads the low 32 bits of `x` into the even bits and those of `y` into
/// the odd bits (`interleave64`).
fn interleave(x: u32, y: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(x), u64::from(y));
    for k in (0..5).rev() {
        x = (x | (x << S[k])) & B[k];
        y = (y | (y << S[k])) & B[k];
    }
    x | (y << 1)
}

/// The inverse of [`interleave`]: even bits in the low half, odd bits in
/// the high half (`deinterleave64`).
fn deinterleave(v: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (v, v >> 1);
    for k in 0..6 {
        x = (x | (x >> S[k])) & B[k];
        y = (y | (y >> S[k])) & B[k];
    }
    x | (y << 32)
}

/// `geohashEncode`: the cell of `step` levels holding the point, within the
/// given ranges. None outside Redis's limits or the ranges, or for a step
/// outside 1..=32.
pub fn encode(long_range: Range, lat_range: Range, lon: f64, lat: f64, step: u8) -> Option<Cell> {
    if step > 32 || step == 0 || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < long_range.min || lon > long_range.max {
        return None;
    }
    let mut lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min);
    let mut long_offset = (lon - long_range.min) / (long_range.max - long_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    // C's double to uint32_t conversion truncates, as `as` does; the
    // offsets lie in [0, 2^step].
    Some(Cell {
        bits: interleave(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// `geohashEncodeWGS84`.
pub fn encode_wgs84(lon: f64, lat: f64, step: u8) -> Option<Cell> {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, step)
}

/// `geohashDecode`: the extent of a cell within the given ranges.
pub fn decode(long_range: Range, lat_range: Range, cell: Cell) -> Option<Area> {
    if cell.is_zero() || lat_range.is_zero() || long_range.is_zero() {
        return None;
    }
    let sep = deinterleave(cell.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << cell.step) as f64;
    // uint32_t arithmetic in C: `ilato + 1` wraps.
    Some(Area {
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) * 1.0 / div) * lat_scale,
            max: lat_range.min + (f64::from(ilato.wrapping_add(1)) * 1.0 / div) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) * 1.0 / div) * long_scale,
            max: long_range.min + (f64::from(ilono.wrapping_add(1)) * 1.0 / div) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: the centre of the area, clamped to the
/// limits (the cells of the last row and column reach past them).
pub fn area_center(a: &Area) -> [f64; 2] {
    let lon = ((a.longitude.min + a.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.latitude.min + a.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)d` as x86-64 compilers emit it, for scores that are not
/// geohashes (a member added with ZADD): negative values wrap, values past
/// the range give 0 or the sign bit, instead of Rust's saturation.
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    // `cvttsd2si`: the "integer indefinite" value for NaN and overflow.
    let cvtt = |v: f64| -> i64 {
        if v.is_nan() || !(-TWO63..TWO63).contains(&v) {
            i64::MIN
        } else {
            v as i64
        }
    };
    if d < TWO63 {
        cvtt(d) as u64
    } else {
        (cvtt(d - TWO63) as u64) ^ (1u64 << 63)
    }
}

/// `decodeGeohash`: the point a geo set's score stands for (its cell's
/// centre). A score is always decodable; Redis's failure path needs a zero
/// step, which a stored score never has.
pub fn decode_score(score: f64) -> [f64; 2] {
    let cell = Cell {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    let area = decode(LONG_RANGE, LAT_RANGE, cell).expect("a 26-step cell always decodes");
    area_center(&area)
}

/// The score GEOADD stores for a point already checked against the
/// limits (`geohashEncodeWGS84` at 26 steps, aligned to 52 bits).
pub fn encode_score(lon: f64, lat: f64) -> Option<f64> {
    encode_wgs84(lon, lat, STEP_MAX).map(|c| c.align52() as f64)
}

/// Whether a longitude/latitude pair is inside Redis's limits
/// (`extractLongLatOrReply`).
pub fn valid_lon_lat(lon: f64, lat: f64) -> bool {
    (LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// The standard base32 geohash alphabet.
const BASE32: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";

/// GEOHASH's string for a score: the point decoded, re-encoded over the
/// standard latitude range -90..90 (Redis's own cells span -85..85), and 10
/// base32 digits of its 52 bits plus a final '0' (Redis has only 52 bits
/// but answers the usual 11 characters).
pub fn hash_string(score: f64) -> [u8; 11] {
    let [lon, lat] = decode_score(score);
    let bits = encode(
        Range {
            min: -180.0,
            max: 180.0,
        },
        Range {
            min: -90.0,
            max: 90.0,
        },
        lon,
        lat,
        STEP_MAX,
    )
    // A decoded centre is clamped into the limits, which lie inside
    // these ranges.
    .map_or(0, |c| c.bits);
    let mut out = [BASE32[0]; 11];
    for (i, slot) in out.iter_mut().enumerate().take(10) {
        *slot = BASE32[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

// ---------------------------------------------------------------------------
// Neighbours

/// `geohash_move_x`: one cell east (`d > 0`) or west, wrapping around.
fn move_x(cell: &mut Cell, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(cell.step) * 2;
    let mut x = cell.bits & 0xaaaaaaaaaaaaaaaa;
    let y = cell.bits & 0x5555555555555555;
    let zz = 0x5555555555555555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> shift;
    cell.bits = x | y;
}

/// `geohash_move_y`: one cell north (`d > 0`) or south, wrapping around.
fn move_y(cell: &mut Cell, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(cell.step) * 2;
    let x = cell.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = cell.bits & 0x5555555555555555;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> shift;
    cell.bits = x | y;
}

/// The eight cells around one (`GeoHashNeighbors`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Neighbors {
    pub north: Cell,
    pub east: Cell,
    pub west: Cell,
    pub south: Cell,
    pub north_east: Cell,
    pub south_east: Cell,
    pub north_west: Cell,
    pub south_west: Cell,
}

/// `geohashNeighbors`.
pub fn neighbors(c: Cell) -> Neighbors {
    let at = |dx: i8, dy: i8| {
        let mut n = c;
        move_x(&mut n, dx);
        move_y(&mut n, dy);
        n
    };
    Neighbors {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

// ---------------------------------------------------------------------------
// Search areas

/// `geohashEstimateStepsByRadius`: the coarsest step whose cells still
/// cover a radius of `range_m` around a point at latitude `lat`.
pub fn estimate_steps_by_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    // Make sure the range is included in most of the base cases.
    step -= 2;
    // Wider cells towards the poles (an approximation Redis keeps).
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// What a search covers (`GeoShape`): a circle or an axis-aligned box
/// around a centre, in the request's unit (`conversion` metres per unit).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    /// Longitude, latitude.
    pub center: [f64; 2],
    pub kind: ShapeKind,
    /// Metres per unit of the request (m 1, km 1000, ft 0.3048, mi 1609.34).
    pub conversion: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// `geohashBoundingBox`: `[min_lon, min_lat, max_lon, max_lat]` of the
/// search area. The longitude span is taken at the box edge nearer the
/// pole, where it is widest.
pub fn bounding_box(s: &Shape) -> [f64; 4] {
    let [longitude, latitude] = s.center;
    let (height, width) = match s.kind {
        ShapeKind::Radius(r) => (s.conversion * r, s.conversion * r),
        ShapeKind::Box { width, height } => {
            (s.conversion * (height / 2.0), s.conversion * (width / 2.0))
        }
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS_M);
    let long_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    let long_delta = if southern {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        longitude - long_delta,
        latitude - lat_delta,
        longitude + long_delta,
        latitude + lat_delta,
    ]
}

/// The nine cells a search scans (`GeoHashRadius`): the centre's cell and
/// its neighbours, those the area cannot reach zeroed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchCells {
    pub hash: Cell,
    pub neighbors: Neighbors,
    pub area: Area,
}

impl SearchCells {
    /// In Redis's scan order (`membersOfAllNeighbors`).
    pub fn in_scan_order(&self) -> [Cell; 9] {
        let n = &self.neighbors;
        [
            self.hash,
            n.north,
            n.south,
            n.east,
            n.west,
            n.north_east,
            n.north_west,
            n.south_east,
            n.south_west,
        ]
    }
}

/// `geohashCalculateAreasByShapeWGS84`.
pub fn areas_by_shape(s: &Shape) -> SearchCells {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(s);
    let [longitude, latitude] = s.center;
    // A box's cells must reach its corners.
    let radius_m = match s.kind {
        ShapeKind::Radius(r) => r,
        ShapeKind::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * s.conversion;
    let mut steps = estimate_steps_by_radius(radius_m, latitude);
    let cells_at = |steps: u8| {
        let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or_default();
        let nb = neighbors(hash);
        (hash, nb)
    };
    let decode_or_zero = |c: Cell| {
        decode(LONG_RANGE, LAT_RANGE, c).unwrap_or(Area {
            longitude: Range { min: 0.0, max: 0.0 },
            latitude: Range { min: 0.0, max: 0.0 },
        })
    };
    let (mut hash, mut nb) = cells_at(steps);
    let mut area = decode_or_zero(hash);

    // The estimated step can be one too fine when the area sits near the
    // edge of the centre cell: a neighbour then fails to reach it.
    let decrease = {
        let north = decode_or_zero(nb.north);
        let south = decode_or_zero(nb.south);
        let east = decode_or_zero(nb.east);
        let west = decode_or_zero(nb.west);
        north.latitude.max < max_lat
            || south.latitude.min > min_lat
            || east.longitude.max < max_lon
            || west.longitude.min > min_lon
    };
    if steps > 1 && decrease {
        steps -= 1;
        (hash, nb) = cells_at(steps);
        area = decode_or_zero(hash);
    }

    // Drop the neighbours on a side the area does not reach.
    if steps >= 2 {
        if area.latitude.min < min_lat {
            nb.south = Cell::default();
            nb.south_west = Cell::default();
            nb.south_east = Cell::default();
        }
        if area.latitude.max > max_lat {
            nb.north = Cell::default();
            nb.north_east = Cell::default();
            nb.north_west = Cell::default();
        }
        if area.longitude.min < min_lon {
            nb.west = Cell::default();
            nb.south_west = Cell::default();
            nb.north_west = Cell::default();
        }
        if area.longitude.max > max_lon {
            nb.east = Cell::default();
            nb.south_east = Cell::default();
            nb.north_east = Cell::default();
        }
    }
    SearchCells {
        hash,
        neighbors: nb,
        area,
    }
}

// ---------------------------------------------------------------------------
// Distances

/// `geohashGetDistance` as of Redis 7.0: the haversine great-circle
/// distance in metres.
pub fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lat1r = deg_rad(lat1d);
    let lon1r = deg_rad(lon1d);
    let lat2r = deg_rad(lat2d);
    let lon2r = deg_rad(lon2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let v = ((lon2r - lon1r) / 2.0).sin();
    2.0 * EARTH_RADIUS_M * (u * u + lat1r.cos() * lat2r.cos() * v * v).sqrt().asin()
}

/// `geoWithinShape` after decoding: the distance from the shape's centre
/// to the point, if the point is inside. A circle compares the distance
/// with the radius; a box (7.0's `geohashGetDistanceIfInRectangle`)
/// compares the east-west distance along the point's parallel and the
/// north-south distance along its meridian with half the sides.
///
/// Most points a search tests lie outside (the nine cells cover several
/// times the area), and the haversine costs five libm calls. So a point is
/// first refused without any when its latitude alone puts it out of reach:
/// a great-circle distance is at least `R * |lat2 - lat1|` (in radians),
/// and the north-south distance of the box test is that very quantity. The
/// margin (a millionth, plus a millimetre) is far wider than the rounding
/// of the haversine, which near antipodes (asin close to 1) can reach some
/// 1e-8 relative, so a point this refuses is one Redis refuses too.
pub fn within(s: &Shape, lon: f64, lat: f64) -> Option<f64> {
    let y1 = s.center[1];
    let reach = match s.kind {
        ShapeKind::Radius(r) => r * s.conversion,
        ShapeKind::Box { height, .. } => height * s.conversion / 2.0,
    };
    if EARTH_RADIUS_M * (deg_rad(lat) - deg_rad(y1)).abs() > reach * (1.0 + 1e-6) + 1e-3 {
        return None;
    }
    within_exact(s, lon, lat)
}

/// [`within`] without the latitude shortcut: Redis's computation alone.
fn within_exact(s: &Shape, lon: f64, lat: f64) -> Option<f64> {
    let [x1, y1] = s.center;
    match s.kind {
        ShapeKind::Radius(r) => {
            let d = distance(x1, y1, lon, lat);
            (d <= r * s.conversion).then_some(d)
        }
        ShapeKind::Box { width, height } => {
            let (width_m, height_m) = (width * s.conversion, height * s.conversion);
            let lon_distance = distance(lon, lat, x1, lat);
            let lat_distance = distance(lon, lat, lon, y1);
            if lon_distance > width_m / 2.0 || lat_distance > height_m / 2.0 {
                return None;
            }
            Some(distance(x1, y1, lon, lat))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GEOADD k 13.361389 38.115556 Palermo; ZSCORE k Palermo on Redis 7.0.15.
    const PALERMO: f64 = 3479099956230698.0;
    const CATANIA: f64 = 3479447370796909.0;

    #[test]
    fn interleave_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ffffff, 0x155),
            (u32::MAX, 7),
        ] {
            let v = deinterleave(interleave(x, y));
            assert_eq!((v as u32, (v >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn scores_match_redis() {
        assert_eq!(encode_score(13.361389, 38.115556), Some(PALERMO));
        assert_eq!(encode_score(15.087269, 37.502669), Some(CATANIA));
        assert_eq!(encode_score(200.0, 1.0), None);
        assert_eq!(encode_score(1.0, 85.05112879), None);
    }

    #[test]
    fn decoded_centres_match_redis() {
        // GEOPOS replies, "%.17Lf" with the zeros trimmed.
        let [lon, lat] = decode_score(PALERMO);
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        // The last column's cell reaches past 180: the centre is clamped.
        let edge = encode_score(180.0, 85.05112878).unwrap();
        assert_eq!(decode_score(edge), [180.0, LAT_MAX]);
        let [lon, lat] = decode_score(encode_score(-180.0, -85.05112878).unwrap());
        assert_eq!(format!("{lon:.17}"), "-179.99999731779098511");
        assert_eq!(format!("{lat:.17}"), "-85.05112751263942528");
    }

    #[test]
    fn hash_strings_match_redis() {
        assert_eq!(&hash_string(PALERMO), b"sqc8b49rny0");
        assert_eq!(
            &hash_string(encode_score(180.0, 85.05112878).unwrap()),
            b"bp05b5048p0"
        );
        assert_eq!(
            &hash_string(encode_score(-180.0, -85.05112878).unwrap()),
            b"00bh0hbj200"
        );
    }

    #[test]
    fn distances_match_redis() {
        let [x1, y1] = decode_score(PALERMO);
        let [x2, y2] = decode_score(CATANIA);
        // GEODIST k Palermo Catania [km]
        assert_eq!(format!("{:.4}", distance(x1, y1, x2, y2)), "166274.1516");
        assert_eq!(
            format!("{:.4}", distance(x1, y1, x2, y2) / 1000.0),
            "166.2742"
        );
        assert_eq!(
            format!("{:.4}", distance(x1, y1, x2, y2) / 1609.34),
            "103.3182"
        );
        // GEOSEARCHSTORE ... STOREDIST, then ZSCORE: 17 digits.
        let stored: f64 = "56.441257870158204".parse().unwrap();
        assert_eq!(distance(15.0, 37.0, x2, y2) / 1000.0, stored);
    }

    #[test]
    fn steps_follow_the_radius() {
        assert_eq!(estimate_steps_by_radius(0.0, 0.0), 26);
        assert_eq!(estimate_steps_by_radius(200_000.0, 37.0), 6);
        assert_eq!(estimate_steps_by_radius(200_000.0, 70.0), 5);
        assert_eq!(estimate_steps_by_radius(200_000.0, -85.0), 4);
        assert_eq!(estimate_steps_by_radius(1e9, 0.0), 1);
        assert_eq!(estimate_steps_by_radius(0.001, 0.0), 26);
    }

    #[test]
    fn neighbours_wrap_and_invert() {
        let c = encode_wgs84(13.361389, 38.115556, 10).unwrap();
        let n = neighbors(c);
        assert_eq!(neighbors(n.east).west, c);
        assert_eq!(neighbors(n.north).south, c);
        assert_eq!(neighbors(n.north_east).south_west, c);
        // Across the antimeridian: one step east of the last column is
        // the first.
        let last = encode_wgs84(179.99, 0.0, 3).unwrap();
        let first = encode_wgs84(-179.99, 0.0, 3).unwrap();
        assert_eq!(neighbors(last).east, first);
    }

    #[test]
    fn cell_score_ranges_cover_the_cell() {
        let c = encode_wgs84(13.361389, 38.115556, 7).unwrap();
        let (min, max) = c.score_range();
        assert!((min as f64) <= PALERMO && PALERMO < max as f64);
        assert_eq!(max - min, 1u64 << (52 - 14));
    }

    #[test]
    fn box_test_uses_half_sides() {
        let s = Shape {
            center: [15.0, 37.0],
            kind: ShapeKind::Box {
                width: 400.0,
                height: 400.0,
            },
            conversion: 1000.0,
        };
        let [x, y] = decode_score(CATANIA);
        assert!(within(&s, x, y).is_some());
        let narrow = Shape {
            kind: ShapeKind::Box {
                width: 1.0,
                height: 400.0,
            },
            ..s
        };
        assert!(within(&narrow, x, y).is_none());
    }

    /// The latitude shortcut never refuses a point Redis's computation
    /// accepts: points placed just inside and just outside the reach, at
    /// every latitude, for radii from metres to half the globe and boxes.
    #[test]
    fn latitude_shortcut_agrees_with_redis() {
        let mut x: u64 = 0x2545F4914F6CDD1D;
        let mut rnd = move || {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64
        };
        for i in 0..300_000 {
            let center = [rnd() * 360.0 - 180.0, rnd() * 170.0 - 85.0];
            let reach_m = [1.0, 1e3, 1e5, 1e6, 1e7, 2.0e7][i % 6] * (0.5 + rnd());
            let kind = if i % 2 == 0 {
                ShapeKind::Radius(reach_m)
            } else {
                ShapeKind::Box {
                    width: reach_m * 2.0 * rnd(),
                    height: reach_m * 2.0,
                }
            };
            let s = Shape {
                center,
                kind,
                conversion: 1.0,
            };
            // A latitude whose meridian distance is about the reach, give or
            // take a little, and a longitude anywhere near.
            let dlat = rad_deg(reach_m / EARTH_RADIUS_M) * (1.0 + (rnd() - 0.5) * 1e-5);
            let lat = (center[1] + if rnd() < 0.5 { dlat } else { -dlat }).clamp(LAT_MIN, LAT_MAX);
            let lon = (center[0] + (rnd() - 0.5) * 1e-3).clamp(LONG_MIN, LONG_MAX);
            assert_eq!(
                within(&s, lon, lat),
                within_exact(&s, lon, lat),
                "{s:?} {lon} {lat}"
            );
        }
    }

    #[test]
    fn c_conversion_of_odd_scores() {
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(1e30), 0);
        assert_eq!(c_double_to_u64(f64::NEG_INFINITY), 1u64 << 63);
        assert_eq!(c_double_to_u64(PALERMO), PALERMO as u64);
    }
}
