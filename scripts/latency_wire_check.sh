#!/usr/bin/env bash
# Issue 4's latency bar checked against the wire: each client's own p50/p99
# against the latency of the very same requests measured from a packet
# capture on loopback (scripts/wire_latency.py).
#
#   scripts/latency_wire_check.sh [OUT_DIR] [ROUNDS]
#
# Per round, case, server and client: start tcpdump on `lo` (filter: the
# server's port; nanosecond stamps; snap length SNAPLEN; a BUFFER_KIB
# kernel buffer), run ONE client with `-t set,get` (cairn-bench get-set
# --rounds 1 --json, or redis-benchmark --csv, the same -c -P -n -r),
# stop the capture, and analyse it. A capture that dropped a packet is
# invalid: its wire figures are not used and the table says so. Each run
# (capture, client and analysis) holds `flock $LOCK`.
#
# Cases: p1 = -c 50 -P 1 -n $N_P1, p16 = -c 50 -P 16 -n $N_P16.
# Clients: cb = cairn-bench, cbk = cairn-bench --rx-timestamps (kernel
# receive stamps), rb = redis-benchmark.
# Env: SERVERS ("redis", or "redis cairn"), CLIENTS ("cb rb"), CASES
# ("p1 p16"), N_P1 (200000), N_P16 (1000000), KEYSPACE (100000),
# PORT_REDIS (7461), PORT_CAIRN (7462), CAIRN (target/release/cairn),
# CAIRN_BENCH (target/release/cairn-bench), RB (redis-benchmark), LOCK
# (/tmp/bench.lock), SNAPLEN (2048), BUFFER_KIB (262144), KEEP_PCAP (0).
# Needs tcpdump (Debian: apt-get install tcpdump) and the right to capture.
set -euo pipefail

OUT=${1:-/tmp/latency-wire}
ROUNDS=${2:-3}
SERVERS=${SERVERS:-redis}
CLIENTS=${CLIENTS:-cb rb}
CASES=${CASES:-p1 p16}
N_P1=${N_P1:-200000}
N_P16=${N_P16:-1000000}
KEYSPACE=${KEYSPACE:-100000}
PORT_REDIS=${PORT_REDIS:-7461}
PORT_CAIRN=${PORT_CAIRN:-7462}
CAIRN=${CAIRN:-target/release/cairn}
CB=${CAIRN_BENCH:-target/release/cairn-bench}
RB=${RB:-redis-benchmark}
LOCK=${LOCK:-/tmp/bench.lock}
SNAPLEN=${SNAPLEN:-2048}
BUFFER_KIB=${BUFFER_KIB:-262144}
KEEP_PCAP=${KEEP_PCAP:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v tcpdump >/dev/null || {
    echo "tcpdump not found (apt-get install tcpdump)" >&2
    exit 2
}
mkdir -p "$OUT"

PIDS=()
TD=
cleanup() {
    if [ -n "$TD" ]; then kill "$TD" 2>/dev/null || true; fi
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

port_of() {
    case $1 in
        redis) echo "$PORT_REDIS" ;;
        cairn) echo "$PORT_CAIRN" ;;
        *)
            echo "unknown server $1" >&2
            exit 2
            ;;
    esac
}

for s in $SERVERS; do
    p=$(port_of "$s")
    if redis-cli -p "$p" ping >/dev/null 2>&1; then
        echo "port $p is taken" >&2
        exit 2
    fi
    case $s in
        redis) redis-server --port "$p" --save '' --appendonly no --daemonize no \
            >"$OUT/$s.log" 2>&1 & ;;
        cairn) "$CAIRN" --port "$p" --save '' --appendonly no >"$OUT/$s.log" 2>&1 & ;;
    esac
    PIDS+=($!)
    for _ in $(seq 50); do
        redis-cli -p "$p" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -p "$p" ping >/dev/null
done
git -C "$HERE/.." rev-parse --short HEAD >"$OUT/commit" 2>/dev/null || true

args_of() {
    case $1 in
        p1) echo "-c 50 -P 1 -n $N_P1 -r $KEYSPACE" ;;
        p16) echo "-c 50 -P 16 -n $N_P16 -r $KEYSPACE" ;;
        *)
            echo "unknown case $1" >&2
            exit 2
            ;;
    esac
}

# One measured run: capture, client, analysis, under the lock.
one() {
    local round=$1 c=$2 s=$3 cl=$4
    local port a name
    port=$(port_of "$s")
    a=$(args_of "$c")
    name="$OUT/r$round-$c-$s-$cl"
    exec 9>"$LOCK"
    flock 9
    tcpdump -i lo -n -s "$SNAPLEN" -B "$BUFFER_KIB" --time-stamp-precision=nano \
        -w "$name.pcap" "tcp port $port" 2>"$name.tcpdump" &
    TD=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$name.tcpdump" 2>/dev/null && break
        sleep 0.05
    done
    case $cl in
        # shellcheck disable=SC2086
        cb) "$CB" get-set --target "$s=redis://127.0.0.1:$port" $a -t set,get \
            --rounds 1 -q --json "$name.json" >"$name.out" 2>&1 ;;
        # shellcheck disable=SC2086
        cbk) "$CB" get-set --target "$s=redis://127.0.0.1:$port" $a -t set,get \
            --rounds 1 -q --rx-timestamps --json "$name.json" >"$name.out" 2>&1 ;;
        # shellcheck disable=SC2086
        rb) "$RB" -h 127.0.0.1 -p "$port" $a -t set,get --csv >"$name.csv" 2>"$name.out" ;;
    esac
    # libpcap hands packets over in blocks retired after tcpdump's 1 s
    # buffer time-out; stopping earlier loses the last block uncounted.
    sleep 1.5
    kill -INT "$TD"
    wait "$TD" || true
    TD=
    python3 "$HERE/wire_latency.py" "$name.pcap" --port "$port" \
        --command SET --command GET --json "$name.wire.json" >"$name.wire.txt"
    if [ "$KEEP_PCAP" = 0 ]; then rm -f "$name.pcap"; fi
    python3 "$HERE/latency_wire_table.py" "$OUT" --only "r$round-$c-$s-$cl"
    flock -u 9
    exec 9>&-
}

for round in $(seq "$ROUNDS"); do
    for c in $CASES; do
        for s in $SERVERS; do
            for cl in $CLIENTS; do
                one "$round" "$c" "$s" "$cl"
            done
        done
    done
done
python3 "$HERE/latency_wire_table.py" "$OUT"
