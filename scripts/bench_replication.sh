#!/bin/bash
# Issue 24's replication bar, against a release Cairn and redis-server 7.0.15 started by this run
# (no persistence, ephemeral ports), each master with a replica of its own kind:
#   throughput  the part-1 lines (`redis-benchmark -P 16 -c 50 -n N -r 100000 -t <line>`) on
#               Cairn alone, Cairn + a Cairn replica, Redis alone, Redis + a Redis replica, the
#               four interleaved in every round; replicas synced before each run and level
#               (offsets equal) after it, the lag left at the end reported; server CPU per request
#               (master and replica) from /proc beside the throughputs, and the master's CPU per
#               request with a replica ÷ alone for both servers;
#   sync        a fresh replica's full sync of SYNC_KEYS keys of VALUE_SIZE bytes, diskless and
#               disk (`repl-diskless-sync no`), timed to link up + all keys held, with a probe's
#               PING/GET latency on the master meanwhile (p50/p99/max);
#   lag         master_repl_offset − the replica's offset every 10 ms under sustained SETs,
#               unpipelined and -P 16, for LAG_SECONDS (p50/p99/max, bytes and ms).
# The work is in scripts/bench_replication.py (its docstring has the method, and
# scripts/test_bench_replication.py tests its parsing). Progress goes to stderr, the report
# (commit, machine, versions, exact commands, then Markdown tables) to stdout and, with OUT, to
# that file. --quick: N=2000, one round, 2,000 keys to sync, 1 s of lag: checks the wiring only.
# Env: ROUNDS (5), N (1000000), TESTS (set,get,incr,hset,mset), PIPELINE (16),
#      SYNC_KEYS (1000000), VALUE_SIZE (1024), SYNC_MODES (diskless,disk), PROBE_HZ (500),
#      LAG_SECONDS (10), LAG_PIPELINES (1,16), PARTS (throughput,sync,lag), CATCHUP_TIMEOUT (60),
#      SYNC_TIMEOUT (600), OUT, CAIRN (target/release/cairn, built unless given), REDIS.
# Memory: the sync part holds both loaded masters and one replica at a time, ~3x SYNC_KEYS x
# VALUE_SIZE (about 4 GB at the defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CAIRN:-}" ]; then
  export CAIRN=target/release/cairn
  echo "building $CAIRN" >&2
  cargo build --release --bin cairn -q
fi
command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (Debian: redis-tools)" >&2; exit 1; }
exec python3 scripts/bench_replication.py "$@"
