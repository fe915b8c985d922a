//! Integration tests for the connection commands (PING ECHO HELLO AUTH QUIT
//! RESET SELECT) and CLIENT, against a real Cairn process: the `redis`
//! crate as a third-party client, `RawConn` where the exact bytes matter
//! (error texts, RESP3 types, replies that must not arrive).
mod support;

use std::io::ErrorKind;
use std::thread;
use std::time::{Duration, Instant};

use redis::{Value, VerbatimFormat};
use support::{redis_client, redis_client_resp3, start_cairn, RawConn, Server};

fn cairn() -> Server {
    start_cairn(&["--enable-debug-command", "yes"])
}

/// A RESP bulk string.
fn bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

/// A RESP error line.
fn err(msg: &str) -> Vec<u8> {
    format!("-{msg}\r\n").into_bytes()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The text inside a bulk (`$n\r\n...\r\n`) or verbatim (`=n\r\ntxt:...\r\n`)
/// reply.
fn payload(reply: &[u8]) -> String {
    let s = text(reply);
    let body = &s[s.find("\r\n").expect("a header line") + 2..s.len() - 2];
    body.strip_prefix("txt:").unwrap_or(body).to_string()
}

/// `field=value` from a CLIENT LIST / INFO line.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=");
    line.trim_end()
        .split(' ')
        .find_map(|kv| kv.strip_prefix(key.as_str()))
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

fn client_id(c: &mut RawConn) -> u64 {
    let r = text(&c.cmd(&["CLIENT", "ID"]));
    r.trim_start_matches(':')
        .trim_end()
        .parse()
        .expect("an integer id")
}

/// True if no reply arrives on `c` within `wait`.
fn silent_for(c: &mut RawConn, wait: Duration) -> bool {
    c.stream().set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 1];
    // Data (Ok(n > 0)) or EOF (Ok(0)) both mean "not silent".
    let silent = match c.stream().peek(&mut b) {
        Ok(_) => false,
        Err(e) => matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    };
    c.stream()
        .set_read_timeout(Some(support::IO_TIMEOUT))
        .unwrap();
    silent
}

// ------------------------------------------------------------ PING / ECHO

#[test]
fn ping_and_echo() {
    let s = cairn();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&["ping", "hello"]), bulk("hello"));
    assert_eq!(c.cmd(&["PING", ""]), bulk(""));
    assert_eq!(
        c.cmd(&["PING", "a", "b"]),
        err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(c.cmd(&["ECHO", "a\r\nb"]), bulk("a\r\nb"));
    assert_eq!(c.cmd(&["ECHO", ""]), bulk(""));
    assert_eq!(
        c.cmd(&["ECHO"]),
        err("ERR wrong number of arguments for 'echo' command")
    );
    assert_eq!(
        c.cmd(&["ECHO", "a", "b"]),
        err("ERR wrong number of arguments for 'echo' command")
    );
    c.send(&[b"ECHO", b"\x00\xff"]);
    assert_eq!(c.read_raw_reply(), b"$2\r\n\x00\xff\r\n");

    let mut r = redis_client(s.port);
    let pong: String = redis::cmd("PING").query(&mut r).unwrap();
    assert_eq!(pong, "PONG");
    let echoed: Vec<u8> = redis::cmd("ECHO")
        .arg(&b"bin\x00ary"[..])
        .query(&mut r)
        .unwrap();
    assert_eq!(echoed, b"bin\x00ary");
}

// ------------------------------------------------------------ SELECT

#[test]
fn select_switches_database() {
    let s = cairn();
    let mut r = redis_client(s.port);
    redis::cmd("SET").arg("k").arg("db0").exec(&mut r).unwrap();
    redis::cmd("SELECT").arg(1).exec(&mut r).unwrap();
    let v: Option<String> = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v, None);
    redis::cmd("SET").arg("k").arg("db1").exec(&mut r).unwrap();
    redis::cmd("SELECT").arg(0).exec(&mut r).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v, "db0");

    let mut c = s.conn();
    assert_eq!(c.cmd(&["SELECT", "15"]), b"+OK\r\n");
    assert!(text(&c.cmd(&["CLIENT", "INFO"])).contains(" db=15 "));
    for bad in ["16", "-1", "100"] {
        assert_eq!(
            c.cmd(&["SELECT", bad]),
            err("ERR DB index is out of range"),
            "{bad}"
        );
    }
    for bad in ["abc", "1.5", "01", "+1", " 1", "", "9223372036854775808"] {
        assert_eq!(
            c.cmd(&["SELECT", bad]),
            err("ERR value is not an integer or out of range"),
            "{bad:?}"
        );
    }
    for big in ["2147483648", "-2147483649", "9223372036854775807"] {
        assert_eq!(
            c.cmd(&["SELECT", big]),
            err("ERR value is out of range, value must between -2147483648 and 2147483647"),
            "{big}"
        );
    }
    assert_eq!(
        c.cmd(&["SELECT", "1", "2"]),
        err("ERR wrong number of arguments for 'select' command")
    );
    // Failed SELECTs left the connection in db 15.
    assert!(text(&c.cmd(&["CLIENT", "INFO"])).contains(" db=15 "));
}

// ------------------------------------------------------------ HELLO

