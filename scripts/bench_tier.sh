#!/bin/bash
# Issue 25's E4 and E5 lines: data three times larger than RAM.
#
# E4 (the default, --mode e4): Cairn with `maxmemory 1gb` and its disk tier
# on (`tier-enabled yes`), memcached with its own disk tier (extstore) at
# the same RAM, and redis-server holding everything in RAM, each loaded with
# 3 GB of 2.8 KB real-text values (`cairn-bench batch --real-text`: text cut
# from /usr/share/common-licenses and /usr/share/doc/*/copyright) by MSET x
# 32 from 8 threads, then read by MGET x 32 in sequential and random order,
# every value compared byte for byte. Reports keys/s per phase and per
# second (stalls over 1 s flagged), RSS and used_memory per key sampled
# over the run, disk per key (bytes allocated under each server's data
# directory: Cairn's tier/ logs, memcached's extstore file), evictions and
# errors, what each disk tier held at the end (Cairn's INFO tier*,
# memcached's extstore_* stats), then a summary (summary.md): Cairn ÷
# memcached and Cairn ÷ Redis per phase and the bar's checks with ✓/✗.
#
# E5 (--mode e5): the same three servers, each loaded in turn with
# --times x maxmemory of the same real-text values by single SETs
# (`cairn-bench load-curve --string-values`); reports inserts/s per 1% of
# the load, memory and disk per record at every tenth, the last tenth's
# speed over the first's (the bar: at least 0.7), and draws the curve
# (e5-load-curve.svg).
#
# usage: scripts/bench_tier.sh [--mode e4|e5] [--size 3G] [--times 3]
#          [--maxmemory 1gb] [--value-size 2800] [--threads 8]
#          [--targets cairn,memcached,redis] [--policy noeviction]
#          [--rounds 1] [--cold] [--memcached-profile tuned|default]
#          [--memcached-opts "ext_wbuf_size=64,..."] [--memcached-flags "-f 1.1"]
#          [--cairn-args "--tier-threshold 80 ..."] [--strict] [--out DIR]
#          [--cairn BIN] [--bench BIN] [-- extra cairn-bench options]
#   --size (E4): total bytes of values (K, M, G); the key count is size /
#   value size. --times (E5): the load as a multiple of maxmemory.
#   --rounds N: N rounds, each with fresh servers (started, loaded,
#   measured, stopped), the targets taking turns within each phase; the
#   summary gives every round's keys/s (inserts/s) and the median, and
#   takes the ratios and the bar's checks from the medians. Round r's
#   files are in DIR/round-r/.
#   --cold (E4): before each read phase of each target, sync and drop the
#   page cache (root only; the summary says when it was not permitted),
#   so the tiers' reads come from the disk, not from RAM.
#   --memcached-profile: `tuned` (the default) runs memcached's extstore
#   with the settings under which it keeps every value (MEMCACHED_TUNED
#   below says which and why); `default` with the options the script used
#   before (extstore's own defaults but for the write buffer and I/O
#   threads), under which memcached 1.6.18 evicts most values at 3x RAM.
#   --memcached-opts: extra `-o` settings after the profile's (a later
#   setting wins); --memcached-flags: extra memcached flags (trials).
#   --strict: exit 1 if Cairn lost, refused or changed a value or moved none
#   to disk (scripts/test's tiny runs).
#   A quick check of the wiring: --size 60M --maxmemory 20mb (E4), --mode e5
#   --maxmemory 20mb (E5); seconds each.
# Needs: target/release/cairn and target/release/cairn-bench (cargo build
# --release -p cairn-server -p cairn-bench), redis-server, memcached >= 1.6
# (Debian's has extstore), python3, and for redis RAM for the whole data set.
# The values' corpus includes FOLDOC and the Jargon File
# (scripts/text_corpus.sh fetches them into a cache dir when missing).
#
# The servers run side by side (E4's phases take each target in turn), so
# without --cold the tiers' files sit in the page cache when the machine
# has RAM to spare: the reads measure the tier's path, not the disk.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=e4; SIZE=3G; TIMES=3; MAXMEM=1gb; VSIZE=2800; THREADS=8; TARGETS=cairn,memcached,redis; POLICY=noeviction
CAIRN_ARGS=""; STRICT=(); ROUNDS=1; COLD=0; MC_PROFILE=tuned; MC_OPTS=""
OUT=bench-tier-$(date -u +%Y%m%dT%H%M%SZ); CAIRN=target/release/cairn; BENCH=target/release/cairn-bench
EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --mode) MODE=$2; shift 2;;
    --size) SIZE=$2; shift 2;;
    --times) TIMES=$2; shift 2;;
    --maxmemory) MAXMEM=$2; shift 2;;
    --value-size) VSIZE=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    --targets) TARGETS=$2; shift 2;;
    --policy) POLICY=$2; shift 2;;
    --cairn-args) CAIRN_ARGS=$2; shift 2;;
    --strict) STRICT=(--strict); shift;;
    --rounds) ROUNDS=$2; shift 2;;
    --cold) COLD=1; shift;;
    --memcached-profile) MC_PROFILE=$2; shift 2;;
    --memcached-opts) MC_OPTS=$2; shift 2;;
    --memcached-flags) MC_FLAGS=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --cairn) CAIRN=$2; shift 2;;
    --bench) BENCH=$2; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
