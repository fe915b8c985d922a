//! How a Cairn replica applies its master's stream, checked against a
//! scripted master on a raw socket (issue 24): the stream arrives cut at
//! every kind of place (inside a length line, inside a bulk, between
//! MULTI and EXEC, a value larger than the replica's read buffer), and the
//! replica's offset must always count exactly the commands it applied:
//! its ACKs, INFO's `slave_repl_offset` and the offset of its next PSYNC
//! (a transaction cut by a lost link is neither applied nor counted, and
//! the master sends it again whole).
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use support::{info_field, ok, q, redis_client, start_cairn};

const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";
/// The master's offset at the full sync.
const BASE: u64 = 1000;
/// An empty RDB image (version 10, no checksum: 0 means none).
const EMPTY_RDB: &[u8] = b"REDIS0010\xff\0\0\0\0\0\0\0\0";

fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// The replica's side of the link as the scripted master sees it.
struct Link {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Link {
    fn accept(l: &TcpListener) -> Link {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Link {
            w: s.try_clone().unwrap(),
            r: BufReader::new(s),
        }
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    }

    /// One command from the replica, as words.
    fn command(&mut self) -> Vec<String> {
        let head = self.line();
        let n: usize = head.strip_prefix('*').expect(&head).parse().unwrap();
        (0..n)
            .map(|_| {
                let len: usize = self.line()[1..].parse().unwrap();
                let mut b = vec![0u8; len + 2];
                self.r.read_exact(&mut b).unwrap();
                String::from_utf8(b[..len].to_vec()).unwrap()
            })
            .collect()
    }

    /// Answers the handshake up to PSYNC; returns PSYNC's arguments.
    fn handshake(&mut self) -> (String, String) {
        loop {
            let c = self.command();
            match c[0].to_ascii_uppercase().as_str() {
                "PING" => self.w.write_all(b"+PONG\r\n").unwrap(),
                "REPLCONF" => self.w.write_all(b"+OK\r\n").unwrap(),
                "PSYNC" => return (c[1].clone(), c[2].clone()),
                other => panic!("unexpected {other} in the handshake"),
            }
        }
    }

    /// Sends `bytes` cut into pieces of the sizes in `cuts` (cycled), each
    /// its own write.
    fn send_cut(&mut self, bytes: &[u8], cuts: &[usize]) {
        let mut at = 0;
        for &n in cuts.iter().cycle() {
            if at == bytes.len() {
                break;
            }
            let end = (at + n).min(bytes.len());
            self.w.write_all(&bytes[at..end]).unwrap();
            at = end;
            if n < 8 {
                // Small pieces on their own, so the replica reads them apart.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Waits for `REPLCONF ACK <want>`; panics on an ACK past it.
    fn ack(&mut self, want: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "no ACK of {want}");
            let c = self.command();
            assert_eq!(c[..2], ["REPLCONF", "ACK"], "{c:?}");
            let got: u64 = c[2].parse().unwrap();
            assert!(got <= want, "ACK {got} is past {want}");
            if got == want {
                return;
            }
        }
    }
}

fn offset(c: &mut redis::Connection) -> u64 {
    info_field(c, "replication", "slave_repl_offset")
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_offset_counts_exactly_what_was_applied_however_the_stream_is_cut() {
    let master = TcpListener::bind("127.0.0.1:0").unwrap();
    let mport = master.local_addr().unwrap().port().to_string();
    let replica = start_cairn(&[]);
    let mut c = redis_client(replica.port);
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &mport]);

    let mut link = Link::accept(&master);
    let (id, from) = link.handshake();
    assert_eq!(
        from, "1",
        "a fresh replica asks from its offset 0 + 1 ({id})"
    );
    let mut full = format!("+FULLRESYNC {REPLID} {BASE}\r\n${}\r\n", EMPTY_RDB.len()).into_bytes();
    full.extend_from_slice(EMPTY_RDB);
    link.w.write_all(&full).unwrap();
    link.ack(BASE);

    // Runs of one command, a transaction, a newline, a value over the
    // replica's buffer, another command name, then GETACK.
    let big = vec![b'v'; 300_000];
    let mut stream = cmd(&[b"SELECT", b"0"]);
    for _ in 0..500 {
        stream.extend(cmd(&[b"INCR", b"n"]));
    }
    stream.extend(cmd(&[b"SET", b"s", b"1"]));
    stream.extend(cmd(&[b"incr", b"n"]));
    stream.extend(cmd(&[b"MULTI"]));
    stream.extend(cmd(&[b"INCR", b"n"]));
    stream.extend(cmd(&[b"SET", b"t", b"x"]));
    stream.extend(cmd(&[b"EXEC"]));
    stream.extend_from_slice(b"\n");
    stream.extend(cmd(&[b"SET", b"big", &big]));
    stream.extend(cmd(&[b"HSET", b"h", b"f", b"v"]));
    stream.extend(cmd(&[b"INCR", b"n"]));
    stream.extend(cmd(&[b"REPLCONF", b"GETACK", b"*"]));
    link.send_cut(&stream, &[1, 2, 3, 5, 7, 11, 13, 4096, 1, 65_537, 2]);
    let mut at = BASE + stream.len() as u64;
    link.ack(at);
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 503);
    assert_eq!(q::<String>(&mut c, &["GET", "t"]), "x");
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "big"]), 300_000);
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "f"]), "v");
    assert_eq!(offset(&mut c), at);

    // A transaction cut by the end of the link: its commands do not run
    // and do not count; the commands before its MULTI, in the same piece,
    // do both.
    let mut before = cmd(&[b"INCR", b"n"]);
    before.extend(cmd(&[b"INCR", b"n"]));
    let mut cut = before.clone();
    cut.extend(cmd(&[b"MULTI"]));
    cut.extend(cmd(&[b"INCR", b"n"]));
    link.w.write_all(&cut).unwrap();
    support::wait_for("the commands before MULTI", Duration::from_secs(10), || {
        q::<i64>(&mut c, &["GET", "n"]) == 505
    });
    at += before.len() as u64;
    assert_eq!(offset(&mut c), at);
    drop(link);

    // The replica comes back asking from the byte after what it applied.
    let mut link = Link::accept(&master);
    let (id, from) = link.handshake();
    assert_eq!((id.as_str(), from), (REPLID, (at + 1).to_string()));
    link.w
        .write_all(format!("+CONTINUE {REPLID}\r\n").as_bytes())
        .unwrap();
    let mut again = cmd(&[b"MULTI"]);
    again.extend(cmd(&[b"INCR", b"n"]));
    again.extend(cmd(&[b"EXEC"]));
    again.extend(cmd(&[b"REPLCONF", b"GETACK", b"*"]));
    link.send_cut(&again, &[3]);
    at += again.len() as u64;
    link.ack(at);
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 506);
    assert_eq!(offset(&mut c), at);
}
