//! Pub/Sub end to end (Redis 7.0 `pubsub.c`, `notify.c`): subscribe
//! confirmations and messages in RESP2 and RESP3, fan-out to many
//! subscribers on both worker threads with every message delivered exactly
//! once and in one global order, patterns and shard channels, the RESP2
//! subscribed-state rules, RESET and disconnects dropping subscriptions,
//! CLIENT LIST / INFO fields, the output buffer limit on slow subscribers,
//! and keyspace notifications for the string, generic and hash commands.
mod support;

use std::collections::HashSet;
use std::io::ErrorKind;
use std::thread;
use std::time::{Duration, Instant};

use cairn_protocol::resp::Frame;
use support::{start_cairn, RawConn, Server};

/// Two worker threads, so subscribers and publishers spread over both.
fn cairn() -> Server {
    start_cairn(&["--server-threads", "2"])
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A RESP bulk string.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// The exact bytes of a push/array frame of bulk strings (`>` in RESP3,
/// `*` in RESP2), with `:n` for integer items given as `#n`.
fn frame(resp3: bool, items: &[&str]) -> Vec<u8> {
    let mut out = format!("{}{}\r\n", if resp3 { '>' } else { '*' }, items.len());
    for i in items {
        match i.strip_prefix('#') {
            Some(n) => out.push_str(&format!(":{n}\r\n")),
            None if *i == "<null>" => out.push_str(if resp3 { "_\r\n" } else { "$-1\r\n" }),
            None => out.push_str(&bulk(i)),
        }
    }
    out.into_bytes()
}

/// Reads one push (RESP3) or array (RESP2) and returns its items as text:
/// bulk strings as they are, integers as `#n`, nulls as `<null>`.
fn read_items(c: &mut RawConn) -> Vec<String> {
    match c.read_frame() {
        Frame::Push(items) | Frame::Array(items) => items
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => text(&b),
                Frame::Integer(n) => format!("#{n}"),
                Frame::Null | Frame::NullBulk => "<null>".into(),
                other => panic!("unexpected item {other:?}"),
            })
            .collect(),
        other => panic!("expected a push, got {other:?}"),
    }
}

/// True if nothing arrives on `c` within `wait`.
fn silent_for(c: &mut RawConn, wait: Duration) -> bool {
    c.stream().set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    let silent = match c.stream().peek(&mut b) {
        Ok(_) => false,
        Err(e) => matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    };
    c.stream()
        .set_read_timeout(Some(support::IO_TIMEOUT))
        .unwrap();
    silent
}

fn int(c: &mut RawConn, args: &[&str]) -> i64 {
    let r = text(&c.cmd(args));
    r.strip_prefix(':')
        .and_then(|r| r.strip_suffix("\r\n"))
        .unwrap_or_else(|| panic!("{args:?} replied {r:?}"))
        .parse()
        .unwrap()
}

fn hello3(c: &mut RawConn) {
    let r = c.cmd(&["HELLO", "3"]);
    assert!(r.starts_with(b"%7"), "{}", text(&r));
}

/// `field=value` from a CLIENT LIST / INFO line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=");
    line.trim_end()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(key.as_str()))
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

/// `name:value` from an INFO reply.
fn info_field(info: &str, name: &str) -> String {
    let key = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .unwrap_or_else(|| panic!("no {name} in INFO"))
        .to_string()
}

/// Waits until `f` holds, for up to 5 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(10));
    }
}

// ------------------------------------------------------------ confirmations

#[test]
fn subscribe_and_unsubscribe_replies_resp2_and_resp3() {
    let s = cairn();
    for resp3 in [false, true] {
        let mut c = s.conn();
        if resp3 {
            hello3(&mut c);
        }
        let f = |items: &[&str]| frame(resp3, items);
        c.send(&[b"SUBSCRIBE", b"a", b"b", b"a"]);
        assert_eq!(c.read_raw_reply(), f(&["subscribe", "a", "#1"]));
        assert_eq!(c.read_raw_reply(), f(&["subscribe", "b", "#2"]));
        assert_eq!(c.read_raw_reply(), f(&["subscribe", "a", "#2"]));
        // Patterns count together with channels; shard channels apart.
        assert_eq!(c.cmd(&["PSUBSCRIBE", "p*"]), f(&["psubscribe", "p*", "#3"]));
        assert_eq!(c.cmd(&["SSUBSCRIBE", "s"]), f(&["ssubscribe", "s", "#1"]));
        // Leaving what one never joined still answers, with the count.
        assert_eq!(
            c.cmd(&["UNSUBSCRIBE", "nosuch"]),
            f(&["unsubscribe", "nosuch", "#3"])
        );
        // No argument: every channel, in subscription order.
        c.send(&[b"UNSUBSCRIBE"]);
        assert_eq!(c.read_raw_reply(), f(&["unsubscribe", "a", "#2"]));
        assert_eq!(c.read_raw_reply(), f(&["unsubscribe", "b", "#1"]));
        // Nothing left of the kind: one reply with a null name.
        assert_eq!(c.cmd(&["UNSUBSCRIBE"]), f(&["unsubscribe", "<null>", "#1"]));
        assert_eq!(c.cmd(&["PUNSUBSCRIBE"]), f(&["punsubscribe", "p*", "#0"]));
        assert_eq!(
            c.cmd(&["PUNSUBSCRIBE"]),
            f(&["punsubscribe", "<null>", "#0"])
        );
        assert_eq!(c.cmd(&["SUNSUBSCRIBE"]), f(&["sunsubscribe", "s", "#0"]));
        assert_eq!(
            c.cmd(&["SUNSUBSCRIBE"]),
            f(&["sunsubscribe", "<null>", "#0"])
        );
        // Out of subscribed mode: ordinary commands work again.
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        // PUNSUBSCRIBE goes in subscription order, as Redis 7.0's list.
        c.send(&[b"PSUBSCRIBE", b"z*", b"a*", b"m*"]);
        for _ in 0..3 {
            c.read_raw_reply();
        }
        c.send(&[b"PUNSUBSCRIBE"]);
        assert_eq!(c.read_raw_reply(), f(&["punsubscribe", "z*", "#2"]));
        assert_eq!(c.read_raw_reply(), f(&["punsubscribe", "a*", "#1"]));
        assert_eq!(c.read_raw_reply(), f(&["punsubscribe", "m*", "#0"]));
    }
}

