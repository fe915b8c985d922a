#!/usr/bin/env bash
# Issue 4's latency bar: cairn-bench's p50/p99 against redis-benchmark's at
# the same load, SET and GET, on a redis-server of its own.
#
#   scripts/latency_agreement.sh [OUT_DIR] [ROUNDS]
#
# Cases (each one cairn-bench command; its rounds alternate the two clients):
#   p16-closed  -c 50 -P 16, both closed-loop: the server is the bottleneck
#               for both, same rate = same load (Little's law)
#   c1-paced    -c 1 -P 1, cairn-bench paced to redis-benchmark's rate: one
#               request at a time, nothing queues
#   p1-closed   -c 50 -P 1, both closed-loop (rates differ: see BENCHMARKS.md)
#   p1-paced    -c 50 -P 1, cairn-bench paced to redis-benchmark's rate
#
# On a shared machine every case waits until the other processes use less
# than QUIET_PCT (default 10) percent of the CPUs, then runs under
# `flock $LOCK` (default /tmp/bench.lock); the CPU the rest of the machine
# used during the case is printed beside it ("others"). Env: CAIRN_BENCH
# (binary), RB (redis-benchmark), PORT (default 7419), CASES (subset).
set -euo pipefail

OUT=${1:-/tmp/latency-agreement}
ROUNDS=${2:-3}
PORT=${PORT:-7419}
LOCK=${LOCK:-/tmp/bench.lock}
QUIET_PCT=${QUIET_PCT:-10}
CB=${CAIRN_BENCH:-target/release/cairn-bench}
RB=${RB:-redis-benchmark}
CASES=${CASES:-"p16-closed c1-paced p1-closed p1-paced"}
mkdir -p "$OUT"

redis-server --port "$PORT" --save '' --appendonly no --daemonize no \
    >"$OUT/redis.log" 2>&1 &
RS=$!
trap 'kill $RS 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
    sleep 0.1
done

# Busy and total jiffies of all CPUs.
jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
# utime+stime of a pid, in jiffies.
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

wait_quiet() {
    for _ in $(seq 600); do
        read -r b0 t0 < <(jiffies)
        sleep 1
        read -r b1 t1 < <(jiffies)
        if (( (b1 - b0) * 100 < QUIET_PCT * (t1 - t0) )); then
            return 0
        fi
    done
    echo "machine never quiet; running anyway" >&2
}

args_of() {
    case $1 in
        p16-closed) echo "-c 50 -P 16 -n 1000000 --equal-load closed" ;;
        c1-paced) echo "-c 1 -P 1 -n 40000 --equal-load paced" ;;
        p1-closed) echo "-c 50 -P 1 -n 300000 --equal-load closed" ;;
        p1-paced) echo "-c 50 -P 1 -n 300000 --equal-load paced" ;;
        *) echo "unknown case $1" >&2; exit 2 ;;
    esac
}

for c in $CASES; do
    a=$(args_of "$c")
    wait_quiet
    read -r b0 t0 < <(jiffies)
    s0=$(ticks "$RS")
    # shellcheck disable=SC2086
    flock "$LOCK" "$CB" get-set --target "redis=redis://127.0.0.1:$PORT" $a \
        -r 100000 --rounds "$ROUNDS" --vs-redis-benchmark "$RB" -q \
        --json "$OUT/$c.json" >"$OUT/$c.txt" 2>&1
    read -r b1 t1 < <(jiffies)
    s1=$(ticks "$RS")
    own=$(python3 -c "
import json
r = json.load(open('$OUT/$c.json'))
print(sum(x.get('extra', {}).get('client_cpu_s', 0) for x in r['runs']))")
    # Jiffies are 1/100 s on Linux; the rest of the machine's share.
    others=$(python3 -c "print(f'{max(0.0, ($b1-$b0)/100 - ($s1-$s0)/100 - $own) / (($t1-$t0)/100) * 100:.1f}')")
    echo "== $c ($a): others used ${others}% of the CPUs"
    grep -A30 '^equal load' "$OUT/$c.txt" | grep -E 'median|mode'
done
