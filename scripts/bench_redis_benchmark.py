#!/usr/bin/env python3
"""redis-benchmark against Cairn and redis-server in one run, side by side.

Runs `redis-benchmark -t <test> -c 50 -n N -r 100000 -q --csv` for each test,
unpipelined and with -P 16, against redis-server and one or more Cairn
configurations, rotating the order every round so the machine's drift hits
all alike, and reads each server's utime+stime from /proc/PID/stat around
every run to report server CPU microseconds per request, and redis-benchmark's
own utime+stime (getrusage of the finished child) as client CPU per request:
on a machine the client shares, a server that makes the client work harder
per request shows there. Prints a Markdown
table of medians (progress goes to stderr) and optionally an SVG chart.

Usage: scripts/bench_redis_benchmark.py [--requests N] [--rounds R]
           [--tests set,get,incr,hset,mset] [--cairn PATH]
           [--cairn-threads 1,2] [--also LABEL=CMD ...] [--out FILE]
           [--svg FILE] [--pin] [--fresh]

--fresh starts every server anew, with an empty data directory, for each
round: each round is then the issue's one `redis-benchmark -t a,b,c` run
against empty servers. Without it the servers keep their data from round
to round, so journals (and a list that LPUSH grows) keep growing.

--pin runs every server on CPU 1 and redis-benchmark on CPU 0 (taskset), so
the scheduler cannot put a server on the client's core for a whole run; on
a 2-core machine unpinned runs vary by up to 40% from that alone. Use it
with one-thread servers only.
"""
import argparse, os, resource, shlex, shutil, socket, statistics, subprocess, sys, tempfile, time

TICK = os.sysconf("SC_CLK_TCK")
PIN = False


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


def machine_secs():
    """(busy, steal) CPU seconds of the whole machine so far. busy is
    user+nice+system: interrupt and softirq time is left out, because
    loopback TCP is processed there, so it grows with the benchmark's own
    traffic and belongs to no process. steal is the time the hypervisor
    ran something else on this VM's vCPUs."""
    with open("/proc/stat") as f:
        cells = f.readline().split()[1:]
    user, nice, system = (int(c) for c in cells[:3])
    steal = int(cells[7]) if len(cells) > 7 else 0
    return (user + nice + system) / TICK, steal / TICK


