#!/usr/bin/env python3
"""Instructions per request of a server under callgrind, for YCSB-shaped
hash commands and redis-benchmark's hash lines (issue 20).

Why instructions and not time: on a shared, loaded machine throughput
drifts by tens of percent between runs; callgrind's instruction counts do
not. Both servers are measured the same way: the server runs under
`valgrind --tool=callgrind --instr-atstart=no`, the driver (this script,
plain sockets, one request in flight) warms up, then for each line
switches collection on (`callgrind_control -i on`), sends N requests,
reads the counters (`callgrind_control -e`, per thread) and switches it off. An idle
window of the same length (no requests) is measured too and subtracted,
so timers and background threads do not count against the requests.
Both run with `hz 1`: cron work (active expiry, ...) is driven by time,
and under callgrind time stretches ~50 times, so at the default `hz 10` it
would be charged to the requests. The "busiest thread" column (the
thread that served the requests, its own idle rate subtracted) is the
figure to compare; the total includes background threads' timers.

Usage:
  scripts/callgrind_hash.py --server redis  [--bin redis-server] [-n 2000]
  scripts/callgrind_hash.py --server cairn  --bin target/release/cairn
"""

import argparse
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time

RECORDS = 1000
# Records written before the measured ones: Cairn trains its codebook on
# the first 64 KiB of hash values (~65 YCSB records) and codes records
# from then on, so without these the first ~65 of the 1,000 measured
# records would stay plain until written, and the one-field HSET line
# would charge ~4% of its requests a whole record's coding (~23,000
# instructions each; in a YCSB run of 100,000 records that is 0.07% of
# them). Redis gets the same keys.
TRAIN = 100
FIELDS = [b"field%d" % i for i in range(10)]


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        for _ in range(600):
            try:
                self.s = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("server did not start")
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(1 << 16)
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        t = line[:1]
        if t in (b"+", b"-", b":"):
            if t == b"-":
                raise RuntimeError(line)
            return line[1:]
        if t == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(1 << 16)
            v, self.buf = self.buf[:n], self.buf[n + 2 :]
            return v
        if t in (b"*", b"%"):
            n = int(line[1:]) * (2 if t == b"%" else 1)
            return [self._reply() for _ in range(max(n, 0))]
        raise RuntimeError(line)

    def call(self, *args):
        self.s.sendall(resp(*args))
        return self._reply()


def ycsb_value(rng):
    # cairn-bench's alphabet: bytes 32..95, uniform (crates/bench/src/gen.rs).
    return bytes(32 + rng.getrandbits(6) for _ in range(100))


def key(i):
    return b"user%019d" % (i * 7919 % 10**19)


