//! ACL rights on the memcached port (issue 23): each memcached command is
//! allowed when the user may run the Redis command it amounts to on the
//! same keys (docs/design.md, "memcached and ACL"), a refusal is
//! `CLIENT_ERROR unauthenticated` and an ACL LOG entry, rule changes apply
//! from the next command, and a deleted user's memcached connections close.
//! Driven through raw sockets (exact bytes), the `memcache` crate and, when
//! the clients venv has it, pymemcache.
mod mc_support;
mod support;

use mc_support::Conn;
use redis::Value;
use support::{int, ok, q, redis_client};

const NOPERM: &str = "CLIENT_ERROR unauthenticated\r\n";

/// Cairn with a password and a memcached port; `.1` is the memcached port,
/// `.2` an admin connection (the default user).
fn cairn() -> (support::Server, u16, redis::Connection) {
    let (s, mc) = mc_support::cairn(&["--requirepass", "rootpw"]);
    let mut admin = redis_client(s.port);
    ok(&mut admin, &["AUTH", "rootpw"]);
    (s, mc, admin)
}

/// A memcached connection logged in as `user` with the `-Y` token line.
fn login(mc: u16, user: &str, pass: &str) -> Conn {
    let mut c = Conn::connect(mc);
    let token = format!("{user} {pass}");
    c.send(format!("set auth 0 0 {}\r\n{token}\r\n", token.len()).as_bytes());
    assert_eq!(c.read_exact(8), b"STORED\r\n");
    c
}

/// ACL LOG entries as (reason, context, object, username, client-info).
fn acl_log(admin: &mut redis::Connection) -> Vec<[String; 5]> {
    let log: Vec<Vec<Value>> = q(admin, &["ACL", "LOG"]);
    let field = |e: &Vec<Value>, name: &str| -> String {
        let i = e
            .iter()
            .position(|v| matches!(v, Value::BulkString(b) if b == name.as_bytes()))
            .unwrap();
        match &e[i + 1] {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            v => format!("{v:?}"),
        }
    };
    log.iter()
        .map(|e| ["reason", "context", "object", "username", "client-info"].map(|f| field(e, f)))
        .collect()
}

/// The user the raw-socket tests log in as. `Conn::step` ends each step
/// with `mg __cairn_sync__`, so the user may read that one key.
const APP_RULES: &[&str] = &[
    "on",
    ">apppw",
    "~app:*",
    "%R~ro:*",
    "%W~wo:*",
    "%R~__cairn_sync__",
    "+@read",
    "+@write",
    "-flushall",
];

fn setuser(admin: &mut redis::Connection, name: &str, rules: &[&str]) {
    let mut args = vec!["ACL", "SETUSER", name];
    args.extend_from_slice(rules);
    ok(admin, &args);
}