fn hello_reply(proto: u8, id: u64) -> Vec<u8> {
    let head = if proto == 3 {
        "%7".to_string()
    } else {
        "*14".to_string()
    };
    let id = id.to_string();
    let mut out = format!("{head}\r\n").into_bytes();
    for part in [
        bulk("server"),
        bulk("redis"),
        bulk("version"),
        bulk(env_version()),
        bulk("proto"),
        format!(":{proto}\r\n").into_bytes(),
        bulk("id"),
        format!(":{id}\r\n").into_bytes(),
        bulk("mode"),
        bulk("standalone"),
        bulk("role"),
        bulk("master"),
        bulk("modules"),
        b"*0\r\n".to_vec(),
    ] {
        out.extend_from_slice(&part);
    }
    out
}

/// The Redis version Cairn reports (the one its metadata came from).
fn env_version() -> &'static str {
    "7.0.15"
}

#[test]
fn hello_switches_protocol() {
    let s = cairn();
    let mut c = s.conn();
    let id = client_id(&mut c);
    assert_eq!(c.cmd(&["HELLO"]), hello_reply(2, id));
    assert_eq!(c.cmd(&["GET", "nosuch"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["HELLO", "3"]), hello_reply(3, id));
    assert_eq!(c.cmd(&["GET", "nosuch"]), b"_\r\n");
    assert_eq!(c.cmd(&["HELLO"]), hello_reply(3, id));
    assert!(text(&c.cmd(&["CLIENT", "INFO"])).contains(" resp=3\n"));
    assert_eq!(c.cmd(&["hello", "2"]), hello_reply(2, id));
    assert_eq!(c.cmd(&["GET", "nosuch"]), b"$-1\r\n");
    assert!(text(&c.cmd(&["CLIENT", "INFO"])).contains(" resp=2\n"));
}

#[test]
fn hello_options_and_errors() {
    let s = cairn();
    let mut c = s.conn();
    let id = client_id(&mut c);
    assert_eq!(c.cmd(&["HELLO", "2", "SETNAME", "n1"]), hello_reply(2, id));
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("n1"));
    assert_eq!(
        c.cmd(&["HELLO", "2", "SETNAME", "x", "setname", "y"]),
        hello_reply(2, id)
    );
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("y"));
    // No requirepass: the default user takes any password.
    assert_eq!(
        c.cmd(&["HELLO", "2", "auth", "default", "anything", "SETNAME", "z"]),
        hello_reply(2, id)
    );
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("z"));

    for v in ["4", "1", "0", "-1"] {
        assert_eq!(
            c.cmd(&["HELLO", v]),
            err("NOPROTO unsupported protocol version"),
            "{v}"
        );
    }
    for v in ["abc", "2.5", "", "9223372036854775808"] {
        assert_eq!(
            c.cmd(&["HELLO", v]),
            err("ERR Protocol version is not an integer or out of range"),
            "{v:?}"
        );
    }
    let cases: &[(&[&str], &str)] = &[
        (
            &["HELLO", "3", "FOO"],
            "ERR Syntax error in HELLO option 'FOO'",
        ),
        (
            &["HELLO", "3", "AUTH"],
            "ERR Syntax error in HELLO option 'AUTH'",
        ),
        (
            &["HELLO", "3", "AUTH", "default"],
            "ERR Syntax error in HELLO option 'AUTH'",
        ),
        (
            &["HELLO", "2", "AUTH", "default", "a", "b"],
            "ERR Syntax error in HELLO option 'b'",
        ),
        (
            &["HELLO", "3", "SETNAME"],
            "ERR Syntax error in HELLO option 'SETNAME'",
        ),
        (
            &["HELLO", "3", "SETNAME", "a b"],
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ),
        (
            &["HELLO", "3", "SETNAME", "a b", "AUTH", "nouser", "x"],
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ),
        (
            &["HELLO", "3", "AUTH", "nouser", "pass"],
            "WRONGPASS invalid username-password pair or user is disabled.",
        ),
        (
            &["HELLO", "4", "AUTH", "default", "x"],
            "NOPROTO unsupported protocol version",
        ),
        (
            &["HELLO", "abc", "FOO"],
            "ERR Protocol version is not an integer or out of range",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(c.cmd(args), err(want), "{args:?}");
    }
    // Every failed HELLO left protocol and name alone.
    assert_eq!(c.cmd(&["GET", "nosuch"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("z"));
}

#[test]
fn resp3_client_sees_resp3_types() {
    let s = cairn();
    let mut r = redis_client_resp3(s.port);
    let hello: Value = redis::cmd("HELLO").query(&mut r).unwrap();
    let Value::Map(pairs) = hello else {
        panic!("HELLO in RESP3 is a map: {hello:?}")
    };
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(key, _)| *key == Value::BulkString(k.as_bytes().to_vec()))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {k}"))
    };
    assert_eq!(get("proto"), Value::Int(3));
    assert_eq!(get("server"), Value::BulkString(b"redis".to_vec()));
    assert_eq!(get("modules"), Value::Array(vec![]));
    let info: Value = redis::cmd("CLIENT").arg("INFO").query(&mut r).unwrap();
    match info {
        Value::VerbatimString {
            format: VerbatimFormat::Text,
            text,
        } => {
            assert!(
                text.starts_with("id=") && text.ends_with(" resp=3\n"),
                "{text}"
            )
        }
        other => panic!("CLIENT INFO in RESP3 is verbatim text: {other:?}"),
    }
    let list: Value = redis::cmd("CLIENT").arg("LIST").query(&mut r).unwrap();
    assert!(matches!(list, Value::VerbatimString { .. }), "{list:?}");
    let name: Value = redis::cmd("CLIENT").arg("GETNAME").query(&mut r).unwrap();
    assert_eq!(name, Value::Nil);
    let pong: Value = redis::cmd("PING").query(&mut r).unwrap();
    assert_eq!(pong, Value::SimpleString("PONG".into()));

    let mut c = s.conn();
    assert_eq!(c.cmd(&["HELLO", "3"]).first(), Some(&b'%'));
    let info = c.cmd(&["CLIENT", "INFO"]);
    assert!(info.starts_with(b"="), "{}", text(&info));
    assert!(text(&info).contains("\r\ntxt:id="));
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), b"_\r\n");
    assert_eq!(
        c.cmd(&["CLIENT", "LIST", "ID", "999999"]),
        b"=4\r\ntxt:\r\n"
    );
}

