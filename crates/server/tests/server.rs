//! The server and introspection family end to end: COMMAND (COUNT, INFO,
//! DOCS, LIST, GETKEYS, HELP), CONFIG (GET, SET, RESETSTAT, REWRITE, HELP),
//! INFO, TIME, SHUTDOWN, DEBUG (SLEEP, OBJECT, JUMP-CLOCK, HELP), SLOWLOG
//! and MONITOR, driven through the `redis` crate, with `RawConn` where the
//! exact bytes or RESP3 types matter, and `redis-cli` (when installed) as
//! a second real client.
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, FromRedisValue, Value};
use support::{err_line, start_cairn, RawConn, Server};

fn cairn() -> Server {
    start_cairn(&["--enable-debug-command", "yes"])
}

fn server() -> (Server, Connection) {
    let s = cairn();
    let c = support::redis_client(s.port);
    (s, c)
}

fn cmd(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Runs a command and converts its reply.
fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    cmd(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command that must fail; returns the error line as sent.
fn err(con: &mut Connection, args: &[&str]) -> String {
    match cmd(args).query::<Value>(con) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => err_line(&e),
    }
}

fn bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

fn error(msg: &str) -> Vec<u8> {
    format!("-{msg}\r\n").into_bytes()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// INFO's text as `field → value` (section headers and blanks skipped).
fn info(con: &mut Connection, sections: &[&str]) -> HashMap<String, String> {
    let mut args = vec!["INFO"];
    args.extend_from_slice(sections);
    let body: String = q(con, &args);
    parse_info(&body)
}

fn parse_info(body: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in body.split("\r\n") {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("INFO line without ':': {line:?}"));
        assert!(
            out.insert(k.to_string(), v.to_string()).is_none(),
            "{k} twice"
        );
    }
    out
}

fn num(map: &HashMap<String, String>, k: &str) -> i64 {
    map.get(k)
        .unwrap_or_else(|| panic!("INFO has no {k}"))
        .parse()
        .unwrap_or_else(|_| panic!("{k}={} is not an integer", map[k]))
}

/// `key=value` from a `a=1,b=2` INFO value.
fn sub_field(value: &str, name: &str) -> String {
    value
        .split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {value:?}"))
        .to_string()
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn temp_path(name: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    std::env::temp_dir().join(format!("cairn-srv-{}-{nanos}-{name}", std::process::id()))
}

// ---------------------------------------------------------------- COMMAND

/// GET's COMMAND INFO entry as Redis 7.0.15 sends it (RESP2).
const GET_INFO: &[u8] = b"*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n";

#[test]
fn command_lists_every_command() {
    let (_s, mut c) = server();
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    let all: Vec<Value> = q(&mut c, &["COMMAND"]);
    assert_eq!(all.len() as i64, count);
    let names: Vec<String> = all
        .iter()
        .map(|e| match e {
            Value::Array(fields) => String::from_redis_value_ref(&fields[0]).unwrap(),
            other => panic!("not an entry: {other:?}"),
        })
        .collect();
    for n in [
        "get", "set", "command", "config", "info", "slowlog", "monitor", "debug",
    ] {
        assert!(names.iter().any(|x| x == n), "COMMAND lacks {n}");
    }
    // Top-level only; subcommands appear inside their container's entry.
    assert!(!names.iter().any(|n| n.contains('|')));
    // COMMAND INFO without names is the same list.
    let info_all: Vec<Value> = q(&mut c, &["COMMAND", "INFO"]);
    assert_eq!(info_all.len(), all.len());
    assert_eq!(
        err(&mut c, &["COMMAND", "COUNT", "x"]),
        "ERR wrong number of arguments for 'command|count' command"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try COMMAND HELP."
    );
}

#[test]
fn command_info_bytes_and_lookups() {
    let s = cairn();
    let mut r = s.conn();
    assert_eq!(
        r.cmd(&["COMMAND", "INFO", "get"]),
        [b"*1\r\n", GET_INFO].concat()
    );
    // Any case; unknown names and bad subcommand paths are null entries.
    assert_eq!(
        r.cmd(&[
            "COMMAND",
            "INFO",
            "GET",
            "nosuch",
            "get|foo",
            "config|nosuch",
            "a|b|c"
        ]),
        [b"*5\r\n", GET_INFO, b"$-1\r\n$-1\r\n$-1\r\n$-1\r\n"].concat()
    );
    let sub = r.cmd(&["command", "info", "CONFIG|GET"]);
    assert!(
        sub.starts_with(b"*1\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n"),
        "{}",
        text(&sub)
    );
    // A container lists the subcommands Cairn has.
    let config = text(&r.cmd(&["COMMAND", "INFO", "config"]));
    for s in [
        "config|get",
        "config|set",
        "config|resetstat",
        "config|rewrite",
        "config|help",
    ] {
        assert!(config.contains(s), "{s} missing from {config}");
    }
    // RESP3: sets and null.
    r.cmd(&["HELLO", "3"]);
    let v3 = text(&r.cmd(&["COMMAND", "INFO", "get", "nosuch"]));
    assert!(
        v3.starts_with("*2\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n+readonly\r\n"),
        "{v3}"
    );
    assert!(v3.ends_with("_\r\n"), "{v3}");
}

#[test]
fn command_docs() {
    let s = cairn();
    let mut r = s.conn();
    let docs = text(&r.cmd(&["COMMAND", "DOCS", "get", "nosuch"]));
    assert!(
        docs.starts_with(
            "*2\r\n$3\r\nget\r\n*10\r\n$7\r\nsummary\r\n$22\r\nGet the value of a key\r\n"
        ),
        "{docs}"
    );
    assert_eq!(r.cmd(&["COMMAND", "DOCS", "nosuch"]), b"*0\r\n");
    let sub = text(&r.cmd(&["COMMAND", "DOCS", "config|get"]));
    assert!(sub.starts_with("*2\r\n$10\r\nconfig|get\r\n"), "{sub}");
    r.cmd(&["HELLO", "3"]);
    assert_eq!(r.cmd(&["COMMAND", "DOCS", "nosuch"]), b"%0\r\n");
    let docs3 = text(&r.cmd(&["COMMAND", "DOCS", "GET"]));
    assert!(docs3.starts_with("%1\r\n$3\r\nget\r\n%5\r\n"), "{docs3}");

    // No names: every command, through the redis crate.
    let mut c = support::redis_client(s.port);
    let all: Vec<Value> = q(&mut c, &["COMMAND", "DOCS"]);
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert_eq!(all.len() as i64, 2 * count, "RESP2 map: name, docs pairs");
}

#[test]
fn command_list_and_filters() {
    let (_s, mut c) = server();
    let all: Vec<String> = q(&mut c, &["COMMAND", "LIST"]);
    assert!(all.contains(&"get".to_string()));
    assert!(all.contains(&"config|get".to_string()));
    assert!(all.contains(&"slowlog|reset".to_string()));
    let count: usize = q(&mut c, &["COMMAND", "COUNT"]);
    assert_eq!(all.iter().filter(|n| !n.contains('|')).count(), count);

    let mut slow: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "PATTERN", "SLOW*"]);
    slow.sort();
    assert_eq!(
        slow,
        [
            "slowlog",
            "slowlog|get",
            "slowlog|help",
            "slowlog|len",
            "slowlog|reset"
        ]
    );
    let hash: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "Hash"]);
    assert!(hash.contains(&"hset".to_string()) && !hash.contains(&"get".to_string()));
    assert!(hash.iter().all(|n| n.starts_with('h')), "{hash:?}");
    let none: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"]);
    assert!(none.is_empty());
    let none: Vec<String> = q(&mut c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "x"]);
    assert!(none.is_empty());
    for bad in [
        &["COMMAND", "LIST", "FOO"][..],
        &["COMMAND", "LIST", "FILTERBY"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN"],
        &["COMMAND", "LIST", "FILTERBY", "FOO", "x"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "a", "b"],
    ] {
        assert_eq!(err(&mut c, bad), "ERR syntax error", "{bad:?}");
    }
}