#[test]
fn text_commands_follow_key_patterns_and_command_rights() {
    let (_s, mc, mut admin) = cairn();
    setuser(&mut admin, "app", APP_RULES);
    for (k, v) in [("app:1", "a"), ("ro:1", "r"), ("wo:1", "w"), ("other", "o")] {
        ok(&mut admin, &["SET", k, v]);
    }
    let mut c = login(mc, "app", "apppw");
    // Reads: GET's rights on each key.
    assert_eq!(c.cmd("get app:1"), "VALUE app:1 0 1\r\na\r\nEND\r\n");
    assert!(c.cmd("gets ro:1").starts_with("VALUE ro:1 0 1 "));
    assert_eq!(c.cmd("get wo:1"), NOPERM);
    assert_eq!(c.cmd("get other"), NOPERM);
    // A multi-get with one forbidden key reads none of them.
    assert_eq!(c.cmd("get app:1 other"), NOPERM);
    // gat changes the TTL: GETEX, which needs read and write.
    assert_eq!(c.cmd("gat 100 ro:1"), NOPERM);
    assert_eq!(c.cmd("gat 100 app:1"), "VALUE app:1 0 1\r\na\r\nEND\r\n");
    // Writes: SET, APPEND, INCRBY, EXPIRE, DEL on the key.
    assert_eq!(c.cmd("set app:2 0 0 1\nx"), "STORED\r\n");
    assert_eq!(c.cmd("set wo:2 0 0 1\nx"), "STORED\r\n");
    assert_eq!(c.cmd("set ro:1 0 0 1\nx"), NOPERM);
    assert_eq!(c.cmd("add other 0 0 1\nx"), NOPERM);
    assert_eq!(c.cmd("append ro:1 0 0 1\nx"), NOPERM);
    assert_eq!(c.cmd("prepend wo:1 0 0 1\nx"), "STORED\r\n");
    assert_eq!(c.cmd("cas ro:1 0 0 1 1\nx"), NOPERM);
    assert_eq!(c.cmd("touch ro:1 10"), NOPERM);
    assert_eq!(c.cmd("touch wo:1 10"), "TOUCHED\r\n");
    // incr returns the value: INCRBY needs read and write.
    assert_eq!(c.cmd("set app:n 0 0 1\n5"), "STORED\r\n");
    assert_eq!(c.cmd("incr app:n 2"), "7\r\n");
    assert_eq!(c.cmd("incr wo:1 2"), NOPERM);
    assert_eq!(c.cmd("decr ro:1 2"), NOPERM);
    assert_eq!(c.cmd("delete ro:1"), NOPERM);
    assert_eq!(c.cmd("delete wo:2"), "DELETED\r\n");
    // noreply silences the refusal, as it silences memcached's errors;
    // nothing was stored.
    assert_eq!(c.cmd("set ro:1 0 0 1 noreply\nx"), "");
    assert_eq!(q::<String>(&mut admin, &["GET", "ro:1"]), "r");
    assert_eq!(q::<String>(&mut admin, &["GET", "wo:1"]), "xw");
    // Commands without keys: flush_all is FLUSHALL, stats is INFO;
    // version asks for nothing.
    assert_eq!(c.cmd("flush_all"), NOPERM);
    assert_eq!(c.cmd("stats"), NOPERM);
    assert!(c.cmd("version").starts_with("VERSION "));
    assert_eq!(int(&mut admin, &["EXISTS", "app:1"]), 1);

    // Each refusal is in the ACL log as Redis logs its own.
    let log = acl_log(&mut admin);
    let [reason, context, object, user, info] = &log[0];
    assert_eq!(
        [reason, context, object, user].map(String::as_str),
        ["command", "toplevel", "info", "app"]
    );
    assert!(info.contains("cmd=stats"), "{info}");
    let flush = &log[1];
    assert_eq!(
        [&flush[0], &flush[2]].map(String::as_str),
        ["command", "flushall"]
    );
    let key = log
        .iter()
        .find(|e| e[2] == "ro:1" && e[4].contains("cmd=set"))
        .expect("a key denial for set ro:1");
    assert_eq!([&key[0], &key[1]].map(String::as_str), ["key", "toplevel"]);
    assert!(log
        .iter()
        .any(|e| e[2] == "other" && e[4].contains("cmd=add")));

    // A rule change applies from the connection's next command.
    setuser(&mut admin, "app", &["+flushall", "+info"]);
    assert!(c.cmd("stats").starts_with("STAT pid "));
    assert_eq!(c.cmd("flush_all"), "OK\r\n");
    assert_eq!(int(&mut admin, &["DBSIZE"]), 0);
}

#[test]
fn meta_commands_follow_key_patterns() {
    let (_s, mc, mut admin) = cairn();
    setuser(&mut admin, "app", APP_RULES);
    ok(&mut admin, &["SET", "ro:1", "r"]);
    let mut c = login(mc, "app", "apppw");
    assert_eq!(c.cmd("mg ro:1 v"), "VA 1\r\nr\r\n");
    assert_eq!(c.cmd("mg other v"), NOPERM);
    // T changes the TTL, N creates on a miss: writes.
    assert_eq!(c.cmd("mg ro:1 T30 v"), NOPERM);
    assert!(c.cmd("mg app:v N30 v").starts_with("VA 0"));
    assert_eq!(c.cmd("ms ro:1 1\nx"), NOPERM);
    assert_eq!(c.cmd("ms wo:1 1\nx"), "HD\r\n");
    assert_eq!(c.cmd("ms ro:1 1 MA\nx"), NOPERM);
    assert_eq!(c.cmd("md ro:1"), NOPERM);
    assert_eq!(c.cmd("md wo:1"), "HD\r\n");
    assert_eq!(c.cmd("ma ro:1"), NOPERM);
    assert_eq!(c.cmd("me other"), NOPERM);
    // mn asks for nothing; meta refusals are never quiet.
    assert_eq!(c.cmd("mn"), "MN\r\n");
    assert_eq!(c.cmd("ms ro:1 1 q\nx"), NOPERM);
    assert_eq!(q::<String>(&mut admin, &["GET", "ro:1"]), "r");
}

