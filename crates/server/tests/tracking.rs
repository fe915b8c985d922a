//! Client-side caching end to end (Redis 7.0 `tracking.c`): invalidations
//! as RESP3 pushes and, through REDIRECT, as `__redis__:invalidate`
//! messages in RESP2; BCAST prefixes, OPTIN/OPTOUT with CLIENT CACHING,
//! NOLOOP; invalidation from expiry, eviction, FLUSHALL, scripts and
//! MULTI; delivery across workers ordered before a later reply; the
//! `tracking-table-max-keys` bound; the commands' replies and errors, and
//! INFO and CLIENT LIST fields. Reply bytes were taken from redis-server
//! 7.0.15.
mod support;

use std::time::Duration;

use support::{start_cairn, RawConn, Server};

fn cairn() -> Server {
    start_cairn(&["--server-threads", "2", "--worker-balance", "no"])
}

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The RESP3 push `invalidate [keys]`.
fn push(keys: &[&str]) -> String {
    let mut out = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        out.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    out
}

/// The RESP2 message on `__redis__:invalidate` with `keys`.
fn message(keys: &[&str]) -> String {
    let mut out = format!(
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*{}\r\n",
        keys.len()
    );
    for k in keys {
        out.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    out
}

fn id(c: &mut RawConn) -> String {
    let r = s(&c.cmd(&["CLIENT", "ID"]));
    r.trim_start_matches(':').trim().to_string()
}

fn resp3(port: u16) -> RawConn {
    let mut c = RawConn::connect(port);
    c.cmd(&["HELLO", "3"]);
    c
}

/// Nothing more arrives on `c` within a short wait.
fn quiet(c: &mut RawConn) {
    c.stream()
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let got = c.try_read_raw_reply();
    c.stream()
        .set_read_timeout(Some(support::IO_TIMEOUT))
        .unwrap();
    assert!(
        got.is_err(),
        "unexpected {:?}",
        got.map(|o| o.map(|b| s(&b)))
    );
}

fn info_field(c: &mut RawConn, section: &str, name: &str) -> String {
    let r = s(&c.cmd(&["INFO", section]));
    r.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {r}"))
        .to_string()
}

#[test]
fn resp3_pushes_for_read_keys_own_writes_after_the_reply() {
    let srv = cairn();
    let mut t = resp3(srv.port);
    let mut w = RawConn::connect(srv.port);
    assert_eq!(s(&t.cmd(&["CLIENT", "TRACKING", "ON"])), "+OK\r\n");
    assert_eq!(s(&t.cmd(&["GET", "a"])), "_\r\n");
    assert_eq!(s(&w.cmd(&["SET", "a", "1"])), "+OK\r\n");
    assert_eq!(s(&t.read_raw_reply()), push(&["a"]));
    // Not read since: no second message.
    w.cmd(&["SET", "a", "2"]);
    quiet(&mut t);
    // Its own write: the reply, then the invalidation (7.0.15's order).
    t.cmd(&["GET", "a"]);
    assert_eq!(s(&t.cmd(&["SET", "a", "3"])), "+OK\r\n");
    assert_eq!(s(&t.read_raw_reply()), push(&["a"]));
    // MULTI: after EXEC's reply.
    t.cmd(&["GET", "a"]);
    t.cmd(&["MULTI"]);
    t.cmd(&["SET", "a", "4"]);
    t.cmd(&["GET", "a"]);
    assert_eq!(s(&t.cmd(&["EXEC"])), "*2\r\n+OK\r\n$1\r\n4\r\n");
    assert_eq!(s(&t.read_raw_reply()), push(&["a"]));
    // FLUSHALL: a null for "every key".
    assert_eq!(s(&t.cmd(&["FLUSHALL"])), "+OK\r\n");
    assert_eq!(s(&t.read_raw_reply()), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKINGINFO"])),
        "%3\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"
    );
    assert_eq!(s(&t.cmd(&["CLIENT", "GETREDIR"])), ":0\r\n");
    let me = s(&t.cmd(&["CLIENT", "INFO"]));
    assert!(me.contains(" flags=t ") && me.contains(" redir=0 "), "{me}");
    assert_eq!(info_field(&mut w, "clients", "tracking_clients"), "1");
    t.cmd(&["GET", "x"]);
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "1");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_items"), "1");
    // A script's write and a memcached-free plain DEL reach it as well.
    assert_eq!(
        s(&w.cmd(&["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "x"])),
        "+OK\r\n"
    );
    assert_eq!(s(&t.read_raw_reply()), push(&["x"]));
    // A script's reads are tracked for its caller.
    t.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "x"]);
    w.cmd(&["DEL", "x"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["x"]));
    assert_eq!(s(&t.cmd(&["CLIENT", "TRACKING", "OFF"])), "+OK\r\n");
    assert_eq!(s(&t.cmd(&["CLIENT", "GETREDIR"])), ":-1\r\n");
    assert_eq!(info_field(&mut w, "clients", "tracking_clients"), "0");
}

#[test]
fn resp2_redirect_through_the_invalidate_channel() {
    let srv = cairn();
    let mut r = RawConn::connect(srv.port);
    let rid = id(&mut r);
    r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut t = RawConn::connect(srv.port);
    let mut w = RawConn::connect(srv.port);
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"])),
        "-ERR The client ID you want redirect to does not exist\r\n"
    );
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &rid])),
        "+OK\r\n"
    );
    t.cmd(&["GET", "k"]);
    t.cmd(&["GET", "k2"]);
    w.cmd(&["MSET", "k", "1", "k2", "2"]);
    assert_eq!(s(&r.read_raw_reply()), message(&["k"]));
    assert_eq!(s(&r.read_raw_reply()), message(&["k2"]));
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKINGINFO"])),
        format!(
            "*6\r\n$5\r\nflags\r\n*1\r\n$2\r\non\r\n$8\r\nredirect\r\n:{rid}\r\n$8\r\nprefixes\r\n*0\r\n"
        )
    );
    assert_eq!(s(&t.cmd(&["CLIENT", "GETREDIR"])), format!(":{rid}\r\n"));
    // FLUSHDB: the tracking client's (RESP2) null, on the channel.
    t.cmd(&["FLUSHDB"]);
    assert_eq!(
        s(&r.read_raw_reply()),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    );
    // The redirect leaves: a RESP3 tracking client learns it at its next
    // invalidation, and CLIENT LIST shows flag R.
    let mut t3 = resp3(srv.port);
    t3.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &rid]);
    t3.cmd(&["GET", "z"]);
    r.close();
    std::thread::sleep(Duration::from_millis(100));
    w.cmd(&["SET", "z", "1"]);
    assert_eq!(
        s(&t3.read_raw_reply()),
        format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{rid}\r\n")
    );
    let me = s(&t3.cmd(&["CLIENT", "INFO"]));
    assert!(
        me.contains(" flags=tR ") && me.contains(&format!(" redir={rid} ")),
        "{me}"
    );
}

