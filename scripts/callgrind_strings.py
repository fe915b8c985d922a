#!/usr/bin/env python3
"""Instructions per request of SET and GET of plain and compressed string
values (issue 25, item 1), measured as scripts/callgrind_hash.py measures
hash commands: the server under callgrind with one worker and `hz 1`, one
request in flight, the serving thread's count with its idle rate
subtracted.

Lines: SET/GET of 100-byte values (redis-benchmark's -d 100 shape: the
same bytes every time), of 1,024-byte and of 2,800-byte English text
(distinct per key): by default runs of 3-14 consecutive words from the
licence texts Debian ships, made as scripts/bench_compression.sh makes
them; `--text words` draws words from a fixed list instead (the first
tables of docs/design.md's "Compressed values"). Pass server arguments after `--`, e.g.
`-- --value-compression yes` (Cairn) to measure the compressed path.
With the lz4 codec (the default) SET stores values plain and a background
coder codes them: every line starts once nothing is pending (INFO
compression), so a GET line reads coded values; pass
`--value-compression-idle-ms 0` so the coder does not wait a second.

Lines `MGET x32 N B` send MGETs of 32 distinct keys (cairn-bench batch's
shape); their count is per MGET. `--only REGEX` runs the matching lines.

Usage:
  scripts/callgrind_strings.py --bin target/release/cairn [-n 2000] [--only 'MGET'] [-- ARGS]
  scripts/callgrind_strings.py --server redis --bin redis-server
"""

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_hash import Conn, control, thread_ir  # noqa: E402

KEYS = 1000
WORDS = (
    "the of and in to was is for on as by with he at from his an were are which also be or has "
    "had first one their its new after but who not they have her she two been other when there "
    "all during into school time may years more most only over city some world would where later "
    "up such used many can state about national out known university united then made season "
    "american between film while south north century river album team county government "
    "population district born released played series history village church family career"
).split()


def text(rng, n):
    out = []
    size = 0
    while size < n:
        w = WORDS[int(len(WORDS) * rng.random() ** 2)]
        out.append(w)
        size += len(w) + 1
    return " ".join(out).encode()[:n]


def licence_words():
    words = []
    d = "/usr/share/common-licenses"
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        try:
            words += open(os.path.join(d, f), encoding="utf-8", errors="replace").read().split()
        except OSError:
            pass
    assert len(words) > 10000, "needs /usr/share/common-licenses (Debian's base-files)"
    return words


def licence_text(words, i, n):
    """Value i of scripts/bench_compression.sh, cut at n bytes."""
    M = (1 << 64) - 1
    x = ((i + 1) * 0x9E3779B97F4A7C15) & M
    v = []
    size = 0
    while size < n:
        x ^= (x << 13) & M
        x ^= x >> 7
        x ^= (x << 17) & M
        start = (x >> 16) % len(words)
        run = 3 + x % 12
        for k in range(run):
            w = words[(start + k) % len(words)]
            v.append(w)
            size += len(w) + 1
    return " ".join(v)[:n].replace("\n", " ").encode()