#[test]
fn arity_errors() {
    let s = cairn();
    let mut c = s.conn();
    for cmd in [
        "SUBSCRIBE",
        "PSUBSCRIBE",
        "SSUBSCRIBE",
        "PUBLISH",
        "SPUBLISH",
        "PUBSUB",
    ] {
        assert_eq!(
            text(&c.cmd(&[cmd])),
            format!(
                "-ERR wrong number of arguments for '{}' command\r\n",
                cmd.to_lowercase()
            )
        );
    }
    assert_eq!(
        text(&c.cmd(&["PUBLISH", "a"])),
        "-ERR wrong number of arguments for 'publish' command\r\n"
    );
}

// ------------------------------------------------------------ delivery

#[test]
fn messages_in_resp2_and_resp3_and_publish_counts() {
    let s = cairn();
    let mut p = s.conn();
    let mut s2 = s.conn();
    let mut s3 = s.conn();
    hello3(&mut s3);
    s2.cmd(&["SUBSCRIBE", "ch"]);
    s3.cmd(&["SUBSCRIBE", "ch"]);
    assert_eq!(int(&mut p, &["PUBLISH", "ch", "hello"]), 2);
    assert_eq!(
        s2.read_raw_reply(),
        frame(false, &["message", "ch", "hello"])
    );
    assert_eq!(
        s3.read_raw_reply(),
        frame(true, &["message", "ch", "hello"])
    );
    // Binary-safe channel and message.
    s2.send(&[b"SUBSCRIBE", b"b\x00\xff"]);
    s2.read_raw_reply();
    p.send(&[b"PUBLISH", b"b\x00\xff", b"\r\n\x00"]);
    assert_eq!(p.read_raw_reply(), b":1\r\n");
    assert_eq!(
        s2.read_raw_reply(),
        b"*3\r\n$7\r\nmessage\r\n$3\r\nb\x00\xff\r\n$3\r\n\r\n\x00\r\n"
    );
    assert_eq!(int(&mut p, &["PUBLISH", "nobody", "x"]), 0);
    assert!(silent_for(&mut s2, Duration::from_millis(100)));
    assert!(silent_for(&mut s3, Duration::from_millis(100)));
}

#[test]
fn pattern_and_channel_both_matching() {
    let s = cairn();
    let mut p = s.conn();
    let mut c = s.conn();
    c.cmd(&["SUBSCRIBE", "news.tech"]);
    c.cmd(&["PSUBSCRIBE", "news.*"]);
    let mut other = s.conn();
    other.cmd(&["PSUBSCRIBE", "news.t[a-e]ch"]);
    assert_eq!(int(&mut p, &["PUBLISH", "news.tech", "m1"]), 3);
    // The channel's message first, then the pattern's.
    assert_eq!(
        c.read_raw_reply(),
        frame(false, &["message", "news.tech", "m1"])
    );
    assert_eq!(
        c.read_raw_reply(),
        frame(false, &["pmessage", "news.*", "news.tech", "m1"])
    );
    assert_eq!(
        other.read_raw_reply(),
        frame(false, &["pmessage", "news.t[a-e]ch", "news.tech", "m1"])
    );
    assert_eq!(int(&mut p, &["PUBLISH", "news.sport", "m2"]), 1);
    assert_eq!(
        c.read_raw_reply(),
        frame(false, &["pmessage", "news.*", "news.sport", "m2"])
    );
    // The matcher's quirk: `*` does not match the empty channel.
    assert_eq!(int(&mut p, &["PUBLISH", "", "m3"]), 0);
    assert!(silent_for(&mut other, Duration::from_millis(100)));
    assert!(silent_for(&mut c, Duration::from_millis(50)));
}

#[test]
fn shard_channels_are_apart_from_channels_and_patterns() {
    let s = cairn();
    let mut p = s.conn();
    let mut c = s.conn();
    c.cmd(&["SSUBSCRIBE", "x"]);
    c.cmd(&["PSUBSCRIBE", "*"]);
    assert_eq!(int(&mut p, &["SPUBLISH", "x", "hi"]), 1);
    assert_eq!(c.read_raw_reply(), frame(false, &["smessage", "x", "hi"]));
    // PUBLISH on the same name reaches the pattern only.
    assert_eq!(int(&mut p, &["PUBLISH", "x", "hi"]), 1);
    assert_eq!(
        c.read_raw_reply(),
        frame(false, &["pmessage", "*", "x", "hi"])
    );
    assert_eq!(int(&mut p, &["SPUBLISH", "y", "hi"]), 0);
    assert!(silent_for(&mut c, Duration::from_millis(100)));
}