#[test]
fn command_getkeys() {
    let (_s, mut c) = server();
    let keys = |c: &mut Connection, args: &[&str]| -> Vec<String> {
        let mut full = vec!["COMMAND", "GETKEYS"];
        full.extend_from_slice(args);
        q(c, &full)
    };
    assert_eq!(keys(&mut c, &["get", "a"]), ["a"]);
    assert_eq!(keys(&mut c, &["GET", "a"]), ["a"]);
    assert_eq!(keys(&mut c, &["set", "a", "b", "EX", "10"]), ["a"]);
    assert_eq!(keys(&mut c, &["mset", "a", "1", "b", "2"]), ["a", "b"]);
    assert_eq!(keys(&mut c, &["mget", "a", "b", "c"]), ["a", "b", "c"]);
    assert_eq!(keys(&mut c, &["del", "a", "b"]), ["a", "b"]);
    assert_eq!(keys(&mut c, &["hset", "h", "f", "v"]), ["h"]);
    assert_eq!(keys(&mut c, &["lcs", "x", "y"]), ["x", "y"]);
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "nosuch", "a"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "config", "nosuch", "x"]),
        "ERR Invalid command specified"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "ping", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "config", "get", "x"]),
        "ERR The command has no key arguments"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "get", "a", "b"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "hmget", "h"]),
        "ERR Invalid number of arguments specified for command"
    );
    assert_eq!(
        err(&mut c, &["COMMAND", "GETKEYS", "get"]),
        "ERR wrong number of arguments for 'command|getkeys' command"
    );
}

#[test]
fn command_help() {
    let (_s, mut c) = server();
    let lines: Vec<String> = q(&mut c, &["command", "help"]);
    assert_eq!(
        lines[0],
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(lines[lines.len() - 2..], ["HELP", "    Prints this help."]);
    for sub in [
        "COUNT",
        "LIST",
        "INFO [<command-name> ...]",
        "DOCS [<command-name> ...]",
        "GETKEYS <full-command>",
    ] {
        assert!(lines.iter().any(|l| l == sub), "{sub} not in help");
    }
    assert_eq!(
        err(&mut c, &["COMMAND", "HELP", "x"]),
        "ERR wrong number of arguments for 'command|help' command"
    );
}

// ----------------------------------------------------------------- CONFIG

#[test]
fn config_get_patterns_and_resp3_map() {
    let s = cairn();
    let mut c = support::redis_client(s.port);
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(v, ["maxmemory", "0"]);
    // The name is echoed as given for an exact lookup.
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "MAXMEMORY"]);
    assert_eq!(v, ["MAXMEMORY", "0"]);
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "nosuch"]);
    assert!(v.is_empty());
    // Several patterns, each directive once.
    let m: HashMap<String, String> = q(
        &mut c,
        &[
            "CONFIG",
            "GET",
            "maxmemory",
            "slowlog-*",
            "maxmemory",
            "nosuch",
        ],
    );
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m["slowlog-log-slower-than"], "10000");
    assert_eq!(m["slowlog-max-len"], "128");
    // Aliases match patterns too.
    let m: HashMap<String, String> = q(&mut c, &["CONFIG", "GET", "hash-max-*-entries"]);
    assert!(
        m.contains_key("hash-max-listpack-entries") && m.contains_key("hash-max-ziplist-entries")
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "GET"]),
        "ERR wrong number of arguments for 'config|get' command"
    );

    let mut r = s.conn();
    r.cmd(&["HELLO", "3"]);
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "maxmemory"]),
        b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
    );
    assert_eq!(r.cmd(&["CONFIG", "GET", "nosuch"]), b"%0\r\n");
    let mut c3 = support::redis_client_resp3(s.port);
    let m: HashMap<String, String> = q(&mut c3, &["CONFIG", "GET", "maxmemory*"]);
    assert_eq!(m["maxmemory-policy"], "noeviction");
}

