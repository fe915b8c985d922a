#!/usr/bin/env python3
"""Kernel-side cost per YCSB operation: system calls by kind, context
switches, wake-ups, user and system CPU, for Cairn and redis-server under
the same `cairn-bench ycsb` run (issue 20, session 15).

Why counts and not throughput: on a shared, loaded 2-core machine the
ops/s of a run drift by tens of percent, but how many `read`s, `write`s,
`epoll_wait`s and sleeps a server makes per operation changes little with
the load, and on that machine (client and server sharing the cores)
throughput is about 2 cores / (client CPU + server CPU per op), most of a
server's CPU per unpipelined op being the kernel's.

How: both servers start fresh (`--save '' --appendonly no`, defaults
otherwise), are loaded once by `cairn-bench ycsb`, then each measured
line runs `cairn-bench ycsb --skip-load` against one server at a time
(servers alternate, rounds interleaved) while `perf stat -p PID` counts
system-call tracepoints in the kernel (exact counts, small overhead,
the same for both servers). Around each run the script reads, per server
thread, `/proc/PID/task/TID/stat` (user and system ticks),
`/proc/PID/task/TID/status` (voluntary and involuntary context switches)
and `schedstat` (run time, time slices), and the server's INFO
`total_net_output_bytes`; the client's user and system CPU come from
`wait4` on the cairn-bench process.

Reported per operation (median over rounds): each system call kind,
`read`s that returned EAGAIN, `epoll_wait`s that returned no event,
context switches (voluntary: the thread slept and was woken), wake-ups
the server's threads made of other tasks (`sched:sched_wakeup` fired in
the server's context: mostly the clients), user and system µs, the
client's user and system µs, and bytes per `write`.

Usage:
  scripts/ycsb_syscalls.py --cairn "cairn=target/release/cairn" \\
      [--cairn "spin0=target/release/cairn --worker-spin-us 0" ...] \\
      [--redis "redis-server" | --redis none] \\
      [--bench target/release/cairn-bench] [--records 100000] \\
      [--ops 100000] [--runs a:8,b:32] [--rounds 3]
Needs perf with tracepoints (Debian linux-perf, run as root or with
perf_event_paranoid <= -1).
"""

import argparse
import os
import random
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")

SYSCALLS = [
    "read",
    "write",
    "writev",
    "recvfrom",
    "sendto",
    "sendmsg",
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "futex",
    "getrusage",
    "sched_yield",
    "clock_nanosleep",
    "nanosleep",
    "openat",
    "madvise",
    "mmap",
    "munmap",
]

# (label, event, filter)
EVENTS = (
    [("syscalls", "raw_syscalls:sys_enter", None)]
    + [(s, f"syscalls:sys_enter_{s}", None) for s in SYSCALLS]
    + [
        ("read EAGAIN", "syscalls:sys_exit_read", "ret == -11"),
        ("recvfrom EAGAIN", "syscalls:sys_exit_recvfrom", "ret == -11"),
        ("epoll_wait empty", "syscalls:sys_exit_epoll_wait", "ret == 0"),
        ("epoll_pwait empty", "syscalls:sys_exit_epoll_pwait", "ret == 0"),
        ("wakeups made", "sched:sched_wakeup", None),
        ("ctx switches (perf)", "context-switches", None),
        ("migrations", "cpu-migrations", None),
    ]
)


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def info(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp("INFO", "all"))
        buf = b""
        while True:
            buf += s.recv(65536)
            m = re.match(rb"\$(\d+)\r\n", buf)
            if m and len(buf) >= m.end() + int(m.group(1)) + 2:
                body = buf[m.end() : m.end() + int(m.group(1))]
                break
    out = {}
    for line in body.decode().splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def wait_up(port):
    for _ in range(600):
        try:
            info(port)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server on port {port} did not start")


def threads(pid):
    """Per thread: (comm, utime, stime, vol, invol, run_ns, slices,
    runqueue wait ns)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as f:
                st = f.read()
            with open(f"{base}/status") as f:
                status = f.read()
            with open(f"{base}/schedstat") as f:
                sched = f.read().split()
        except OSError:
            continue
        comm = st[st.index("(") + 1 : st.rindex(")")]
        rest = st[st.rindex(")") + 2 :].split()
        utime, stime = int(rest[11]), int(rest[12])
        vol = int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status).group(1))
        invol = int(re.search(r"nonvoluntary_ctxt_switches:\s+(\d+)", status).group(1))
        out[tid] = (comm, utime, stime, vol, invol, int(sched[0]), int(sched[2]), int(sched[1]))
    return out


def machine():
    """Machine-wide irq and softirq ticks (`/proc/stat`). With IRQ time
    accounting the kernel charges them to no process, and on loopback
    most of a packet's delivery runs in softirq, so they are the part of
    a request's cost the per-thread times leave out. Other processes'
    builds do no networking, so this is nearly all the benchmark's."""
    with open("/proc/stat") as f:
        v = f.readline().split()[1:]
    return int(v[5]) + int(v[6])


