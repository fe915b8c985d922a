#!/bin/bash
# What a replica costs the master per write, in instructions (issue 24; design.md "What a
# replicated write costs the master"): the master under callgrind, alone or with a replica of
# its own kind attached (not under valgrind), counters zeroed after set-up and warm-up and dumped
# once the replica's offset equals the master's; per thread, instructions per request and the
# function that took most. `WHO=replica` puts the replica under callgrind instead.
# usage: scripts/callgrind_replication.sh KIND BINARY TEST [N] [alone|replica]
#   KIND cairn|redis; TEST a redis-benchmark -t name (incr, set, ...); N requests (20000).
# One worker thread for Cairn, -P 16, one client, 1000 keys, as scripts/callgrind_per_request.sh.
# The cron thread's count grows with the run's wall time, not with the requests: leave it out.
# `KEEP=DIR` copies the callgrind files there (for callgrind_annotate).
# Needs valgrind (callgrind_control), redis-benchmark, redis-cli, python3.
set -euo pipefail
kind=$1; bin=$2; t=$3; n=${4:-20000}; mode=${5:-replica}; who=${WHO:-master}
d=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$d"' EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start() {  # NAME PORT UNDER_VALGRIND [ARGS...]: starts a server, prints its pid
  local name=$1 p=$2 vg=$3; shift 3
  local pre=() extra=()
  [ "$vg" = 1 ] && pre=(valgrind --tool=callgrind --separate-threads=yes --compress-strings=no
                        --compress-pos=no --callgrind-out-file="$d/cg")
  [ "$kind" = cairn ] && extra=(--server-threads 1 --worker-spin-us 0)
  mkdir -p "$d/$name"
  "${pre[@]}" "$bin" --port "$p" "${extra[@]}" --save '' --appendonly no --dir "$d/$name" \
    --repl-diskless-sync-delay 0 "$@" > "$d/$name.log" 2>&1 &
  echo $!
}
field() { redis-cli -p "$1" info replication 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }
mp=$(port); rp=$(port)
mvg=1; rvg=0
[ "$who" = replica ] && { mvg=0; rvg=1; }
mpid=$(start m "$mp" $mvg); pids+=("$mpid")
for _ in $(seq 1 300); do redis-cli -p "$mp" ping 2>/dev/null | grep -q PONG && break; sleep 0.2; done
rpid=""
if [ "$mode" = replica ]; then
  rpid=$(start r "$rp" $rvg --replicaof 127.0.0.1 "$mp"); pids+=("$rpid")
  for _ in $(seq 1 300); do [ "$(field "$rp" master_link_status)" = up ] && break; sleep 0.2; done
fi
caught_up() {
  [ "$mode" = replica ] || return 0
  for _ in $(seq 1 600); do
    [ "$(field "$mp" master_repl_offset)" = "$(field "$rp" slave_repl_offset)" ] && return 0
    sleep 0.2
  done
  echo "the replica did not catch up" >&2; exit 1
}
redis-benchmark -p "$mp" -n 2000 -P 16 -c 1 -r 1000 -t set,incr >/dev/null 2>&1
caught_up
vpid=$mpid; [ "$who" = replica ] && vpid=$rpid
callgrind_control -z "$vpid" >/dev/null
redis-benchmark -p "$mp" -n "$n" -P 16 -c 1 -r 1000 -t "$t" >/dev/null 2>&1
caught_up
callgrind_control -d "$vpid" >/dev/null
sleep 1
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$d"/cg.1-* "$KEEP"/
echo "$kind $t $mode ($who under callgrind), instructions per request by thread:"
python3 - "$n" "$d"/cg.1-* <<'EOF'
import collections, sys
n = int(sys.argv[1])
for path in sys.argv[2:]:
    own, fn, call = collections.Counter(), None, False
    for line in open(path, errors="replace"):
        if line.startswith("fn="):
            fn = line[3:].strip()
        elif line.startswith("calls="):
            call = True  # the next cost line is the callee's, inclusive
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            if len(parts) >= 2:
                if not call:
                    own[fn] += int(parts[1])
                call = False
    total = sum(own.values())
    if total >= 3 * n:
        top = own.most_common(1)[0][0]
        print(f"  thread {path.rsplit('-', 1)[1]}: {total / n:8.0f}  (most in {top[:90]})")
EOF
