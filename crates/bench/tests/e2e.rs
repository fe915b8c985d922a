//! End-to-end runs of every subcommand at small scale against a real
//! redis-server and a real memcached (and scripted fake servers for the
//! failure paths), checking the JSON report's figures against what the
//! servers actually hold.

mod support;

use cairn_bench::report::{Report, Run};
use support::*;

fn url_r(s: &Server) -> String {
    format!("r=redis://127.0.0.1:{}", s.port)
}

fn url_m(s: &Server) -> String {
    format!("m=memcached://127.0.0.1:{}", s.port)
}

fn runs<'a>(r: &'a Report, target: &str, phase: &str) -> Vec<&'a Run> {
    r.runs
        .iter()
        .filter(|x| x.target == target && x.phase == phase)
        .collect()
}

fn p(path: &std::path::Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

#[test]
fn ycsb_layout_matches_ycsb_bindings() {
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let dir = TempDir::new("ycsb-c");
    let json = dir.path("c.json");
    let charts = chart_args(&dir, "chart");
    let out = run_ok(
        &format!(
            "ycsb --target {} --target {} --workload c --records 300 --operations 600 \
             --threads 2,3 --rounds 2 --seed 7 --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&json)
        ),
        &charts,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| run "), "{stdout}");
    let r = report(&json);
    assert_eq!(r.subcommand, "ycsb");
    assert!(r.command_line.iter().any(|a| a == "--workload"));
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(r.machine.cores, cores);
    for t in ["r", "m"] {
        let load = runs(&r, t, "load");
        assert_eq!(load.len(), 1);
        assert_eq!((load[0].ops, load[0].errors), (300, 0), "{t} load");
        let run = runs(&r, t, "run");
        assert_eq!(run.len(), 4, "2 rounds x 2 thread counts");
        for x in &run {
            assert_eq!((x.ops, x.errors), (600, 0), "{t} run");
            assert_eq!(x.per_op.len(), 1);
            assert_eq!(x.per_op[0].op, "READ");
            assert_eq!(x.timeline.iter().sum::<u64>(), 600);
        }
    }
    // Interleaved: round 1 (t2: r, m; t3: r, m), then round 2.
    let order: Vec<(u32, u32, &str)> = r
        .runs
        .iter()
        .filter(|x| x.phase == "run")
        .map(|x| (x.round, x.threads, x.target.as_str()))
        .collect();
    let want = [(1, 2, "r"), (1, 2, "m"), (1, 3, "r"), (1, 3, "m")];
    let want2 = [(2, 2, "r"), (2, 2, "m"), (2, 3, "r"), (2, 3, "m")];
    assert_eq!(order, [&want[..], &want2[..]].concat());
    // Ratios are against the first target.
    let row = r
        .summary
        .iter()
        .find(|s| s.target == "r" && s.phase == "run");
    let row = row.unwrap();
    assert_eq!((row.ratio, row.rounds), (Some(1.0), 2));
    // The local servers were found by port, so CPU is measured.
    assert_eq!(r.targets[0].pid, Some(rs.pid()));
    assert_eq!(r.targets[1].pid, Some(ms.pid()));
    assert!(runs(&r, "r", "run")[0].server_cpu.is_some());
    // RESP layout: one hash per record with field0..9 of 100 bytes, plus
    // the _indices sorted set scored by Java's String.hashCode.
    assert_eq!(redis_cmd(rs.port, &[b"DBSIZE"]).int(), 301);
    assert_eq!(redis_cmd(rs.port, &[b"ZCARD", b"_indices"]).int(), 300);
    let key = b"user6284781860667377211";
    let h = redis_cmd(rs.port, &[b"HGETALL", key]);
    let h = h.array();
    assert_eq!(h.len(), 20);
    for (i, pair) in h.chunks(2).enumerate() {
        let f = String::from_utf8(pair[0].bytes()).unwrap();
        assert!(f.starts_with("field"), "{f}");
        assert_eq!(pair[1].bytes().len(), 100, "field {i}");
    }
    let score = redis_cmd(rs.port, &[b"ZSCORE", b"_indices", key]).bytes();
    assert_eq!(String::from_utf8(score).unwrap(), "-594971599");
    // memcached layout: one JSON document per record under usertable-<key>.
    let get = "get usertable-user6284781860667377211\r\n";
    let v = mc_cmd(ms.port, get, &["END"]);
    assert!(
        v.starts_with("VALUE usertable-user6284781860667377211 0 "),
        "{v}"
    );
    let doc = v.lines().nth(1).unwrap();
    assert!(doc.starts_with("{\"field0\":\""), "{doc}");
    assert_eq!(doc.matches("\"field").count(), 10);
    // Charts in both formats.
    if !charts.is_empty() {
        for f in [
            "chart-ycsb-workloadc.svg",
            "chart-ycsb-workloadc-timeline.png",
        ] {
            let b = std::fs::read(dir.path(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(b.len() > 1000, "{f} is tiny");
        }
        let png = std::fs::read(dir.path("chart-ycsb-workloadc.png")).unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        let svg = std::fs::read_to_string(dir.path("chart-ycsb-workloadc.svg")).unwrap();
        assert!(svg.contains("client threads") && svg.contains("p99"));
    }
    // check-json agrees; a broken file is refused.
    run_ok(&format!("check-json {}", p(&json)), &[]);
    let text = std::fs::read_to_string(&json).unwrap();
    let mut bad: serde_json::Value = serde_json::from_str(&text).unwrap();
    bad["runs"][0]["ops"] = serde_json::json!(12345);
    let badp = dir.path("bad.json");
    std::fs::write(&badp, bad.to_string()).unwrap();
    assert!(!run_cmd(&format!("check-json {}", p(&badp)))
        .status
        .success());
}

#[test]
fn ycsb_updates_inserts_scans_and_rmw() {
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let (r_url, m_url) = (url_r(&rs), url_m(&ms));
    let dir = TempDir::new("ycsb-adef");
    // A: reads and updates on both protocols.
    let a = dir.path("a.json");
    run_ok(
        &format!(
            "ycsb --target {r_url} --target {m_url} --workload a --records 200 \
             --operations 400 --threads 2 -q --json {}",
            p(&a)
        ),
        &[],
    );
    let r = report(&a);
    for t in ["r", "m"] {
        let run = runs(&r, t, "run")[0];
        assert_eq!((run.ops, run.errors), (400, 0), "{t}");
        let ops: Vec<&str> = run.per_op.iter().map(|o| o.op.as_str()).collect();
        assert_eq!(ops, vec!["READ", "UPDATE"], "{t}");
    }
    // E: scans (RESP only) and inserts; inserts grow the index.
    let e = dir.path("e.json");
    run_ok(
        &format!(
            "ycsb --target {r_url} --workload e --records 200 --operations 300 --threads 2 \
             -p maxscanlength=10 -q --json {}",
            p(&e)
        ),
        &[],
    );
    let r = report(&e);
    let run = runs(&r, "r", "run")[0];
    assert_eq!((run.ops, run.errors), (300, 0));
    let inserts = run
        .per_op
        .iter()
        .find(|o| o.op == "INSERT")
        .map_or(0, |o| o.ops);
    assert!(run.per_op.iter().any(|o| o.op == "SCAN" && o.ops > 200));
    let zcard = redis_cmd(rs.port, &[b"ZCARD", b"_indices"]).int();
    assert_eq!(zcard, 200 + inserts as i64);
    // memcached cannot scan: refused up front, with a reason.
    let out = run_cmd(&format!(
        "ycsb --target {m_url} --workload e --records 10 -q"
    ));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("scans"));
    // D (latest) and F (read-modify-write) complete without errors.
    for (w, op) in [("d", "INSERT"), ("f", "READ-MODIFY-WRITE")] {
        let j = dir.path(&format!("{w}.json"));
        run_ok(
            &format!(
                "ycsb --target {r_url} --target {m_url} --workload {w} --records 200 \
                 --operations 400 --threads 2 -q --json {}",
                p(&j)
            ),
            &[],
        );
        let r = report(&j);
        for t in ["r", "m"] {
            let run = runs(&r, t, "run")[0];
            assert_eq!((run.ops, run.errors), (400, 0), "{w} {t}");
            assert!(run.per_op.iter().any(|o| o.op == op), "{w} {t}: no {op}");
        }
    }
}

#[test]
fn values_verifies_bytes_and_reports_refusals() {
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let dir = TempDir::new("values");
    let json = dir.path("v.json");
    let out = run_ok(
        &format!(
            "values --target {} --target {} --sizes 4K,1100K --iterations 1,3 --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&json)
        ),
        &chart_args(&dir, "c"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = report(&json);
    for phase in ["4K x1", "4K x3", "1100K x1", "1100K x3"] {
        let n: u64 = phase.rsplit('x').next().unwrap().parse().unwrap();
        let red = runs(&r, "r", phase)[0];
        assert_eq!((red.ops, red.errors), (2 * n, 0), "redis {phase}");
        let size = if phase.starts_with("4K") {
            4096
        } else {
            1100 * 1024
        };
        assert_eq!(red.units, 2 * n * size, "bytes moved");
        let mc = runs(&r, "m", phase)[0];
        if phase.starts_with("4K") {
            assert_eq!((mc.ops, mc.errors), (2 * n, 0), "memcached {phase}");
        } else {
            // Over memcached's 1 MB item limit: every SET refused, every GET
            // missing, nothing timed.
            assert_eq!(mc.ops, 0, "{phase}");
            let set = mc.per_op.iter().find(|o| o.op == "SET").unwrap();
            let get = mc.per_op.iter().find(|o| o.op == "GET").unwrap();
            assert_eq!(set.errors.get("refused"), Some(&n));
            assert_eq!(get.errors.get("missing"), Some(&n));
            assert_eq!(set.latency.count, 0);
            assert!(set.error_samples["refused"].contains("too large"));
        }
    }
    assert!(stdout.contains("refused"), "{stdout}");
    assert!(r.notes.iter().any(|n| n.contains("1100K")));
    // The keys were cleaned up.
    assert_eq!(redis_cmd(rs.port, &[b"DBSIZE"]).int(), 0);
}

#[test]
fn values_catches_missing_and_wrong_values() {
    let liar = fake_resp(Fake::Liar);
    let dir = TempDir::new("liar");
    let json = dir.path("v.json");
    run_ok(
        &format!(
            "values --target liar=redis://127.0.0.1:{} --sizes 1K --iterations 4 --json {}",
            liar.port,
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    let run = &r.runs[0];
    let get = run.per_op.iter().find(|o| o.op == "GET").unwrap();
    // Half the reads come back empty, half with the wrong bytes; none is
    // counted or timed as a success.
    assert_eq!(get.ops, 0);
    assert_eq!(get.latency.count, 0);
    assert_eq!(get.errors.get("missing"), Some(&2));
    assert_eq!(get.errors.get("wrong_value"), Some(&2));
    assert_eq!(run.ops, 4, "only the SETs succeeded");
}

#[test]
fn timeouts_are_errors_and_runs_end() {
    let silent = fake_resp(Fake::Silent);
    let dir = TempDir::new("silent");
    let target = format!("s=redis://127.0.0.1:{}", silent.port);
    let json = dir.path("g.json");
    let t0 = std::time::Instant::now();
    run_ok(
        &format!(
            "get-set --target {target} -n 8 -c 2 -P 2 --tests get --timeout 0.2 --json {}",
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    let x = &r.runs[0];
    assert_eq!((x.ops, x.errors, x.timeouts), (0, 8, 8));
    let json = dir.path("v.json");
    run_ok(
        &format!(
            "values --target {target} --sizes 100 --iterations 2 --timeout 0.2 --json {}",
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    assert_eq!((r.runs[0].ops, r.runs[0].timeouts), (0, 4));
    assert!(t0.elapsed().as_secs() < 20, "time-outs took too long");
}

#[test]
fn batch_mset_mget_sequential_and_random() {
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let r_url = url_r(&rs);
    let dir = TempDir::new("batch");
    let json = dir.path("b.json");
    let charts = chart_args(&dir, "c");
    run_ok(
        &format!(
            "batch --target {r_url} --target {} --keys 2000 --threads 2 --value-size 300 \
             --pipeline 2 --json {}",
            url_m(&ms),
            p(&json)
        ),
        &charts,
    );
    let r = report(&json);
    for t in ["r", "m"] {
        for phase in ["mset-seq", "mget-seq", "mset-rand", "mget-rand"] {
            let run = runs(&r, t, phase)[0];
            let samples = &run.per_op[0].error_samples;
            assert_eq!(run.errors, 0, "{t} {phase}: {samples:?}");
            assert_eq!(run.units, 2000, "{t} {phase}: every key once");
            // Two threads of 1000 keys: 31 calls of 32 keys and one of 8.
            assert_eq!(run.ops, 64, "{t} {phase}: calls of 32 keys");
            assert_eq!(run.unit, "keys");
            assert_eq!(run.timeline.iter().sum::<u64>(), 2000);
        }
    }
    assert_eq!(redis_cmd(rs.port, &[b"DBSIZE"]).int(), 2000);
    // The client's own CPU and the machine's split are in every run.
    let x = runs(&r, "r", "mget-seq")[0];
    assert!(x.extra["client_cpu_us_per_op"].as_f64().unwrap() > 0.0);
    let pct = &x.extra["box_cpu_pct"];
    let sum: f64 = ["busy", "idle", "iowait", "steal"]
        .iter()
        .map(|k| pct[k].as_f64().unwrap())
        .sum();
    assert!((sum - 100.0).abs() < 0.01, "{pct}");
    // --read-passes: read phases go over the keys that many times, write
    // phases once.
    let json = dir.path("passes.json");
    run_ok(
        &format!(
            "batch --target {r_url} --keys 2000 --threads 2 --value-size 300 --no-flush \
             --phases mset-seq,mget-seq,mget-rand --read-passes 3 --json {}",
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    for (phase, n) in [("mset-seq", 1), ("mget-seq", 3), ("mget-rand", 3)] {
        let run = runs(&r, "r", phase)[0];
        assert_eq!(
            (run.errors, run.units, run.ops),
            (0, 2000 * n, 64 * n),
            "{phase}"
        );
    }
    let v = redis_cmd(rs.port, &[b"GET", b"batch:0000000007"]).bytes();
    assert!((150..=450).contains(&v.len()), "{}", v.len());
    if !charts.is_empty() {
        assert!(dir.path("c-batch-mget-rand-timeline.png").is_file());
        assert!(dir.path("c-batch.svg").is_file());
    }
    // Values from a file's lines.
    let file = dir.path("lines.txt");
    std::fs::write(&file, "first line\nsecond, longer line\n").unwrap();
    let json = dir.path("f.json");
    run_ok(
        &format!(
            "batch --target {r_url} --keys 100 --threads 1 --value-file {} \
             --phases mset-seq,mget-rand --json {}",
            p(&file),
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    assert!(r.runs.iter().all(|x| x.errors == 0));
    let v = redis_cmd(rs.port, &[b"GET", b"batch:0000000001"]).bytes();
    assert_eq!(v, b"second, longer line");
    // Reading keys that are absent is an error, not a fast success.
    let json = dir.path("miss.json");
    run_ok(
        &format!(
            "batch --target {r_url} --keys 64 --threads 1 --phases mget-seq --json {}",
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    assert_eq!((r.runs[0].ops, r.runs[0].errors), (0, 2));
    assert_eq!(r.runs[0].per_op[0].errors.get("missing"), Some(&2));
    // --single: SET and GET of one key a call, on both protocols, every
    // value checked; a GET of a value changed behind the client's back is
    // counted wrong, not fast.
    let json = dir.path("single.json");
    run_ok(
        &format!(
            "batch --target {r_url} --target {} --keys 300 --threads 2 --value-size 200 \
             --single --seed 7 --json {}",
            url_m(&ms),
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    for t in ["r", "m"] {
        for (phase, cmd) in [
            ("set-seq", "SET"),
            ("get-seq", "GET"),
            ("set-rand", "SET"),
            ("get-rand", "GET"),
        ] {
            let run = runs(&r, t, phase)[0];
            assert_eq!(run.errors, 0, "{t} {phase}");
            assert_eq!(
                (run.ops, run.units),
                (300, 300),
                "{t} {phase}: a key a call"
            );
            if t == "r" {
                assert_eq!(run.per_op[0].op, cmd, "{t} {phase}");
            }
        }
    }
    redis_cmd(rs.port, &[b"SET", b"batch:0000000005", b"changed"]);
    let json = dir.path("single-wrong.json");
    run_ok(
        &format!(
            "batch --target {r_url} --keys 300 --threads 1 --value-size 200 --single \
             --seed 7 --phases get-seq --no-flush --json {}",
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    assert_eq!((r.runs[0].ops, r.runs[0].errors), (299, 1));
}

#[test]
fn memory_per_record_and_evictions() {
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let dir = TempDir::new("memory");
    let json = dir.path("m.json");
    let out = run_ok(
        &format!(
            "memory --target {} --target {} --records 1000 --threads 2 --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&json)
        ),
        &chart_args(&dir, "c"),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("server B/record"));
    let r = report(&json);
    for t in ["r", "m"] {
        let run = runs(&r, t, "load")[0];
        let x = &run.extra;
        assert_eq!(x["records_stored"], serde_json::json!(1000), "{t}");
        let per = x["server_bytes_per_record"].as_f64().unwrap();
        // 10 fields of 100 bytes plus names and overhead.
        assert!((1000.0..5000.0).contains(&per), "{t}: {per} bytes/record");
        assert!(x["rss_after"].as_u64().unwrap() > 0, "{t}: RSS from /proc");
    }
    // A memcached limited to 2 MB cannot hold 4000 records of about 1.1 KB:
    // evictions and a note, not a silent loss.
    let Some(small) = memcached(&["-m", "2"]) else {
        return;
    };
    let json = dir.path("small.json");
    run_ok(
        &format!(
            "memory --target small=memcached://127.0.0.1:{} --records 4000 --threads 2 --json {}",
            small.port,
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    let x = &r.runs[0].extra;
    assert!(x["records_stored"].as_u64().unwrap() < 4000);
    assert!(x["evictions"].as_u64().unwrap() > 0);
    assert!(
        r.notes.iter().any(|n| n.contains("evicted")),
        "{:?}",
        r.notes
    );
}

#[test]
fn get_set_like_redis_benchmark() {
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let dir = TempDir::new("getset");
    let json = dir.path("g.json");
    let mut extra = chart_args(&dir, "c");
    let have_rb = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("redis-benchmark").is_file()))
        .unwrap_or(false);
    if have_rb {
        extra.push("--vs-redis-benchmark".into());
    }
    run_ok(
        &format!(
            "get-set --target {} --target {} -n 4000 -c 4 -P 4 -r 500 --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&json)
        ),
        &extra,
    );
    let r = report(&json);
    for t in ["r", "m"] {
        for test in ["SET", "GET"] {
            let run = runs(&r, t, test)[0];
            assert_eq!((run.ops, run.errors), (4000, 0), "{t} {test}");
            assert_eq!(run.threads, 4);
            let l = &run.per_op[0].latency;
            assert!(l.p50_us > 0.0 && l.p50_us <= l.p99_us);
            assert!(run.server_cpu.is_some(), "{t}: pid found by port");
        }
    }
    // Keys as redis-benchmark names them, within -r.
    let n = redis_cmd(rs.port, &[b"DBSIZE"]).int();
    assert!(n > 0 && n <= 500, "{n}");
    let k = redis_cmd(rs.port, &[b"RANDOMKEY"]).bytes();
    let shown = String::from_utf8_lossy(&k).into_owned();
    assert!(k.starts_with(b"key:") && k.len() == 16, "{shown}");
    // redis-benchmark's payload for -d 3.
    assert_eq!(redis_cmd(rs.port, &[b"GET", &k]).bytes(), b"VXK");
    if have_rb {
        let rb = runs(&r, "r:redis-benchmark", "SET");
        assert_eq!(rb.len(), 1);
        assert!(rb[0].ops_per_sec > 0.0);
        // Its rows sit right after the target they measured.
        let names: Vec<&str> = r.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["r", "r:redis-benchmark", "m"]);
    }
    if extra.iter().any(|a| a == "--chart") {
        assert!(dir.path("c-get-set.png").is_file());
    }
}

#[test]
fn get_set_paced_and_equal_load() {
    let Some(rs) = redis() else {
        return;
    };
    let dir = TempDir::new("paced");
    // 1,500 requests at 3,000/s: the last is due 0.4997 s after the start,
    // so the run cannot be faster than that, whatever the machine.
    for (pipeline, rate, n) in [(1, 3000.0, 1500u64), (4, 8000.0, 2000)] {
        let json = dir.path(&format!("p{pipeline}.json"));
        run_ok(
            &format!(
                "get-set --target {} -n {n} -c 4 -P {pipeline} -r 500 --tests set --target-rate {rate} --json {}",
                url_r(&rs),
                p(&json)
            ),
            &[],
        );
        let r = report(&json);
        let run = runs(&r, "r", "SET")[0];
        assert_eq!((run.ops, run.errors), (n, 0));
        let least = (n - pipeline as u64) as f64 / rate;
        assert!(
            run.duration_s >= least * 0.98,
            "{} s < {least} s",
            run.duration_s
        );
        assert!(
            run.ops_per_sec <= rate * 1.05,
            "{} ops/s above {rate}",
            run.ops_per_sec
        );
        assert_eq!(
            run.extra.get("target_rate").and_then(|v| v.as_f64()),
            Some(rate)
        );
    }
    let out = run_cmd(&format!(
        "get-set --target {} -n 10 --equal-load",
        url_r(&rs)
    ));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--equal-load needs --vs-redis-benchmark")
    );
    let out = run_cmd(&format!(
        "get-set --target {} -n 10 --vs-redis-benchmark --equal-load closed --target-rate 100",
        url_r(&rs)
    ));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("drop --target-rate"));
    let have_rb = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("redis-benchmark").is_file()))
        .unwrap_or(false);
    if !have_rb {
        return;
    }
    let json = dir.path("eq.json");
    let out = run_ok(
        &format!(
            "get-set --target {} -n 3000 -c 4 -P 1 -r 500 --vs-redis-benchmark --equal-load --json {}",
            url_r(&rs),
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("equal load (paced):"), "{stdout}");
    let checks = r.config["equal_load_checks"].as_array().expect("checks");
    // SET and GET of round 1, then their medians.
    assert_eq!(checks.len(), 4, "{checks:?}");
    for test in ["SET", "GET"] {
        let rb = runs(&r, "r:redis-benchmark", test)[0].ops_per_sec;
        let cb = runs(&r, "r", test)[0];
        // Paced to redis-benchmark's rate: never (much) above it.
        assert_eq!(
            cb.extra.get("target_rate").and_then(|v| v.as_f64()),
            Some(rb)
        );
        assert!(
            cb.ops_per_sec <= rb * 1.05,
            "{test}: {} vs {rb}",
            cb.ops_per_sec
        );
        let c = checks
            .iter()
            .find(|c| c["test"] == test && c["round"] == 1)
            .expect("round 1 check");
        assert_eq!(c["rb_ops_per_sec"].as_f64(), Some(rb));
        // Compared at redis-benchmark's resolution: the top of an 8 µs
        // bucket (these latencies are far below 16 ms).
        let cb50 = c["cb_p50_us"].as_f64().unwrap();
        let cb50_rb = c["cb_p50_rb_us"].as_f64().unwrap();
        assert_eq!(cb50_rb, (cb50 / 8.0).floor() * 8.0 + 7.0);
        let want = (cb50_rb - c["rb_p50_us"].as_f64().unwrap()) / c["rb_p50_us"].as_f64().unwrap();
        assert!((c["p50_diff"].as_f64().unwrap() - want).abs() < 1e-9);
        assert_eq!(c["mode"], "paced");
        // Both clients' own CPU is recorded, as a share of a thread.
        for run in [runs(&r, "r:redis-benchmark", test)[0], cb] {
            let busy = run.extra.get("client_busy").and_then(|v| v.as_f64());
            assert!(busy.is_some_and(|b| b > 0.0 && b < 1.5), "{busy:?}");
        }
    }
    // Closed loop: both unpaced at the same concurrency; the verdict on
    // the load comes from the two rates.
    let json = dir.path("eqc.json");
    let out = run_ok(
        &format!(
            "get-set --target {} -n 4000 -c 4 -P 4 -r 500 --tests get --vs-redis-benchmark --equal-load closed --json {}",
            url_r(&rs),
            p(&json)
        ),
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("equal load (closed)"));
    let r = report(&json);
    let cb = runs(&r, "r", "GET")[0];
    assert_eq!(cb.extra.get("target_rate"), None, "closed: not paced");
    // redis-benchmark's write rounds, every request answered.
    assert_eq!(r.config["defer_writes"].as_bool(), Some(true));
    assert_eq!((cb.ops, cb.errors), (4000, 0));
    let rb = runs(&r, "r:redis-benchmark", "GET")[0].ops_per_sec;
    let checks = r.config["equal_load_checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 2, "{checks:?}");
    let c = &checks[0];
    assert_eq!(
        (c["mode"].as_str(), c["round"].as_u64()),
        (Some("closed"), Some(1))
    );
    let apart = (cb.ops_per_sec - rb).abs() / rb;
    assert_eq!(c["same_load"].as_bool(), Some(apart <= 0.05), "{apart}");
    // Both at once: every request of both answered, in overlapping runs.
    let json = dir.path("eqx.json");
    let out = run_ok(
        &format!(
            "get-set --target {} -n 20000 -c 4 -P 4 -r 500 --tests set --vs-redis-benchmark --equal-load concurrent --json {}",
            url_r(&rs),
            p(&json)
        ),
        &[],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("equal load (concurrent)"));
    let r = report(&json);
    let cb = runs(&r, "r", "SET")[0];
    let rb = runs(&r, "r:redis-benchmark", "SET")[0];
    assert_eq!((cb.ops, cb.errors, rb.ops), (20000, 0, 20000));
    // They ran at the same time: each started before the other ended.
    assert!(cb.started_unix < rb.started_unix + rb.duration_s + 1.0);
    assert!(rb.started_unix < cb.started_unix + cb.duration_s);
    let c = &r.config["equal_load_checks"][0];
    assert_eq!(c["mode"].as_str(), Some("concurrent"));
}

#[test]
fn hit_ratio_under_maxmemory_per_policy() {
    let Some(rs) = redis() else {
        return;
    };
    let dir = TempDir::new("hitratio");
    let json = dir.path("h.json");
    let out = run_ok(
        &format!(
            "hitratio --target {} --keys 50000 --warmup 20000 --ops 20000 --fraction 0.2 \
             --policy allkeys-lru --policy allkeys-lfu --policy noeviction --json {}",
            url_r(&rs),
            p(&json)
        ),
        &chart_args(&dir, "c"),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("| r | allkeys-lru |"));
    let r = report(&json);
    let max = r.config["maxmemory"].as_u64().unwrap();
    let data = r.config["data_bytes_on_first_target"].as_u64().unwrap();
    // 50,000 keys of 13 + 100 bytes take well over 5 MB in Redis; a fifth
    // of that is a limit above Redis's own footprint (about 1 MB).
    assert!(data > 5_000_000, "{data}");
    assert_eq!(max, (data as f64 * 0.2) as u64);
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let run = runs(&r, "r", policy)[0];
        let x = &run.extra;
        let ratio = x["hit_ratio"].as_f64().unwrap();
        // Zipfian 0.99 with a good part of the keys cached: most GETs hit,
        // but not all (the limit is real).
        assert!((0.3..0.99).contains(&ratio), "{policy}: {ratio}");
        assert_eq!(x["gets"], serde_json::json!(20000));
        assert!(x["evictions"].as_u64().unwrap() > 0, "{policy}");
        assert!(x["used_memory_end"].as_u64().unwrap() <= max + max / 20);
        // The client's count and the server's agree (the server also
        // counts nothing else in this phase).
        let server = x["server_hit_ratio"].as_f64().unwrap();
        assert!((server - ratio).abs() < 1e-9, "{server} vs {ratio}");
        assert_eq!(run.per_op[0].op, "GET");
    }
    // noeviction: misses cannot be stored once full; a note says so.
    let x = &runs(&r, "r", "noeviction")[0].extra;
    assert!(x["set_errors"].as_u64().unwrap() > 0);
    assert_eq!(x["evictions"], serde_json::json!(0));
    assert!(
        r.notes.iter().any(|n| n.contains("SETs refused")),
        "{:?}",
        r.notes
    );
    // The target is left as it was found.
    let cfg = redis_cmd(rs.port, &[b"CONFIG", b"GET", b"maxmemory*"]);
    let items: Vec<Vec<u8>> = cfg.array().iter().map(|v| v.bytes()).collect();
    let get = |k: &str| {
        let i = items.iter().position(|x| x == k.as_bytes()).unwrap();
        String::from_utf8_lossy(&items[i + 1]).into_owned()
    };
    assert_eq!(get("maxmemory"), "0");
    assert_eq!(get("maxmemory-policy"), "noeviction");
    if chart_args(&dir, "c").iter().any(|a| a == "--chart") {
        assert!(dir.path("c-hitratio.png").is_file());
    }
    // An explicit limit is used as given; memcached targets are refused.
    let json2 = dir.path("h2.json");
    run_ok(
        &format!(
            "hitratio --target {} --keys 1000 --warmup 100 --ops 1000 --maxmemory 3M --json {}",
            url_r(&rs),
            p(&json2)
        ),
        &[],
    );
    assert_eq!(
        report(&json2).config["maxmemory"],
        serde_json::json!(3 << 20)
    );
    let out = run_cmd("hitratio --target m=memcached://127.0.0.1:1 --keys 10");
    assert!(!out.status.success());
}

#[test]
fn bad_arguments_are_refused() {
    for line in [
        "ycsb",
        "ycsb --target nourl",
        "ycsb --target x=http://h:1",
        "ycsb --target x=redis://127.0.0.1:1 --threads 0",
        "ycsb --target x=redis://127.0.0.1:1 --workload zz",
        "values --target x=redis://127.0.0.1:1 --sizes lots",
        "batch --target x=redis://127.0.0.1:1 --phases mset-sideways",
        "batch --target x=redis://127.0.0.1:1 --disk-dir y=/tmp",
        "load-curve --target x=redis://127.0.0.1:1 --times 0",
        "batch --target x=redis://127.0.0.1:1 --real-text --value-file /etc/hostname",
        "hitratio --target x=redis://127.0.0.1:1 --fraction 2",
        "hitratio --target x=redis://127.0.0.1:1 --keys 1",
    ] {
        assert!(!run_cmd(line).status.success(), "{line} should fail");
    }
    // An unreachable target is reported by name, before any run.
    let out = run_cmd("get-set --target gone=redis://127.0.0.1:1 -n 10");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("gone"));
}

#[test]
fn corpus_prints_its_fingerprint_and_ratios() {
    let dir = TempDir::new("corpus");
    let corpus = text_file(&dir, 3000);
    let json = dir.path("c.json");
    let out = run_ok(
        &format!(
            "corpus --text-source {} --values 40 --value-size 700 --seed 3 --json {}",
            p(&corpus),
            p(&json)
        ),
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let c = cairn_bench::corpus::Corpus::from_paths(std::slice::from_ref(&corpus)).unwrap();
    assert!(
        text.contains(&format!("fingerprint {}", c.fingerprint())),
        "{text}"
    );
    assert!(text.contains("files 1, words 6000"), "{text}");
    assert!(text.contains("40 values of 700 B (seed 3)"), "{text}");
    assert!(text.contains("LZ4 HC 4 + dictionary"), "{text}");
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["corpus_fingerprint"], c.fingerprint());
    assert_eq!(j["ratios"]["values"], 40);
    assert_eq!(j["size"], 700);
    assert!(j["ratios"]["zstd3_dict"].as_f64().unwrap() > j["ratios"]["zstd3"].as_f64().unwrap());
    // A missing source is an error, not an empty corpus.
    assert!(!run_cmd("corpus --text-source /nonexistent/words")
        .status
        .success());
}

/// A text file of `words` distinct words for `--text-source`.
fn text_file(dir: &TempDir, words: usize) -> std::path::PathBuf {
    let path = dir.path("corpus.txt");
    let text: String = (0..words)
        .map(|i| format!("w{i} licence{}\n", i % 13))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn batch_real_text_verified_with_memory_and_stalls() {
    use cairn_bench::corpus::{Corpus, TextValues};
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let dir = TempDir::new("realtext");
    let corpus = text_file(&dir, 3000);
    let disk = dir.path("disk");
    std::fs::create_dir_all(&disk).unwrap();
    std::fs::write(disk.join("data"), vec![1u8; 8192]).unwrap();
    let json = dir.path("t.json");
    let out = run_ok(
        &format!(
            "batch --target {} --target {} --keys 300 --threads 2 --value-size 500 \
             --text-source {} --seed 9 --phases mset-seq,mget-seq,mget-rand \
             --disk-dir r={} --sample-every 0.2 --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&corpus),
            p(&disk),
            p(&json)
        ),
        &chart_args(&dir, "c"),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("| longest stall s |"));
    let r = report(&json);
    assert_eq!(r.config["values"]["kind"], "real-text");
    assert_eq!(r.config["values"]["seed"], 9);
    // How the values code under the server's coders, and no cache drop
    // unless asked.
    let ratios = &r.config["values"]["ratios"];
    assert_eq!(ratios["values"], 1000);
    for k in [
        "zstd3",
        "zstd3_dict",
        "lz4_fast",
        "lz4_fast_dict",
        "lz4_hc4_dict",
    ] {
        assert!(ratios[k].as_f64().unwrap() > 1.0, "{k}: {ratios}");
    }
    assert_eq!(r.config["drop_caches"], false);
    assert!(!runs(&r, "r", "mget-seq")[0]
        .extra
        .contains_key("page_cache_dropped"));
    for t in ["r", "m"] {
        for phase in ["mset-seq", "mget-seq", "mget-rand"] {
            let run = runs(&r, t, phase)[0];
            let x = &run.extra;
            assert_eq!(
                run.errors, 0,
                "{t} {phase}: {:?}",
                run.per_op[0].error_samples
            );
            assert_eq!(run.units, 300);
            assert_eq!(x["wrong_keys"], 0, "{t} {phase}");
            assert_eq!(x["missing_keys"], 0, "{t} {phase}");
            assert_eq!(x["keys_stored"], 300, "{t} {phase}");
            assert!(x["rss_peak"].as_u64().unwrap() > 0, "{t}: RSS sampled");
            assert!(!x["samples"].as_array().unwrap().is_empty());
            assert!(x["stalls"].as_array().is_some(), "{t} {phase}");
        }
        let per = runs(&r, t, "mset-seq")[0].extra["server_bytes_per_key"]
            .as_f64()
            .unwrap();
        assert!((500.0..3000.0).contains(&per), "{t}: {per} B/key");
    }
    // Disk per key counts the bytes under --disk-dir; nothing was added.
    assert_eq!(
        runs(&r, "r", "mset-seq")[0].extra["disk_bytes_per_key"],
        0.0
    );
    assert!(runs(&r, "m", "mset-seq")[0].extra["disk_bytes_per_key"].is_null());
    // The stored bytes are the value source's, from (seed, key) alone.
    let tv = TextValues::new(
        Corpus::from_paths(std::slice::from_ref(&corpus)).unwrap(),
        500,
        9,
    );
    let mut want = Vec::new();
    tv.value_into(7, &mut want);
    assert_eq!(
        redis_cmd(rs.port, &[b"GET", b"batch:0000000007"]).bytes(),
        want
    );
    // One flipped byte is found and counted, on both protocols.
    let mut bad = want.clone();
    bad[100] ^= 1;
    redis_cmd(rs.port, &[b"SET", b"batch:0000000007", &bad]);
    let bad_s = String::from_utf8(bad).unwrap();
    let reply = mc_cmd(
        ms.port,
        &format!("set batch:0000000007 0 0 {}\r\n{bad_s}\r\n", bad_s.len()),
        &["STORED", "NOT_STORED"],
    );
    assert!(reply.contains("STORED"));
    let json = dir.path("bad.json");
    run_ok(
        &format!(
            "batch --target {} --target {} --keys 300 --threads 1 --value-size 500 \
             --text-source {} --seed 9 --phases mget-seq --no-flush --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&corpus),
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    for t in ["r", "m"] {
        let run = runs(&r, t, "mget-seq")[0];
        assert_eq!(run.errors, 1, "{t}");
        assert_eq!(run.per_op[0].errors.get("wrong_value"), Some(&1), "{t}");
        assert_eq!(run.extra["wrong_keys"], 1, "{t}");
        let sample = &run.per_op[0].error_samples["wrong_value"];
        assert!(
            sample.contains("key 7") && sample.contains("byte 100"),
            "{sample}"
        );
    }
}

#[test]
fn load_curve_tenths_ratio_and_refusals() {
    let Some(rs) = redis() else {
        return;
    };
    let dir = TempDir::new("loadcurve");
    let json = dir.path("l.json");
    // 100 KB over records of 2 x 50 bytes + a 23-byte key: 833 records.
    let out = run_ok(
        &format!(
            "load-curve --target {} --maxmemory 100K --times 1 -p fieldcount=2 \
             -p fieldlength=50 --threads 2 --sample-every 0.1 --json {}",
            url_r(&rs),
            p(&json)
        ),
        &chart_args(&dir, "c"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("last tenth / first tenth"), "{stdout}");
    assert!(stdout.contains("| 100% |"), "{stdout}");
    let r = report(&json);
    let run = &r.runs[0];
    assert_eq!(run.errors, 0);
    assert_eq!(run.extra["records"], 833);
    assert!(run.extra["last_to_first_tenth"].as_f64().unwrap() > 0.0);
    assert_eq!(run.extra["tenths"].as_array().unwrap().len(), 10);
    let marks = run.extra["percent_done_at_s"].as_array().unwrap();
    assert_eq!(marks.len(), 101);
    assert!(marks.iter().all(|m| m.is_number()));
    assert_eq!(run.extra["tenths"][9]["records_stored"], 833);
    // The index set is the one extra key.
    assert_eq!(redis_cmd(rs.port, &[b"DBSIZE"]).int(), 834);
    // At a real limit without eviction the load is refused, and says so.
    redis_cmd(rs.port, &[b"CONFIG", b"SET", b"maxmemory", b"2mb"]);
    let json = dir.path("oom.json");
    run_ok(
        &format!(
            "load-curve --target {} --times 3 -p fieldcount=1 -p fieldlength=1000 \
             --threads 2 --json {}",
            url_r(&rs),
            p(&json)
        ),
        &[],
    );
    let r = report(&json);
    assert_eq!(r.config["maxmemory"], 2 << 20);
    assert!(r.runs[0].errors > 0);
    assert!(
        r.notes.iter().any(|n| n.contains("inserts failed")),
        "{:?}",
        r.notes
    );
}

#[test]
fn batch_flags_a_server_pause_as_a_stall() {
    let Some(rs) = redis() else {
        return;
    };
    let dir = TempDir::new("stall");
    let json = dir.path("s.json");
    let port = rs.port;
    // Paced at 40 calls/s the write phase lasts ~1.6 s; 0.4 s in, the
    // server stops answering for 1.5 s.
    let pauser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        redis_cmd(port, &[b"CLIENT", b"PAUSE", b"1500", b"ALL"]);
    });
    let out = run_ok(
        &format!(
            "batch --target {} --keys 2048 --threads 2 --value-size 100 --phases mset-seq \
             --target-rate 40 --timeout 5 --json {}",
            url_r(&rs),
            p(&json)
        ),
        &[],
    );
    pauser.join().unwrap();
    let r = report(&json);
    let run = &r.runs[0];
    assert_eq!(run.errors, 0);
    let stalls = run.extra["stalls"].as_array().unwrap();
    assert_eq!(stalls.len(), 1, "{stalls:?}");
    let len = stalls[0]["len_s"].as_f64().unwrap();
    assert!((1.2..3.0).contains(&len), "{len}");
    assert!(
        r.notes.iter().any(|n| n.contains("1 stalls")),
        "{:?}",
        r.notes
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| stalls > threshold |"), "{stdout}");
}

// branch benchtier: E5's load of real-text strings (what Cairn's disk tier
// moves out), on both protocols.
#[test]
fn load_curve_string_values() {
    use cairn_bench::corpus::{Corpus, TextValues};
    let (Some(rs), Some(ms)) = (redis(), memcached(&[])) else {
        return;
    };
    let dir = TempDir::new("loadstr");
    let corpus = text_file(&dir, 3000);
    let json = dir.path("s.json");
    // 200 KB over records of 500 bytes + a 16-byte key: 397 records.
    let out = run_ok(
        &format!(
            "load-curve --target {} --target {} --maxmemory 200K --times 1 \
             --string-values 500 --text-source {} --seed 9 --threads 2 \
             --sample-every 0.1 --json {}",
            url_r(&rs),
            url_m(&ms),
            p(&corpus),
            p(&json)
        ),
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("last tenth / first tenth"), "{stdout}");
    let r = report(&json);
    assert_eq!(r.config["record"], "string");
    assert_eq!(r.config["record_bytes"], 516);
    assert_eq!(r.config["values"]["kind"], "real-text");
    for t in ["r", "m"] {
        let run = runs(&r, t, "load")[0];
        assert_eq!(run.errors, 0, "{t}: {:?}", run.per_op[0].error_samples);
        assert_eq!(run.extra["records"], 397, "{t}");
        assert_eq!(run.extra["tenths"].as_array().unwrap().len(), 10, "{t}");
    }
    // No index key: every key stored is a record.
    assert_eq!(redis_cmd(rs.port, &[b"DBSIZE"]).int(), 397);
    let stats = mc_cmd(ms.port, "stats\r\n", &["END"]);
    assert!(stats.contains("STAT curr_items 397\r\n"), "{stats}");
    // The values are `batch --real-text`'s, under its keys.
    let tv = TextValues::new(
        Corpus::from_paths(std::slice::from_ref(&corpus)).unwrap(),
        500,
        9,
    );
    let mut want = Vec::new();
    tv.value_into(396, &mut want);
    assert_eq!(
        redis_cmd(rs.port, &[b"GET", b"batch:0000000396"]).bytes(),
        want
    );
    let reply = mc_cmd(ms.port, "get batch:0000000396\r\n", &["END"]);
    assert!(
        reply.contains(std::str::from_utf8(&want).unwrap()),
        "{reply}"
    );
}