#[test]
fn bcast_prefixes_and_noloop() {
    let srv = cairn();
    let mut t = resp3(srv.port);
    let mut w = RawConn::connect(srv.port);
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "PREFIX", "a"])),
        "-ERR PREFIX option requires BCAST mode to be enabled\r\n"
    );
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab"])),
        "-ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.\r\n"
    );
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP"])),
        "+OK\r\n"
    );
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab"])),
        "-ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap.\r\n"
    );
    w.cmd(&["MSET", "a2", "1", "c", "2", "a1", "3"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["a1", "a2"]));
    // NOLOOP: its own writes are left out.
    t.cmd(&["SET", "b1", "1"]);
    quiet(&mut t);
    w.cmd(&["SET", "b2", "1"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["b2"]));
    // Expiry reaches prefixes too: the write, then the active sweep.
    w.cmd(&["SET", "a9", "1", "PX", "30"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["a9"]));
    assert_eq!(s(&t.read_raw_reply()), push(&["a9"]));
    assert_eq!(info_field(&mut w, "stats", "tracking_total_prefixes"), "2");
    let me = s(&t.cmd(&["CLIENT", "INFO"]));
    assert!(me.contains(" flags=tB "), "{me}");
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKINGINFO"])),
        "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\nbcast\r\n$6\r\nnoloop\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    t.cmd(&["RESET"]);
    assert_eq!(info_field(&mut w, "stats", "tracking_total_prefixes"), "0");
    assert_eq!(info_field(&mut w, "clients", "tracking_clients"), "0");
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let srv = cairn();
    let mut t = resp3(srv.port);
    let mut w = RawConn::connect(srv.port);
    assert_eq!(
        s(&t.cmd(&["CLIENT", "CACHING", "YES"])),
        "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"
    );
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"])),
        "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"
    );
    assert_eq!(s(&t.cmd(&["CLIENT", "TRACKING", "ON", "OPTIN"])), "+OK\r\n");
    assert_eq!(
        s(&t.cmd(&["CLIENT", "CACHING", "NO"])),
        "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"
    );
    t.cmd(&["GET", "plain"]);
    assert_eq!(s(&t.cmd(&["CLIENT", "CACHING", "YES"])), "+OK\r\n");
    t.cmd(&["GET", "cached"]);
    // CACHING YES lasted one command.
    t.cmd(&["GET", "plain2"]);
    w.cmd(&["MSET", "plain", "1", "cached", "1", "plain2", "1"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["cached"]));
    quiet(&mut t);
    assert_eq!(
        s(&t.cmd(&["CLIENT", "TRACKING", "ON", "OPTOUT"])),
        "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"
    );
    t.cmd(&["CLIENT", "TRACKING", "OFF"]);
    t.cmd(&["CLIENT", "TRACKING", "ON", "OPTOUT"]);
    t.cmd(&["CLIENT", "CACHING", "NO"]);
    t.cmd(&["GET", "skip"]);
    t.cmd(&["GET", "keep"]);
    w.cmd(&["MSET", "skip", "2", "keep", "2"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["keep"]));
    quiet(&mut t);
}

