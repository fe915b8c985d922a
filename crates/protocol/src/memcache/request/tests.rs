//! Codec tests: every command line, errors as memcached 1.6.18 writes them
//! (each expectation below was checked against a real memcached 1.6.18),
//! data blocks, bounds, and a property test that splitting the input at
//! any byte offset changes nothing.
use super::*;
use proptest::prelude::*;

fn lim() -> Limits {
    Limits {
        max_value: 1000,
        no_memory: false,
        big_value: usize::MAX,
    }
}

/// Decodes `input` whole; expects exactly one request using all of it.
fn one(input: &[u8]) -> Request<'_> {
    let mut d = Decoder::new();
    match d.decode(input, &lim()) {
        Decoded::Request { consumed, req } => {
            assert_eq!(
                consumed,
                input.len(),
                "for {:?}",
                String::from_utf8_lossy(input)
            );
            req
        }
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(input)),
    }
}

fn err(input: &[u8]) -> (&'static str, bool) {
    match one(input) {
        Request::Error { msg, noreply } => (msg, noreply),
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(input)),
    }
}

fn msg(input: &[u8]) -> &'static str {
    err(input).0
}

/// Feeds `chunks` one after another as a worker would (buffer, decode
/// until incomplete, drop what was used); returns each outcome as text.
fn run(chunks: &[&[u8]], limits: &Limits) -> Vec<String> {
    let mut d = Decoder::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    for c in chunks {
        buf.extend_from_slice(c);
        loop {
            match d.decode(&buf, limits) {
                Decoded::Incomplete { min_total } => {
                    assert!(min_total > buf.len(), "incomplete must ask for more");
                    break;
                }
                Decoded::Skipped { consumed } => {
                    assert!(consumed > 0);
                    buf.drain(..consumed);
                }
                Decoded::Request { consumed, req } => {
                    out.push(format!("{req:?}"));
                    buf.drain(..consumed);
                }
                Decoded::Close => {
                    out.push("CLOSE".into());
                    return out;
                }
                Decoded::Block { .. } => unreachable!("big_value is off here"),
            }
        }
    }
    out.push(format!("left {}", buf.len()));
    out
}

#[test]
fn get_family() {
    let Request::Get { cas, touch, keys } = one(b"get a bb  ccc\r\n") else {
        panic!()
    };
    assert_eq!((cas, touch), (false, None));
    assert_eq!(keys.collect::<Vec<_>>(), vec![&b"a"[..], b"bb", b"ccc"]);
    let Request::Get { cas, touch, keys } = one(b"gats 100 k\n") else {
        panic!()
    };
    assert_eq!((cas, touch), (true, Some(100)));
    assert_eq!(keys.collect::<Vec<_>>(), vec![&b"k"[..]]);
    // `gat 100` has no keys: memcached answers END.
    let Request::Get { keys, .. } = one(b"gat 100\r\n") else {
        panic!()
    };
    assert_eq!(keys.count(), 0);
    assert!(matches!(one(b"gets k\r\n"), Request::Get { cas: true, .. }));
    assert!(matches!(
        one(b"bget k\r\n"),
        Request::Get { cas: false, .. }
    ));
    assert_eq!(msg(b"get\r\n"), "ERROR");
    assert_eq!(msg(b"gets \r\n"), "ERROR");
    assert_eq!(msg(b"gat\r\n"), "ERROR");
    assert_eq!(msg(b"gat x k\r\n"), "CLIENT_ERROR invalid exptime argument");
    assert_eq!(msg(b"gett k\r\n"), "ERROR");
    // More than 23 words: every key still comes out.
    let line: Vec<u8> = (0..40)
        .map(|i| format!(" k{i}"))
        .fold(b"get".to_vec(), |mut v, s| {
            v.extend_from_slice(s.as_bytes());
            v
        });
    let mut input = line.clone();
    input.extend_from_slice(b"\r\n");
    let Request::Get { keys, .. } = one(&input) else {
        panic!()
    };
    assert_eq!(keys.count(), 40);
}