#[test]
fn config_set_round_trip_and_atomicity() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1mb"]);
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(v, ["maxmemory", "1048576"]);
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "maxmemory",
            "0",
            "maxmemory-policy",
            "ALLKEYS-LRU",
            "timeout",
            "7",
        ],
    );
    let m: HashMap<String, String> = q(
        &mut c,
        &["CONFIG", "GET", "maxmemory", "maxmemory-policy", "timeout"],
    );
    assert_eq!(m["maxmemory"], "0");
    assert_eq!(m["maxmemory-policy"], "allkeys-lru");
    assert_eq!(m["timeout"], "7");

    // One bad pair: nothing changes.
    assert_eq!(
        err(
            &mut c,
            &["CONFIG", "SET", "timeout", "9", "maxmemory", "abc"]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"
    );
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "timeout"]);
    assert_eq!(v, ["timeout", "7"]);
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "nosuch", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
    );
    assert_eq!(
        err(
            &mut c,
            &["CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "databases", "4"]),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "maxmemory", "1mb", "timeout"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "SET", "maxmemory"]),
        "ERR wrong number of arguments for 'config|set' command"
    );
    // bind cannot move at runtime: refused, not silently ignored.
    let e = err(&mut c, &["CONFIG", "SET", "bind", "127.0.0.1 ::1"]);
    assert!(
        e.starts_with("ERR CONFIG SET failed (possibly related to argument 'bind')"),
        "{e}"
    );
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "bind"]);
    assert_eq!(v, ["bind", "127.0.0.1"]);
}

#[test]
fn config_set_applies_side_effects() {
    let (s, mut c) = server();
    // Request-path copies (Shared::refresh_hot): the slow log threshold.
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let n: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert!(n >= 1, "SET was not logged");
    // Engine limits: hash-max-listpack-entries decides the encoding.
    let _: () = q(&mut c, &["CONFIG", "SET", "hash-max-listpack-entries", "1"]);
    let _: () = q(&mut c, &["HSET", "h", "a", "1", "b", "2"]);
    let obj: String = q(&mut c, &["DEBUG", "OBJECT", "h"]);
    assert!(obj.contains("encoding:hashtable"), "{obj}");

    // requirepass: new connections must authenticate; the password never
    // reaches the slow log.
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", "s3cret"]);
    let mut r = s.conn();
    assert_eq!(
        r.cmd(&["GET", "k"]),
        error("NOAUTH Authentication required.")
    );
    assert_eq!(r.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    let entries: Vec<Vec<Value>> = q(&mut c, &["SLOWLOG", "GET", "-1"]);
    let config_set = entries
        .iter()
        .map(|e| Vec::<String>::from_redis_value_ref(&e[3]).unwrap())
        .find(|args| args[0] == "CONFIG" && args[2] == "requirepass")
        .expect("CONFIG SET requirepass logged");
    assert_eq!(config_set, ["CONFIG", "SET", "requirepass", "(redacted)"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]);

    // maxclients: the acceptor refuses connections over the limit.
    let _: () = q(&mut c, &["CONFIG", "SET", "maxclients", "2"]);
    let mut third = s.conn();
    assert_eq!(
        third.read_raw_reply(),
        error("ERR max number of clients reached")
    );
    drop(third);
    let _: () = q(&mut c, &["CONFIG", "SET", "maxclients", "10000"]);
}

#[test]
fn config_set_dir_changes_the_working_directory() {
    let s = start_cairn(&["--enable-protected-configs", "yes"]);
    let mut c = support::redis_client(s.port);
    let dir = temp_path("dir");
    std::fs::create_dir_all(&dir).unwrap();
    let canonical = std::fs::canonicalize(&dir).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "dir", dir.to_str().unwrap()]);
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", s.pid())).unwrap();
    assert_eq!(cwd, canonical);
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "dir"]);
    assert_eq!(v[1], canonical.to_str().unwrap());
    let e = err(&mut c, &["CONFIG", "SET", "dir", "/nonexistent/cairn/dir"]);
    assert!(
        e.starts_with("ERR CONFIG SET failed (possibly related to argument 'dir') - "),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Cairn started with a config file, which must be the first argument
/// (as for redis-server), so `support::start_cairn` cannot start it.
struct FileServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl FileServer {
    fn start(conf: &Path) -> FileServer {
        let log = temp_path("file-server.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .arg(conf)
            .args(["--port", "0", "--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start cairn");
        let mut s = FileServer {
            child,
            port: 0,
            log,
        };
        let deadline = Instant::now() + support::START_TIMEOUT;
        loop {
            let text = s.log();
            let ready = text.lines().find_map(|l| {
                let addr = l.split("Ready to accept connections tcp addr=").nth(1)?;
                addr.trim().rsplit(':').next()?.parse().ok()
            });
            if let Some(port) = ready {
                s.port = port;
                return s;
            }
            assert!(
                s.child.try_wait().unwrap().is_none(),
                "cairn exited: {text}"
            );
            assert!(Instant::now() < deadline, "cairn did not start: {text}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

#[test]
fn config_rewrite() {
    let (_s, mut c) = server();
    assert_eq!(
        err(&mut c, &["CONFIG", "REWRITE"]),
        "ERR The server is running without a config file"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "REWRITE", "x"]),
        "ERR wrong number of arguments for 'config|rewrite' command"
    );

    let dir = temp_path("conf-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cairn.conf");
    std::fs::write(&path, "# my settings\nmaxmemory 10mb\ntimeout 0\n").unwrap();
    let s = FileServer::start(&path);
    let mut c = support::redis_client(s.port);
    let v: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]);
    assert_eq!(v, ["maxmemory", "10485760"]);
    let m = info(&mut c, &["server"]);
    assert_eq!(
        PathBuf::from(&m["config_file"]),
        std::path::absolute(&path).unwrap()
    );

    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "maxmemory", "20mb", "timeout", "30"],
    );
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.starts_with("# my settings\n"), "{written}");
    assert!(written.contains("maxmemory 20mb"), "{written}");
    assert!(written.contains("timeout 30"), "{written}");
    assert_eq!(
        s.log()
            .matches("CONFIG REWRITE executed with success.")
            .count(),
        1
    );

    // CONFIG SET loglevel takes effect at once: the success notice is not
    // logged at "warning", and the level is written to the file.
    let _: () = q(&mut c, &["CONFIG", "SET", "loglevel", "warning"]);
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    assert_eq!(
        s.log()
            .matches("CONFIG REWRITE executed with success.")
            .count(),
        1
    );
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("loglevel warning"));
    let _: () = q(&mut c, &["CONFIG", "SET", "loglevel", "notice"]);
    let _: () = q(&mut c, &["CONFIG", "REWRITE"]);
    assert_eq!(
        s.log()
            .matches("CONFIG REWRITE executed with success.")
            .count(),
        2
    );

    // The file's directory is gone: the error names the cause.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        err(&mut c, &["CONFIG", "REWRITE"]),
        "ERR Rewriting config file: No such file or directory"
    );
    assert!(s
        .log()
        .contains("CONFIG REWRITE failed: No such file or directory"));
}

