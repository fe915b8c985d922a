//! The keyspace against a reference model: random sequences of set, remove,
//! expire, rename, move, flush and swap over several databases and many
//! shards, checked after every step against a BTreeMap per database, with
//! the clock jumping so lazy and active expiry both take part.
use cairn_engine::expire::ExpireCycle;
use cairn_engine::value::{StrValue, Value};
use cairn_engine::Cx;
use cairn_engine::{clock, Engine, Expiry, Options};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
enum Op {
    Set {
        db: usize,
        key: u8,
        val: u8,
        ttl: Option<u16>,
    },
    Remove {
        db: usize,
        key: u8,
    },
    Expire {
        db: usize,
        key: u8,
        ttl: u16,
    },
    Persist {
        db: usize,
        key: u8,
    },
    Rename {
        db: usize,
        from: u8,
        to: u8,
    },
    Move {
        from_db: usize,
        to_db: usize,
        key: u8,
    },
    Flush {
        db: usize,
    },
    Swap {
        a: usize,
        b: usize,
    },
    Tick {
        ms: u16,
    },
    ActiveExpire,
}

const DBS: usize = 3;

fn op() -> impl Strategy<Value = Op> {
    let db = 0..DBS;
    prop_oneof![
        6 => (db.clone(), any::<u8>(), any::<u8>(), proptest::option::of(1u16..500))
            .prop_map(|(db, key, val, ttl)| Op::Set { db, key, val, ttl }),
        2 => (db.clone(), any::<u8>()).prop_map(|(db, key)| Op::Remove { db, key }),
        2 => (db.clone(), any::<u8>(), 1u16..500).prop_map(|(db, key, ttl)| Op::Expire { db, key, ttl }),
        1 => (db.clone(), any::<u8>()).prop_map(|(db, key)| Op::Persist { db, key }),
        2 => (db.clone(), any::<u8>(), any::<u8>()).prop_map(|(db, from, to)| Op::Rename { db, from, to }),
        1 => (db.clone(), db.clone(), any::<u8>()).prop_map(|(from_db, to_db, key)| Op::Move { from_db, to_db, key }),
        1 => (0..DBS + 1).prop_map(|db| Op::Flush { db }),
        1 => (db.clone(), db).prop_map(|(a, b)| Op::Swap { a, b }),
        2 => (1u16..400).prop_map(|ms| Op::Tick { ms }),
        1 => Just(Op::ActiveExpire),
    ]
}

/// Value and absolute expire time (0 = none) per key, per database.
type Model = Vec<BTreeMap<Vec<u8>, (u8, u64)>>;

fn key(k: u8) -> Vec<u8> {
    format!("key:{}", k % 40).into_bytes()
}

