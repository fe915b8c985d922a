#!/usr/bin/env python3
"""The summary of scripts/bench_fs.sh (issue 25's E2), from the files it
leaves in its output directory: per file system, the persistence lines
(persist-<label>.csv, redis-benchmark --csv rows prefixed with
"<server>-<appendfsync>","P<pipeline>") and the YCSB phases
(ycsb-<label>-<policy>.json, cairn-bench's report), each line with Redis's
figure, Cairn's and Cairn ÷ Redis; then, with two file systems or more,
each line side by side across them (the second ÷ the first).

    bench_fs_report.py OUT everysec,always "ext4 /mnt/ext4" "xfs /mnt/xfs"

Standard library only; re-run it on a finished run's directory to redo
the tables without re-running the benchmark.
"""
import csv
import json
import os
import subprocess
import sys

BASE, OTHER = "redis", "cairn"


def persist_lines(path):
    """{(appendfsync, pipeline, test): {server: req/s}} in file order."""
    out = {}
    try:
        with open(path) as f:
            for r in csv.reader(f):
                if len(r) < 4:
                    continue
                server, _, policy = r[0].partition("-")
                try:
                    rps = float(r[3])
                except ValueError:
                    continue
                out.setdefault((policy, r[1], r[2]), {})[server] = rps
    except OSError:
        pass
    return out


def ycsb_lines(path):
    """{phase: {target: (ops/s, p99 µs, errors)}} of one report."""
    with open(path) as f:
        rep = json.load(f)
    out = {}
    for s in rep["summary"]:
        if s.get("op") == "ALL" or s.get("phase") == "load":
            p99 = s.get("latency", {}).get("p99_us", 0)
            out.setdefault(s["phase"], {})[s["target"]] = (s["ops_per_sec"], p99, s.get("errors", 0))
    return out


def ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}"


def num(v):
    return "-" if v is None else f"{v:,.0f}"


def fs_of(d):
    try:
        return subprocess.run(["findmnt", "-no", "FSTYPE,SOURCE", "-T", d], capture_output=True,
                              text=True, check=False).stdout.strip()
    except OSError:
        return ""


def place_table(out, policies, label, d):
    o = [f"\n### {label} ({d}, {' '.join(fs_of(d).split()) or 'unmounted'})\n"]
    lines = persist_lines(f"{out}/persist-{label}.csv")
    if lines:
        o += ["redis-benchmark -c 50 (requests/s):", "",
              "| appendfsync | pipeline | test | Redis | Cairn | Cairn ÷ Redis |",
              "|---|---|---|---:|---:|---:|"]
        for (pol, pipe, test), v in lines.items():
            o.append(f"| {pol} | {pipe} | {test} | {num(v.get(BASE))} | {num(v.get(OTHER))} | "
                     f"{ratio(v.get(OTHER), v.get(BASE))} |")
        o.append("")
    o += ["YCSB load and workload A (ops/s, p99 µs):", "",
          "| appendfsync | phase | Redis ops/s | Cairn ops/s | Cairn ÷ Redis | Redis p99 | Cairn p99 | errors Redis / Cairn |",
          "|---|---|---:|---:|---:|---:|---:|---|"]
    for pol in policies:
        try:
            y = ycsb_lines(f"{out}/ycsb-{label}-{pol}.json")
        except (OSError, ValueError, KeyError):
            o.append(f"| {pol} | (no result) | | | | | | |")
            continue
        for phase, v in y.items():
            r, c = v.get(BASE), v.get(OTHER)
            o.append(f"| {pol} | {phase} | {num(r and r[0])} | {num(c and c[0])} | "
                     f"{ratio(c and c[0], r and r[0])} | {num(r and r[1])} | {num(c and c[1])} | "
                     f"{r[2] if r else '-'} / {c[2] if c else '-'} |")
    return o


def side_by_side(out, policies, labels):
    """Each persistence and YCSB line on every file system; the last column
    is the second file system over the first."""
    a, b = labels[0], labels[1]
    o = [f"\n### File systems side by side ({' vs '.join(labels)}; last column {b} ÷ {a})\n",
         "| server | appendfsync | pipeline / phase | test | " + " | ".join(labels) + f" | {b} ÷ {a} |",
         "|---|---|---|---|" + "---:|" * (len(labels) + 1)]
    per = {lb: persist_lines(f"{out}/persist-{lb}.csv") for lb in labels}
    keys = list(dict.fromkeys(k for lb in labels for k in per[lb]))
    for server in (OTHER, BASE):
        for k in keys:
            vals = [per[lb].get(k, {}).get(server) for lb in labels]
            o.append(f"| {server} | {k[0]} | {k[1]} | {k[2]} | " + " | ".join(num(v) for v in vals) +
                     f" | {ratio(vals[1], vals[0])} |")
        for pol in policies:
            ys = {}
            for lb in labels:
                try:
                    ys[lb] = ycsb_lines(f"{out}/ycsb-{lb}-{pol}.json")
                except (OSError, ValueError, KeyError):
                    ys[lb] = {}
            for phase in dict.fromkeys(p for lb in labels for p in ys[lb]):
                vals = [ys[lb].get(phase, {}).get(server) for lb in labels]
                vals = [v and v[0] for v in vals]
                o.append(f"| {server} | {pol} | {phase} | YCSB ops/s | " + " | ".join(num(v) for v in vals) +
                         f" | {ratio(vals[1], vals[0])} |")
    return o


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, policies, places = argv[0], argv[1].split(","), argv[2:]
    o = []
    labels = []
    for place in places:
        label, d = place.split(" ", 1)
        labels.append(label)
        o += place_table(out, policies, label, d)
    if len(labels) >= 2:
        o += side_by_side(out, policies, labels)
    print("\n".join(o))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