def settle(c, label):
    """Waits until Cairn's background coder has nothing pending (lz4
    codec: SET stores plain and codes later), so a GET line reads coded
    values and no line counts the coder's work; says so on stderr."""
    t0 = time.time()
    said = False
    while True:
        info = c.call(b"INFO", b"compression").decode()
        m = re.search(r"compression_pending_bytes:(\d+)", info)
        if not m or m.group(1) == "0":
            if said:
                print(f"# {label}: background coder settled after {time.time() - t0:.1f} s", file=sys.stderr)
            return
        if not said:
            print(f"# {label}: waiting for the background coder ({m.group(1)} plain bytes pending)", file=sys.stderr)
            said = True
        assert time.time() - t0 < 900, "the background coder did not settle"
        time.sleep(0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=["cairn", "redis"], default="cairn")
    ap.add_argument("--bin", required=True)
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--port", type=int, default=7730)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--text", choices=["licences", "words"], default="licences")
    ap.add_argument("--only", help="run only the lines whose name matches this regex (e.g. 'GET 2800')")
    ap.add_argument("extra", nargs="*", help="server arguments (after --)")
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="cg-")
    out = os.path.join(tmp, "callgrind.out")
    cmd = [a.bin, "--port", str(a.port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no", "--dir", tmp, "--hz", "1"]
    if a.server == "cairn":
        cmd += ["--server-threads", "1"]
    cmd += a.extra
    vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + out]
    proc = subprocess.Popen(vg + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        c = Conn(a.port)
        rng = random.Random(a.seed)
        d100 = b"x" * 100
        if a.text == "words":
            sizes = {n: [text(rng, n) for _ in range(KEYS)] for n in (1024, 2800)}
        else:
            lw = licence_words()
            sizes = {n: [licence_text(lw, i + j * KEYS, n) for i in range(KEYS)] for j, n in enumerate((1024, 2800))}
        # Load: every key of every line exists before its GETs, and enough
        # text went in for the dictionaries to be trained.
        for i in range(KEYS):
            c.call(b"SET", b"k100:%d" % i, d100)
            for n, vals in sizes.items():
                c.call(b"SET", b"k%d:%d" % (n, i), vals[i])
        for _ in range(2):
            for n, vals in sizes.items():
                for i in range(KEYS):
                    c.call(b"SET", b"k%d:%d" % (n, i), vals[(i * 7 + 1) % KEYS])
        settle(c, "load")
        enc = {n: c.call(b"OBJECT", b"ENCODING", b"k%d:1" % n).decode() for n in (100, 1024, 2800)}
        print(f"# {a.server} {' '.join(a.extra)}: OBJECT ENCODING {enc}", flush=True)
        todo = []
        for n in (100, 1024, 2800):
            if n == 100:
                sets = [(b"SET", b"k100:%d" % rng.randrange(KEYS), d100) for _ in range(a.n)]
            else:
                vals = sizes[n]
                sets = [(b"SET", b"k%d:%d" % (n, rng.randrange(KEYS)), vals[rng.randrange(KEYS)]) for _ in range(a.n)]
            todo.append((f"SET {n} B", sets))
            todo.append((f"GET {n} B", [(b"GET", b"k%d:%d" % (n, rng.randrange(KEYS))) for _ in range(a.n)]))
            # MGET x 32 of distinct keys (cairn-bench batch's shape), counted
            # per request (divide by 32 for a key).
            todo.append((f"MGET x32 {n} B", [(b"MGET", *(b"k%d:%d" % (n, k) for k in rng.sample(range(KEYS), 32)))
                                            for _ in range(a.n)]))
        if a.only:
            todo = [t for t in todo if re.search(a.only, t[0])]
        for _, reqs in todo:
            for r in reqs[: a.n // 10]:
                c.call(*r)
        results = []
        longest = 0.0
        for name, reqs in todo:
            settle(c, name)
            control(proc.pid, "-z")
            control(proc.pid, "-i", "on")
            t = time.time()
            for r in reqs:
                c.call(*r)
            el = time.time() - t
            results.append((name, thread_ir(proc.pid), el))
            control(proc.pid, "-i", "off")
            longest = max(longest, el)
        settle(c, "idle")
        control(proc.pid, "-z")
        control(proc.pid, "-i", "on")
        time.sleep(longest)
        idle_rate = {t: v / longest for t, v in thread_ir(proc.pid).items()}
        control(proc.pid, "-i", "off")
        print(f"| line | {a.server} instructions/request | busiest thread |")
        print("|---|---:|---:|")
        for name, ir, el in results:
            per = {t: (v - idle_rate.get(t, 0) * el) / a.n for t, v in ir.items()}
            print(f"| {name} | {sum(per.values()):,.0f} | {max(per.values()):,.0f} |")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
