#!/bin/bash
# Issue 23's bar, three parts, each against a release Cairn and redis-server 7.0.15 started by
# this script (no persistence), rounds interleaved (cairn, redis, cairn, ...) so drift hits both:
#   tls    redis-benchmark --tls -c 50 -n N -r 100000 -t set,get, unpipelined and -P 16, and the
#          same lines over plain TCP on the same servers, so the cost of TLS is reported for both;
#   conn   new TLS connections per second: `cairn-bench conn-rate` (connect + PING + close in a
#          loop, a full handshake each time, no session resumption) for SECONDS per round;
#   acl    the part-1 redis-benchmark lines (set,get,incr,hset,mset) on one Cairn with 100 users
#          loaded, as the default user and as a user limited to the benchmark's key patterns, in
#          interleaved pairs on that same process (default, restricted, default, ...); per line
#          the median of the pairs' ratios and their range; the bar is "within 3%" (Redis is run
#          the same way for reference).
# Progress goes to stderr, tables to stdout and, with OUT, to a markdown file with the machine,
# commit and commands. Certificates are made with openssl in a temporary directory.
# Env: ROUNDS (5), N (1000000), ACL_N (N), ACL_TESTS (set,get,incr,hset,mset), SECONDS_PER_ROUND (5),
#      THREADS (conn-rate threads, 8),
#      PARTS ("tls conn acl"), OUT, CAIRN, BENCH (cairn-bench; both built unless given).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}; N=${N:-1000000}; ACL_N=${ACL_N:-$N}; SECS=${SECONDS_PER_ROUND:-5}
THREADS=${THREADS:-8}; PARTS=${PARTS:-"tls conn acl"}; OUT=${OUT:-}
ACL_TESTS=${ACL_TESTS:-set,get,incr,hset,mset}
if [ -z "${CAIRN:-}" ] || [ -z "${BENCH:-}" ]; then
  echo "building release cairn and cairn-bench" >&2
  cargo build --release -q --bin cairn --bin cairn-bench
fi
CAIRN=${CAIRN:-target/release/cairn}; BENCH=${BENCH:-target/release/cairn-bench}
TICK=$(getconf CLK_TCK)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13}' /proc/$1/stat; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
commas() { awk -v x="$1" 'BEGIN { s = sprintf("%.0f", x); out = ""; while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }; print s out }'; }