#[test]
fn deleting_a_user_closes_its_memcached_connections() {
    let (_s, mc, mut admin) = cairn();
    setuser(&mut admin, "gone", &["on", ">p", "~*", "+@all"]);
    setuser(&mut admin, "stays", &["on", ">p", "~*", "+@all"]);
    let mut gone = login(mc, "gone", "p");
    let mut stays = login(mc, "stays", "p");
    assert_eq!(gone.cmd("set k 0 0 1\nv"), "STORED\r\n");
    assert_eq!(int(&mut admin, &["ACL", "DELUSER", "gone"]), 1);
    assert!(gone.wait_closed(), "the deleted user's connection is open");
    // A new password does not close a logged-in connection (Redis 7.0
    // keeps RESP clients of a user whose password changes, and so does
    // the RESP port); new logins need the new password.
    setuser(&mut admin, "stays", &["resetpass", ">new"]);
    assert_eq!(stays.cmd("get k"), "VALUE k 0 1\r\nv\r\nEND\r\n");
    let mut old = Conn::connect(mc);
    old.send(b"set auth 0 0 7\r\nstays p\r\n");
    assert_eq!(
        old.read_exact(37),
        b"CLIENT_ERROR authentication failure\r\n"
    );
    let _new = login(mc, "stays", "new");
}

#[test]
fn a_restricted_default_user_binds_memcached_clients() {
    // No password: memcached clients are the default user, whose rules
    // apply to them as to RESP clients. Through the `memcache` crate.
    let (s, mc) = mc_support::cairn(&[
        "--user",
        "default",
        "on",
        "nopass",
        "~cache:*",
        "+@read",
        "+@write",
        "-@dangerous",
    ]);
    let c = memcache::Client::connect(format!(
        "memcache://127.0.0.1:{mc}?protocol=ascii&timeout=5"
    ))
    .unwrap();
    c.set("cache:a", "1", 0).unwrap();
    assert_eq!(c.get::<String>("cache:a").unwrap().as_deref(), Some("1"));
    assert_eq!(c.increment("cache:a", 2).unwrap(), 3);
    let e = c.set("other", "1", 0).unwrap_err();
    assert!(e.to_string().contains("unauthenticated"), "{e}");
    assert!(c.get::<String>("other").is_err());
    assert!(c.flush().is_err());
    let mut r = redis_client(s.port);
    assert_eq!(q::<String>(&mut r, &["GET", "cache:a"]), "3");
}

#[test]
fn pymemcache_sees_refusals_as_client_errors() {
    let Some(py) = support::clients::python("pymemcache") else {
        return;
    };
    let (_s, mc, mut admin) = cairn();
    setuser(&mut admin, "app", APP_RULES);
    let script = r#"
import sys
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError
c = Client(("127.0.0.1", int(sys.argv[1])), timeout=5)
assert c.set("auth", "app apppw", noreply=False)
assert c.set("app:x", "1", noreply=False)
assert c.get("app:x") == b"1"
try:
    c.set("ro:x", "1", noreply=False)
    sys.exit("set ro:x was allowed")
except MemcacheClientError as e:
    assert "unauthenticated" in str(e), e
try:
    c.get("other")
    sys.exit("get other was allowed")
except MemcacheClientError as e:
    assert "unauthenticated" in str(e), e
print("ok")
"#;
    let out = std::process::Command::new(py)
        .args(["-c", script, &mc.to_string()])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.trim(), "ok");
}
