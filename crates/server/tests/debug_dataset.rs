//! DEBUG DIGEST, DIGEST-VALUE and RELOAD end to end: digests of a dataset
//! of every type equal to redis-server's for the same commands (when one
//! is installed; the differential corpus, `tests/diff/debug_digest.txt`,
//! compares line by line), and DEBUG RELOAD's save / flush / load round
//! trip with its MERGE, NOFLUSH and NOSAVE options.
mod support;

use redis::Connection;
use support::{start_cairn, start_redis, Server, TestDir};

fn run(c: &mut Connection, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn text(c: &mut Connection, args: &[&str]) -> String {
    match run(c, args).unwrap() {
        redis::Value::SimpleString(s) => s,
        redis::Value::Okay => "OK".into(),
        other => panic!("{args:?}: {other:?}"),
    }
}

fn digest(c: &mut Connection) -> String {
    text(c, &["DEBUG", "DIGEST"])
}

/// Commands that build one key of every type and encoding, TTLs and a
/// second database.
fn dataset() -> Vec<Vec<String>> {
    let mut cmds: Vec<Vec<String>> = [
        "SET s hello",
        "SET n 12345",
        "RPUSH l a b 1 2",
        "SADD si 1 2 3",
        "SADD ss a b c",
        "ZADD z 1 a 2.5 b 1.1 c",
        "HSET h f v g 2",
        "XADD x 1-1 f v",
        "XADD x 1-2 f w g 1",
        "XGROUP CREATE x grp 0",
        "SET e v EX 100000",
        "SELECT 1",
        "SET other 1",
        "SELECT 0",
    ]
    .iter()
    .map(|l| l.split(' ').map(String::from).collect())
    .collect();
    let mut big = vec!["SADD".to_string(), "sbig".into()];
    big.extend((0..300).map(|i| format!("m{i}")));
    cmds.push(big);
    let mut big = vec!["HSET".to_string(), "hbig".into()];
    big.extend((0..300).flat_map(|i| [format!("f{i}"), format!("{}", i * 7)]));
    cmds.push(big);
    let mut big = vec!["ZADD".to_string(), "zbig".into()];
    big.extend((0..300).flat_map(|i| [format!("{}", f64::from(i) / 3.0), format!("z{i}")]));
    cmds.push(big);
    let mut big = vec!["RPUSH".to_string(), "lbig".into()];
    big.extend((0..1000).map(|i| format!("element-{i}")));
    cmds.push(big);
    cmds
}

fn load(c: &mut Connection) {
    for cmd in dataset() {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        run(c, &args).unwrap();
    }
}

fn cairn_in(dir: &TestDir) -> Server {
    start_cairn(&[
        "--enable-debug-command",
        "yes",
        "--dir",
        dir.0.to_str().unwrap(),
    ])
}

#[test]
fn digest_equals_redis_for_every_type() {
    let Some(redis) = start_redis(&[]) else {
        eprintln!("no redis-server: skipped");
        return;
    };
    let dir = TestDir::new("debug", "digest");
    let cairn = cairn_in(&dir);
    let mut r = support::redis_client(redis.port);
    let mut c = support::redis_client(cairn.port);
    assert_eq!(digest(&mut c), "0".repeat(40));
    load(&mut r);
    load(&mut c);
    assert_eq!(digest(&mut c), digest(&mut r));
    let keys = [
        "s", "n", "l", "si", "ss", "z", "h", "x", "e", "sbig", "hbig", "zbig", "lbig", "none",
    ];
    let mut args = vec!["DEBUG", "DIGEST-VALUE"];
    args.extend(keys);
    let theirs: Vec<String> = redis::cmd("DEBUG").arg(&args[1..]).query(&mut r).unwrap();
    let ours: Vec<String> = redis::cmd("DEBUG").arg(&args[1..]).query(&mut c).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(ours.last().unwrap(), &"0".repeat(40));
}

#[test]
fn reload_saves_flushes_and_loads_back() {
    let dir = TestDir::new("debug", "reload");
    let cairn = cairn_in(&dir);
    let mut c = support::redis_client(cairn.port);
    load(&mut c);
    let before = digest(&mut c);
    assert_ne!(before, "0".repeat(40));
    assert_eq!(text(&mut c, &["DEBUG", "RELOAD"]), "OK");
    assert!(dir.0.join("dump.cairn").exists());
    assert_eq!(digest(&mut c), before);
    let ttl: i64 = redis::cmd("TTL").arg("e").query(&mut c).unwrap();
    assert!(ttl > 99_000, "{ttl}");

    // NOSAVE loads the file as it is: a key written since goes away.
    text(&mut c, &["SET", "late", "1"]);
    assert_eq!(text(&mut c, &["DEBUG", "RELOAD", "NOSAVE"]), "OK");
    assert_eq!(digest(&mut c), before);

    // NOFLUSH MERGE keeps keys the file lacks; the file's win the others.
    text(&mut c, &["SET", "late", "1"]);
    text(&mut c, &["SET", "s", "changed"]);
    assert_eq!(
        text(&mut c, &["debug", "reload", "nosave", "noflush", "merge"]),
        "OK"
    );
    let s: String = redis::cmd("GET").arg("s").query(&mut c).unwrap();
    assert_eq!(s, "hello");
    let late: String = redis::cmd("GET").arg("late").query(&mut c).unwrap();
    assert_eq!(late, "1");

    // NOFLUSH without MERGE meets a key the file has: an error (Redis
    // stops the server), and the server goes on.
    let err = run(&mut c, &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("Error trying to load the RDB dump, check server logs."),
        "{err}"
    );
    assert_eq!(text(&mut c, &["PING"]), "PONG");

    let err = run(&mut c, &["DEBUG", "RELOAD", "FOO"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options."),
        "{err}"
    );
}

#[test]
fn reload_nosave_without_a_file_fails() {
    let dir = TestDir::new("debug", "nofile");
    let cairn = cairn_in(&dir);
    let mut c = support::redis_client(cairn.port);
    text(&mut c, &["SET", "k", "v"]);
    let err = run(&mut c, &["DEBUG", "RELOAD", "NOSAVE"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("Error trying to load the RDB dump, check server logs."),
        "{err}"
    );
    assert!(cairn
        .log()
        .contains("DEBUG RELOAD failed loading the snapshot"));
}
