#!/bin/bash
# What a restricted ACL user costs per request, in instructions (issue 23's
# ACL bar; design.md "What a restricted user costs"): the worker thread's
# count under callgrind for N requests of one redis-benchmark test, minus
# the same run without them, once as the default user and once as the
# key-pattern user `bench` of scripts/bench_security.sh (100 other users
# loaded), and the difference. One worker thread, no spin, -P 16, one
# client, 1000 keys, as scripts/callgrind_per_request.sh.
# usage: scripts/callgrind_acl.sh BINARY TEST [N]   (TEST: set, get, incr, lpush, mset, ...)
# Needs valgrind (callgrind_annotate), redis-benchmark and redis-cli.
# KEEP=DIR keeps the callgrind files there (cg.MODE.N-THREAD) for
# `callgrind_annotate --inclusive=yes`; CG_OPTS adds callgrind options
# (`--dump-instr=yes` for per-instruction counts).
bin=$1; t=$2; n=${3:-20000}
d=$(mktemp -d)
trap '[ -n "$KEEP" ] && mkdir -p "$KEEP" && cp $d/cg.* "$KEEP"/; rm -rf $d' EXIT
{
  for i in $(seq 1 100); do echo "user u$i on >pw$i ~app$i:* &chan$i +@read +@write -@dangerous"; done
  echo "user bench on >benchpw ~key:* ~counter:* ~myhash ~mylist ~myset ~myzset resetchannels +@all"
  echo "user default on nopass ~* &* +@all"
} > $d/users.acl
run() {  # requests mode -> $d/tot.MODE.REQUESTS: "thread instructions" lines
  local out=$d/cg.$2.$1 auth=()
  [ $2 = users ] && auth=(--user bench -a benchpw)
  valgrind --tool=callgrind $CG_OPTS --separate-threads=yes --callgrind-out-file=$out $bin --port 0 --server-threads 1 \
    --worker-spin-us 0 --save '' --dir $d --aclfile $d/users.acl > $d/log.$2.$1 2>&1 &
  local vpid=$! port=""
  for i in $(seq 1 300); do port=$(grep -o 'addr=127.0.0.1:[0-9]*' $d/log.$2.$1 2>/dev/null | head -1 | cut -d: -f2); [ -n "$port" ] && break; sleep 0.2; done
  redis-benchmark -p $port "${auth[@]}" -n 1000 -P 16 -c 1 -r 1000 -t set >/dev/null 2>&1
  [ "$1" != 0 ] && redis-benchmark -p $port "${auth[@]}" -n $1 -P 16 -c 1 -r 1000 -t $t >/dev/null 2>&1
  redis-cli -p $port shutdown nosave >/dev/null 2>&1
  wait $vpid
  for f in $out-*; do echo "${f##*-} $(callgrind_annotate $f 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{gsub(",","",$1); print $1}')"; done | sort > $d/tot.$2.$1
}
declare -A per
for mode in default users; do
  run 0 $mode; run $n $mode
  # Thread by thread (callgrind numbers them in creation order): the one
  # whose count grew most is the worker that served the requests.
  per[$mode]=$(join $d/tot.$mode.0 $d/tot.$mode.$n | awk -v n=$n '{x = $3 - $2; if (x > m) m = x} END {print int(m / n)}')
done
echo "$t default ${per[default]} users ${per[users]} extra $(( per[users] - per[default] ))"
