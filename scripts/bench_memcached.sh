#!/bin/bash
# Issue 7's benchmark: Cairn's memcached port against `memcached -t 2`, same
# run, same machine.
#   1. GET and SET throughput at 50 connections (cairn-bench get-set with
#      memcached targets: `set key:N 0 0 3` / `get key:N` over -r keys),
#      unpipelined and with -P 16, ROUNDS alternating rounds.
#   2. Bytes per item for ~1 KB values (cairn-bench memory: 200,000 YCSB
#      records, one ~1.2 KB value each over the memcached protocol), from
#      the servers' own `stats bytes` and from the processes' RSS, on fresh
#      servers.
# Usage (from the repository root, after cargo build --release):
#   scripts/bench_memcached.sh            # N=1000000 ROUNDS=3 RECORDS=200000
# Results: tables on stdout; JSON and charts in $OUT (default /tmp/cairn-bench-mc).
set -euo pipefail
CAIRN=${CAIRN:-target/release/cairn}
BENCH=${BENCH:-target/release/cairn-bench}
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
RECORDS=${RECORDS:-200000}
OUT=${OUT:-/tmp/cairn-bench-mc}
CPORT=${CPORT:-7711}
MPORT=${MPORT:-7712}
mkdir -p "$OUT"
data=$(mktemp -d)
cpid=""
mpid=""

stop() {
    [ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
    [ -n "$mpid" ] && kill "$mpid" 2>/dev/null && wait "$mpid" 2>/dev/null || true
    cpid=""
    mpid=""
}
trap 'stop; rm -rf "$data"' EXIT

wait_port() {
    for _ in $(seq 1 100); do
        if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1; printf 'version\r\n' >&3; head -c 7 <&3" \
            2>/dev/null | grep -q VERSION; then
            return 0
        fi
        sleep 0.1
    done
    echo "nothing answers on port $1" >&2
    exit 1
}

start() {
    rm -rf "$data/cairn" && mkdir -p "$data/cairn"
    "$CAIRN" --port 0 --memcached-port "$CPORT" --dir "$data/cairn" --save '' \
        > "$data/cairn.log" 2>&1 &
    cpid=$!
    memcached -u root -t 2 -p "$MPORT" -l 127.0.0.1 -m 8192 > "$data/memcached.log" 2>&1 &
    mpid=$!
    wait_port "$CPORT"
    wait_port "$MPORT"
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
    "$(free -g | awk '/Mem:/ {print $2}') GB; $(memcached -V); cairn commit" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo '?')"
start
for P in 1 16; do
    echo "## get-set -c 50 -P $P -n $N -r 100000, $ROUNDS rounds"
    "$BENCH" get-set --target cairn=memcached://127.0.0.1:$CPORT \
        --target memcached=memcached://127.0.0.1:$MPORT \
        --pid cairn=$cpid --pid memcached=$mpid \
        -c 50 -P "$P" -n "$N" -r 100000 -t set,get --rounds "$ROUNDS" \
        --json "$OUT/getset-P$P.json" --chart "$OUT/getset-P$P"
done
stop
start
echo "## memory: $RECORDS records of ~1.2 KB"
"$BENCH" memory --timeout 30 --records "$RECORDS" \
    --target cairn=memcached://127.0.0.1:$CPORT \
    --target memcached=memcached://127.0.0.1:$MPORT \
    --pid cairn=$cpid --pid memcached=$mpid \
    --json "$OUT/memory.json" --chart "$OUT/memory"
