//! The configuration's tests: loading, CONFIG GET/SET/REWRITE round trips
//! and error texts, against what `redis-server` 7.0 does.

use super::load::*;
use super::types::*;
use super::*;

fn s(v: &str) -> String {
    v.to_string()
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| a.to_string()).collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn get1(c: &Config, name: &str) -> String {
    let got = c.get(name);
    assert_eq!(got.len(), 1, "{name}: {got:?}");
    got[0].1.clone()
}

fn line_error(e: ConfigError) -> (Origin, usize, String, String) {
    match e {
        ConfigError::Line {
            origin,
            line,
            text,
            reason,
        } => (origin, line, text, reason),
        other => panic!("expected a line error, got {other:?}"),
    }
}

fn parse_err(text: &str) -> (usize, String, String) {
    let (_, line, text, reason) = line_error(parse_str(text, "test.conf").expect_err(text));
    (line, text, reason)
}

fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "cairn-config-test-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn load_args(argv: &[&str]) -> Result<Config, ConfigError> {
    load_from(&args(argv), &mut io::empty())
}

#[test]
fn every_default_parses_and_fits_its_field() {
    for d in TABLE {
        let v = d
            .default_value()
            .unwrap_or_else(|e| panic!("{}: {e}", d.name));
        let mut c = Config::zeroed();
        d.store(&mut c, &v).unwrap();
        assert_eq!((d.get)(&c), v, "{}", d.name);
    }
}

#[test]
fn integer_bounds_fit_their_fields() {
    for d in TABLE {
        if let Kind::Int { min, max } | Kind::Memory { min, max } = d.kind {
            let mut c = Config::default();
            for n in [min, max] {
                d.store(&mut c, &Value::Int(n))
                    .unwrap_or_else(|e| panic!("{} {n}: {e}", d.name));
            }
        }
    }
}

#[test]
fn table_names_are_unique_and_lowercase() {
    let mut seen = HashSet::new();
    for d in TABLE {
        for n in std::iter::once(d.name).chain(d.alias) {
            assert_eq!(n, n.to_ascii_lowercase());
            assert!(seen.insert(n), "duplicate {n}");
        }
    }
}

#[test]
fn defaults() {
    let c = Config::default();
    assert_eq!(c.bind, vec![s("127.0.0.1")]);
    assert_eq!(c.port, 6379);
    assert_eq!(c.databases, 16);
    assert_eq!(c.requirepass, "");
    assert_eq!(c.maxclients, 10000);
    assert_eq!(c.timeout, 0);
    assert_eq!(c.tcp_keepalive, 300);
    assert_eq!(c.tcp_backlog, 511);
    assert!(c.protected_mode);
    assert_eq!(c.proto_max_bulk_len, 512 * 1024 * 1024);
    assert_eq!(c.client_query_buffer_limit, 1024 * 1024 * 1024);
    assert_eq!(c.loglevel, LogLevel::Notice);
    assert_eq!(c.logfile, "");
    assert_eq!(c.pidfile, "");
    assert!(!c.daemonize);
    assert_eq!(c.dir, ".");
    assert_eq!(c.dbfilename, "dump.cairn");
    assert!(!c.appendonly);
    assert_eq!(c.appendfilename, "appendonly.aof");
    assert_eq!(c.appendfsync, AppendFsync::Everysec);
    assert!(c.save.is_empty());
    assert_eq!(c.maxmemory, 0);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::Noeviction);
    assert_eq!(c.maxmemory_samples, 5);
    assert_eq!(c.hz, 10);
    assert!(c.dynamic_hz);
    assert_eq!(c.notify_keyspace_events, KeyspaceEvents(0));
    assert_eq!(c.slowlog_log_slower_than, 10000);
    assert_eq!(c.slowlog_max_len, 128);
    assert!(c.latency_tracking);
    assert_eq!(c.enable_debug_command, ProtectedAction::No);
    assert_eq!(c.enable_protected_configs, ProtectedAction::No);
    assert_eq!(c.hash_max_listpack_entries, 512);
    assert_eq!(c.hash_max_listpack_value, 1024);
    assert_eq!(c.set_max_intset_entries, 512);
    assert_eq!(c.set_max_listpack_entries, 128);
    assert_eq!(c.set_max_listpack_value, 64);
    assert_eq!(c.zset_max_listpack_entries, 128);
    assert_eq!(c.zset_max_listpack_value, 1024);
    assert_eq!(c.list_max_listpack_size, -2);
    assert!(!c.lazyfree_lazy_user_del && !c.lazyfree_lazy_user_flush);
    assert!(!c.lazyfree_lazy_expire && !c.lazyfree_lazy_eviction);
    assert_eq!(c.active_expire_effort, 1);
    let o = c.client_output_buffer_limit;
    assert_eq!(o.normal, ClientBufferLimit::default());
    assert_eq!(
        o.replica,
        ClientBufferLimit {
            hard_bytes: 256 << 20,
            soft_bytes: 64 << 20,
            soft_seconds: 60
        }
    );
    assert_eq!(
        o.pubsub,
        ClientBufferLimit {
            hard_bytes: 32 << 20,
            soft_bytes: 8 << 20,
            soft_seconds: 60
        }
    );
    assert_eq!(c.server_threads, 0);
    assert_eq!(c.memcached_port, 0);
    assert_eq!(c.io_threads, 1);
    assert_eq!(c.config_file(), None);
    assert_eq!(parse_str("", "empty").unwrap(), c);
}

#[test]
fn default_rendering_matches_redis() {
    // Values redis-server 7.0.15 reports, except Cairn's own defaults.
    let c = Config::default();
    for (name, want) in [
        ("bind", "127.0.0.1"),
        ("port", "6379"),
        ("requirepass", ""),
        ("protected-mode", "yes"),
        ("proto-max-bulk-len", "536870912"),
        ("client-query-buffer-limit", "1073741824"),
        ("loglevel", "notice"),
        ("appendfsync", "everysec"),
        ("save", ""),
        ("maxmemory-policy", "noeviction"),
        ("notify-keyspace-events", ""),
        ("enable-debug-command", "no"),
        ("list-max-ziplist-size", "-2"),
        (
            "client-output-buffer-limit",
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        ),
        ("io-threads", "1"),
        ("dir", "."),
    ] {
        assert_eq!(get1(&c, name), want, "{name}");
    }
}

