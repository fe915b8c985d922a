#!/bin/bash
# Issue 22's bar: redis-benchmark -c 50 -n N -r 100000 of XADD, XRANGE, XREADGROUP (on prepared
# groups), GEOADD and GEOSEARCH BYRADIUS, unpipelined and -P 16, against a release Cairn and
# redis-server, both without persistence; then memory per stream entry and per geo member with
# 1 M of each. Each line runs ROUNDS rounds, the servers interleaved (cairn, redis, cairn, ...),
# so drift hits both alike; the table gives the median ops/s and the server CPU per request
# (utime+stime from /proc/PID/stat around each run, all threads). Verdict: "meets" at a ratio >= 1;
# unpipelined, where the one client process is the bottleneck, within 3% is a "tie".
# Progress goes to stderr, tables to stdout and, with OUT, to a markdown file with the machine,
# the commit and the exact commands.
# Env: ROUNDS (5), N (1000000), OUT, CAIRN (target/release/cairn, built unless given), REDIS,
#      LINES (space-separated subset of: xadd xrange xreadgroup geoadd geosearch), MEMORY (1: run
#      the memory part, default 1), PIN (1: servers on CPU 1, client on CPU 0).
set -euo pipefail
set -f  # the benchmark commands hold a literal *, split but never globbed
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}; N=${N:-1000000}; OUT=${OUT:-}; MEMORY=${MEMORY:-1}
REDIS=${REDIS:-redis-server}
LINES=${LINES:-"xadd xrange xreadgroup geoadd geosearch"}
if [ -z "${CAIRN:-}" ]; then
  CAIRN=target/release/cairn
  echo "building $CAIRN" >&2
  cargo build --release --bin cairn -q
fi
TICK=$(getconf CLK_TCK)
srv_pin=(); cli_pin=()
if [ "${PIN:-0}" = 1 ]; then srv_pin=(taskset -c 1); cli_pin=(taskset -c 0); fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' /proc/$1/stat; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

