//! SCRIPT DEBUG (Redis's Lua debugger, SYNC and YES modes) end to end:
//! debugging sessions over a raw socket whose transcripts must equal
//! redis-server 7.0's byte for byte (when one is installed; a few are also
//! pinned here), `redis-cli --ldb` and `--ldb-sync-mode` against both, the
//! rules around a session (EVALSHA, FCALL, pipelines, the connection
//! closing), and YES sessions running on a copy: other clients served
//! meanwhile, the session's writes never seen, several at once, the copy
//! freed when the client goes, refused past maxmemory.
mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{start_cairn, start_redis, Server};

fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The end of the RESP2 value starting at `at`, if it is all in `buf`.
fn value_end(buf: &[u8], at: usize) -> Option<usize> {
    let line_end = at + buf.get(at..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[at + 1..line_end]).ok()?;
    let next = line_end + 2;
    match buf[at] {
        b'+' | b'-' | b':' => Some(next),
        b'$' => {
            let n: i64 = line.parse().ok()?;
            if n < 0 {
                Some(next)
            } else if buf.len() >= next + n as usize + 2 {
                Some(next + n as usize + 2)
            } else {
                None
            }
        }
        b'*' => {
            let n: i64 = line.parse().ok()?;
            let mut p = next;
            for _ in 0..n.max(0) {
                p = value_end(buf, p)?;
            }
            Some(p)
        }
        _ => panic!("unexpected reply byte {:?}", buf[at] as char),
    }
}

struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { s, buf: Vec::new() }
    }

    fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.s.write_all(&encode(&args)).unwrap();
    }

    /// The next whole reply.
    fn value(&mut self) -> String {
        loop {
            if let Some(end) = value_end(&self.buf, 0) {
                let v: Vec<u8> = self.buf.drain(..end).collect();
                return String::from_utf8_lossy(&v).into_owned();
            }
            let mut chunk = [0u8; 4096];
            let n = self.s.read(&mut chunk).expect("a reply in time");
            assert!(
                n > 0,
                "closed early; got {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Everything until the server closes the connection.
    fn rest(&mut self) -> String {
        let mut out = std::mem::take(&mut self.buf);
        self.s.read_to_end(&mut out).expect("the server closes");
        String::from_utf8_lossy(&out).into_owned() + "<closed>"
    }

    fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.value()
    }
}

/// A SYNC session of `script` with `keys` and `args`, the debugger
/// commands sent one at a time: each exchange, the last one read until
/// the server closes the connection.
fn transcript(port: u16, script: &str, keys: &[&str], args: &[&str], commands: &[&str]) -> String {
    transcript_in("SYNC", port, script, keys, args, commands)
}

/// `transcript` in SCRIPT DEBUG `mode`.
fn transcript_in(
    mode: &str,
    port: u16,
    script: &str,
    keys: &[&str],
    args: &[&str],
    commands: &[&str],
) -> String {
    let mut admin = Raw::connect(port);
    assert_eq!(admin.call(&["FLUSHALL"]), "+OK\r\n");
    let mut c = Raw::connect(port);
    let mut out = String::new();
    out += &c.call(&["SCRIPT", "DEBUG", mode]);
    let n = keys.len().to_string();
    let mut eval = vec!["EVAL", script, &n];
    eval.extend_from_slice(keys);
    eval.extend_from_slice(args);
    c.send(&eval);
    out += "> EVAL\n";
    if commands.is_empty() {
        out += &c.rest();
        return out;
    }
    out += &c.value();
    for (i, cmd) in commands.iter().enumerate() {
        let parts: Vec<&str> = cmd.split(' ').collect();
        c.send(&parts);
        out += &format!("> {cmd}\n");
        if i + 1 == commands.len() {
            out += &c.rest();
        } else {
            out += &c.value();
        }
    }
    out
}

type Case = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

const CASES: &[Case] = &[
    (
        "local a = 1\nlocal b = {1,2,'x',{y=true}}\nredis.call('set', KEYS[1], ARGV[1])\nlocal c = redis.call('get', KEYS[1])\nredis.debug('hi', a, b)\nreturn c\n",
        &["k"],
        &["v"],
        &[
            "s", "n", "p", "p b", "p KEYS", "p ARGV", "p zz", "l", "l 1 1", "l 0 0", "w", "b 5",
            "b", "b 5", "b -5", "b -4", "b 0", "b 99", "b x", "b 5", "t", "e a+1", "e error('x')",
            "e ]]", "e 1,2", "e {a=1}", "e 'a\\nb'", "e 1.5", "e 1e20", "e nil", "e true",
            "e redis.sha1hex('x')", "r get k", "r", "m", "m 10", "m 0", "h", "xyz", "s", "c",
            "p c", "c",
        ],
    ),
    (
        "redis.call('set', KEYS[1], ARGV[1])\nlocal t = redis.call('hgetall', 'nohash')\nredis.breakpoint()\nlocal x = 5\nreturn redis.call('incr', KEYS[1])\n",
        &["k"],
        &["v"],
        &["s", "s", "c", "s", "s"],
    ),
    ("local a = 1\nreturn a\n", &[], &[], &["a"]),
    ("local a = 1\nerror('boom')\n", &[], &[], &["s", "s"]),
    ("return +", &[], &[], &[]),
    (
        "redis.pcall('nosuch')\nredis.pcall('get')\nredis.pcall('get', {})\nredis.pcall('lpush','l','a','b')\nredis.pcall('lrange','l',0,-1)\nredis.pcall('set','a','b','c','d','e','f','g','h','i','j','k','l')\nreturn 1",
        &[],
        &[],
        &[
            "s", "s", "s", "s", "s", "s", "r ping", "r hset h f v", "r hgetall h", "r set",
            "r zadd z 1.5 m", "r zrange z 0 -1 withscores", "r set s 5", "r incrbyfloat s 0.5",
            "s",
        ],
    ),
    (
        "local s = string.rep('x', 300)\nreturn 1",
        &[],
        &[],
        &["s", "p", "p s", "m 70", "p s", "m", "c"],
    ),
    (
        "local function f(n)\n  local m = n * 2\n  return m\nend\nlocal r = f(3)\nreturn r",
        &[],
        &[],
        &["s", "s", "s", "t", "p", "p n", "s", "p r", "s"],
    ),
    ("\n\nlocal a = 1\n\n", &[], &[], &["w", "c"]),
];

#[test]
fn sessions_match_redis_transcripts() {
    let cairn = start_cairn(&[]);
    let redis = start_redis(&[]);
    for (script, keys, args, commands) in CASES {
        let got = transcript(cairn.port, script, keys, args, commands);
        if let Some(redis) = &redis {
            let want = transcript(redis.port, script, keys, args, commands);
            assert_eq!(got, want, "script {script:?}");
        }
    }
    // Pinned, so the test means something without redis-server too.
    let got = transcript(cairn.port, CASES[2].0, &[], &[], &["p a", "a"]);
    let sha = cairn_lua::sha1hex(CASES[2].0.as_bytes());
    assert_eq!(
        got,
        format!(
            "+OK\r\n> EVAL\n*2\r\n+* Stopped at 1, stop reason = step over\r\n+-> 1   local a = 1\r\n\
             > p a\n*1\r\n+No such variable.\r\n\
             > a\n*1\r\n+<endsession>\r\n-ERR script aborted for user request script: {sha}, on @user_script:1.\r\n<closed>"
        )
    );
    let got = transcript(cairn.port, CASES[1].0, &["k"], &["v"], &["s", "c", "c"]);
    assert!(
        got.contains("> s\n*4\r\n+<redis> set k v\r\n+<reply> \"+OK\"\r\n+* Stopped at 2, stop reason = step over\r\n"),
        "{got}"
    );
    assert!(
        got.contains(
            "+* Stopped at 4, stop reason = redis.breakpoint() called\r\n+-> 4   local x = 5\r\n"
        ),
        "{got}"
    );
}

/// The rules around a session, each checked against Redis's answer.
fn rules(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Raw::connect(port);
    out.push(c.call(&["SCRIPT", "LOAD", "return 1"]));
    out.push(c.call(&["SCRIPT", "DEBUG", "sync"]));
    out.push(c.call(&["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"]));
    out.push(c.call(&["EVALSHA", "abc", "0"]));
    out.push(c.call(&[
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=ldbtest\nredis.register_function('ldbf', function() return 7 end)",
    ]));
    out.push(c.call(&["FCALL", "ldbf", "0"]));
    out.push(c.call(&["SCRIPT", "DEBUG", "maybe"]));
    out.push(c.call(&["SCRIPT", "DEBUG"]));
    out.push(c.call(&["SCRIPT", "DEBUG", "no"]));
    c.s.write_all(
        &[
            encode(&[b"MULTI"]),
            encode(&[b"SCRIPT", b"DEBUG", b"sync"]),
            encode(&[b"EXEC"]),
        ]
        .concat(),
    )
    .unwrap();
    for _ in 0..3 {
        out.push(c.value());
    }
    out.push(c.call(&["EVAL", "return redis.call('script','debug','sync')", "0"]));
    c.s.write_all(&[encode(&[b"PING"]), encode(&[b"SCRIPT", b"DEBUG", b"sync"])].concat())
        .unwrap();
    out.push(c.value());
    out.push(c.value());
    // Not in a session: the script runs as usual.
    out.push(c.call(&["EVAL", "return tostring(redis.breakpoint())", "0"]));
    out.push(c.call(&["EVAL", "redis.debug('x') return 2", "0"]));
    // A SYNC session's writes stay; the connection closes after it.
    out.push(c.call(&["SCRIPT", "DEBUG", "sync"]));
    c.send(&["EVAL", "redis.call('set','ldbkey','1') return 3", "0"]);
    out.push(c.value());
    c.send(&["c"]);
    out.push(c.rest());
    let mut d = Raw::connect(port);
    out.push(d.call(&["GET", "ldbkey"]));
    out
}

#[test]
fn rules_around_a_session_are_redis_rules() {
    let cairn = start_cairn(&[]);
    let got = rules(cairn.port);
    if let Some(redis) = start_redis(&[]) {
        assert_eq!(got, rules(redis.port));
    }
    assert_eq!(
        got[2],
        "-ERR Please use EVAL instead of EVALSHA for debugging\r\n"
    );
    assert_eq!(got[5], ":7\r\n");
    assert_eq!(got[6], "-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n");
    assert_eq!(
        got[11],
        "*1\r\n-ERR SCRIPT DEBUG must be called outside a pipeline\r\n"
    );
    assert_eq!(
        got[14],
        "-ERR SCRIPT DEBUG must be called outside a pipeline\r\n"
    );
    assert_eq!(got[15], "$5\r\nfalse\r\n");
    assert_eq!(got[19], "*1\r\n+<endsession>\r\n:3\r\n<closed>");
    assert_eq!(got[20], "$1\r\n1\r\n");
}

/// YES sessions of a few cases: the same transcripts as SYNC's (and
/// Redis's), and nothing they wrote is left behind.
#[test]
fn yes_sessions_match_redis_and_leave_nothing() {
    let cairn = start_cairn(&[]);
    let redis = start_redis(&[]);
    for case in [0, 1, 3, 5] {
        let (script, keys, args, commands) = CASES[case];
        let got = transcript_in("YES", cairn.port, script, keys, args, commands);
        assert_eq!(got, transcript(cairn.port, script, keys, args, commands));
        if let Some(redis) = &redis {
            let want = transcript_in("YES", redis.port, script, keys, args, commands);
            assert_eq!(got, want, "script {script:?}");
        }
        let mut o = Raw::connect(cairn.port);
        o.call(&["FLUSHALL"]);
        let got = transcript_in("YES", cairn.port, script, keys, args, commands);
        assert!(got.contains("<endsession>"), "{got}");
        assert_eq!(o.call(&["DBSIZE"]), ":0\r\n", "case {case} left keys");
    }
}

/// A YES session at its prompt while another client works: each sees its
/// own dataset, the server goes on, SCRIPT KILL finds nothing running,
/// the session's client is gone from CLIENT LIST, and a second session
/// runs beside the first.
fn fork_side_by_side(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    let mut o = Raw::connect(port);
    out.push(o.call(&["FLUSHALL"]));
    out.push(o.call(&["SET", "k", "orig"]));
    let mut c = Raw::connect(port);
    out.push(c.call(&["SCRIPT", "DEBUG", "YES"]));
    let script = "redis.call('set',KEYS[1],ARGV[1])\nreturn redis.call('get',KEYS[1])";
    c.send(&["EVAL", script, "1", "k", "fromfork"]);
    out.push(c.value());
    out.push(o.call(&["GET", "k"]));
    out.push(o.call(&["SET", "other", "v"]));
    let list = o.call(&["CLIENT", "LIST"]);
    out.push(format!(
        "clients listed: {}",
        list.matches(" addr=").count()
    ));
    out.push(o.call(&["SCRIPT", "KILL"]));
    out.push(c.call(&["r", "get", "other"]));
    out.push(c.call(&["s"]));
    out.push(c.call(&["r", "get", "k"]));
    out.push(o.call(&["GET", "k"]));
    // A second session beside the first, with its own copy.
    let mut d = Raw::connect(port);
    out.push(d.call(&["SCRIPT", "DEBUG", "YES"]));
    d.send(&["EVAL", script, "1", "k", "second"]);
    out.push(d.value());
    out.push(d.call(&["r", "get", "other"]));
    out.push(c.call(&["r", "get", "k"]));
    d.send(&["c"]);
    out.push(d.rest());
    c.send(&["c"]);
    out.push(c.rest());
    out.push(o.call(&["GET", "k"]));
    out.push(o.call(&["DBSIZE"]));
    out
}

#[test]
fn yes_sessions_run_beside_the_server_on_their_own_copy() {
    let cairn = start_cairn(&["--server-threads", "2"]);
    let got = fork_side_by_side(cairn.port);
    if let Some(redis) = start_redis(&[]) {
        assert_eq!(got, fork_side_by_side(redis.port));
    }
    assert_eq!(got[4], "$4\r\norig\r\n");
    assert_eq!(got[5], "+OK\r\n");
    assert_eq!(got[6], "clients listed: 1");
    assert_eq!(got[7], "-NOTBUSY No scripts in execution right now.\r\n");
    assert_eq!(got[8], "*2\r\n+<redis> get other\r\n+<reply> NULL\r\n");
    assert_eq!(got[10], "*2\r\n+<redis> get k\r\n+<reply> \"fromfork\"\r\n");
    assert_eq!(got[11], "$4\r\norig\r\n");
    assert_eq!(got[14], "*2\r\n+<redis> get other\r\n+<reply> \"v\"\r\n");
    assert_eq!(got[16], "*1\r\n+<endsession>\r\n$6\r\nsecond\r\n<closed>");
    assert_eq!(got[17], "*1\r\n+<endsession>\r\n$8\r\nfromfork\r\n<closed>");
    assert_eq!(got[18], "$4\r\norig\r\n");
    assert_eq!(got[19], ":2\r\n");
}

fn memory_field(c: &mut Raw, name: &str) -> u64 {
    let info = c.call(&["INFO", "memory"]);
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .expect(name);
    line.trim().parse().unwrap()
}

fn used_memory(c: &mut Raw) -> u64 {
    memory_field(c, "used_memory")
}

/// The copy costs about the dataset while the session lasts and is freed
/// when its client goes mid-session; past maxmemory it is refused, the
/// connection kept and debugging off (as when Redis's fork fails).
#[test]
fn yes_copy_is_freed_on_disconnect_and_refused_past_maxmemory() {
    let cairn = start_cairn(&[]);
    let mut o = Raw::connect(cairn.port);
    let fill = "for i = 1, 40000 do redis.call('set', 'key:' .. i, string.rep('x', 100)) end";
    assert_eq!(o.call(&["EVAL", fill, "0"]), "$-1\r\n");
    let before = used_memory(&mut o);
    let mut c = Raw::connect(cairn.port);
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "YES"]), "+OK\r\n");
    c.send(&["EVAL", "return redis.call('dbsize')", "0"]);
    assert!(c.value().contains("Stopped at 1"));
    assert_eq!(
        c.call(&["r", "dbsize"]),
        "*2\r\n+<redis> dbsize\r\n+<reply> 40000\r\n"
    );
    let during = used_memory(&mut o);
    assert!(
        during > before + 3_000_000,
        "before {before}, during {during}"
    );
    drop(c);
    let mut after = during;
    for _ in 0..100 {
        after = used_memory(&mut o);
        if after < before + 1_000_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(after < before + 1_000_000, "before {before}, after {after}");

    // Room for half a copy only.
    let startup = memory_field(&mut o, "used_memory_startup");
    let max = (before + (before - startup) / 2).to_string();
    assert_eq!(o.call(&["CONFIG", "SET", "maxmemory", &max]), "+OK\r\n");
    let mut c = Raw::connect(cairn.port);
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "YES"]), "+OK\r\n");
    let r = c.call(&["EVAL", "return 1", "0"]);
    assert!(
        r.starts_with("-ERR Can't run EVAL in debugging mode: a private copy of the dataset"),
        "{r}"
    );
    assert!(r.contains("maxmemory"), "{r}");
    assert_eq!(c.call(&["EVAL", "return 1", "0"]), ":1\r\n");
}

