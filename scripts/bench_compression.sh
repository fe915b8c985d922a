#!/bin/bash
# Compressed string values (issue 25, item 1): memory per value and GET/SET
# throughput for 2.8 KB English-like text values, Cairn with
# `value-compression yes` against Cairn without it and redis-server 7.
#
# usage: scripts/bench_compression.sh [--values N] [--level L] [--codec lz4|zstd] [--throughput] [--rounds R] [--read-passes P] [--cairn BIN] [--redis BIN] [--bench BIN]
#   Memory (deterministic, always run): N values (default 20000) loaded by
#   pipelined SETs into fresh servers; used_memory and RSS per value.
#   --throughput: then `cairn-bench batch` against the three, the same
#   values, 8 threads: MSET/MGET x 32 (E4's calls), then SET/GET of one key
#   a call (`--single`, the calls the issue's bar names), redis-server first
#   so the table's ratios are of Redis's (the bar: Cairn on >= 0.9x on
#   every phase); run it on an idle machine only (a small --values N
#   checks that it works). --rounds R: R interleaved rounds of each phase
#   (the targets take turns; cairn-bench's summary gives the medians).
#   --read-passes P (default 5): each read phase reads every value P
#   times (a single pass of 100,000 values by MGET x 32 lasts ~0.3 s, and
#   such rounds swung 0.76-1.08 of Redis in one run, session 22).
#   --codec: `value-compression-codec` of cairn on (default lz4, the
#   server's default: SET stores plain and a background coder codes idle
#   values, so the script waits for it to settle, INFO compression's
#   compression_pending_bytes at 0, before every read phase and before
#   measuring memory; it prints that wait on stderr; --level is zstd's).
# Values: runs of 3-14 consecutive words from the licence texts Debian
# ships (/usr/share/common-licenses), cut at 2,800 bytes: real English,
# no passage repeated whole (the generator of crates/server/tests/compression.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
N=20000; LEVEL=3; CODEC=lz4; THRU=0; ROUNDS=1; PASSES=5; CAIRN=target/release/cairn; REDIS=$(command -v redis-server || true)
BENCH=target/release/cairn-bench
while [ $# -gt 0 ]; do
  case $1 in
    --values) N=$2; shift 2;;
    --level) LEVEL=$2; shift 2;;
    --codec) CODEC=$2; shift 2;;
    --throughput) THRU=1; shift;;
    --rounds) ROUNDS=$2; shift 2;;
    --read-passes) PASSES=$2; shift 2;;
    --cairn) CAIRN=$2; shift 2;;
    --redis) REDIS=$2; shift 2;;
    --bench) BENCH=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
[ -x "$CAIRN" ] || { echo "no $CAIRN: cargo build --release -p cairn-server" >&2; exit 1; }
tmp=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

python3 - "$N" "$tmp/values.txt" <<'PY'
import os, sys
n, out = int(sys.argv[1]), sys.argv[2]
words = []
d = "/usr/share/common-licenses"
for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
    try:
        words += open(os.path.join(d, f), encoding="utf-8", errors="replace").read().split()
    except OSError:
        pass
assert len(words) > 10000, "needs /usr/share/common-licenses (Debian's base-files)"
M = (1 << 64) - 1
with open(out, "w") as o:
    for i in range(n):
        x = ((i + 1) * 0x9E3779B97F4A7C15) & M
        v = []
        size = 0
        while size < 2800:
            x ^= (x << 13) & M; x ^= x >> 7; x ^= (x << 17) & M
            start = (x >> 16) % len(words); run = 3 + x % 12
            for k in range(run):
                w = words[(start + k) % len(words)]
                v.append(w); size += len(w) + 1
        o.write(" ".join(v)[:2800].replace("\n", " ") + "\n")
PY

port() { echo $((20000 + RANDOM % 10000)); }
start() { # name port cmd...
  local name=$1 p=$2; shift 2
  "$@" > "$tmp/$name.log" 2>&1 & pids+=($!); echo $! > "$tmp/$name.pid"
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$name did not start: $(tail -3 "$tmp/$name.log")" >&2; exit 1
}
P_OFF=$(port); P_ON=$(port); P_REDIS=$(port)
start off "$P_OFF" "$CAIRN" --port "$P_OFF" --bind 127.0.0.1 --save '' --dir "$tmp"
start on "$P_ON" "$CAIRN" --port "$P_ON" --bind 127.0.0.1 --save '' --dir "$tmp" --value-compression yes --value-compression-level "$LEVEL" --value-compression-codec "$CODEC"
names="off on"
if [ -n "$REDIS" ]; then
  start redis "$P_REDIS" "$REDIS" --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp"
  names="off on redis"
fi
pp() { case $1 in off) echo "$P_OFF";; on) echo "$P_ON";; redis) echo "$P_REDIS";; esac; }

cat > "$tmp/load.py" <<'PY'
import socket, sys, time
port, path, pid, name, bu, br, raw = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
s = socket.create_connection(("127.0.0.1", port)); f = s.makefile("rb")
def cmd(*a):
    out = b"*%d\r\n" % len(a)
    for x in a:
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out
def reply():
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        return None if n < 0 else f.read(n + 2)[:-2]
    return line[1:].strip()