def lines(rng, n):
    """(name, requests[, warm-up requests]): each list is sent after the
    previous one; the warm-up is the first tenth of the requests unless
    given."""
    ks = [key(i) for i in range(RECORDS)]
    out = []
    out.append(("HGETALL ycsb", [(b"HGETALL", rng.choice(ks)) for _ in range(n)]))
    out.append(
        ("HMGET ycsb 1 field", [(b"HMGET", rng.choice(ks), rng.choice(FIELDS)) for _ in range(n)])
    )
    out.append(
        (
            "HSET ycsb 1 field",
            [(b"HSET", rng.choice(ks), rng.choice(FIELDS), ycsb_value(rng)) for _ in range(n)],
        )
    )
    ins = []
    for i in range(n):
        args = [b"HSET", key(RECORDS + i)]
        for f in FIELDS:
            args += [f, ycsb_value(rng)]
        ins.append(tuple(args))
    # Its warm-up inserts keys of its own: re-sending the first tenth of
    # the measured keys would make 10% of this line's requests updates.
    warm = []
    for i in range(n // 10):
        args = [b"HSET", b"warm%019d" % i]
        for f in FIELDS:
            args += [f, ycsb_value(rng)]
        warm.append(tuple(args))
    out.append(("HSET ycsb 10 fields (new key)", ins, warm))
    out.append(
        (
            "ZADD _indices (new member)",
            [(b"ZADD", b"_indices", rng.randrange(-(2**31), 2**31), key(RECORDS + n + i)) for i in range(n)],
        )
    )
    # redis-benchmark's lines: `-t hset` (3-byte values) and -d 100.
    out.append(
        (
            "HSET myhash element:rand xxx",
            [(b"HSET", b"myhash", b"element:%012d" % rng.randrange(100000), b"xxx") for _ in range(n)],
        )
    )
    d100 = bytes(b"x" * 100)
    out.append(
        (
            "HSET h100 f:rand (-d 100)",
            [(b"HSET", b"h100", b"f:%012d" % rng.randrange(100000), d100) for _ in range(n)],
        )
    )
    out.append(
        ("HGET h100 f:rand (-d 100)", [(b"HGET", b"h100", b"f:%012d" % rng.randrange(100000)) for _ in range(n)])
    )
    out.append(("HGETALL small (-d 100, 1 field)", [(b"HGETALL", b"small") for _ in range(n)]))
    return out


def control(pid, *args):
    r = subprocess.run(["callgrind_control", *args, str(pid)], capture_output=True, text=True)
    return r.stdout


def thread_ir(pid):
    """{thread: instructions since the last zero} (`-e` prints one
    "Th <n> <Ir>" line per thread)."""
    txt = control(pid, "-e")
    m = re.findall(r"^\s*Th\s+(\d+)\s+([\d,]+)", txt, re.M)
    if not m:
        raise RuntimeError("no totals in callgrind_control -e output:\n" + txt)
    return {int(t): int(x.replace(",", "")) for t, x in m}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=["cairn", "redis"], required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--port", type=int, default=7720)
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--only", help="measure only the lines whose name starts with this")
    ap.add_argument("--dump", action="store_true",
                    help="dump each line's profile (callgrind.out.<pid>.<n> in a temporary directory, for callgrind_annotate)")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="cg-")
    out = os.path.join(tmp, "callgrind.out")
    if a.server == "redis":
        cmd = [a.bin, "--port", str(a.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", tmp, "--hz", "1"]
    else:
        cmd = [a.bin, "--port", str(a.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", tmp, "--server-threads", "1", "--hz", "1"]
    vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + out]
    proc = subprocess.Popen(vg + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = Conn(a.port)
        rng = random.Random(a.seed)
        # Load: the YCSB insert (HSET of 10 fields, ZADD _indices), plus
        # redis-benchmark's hashes (past the listpack limits, as after a
        # few hundred of its requests).
        for i in range(TRAIN):
            args = [b"HSET", b"train%d" % i]
            for f in FIELDS:
                args += [f, ycsb_value(rng)]
            c.call(*args)
        for i in range(RECORDS):
            args = [b"HSET", key(i)]
            for f in FIELDS:
                args += [f, ycsb_value(rng)]
            c.call(*args)
            c.call(b"ZADD", b"_indices", rng.randrange(-(2**31), 2**31), key(i))
        for i in range(1000):
            c.call(b"HSET", b"h100", b"f:%012d" % rng.randrange(100000), b"x" * 100)
            c.call(b"HSET", b"myhash", b"element:%012d" % rng.randrange(100000), b"xxx")
        c.call(b"HSET", b"small", b"f", b"x" * 100)
        enc = c.call(b"OBJECT", b"ENCODING", key(0))
        print(f"# {a.server}: OBJECT ENCODING of a record: {enc.decode()}", flush=True)
        todo = [(t[0], t[1], t[2] if len(t) > 2 else t[1][: a.n // 10]) for t in lines(rng, a.n)]
        if a.only:
            todo = [t for t in todo if t[0].startswith(a.only)]
        # Warm-up of every line (one tenth), outside the measurement.
        for _, _, warm in todo:
            for r in warm:
                c.call(*r)
        # Idle window: as long as the slowest line takes, measured once.
        results = []
        longest = 0.0
        for name, reqs, _ in todo:
            control(proc.pid, "-z")
            control(proc.pid, "-i", "on")
            t = time.time()
            for r in reqs:
                c.call(*r)
            el = time.time() - t
            results.append((name, thread_ir(proc.pid), el))
            if a.dump:
                control(proc.pid, "--dump=" + re.sub(r"[^A-Za-z0-9]+", "_", name))
            control(proc.pid, "-i", "off")
            longest = max(longest, el)
        control(proc.pid, "-z")
        control(proc.pid, "-i", "on")
        time.sleep(longest)
        idle_rate = {t: v / longest for t, v in thread_ir(proc.pid).items()}
        control(proc.pid, "-i", "off")
        if a.dump:
            print(f"# profiles in {tmp}")
        print(f"# idle: {sum(idle_rate.values()):,.0f} instructions/s subtracted by elapsed time")
        if os.environ.get("CG_THREADS"):
            print("# idle per thread /s:", {t: round(v) for t, v in idle_rate.items()})
            for name, ir, el in results:
                print("#", name, {t: round(v / a.n) for t, v in ir.items()}, f"{el:.1f}s")
        print(f"| line | {a.server} instructions/request | busiest thread | idle subtracted |")
        print("|---|---:|---:|---:|")
        for name, ir, el in results:
            per = {t: (v - idle_rate.get(t, 0) * el) / a.n for t, v in ir.items()}
            idle = sum(idle_rate.values()) * el / a.n
            print(f"| {name} | {sum(per.values()):,.0f} | {max(per.values()):,.0f} | {idle:,.0f} |")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