// ------------------------------------------------------------ AUTH

const NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";

#[test]
fn auth_without_requirepass() {
    let s = cairn();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["AUTH", "foo"]), err(NO_PASSWORD));
    assert_eq!(c.cmd(&["AUTH", ""]), err(NO_PASSWORD));
    assert_eq!(c.cmd(&["AUTH", "default", "foo"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["AUTH", "default", ""]), b"+OK\r\n");
    assert_eq!(c.cmd(&["AUTH", "nouser", "pass"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "Default", "pass"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "a", "b", "c"]), err("ERR syntax error"));
    assert_eq!(
        c.cmd(&["AUTH"]),
        err("ERR wrong number of arguments for 'auth' command")
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn auth_with_requirepass() {
    let s = start_cairn(&["--requirepass", "secret"]);
    let mut c = s.conn();
    let noauth = err("NOAUTH Authentication required.");
    assert_eq!(c.cmd(&["PING"]), noauth);
    assert_eq!(c.cmd(&["GET", "k"]), noauth);
    assert_eq!(c.cmd(&["SELECT", "1"]), noauth);
    assert_eq!(c.cmd(&["CLIENT", "ID"]), noauth);
    assert_eq!(c.cmd(&["HELLO"]), err(HELLO_NOAUTH));
    assert_eq!(c.cmd(&["HELLO", "3"]), err(HELLO_NOAUTH));
    assert_eq!(
        c.cmd(&["HELLO", "3", "AUTH", "default", "wrong"]),
        err(WRONGPASS)
    );
    assert_eq!(c.cmd(&["AUTH", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "default", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "nouser", "secret"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "secre"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "secret2"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["AUTH", "a", "b", "c"]), err("ERR syntax error"));
    // Still RESP2 and unauthenticated after all that.
    assert_eq!(c.cmd(&["PING"]), noauth);
    assert_eq!(c.cmd(&["AUTH", "secret"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&["AUTH", "default", "secret"]), b"+OK\r\n");
    // A failed AUTH does not log an authenticated client out.
    assert_eq!(c.cmd(&["AUTH", "wrong"]), err(WRONGPASS));
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    // RESET logs out when the default user has a password.
    assert_eq!(c.cmd(&["RESET"]), b"+RESET\r\n");
    assert_eq!(c.cmd(&["PING"]), noauth);

    // HELLO AUTH authenticates and switches protocol in one step.
    let mut h = s.conn();
    let reply = h.cmd(&[
        "HELLO", "3", "AUTH", "default", "secret", "SETNAME", "named",
    ]);
    assert!(reply.starts_with(b"%7\r\n"), "{}", text(&reply));
    assert_eq!(h.cmd(&["CLIENT", "GETNAME"]), bulk("named"));
    assert_eq!(h.cmd(&["GET", "nosuch"]), b"_\r\n");

    // The redis crate authenticates with the password from the URL...
    let client = redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", s.port)).unwrap();
    let mut r = client
        .get_connection_with_timeout(support::IO_TIMEOUT)
        .unwrap();
    redis::cmd("SET").arg("k").arg("v").exec(&mut r).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut r).unwrap();
    assert_eq!(v, "v");
    // ...over RESP3 too (HELLO 3 AUTH).
    let client = redis::Client::open(format!(
        "redis://:secret@127.0.0.1:{}/?protocol=resp3",
        s.port
    ))
    .unwrap();
    let mut r3 = client
        .get_connection_with_timeout(support::IO_TIMEOUT)
        .unwrap();
    let v: Value = redis::cmd("GET").arg("nosuch").query(&mut r3).unwrap();
    assert_eq!(v, Value::Nil);
    // A wrong password is refused at connect time.
    let client = redis::Client::open(format!("redis://:nope@127.0.0.1:{}/", s.port)).unwrap();
    assert!(client
        .get_connection_with_timeout(support::IO_TIMEOUT)
        .is_err());
    // Without a password the crate connects, and commands are refused.
    let mut anon = redis_client(s.port);
    let e = redis::cmd("GET")
        .arg("k")
        .query::<Value>(&mut anon)
        .unwrap_err();
    assert_eq!(e.code(), Some("NOAUTH"), "{e}");
}

// ------------------------------------------------------------ QUIT / RESET

#[test]
fn quit_replies_then_closes() {
    let s = cairn();
    for req in [
        &b"*1\r\n$4\r\nQUIT\r\n"[..],
        b"*2\r\n$4\r\nquit\r\n$5\r\nextra\r\n",
        b"QUIT\r\n",
    ] {
        let mut c = s.conn();
        c.send_raw(req);
        assert_eq!(c.read_raw_reply(), b"+OK\r\n");
        assert!(c.is_closed_within(Duration::from_secs(2)));
    }
    // Requests pipelined after QUIT are not run.
    let mut c = s.conn();
    c.send_raw(b"QUIT\r\nSET after-quit 1\r\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert!(c.is_closed_within(Duration::from_secs(2)));
    let mut d = s.conn();
    assert_eq!(d.cmd(&["GET", "after-quit"]), b"$-1\r\n");
    // The redis crate's connection sees the close.
    let mut r = redis_client(s.port);
    let ok: String = redis::cmd("QUIT").query(&mut r).unwrap();
    assert_eq!(ok, "OK");
}

#[test]
fn reset_restores_connection_defaults() {
    let s = cairn();
    let mut c = s.conn();
    let id = client_id(&mut c);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["SET", "indb3", "v"]);
    c.cmd(&["CLIENT", "SETNAME", "myname"]);
    c.cmd(&["CLIENT", "NO-EVICT", "on"]);
    assert_eq!(c.cmd(&["HELLO", "3"]), hello_reply(3, id));
    c.send(&[b"CLIENT", b"REPLY", b"OFF"]);
    c.send(&[b"PING"]);
    assert_eq!(c.cmd(&["RESET"]), b"+RESET\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["GET", "indb3"]), b"$-1\r\n");
    let info = payload(&c.cmd(&["CLIENT", "INFO"]));
    assert_eq!(field(&info, "db"), "0");
    assert_eq!(field(&info, "resp"), "2");
    assert_eq!(field(&info, "name"), "");
    // NO-EVICT survives RESET, as in Redis.
    assert_eq!(field(&info, "flags"), "e");
    assert_eq!(field(&info, "id"), id.to_string());
    assert_eq!(c.cmd(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "indb3"]), bulk("v"));
    assert_eq!(
        c.cmd(&["RESET", "x"]),
        err("ERR wrong number of arguments for 'reset' command")
    );
    assert_eq!(c.cmd(&["reset"]), b"+RESET\r\n");
}

// ------------------------------------------------------------ CLIENT basics

#[test]
fn client_id_and_names() {
    let s = cairn();
    let mut c = s.conn();
    let a = client_id(&mut c);
    let mut d = s.conn();
    let b = client_id(&mut d);
    assert!(b > a, "ids grow: {a} {b}");
    assert_eq!(
        c.cmd(&["CLIENT", "ID", "x"]),
        err("ERR wrong number of arguments for 'client|id' command")
    );
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "myname"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["client", "getname"]), bulk("myname"));
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", "!~{}[]:._-"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("!~{}[]:._-"));
    let bad = err("ERR Client names cannot contain spaces, newlines or special characters.");
    for name in [
        &b"a b"[..],
        b"a\nb",
        b"a\rb",
        b"a\tb",
        b"a\x00b",
        b"caf\xc3\xa9",
        b"\x7f",
    ] {
        c.send(&[b"CLIENT", b"SETNAME", name]);
        assert_eq!(c.read_raw_reply(), bad, "{name:?}");
    }
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), bulk("!~{}[]:._-"));
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", ""]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME"]),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "SETNAME", "a", "b"]),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "FOO"]),
        err("ERR unknown subcommand 'FOO'. Try CLIENT HELP.")
    );
    assert_eq!(
        c.cmd(&["CLIENT"]),
        err("ERR wrong number of arguments for 'client' command")
    );

    let mut r = redis_client(s.port);
    redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("via-crate")
        .exec(&mut r)
        .unwrap();
    let name: Option<String> = redis::cmd("CLIENT").arg("GETNAME").query(&mut r).unwrap();
    assert_eq!(name.as_deref(), Some("via-crate"));
    let list = payload(&c.cmd(&["CLIENT", "LIST"]));
    assert!(
        list.lines().any(|l| field(l, "name") == "via-crate"),
        "{list}"
    );
}

