#!/bin/bash
# Instructions per EVALSHA call under callgrind, for Cairn or redis-server, measured the same way
# as scripts/callgrind_per_request.sh (which only drives redis-benchmark -t tests): the server
# runs under valgrind (Cairn with one worker thread and no spin, both at hz 1 so time-driven cron
# work, stretched ~50x under valgrind, stays out of the count); a run that only loads the script
# and warms up is subtracted from one that also serves N calls at -P 16 from one client, using the
# busiest thread (the one that served the calls), and the difference is divided by N.
# Scripts as in scripts/bench_scripting.sh: a = one INCR, b = INCR + PEXPIRE + GET.
# usage: scripts/callgrind_scripting.sh cairn|redis [N (3000)] [BINARY]
# Env: TOP=k also prints the k most expensive functions (inclusive) of the busiest thread of each
#      measured run; KEEP=DIR keeps the callgrind files there.
set -euo pipefail
server=${1:?cairn or redis}; n=${2:-3000}
case $server in
  cairn) bin=${3:-target/release/cairn} ;;
  redis) bin=${3:-redis-server} ;;
  *) echo "usage: $0 cairn|redis [N] [BINARY]" >&2; exit 2 ;;
esac
declare -A body=(
  [a]="return redis.call('INCR', KEYS[1])"
  [b]="local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], 60000)
return redis.call('GET', KEYS[1])"
)
d=$(mktemp -d /tmp/callgrind-scripting.XXXXXX)
trap 'rm -rf "$d"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Prints the busiest thread's instruction total and leaves its file's name in $d/busiest.$1.$2.
run() {  # script requests
  local out=$d/cg.$1.$2 port vpid sha
  port=$(free_port)
  mkdir -p "$d/data.$1.$2"
  local args=(--port "$port" --bind 127.0.0.1 --save '' --appendonly no --hz 1 --dir "$d/data.$1.$2")
  [ "$server" = cairn ] && args+=(--server-threads 1 --worker-spin-us 0)
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" "$bin" "${args[@]}" > "$d/log.$1.$2" 2>&1 &
  vpid=$!
  for _ in $(seq 1 600); do [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break; sleep 0.2; done
  sha=$(redis-cli -p "$port" script load "${body[$1]}")
  # The warm-up compiles the script, creates the keys and grows the tables both runs share.
  redis-benchmark -p "$port" -n 1000 -P 16 -c 1 -r 1000 evalsha "$sha" 1 'key:__rand_int__' > /dev/null 2>&1
  [ "$2" != 0 ] && redis-benchmark -p "$port" -n "$2" -P 16 -c 1 -r 1000 evalsha "$sha" 1 'key:__rand_int__' > /dev/null 2>&1
  redis-cli -p "$port" shutdown nosave > /dev/null 2>&1 || true
  wait $vpid || true
  local best=0 file=""
  for f in "$out"-*; do
    local t
    t=$(callgrind_annotate "$f" 2>/dev/null | grep -m1 "PROGRAM TOTALS" | awk '{gsub(",", "", $1); print $1}')
    if [ -n "$t" ] && [ "$t" -gt "$best" ]; then best=$t; file=$f; fi
  done
  echo "$file" > "$d/busiest.$1.$2"
  echo "$best"
}

# The TOP functions by inclusive instructions per call: each function's inclusive count in the
# measured run minus the warm-up-only run, over N, so start-up and warm-up do not count.
# Only the function table is read (it ends at the first blank line; the source annotation after it
# has call lines too), and only its lines that name an object: a function's total. The lines
# without one split that total by the source file its inlined code came from.
inclusive() {  # tag file: "tag count file:function" per function
  callgrind_annotate --inclusive=yes --threshold=100 "$2" 2>/dev/null | awk -v tag="$1" '
    /file:function/ && !done {on = 1; next}
    on && /^$/ {on = 0; done = 1}  # reads on: an early exit would fail the pipe
    on && /^ *[0-9].*\]$/ {
      n = $1; gsub(",", "", n)
      key = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", key); sub(/ \[[^]]*\]$/, "", key)
      print tag, n, key
    }'
}
top() {  # base measured n
  { inclusive B "$1"; inclusive M "$2"; } | awk -v n="$3" '
    {key = $0; sub(/^[BM] [0-9]+ /, "", key); v[key] += ($1 == "M" ? $2 : -$2)}
    END {for (k in v) if (v[k] > 0) {f = k; sub(/^[^:]*\//, "", f); printf "%10.0f  %s\n", v[k] / n, f}}' |
    sort -rn | awk -v k="$TOP" 'NR <= k'
}

for s in a b; do
  base=$(run $s 0); meas=$(run $s "$n")
  echo "$server script $s: $(( (meas - base) / n )) instructions per EVALSHA (N=$n, -P 16)"
  f=$(cat "$d/busiest.$s.$n")
  if [ -n "${TOP:-}" ]; then top "$(cat "$d/busiest.$s.0")" "$f" "$n"; fi
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP"; cp "$d"/cg.$s.* "$KEEP"/; fi
done
