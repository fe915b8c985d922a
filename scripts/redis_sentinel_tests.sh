#!/usr/bin/env bash
# Runs Redis 7.0.15's own Sentinel test suite (tests/sentinel: run.tcl and
# tests/instances.tcl, from scripts/redis_src.sh's cache) with Cairn as the
# five Redis instances and Debian's redis-sentinel as the five sentinels
# (issue 24 item 4).
#
#   scripts/redis_sentinel_tests.sh [--baseline] [FILE...]
#
# FILE is a test file of tests/sentinel/tests, by name or prefix (`00-base`,
# `05`), or `all`; without one, the files that pass on Cairn (PASSING
# below; docs/design.md "Redis's own Sentinel suite" has the table).
# --baseline runs Debian's /usr/bin/redis-server as the instances instead,
# to tell this machine's failures from Cairn's.
#
# Environment:
#   CAIRN_BIN                    the cairn binary (default target/release/cairn,
#                                else target/debug/cairn)
#   CAIRN_SENTINEL_FILE_TIMEOUT  seconds one file may take (default 300)
#   CAIRN_SENTINEL_JOBS          files run at once, each in its own network
#                                namespace (default 1)
#   CAIRN_REDIS_SRC_CACHE        passed to scripts/redis_src.sh
#
# The suite starts `../../../src/redis-server CONF` and `.../redis-sentinel
# CONF` from the config files it writes, and uses fixed ports (20000+,
# 30000+): each file runs in a copy of Redis's tests/ with wrappers in src/,
# inside a private network namespace (`unshare -n`, loopback up), so it
# never meets another test's or a real server's ports. Each file runs in
# its own suite process, namespace and copy, so one file's leftovers
# cannot fail the next, and files can run side by side.
#
# Exit status: 0 when every selected file passed, 1 when one failed (its
# output is printed and its instances' logs kept), 2 on a usage error,
# 3 when Redis's source could not be fetched (the caller may skip).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The files that pass against Cairn (and against Debian's redis-server on
# this machine): all of 7.0.15's but 04-slave-selection, which holds only
# comments. docs/design.md "Redis's own Sentinel suite" has the table.
PASSING=(00-base 01-conf-update 02-slaves-reconf 03-runtime-reconf 05-manual
    06-ckquorum 07-down-conditions 08-hostname-conf 09-acl-support
    10-replica-priority 11-port-0 12-master-reboot 13-info-command)

die() { echo "redis_sentinel_tests.sh: $*" >&2; exit 2; }

baseline=""
files=()
for a in "$@"; do
    case "$a" in
        --baseline) baseline=1 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        -*) die "unknown option $a" ;;
        *) files+=("$a") ;;
    esac
done

for tool in tclsh unshare ip timeout; do
    command -v "$tool" >/dev/null || die "$tool is needed (scripts/install_test_clients.sh installs it)"
done
sentinel=$(command -v redis-sentinel) || die "redis-sentinel is needed (apt-get install -y redis-sentinel)"
cli=$(command -v redis-cli) || die "redis-cli is needed (apt-get install -y redis-tools)"
if [ -n "$baseline" ]; then
    server=$(command -v redis-server) || die "redis-server is needed for --baseline"
else
    server=${CAIRN_BIN:-}
    if [ -z "$server" ]; then
        for b in target/release/cairn target/debug/cairn; do
            [ -x "$b" ] && { server=$root/$b; break; }
        done
    fi
    [ -n "$server" ] && [ -x "$server" ] || die "no cairn binary: build one or set CAIRN_BIN"
    server=$(readlink -f "$server")
fi

src=$(scripts/redis_src.sh) || {
    echo "redis_sentinel_tests.sh: Redis's source (and its test suite) could not be fetched" >&2
    exit 3
}