/// Redis 7.0's CLIENT LIST fields, in order.
const FIELDS: &[&str] = &[
    "id",
    "addr",
    "laddr",
    "fd",
    "name",
    "age",
    "idle",
    "flags",
    "db",
    "sub",
    "psub",
    "ssub",
    "multi",
    "qbuf",
    "qbuf-free",
    "argv-mem",
    "multi-mem",
    "rbs",
    "rbp",
    "obl",
    "oll",
    "omem",
    "tot-mem",
    "events",
    "cmd",
    "user",
    "redir",
    "resp",
];

#[test]
fn client_list_and_info_format() {
    let s = cairn();
    // One round trip before the next connect: ids follow registration.
    let mut c = s.conn();
    let me = client_id(&mut c);
    let mut other = s.conn();
    let oid = client_id(&mut other);
    other.cmd(&["SELECT", "4"]);
    other.cmd(&["CLIENT", "SETNAME", "other"]);
    other.cmd(&["GET", "x"]);

    let info = payload(&c.cmd(&["CLIENT", "INFO"]));
    assert!(
        info.ends_with('\n') && info.lines().count() == 1,
        "{info:?}"
    );
    let line = info.trim_end();
    let keys: Vec<&str> = line
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    assert_eq!(keys, FIELDS, "{line}");
    assert_eq!(field(line, "id"), me.to_string());
    let addr = c.stream().local_addr().unwrap().to_string();
    let laddr = c.stream().peer_addr().unwrap().to_string();
    assert_eq!(field(line, "addr"), addr);
    assert_eq!(field(line, "laddr"), laddr);
    assert!(field(line, "fd").parse::<i32>().unwrap() > 2);
    for (k, v) in [
        ("name", ""),
        ("age", "0"),
        ("idle", "0"),
        ("flags", "N"),
        ("db", "0"),
        ("sub", "0"),
        ("psub", "0"),
        ("ssub", "0"),
        ("multi", "-1"),
        // *2 $6 client $4 info: the request's own bytes.
        ("qbuf", "26"),
        ("argv-mem", "10"),
        ("multi-mem", "0"),
        ("oll", "0"),
        ("events", "r"),
        ("cmd", "client|info"),
        ("user", "default"),
        ("redir", "-1"),
        ("resp", "2"),
    ] {
        assert_eq!(field(line, k), v, "{k} in {line}");
    }
    for k in ["qbuf-free", "rbs", "rbp", "obl", "omem", "tot-mem"] {
        field(line, k)
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{k} in {line}"));
    }

    let list = payload(&c.cmd(&["CLIENT", "LIST"]));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert_eq!(field(lines[0], "id"), me.to_string(), "connection order");
    assert_eq!(field(lines[0], "cmd"), "client|list");
    assert_eq!(field(lines[1], "id"), oid.to_string());
    assert_eq!(field(lines[1], "name"), "other");
    assert_eq!(field(lines[1], "db"), "4");
    assert_eq!(field(lines[1], "cmd"), "get");
    assert_eq!(field(lines[1], "argv-mem"), "0");

    let normal = payload(&c.cmd(&["CLIENT", "LIST", "TYPE", "normal"]));
    let ids: Vec<&str> = normal.lines().map(|l| field(l, "id")).collect();
    assert_eq!(ids, [me.to_string(), oid.to_string()]);
    for t in ["master", "replica", "slave", "pubsub", "PUBSUB"] {
        assert_eq!(c.cmd(&["CLIENT", "LIST", "TYPE", t]), b"$0\r\n\r\n", "{t}");
    }
    let by_id = payload(&c.cmd(&[
        "CLIENT",
        "LIST",
        "ID",
        &oid.to_string(),
        "999999",
        &me.to_string(),
    ]));
    let ids: Vec<&str> = by_id.lines().map(|l| field(l, "id")).collect();
    assert_eq!(
        ids,
        [oid.to_string(), me.to_string()],
        "order of the arguments"
    );
    assert_eq!(c.cmd(&["CLIENT", "LIST", "ID", "999999"]), b"$0\r\n\r\n");
    assert_eq!(c.cmd(&["CLIENT", "LIST", "ID", "-1"]), b"$0\r\n\r\n");
    let cases: &[(&[&str], &str)] = &[
        (
            &["CLIENT", "LIST", "TYPE", "foo"],
            "ERR Unknown client type 'foo'",
        ),
        (&["CLIENT", "LIST", "TYPE"], "ERR syntax error"),
        (&["CLIENT", "LIST", "ID"], "ERR syntax error"),
        (&["CLIENT", "LIST", "ID", "abc"], "ERR Invalid client ID"),
        (
            &["CLIENT", "LIST", "ID", "1", "abc"],
            "ERR Invalid client ID",
        ),
        (&["CLIENT", "LIST", "FOO"], "ERR syntax error"),
        (&["CLIENT", "LIST", "FOO", "bar"], "ERR syntax error"),
        (
            &["CLIENT", "LIST", "TYPE", "normal", "x"],
            "ERR syntax error",
        ),
        (
            &["CLIENT", "INFO", "x"],
            "ERR wrong number of arguments for 'client|info' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(c.cmd(args), err(want), "{args:?}");
    }
}

#[test]
fn client_help_lists_registered_subcommands() {
    let s = cairn();
    let mut r = redis_client(s.port);
    let lines: Vec<String> = redis::cmd("CLIENT").arg("HELP").query(&mut r).unwrap();
    assert_eq!(
        lines[0],
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(lines[lines.len() - 2..], ["HELP", "    Prints this help."]);
    for head in [
        "GETNAME",
        "ID",
        "INFO",
        "KILL <ip:port>",
        "LIST [options ...]",
        "UNPAUSE",
        "PAUSE <timeout> [WRITE|ALL]",
        "REPLY (ON|OFF|SKIP)",
        "SETNAME <name>",
        "NO-EVICT (ON|OFF)",
        "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    ] {
        assert!(
            lines.iter().any(|l| l == head),
            "{head} missing from {lines:?}"
        );
    }
    assert!(
        !lines.iter().any(|l| l.starts_with("TRACKING")),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 39, "{lines:#?}");
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["CLIENT", "HELP", "x"]),
        err("ERR wrong number of arguments for 'client|help' command")
    );
}