#[test]
fn other_clients_get_busy_during_a_long_session() {
    let cairn = start_cairn(&["--busy-reply-threshold", "100", "--server-threads", "2"]);
    let mut c = Raw::connect(cairn.port);
    assert_eq!(c.call(&["SCRIPT", "DEBUG", "SYNC"]), "+OK\r\n");
    c.send(&["EVAL", "return 1", "0"]);
    assert!(c.value().contains("Stopped at 1"));
    std::thread::sleep(Duration::from_millis(400));
    // Some connection lands on the other worker: it is told BUSY.
    let mut busy = false;
    for _ in 0..8 {
        let mut o = Raw::connect(cairn.port);
        o.s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        o.send(&["PING"]);
        let mut chunk = [0u8; 256];
        if let Ok(n) = o.s.read(&mut chunk) {
            if chunk[..n].starts_with(b"-BUSY") {
                busy = true;
                break;
            }
        }
    }
    assert!(busy, "no client was told BUSY");
    c.send(&["c"]);
    assert_eq!(c.rest(), "*1\r\n+<endsession>\r\n:1\r\n<closed>");
    let mut o = Raw::connect(cairn.port);
    assert_eq!(o.call(&["PING"]), "+PONG\r\n");
}

fn redis_cli() -> Option<PathBuf> {
    let p = std::env::var_os("PATH")?;
    std::env::split_paths(&p)
        .map(|d| d.join("redis-cli"))
        .find(|p| p.is_file())
}

