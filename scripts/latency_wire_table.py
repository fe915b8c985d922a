#!/usr/bin/env python3
"""scripts/latency_wire_check.sh's runs as Markdown tables.

    scripts/latency_wire_table.py OUT_DIR [--only r1-p1-redis-cb]

Reads, per run `r<round>-<case>-<server>-<client>`, the client's own
figures (cairn-bench's JSON report, or redis-benchmark's CSV), the wire
figures of the same capture (`.wire.json`, scripts/wire_latency.py) and
tcpdump's counts (`.tcpdump`), and prints per case, server and test one
row per client and round, then each client's medians:
Δ = (client − wire) / wire. redis-benchmark prints its percentiles as the
top of an 8 µs HDR bucket, so its figures are compared with the wire's on
the same grid; cairn-bench's (HDR, 3 significant digits) with the wire's
exact nanosecond percentiles. A capture that dropped packets, or whose
wire count is not the client's (cairn-bench reports its count;
redis-benchmark does not), is marked invalid and left out of the
medians.
"""
import argparse
import csv
import glob
import json
import os
import re
import statistics
import sys

TOL = 0.10
NAME = re.compile(r"r(\d+)-(p\d+)-([a-z]+)-(cb|cbk|rb)$")
CLIENT = {
    "cb": "cairn-bench",
    "cbk": "cairn-bench --rx-timestamps",
    "rb": "redis-benchmark",
}


def drops(path):
    """(dropped, why) from tcpdump's closing counts."""
    try:
        text = open(path).read()
    except OSError:
        return None, "no tcpdump output"
    n = 0
    seen = False
    for m in re.finditer(r"(\d+) packets? dropped by (kernel|interface)", text):
        n += int(m.group(1))
        seen = True
    if not seen:
        return None, "tcpdump printed no drop counts"
    return n, None


def client_figures(base, cl):
    """{test: (p50, p99, ops/s, requests)} as the client reported them."""
    out = {}
    if cl in ("cb", "cbk"):
        try:
            r = json.load(open(base + ".json"))
        except (OSError, ValueError):
            return out
        for run in r.get("runs", []):
            for op in run.get("per_op", []):
                lat = op["latency"]
                out[op["op"]] = (
                    lat["p50_us"],
                    lat["p99_us"],
                    op["ops_per_sec"],
                    lat["count"],
                    lat["mean_us"],
                )
    else:
        try:
            rows = list(csv.reader(open(base + ".csv")))
        except OSError:
            return out
        for row in rows[1:]:
            if len(row) >= 7:
                out[row[0]] = (
                    float(row[4]) * 1000,
                    float(row[6]) * 1000,
                    float(row[1]),
                    None,
                    float(row[2]) * 1000,
                )
    return out


def runs(out_dir):
    res = []
    for path in sorted(glob.glob(os.path.join(out_dir, "r*.wire.json"))):
        base = path[: -len(".wire.json")]
        m = NAME.match(os.path.basename(base))
        if not m:
            continue
        rnd, case, server, cl = int(m.group(1)), m.group(2), m.group(3), m.group(4)
        wire = {w["command"]: w for w in json.load(open(path))}
        dropped, why = drops(base + ".tcpdump")
        figs = client_figures(base, cl)
        for test in ("SET", "GET"):
            w = wire.get(test)
            f = figs.get(test)
            if not w or not f:
                continue
            invalid = []
            if dropped is None:
                invalid.append(why)
            elif dropped:
                invalid.append(f"{dropped} packets dropped")
            if not w["requests"]:
                invalid.append("no requests on the wire")
            if f[3] is not None and f[3] != w["requests"]:
                invalid.append(f"wire has {w['requests']} requests, client {f[3]}")
            if w["problems"] or w["unanswered"] or w["errors"]:
                invalid.append(
                    f"capture problems {w['problems']}, unanswered {w['unanswered']}, "
                    f"errors {w['errors']}"
                )
            res.append(
                {
                    "name": os.path.basename(base),
                    "round": rnd,
                    "case": case,
                    "server": server,
                    "client": cl,
                    "test": test,
                    "c_p50": f[0],
                    "c_p99": f[1],
                    "ops": f[2],
                    "c_mean": f[4],
                    "w": w,
                    "dropped": dropped,
                    "invalid": invalid,
                }
            )
    return res


