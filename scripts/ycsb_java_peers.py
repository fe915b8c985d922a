#!/usr/bin/env python3
"""YCSB's own Java client against Cairn and redis-server (issue 20's
second bar: workloads A and B at 8 and 32 threads, Cairn >= 1.1x Redis).

Starts both servers on free ports (no persistence), and for every round
and server, in alternating order: FLUSHALL, a load of --records records
with --load-threads, then each workload at each thread count on those
records (A's updates and B's reads leave the record set as loaded).
Server CPU per operation comes from /proc/PID/stat (user + system ticks)
around each run. Prints per-run lines on stderr and a Markdown table of
medians on stdout (or --out FILE), with the exact command.

    scripts/ycsb_java_peers.py --records 100000 --operations 300000 \\
        --threads 8,32 --rounds 5 --cairn target/release/cairn

YCSB Java comes from scripts/ycsb_java.sh (fetched on first use).
"""
import argparse
import os
import platform
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ycsb_vs_java import java  # noqa: E402  (same parsing as the client comparison)

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_ping(port):
    for _ in range(200):
        r = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return
        time.sleep(0.05)
    sys.exit(f"server on port {port} does not answer PING")


def start(name, binary, scratch):
    port = free_port()
    if name == "cairn":
        cmd = [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", scratch]
    else:
        cmd = [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", scratch,
               "--dbfilename", f"ycsb-java-{port}.rdb"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ping(port)
    return SimpleNamespace(name=name, port=port, proc=proc, version=version(port))


def version(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "info", "server"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("redis_version:"):
            return line.split(":", 1)[1].strip()
    return "?"


def one(args, srv, mode, workload, threads, ops):
    a = SimpleNamespace(host="127.0.0.1", port=srv.port)
    before = cpu_seconds(srv.proc.pid)
    tput, p99, errors = java(a, mode, workload, threads, args.records, ops)
    cpu = cpu_seconds(srv.proc.pid) - before
    n = args.records if mode == "load" else ops
    return tput, cpu / n * 1e6, p99, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--operations", type=int, default=300000)
    ap.add_argument("--threads", default="8,32")
    ap.add_argument("--workloads", default="a,b")
    ap.add_argument("--load-threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cairn", default=os.path.join(os.path.dirname(HERE), "target/release/cairn"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--out")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    workloads = args.workloads.split(",")
    scratch = tempfile.mkdtemp(prefix="ycsb-java-peers-")
    servers = []
    results = {}  # (server, line) -> [(ops/s, cpu µs/op)]
    try:
        servers = [start("cairn", args.cairn, scratch), start("redis", args.redis, scratch)]
        for r in range(args.rounds):
            order = servers if r % 2 == 0 else servers[::-1]
            for srv in order:
                subprocess.run(["redis-cli", "-p", str(srv.port), "flushall"], capture_output=True, check=True)
                t, cpu, _, err = one(args, srv, "load", "a", args.load_threads, 0)
                results.setdefault((srv.name, f"load, {args.load_threads} threads"), []).append((t, cpu))
                print(f"round {r + 1}/{args.rounds} {srv.name} load: {t:,.0f} ops/s, {cpu:.2f} µs/op{' errors ' + str(err) if err else ''}",
                      file=sys.stderr, flush=True)
                for w in workloads:
                    for th in threads:
                        t, cpu, p99, err = one(args, srv, "run", w, th, args.operations)
                        results.setdefault((srv.name, f"{w.upper()}, {th} threads"), []).append((t, cpu))
                        print(f"round {r + 1}/{args.rounds} {srv.name} {w} {th}: {t:,.0f} ops/s, {cpu:.2f} µs/op, p99 {p99}"
                              f"{' errors ' + str(err) if err else ''}", file=sys.stderr, flush=True)
    finally:
        for s in servers:
            s.proc.terminate()
            s.proc.wait()
        for f in os.listdir(scratch):
            os.unlink(os.path.join(scratch, f))
        os.rmdir(scratch)

    lines = [k[1] for k in results if k[0] == "cairn"]
    commit = subprocess.run(["git", "-C", os.path.dirname(HERE), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    out = [f"YCSB Java client (site.ycsb 0.17.0, scripts/ycsb_java.sh), Cairn {servers[0].version} "
           f"(commit {commit}) against redis-server {servers[1].version}, {args.rounds} interleaved rounds, "
           f"{args.records:,} records, {args.operations:,} operations; {platform.node()}, {os.cpu_count()} CPUs.",
           "", f"`{' '.join(shlex.quote(a) for a in sys.argv)}`", "",
           "| line | Cairn ops/s | Redis ops/s | Cairn ÷ Redis | min-max per round | server CPU µs/op Cairn / Redis |",
           "|---|---:|---:|---:|---|---|"]
    for line in lines:
        c, rd = results[("cairn", line)], results[("redis", line)]
        mc = statistics.median(x[0] for x in c)
        mr = statistics.median(x[0] for x in rd)
        ratios = [a[0] / b[0] for a, b in zip(c, rd)]
        out.append(f"| {line} | {mc:,.0f} | {mr:,.0f} | {mc / mr:.2f} | {min(ratios):.2f}-{max(ratios):.2f} | "
                   f"{statistics.median(x[1] for x in c):.2f} / {statistics.median(x[1] for x in rd):.2f} |")
    text = "\n".join(out) + "\n"
    if args.out:
        open(args.out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
