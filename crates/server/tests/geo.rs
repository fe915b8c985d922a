//! The geo family end to end (Redis 7.0 `geo.c`): every command and its
//! errors through the `redis` crate, exact reply bytes in RESP2 and RESP3
//! through `RawConn`, keyspace notifications, and a differential run that
//! loads a few thousand random points (fixed seed) into Cairn and into a
//! reference redis-server and compares GEOPOS, GEOHASH, GEODIST and
//! GEOSEARCH / GEORADIUS replies byte for byte. The long tail of option
//! combinations and error orders is in the corpus (`tests/diff/geo*`).

mod support;

use redis::{Connection, Value};
use support::{err, q, server, start_cairn, start_redis, RawConn};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SYNTAX: &str = "ERR syntax error";

fn sicily(c: &mut Connection) {
    let n: i64 = q(
        c,
        &[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    );
    assert_eq!(n, 2);
}

#[test]
fn geoadd_options_and_scores() {
    let (_s, mut c) = server();
    sicily(&mut c);
    assert_eq!(q::<String>(&mut c, &["TYPE", "Sicily"]), "zset");
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "Sicily", "Palermo"]),
        "3479099956230698"
    );
    let add = |c: &mut Connection, args: &[&str]| -> i64 {
        let mut v = vec!["GEOADD", "Sicily"];
        v.extend_from_slice(args);
        q(c, &v)
    };
    assert_eq!(add(&mut c, &["13.361389", "38.115556", "Palermo"]), 0);
    assert_eq!(
        add(
            &mut c,
            &[
                "CH",
                "13.361389",
                "38.115556",
                "Palermo",
                "15",
                "37",
                "Catania",
                "1",
                "1",
                "new"
            ]
        ),
        2
    );
    assert_eq!(
        add(
            &mut c,
            &["XX", "CH", "1", "1", "Palermo", "2", "2", "other"]
        ),
        1
    );
    assert_eq!(
        add(&mut c, &["NX", "3", "3", "Palermo", "4", "4", "other"]),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "Sicily"]), 4);
    assert_eq!(
        q::<i64>(&mut c, &["GEOADD", "none", "XX", "1", "1", "a"]),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);

    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "XX", "NX", "1", "1", "x"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "GT", "1", "1", "x"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "1", "1", "x", "2"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "200", "100", "x"]),
        "ERR invalid longitude,latitude pair 200.000000,100.000000"
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "1", "85.05112879", "x"]),
        "ERR invalid longitude,latitude pair 1.000000,85.051129"
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "nan", "1", "x"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        err(&mut c, &["GEOADD", "Sicily", "1", "1"]),
        "ERR wrong number of arguments for 'geoadd' command"
    );
    // A bad pair anywhere stops the whole command before it writes.
    assert_eq!(
        err(
            &mut c,
            &["GEOADD", "Sicily", "1", "1", "ok", "200", "0", "bad"]
        ),
        "ERR invalid longitude,latitude pair 200.000000,0.000000"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["ZSCORE", "Sicily", "ok"]),
        None
    );
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(err(&mut c, &["GEOADD", "str", "1", "1", "a"]), WRONGTYPE);
}

