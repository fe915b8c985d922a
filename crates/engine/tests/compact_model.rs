//! Compact string blocks against a model: random sequences of SET (sizes
//! crossing the compact bounds, keys crossing 23 and 255 bytes), GET,
//! APPEND, SETRANGE, INCR, EXPIRE/PERSIST, DEL, RENAME, COPY, MOVE and
//! eviction, over few shards so tables grow and shrink, checked after every
//! step against a HashMap: values, TTLs, OBJECT ENCODING, which keys are
//! compact and their MEMORY USAGE byte counts.
use cairn_engine::compact::HEADER;
use cairn_engine::ops::keys::{self as kops, ExpireCond, Ttl};
use cairn_engine::ops::string::{self as sops, Cond};
use cairn_engine::util::num::should_store_as_int;
use cairn_engine::Cx;
use cairn_engine::{evict, Engine, Expiry, Options};
use proptest::prelude::*;
use std::collections::HashMap;

const DBS: usize = 2;
const KEY_LENS: [usize; 8] = [1, 13, 23, 24, 100, 255, 256, 300];
const VAL_LENS: [usize; 10] = [0, 1, 44, 45, 100, 1000, 32_766, 32_767, 32_768, 40_000];

#[derive(Debug, Clone)]
enum Op {
    Set {
        db: usize,
        key: u16,
        val: u16,
        ttl: bool,
        keepttl: bool,
    },
    Get {
        db: usize,
        key: u16,
    },
    Append {
        db: usize,
        key: u16,
        val: u16,
    },
    SetRange {
        db: usize,
        key: u16,
        off: u8,
        val: u16,
    },
    Incr {
        db: usize,
        key: u16,
    },
    Expire {
        db: usize,
        key: u16,
        secs: u16,
    },
    Persist {
        db: usize,
        key: u16,
    },
    Del {
        db: usize,
        key: u16,
    },
    Rename {
        db: usize,
        from: u16,
        to: u16,
    },
    Copy {
        db: usize,
        from: u16,
        to: u16,
        to_db: usize,
    },
    Move {
        db: usize,
        key: u16,
    },
    Evict {
        db: usize,
        key: u16,
    },
    /// Many keys at once, then most of them deleted: table growth/shrink.
    Burst {
        db: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let db = 0..DBS;
    let key = 0u16..60;
    let val = any::<u16>();
    prop_oneof![
        8 => (db.clone(), key.clone(), val, any::<bool>(), any::<bool>())
            .prop_map(|(db, key, val, ttl, keepttl)| Op::Set { db, key, val, ttl, keepttl }),
        3 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Get { db, key }),
        2 => (db.clone(), key.clone(), val).prop_map(|(db, key, val)| Op::Append { db, key, val }),
        1 => (db.clone(), key.clone(), any::<u8>(), val).prop_map(|(db, key, off, val)| Op::SetRange { db, key, off, val }),
        2 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Incr { db, key }),
        2 => (db.clone(), key.clone(), 1u16..5000).prop_map(|(db, key, secs)| Op::Expire { db, key, secs }),
        1 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Persist { db, key }),
        2 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Del { db, key }),
        2 => (db.clone(), key.clone(), key.clone()).prop_map(|(db, from, to)| Op::Rename { db, from, to }),
        2 => (db.clone(), key.clone(), key.clone(), db.clone()).prop_map(|(db, from, to, to_db)| Op::Copy { db, from, to, to_db }),
        1 => (db.clone(), key.clone()).prop_map(|(db, key)| Op::Move { db, key }),
        1 => (db.clone(), key).prop_map(|(db, key)| Op::Evict { db, key }),
        1 => db.prop_map(|db| Op::Burst { db }),
    ]
}

/// Key `i`: its length cycles through lengths around the inline (23) and
/// compact (255) bounds.
fn key(i: u16) -> Vec<u8> {
    let len = KEY_LENS[i as usize % KEY_LENS.len()];
    let mut k = format!("k{i}:").into_bytes();
    k.resize(len.max(k.len()), b'x');
    k
}

/// Value `v`: integers, short and long strings around the bounds.
fn value(v: u16) -> Vec<u8> {
    match v % 13 {
        0 => (v / 13).to_string().into_bytes(),
        1 => b"-17".to_vec(),
        2 => b"9223372036854775807".to_vec(),
        3 => b"007".to_vec(),
        _ => {
            let len = VAL_LENS[(v / 13) as usize % VAL_LENS.len()];
            (0..len)
                .map(|i| b'a' + ((i + v as usize) % 26) as u8)
                .collect()
        }
    }
}

#[derive(Debug, Clone)]
struct M {
    val: Vec<u8>,
    enc: &'static str,
    at: u64,
    /// Known to be stored as a compact block.
    compact: bool,
}

/// What SET of `v` under `k` stores.
fn set_model(k: &[u8], v: &[u8], at: u64) -> M {
    let int = should_store_as_int(v).is_some();
    M {
        val: v.to_vec(),
        enc: if int {
            "int"
        } else if v.len() > 44 {
            "raw"
        } else {
            "embstr"
        },
        at,
        compact: !int && k.len() <= 255 && v.len() < 32 * 1024,
    }
}

