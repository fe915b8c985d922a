//! Per-command latency tracking end to end: LATENCY HISTOGRAM over every
//! command, INFO latencystats with `latency-tracking-info-percentiles`,
//! `latency-tracking no`, CONFIG RESETSTAT, and counts merged from
//! several workers. The corpus (`tests/diff/latency_histogram.txt`)
//! compares the named-command replies with Redis's.
mod support;

use redis::{Connection, Value};
use std::collections::HashMap;
use support::start_cairn;

fn run(c: &mut Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap()
}

/// LATENCY HISTOGRAM's reply as name → (calls, [(µs, cumulative calls)]).
fn histograms(c: &mut Connection, names: &[&str]) -> HashMap<String, (i64, Vec<(i64, i64)>)> {
    let mut args = vec!["LATENCY", "HISTOGRAM"];
    args.extend(names);
    let flat = |v: Value| -> Vec<Value> {
        match v {
            Value::Array(a) => a,
            Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            other => panic!("not an aggregate: {other:?}"),
        }
    };
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    };
    let s = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        other => panic!("not a bulk string: {other:?}"),
    };
    let mut out = HashMap::new();
    let top = flat(run(c, &args));
    for pair in top.chunks(2) {
        let inner = flat(pair[1].clone());
        assert_eq!(s(&inner[0]), "calls");
        assert_eq!(s(&inner[2]), "histogram_usec");
        let buckets = flat(inner[3].clone());
        let buckets: Vec<(i64, i64)> = buckets
            .chunks(2)
            .map(|b| (int(&b[0]), int(&b[1])))
            .collect();
        out.insert(s(&pair[0]), (int(&inner[1]), buckets));
    }
    out
}

/// INFO latencystats as name → [(label, µs)].
fn latencystats(c: &mut Connection) -> HashMap<String, Vec<(String, f64)>> {
    let text: String = redis::cmd("INFO").arg("latencystats").query(c).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# Latencystats"));
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, values) = l.split_once(':').unwrap();
            let name = name
                .strip_prefix("latency_percentiles_usec_")
                .unwrap_or_else(|| panic!("{l}"));
            let values = values
                .split(',')
                .filter(|v| !v.is_empty())
                .map(|v| {
                    let (p, us) = v.split_once('=').unwrap();
                    let dot = us.split_once('.').map(|(_, d)| d.len());
                    assert_eq!(dot, Some(3), "three decimals: {l}");
                    (p.to_string(), us.parse().unwrap())
                })
                .collect();
            (name.to_string(), values)
        })
        .collect()
}

#[test]
fn every_command_has_its_histogram() {
    let s = start_cairn(&["--enable-debug-command", "yes"]);
    let mut c = support::redis_client(s.port);
    run(&mut c, &["CONFIG", "RESETSTAT"]);
    for i in 0..50 {
        run(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    run(&mut c, &["GET", "k1"]);
    run(&mut c, &["CLIENT", "GETNAME"]);
    run(&mut c, &["DEBUG", "SLEEP", "0.01"]);
    let all = histograms(&mut c, &[]);
    let (calls, buckets) = &all["set"];
    assert_eq!(*calls, 50);
    // Cumulative, at Redis's bucket bounds, ending with every call.
    assert_eq!(buckets.last().unwrap().1, 50);
    let bounds = [
        1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908, 33816, 67633, 135266,
        270532, 541065, 1073741,
    ];
    for w in buckets.windows(2) {
        assert!(w[0].0 < w[1].0 && w[0].1 < w[1].1, "{buckets:?}");
    }
    for (us, _) in buckets {
        assert!(bounds.contains(us), "{us} is not a bucket bound");
    }
    assert_eq!(all["get"].0, 1);
    assert_eq!(all["client|getname"].0, 1);
    assert_eq!(all["config|resetstat"].0, 1);
    // 10 ms asleep: in the bucket up to 2^24 ns.
    let (calls, buckets) = &all["debug"];
    assert_eq!(*calls, 1);
    assert!(buckets[0].0 >= 16908, "{buckets:?}");
    assert!(!all.contains_key("latency|histogram"));
    assert!(!all.contains_key("incr"));
    let again = histograms(&mut c, &[]);
    assert_eq!(again["latency|histogram"].0, 1);

    // INFO latencystats: the default percentiles, in µs.
    let stats = latencystats(&mut c);
    let debug = &stats["debug"];
    let labels: Vec<&str> = debug.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(labels, ["p50", "p99", "p99.9"]);
    assert!(debug.iter().all(|(_, us)| *us >= 10_000.0), "{debug:?}");
    assert!(stats.contains_key("set") && stats.contains_key("client|getname"));

    run(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "0 50 100",
        ],
    );
    let labels: Vec<String> = latencystats(&mut c)["set"]
        .iter()
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(labels, ["p0", "p50", "p100"]);
    run(
        &mut c,
        &["CONFIG", "SET", "latency-tracking-info-percentiles", ""],
    );
    assert!(latencystats(&mut c)["set"].is_empty());

    // Off: INFO shows the header only, and nothing more is recorded.
    run(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]);
    assert!(latencystats(&mut c).is_empty());
    run(&mut c, &["SET", "k", "v"]);
    run(&mut c, &["CONFIG", "SET", "latency-tracking", "yes"]);
    assert_eq!(histograms(&mut c, &["set"])["set"].0, 50);

    // CONFIG RESETSTAT starts every histogram again.
    run(&mut c, &["CONFIG", "RESETSTAT"]);
    let after = histograms(&mut c, &[]);
    assert!(!after.contains_key("set"));
    assert_eq!(after["config|resetstat"].0, 1);
    run(&mut c, &["SET", "k", "v"]);
    assert_eq!(histograms(&mut c, &["set"])["set"].0, 1);
}

#[test]
fn workers_histograms_are_merged() {
    let s = start_cairn(&["--server-threads", "2"]);
    let mut conns: Vec<Connection> = (0..4).map(|_| support::redis_client(s.port)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        for j in 0..25 {
            run(c, &["INCR", &format!("n{i}-{j}")]);
        }
    }
    let h = histograms(&mut conns[0], &["incr"]);
    assert_eq!(h["incr"].0, 100);
    assert_eq!(h["incr"].1.last().unwrap().1, 100);
}

#[test]
fn resp3_replies_are_maps() {
    let s = start_cairn(&[]);
    let mut raw = s.conn();
    raw.cmd(&["HELLO", "3"]);
    raw.cmd(&["SET", "k", "v"]);
    let reply = raw.cmd(&["LATENCY", "HISTOGRAM", "set"]);
    let text = String::from_utf8(reply).unwrap();
    assert!(
        text.starts_with(
            "%1\r\n$3\r\nset\r\n%2\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n%1\r\n:"
        ),
        "{text:?}"
    );
    assert_eq!(raw.cmd(&["LATENCY", "HISTOGRAM", "nosuch"]), b"%0\r\n");
}