#[test]
fn geopos_geohash_geodist() {
    let (_s, mut c) = server();
    sicily(&mut c);
    let pos: Vec<Option<(String, String)>> = q(&mut c, &["GEOPOS", "Sicily", "Palermo", "nosuch"]);
    assert_eq!(
        pos,
        vec![
            Some((
                "13.36138933897018433".to_string(),
                "38.11555639549629859".to_string()
            )),
            None
        ]
    );
    let hashes: Vec<Option<String>> = q(
        &mut c,
        &["GEOHASH", "Sicily", "Palermo", "Catania", "nosuch"],
    );
    assert_eq!(
        hashes,
        vec![
            Some("sqc8b49rny0".to_string()),
            Some("sqdtr74hyu0".to_string()),
            None
        ]
    );
    let nokey: Vec<Option<String>> = q(&mut c, &["GEOHASH", "nokey", "a"]);
    assert_eq!(nokey, vec![None]);

    let dist = |c: &mut Connection, unit: Option<&str>| -> Option<String> {
        let mut v = vec!["GEODIST", "Sicily", "Palermo", "Catania"];
        v.extend(unit);
        q(c, &v)
    };
    assert_eq!(dist(&mut c, None).as_deref(), Some("166274.1516"));
    assert_eq!(dist(&mut c, Some("m")).as_deref(), Some("166274.1516"));
    assert_eq!(dist(&mut c, Some("KM")).as_deref(), Some("166.2742"));
    assert_eq!(dist(&mut c, Some("mi")).as_deref(), Some("103.3182"));
    assert_eq!(dist(&mut c, Some("ft")).as_deref(), Some("545518.8700"));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GEODIST", "Sicily", "Palermo", "nosuch"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["GEODIST", "nokey", "a", "b"]),
        None
    );
    assert_eq!(
        err(&mut c, &["GEODIST", "nokey", "a", "b", "yd"]),
        "ERR unsupported unit provided. please use M, KM, FT, MI"
    );
    assert_eq!(
        err(&mut c, &["GEODIST", "Sicily", "a", "b", "km", "x"]),
        SYNTAX
    );
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(err(&mut c, &["GEOPOS", "str", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GEOHASH", "str", "a"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GEODIST", "str", "a", "b"]), WRONGTYPE);
}

#[test]
fn search_commands_and_their_replies() {
    let (_s, mut c) = server();
    sicily(&mut c);
    let names: Vec<String> = q(&mut c, &["GEORADIUS", "Sicily", "15", "37", "200", "km"]);
    assert_eq!(names, ["Palermo", "Catania"]);
    let asc: Vec<(String, String)> = q(
        &mut c,
        &[
            "GEORADIUS",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "WITHDIST",
            "ASC",
        ],
    );
    assert_eq!(
        asc,
        [
            ("Catania".to_string(), "56.4413".to_string()),
            ("Palermo".to_string(), "190.4424".to_string())
        ]
    );
    let ro: Vec<String> = q(
        &mut c,
        &[
            "GEORADIUS_RO",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "DESC",
            "COUNT",
            "1",
        ],
    );
    assert_eq!(ro, ["Palermo"]);
    let bymember: Vec<String> = q(
        &mut c,
        &["GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "ASC"],
    );
    assert_eq!(bymember, ["Palermo", "Catania"]);
    let bymember_ro: Vec<String> = q(
        &mut c,
        &["GEORADIUSBYMEMBER_RO", "Sicily", "Catania", "1", "km"],
    );
    assert_eq!(bymember_ro, ["Catania"]);
    let full: Value = q(
        &mut c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "ASC",
            "WITHCOORD",
            "WITHDIST",
            "WITHHASH",
        ],
    );
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(
        full,
        Value::Array(vec![
            Value::Array(vec![
                bulk("Catania"),
                bulk("56.4413"),
                Value::Int(3479447370796909),
                Value::Array(vec![
                    bulk("15.08726745843887329"),
                    bulk("37.50266842333162032")
                ]),
            ]),
            Value::Array(vec![
                bulk("Palermo"),
                bulk("190.4424"),
                Value::Int(3479099956230698),
                Value::Array(vec![
                    bulk("13.36138933897018433"),
                    bulk("38.11555639549629859")
                ]),
            ]),
        ])
    );
    let any: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMMEMBER",
            "Catania",
            "BYRADIUS",
            "500",
            "km",
            "COUNT",
            "1",
            "ANY",
        ],
    );
    assert_eq!(any.len(), 1);
    let empty: Vec<String> = q(
        &mut c,
        &[
            "GEOSEARCH",
            "nokey",
            "FROMMEMBER",
            "x",
            "BYRADIUS",
            "1",
            "km",
        ],
    );
    assert!(empty.is_empty());

    // STORE keeps the geohash scores, STOREDIST the distances in the unit.
    assert_eq!(
        q::<i64>(
            &mut c,
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d"]
        ),
        2
    );
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "d", "Palermo"]),
        "3479099956230698"
    );
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "GEORADIUSBYMEMBER",
                "Sicily",
                "Palermo",
                "200",
                "km",
                "STOREDIST",
                "d"
            ]
        ),
        2
    );
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "d", "Palermo"]), "0");
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST"
            ]
        ),
        2
    );
    assert_eq!(
        q::<String>(&mut c, &["ZSCORE", "d", "Catania"]),
        "56.441257870158204"
    );
    // An empty result deletes the destination.
    assert_eq!(
        q::<i64>(
            &mut c,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "d"]), 0);
}

