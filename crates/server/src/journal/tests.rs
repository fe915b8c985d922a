//! Recovery from a journal cut at every byte offset, in process: a script
//! of writes runs against a server with a capturing sink; for each cut,
//! the keyspace is emptied, the cut journal is replayed, and the state
//! must equal the state after exactly the writes whose batches are whole
//! (always a prefix of what was acknowledged, never anything else).
use super::replay::Replayer;
use crate::client::{Client, ClientInfo};
use crate::config::Config;
use crate::exec::dispatch;
use crate::resp::ctx::Args;
use crate::shared::Shared;
use cairn_persist::journal::frame::{self, End};
use cairn_protocol::resp::ArgList;
use parking_lot::Mutex;
use std::sync::Arc;

/// A sink that frames units into an in-memory journal file.
struct Capture(Mutex<Vec<u8>>);

impl cairn_engine::record::Sink for Capture {
    fn append_with(&self, fill: &mut dyn FnMut(&mut Vec<u8>)) -> u64 {
        let mut unit = Vec::new();
        fill(&mut unit);
        if unit.is_empty() {
            return 0;
        }
        let mut f = self.0.lock();
        f.extend_from_slice(&frame::frame_header(&unit));
        f.extend_from_slice(&unit);
        f.len() as u64
    }
}

fn client() -> Client {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    Client::new(Arc::new(ClientInfo::new(1, addr, addr, -1, 0)), true, None)
}

fn run(shared: &Shared, c: &mut Client, line: &str) -> Vec<u8> {
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let list = ArgList::from_args(words.iter().copied());
    let mut out = Vec::new();
    let stats = &shared.worker_stats[0];
    dispatch::execute(shared, c, Args::new(&[], &list), &mut out, stats);
    out
}

/// Everything observable about the keyspace, in a canonical order.
fn render(shared: &Shared) -> String {
    let mut c = client();
    let mut s = String::new();
    for db in 0..4 {
        run(shared, &mut c, &format!("SELECT {db}"));
        let keys = run(shared, &mut c, "KEYS *");
        let text = String::from_utf8_lossy(&keys).into_owned();
        let mut names: Vec<&str> = text
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .collect();
        names.sort_unstable();
        for k in names {
            let t = run(shared, &mut c, &format!("TYPE {k}"));
            let read = match &t[..] {
                b"+string\r\n" => format!("GET {k}"),
                b"+list\r\n" => format!("LRANGE {k} 0 -1"),
                b"+set\r\n" => format!("SORT {k} ALPHA"),
                b"+zset\r\n" => format!("ZRANGE {k} 0 -1 WITHSCORES"),
                b"+hash\r\n" => format!("HGETALL {k}"),
                other => panic!("type {other:?}"),
            };
            let v = run(shared, &mut c, &read);
            let ttl = run(shared, &mut c, &format!("PEXPIRETIME {k}"));
            s.push_str(&format!(
                "{db} {k} {} {} {}\n",
                String::from_utf8_lossy(&t).trim_end(),
                String::from_utf8_lossy(&v).replace("\r\n", " "),
                String::from_utf8_lossy(&ttl).trim_end()
            ));
        }
    }
    s
}

const SCRIPT: &[&str] = &[
    "SET a 1",
    "SET b hello EX 1000",
    "INCRBYFLOAT a 1.5",
    "SADD s 1 2 3 4 5 6 7 8 9 10",
    "SPOP s 3",
    "SPOP s",
    "LPUSH l x y z",
    "LMOVE l l2 LEFT RIGHT",
    "RPUSH bl a b c d e f",
    "BLPOP nothing bl 0",
    "BRPOP bl 1",
    "BLMOVE bl bl2 LEFT LEFT 0",
    "BLMPOP 0 2 nothing bl RIGHT COUNT 2",
    "HSET h f1 v1 f2 v2",
    "HINCRBYFLOAT h n 2.25",
    "ZADD z 1 one 2 two 3 three",
    "ZINCRBY z 5 one",
    "ZADD zb 1 a 2 b 3 c 4 d",
    "BZPOPMIN nothing zb 0",
    "BZMPOP 0 1 zb MAX COUNT 2",
    "SETBIT bits 7 1",
    "PFADD hll a b c d",
    "APPEND b !",
    "EXPIRE a 500",
    "PEXPIRE l2 -1",
    "GETEX b PX 700000",
    "SELECT 2",
    "SET in2 two",
    "MULTI",
    "SET t1 1",
    "INCR t1",
    "SADD ts m",
    "EXEC",
    "SWAPDB 2 3",
    "SELECT 0",
    "RENAME h h2",
    "SET gone soon",
    "DEL gone",
    "SET nx 1 NX",
    "SET nx 2 NX",
    "FLUSHDB",
    "SET after flush",
];