#[test]
fn storage_commands() {
    let r = one(b"set k 5 10 3\r\nabc\r\n");
    assert_eq!(
        r,
        Request::Store(Store {
            mode: StoreMode::Set,
            key: b"k",
            flags: 5,
            exptime: 10,
            data: b"abc",
            shared: None,
            cas: 0,
            noreply: false
        })
    );
    for (cmd, mode) in [
        ("add", StoreMode::Add),
        ("replace", StoreMode::Replace),
        ("append", StoreMode::Append),
        ("prepend", StoreMode::Prepend),
    ] {
        let input = format!("{cmd} k 0 0 1 noreply\r\nx\r\n");
        let Request::Store(s) = one(input.as_bytes()) else {
            panic!()
        };
        assert_eq!((s.mode, s.noreply, s.data), (mode, true, &b"x"[..]));
    }
    let Request::Store(s) = one(b"cas k 1 2 0 99\r\n\r\n") else {
        panic!()
    };
    assert_eq!((s.mode, s.cas, s.data), (StoreMode::Cas, 99, &b""[..]));
    // Data may hold anything, \r\n included.
    let Request::Store(s) = one(b"set k 0 0 4\r\n\r\n\r\n\r\n") else {
        panic!()
    };
    assert_eq!(s.data, b"\r\n\r\n");
    // Flags wrap to 32 bits and exptime to a C int, as in memcached.
    let Request::Store(s) = one(b"set k 4294967297 -1 0\r\n\r\n") else {
        panic!()
    };
    assert_eq!((s.flags, s.exptime), (1, -1));
}