/// 1,000 subscriber connections, spread over both workers, each get every
/// message once, in order, and nothing more.
#[test]
fn fan_out_to_a_thousand_subscribers_on_both_workers() {
    let s = cairn();
    let mut subs: Vec<RawConn> = (0..1000).map(|_| s.conn()).collect();
    for (i, c) in subs.iter_mut().enumerate() {
        if i % 2 == 1 {
            hello3(c);
        }
        c.send(&[b"SUBSCRIBE", b"fan"]);
    }
    for c in subs.iter_mut() {
        let items = read_items(c);
        assert_eq!(items, ["subscribe", "fan", "#1"]);
    }
    let mut p = s.conn();
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "NUMSUB", "fan"])),
        "*2\r\n$3\r\nfan\r\n:1000\r\n"
    );
    const N: usize = 50;
    for i in 0..N {
        assert_eq!(int(&mut p, &["PUBLISH", "fan", &format!("m{i}")]), 1000);
    }
    for (j, c) in subs.iter_mut().enumerate() {
        for i in 0..N {
            let want = frame(j % 2 == 1, &["message", "fan", &format!("m{i}")]);
            assert_eq!(c.read_raw_reply(), want, "subscriber {j}, message {i}");
        }
    }
    for c in subs.iter_mut().take(20) {
        assert!(silent_for(c, Duration::from_millis(20)), "a duplicate");
    }
}

/// Two publishers on different workers at once: every subscriber sees the
/// same interleaving (one global order, as with Redis's single thread),
/// each publisher's messages in the order sent.
#[test]
fn concurrent_publishers_one_global_order() {
    let s = cairn();
    let mut subs: Vec<RawConn> = (0..16).map(|_| s.conn()).collect();
    for c in subs.iter_mut() {
        c.send(&[b"SUBSCRIBE", b"ord"]);
        read_items(c);
    }
    const N: usize = 300;
    let port = s.port;
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            thread::spawn(move || {
                let mut c = RawConn::connect(port);
                for i in 0..N {
                    assert_eq!(int(&mut c, &["PUBLISH", "ord", &format!("{p}:{i}")]), 16);
                }
            })
        })
        .collect();
    for t in publishers {
        t.join().unwrap();
    }
    let mut first: Option<Vec<String>> = None;
    for c in subs.iter_mut() {
        let got: Vec<String> = (0..2 * N).map(|_| read_items(c)[2].clone()).collect();
        for p in 0..2 {
            let mine: Vec<&String> = got
                .iter()
                .filter(|m| m.starts_with(&format!("{p}:")))
                .collect();
            let want: Vec<String> = (0..N).map(|i| format!("{p}:{i}")).collect();
            assert_eq!(mine, want.iter().collect::<Vec<_>>());
        }
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(&got, f, "subscribers disagree on the order"),
        }
        assert!(silent_for(c, Duration::from_millis(10)));
    }
}