suite=$src/tests/sentinel/tests
if [ ${#files[@]} -eq 0 ]; then
    files=("${PASSING[@]}")
elif [ "${files[*]}" = all ]; then
    files=()
    for f in "$suite"/*.tcl; do files+=("$(basename "$f" .tcl)"); done
fi
for i in "${!files[@]}"; do
    f=${files[$i]}
    n=$(find "$suite" -maxdepth 1 -name "$f*.tcl" | wc -l)
    [ "$n" -eq 1 ] || die "$f names $n files of $suite, not one"
    files[$i]=$(basename "$(find "$suite" -maxdepth 1 -name "$f*.tcl")" .tcl)
done

work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-sentinel-suite.XXXXXX")
ns=(unshare -n)
[ "$(id -u)" -eq 0 ] || ns=(unshare -r -n)
per_file=${CAIRN_SENTINEL_FILE_TIMEOUT:-300}
jobs=${CAIRN_SENTINEL_JOBS:-1}
what=Cairn
[ -n "$baseline" ] && what="redis-server"
echo "redis_sentinel_tests: Redis $(basename "$src")'s tests/sentinel, instances: $what ($server), sentinels: $sentinel, $jobs file(s) at a time"

# Kills what a file's run left behind (a crash, a timeout): the pids its
# wrappers noted, if they still run one of our programs.
ours=("$(readlink -f "$server")" "$(readlink -f "$sentinel")" "$(readlink -f "$cli")")
kill_leftovers() {
    [ -f "$1/pids" ] || return 0
    while read -r pid; do
        exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
        for o in "${ours[@]}"; do
            [ "$exe" = "$o" ] && kill -9 "$pid" 2>/dev/null
        done
    done <"$1/pids"
    rm -f "$1/pids"
}
cleanup() {
    for d in "$work"/*/; do kill_leftovers "$d"; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One file, in its own copy of Redis's tests/ under $work/FILE (with
# --dont-clean: the instances' logs stay for a failed file). Its output
# goes to $work/FILE/out.log, and also to stdout when files run one at a
# time; the result line is printed when it ends.
run_file() {
    local f=$1 dir=$work/$1 start rc took
    mkdir -p "$dir/src"
    cp -r "$src/tests" "$dir/tests"
    # Each wrapper notes its pid (the exec keeps it) for kill_leftovers.
    for pair in "redis-server:$server" "redis-sentinel:$sentinel" "redis-cli:$cli"; do
        printf '#!/bin/sh\necho $$ >>"%s/pids"\nexec "%s" "$@"\n' "$dir" "${pair#*:}" >"$dir/src/${pair%%:*}"
        chmod +x "$dir/src/${pair%%:*}"
    done
    start=$(date +%s)
    # timeout signals its whole process group: tclsh and the instances it
    # started with `exec ... &`.
    "${ns[@]}" bash -c 'ip link set lo up && cd "$1" &&
        exec timeout -k 10 "$2" tclsh tests/sentinel/run.tcl --dont-clean --single "$3"' \
        _ "$dir" "$per_file" "$f" 2>&1 |
        sed -u -e 's/\x1b\[[0-9;]*m//g' -e "s/^/[$f] /" |
        if [ "$jobs" -eq 1 ]; then tee "$dir/out.log"; else cat >"$dir/out.log"; fi
    rc=${PIPESTATUS[0]}
    kill_leftovers "$dir"
    took=$(( $(date +%s) - start ))
    echo "$rc" >"$dir/status"
    if [ "$rc" -eq 0 ]; then
        echo "redis_sentinel_tests: $f PASSED ($took s)"
    else
        [ "$rc" -eq 124 ] && echo "redis_sentinel_tests: $f timed out after $per_file s"
        echo "redis_sentinel_tests: $f FAILED ($took s, status $rc)"
    fi
}

for f in "${files[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run_file "$f" &
done
wait

failed=()
for f in "${files[@]}"; do
    [ "$(cat "$work/$f/status" 2>/dev/null)" = 0 ] && continue
    failed+=("$f")
    [ "$jobs" -gt 1 ] && cat "$work/$f/out.log"
done
if [ ${#failed[@]} -eq 0 ]; then
    echo "redis_sentinel_tests: all ${#files[@]} file(s) passed: ${files[*]}"
    rm -rf "$work"
    exit 0
fi
echo "redis_sentinel_tests: ${#failed[@]} of ${#files[@]} failed: ${failed[*]}; the instances' logs are under $work/FILE/tests/sentinel/tmp"
exit 1
