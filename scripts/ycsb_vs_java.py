#!/usr/bin/env python3
"""cairn-bench ycsb against YCSB's own Java client (issue 4's bar: YCSB
workload A/B throughput at least that of YCSB's Java client with the same
threads).

Against one RESP server, for every round, workload and thread count, runs
both clients with the same workload file, recordcount, operationcount and
threads: each starts from an emptied server (FLUSHALL), loads the records
(same load threads), then runs; the order alternates between rounds so drift
hits both alike. Prints one line per run pair and the median ratio per
workload and thread count, with each client's READ/UPDATE p99 (µs).

Before the runs it checks that both clients lay records out identically
(same keys, same `_indices` members and scores, same fields and value
lengths) and that cairn-bench reads every record YCSB Java loaded.

    scripts/ycsb_vs_java.py --records 10000 --operations 50000 --threads 8,32

Without --port it starts its own redis-server on a free port (stopped at
the end). YCSB Java comes from scripts/ycsb_java.sh (fetched on first use).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cli(args, host, port, *cmd):
    out = subprocess.run(["redis-cli", "-h", host, "-p", str(port), *cmd],
                         capture_output=True, text=True, check=True)
    return out.stdout


def java(args, mode, workload, threads, records, operations):
    """Runs YCSB Java; returns (ops/s, {op: p99 µs}, {op: errors})."""
    cmd = [os.path.join(HERE, "ycsb_java.sh"), mode, "--host", args.host, "--port", str(args.port),
           "--workload", workload, "--records", str(records), "--operations", str(operations),
           "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"YCSB Java failed ({' '.join(cmd)}):\n{out.stderr[-3000:]}")
    tput, p99, errors = None, {}, {}
    for line in out.stdout.splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) != 3 or not f[0].startswith("["):
            continue
        op = f[0].strip("[]")
        if op == "OVERALL" and f[1] == "Throughput(ops/sec)":
            tput = float(f[2])
        elif f[1] == "99thPercentileLatency(us)":
            p99[op] = float(f[2])
        elif f[1].startswith("Return=") and f[1] != "Return=OK":
            errors[op] = errors.get(op, 0) + int(f[2])
    if tput is None:
        sys.exit(f"cannot find YCSB Java's throughput in:\n{out.stdout[-3000:]}")
    return tput, p99, errors


def cairn_bench(args, workload, threads, records, operations, extra=()):
    """Runs cairn-bench ycsb; returns (ops/s, {op: p99 µs}, {op: errors})."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        cmd = [args.cairn_bench, "ycsb", "--target", f"cairn-bench=redis://{args.host}:{args.port}",
               "--workload", workload, "--records", str(records), "--operations", str(operations),
               "--threads", str(threads), "--load-threads", str(args.load_threads),
               "--timeout", str(args.timeout), "--json", path, "-q", *extra]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"cairn-bench failed ({' '.join(cmd)}):\n{out.stderr[-3000:]}")
        rep = json.load(open(path))
    finally:
        os.unlink(path)
    run = [r for r in rep["runs"] if r["phase"] == "run"][-1]
    p99 = {o["op"]: o["latency"]["p99_us"] for o in run["per_op"] if o["ops"] > 0}
    errors = {o["op"]: sum(o["errors"].values()) for o in run["per_op"] if sum(o["errors"].values())}
    return run["ops_per_sec"], p99, errors


def snapshot(args):
    """Keys, the scan index, and each key's fields with value lengths."""
    keys = sorted(k for k in redis_cli(args, args.host, args.port, "--scan", "--pattern", "user*").split("\n") if k)
    index = redis_cli(args, args.host, args.port, "zrange", "_indices", "0", "-1", "withscores")
    shapes = set()
    for k in keys[:200]:
        h = redis_cli(args, args.host, args.port, "hgetall", k).rstrip("\n").split("\n")
        shapes.add(tuple(sorted((name, len(v)) for name, v in zip(h[0::2], h[1::2]))))
    types = {redis_cli(args, args.host, args.port, "type", k).strip() for k in keys[:200]}
    return keys, index, shapes, types


