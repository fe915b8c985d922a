//! ACL users end to end (issue 23): rules enforced on real connections,
//! connections closed when their user goes or loses channels, rules that
//! change between MULTI and EXEC, scripts, the ACL log, users from config
//! lines and an ACL file, and the memcached port logging in as a user.
//! Replies and descriptions are checked against redis-server by the
//! differential corpus (tests/diff/acl.txt).
mod mc_support;
mod support;

use redis::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::{err, int, ok, q, redis_client, start_cairn, start_cairn_conf, RawConn};

fn login(port: u16, user: &str, pass: &str) -> redis::Connection {
    let mut c = redis_client(port);
    ok(&mut c, &["AUTH", user, pass]);
    c
}

/// Waits until no connection of `user` is left in CLIENT LIST.
fn wait_gone(admin: &mut redis::Connection, user: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list: String = q(admin, &["CLIENT", "LIST"]);
        if !list.contains(&format!("user={user} ")) {
            return;
        }
        assert!(Instant::now() < deadline, "{user} still connected: {list}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rules_are_enforced_with_redis_errors() {
    let s = start_cairn(&[]);
    let mut admin = redis_client(s.port);
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">pw",
            "~app:*",
            "%R~ro:*",
            "&news",
            "+@read",
            "+set",
            "+publish",
            "+acl|whoami",
        ],
    );
    let mut c = login(s.port, "app", "pw");
    assert_eq!(q::<String>(&mut c, &["ACL", "WHOAMI"]), "app");
    ok(&mut c, &["SET", "app:1", "v"]);
    assert_eq!(q::<String>(&mut c, &["GET", "app:1"]), "v");
    let _: Value = q(&mut c, &["GET", "ro:1"]);
    assert_eq!(
        err(&mut c, &["SET", "ro:1", "v"]),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(
        err(&mut c, &["DEL", "app:1"]),
        "NOPERM this user has no permissions to run the 'del' command"
    );
    assert_eq!(
        err(&mut c, &["PUBLISH", "other", "m"]),
        "NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    // Rule changes reach the connection at its next command.
    ok(&mut admin, &["ACL", "SETUSER", "app", "+del"]);
    assert_eq!(int(&mut c, &["DEL", "app:1"]), 1);
    ok(&mut admin, &["ACL", "SETUSER", "app", "off"]);
    assert_eq!(
        err(&mut redis_client(s.port), &["AUTH", "app", "pw"]),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
}

#[test]
fn the_acl_log_records_denials_with_their_context() {
    let s = start_cairn(&[]);
    let mut admin = redis_client(s.port);
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "u", "on", ">p", "~k*", "+get", "+multi", "+exec", "+eval",
        ],
    );
    let mut c = login(s.port, "u", "p");
    for _ in 0..3 {
        err(&mut c, &["SET", "k", "v"]);
    }
    err(&mut c, &["GET", "other"]);
    let _: () = q(&mut c, &["MULTI"]);
    err(&mut c, &["SET", "k1", "v"]);
    let _: Value = redis::cmd("EXEC").query(&mut c).unwrap_or(Value::Nil);
    let e = err(&mut c, &["EVAL", "return redis.call('set', 'k', 'v')", "0"]);
    assert!(
        e.contains("The user executing the script can't run this command or subcommand"),
        "{e}"
    );
    let _ = err(&mut redis_client(s.port), &["AUTH", "u", "wrong"]);
    let log: Vec<Vec<Value>> = q(&mut admin, &["ACL", "LOG"]);
    let field = |e: &Vec<Value>, name: &str| -> String {
        let i = e
            .iter()
            .position(|v| matches!(v, Value::BulkString(b) if b == name.as_bytes()))
            .unwrap();
        match &e[i + 1] {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Int(n) => n.to_string(),
            v => format!("{v:?}"),
        }
    };
    let got: Vec<(String, String, String, String, String)> = log
        .iter()
        .map(|e| {
            (
                field(e, "count"),
                field(e, "reason"),
                field(e, "context"),
                field(e, "object"),
                field(e, "username"),
            )
        })
        .collect();
    let want = [
        ("1", "auth", "toplevel", "AUTH", "u"),
        ("1", "command", "lua", "set", "u"),
        ("1", "command", "multi", "set", "u"),
        ("1", "key", "toplevel", "other", "u"),
        ("3", "command", "toplevel", "set", "u"),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(a, b, c, d, e)| {
            (
                a.to_string(),
                b.to_string(),
                c.to_string(),
                d.to_string(),
                e.to_string(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(field(&log[1], "client-info").contains("cmd=eval"));
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    assert!(q::<Vec<Value>>(&mut admin, &["ACL", "LOG"]).is_empty());
}

#[test]
fn rules_changed_before_exec_refuse_the_queued_command() {
    let s = start_cairn(&[]);
    let mut admin = redis_client(s.port);
    ok(
        &mut admin,
        &["ACL", "SETUSER", "u", "on", ">p", "allkeys", "+@all"],
    );
    let mut c = RawConn::connect(s.port);
    assert_eq!(c.cmd(&["AUTH", "u", "p"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), b"+QUEUED\r\n");
    ok(&mut admin, &["ACL", "SETUSER", "u", "-set"]);
    let reply = String::from_utf8(c.cmd(&["EXEC"])).unwrap();
    assert_eq!(
        reply,
        "*2\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n$-1\r\n"
    );
}

#[test]
fn deleting_a_user_closes_its_connections() {
    let s = start_cairn(&[]);
    let mut admin = redis_client(s.port);
    ok(
        &mut admin,
        &["ACL", "SETUSER", "gone", "on", ">p", "+@all", "~*"],
    );
    let mut a = RawConn::connect(s.port);
    assert_eq!(a.cmd(&["AUTH", "gone", "p"]), b"+OK\r\n");
    let mut b = RawConn::connect(s.port);
    assert_eq!(b.cmd(&["AUTH", "gone", "p"]), b"+OK\r\n");
    assert_eq!(int(&mut admin, &["ACL", "DELUSER", "gone", "nosuch"]), 1);
    assert!(a.is_closed_within(Duration::from_secs(5)));
    assert!(b.is_closed_within(Duration::from_secs(5)));
    wait_gone(&mut admin, "gone");
    // CLIENT KILL USER knows users now.
    ok(
        &mut admin,
        &["ACL", "SETUSER", "k", "on", "nopass", "+@all"],
    );
    let mut k = RawConn::connect(s.port);
    assert_eq!(k.cmd(&["AUTH", "k", "x"]), b"+OK\r\n");
    assert_eq!(int(&mut admin, &["CLIENT", "KILL", "USER", "k"]), 1);
    assert!(k.is_closed_within(Duration::from_secs(5)));
    assert!(err(&mut admin, &["CLIENT", "KILL", "USER", "nosuch"]).contains("No such user"));
}

#[test]
fn subscribers_losing_a_channel_are_closed() {
    let s = start_cairn(&[]);
    let mut admin = redis_client(s.port);
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "sub",
            "on",
            ">p",
            "+@all",
            "resetchannels",
            "&news.*",
            "&chat",
        ],
    );
    let mut news = RawConn::connect(s.port);
    assert_eq!(news.cmd(&["AUTH", "sub", "p"]), b"+OK\r\n");
    news.send(&[b"SUBSCRIBE", b"news.1"]);
    news.read_raw_reply();
    let mut chat = RawConn::connect(s.port);
    assert_eq!(chat.cmd(&["AUTH", "sub", "p"]), b"+OK\r\n");
    chat.send(&[b"SUBSCRIBE", b"chat"]);
    chat.read_raw_reply();
    // news.* stays, chat goes: only the chat subscriber is closed.
    ok(
        &mut admin,
        &["ACL", "SETUSER", "sub", "resetchannels", "&news.*"],
    );
    assert!(chat.is_closed_within(Duration::from_secs(5)));
    assert_eq!(int(&mut admin, &["PUBLISH", "news.1", "still"]), 1);
    assert!(String::from_utf8_lossy(&news.read_raw_reply()).contains("still"));
}

#[test]
fn requirepass_is_the_default_users_password() {
    let s = start_cairn(&["--requirepass", "secret"]);
    let mut c = RawConn::connect(s.port);
    assert_eq!(
        c.cmd(&["GET", "k"]),
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "default", "secret"]), b"+OK\r\n");
    let mut admin = login(s.port, "default", "secret");
    let list: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    assert!(list[0].starts_with("user default on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all"), "{list:?}");
    ok(&mut admin, &["CONFIG", "SET", "requirepass", ""]);
    let mut fresh = RawConn::connect(s.port);
    assert_eq!(fresh.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        fresh.cmd(&["AUTH", "x"]),
        b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n".to_vec()
    );
    // HELLO AUTH logs in as any user.
    ok(&mut admin, &["ACL", "SETUSER", "h", "on", ">hp", "+@all"]);
    let mut h = RawConn::connect(s.port);
    let reply = h.cmd(&["HELLO", "3", "AUTH", "h", "hp"]);
    assert!(
        reply.starts_with(b"%7\r\n"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(h.cmd(&["ACL", "WHOAMI"]), b"$1\r\nh\r\n");
}

#[test]
fn users_come_from_config_lines_and_an_acl_file() {
    let dir = std::env::temp_dir().join(format!("cairn-acl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("users.conf");
    std::fs::write(
        &conf,
        "user alice on >a ~a:* +get\nuser default on nopass ~* &* +@all -flushall\n",
    )
    .unwrap();
    let s = start_cairn_conf(&conf, &[]);
    let mut c = redis_client(s.port);
    assert!(err(&mut c, &["FLUSHALL"]).starts_with("NOPERM"));
    let mut a = login(s.port, "alice", "a");
    let _: Value = q(&mut a, &["GET", "a:1"]);
    assert!(err(&mut a, &["GET", "b"]).starts_with("NOPERM"));
    drop(s);

    // An ACL file: SAVE writes it, LOAD reads it back (and refuses a bad
    // one without changing anything).
    let aclfile = dir.join("users.acl");
    std::fs::write(
        &aclfile,
        "user default on nopass ~* &* +@all\nuser bob on >b ~* +@read\n",
    )
    .unwrap();
    let s = start_cairn(&["--aclfile", aclfile.to_str().unwrap()]);
    let mut c = redis_client(s.port);
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["bob", "default"]);
    ok(
        &mut c,
        &["ACL", "SETUSER", "carol", "on", ">c", "+@hash", "~h:*"],
    );
    ok(&mut c, &["ACL", "SAVE"]);
    let saved = std::fs::read_to_string(&aclfile).unwrap();
    assert!(saved.contains("user carol on #"), "{saved}");
    assert_eq!(int(&mut c, &["ACL", "DELUSER", "carol"]), 1);
    ok(&mut c, &["ACL", "LOAD"]);
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["bob", "carol", "default"]);
    std::fs::write(&aclfile, "user x on +nosuch\nnonsense\n").unwrap();
    let e = err(&mut c, &["ACL", "LOAD"]);
    assert!(e.contains("Unknown command or category name in ACL"), "{e}");
    assert!(e.contains("should start with user keyword"), "{e}");
    assert!(
        e.contains("no change to the previously active ACL rules was performed"),
        "{e}"
    );
    let users: Vec<String> = q(&mut c, &["ACL", "USERS"]);
    assert_eq!(users, ["bob", "carol", "default"]);
    drop(s);

    // A bad rule in a user line stops the start, saying which.
    std::fs::write(&conf, "port 0\nuser eve on +nosuch\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cairn"))
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("Error loading ACL rule '+nosuch' for the user named 'eve'"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_rewrite_writes_the_running_users() {
    // Redis's rewriteConfigUserOption: with users from `user` lines (no
    // aclfile), CONFIG REWRITE replaces those lines with every user as
    // ACL LIST describes it, so ACL SETUSER survives a restart.
    let dir = std::env::temp_dir().join(format!("cairn-acl-rw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("rewrite.conf");
    std::fs::write(
        &conf,
        "# users\nuser alice on >a ~a:* +get\nuser gone on nopass +@all\nmaxclients 100\n",
    )
    .unwrap();
    let s = start_cairn_conf(&conf, &[]);
    let mut c = redis_client(s.port);
    ok(&mut c, &["ACL", "SETUSER", "alice", "+set", "%R~r:*"]);
    ok(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">b",
            "~b:*",
            "+@hash",
            "(~s:* +get)",
        ],
    );
    assert_eq!(int(&mut c, &["ACL", "DELUSER", "gone"]), 1);
    let list: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    ok(&mut c, &["CONFIG", "REWRITE"]);
    drop(s);
    let text = std::fs::read_to_string(&conf).unwrap();
    let users: Vec<&str> = text.lines().filter(|l| l.starts_with("user ")).collect();
    assert_eq!(users, list, "{text}");
    // The first user line takes the old first line's place.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# users");
    assert!(lines[1].starts_with("user alice on #"), "{text}");
    assert!(!text.contains("user gone"), "{text}");
    assert!(text.contains("maxclients 100"), "{text}");

    let s = start_cairn_conf(&conf, &[]);
    let mut c = redis_client(s.port);
    let again: Vec<String> = q(&mut c, &["ACL", "LIST"]);
    // A `user default` line starts from `reset`, which sets
    // sanitize-payload: redis-server 7.0 lists it after the restart too.
    let mut want = list.clone();
    want[2] = "user default on nopass sanitize-payload ~* &* +@all".into();
    assert_eq!(again, want);
    let mut b = login(s.port, "bob", "b");
    let _: Value = q(&mut b, &["GET", "s:1"]);
    assert!(err(&mut b, &["GET", "b:1"]).starts_with("NOPERM"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scripts_run_with_the_callers_rights() {
    let s = start_cairn(&[]);
    let mut admin = redis_client(s.port);
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "s", "on", ">p", "~mine:*", "+eval", "+get", "+set",
        ],
    );
    let mut c = login(s.port, "s", "p");
    ok(
        &mut c,
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], 'v')",
            "1",
            "mine:1",
        ],
    );
    // A key passed to EVAL is checked before the script runs...
    assert!(err(&mut c, &["EVAL", "return 1", "1", "other"]).starts_with("NOPERM"));
    // ...one the script makes up is checked at its call.
    let e = err(
        &mut c,
        &[
            "EVAL",
            "return redis.call('set', ARGV[1], 'v')",
            "0",
            "other",
        ],
    );
    assert!(
        e.contains("The user executing the script can't access at least one of the keys mentioned in the command"),
        "{e}"
    );
    let allowed: i64 = q(
        &mut c,
        &[
            "EVAL",
            "return redis.acl_check_cmd('set', 'mine:2', 'v') and 1 or 0",
            "0",
        ],
    );
    assert_eq!(allowed, 1);
    let allowed: i64 = q(
        &mut c,
        &[
            "EVAL",
            "return redis.acl_check_cmd('del', 'mine:2') and 1 or 0",
            "0",
        ],
    );
    assert_eq!(allowed, 0);
}

#[test]
fn the_memcached_port_logs_in_as_an_acl_user() {
    let (s, mc) = mc_support::cairn(&["--requirepass", "rootpw"]);
    let mut admin = login(s.port, "default", "rootpw");
    ok(
        &mut admin,
        &["ACL", "SETUSER", "mc", "on", ">mcpw", "~*", "+@all"],
    );
    let mut c = TcpStream::connect(("127.0.0.1", mc)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let token = "mc mcpw";
    c.write_all(format!("set auth 0 0 {}\r\n{token}\r\n", token.len()).as_bytes())
        .unwrap();
    let mut buf = [0u8; 64];
    let n = c.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"STORED\r\n");
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert!(list.contains("user=mc "), "{list}");
}