case $MODE in e4|e5) ;; *) echo "--mode: e4 or e5" >&2; exit 2;; esac
case $MC_PROFILE in tuned|default) ;; *) echo "--memcached-profile: tuned or default" >&2; exit 2;; esac
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds: a positive count" >&2; exit 2; }
[ "$COLD" = 1 ] && [ "$MODE" = e5 ] && { echo "--cold: E4 only (E5 has no read phase)" >&2; exit 2; }
# Sizes: K/M/G are powers of 1024 (kb/mb/gb as Redis reads them).
bytes() {
  local v=${1,,}; v=${v%b}
  case $v in
    *k) echo $(( ${v%k} * 1024 ));; *m) echo $(( ${v%m} * 1024 * 1024 ));;
    *g) echo $(( ${v%g} * 1024 * 1024 * 1024 ));; *) echo "$v";;
  esac
}
mem_b=$(bytes "$MAXMEM")
if [ "$MODE" = e4 ]; then size_b=$(bytes "$SIZE")
else size_b=$(python3 -c "import math; print(math.ceil($TIMES * $mem_b))"); fi
# E5's records are a value and a 16-byte key (load-curve sizes them so).
if [ "$MODE" = e4 ]; then keys=$(( size_b / VSIZE )); else keys=$(( size_b / (VSIZE + 16) )); fi
mem_mb=$(( (mem_b + 1048575) / 1048576 ))
# extstore: room for all the values twice over (pages are reclaimed by
# compaction, which needs free pages), at least 1 GB.
ext_mb=$(( size_b * 2 / 1048576 )); [ "$ext_mb" -lt 1024 ] && ext_mb=1024
# memcached's extstore settings (`-o`, after ext_path), by profile.
# default: the options this script used before: extstore's defaults
# (ext_item_age unlimited: the flusher writes an item out only when its
# slab class runs short of free chunks) with an 8 MB write buffer and four
# I/O threads. At 3x RAM under 8 writing threads the flusher falls behind
# the writers, whose allocations then evict from the LRU tail instead
# (memcached issue #972): 67% of E4's values lost in run S18u.
MEMCACHED_DEFAULT="ext_wbuf_size=8,ext_threads=4"
# tuned: the settings under which memcached keeps every value. Measured
# here with memcached alone, 8 writers, E4's values and phases, under a
# shared machine (evicted + lost to page moves, of the keys written):
#   3 GB at -m 1024: default 771,327 of 1,150,437 (67%); tuned 0 and 0
#   in two runs, every MGET of both read phases answered in full.
#   1 GB at -m 300: tuned 0 of 383,479. In the full E4 run (all three
#   servers, exclusive lock) tuned lost 11,209 (0.97%), all to the page
#   mover (slab_reassign_evictions_nomem): when the flusher falls behind
#   the 8 writers, the pages it takes back still hold values not yet
#   written out. No setting tried kept every value in every run; this is
#   the one that lost least.
# Each setting, and what it fixed on the way (smaller runs):
# - ext_item_age=0: the flusher writes out every item of the COLD LRU
#   idle a second or more, all the time, instead of only once a slab
#   class is short of free chunks (by then the writers are allocating
#   from the LRU tail, and an allocation that finds no free chunk evicts).
#   memcached's own advice (pull request #923): "Most serious users set
#   ext_item_age=0 and force flush all items". 256 MB at -m 80: 57,671 of
#   95,869 evicted by default, 8,494 with this.
# - ext_max_sleep=10000 (us): the flusher and compactor sleep at most
#   10 ms, not 1 s. While RAM is not yet full the flusher finds nothing to
#   do and backs off to its longest sleep; when RAM fills under 8 writers
#   (~200 MB/s) a 1 s nap is ~200 MB of allocations that evict instead
#   (issue #881: "the storage flush thread can end up sleeping for up to
#   a second"). With this too: 0 of 95,869.
# - slab_automove_window=3, slab_automove_freeratio=0.05: a value written
#   out leaves a small item header (96 B chunks) in RAM, in another slab
#   class than the values' (2,904 B). The values' class takes every page
#   first; once it flushes, its pages are free but stay its own, and the
#   headers' class, given no page, evicts its own headers: a value on
#   disk whose header is evicted is lost (issues #541, #794). 768 MB at
#   -m 256 with the two above: 134,703 of 287,627 lost, `stats items`
#   items:1:evicted 124,874 while the values' class had 88,084 free
#   chunks, slabs_moved 0. The automover hands free pages back to the
#   global pool but decides over a 30 s window, longer than a load; 3 is
#   its minimum. A larger free ratio moves more pages, and a moved page's
#   values not yet written out are evicted (slab_reassign_evictions_nomem:
#   at 3 GB, 0.05/0.1/0.2/0.3/0.4 lost 0-75k/66-75k/91-186k/30k/85k);
#   slab_automove=2 (a page moved at every eviction) lost 72,838 at 768 MB.
# - ext_wbuf_size=32 (MB, from 8): the flusher copies into a write buffer
#   and stops when none is free while the I/O threads write; with 8 MB it
#   fell behind the writers (875-916k of 1,150,437 written by the end of
#   the load, 11,612 and 0 lost), with 32 MB 1.02-1.11M (0 and 0 lost).
MEMCACHED_TUNED="ext_wbuf_size=32,ext_threads=4,ext_item_age=0,ext_max_sleep=10000,slab_automove_window=3,slab_automove_freeratio=0.05"
MEMCACHED_TUNED_FLAGS=""
mc_flags=""
if [ "$MC_PROFILE" = tuned ]; then mc_o=$MEMCACHED_TUNED; mc_flags=$MEMCACHED_TUNED_FLAGS; else mc_o=$MEMCACHED_DEFAULT; fi
[ -n "$MC_OPTS" ] && mc_o="$mc_o,$MC_OPTS"
[ -n "${MC_FLAGS:-}" ] && mc_flags="$mc_flags $MC_FLAGS"
[ -x "$BENCH" ] || { echo "no $BENCH: cargo build --release -p cairn-bench" >&2; exit 1; }
mkdir -p "$OUT"
# The values' corpus (FOLDOC, the Jargon File): fetched into a cache dir
# once; without it the values come from the licences alone (the summary
# names the corpus and its ratios, so such a run does not pass unnoticed).
scripts/text_corpus.sh >/dev/null \
  || echo "warning: scripts/text_corpus.sh failed: the values come from the licences alone" >&2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench-tier.XXXXXX"); pids=()
