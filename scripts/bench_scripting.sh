#!/bin/bash
# Issue 21's bar: redis-benchmark `EVALSHA <sha> 1 key:__rand_int__` against a release Cairn and
# redis-server, both without persistence, for two scripts (a: one INCR; b: a rate limiter, INCR +
# PEXPIRE + GET) unpipelined and with -P 16. Each line runs ROUNDS rounds, the two servers
# interleaved (cairn, redis, cairn, redis, ...) so drift hits both alike; the table gives the
# median ops/s per server and server CPU per call (utime+stime from /proc/PID/stat around each run,
# all threads, divided by the requests). Verdict: "meets" at a ratio >= 1; unpipelined, where the
# one client process is the bottleneck, a ratio within 3% is a "tie"; otherwise "below".
# Progress goes to stderr, the table to stdout and, with OUT, to a markdown file with the machine,
# the commit and the exact commands.
# Env: ROUNDS (5), N (1000000 requests per run), OUT (markdown file, none by default),
#      CAIRN (target/release/cairn, built first unless CAIRN is given), REDIS (redis-server),
#      CAIRN_ARGS / REDIS_ARGS (extra server arguments), PIN (1: servers on CPU 1, client on CPU 0).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}; N=${N:-1000000}; OUT=${OUT:-}
REDIS=${REDIS:-redis-server}; CAIRN_ARGS=${CAIRN_ARGS:-}; REDIS_ARGS=${REDIS_ARGS:-}
if [ -z "${CAIRN:-}" ]; then
  CAIRN=target/release/cairn
  echo "building $CAIRN" >&2
  cargo build --release --bin cairn -q
fi
TICK=$(getconf CLK_TCK)
srv_pin=(); cli_pin=()
if [ "${PIN:-0}" = 1 ]; then srv_pin=(taskset -c 1); cli_pin=(taskset -c 0); fi

# The two scripts. b always makes its three calls (no "if first then PEXPIRE"), so every call
# costs the same and both servers run the same commands.
SCRIPT_A="return redis.call('INCR', KEYS[1])"
SCRIPT_B="local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], 60000)
return redis.call('GET', KEYS[1])"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' /proc/$1/stat; }  # utime + stime, all threads
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