#[test]
fn resp3_pushes_interleave_with_replies() {
    let s = cairn();
    let mut c = s.conn();
    hello3(&mut c);
    assert_eq!(
        c.cmd(&["SUBSCRIBE", "ch"]),
        frame(true, &["subscribe", "ch", "#1"])
    );
    // Any command runs while subscribed in RESP3.
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    // Its own message comes before PUBLISH's reply, as in Redis.
    c.send(&[b"PUBLISH", b"ch", b"self"]);
    assert_eq!(c.read_raw_reply(), frame(true, &["message", "ch", "self"]));
    assert_eq!(c.read_raw_reply(), b":1\r\n");
    // Messages from elsewhere arrive between replies, whole.
    let mut p = s.conn();
    for i in 0..20 {
        assert_eq!(int(&mut p, &["PUBLISH", "ch", &format!("x{i}")]), 1);
        c.send(&[b"GET", b"k"]);
    }
    let mut replies = 0;
    let mut pushes = Vec::new();
    while replies < 20 || pushes.len() < 20 {
        match c.read_frame() {
            Frame::Bulk(v) => {
                assert_eq!(v, b"v");
                replies += 1;
            }
            Frame::Push(items) => {
                assert_eq!(items[0], Frame::Bulk(b"message".to_vec()));
                pushes.push(items[2].clone());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let want: Vec<Frame> = (0..20)
        .map(|i| Frame::Bulk(format!("x{i}").into_bytes()))
        .collect();
    assert_eq!(pushes, want);
    // CLIENT REPLY OFF drops replies, not pushes.
    c.send(&[b"CLIENT", b"REPLY", b"OFF"]);
    c.send(&[b"PUBLISH", b"ch", b"quiet"]);
    c.send(&[b"CLIENT", b"REPLY", b"ON"]);
    assert_eq!(c.read_raw_reply(), frame(true, &["message", "ch", "quiet"]));
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
}

// ------------------------------------------------------------ subscribed state

#[test]
fn resp2_subscribed_state_allows_only_some_commands() {
    let s = cairn();
    let mut c = s.conn();
    c.cmd(&["SUBSCRIBE", "ch"]);
    let refused = |cmd: &str| {
        format!(
            "-ERR Can't execute '{cmd}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
             RESET are allowed in this context\r\n"
        )
    };
    assert_eq!(text(&c.cmd(&["GET", "k"])), refused("get"));
    assert_eq!(text(&c.cmd(&["client", "list"])), refused("client|list"));
    assert_eq!(text(&c.cmd(&["PUBLISH", "ch", "x"])), refused("publish"));
    assert_eq!(
        text(&c.cmd(&["PUBSUB", "NUMPAT"])),
        refused("pubsub|numpat")
    );
    // Unknown commands and arity errors come first, as in Redis.
    assert!(text(&c.cmd(&["NOSUCH"])).starts_with("-ERR unknown command 'NOSUCH'"));
    assert_eq!(
        text(&c.cmd(&["GET"])),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    // PING answers in the shape of a message.
    assert_eq!(c.cmd(&["PING"]), frame(false, &["pong", ""]));
    assert_eq!(c.cmd(&["PING", "hi"]), frame(false, &["pong", "hi"]));
    assert_eq!(
        text(&c.cmd(&["PING", "a", "b"])),
        "-ERR wrong number of arguments for 'ping' command\r\n"
    );
    assert_eq!(
        c.cmd(&["PSUBSCRIBE", "x*"]),
        frame(false, &["psubscribe", "x*", "#2"])
    );
    assert_eq!(
        c.cmd(&["SSUBSCRIBE", "s"]),
        frame(false, &["ssubscribe", "s", "#1"])
    );
    // Leaving the channels alone is not enough: the pattern and shard
    // channel still count.
    c.cmd(&["UNSUBSCRIBE"]);
    assert_eq!(text(&c.cmd(&["GET", "k"])), refused("get"));
    c.cmd(&["PUNSUBSCRIBE"]);
    assert_eq!(text(&c.cmd(&["GET", "k"])), refused("get"));
    c.cmd(&["SUNSUBSCRIBE"]);
    assert_eq!(c.cmd(&["GET", "k"]), b"$-1\r\n");
    // RESET drops every subscription, silently.
    c.send(&[b"SUBSCRIBE", b"a", b"b"]);
    c.read_raw_reply();
    c.read_raw_reply();
    c.cmd(&["PSUBSCRIBE", "p*"]);
    c.cmd(&["SSUBSCRIBE", "s"]);
    assert_eq!(c.cmd(&["RESET"]), b"+RESET\r\n");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        text(&c.cmd(&["PUBSUB", "NUMSUB", "a", "b"])),
        "*4\r\n$1\r\na\r\n:0\r\n$1\r\nb\r\n:0\r\n"
    );
    assert_eq!(int(&mut c, &["PUBSUB", "NUMPAT"]), 0);
    assert_eq!(int(&mut c, &["PUBLISH", "a", "x"]), 0);
    assert_eq!(int(&mut c, &["SPUBLISH", "s", "x"]), 0);
    // QUIT is allowed and closes.
    c.cmd(&["SUBSCRIBE", "a"]);
    assert_eq!(c.cmd(&["QUIT"]), b"+OK\r\n");
    assert!(c.is_closed());
    // HELLO 2 from RESP3 while subscribed brings the rules back.
    let mut d = s.conn();
    hello3(&mut d);
    d.cmd(&["SUBSCRIBE", "a"]);
    assert_eq!(d.cmd(&["PING"]), b"+PONG\r\n");
    assert!(d.cmd(&["HELLO", "2"]).starts_with(b"*14"));
    assert_eq!(d.cmd(&["PING"]), frame(false, &["pong", ""]));
    assert_eq!(text(&d.cmd(&["GET", "k"])), refused("get"));
}

#[test]
fn disconnect_drops_subscriptions() {
    let s = cairn();
    let mut p = s.conn();
    let mut c = s.conn();
    c.send(&[b"SUBSCRIBE", b"a", b"b"]);
    c.read_raw_reply();
    c.read_raw_reply();
    c.cmd(&["PSUBSCRIBE", "p*"]);
    c.cmd(&["SSUBSCRIBE", "s"]);
    assert_eq!(int(&mut p, &["PUBLISH", "a", "x"]), 1);
    c.close();
    eventually("the subscriptions to go", || {
        text(&p.cmd(&["PUBSUB", "NUMSUB", "a", "b"])) == "*4\r\n$1\r\na\r\n:0\r\n$1\r\nb\r\n:0\r\n"
    });
    assert_eq!(int(&mut p, &["PUBSUB", "NUMPAT"]), 0);
    assert_eq!(int(&mut p, &["PUBLISH", "a", "x"]), 0);
    assert_eq!(int(&mut p, &["PUBLISH", "pp", "x"]), 0);
    assert_eq!(int(&mut p, &["SPUBLISH", "s", "x"]), 0);
    assert_eq!(text(&p.cmd(&["PUBSUB", "CHANNELS"])), "*0\r\n");
}

// ------------------------------------------------------------ introspection

#[test]
fn pubsub_introspection() {
    let s = cairn();
    let mut p = s.conn();
    let mut a = s.conn();
    let mut b = s.conn();
    a.send(&[b"SUBSCRIBE", b"c1", b"c2"]);
    a.read_raw_reply();
    a.read_raw_reply();
    b.cmd(&["SUBSCRIBE", "c1"]);
    a.send(&[b"PSUBSCRIBE", b"x*", b"y*"]);
    a.read_raw_reply();
    a.read_raw_reply();
    b.cmd(&["PSUBSCRIBE", "x*"]);
    b.cmd(&["SSUBSCRIBE", "s1"]);
    p.send(&[b"PUBSUB", b"CHANNELS"]);
    let mut chans: Vec<String> = match p.read_frame() {
        Frame::Array(v) => v
            .into_iter()
            .map(|f| match f {
                Frame::Bulk(b) => text(&b),
                o => panic!("{o:?}"),
            })
            .collect(),
        o => panic!("{o:?}"),
    };
    chans.sort();
    assert_eq!(chans, ["c1", "c2"]);
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "CHANNELS", "*2"])),
        "*1\r\n$2\r\nc2\r\n"
    );
    assert_eq!(text(&p.cmd(&["pubsub", "channels", "nomatch"])), "*0\r\n");
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "NUMSUB", "c1", "c2", "zz"])),
        "*6\r\n$2\r\nc1\r\n:2\r\n$2\r\nc2\r\n:1\r\n$2\r\nzz\r\n:0\r\n"
    );
    assert_eq!(text(&p.cmd(&["PUBSUB", "NUMSUB"])), "*0\r\n");
    assert_eq!(int(&mut p, &["PUBSUB", "NUMPAT"]), 2);
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "SHARDCHANNELS"])),
        "*1\r\n$2\r\ns1\r\n"
    );
    assert_eq!(text(&p.cmd(&["PUBSUB", "SHARDCHANNELS", "x*"])), "*0\r\n");
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "SHARDNUMSUB", "s1", "c1"])),
        "*4\r\n$2\r\ns1\r\n:1\r\n$2\r\nc1\r\n:0\r\n"
    );
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "CHANNELS", "a", "b"])),
        "-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB \
         HELP.\r\n"
    );
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "NUMPAT", "x"])),
        "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n"
    );
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "FOO"])),
        "-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n"
    );
    let help = text(&p.cmd(&["PUBSUB", "HELP"]));
    assert!(help.starts_with("*14\r\n+PUBSUB <subcommand> [<arg> [value] [opt] ...]."));
    // INFO stats counts distinct names.
    let info = text(&p.cmd(&["INFO", "stats"]));
    assert_eq!(info_field(&info, "pubsub_channels"), "2");
    assert_eq!(info_field(&info, "pubsub_patterns"), "2");
    assert_eq!(info_field(&info, "pubsubshard_channels"), "1");
    // CLIENT LIST: counts and the P flag, TYPE pubsub.
    let list = text(&p.cmd(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().filter(|l| l.contains("id=")).collect();
    assert_eq!(lines.len(), 3);
    let sub_lines: Vec<&&str> = lines.iter().filter(|l| field(l, "flags") == "P").collect();
    assert_eq!(sub_lines.len(), 2);
    let counts: HashSet<(String, String, String)> = sub_lines
        .iter()
        .map(|l| {
            (
                field(l, "sub").to_string(),
                field(l, "psub").to_string(),
                field(l, "ssub").to_string(),
            )
        })
        .collect();
    let want: HashSet<(String, String, String)> = [("2", "2", "0"), ("1", "1", "1")]
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(counts, want);
    let typed = text(&p.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]));
    assert_eq!(typed.matches("id=").count(), 2);
    let normal = text(&p.cmd(&["CLIENT", "LIST", "TYPE", "normal"]));
    assert_eq!(normal.matches("id=").count(), 1);
    assert_eq!(int(&mut p, &["CLIENT", "KILL", "TYPE", "pubsub"]), 2);
    // Gone at once, as after Redis's synchronous freeClient.
    assert_eq!(int(&mut p, &["PUBLISH", "c1", "x"]), 0);
    assert_eq!(int(&mut p, &["SPUBLISH", "s1", "x"]), 0);
    let info = text(&p.cmd(&["INFO", "stats"]));
    assert_eq!(info_field(&info, "pubsub_channels"), "0");
    assert_eq!(info_field(&info, "pubsub_patterns"), "0");
    assert_eq!(info_field(&info, "pubsubshard_channels"), "0");
    assert!(a.is_closed_within(Duration::from_secs(2)));
    assert!(b.is_closed_within(Duration::from_secs(2)));
}