#[test]
fn file_parsing_comments_quotes_blank_lines() {
    let text = "# a comment\n\
                \n\
                \t  port 7000  \r\n\
                MAXMEMORY 100mb\n\
                requirepass \"p a\\x41ss\\n\"\n\
                logfile 'it\\'s.log'\n\
                bind 10.0.0.1 -::1\n\
                \x20  # indented comment\n\
                save \"\"\n\
                maxmemory-policy ALLKEYS-LRU\n\
                hash-max-ziplist-entries 100\n\
                appendonly No\n\
                client-output-buffer-limit replica 1gb 512mb 30 pubsub 0 0 0\n\
                notify-keyspace-events KEA\n\
                slowlog-log-slower-than -1\n\
                list-max-ziplist-size 8\n";
    let c = parse_str(text, "t.conf").unwrap();
    assert_eq!(c.port, 7000);
    assert_eq!(c.maxmemory, 100 << 20);
    assert_eq!(c.requirepass, "p aAss\n");
    assert_eq!(c.logfile, "it's.log");
    assert_eq!(c.bind, args(&["10.0.0.1", "-::1"]));
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::AllkeysLru);
    assert_eq!(c.hash_max_listpack_entries, 100);
    assert!(!c.appendonly);
    assert_eq!(
        c.client_output_buffer_limit.replica,
        ClientBufferLimit {
            hard_bytes: 1 << 30,
            soft_bytes: 512 << 20,
            soft_seconds: 30
        }
    );
    assert_eq!(
        c.client_output_buffer_limit.pubsub,
        ClientBufferLimit::default()
    );
    assert_eq!(
        c.client_output_buffer_limit.normal,
        ClientBufferLimit::default()
    );
    assert_eq!(c.notify_keyspace_events.to_string(), "AKE");
    assert_eq!(c.slowlog_log_slower_than, -1);
    assert_eq!(c.list_max_listpack_size, 8);
    // Later lines win.
    assert_eq!(parse_str("port 1\nport 2\n", "t").unwrap().port, 2);
    // A quoted single argument of a list directive is split.
    assert_eq!(
        parse_str("bind \"1.1.1.1 2.2.2.2\"", "t").unwrap().bind,
        args(&["1.1.1.1", "2.2.2.2"])
    );
    assert!(parse_str("bind \"\"", "t").unwrap().bind.is_empty());
    // Windows line endings and no final newline.
    assert_eq!(parse_str("port 1\r\ntimeout 5", "t").unwrap().timeout, 5);
}

#[test]
fn hz_is_clamped() {
    assert_eq!(parse_str("hz 0", "t").unwrap().hz, 1);
    assert_eq!(parse_str("hz 100000", "t").unwrap().hz, 500);
    let mut c = Config::default();
    c.set(&pairs(&[("hz", "1000")])).unwrap();
    assert_eq!(get1(&c, "hz"), "500");
    assert_eq!(
        c.set(&pairs(&[("hz", "-5")])).unwrap_err(),
        "ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 0 and 2147483647 inclusive"
    );
}