tmp=$(mktemp -d /tmp/cairn-bench-streams-geo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

start() {  # name binary -> sets port/pid vars via globals
  local name=$1 port
  port=$(free_port)
  mkdir -p "$tmp/$name"
  local argv=("$2" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp/$name")
  "${srv_pin[@]}" "${argv[@]}" > "$tmp/$name.log" 2>&1 &
  local pid=$!; pids+=($pid)
  for _ in $(seq 1 100); do [ "$(redis-cli -p $port ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$(redis-cli -p $port ping 2>/dev/null)" = PONG ] || { echo "$name did not answer PING" >&2; cat "$tmp/$name.log" >&2; exit 1; }
  printf -v "${name}_port" '%s' "$port"; printf -v "${name}_pid" '%s' "$pid"
  printf -v "${name}_cmd" '%s' "$(printf '%q ' "${srv_pin[@]}" "${argv[@]}")"
}
start cairn "$CAIRN"; start redis "$REDIS"

# Prepared data, the same on both: 100,000 geo points spread over about 1000 x 1000 km around
# (15, 37) in key `geo` (fixed seed), and consumer group g on every stream key the XADD line made.
python3 - > "$tmp/geo.resp" <<'PY'
import random
r = random.Random(22)
out = []
for i in range(100000):
    lon = 15 + r.uniform(-5, 5); lat = 37 + r.uniform(-4.5, 4.5)
    args = [b"GEOADD", b"geo", b"%.6f" % lon, b"%.6f" % lat, b"p%d" % i]
    out.append(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
import sys; sys.stdout.buffer.write(b"".join(out))
PY
python3 - > "$tmp/groups.resp" <<'PY'
import sys
out = []
for i in range(100000):
    k = b"s:%012d" % i
    args = [b"XGROUP", b"CREATE", k, b"g", b"0", b"MKSTREAM"]
    out.append(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
sys.stdout.buffer.write(b"".join(out))
PY
for s in cairn redis; do
  p=${s}_port; redis-cli -p ${!p} --pipe < "$tmp/geo.resp" > /dev/null
done

declare -A CMD
CMD[xadd]="XADD s:__rand_int__ MAXLEN ~ 1000 * f v"
CMD[xrange]="XRANGE s:__rand_int__ - + COUNT 10"
CMD[xreadgroup]="XREADGROUP GROUP g c COUNT 1 STREAMS s:__rand_int__ >"
CMD[geoadd]="GEOADD geo:add 13.361389 38.115556 m:__rand_int__"
CMD[geosearch]="GEOSEARCH geo FROMLONLAT 15 37 BYRADIUS 20 km ASC COUNT 10"

run() {  # port pid line pipeline -> "ops/s cpu_us_per_request"
  local before after rps
  before=$(cpu_ticks $2)
  # shellcheck disable=SC2086 # the command is meant to split into words
  rps=$("${cli_pin[@]}" redis-benchmark -p $1 -c 50 -n $N -r 100000 -P $4 -q --csv ${CMD[$3]} |
        awk -F'"' 'NR>1 || !/^"test"/ {v=$4} END {print v}')
  after=$(cpu_ticks $2)
  [ -n "$rps" ] || { echo "redis-benchmark gave no result on port $1 for $3" >&2; exit 1; }
  echo "$rps $(awk -v t=$((after - before)) -v hz=$TICK -v n=$N 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')"
}

lines=()
for l in $LINES; do lines+=("$l 1" "$l 16"); done
total=$(( ${#lines[@]} * ROUNDS * 2 )); done_runs=0
declare -A rps cpu
for line in "${lines[@]}"; do
  set -- $line; l=$1; P=$2
  if [ "$l" = xreadgroup ]; then
    # Groups on every stream key (the XADD line made most of them): BUSYGROUP where one exists.
    for s in cairn redis; do p=${s}_port; redis-cli -p ${!p} --pipe < "$tmp/groups.resp" > /dev/null 2>&1 || true; done
  fi
  for r in $(seq 1 $ROUNDS); do
    for s in cairn redis; do
      p=${s}_port; q=${s}_pid
      read -r ops us <<< "$(run ${!p} ${!q} $l $P)"
      [ -n "${us:-}" ] || exit 1
      rps[$l.$P.$s]+="$ops "; cpu[$l.$P.$s]+="$us "
      done_runs=$((done_runs + 1))
      printf '[%d/%d] %-10s -P %-2s round %d/%d %-5s %12.0f ops/s %7.2f CPU us/req\n' \
        $done_runs $total $l $P $r $ROUNDS $s "$ops" "$us" >&2
    done
  done
done

commas() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); out = ""; while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }; print s out }'; }
table=$(
  echo "| line | Cairn ops/s | Redis ops/s | Cairn/Redis | Cairn CPU µs/req | Redis CPU µs/req | verdict |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  for line in "${lines[@]}"; do
    set -- $line; l=$1; P=$2
    mc=$(tr ' ' '\n' <<< "${rps[$l.$P.cairn]}" | grep . | median)
    mr=$(tr ' ' '\n' <<< "${rps[$l.$P.redis]}" | grep . | median)
    uc=$(tr ' ' '\n' <<< "${cpu[$l.$P.cairn]}" | grep . | median)
    ur=$(tr ' ' '\n' <<< "${cpu[$l.$P.redis]}" | grep . | median)
    mode="unpipelined"; [ $P = 16 ] && mode="-P 16"
    verdict=$(awk -v c=$mc -v r=$mr -v p=$P 'BEGIN { x = c / r; print (x >= 1 ? "meets" : (p == 1 && x >= 0.97 ? "tie" : "below")) }')
    printf '| `%s`, %s | %s | %s | %.3f | %.2f | %.2f | %s |\n' "${CMD[$l]}" "$mode" "$(commas $mc)" "$(commas $mr)" \
      "$(awk -v c=$mc -v r=$mr 'BEGIN {print c / r}')" "$uc" "$ur" "$verdict"
  done
)
echo "$table"

mem_table=""
if [ "$MEMORY" = 1 ]; then
  # 1 M entries in one stream (XADD s * f <8-byte value>) and 1 M geo members, each on a fresh
  # server; bytes per entry from used_memory and from RSS, after minus before.
  python3 - > "$tmp/xadd1m.resp" <<'PY'
import sys
w = sys.stdout.buffer
for i in range(1000000):
    v = b"%08d" % i
    w.write(b"*5\r\n$4\r\nXADD\r\n$6\r\nstream\r\n$1\r\n*\r\n$1\r\nf\r\n$8\r\n" + v + b"\r\n")
PY
  python3 - > "$tmp/geo1m.resp" <<'PY'
import random, sys
r = random.Random(7); w = sys.stdout.buffer
for i in range(1000000):
    lon = b"%.6f" % r.uniform(-180, 180); lat = b"%.6f" % r.uniform(-85, 85); m = b"member:%d" % i
    args = [b"GEOADD", b"geo1m", lon, lat, m]
    w.write(b"*5\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
PY
  field() { redis-cli -p $1 info memory | awk -F: -v f=$2 '$1 == f {print $2+0}'; }
  rss() { awk '/VmRSS/ {print $2 * 1024}' /proc/$1/status; }
  mem_rows=""
  for what in xadd1m geo1m; do
    for s in cairn redis; do
      bin=$CAIRN; [ $s = redis ] && bin=$REDIS
      start m$s "$bin"
      p=m${s}_port; q=m${s}_pid
      u0=$(field ${!p} used_memory); r0=$(rss ${!q})
      echo "memory: loading 1 M ($what) into $s" >&2
      redis-cli -p ${!p} --pipe < "$tmp/$what.resp" > /dev/null
      u1=$(field ${!p} used_memory); r1=$(rss ${!q})
      n=1000000
      mem_rows+="$what $s $(( (u1 - u0) / n )) $(( (r1 - r0) / n ))"$'\n'
      redis-cli -p ${!p} shutdown nosave > /dev/null 2>&1 || true
    done
  done
  mem_table=$(
    echo "| 1 M of | Cairn used_memory B/entry | Redis used_memory B/entry | Cairn RSS B/entry | Redis RSS B/entry | Cairn/Redis (RSS) |"
    echo "|---|---:|---:|---:|---:|---:|"
    for what in xadd1m geo1m; do
      read -r _ _ cu cr <<< "$(grep "^$what cairn" <<< "$mem_rows")"
      read -r _ _ ru rr <<< "$(grep "^$what redis" <<< "$mem_rows")"
      name="stream entries (\`XADD stream * f <8 bytes>\`)"; [ $what = geo1m ] && name="geo members (\`GEOADD geo1m lon lat member:N\`)"
      printf '| %s | %s | %s | %s | %s | %.2f |\n' "$name" "$cu" "$ru" "$cr" "$rr" "$(awk -v a=$cr -v b=$rr 'BEGIN {print a / b}')"
    done
  )
  echo "$mem_table"
fi

if [ -n "$OUT" ]; then
  {
    echo "# Streams and geo benchmark (issue 22)"
    echo
    echo "Medians of $ROUNDS rounds per line, $N requests per run, -c 50 -r 100000, the servers interleaved;"
    echo "CPU is the server's utime+stime (all threads) per request. Verdict: meets at Cairn/Redis >= 1; tie unpipelined within 3%."
    echo
    echo "$table"
    echo
    [ -n "$mem_table" ] && { echo "$mem_table"; echo; }
    echo "- commit: \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (with uncommitted changes in crates/)')"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- servers: $($CAIRN --version 2>&1 | head -1); $($REDIS --version)"
    echo
    echo "Commands (ports and directories vary per run; data prepared with redis-cli --pipe as the script shows):"
    echo
    echo '```'
    echo "$cairn_cmd"; echo "$redis_cmd"
    for line in "${lines[@]}"; do
      set -- $line
      echo "${cli_pin[*]:+${cli_pin[*]} }redis-benchmark -p PORT -c 50 -n $N -r 100000 -P $2 -q --csv ${CMD[$1]}"
    done
    echo '```'
  } > "$OUT"
  echo "wrote $OUT" >&2
fi
