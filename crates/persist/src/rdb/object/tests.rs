//! The object codec against payloads captured from redis-server 7.0.15
//! (`redis-7.0.15-dumps.txt`: one `name encoding hex` line per key, made
//! with DUMP after building each key with the commands its name says),
//! Cairn -> Cairn round trips of every type and encoding, and random,
//! truncated and bit-flipped payloads, which must be refused or read,
//! never panic.
use super::*;
use crate::rdb::{open_dump, seal_dump};
use cairn_engine::value::zset::ZSetLimits;
use cairn_engine::value::HashLimits;
use proptest::prelude::*;

fn captured() -> Vec<(String, String, Vec<u8>)> {
    include_str!("redis-7.0.15-dumps.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut it = l.split(' ');
            let name = it.next().unwrap().to_string();
            let enc = it.next().unwrap().to_string();
            let hex = it.next().unwrap();
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            (name, enc, bytes)
        })
        .collect()
}

/// Redis 7.0.15's defaults (Debian build): hash 512 entries, zset 128.
fn redis_limits() -> BuildLimits {
    BuildLimits {
        hash: HashLimits {
            max_listpack_entries: 512,
            max_listpack_value: 64,
        },
        zset: ZSetLimits {
            max_listpack_entries: 128,
            max_listpack_value: 64,
        },
        list_fill: -2,
        max_intset: 512,
        ..BuildLimits::default()
    }
}

