#!/bin/bash
# Issue 25's E4 line: data three times larger than RAM. Cairn with
# `maxmemory 1gb`, memcached with its own disk tier (extstore) at the same
# RAM, and redis-server holding everything in RAM, each loaded with 3 GB of
# 2.8 KB real-text values (`cairn-bench batch --real-text`: text cut from
# /usr/share/common-licenses and /usr/share/doc/*/copyright) by MSET x 32
# from 8 threads, then read by MGET x 32 in sequential and random order,
# every value compared byte for byte. Reports keys/s per phase and per
# second (stalls over 1 s flagged), RSS and used_memory per key sampled
# over the run, disk per key (bytes allocated under each server's data
# directory), evictions and errors.
#
# Until Cairn has its disk tier it refuses writes past maxmemory (or evicts,
# with a maxmemory-policy that evicts): the report counts those refusals as
# errors, the reads of what is missing as missing keys, and notes evictions.
#
# usage: scripts/bench_tier.sh [--size 3G] [--maxmemory 1gb] [--value-size 2800]
#          [--threads 8] [--targets cairn,memcached,redis] [--policy noeviction]
#          [--out DIR] [--cairn BIN] [--bench BIN] [-- extra cairn-bench options]
#   --size: total bytes of values (K, M, G); the key count is size / value size.
#   A quick check of the wiring: --size 20M --maxmemory 8mb (seconds).
# Needs: target/release/cairn and target/release/cairn-bench (cargo build
# --release -p cairn-server -p cairn-bench), redis-server, memcached >= 1.6
# (Debian's has extstore), and for redis RAM for the whole data set.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=3G; MAXMEM=1gb; VSIZE=2800; THREADS=8; TARGETS=cairn,memcached,redis; POLICY=noeviction
OUT=bench-tier-$(date -u +%Y%m%dT%H%M%SZ); CAIRN=target/release/cairn; BENCH=target/release/cairn-bench
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --size) SIZE=$2; shift 2;;
    --maxmemory) MAXMEM=$2; shift 2;;
    --value-size) VSIZE=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    --targets) TARGETS=$2; shift 2;;
    --policy) POLICY=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --cairn) CAIRN=$2; shift 2;;
    --bench) BENCH=$2; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
# Sizes: K/M/G are powers of 1024 (kb/mb/gb as Redis reads them).
bytes() {
  local v=${1,,}; v=${v%b}
  case $v in
    *k) echo $(( ${v%k} * 1024 ));; *m) echo $(( ${v%m} * 1024 * 1024 ));;
    *g) echo $(( ${v%g} * 1024 * 1024 * 1024 ));; *) echo "$v";;
  esac
}
size_b=$(bytes "$SIZE"); mem_b=$(bytes "$MAXMEM")
keys=$(( size_b / VSIZE ))
mem_mb=$(( (mem_b + 1048575) / 1048576 ))
# extstore: room for all the values twice over (pages are reclaimed by
# compaction, which needs free pages), at least 1 GB.
ext_mb=$(( size_b * 2 / 1048576 )); [ "$ext_mb" -lt 1024 ] && ext_mb=1024
[ -x "$BENCH" ] || { echo "no $BENCH: cargo build --release -p cairn-bench" >&2; exit 1; }
mkdir -p "$OUT"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench-tier.XXXXXX"); pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
port() { echo $((20000 + RANDOM % 10000)); }
wait_up() { # name port proto
  for _ in $(seq 1 100); do
    if [ "$3" = redis ]; then redis-cli -p "$2" ping >/dev/null 2>&1 && return 0
    else
      # memcached: `version` over bash's /dev/tcp (no nc needed).
      if { exec 3<>"/dev/tcp/127.0.0.1/$2"; } 2>/dev/null; then
        printf 'version\r\n' >&3; local line=""; read -r -t 1 line <&3 || true; exec 3>&-
        case $line in VERSION*) return 0;; esac
      fi
    fi
    sleep 0.1
  done
  echo "$1 did not start: $(tail -3 "$tmp/$1.log")" >&2; exit 1
}
args=(); echo "E4 tier run: $keys keys x $VSIZE B = $SIZE of values, maxmemory $MAXMEM, $THREADS threads; results in $OUT" >&2
for t in ${TARGETS//,/ }; do
  p=$(port); d="$tmp/$t"; mkdir -p "$d"
  case $t in
    cairn)
      [ -x "$CAIRN" ] || { echo "no $CAIRN: cargo build --release -p cairn-server" >&2; exit 1; }
      "$CAIRN" --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" \
        --maxmemory "$MAXMEM" --maxmemory-policy "$POLICY" > "$tmp/$t.log" 2>&1 &
      pids+=($!); wait_up "$t" "$p" redis
      args+=(--target "cairn=redis://127.0.0.1:$p" --pid "cairn=${pids[-1]}" --disk-dir "cairn=$d");;
    redis)
      # All the data in RAM: no maxmemory (the bar compares against it).
      redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" > "$tmp/$t.log" 2>&1 &
      pids+=($!); wait_up "$t" "$p" redis
      args+=(--target "redis=redis://127.0.0.1:$p" --pid "redis=${pids[-1]}" --disk-dir "redis=$d");;
    memcached)
      # -m: item memory at Cairn's maxmemory; extstore writes values over
      # ext_item_size (512 B) to the file once RAM fills.
      # memcached refuses to run as root without -u.
      asroot=(); [ "$(id -u)" = 0 ] && asroot=(-u root)
      memcached "${asroot[@]}" -p "$p" -l 127.0.0.1 -U 0 -t 4 -m "$mem_mb" -c 4096 \
        -o "ext_path=$d/extstore:${ext_mb}m,ext_wbuf_size=8,ext_threads=4" > "$tmp/$t.log" 2>&1 &
      pids+=($!); wait_up "$t" "$p" mc
      args+=(--target "memcached=memcached://127.0.0.1:$p" --pid "memcached=${pids[-1]}" --disk-dir "memcached=$d");;
    *) echo "unknown target $t (cairn, memcached, redis)" >&2; exit 2;;
  esac
done
# The first target is the ratios' base; the seed makes every value
# reproducible from the report (values.seed, the corpus fingerprint).
"$BENCH" batch "${args[@]}" --keys "$keys" --value-size "$VSIZE" --real-text \
  --batch 32 --threads "$THREADS" --phases mset-seq,mget-seq,mget-rand \
  --timeout 30 --seed 25 --data-dir "$tmp" \
  --json "$OUT/tier.json" --chart "$OUT/tier" "${EXTRA[@]}" | tee "$OUT/tier.md"
for t in ${TARGETS//,/ }; do cp "$tmp/$t.log" "$OUT/$t.log" 2>/dev/null || true; done
echo "wrote $OUT/tier.md, $OUT/tier.json and the charts $OUT/tier-*.svg" >&2
