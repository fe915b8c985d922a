#!/bin/bash
# Issue 25's E2 line: the persistence benchmarks per file system. As root
# with loop devices, makes an ext4 and (when Debian's xfsprogs is installed:
# `apt-get install xfsprogs`) an XFS file system on loop devices over sparse
# image files and runs on each: the persistence lines
# (scripts/bench_persistence.sh: redis-benchmark SET/INCR/LPUSH/HSET against
# Redis and Cairn with appendonly off, everysec and always) and a YCSB load
# plus workload A (`cairn-bench ycsb`, Cairn and Redis with the journal on,
# per fsync policy). Otherwise (not root, no loop device, or --dirs) it runs
# the same in the directories given and names their file systems.
# One table per file system; every mount and loop device it made is
# removed on exit, failure and interrupt included.
#
# usage: scripts/bench_fs.sh [--fs ext4,xfs] [--fs-size 4G] [--dirs DIR,...]
#          [--requests N] [--records R] [--operations O] [--threads T]
#          [--policies everysec,always] [--work DIR] [--out DIR]
#          [--cairn BIN] [--bench BIN]
#   --requests: redis-benchmark -n of the persistence lines (default 200000).
#   --records/--operations: the YCSB load and run (default 1000000 each).
#   Needs xfsprogs for XFS (scripts/install_test_clients.sh installs it).
#   A quick check of the wiring: --fs-size 300M --requests 2000
#   --records 2000 --operations 2000 (a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
FS=ext4,xfs; FS_SIZE=4G; DIRS=""; N=200000; RECORDS=1000000; OPS=1000000; THREADS=8
POLICIES=everysec,always; WORK=${TMPDIR:-/var/tmp}/cairn-bench-fs; OUT=bench-fs-$(date -u +%Y%m%dT%H%M%SZ)
CAIRN=target/release/cairn; BENCH=target/release/cairn-bench
while [ $# -gt 0 ]; do
  case $1 in
    --fs) FS=$2; shift 2;;
    --fs-size) FS_SIZE=$2; shift 2;;
    --dirs) DIRS=$2; shift 2;;
    --requests) N=$2; shift 2;;
    --records) RECORDS=$2; shift 2;;
    --operations) OPS=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    --policies) POLICIES=$2; shift 2;;
    --work) WORK=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --cairn) CAIRN=$2; shift 2;;
    --bench) BENCH=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
  esac
done
for b in "$CAIRN" "$BENCH"; do
  [ -x "$b" ] || { echo "no $b: cargo build --release -p cairn-server -p cairn-bench" >&2; exit 1; }
done
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server and redis-benchmark (Debian's redis-server, redis-tools)" >&2; exit 1; }
CAIRN=$(realpath "$CAIRN"); BENCH=$(realpath "$BENCH")
mkdir -p "$OUT" "$WORK"; OUT=$(realpath "$OUT"); WORK=$(realpath "$WORK")

mounts=(); loops=(); images=(); pids=()
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  # bench_persistence.sh's own servers, when it was interrupted.
  for p in 7611 7612; do redis-cli -p $p shutdown nosave >/dev/null 2>&1; done
  wait 2>/dev/null
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m"; rmdir "$m" 2>/dev/null; done
  for l in "${loops[@]}"; do losetup -d "$l"; done
  for i in "${images[@]}"; do rm -f "$i"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The places to measure: "label dir" lines.
places=()
if [ -z "$DIRS" ] && [ "$(id -u)" = 0 ] && command -v losetup >/dev/null && losetup -f >/dev/null 2>&1; then
  for fs in ${FS//,/ }; do
    mkfs=$(command -v "mkfs.$fs" || true)
    if [ -z "$mkfs" ]; then
      echo "note: no mkfs.$fs on this machine, $fs skipped (Debian: apt-get install $([ "$fs" = xfs ] && echo xfsprogs || echo "the $fs tools"))" >&2
      continue
    fi
    img="$WORK/$fs.img"; truncate -s "$FS_SIZE" "$img"; images+=("$img")
    dev=$(losetup -f --show "$img"); loops+=("$dev")
    case $fs in
      ext4) "$mkfs" -q -F "$dev";;
      xfs) "$mkfs" -q -f "$dev";;
      *) "$mkfs" "$dev" >/dev/null;;
    esac
    mnt="$WORK/mnt-$fs"; mkdir -p "$mnt"; mount "$dev" "$mnt"; mounts+=("$mnt")
    places+=("$fs $mnt")
    echo "made $fs on $dev ($FS_SIZE image $img) at $mnt" >&2
  done
else
  if [ -z "$DIRS" ]; then
    DIRS="$WORK"
    echo "note: cannot make file systems here (needs root and a free loop device); measuring in $DIRS" >&2
  fi
  for d in ${DIRS//,/ }; do
    mkdir -p "$d"
    # findmnt reads mountinfo (stat -f names ext4 "ext2/ext3").
    fst=$(findmnt -no FSTYPE -T "$d"); src=$(findmnt -no SOURCE -T "$d")
    places+=("$fst-$(basename "$d") $(realpath "$d")")
    echo "$d: $fst on $src" >&2
  done
fi
[ ${#places[@]} -gt 0 ] || { echo "no file system to measure" >&2; exit 1; }

port() { echo $((20000 + RANDOM % 10000)); }
start() { # name port cmd...
  local name=$1 p=$2; shift 2
  "$@" > "$OUT/$name.log" 2>&1 & pids+=($!)
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$name did not start: $(tail -3 "$OUT/$name.log")" >&2; exit 1
}
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true; pids=()
}

for place in "${places[@]}"; do
  label=${place%% *}; dir=${place#* }
  echo "== $label ($dir) $(date -u +%T)" >&2
  # 1. The persistence lines (redis-benchmark per fsync policy).
  DATA="$dir/persist" OUT="$OUT/persist-$label.csv" N="$N" CAIRN="$CAIRN" scripts/bench_persistence.sh
  rm -rf "$dir/persist"
  # 2. YCSB load + workload A per fsync policy, the journal on that disk.
  for pol in ${POLICIES//,/ }; do
    pc=$(port); pr=$(port); dc="$dir/ycsb-cairn-$pol"; dr="$dir/ycsb-redis-$pol"
    rm -rf "$dc" "$dr"; mkdir -p "$dc" "$dr"
    start "cairn-$label-$pol" "$pc" "$CAIRN" --port "$pc" --bind 127.0.0.1 --save '' --dir "$dc" --appendonly yes --appendfsync "$pol"
    start "redis-$label-$pol" "$pr" redis-server --port "$pr" --bind 127.0.0.1 --save '' --dir "$dr" --appendonly yes --appendfsync "$pol"
    "$BENCH" ycsb --workload a --records "$RECORDS" --operations "$OPS" --threads "$THREADS" \
      --target "cairn=redis://127.0.0.1:$pc" --target "redis=redis://127.0.0.1:$pr" \
      --data-dir "$dc" --timeout 10 --seed 2 \
      --json "$OUT/ycsb-$label-$pol.json" > "$OUT/ycsb-$label-$pol.md"
    stop_all
    rm -rf "$dc" "$dr"
  done
done

# One table per file system, each line with Redis's figure, Cairn's and
# Cairn ÷ Redis, then the lines side by side across the file systems
# (scripts/bench_fs_report.py; re-run it on $OUT to redo the tables).
python3 scripts/bench_fs_report.py "$OUT" "$POLICIES" "${places[@]}" | tee "$OUT/fs.md"
echo "wrote $OUT/fs.md (and per-run CSV, JSON and logs in $OUT)" >&2