/// A value as plain data, for comparisons across encodings.
#[derive(Debug, PartialEq)]
enum Plain {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, u64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

fn plain(v: &Value) -> Plain {
    match v {
        Value::Stream(_) => unreachable!("no stream payloads here"),
        Value::Str(s) => Plain::Str(s.to_vec()),
        Value::List(l) => Plain::List(l.iter().map(|e| e.to_vec()).collect()),
        Value::Set(s) => {
            let mut m: Vec<Vec<u8>> = s.iter().map(|e| e.to_vec()).collect();
            m.sort();
            Plain::Set(m)
        }
        Value::ZSet(z) => Plain::ZSet(z.iter().map(|(m, s)| (m.to_vec(), s.to_bits())).collect()),
        Value::Hash(h) => {
            let mut p: Vec<(Vec<u8>, Vec<u8>)> = h
                .view()
                .iter()
                .map(|(f, v)| (f.to_vec(), v.to_vec()))
                .collect();
            p.sort();
            Plain::Hash(p)
        }
    }
}

fn expected(name: &str) -> Plain {
    let strs = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    match name {
        "str_small" => Plain::Str(b"hello".to_vec()),
        "str_int8" => Plain::Str(b"-12".to_vec()),
        "str_int16" => Plain::Str(b"12345".to_vec()),
        "str_int32" => Plain::Str(b"-2147483648".to_vec()),
        "str_int64" => Plain::Str(b"9223372036854775807".to_vec()),
        "str_noncanon" => Plain::Str(b"0123".to_vec()),
        "str_empty" => Plain::Str(Vec::new()),
        "str_lzf" => Plain::Str(b"abcdefghij".repeat(50)),
        "str_lzf2" => Plain::Str(
            (0..300)
                .map(|i| format!("key:{i},"))
                .collect::<String>()
                .into_bytes(),
        ),
        "str_incompressible" => Plain::Str((0..=255u8).collect()),
        "str_bin" => Plain::Str(b"\x00\xff\r\n".repeat(3)),
        "list_small" => Plain::List({
            let mut v = strs(&["a", "1", "-5000", "70000", "9223372036854775807"]);
            v.push(vec![b'x'; 100]);
            v
        }),
        "list_big" => Plain::List(
            (0..2000)
                .map(|i| format!("element-{i}").into_bytes())
                .collect(),
        ),
        "list_longelems" => Plain::List(
            (0..10)
                .map(|i| format!("y{i}").repeat(3000).into_bytes())
                .collect(),
        ),
        "set_intset16" => Plain::Set({
            let mut v = strs(&["1", "2", "3", "-100"]);
            v.sort();
            v
        }),
        "set_intset64" => Plain::Set({
            let mut v = vec![
                b"1".to_vec(),
                (1i64 << 40).to_string().into_bytes(),
                (-(1i64 << 62)).to_string().into_bytes(),
            ];
            v.sort();
            v
        }),
        "set_table" => Plain::Set({
            let mut v = strs(&["a", "b", "c", "1"]);
            v.sort();
            v
        }),
        "set_bigint" => Plain::Set({
            let mut v: Vec<Vec<u8>> = (0..600).map(|i: i32| i.to_string().into_bytes()).collect();
            v.sort();
            v
        }),
        "zset_lp" => {
            let mut v = vec![
                (1.0, "a"),
                (2.5, "b"),
                (-3.0, "c"),
                (f64::INFINITY, "d"),
                (f64::NEG_INFINITY, "e"),
                (0.0, "f"),
                (1e300, "g"),
                (0.1, "h"),
            ];
            v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
            Plain::ZSet(
                v.into_iter()
                    .map(|(s, m)| (m.as_bytes().to_vec(), s.to_bits()))
                    .collect(),
            )
        }
        "zset_skip" => Plain::ZSet(
            (0..200)
                .map(|i| {
                    (
                        format!("member-{i}").into_bytes(),
                        (i as f64 * 1.5).to_bits(),
                    )
                })
                .collect(),
        ),
        "zset_longmember" => Plain::ZSet(vec![
            (vec![b'm'; 100], 1f64.to_bits()),
            (b"n".to_vec(), 2f64.to_bits()),
        ]),
        "hash_lp" => Plain::Hash({
            let mut v: Vec<(Vec<u8>, Vec<u8>)> = [
                ("f1", "v1"),
                ("f2", "123"),
                ("f3", "-1"),
                ("num", "9999999999"),
            ]
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
            v.sort();
            v
        }),
        "hash_table" => Plain::Hash({
            let mut v: Vec<(Vec<u8>, Vec<u8>)> = (0..600)
                .map(|i| {
                    (
                        format!("field{i}").into_bytes(),
                        format!("value{i}").into_bytes(),
                    )
                })
                .collect();
            v.sort();
            v
        }),
        "hash_longval" => Plain::Hash(vec![
            (b"a".to_vec(), vec![b'v'; 100]),
            (b"b".to_vec(), b"1".to_vec()),
        ]),
        other => panic!("no expectation for {other}"),
    }
}

#[test]
fn redis_payloads_restore_with_their_contents_and_encodings() {
    let cases = captured();
    assert_eq!(cases.len(), 24);
    for (name, enc, payload) in cases {
        let v = restore(&payload, &redis_limits()).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(plain(&v), expected(&name), "{name}");
        // Same limits as the Redis that wrote it: same OBJECT ENCODING
        // (Redis 7.0 names a small string embstr; Cairn has no embstr).
        let want = if enc == "embstr" { "raw" } else { enc.as_str() };
        let got = if v.encoding() == "embstr" {
            "raw"
        } else {
            v.encoding()
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn cairn_writes_redis_bytes() {
    // Redis's own payloads, restored and dumped again, give the same
    // bytes wherever the layout is determined by the value (not by hash
    // table order or quicklist node history).
    for (name, _, payload) in captured() {
        if name.starts_with("set_table")
            || name.starts_with("set_bigint")
            || name.starts_with("hash_table")
            || name.starts_with("hash_longval")
        {
            continue;
        }
        let v = restore(&payload, &redis_limits()).unwrap();
        let mut out = Vec::new();
        put_value(&mut out, &v);
        seal_dump(&mut out);
        assert_eq!(hex(&out), hex(&payload), "{name}");
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_truncation_of_every_captured_payload_is_refused() {
    for (name, _, payload) in captured() {
        let body = open_dump(&payload).unwrap();
        for n in 0..body.len() {
            let mut p = body[..n].to_vec();
            seal_dump(&mut p);
            assert!(restore(&p, &redis_limits()).is_err(), "{name} cut at {n}");
        }
    }
}

#[test]
fn footer_errors_come_before_format_errors() {
    let mut p = vec![Type::String as u8, 0x05];
    seal_dump(&mut p);
    assert_eq!(
        restore(&p, &redis_limits()).err(),
        Some(RestoreError::Format)
    );
    let n = p.len();
    p[n - 1] ^= 1;
    assert_eq!(
        restore(&p, &redis_limits()).err(),
        Some(RestoreError::Footer)
    );
    // A newer RDB version is refused as Redis refuses it.
    let mut p = vec![Type::String as u8, 0x00];
    p.extend_from_slice(&11u16.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    assert_eq!(
        restore(&p, &redis_limits()).err(),
        Some(RestoreError::Footer)
    );
}

#[test]
fn empty_and_duplicate_values_and_streams_are_bad_format() {
    let sealed = |mut p: Vec<u8>| {
        seal_dump(&mut p);
        p
    };
    // An empty set, an empty hash listpack, a set with a repeated member, a
    // stream cut short after its node count.
    assert!(restore(&sealed(vec![2, 0]), &redis_limits()).is_err());
    let empty_lp = listpack::Writer::new().finish();
    let mut p = vec![16];
    crate::rdb::put_string(&mut p, &empty_lp);
    assert!(restore(&sealed(p), &redis_limits()).is_err());
    assert!(restore(&sealed(vec![2, 2, 1, b'a', 1, b'a']), &redis_limits()).is_err());
    assert!(restore(&sealed(vec![15, 0]), &redis_limits()).is_err());
    assert!(restore(&sealed(vec![19, 0]), &redis_limits()).is_err());
    // A count far beyond the bytes left is refused before allocating.
    assert!(restore(
        &sealed(vec![2, 0x80, 0xff, 0xff, 0xff, 0xff]),
        &redis_limits()
    )
    .is_err());
}

#[test]
fn old_encodings_load() {
    let sealed = |mut p: Vec<u8>| {
        seal_dump(&mut p);
        p
    };
    // RDB_TYPE_ZSET (text scores) and RDB_TYPE_LIST (plain strings).
    let v = restore(
        &sealed(vec![3, 1, 1, b'm', 3, b'1', b'.', b'5']),
        &redis_limits(),
    )
    .unwrap();
    assert_eq!(
        plain(&v),
        Plain::ZSet(vec![(b"m".to_vec(), 1.5f64.to_bits())])
    );
    let v = restore(&sealed(vec![1, 2, 1, b'a', 0xc0, 7]), &redis_limits()).unwrap();
    assert_eq!(plain(&v), Plain::List(vec![b"a".to_vec(), b"7".to_vec()]));
    // RDB_TYPE_HASH_ZIPMAP.
    let zm = [1u8, 1, b'f', 1, 0, b'v', 0xff];
    let mut p = vec![9];
    crate::rdb::put_string(&mut p, &zm);
    let v = restore(&sealed(p), &redis_limits()).unwrap();
    assert_eq!(plain(&v), Plain::Hash(vec![(b"f".to_vec(), b"v".to_vec())]));
    // RDB_TYPE_LIST_QUICKLIST (v1) of one ziplist node ["x", 5].
    let zl = [
        16u8, 0, 0, 0, 13, 0, 0, 0, 2, 0, 0, 0x01, b'x', 3, 0xf6, 0xff,
    ];
    let mut p = vec![14, 1];
    crate::rdb::put_string(&mut p, &zl);
    let v = restore(&sealed(p), &redis_limits()).unwrap();
    assert_eq!(plain(&v), Plain::List(vec![b"x".to_vec(), b"5".to_vec()]));
    // The same ziplist as RDB_TYPE_HASH_ZIPLIST: {"x": "5"}.
    let mut p = vec![13];
    crate::rdb::put_string(&mut p, &zl);
    let v = restore(&sealed(p), &redis_limits()).unwrap();
    assert_eq!(plain(&v), Plain::Hash(vec![(b"x".to_vec(), b"5".to_vec())]));
}

#[test]
fn quicklist_2_reads_plain_nodes_and_skips_empty_ones() {
    // Redis 7.0 stores an element over `packed_threshold` (1 GB by default)
    // in a PLAIN node of its own; an empty listpack node is skipped.
    let mut lp = listpack::Writer::new();
    lp.push(b"a");
    let mut p = vec![Type::ListQuicklist2 as u8, 3];
    put_len(&mut p, CONTAINER_PACKED);
    crate::rdb::put_string(&mut p, &lp.finish());
    put_len(&mut p, CONTAINER_PLAIN);
    crate::rdb::put_string(&mut p, b"big element");
    put_len(&mut p, CONTAINER_PACKED);
    crate::rdb::put_string(&mut p, &listpack::Writer::new().finish());
    seal_dump(&mut p);
    let v = restore(&p, &redis_limits()).unwrap();
    assert_eq!(
        plain(&v),
        Plain::List(vec![b"a".to_vec(), b"big element".to_vec()])
    );
    // An unknown container is refused.
    let mut p = vec![Type::ListQuicklist2 as u8, 1, 3, 1, b'x'];
    seal_dump(&mut p);
    assert!(restore(&p, &redis_limits()).is_err());
}

fn round_trip(v: &Value, limits: &BuildLimits) -> Value {
    let mut out = Vec::new();
    put_value(&mut out, v);
    seal_dump(&mut out);
    restore(&out, limits).unwrap()
}

#[test]
fn cairn_values_round_trip_in_both_encodings() {
    let l = redis_limits();
    let small: Vec<Vec<u8>> = vec![b"a".to_vec(), b"12".to_vec(), b"-70000".to_vec()];
    let big: Vec<Vec<u8>> = (0..1000).map(|i| format!("m{i}").into_bytes()).collect();
    for members in [&small, &big] {
        let list = Value::List(Box::new(ListValue::from_elements(
            -2,
            members.iter().map(|m| m.as_slice()),
        )));
        assert_eq!(plain(&round_trip(&list, &l)), plain(&list));
        let set = Value::Set(Box::new(SetValue::from_members(
            members.iter().map(|m| m.as_slice()),
            512,
        )));
        assert_eq!(plain(&round_trip(&set, &l)), plain(&set));
        let mut h = HashValue::new();
        for (i, m) in members.iter().enumerate() {
            h.set(m, format!("{i}").as_bytes(), &l.hash);
        }
        let hash = Value::Hash(Box::new(h));
        let back = round_trip(&hash, &l);
        assert_eq!(plain(&back), plain(&hash));
        assert_eq!(back.encoding(), hash.encoding());
        let mut items: Vec<(f64, &[u8])> = members
            .iter()
            .enumerate()
            .map(|(i, m)| (i as f64 / 3.0, m.as_slice()))
            .collect();
        items.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let z = Value::ZSet(Box::new(ZSetValue::from_sorted(&items, &l.zset)));
        let back = round_trip(&z, &l);
        assert_eq!(plain(&back), plain(&z));
        assert_eq!(back.encoding(), z.encoding());
    }
    let ints = Value::Set(Box::new(SetValue::from_members(
        [&b"5"[..], b"-9223372036854775808", b"77"],
        512,
    )));
    let back = round_trip(&ints, &l);
    assert_eq!(back.encoding(), "intset");
    assert_eq!(plain(&back), plain(&ints));
    for s in [&b""[..], b"0", b"-1", &[b'q'; 5000][..]] {
        let v = Value::Str(StrValue::from_bytes(s));
        assert_eq!(plain(&round_trip(&v, &l)), plain(&v));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bodies_never_panic(t in 0u8..25, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut p = vec![t];
        p.extend_from_slice(&body);
        seal_dump(&mut p);
        let _ = restore(&p, &redis_limits());
    }

    #[test]
    fn flipped_captured_payloads_never_panic(pick in 0usize..24, at in any::<usize>(), bit in 0u8..8) {
        let cases = captured();
        let (_, _, payload) = &cases[pick % cases.len()];
        let mut body = open_dump(payload).unwrap().to_vec();
        let i = at % body.len();
        body[i] ^= 1 << bit;
        seal_dump(&mut body);
        let _ = restore(&body, &redis_limits());
    }
}