def wire_pair(r):
    """The wire p50/p99 the client's figures are compared with."""
    w = r["w"]
    if r["client"] == "rb":
        return w["p50_us_rb"], w["p99_us_rb"]
    return w["p50_us"], w["p99_us"]


def delta(c, w):
    return (c - w) / w if w else float("nan")


def pct(x):
    return f"{x * 100:+.1f}%"


def row(r):
    wp50, wp99 = wire_pair(r)
    d50, d99 = delta(r["c_p50"], wp50), delta(r["c_p99"], wp99)
    ok = abs(d50) <= TOL and abs(d99) <= TOL
    verdict = "invalid: " + "; ".join(r["invalid"]) if r["invalid"] else (
        "within 10%" if ok else "differs"
    )
    w = r["w"]
    return (
        f"| {r['round']} | {CLIENT[r['client']]} | {r['ops']:,.0f} | "
        f"{r['c_p50']:,.0f} / {r['c_p99']:,.0f} | {wp50:,.0f} / {wp99:,.0f} | "
        f"{pct(d50)} | {pct(d99)} | {w['p999_us']:,.0f} / {w['max_us']:,.0f} | "
        f"{r['c_mean']:,.0f} / {w['mean_us']:,.0f} / {w.get('turnaround_mean_us', 0):,.0f} | "
        f"{w['requests']:,} | {r['dropped'] if r['dropped'] is not None else '?'} | {verdict} |"
    )


HEADER = (
    "| round | client | ops/s | client p50 / p99 µs | wire p50 / p99 µs | Δp50 | Δp99 | "
    "wire p99.9 / max µs | mean µs client / wire / turn-around | wire requests | drops | "
    "verdict |\n"
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--only", help="one run's name: print its rows alone")
    a = ap.parse_args()
    rs = runs(a.out_dir)
    if a.only:
        for r in rs:
            if r["name"] == a.only:
                print(f"{r['name']} {r['test']}: " + row(r))
        return 0
    groups = {}
    for r in rs:
        groups.setdefault((r["case"], r["server"], r["test"]), []).append(r)
    order = {"p1": 0, "p16": 1, "SET": 0, "GET": 1}
    for key in sorted(groups, key=lambda k: (order.get(k[0], 9), k[1], order.get(k[2], 9))):
        case, server, test = key
        print(f"\n#### {case} ({'-P 1' if case == 'p1' else '-P 16'}), {server}, {test}\n")
        print(HEADER)
        g = sorted(groups[key], key=lambda r: (r["client"], r["round"]))
        for r in g:
            print(row(r))
        for cl in ("cb", "cbk", "rb"):
            valid = [r for r in g if r["client"] == cl and not r["invalid"]]
            if not valid:
                continue
            d50 = statistics.median(delta(r["c_p50"], wire_pair(r)[0]) for r in valid)
            d99 = statistics.median(delta(r["c_p99"], wire_pair(r)[1]) for r in valid)
            print(
                f"| median of {len(valid)} | {CLIENT[cl]} | "
                f"{statistics.median(r['ops'] for r in valid):,.0f} | "
                f"{statistics.median(r['c_p50'] for r in valid):,.0f} / "
                f"{statistics.median(r['c_p99'] for r in valid):,.0f} | "
                f"{statistics.median(wire_pair(r)[0] for r in valid):,.0f} / "
                f"{statistics.median(wire_pair(r)[1] for r in valid):,.0f} | "
                f"{pct(d50)} | {pct(d99)} | | | | | "
                f"{'within 10%' if abs(d50) <= TOL and abs(d99) <= TOL else 'differs'} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