#[test]
fn search_errors() {
    let (_s, mut c) = server();
    sicily(&mut c);
    let cases: &[(&[&str], &str)] = &[
        (&["GEORADIUS", "Sicily", "15", "37", "-1", "km"], "ERR radius cannot be negative"),
        (&["GEORADIUS", "Sicily", "15", "37", "x", "km"], "ERR need numeric radius"),
        (
            &["GEORADIUS", "Sicily", "15", "37", "1", "yd"],
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ),
        (
            &["GEORADIUS", "Sicily", "200", "37", "1", "km"],
            "ERR invalid longitude,latitude pair 200.000000,37.000000",
        ),
        (&["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0"], "ERR COUNT must be > 0"),
        (
            &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            &["GEORADIUS", "Sicily", "15", "37", "1", "km", "ANY"],
            "ERR the ANY argument requires COUNT argument",
        ),
        (
            &["GEORADIUS", "Sicily", "15", "37", "1", "km", "STORE", "d", "WITHDIST"],
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        ),
        (&["GEORADIUS_RO", "Sicily", "15", "37", "1", "km", "STORE", "d"], SYNTAX),
        (
            &["GEORADIUSBYMEMBER", "Sicily", "nosuch", "-1", "km"],
            "ERR could not decode requested zset member",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "WITHDIST", "COUNT", "1"],
            "ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH",
        ),
        (
            &["geosearch", "Sicily", "BYRADIUS", "1", "km", "ASC", "DESC"],
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch",
        ),
        (
            &["GEOSEARCH", "Sicily", "BYRADIUS", "-1", "km", "FROMMEMBER", "nosuch"],
            "ERR radius cannot be negative",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMMEMBER", "nosuch", "BYRADIUS", "-1", "km"],
            "ERR could not decode requested zset member",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "-1", "1", "km"],
            "ERR height or width cannot be negative",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "x", "1", "km"],
            "ERR need numeric width",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYBOX", "1", "x", "km"],
            "ERR need numeric height",
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km"],
            SYNTAX,
        ),
        (
            &["GEOSEARCH", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "STOREDIST"],
            SYNTAX,
        ),
        (
            &["GEOSEARCHSTORE", "d", "Sicily", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "km", "WITHHASH"],
            "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(&err(&mut c, args), want, "{args:?}");
    }
    // A missing key answers before its member or radius is looked at.
    let v: Vec<String> = q(
        &mut c,
        &["GEORADIUSBYMEMBER", "nokey", "nosuch", "-1", "km"],
    );
    assert!(v.is_empty());
    q::<()>(&mut c, &["SET", "str", "x"]);
    assert_eq!(
        err(&mut c, &["GEORADIUS", "str", "200", "1", "1", "km"]),
        WRONGTYPE
    );
    assert_eq!(
        err(
            &mut c,
            &["GEOSEARCH", "str", "FROMMEMBER", "a", "BYRADIUS", "1", "km"]
        ),
        WRONGTYPE
    );
}