def interrupts():
    """Machine-wide counts: rescheduling IPIs (a wake-up sent to another
    core), function-call IPIs, local timer interrupts, and softirqs by
    kind. Other processes add some, but at tens of thousands of requests
    a second the benchmark's are most of them."""
    out = {}
    with open("/proc/interrupts") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in ("RES:", "CAL:", "LOC:"):
                out[parts[0][:-1]] = sum(int(x) for x in parts[1:] if x.isdigit())
    with open("/proc/softirqs") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in ("NET_RX:", "SCHED:", "TIMER:", "RCU:", "HRTIMER:"):
                out["softirq " + parts[0][:-1]] = sum(int(x) for x in parts[1:])
    return out


def thread_delta(a, b):
    rows = []
    for tid, now in b.items():
        was = a.get(tid, (now[0], 0, 0, 0, 0, 0, 0, 0))
        rows.append((tid, now[0]) + tuple(x - y for x, y in zip(now[1:], was[1:])))
    return rows


def perf_events():
    args = []
    for _, ev, flt in EVENTS:
        args += ["-e", ev]
        if flt:
            args += ["--filter", flt]
    return args


def parse_perf(path):
    counts = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 3 or line.startswith("#"):
                continue
            try:
                v = int(parts[0])
            except ValueError:
                continue
            counts.setdefault(parts[2], []).append(v)
    # The same event may appear twice (once per filter); keep order.
    out = {}
    seen = {}
    for label, ev, _ in EVENTS:
        i = seen.get(ev, 0)
        seen[ev] = i + 1
        vals = counts.get(ev, [])
        out[label] = vals[i] if i < len(vals) else None
    return out


def run_bench(a, port, workload, threads_n, prefix=()):
    cmd = list(prefix) + [
        a.bench,
        "ycsb",
        "--target",
        f"s=redis://127.0.0.1:{port}",
        "--workload",
        workload,
        "--records",
        str(a.records),
        "--operations",
        str(a.ops),
        "--threads",
        str(threads_n),
        "--rounds",
        "1",
        "--skip-load",
    ]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # The client threads' run-queue wait (schedstat), sampled every 20 ms
    # until they exit (the last ~20 ms are missed): how long a client
    # ready to send its next request waited for a core.
    waits = {}
    stop = threading.Event()

    def sample():
        while not stop.wait(0.02):
            try:
                for tid in os.listdir(f"/proc/{p.pid}/task"):
                    with open(f"/proc/{p.pid}/task/{tid}/schedstat") as f:
                        waits[tid] = int(f.read().split()[1])
            except OSError:
                pass

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out = p.stdout.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    stop.set()
    t.join()
    run_bench.client_wait_ns = sum(waits.values())
    if status != 0:
        sys.exit(f"cairn-bench failed:\n{out}")
    m = re.search(r"round 1: ([\d,]+) ops/s, (\d+) errors", out)
    opss = int(m.group(1).replace(",", "")) if m else 0
    errors = int(m.group(2)) if m else -1
    return opss, errors, ru.ru_utime, ru.ru_stime, out


def measure(a, pid, port, workload, threads_n):
    """One run under `perf stat` for the counts, then one without it for
    the times and switches (perf's tracepoints slow every system call,
    which would inflate the server's system time and change its pacing)."""
    r = {}
    if not a.no_perf:
        r = counts_run(a, pid, port, workload, threads_n)
    t0 = threads(pid)
    m0 = machine()
    q0 = interrupts()
    opss, errors, cu, cs, out = run_bench(a, port, workload, threads_n)
    q1 = interrupts()
    m1 = machine()
    t1 = threads(pid)
    rows = thread_delta(t0, t1)
    ops = a.ops
    r["ops/s (loaded machine)"] = opss
    r["errors"] = errors
    r["user us"] = sum(x[2] for x in rows) / CLK_TCK * 1e6 / ops
    r["sys us"] = sum(x[3] for x in rows) / CLK_TCK * 1e6 / ops
    r["run us (schedstat)"] = sum(x[6] for x in rows) / 1e3 / ops
    r["vol ctx sw"] = sum(x[4] for x in rows) / ops
    r["invol ctx sw"] = sum(x[5] for x in rows) / ops
    r["slices"] = sum(x[7] for x in rows) / ops
    r["client user us"] = cu * 1e6 / ops
    r["client sys us"] = cs * 1e6 / ops
    r["client wait us (runqueue)"] = run_bench.client_wait_ns / 1e3 / ops
    r["irq+softirq us (machine)"] = (m1 - m0) / CLK_TCK * 1e6 / ops
    for k in q1:
        r[f"{k} (machine)"] = (q1[k] - q0[k]) / ops
    r["server wait us (runqueue)"] = sum(x[8] for x in rows) / 1e3 / ops
    busy = [
        (x[1], round(x[6] / 1e3 / ops, 2), round(x[4] / ops, 3))
        for x in sorted(rows, key=lambda x: -x[6])
        if x[6] / 1e3 / ops > 0.05
    ]
    r["threads (comm, run us/op, vol sw/op)"] = busy
    return r