#[test]
fn client_no_evict() {
    let s = cairn();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "on"]), b"+OK\r\n");
    assert_eq!(field(&payload(&c.cmd(&["CLIENT", "INFO"])), "flags"), "e");
    assert_eq!(c.cmd(&["CLIENT", "NO-EVICT", "OFF"]), b"+OK\r\n");
    assert_eq!(field(&payload(&c.cmd(&["CLIENT", "INFO"])), "flags"), "N");
    assert_eq!(
        c.cmd(&["CLIENT", "NO-EVICT", "maybe"]),
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "NO-EVICT"]),
        err("ERR wrong number of arguments for 'client|no-evict' command")
    );
}

// ------------------------------------------------------------ CLIENT KILL

#[test]
fn client_kill_by_id_closes_the_other_connection() {
    let s = cairn();
    let mut victim = s.conn();
    victim.cmd(&["CLIENT", "SETNAME", "victim"]);
    let vid = client_id(&mut victim).to_string();
    let mut killer = s.conn();
    assert_eq!(killer.cmd(&["CLIENT", "KILL", "ID", &vid]), b":1\r\n");
    // Gone at once, as with Redis's synchronous freeClient.
    assert_eq!(killer.cmd(&["CLIENT", "KILL", "ID", &vid]), b":0\r\n");
    assert!(!text(&killer.cmd(&["CLIENT", "LIST"])).contains("name=victim"));
    assert!(victim.is_closed_within(Duration::from_secs(2)));

    // A redis crate connection sees the kill as a dropped connection.
    let mut r = redis_client(s.port);
    let rid: i64 = redis::cmd("CLIENT").arg("ID").query(&mut r).unwrap();
    assert_eq!(
        killer.cmd(&["CLIENT", "KILL", "ID", &rid.to_string()]),
        b":1\r\n"
    );
    let e = redis::cmd("PING").query::<String>(&mut r).unwrap_err();
    assert!(
        e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error(),
        "{e}"
    );
}