type Model = Vec<HashMap<Vec<u8>, M>>;

fn check(e: &Engine, model: &Model) -> Result<(), TestCaseError> {
    for (db, m) in model.iter().enumerate() {
        prop_assert_eq!(e.dbsize(&Cx::DETACHED, db), m.len());
        for (k, want) in m {
            let key = e.key(k);
            let mut g = e.lock(&Cx::DETACHED, &key);
            let r = g.peek_ref(db, &key).expect("model key present");
            let got = r.str().expect("a string").to_vec();
            prop_assert_eq!(&got, &want.val);
            prop_assert_eq!(
                r.encoding(),
                want.enc,
                "encoding of {:?}",
                String::from_utf8_lossy(k)
            );
            prop_assert_eq!(r.expire_at(), want.at);
            if want.compact {
                prop_assert!(
                    r.is_compact(),
                    "{:?} not compact",
                    String::from_utf8_lossy(k)
                );
                prop_assert_eq!(r.mem_bytes(), HEADER + k.len() + want.val.len());
            }
            if r.is_compact() {
                prop_assert!(k.len() <= 255 && want.val.len() < 32 * 1024);
                prop_assert!(want.enc != "int");
            } else {
                prop_assert!(r.mem_bytes() >= 80);
            }
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let e = Engine::new(Options {
        databases: DBS,
        shards: 4,
    });
    let far = cairn_engine::clock::now_ms() + 10_000_000;
    let mut model: Model = vec![HashMap::new(); DBS];
    for op in ops {
        match op {
            Op::Set {
                db,
                key: ki,
                val,
                ttl,
                keepttl,
            } => {
                let (k, v) = (key(ki), value(val));
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let old_at = model[db].get(&k).map_or(0, |m| m.at);
                let (expiry, at) = if ttl {
                    (Expiry::At(far + ki as u64), far + ki as u64)
                } else if keepttl {
                    (Expiry::Keep, old_at)
                } else {
                    (Expiry::Clear, 0)
                };
                sops::set(&mut g, db, &kk, &v, Cond::Always, expiry, false).unwrap();
                model[db].insert(k.clone(), set_model(&k, &v, at));
            }
            Op::Get { db, key: ki } => {
                let k = key(ki);
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let got = sops::get(&mut g, db, &kk, |b| b.map(|b| b.to_vec())).unwrap();
                prop_assert_eq!(got, model[db].get(&k).map(|m| m.val.clone()));
            }
            Op::Append { db, key: ki, val } => {
                let (k, v) = (key(ki), value(val));
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let n = sops::append(&mut g, db, &kk, &v).unwrap();
                let m = match model[db].remove(&k) {
                    Some(mut m) => {
                        m.val.extend_from_slice(&v);
                        m.enc = "raw";
                        m.compact = false;
                        m
                    }
                    None => set_model(&k, &v, 0),
                };
                prop_assert_eq!(n, m.val.len());
                model[db].insert(k, m);
            }
            Op::SetRange {
                db,
                key: ki,
                off,
                val,
            } => {
                let (k, v) = (key(ki), value(val));
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let off = off as usize;
                let n = sops::setrange(&mut g, db, &kk, off, &v).unwrap();
                match model[db].get_mut(&k) {
                    Some(m) => {
                        m.compact = false;
                        if !v.is_empty() {
                            if m.val.len() < off + v.len() {
                                m.val.resize(off + v.len(), 0);
                            }
                            m.val[off..off + v.len()].copy_from_slice(&v);
                            m.enc = "raw";
                        }
                        prop_assert_eq!(n, m.val.len());
                    }
                    None if v.is_empty() => prop_assert_eq!(n, 0),
                    None => {
                        let mut data = vec![0u8; off];
                        data.extend_from_slice(&v);
                        let compact = k.len() <= 255 && data.len() < 32 * 1024;
                        prop_assert_eq!(n, data.len());
                        model[db].insert(
                            k,
                            M {
                                val: data,
                                enc: "raw",
                                at: 0,
                                compact,
                            },
                        );
                    }
                }
            }
            Op::Incr { db, key: ki } => {
                let k = key(ki);
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let r = sops::incr_by(&mut g, db, &kk, 1);
                match model[db].get_mut(&k) {
                    None => {
                        prop_assert_eq!(r.unwrap(), 1);
                        model[db].insert(
                            k,
                            M {
                                val: b"1".to_vec(),
                                enc: "int",
                                at: 0,
                                compact: false,
                            },
                        );
                    }
                    Some(m) => {
                        // Redis's strict integer text: canonical, no sign but '-'.
                        let cur = std::str::from_utf8(&m.val)
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok())
                            .filter(|n| n.to_string().as_bytes() == m.val.as_slice());
                        m.compact = false;
                        match (cur.and_then(|c| c.checked_add(1)), r) {
                            (Some(n), Ok(got)) => {
                                prop_assert_eq!(got, n);
                                m.val = n.to_string().into_bytes();
                                m.enc = "int";
                            }
                            (None, Err(_)) => {}
                            (want, got) => {
                                prop_assert!(false, "INCR {:?}: {:?} vs {:?}", m.val, want, got)
                            }
                        }
                    }
                }
            }
            Op::Expire { db, key: ki, secs } => {
                let k = key(ki);
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let at = far + secs as u64;
                let out = kops::expire(&mut g, db, &kk, at as i64, ExpireCond::default());
                let set = matches!(out, kops::ExpireOutcome::Set);
                match model[db].get_mut(&k) {
                    Some(m) => {
                        prop_assert!(set);
                        m.at = at;
                    }
                    None => prop_assert!(!set),
                }
                prop_assert_eq!(
                    kops::ttl(&mut g, db, &kk),
                    if model[db].contains_key(&k) {
                        Ttl::At(at)
                    } else {
                        Ttl::Missing
                    }
                );
            }
            Op::Persist { db, key: ki } => {
                let k = key(ki);
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let done = kops::persist(&mut g, db, &kk);
                let want = model[db]
                    .get_mut(&k)
                    .is_some_and(|m| std::mem::replace(&mut m.at, 0) != 0);
                prop_assert_eq!(done, want);
            }
            Op::Del { db, key: ki } => {
                let k = key(ki);
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let mut freed = 0;
                let n = kops::del(&mut g, db, &[kk], |o| freed += o.mem_bytes());
                let had = model[db].remove(&k);
                prop_assert_eq!(n, usize::from(had.is_some()));
                if let Some(m) = had.filter(|m| m.compact) {
                    prop_assert_eq!(freed, HEADER + k.len() + m.val.len());
                }
            }
            Op::Rename { db, from, to } => {
                let (f, t) = (key(from), key(to));
                let (fk, tk) = (e.key(&f), e.key(&t));
                let mut g = e.lock_keys(&Cx::DETACHED, &[fk, tk]);
                let r = kops::rename(&mut g, db, &fk, &tk, false);
                match model[db].remove(&f) {
                    None => prop_assert!(r.is_err()),
                    Some(mut m) => {
                        prop_assert!(r.is_ok());
                        if m.compact {
                            m.compact = t.len() <= 255;
                        }
                        model[db].insert(t, m);
                    }
                }
            }
            Op::Copy {
                db,
                from,
                to,
                to_db,
            } => {
                let (f, t) = (key(from), key(to));
                let (fk, tk) = (e.key(&f), e.key(&t));
                let mut g = e.lock_keys(&Cx::DETACHED, &[fk, tk]);
                let r = kops::copy(&mut g, db, &fk, to_db, &tk, true, drop);
                if db == to_db && f == t {
                    prop_assert!(r.is_err());
                    continue;
                }
                match model[db].get(&f).cloned() {
                    None => prop_assert!(!r.unwrap()),
                    Some(mut m) => {
                        prop_assert!(r.unwrap());
                        if m.compact {
                            m.compact = t.len() <= 255;
                        }
                        model[to_db].insert(t, m);
                    }
                }
            }
            Op::Move { db, key: ki } => {
                let k = key(ki);
                let kk = e.key(&k);
                let to = 1 - db;
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let moved = kops::move_key(&mut g, db, to, &kk).unwrap();
                let can = model[db].contains_key(&k) && !model[to].contains_key(&k);
                prop_assert_eq!(moved, can);
                if can {
                    let m = model[db].remove(&k).unwrap();
                    model[to].insert(k, m);
                }
            }
            Op::Evict { db, key: ki } => {
                let k = key(ki);
                let kk = e.key(&k);
                let mut g = e.lock(&Cx::DETACHED, &kk);
                let gone = evict::evict_key(&mut g, db, &kk);
                prop_assert_eq!(gone.is_some(), model[db].remove(&k).is_some());
            }
            Op::Burst { db } => {
                // 300 keys of their own (names the other ops never use),
                // then all but a few deleted: the table doubles several
                // times and shrinks back, moving every compact block.
                for i in 0..300u32 {
                    let k = format!("burst:{i}").into_bytes();
                    let kk = e.key(&k);
                    let mut g = e.lock(&Cx::DETACHED, &kk);
                    sops::set(
                        &mut g,
                        db,
                        &kk,
                        b"some value",
                        Cond::Always,
                        Expiry::Clear,
                        false,
                    )
                    .unwrap();
                }
                for i in 0..300u32 {
                    let k = format!("burst:{i}").into_bytes();
                    let kk = e.key(&k);
                    let mut g = e.lock(&Cx::DETACHED, &kk);
                    if i % 50 == 0 {
                        let m = set_model(&k, b"some value", 0);
                        model[db].insert(k.clone(), m);
                    } else {
                        prop_assert!(g.remove(db, &kk).is_some());
                    }
                }
            }
        }
        check(&e, &model)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn compact_strings_match_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        run(ops)?;
    }
}