#[test]
fn raw_replies_in_both_protocols() {
    let s = start_cairn(&[]);
    let mut r = RawConn::connect(s.port);
    r.cmd(&[
        "GEOADD",
        "k",
        "13.361389",
        "38.115556",
        "Palermo",
        "180",
        "85.05112878",
        "ne",
        "15.087269",
        "37.502669",
        "Catania",
    ]);
    assert_eq!(
        r.cmd(&["GEOPOS", "k", "Palermo", "ne", "x"]),
        b"*3\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n\
          *2\r\n$3\r\n180\r\n$19\r\n85.0511287799999991\r\n*-1\r\n"
    );
    r.cmd(&["HELLO", "3"]);
    assert_eq!(
        r.cmd(&["GEOPOS", "k", "Palermo", "x"]),
        b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"
    );
    // Distances stay bulk strings in RESP3, as Redis sends them.
    assert_eq!(
        r.cmd(&["GEODIST", "k", "Palermo", "Catania"]),
        b"$11\r\n166274.1516\r\n"
    );
    assert_eq!(r.cmd(&["GEODIST", "k", "Palermo", "x"]), b"_\r\n");
    assert_eq!(
        r.cmd(&["GEOSEARCH", "k", "FROMMEMBER", "Palermo", "BYRADIUS", "1", "m", "WITHCOORD", "WITHHASH"]),
        b"*1\r\n*3\r\n$7\r\nPalermo\r\n:3479099956230698\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"
    );
}

