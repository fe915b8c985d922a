#!/usr/bin/env bash
# Issue 4's latency bar: cairn-bench's p50/p99 against redis-benchmark's at
# the same load, SET and GET, on a redis-server of its own.
#
#   scripts/latency_agreement.sh [OUT_DIR] [ROUNDS]
#
# Cases (each round of each case is one `cairn-bench get-set --rounds 1`
# command, which runs redis-benchmark and cairn-bench for SET, then GET):
#   p16-concurrent  -c 50 -P 16 each, both clients at once against the
#               server: the same load by construction, and drift of the
#               machine between runs cancels out
#   p1-concurrent   the same unpipelined
#   p1-concurrent-defer  and with cairn-bench's writes after its poll
#               round (--defer-writes), as redis-benchmark's (not default)
#   p16-closed  -c 50 -P 16, both closed-loop, cairn-bench with
#               redis-benchmark's write rounds: the server is the
#               bottleneck for both; same rate = same load (Little's law)
#   c1-paced    -c 1 -P 1, cairn-bench paced to redis-benchmark's rate:
#               one request at a time, nothing queues
#   p1-closed   -c 50 -P 1 as p16-closed (the rates differ: redis-benchmark
#               is client-bound there, see BENCHMARKS.md)
#   p1-paced    -c 50 -P 1, cairn-bench paced to redis-benchmark's rate
# Rounds are interleaved (round 1 of every case, then round 2, ...).
#
# The machine may be shared: before each round the script waits until the
# other processes use less than QUIET_PCT (default 10) percent of the CPUs,
# runs the round under `flock $LOCK` (default /tmp/bench.lock), and measures
# what the rest of the machine used meanwhile (all CPU time less
# redis-server's and the two clients'); a round above MAX_OTHERS_PCT
# (default 5) is run again, up to 3 times (the last try is kept, marked).
# Then it prints, per case and test, the medians of the kept rounds.
# Env: CAIRN_BENCH (binary), RB (redis-benchmark), PORT (default 7419),
# CASES (a subset, in order).
set -euo pipefail

OUT=${1:-/tmp/latency-agreement}
ROUNDS=${2:-3}
PORT=${PORT:-7419}
LOCK=${LOCK:-/tmp/bench.lock}
QUIET_PCT=${QUIET_PCT:-10}
MAX_OTHERS_PCT=${MAX_OTHERS_PCT:-5}
CB=${CAIRN_BENCH:-target/release/cairn-bench}
RB=${RB:-redis-benchmark}
CASES=${CASES:-"p16-concurrent p1-concurrent p16-closed c1-paced p1-paced"}
HERE=$(cd "$(dirname "$0")" && pwd)
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

# Waits up to QUIET_WAIT seconds (default 60) for a quiet second; then
# queues on the lock anyway (the rest of the machine's use is measured and a
# disturbed round re-run).
wait_quiet() {
    for _ in $(seq "${QUIET_WAIT:-60}"); do
        read -r b0 t0 < <(jiffies)
        sleep 1
        read -r b1 t1 < <(jiffies)
        if (((b1 - b0) * 100 < QUIET_PCT * (t1 - t0))); then
            return 0
        fi
    done
    echo "machine not quiet; queueing on the lock" >&2
}

args_of() {
    case $1 in
        p16-concurrent) echo "-c 50 -P 16 -n 1000000 --equal-load concurrent" ;;
        p1-concurrent) echo "-c 50 -P 1 -n 200000 --equal-load concurrent" ;;
        p1-concurrent-defer) echo "-c 50 -P 1 -n 200000 --equal-load concurrent --defer-writes" ;;
        p16-closed) echo "-c 50 -P 16 -n 1000000 --equal-load closed" ;;
        c1-paced) echo "-c 1 -P 1 -n 40000 --equal-load paced" ;;
        p1-closed) echo "-c 50 -P 1 -n 300000 --equal-load closed" ;;
        p1-paced) echo "-c 50 -P 1 -n 300000 --equal-load paced" ;;
        *)
            echo "unknown case $1" >&2
            exit 2
            ;;
    esac
}

for round in $(seq "$ROUNDS"); do
    for c in $CASES; do
        a=$(args_of "$c")
        for try in 1 2 3; do
            json="$OUT/$c-r$round.json"
            wait_quiet
            read -r b0 t0 < <(jiffies)
            s0=$(ticks "$RS")
            # shellcheck disable=SC2086
            flock "$LOCK" "$CB" get-set --target "redis=redis://127.0.0.1:$PORT" $a \
                -r 100000 --rounds 1 --vs-redis-benchmark "$RB" -q \
                --json "$json" >"$OUT/$c-r$round.txt" 2>&1
            read -r b1 t1 < <(jiffies)
            s1=$(ticks "$RS")
            others=$(python3 - "$json" "$b0" "$b1" "$t0" "$t1" "$s0" "$s1" <<'EOF'
import json, sys
j, b0, b1, t0, t1, s0, s1 = sys.argv[1], *map(float, sys.argv[2:])
r = json.load(open(j))
own = sum(x.get("extra", {}).get("client_cpu_s", 0) for x in r["runs"])
# Jiffies are 1/100 s.
print(f"{max(0.0, (b1 - b0) / 100 - (s1 - s0) / 100 - own) / ((t1 - t0) / 100) * 100:.1f}")
EOF
)
            python3 - "$json" "$others" "$try" <<'EOF'
import json, sys
j, others, tries = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
r = json.load(open(j))
r["config"]["others_cpu_pct"] = others
r["config"]["tries"] = tries
json.dump(r, open(j, "w"), indent=1)
EOF
            echo "round $round $c try $try: others ${others}%"
            if python3 -c "import sys; sys.exit(0 if $others <= $MAX_OTHERS_PCT else 1)"; then
                break
            fi
        done
    done
done
python3 "$HERE/latency_agreement_table.py" "$OUT" $CASES
