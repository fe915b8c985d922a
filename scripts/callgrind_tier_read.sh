#!/bin/bash
# Instructions per key read of E4's read phases (MGET x 32 of 2.8 KB
# real-text values, sequential then random keys, every value checked by
# cairn-bench) with most values in the disk tier, under callgrind: every
# thread of the server, summed over the read phases only (the counters are
# zeroed once the load is over and the tier has settled, and dumped when
# the reads end), divided by the keys read; with the inclusive counts of
# the tier's read path on the threads that ran it: `tier_io::prepare`
# (which keys are tiered, the reads that do not wait, installing them),
# the reads themselves (`try_nowait`), and the LZ4 decode. Instruction
# counts do not drift with the machine's load (BENCHMARKS.md, "Request
# path cost"); system calls are not counted by callgrind (the kernel's
# side of a pread is not an instruction of the process): INFO's
# tier_reads and the syscall lines (strace -c -f attached for the read
# phases of a second run without valgrind, STRACE=1) say how many there
# were. KEEP=DIR keeps the profiles (callgrind_annotate DIR/cg.1-NN).
# Under callgrind's slow clock the worker's cron (hz 1) runs every few
# dozen MGETs instead of every few hundred, so its per-tick work weighs
# more than in a real run.
# Every value the tier holds is in the page cache here (the logs are a
# few MB), so this is the cost of E4's warm reads, the bar's case.
# usage: scripts/callgrind_tier_read.sh BINARY [KEYS] [MAXMEMORY] [-- extra cairn args]
#   defaults: 10000 keys (28 MB of values), maxmemory 8mb: ~3.5x RAM.
# Needs valgrind (callgrind_control, callgrind_annotate), redis-cli,
# target/release/cairn-bench.
set -euo pipefail
bin=$1; keys=${2:-10000}; maxmem=${3:-8mb}
shift $(( $# < 3 ? $# : 3 )); [ "${1:-}" = -- ] && shift
bench=${BENCH:-target/release/cairn-bench}
d=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && cp -r "$d" "$KEEP"; rm -rf "$d"' EXIT
out=$d/cg
# The load runs with room (256 MB), then maxmemory comes down and the
# tier thread moves values out: under valgrind a worker's 5 ms to make
# room stretches, and a load past maxmemory got -OOM for a share of its
# MSETs (a different share each run). With room, every key is stored, the
# dictionary is trained from the load, and every value goes out coded
# with it: runs of two builds read the same records.
args=(--port 0 --bind 127.0.0.1 --server-threads 2 --worker-spin-us 0 --save '' --appendonly no
  --hz 1 --dir "$d" --maxmemory 256mb --tier-enabled yes "$@")
wait_port() {
  port=""
  for _ in $(seq 1 600); do
    port=$(grep -o 'addr=127.0.0.1:[0-9]*' "$d/log" 2>/dev/null | head -1 | cut -d: -f2) || true
    [ -n "$port" ] && return 0; sleep 0.2
  done
  cat "$d/log" >&2; exit 1
}
# Loaded, and the tier thread done moving values out: tiered_keys still.
settle() {
  local last=-1 now
  for _ in $(seq 1 120); do
    now=$(redis-cli -p "$port" info tier | grep -o 'tiered_keys:[0-9]*' | cut -d: -f2)
    [ "$now" = "$last" ] && return 0
    last=$now; sleep 2
  done
}
run_bench() {
  local threads=$1; shift
  "$bench" batch --target "cairn=redis://127.0.0.1:$port" --keys "$keys" --value-size 2800 \
    --real-text --batch 32 --threads "$threads" --timeout 120 --seed 25 --data-dir "$d" "$@"
}
valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=$out "$bin" \
  "${args[@]}" > "$d/log" 2>&1 &
vpid=$!
wait_port
run_bench 8 --phases mset-seq > "$d/load.md" 2>&1 || { cat "$d/load.md" >&2; }
redis-cli -p "$port" config set maxmemory "$maxmem" > /dev/null
settle
tiered=$(redis-cli -p "$port" info tier | grep -o 'tiered_keys:[0-9]*' | cut -d: -f2)
reads0=$(redis-cli -p "$port" info tier | grep -o '^tier_reads:[0-9]*' | cut -d: -f2)
callgrind_control -z "$vpid" > /dev/null
run_bench 8 --no-flush --phases mget-seq,mget-rand > "$d/bench.md" 2>&1 || { cat "$d/bench.md" >&2; }
callgrind_control -d "$vpid" > /dev/null
info=$(redis-cli -p "$port" info all)
stored=$(redis-cli -p "$port" dbsize)
redis-cli -p "$port" shutdown nosave > /dev/null 2>&1 || true
wait $vpid || true
reads=$(( $(grep -o '^tier_reads:[0-9]*' <<< "$info" | cut -d: -f2) - reads0 ))
read_keys=$(( 2 * keys ))
total=0
inc() { grep -m1 -E "$1" <<< "$ann" | awk '{gsub(",","",$1); print $1+0}' || true; }
busiest=""; most=0
printf '%-10s %13s %12s %12s %12s\n' thread instructions prepare pread lz4
for f in "$out".1-*; do
  ann=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null)
  t=$(grep -m1 "PROGRAM TOTALS" <<< "$ann" | awk '{gsub(",","",$1); print $1+0}' || true)
  total=$(( total + ${t:-0} ))
  if [ "${t:-0}" -gt 10000000 ]; then
    prep=$(inc "tier_io::prepare")
    rd=$(inc "nowait::try_nowait")
    lz4=$(inc "LZ4_decompress_safe")
    [ "$t" -gt "$most" ] && { most=$t; busiest=$f; }
    printf '%-10s %13s %12s %12s %12s\n' "${f##*-}" "$t" "${prep:-0}" "${rd:-0}" "${lz4:-0}"
  fi
done
grep -E "^\| cairn +\| mget" "$d/bench.md" | cut -d'|' -f2-6 || true
if [ "${PROFILE:-0}" = 1 ] && [ -n "$busiest" ]; then
  echo "the busiest thread's functions by their own instructions (callgrind_annotate):"
  callgrind_annotate "$busiest" 2>/dev/null | grep -A32 "^Ir" | tail -n +3 | cut -c1-150
fi
errs=$(grep -ciE "mismatch|wrong value" "$d/bench.md" || true)
echo "keys $keys (stored $stored), tiered at the reads $tiered, tier reads $reads during them, value errors reported: $errs"
echo "instructions per key read, every thread: $(( total / read_keys ))"
echo "instructions per tiered record read (all of it charged to them): $(( total / (reads > 0 ? reads : 1) ))"
if [ "${STRACE:-0}" = 1 ]; then
  # The same reads without valgrind: strace attaches once the load is over
  # and the tier has settled, so only the read phases' calls are counted.
  rm -rf "$d"/tier "$d/log"
  "$bin" "${args[@]}" > "$d/log" 2>&1 &
  spid=$!
  wait_port
  run_bench 8 --phases mset-seq > /dev/null 2>&1 || true
  redis-cli -p "$port" config set maxmemory "$maxmem" > /dev/null
  settle
  strace -c -f -p "$spid" -o "$d/strace" 2> /dev/null &
  tpid=$!
  sleep 1
  run_bench 8 --no-flush --phases mget-seq,mget-rand > /dev/null 2>&1 || true
  kill -INT "$tpid"; wait "$tpid" || true
  redis-cli -p "$port" shutdown nosave > /dev/null 2>&1 || true
  wait $spid || true
  echo "system calls of the read phases ($read_keys keys read), strace -c -f:"
  head -14 "$d/strace"
fi