#[test]
fn expiry_and_eviction_invalidate() {
    let srv = cairn();
    let mut t = resp3(srv.port);
    let mut w = RawConn::connect(srv.port);
    t.cmd(&["CLIENT", "TRACKING", "ON"]);
    w.cmd(&["SET", "e", "1", "PX", "50"]);
    t.cmd(&["GET", "e"]);
    // The active sweep removes it without anyone reading it.
    assert_eq!(s(&t.read_raw_reply()), push(&["e"]));
    // Eviction under maxmemory.
    w.cmd(&["SET", "victim", "x"]);
    t.cmd(&["GET", "victim"]);
    w.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    w.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    w.cmd(&["GET", "nothing"]);
    assert_eq!(s(&t.read_raw_reply()), push(&["victim"]));
    w.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
}

#[test]
fn invalidation_from_another_worker_precedes_a_later_reply() {
    let srv = cairn();
    // Connections are dealt to the two workers in turn: take neighbours.
    let mut t = resp3(srv.port);
    let mut w = RawConn::connect(srv.port);
    t.cmd(&["CLIENT", "TRACKING", "ON"]);
    for i in 0..300 {
        let v = i.to_string();
        t.cmd(&["GET", "k"]);
        w.cmd(&["SET", "k", &v]);
        // The writer has its reply: the reader's next command must see the
        // invalidation first, then the new value.
        t.send(&[b"GET", b"k"]);
        assert_eq!(s(&t.read_raw_reply()), push(&["k"]), "round {i}");
        assert_eq!(s(&t.read_raw_reply()), format!("${}\r\n{v}\r\n", v.len()));
    }
}

#[test]
fn the_table_is_bounded_and_left_clean() {
    let srv = cairn();
    let mut t = resp3(srv.port);
    let mut w = RawConn::connect(srv.port);
    w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "5"]);
    t.cmd(&["CLIENT", "TRACKING", "ON"]);
    for i in 0..5 {
        t.cmd(&["GET", &format!("k{i}")]);
    }
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "5");
    // The sixth key pushes one out, and its client hears of it.
    t.send(&[b"GET", b"k5"]);
    let first = s(&t.read_raw_reply());
    let second = s(&t.read_raw_reply());
    let evicted = if first.starts_with('>') {
        first
    } else {
        second
    };
    assert!(
        evicted.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n"),
        "{evicted}"
    );
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "5");
    // A second client on the same keys, then both leave: nothing remains.
    let mut t2 = resp3(srv.port);
    t2.cmd(&["CLIENT", "TRACKING", "ON"]);
    t2.cmd(&["MGET", "k1", "k2", "k3"]);
    t.close();
    t2.close();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(info_field(&mut w, "clients", "tracking_clients"), "0");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), "0");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_items"), "0");
}

#[test]
fn tracking_errors_match_redis() {
    let srv = cairn();
    let mut t = RawConn::connect(srv.port);
    let cases: &[(&[&str], &str)] = &[
        (&["CLIENT", "TRACKING", "maybe"], "-ERR syntax error\r\n"),
        (&["CLIENT", "TRACKING", "ON", "FOO"], "-ERR syntax error\r\n"),
        (&["CLIENT", "TRACKING", "ON", "PREFIX"], "-ERR syntax error\r\n"),
        (
            &["CLIENT", "TRACKING", "ON", "REDIRECT", "abc"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
            "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n",
        ),
        (&["CLIENT", "TRACKING", "ON"], "+OK\r\n"),
        (
            &["CLIENT", "TRACKING", "ON", "BCAST"],
            "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
        ),
        (
            &["CLIENT", "CACHING", "YES"],
            "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n",
        ),
        (&["CLIENT", "TRACKING", "ON", "OPTIN"], "+OK\r\n"),
        (&["CLIENT", "CACHING", "maybe"], "-ERR syntax error\r\n"),
        (
            &["CLIENT", "TRACKINGINFO", "x"],
            "-ERR wrong number of arguments for 'client|trackinginfo' command\r\n",
        ),
        (
            &["CLIENT", "GETREDIR", "x"],
            "-ERR wrong number of arguments for 'client|getredir' command\r\n",
        ),
        (&["CLIENT", "TRACKING", "OFF"], "+OK\r\n"),
        (
            &["CLIENT", "TRACKINGINFO"],
            "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(s(&t.cmd(args)), *want, "{args:?}");
    }
}