fn cli_session(cli: &PathBuf, server: &Server, file: &PathBuf, input: &str) -> String {
    cli_session_in("--ldb-sync-mode", cli, server, file, input)
}

/// A `redis-cli` debugging session, `mode` `--ldb` or `--ldb-sync-mode`.
fn cli_session_in(
    mode: &str,
    cli: &PathBuf,
    server: &Server,
    file: &PathBuf,
    input: &str,
) -> String {
    let mut child = Command::new(cli)
        .args(["-p", &server.port.to_string(), mode, "--eval"])
        .arg(file)
        .args(["k1", ",", "v1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn redis_cli_ldb_sync_mode_drives_a_session() {
    let Some(cli) = redis_cli() else {
        // scripts/test installs it (Debian's redis-tools).
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-cli is required in CI (apt-get install -y redis-tools)"
        );
        eprintln!("redis-cli not installed: skipped");
        return;
    };
    let file = std::env::temp_dir().join(format!("cairn-ldb-{}.lua", std::process::id()));
    std::fs::write(
        &file,
        "local a = 1\nredis.call('set', KEYS[1], ARGV[1])\nreturn redis.call('get', KEYS[1])\n",
    )
    .unwrap();
    let cairn = start_cairn(&[]);
    let got = cli_session(&cli, &cairn, &file, "s\np\ns\nb 3\nc\n");
    assert!(got.contains("<value> a = 1"), "{got}");
    assert!(got.contains("<redis> set k1 v1"), "{got}");
    assert!(got.contains("\"v1\""), "{got}");
    let redis = start_redis(&[]);
    if let Some(redis) = &redis {
        assert_eq!(got, cli_session(&cli, redis, &file, "s\np\ns\nb 3\nc\n"));
    }
    // `--ldb`, redis-cli's default mode, is YES: the same session, and
    // its write is gone after.
    let forked = cli_session_in("--ldb", &cli, &cairn, &file, "s\np\ns\nb 3\nc\n");
    assert!(forked.contains("<redis> set k1 v1"), "{forked}");
    assert!(forked.contains("rolled back"), "{forked}");
    if let Some(redis) = &redis {
        let want = cli_session_in("--ldb", &cli, redis, &file, "s\np\ns\nb 3\nc\n");
        assert_eq!(forked, want);
    }
    let mut o = Raw::connect(cairn.port);
    o.call(&["DEL", "k1"]);
    let _ = cli_session_in("--ldb", &cli, &cairn, &file, "c\n");
    assert_eq!(o.call(&["EXISTS", "k1"]), ":0\r\n");
    let _ = std::fs::remove_file(&file);
}
