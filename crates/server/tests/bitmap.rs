//! The bitmap family end to end (Redis 7.0 `bitops.c` behaviour): SETBIT,
//! GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO through the
//! `redis` crate, exact reply bytes (RESP2 and RESP3) through `RawConn`,
//! the proto-max-bulk-len bound on offsets, large values, and a randomized
//! comparison against a reference redis-server when one is installed.

mod support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::{Connection, Value};
use support::{cmd, err, int, ok, q, redis_client, server, start_redis};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

fn get(c: &mut Connection, key: &str) -> Option<Vec<u8>> {
    q(c, &["GET", key])
}

#[test]
fn setbit_getbit() {
    let (_s, mut c) = server();
    assert_eq!(int(&mut c, &["SETBIT", "k", "7", "1"]), 0);
    assert_eq!(int(&mut c, &["SETBIT", "k", "7", "1"]), 1);
    assert_eq!(get(&mut c, "k"), Some(vec![1]));
    assert_eq!(int(&mut c, &["SETBIT", "k", "9", "1"]), 0);
    assert_eq!(get(&mut c, "k"), Some(vec![1, 0x40]));
    assert_eq!(int(&mut c, &["GETBIT", "k", "9"]), 1);
    assert_eq!(int(&mut c, &["GETBIT", "k", "8"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "k", "4294967295"]), 0);
    assert_eq!(int(&mut c, &["GETBIT", "nokey", "0"]), 0);
    // Growing with a 0 still writes (zero padding).
    assert_eq!(int(&mut c, &["SETBIT", "g", "23", "0"]), 0);
    assert_eq!(get(&mut c, "g"), Some(vec![0, 0, 0]));
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "g"]), "raw");
    // Integers are their text; any write makes them raw.
    ok(&mut c, &["SET", "i", "12"]);
    assert_eq!(int(&mut c, &["GETBIT", "i", "2"]), 1);
    assert_eq!(int(&mut c, &["SETBIT", "i", "0", "0"]), 0);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "i"]), "raw");
    assert_eq!(get(&mut c, "i"), Some(b"12".to_vec()));
    // The TTL is kept.
    ok(&mut c, &["SET", "t", "x", "EX", "100"]);
    int(&mut c, &["SETBIT", "t", "100", "1"]);
    assert!(int(&mut c, &["TTL", "t"]) > 0);

    for bad in ["2", "-1", "a", "", "1.0"] {
        assert_eq!(err(&mut c, &["SETBIT", "k", "0", bad]), BAD_BIT, "{bad}");
    }
    for bad in ["-1", "4294967296", "x", "", "#1"] {
        assert_eq!(err(&mut c, &["SETBIT", "k", bad, "1"]), BAD_OFFSET, "{bad}");
        assert_eq!(err(&mut c, &["GETBIT", "k", bad]), BAD_OFFSET, "{bad}");
    }
    assert_eq!(err(&mut c, &["SETBIT", "k", "-1", "5"]), BAD_OFFSET);
    int(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["SETBIT", "h", "0", "1"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["GETBIT", "h", "0"]), WRONGTYPE);
    assert_eq!(
        err(&mut c, &["SETBIT", "k", "0"]),
        "ERR wrong number of arguments for 'setbit' command"
    );
}

#[test]
fn offsets_bounded_by_proto_max_bulk_len() {
    let (_s, mut c) = server();
    ok(&mut c, &["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    let max_bit = (1u64 << 23) - 1;
    assert_eq!(
        err(&mut c, &["SETBIT", "k", &(max_bit + 1).to_string(), "1"]),
        BAD_OFFSET
    );
    assert_eq!(
        err(&mut c, &["GETBIT", "k", &(max_bit + 1).to_string()]),
        BAD_OFFSET
    );
    assert_eq!(int(&mut c, &["SETBIT", "k", &max_bit.to_string(), "1"]), 0);
    assert_eq!(int(&mut c, &["STRLEN", "k"]), 1 << 20);
    assert_eq!(
        err(
            &mut c,
            &["BITFIELD", "k", "GET", "u8", &(max_bit + 1).to_string()]
        ),
        BAD_OFFSET
    );
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "GET", "u8", "#1048576"]),
        BAD_OFFSET
    );
    // A field starting at the last allowed bit may reach a little past it,
    // as in Redis.
    let r: Vec<i64> = q(
        &mut c,
        &["BITFIELD", "k", "SET", "u8", &max_bit.to_string(), "255"],
    );
    assert_eq!(r, vec![128]);
    assert_eq!(int(&mut c, &["STRLEN", "k"]), (1 << 20) + 1);
}