declare -A ports
stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_servers
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
port() { echo $((20000 + RANDOM % 10000)); }
# memcached's `stats` over bash's /dev/tcp (no nc needed): port, command.
mc_ask() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%s\r\n' "$2" >&3
  local line
  while read -r -t 5 line <&3; do
    line=${line%$'\r'}; echo "$line"
    case $line in END|ERROR*|VERSION*) break;; esac
  done
  exec 3>&-
}
wait_up() { # name port proto
  for _ in $(seq 1 100); do
    if [ "$3" = redis ]; then redis-cli -p "$2" ping >/dev/null 2>&1 && return 0
    else mc_ask "$2" version 2>/dev/null | grep -q '^VERSION' && return 0
    fi
    sleep 0.1
  done
  echo "$1 did not start: $(tail -3 "$tmp/$1.log")" >&2; exit 1
}
asroot=(); [ "$(id -u)" = 0 ] && asroot=(-u root)
# memcached's command line (-m: item memory at Cairn's maxmemory;
# memcached counts items only, so its RSS runs above it; extstore writes
# values over ext_item_size (512 B) to the file; ext_wbuf_size is in MB;
# memcached refuses to run as root without -u).
mc_cmd() { # port dir
  echo memcached "${asroot[@]}" -p "$1" -l 127.0.0.1 -U 0 -t 4 -m "$mem_mb" -c 4096 \
    $mc_flags -o "ext_path=$2/extstore:${ext_mb}m,$mc_o"
}
if [ "$MODE" = e4 ]; then
  echo "E4 tier run: $keys keys x $VSIZE B = $SIZE of values, maxmemory $MAXMEM, $THREADS threads, $ROUNDS round(s)$([ "$COLD" = 1 ] && echo ', cold reads'); results in $OUT" >&2
else
  echo "E5 load curve: $TIMES x maxmemory $MAXMEM = about $keys records of $VSIZE B, $THREADS threads, $ROUNDS round(s); results in $OUT" >&2