#[test]
fn config_help_and_errors() {
    let (_s, mut c) = server();
    let lines: Vec<String> = q(&mut c, &["CONFIG", "HELP"]);
    assert_eq!(
        lines,
        [
            "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
            "HELP",
            "    Prints this help.",
        ]
    );
    assert_eq!(
        err(&mut c, &["CONFIG"]),
        "ERR wrong number of arguments for 'config' command"
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try CONFIG HELP."
    );
    assert_eq!(
        err(&mut c, &["CONFIG", "RESETSTAT", "x"]),
        "ERR wrong number of arguments for 'config|resetstat' command"
    );
}

#[test]
fn config_resetstat_resets_info_counters() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["SET", "k", "v"]);
    for _ in 0..3 {
        let _: Option<String> = q(&mut c, &["GET", "k"]);
    }
    let _: Option<String> = q(&mut c, &["GET", "missing"]);
    let _ = err(&mut c, &["GET"]);
    let _ = err(&mut c, &["HGET", "k", "f"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let before = info(&mut c, &["stats", "commandstats"]);
    assert_eq!(
        before["cmdstat_get"],
        "calls=4,usec=".to_string()
            + &sub_field(&before["cmdstat_get"], "usec")
            + ",usec_per_call="
            + &sub_field(&before["cmdstat_get"], "usec_per_call")
            + ",rejected_calls=1,failed_calls=0"
    );
    assert_eq!(sub_field(&before["cmdstat_hget"], "failed_calls"), "1");
    // HGET on a string finds the key (a hit) before the type check, as in
    // Redis.
    assert_eq!(num(&before, "keyspace_hits"), 4);
    assert_eq!(num(&before, "keyspace_misses"), 1);
    assert!(num(&before, "total_commands_processed") >= 7);
    assert!(num(&before, "total_error_replies") >= 2);
    assert!(num(&before, "total_connections_received") >= 1);
    let slowlog_before: i64 = q(&mut c, &["SLOWLOG", "LEN"]);

    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]);
    let after = info(&mut c, &["stats", "commandstats"]);
    assert!(!after.contains_key("cmdstat_get"), "{after:?}");
    assert!(!after.contains_key("cmdstat_hget"));
    // The RESETSTAT call itself is counted after the reset, as in Redis.
    assert_eq!(sub_field(&after["cmdstat_config|resetstat"], "calls"), "1");
    assert_eq!(num(&after, "keyspace_hits"), 0);
    assert_eq!(num(&after, "keyspace_misses"), 0);
    assert_eq!(num(&after, "total_error_replies"), 0);
    assert_eq!(num(&after, "total_connections_received"), 0);
    assert!(num(&after, "total_commands_processed") <= 2);
    // The slow log is kept.
    let slowlog_after: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert!(slowlog_after > slowlog_before);

    let _: Option<String> = q(&mut c, &["GET", "k"]);
    let again = info(&mut c, &["stats", "commandstats"]);
    assert_eq!(sub_field(&again["cmdstat_get"], "calls"), "1");
    assert_eq!(num(&again, "keyspace_hits"), 1);
}

// ------------------------------------------------------------------- INFO

