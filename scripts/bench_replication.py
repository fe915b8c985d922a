#!/usr/bin/env python3
"""Issue 24's replication bar: Cairn and redis-server 7.0.15, each with a
replica of its own kind (Cairn -> Cairn, Redis -> Redis), in one run on one
machine. Started by scripts/bench_replication.sh (which builds a release
Cairn first); the settings come from the environment, as the other bench
scripts take them.

Three parts (PARTS, all by default):
  throughput  `redis-benchmark -P 16 -c 50 -n N -r 100000 -t <line>` for each
              part-1 line against four masters: Cairn alone, Cairn with one
              Cairn replica, Redis alone, Redis with one Redis replica; the
              four take turns within each round (the order rotates every
              round). Before each run the replica is synced (link up, its
              offset equal to the master's), after it the lag left is read
              at once and the time until the offsets are equal again. Server
              CPU (utime+stime of all threads, /proc) per request, master and
              replica apart; a table of the master's CPU per request with a
              replica ÷ alone, for both servers (where client, master and
              replica share the cores, the form of "with a replica ≥ 0.9×
              without" that the replica's own CPU does not decide), and a
              table of each replica's CPU per request it applied, Cairn's
              against Redis's (on shared cores it is taken from the master
              and the client).
  sync        a master of each kind loaded with SYNC_KEYS keys of VALUE_SIZE
              random (incompressible) bytes by a pipelined loader; per round
              and mode a fresh, empty replica is started and told REPLICAOF;
              the time until it reports `master_link_status:up` and
              `master_sync_in_progress:0` and holds every key (DBSIZE, plus
              three values compared byte for byte). Meanwhile a probe
              process sends PING and GET to the master at PROBE_HZ, and its
              latencies (from each request's scheduled time, so a stall
              counts for every request it holds up) give p50/p99/max. Modes:
              diskless (`repl-diskless-sync yes`, the default) and disk
              (`repl-diskless-sync no`), set on the master by CONFIG SET.
              Both masters run with `repl-diskless-sync-delay 0`: Redis's
              default waits 5 s for more replicas before a diskless sync.
  lag         sustained `redis-benchmark -t set -c 50 -r 100000 [-P 16]` for
              LAG_SECONDS against the master of each pair, while a sampler
              reads the master's `master_repl_offset` and the replica's
              `slave_repl_offset` every 10 ms (INFO replication sent to both
              at once); the lag is their difference in bytes, and in ms the
              time since the master's offset reached the replica's (the
              master's offsets interpolated between samples).

Progress goes to stderr, the report (header with commit, machine, versions
and exact commands, then Markdown tables) to stdout and, with OUT, to that
file. --quick: N=2000, ROUNDS=1, SYNC_KEYS=2000, LAG_SECONDS=1 (a
functional check of the wiring, not a measurement).

Env: ROUNDS (5), N (1000000), TESTS (set,get,incr,hset,mset), PIPELINE (16),
     SYNC_KEYS (1000000), VALUE_SIZE (1024), SYNC_MODES (diskless,disk),
     PROBE_HZ (500), LAG_SECONDS (10), LAG_PIPELINES (1,16),
     PARTS (throughput,sync,lag), OUT, CAIRN (target/release/cairn), REDIS
     (redis-server), CATCHUP_TIMEOUT (60 s: a replica not caught up by then
     is reported as a defect and the run stops).
"""
import math
import multiprocessing
import os
import platform
import random
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- parsing


class RespError(str):
    """An error reply (`-ERR ...`), kept as a value so parsing stays pure."""


def parse_reply(buf, pos=0):
    """One RESP2 reply from buf[pos:]: (value, next position), or None when
    buf holds only part of it. Simple strings are str, errors RespError,
    bulk strings bytes (None for a null), arrays lists."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return None
    kind, line = buf[pos:pos + 1], buf[pos + 1:end]
    nxt = end + 2
    if kind == b"+":
        return line.decode(), nxt
    if kind == b"-":
        return RespError(line.decode()), nxt
    if kind == b":":
        return int(line), nxt
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, nxt
        if len(buf) < nxt + n + 2:
            return None
        return bytes(buf[nxt:nxt + n]), nxt + n + 2
    if kind == b"*":
        n = int(line)
        if n < 0:
            return None, nxt
        items = []
        for _ in range(n):
            got = parse_reply(buf, nxt)
            if got is None:
                return None
            item, nxt = got
            items.append(item)
        return items, nxt
    raise ValueError(f"not a RESP reply at {pos}: {bytes(buf[pos:pos + 20])!r}")


def encode(*args):
    """A command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def parse_info(text):
    """INFO's `field:value` lines as a dict (sections and blanks skipped)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    fields = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ":" in line:
            k, v = line.split(":", 1)
            fields[k] = v.strip()
    return fields


def benchmark_rps(out, test):
    """Requests per second of `test` in `redis-benchmark -q --csv` output.
    A line's preparation step prints its own row first (LRANGE's "LPUSH
    (needed to benchmark LRANGE)"): the row named after the test counts,
    and MSET's row is "MSET (10 keys)"."""
    for line in out.strip().splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) >= 2 and cells[0].split(" ")[0].upper() == test.upper():
            return float(cells[1])
    raise ValueError(f"no {test} row in redis-benchmark output: {out!r}")