#[test]
fn replay_of_every_cut_is_a_prefix_of_the_writes() {
    let mut cfg = Config::default();
    cfg.databases = 4;
    let shared = crate::server::build_shared(cfg).unwrap();
    let cap = Arc::new(Capture(Mutex::new(frame::header().to_vec())));
    shared
        .engine
        .set_journal(Some(cap.clone() as Arc<dyn cairn_engine::record::Sink>));
    // (journal length, state) after each command; a cut at length L must
    // give the state of the last entry whose length is <= L.
    let mut states = vec![(frame::HEADER_LEN as usize, render(&shared))];
    let mut c = client();
    for line in SCRIPT {
        let reply = run(&shared, &mut c, line);
        assert!(
            !reply.starts_with(b"-"),
            "{line}: {}",
            String::from_utf8_lossy(&reply)
        );
        let len = cap.0.lock().len();
        let state = render(&shared);
        if states.last().unwrap().0 == len {
            // Not journaled (a read, a no-op, or queued in MULTI): the
            // state must not have changed either.
            assert_eq!(
                states.last().unwrap().1,
                state,
                "{line} changed state unjournaled"
            );
        } else {
            states.push((len, state));
        }
    }
    shared.engine.set_journal(None);
    assert_eq!(cairn_engine::record::unsourced_count(), 0);
    // The script's writes all show (the comparison below is not vacuous).
    assert!(states.len() >= 28, "{} states", states.len());
    assert!(states[6].1.contains("0 s +set"), "{}", states[6].1);
    let before_flush = &states[states.len() - 3].1;
    for key in ["a", "b", "s", "l", "z", "bits", "hll", "h2"] {
        assert!(
            before_flush.contains(&format!("0 {key} +")),
            "{key}: {before_flush}"
        );
    }
    assert!(before_flush.contains("3 t1 +string $1 2"), "{before_flush}");
    assert_eq!(
        states.last().unwrap().1.lines().count(),
        4,
        "{}",
        states.last().unwrap().1
    );
    let journal = cap.0.lock().clone();
    // Served blocking commands are journaled in their non-blocking form.
    for blocking in [
        &b"BLPOP"[..],
        b"BRPOP",
        b"BLMOVE",
        b"BLMPOP",
        b"BZPOPMIN",
        b"BZMPOP",
        b"SPOP",
    ] {
        assert!(
            !journal.windows(blocking.len()).any(|w| w == blocking),
            "{}",
            String::from_utf8_lossy(blocking)
        );
    }
    // Exactly one batch per state change: no command wrote two batches.
    let (full, _) = replay_cut(&shared, &journal);
    assert_eq!(full, journal.len());
    assert_eq!(render(&shared), states.last().unwrap().1);
    for cut in 0..=journal.len() {
        let (good, end) = replay_cut(&shared, &journal[..cut]);
        let want = states
            .iter()
            .rev()
            .find(|(l, _)| *l <= cut.max(16))
            .unwrap();
        assert_eq!(good.max(16), want.0, "cut {cut}: good end");
        assert_eq!(render(&shared), want.1, "cut {cut}: state");
        if cut == want.0 {
            assert_eq!(end, End::Clean, "cut {cut}");
        } else {
            assert!(matches!(end, End::Torn { .. }), "cut {cut}: {end:?}");
        }
    }
}

/// Empties the keyspace and replays `bytes` as a journal file.
fn replay_cut(shared: &Shared, bytes: &[u8]) -> (usize, End) {
    drop(shared.engine.flush(&cairn_engine::Cx::DETACHED, None));
    let mut rep = Replayer::new(shared);
    shared.engine.set_loading(true);
    let s = frame::read(bytes, bytes.len() as u64, |_, recs| rep.apply(recs)).unwrap();
    shared.engine.set_loading(false);
    assert_eq!(rep.errors, 0);
    (s.good_end as usize, s.end)
}

/// The WIRE fast path appends exactly what the general path would: the
/// same bytes and the same frames, across frame boundaries and for a unit
/// too big to take the fast path.
#[test]
fn append_wire_matches_append_with() {
    use cairn_engine::record::{put_wire, Sink};
    let fast = super::Journal::new(1);
    let general = super::Journal::new(1);
    let small = b"*2\r\n$4\r\nINCR\r\n$3\r\nkey\r\n".to_vec();
    let big = vec![b'x'; super::FRAME_TARGET + 10];
    let mut units: Vec<(usize, &[u8])> = Vec::new();
    // Enough small units to fill more than two frames, one big unit in
    // the middle, and databases whose varints take two bytes.
    for i in 0..(3 * super::FRAME_TARGET / small.len()) {
        units.push((i % 200, &small));
        if i == 1000 {
            units.push((3, &big));
        }
    }
    for &(db, raw) in &units {
        fast.append_wire(db, raw);
        general.append_with(&mut |out| put_wire(out, db, raw));
    }
    let (a, b) = (fast.pending.lock(), general.pending.lock());
    assert!(a.frames.len() > 3, "{} frames", a.frames.len());
    assert_eq!(a.frames, b.frames);
    assert!(a.data == b.data);
    assert_eq!(fast.appended(), general.appended());
    assert_eq!(fast.appended(), a.data.len() as u64);
}