#[test]
fn info_sections_and_fields() {
    let (s, mut c) = server();
    let body: String = q(&mut c, &["INFO"]);
    let headers: Vec<&str> = body.split("\r\n").filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headers,
        [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Errorstats",
            "# Cluster",
            "# Keyspace"
        ]
    );
    // Sections are separated by one empty line; the text ends with CRLF.
    assert!(body.contains("\r\n\r\n# Clients\r\n"));
    assert!(body.ends_with("\r\n"));
    let m = parse_info(&body);
    assert_eq!(m["redis_version"], "7.0.15");
    assert!(!m["cairn_version"].is_empty());
    assert_eq!(m["redis_mode"], "standalone");
    assert_eq!(num(&m, "process_id"), s.pid() as i64);
    assert_eq!(num(&m, "tcp_port"), s.port as i64);
    assert_eq!(m["run_id"].len(), 40);
    assert_eq!(m["config_file"], "");
    assert!(m["executable"].ends_with("cairn"), "{}", m["executable"]);
    let server_secs = num(&m, "server_time_usec") / 1_000_000;
    assert!((server_secs - unix_secs() as i64).abs() <= 2);
    assert!(num(&m, "uptime_in_seconds") < 60);
    assert_eq!(num(&m, "hz"), 10);
    assert_eq!(num(&m, "connected_clients"), 1);
    assert_eq!(num(&m, "maxclients"), 10000);
    assert!(num(&m, "used_memory") > 0);
    assert!(num(&m, "used_memory_rss") > 0);
    assert!(num(&m, "used_memory_peak") >= num(&m, "used_memory"));
    assert!(m["mem_allocator"].starts_with("jemalloc-"));
    assert_eq!(num(&m, "maxmemory"), 0);
    assert_eq!(m["maxmemory_policy"], "noeviction");
    assert!(m["mem_fragmentation_ratio"].parse::<f64>().unwrap() > 0.0);
    assert_eq!(num(&m, "loading"), 0);
    assert_eq!(num(&m, "aof_enabled"), 0);
    assert_eq!(m["role"], "master");
    assert!(m["used_cpu_user"].parse::<f64>().unwrap() >= 0.0);
    assert_eq!(num(&m, "cluster_enabled"), 0);
    assert!(
        !m.contains_key("cmdstat_info"),
        "commandstats is not a default section"
    );

    // all / everything add commandstats; sections by name, any case.
    let all = info(&mut c, &["all"]);
    assert!(all.contains_key("cmdstat_info"));
    let everything = info(&mut c, &["everything"]);
    assert!(everything.contains_key("cmdstat_info"));
    let only: String = q(&mut c, &["INFO", "CPU", "nosuch", "cluster"]);
    assert!(only.starts_with("# CPU\r\nused_cpu_sys:"), "{only}");
    assert!(
        only.ends_with("\r\n\r\n# Cluster\r\ncluster_enabled:0\r\n"),
        "{only}"
    );
    let none: String = q(&mut c, &["INFO", "nosuch"]);
    assert_eq!(none, "");
}

#[test]
fn info_keyspace_stats_and_resp3() {
    let s = cairn();
    let mut c = support::redis_client(s.port);
    let mut r = s.conn();
    assert_eq!(r.cmd(&["INFO", "keyspace"]), bulk("# Keyspace\r\n"));
    let _: () = q(&mut c, &["SET", "a", "1"]);
    let _: () = q(&mut c, &["SET", "b", "1", "EX", "100"]);
    let _: () = q(&mut c, &["HSET", "h", "f", "v"]);
    let _: () = q(&mut c, &["SELECT", "3"]);
    let _: () = q(&mut c, &["SET", "c", "1"]);
    assert_eq!(
        r.cmd(&["INFO", "KEYSPACE"]),
        bulk("# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=0\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n")
    );
    // Expired keys are counted once something notices them.
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: () = q(&mut c, &["DEBUG", "JUMP-CLOCK", "200000"]);
    let _: Option<String> = q(&mut c, &["GET", "b"]);
    let m = info(&mut c, &["stats", "keyspace"]);
    assert_eq!(num(&m, "expired_keys"), 1);
    assert_eq!(m["db0"], "keys=2,expires=0,avg_ttl=0");

    // RESP3: a verbatim string of format txt.
    r.cmd(&["HELLO", "3"]);
    assert_eq!(
        r.cmd(&["INFO", "cluster"]),
        b"=34\r\ntxt:# Cluster\r\ncluster_enabled:0\r\n\r\n"
    );
    let mut c3 = support::redis_client_resp3(s.port);
    match q::<Value>(&mut c3, &["INFO", "server"]) {
        Value::VerbatimString { text, .. } => assert!(text.contains("redis_version:7.0.15")),
        other => panic!("INFO in RESP3 should be verbatim, got {other:?}"),
    }
}

#[test]
fn info_counts_traffic_and_clients() {
    let (s, mut c) = server();
    let a = info(&mut c, &["stats", "clients"]);
    let mut others: Vec<Connection> = (0..3).map(|_| support::redis_client(s.port)).collect();
    for o in others.iter_mut() {
        let _: String = q(o, &["PING"]);
    }
    let b = info(&mut c, &["stats", "clients"]);
    assert_eq!(num(&b, "connected_clients"), 4);
    assert_eq!(
        num(&b, "total_connections_received") - num(&a, "total_connections_received"),
        3
    );
    assert_eq!(
        num(&b, "total_commands_processed") - num(&a, "total_commands_processed"),
        4
    );
    assert!(num(&b, "total_net_input_bytes") > num(&a, "total_net_input_bytes"));
    assert!(num(&b, "total_net_output_bytes") > num(&a, "total_net_output_bytes"));
    assert!(num(&b, "instantaneous_ops_per_sec") >= 0);
    assert!(b["instantaneous_input_kbps"].parse::<f64>().is_ok());
    drop(others);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = info(&mut c, &["clients"]);
        if num(&m, "connected_clients") == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "closed clients still counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Memory figures come from the allocator.
    let before = num(&info(&mut c, &["memory"]), "used_memory");
    let big = "x".repeat(8 << 20);
    let _: () = q(&mut c, &["SET", "big", &big]);
    let m = info(&mut c, &["memory"]);
    assert!(num(&m, "used_memory") >= before + (8 << 20), "{m:?}");
    assert!(num(&m, "used_memory_peak") >= num(&m, "used_memory"));
    let _: i64 = q(&mut c, &["DEL", "big"]);

    let p = info(&mut c, &["persistence"]);
    assert_eq!(num(&p, "rdb_bgsave_in_progress"), 0);
    assert!(num(&p, "rdb_last_save_time") <= unix_secs() as i64);
}

// ------------------------------------------------------------------- TIME

/// TIME over a raw connection: (seconds, microseconds).
fn time_of(r: &mut RawConn) -> (u64, u64) {
    let raw = text(&r.cmd(&["TIME"]));
    let parts: Vec<&str> = raw.split("\r\n").collect();
    assert_eq!(parts[0], "*2", "{raw}");
    assert!(
        parts[1].starts_with('$') && parts[3].starts_with('$'),
        "{raw}"
    );
    (parts[2].parse().unwrap(), parts[4].parse().unwrap())
}

