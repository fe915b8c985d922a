#!/usr/bin/env python3
"""redis-benchmark against Cairn and redis-server in one run, side by side.

Runs `redis-benchmark -t <test> -c 50 -n N -r 100000 -q --csv` for each test,
unpipelined and with -P 16, alternating Cairn and Redis for R rounds so the
machine's drift hits both alike, and reads each server's utime+stime from
/proc/PID/stat around every run to report server CPU microseconds per
request. Prints a Markdown table of medians (and progress to stderr).

Usage: scripts/bench_redis_benchmark.py [--requests N] [--rounds R]
           [--tests set,get,incr,hset,mset] [--cairn PATH] [--out FILE]
"""
import argparse, os, socket, statistics, subprocess, sys, tempfile, time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_ping(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on {port} did not answer PING")


def cpu_secs(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def run_one(port, test, n, pipeline):
    cmd = ["redis-benchmark", "-p", str(port), "-t", test, "-c", "50", "-n", str(n),
           "-r", "100000", "-q", "--csv"]
    if pipeline > 1:
        cmd += ["-P", str(pipeline)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    # CSV: "test","rps",... one line per test after a header line.
    for line in out.strip().splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) >= 2 and cells[0] != "test":
            return float(cells[1])
    raise SystemExit(f"could not parse redis-benchmark output: {out!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tests", default="set,get,incr,hset,mset")
    ap.add_argument("--cairn", default="target/release/cairn")
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="cairn-bench-")
    servers = {}
    procs = []
    try:
        p = free_port()
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        servers["redis"] = (p, procs[-1].pid)
        p = free_port()
        procs.append(subprocess.Popen(
            [a.cairn, "--port", str(p), "--bind", "127.0.0.1"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        servers["cairn"] = (p, procs[-1].pid)
        for name, (port, _) in servers.items():
            wait_ping(port)

        results = {}  # (mode, test, server) -> [(rps, cpu_us_per_req)]
        tests = a.tests.split(",")
        modes = [("plain", 1), ("P16", 16)]
        total = len(modes) * a.rounds * len(tests) * len(servers)
        done = 0
        for mode, pipe in modes:
            for r in range(a.rounds):
                for test in tests:
                    order = ["cairn", "redis"] if r % 2 == 0 else ["redis", "cairn"]
                    for name in order:
                        port, pid = servers[name]
                        c0 = cpu_secs(pid)
                        rps = run_one(port, test, a.requests, pipe)
                        c1 = cpu_secs(pid)
                        cpu_us = (c1 - c0) * 1e6 / a.requests
                        results.setdefault((mode, test, name), []).append((rps, cpu_us))
                        done += 1
                        print(f"[{done}/{total}] {mode} round {r+1} {test:5} {name:6} "
                              f"{rps:>12,.0f} req/s  {cpu_us:6.2f} CPU us/req",
                              file=sys.stderr, flush=True)

        lines = ["| test | mode | Redis req/s | Cairn req/s | Cairn/Redis | Redis CPU µs/req | Cairn CPU µs/req |",
                 "|---|---|---:|---:|---:|---:|---:|"]
        for mode, _ in modes:
            for test in tests:
                rr = results[(mode, test, "redis")]
                cr = results[(mode, test, "cairn")]
                r_rps = statistics.median(x[0] for x in rr)
                c_rps = statistics.median(x[0] for x in cr)
                r_cpu = statistics.median(x[1] for x in rr)
                c_cpu = statistics.median(x[1] for x in cr)
                lines.append(f"| {test.upper()} | {mode} | {r_rps:,.0f} | {c_rps:,.0f} | "
                             f"{c_rps / r_rps:.2f} | {r_cpu:.2f} | {c_cpu:.2f} |")
        table = "\n".join(lines)
        print(table)
        if a.out:
            with open(a.out, "w") as f:
                f.write(table + "\n")
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            try:
                pr.wait(5)
            except subprocess.TimeoutExpired:
                pr.kill()


if __name__ == "__main__":
    main()