def percentile(values, p):
    """The nearest-rank p-th percentile (p in 0..100) of values; None when
    there are none."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, math.ceil(p / 100 * len(s)))
    return s[k - 1]


def lag_series(samples):
    """Lag of each (t, master_offset, replica_offset) sample, t in seconds:
    [(bytes, ms)]. bytes = master - replica (0 when the replica is level).
    ms = how long ago the master's offset reached the replica's: the
    master's offset between two samples is taken as growing linearly, so
    the time it passed the replica's offset is interpolated; a replica
    offset the master already had at the first sample counts from then."""
    out = []
    first = 0  # the earliest sample whose master offset may still be < r
    for i, (t, m, r) in enumerate(samples):
        if r >= m:
            out.append((0, 0.0))
            continue
        # Master offsets only grow, and so do the replica's: the search
        # starts where the last one ended.
        j = first
        while j < i and samples[j][1] < r:
            j += 1
        first = j
        tj, mj = samples[j][0], samples[j][1]
        if j == 0 or mj == r:
            reached = tj
        else:
            tp, mp = samples[j - 1][0], samples[j - 1][1]
            reached = tp + (tj - tp) * (r - mp) / (mj - mp) if mj > mp else tj
        out.append((m - r, max(0.0, (t - reached) * 1000)))
    return out


def summary(values):
    """(p50, p99, max) of values, None each when there are none."""
    if not values:
        return (None, None, None)
    return (percentile(values, 50), percentile(values, 99), max(values))


def median_or_none(values):
    return statistics.median(values) if values else None


def fmt_num(x, digits=0):
    """1234567.8 -> '1,234,568'; None -> '-'."""
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def fmt_ratio(a, b):
    if a is None or not b:
        return "-"
    return f"{a / b:.3f}"


def verdict(ratio, bar, higher_is_better=True):
    if ratio is None:
        return "-"
    return "meets" if (ratio >= bar if higher_is_better else ratio <= bar) else "below"


# ---------------------------------------------------------------- servers


class Conn:
    """A blocking RESP connection."""

    def __init__(self, port, timeout=30.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def send(self, *args):
        self.sock.sendall(encode(*args))

    def read(self):
        while True:
            got = parse_reply(self.buf) if self.buf else None
            if got is not None:
                value, used = got
                del self.buf[:used]
                return value
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk

    def call(self, *args):
        self.send(*args)
        return self.read()

    def info(self, section):
        v = self.call("INFO", section)
        if isinstance(v, RespError):
            raise RuntimeError(f"INFO {section}: {v}")
        return parse_info(v)

    def close(self):
        self.sock.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_secs(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime, all threads


def log_tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def defect(msg, *servers):
    """Stops the run over a replication defect, with the servers' last log
    lines (the run's directory is removed on the way out)."""
    tails = "".join(f"\n--- last lines of {x.name}'s log ---\n{log_tail(x.log.name)}" for x in servers)
    return SystemExit(f"DEFECT: {msg}{tails}")


# Every server started and not yet stopped: main stops them on any exit.
RUNNING = []


class Server:
    """A Cairn or redis-server process on an ephemeral port with its own
    directory, no snapshots, no journal/AOF."""

    def __init__(self, kind, binary, tmp, name):
        self.kind, self.name = kind, name
        self.port = free_port()
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", self.dir, "--repl-diskless-sync-delay", "0"]
        self.log = open(os.path.join(tmp, name + ".log"), "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self.conn = None
        RUNNING.append(self)
        deadline = time.time() + 30
        while True:
            try:
                c = Conn(self.port, 2)
                if c.call("PING") == "PONG":
                    c.close()
                    break
                c.close()
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                tail = log_tail(self.log.name)
                self.stop()
                raise SystemExit(f"{name} ({' '.join(self.argv)}) did not answer PING; "
                                 f"its log:\n{tail}")
            time.sleep(0.05)
        self.conn = Conn(self.port)

    def cpu(self):
        return cpu_secs(self.pid)

    def shown_cmd(self, tmp):
        """The command line as the report shows it, the run's temporary
        directory as $TMP and the port as given."""
        return " ".join(shlex.quote(a) for a in self.argv).replace(tmp, "$TMP")

    def stop(self):
        if self in RUNNING:
            RUNNING.remove(self)
        try:
            if self.conn:
                self.conn.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def offsets(master, replica):
    """(master_repl_offset of the master, slave_repl_offset of the replica,
    the replica's INFO replication), both INFOs sent before either is read
    so the two readings are as close in time as two sockets allow."""
    master.conn.send("INFO", "replication")
    replica.conn.send("INFO", "replication")
    m = parse_info(master.conn.read())
    r = parse_info(replica.conn.read())
    return int(m.get("master_repl_offset", -1)), int(r.get("slave_repl_offset", -1)), r


def wait_caught_up(master, replica, timeout):
    """Waits until the replica's link is up, no sync runs and its offset
    equals the master's. Returns (lag in bytes at the first reading,
    seconds until level). A replica not level within `timeout` is a
    replication defect: the run stops and says so."""
    t0 = time.monotonic()
    first = None
    while True:
        m, r, info = offsets(master, replica)
        if first is None:
            first = max(0, m - r)
        if info.get("master_link_status") == "up" and info.get("master_sync_in_progress") == "0" \
                and m == r:
            return first, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise defect(
                f"{replica.name} not caught up with {master.name} after {timeout} s: "
                f"master_repl_offset {m}, slave_repl_offset {r}, "
                f"link {info.get('master_link_status')}, "
                f"sync_in_progress {info.get('master_sync_in_progress')}", master, replica)
        time.sleep(0.01)


def attach(master, replica, timeout):
    r = replica.conn.call("REPLICAOF", "127.0.0.1", master.port)
    if isinstance(r, RespError):
        raise SystemExit(f"REPLICAOF on {replica.name}: {r}")
    wait_caught_up(master, replica, timeout)


def sync_counters(master):
    s = master.conn.info("stats")
    return int(s.get("sync_full", 0)), int(s.get("sync_partial_ok", 0))


# ---------------------------------------------------------------- parts


def run_benchmark(port, test, n, pipeline):
    cmd = ["redis-benchmark", "-p", str(port), "-c", "50", "-n", str(n), "-r", "100000",
           "-P", str(pipeline), "-q", "--csv", "-t", test]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return benchmark_rps(out, test)


CONFIGS = [("cairn", False), ("cairn", True), ("redis", False), ("redis", True)]
LABEL = {("cairn", False): "Cairn alone", ("cairn", True): "Cairn + replica",
         ("redis", False): "Redis alone", ("redis", True): "Redis + replica"}


def part_throughput(s, pairs, alone):
    """Rounds of every part-1 line against the four configurations;
    returns the Markdown section."""
    results = {}  # (config, test) -> [(rps, master µs/req, replica µs/req, lag bytes, catch-up s)]
    tests = s.tests
    total = s.rounds * len(tests) * len(CONFIGS)
    done = 0
    resyncs = []
    for r in range(s.rounds):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for test in tests:
            for cfg in order:
                kind, with_replica = cfg
                master, replica = pairs[kind] if with_replica else (alone[kind], None)
                if replica:
                    wait_caught_up(master, replica, s.catchup_timeout)
                    full0, _ = sync_counters(master)
                    rc0 = replica.cpu()
                c0 = master.cpu()
                rps = run_benchmark(master.port, test, s.n, s.pipeline)
                c1 = master.cpu()
                lag = catch = rcpu = None
                if replica:
                    lag, catch = wait_caught_up(master, replica, s.catchup_timeout)
                    rcpu = (replica.cpu() - rc0) * 1e6 / s.n
                    full1, _ = sync_counters(master)
                    if full1 != full0:
                        resyncs.append(f"{LABEL[cfg]} {test} round {r + 1}: {full1 - full0} full sync(s)")
                mcpu = (c1 - c0) * 1e6 / s.n
                results.setdefault((cfg, test), []).append((rps, mcpu, rcpu, lag, catch))
                done += 1
                extra = "" if not replica else (
                    f"  replica {rcpu:6.2f} CPU us/req  lag at end {lag:,} B, level after {catch * 1000:,.0f} ms")
                log(f"[throughput {done}/{total}] round {r + 1} {test:5} {LABEL[cfg]:15} "
                    f"{rps:>12,.0f} req/s  master {mcpu:6.2f} CPU us/req{extra}")

    def med(cfg, test, i):
        return median_or_none([x[i] for x in results[(cfg, test)] if x[i] is not None])

    lines = [f"### Throughput with one replica: `redis-benchmark -P {s.pipeline} -c 50 -n {s.n} "
             f"-r 100000 -t <line>`, medians of {s.rounds} interleaved rounds", "",
             "Each replica is of its master's kind and synced before every run; \"lag at end\" is "
             "master_repl_offset − the replica's slave_repl_offset read as the benchmark ends "
             "(median / max over the rounds), \"level after\" the longest time until the two "
             "were equal again. CPU is utime+stime of all the server's threads per request "
             "(master; replica in brackets).", "",
             "| line | Cairn alone | Cairn + replica | Redis alone | Redis + replica "
             "| Cairn+r ÷ Redis+r (bar ≥ 1.0) | verdict | Cairn+r ÷ Cairn alone (bar ≥ 0.9) | verdict "
             "| Redis+r ÷ Redis alone | CPU µs/req Cairn alone / +r (replica) "
             "| CPU µs/req Redis alone / +r (replica) |",
             "|---|---:|---:|---:|---:|---:|---|---:|---|---:|---|---|"]
    second = ["| line | Cairn+r ÷ Redis+r per round | lag at end B, median / max, Cairn "
              "| same, Redis | level after, ms (max), Cairn | same, Redis |",
              "|---|---|---|---|---:|---:|"]
    for test in tests:
        ca, cr = med(("cairn", False), test, 0), med(("cairn", True), test, 0)
        ra, rr = med(("redis", False), test, 0), med(("redis", True), test, 0)
        x, y = (cr / rr if rr else None), (cr / ca if ca else None)
        per_round = ", ".join(
            f"{a[0] / b[0]:.2f}" for a, b in zip(results[(("cairn", True), test)],
                                                 results[(("redis", True), test)]))

        def lag_cell(kind):
            v = [x[3] for x in results[((kind, True), test)]]
            return f"{fmt_num(statistics.median(v))} / {fmt_num(max(v))}"

        def catch_max(kind):
            return fmt_num(max(x[4] for x in results[((kind, True), test)]) * 1000)

        lines.append(
            f"| {test.upper()} | {fmt_num(ca)} | {fmt_num(cr)} | {fmt_num(ra)} | {fmt_num(rr)} "
            f"| {fmt_ratio(cr, rr)} | {verdict(x, 1.0)} | {fmt_ratio(cr, ca)} | {verdict(y, 0.9)} "
            f"| {fmt_ratio(rr, ra)} "
            f"| {med(('cairn', False), test, 1):.2f} / {med(('cairn', True), test, 1):.2f} "
            f"({med(('cairn', True), test, 2):.2f}) "
            f"| {med(('redis', False), test, 1):.2f} / {med(('redis', True), test, 1):.2f} "
            f"({med(('redis', True), test, 2):.2f}) |")
        second.append(f"| {test.upper()} | {per_round} | {lag_cell('cairn')} | {lag_cell('redis')} "
                      f"| {catch_max('cairn')} | {catch_max('redis')} |")
    lines.append("")
    lines += second
    lines.append("")
    lines.append("Full syncs during the runs (a replica dropped and resynced): "
                 + ("; ".join(resyncs) if resyncs else "none") + ".")
    lines.append("")
    cpu = {(cfg, test): med(cfg, test, 1) for cfg in CONFIGS for test in tests}
    lines += cpu_section(tests, cpu)
    replica_cpu = {(kind, test): med((kind, True), test, 2)
                   for kind in ("cairn", "redis") for test in tests}
    lines += replica_cpu_section(tests, replica_cpu)
    return "\n".join(lines)


# "With a replica ≥ 0.9× without" in throughput is, where the master's CPU
# is what limits it, "CPU per request with a replica ≤ 1/0.9× without".
CPU_BAR = 1 / 0.9


def cpu_section(tests, cpu):
    """The master's CPU per request with and without a replica, for both
    servers, and the ratio of the two: Markdown lines. `cpu` maps (config,
    test) to the median µs per request of the master (None if unmeasured).
    On a machine where the client, the master and the replica share the
    cores, a replica takes CPU from the master whatever the master does;
    the ratio of CPU per request is the part the master itself adds."""
    lines = ["#### Master CPU per request, with a replica and alone", "",
             "utime+stime of all the master's threads (/proc/PID/stat around each run) per request, "
             "medians of the rounds; the replica's own CPU is not counted. \"+r ÷ alone\" is what a "
             f"replica adds to each request on the master: ≤ {CPU_BAR:.2f} (= 1/0.9) is the bar "
             "\"with a replica ≥ 0.9× without\" for a master that is not short of cores.", "",
             "| line | Cairn alone µs/req | Cairn + replica µs/req | Cairn +r ÷ alone "
             f"(bar ≤ {CPU_BAR:.2f}) | verdict | Redis alone µs/req | Redis + replica µs/req "
             "| Redis +r ÷ alone | Cairn +r ÷ Redis +r µs/req |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|"]

    def cell(x):
        return "-" if x is None else f"{x:.2f}"

    for test in tests:
        ca, cr = cpu.get((("cairn", False), test)), cpu.get((("cairn", True), test))
        ra, rr = cpu.get((("redis", False), test)), cpu.get((("redis", True), test))
        ratio = cr / ca if cr is not None and ca else None
        lines.append(f"| {test.upper()} | {cell(ca)} | {cell(cr)} | {fmt_ratio(cr, ca)} "
                     f"| {verdict(ratio, CPU_BAR, False)} | {cell(ra)} | {cell(rr)} "
                     f"| {fmt_ratio(rr, ra)} | {fmt_ratio(cr, rr)} |")
    lines.append("")
    return lines


def replica_cpu_section(tests, cpu):
    """The replica's own CPU per request it applied, Cairn's and Redis's,
    for the same stream: Markdown lines. `cpu` maps (kind, test) to the
    median µs per request (None if unmeasured). On a machine whose cores
    the client, the master and the replica share, what the replica spends
    is taken from the other two."""
    lines = ["#### Replica CPU per applied request", "",
             "utime+stime of all the replica's threads (/proc/PID/stat) from before the benchmark "
             "until its offset equals the master's, per request of the run, medians of the rounds. "
             "GET writes nothing: its replica applies nothing.", "",
             "| line | Cairn replica µs/req | Redis replica µs/req | Cairn ÷ Redis |",
             "|---|---:|---:|---:|"]

    def cell(x):
        return "-" if x is None else f"{x:.2f}"

    for test in tests:
        c, r = cpu.get(("cairn", test)), cpu.get(("redis", test))
        lines.append(f"| {test.upper()} | {cell(c)} | {cell(r)} | {fmt_ratio(c, r)} |")
    lines.append("")
    return lines


def sync_value(base, i, size):
    """Key i's value: its index, then `size - 8` bytes of a random block,
    so no value compresses (Redis's rdbcompression would shrink repeated
    bytes) and any value can be checked without keeping it."""
    off = (i * 7919) % (len(base) - size)
    return i.to_bytes(8, "little") + base[off:off + size - 8]


def sync_base():
    return random.Random(24).randbytes(1 << 16)


def load_keys(server, keys, size):
    """SET sync:0 .. sync:<keys-1>, pipelined in batches; checks every reply
    is +OK and DBSIZE."""
    base = sync_base()
    sock = server.conn.sock
    batch = 2000
    ok = 0
    for start in range(0, keys, batch):
        n = min(batch, keys - start)
        parts = []
        for i in range(start, start + n):
            k = b"sync:%d" % i
            v = sync_value(base, i, size)
            parts.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
        sock.sendall(b"".join(parts))
        got = bytearray()
        while got.count(b"\r\n") < n:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise SystemExit(f"{server.name} closed the connection while loading")
            got += chunk
        ok += got.count(b"+OK\r\n")
    if ok != keys:
        raise SystemExit(f"loading {server.name}: {keys - ok} SETs not answered +OK")
    size_now = server.conn.call("DBSIZE")
    if size_now != keys:
        raise SystemExit(f"{server.name} holds {size_now} keys after loading {keys}")


def transfer_seen(log_text):
    """How the master's log says it sent its last full sync: "diskless" or
    "disk" (None when it names none). Redis 7.0: "Starting BGSAVE for SYNC
    with target: disk|replicas sockets"; Cairn: "starting a fork-less RDB
    transfer (diskless|disk)": disk when `repl-diskless-sync` is no or
    the replica did not say `capa eof`, as Redis decides."""
    seen = None
    for line in log_text.splitlines():
        if "Starting BGSAVE for SYNC with target: " in line:
            seen = "disk" if line.rstrip().endswith("target: disk") else "diskless"
        elif "fork-less RDB transfer (" in line:
            seen = line.rsplit("(", 1)[1].split(")")[0]
    return seen


def probe(port, hz, stop, results):
    """Sends PING and GET sync:0 in turn at `hz` requests per second on one
    connection until `stop` is set; puts (scheduled time, latency ms from
    it) of every request on `results`."""
    c = Conn(port)
    interval = 1.0 / hz
    lat = []
    nxt = time.monotonic()
    k = 0
    while not stop.is_set():
        now = time.monotonic()
        if now < nxt:
            time.sleep(nxt - now)
        if k % 2 == 0:
            c.call("PING")
        else:
            c.call("GET", "sync:0")
        lat.append((nxt, (time.monotonic() - nxt) * 1000))
        nxt += interval
        k += 1
    c.close()
    results.put(lat)


def one_sync(s, binary, kind, master, mode, tmp, tag):
    """A fresh replica of `master` synced under `mode`: returns (seconds,
    probe latencies ms, master CPU s, replica CPU s, the transfer the
    master's log names)."""
    master.conn.call("CONFIG", "SET", "repl-diskless-sync", "yes" if mode == "diskless" else "no")
    replica = Server(kind, binary, tmp, f"{kind}-sync-replica-{tag}")
    ctx = multiprocessing.get_context("fork")
    stop, q = ctx.Event(), ctx.Queue()
    p = ctx.Process(target=probe, args=(master.port, s.probe_hz, stop, q))
    try:
        p.start()
        time.sleep(0.2)  # the probe is connected and at its rate
        mc0, rc0 = master.cpu(), replica.cpu()
        t0 = time.monotonic()
        r = replica.conn.call("REPLICAOF", "127.0.0.1", master.port)
        if isinstance(r, RespError):
            raise SystemExit(f"REPLICAOF on {replica.name}: {r}")
        deadline = t0 + s.sync_timeout
        while True:
            info = replica.conn.info("replication")
            if info.get("master_link_status") == "up" and info.get("master_sync_in_progress") == "0":
                n = replica.conn.call("DBSIZE")
                if n == s.sync_keys:
                    break
            if time.monotonic() > deadline:
                raise defect(f"{replica.name}'s full sync from {master.name} not done "
                             f"after {s.sync_timeout} s: {info}", master, replica)
            time.sleep(0.01)
        t1 = time.monotonic()
        took = t1 - t0
        mcpu, rcpu = master.cpu() - mc0, replica.cpu() - rc0
        with open(master.log.name, errors="replace") as f:
            seen = transfer_seen(f.read())
        stop.set()
        # Only the requests due during the sync (CLOCK_MONOTONIC is the
        # same clock in the probe's process).
        lat = [ms for due, ms in q.get(timeout=30) if t0 <= due <= t1]
        p.join(10)
        base = sync_base()
        for i in (0, s.sync_keys // 2, s.sync_keys - 1):
            got = replica.conn.call("GET", f"sync:{i}")
            if got != sync_value(base, i, s.value_size):
                raise defect(f"{replica.name} holds a wrong value for sync:{i}", master, replica)
        return took, lat, mcpu, rcpu, seen
    finally:
        stop.set()
        if p.is_alive():
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join()
        replica.stop()
        shutil.rmtree(replica.dir, ignore_errors=True)


def part_sync(s, tmp, servers_shown):
    masters = {}
    try:
        for kind in ("cairn", "redis"):
            m = Server(kind, s.binary[kind], tmp, f"{kind}-sync-master")
            masters[kind] = m
            servers_shown.append((f"{kind} sync master", m.shown_cmd(tmp)))
            t0 = time.monotonic()
            load_keys(m, s.sync_keys, s.value_size)
            mem = m.conn.info("memory").get("used_memory_human", "?")
            log(f"[sync] {kind}: {s.sync_keys:,} keys of {s.value_size} B loaded in "
                f"{time.monotonic() - t0:.1f} s, used_memory {mem}")
        results = {}  # (kind, mode) -> [(s, p50, p99, max, probes, master cpu, replica cpu)]
        kinds = ["cairn", "redis"]
        total = s.rounds * len(kinds) * len(s.sync_modes)
        done = 0
        for r in range(s.rounds):
            for kind in kinds[r % 2:] + kinds[:r % 2]:
                for mode in s.sync_modes:
                    took, lat, mcpu, rcpu, seen = one_sync(s, s.binary[kind], kind, masters[kind], mode,
                                                     tmp, f"{r}-{mode}")
                    p50, p99, mx = summary(lat)
                    results.setdefault((kind, mode), []).append(
                        (took, p50, p99, mx, len(lat), mcpu, rcpu, seen))
                    done += 1
                    log(f"[sync {done}/{total}] round {r + 1} {kind:5} {mode:8} {took:7.3f} s  "
                        f"master probe p50 {p50:.2f} p99 {p99:.2f} max {mx:.2f} ms "
                        f"({len(lat)} probes)  CPU master {mcpu:.2f} s replica {rcpu:.2f} s  "
                        f"master's log: {seen}")
    finally:
        for m in masters.values():
            m.stop()
    lines = [f"### Full sync of {s.sync_keys:,} keys of {s.value_size} bytes to a fresh replica, "
             f"medians of {s.rounds} interleaved rounds", "",
             "Time from REPLICAOF to the replica reporting `master_link_status:up`, "
             "`master_sync_in_progress:0` and holding every key. The probe sends PING and GET to "
             f"the master at {s.probe_hz}/s on one connection meanwhile; its latency runs from each "
             "request's scheduled send time (p50 / p99 / max are medians over the rounds; "
             "the max column's worst round in brackets). CPU: seconds of the server's threads "
             "during the sync. \"Sent as\" is the transfer each master's log names: "
             "in disk mode both write the image to a file in `dir` and send it with its length "
             "(Cairn from a fork-less cut), although the replicas say `capa eof`.", "",
             "| mode | sent as, Cairn / Redis | Cairn s | Redis s | Cairn ÷ Redis (bar ≤ 1.0) | verdict | Cairn per round "
             "| Redis per round | master probe ms p50 / p99 / max, Cairn | same, Redis "
             "| CPU s master / replica, Cairn | same, Redis |",
             "|---|---|---:|---:|---:|---|---|---|---|---|---|---|"]
    for mode in s.sync_modes:
        c, rr = results[("cairn", mode)], results[("redis", mode)]
        ct, rt = statistics.median(x[0] for x in c), statistics.median(x[0] for x in rr)
        x = ct / rt if rt else None

        def lat(v):
            return (f"{statistics.median(y[1] for y in v):.2f} / "
                    f"{statistics.median(y[2] for y in v):.2f} / "
                    f"{statistics.median(y[3] for y in v):.2f} ({max(y[3] for y in v):.2f})")

        def seen(v):
            return ", ".join(sorted({str(y[7]) for y in v}))

        def cpu(v):
            return (f"{statistics.median(y[5] for y in v):.2f} / "
                    f"{statistics.median(y[6] for y in v):.2f}")

        lines.append(
            f"| {mode} | {seen(c)} / {seen(rr)} | {ct:.3f} | {rt:.3f} | {fmt_ratio(ct, rt)} | {verdict(x, 1.0, False)} "
            f"| {', '.join(f'{y[0]:.2f}' for y in c)} | {', '.join(f'{y[0]:.2f}' for y in rr)} "
            f"| {lat(c)} | {lat(rr)} | {cpu(c)} | {cpu(rr)} |")
    lines.append("")
    return "\n".join(lines)


def stat_calls(field):
    """`calls` of an INFO commandstats value (`calls=3,usec=...`)."""
    for part in field.split(","):
        k, _, v = part.partition("=")
        if k == "calls":
            return int(v)
    raise ValueError(f"no calls in {field!r}")


def set_calls(master):
    return stat_calls(master.conn.info("commandstats").get("cmdstat_set", "calls=0"))


def part_lag(s, pairs):
    results = {}  # (kind, P) -> [(samples' lag list, MB/s, SET/s)]
    kinds = ["cairn", "redis"]
    total = s.rounds * len(kinds) * len(s.lag_pipelines)
    done = 0
    for r in range(s.rounds):
        for kind in kinds[r % 2:] + kinds[:r % 2]:
            master, replica = pairs[kind]
            for pipe in s.lag_pipelines:
                wait_caught_up(master, replica, s.catchup_timeout)
                full0, _ = sync_counters(master)
                sets0 = set_calls(master)
                cmd = ["redis-benchmark", "-p", str(master.port), "-c", "50", "-n", "2000000000",
                       "-r", "100000", "-P", str(pipe), "-q", "-t", "set"]
                bench = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                samples = []
                t_start = time.monotonic()
                nxt = t_start
                try:
                    while time.monotonic() - t_start < s.lag_seconds:
                        t = time.monotonic()
                        m, rep, _ = offsets(master, replica)
                        samples.append((t, m, rep))
                        nxt += 0.01
                        pause = nxt - time.monotonic()
                        if pause > 0:
                            time.sleep(pause)
                finally:
                    bench.send_signal(signal.SIGINT)
                    try:
                        bench.wait(10)
                    except subprocess.TimeoutExpired:
                        bench.kill()
                        bench.wait()
                secs = samples[-1][0] - samples[0][0]
                sets1 = set_calls(master)
                sets = (sets1 - sets0) / (time.monotonic() - t_start)
                _, catch = wait_caught_up(master, replica, s.catchup_timeout)
                full1, _ = sync_counters(master)
                if full1 != full0:
                    raise defect(f"{kind}'s replica resynced in full under sustained "
                                 f"writes (-P {pipe}, round {r + 1})", master, replica)
                lags = lag_series(samples)
                mbs = (samples[-1][1] - samples[0][1]) / secs / 1e6 if secs > 0 else 0
                results.setdefault((kind, pipe), []).append((lags, mbs, sets, catch))
                b = summary([x[0] for x in lags])
                ms = summary([x[1] for x in lags])
                done += 1
                log(f"[lag {done}/{total}] round {r + 1} {kind:5} -P {pipe:<2} {len(samples)} samples, "
                    f"stream {mbs:.1f} MB/s, ~{sets:,.0f} SET/s; lag B p50 {b[0]:,} p99 {b[1]:,} "
                    f"max {b[2]:,}; ms p50 {ms[0]:.1f} p99 {ms[1]:.1f} max {ms[2]:.1f}; "
                    f"level {catch * 1000:.0f} ms after")
    lines = [f"### Replication lag under sustained writes: `redis-benchmark -t set -c 50 -r 100000 "
             f"[-P 16]` for {s.lag_seconds} s, {s.rounds} interleaved rounds", "",
             "Every 10 ms the sampler sends INFO replication to the master and the replica "
             "(both sent before either is read): lag in bytes = master_repl_offset − the "
             "replica's slave_repl_offset; in ms, the time since the master's offset (interpolated "
             "between samples) reached the replica's. Percentiles over all the rounds' samples "
             "together; the write rate is the master's SET calls (INFO commandstats) over the "
             "window, medians of the rounds.", "",
             "| server | writes | samples | stream MB/s | SET/s | lag B p50 | p99 | max "
             "| lag ms p50 | p99 | max | level after, ms (max) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for pipe in s.lag_pipelines:
        for kind in kinds:
            v = results[(kind, pipe)]
            allb = [x[0] for y in v for x in y[0]]
            allm = [x[1] for y in v for x in y[0]]
            b, ms = summary(allb), summary(allm)
            lines.append(
                f"| {'Cairn' if kind == 'cairn' else 'Redis'} | "
                f"{'unpipelined' if pipe == 1 else f'-P {pipe}'} | {len(allb):,} "
                f"| {statistics.median(y[1] for y in v):.1f} | {fmt_num(statistics.median(y[2] for y in v))} "
                f"| {fmt_num(b[0])} | {fmt_num(b[1])} | {fmt_num(b[2])} "
                f"| {ms[0]:.1f} | {ms[1]:.1f} | {ms[2]:.1f} | {fmt_num(max(y[3] for y in v) * 1000)} |")
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- main


class Settings:
    def __init__(self, env, quick):
        def get(name, default, quick_value=None):
            if quick and quick_value is not None and name not in env:
                return quick_value
            return env.get(name, default)
        self.quick = quick
        self.rounds = int(get("ROUNDS", 5, 1))
        self.n = int(get("N", 1000000, 2000))
        self.tests = get("TESTS", "set,get,incr,hset,mset").split(",")
        self.pipeline = int(get("PIPELINE", 16))
        self.sync_keys = int(get("SYNC_KEYS", 1000000, 2000))
        self.value_size = int(get("VALUE_SIZE", 1024))
        self.sync_modes = get("SYNC_MODES", "diskless,disk").split(",")
        self.probe_hz = int(get("PROBE_HZ", 500))
        self.lag_seconds = float(get("LAG_SECONDS", 10, 1))
        self.lag_pipelines = [int(x) for x in get("LAG_PIPELINES", "1,16").split(",")]
        self.parts = get("PARTS", "throughput,sync,lag").replace(" ", ",").split(",")
        self.parts = [p for p in self.parts if p]
        self.out = env.get("OUT", "")
        self.catchup_timeout = float(get("CATCHUP_TIMEOUT", 60))
        self.sync_timeout = float(get("SYNC_TIMEOUT", 600))
        self.binary = {"cairn": env.get("CAIRN", "target/release/cairn"),
                       "redis": env.get("REDIS", "redis-server")}
        for p in self.parts:
            if p not in ("throughput", "sync", "lag"):
                raise SystemExit(f"unknown part {p!r} in PARTS")
        for m in self.sync_modes:
            if m not in ("diskless", "disk"):
                raise SystemExit(f"unknown sync mode {m!r} in SYNC_MODES")
        if self.value_size < 16:
            raise SystemExit("VALUE_SIZE must be at least 16")

    def command(self):
        keys = ["ROUNDS", "N", "TESTS", "PIPELINE", "SYNC_KEYS", "VALUE_SIZE", "SYNC_MODES",
                "PROBE_HZ", "LAG_SECONDS", "LAG_PIPELINES", "PARTS"]
        vals = [self.rounds, self.n, ",".join(self.tests), self.pipeline, self.sync_keys,
                self.value_size, ",".join(self.sync_modes), self.probe_hz, self.lag_seconds,
                ",".join(map(str, self.lag_pipelines)), ",".join(self.parts)]
        env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in zip(keys, vals))
        return f"{env} scripts/bench_replication.sh"


def git(*args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def version_of(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 1048576
    return f"{os.cpu_count()} CPUs, {model}, {mem:.0f} GiB, {platform.system()} {platform.release()}"


def main():
    quick = "--quick" in sys.argv[1:]
    unknown = [a for a in sys.argv[1:] if a != "--quick"]
    if unknown:
        raise SystemExit(f"usage: scripts/bench_replication.sh [--quick] (settings from the "
                         f"environment, see the script); unknown: {unknown}")
    s = Settings(os.environ, quick)
    # A SIGTERM unwinds like ^C, so the servers are stopped and the
    # directory removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="cairn-bench-repl.")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    servers_shown = []
    sections = []
    try:
        pairs, alone = {}, {}
        if "throughput" in s.parts or "lag" in s.parts:
            for kind in ("cairn", "redis"):
                m = Server(kind, s.binary[kind], tmp, f"{kind}-master")
                rep = Server(kind, s.binary[kind], tmp, f"{kind}-replica")
                attach(m, rep, s.catchup_timeout)
                pairs[kind] = (m, rep)
                servers_shown += [(f"{kind} master", m.shown_cmd(tmp)),
                                  (f"{kind} replica", rep.shown_cmd(tmp) + f" + REPLICAOF 127.0.0.1 <master>")]
                if "throughput" in s.parts:
                    alone[kind] = Server(kind, s.binary[kind], tmp, f"{kind}-alone")
                    a = alone[kind]
                    servers_shown.append((f"{kind} alone", a.shown_cmd(tmp)))
        if "throughput" in s.parts:
            sections.append(part_throughput(s, pairs, alone))
        if "lag" in s.parts:
            sections.append(part_lag(s, pairs))
        for x in list(RUNNING):
            x.stop()
        if "sync" in s.parts:
            sections.append(part_sync(s, tmp, servers_shown))
    finally:
        for x in list(RUNNING):
            x.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "crates"]).returncode != 0
    head = ["# Replication benchmark (issue 24)" + (" — --quick, a wiring check, not a measurement"
                                                   if s.quick else ""), "",
            f"- commit: `{git('rev-parse', '--short', 'HEAD')}` (branch `{git('rev-parse', '--abbrev-ref', 'HEAD')}`)"
            + (" with uncommitted changes in crates/" if dirty else ""),
            f"- date: {started} - {time.strftime('%H:%M UTC', time.gmtime())}",
            f"- machine: {machine()}",
            f"- command: `{s.command()}`" + (" (`--quick`)" if s.quick else ""),
            f"- Cairn: `{s.binary['cairn']}`, {version_of([s.binary['cairn'], '--version'])}",
            f"- Redis: {version_of([s.binary['redis'], '--version'])}; "
            f"{version_of(['redis-benchmark', '--version'])}"]
    head += [f"- {name}: `{cmd}`" for name, cmd in servers_shown]
    if "throughput" in s.parts:
        head.append(f"- throughput runs: `redis-benchmark -p PORT -c 50 -n {s.n} -r 100000 "
                    f"-P {s.pipeline} -q --csv -t <line>` for each of {','.join(s.tests)}")
    if "lag" in s.parts:
        head.append(f"- lag runs: `redis-benchmark -p PORT -c 50 -n 2000000000 -r 100000 -P <P> -q "
                    f"-t set` for P in {','.join(map(str, s.lag_pipelines))}, stopped (SIGINT) after "
                    f"{s.lag_seconds:g} s")
    if "sync" in s.parts:
        head.append(f"- sync: `SET sync:<i> <{s.value_size} random bytes>` for i < {s.sync_keys}, "
                    "pipelined 2,000 at a time, on each master; per round and mode `CONFIG SET "
                    "repl-diskless-sync yes|no` on the master and `REPLICAOF 127.0.0.1 PORT` on a new "
                    "replica started as the masters are")
    with open("/proc/loadavg") as f:
        head.append(f"- load average at the end: {' '.join(f.read().split()[:3])}")
    report = "\n".join(head) + "\n\n" + "\n".join(sections)
    print(report)
    if s.out:
        with open(s.out, "w") as f:
            f.write(report)


if __name__ == "__main__":
    main()
