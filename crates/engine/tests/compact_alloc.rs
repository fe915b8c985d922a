//! The cache path never inflates a compact string into a full entry: SET,
//! GET, MGET, STRLEN, GETRANGE, TTL, EXPIRE, PERSIST, TYPE, OBJECT, EXISTS,
//! SCAN, eviction sampling and DEL all work on the block as it is. One test
//! only in this binary, because the materialization counter is global.
use cairn_engine::compact::{materialized, HEADER};
use cairn_engine::ops::bitmap;
use cairn_engine::ops::keys::{self as kops, ExpireCond};
use cairn_engine::ops::string::{self as sops, Cond};
use cairn_engine::Cx;
use cairn_engine::{evict, Engine, Expiry, Options};

#[test]
fn cache_traffic_never_materializes_compact_strings() {
    let e = Engine::new(Options::default());
    let n = 20_000u32;
    let val = [b'v'; 100];
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("hr:{i:010}").into_bytes()).collect();
    let before = materialized();
    for (i, k) in keys.iter().enumerate() {
        let kk = e.key(k);
        let mut g = e.lock(&Cx::DETACHED, &kk);
        let exp = if i % 3 == 0 {
            Expiry::At(cairn_engine::clock::now_ms() + 3_600_000)
        } else {
            Expiry::Clear
        };
        sops::set(&mut g, 0, &kk, &val, Cond::Always, exp, false).unwrap();
        // Overwrite half of them (SET on an existing compact key).
        if i % 2 == 0 {
            sops::set(&mut g, 0, &kk, &val, Cond::Always, Expiry::Keep, false).unwrap();
        }
    }
    let mut bytes = 0;
    for k in &keys {
        let kk = e.key(k);
        let mut g = e.lock(&Cx::DETACHED, &kk);
        let got = sops::get(&mut g, 0, &kk, |b| b.map(|b| b.len())).unwrap();
        assert_eq!(got, Some(100));
        sops::get_str(&mut g, 0, &kk, |s| assert_eq!(s.unwrap().len(), 100)).unwrap();
        sops::mget_str(&mut g, 0, &[kk], |s| assert!(s.is_some()));
        assert_eq!(sops::strlen(&mut g, 0, &kk).unwrap(), 100);
        sops::getrange(&mut g, 0, &kk, 0, 4, |b| assert_eq!(b, b"vvvvv")).unwrap();
        kops::ttl(&mut g, 0, &kk);
        kops::expire(
            &mut g,
            0,
            &kk,
            (cairn_engine::clock::now_ms() + 7_200_000) as i64,
            ExpireCond::default(),
        );
        kops::persist(&mut g, 0, &kk);
        assert!(kops::key_type(&mut g, 0, &kk).is_some());
        let info = kops::object(&mut g, 0, &kk).unwrap();
        assert_eq!(info.encoding, "raw");
        assert_eq!(kops::exists(&mut g, 0, &[kk]), 1);
        // 'v' is 0b0111_0110: bit 1 set, bit 0 clear; 100 x 5 bits set.
        assert!(bitmap::getbit(&mut g, 0, &kk, 1).unwrap());
        let n = bitmap::bitcount(&mut g, 0, &kk, || {
            Ok::<_, cairn_engine::Error>(bitmap::CountArgs::Whole)
        });
        assert_eq!(n.unwrap(), 500);
        let p = bitmap::bitpos(&mut g, 0, &kk, true, || Ok::<_, cairn_engine::Error>(None));
        assert_eq!(p.unwrap(), 1);
        let r = g.peek_ref(0, &kk).unwrap();
        assert!(r.is_compact());
        bytes += r.mem_bytes();
    }
    // One block per key, of exactly header + key + value bytes.
    assert_eq!(bytes, n as usize * (HEADER + 13 + 100));
    let mut seen = 0;
    e.for_each_key(&Cx::DETACHED, 0, |_| seen += 1);
    assert_eq!(seen, n);
    // Eviction and DEL free blocks as they are.
    let mut pool = evict::Pool::default();
    for _ in 0..100 {
        assert!(matches!(
            evict::evict_one(&e, &Cx::DETACHED, evict::Policy::AllkeysLru, 5, &mut pool),
            evict::Step::Freed(_)
        ));
    }
    for k in &keys[..1000] {
        let kk = e.key(k);
        kops::del(&mut e.lock(&Cx::DETACHED, &kk), 0, &[kk], drop);
    }
    assert_eq!(materialized(), before, "a compact string was materialized");
    // An in-place edit does materialize (Redis turns embstr into raw too).
    let kk = e.key(b"edited");
    let mut g = e.lock(&Cx::DETACHED, &kk);
    sops::set(&mut g, 0, &kk, b"hello", Cond::Always, Expiry::Clear, false).unwrap();
    sops::append(&mut g, 0, &kk, b"!").unwrap();
    drop(g);
    assert_eq!(materialized(), before + 1);
}