fi
cold=(); [ "$COLD" = 1 ] && cold=(--drop-caches)
reports=()
for r in $(seq 1 "$ROUNDS"); do
  rd="$OUT/round-$r"; mkdir -p "$rd"
  args=()
  # Fresh servers and data directories every round.
  for t in ${TARGETS//,/ }; do
    p=$(port); d="$tmp/r$r/$t"; mkdir -p "$d"; ports[$t]=$p
    case $t in
      cairn)
        [ -x "$CAIRN" ] || { echo "no $CAIRN: cargo build --release -p cairn-server" >&2; exit 1; }
        # The tier's logs go to <dir>/tier/NN/, under --disk-dir.
        # shellcheck disable=SC2086 # --cairn-args is split into directives
        "$CAIRN" --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" \
          --maxmemory "$MAXMEM" --maxmemory-policy "$POLICY" --tier-enabled yes $CAIRN_ARGS \
          > "$tmp/$t.log" 2>&1 &
        pids+=($!); wait_up "$t" "$p" redis
        [ "$(redis-cli -p "$p" config get tier-enabled | tail -1)" = yes ] \
          || { echo "cairn did not turn its disk tier on" >&2; exit 1; }
        args+=(--target "cairn=redis://127.0.0.1:$p" --pid "cairn=${pids[-1]}" --disk-dir "cairn=$d");;
      redis)
        # All the data in RAM: no maxmemory (the bar compares against it).
        redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" > "$tmp/$t.log" 2>&1 &
        pids+=($!); wait_up "$t" "$p" redis
        args+=(--target "redis=redis://127.0.0.1:$p" --pid "redis=${pids[-1]}" --disk-dir "redis=$d");;
      memcached)
        # shellcheck disable=SC2046 # mc_cmd prints words without spaces
        $(mc_cmd "$p" "$d") > "$tmp/$t.log" 2>&1 &
        pids+=($!); wait_up "$t" "$p" mc
        st=$(mc_ask "$p" stats || true)
        grep -q '^STAT extstore_' <<< "$st" \
          || { echo "memcached has no extstore (stats shows no extstore_*): $(tail -3 "$tmp/$t.log")" >&2; exit 1; }
        # Its effective settings, for the summary.
        mc_ask "$p" "stats settings" > "$rd/memcached.settings" || true
        args+=(--target "memcached=memcached://127.0.0.1:$p" --pid "memcached=${pids[-1]}" --disk-dir "memcached=$d");;
      *) echo "unknown target $t (cairn, memcached, redis)" >&2; exit 2;;
    esac
  done
  echo "round $r of $ROUNDS" >&2
  # The first target is the ratios' base; the seed makes every value
  # reproducible from the report (values.seed, the corpus fingerprint).
  if [ "$MODE" = e4 ]; then
    "$BENCH" batch "${args[@]}" --keys "$keys" --value-size "$VSIZE" --real-text \
      --batch 32 --threads "$THREADS" --phases mset-seq,mget-seq,mget-rand "${cold[@]}" \
      --timeout 30 --seed 25 --data-dir "$tmp/r$r" \
      --json "$rd/tier.json" --chart "$rd/tier" "${EXTRA[@]}" > "$rd/tier.md"
    reports+=("$rd/tier.json")
  else
    "$BENCH" load-curve "${args[@]}" --maxmemory "$mem_b" --times "$TIMES" \
      --string-values "$VSIZE" --threads "$THREADS" --timeout 30 --seed 25 --data-dir "$tmp/r$r" \
      --json "$rd/load.json" --chart "$rd/e5" "${EXTRA[@]}" > "$rd/load.md"
    reports+=("$rd/load.json")
  fi
  # Each server's own account at the end (the summary quotes the disk-tier
  # lines: memcached's get_extstore, evictions and extstore_*, Cairn's tier*).
  for t in ${TARGETS//,/ }; do
    if [ "$t" = memcached ]; then mc_ask "${ports[$t]}" stats > "$rd/$t.stats" || true
    else redis-cli -p "${ports[$t]}" info all > "$rd/$t.stats" 2>&1 || true
    fi
    cp "$tmp/$t.log" "$rd/$t.log" 2>/dev/null || true
  done
  stop_servers
  rm -rf "$tmp/r$r"
done
# What the peers ran with, for the summary.
notes=()
case ",$TARGETS," in *,memcached,*)
  notes+=(--note "memcached profile \`$MC_PROFILE\`: \`$(mc_cmd PORT DIR | sed 's/ -u root//')\`");;
esac
[ "$COLD" = 1 ] && notes+=(--note "cold reads: the page cache dropped before each read phase of each target")
if [ "$MODE" = e4 ]; then
  python3 scripts/bench_tier_report.py e4 "${reports[@]}" --maxmemory "$mem_b" --stats \
    "${notes[@]}" "${STRICT[@]}" | tee "$OUT/summary.md"
  echo "wrote $OUT/summary.md; per round: $OUT/round-N/tier.md, tier.json, the charts tier-*.svg, each server's stats" >&2
else
  python3 scripts/bench_tier_report.py e5 "${reports[@]}" --stats "${notes[@]}" "${STRICT[@]}" | tee "$OUT/summary.md"
  echo "wrote $OUT/summary.md; per round: $OUT/round-N/load.md, load.json, the curve e5-load-curve.svg, each server's stats" >&2
fi
