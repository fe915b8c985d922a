#!/bin/bash
# Instructions per request of a cairn binary under callgrind: one worker
# thread, no spin; the busiest thread's count (the worker), minus the same
# run without the measured requests, divided by the request count.
# usage: scripts/callgrind_per_request.sh BINARY TEST [N]   (TEST: a redis-benchmark -t name: set, get, hset, lpush, incr, ...)
# Needs valgrind (callgrind_annotate) and redis-benchmark. Instruction counts do not drift with machine load, so
# this is the measure for decisions about the request path (BENCHMARKS.md, "Request path cost").
bin=$1; t=$2; n=${3:-20000}
d=$(mktemp -d)
run() {
  local out=$d/cg.$1
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=$out $bin --port 0 --server-threads 1 --worker-spin-us 0 --save '' --dir $d > $d/log.$1 2>&1 &
  local vpid=$!
  local port=""
  for i in $(seq 1 300); do port=$(grep -o 'addr=127.0.0.1:[0-9]*' $d/log.$1 2>/dev/null | head -1 | cut -d: -f2); [ -n "$port" ] && break; sleep 0.2; done
  redis-benchmark -p $port -n 1000 -P 16 -c 1 -r 1000 -t set >/dev/null 2>&1
  [ "$1" != 0 ] && redis-benchmark -p $port -n $1 -P 16 -c 1 -r 1000 -t $t >/dev/null 2>&1
  redis-cli -p $port shutdown nosave >/dev/null 2>&1
  wait $vpid
  for f in $out-*; do callgrind_annotate $f 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{gsub(",","",$1); print $1}'; done | sort -n | tail -1
}
a=$(run 0); b=$(run $n)
echo "$t $(( (b - a) / n ))"
rm -rf $d
