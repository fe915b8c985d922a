#!/usr/bin/env bash
# Runs Redis 7.0.15's own tests/unit suite (from the source tree that
# scripts/redis_src.sh fetches) in external-server mode against Cairn, one
# file at a time, each against a fresh Cairn with a timeout.
#
#   scripts/redis_unit_tests.sh [UNIT...]     e.g. unit/type/string unit/expire
#
# Without UNITs it runs the files listed in tests/redis-suite/units.txt (the
# ones Cairn passes; the CI hook is crates/server/tests/redis_unit_suite.rs).
# Tests of Redis internals Cairn deliberately does not copy are skipped by
# name from tests/redis-suite/skip.txt (`unit<TAB>test name<TAB>reason`; a
# name starting with `/` is a regexp, as in test_helper.tcl's --skipfile).
#
# Environment: CAIRN_BIN (default target/release/cairn, else target/debug/
# cairn), CAIRN_REDIS_UNIT_TIMEOUT (seconds per file, default 300),
# CAIRN_REDIS_UNIT_LOGS (directory kept for the per-file logs; default a
# temporary one, removed at the end unless a file failed).
#
# Prints a table per file (passed / failed / skipped) and exits 1 if a test
# outside the skip list failed, a file aborted on an exception, or a file
# timed out (2: a missing tool or binary, 3: Redis's source could not be
# fetched). Every Cairn it starts is stopped at the end, on failure or
# interrupt too.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SUITE=$ROOT/tests/redis-suite
TIMEOUT=${CAIRN_REDIS_UNIT_TIMEOUT:-300}

die() { echo "redis_unit_tests.sh: $*" >&2; exit 2; }

BIN=${CAIRN_BIN:-}
if [ -z "$BIN" ]; then
    if [ -x "$ROOT/target/release/cairn" ]; then BIN=$ROOT/target/release/cairn
    elif [ -x "$ROOT/target/debug/cairn" ]; then BIN=$ROOT/target/debug/cairn
    else die "no cairn binary: build one or set CAIRN_BIN"; fi
fi
[ -x "$BIN" ] || die "CAIRN_BIN=$BIN is not executable"
command -v tclsh >/dev/null || die "tclsh is needed (Debian package tcl)"

# Exit status 3: the source could not be fetched (the CI hook then skips,
# saying so, as for scripts/redis_sentinel_tests.sh).
SRC=$("$ROOT/scripts/redis_src.sh") || {
    echo "redis_unit_tests.sh: cannot get Redis's source (scripts/redis_src.sh)" >&2
    exit 3
}

if [ $# -gt 0 ]; then
    units=("$@")
else
    mapfile -t units < <(grep -v '^\s*#' "$SUITE/units.txt" | grep -v '^\s*$')
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-redis-unit.XXXXXX")
LOGS=${CAIRN_REDIS_UNIT_LOGS:-$WORK/logs}
mkdir -p "$LOGS"
server_pid=""
tcl_pid=""

stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null
        wait "$server_pid" 2>/dev/null
        server_pid=""
    fi
}
cleanup() {
    # timeout(1) leads its own process group (test_helper.tcl and its test
    # client): end all of it.
    [ -n "$tcl_pid" ] && kill -- -"$tcl_pid" 2>/dev/null
    stop_server
    if [ "${keep_logs:-0}" = 1 ] || [ -n "${CAIRN_REDIS_UNIT_LOGS:-}" ]; then
        [ -z "${CAIRN_REDIS_UNIT_LOGS:-}" ] && echo "logs kept in $LOGS" >&2
        find "$WORK" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# test_helper.tcl listens for its test clients just below --baseport: a
# random base keeps runs of this script (and other helpers' suites) apart.
base_port() { echo $((22000 + RANDOM % 7000)); }

start_server() {
    local dir=$WORK/data-$1
    mkdir -p "$dir"
    port=$(free_port)
    # What the suite needs: DEBUG (it populates keys and checks digests),
    # no persistence (tests flush and reload nothing from disk), and
    # Redis's packing defaults where Cairn's differ (tests/diff/
    # DIFFERENCES.md, "Packing defaults"): the suite's encoding checks
    # assume 64-byte listpack values.
    "$BIN" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
        --enable-debug-command yes \
        --hash-max-listpack-value 64 --zset-max-listpack-value 64 \
        >"$LOGS/cairn-$1.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    die "Cairn did not start (see $LOGS/cairn-$1.log)"
}

# Test names in test_helper.tcl's output end with " (N ms)" for passes, and
# failures as "[err]: NAME in tests/unit/FILE.tcl".
count() { grep -c "$1" "$2" 2>/dev/null || true; }

# IGNORED: tests test_helper.tcl leaves out by tag in external mode
# (external:skip: they start servers of their own or need a restart).
printf '%-28s %7s %7s %7s %8s %6s  %s\n' FILE PASSED FAILED SKIPPED IGNORED SECS STATUS
bad=0
total_ok=0 total_err=0 total_skip=0
for unit in "${units[@]}"; do
    name=$(echo "$unit" | tr / _)
    log=$LOGS/$name.log
    skipfile=$WORK/skip-$name.txt
    awk -F'\t' -v u="$unit" '$1 == u && NF >= 2 { print $2 }' "$SUITE/skip.txt" >"$skipfile"
    start_server "$name"
    (cd "$SRC" && exec timeout -k 10 "$TIMEOUT" tclsh tests/test_helper.tcl \
        --host 127.0.0.1 --port "$port" --single "$unit" --clients 1 \
        --skipfile "$skipfile" --timeout "$TIMEOUT" --baseport "$(base_port)") >"$log" 2>&1 &
    tcl_pid=$!
    started=$SECONDS
    wait "$tcl_pid"
    rc=$?
    tcl_pid=""
    stop_server
    # Strip colours so the counts see plain "[ok]:".
    sed -i 's/\x1b\[[0-9;]*m//g' "$log"
    ok=$(count '^\[ok\]: ' "$log")
    err=$(grep '^\[err\]: ' "$log" | sort -u | wc -l)
    skip=$(count '^\[skip\]: ' "$log")
    ign=$(count '^\[ignore\]: ' "$log")
    status=ok
    if grep -q '^\[exception\]' "$log"; then status="exception"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status="timeout (${TIMEOUT}s)"
    elif [ "$err" -gt 0 ]; then status="failed"
    elif [ "$rc" != 0 ]; then status="exit $rc"
    fi
    [ "$status" = ok ] || bad=1
    total_ok=$((total_ok + ok)); total_err=$((total_err + err)); total_skip=$((total_skip + skip))
    printf '%-28s %7s %7s %7s %8s %6s  %s\n' "$unit" "$ok" "$err" "$skip" "$ign" \
        "$((SECONDS - started))" "$status"
    if [ "$status" != ok ]; then
        grep -E '^\[(err|exception)\]: ' "$log" | sort -u | sed 's/^/    /'
        grep -A3 '^\[exception\]' "$log" | tail -n +2 | sed 's/^/    /'
    fi
done
printf '%-28s %7s %7s %7s\n' TOTAL "$total_ok" "$total_err" "$total_skip"
if [ "$bad" != 0 ]; then
    keep_logs=1
    echo "redis_unit_tests.sh: unexpected failures (logs in $LOGS)" >&2
    exit 1
fi
exit 0