def info(field):
    s.sendall(cmd(b"INFO", b"memory")); txt = reply().decode()
    return int([l.split(":")[1] for l in txt.splitlines() if l.startswith(field + ":")][0])
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) * 1024
vals = open(path, "rb").read().split(b"\n")[:-1]
u0, r0 = info("used_memory"), rss()
for i in range(0, len(vals), 200):
    s.sendall(b"".join(cmd(b"SET", b"v:%d" % j, vals[j]) for j in range(i, min(i + 200, len(vals)))))
    for _ in range(i, min(i + 200, len(vals))):
        reply()
# Cairn with lz4 codes in the background: wait until nothing is pending
# (plain values read and weigh as plain), printing the wait on stderr.
def settle():
    t0 = time.time(); last = -1
    while True:
        s.sendall(cmd(b"INFO", b"compression")); txt = reply().decode()
        f_ = [l.split(":")[1] for l in txt.splitlines() if l.startswith("compression_pending_bytes:")]
        if not f_:
            return
        pend = int(f_[0])
        if pend == 0:
            if last > 0:
                print(f"{name}: background coder settled after {time.time() - t0:.1f} s", file=sys.stderr)
            return
        assert time.time() - t0 <= 600, f"{name}: the background coder did not settle in 600 s"
        if pend != last:
            print(f"{name}: waiting for the background coder, {pend:,} plain bytes pending", file=sys.stderr)
        last = pend
        time.sleep(1)
settle()
# Every value reads back (a compressed store that lost bytes is no result).
for i in range(0, len(vals), 200):
    s.sendall(b"".join(cmd(b"GET", b"v:%d" % j) for j in range(i, min(i + 200, len(vals)))))
    for j in range(i, min(i + 200, len(vals))):
        assert reply() == vals[j], f"{name}: v:{j} reads back changed"
u1, r1 = info("used_memory"), rss()
n = len(vals); u = (u1 - u0) / n; r = (r1 - r0) / n
# MEMORY USAGE of the last 1,000 keys (written after any training).
k = range(max(0, n - 1000), n)
s.sendall(b"".join(cmd(b"MEMORY", b"USAGE", b"v:%d" % j) for j in k))
mu = sum(int(reply()) for _ in k) / len(k)
rel = f"{u / bu:.3f} / {r / br:.3f}" if bu else ""
print(f"| {name} | {n} | {u:,.0f} | {r:,.0f} | {mu:,.0f} | {rel} |")
open(raw, "w").write(f"{u} {r}\n")
PY
echo "| server | values | used_memory B/value | RSS B/value | MEMORY USAGE | of cairn off (used / RSS) |"
echo "|---|---:|---:|---:|---:|---:|"
base_used=0; base_rss=0
for n in $names; do
  python3 "$tmp/load.py" "$(pp "$n")" "$tmp/values.txt" "$(cat "$tmp/$n.pid")" "$n" "$base_used" "$base_rss" "$tmp/raw.$n"
  if [ "$n" = off ]; then read -r base_used base_rss < "$tmp/raw.off"; fi
done
echo "(value bytes: 2,800 a value; cairn on: $(redis-cli -p "$P_ON" object encoding v:1) encoding)"

if [ "$THRU" = 1 ]; then
  [ -x "$BENCH" ] || { echo "no $BENCH: cargo build --release -p cairn-bench" >&2; exit 1; }
  targets=(); pidargs=()
  if [ -n "$REDIS" ]; then
    targets+=(--target "redis=redis://127.0.0.1:$P_REDIS"); pidargs+=(--pid "redis=$(cat "$tmp/redis.pid")")
  fi
  targets+=(--target "on=redis://127.0.0.1:$P_ON" --target "off=redis://127.0.0.1:$P_OFF")
  pidargs+=(--pid "on=$(cat "$tmp/on.pid")" --pid "off=$(cat "$tmp/off.pid")")
  # One phase a run, so that cairn on's background coder settles between
  # a write phase and the read phase after it (else the reads would find
  # the values still plain); the first run flushes, the others keep the keys.
  settle() {
    local t0=$SECONDS last=-1 pend
    while :; do
      pend=$(redis-cli -p "$P_ON" info compression | tr -d '\r' | sed -n 's/^compression_pending_bytes://p')
      [ -z "$pend" ] || [ "$pend" = 0 ] && break
      [ "$pend" != "$last" ] && echo "on: waiting for the background coder, $pend plain bytes pending ($((SECONDS - t0)) s)" >&2
      last=$pend
      [ $((SECONDS - t0)) -lt 600 ] || { echo "on: the background coder did not settle in 600 s" >&2; exit 1; }
      sleep 1
    done
    [ "$last" = -1 ] || echo "on: background coder settled after $((SECONDS - t0)) s" >&2
  }
  flush=()
  for calls in "--batch 32" "--single"; do
    for phase in mset-seq mget-seq mset-rand mget-rand; do
      case $phase in mget-*) settle;; esac
      # shellcheck disable=SC2086 # $calls is one or two words
      "$BENCH" batch "${targets[@]}" "${pidargs[@]}" --keys "$N" --value-file "$tmp/values.txt" --threads 8 $calls \
        --rounds "$ROUNDS" --read-passes "$PASSES" --phases "$phase" "${flush[@]}"
      flush=(--no-flush)
    done
  done
fi