#[test]
fn storage_errors_keep_the_data_line_as_a_command() {
    // A bad line reads no data: memcached then runs the data as a line.
    let out = run(&[b"set k 0 0 -1\r\nx\r\n"], &lim());
    assert_eq!(
        out[0],
        "Error { msg: \"CLIENT_ERROR bad command line format\", noreply: false }"
    );
    assert_eq!(out[1], "Error { msg: \"ERROR\", noreply: false }");
    assert_eq!(
        msg(b"set k x 0 1\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(
        msg(b"set k 0 x 1\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(
        msg(b"set k 0 0 x\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(
        msg(b"cas k 0 0 1 x\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(
        msg(b"cas k 0 0 1 -1\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(msg(b"set k 0 0\r\n"), "ERROR");
    assert_eq!(msg(b"set k 0 0 1 noreply extra\r\n"), "ERROR");
    assert_eq!(msg(b"cas k 0 0 1\r\n"), "ERROR");
    // noreply silences the error too (memcached's out_string).
    assert_eq!(
        err(b"set k 0 0 x noreply\r\n"),
        ("CLIENT_ERROR bad command line format", true)
    );
    let long = format!("set {} 0 0 1\r\n", "k".repeat(251));
    assert_eq!(msg(long.as_bytes()), "CLIENT_ERROR bad command line format");
    let ok = format!("set {} 0 0 1\r\nx\r\n", "k".repeat(250));
    assert!(matches!(one(ok.as_bytes()), Request::Store(_)));
    assert_eq!(
        msg(b"set a\tb 0 0 1\r\n"),
        "CLIENT_ERROR bad command line format"
    );
}

#[test]
fn bad_data_chunk() {
    let out = run(&[b"set k 0 0 1\r\nxyz\r\n"], &lim());
    assert_eq!(
        out[0],
        "Error { msg: \"CLIENT_ERROR bad data chunk\", noreply: false }"
    );
    // The rest ("\r\n") is an empty line.
    assert_eq!(out[1], "Error { msg: \"ERROR\", noreply: false }");
    assert_eq!(
        err(b"set k 0 0 1 noreply\r\nxyz"),
        ("CLIENT_ERROR bad data chunk", true)
    );
    // Meta sets always report it.
    assert_eq!(
        err(b"ms k 1 q\r\nxyz"),
        ("CLIENT_ERROR bad data chunk", false)
    );
}

#[test]
fn too_large_and_no_memory_discard_the_data() {
    let out = run(
        &[b"set k 0 0 2000\r\n", &[b'x'; 2000], b"\r\nget k\r\n"],
        &lim(),
    );
    assert!(out[0].starts_with("Refused { why: TooLarge"), "{out:?}");
    assert!(out[0].contains("deletes: true"));
    assert!(out[1].starts_with("Get"), "{out:?}");
    assert_eq!(out[2], "left 0");
    let full = Limits {
        max_value: 1000,
        no_memory: true,
        big_value: usize::MAX,
    };
    let out = run(&[b"add k 0 0 3 noreply\r\nabc\r\nmn\r\n"], &full);
    assert!(out[0].starts_with("Refused { why: NoMemory"), "{out:?}");
    assert!(out[0].contains("deletes: false") && out[0].contains("noreply: true"));
    assert_eq!(out[1], "MetaNoop");
    let out = run(&[b"ms k 2000 T0\r\n", &[b'x'; 2000], b"\r\n"], &lim());
    assert!(out[0].starts_with("Refused { why: TooLarge"), "{out:?}");
    assert!(out[0].contains("noreply: false"));
    // The limit is the configured one, not memcached's 1 MB.
    let big = Limits::default();
    let mut input = b"set k 0 0 2120000\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'v', 2_120_000));
    input.extend_from_slice(b"\r\n");
    let mut d = Decoder::new();
    assert!(matches!(
        d.decode(&input, &big),
        Decoded::Request {
            req: Request::Store(_),
            ..
        }
    ));
}

#[test]
fn other_text_commands() {
    assert_eq!(
        one(b"delete k\r\n"),
        Request::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        one(b"delete k 0 noreply\r\n"),
        Request::Delete {
            key: b"k",
            noreply: true
        }
    );
    assert!(matches!(one(b"delete k 0\r\n"), Request::Delete { .. }));
    assert!(matches!(
        one(b"delete k noreply\r\n"),
        Request::Delete { noreply: true, .. }
    ));
    let usage = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
    assert_eq!(err(b"delete k 1\r\n"), (usage, false));
    assert_eq!(err(b"delete k x noreply\r\n"), (usage, true));
    assert_eq!(msg(b"delete\r\n"), "ERROR");
    assert_eq!(msg(b"delete a b c d\r\n"), "ERROR");
    assert_eq!(
        one(b"incr n 5\r\n"),
        Request::Arith {
            incr: true,
            key: b"n",
            delta: 5,
            noreply: false
        }
    );
    assert!(matches!(
        one(b"decr n 18446744073709551615 noreply\r\n"),
        Request::Arith {
            incr: false,
            delta: u64::MAX,
            noreply: true,
            ..
        }
    ));
    assert_eq!(
        msg(b"incr n x\r\n"),
        "CLIENT_ERROR invalid numeric delta argument"
    );
    assert_eq!(
        msg(b"incr n -1\r\n"),
        "CLIENT_ERROR invalid numeric delta argument"
    );
    assert_eq!(msg(b"incr n\r\n"), "ERROR");
    assert_eq!(msg(b"incr n 1 2 3\r\n"), "ERROR");
    assert!(matches!(
        one(b"incr n 1 x\r\n"),
        Request::Arith { noreply: false, .. }
    ));
    assert_eq!(
        one(b"touch k 10 noreply\r\n"),
        Request::Touch {
            key: b"k",
            exptime: 10,
            noreply: true
        }
    );
    assert_eq!(
        msg(b"touch k x\r\n"),
        "CLIENT_ERROR invalid exptime argument"
    );
    assert_eq!(msg(b"touch k\r\n"), "ERROR");
    assert_eq!(
        one(b"flush_all\r\n"),
        Request::FlushAll {
            delay: 0,
            noreply: false
        }
    );
    assert_eq!(
        one(b"flush_all noreply\r\n"),
        Request::FlushAll {
            delay: 0,
            noreply: true
        }
    );
    assert_eq!(
        one(b"flush_all 10 noreply\r\n"),
        Request::FlushAll {
            delay: 10,
            noreply: true
        }
    );
    assert_eq!(
        one(b"flush_all 1 2\r\n"),
        Request::FlushAll {
            delay: 1,
            noreply: false
        }
    );
    assert_eq!(
        msg(b"flush_all x\r\n"),
        "CLIENT_ERROR invalid exptime argument"
    );
    assert_eq!(msg(b"flush_all 1 2 3\r\n"), "ERROR");
    assert_eq!(one(b"version\r\n"), Request::Version);
    assert_eq!(one(b"version x\r\n"), Request::Version);
    assert_eq!(
        one(b"verbosity 1\r\n"),
        Request::Verbosity {
            level: 1,
            noreply: false
        }
    );
    assert_eq!(
        one(b"verbosity 7 noreply\r\n"),
        Request::Verbosity {
            level: 7,
            noreply: true
        }
    );
    assert_eq!(
        msg(b"verbosity x\r\n"),
        "CLIENT_ERROR bad command line format"
    );
    assert_eq!(msg(b"verbosity\r\n"), "ERROR");
    assert_eq!(one(b"quit\r\n"), Request::Quit);
    assert_eq!(one(b"quit now\r\n"), Request::Quit);
    assert_eq!(msg(b"shutdown\r\n"), "ERROR: shutdown not enabled");
    let Request::Stats { args } = one(b"stats settings x\r\n") else {
        panic!()
    };
    assert_eq!(args.collect::<Vec<_>>(), vec![&b"settings"[..], b"x"]);
    for bad in [
        &b"\r\n"[..],
        b"\n",
        b"x\r\n",
        b"GET k\r\n",
        b"foo\r\n",
        b"  \r\n",
    ] {
        assert_eq!(msg(bad), "ERROR", "{:?}", String::from_utf8_lossy(bad));
    }
    // A NUL ends the line, as memcached's strlen does.
    assert_eq!(one(b"version\0junk\r\n"), Request::Version);
}

fn meta_req(input: &[u8]) -> Meta<'_> {
    match one(input) {
        Request::Meta(m) => m,
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn meta_get_flags() {
    let m = meta_req(b"mg k v f t s c k h l O123 q u N30 R10 T5\r\n");
    assert_eq!(m.cmd, MetaCmd::Get);
    assert_eq!(m.key.as_bytes(), b"k");
    let f = m.flags;
    assert!(f.value && f.quiet && f.no_bump && !f.base64);
    assert_eq!((f.vivify, f.recache, f.ttl), (Some(30), Some(10), Some(5)));
    assert_eq!(f.words().count(), 14);
    assert_eq!(f.words().nth(8), Some(&b"O123"[..]));
    assert!(f.has(b'h') && !f.has(b'F'));
    assert_eq!(meta_req(b"mg k\r\n").flags.words().count(), 0);
    assert_eq!(msg(b"mg\r\n"), "ERROR");
    assert_eq!(msg(b"mg k x\r\n"), "CLIENT_ERROR invalid flag");
    assert_eq!(msg(b"mg k E5\r\n"), "CLIENT_ERROR invalid flag");
    assert_eq!(msg(b"mg k v v\r\n"), "CLIENT_ERROR duplicate flag");
    assert_eq!(msg(b"mg k v vx\r\n"), "CLIENT_ERROR duplicate flag");
    assert_eq!(
        msg(b"mg k T\r\n"),
        "CLIENT_ERROR bad token in command line format"
    );
    assert_eq!(
        msg(b"mg k Nx\r\n"),
        "CLIENT_ERROR bad token in command line format"
    );
    assert_eq!(msg(b"mg k Fx\r\n"), "CLIENT_ERROR bad command line format");
    assert_eq!(
        msg(b"mg k MSS\r\n"),
        "CLIENT_ERROR incorrect length for M token"
    );
    assert_eq!(
        msg(b"mg k Jx\r\n"),
        "CLIENT_ERROR invalid numeric initial value"
    );
    assert_eq!(
        msg(b"mg k Dx\r\n"),
        "CLIENT_ERROR invalid numeric delta value"
    );
    // The last error found is the one reported.
    assert_eq!(
        msg(b"mg k Jx Dx\r\n"),
        "CLIENT_ERROR invalid numeric delta value"
    );
    assert_eq!(
        msg(b"mg k Jx Fx\r\n"),
        "CLIENT_ERROR invalid numeric initial value"
    );
    let o32 = format!("mg k O{}\r\n", "1".repeat(31));
    assert!(matches!(one(o32.as_bytes()), Request::Meta(_)));
    let o33 = format!("mg k O{}\r\n", "1".repeat(32));
    assert_eq!(msg(o33.as_bytes()), "CLIENT_ERROR opaque token too long");
    let long = format!("mg {} v\r\n", "k".repeat(251));
    assert_eq!(msg(long.as_bytes()), "CLIENT_ERROR bad command line format");
    // 17 flags pass, 18 do not (memcached 1.6.18).
    let f17 = b"mg a v c f t s k h l u O1 P L T1 N1 R1 M1 J1\r\n";
    assert_eq!(meta_req(f17).flags.words().count(), 17);
    assert_eq!(
        msg(b"mg a v c f t s k h l u O1 P L T1 N1 R1 M1 J1 D1\r\n"),
        "CLIENT_ERROR options flags are too long"
    );
}

#[test]
fn meta_base64_keys() {
    let m = meta_req(b"mg Zm9v b v k\r\n");
    assert_eq!(m.key.as_bytes(), b"foo");
    assert!(m.key.is_binary() && m.flags.base64);
    let m = meta_req(b"mg AAEC b\r\n");
    assert_eq!(m.key.as_bytes(), &[0, 1, 2]);
    assert_eq!(msg(b"mg !!!! b v\r\n"), "CLIENT_ERROR error decoding key");
    assert_eq!(msg(b"mg Zm9vYg b\r\n"), "CLIENT_ERROR error decoding key");
    assert_eq!(
        msg(b"md !!!! b\r\n"),
        "CLIENT_ERROR invalid or duplicate flag"
    );
    assert_eq!(
        one(b"me Zm9v b\r\n"),
        Request::MetaDebug {
            key: decode_key(b"Zm9v").unwrap()
        }
    );
    assert_eq!(msg(b"me cnt b\r\n"), "CLIENT_ERROR bad command line format");
    assert_eq!(msg(b"me\r\n"), "CLIENT_ERROR bad command line format");
    assert!(matches!(one(b"me k x\r\n"), Request::MetaDebug { .. }));
}

#[test]
fn meta_set_delete_arith() {
    let m = meta_req(b"ms k 2 T60 F5 c k O1 MA C7 I q\r\nhi\r\n");
    assert_eq!(m.cmd, MetaCmd::Set);
    assert_eq!(m.data, b"hi");
    let f = m.flags;
    assert_eq!(
        (
            f.ttl,
            f.client_flags,
            f.mode,
            f.compare_cas,
            f.invalidate,
            f.quiet
        ),
        (Some(60), 5, Some(b'A'), Some(7), true, true)
    );
    assert_eq!(msg(b"ms k\r\n"), "CLIENT_ERROR bad command line format");
    assert_eq!(msg(b"ms\r\n"), "ERROR");
    assert_eq!(msg(b"ms k x\r\n"), "CLIENT_ERROR bad command line format");
    assert_eq!(msg(b"ms k -1\r\n"), "CLIENT_ERROR bad command line format");
    // Flag errors discard the data block.
    for (line, want) in [
        (&b"ms k 2 zz\r\nhi\r\n"[..], "CLIENT_ERROR invalid flag"),
        (b"ms k 2 c c\r\nhi\r\n", "CLIENT_ERROR duplicate flag"),
        (
            b"ms k 2 F\r\nhi\r\n",
            "CLIENT_ERROR bad command line format",
        ),
        (
            b"ms k 2 Tx\r\nhi\r\n",
            "CLIENT_ERROR bad token in command line format",
        ),
        (
            b"ms k 2 MX\r\nhi\r\n",
            "CLIENT_ERROR invalid mode for ms M token",
        ),
        (b"ms !!! 2 b\r\nhi\r\n", "CLIENT_ERROR error decoding key"),
    ] {
        let out = run(&[line], &lim());
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].contains(want), "{out:?}");
        assert_eq!(out[1], "left 0");
    }
    assert_eq!(
        msg(b"ms a 1 c k O1 P L T1 q I F1 C1 MS J1 D1 v f t s h\r\n"),
        "CLIENT_ERROR options flags too long"
    );
    assert!(matches!(
        one(b"ms a 1 c k O1 P L T1 I F1 C1 MS J1 D1 v f t s\r\nx\r\n"),
        Request::Meta(_)
    ));
    let m = meta_req(b"md k q C5 I T30 k O9\r\n");
    assert_eq!(m.cmd, MetaCmd::Delete);
    assert_eq!(
        (m.flags.compare_cas, m.flags.invalidate, m.flags.ttl),
        (Some(5), true, Some(30))
    );
    assert_eq!(msg(b"md k x\r\n"), "CLIENT_ERROR invalid or duplicate flag");
    assert_eq!(
        msg(b"md k Tx\r\n"),
        "CLIENT_ERROR invalid or duplicate flag"
    );
    assert_eq!(msg(b"md\r\n"), "ERROR");
    let m = meta_req(b"ma k N0 J10 D5 MD v t c\r\n");
    assert_eq!(m.cmd, MetaCmd::Arith);
    assert_eq!(
        (m.flags.vivify, m.flags.initial, m.flags.delta, m.flags.mode),
        (Some(0), 10, 5, Some(b'D'))
    );
    assert_eq!(meta_req(b"ma k\r\n").flags.delta, 1);
    assert_eq!(
        msg(b"ma k Mx\r\n"),
        "CLIENT_ERROR invalid mode for ma M token"
    );
    assert_eq!(msg(b"ma k D\r\n"), "CLIENT_ERROR invalid or duplicate flag");
    assert_eq!(
        msg(b"ma k MII\r\n"),
        "CLIENT_ERROR invalid or duplicate flag"
    );
    assert_eq!(
        msg(b"ma a c k O1 P L T1 q I C1 MI J1 D1 v f t s h l\r\n"),
        "CLIENT_ERROR options flags too long"
    );
    assert_eq!(one(b"mn\r\n"), Request::MetaNoop);
    assert_eq!(msg(b"mz k\r\n"), "ERROR");
}

#[test]
fn long_lines_close_unless_they_are_gets() {
    let mut d = Decoder::new();
    let junk = vec![b'x'; LINE_MAX + 1];
    assert!(matches!(d.decode(&junk, &lim()), Decoded::Close));
    assert!(matches!(
        d.decode(&junk[..LINE_MAX], &lim()),
        Decoded::Incomplete { .. }
    ));
    let mut get = b"get ".to_vec();
    get.extend(std::iter::repeat_n(b'k', 5000));
    assert!(matches!(d.decode(&get, &lim()), Decoded::Incomplete { .. }));
    let mut gets = b"   gets ".to_vec();
    gets.extend(std::iter::repeat_n(b'k', 5000));
    assert!(matches!(
        d.decode(&gets, &lim()),
        Decoded::Incomplete { .. }
    ));
    // A long line that is complete is parsed (memcached too, when it
    // arrives in one read).
    let mut set = b"set ".to_vec();
    set.extend(std::iter::repeat_n(b'k', 3000));
    set.extend_from_slice(b" 0 0 1\r\n");
    assert!(matches!(
        d.decode(&set, &lim()),
        Decoded::Request {
            req: Request::Error { .. },
            ..
        }
    ));
}

#[test]
fn auth() {
    let mut d = Decoder::new();
    assert_eq!(
        d.decode_auth(b"set x 0 0 9\r\nuser pass\r\n"),
        Auth::Credentials {
            consumed: 24,
            user: b"user",
            pass: b"pass"
        }
    );
    assert_eq!(
        d.decode_auth(b"set x 0 0 9\r\nuse"),
        Auth::Incomplete { min_total: 24 }
    );
    assert_eq!(
        d.decode_auth(b"get k\r\n"),
        Auth::Reply {
            consumed: 7,
            msg: "CLIENT_ERROR unauthenticated"
        }
    );
    assert_eq!(
        d.decode_auth(b"set x 0 0 4\r\nuser\r\n"),
        Auth::Reply {
            consumed: 19,
            msg: "CLIENT_ERROR bad authentication token format"
        }
    );
    assert_eq!(
        d.decode_auth(b"set x 0 0 4\r\nuserXX"),
        Auth::Reply {
            consumed: 19,
            msg: "CLIENT_ERROR bad command line termination"
        }
    );
    assert_eq!(d.decode_auth(&[b'x'; 3000]), Auth::Close);
    // A size beyond any token closes at once, before its data arrives: the
    // connection must not buffer a declared gigabyte for a stranger.
    assert_eq!(d.decode_auth(b"set a 0 0 1000000000\r\n"), Auth::Close);
    assert_eq!(
        d.decode_auth(format!("set a 0 0 {}\r\n", MAX_AUTH_TOKEN + 1).as_bytes()),
        Auth::Close
    );
    assert!(matches!(
        d.decode_auth(format!("set a 0 0 {MAX_AUTH_TOKEN}\r\n").as_bytes()),
        Auth::Incomplete { .. }
    ));
}

/// A stream of every kind of request, some malformed.
const STREAM: &[&[u8]] = &[
    b"set k 1 0 5\r\nhello\r\n",
    b"get k k2 k3\r\n",
    b"gets k\n",
    b"gat 10 k\r\n",
    b"append k 0 0 2 noreply\r\n!!\r\n",
    b"cas k 0 0 1 77\r\nx\r\n",
    b"incr n 5\r\n",
    b"decr n 1 noreply\r\n",
    b"touch k 10\r\n",
    b"delete k 0\r\n",
    b"set big 0 0 1500\r\n",
    b"flush_all 5\r\n",
    b"mg k v c f t k O1 q\r\n",
    b"ms Zm9v 3 b T0 F9 c\r\nbar\r\n",
    b"ms k 3 zz\r\nbar\r\n",
    b"md k q\r\n",
    b"ma n N0 J1 v\r\n",
    b"mn\r\n",
    b"me k\r\n",
    b"set k 0 0 1\r\nxyz\r\n",
    b"set k 0 0 -1\r\n",
    b"stats items\r\n",
    b"bogus\r\n",
    b"version\r\n",
    b"quit\r\n",
];

fn stream() -> Vec<u8> {
    let mut s = Vec::new();
    for part in STREAM {
        s.extend_from_slice(part);
        if part.starts_with(b"set big") {
            s.extend(std::iter::repeat_n(b'B', 1500));
            s.extend_from_slice(b"\r\n");
        }
    }
    s
}

#[test]
fn whole_stream_decodes_in_order() {
    let s = stream();
    let out = run(&[&s], &lim());
    assert_eq!(out.len(), 27, "{out:#?}");
    assert_eq!(out.last().unwrap(), "left 0");
}

#[test]
fn every_split_point_gives_the_same_requests() {
    let s = stream();
    let whole = run(&[&s], &lim());
    for cut in 0..=s.len() {
        let (a, b) = s.split_at(cut);
        assert_eq!(run(&[a, b], &lim()), whole, "split at {cut}");
    }
}

proptest! {
    #[test]
    fn any_chunking_gives_the_same_requests(cuts in proptest::collection::vec(0usize..4000, 0..12)) {
        let s = stream();
        let whole = run(&[&s], &lim());
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (s.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut at = 0;
        for c in cuts {
            chunks.push(&s[at..c]);
            at = c;
        }
        chunks.push(&s[at..]);
        prop_assert_eq!(run(&chunks, &lim()), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let out = run(&[&data], &lim());
        prop_assert!(!out.is_empty());
    }

    #[test]
    fn arbitrary_words_never_panic(words in proptest::collection::vec(
        prop_oneof![
            Just(&b"mg"[..]), Just(&b"ms"[..]), Just(&b"md"[..]), Just(&b"ma"[..]),
            Just(&b"set"[..]), Just(&b"get"[..]), Just(&b"cas"[..]), Just(&b"1"[..]),
            Just(&b"-1"[..]), Just(&b"k"[..]), Just(&b"b"[..]), Just(&b"v"[..]),
            Just(&b"N5"[..]), Just(&b"C1"[..]), Just(&b"MA"[..]), Just(&b"noreply"[..]),
            Just(&b"Zm9v"[..]), Just(&b"O12"[..]), Just(&b"q"[..]),
        ], 0..30)) {
        let mut line = words.join(&b' ');
        line.extend_from_slice(b"\r\nxy\r\n");
        let out = run(&[&line], &lim());
        prop_assert!(!out.is_empty());
    }
}

/// A large data block cut out into a buffer of its own, as the server does
/// after `Decoded::Block`, decodes to the same request with `shared` set;
/// a bad terminator is the usual error, and small blocks never use one.
#[test]
fn big_values_in_blocks_of_their_own() {
    let limits = Limits {
        max_value: 1 << 20,
        no_memory: false,
        big_value: 100,
    };
    for (line, ms) in [
        (&b"set k 7 0 300\r\n"[..], false),
        (b"ms k 300 F7\r\n", true),
    ] {
        for tail in [&b"\r\n"[..], b"xx"] {
            let value: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
            let mut buf = line.to_vec();
            buf.extend_from_slice(&value[..10]);
            let mut d = Decoder::new();
            let Decoded::Block { at, len } = d.decode(&buf, &limits) else {
                panic!("expected a block");
            };
            assert_eq!((at, len), (line.len(), 300));
            let mut data = buf.split_off(at);
            data.extend_from_slice(&value[10..]);
            data.extend_from_slice(tail);
            let terminated = data[len..] == *b"\r\n";
            data.truncate(len);
            let block = DataBlock {
                data: Arc::new(data),
                terminated,
            };
            let Decoded::Request { consumed, req } = d.decode_with(&buf, &limits, Some(&block))
            else {
                panic!("expected a request");
            };
            assert_eq!(consumed, line.len());
            match (req, tail == b"\r\n") {
                (Request::Store(s), true) => {
                    assert!(!ms);
                    assert_eq!(s.data, &value[..]);
                    assert!(s.shared.is_some());
                    assert_eq!(s.flags, 7);
                }
                (Request::Meta(m), true) => {
                    assert!(ms);
                    assert_eq!(m.data, &value[..]);
                    assert!(m.shared.is_some());
                }
                (Request::Error { msg, .. }, false) => {
                    assert_eq!(msg, "CLIENT_ERROR bad data chunk")
                }
                (other, _) => panic!("{other:?}"),
            }
        }
    }
    // Under the threshold, or complete already: no block.
    let mut d = Decoder::new();
    assert!(matches!(
        d.decode(b"set k 0 0 50\r\nabc", &limits),
        Decoded::Incomplete { .. }
    ));
    let mut whole = b"set k 0 0 300\r\n".to_vec();
    whole.extend_from_slice(&[b'v'; 300]);
    whole.extend_from_slice(b"\r\n");
    assert!(matches!(
        d.decode(&whole, &limits),
        Decoded::Request {
            req: Request::Store(Store { shared: None, .. }),
            ..
        }
    ));
}