fn live(m: &BTreeMap<Vec<u8>, (u8, u64)>, k: &[u8], now: u64) -> Option<(u8, u64)> {
    m.get(k).copied().filter(|(_, at)| *at == 0 || now <= *at)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn keyspace_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        // The clock is process-global; this is the only test in this binary
        // that moves it, and it stands still except for explicit ticks.
        clock::freeze(true);
        let e = Engine::new(Options { databases: DBS, shards: 16 });
        let mut model: Model = vec![BTreeMap::new(); DBS];
        let mut cycle = ExpireCycle::default();
        for op in ops {
            match op {
                Op::Set { db, key: k, val, ttl } => {
                    let kb = key(k);
                    let key = e.key(&kb);
                    let mut g = e.lock(&Cx::DETACHED, &key);
                    let at = ttl.map(|t| g.now + t as u64);
                    let exp = at.map_or(Expiry::Clear, Expiry::At);
                    g.set(db, &key, Value::Str(StrValue::from_bytes(&[val])), exp);
                    model[db].insert(kb, (val, at.unwrap_or(0)));
                }
                Op::Remove { db, key: k } => {
                    let kb = key(k);
                    let key = e.key(&kb);
                    let mut g = e.lock(&Cx::DETACHED, &key);
                    let now = g.now;
                    let had = g.remove(db, &key).is_some();
                    prop_assert_eq!(had, live(&model[db], &kb, now).is_some());
                    model[db].remove(&kb);
                }
                Op::Expire { db, key: k, ttl } => {
                    let kb = key(k);
                    let key = e.key(&kb);
                    let mut g = e.lock(&Cx::DETACHED, &key);
                    let now = g.now;
                    let at = now + ttl as u64;
                    let done = g.set_expire(db, &key, at);
                    let want = live(&model[db], &kb, now);
                    prop_assert_eq!(done, want.is_some());
                    if let Some((v, _)) = want {
                        model[db].insert(kb, (v, at));
                    }
                }
                Op::Persist { db, key: k } => {
                    let kb = key(k);
                    let key = e.key(&kb);
                    let mut g = e.lock(&Cx::DETACHED, &key);
                    let now = g.now;
                    let done = g.set_expire(db, &key, 0);
                    let want = live(&model[db], &kb, now);
                    prop_assert_eq!(done, want.is_some());
                    if let Some((v, _)) = want {
                        model[db].insert(kb, (v, 0));
                    }
                }
                Op::Rename { db, from, to } => {
                    let (fb, tb) = (key(from), key(to));
                    let (fk, tk) = (e.key(&fb), e.key(&tb));
                    let mut g = e.lock_keys(&Cx::DETACHED, &[fk, tk]);
                    let now = g.now;
                    let done = g.rename_entry(db, &fk, db, &tk);
                    let want = live(&model[db], &fb, now);
                    prop_assert_eq!(done, want.is_some());
                    if let Some(v) = want {
                        model[db].remove(&fb);
                        model[db].insert(tb, v);
                    }
                }
                Op::Move { from_db, to_db, key: k } => {
                    let kb = key(k);
                    let key = e.key(&kb);
                    let mut g = e.lock(&Cx::DETACHED, &key);
                    let now = g.now;
                    let src = live(&model[from_db], &kb, now);
                    let dst = live(&model[to_db], &kb, now);
                    // MOVE's rule: only when the source exists and the
                    // destination does not.
                    if from_db != to_db && src.is_some() && dst.is_none() {
                        prop_assert!(!g.exists(to_db, &key));
                        prop_assert!(g.rename_entry(from_db, &key, to_db, &key));
                        model[from_db].remove(&kb);
                        model[to_db].insert(kb, src.unwrap());
                    }
                }
                Op::Flush { db } => {
                    if db == DBS {
                        drop(e.flush(&Cx::DETACHED, None));
                        model.iter_mut().for_each(BTreeMap::clear);
                    } else {
                        drop(e.flush(&Cx::DETACHED, Some(db)));
                        model[db].clear();
                    }
                }
                Op::Swap { a, b } => {
                    e.swap_dbs(&Cx::DETACHED, a, b);
                    model.swap(a, b);
                }
                Op::Tick { ms } => clock::jump(ms as i64),
                Op::ActiveExpire => {
                    e.active_expire(&Cx::DETACHED, &mut cycle, Instant::now() + Duration::from_millis(50));
                }
            }
            // Every live key in the model reads back with its value and TTL;
            // SCAN returns exactly the live keys.
            let now = clock::now_ms();
            for (db, live_model) in model.iter().enumerate() {
                let mut scanned = Vec::new();
                let mut cursor = 0;
                loop {
                    cursor = e.scan(&Cx::DETACHED, db, cursor, 7, |en| {
                        if !en.is_expired(now) {
                            scanned.push(en.key().to_vec())
                        }
                    });
                    if cursor == 0 {
                        break;
                    }
                }
                scanned.sort();
                scanned.dedup();
                let want: Vec<Vec<u8>> = live_model
                    .iter()
                    .filter(|(_, (_, at))| *at == 0 || now <= *at)
                    .map(|(k, _)| k.clone())
                    .collect();
                prop_assert_eq!(&scanned, &want, "db {}", db);
                for k in &want {
                    let key = e.key(k);
                    let mut g = e.lock(&Cx::DETACHED, &key);
                    let en = g.peek(db, &key).expect("live key present");
                    let (v, at) = live_model[k];
                    prop_assert_eq!(en.expire_at(), at);
                    match &en.value {
                        Value::Str(s) => prop_assert_eq!(s.to_vec(), vec![v]),
                        _ => prop_assert!(false, "wrong type"),
                    }
                }
            }
        }
    }
}
