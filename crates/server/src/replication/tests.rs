//! The replication stream, in process: a script of writes runs against a
//! master with a backlog; the stream it produced, applied by an ordinary
//! client to an empty second server, must leave the same keyspace (every
//! key's type, DUMP and expire time). Run with and without the journal
//! beside it, with requests recorded as sent (`Wire`) and as arguments.
use crate::client::{Client, ClientInfo};
use crate::config::Config;
use crate::exec::dispatch;
use crate::resp::ctx::Args;
use crate::shared::Shared;
use cairn_engine::Cx;
use cairn_protocol::resp::{parse_request, ArgList, Limits, Parsed};
use std::sync::Arc;

fn client() -> Client {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    Client::new(Arc::new(ClientInfo::new(1, addr, addr, -1, 0)), true, None)
}

fn resp(words: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::new();
    super::stream::command(&mut v, words);
    v
}

/// Runs one request given as RESP bytes, recorded as sent when `wire`.
fn run_raw(shared: &Shared, c: &mut Client, raw: &[u8], wire: bool) -> Vec<u8> {
    let mut list = ArgList::new();
    let limits = Limits::default();
    let Ok(Parsed::Complete { consumed }) = parse_request(raw, &limits, &mut list) else {
        panic!("does not parse: {}", String::from_utf8_lossy(raw));
    };
    assert_eq!(consumed, raw.len());
    let args = Args::new(raw, &list);
    let args = if wire { args.with_raw(raw) } else { args };
    let mut out = Vec::new();
    dispatch::execute(shared, c, args, &mut out, &shared.worker_stats[0]);
    out
}

fn run(shared: &Shared, c: &mut Client, line: &str, wire: bool) -> Vec<u8> {
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    run_raw(shared, c, &resp(&words), wire)
}