#[test]
fn notifications_follow_redis() {
    let (_s, mut c) = server();
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let mut sub = RawConn::connect(_s.port);
    sub.cmd(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    sicily(&mut c);
    q::<i64>(
        &mut c,
        &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d"],
    );
    q::<i64>(
        &mut c,
        &[
            "GEOSEARCHSTORE",
            "d",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
        ],
    );
    q::<i64>(
        &mut c,
        &[
            "GEOSEARCHSTORE",
            "d",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "1",
            "km",
        ],
    );
    let mut events = Vec::new();
    for _ in 0..4 {
        let frame = sub.read_raw_reply();
        let text = String::from_utf8_lossy(&frame).into_owned();
        let event = text.rsplit("__keyevent@0__:").next().unwrap();
        let name = event.split('\r').next().unwrap().to_string();
        events.push(name);
    }
    assert_eq!(events, ["zadd", "georadiusstore", "geosearchstore", "del"]);
}

/// Geo writes are recorded as sent (GEOADD and the STORE forms are
/// deterministic given the data), and a restart replays them to the same
/// sets: same scores, same stored distances, same deletions.
#[test]
fn journal_replays_geo_writes() {
    let dir = std::env::temp_dir().join(format!("cairn-geo-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = [
        "--dir",
        dir.to_str().unwrap(),
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let dump = |c: &mut RawConn| -> Vec<Vec<u8>> {
        ["Sicily", "d", "d2", "gone"]
            .iter()
            .map(|k| c.cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"]))
            .collect()
    };
    // Clients get -LOADING until the journal is replayed (as in Redis).
    let loaded = |c: &mut RawConn| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while c.cmd(&["PING"]) != b"+PONG\r\n" {
            assert!(
                std::time::Instant::now() < deadline,
                "journal replay did not finish"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let before = {
        let s = start_cairn(&args);
        let mut c = RawConn::connect(s.port);
        loaded(&mut c);
        c.cmd(&[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ]);
        c.cmd(&[
            "GEOADD", "Sicily", "XX", "CH", "13.4", "38.1", "Palermo", "1", "1", "x",
        ]);
        c.cmd(&["GEOADD", "gone", "1", "1", "a"]);
        c.cmd(&["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d"]);
        c.cmd(&[
            "GEOSEARCHSTORE",
            "d2",
            "Sicily",
            "FROMMEMBER",
            "Catania",
            "BYBOX",
            "400",
            "400",
            "km",
            "STOREDIST",
        ]);
        c.cmd(&["GEORADIUSBYMEMBER", "gone", "a", "1", "km", "STORE", "gone"]);
        c.cmd(&[
            "GEOSEARCHSTORE",
            "gone",
            "Sicily",
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "1",
            "m",
        ]);
        let d = dump(&mut c);
        assert_eq!(
            d[0].len(),
            4 + 2 * (13 + 23),
            "{:?}",
            String::from_utf8_lossy(&d[0])
        );
        assert_eq!(d[3], b"*0\r\n");
        d
    };
    let s = start_cairn(&args);
    let mut c = RawConn::connect(s.port);
    loaded(&mut c);
    assert_eq!(dump(&mut c), before);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------
// Differential run against redis-server

/// xorshift64*: a fixed, dependency-free sequence, so both servers get the
/// same points on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
}

#[test]
fn random_points_match_redis() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("redis-server not installed: skipping the differential geo test");
        return;
    };
    let cairn = start_cairn(&[]);
    let mut a = RawConn::connect(redis.port);
    let mut b = RawConn::connect(cairn.port);
    let mut both = |args: &[String]| {
        let v: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ra, rb) = (a.cmd(&v), b.cmd(&v));
        assert!(
            ra == rb,
            "{args:?}\nredis: {}\ncairn: {}",
            String::from_utf8_lossy(&ra),
            String::from_utf8_lossy(&rb)
        );
        ra
    };
    let s = |v: &[&str]| -> Vec<String> { v.iter().map(|x| x.to_string()).collect() };

    let mut rng = Rng(0x9E3779B97F4A7C15);
    // 3000 points over the whole range, and 1000 around a few centres so
    // that small radii find something; members numbered.
    const N: usize = 4000;
    let centres = [
        [13.4, 38.1],
        [-0.12, 51.5],
        [179.9, -16.5],
        [-73.9, 40.7],
        [151.2, -33.8],
    ];
    let mut points = Vec::with_capacity(N);
    for i in 0..N {
        let (lon, lat) = if i < 3000 {
            (rng.range(-180.0, 180.0), rng.range(-85.05, 85.05))
        } else {
            let c = centres[i % centres.len()];
            let lon = (c[0] + rng.range(-1.0, 1.0)).clamp(-180.0, 180.0);
            (lon, c[1] + rng.range(-1.0, 1.0))
        };
        points.push((lon, lat));
    }
    for chunk in points.chunks(200).enumerate() {
        let (ci, pts) = chunk;
        let mut args = s(&["GEOADD", "pts"]);
        for (j, (lon, lat)) in pts.iter().enumerate() {
            args.push(format!("{lon}"));
            args.push(format!("{lat}"));
            args.push(format!("m{}", ci * 200 + j));
        }
        both(&args);
    }
    both(&s(&["ZCARD", "pts"]));
    both(&s(&["OBJECT", "ENCODING", "pts"]));

    // Positions, hashes and distances of every member.
    for chunk in (0..N).collect::<Vec<_>>().chunks(250) {
        let mut pos = s(&["GEOPOS", "pts"]);
        let mut hash = s(&["GEOHASH", "pts"]);
        for i in chunk {
            pos.push(format!("m{i}"));
            hash.push(format!("m{i}"));
        }
        both(&pos);
        both(&hash);
    }
    let units = ["m", "km", "mi", "ft"];
    for i in 0..N {
        let j = (i * 7919 + 13) % N;
        both(&s(&[
            "GEODIST",
            "pts",
            &format!("m{i}"),
            &format!("m{j}"),
            units[i % 4],
        ]));
    }

    // Searches: random centres (and members), radii from metres to
    // thousands of km, boxes, every WITH* option, orders and counts.
    let withs: [&[&str]; 4] = [
        &[],
        &["WITHDIST"],
        &["WITHCOORD", "WITHHASH"],
        &["WITHDIST", "WITHCOORD", "WITHHASH"],
    ];
    let orders: [&[&str]; 5] = [
        &[],
        &["ASC"],
        &["DESC"],
        &["COUNT", "5"],
        &["COUNT", "3", "DESC"],
    ];
    let mut found = 0;
    for round in 0..400 {
        let (lon, lat) = if round % 3 == 0 {
            let c = centres[round % centres.len()];
            (c[0] + rng.range(-0.5, 0.5), c[1] + rng.range(-0.5, 0.5))
        } else {
            (rng.range(-180.0, 180.0), rng.range(-85.0, 85.0))
        };
        let lon = lon.clamp(-180.0, 180.0);
        let scale = [1.0, 10.0, 100.0, 1000.0, 5000.0][round % 5];
        let r = rng.range(0.0, 1.0) * scale;
        let unit = units[round % 4];
        let conv = [1.0, 1000.0, 1609.34, 0.3048][round % 4];
        let r_units = format!("{}", r * 1000.0 / conv);
        let w = withs[round % withs.len()];
        let o = orders[(round / 4) % orders.len()];
        let from: Vec<String> = if round % 2 == 0 {
            s(&["FROMLONLAT", &format!("{lon}"), &format!("{lat}")])
        } else {
            s(&["FROMMEMBER", &format!("m{}", (round * 37) % N)])
        };
        let mut radius = s(&["GEOSEARCH", "pts"]);
        radius.extend(from.clone());
        radius.extend(s(&["BYRADIUS", &r_units, unit]));
        radius.extend(s(w));
        radius.extend(s(o));
        if both(&radius) != b"*0\r\n" {
            found += 1;
        }

        let (bw, bh) = (rng.range(0.0, 2.0) * r, rng.range(0.0, 2.0) * r);
        let mut bx = s(&["GEOSEARCH", "pts"]);
        bx.extend(from);
        bx.extend(s(&[
            "BYBOX",
            &format!("{}", bw * 1000.0 / conv),
            &format!("{}", bh * 1000.0 / conv),
            unit,
        ]));
        bx.extend(s(w));
        bx.extend(s(o));
        both(&bx);

        let mut gr = s(&[
            "GEORADIUS",
            "pts",
            &format!("{lon}"),
            &format!("{lat}"),
            &r_units,
            unit,
        ]);
        gr.extend(s(w));
        gr.extend(s(o));
        both(&gr);

        if round % 10 == 0 {
            let store = s(&[
                "GEOSEARCHSTORE",
                "dst",
                "pts",
                "FROMLONLAT",
                &format!("{lon}"),
                &format!("{lat}"),
                "BYRADIUS",
                &r_units,
                unit,
                "STOREDIST",
            ]);
            both(&store);
            both(&s(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]));
        }
    }
    assert!(
        found > 150,
        "only {found} of 400 radius searches found anything"
    );
    // A small listpack-encoded set too.
    let mut small = s(&["GEOADD", "small"]);
    for i in 0..50 {
        let (lon, lat) = points[3000 + i * 5];
        small.extend([format!("{lon}"), format!("{lat}"), format!("s{i}")]);
    }
    both(&small);
    both(&s(&["OBJECT", "ENCODING", "small"]));
    for c in centres {
        let (lon, lat) = (format!("{}", c[0]), format!("{}", c[1]));
        both(&s(&[
            "GEOSEARCH",
            "small",
            "FROMLONLAT",
            &lon,
            &lat,
            "BYRADIUS",
            "100",
            "km",
            "WITHDIST",
            "ASC",
        ]));
        both(&s(&[
            "GEOSEARCH",
            "small",
            "FROMLONLAT",
            &lon,
            &lat,
            "BYBOX",
            "150",
            "80",
            "km",
            "WITHCOORD",
            "DESC",
        ]));
    }
}