// ------------------------------------------------------------ slow subscribers

/// A subscriber with a small receive window that never reads.
fn sleepy_subscriber(port: u16, channel: &str) -> std::net::TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect(&addr.into()).unwrap();
    let mut stream: std::net::TcpStream = sock.into();
    let mut out = Vec::new();
    cairn_protocol::resp::encode_command(&[b"SUBSCRIBE", channel.as_bytes()], &mut out);
    use std::io::Write;
    stream.write_all(&out).unwrap();
    stream
}

#[test]
fn slow_subscriber_over_the_hard_limit_is_disconnected() {
    let s = cairn();
    let mut p = s.conn();
    assert_eq!(
        p.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 0 0"
        ]),
        b"+OK\r\n"
    );
    let _sleepy = sleepy_subscriber(s.port, "flood");
    eventually("the subscription", || {
        text(&p.cmd(&["PUBSUB", "NUMSUB", "flood"])).ends_with(":1\r\n")
    });
    let msg = "x".repeat(10_000);
    let mut sent = 0;
    // 1 MB plus what the kernel buffers takes a few hundred messages; the
    // subscriber must be gone long before 5,000 (50 MB).
    while int(&mut p, &["PUBLISH", "flood", &msg]) == 1 {
        sent += 1;
        assert!(sent < 5000, "the slow subscriber was never disconnected");
    }
    assert!(sent > 50, "disconnected too early, after {sent} messages");
    assert_eq!(
        text(&p.cmd(&["PUBSUB", "NUMSUB", "flood"])),
        "*2\r\n$5\r\nflood\r\n:0\r\n"
    );
    eventually("the log line", || {
        s.log().lines().any(|l| {
            l.contains("Client id=")
                && l.contains("flags=P")
                && l.contains("sub=1")
                && l.contains("cmd=subscribe")
                && l.ends_with(
                    "scheduled to be closed ASAP for overcoming of output buffer limits.",
                )
        })
    });
    // Other clients are unaffected; a reading subscriber gets everything.
    let mut ok = s.conn();
    ok.cmd(&["SUBSCRIBE", "flood"]);
    for i in 0..500 {
        assert_eq!(int(&mut p, &["PUBLISH", "flood", &format!("{i}{msg}")]), 1);
        let items = read_items(&mut ok);
        assert_eq!(items[2], format!("{i}{msg}"));
    }
}

