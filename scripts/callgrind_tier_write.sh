#!/bin/bash
# Instructions per key written of E4's load phase (MSET x 32 of 2.8 KB
# real-text values, past maxmemory, the disk tier moving values out) under
# callgrind: every thread of the server, summed, divided by the keys; and
# where the tier's work ran (the workers, which move values out when a
# write finds memory over maxmemory, or the cairn-tier thread) with the
# inclusive counts of the move (`tier_out`), its LZ4 coding and the
# sampling (`tier_sample`). Instruction counts do not drift with the
# machine's load (BENCHMARKS.md, "Request path cost"). Every thread's
# total includes the start-up and the dictionary trainer's one training
# (a thread of its own, ~400 M); the second line counts only the threads
# that moved values. Under valgrind the threads run one at a time and the
# time budgets (a worker's 5 ms to make room) stretch, so a few MSETs may
# get -OOM: counts are per key actually written (DBSIZE).
# usage: scripts/callgrind_tier_write.sh BINARY [KEYS] [MAXMEMORY] [-- extra cairn args]
#   defaults: 20000 keys (56 MB of values), maxmemory 16mb: 3.5x RAM.
# Needs valgrind (callgrind_annotate), target/release/cairn-bench.
set -euo pipefail
bin=$1; keys=${2:-20000}; maxmem=${3:-16mb}
shift $(( $# < 3 ? $# : 3 )); [ "${1:-}" = -- ] && shift
bench=${BENCH:-target/release/cairn-bench}
d=$(mktemp -d)
out=$d/cg
valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file=$out "$bin" \
  --port 0 --bind 127.0.0.1 --server-threads 2 --worker-spin-us 0 --save '' --appendonly no \
  --dir "$d" --maxmemory "$maxmem" --tier-enabled yes "$@" > "$d/log" 2>&1 &
vpid=$!
port=""
for _ in $(seq 1 600); do
  port=$(grep -o 'addr=127.0.0.1:[0-9]*' "$d/log" 2>/dev/null | head -1 | cut -d: -f2) || true
  [ -n "$port" ] && break; sleep 0.2
done
[ -n "$port" ] || { cat "$d/log" >&2; exit 1; }
start=$(date +%s.%N)
"$bench" batch --target "cairn=redis://127.0.0.1:$port" --keys "$keys" --value-size 2800 \
  --real-text --batch 32 --threads 8 --phases mset-seq --timeout 120 --seed 25 \
  --data-dir "$d" > "$d/bench.md" 2>&1 || { cat "$d/bench.md" >&2; }
end=$(date +%s.%N)
info=$(redis-cli -p "$port" info all)
written=$(redis-cli -p "$port" dbsize)
redis-cli -p "$port" shutdown nosave > /dev/null 2>&1 || true
wait $vpid || true
total=0; path=0
printf '%-16s %14s %12s %12s %12s\n' thread instructions tier_out lz4 tier_sample
for f in "$out"-*; do
  name="thread ${f##*-}"
  ann=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null)
  t=$(grep -m1 "PROGRAM TOTALS" <<< "$ann" | awk '{gsub(",","",$1); print $1}' || true)
  tier=$(grep -m1 "Engine>::tier_out_with\|Engine>::tier_out " <<< "$ann" | awk '{gsub(",","",$1); print $1}' || true)
  lz4=$(grep -m1 "LZ4_compress_fast_continue\|zcomp_lz4::compress" <<< "$ann" | awk '{gsub(",","",$1); print $1}' || true)
  samp=$(grep -m1 "Engine>::tier_sample" <<< "$ann" | awk '{gsub(",","",$1); print $1}' || true)
  total=$(( total + ${t:-0} ))
  [ -n "$tier" ] && path=$(( path + t ))
  if [ "${t:-0}" -gt 10000000 ]; then
    printf '%-16s %14s %12s %12s %12s\n' "$name" "$t" "${tier:-0}" "${lz4:-0}" "${samp:-0}"
  fi
done
grep -E "keys/s|mset" "$d/bench.md" | head -5 || true
echo "tiered_keys $(grep -o 'tiered_keys:[0-9]*' <<< "$info" | cut -d: -f2), wall $(echo "$end - $start" | bc) s"
echo "keys written $written of $keys"
echo "instructions per key written, every thread: $(( total / written ))"
echo "instructions per key written, threads that moved values (workers, cairn-tier): $(( path / written ))"
rm -rf "$d"