#[test]
fn time_and_jump_clock() {
    let s = cairn();
    let mut r = s.conn();
    let (secs, micros) = time_of(&mut r);
    assert!((secs as i64 - unix_secs() as i64).abs() <= 2);
    assert!(micros < 1_000_000);
    assert_eq!(r.cmd(&["DEBUG", "JUMP-CLOCK", "3600000"]), b"+OK\r\n");
    let (later, _) = time_of(&mut r);
    assert!(later >= secs + 3599, "{later} vs {secs}");
    assert_eq!(r.cmd(&["DEBUG", "JUMP-CLOCK", "-3600000"]), b"+OK\r\n");
    assert_eq!(
        r.cmd(&["TIME", "x"]),
        error("ERR wrong number of arguments for 'time' command")
    );
    assert_eq!(
        r.cmd(&["DEBUG", "JUMP-CLOCK", "abc"]),
        error("ERR value is not an integer or out of range")
    );
    let mut c = support::redis_client(s.port);
    let (a, b): (String, String) = q(&mut c, &["TIME"]);
    assert!(a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok());
}

// --------------------------------------------------------------- SHUTDOWN

#[test]
fn shutdown_errors_keep_the_server_running() {
    let (mut s, mut c) = server();
    for bad in [
        &["SHUTDOWN", "FOO"][..],
        &["SHUTDOWN", "SAVE", "NOSAVE"],
        &["SHUTDOWN", "ABORT", "NOW"],
        &["SHUTDOWN", "ABORT", "FORCE"],
        &["SHUTDOWN", "NOSAVE", "FOO"],
    ] {
        assert_eq!(err(&mut c, bad), "ERR syntax error", "{bad:?}");
    }
    assert_eq!(
        err(&mut c, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    assert!(s.is_running());
    // A SHUTDOWN SAVE whose save fails (an injected write fault) answers
    // Redis's error and leaves the server running.
    let dir = temp_path("shutdown-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = support::start_cairn_env(
        &["--dir", dir.to_str().unwrap()],
        &[("CAIRN_TEST_SNAPSHOT_FAULT_AFTER", "0")],
    );
    let mut c = support::redis_client(s.port);
    let e = err(&mut c, &["SHUTDOWN", "SAVE"]);
    assert_eq!(e, "ERR Errors trying to SHUTDOWN. Check logs.");
    assert!(s.log().contains("can't exit"), "{}", s.log_tail(5));
    assert!(s.is_running());
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shutdown_nosave_exits_and_removes_the_pidfile() {
    let pidfile = temp_path("cairn.pid");
    let mut s = start_cairn(&["--pidfile", pidfile.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pidfile.exists() {
        assert!(Instant::now() < deadline, "no pid file");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut r = s.conn();
    r.send(&[b"SHUTDOWN", b"NOSAVE", b"NOW"]);
    assert!(
        r.try_read_raw_reply().unwrap().is_none(),
        "SHUTDOWN replies nothing"
    );
    let status = s.wait_exit(Duration::from_secs(5)).expect("server exited");
    assert!(status.success(), "{status}");
    assert!(!pidfile.exists());
}

#[test]
fn shutdown_plain_and_save_force_exit() {
    for (args, saves) in [
        (&[&b"SHUTDOWN"[..]][..], false),
        (&[b"shutdown", b"save", b"force"], true),
    ] {
        let dir = temp_path("shutdown-save");
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = start_cairn(&["--dir", dir.to_str().unwrap()]);
        let mut r = s.conn();
        r.send(args);
        assert!(r.try_read_raw_reply().unwrap().is_none());
        let status = s.wait_exit(Duration::from_secs(5)).expect("server exited");
        assert!(status.success());
        // No save rules by default: only SHUTDOWN SAVE writes a snapshot.
        assert_eq!(dir.join("dump.cairn").exists(), saves);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// ------------------------------------------------------------------ DEBUG

const DEBUG_REFUSED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

#[test]
fn debug_needs_enable_debug_command() {
    let s = start_cairn(&[]);
    let mut r = s.conn();
    assert_eq!(r.cmd(&["DEBUG", "SLEEP", "0"]), error(DEBUG_REFUSED));
    assert_eq!(r.cmd(&["DEBUG", "HELP"]), error(DEBUG_REFUSED));
    // "local" allows loopback clients, which ours is.
    let s = start_cairn(&["--enable-debug-command", "local"]);
    let mut r = s.conn();
    assert_eq!(r.cmd(&["DEBUG", "SLEEP", "0"]), b"+OK\r\n");
    let s = start_cairn(&["--enable-debug-command", "yes"]);
    let mut r = s.conn();
    assert_eq!(r.cmd(&["DEBUG", "SLEEP", "0"]), b"+OK\r\n");
}

#[test]
fn debug_sleep_blocks_this_connection() {
    let (_s, mut c) = server();
    let t = Instant::now();
    let _: () = q(&mut c, &["DEBUG", "SLEEP", "0.2"]);
    assert!(t.elapsed() >= Duration::from_millis(200));
    // strtod semantics: garbage and negative numbers sleep 0 seconds.
    for arg in ["abc", "-1", "0"] {
        let t = Instant::now();
        let _: () = q(&mut c, &["DEBUG", "SLEEP", arg]);
        assert!(t.elapsed() < Duration::from_secs(1), "{arg}");
    }
    assert_eq!(
        err(&mut c, &["DEBUG", "SLEEP"]),
        "ERR unknown subcommand or wrong number of arguments for 'SLEEP'. Try DEBUG HELP."
    );
    assert_eq!(
        err(&mut c, &["debug", "sleep", "0", "x"]),
        "ERR unknown subcommand or wrong number of arguments for 'sleep'. Try DEBUG HELP."
    );
    assert_eq!(
        err(&mut c, &["DEBUG", "FOO"]),
        "ERR unknown subcommand or wrong number of arguments for 'FOO'. Try DEBUG HELP."
    );
    assert_eq!(
        err(&mut c, &["DEBUG"]),
        "ERR wrong number of arguments for 'debug' command"
    );
}

#[test]
fn debug_object_and_help() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["SET", "s", "bar"]);
    let _: () = q(&mut c, &["SET", "n", "12345"]);
    let _: () = q(&mut c, &["SET", "small", "7"]);
    let _: () = q(&mut c, &["HSET", "h", "a", "b"]);
    let _: () = q(&mut c, &["SET", "raw", &"x".repeat(50)]);
    let obj = |c: &mut Connection, k: &str| -> String { q(c, &["DEBUG", "OBJECT", k]) };
    let s = obj(&mut c, "s");
    let parts: Vec<&str> = s.split(' ').collect();
    assert_eq!(parts[0], "Value");
    assert!(parts[1].starts_with("at:0x"), "{s}");
    // Values checked against Redis 7.0.15.
    assert_eq!(
        parts[2..6],
        [
            "refcount:1",
            "encoding:embstr",
            "serializedlength:4",
            parts[5]
        ]
    );
    assert!(parts[5].starts_with("lru:"), "{s}");
    assert_eq!(parts[6], "lru_seconds_idle:0");
    assert!(obj(&mut c, "n").contains("refcount:1 encoding:int serializedlength:3 "));
    assert!(obj(&mut c, "small").contains("refcount:2147483647 encoding:int serializedlength:2 "));
    assert!(obj(&mut c, "h").contains("encoding:listpack serializedlength:14 "));
    assert!(obj(&mut c, "raw").contains("encoding:raw serializedlength:51 "));
    assert_eq!(
        err(&mut c, &["DEBUG", "OBJECT", "nosuch"]),
        "ERR no such key"
    );
    // Idle time follows the clock.
    let _: () = q(&mut c, &["DEBUG", "JUMP-CLOCK", "5000"]);
    assert!(
        obj(&mut c, "s").ends_with("lru_seconds_idle:5"),
        "{}",
        obj(&mut c, "s")
    );

    let help: Vec<String> = q(&mut c, &["DEBUG", "HELP"]);
    assert_eq!(
        help[0],
        "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    for sub in [
        "JUMP-CLOCK <milliseconds>",
        "OBJECT <key>",
        "SLEEP <seconds>",
        "HELP",
    ] {
        assert!(help.iter().any(|l| l == sub), "{sub} missing from {help:?}");
    }
}

#[test]
fn debug_jump_clock_expires_keys() {
    let (_s, mut c) = server();
    let _: () = q(&mut c, &["SET", "k", "v", "PX", "100000"]);
    let _: () = q(&mut c, &["DEBUG", "JUMP-CLOCK", "50000"]);
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((49_000..=50_000).contains(&pttl), "{pttl}");
    let _: () = q(&mut c, &["DEBUG", "JUMP-CLOCK", "60000"]);
    let v: Option<String> = q(&mut c, &["GET", "k"]);
    assert_eq!(v, None);
}

// ---------------------------------------------------------------- SLOWLOG

#[test]
fn slowlog_records_entries_in_redis_format() {
    let s = cairn();
    let mut c = support::redis_client(s.port);
    let mut r = s.conn();
    let local = r.stream().local_addr().unwrap().to_string();
    assert_eq!(r.cmd(&["SLOWLOG", "LEN"]), b":0\r\n");
    assert_eq!(r.cmd(&["SLOWLOG", "GET"]), b"*0\r\n");
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    assert_eq!(r.cmd(&["SLOWLOG", "RESET"]), b"+OK\r\n");
    let started = unix_secs();
    r.cmd(&["SET", "k", "v"]);
    let raw = text(&r.cmd(&["SLOWLOG", "GET", "1"]));
    // *1 *6 :id :time :micros *3 SET k v $peer $name
    let lines: Vec<&str> = raw.split("\r\n").collect();
    assert_eq!(lines[0..2], ["*1", "*6"], "{raw}");
    assert!(lines[2].starts_with(':') && lines[3].starts_with(':') && lines[4].starts_with(':'));
    let ts: u64 = lines[3][1..].parse().unwrap();
    assert!(ts + 2 >= started && ts <= unix_secs() + 2, "{ts}");
    assert_eq!(
        lines[5..12],
        ["*3", "$3", "SET", "$1", "k", "$1", "v"],
        "{raw}"
    );
    assert_eq!(lines[13], local, "{raw}");
    assert_eq!(lines[14..16], ["$0", ""], "{raw}");

    // The client name is recorded; ids grow; newest first.
    r.cmd(&["CLIENT", "SETNAME", "slowpoke"]);
    r.cmd(&["PING"]);
    let entries: Vec<Vec<Value>> = q(&mut c, &["SLOWLOG", "GET", "-1"]);
    let ids: Vec<i64> = entries
        .iter()
        .map(|e| i64::from_redis_value_ref(&e[0]).unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
    let ping = entries
        .iter()
        .find(|e| Vec::<String>::from_redis_value_ref(&e[3]).unwrap() == ["PING"])
        .expect("PING entry");
    assert_eq!(String::from_redis_value_ref(&ping[5]).unwrap(), "slowpoke");
    let two: Vec<Value> = q(&mut c, &["SLOWLOG", "GET", "2"]);
    assert_eq!(two.len(), 2);
    let zero: Vec<Value> = q(&mut c, &["SLOWLOG", "GET", "0"]);
    assert!(zero.is_empty());
    let len: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    // SLOWLOG GET -1, 2 and 0 were logged too.
    assert_eq!(len as usize, entries.len() + 3);

    // Long argument lists and arguments are truncated as in Redis.
    let mut args = vec!["MSET".to_string()];
    for i in 0..20 {
        args.push(format!("k{i}"));
        args.push("v".into());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let _: () = q(&mut c, &refs);
    let last: Vec<Vec<Value>> = q(&mut c, &["SLOWLOG", "GET", "1"]);
    let logged: Vec<String> = Vec::from_redis_value_ref(&last[0][3]).unwrap();
    assert_eq!(logged.len(), 32);
    assert_eq!(logged[31], "... (10 more arguments)");
    let long = "x".repeat(200);
    let _: () = q(&mut c, &["SET", "k", &long]);
    let last: Vec<Vec<Value>> = q(&mut c, &["SLOWLOG", "GET", "1"]);
    let logged: Vec<String> = Vec::from_redis_value_ref(&last[0][3]).unwrap();
    assert_eq!(logged[2], format!("{}... (72 more bytes)", "x".repeat(128)));

    // slowlog-max-len trims; a negative threshold disables logging.
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-max-len", "3"]);
    let len: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert!(len <= 3);
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "slowlog-log-slower-than",
            "-1",
            "slowlog-max-len",
            "128",
        ],
    );
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]);
    let _: () = q(&mut c, &["SET", "k", "v"]);
    let len: i64 = q(&mut c, &["SLOWLOG", "LEN"]);
    assert_eq!(len, 0);
}

#[test]
fn slowlog_errors_and_help() {
    let (_s, mut c) = server();
    for bad in ["abc", "-2", "1.5"] {
        assert_eq!(
            err(&mut c, &["SLOWLOG", "GET", bad]),
            "ERR count should be greater than or equal to -1"
        );
    }
    assert_eq!(
        err(&mut c, &["SLOWLOG", "GET", "1", "2"]),
        "ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP."
    );
    assert_eq!(
        err(&mut c, &["SLOWLOG", "LEN", "x"]),
        "ERR wrong number of arguments for 'slowlog|len' command"
    );
    assert_eq!(
        err(&mut c, &["SLOWLOG", "FOO"]),
        "ERR unknown subcommand 'FOO'. Try SLOWLOG HELP."
    );
    let help: Vec<String> = q(&mut c, &["slowlog", "help"]);
    assert_eq!(
        help[0],
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    );
    assert_eq!(help[1], "GET [<count>]");
    assert_eq!(help.len(), 12);
}

// ---------------------------------------------------------------- MONITOR

#[test]
fn monitor_sees_other_clients() {
    let s = cairn();
    let mut mon = s.conn();
    assert_eq!(mon.cmd(&["MONITOR"]), b"+OK\r\n");
    let mut c = support::redis_client(s.port);
    let _: () = q(&mut c, &["SELECT", "2"]);
    let _: () = q(&mut c, &["SET", "foo", "bar baz"]);
    // The redis crate's own connection setup may be seen first.
    let mut lines = Vec::new();
    loop {
        let line = text(&mon.read_raw_reply());
        let done = line.contains("\"SET\"");
        lines.push(line);
        if done {
            break;
        }
    }
    let set = lines.last().unwrap();
    // +<secs>.<usecs> [<db> <ip:port>] "SET" "foo" "bar baz"
    assert!(set.starts_with('+'), "{set}");
    let (stamp, rest) = set[1..].split_once(' ').unwrap();
    let (secs, usecs) = stamp.split_once('.').unwrap();
    assert!((secs.parse::<i64>().unwrap() - unix_secs() as i64).abs() <= 2);
    assert_eq!(usecs.len(), 6);
    assert!(rest.starts_with("[2 127.0.0.1:"), "{set}");
    assert!(rest.ends_with("] \"SET\" \"foo\" \"bar baz\"\r\n"), "{set}");
    assert!(
        lines.iter().any(|l| l.contains("\"SELECT\" \"2\"")),
        "{lines:?}"
    );

    // A second MONITOR is ignored without a reply; admin commands are not
    // shown; the monitor is not counted as a connected client.
    mon.send(&[b"MONITOR"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "timeout", "0"]);
    let _: String = q(&mut c, &["PING"]);
    let line = text(&mon.read_raw_reply());
    assert!(line.ends_with("\"PING\"\r\n"), "{line}");
    let m = info(&mut c, &["clients"]);
    assert_eq!(num(&m, "connected_clients"), 1);

    // Once the monitor leaves, commands are no longer fed to it.
    mon.close();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = info(&mut c, &["clients"]);
        if num(&m, "connected_clients") == 1 {
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        err(&mut c, &["MONITOR", "x"]),
        "ERR wrong number of arguments for 'monitor' command"
    );
}

// --------------------------------------------------------------- redis-cli

fn redis_cli() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("redis-cli"))
        .find(|p| p.is_file())
}

fn run_cli(cli: &PathBuf, port: u16, args: &[&str]) -> String {
    let out = Command::new(cli)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("run redis-cli");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_works_against_cairn() {
    let Some(cli) = redis_cli() else {
        eprintln!("redis-cli not installed: skipped");
        return;
    };
    let s = cairn();
    assert_eq!(run_cli(&cli, s.port, &["ping"]), "PONG\n");
    let info = run_cli(&cli, s.port, &["info", "server"]);
    assert!(
        info.starts_with("# Server\r\nredis_version:7.0.15\r\n"),
        "{info}"
    );
    let docs = run_cli(&cli, s.port, &["--no-raw", "command", "docs", "get"]);
    assert!(
        docs.contains("\"summary\"") && docs.contains("\"Get the value of a key\""),
        "{docs}"
    );
    // The same output as a real Redis, when one is installed.
    if let Some(redis) = support::start_redis(&[]) {
        for args in [
            &["--no-raw", "command", "docs", "get"][..],
            &["--no-raw", "command", "info", "get", "hset", "config|get"],
            &["--no-raw", "config", "get", "maxmemory"],
            &["--no-raw", "slowlog", "help"],
            &["--no-raw", "config", "help"],
        ] {
            assert_eq!(
                run_cli(&cli, s.port, args),
                run_cli(&cli, redis.port, args),
                "{args:?}"
            );
        }
    }
}