#[test]
fn client_kill_filters_and_forms() {
    let s = cairn();
    let mut c = s.conn();
    let me = client_id(&mut c).to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["CLIENT", "KILL", "1.2.3.4:5"], "-ERR No such client"),
        (&["CLIENT", "KILL", "nosuchaddr"], "-ERR No such client"),
        (&["CLIENT", "KILL", "ID"], "-ERR No such client"),
        (&["CLIENT", "KILL", "ID", "99999"], ":0"),
        (
            &["CLIENT", "KILL", "ID", "abc"],
            "-ERR client-id should be greater than 0",
        ),
        (
            &["CLIENT", "KILL", "ID", "0"],
            "-ERR client-id should be greater than 0",
        ),
        (
            &["CLIENT", "KILL", "ID", "-5"],
            "-ERR client-id should be greater than 0",
        ),
        (&["CLIENT", "KILL", "SKIPME", "yes", "ID", "99999"], ":0"),
        (&["CLIENT", "KILL", "ADDR", "1.2.3.4:5"], ":0"),
        (&["CLIENT", "KILL", "LADDR", "1.2.3.4:5"], ":0"),
        (&["CLIENT", "KILL", "TYPE", "master"], ":0"),
        (&["CLIENT", "KILL", "TYPE", "pubsub"], ":0"),
        (&["CLIENT", "KILL", "TYPE", "replica"], ":0"),
        (&["CLIENT", "KILL", "TYPE", "slave"], ":0"),
        (
            &["CLIENT", "KILL", "USER", "nosuch"],
            "-ERR No such user 'nosuch'",
        ),
        (
            &["CLIENT", "KILL", "TYPE", "foo"],
            "-ERR Unknown client type 'foo'",
        ),
        (
            &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "maybe"],
            "-ERR syntax error",
        ),
        (&["CLIENT", "KILL", "FOO", "bar"], "-ERR syntax error"),
        (&["CLIENT", "KILL", "ID", "1", "TYPE"], "-ERR syntax error"),
        (
            &["CLIENT", "KILL", "TYPE", "normal", "ID", "abc"],
            "-ERR client-id should be greater than 0",
        ),
        // MAXAGE arrived in Redis 7.4; 7.0 refuses it.
        (&["CLIENT", "KILL", "MAXAGE", "10"], "-ERR syntax error"),
        (
            &["CLIENT", "KILL"],
            "-ERR wrong number of arguments for 'client|kill' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(text(&c.cmd(args)), format!("{want}\r\n"), "{args:?}");
    }
    // SKIPME defaults to yes: the caller survives filters that match it.
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &me]), b":0\r\n");
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "ID", &me, "USER", "default"]),
        b":0\r\n"
    );
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "ID", &me, "TYPE", "pubsub", "SKIPME", "no"]),
        b":0\r\n"
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");

    // By address and local address (new form), from another connection.
    let mut v = s.conn();
    let vaddr = v.stream().local_addr().unwrap().to_string();
    let vladdr = v.stream().peer_addr().unwrap().to_string();
    let vid = client_id(&mut v).to_string();
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", "ADDR", &vaddr, "LADDR", "1.2.3.4:5"]),
        b":0\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "CLIENT", "KILL", "addr", &vaddr, "laddr", &vladdr, "id", &vid, "user", "default",
            "type", "normal"
        ]),
        b":1\r\n"
    );
    assert!(v.is_closed_within(Duration::from_secs(2)));

    // Old form by address. (The round trip makes sure the server has
    // registered the new connection before it is looked for.)
    let mut v = s.conn();
    v.cmd(&["PING"]);
    let vaddr = v.stream().local_addr().unwrap().to_string();
    assert_eq!(c.cmd(&["CLIENT", "KILL", &vaddr]), b"+OK\r\n");
    assert!(v.is_closed_within(Duration::from_secs(2)));
    assert_eq!(
        c.cmd(&["CLIENT", "KILL", &vaddr]),
        err("ERR No such client")
    );

    // TYPE normal kills every other connection.
    let mut others: Vec<RawConn> = (0..3).map(|_| s.conn()).collect();
    for o in &mut others {
        o.cmd(&["PING"]);
    }
    assert_eq!(c.cmd(&["CLIENT", "KILL", "TYPE", "normal"]), b":3\r\n");
    for o in &mut others {
        assert!(o.is_closed_within(Duration::from_secs(2)));
    }
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn client_kill_self_replies_then_closes() {
    let s = cairn();
    // New form with SKIPME no: the count, then the close.
    let mut c = s.conn();
    let me = client_id(&mut c).to_string();
    c.send_raw(format!("CLIENT KILL ID {me} SKIPME no\r\nPING\r\n").as_bytes());
    assert_eq!(c.read_raw_reply(), b":1\r\n");
    assert!(c.is_closed_within(Duration::from_secs(2)));

    // Old form: your own address, +OK, then the close.
    let mut c = s.conn();
    let addr = c.stream().local_addr().unwrap().to_string();
    assert_eq!(c.cmd(&["CLIENT", "KILL", &addr]), b"+OK\r\n");
    assert!(c.is_closed_within(Duration::from_secs(2)));
}