/// Applies a replication stream as a replica's master client would.
fn apply(shared: &Shared, mut stream: &[u8]) -> usize {
    let mut c = client();
    let mut n = 0;
    let limits = Limits::default();
    while !stream.is_empty() {
        let mut list = ArgList::new();
        let Ok(Parsed::Complete { consumed }) = parse_request(stream, &limits, &mut list) else {
            panic!(
                "stream does not parse at {}",
                String::from_utf8_lossy(stream)
            );
        };
        let reply = run_raw(shared, &mut c, &stream[..consumed], false);
        assert!(
            !reply.starts_with(b"-"),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        stream = &stream[consumed..];
        n += 1;
    }
    n
}

/// Every key of every database: type, DUMP payload, expire time.
fn render(shared: &Shared) -> String {
    let mut c = client();
    let mut s = String::new();
    for db in 0..4 {
        run(shared, &mut c, &format!("SELECT {db}"), false);
        let keys = run(shared, &mut c, "KEYS *", false);
        let text = String::from_utf8_lossy(&keys).into_owned();
        let mut names: Vec<&str> = text
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .collect();
        names.sort_unstable();
        for k in names {
            let t = run(shared, &mut c, &format!("TYPE {k}"), false);
            let v = run(shared, &mut c, &format!("DUMP {k}"), false);
            let ttl = run(shared, &mut c, &format!("PEXPIRETIME {k}"), false);
            s.push_str(&format!(
                "{db} {k} {} {:?} {}\n",
                String::from_utf8_lossy(&t).trim_end(),
                v,
                String::from_utf8_lossy(&ttl).trim_end()
            ));
        }
    }
    s
}

const SCRIPT: &[&str] = &[
    "SET a 1",
    "SET b hello EX 1000",
    "INCR a",
    "INCRBYFLOAT a 1.5",
    "SADD s 1 2 3 4 5 6 7 8 9 10",
    "SPOP s 3",
    "SPOP s",
    "SRANDMEMBER s",
    "LPUSH l x y z",
    "LMOVE l l2 LEFT RIGHT",
    "RPUSH bl a b c d e f",
    "BLPOP nothing bl 0",
    "BLMPOP 0 2 nothing bl RIGHT COUNT 2",
    "HSET h f1 v1 f2 v2",
    "HINCRBYFLOAT h n 2.25",
    "ZADD z 1 one 2 two 3 three",
    "ZINCRBY z 5 one",
    "BZPOPMIN nothing z 0",
    "XADD st * f v",
    "XADD st MAXLEN ~ 10 * g w",
    "SETBIT bits 7 1",
    "PFADD hll a b c d",
    "APPEND b !",
    "EXPIRE a 500",
    "PEXPIRE l2 -1",
    "GETEX b PX 700000",
    "EVAL redis.call('set',KEYS[1],'x');redis.call('incr','n') 1 fromscript",
    "SELECT 2",
    "SET in2 two",
    "MULTI",
    "SET t1 1",
    "INCR t1",
    "SADD ts m",
    "EXEC",
    "MULTI",
    "SET lone 1",
    "EXEC",
    "SWAPDB 2 3",
    "SELECT 0",
    "RENAME h h2",
    "SET gone soon",
    "DEL gone",
    "SET nx 1 NX",
    "SET nx 2 NX",
    "SET short v PX 1",
    // Not a command: the test waits for `short` to expire.
    "sleep",
    "GET short",
    "SET after all",
];

fn shared() -> Arc<Shared> {
    let mut cfg = Config::default();
    cfg.databases = 4;
    crate::server::build_shared(cfg).unwrap()
}

fn replicate(wire: bool, journal: bool) {
    let master = shared();
    assert!(!master.engine.journal_on(), "no backlog: nothing recorded");
    if journal {
        // The journal's sink as `journal::switch_on` installs it; the
        // stream must fan out beside it.
        super::install_sink(&master, true);
    }
    super::create_backlog(&master, &Cx::DETACHED, None);
    assert!(master.engine.journal_on());
    let info = master.replication.info();
    assert!(info.backlog_active);
    assert_eq!((info.offset, info.backlog_first_byte), (0, 1));
    let reader = master.replication.attach(1).unwrap();
    let mut c = client();
    for line in SCRIPT {
        if *line == "sleep" {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        let reply = run(&master, &mut c, line, wire);
        assert!(
            !reply.starts_with(b"-"),
            "{line}: {}",
            String::from_utf8_lossy(&reply)
        );
    }
    // The journal got the writes too (or, off, nothing).
    assert_eq!(master.journal.appended() > 0, journal);
    let mut stream = Vec::new();
    master.replication.take(reader, usize::MAX, &mut stream);
    let info = master.replication.info();
    assert_eq!(info.offset, stream.len() as u64);
    assert_eq!(info.backlog_histlen, stream.len() as u64);
    let text = String::from_utf8_lossy(&stream);
    // Redis's propagation forms, not the commands as sent.
    assert!(
        text.starts_with("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"),
        "{text}"
    );
    for sent in ["SPOP", "BLPOP", "BLMPOP", "BZPOPMIN", "EVAL", "INCRBYFLOAT"] {
        assert!(!text.contains(sent), "{sent} in {text}");
    }
    assert!(text.contains("PXAT"), "{text}");
    assert!(text.contains("MULTI"), "{text}");
    // SRANDMEMBER, GET, SET NX on an existing key: nothing.
    assert!(!text.contains("SRANDMEMBER"), "{text}");
    let replica = shared();
    let commands = apply(&replica, &stream);
    assert!(commands > SCRIPT.len() / 2, "{commands} commands");
    let want = render(&master);
    assert!(want.contains("0 fromscript"), "{want}");
    assert!(want.contains("3 t1"), "{want}");
    assert!(!want.contains("short"), "{want}");
    assert_eq!(render(&replica), want);
    // The expired key went as a DEL.
    assert!(text.contains("$3\r\nDEL\r\n$5\r\nshort"), "{text}");
    master.replication.detach(reader);
    super::free_backlog(&master, &Cx::DETACHED);
    assert_eq!(master.engine.journal_on(), journal);
    let after = master.replication.info();
    assert!(!after.backlog_active);
    assert_eq!(after.offset, stream.len() as u64, "the offset stays");
    assert_ne!(after.replid, info.replid, "a freed backlog changes the ID");
    assert_eq!(cairn_engine::record::unsourced_count(), 0);
}

#[test]
fn the_stream_rebuilds_the_keyspace() {
    replicate(true, false);
    replicate(false, false);
}

#[test]
fn the_stream_fans_out_beside_the_journal() {
    replicate(true, true);
}