#[test]
fn bitcount_and_bitpos() {
    let (_s, mut c) = server();
    ok(&mut c, &["SET", "s", "foobar"]);
    assert_eq!(int(&mut c, &["BITCOUNT", "s"]), 26);
    assert_eq!(int(&mut c, &["BITCOUNT", "s", "1", "1"]), 6);
    assert_eq!(int(&mut c, &["BITCOUNT", "s", "-2", "-1"]), 7);
    assert_eq!(int(&mut c, &["BITCOUNT", "s", "5", "30", "BIT"]), 17);
    assert_eq!(int(&mut c, &["BITCOUNT", "s", "-1", "-2", "junk"]), 0);
    assert_eq!(int(&mut c, &["BITCOUNT", "nokey", "x", "y", "z"]), 0);
    assert_eq!(err(&mut c, &["BITCOUNT", "s", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["BITCOUNT", "s", "0", "1", "bits"]), SYNTAX);
    assert_eq!(err(&mut c, &["BITCOUNT", "s", "x", "1"]), NOT_INT);

    ok(&mut c, &["SET", "p", "\u{0}"]);
    q::<Vec<i64>>(&mut c, &["BITFIELD", "ones", "SET", "u8", "0", "255"]);
    assert_eq!(int(&mut c, &["BITPOS", "p", "1"]), -1);
    assert_eq!(int(&mut c, &["BITPOS", "p", "0"]), 0);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "1"]), 0);
    // No clear bit: past the end, unless the end was given.
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0"]), 8);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0", "0"]), 8);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0", "0", "-1"]), -1);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "0", "3", "-1", "BIT"]), -1);
    assert_eq!(int(&mut c, &["BITPOS", "ones", "1", "3", "-1", "BIT"]), 3);
    assert_eq!(err(&mut c, &["BITPOS", "ones", "0", "1", "BIT"]), NOT_INT);
    assert_eq!(int(&mut c, &["BITPOS", "nokey", "0", "a"]), 0);
    assert_eq!(int(&mut c, &["BITPOS", "nokey", "1"]), -1);
    assert_eq!(
        err(&mut c, &["BITPOS", "p", "2"]),
        "ERR The bit argument must be 1 or 0."
    );
    assert_eq!(err(&mut c, &["BITPOS", "p", "x"]), NOT_INT);
    assert_eq!(err(&mut c, &["BITPOS", "p", "1", "0", "x", "junk"]), SYNTAX);
    assert_eq!(err(&mut c, &["BITPOS", "p", "1", "0", "x", "BIT"]), NOT_INT);
    int(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["BITCOUNT", "h", "0"]), WRONGTYPE);
    assert_eq!(err(&mut c, &["BITPOS", "h", "1"]), WRONGTYPE);
}

/// A 32 MB bitmap: the word-at-a-time paths answer quickly and exactly.
#[test]
fn large_bitmaps() {
    let (_s, mut c) = server();
    let bits: u64 = 32 * 1024 * 1024 * 8;
    int(&mut c, &["SETBIT", "big", &(bits - 1).to_string(), "1"]);
    int(&mut c, &["SETBIT", "big", "12345678", "1"]);
    let t = std::time::Instant::now();
    assert_eq!(int(&mut c, &["BITCOUNT", "big"]), 2);
    assert_eq!(int(&mut c, &["BITPOS", "big", "1"]), 12345678);
    assert_eq!(
        int(&mut c, &["BITPOS", "big", "1", "2000000"]),
        (bits - 1) as i64
    );
    assert_eq!(int(&mut c, &["BITPOS", "big", "0"]), 0);
    assert_eq!(int(&mut c, &["BITOP", "NOT", "inv", "big"]), 32 << 20);
    assert_eq!(int(&mut c, &["BITCOUNT", "inv"]), bits as i64 - 2);
    assert_eq!(int(&mut c, &["BITPOS", "inv", "0"]), 12345678);
    assert_eq!(
        int(&mut c, &["BITPOS", "inv", "0", "1600000", "-1"]),
        (bits - 1) as i64
    );
    assert_eq!(
        int(&mut c, &["BITOP", "AND", "and", "big", "inv"]),
        32 << 20
    );
    assert_eq!(int(&mut c, &["BITCOUNT", "and"]), 0);
    assert_eq!(int(&mut c, &["BITPOS", "and", "1"]), -1);
    assert_eq!(int(&mut c, &["BITPOS", "and", "0", "0", "-1"]), 0);
    assert_eq!(
        int(&mut c, &["BITOP", "XOR", "x", "big", "inv", "nokey"]),
        32 << 20
    );
    assert_eq!(int(&mut c, &["BITCOUNT", "x"]), bits as i64);
    assert_eq!(int(&mut c, &["BITPOS", "x", "0"]), bits as i64);
    assert_eq!(int(&mut c, &["BITPOS", "x", "0", "0", "-1"]), -1);
    // Generous: debug-ish builds on a shared machine.
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
}