#[test]
fn file_errors_name_line_and_reason() {
    for (text, line, shown, reason) in [
        ("port 1\nfoo bar\n", 2, "foo bar", "Bad directive or wrong number of arguments"),
        ("port abc", 1, "port abc", "argument couldn't be parsed into an integer"),
        ("port 1 2", 1, "port 1 2", "wrong number of arguments"),
        ("port", 1, "port", "wrong number of arguments"),
        ("port 70000", 1, "port 70000", "argument must be between 0 and 65535 inclusive"),
        ("port 01", 1, "port 01", "argument couldn't be parsed into an integer"),
        ("maxmemory 1x", 1, "maxmemory 1x", "argument must be a memory value"),
        ("maxmemory -1", 1, "maxmemory -1", "argument must be a memory value"),
        ("proto-max-bulk-len 1000", 1, "proto-max-bulk-len 1000", "argument must be between 1048576 and 9223372036854775807 inclusive"),
        ("protected-mode maybe", 1, "protected-mode maybe", "argument must be 'yes' or 'no'"),
        ("loglevel loud", 1, "loglevel loud", "argument(s) must be one of the following: debug, verbose, notice, warning"),
        (
            "maxmemory-policy lru",
            1,
            "maxmemory-policy lru",
            "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction",
        ),
        ("enable-debug-command maybe", 1, "enable-debug-command maybe", "argument(s) must be one of the following: no, yes, local"),
        ("requirepass \"abc", 1, "requirepass \"abc", "Unbalanced quotes in configuration line"),
        ("requirepass \"a\"b", 1, "requirepass \"a\"b", "Unbalanced quotes in configuration line"),
        ("save 1 2 3", 1, "save 1 2 3", "Invalid save parameters"),
        ("save 0 1", 1, "save 0 1", "Invalid save parameters"),
        ("client-output-buffer-limit normal 1 2", 1, "client-output-buffer-limit normal 1 2", "Wrong number of arguments in buffer limit configuration."),
        ("client-output-buffer-limit master 1 2 3", 1, "client-output-buffer-limit master 1 2 3", "Invalid client class specified in buffer limit configuration."),
        ("client-output-buffer-limit normal 1x 2 3", 1, "client-output-buffer-limit normal 1x 2 3", "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
        ("client-output-buffer-limit normal 1 2 -3", 1, "client-output-buffer-limit normal 1 2 -3", "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
        ("notify-keyspace-events Q", 1, "notify-keyspace-events Q", "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
        ("dbfilename a/b", 1, "dbfilename a/b", "dbfilename can't be a path, just a filename"),
        ("appendfilename \"\"", 1, "appendfilename \"\"", "appendfilename can't be empty"),
        ("appendfilename x/y", 1, "appendfilename x/y", "appendfilename can't be a path, just a filename"),
        ("bind a b c d e f g h i j k l m n o p q", 1, "bind a b c d e f g h i j k l m n o p q", "Too many bind addresses specified."),
        ("dir /nonexistent-cairn-dir", 1, "dir /nonexistent-cairn-dir", "No such file or directory"),
        ("active-expire-effort 11", 1, "active-expire-effort 11", "argument must be between 1 and 10 inclusive"),
        ("io-threads 0", 1, "io-threads 0", "argument must be between 1 and 128 inclusive"),
        ("rename-command FLUSHALL \"\"", 1, "rename-command FLUSHALL \"\"", "rename-command is not supported by Cairn"),
        ("include", 1, "include", "Bad directive or wrong number of arguments"),
    ] {
        assert_eq!(parse_err(text), (line, s(shown), s(reason)), "{text}");
    }
}

#[test]
fn unsupported_values_are_refused_clearly() {
    assert!(parse_str("appendonly yes", "t").unwrap().appendonly);
    let (_, _, reason) = parse_err("appenddirname a/b");
    assert_eq!(reason, "appenddirname can't be a path, just a dirname");
    assert_eq!(
        parse_str("save 3600 1\nsave 60 5", "t").unwrap().save,
        vec![
            SaveRule {
                seconds: 3600,
                changes: 1
            },
            SaveRule {
                seconds: 60,
                changes: 5
            }
        ]
    );
    assert!(parse_str("daemonize yes", "t").unwrap().daemonize);
    // replicaof host port, kept as one string the server reads at start.
    for (line, want) in [
        ("replicaof 127.0.0.1 6379", "127.0.0.1 6379"),
        ("slaveof 127.0.0.1 6379", "127.0.0.1 6379"),
        ("REPLICAOF no one", ""),
    ] {
        assert_eq!(parse_str(line, "t").unwrap().replicaof, want, "{line}");
    }
    for line in ["replicaof 127.0.0.1 70000", "replicaof 127.0.0.1"] {
        parse_err(line);
    }
    assert!(
        !parse_str("daemonize no\nappendonly no\nsave ''", "t")
            .unwrap()
            .daemonize
    );

    let mut c = Config::default();
    assert_eq!(c, Config::default());
    c.set(&pairs(&[("save", "3600 1")])).unwrap();
    let rule = SaveRule {
        seconds: 3600,
        changes: 1,
    };
    assert_eq!(c.save, vec![rule]);
}

#[test]
fn proc_title_template_validation_follows_redis() {
    for ok in [
        "{title} {listen-addr} {server-mode}",
        "{{",
        "}",
        "x{{y}",
        "{port}",
        "{tls-port}",
        "{config-file}",
        "plain",
        " {title} {port} ",
    ] {
        assert!(proc_title_template_is_valid(ok), "{ok}");
    }
    for bad in [
        "",
        "  ",
        "{title}",
        "{server-mode}",
        "{unixsocket}",
        "{title} {server-mode}",
        "{",
        "a{",
        "{title",
        "{nosuch}",
        "{port",
        "{}",
    ] {
        assert!(!proc_title_template_is_valid(bad), "{bad}");
    }
    let mut c = Config::default();
    let e = c
        .set(&pairs(&[("proc-title-template", "{title}")]))
        .unwrap_err();
    assert_eq!(e, "ERR CONFIG SET failed (possibly related to argument 'proc-title-template') - template format is invalid or contains unknown variables");
    let (_, _, reason) = parse_err("proc-title-template \"{nosuch}\"");
    assert_eq!(
        reason,
        "template format is invalid or contains unknown variables"
    );
}

#[test]
fn oom_score_adj_values_follow_redis() {
    let parse = |a: &[&str]| parse_oom_values(&args(a));
    assert_eq!(
        parse(&["0", "200", "800"]),
        Ok(Value::Oom(OomScoreAdjValues([0, 200, 800])))
    );
    // strtoll: sign and leading spaces are fine, an empty word is 0.
    assert_eq!(
        parse(&["+1", " -2", ""]),
        Ok(Value::Oom(OomScoreAdjValues([1, -2, 0])))
    );
    assert_eq!(
        parse(&["-2000", "2000", "0"]),
        Ok(Value::Oom(OomScoreAdjValues([-2000, 2000, 0])))
    );
    const RANGE: &str = "Invalid oom-score-adj-values, elements must be between -2000 and 2000.";
    for bad in [
        &["1", "2", "2001"][..],
        &["-2001", "0", "0"],
        &["1", "2", "x"],
        &["1", "2", "3 "],
    ] {
        assert_eq!(parse(bad), Err(RANGE.to_string()), "{bad:?}");
    }
    for bad in [&["1", "2"][..], &["1", "2", "3", "4"], &[]] {
        assert_eq!(
            parse(bad),
            Err("wrong number of arguments".to_string()),
            "{bad:?}"
        );
    }
    // CONFIG SET splits on single spaces: a double space is a 4th word.
    let mut c = Config::default();
    let e = c
        .set(&pairs(&[("oom-score-adj-values", "1  2 3")]))
        .unwrap_err();
    assert!(e.ends_with("- wrong number of arguments"), "{e}");
    c.set(&pairs(&[("oom-score-adj-values", "10 20 30")]))
        .unwrap();
    assert_eq!(get1(&c, "oom-score-adj-values"), "10 20 30");
    // From a file and the command line: words, or one quoted argument.
    let f = parse_str("oom-score-adj-values -5 0 900", "t").unwrap();
    assert_eq!(f.oom_score_adj_values, OomScoreAdjValues([-5, 0, 900]));
    let l = load_args(&["--oom-score-adj-values", "1 2 3"]).unwrap();
    assert_eq!(l.oom_score_adj_values, OomScoreAdjValues([1, 2, 3]));
    let text = String::from_utf8(l.rewrite_text(b"")).unwrap();
    assert!(text.contains("\noom-score-adj-values 1 2 3\n"), "{text}");
}

#[test]
fn oom_score_adj_relative_reads_back_as_yes() {
    let mut c = Config::default();
    assert_eq!(get1(&c, "oom-score-adj"), "no");
    c.set(&pairs(&[("oom-score-adj", "RELATIVE")])).unwrap();
    assert_eq!(c.oom_score_adj, OomScoreAdj::Relative);
    assert_eq!(get1(&c, "oom-score-adj"), "yes");
    // `yes` after `relative` is no change.
    assert_eq!(
        c.set(&pairs(&[("oom-score-adj", "yes")])).unwrap(),
        Vec::<&str>::new()
    );
    c.set(&pairs(&[("oom-score-adj", "absolute")])).unwrap();
    assert_eq!(get1(&c, "oom-score-adj"), "absolute");
    assert_eq!(
        parse_str("oom-score-adj relative", "t")
            .unwrap()
            .oom_score_adj,
        OomScoreAdj::Relative
    );
    let e = c.set(&pairs(&[("oom-score-adj", "on")])).unwrap_err();
    assert!(
        e.ends_with("argument(s) must be one of the following: no, yes, relative, absolute"),
        "{e}"
    );
}

#[test]
fn stock_redis_conf_directives_parse_with_redis_defaults() {
    let c = parse_str(
        include_str!("../../tests/data/redis-7.0-stock.conf")
            .replace("dir /var/lib/redis", "dir /")
            .as_str(),
        "redis.conf",
    )
    .unwrap();
    assert!(c.daemonize);
    assert_eq!(c.pidfile, "/run/redis/redis-server.pid");
    // Stored exactly as Redis shows them (a sample; the integration
    // test config_compat checks every one over the wire).
    for (name, want) in [
        ("repl-diskless-load", "disabled"),
        ("hll-sparse-max-bytes", "3000"),
        ("oom-score-adj-values", "0 200 800"),
        ("slave-priority", "100"),
        ("replicaof", ""),
        ("stream-node-max-bytes", "4096"),
        ("proc-title-template", "{title} {listen-addr} {server-mode}"),
    ] {
        assert_eq!(get1(&c, name), want, "{name}");
    }
    // Immutable as in Redis.
    let mut c = Config::default();
    for name in [
        "always-show-logo",
        "set-proc-title",
        "disable-thp",
        "daemonize",
        "replicaof",
        "slaveof",
    ] {
        let e = c.set(&pairs(&[(name, "no")])).unwrap_err();
        assert!(e.ends_with("- can't set immutable config"), "{name}: {e}");
    }
    // Bounds.
    let e = c.set(&pairs(&[("replica-priority", "-1")])).unwrap_err();
    assert!(
        e.ends_with("argument must be between 0 and 2147483647 inclusive"),
        "{e}"
    );
    let e = c
        .set(&pairs(&[("hll-sparse-max-bytes", "99999999999999999999")]))
        .unwrap_err();
    assert!(
        e.ends_with("argument must be between 0 and 9223372036854775807 inclusive"),
        "{e}"
    );
}

#[test]
fn error_display_is_redis_style_with_origin() {
    let e = parse_str("port 1\n\nport abc\n", "/etc/cairn.conf").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "*** FATAL CONFIG FILE ERROR (Cairn {VERSION}) ***\n\
             Reading the configuration file, at line 3 of '/etc/cairn.conf'\n\
             >>> 'port abc'\n\
             argument couldn't be parsed into an integer"
        )
    );
    let e = load_args(&["--port", "6380", "--maxmemory", "1x"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "*** FATAL CONFIG FILE ERROR (Cairn {VERSION}) ***\n\
             Reading the configuration file, at line 2 of the command line\n\
             >>> 'maxmemory \"1x\"'\n\
             argument must be a memory value"
        )
    );
    let e = load_args(&["/nonexistent/cairn.conf"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Fatal error, can't open config file '/nonexistent/cairn.conf': No such file or directory"
    );
}

#[test]
fn command_line_synthesis_follows_redis() {
    let lines = |a: &[&str]| command_line_lines(&args(a), 0, a.len()).0;
    assert_eq!(
        lines(&["--port", "6380", "--maxmemory", "1gb"]),
        vec![s("port \"6380\" "), s("maxmemory \"1gb\" ")]
    );
    assert_eq!(
        lines(&["--save", "--port", "1"]),
        vec![s("save \"\""), s("port \"1\" ")]
    );
    assert_eq!(
        lines(&["--port", "1", "--save"]),
        vec![s("port \"1\" "), s("save \"\"")]
    );
    assert_eq!(lines(&["--save", ""]), vec![s("save \"\" ")]);
    assert_eq!(
        lines(&["--requirepass", "--x"]),
        vec![s("requirepass \"--x\" ")]
    );
    assert_eq!(
        lines(&["--port 6380", "--timeout", "5"]),
        vec![s("port 6380 "), s("timeout \"5\" ")]
    );
    assert_eq!(
        lines(&["--bind", "1.1.1.1", "::1"]),
        vec![s("bind \"1.1.1.1\" \"::1\" ")]
    );
    assert_eq!(lines(&["stray"]), vec![s("\"stray\" ")]);
    assert_eq!(lines(&["--loglevel"]), vec![s("loglevel ")]);
    let (l, stdin) = command_line_lines(&args(&["--port", "1", "-"]), 0, 3);
    assert!(stdin);
    assert_eq!(l, vec![s("port \"1\" ")]);
}

#[test]
fn command_line_loading() {
    let c = load_args(&[
        "--port",
        "6380",
        "--maxmemory",
        "1gb",
        "--save",
        "",
        "--bind",
        "127.0.0.1 ::1",
    ])
    .unwrap();
    assert_eq!(c.port, 6380);
    assert_eq!(c.maxmemory, 1 << 30);
    assert!(c.save.is_empty());
    assert_eq!(c.bind, args(&["127.0.0.1", "::1"]));
    assert_eq!(
        load_args(&["--bind", "127.0.0.1", "-::1"]).unwrap().bind,
        args(&["127.0.0.1", "-::1"])
    );
    assert!(load_args(&["--save"]).unwrap().save.is_empty());
    assert!(Path::new(&load_args(&[]).unwrap().dir).is_absolute());
    assert_eq!(
        load_args(&["--requirepass", "--secret"])
            .unwrap()
            .requirepass,
        "--secret"
    );

    let (origin, line, text, reason) =
        line_error(load_args(&["--port", "1", "--loglevel"]).unwrap_err());
    assert_eq!(
        (origin, line, text.as_str(), reason.as_str()),
        (
            Origin::CommandLine,
            2,
            "loglevel",
            "wrong number of arguments"
        )
    );
    let (_, line, text, reason) = line_error(load_args(&["--port", "1", "2"]).unwrap_err());
    assert_eq!(
        (line, text.as_str(), reason.as_str()),
        (1, "port \"1\" \"2\"", "wrong number of arguments")
    );
    let (_, _, text, reason) = line_error(load_args(&["--nosuch", "x"]).unwrap_err());
    assert_eq!(
        (text.as_str(), reason.as_str()),
        ("nosuch \"x\"", "Bad directive or wrong number of arguments")
    );
    assert!(load_args(&["--daemonize", "yes"]).unwrap().daemonize);
    assert_eq!(
        load_args(&["--replicaof", "127.0.0.1", "6379"])
            .unwrap()
            .replicaof,
        "127.0.0.1 6379"
    );
}

#[test]
fn cli_merges_over_file_and_stdin() {
    let dir = temp_dir("merge");
    let file = dir.join("cairn.conf");
    fs::write(&file, "port 7000\ntimeout 10\nmaxmemory 1mb\n").unwrap();
    let f = file.to_str().unwrap();
    let c = load_args(&[f, "--port", "7001"]).unwrap();
    assert_eq!((c.port, c.timeout, c.maxmemory), (7001, 10, 1 << 20));
    assert_eq!(c.config_file(), Some(file.as_path()));

    let argv = args(&[f, "--timeout", "20", "-"]);
    let c = load_from(&argv, &mut "timeout 15\nmaxmemory 2mb\n".as_bytes()).unwrap();
    assert_eq!((c.port, c.timeout, c.maxmemory), (7000, 20, 2 << 20));

    let c = load_from(&args(&["-"]), &mut "port 7100\n".as_bytes()).unwrap();
    assert_eq!((c.port, c.config_file()), (7100, None));

    let e = load_from(&args(&["-", "--port", "1"]), &mut "\nbogus\n".as_bytes()).unwrap_err();
    assert_eq!(line_error(e).0, Origin::Stdin);

    fs::write(&file, "port 7000\n\nport nope\n").unwrap();
    let (origin, line, _, _) = line_error(load_args(&[f, "--port", "1"]).unwrap_err());
    assert_eq!((origin, line), (Origin::File(s(f)), 3));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn include_files() {
    let dir = temp_dir("include");
    let d = dir.to_str().unwrap();
    fs::create_dir(dir.join("conf.d")).unwrap();
    fs::write(dir.join("conf.d/b.conf"), "timeout 2\n").unwrap();
    fs::write(dir.join("conf.d/a.conf"), "timeout 1\nport 1111\n").unwrap();
    fs::write(dir.join("conf.d/.hidden.conf"), "port 9\n").unwrap();
    fs::write(dir.join("base.conf"), "maxclients 77\n").unwrap();
    let main = format!(
        "include {d}/base.conf\nport 2222\ninclude {d}/conf.d/*.conf\ninclude {d}/empty.d/*.conf\n"
    );
    let c = parse_str(&main, "main").unwrap();
    assert_eq!((c.maxclients, c.port, c.timeout), (77, 1111, 2));

    // Relative includes resolve against the preceding `dir`.
    let c = parse_str(&format!("dir {d}\ninclude base.conf\n"), "main").unwrap();
    assert_eq!(c.maxclients, 77);

    let e = parse_str(&format!("include {d}/missing.conf"), "main").unwrap_err();
    assert_eq!(
        e,
        ConfigError::Read {
            path: format!("{d}/missing.conf"),
            reason: s("No such file or directory")
        }
    );

    fs::write(dir.join("bad.conf"), "\nport x\n").unwrap();
    let (origin, line, _, _) =
        line_error(parse_str(&format!("include {d}/bad.conf"), "main").unwrap_err());
    assert_eq!((origin, line), (Origin::File(format!("{d}/bad.conf")), 2));

    fs::write(dir.join("loop.conf"), format!("include {d}/loop.conf\n")).unwrap();
    let (_, _, _, reason) =
        line_error(parse_str(&format!("include {d}/loop.conf"), "main").unwrap_err());
    assert!(reason.contains("include nesting is too deep"));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dir_is_made_absolute() {
    let dir = temp_dir("dir");
    let c = parse_str(&format!("dir {}", dir.display()), "t").unwrap();
    assert_eq!(Path::new(&c.dir), fs::canonicalize(&dir).unwrap());
    let file = dir.join("f");
    fs::write(&file, "").unwrap();
    assert_eq!(
        parse_err(&format!("dir {}", file.display())).2,
        "Not a directory"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn memory_units() {
    assert_eq!(parse_memory("0"), Some(0));
    assert_eq!(parse_memory("100"), Some(100));
    assert_eq!(parse_memory("100b"), Some(100));
    assert_eq!(parse_memory("1k"), Some(1000));
    assert_eq!(parse_memory("1kb"), Some(1024));
    assert_eq!(parse_memory("1K"), Some(1000));
    assert_eq!(parse_memory("1KB"), Some(1024));
    assert_eq!(parse_memory("2m"), Some(2_000_000));
    assert_eq!(parse_memory("100mb"), Some(100 << 20));
    assert_eq!(parse_memory("1g"), Some(1_000_000_000));
    assert_eq!(parse_memory("1gb"), Some(1 << 30));
    assert_eq!(parse_memory("1Gb"), Some(1 << 30));
    for bad in ["-1", "1x", "1 mb", " 1", "1.5gb", "+1", "1tb", "1kbb"] {
        assert_eq!(parse_memory(bad), None, "{bad}");
    }
    // Redis quirks: no digits is 0, too many digits saturate.
    assert_eq!(parse_memory(""), Some(0));
    assert_eq!(parse_memory("mb"), Some(0));
    assert_eq!(parse_memory("99999999999999999999"), Some(u64::MAX));
    assert_eq!(format_memory(0), "0");
    assert_eq!(format_memory(1 << 30), "1gb");
    assert_eq!(format_memory(3 << 20), "3mb");
    assert_eq!(format_memory(2048), "2kb");
    assert_eq!(format_memory(1000), "1000");
}

#[test]
fn integer_parsing_is_strict() {
    assert_eq!(string_to_i64("-2"), Some(-2));
    assert_eq!(string_to_i64("9223372036854775807"), Some(i64::MAX));
    assert_eq!(string_to_i64("-9223372036854775808"), Some(i64::MIN));
    for bad in [
        "",
        "-",
        "01",
        "-0",
        "+1",
        " 1",
        "1 ",
        "9223372036854775808",
        "1e3",
    ] {
        assert_eq!(string_to_i64(bad), None, "{bad}");
    }
    assert_eq!(strtoll_whole(""), Some(0));
    assert_eq!(strtoll_whole("+5"), Some(5));
    assert_eq!(strtoll_whole(" 5"), Some(5));
    assert_eq!(strtoll_whole(" "), None);
    assert_eq!(strtoll_whole("5x"), None);
}

#[test]
fn split_args_and_repr_round_trip() {
    let w = |line: &str| split_args(line.as_bytes()).map(|v| bytes_to_strings(v).unwrap());
    assert_eq!(
        w("  a  b\t\"c d\" 'e f' "),
        Some(args(&["a", "b", "c d", "e f"]))
    );
    assert_eq!(
        w("\"\\x41\\n\\\"\" 'it\\'s'"),
        Some(args(&["A\n\"", "it's"]))
    );
    assert_eq!(w("a\"b c\""), Some(args(&["ab c"])));
    assert_eq!(w("\"\""), Some(args(&[""])));
    assert_eq!(w(""), Some(vec![]));
    assert_eq!(w("\"abc"), None);
    assert_eq!(w("'abc"), None);
    assert_eq!(w("\"a\"b"), None);
    for original in [
        "plain",
        "with space",
        "q\"uote\\",
        "tab\tnl\n\x07\x08",
        "ünïcode",
        "",
    ] {
        let r = repr(original.as_bytes());
        assert_eq!(w(&r), Some(args(&[original])), "{r}");
    }
    assert_eq!(repr("é".as_bytes()), "\"\\xc3\\xa9\"");
}

#[test]
fn glob_matching() {
    let m = |p: &str, s: &str| string_match(p.as_bytes(), s.as_bytes(), true);
    assert!(m("*", "maxmemory"));
    assert!(m("max*", "MAXMEMORY"));
    assert!(m("m?xmemory", "maxmemory"));
    assert!(m("[a-z]ort", "port"));
    assert!(m("[z-a]ort", "port"));
    assert!(!m("[^p]ort", "port"));
    assert!(m("[^x]ort", "port"));
    assert!(m("po\\rt", "port"));
    assert!(m("*\\*", "a*"));
    assert!(!m("*\\*", "ab"));
    assert!(m("[\\]]", "]"));
    assert!(m("a*b*c", "aXbYc"));
    assert!(!m("a*b*c", "aXbY"));
    assert!(m("*-max-*-entries", "hash-max-ziplist-entries"));
    assert!(!m("port", "ports"));
    assert!(!m("ports", "port"));
    assert!(m("port*", "port"));
    assert!(m("[abc", "a"));
    assert!(!string_match(b"MAX*", b"maxmemory", false));
    // Pathological patterns finish quickly thanks to skip_longer.
    let long = "a".repeat(60);
    assert!(!m(&format!("{}c", "a*".repeat(30)), &format!("{long}b")));
}

#[test]
fn config_get_patterns() {
    let c = Config::default();
    let names = |p: &str| c.get(p).into_iter().map(|(k, _)| k).collect::<Vec<_>>();

    let all = c.get("*");
    let expected = TABLE
        .iter()
        .map(|d| 1 + usize::from(d.alias.is_some()))
        .sum::<usize>();
    assert_eq!(all.len(), expected);
    assert!(all.contains(&(s("hash-max-ziplist-entries"), s("512"))));

    assert_eq!(
        names("maxmemory*"),
        args(&[
            "maxmemory",
            "maxmemory-policy",
            "maxmemory-samples",
            "maxmemory-eviction-tenacity"
        ])
    );
    assert_eq!(
        names("MAXMEM*"),
        args(&[
            "maxmemory",
            "maxmemory-policy",
            "maxmemory-samples",
            "maxmemory-eviction-tenacity"
        ])
    );
    assert_eq!(
        names("*ziplist*"),
        args(&[
            "hash-max-ziplist-entries",
            "hash-max-ziplist-value",
            "zset-max-ziplist-entries",
            "zset-max-ziplist-value",
            "list-max-ziplist-size"
        ])
    );
    assert_eq!(
        names("zset-max-*-entries"),
        args(&["zset-max-listpack-entries", "zset-max-ziplist-entries"])
    );
    assert_eq!(names("[^a-x]*").len(), 4);
    // Exact lookups echo the name as given and accept aliases.
    assert_eq!(c.get("MAXMEMORY"), vec![(s("MAXMEMORY"), s("0"))]);
    assert_eq!(
        c.get("hash-max-ziplist-value"),
        vec![(s("hash-max-ziplist-value"), s("1024"))]
    );
    assert!(c.get("nosuch").is_empty());
    assert!(c.get("").is_empty());
    // A backslash alone doesn't make a pattern.
    assert!(c.get("hash-max-ziplist-\\entries").is_empty());
    let many = c.get_many(&["port", "p*", "timeout"]);
    assert_eq!(
        many.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        vec![
            "port",
            "protected-mode",
            "proto-max-bulk-len",
            "pidfile",
            "proc-title-template",
            "timeout"
        ]
    );
}

#[test]
fn config_get_rendering() {
    let c = parse_str(
        "bind 127.0.0.1 -::1\nmaxmemory 1gb\nnotify-keyspace-events Kmdn$tzhg\nprotected-mode no\n\
         client-output-buffer-limit normal 1mb 2kb 3\nmaxmemory-policy volatile-ttl\nrequirepass secret",
        "t",
    )
    .unwrap();
    assert_eq!(get1(&c, "bind"), "127.0.0.1 -::1");
    assert_eq!(get1(&c, "maxmemory"), "1073741824");
    assert_eq!(get1(&c, "notify-keyspace-events"), "g$hztdnKm");
    assert_eq!(get1(&c, "protected-mode"), "no");
    assert_eq!(get1(&c, "maxmemory-policy"), "volatile-ttl");
    assert_eq!(get1(&c, "requirepass"), "secret");
    assert_eq!(
        get1(&c, "client-output-buffer-limit"),
        "normal 1048576 2048 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    for (flags, shown) in [
        ("KEA", "AKE"),
        ("g$lshzxetdmKE", "AKEm"),
        ("An", "A"),
        ("m", "m"),
        ("", ""),
    ] {
        assert_eq!(
            KeyspaceEvents::parse(flags).unwrap().to_string(),
            shown,
            "{flags}"
        );
    }
    assert!(!format!("{c:?}").contains("secret"));
}

#[test]
fn config_set_basics() {
    let mut c = Config::default();
    let changed = c
        .set(&pairs(&[
            ("maxmemory", "1GB"),
            ("MAXMEMORY-POLICY", "allkeys-lru"),
            ("timeout", "0"),
        ]))
        .unwrap();
    assert_eq!(changed, vec!["maxmemory", "maxmemory-policy"]);
    assert_eq!(c.maxmemory, 1 << 30);
    assert_eq!(c.maxmemory_policy, MaxmemoryPolicy::AllkeysLru);
    assert_eq!(
        c.set(&pairs(&[("hash-max-ziplist-entries", "7")])).unwrap(),
        vec!["hash-max-listpack-entries"]
    );
    assert_eq!(c.hash_max_listpack_entries, 7);
    c.set(&pairs(&[
        ("save", ""),
        ("bind", "127.0.0.1 -::1"),
        ("protected-mode", "NO"),
    ]))
    .unwrap();
    assert_eq!(c.bind, args(&["127.0.0.1", "-::1"]));
    assert!(!c.protected_mode);
    c.set(&pairs(&[(
        "client-output-buffer-limit",
        "pubsub 1mb 2mb 3",
    )]))
    .unwrap();
    assert_eq!(
        c.client_output_buffer_limit.pubsub,
        ClientBufferLimit {
            hard_bytes: 1 << 20,
            soft_bytes: 2 << 20,
            soft_seconds: 3
        }
    );
    assert_eq!(c.client_output_buffer_limit.replica.soft_seconds, 60);
    c.set(&pairs(&[
        ("notify-keyspace-events", "Ex"),
        ("requirepass", "pw"),
    ]))
    .unwrap();
    assert_eq!(get1(&c, "notify-keyspace-events"), "xE");
    c.set(&pairs(&[("bind", "")])).unwrap();
    assert!(c.bind.is_empty());
}

#[test]
fn config_set_errors_match_redis() {
    let mut c = Config::default();
    let err = |c: &mut Config, p: &[(&str, &str)]| c.set(&pairs(p)).unwrap_err();
    for (p, want) in [
        (vec![("foo", "bar")], "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        (vec![("timeout", "1"), ("foo", "1")], "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        (vec![("timeout", "x"), ("foo", "1")], "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        (vec![("port", "1"), ("foo", "1")], "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"),
        (vec![("maxmemory", "1x")], "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
        (vec![("maxmemory", "-1")], "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
        (vec![("port", "7000")], "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"),
        (vec![("Databases", "3")], "ERR CONFIG SET failed (possibly related to argument 'Databases') - can't set immutable config"),
        (vec![("pidfile", "/tmp/x")], "ERR CONFIG SET failed (possibly related to argument 'pidfile') - can't set immutable config"),
        (vec![("daemonize", "no")], "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config"),
        (vec![("dir", "/tmp")], "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"),
        (vec![("dbfilename", "a/b")], "ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config"),
        (vec![("maxclients", "-1")], "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive"),
        (vec![("timeout", "1"), ("timeout", "2")], "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter"),
        (vec![("hash-max-listpack-entries", "1"), ("HASH-MAX-ZIPLIST-ENTRIES", "2")], "ERR CONFIG SET failed (possibly related to argument 'HASH-MAX-ZIPLIST-ENTRIES') - duplicate parameter"),
        (vec![("hash-max-ziplist-entries", "abc")], "ERR CONFIG SET failed (possibly related to argument 'hash-max-ziplist-entries') - argument couldn't be parsed into an integer"),
        (vec![("HASH-MAX-ZIPLIST-ENTRIES", "-1")], "ERR CONFIG SET failed (possibly related to argument 'hash-max-ziplist-entries') - argument must be between 0 and 9223372036854775807 inclusive"),
        (vec![("loglevel", "bad")], "ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning"),
        (vec![("save", "1 2 3")], "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
        (vec![("save", "3600  1")], "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
        (vec![("save", "\"3600\" \"1\"")], "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"),
        (vec![("client-output-buffer-limit", "normal  0 0 0")], "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Wrong number of arguments in buffer limit configuration."),
        (vec![("bind", "127.0.0.1  ::1")], "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."),
        (vec![("notify-keyspace-events", "Q")], "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."),
        (vec![("dynamic-hz", "maybe")], "ERR CONFIG SET failed (possibly related to argument 'dynamic-hz') - argument must be 'yes' or 'no'"),
        (vec![("timeout", "01")], "ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"),
    ] {
        let p: Vec<(&str, &str)> = p;
        assert_eq!(err(&mut c, &p), want, "{p:?}");
    }
    assert_eq!(
        c.set(&[]).unwrap_err(),
        "ERR wrong number of arguments for 'config|set' command"
    );
    assert_eq!(c, Config::default());
}

#[test]
fn config_set_is_atomic() {
    let mut c = Config::default();
    let before = c.clone();
    let e = c
        .set(&pairs(&[
            ("maxmemory", "1gb"),
            ("timeout", "30"),
            ("maxmemory-policy", "bad"),
            ("hz", "20"),
        ]))
        .unwrap_err();
    assert!(e.contains("'maxmemory-policy'"), "{e}");
    assert_eq!(c, before);
    assert_eq!(get1(&c, "maxmemory"), "0");
    let e = c
        .set(&pairs(&[(
            "client-output-buffer-limit",
            "normal 1 1 1 pubsub 1x 1 1",
        )]))
        .unwrap_err();
    assert!(e.contains("Error in hard, soft"), "{e}");
    assert_eq!(c, before);
}

#[test]
fn protected_configs() {
    let dir = temp_dir("protected");
    let mut c = Config::default();
    assert!(c
        .set_from(&pairs(&[("dir", dir.to_str().unwrap())]), true)
        .is_err());
    c.enable_protected_configs = ProtectedAction::Local;
    assert!(c
        .set_from(&pairs(&[("dir", dir.to_str().unwrap())]), false)
        .unwrap_err()
        .contains("can't set protected config"));
    assert_eq!(
        c.set_from(&pairs(&[("dir", dir.to_str().unwrap())]), true)
            .unwrap(),
        vec!["dir"]
    );
    assert_eq!(Path::new(&c.dir), fs::canonicalize(&dir).unwrap());
    c.enable_protected_configs = ProtectedAction::Yes;
    assert_eq!(
        c.set(&pairs(&[("dir", "/nonexistent-cairn-dir")]))
            .unwrap_err(),
        "ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory"
    );
    assert_eq!(
        c.set(&pairs(&[("dbfilename", "a/b")])).unwrap_err(),
        "ERR CONFIG SET failed (possibly related to argument 'dbfilename') - dbfilename can't be a path, just a filename"
    );
    assert_eq!(
        c.set(&pairs(&[("dbfilename", "x.rdb")])).unwrap(),
        vec!["dbfilename"]
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sensitivity() {
    assert!(is_sensitive("requirepass"));
    assert!(is_sensitive("REQUIREPASS"));
    assert!(!is_sensitive("port"));
    assert!(!is_sensitive("nosuch"));
}

#[test]
fn rewrite_matches_redis_layout() {
    let old = "# top comment\n\
               port 7398\n\
               \n\
               bind 127.0.0.1 -::1\n\
               hash-max-ziplist-entries 100\n\
               maxmemory 100mb\n\
               # middle comment\n\
               \n\
               \n\
               save \"\"\n\
               timeout 5\n\
               timeout 6\n\
               requirepass \"foo bar\"\n\
               client-output-buffer-limit normal 1mb 2mb 3\n\
               loglevel verbose\n\
               some-unknown-directive 1\n\
               include /etc/other.conf\n";
    let mut c = parse_str(
        &old.replace("some-unknown-directive 1\n", "")
            .replace("include /etc/other.conf\n", ""),
        "t",
    )
    .unwrap();
    c.set(&pairs(&[
        ("bind", "127.0.0.1"),
        ("maxmemory", "1gb"),
        ("requirepass", ""),
        ("loglevel", "notice"),
        ("hash-max-listpack-entries", "512"),
        ("notify-keyspace-events", "Ex"),
        ("maxmemory-policy", "allkeys-lru"),
        (
            "client-output-buffer-limit",
            "normal 0 0 0 pubsub 1gb 1kb 5",
        ),
    ]))
    .unwrap();
    let text = String::from_utf8(c.rewrite_text(old.as_bytes())).unwrap();
    assert_eq!(
        text,
        "# top comment\n\
         port 7398\n\
         \n\
         hash-max-listpack-entries 512\n\
         maxmemory 1gb\n\
         # middle comment\n\
         \n\
         save \"\"\n\
         timeout 6\n\
         \n\
         client-output-buffer-limit pubsub 1gb 1kb 5\n\
         loglevel notice\n\
         # ??? some-unknown-directive 1\n\
         include /etc/other.conf\n\
         \n\
         # Generated by CONFIG REWRITE\n\
         maxmemory-policy allkeys-lru\n\
         notify-keyspace-events \"xE\"\n"
    );
    // A second rewrite changes nothing.
    assert_eq!(
        String::from_utf8(c.rewrite_text(text.as_bytes())).unwrap(),
        text
    );
}

#[test]
fn rewrite_of_defaults_into_empty_file_is_empty() {
    assert!(Config::default().rewrite_text(b"").is_empty());
}

#[test]
fn rewrite_round_trip() {
    let dir = temp_dir("rewrite");
    let path = dir.join("cairn.conf");
    let original = "# Cairn test config\n\
                    \n\
                    # network\n\
                    port 7000\n\
                    bind 127.0.0.1\n\
                    hash-max-ziplist-value 32 # not a comment in redis.conf syntax\n";
    // The trailing "comment" makes that line an error in Redis too.
    assert!(parse_str(original, "t").is_err());
    let original = original.replace(" # not a comment in redis.conf syntax", "");
    fs::write(&path, &original).unwrap();

    let mut c = parse_str(&original, "t").unwrap();
    c.set(&pairs(&[
        ("maxmemory", "3mb"),
        ("requirepass", "with \"quotes\" and spaces\n"),
        ("bind", "127.0.0.1 -::1"),
        ("save", ""),
        ("notify-keyspace-events", "KExg"),
        ("client-output-buffer-limit", "replica 1 2 3"),
        ("loglevel", "warning"),
        ("slowlog-log-slower-than", "-1"),
        ("list-max-listpack-size", "-5"),
        ("lazyfree-lazy-expire", "yes"),
        ("hz", "100"),
    ]))
    .unwrap();
    c.rewrite(&path).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# Cairn test config\n\n# network\nport 7000\nbind 127.0.0.1 -::1\n"),
        "{text}"
    );
    assert!(text.contains("hash-max-listpack-value 32\n"), "{text}");
    let back = parse_str(&text, "rewritten").unwrap();
    assert_eq!(back, c);

    // Resetting to defaults rewrites in place or drops the line.
    let mut d = back.clone();
    d.set(&pairs(&[
        ("requirepass", ""),
        ("bind", "127.0.0.1"),
        ("maxmemory", "0"),
    ]))
    .unwrap();
    d.rewrite(&path).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("requirepass") && !text.contains("bind"),
        "{text}"
    );
    assert!(text.contains("\nmaxmemory 0\n"), "{text}");
    assert_eq!(parse_str(&text, "rewritten").unwrap(), d);

    // Rewriting a missing file creates it; no temp files are left.
    let fresh = dir.join("new.conf");
    c.rewrite(&fresh).unwrap();
    assert_eq!(
        parse_str(&fs::read_to_string(&fresh).unwrap(), "new").unwrap(),
        c
    );
    let leftovers: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty());
    fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn rewrite_keeps_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("perm");
    let path = dir.join("cairn.conf");
    fs::write(&path, "port 7000\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    Config::default().rewrite(&path).unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_lists_examples() {
    let u = usage();
    assert!(u.starts_with("Usage: cairn [/path/to/cairn.conf] [options] [-]\n"));
    assert!(u.contains("cairn --port 7777\n"));
    assert!(u.contains("echo 'maxmemory 128mb' | cairn -\n"));
}

// branch sentinel: Sentinel's failover runs CONFIG REWRITE after SLAVEOF.
#[test]
fn rewrite_replicaof_as_two_words_or_removed() {
    let old = "port 7000\nreplicaof 10.0.0.1 6379\n";
    let mut c = Config {
        replicaof: "127.0.0.1 7001".into(),
        ..Config::default()
    };
    let text = String::from_utf8(c.rewrite_text(old.as_bytes())).unwrap();
    assert!(text.contains("\nreplicaof 127.0.0.1 7001\n"), "{text}");
    // A master (SLAVEOF NO ONE) loses the line.
    c.replicaof = String::new();
    let text = String::from_utf8(c.rewrite_text(old.as_bytes())).unwrap();
    assert!(!text.contains("replicaof"), "{text}");
    // Appended when the file had none.
    c.replicaof = "::1 7002".into();
    let text = String::from_utf8(c.rewrite_text(b"port 7000\n")).unwrap();
    assert!(text.ends_with("replicaof ::1 7002\n"), "{text}");
}
