#!/bin/bash
# Issue 6's restart benchmark: time from process start until the server
# answers PING (not -LOADING), with KEYS distinct string keys, for Redis and
# Cairn, from a snapshot only (Redis RDB / Cairn dump.cairn) and from the
# journal only (Redis AOF / Cairn's journal, appendfsync everysec, never
# rewritten, so both replay commands). ROUNDS alternating rounds each.
# Usage (from the repository root, after cargo build --release):
#   scripts/bench_restart.sh          # KEYS=1000000 ROUNDS=3
# Prints one line per restart and a Markdown table of medians.
set -euo pipefail
CAIRN=${CAIRN:-target/release/cairn}
KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-3}
DATA=${DATA:-/tmp/cairn-bench-restart}
PORT=${PORT:-7721}
rm -rf "$DATA" && mkdir -p "$DATA"
pid=""
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; true' EXIT

# 1M distinct SETs as one RESP stream: key:0000000000 .. with 16-byte values.
python3 - "$KEYS" > "$DATA/load.resp" <<'EOF'
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for i in range(n):
    k = b"key:%010d" % i
    v = b"value-%010d" % i
    out.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
EOF

server_cmd() { # srv mode dir
    local extra="--appendonly no"
    [ "$2" = journal ] && extra="--appendonly yes --appendfsync everysec"
    if [ "$1" = redis ]; then
        echo "redis-server --port $PORT --bind 127.0.0.1 --dir $3 --save '' $extra --dbfilename dump.rdb"
    else
        echo "$CAIRN --port $PORT --bind 127.0.0.1 --dir $3 --save '' $extra"
    fi
}

up() { # wait until PING answers +PONG (not LOADING); prints seconds since $1
    local t0=$1
    while true; do
        if [ "$(redis-cli -p $PORT ping 2>/dev/null)" = PONG ]; then
            python3 -c "import time; print(f'{time.time() - $t0:.3f}')"
            return
        fi
        sleep 0.01
    done
}

prepare() { # srv mode -> data dir with the data saved
    local d="$DATA/$1-$2"
    rm -rf "$d" && mkdir -p "$d"
    eval "$(server_cmd "$1" "$2" "$d")" > "$d/log" 2>&1 &
    pid=$!
    up "$(date +%s.%N)" > /dev/null
    redis-cli -p $PORT --pipe < "$DATA/load.resp" > /dev/null
    local n
    n=$(redis-cli -p $PORT dbsize)
    [ "$n" = "$KEYS" ] || { echo "$1 $2: dbsize $n, want $KEYS" >&2; exit 1; }
    if [ "$2" = snapshot ]; then
        redis-cli -p $PORT save > /dev/null
        redis-cli -p $PORT shutdown nosave > /dev/null 2>&1 || true
    else
        # Shutdown writes and fsyncs the journal; nosave: no snapshot.
        redis-cli -p $PORT shutdown nosave > /dev/null 2>&1 || true
    fi
    wait $pid 2>/dev/null || true
    pid=""
    du -sh "$d" | cut -f1
}

echo "# $KEYS keys; data directory $DATA on $(df --output=source,fstype "$DATA" | tail -1 | xargs);" \
    "redis $(redis-server --version | grep -o 'v=[0-9.]*'); cairn $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
declare -A size
for srv in redis cairn; do
    for mode in snapshot journal; do
        size[$srv-$mode]=$(prepare $srv $mode)
        echo "prepared $srv $mode: ${size[$srv-$mode]} on disk" >&2
    done
done
results=$(mktemp)
for round in $(seq 1 "$ROUNDS"); do
    for mode in snapshot journal; do
        for srv in redis cairn; do
            d="$DATA/$srv-$mode"
            t0=$(date +%s.%N)
            eval "$(server_cmd "$srv" "$mode" "$d")" > "$d/log.$round" 2>&1 &
            pid=$!
            secs=$(up "$t0")
            n=$(redis-cli -p $PORT dbsize)
            redis-cli -p $PORT shutdown nosave > /dev/null 2>&1 || true
            wait $pid 2>/dev/null || true
            pid=""
            echo "round $round $mode $srv: ${secs}s, $n keys" >&2
            echo "$mode $srv $secs $n" >> "$results"
        done
    done
done
python3 - "$results" "$KEYS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"| from | Redis s (median) | Cairn s (median) | Cairn/Redis | keys loaded |")
print("|---|---:|---:|---:|---:|")
for mode in ("snapshot", "journal"):
    r = statistics.median(float(x[2]) for x in rows if x[0] == mode and x[1] == "redis")
    c = statistics.median(float(x[2]) for x in rows if x[0] == mode and x[1] == "cairn")
    keys = {x[3] for x in rows if x[0] == mode}
    print(f"| {mode} | {r:.3f} | {c:.3f} | {c / r:.2f} | {', '.join(sorted(keys))} |")
EOF