#[test]
fn bitop() {
    let (_s, mut c) = server();
    ok(&mut c, &["SET", "a", "\x0f\x0f"]);
    ok(&mut c, &["SET", "b", "\x33"]);
    assert_eq!(int(&mut c, &["BITOP", "AND", "d", "a", "b"]), 2);
    assert_eq!(get(&mut c, "d"), Some(vec![0x03, 0]));
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "d"]), "raw");
    assert_eq!(int(&mut c, &["BITOP", "OR", "d", "a", "b"]), 2);
    assert_eq!(get(&mut c, "d"), Some(vec![0x3f, 0x0f]));
    assert_eq!(int(&mut c, &["BITOP", "XOR", "d", "a", "b", "nokey"]), 2);
    assert_eq!(get(&mut c, "d"), Some(vec![0x3c, 0x0f]));
    assert_eq!(int(&mut c, &["BITOP", "NOT", "d", "b"]), 1);
    assert_eq!(get(&mut c, "d"), Some(vec![0xcc]));
    // All sources empty: the destination goes away.
    assert_eq!(int(&mut c, &["BITOP", "OR", "d", "nokey"]), 0);
    assert_eq!(int(&mut c, &["EXISTS", "d"]), 0);
    assert_eq!(
        err(&mut c, &["BITOP", "NOT", "d", "a", "b"]),
        "ERR BITOP NOT must be called with a single source key."
    );
    assert_eq!(err(&mut c, &["BITOP", "NAND", "d", "a"]), SYNTAX);
    int(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["BITOP", "OR", "d", "a", "h"]), WRONGTYPE);
    // BITOP overwrites a destination of any type.
    assert_eq!(int(&mut c, &["BITOP", "OR", "h", "a"]), 2);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
}