def counts_run(a, pid, port, workload, threads_n):
    perf_out = tempfile.mktemp(prefix="ycsb-perf-")
    perf = subprocess.Popen(
        ["perf", "stat", "-x,", "-o", perf_out, "-p", str(pid)] + perf_events(),
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.3)  # perf attaches
    client_out = tempfile.mktemp(prefix="ycsb-perf-client-")
    i0 = info(port)
    run_bench(a, port, workload, threads_n,
              ["perf", "stat", "-x,", "-o", client_out] + perf_events() + ["--"])
    i1 = info(port)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    counts = parse_perf(perf_out)
    client = parse_perf(client_out)
    os.unlink(perf_out)
    os.unlink(client_out)
    ops = a.ops
    r = {k: (v / ops if v is not None else None) for k, v in counts.items()}
    for k in ("syscalls", "read", "write", "recvfrom", "sendto", "futex", "read EAGAIN",
              "wakeups made", "ctx switches (perf)", "migrations"):
        if client.get(k) is not None:
            r[f"client {k}"] = client[k] / ops
    nout = int(i1.get("total_net_output_bytes", 0)) - int(i0.get("total_net_output_bytes", 0))
    nin = int(i1.get("total_net_input_bytes", 0)) - int(i0.get("total_net_input_bytes", 0))
    writes = sum(counts.get(k) or 0 for k in ("write", "writev", "sendto", "sendmsg"))
    r["bytes out/op"] = nout / ops
    r["bytes in/op"] = nin / ops
    r["bytes/write"] = nout / writes if writes else None
    return r


def start(a):
    tmp = tempfile.mkdtemp(prefix="ycsb-sys-")
    servers = []
    used = set()

    def port():
        while True:
            p = random.randint(20000, 29999)
            if p not in used:
                used.add(p)
                return p

    for spec in a.cairn or ["cairn=target/release/cairn"]:
        name, cmdline = spec.split("=", 1)
        argv = shlex.split(cmdline)
        p = port()
        os.makedirs(f"{tmp}/{name}")
        proc = subprocess.Popen(
            argv[:1] + ["--port", str(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", f"{tmp}/{name}"] + argv[1:],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        servers.append((name, proc, p))
    if a.redis != "none":
        argv = shlex.split(a.redis)
        p = port()
        os.makedirs(f"{tmp}/redis")
        proc = subprocess.Popen(
            argv[:1] + ["--port", str(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", f"{tmp}/redis"] + argv[1:],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        servers.append(("redis", proc, p))
    for _, _, p in servers:
        wait_up(p)
    return servers


def load(a, port, workload):
    subprocess.run(
        [a.bench, "ycsb", "--target", f"s=redis://127.0.0.1:{port}", "--workload", workload,
         "--records", str(a.records), "--operations", "1000", "--threads", "8", "--rounds", "1"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", action="append", metavar="NAME=BIN [ARGS]",
                    help="a Cairn server to measure (repeat to compare builds or settings)")
    ap.add_argument("--redis", default="redis-server", help="BIN [ARGS], or none")
    ap.add_argument("--bench", default="target/release/cairn-bench")
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--runs", default="a:8,b:32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-perf", action="store_true",
                    help="only the times, switches and interrupts (no counting run)")
    a = ap.parse_args()
    servers = start(a)
    try:
        for _, _, p in servers:
            load(a, p, "a")
        pids = {n: int(info(p)["process_id"]) for n, _, p in servers}
        for run in a.runs.split(","):
            wl, th = run.split(":")
            results = {n: [] for n, _, _ in servers}
            for _ in range(a.rounds):
                for n, _, p in servers:
                    results[n].append(measure(a, pids[n], p, wl, int(th)))
            print(f"\n## workload {wl.upper()}, {th} threads, {a.ops:,} ops, "
                  f"median of {a.rounds} rounds, per operation\n")
            names = [n for n, _, _ in servers]
            print("| | " + " | ".join(names) + " |")
            print("|---|" + "---:|" * len(names))
            for k in results[names[0]][0]:
                if k.startswith("threads"):
                    continue
                cells = []
                for n in names:
                    vals = [r[k] for r in results[n] if r[k] is not None]
                    cells.append(fmt(statistics.median(vals)) if vals else "-")
                if all(c in ("-", "0.000") for c in cells):
                    continue
                print(f"| {k} | " + " | ".join(cells) + " |")
            for n in names:
                print(f"\n{n} threads per round (comm, run µs/op, voluntary switches/op):")
                for r in results[n]:
                    print("  ", r["threads (comm, run us/op, vol sw/op)"])
            sys.stdout.flush()
    finally:
        for _, proc, _ in servers:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