// ------------------------------------------------------------ CLIENT PAUSE

#[test]
fn client_pause_write_holds_writes_not_reads() {
    let s = cairn();
    let mut admin = s.conn();
    let mut w = s.conn();
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]),
        b"+OK\r\n"
    );
    w.send(&[b"SET", b"paused", b"v"]);
    assert!(
        silent_for(&mut w, Duration::from_millis(300)),
        "SET ran during the pause"
    );
    // Reads go on, on this connection and others.
    assert_eq!(admin.cmd(&["GET", "paused"]), b"$-1\r\n");
    let mut r = redis_client(s.port);
    let v: Option<String> = redis::cmd("GET").arg("paused").query(&mut r).unwrap();
    assert_eq!(v, None);
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), b"+OK\r\n");
    let started = Instant::now();
    assert_eq!(w.read_raw_reply(), b"+OK\r\n");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "UNPAUSE released the SET late"
    );
    assert_eq!(admin.cmd(&["GET", "paused"]), bulk("v"));
}

#[test]
fn client_pause_expires_and_all_holds_reads() {
    let s = cairn();
    let mut admin = s.conn();
    let mut w = s.conn();
    // A pause ends by itself.
    let started = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "300", "WRITE"]), b"+OK\r\n");
    assert_eq!(w.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );

    // ALL (the default) holds reads too, and, as in Redis 7.0, even CLIENT
    // UNPAUSE from another client: only the timeout ends it.
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "500"]), b"+OK\r\n");
    w.send(&[b"GET", b"k"]);
    let mut third = s.conn();
    third.send(&[b"CLIENT", b"UNPAUSE"]);
    assert!(
        silent_for(&mut w, Duration::from_millis(250)),
        "GET ran during PAUSE ALL"
    );
    assert_eq!(w.read_raw_reply(), bulk("v"));
    assert_eq!(third.read_raw_reply(), b"+OK\r\n");

    // A later ALL pause widens a WRITE pause in force and keeps the later
    // deadline.
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "600", "WRITE"]), b"+OK\r\n");
    assert_eq!(third.cmd(&["CLIENT", "PAUSE", "10", "ALL"]), b"+OK\r\n");
    thread::sleep(Duration::from_millis(50));
    w.send(&[b"GET", b"k"]);
    assert!(
        silent_for(&mut w, Duration::from_millis(250)),
        "GET ran: not widened to ALL"
    );
    assert_eq!(w.read_raw_reply(), bulk("v"));

    // 0 and an overflowing timeout pause nothing (Redis 7.0 wraps).
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "0"]), b"+OK\r\n");
    assert_eq!(w.cmd(&["SET", "k", "v2"]), b"+OK\r\n");
    assert_eq!(
        admin.cmd(&["CLIENT", "PAUSE", "9223372036854775807", "WRITE"]),
        b"+OK\r\n"
    );
    assert_eq!(w.cmd(&["SET", "k", "v3"]), b"+OK\r\n");
}