def info_field(port, section, field):
    """One field of INFO <section>, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), 2) as c:
            c.sendall(f"INFO {section}\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                chunk = c.recv(65536)
                if not chunk:
                    return None
                data += chunk
            head, _, body = data.partition(b"\r\n")
            if not head.startswith(b"$"):
                return None
            want = int(head[1:]) + 2
            while len(body) < want:
                chunk = c.recv(65536)
                if not chunk:
                    break
                body += chunk
    except (OSError, ValueError):
        return None
    for line in body.decode(errors="replace").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


def settle(ports, limit=15.0):
    """Waits (up to `limit` s) until no server is rewriting its journal/AOF
    or saving a snapshot, and the machine has been idle for 0.3 s: the
    background work one run leaves (a fork child, a compaction, an fsync's
    writeback) must not be charged to the next run, whichever server that
    is. Returns the seconds waited."""
    t0 = time.time()
    while time.time() - t0 < limit:
        busy = any(info_field(p, "persistence", f) == "1"
                   for p in ports for f in ("aof_rewrite_in_progress", "rdb_bgsave_in_progress"))
        m0 = machine_secs()[0]
        time.sleep(0.3)
        if not busy and (machine_secs()[0] - m0) / 0.3 < 0.10:
            break
    return time.time() - t0


def run_one(port, test, n, pipeline):
    cmd = (["taskset", "-c", "0"] if PIN else []) + ["redis-benchmark", "-p", str(port), "-t", test, "-c", "50", "-n", str(n),
           "-r", "100000", "-q", "--csv"]
    if pipeline > 1:
        cmd += ["-P", str(pipeline)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # CSV: "test","rps",... one line per test after a header line. Some
    # tests run a preparation step first (lrange_100 prints an
    # "LPUSH (needed to benchmark LRANGE)" line): take the line named
    # after the test itself.
    for line in out.strip().splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) >= 2 and cells[0].split(" ")[0].upper() == test.upper():
            return float(cells[1]), client
    raise SystemExit(f"could not parse redis-benchmark output: {out!r}")


def start_servers(a, tmp, procs, server_prefix):
    """Starts redis-server and every Cairn configuration, each with a new
    data directory under `tmp`; appends their processes to `procs` and
    returns {label: (port, pid)} once all answer PING."""
    servers = {}  # label -> (port, pid)
    tmp = tempfile.mkdtemp(dir=tmp)
    p = free_port()
    procs.append(subprocess.Popen(
        server_prefix + ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp] + shlex.split(a.redis_args),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    servers["Redis"] = (p, procs[-1].pid)
    for t in a.cairn_threads.split(","):
        p = free_port()
        label = "Cairn" if t == "0" else f"Cairn {t}t"
        d = os.path.join(tmp, f"cairn-{t}")
        os.makedirs(d)
        procs.append(subprocess.Popen(
            server_prefix + [a.cairn, "--port", str(p), "--bind", "127.0.0.1", "--server-threads", t,
                             "--dir", d, "--save", ""] + shlex.split(a.cairn_args),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        servers[label] = (p, procs[-1].pid)
    for n, spec in enumerate(a.also):
        label, cmd = spec.split("=", 1)
        p = free_port()
        argv = shlex.split(cmd)
        if "--dir" not in argv:
            d = os.path.join(tmp, f"also-{n}")
            os.makedirs(d)
            argv += ["--dir", d]
        if "--save" not in argv:
            argv += ["--save", ""]
        procs.append(subprocess.Popen(
            server_prefix + argv + ["--port", str(p), "--bind", "127.0.0.1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        servers[label] = (p, procs[-1].pid)
    for port, _ in servers.values():
        wait_ping(port)
    return servers


def stop_servers(procs):
    for pr in procs:
        pr.terminate()
    for pr in procs:
        try:
            pr.wait(5)
        except subprocess.TimeoutExpired:
            pr.kill()
    procs.clear()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tests", default="set,get,incr,hset,mset")
    ap.add_argument("--cairn", default="target/release/cairn")
    ap.add_argument("--cairn-threads", default="0",
                    help="comma list of server-threads values, one Cairn per value (0 = default)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=CMD",
                    help="another server to compare, e.g. 'Cairn old=/tmp/old/cairn' or "
                         "'Cairn no-retain=target/release/cairn --worker-retain-locks no'; "
                         "started with --port/--bind added (repeatable)")
    ap.add_argument("--modes", default="plain,P16",
                    help="comma list of plain (no pipelining) and P16 (-P 16)")
    ap.add_argument("--out", default="")
    ap.add_argument("--svg", default="", help="also draw the medians as an SVG bar chart")
    ap.add_argument("--redis-args", default="",
                    help="extra redis-server arguments, e.g. '--appendonly yes --appendfsync always'")
    ap.add_argument("--cairn-args", default="",
                    help="extra arguments for every Cairn started through --cairn-threads")
    ap.add_argument("--pin", action="store_true",
                    help="servers on CPU 1, the client on CPU 0 (taskset)")
    ap.add_argument("--quiet", type=float, default=0.10,
                    help="re-run (up to --tries times) a run during which the rest of the "
                         "machine used more than this share of one CPU (0 = never)")
    ap.add_argument("--max-steal", type=float, default=0.12,
                    help="re-run (up to --tries times) a run during which the hypervisor stole "
                         "more than this share of the machine's CPU time (0 = never)")
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--no-settle", action="store_true",
                    help="start each run at once, without waiting for the previous run's "
                         "background work (rewrites, snapshots, writeback) to finish")
    ap.add_argument("--fresh", action="store_true",
                    help="new servers with empty data directories for every round (and mode), "
                         "so each round runs the tests in order against empty servers, as one "
                         "redis-benchmark -t a,b,c invocation would; without it the servers "
                         "keep their data (and journals) from round to round")
    ap.add_argument("--chart-from", action="append", default=[], metavar="TITLE=TABLE.md",
                    help="run nothing: draw --svg from tables this script wrote with --out, "
                         "one panel per table, titled TITLE (repeatable)")
    a = ap.parse_args()
    if a.chart_from:
        return chart_from_tables(a.chart_from, a.svg)
    global PIN
    PIN = a.pin
    server_prefix = ["taskset", "-c", "1"] if a.pin else []

    tmp = tempfile.mkdtemp(prefix="cairn-bench-")
    procs = []
    try:
        servers = start_servers(a, tmp, procs, server_prefix)
        labels = list(servers)
        results = {}  # (mode, test, label) -> [(rps, cpu_us_per_req)]
        tests = a.tests.split(",")
        modes = [m for m in [("plain", 1), ("P16", 16)] if m[0] in a.modes.split(",")]
        total = len(modes) * a.rounds * len(tests) * len(labels)
        done = 0
        for mode, pipe in modes:
            for r in range(a.rounds):
                if a.fresh and done > 0:
                    stop_servers(procs)
                    servers = start_servers(a, tmp, procs, server_prefix)
                for test in tests:
                    # Rotate the order each round: nobody always goes first.
                    order = labels[r % len(labels):] + labels[:r % len(labels)]
                    for label in order:
                        port, pid = servers[label]
                        best = None
                        for attempt in range(1, a.tries + 1):
                            if not a.no_settle:
                                settle([p for p, _ in servers.values()])
                            c0, (m0, s0), t0 = cpu_secs(pid), machine_secs(), time.time()
                            rps, client = run_one(port, test, a.requests, pipe)
                            c1, (m1, s1), t1 = cpu_secs(pid), machine_secs(), time.time()
                            wall = max(t1 - t0, 1e-3)
                            # What neither this server nor its client used:
                            # other processes (a build, another benchmark).
                            # The idle servers of the run count here too.
                            others = max(0.0, (m1 - m0) - (c1 - c0) - client) / wall
                            steal = (s1 - s0) / (wall * (os.cpu_count() or 1))
                            quiet = (a.quiet <= 0 or others <= a.quiet) and (
                                a.max_steal <= 0 or steal <= a.max_steal)
                            # Of disturbed attempts, the least disturbed is kept.
                            score = others + steal
                            if best is None or quiet or score < best[0]:
                                best = (score, rps, client, c1 - c0, others, steal)
                            if quiet or attempt == a.tries:
                                break
                            print(f"  {label} {test} {mode}: others used {others:.0%} of a CPU, "
                                  f"steal {steal:.0%}; again ({attempt}/{a.tries})",
                                  file=sys.stderr, flush=True)
                        _, rps, client, server_cpu, others, steal = best
                        cpu_us = server_cpu * 1e6 / a.requests
                        client_us = client * 1e6 / a.requests
                        results.setdefault((mode, test, label), []).append(
                            (rps, cpu_us, client_us))
                        done += 1
                        print(f"[{done}/{total}] {mode} round {r+1} {test:5} {label:9} "
                              f"{rps:>12,.0f} req/s  {cpu_us:6.2f} CPU us/req  "
                              f"client {client_us:6.2f} us/req  others {others:4.0%}  "
                              f"steal {steal:4.0%}",
                              file=sys.stderr, flush=True)

        med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3))
               for k, v in results.items()}
        others = labels[1:]
        head = "| test | mode | Redis req/s | " + " | ".join(
            f"{o} req/s | {o}/Redis" for o in others) + " | Redis CPU µs/req | " + " | ".join(
            f"{o} CPU µs/req" for o in others) + " | " + " | ".join(
            f"client CPU µs/req ({l})" for l in labels) + " |"
        sep = "|---|---|" + "---:|" * (1 + 2 * len(others) + 1 + len(others) + len(labels))
        lines = [head, sep]
        for mode, _ in modes:
            for test in tests:
                r_rps, r_cpu, _ = med[(mode, test, "Redis")]
                cells = [test.upper(), mode, f"{r_rps:,.0f}"]
                for o in others:
                    c_rps = med[(mode, test, o)][0]
                    cells += [f"{c_rps:,.0f}", f"{c_rps / r_rps:.2f}"]
                cells.append(f"{r_cpu:.2f}")
                cells += [f"{med[(mode, test, o)][1]:.2f}" for o in others]
                cells += [f"{med[(mode, test, l)][2]:.2f}" for l in labels]
                lines.append("| " + " | ".join(cells) + " |")
        table = "\n".join(lines)
        print(table)
        if a.out:
            with open(a.out, "w") as f:
                f.write(table + "\n")
        if a.svg:
            with open(a.svg, "w") as f:
                f.write(svg_chart({k: v[0] for k, v in med.items()},
                                  [m for m, _ in modes], tests, labels))
    finally:
        stop_servers(procs)
        shutil.rmtree(tmp, ignore_errors=True)


MODE_TITLES = {"P16": "-P 16", "plain": "(no pipelining)"}


def chart_from_tables(specs, svg_path):
    """Draws one chart from several --out tables (e.g. one per fsync
    policy): a panel per table, a bar per server column ("X req/s")."""
    medians, modes, tests, labels = {}, [], [], []
    for spec in specs:
        title, path = spec.split("=", 1)
        modes.append(title)
        with open(path) as f:
            head, _, *rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in f if l.strip()]
        cols = [(i, c[:-len(" req/s")]) for i, c in enumerate(head) if c.endswith(" req/s")]
        for row in rows:
            test = row[0].lower()
            if test not in tests:
                tests.append(test)
            for i, label in cols:
                if label not in labels:
                    labels.append(label)
                medians[(title, test, label)] = float(row[i].replace(",", ""))
    with open(svg_path, "w") as f:
        f.write(svg_chart(medians, modes, tests, labels))


def svg_chart(medians, modes, tests, labels):
    """Grouped bars: one panel per mode, one bar per server in each group.
    A mode other than P16/plain is its own title; a (mode, test, label)
    missing from `medians` draws no bar."""
    palette = ["#c0392b", "#2c7fb8", "#41ab5d", "#807dba"]
    colors = {l: palette[i % len(palette)] for i, l in enumerate(labels)}
    panel_w, panel_h, top, left, bar = 520, 260, 40, 40, 22
    width = left + len(modes) * (panel_w + 30)
    height = top + panel_h + 70
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for pi, mode in enumerate(modes):
        x0 = left + pi * (panel_w + 30)
        peak = max(medians.get((mode, t, n), 0) for t in tests for n in labels)
        scale = (panel_h - 20) / peak
        out.append(f'<text x="{x0 + panel_w / 2}" y="20" text-anchor="middle" font-size="14">'
                   f'redis-benchmark -c 50 {MODE_TITLES.get(mode, mode)}: '
                   'requests/s, median</text>')
        out.append(f'<line x1="{x0}" y1="{top + panel_h}" x2="{x0 + panel_w}" '
                   f'y2="{top + panel_h}" stroke="#333"/>')
        group = (panel_w - 20) / len(tests)
        for ti, test in enumerate(tests):
            gx = x0 + 10 + ti * group
            for ni, name in enumerate(labels):
                v = medians.get((mode, test, name))
                if not v:
                    continue  # this server was not in this panel's run
                h = v * scale
                bx = gx + ni * (bar + 2)
                out.append(f'<rect x="{bx:.1f}" y="{top + panel_h - h:.1f}" width="{bar}" '
                           f'height="{h:.1f}" fill="{colors[name]}"/>')
                out.append(f'<text x="{bx + bar / 2:.1f}" y="{top + panel_h - h - 3:.1f}" '
                           f'text-anchor="middle" font-size="9">{v / 1000:.0f}k</text>')
            out.append(f'<text x="{gx + len(labels) * (bar + 2) / 2:.1f}" '
                       f'y="{top + panel_h + 15}" text-anchor="middle">{test.upper()}</text>')
    ly = top + panel_h + 40
    for i, name in enumerate(labels):
        out.append(f'<rect x="{left + i * 130}" y="{ly}" width="12" height="12" '
                   f'fill="{colors[name]}"/>')
        out.append(f'<text x="{left + i * 130 + 18}" y="{ly + 11}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