def layout_check(args):
    n = min(args.records, 2000)
    redis_cli(args, args.host, args.port, "flushall")
    java(args, "load", "a", args.load_threads, n, 1)
    j = snapshot(args)
    # cairn-bench must find every record YCSB Java wrote: a read-only run
    # over them (workload C) with no load.
    _, _, errors = cairn_bench(args, "c", 4, n, 4 * n, ["--skip-load", "--no-flush"])
    redis_cli(args, args.host, args.port, "flushall")
    cairn_bench(args, "a", args.load_threads, n, 1)
    c = snapshot(args)
    redis_cli(args, args.host, args.port, "flushall")
    same = {
        "keys": j[0] == c[0],
        "_indices members and scores": j[1] == c[1],
        "fields and value lengths": j[2] == c[2],
        "key types": j[3] == c[3] == {"hash"},
    }
    for what, ok in same.items():
        print(f"layout: {what}: {'identical' if ok else 'DIFFERENT'}")
    print(f"layout: cairn-bench reading YCSB Java's {n} records: "
          + ("every read found its record" if not errors else f"errors {errors}"))
    if not all(same.values()) or errors:
        print(f"layout: YCSB Java keys {len(j[0])}, first {j[0][:2]}; cairn-bench keys {len(c[0])}, first {c[0][:2]}")
        print(f"layout: YCSB Java shapes {sorted(j[2])[:1]}; cairn-bench shapes {sorted(c[2])[:1]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, help="an existing server (default: start redis-server)")
    ap.add_argument("--records", type=int, default=10000)
    ap.add_argument("--operations", type=int, default=50000)
    ap.add_argument("--threads", default="8,32")
    ap.add_argument("--workloads", default="a,b")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--load-threads", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=2.0,
                    help="cairn-bench's client time-out, s (Jedis's default is 2 s)")
    ap.add_argument("--cairn-bench", default=None)
    ap.add_argument("--skip-layout-check", action="store_true")
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    if args.cairn_bench is None:
        tgt = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        args.cairn_bench = os.path.join(tgt, "release", "cairn-bench")
    if not os.access(args.cairn_bench, os.X_OK):
        sys.exit(f"no cairn-bench at {args.cairn_bench} (cargo build --release -p cairn-bench, or --cairn-bench)")
    server = None
    if args.port is None:
        if not shutil.which("redis-server"):
            sys.exit("no redis-server on PATH; give --port of a running server")
        args.port = free_port()
        server = subprocess.Popen(["redis-server", "--port", str(args.port), "--save", "", "--appendonly", "no"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                redis_cli(args, args.host, args.port, "ping")
                break
            except subprocess.CalledProcessError:
                time.sleep(0.05)
    try:
        subprocess.run([os.path.join(HERE, "ycsb_java.sh"), "fetch"], check=True, stdout=subprocess.DEVNULL)
        version = redis_cli(args, args.host, args.port, "info", "server")
        version = next((l.split(":", 1)[1].strip() for l in version.splitlines() if l.startswith("redis_version:")), "?")
        print(f"server {args.host}:{args.port} (redis_version {version}); records {args.records}, "
              f"operations {args.operations}, load threads {args.load_threads}, rounds {args.rounds}")
        if not args.skip_layout_check:
            layout_check(args)
        rows = []
        threads = [int(t) for t in args.threads.split(",") if t]
        workloads = [w for w in args.workloads.split(",") if w]
        hdr = (f"{'threads':>7} {'workload':>8} {'round':>5} {'YCSB-Java ops/s':>15} {'cairn-bench ops/s':>17} "
               f"{'ratio':>6} {'read p99 J/cb µs':>18} {'update p99 J/cb µs':>20} errors J/cb")
        print(hdr)
        for rnd in range(1, args.rounds + 1):
            for w in workloads:
                for t in threads:
                    res = {}
                    order = ["java", "cb"] if rnd % 2 == 1 else ["cb", "java"]
                    for who in order:
                        redis_cli(args, args.host, args.port, "flushall")
                        if who == "java":
                            java(args, "load", w, args.load_threads, args.records, args.operations)
                            res[who] = java(args, "run", w, t, args.records, args.operations)
                        else:
                            res[who] = cairn_bench(args, w, t, args.records, args.operations)
                    (jt, jp, je), (ct, cp, ce) = res["java"], res["cb"]
                    row = {"threads": t, "workload": w, "round": rnd, "java_ops": jt, "cb_ops": ct,
                           "ratio": ct / jt if jt else None,
                           "java_read_p99": jp.get("READ"), "cb_read_p99": cp.get("READ"),
                           "java_update_p99": jp.get("UPDATE"), "cb_update_p99": cp.get("UPDATE"),
                           "java_errors": je, "cb_errors": ce, "order": order}
                    rows.append(row)
                    fmt = lambda v: "-" if v is None else f"{v:,.0f}"
                    print(f"{t:>7} {w:>8} {rnd:>5} {jt:>15,.0f} {ct:>17,.0f} {row['ratio']:>6.2f} "
                          f"{fmt(row['java_read_p99']) + ' / ' + fmt(row['cb_read_p99']):>18} "
                          f"{fmt(row['java_update_p99']) + ' / ' + fmt(row['cb_update_p99']):>20} "
                          f"{sum(je.values())}/{sum(ce.values())}", flush=True)
        print("medians over rounds:")
        print(f"{'threads':>7} {'workload':>8} {'YCSB-Java ops/s':>15} {'cairn-bench ops/s':>17} {'ratio':>6}  bar (>= 1.00)")
        for w in workloads:
            for t in threads:
                mine = [r for r in rows if r["workload"] == w and r["threads"] == t]
                jm = statistics.median(r["java_ops"] for r in mine)
                cm = statistics.median(r["cb_ops"] for r in mine)
                ratio = statistics.median(r["ratio"] for r in mine)
                print(f"{t:>7} {w:>8} {jm:>15,.0f} {cm:>17,.0f} {ratio:>6.2f}  {'met' if ratio >= 1.0 else 'NOT MET'}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"host": args.host, "port": args.port, "redis_version": version,
                           "records": args.records, "operations": args.operations,
                           "load_threads": args.load_threads, "rows": rows}, f, indent=2)
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