#[test]
fn client_pause_errors() {
    let s = cairn();
    let mut c = s.conn();
    let cases: &[(&[&str], &str)] = &[
        (
            &["CLIENT", "PAUSE"],
            "ERR wrong number of arguments for 'client|pause' command",
        ),
        (
            &["CLIENT", "PAUSE", "abc"],
            "ERR timeout is not an integer or out of range",
        ),
        (
            &["CLIENT", "PAUSE", "1.5"],
            "ERR timeout is not an integer or out of range",
        ),
        (
            &["CLIENT", "PAUSE", "9223372036854775808"],
            "ERR timeout is not an integer or out of range",
        ),
        (&["CLIENT", "PAUSE", "-1"], "ERR timeout is negative"),
        (
            &["CLIENT", "PAUSE", "10", "FOO"],
            "ERR CLIENT PAUSE mode must be WRITE or ALL",
        ),
        (
            &["CLIENT", "PAUSE", "abc", "FOO"],
            "ERR CLIENT PAUSE mode must be WRITE or ALL",
        ),
        (
            &["CLIENT", "pause", "10", "ALL", "x"],
            "ERR unknown subcommand or wrong number of arguments for 'pause'. Try CLIENT HELP.",
        ),
        (
            &["CLIENT", "UNPAUSE", "x"],
            "ERR wrong number of arguments for 'client|unpause' command",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(c.cmd(args), err(want), "{args:?}");
    }
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
}

// ------------------------------------------------------------ CLIENT REPLY

#[test]
fn client_reply_off_skip_on() {
    let s = cairn();
    let mut c = s.conn();
    assert_eq!(c.cmd(&["CLIENT", "REPLY", "ON"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CLIENT", "REPLY", "FOO"]), err("ERR syntax error"));
    assert_eq!(
        c.cmd(&["CLIENT", "REPLY"]),
        err("ERR wrong number of arguments for 'client|reply' command")
    );

    // OFF: nothing comes back, errors included, until ON (which replies).
    c.send_raw(b"CLIENT REPLY OFF\r\nSET r 1\r\nINCR r\r\nGET nosuch\r\nGET\r\nCLIENT REPLY ON\r\nGET r\r\n");
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), bulk("2"));

    // SKIP: only the next command's reply is dropped.
    c.send_raw(b"CLIENT REPLY SKIP\r\nINCR r\r\nGET r\r\n");
    assert_eq!(c.read_raw_reply(), bulk("3"));
    // SKIP twice: the second SKIP's own (empty) reply is the one skipped.
    c.send_raw(b"CLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nINCR r\r\nGET r\r\n");
    assert_eq!(c.read_raw_reply(), bulk("4"));
    // SKIP while OFF changes nothing: still OFF.
    c.send_raw(
        b"CLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nINCR r\r\nPING\r\nCLIENT REPLY ON\r\nGET r\r\n",
    );
    assert_eq!(c.read_raw_reply(), b"+OK\r\n");
    assert_eq!(c.read_raw_reply(), bulk("5"));
    // OFF then nothing more: silence.
    c.send_raw(b"CLIENT REPLY OFF\r\nPING\r\n");
    assert!(silent_for(&mut c, Duration::from_millis(200)));
    assert_eq!(c.cmd(&["client", "reply", "on"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "r"]), bulk("5"));

    // The mode is per connection.
    let mut other = s.conn();
    c.send_raw(b"CLIENT REPLY OFF\r\n");
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
}

// ------------------------------------------------------------ concurrency

#[test]
fn fifty_clients_incr_and_set_get() {
    const CLIENTS: usize = 50;
    const ROUNDS: usize = 200;
    let s = cairn();
    let port = s.port;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            thread::spawn(move || {
                let mut r = redis_client(port);
                for i in 0..ROUNDS {
                    let _: i64 = redis::cmd("INCR")
                        .arg("shared-counter")
                        .query(&mut r)
                        .unwrap();
                    let key = format!("own:{t}");
                    let val = format!("{t}:{i}");
                    redis::cmd("SET").arg(&key).arg(&val).exec(&mut r).unwrap();
                    let got: String = redis::cmd("GET").arg(&key).query(&mut r).unwrap();
                    assert_eq!(got, val, "client {t} round {i}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut r = redis_client(port);
    let total: i64 = redis::cmd("GET")
        .arg("shared-counter")
        .query(&mut r)
        .unwrap();
    assert_eq!(total, (CLIENTS * ROUNDS) as i64);
    for t in 0..CLIENTS {
        let v: String = redis::cmd("GET")
            .arg(format!("own:{t}"))
            .query(&mut r)
            .unwrap();
        assert_eq!(v, format!("{t}:{}", ROUNDS - 1));
    }
}

/// Runs `script` with `sh` in a private network namespace whose loopback
/// interface also carries 10.77.0.1, a non-loopback address, so a client
/// can connect from outside 127.0.0.0/8 without touching the host's
/// network. The server it starts is killed by the script's trap.
fn in_private_network(script: &str) -> String {
    let out = std::process::Command::new("timeout")
        .args(["60", "unshare", "-n", "sh", "-c"])
        .arg(format!(
            "ip link set lo up && ip addr add 10.77.0.1/32 dev lo || exit 90\n{script}"
        ))
        .env("CAIRN", env!("CARGO_BIN_EXE_cairn"))
        .output()
        .expect("run unshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "namespace script failed ({}): {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn protected_mode_denies_non_loopback_clients_as_redis() {
    // Redis 7.0: with protected mode on and no password for the default
    // user, a client from a non-loopback address gets -DENIED and is
    // closed; loopback clients are served; a password or turning protected
    // mode off lets the outside in.
    let script = r#"
"$CAIRN" --port 6390 --bind "10.77.0.1 127.0.0.1" --save '' >/dev/null 2>&1 &
pid=$!
trap 'kill $pid' EXIT
for i in $(seq 100); do redis-cli -p 6390 ping >/dev/null 2>&1 && break; sleep 0.1; done
echo "remote1: $(redis-cli -h 10.77.0.1 -p 6390 ping 2>&1)"
echo "local1: $(redis-cli -h 127.0.0.1 -p 6390 ping 2>&1)"
redis-cli -p 6390 config set requirepass sekrit >/dev/null
echo "remote2: $(redis-cli -h 10.77.0.1 -p 6390 ping 2>&1)"
echo "remote3: $(redis-cli -h 10.77.0.1 -p 6390 --no-auth-warning -a sekrit ping 2>&1)"
redis-cli -p 6390 --no-auth-warning -a sekrit config set requirepass '' >/dev/null
redis-cli -p 6390 config set protected-mode no >/dev/null
echo "remote4: $(redis-cli -h 10.77.0.1 -p 6390 ping 2>&1)"
"#;
    let out = in_private_network(script);
    let line = |name: &str| -> String {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .to_string()
    };
    let denied = line("remote1");
    assert!(
        denied.starts_with("DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user."),
        "{denied}"
    );
    assert!(denied.contains("4) Setup a an authentication password for the default user."));
    assert_eq!(line("local1"), "PONG");
    assert_eq!(line("remote2"), "NOAUTH Authentication required.");
    assert_eq!(line("remote3"), "PONG");
    assert_eq!(line("remote4"), "PONG");
}