#[test]
fn slow_subscriber_over_the_soft_limit_for_too_long_is_disconnected() {
    let s = cairn();
    let mut p = s.conn();
    assert_eq!(
        p.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 200kb 1"
        ]),
        b"+OK\r\n"
    );
    let _sleepy = sleepy_subscriber(s.port, "soft");
    eventually("the subscription", || {
        text(&p.cmd(&["PUBSUB", "NUMSUB", "soft"])).ends_with(":1\r\n")
    });
    let msg = "y".repeat(10_000);
    // Over the soft limit quickly, but kept for more than a second only
    // after that: it survives the first second.
    let start = Instant::now();
    let mut gone_after = None;
    while start.elapsed() < Duration::from_secs(6) {
        if int(&mut p, &["PUBLISH", "soft", &msg]) == 0 {
            gone_after = Some(start.elapsed());
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let gone_after = gone_after.expect("the subscriber over the soft limit was never closed");
    assert!(
        gone_after >= Duration::from_secs(1),
        "closed after {gone_after:?}, before the soft limit's seconds"
    );
    assert!(s
        .log()
        .contains("scheduled to be closed ASAP for overcoming of output buffer limits."));
}

// ------------------------------------------------------------ notifications

/// A subscriber to every keyspace and keyevent channel of db 0 and 1, and
/// to `marker`: PUBLISH marker after a command delivers after every event
/// of that command, so `events` knows when it has them all.
struct Events {
    sub: RawConn,
    ctl: RawConn,
}

impl Events {
    fn new(s: &Server, classes: &str) -> Events {
        let mut ctl = s.conn();
        assert_eq!(
            ctl.cmd(&["CONFIG", "SET", "notify-keyspace-events", classes]),
            b"+OK\r\n"
        );
        let mut sub = s.conn();
        sub.cmd(&["PSUBSCRIBE", "__key*__:*"]);
        sub.cmd(&["SUBSCRIBE", "marker"]);
        Events { sub, ctl }
    }

    /// Runs `args` on the control connection and returns its reply and
    /// the notifications it caused, as `channel=message`.
    fn run(&mut self, args: &[&str]) -> (Vec<u8>, Vec<String>) {
        let reply = self.ctl.cmd(args);
        (reply, self.collect())
    }

    fn collect(&mut self) -> Vec<String> {
        assert_eq!(int(&mut self.ctl, &["PUBLISH", "marker", "m"]), 1);
        let mut got = Vec::new();
        loop {
            let items = read_items(&mut self.sub);
            match items[0].as_str() {
                "message" => return got,
                "pmessage" => got.push(format!("{}={}", items[2], items[3])),
                other => panic!("unexpected {other}"),
            }
        }
    }

    /// The events of `args`, keyevent channels only, as `event:key`.
    fn keyevents(&mut self, args: &[&str]) -> Vec<String> {
        let (_, evs) = self.run(args);
        evs.iter()
            .filter_map(|e| {
                let rest = e.strip_prefix("__keyevent@")?;
                let (db_event, key) = rest.split_once('=')?;
                let (db, event) = db_event.split_once("__:")?;
                Some(if db == "0" {
                    format!("{event}:{key}")
                } else {
                    format!("{event}:{key}@{db}")
                })
            })
            .collect()
    }
}

#[track_caller]
fn check(ev: &mut Events, args: &[&str], want: &[&str]) {
    assert_eq!(ev.keyevents(args), want, "{args:?}");
}

#[test]
fn keyspace_and_keyevent_channels() {
    let s = cairn();
    let mut ev = Events::new(&s, "KE$g");
    let (reply, evs) = ev.run(&["SET", "k", "v"]);
    assert_eq!(reply, b"+OK\r\n");
    // Keyspace first (message: the event), then keyevent (message: the key).
    assert_eq!(evs, ["__keyspace@0__:k=set", "__keyevent@0__:set=k"]);
    ev.ctl
        .cmd(&["CONFIG", "SET", "notify-keyspace-events", "K$"]);
    assert_eq!(ev.run(&["SET", "k", "v"]).1, ["__keyspace@0__:k=set"]);
    ev.ctl
        .cmd(&["CONFIG", "SET", "notify-keyspace-events", "E$"]);
    assert_eq!(ev.run(&["SET", "k", "v"]).1, ["__keyevent@0__:set=k"]);
    // A class that is off sends nothing; K or E alone send nothing.
    assert_eq!(ev.run(&["DEL", "k"]).1, Vec::<String>::new());
    ev.ctl
        .cmd(&["CONFIG", "SET", "notify-keyspace-events", "A"]);
    assert_eq!(ev.run(&["SET", "k", "v"]).1, Vec::<String>::new());
    ev.ctl.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    assert_eq!(ev.run(&["SET", "k", "v"]).1, Vec::<String>::new());
    // The database number is the command's.
    ev.ctl
        .cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    ev.ctl.cmd(&["SELECT", "3"]);
    assert_eq!(
        ev.run(&["SET", "k", "v"]).1,
        ["__keyspace@3__:k=set", "__keyevent@3__:set=k"]
    );
}

#[test]
fn string_notifications() {
    let s = cairn();
    let mut ev = Events::new(&s, "E$gn");
    check(&mut ev, &["SET", "a", "1"], &["new:a", "set:a"]);
    check(
        &mut ev,
        &["SET", "a", "2", "EX", "100"],
        &["set:a", "expire:a"],
    );
    check(&mut ev, &["SET", "a", "3", "KEEPTTL"], &["set:a"]);
    check(&mut ev, &["SET", "a", "4", "NX"], &[]);
    check(&mut ev, &["SET", "a", "5", "XX", "GET"], &["set:a"]);
    check(
        &mut ev,
        &["SETEX", "c", "100", "v"],
        &["new:c", "set:c", "expire:c"],
    );
    check(
        &mut ev,
        &["PSETEX", "c", "100000", "v"],
        &["set:c", "expire:c"],
    );
    check(&mut ev, &["SETNX", "d", "v"], &["new:d", "set:d"]);
    check(&mut ev, &["SETNX", "d", "v"], &[]);
    check(&mut ev, &["GETSET", "d", "x"], &["set:d"]);
    check(
        &mut ev,
        &["MSET", "e", "1", "f", "2"],
        &["new:e", "set:e", "new:f", "set:f"],
    );
    check(&mut ev, &["MSETNX", "g", "1", "e", "2"], &[]);
    check(
        &mut ev,
        &["MSETNX", "g", "1", "h", "2"],
        &["new:g", "set:g", "new:h", "set:h"],
    );
    check(&mut ev, &["APPEND", "j", "x"], &["new:j", "append:j"]);
    check(&mut ev, &["APPEND", "j", ""], &["append:j"]);
    check(&mut ev, &["SETRANGE", "k", "0", ""], &[]);
    check(
        &mut ev,
        &["SETRANGE", "k", "2", "x"],
        &["new:k", "setrange:k"],
    );
    check(&mut ev, &["SETRANGE", "k", "0", ""], &[]);
    check(&mut ev, &["SETRANGE", "k", "0", "y"], &["setrange:k"]);
    check(&mut ev, &["INCR", "l"], &["new:l", "incrby:l"]);
    check(&mut ev, &["DECR", "l"], &["incrby:l"]);
    check(&mut ev, &["INCRBY", "l", "5"], &["incrby:l"]);
    check(&mut ev, &["DECRBY", "l", "5"], &["incrby:l"]);
    check(&mut ev, &["INCRBY", "j", "1"], &[]);
    check(&mut ev, &["INCRBYFLOAT", "l", "1.5"], &["incrbyfloat:l"]);
    check(
        &mut ev,
        &["INCRBYFLOAT", "fl", "1"],
        &["new:fl", "incrbyfloat:fl"],
    );
    check(&mut ev, &["GETDEL", "l"], &["del:l"]);
    check(&mut ev, &["GETDEL", "l"], &[]);
    check(&mut ev, &["SET", "m", "v"], &["new:m", "set:m"]);
    check(&mut ev, &["GETEX", "m"], &[]);
    check(&mut ev, &["GETEX", "m", "EX", "100"], &["expire:m"]);
    check(&mut ev, &["GETEX", "m", "PERSIST"], &["persist:m"]);
    check(&mut ev, &["GETEX", "m", "PERSIST"], &[]);
    check(&mut ev, &["GETEX", "m", "PXAT", "1"], &["del:m"]);
    check(&mut ev, &["GETEX", "nosuch", "EX", "10"], &[]);
    // Read-only commands send nothing.
    check(&mut ev, &["GET", "a"], &[]);
    check(&mut ev, &["STRLEN", "a"], &[]);
    check(&mut ev, &["GETRANGE", "a", "0", "1"], &[]);
    check(&mut ev, &["MGET", "a", "b"], &[]);
    check(&mut ev, &["LCS", "a", "e"], &[]);
}

#[test]
fn generic_notifications() {
    let s = cairn();
    let mut ev = Events::new(&s, "Egn$");
    check(&mut ev, &["SET", "n", "v"], &["new:n", "set:n"]);
    check(&mut ev, &["EXPIRE", "n", "100"], &["expire:n"]);
    check(&mut ev, &["PEXPIRE", "n", "100000"], &["expire:n"]);
    check(&mut ev, &["EXPIREAT", "n", "99999999999"], &["expire:n"]);
    check(
        &mut ev,
        &["PEXPIREAT", "n", "99999999999000"],
        &["expire:n"],
    );
    check(&mut ev, &["EXPIRE", "n", "100", "NX"], &[]);
    check(&mut ev, &["EXPIRE", "nosuch", "100"], &[]);
    check(&mut ev, &["PERSIST", "n"], &["persist:n"]);
    check(&mut ev, &["PERSIST", "n"], &[]);
    check(&mut ev, &["EXPIRE", "n", "-1"], &["del:n"]);
    check(&mut ev, &["SET", "o", "v"], &["new:o", "set:o"]);
    check(
        &mut ev,
        &["RENAME", "o", "p"],
        &["new:p", "rename_from:o", "rename_to:p"],
    );
    check(&mut ev, &["SET", "q", "v"], &["new:q", "set:q"]);
    // A destination that existed is deleted and created again.
    check(
        &mut ev,
        &["RENAME", "p", "q"],
        &["new:q", "rename_from:p", "rename_to:q"],
    );
    check(&mut ev, &["RENAME", "q", "q"], &[]);
    check(&mut ev, &["SET", "r", "v"], &["new:r", "set:r"]);
    check(&mut ev, &["RENAMENX", "q", "r"], &[]);
    check(
        &mut ev,
        &["RENAMENX", "q", "t"],
        &["new:t", "rename_from:q", "rename_to:t"],
    );
    check(
        &mut ev,
        &["MOVE", "t", "1"],
        &["new:t@1", "move_from:t", "move_to:t@1"],
    );
    check(&mut ev, &["MOVE", "nosuch", "1"], &[]);
    check(&mut ev, &["COPY", "r", "u"], &["new:u", "copy_to:u"]);
    check(&mut ev, &["COPY", "r", "u"], &[]);
    check(
        &mut ev,
        &["COPY", "r", "u", "REPLACE"],
        &["new:u", "copy_to:u"],
    );
    check(
        &mut ev,
        &["COPY", "r", "u", "DB", "2"],
        &["new:u@2", "copy_to:u@2"],
    );
    check(&mut ev, &["DEL", "r", "u", "nosuch"], &["del:r", "del:u"]);
    check(&mut ev, &["SET", "w", "v"], &["new:w", "set:w"]);
    check(&mut ev, &["UNLINK", "w", "w"], &["del:w"]);
    // Lookups and metadata send nothing.
    check(&mut ev, &["EXISTS", "nosuch"], &[]);
    check(&mut ev, &["TYPE", "nosuch"], &[]);
    check(&mut ev, &["TOUCH", "nosuch"], &[]);
    check(&mut ev, &["TTL", "nosuch"], &[]);
    check(&mut ev, &["FLUSHALL"], &[]);
}

#[test]
fn hash_notifications() {
    let s = cairn();
    let mut ev = Events::new(&s, "Eghn");
    check(
        &mut ev,
        &["HSET", "h", "a", "1", "b", "2"],
        &["new:h", "hset:h"],
    );
    // Even when nothing changed, as Redis does.
    check(&mut ev, &["HSET", "h", "a", "1"], &["hset:h"]);
    check(&mut ev, &["HMSET", "h", "z", "1"], &["hset:h"]);
    check(&mut ev, &["HSETNX", "h", "a", "1"], &[]);
    check(&mut ev, &["HSETNX", "h", "c", "1"], &["hset:h"]);
    check(&mut ev, &["HSETNX", "h2", "c", "1"], &["new:h2", "hset:h2"]);
    check(&mut ev, &["HDEL", "h", "nosuch"], &[]);
    check(&mut ev, &["HDEL", "h", "a", "zz"], &["hdel:h"]);
    check(&mut ev, &["HDEL", "h", "b", "c", "z"], &["hdel:h", "del:h"]);
    check(
        &mut ev,
        &["HINCRBY", "h", "x", "1"],
        &["new:h", "hincrby:h"],
    );
    check(&mut ev, &["HINCRBY", "h", "x", "1"], &["hincrby:h"]);
    check(
        &mut ev,
        &["HINCRBYFLOAT", "h", "y", "1.5"],
        &["hincrbyfloat:h"],
    );
    check(&mut ev, &["HSET", "s", "f", "v"], &["new:s", "hset:s"]);
    check(&mut ev, &["HGET", "h", "x"], &[]);
    check(&mut ev, &["HGETALL", "h"], &[]);
    check(&mut ev, &["HLEN", "h"], &[]);
    // Errors send nothing.
    check(&mut ev, &["HINCRBY", "h", "y", "1"], &[]);
    ev.ctl.cmd(&["SET", "str", "x"]);
    ev.collect();
    check(&mut ev, &["HSET", "str", "f", "v"], &[]);
}

#[test]
fn keymiss_and_expired_notifications() {
    let s = cairn();
    let mut ev = Events::new(&s, "Em");
    check(&mut ev, &["GET", "nosuch"], &["keymiss:nosuch"]);
    check(&mut ev, &["MGET", "a", "b"], &["keymiss:a", "keymiss:b"]);
    check(&mut ev, &["EXISTS", "a"], &["keymiss:a"]);
    check(&mut ev, &["TYPE", "a"], &["keymiss:a"]);
    check(&mut ev, &["TTL", "a"], &["keymiss:a"]);
    check(&mut ev, &["HGET", "a", "f"], &["keymiss:a"]);
    check(&mut ev, &["OBJECT", "ENCODING", "a"], &[]);
    check(&mut ev, &["DEL", "a"], &[]);
    check(&mut ev, &["SET", "a", "1", "GET"], &["keymiss:a"]);
    check(&mut ev, &["GET", "a"], &[]);

    // Expired: found by the active cycle (nobody looks the key up).
    ev.ctl
        .cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    check(&mut ev, &["SET", "gone", "v", "PX", "50"], &[]);
    thread::sleep(Duration::from_millis(400));
    assert_eq!(ev.keyevents(&["PING"]), ["expired:gone"]);
    // And found by a lookup.
    ev.ctl.cmd(&["SET", "gone2", "v", "PX", "10000"]);
    ev.ctl.cmd(&["PEXPIRE", "gone2", "30"]);
    ev.collect();
    thread::sleep(Duration::from_millis(60));
    let got = ev.keyevents(&["GET", "gone2"]);
    assert_eq!(got, ["expired:gone2"]);
}

#[test]
fn notifications_reach_subscribers_on_every_worker() {
    let s = cairn();
    let mut ctl = s.conn();
    ctl.cmd(&["CONFIG", "SET", "notify-keyspace-events", "K$"]);
    let mut subs: Vec<RawConn> = (0..6).map(|_| s.conn()).collect();
    for c in subs.iter_mut() {
        c.cmd(&["SUBSCRIBE", "__keyspace@0__:k"]);
    }
    for i in 0..10 {
        ctl.cmd(&["SET", "k", &i.to_string()]);
    }
    for c in subs.iter_mut() {
        for _ in 0..10 {
            assert_eq!(read_items(c), ["message", "__keyspace@0__:k", "set"]);
        }
        assert!(silent_for(c, Duration::from_millis(20)));
    }
}

#[test]
fn idle_timeout_spares_subscribers() {
    let s = cairn();
    let mut ctl = s.conn();
    assert_eq!(ctl.cmd(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    let mut sub = s.conn();
    sub.cmd(&["SUBSCRIBE", "x"]);
    let mut idle = s.conn();
    assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
    thread::sleep(Duration::from_millis(2500));
    assert!(idle.is_closed_within(Duration::from_secs(1)));
    let mut p = s.conn();
    assert_eq!(int(&mut p, &["PUBLISH", "x", "still"]), 1);
    assert_eq!(
        sub.read_raw_reply(),
        frame(false, &["message", "x", "still"])
    );
    // Once it leaves, it is an idle client like any other.
    sub.cmd(&["UNSUBSCRIBE"]);
    thread::sleep(Duration::from_millis(2500));
    assert!(sub.is_closed_within(Duration::from_secs(1)));
}