tmp=$(mktemp -d /tmp/cairn-bench-security.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# A CA and a server certificate for 127.0.0.1 / localhost (RSA 2048, as redis's gen-test-certs.sh).
(
  cd "$tmp"
  openssl genrsa -out ca.key 2048 2>/dev/null
  openssl req -x509 -new -nodes -sha256 -key ca.key -days 2 -subj /CN=cairn-bench-ca -out ca.crt
  openssl genrsa -out server.key 2048 2>/dev/null
  openssl req -new -sha256 -key server.key -subj /CN=localhost -out server.csr
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
  openssl x509 -req -sha256 -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile san.ext -out server.crt 2>/dev/null
)
TLS_ARGS=(--tls-cert-file "$tmp/server.crt" --tls-key-file "$tmp/server.key" --tls-ca-cert-file "$tmp/ca.crt" --tls-auth-clients no)

# 100 users with assorted rules, and `bench`, limited to the keys redis-benchmark's part-1 lines use.
{
  for i in $(seq 1 100); do echo "user u$i on >pw$i ~app$i:* &chan$i +@read +@write -@dangerous"; done
  echo "user bench on >benchpw ~key:* ~counter:* ~myhash ~mylist ~myset ~myzset resetchannels +@all"
  echo "user default on >defaultpw ~* &* +@all"
} > "$tmp/users.acl"
ping_auth=()  # redis-cli's login for start's PING

start() {  # name binary extra-args... -> sets <name>_port/_tls/_pid/_cmd
  local name=$1 bin=$2; shift 2
  local port tport; port=$(free_port); tport=$(free_port)
  mkdir -p "$tmp/$name"
  local argv=("$bin" --port "$port" --tls-port "$tport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp/$name" "${TLS_ARGS[@]}" "$@")
  "${argv[@]}" > "$tmp/$name.log" 2>&1 &
  local pid=$!; pids+=($pid)
  for _ in $(seq 1 100); do [ "$(redis-cli -p $port "${ping_auth[@]}" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
  [ "$(redis-cli -p $port "${ping_auth[@]}" ping 2>/dev/null)" = PONG ] || { echo "$name did not answer PING" >&2; cat "$tmp/$name.log" >&2; exit 1; }
  printf -v "${name}_port" '%s' "$port"; printf -v "${name}_tls" '%s' "$tport"; printf -v "${name}_pid" '%s' "$pid"
  printf -v "${name}_cmd" '%s' "$(printf '%q ' "${argv[@]}" | sed "s#$tmp#\$TMP#g")"
}

# redis-benchmark of several tests in one invocation -> "rps_test1 rps_test2 ... cpu_us_per_request"
bench() {  # pid tests n args...
  local pid=$1 tests=$2 n=$3; shift 3
  local before after out ntests
  before=$(cpu_ticks $pid)
  out=$(redis-benchmark -c 50 -n $n -r 100000 -q --csv -t "$tests" "$@")
  after=$(cpu_ticks $pid)
  ntests=$(tr ',' '\n' <<< "$tests" | wc -l)
  local vals=""
  for t in $(tr ',' ' ' <<< "$tests"); do
    v=$(awk -F'"' -v t="$t" 'toupper($2) ~ "^"toupper(t)"( |$)" {print $4}' <<< "$out" | tail -1)
    [ -n "$v" ] || { echo "no result for $t: $out" >&2; exit 1; }
    vals+="$v "
  done
  echo "$vals$(awk -v t=$((after - before)) -v hz=$TICK -v n=$((n * ntests)) 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')"
}

declare -A R C
record() {  # key "rps... cpu" tests
  local key=$1 vals=$2 tests=$3 i=1
  for t in $(tr ',' ' ' <<< "$tests"); do R[$key.$t]+="$(cut -d' ' -f$i <<< "$vals") "; i=$((i + 1)); done
  C[$key]+="$(awk '{print $NF}' <<< "$vals") "
}
med() { tr ' ' '\n' <<< "${1:-}" | grep . | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }

out_md=""
emit() { echo "$1"; out_md+="$1"$'\n'; }

if [[ " $PARTS " == *" tls "* || " $PARTS " == *" conn "* ]]; then
  start cairn "$CAIRN"; start redis redis-server
fi

if [[ " $PARTS " == *" tls "* ]]; then
  total=$((ROUNDS * 2 * 2 * 2)); k=0
  for P in 1 16; do
    for r in $(seq 1 $ROUNDS); do
      for s in cairn redis; do
        for mode in tls plain; do
          p=${s}_port; tp=${s}_tls; q=${s}_pid
          if [ $mode = tls ]; then args=(-p ${!tp} --tls --cacert "$tmp/ca.crt"); else args=(-p ${!p}); fi
          v=$(bench ${!q} set,get $N "${args[@]}" -P $P)
          record "$s.$mode.$P" "$v" set,get
          k=$((k + 1)); printf '[tls %d/%d] -P %-2s round %d %-5s %-5s SET %s GET %s, %s CPU us/req\n' $k $total $P $r $s $mode $v >&2
        done
      done
    done
  done
  emit "### TLS: \`redis-benchmark --tls -c 50 -n $N -r 100000 -t set,get\`, medians of $ROUNDS rounds"
  emit ""
  emit "| line | Cairn TLS ops/s | Redis TLS ops/s | Cairn/Redis | verdict | Cairn plain ops/s | Redis plain ops/s | TLS/plain Cairn | TLS/plain Redis | CPU µs/req TLS Cairn / Redis |"
  emit "|---|---:|---:|---:|---|---:|---:|---:|---:|---|"
  for P in 1 16; do
    for t in set get; do
      ct=$(med "${R[cairn.tls.$P.$t]}"); rt=$(med "${R[redis.tls.$P.$t]}")
      cp=$(med "${R[cairn.plain.$P.$t]}"); rp=$(med "${R[redis.plain.$P.$t]}")
      x=$(ratio $ct $rt)
      verdict=$(awk -v x=$x -v p=$P 'BEGIN {print (x >= 1 ? "meets" : (p == 1 && x >= 0.97 ? "tie" : "below"))}')
      mode="unpipelined"; [ $P = 16 ] && mode="-P 16"
      emit "| ${t^^}, $mode | $(commas $ct) | $(commas $rt) | $x | $verdict | $(commas $cp) | $(commas $rp) | $(ratio $ct $cp) | $(ratio $rt $rp) | $(med "${C[cairn.tls.$P]}") / $(med "${C[redis.tls.$P]}") |"
    done
  done
  emit ""
fi

if [[ " $PARTS " == *" conn "* ]]; then
  declare -A CR
  for r in $(seq 1 $ROUNDS); do
    for s in cairn redis; do
      tp=${s}_tls
      line=$("$BENCH" conn-rate --target "s=rediss://127.0.0.1:${!tp}" --cacert "$tmp/ca.crt" --threads $THREADS --seconds $SECS 2>&1 | tail -1)
      v=$(awk -F'\t' '$1 == "s" {print $3}' <<< "$line")  # target, round, connections/s, errors
      [ -n "$v" ] || { echo "conn-rate gave no figure: $line" >&2; exit 1; }
      CR[$s]+="$v "
      printf '[conn] round %d %-5s %s conns/s\n' $r $s "$v" >&2
    done
  done
  c=$(med "${CR[cairn]}"); rr=$(med "${CR[redis]}")
  emit "### New TLS connections per second: \`cairn-bench conn-rate --threads $THREADS --seconds $SECS\` (connect, TLS handshake, PING, close), medians of $ROUNDS rounds"
  emit ""
  emit "| | Cairn conns/s | Redis conns/s | Cairn/Redis | verdict |"
  emit "|---|---:|---:|---:|---|"
  emit "| rediss:// | $(commas $c) | $(commas $rr) | $(ratio $c $rr) | $(awk -v x=$(ratio $c $rr) 'BEGIN {print (x >= 1 ? "meets" : "below")}') |"
  emit ""
fi

if [[ " $PARTS " == *" acl "* ]]; then
  # One server of each with the users loaded from an aclfile, both users
  # on that same process in interleaved pairs (default, restricted, ...):
  # two servers, or rounds minutes apart, differ by more than the 3% the
  # bar asks about (S15e: Redis's own ratio moved 0.75-1.08 that way).
  # Both users' connections authenticate (AUTH user password, hashed
  # the same way); a warm-up run per line fills the keyspace first, so
  # no pair's first run creates keys its second finds.
  ping_auth=(--user default --pass defaultpw --no-auth-warning)
  start cairnacl "$CAIRN" --aclfile "$tmp/users.acl"; start redisacl redis-server --aclfile "$tmp/users.acl"
  ping_auth=()
  tests=$ACL_TESTS
  total=$((2 * ROUNDS * $(tr ',' '\n' <<< "$tests" | wc -l) * 2 * 2)); k=0
  declare -A AR
  for P in 1 16; do
    for s in cairn redis; do
      pn=${s}acl_port; q=${s}acl_pid
      bench ${!q} $tests $ACL_N -p ${!pn} --user default -a defaultpw -P $P >/dev/null 2>&1
    done
    for r in $(seq 1 $ROUNDS); do
      for t in $(tr ',' ' ' <<< "$tests"); do
        for s in cairn redis; do
          pn=${s}acl_port; q=${s}acl_pid; pair=""
          for mode in default users; do
            if [ $mode = default ]; then auth=(--user default -a defaultpw); else auth=(--user bench -a benchpw); fi
            v=$(bench ${!q} $t $ACL_N -p ${!pn} "${auth[@]}" -P $P 2>/dev/null | cut -d' ' -f1)
            R[$s.$mode.$P.$t]+="$v "; pair+="$v "
            k=$((k + 1)); printf '[acl %d/%d] -P %-2s round %d %-6s %-5s %-7s %s\n' $k $total $P $r $t $s $mode "$v" >&2
          done
          AR[$s.$P.$t]+="$(awk '{printf "%.4f", $2 / $1}' <<< "$pair") "
        done
      done
    done
  done
  spread() { tr ' ' '\n' <<< "$1" | grep . | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.3f-%.3f", lo, hi}'; }
  emit "### ACL: part-1 lines on one server with 100 users loaded, the default user against a key-pattern user (\`~key:* ~counter:* ~myhash ~mylist ~myset ~myzset +@all\`), \`-c 50 -n $ACL_N -r 100000\`, $ROUNDS interleaved pairs per line"
  emit ""
  emit "Each pair runs a line as the default user, then at once as the restricted one, on the same server process (both authenticate); the ratio is the median of the pairs' restricted ÷ default, with their range; throughputs are medians of the runs."
  emit ""
  emit "| line | Cairn default | Cairn restricted | restricted ÷ default Cairn (median) | pairs' range | verdict (within 3%) | Redis default | Redis restricted | restricted ÷ default Redis (median) | pairs' range |"
  emit "|---|---:|---:|---:|---|---|---:|---:|---:|---|"
  for P in 1 16; do
    for t in $(tr ',' ' ' <<< $tests); do
      cd_=$(med "${R[cairn.default.$P.$t]}"); cu=$(med "${R[cairn.users.$P.$t]}")
      rd=$(med "${R[redis.default.$P.$t]}"); ru=$(med "${R[redis.users.$P.$t]}")
      x=$(med "${AR[cairn.$P.$t]}" | awk '{printf "%.3f", $1}'); y=$(med "${AR[redis.$P.$t]}" | awk '{printf "%.3f", $1}')
      mode="unpipelined"; [ $P = 16 ] && mode="-P 16"
      emit "| ${t^^}, $mode | $(commas $cd_) | $(commas $cu) | $x | $(spread "${AR[cairn.$P.$t]}") | $(awk -v x=$x 'BEGIN {print (x >= 0.97 ? "meets" : "below")}') | $(commas $rd) | $(commas $ru) | $y | $(spread "${AR[redis.$P.$t]}") |"
    done
  done
  emit ""
fi

if [ -n "$OUT" ]; then
  {
    echo "# Security benchmark (issue 23)"
    echo
    echo "$out_md"
    echo "- commit: \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (with uncommitted changes in crates/)')"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(awk '/model name/ {sub(/.*: /, ""); print; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
    echo "- command: \`ROUNDS=$ROUNDS N=$N ACL_N=$ACL_N ACL_TESTS=$ACL_TESTS PARTS=\"$PARTS\" scripts/bench_security.sh\`"
    for s in cairn redis cairnacl redisacl; do
      c=${s}_cmd; [ -n "${!c:-}" ] && echo "- $s: \`${!c}\`"
    done
    echo "- Redis version: $(redis-server --version | awk '{print $3}')"
  } > "$OUT"
fi