#[test]
fn bitfield() {
    let (_s, mut c) = server();
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "k", "SET", "i8", "0", "-100", "GET", "i8", "0", "INCRBY", "u4", "#1",
            "20", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "5", "OVERFLOW", "SAT", "INCRBY", "i8",
            "#1", "1000",
        ],
    );
    // -100 is 0x9c; its low nibble 12 + 20 wraps to 0.
    assert_eq!(r, vec![Some(0), Some(-100), Some(0), None, Some(127)]);
    assert_eq!(get(&mut c, "k"), Some(vec![0x90, 0x7f]));
    let r: Vec<i64> = q(&mut c, &["BITFIELD_RO", "k", "GET", "u16", "0"]);
    assert_eq!(r, vec![0x907f]);
    let r: Vec<i64> = q(&mut c, &["BITFIELD", "k"]);
    assert!(r.is_empty());
    assert_eq!(
        err(&mut c, &["BITFIELD_RO", "k", "SET", "u8", "0", "1"]),
        "ERR BITFIELD_RO only supports the GET subcommand"
    );
    assert_eq!(err(&mut c, &["BITFIELD", "k", "GET", "u64", "0"]), BAD_TYPE);
    assert_eq!(err(&mut c, &["BITFIELD", "k", "GET", "i65", "0"]), BAD_TYPE);
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "GET", "u8", "-1"]),
        BAD_OFFSET
    );
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "SET", "u8", "0", "x"]),
        NOT_INT
    );
    assert_eq!(err(&mut c, &["BITFIELD", "k", "GET", "u8"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["BITFIELD", "k", "OVERFLOW", "NONE"]),
        "ERR Invalid OVERFLOW type specified"
    );
    int(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(err(&mut c, &["BITFIELD", "h", "GET", "u8", "0"]), WRONGTYPE);
    assert_eq!(
        err(&mut c, &["BITFIELD", "h", "SET", "u8", "0", "1"]),
        WRONGTYPE
    );
    // A refused write on a missing key still creates it, zero-filled.
    let r: Vec<Option<i64>> = q(
        &mut c,
        &[
            "BITFIELD", "new", "OVERFLOW", "FAIL", "INCRBY", "u2", "8", "9",
        ],
    );
    assert_eq!(r, vec![None]);
    assert_eq!(get(&mut c, "new"), Some(vec![0, 0]));
}

/// Exact bytes in both protocols, nulls included.
#[test]
fn reply_shapes() {
    let (s, _c) = server();
    let mut raw = s.conn();
    let bf = [
        "BITFIELD", "k", "SET", "u8", "0", "255", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1",
    ];
    assert_eq!(raw.cmd(&bf), b"*2\r\n:0\r\n$-1\r\n");
    assert_eq!(raw.cmd(&["SETBIT", "k", "0", "0"]), b":1\r\n");
    assert_eq!(raw.cmd(&["BITPOS", "k", "0"]), b":0\r\n");
    raw.cmd(&["HELLO", "3"]);
    assert_eq!(raw.cmd(&bf), b"*2\r\n:127\r\n_\r\n");
    assert_eq!(raw.cmd(&["BITCOUNT", "k"]), b":8\r\n");
    assert_eq!(
        raw.cmd(&["BITFIELD_RO", "k", "GET", "i8", "0"]),
        b"*1\r\n:-1\r\n"
    );
    assert_eq!(raw.cmd(&["BITOP", "NOT", "d", "k"]), b":1\r\n");
}

// ----------------------------------------------- randomized vs Redis ---

fn random_command(rng: &mut SmallRng) -> Vec<String> {
    let key = |rng: &mut SmallRng| format!("k{}", rng.random_range(0..4));
    let idx = |rng: &mut SmallRng| -> String {
        match rng.random_range(0..10) {
            0 => i64::MIN.to_string(),
            1 => i64::MAX.to_string(),
            _ => rng.random_range(-80i64..80).to_string(),
        }
    };
    let unit = |rng: &mut SmallRng| ["BIT", "BYTE", "bit"][rng.random_range(0..3)].to_string();
    let ftype = |rng: &mut SmallRng| {
        if rng.random() {
            format!("i{}", rng.random_range(1..=64))
        } else {
            format!("u{}", rng.random_range(1..=63))
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match rng.random_range(0..9) {
        0 => vec![
            "SETBIT".into(),
            key(rng),
            rng.random_range(0..300).to_string(),
            rng.random_range(0..2).to_string(),
        ],
        1 => vec![
            "GETBIT".into(),
            key(rng),
            rng.random_range(0..300).to_string(),
        ],
        2 => {
            let mut v = vec!["BITCOUNT".into(), key(rng)];
            if rng.random() {
                v.push(idx(rng));
                v.push(idx(rng));
                if rng.random() {
                    v.push(unit(rng));
                }
            }
            v
        }
        3 => {
            let mut v = vec![
                "BITPOS".into(),
                key(rng),
                rng.random_range(0..2).to_string(),
            ];
            let n = rng.random_range(0..4);
            if n >= 1 {
                v.push(idx(rng));
            }
            if n >= 2 {
                v.push(idx(rng));
            }
            if n >= 3 {
                v.push(unit(rng));
            }
            v
        }
        4 => {
            let op = ["AND", "OR", "XOR", "NOT"][rng.random_range(0..4)];
            let mut v = vec!["BITOP".into(), op.into(), key(rng), key(rng)];
            if op != "NOT" {
                for _ in 0..rng.random_range(0..3) {
                    v.push(key(rng));
                }
            }
            v
        }
        5 | 6 => {
            let mut v = vec!["BITFIELD".into(), key(rng)];
            for _ in 0..rng.random_range(1..5) {
                match rng.random_range(0..4) {
                    0 => v.extend([
                        "GET".into(),
                        ftype(rng),
                        rng.random_range(0..200).to_string(),
                    ]),
                    1 => v.extend([
                        "SET".into(),
                        ftype(rng),
                        rng.random_range(0..200).to_string(),
                        rng.random::<i64>().to_string(),
                    ]),
                    2 => v.extend([
                        "INCRBY".into(),
                        ftype(rng),
                        rng.random_range(0..200).to_string(),
                        if rng.random() {
                            rng.random_range(-300i64..300).to_string()
                        } else {
                            rng.random::<i64>().to_string()
                        },
                    ]),
                    _ => v.extend([
                        "OVERFLOW".into(),
                        ["WRAP", "SAT", "FAIL"][rng.random_range(0..3)].into(),
                    ]),
                }
            }
            v
        }
        7 => vec!["GET".into(), key(rng)],
        _ => s(&["SET", "k0", "12345"]),
    }
}

fn run(c: &mut Connection, args: &[String]) -> Result<Value, String> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    cmd(&bytes)
        .query::<Value>(c)
        .map_err(|e| support::err_line(&e))
}

/// Random bitmap commands sent to Cairn and to redis-server give the same
/// replies, errors included.
#[test]
fn random_commands_match_redis() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("redis-server not installed: skipping");
        return;
    };
    let (_s, mut c) = server();
    let mut r = redis_client(redis.port);
    let mut rng = SmallRng::seed_from_u64(0x5eed_b175);
    for step in 0..4000 {
        let args = random_command(&mut rng);
        let want = run(&mut r, &args);
        let got = run(&mut c, &args);
        assert_eq!(got, want, "step {step}: {args:?}");
    }
}