tmp=$(mktemp -d /tmp/cairn-bench-scripting.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

cport=$(free_port); rport=$(free_port)
while [ "$rport" = "$cport" ]; do rport=$(free_port); done
mkdir -p "$tmp/cairn" "$tmp/redis"
# Started directly (taskset execs), so $! is the server's own pid, whose /proc stat we read.
# shellcheck disable=SC2206 # the extra arguments are meant to split
cairn_argv=("$CAIRN" --port "$cport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp/cairn" $CAIRN_ARGS)
# shellcheck disable=SC2206
redis_argv=("$REDIS" --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp/redis" $REDIS_ARGS)
"${srv_pin[@]}" "${cairn_argv[@]}" > "$tmp/cairn.log" 2>&1 & cpid=$!; pids+=($cpid)
"${srv_pin[@]}" "${redis_argv[@]}" > "$tmp/redis.log" 2>&1 & rpid=$!; pids+=($rpid)
for port in $cport $rport; do
  for _ in $(seq 1 100); do [ "$(redis-cli -p $port ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$(redis-cli -p $port ping 2>/dev/null)" = PONG ] || { echo "server on port $port did not answer PING" >&2; cat "$tmp"/*.log >&2; exit 1; }
done

# SCRIPT LOAD on each; both must give the same SHA and the same reply to a first call.
declare -A sha
for s in a b; do
  body=$SCRIPT_A; [ $s = b ] && body=$SCRIPT_B
  sc=$(redis-cli -p $cport script load "$body"); sr=$(redis-cli -p $rport script load "$body")
  [ "$sc" = "$sr" ] || { echo "script $s: SHA differs: cairn $sc, redis $sr" >&2; exit 1; }
  sha[$s]=$sc
  rc=$(redis-cli -p $cport evalsha "$sc" 1 key:check); rr=$(redis-cli -p $rport evalsha "$sr" 1 key:check)
  [ "$rc" = "$rr" ] || { echo "script $s: first call differs: cairn '$rc', redis '$rr'" >&2; exit 1; }
  redis-cli -p $cport del key:check >/dev/null; redis-cli -p $rport del key:check >/dev/null
done

# One run: prints "ops/s cpu_us_per_call".
run() {  # port pid script pipeline
  local before after rps
  before=$(cpu_ticks $2)
  rps=$("${cli_pin[@]}" redis-benchmark -p $1 -c 50 -n $N -r 100000 -P $4 -q --csv \
          evalsha "${sha[$3]}" 1 'key:__rand_int__' | awk -F'"' '/^"evalsha/ {print $4}')
  after=$(cpu_ticks $2)
  [ -n "$rps" ] || { echo "redis-benchmark gave no result on port $1" >&2; exit 1; }
  echo "$rps $(awk -v t=$((after - before)) -v hz=$TICK -v n=$N 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')"
}

lines=("a 1" "a 16" "b 1" "b 16")
total=$(( ${#lines[@]} * ROUNDS * 2 )); done_runs=0
declare -A rps cpu
for line in "${lines[@]}"; do
  set -- $line; s=$1; P=$2
  for r in $(seq 1 $ROUNDS); do
    for server in cairn redis; do
      port=$cport; pid=$cpid; [ $server = redis ] && { port=$rport; pid=$rpid; }
      read -r ops us <<< "$(run $port $pid $s $P)"
      [ -n "${us:-}" ] || exit 1
      rps[$s.$P.$server]+="$ops "; cpu[$s.$P.$server]+="$us "
      done_runs=$((done_runs + 1))
      printf '[%d/%d] script %s -P %-2s round %d/%d %-5s %12.0f ops/s %7.2f CPU us/call\n' \
        $done_runs $total $s $P $r $ROUNDS $server "$ops" "$us" >&2
    done
  done
done

table=$(
  echo "| line | Cairn ops/s | Redis ops/s | Cairn/Redis | Cairn CPU µs/call | Redis CPU µs/call | verdict |"
  echo "|---|---:|---:|---:|---:|---:|---|"
  for line in "${lines[@]}"; do
    set -- $line; s=$1; P=$2
    mc=$(tr ' ' '\n' <<< "${rps[$s.$P.cairn]}" | grep . | median)
    mr=$(tr ' ' '\n' <<< "${rps[$s.$P.redis]}" | grep . | median)
    uc=$(tr ' ' '\n' <<< "${cpu[$s.$P.cairn]}" | grep . | median)
    ur=$(tr ' ' '\n' <<< "${cpu[$s.$P.redis]}" | grep . | median)
    name="a: INCR"; [ $s = b ] && name="b: INCR+PEXPIRE+GET"
    mode="unpipelined"; [ $P = 16 ] && mode="-P 16"
    awk -v name="$name, $mode" -v c=$mc -v r=$mr -v uc=$uc -v ur=$ur -v p=$P '
    function commas(x,   s, out) {
      s = sprintf("%.0f", x); out = ""
      while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
      return s out
    }
    BEGIN {
      ratio = c / r
      verdict = ratio >= 1 ? "meets" : (p == 1 && ratio >= 0.97 ? "tie" : "below")
      printf "| %s | %s | %s | %.3f | %.2f | %.2f | %s |\n", name, commas(c), commas(r), ratio, uc, ur, verdict
    }'
  done
)
echo "$table"

if [ -n "$OUT" ]; then
  {
    echo "# Scripting benchmark (issue 21)"
    echo
    echo "Medians of $ROUNDS rounds per line, $N requests per run, the servers interleaved (cairn, redis, cairn, ...);"
    echo "CPU is the server's utime+stime (all threads) per call. Verdict: meets at Cairn/Redis >= 1; tie unpipelined within 3%."
    echo
    echo "$table"
    echo
    echo "- commit: \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (with uncommitted changes in crates/)')"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- servers: $($CAIRN --version 2>&1 | head -1); $($REDIS --version)"
    echo "- pinned: $([ "${PIN:-0}" = 1 ] && echo 'servers on CPU 1, client on CPU 0' || echo no)"
    echo
    echo "Commands (ports and directories vary per run):"
    echo
    echo '```'
    shown=$(printf '%q ' "${cairn_argv[@]}"); echo "${srv_pin[*]:+${srv_pin[*]} }${shown% }"
    shown=$(printf '%q ' "${redis_argv[@]}"); echo "${srv_pin[*]:+${srv_pin[*]} }${shown% }"
    echo "redis-cli -p PORT script load \"\$SCRIPT\"   # a: $SCRIPT_A"
    echo "# b: $(tr '\n' ' ' <<< "$SCRIPT_B" | sed 's/ $//')"
    for line in "${lines[@]}"; do
      set -- $line
      echo "${cli_pin[*]:+${cli_pin[*]} }redis-benchmark -p PORT -c 50 -n $N -r 100000 -P $2 -q --csv evalsha ${sha[$1]} 1 'key:__rand_int__'"
    done
    echo '```'
  } > "$OUT"
  echo "wrote $OUT" >&2
fi
