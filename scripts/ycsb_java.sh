#!/usr/bin/env bash
# Runs YCSB's own Java client (site.ycsb.Client 0.17.0 from Maven Central)
# against a RESP server, for comparison with `cairn-bench ycsb`.
#
#   scripts/ycsb_java.sh fetch
#   scripts/ycsb_java.sh load|run --host H --port P --workload a|b|FILE \
#       --records N --operations M --threads T [-- more site.ycsb.Client args]
#
# `fetch` (also done on first use) puts into the cache dir
# ${CAIRN_YCSB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/ycsb}, never
# into the repository:
#   lib/        site.ycsb:core:0.17.0 and redis.clients:jedis:2.9.0 with
#               their dependencies (a throwaway pom + mvn dependency:copy-dependencies)
#   classes/    scripts/ycsb-java/CairnRedisBinding.java compiled against them
#   workloads/  workloada and workloadb with YCSB's default properties
#
# The Redis binding: YCSB publishes only its core on Maven Central
# (site.ycsb:redis-binding:0.17.0 is not there: "Could not find artifact
# site.ycsb:redis-binding:jar:0.17.0 in central"), so by default the
# binding is CairnRedisBinding, which sends the same commands as YCSB's
# RedisClient through the same Jedis version (see its header). To use
# YCSB's own jar instead (from ycsb-redis-binding-0.17.0.tar.gz of YCSB's
# GitHub release), set YCSB_REDIS_BINDING_JAR=/path/to/redis-binding-0.17.0.jar;
# the class is then site.ycsb.db.RedisClient.
#
# Output is YCSB's own ([OVERALL], Throughput(ops/sec), ...).
set -euo pipefail

YCSB_VERSION=0.17.0
JEDIS_VERSION=2.9.0
CACHE=${CAIRN_YCSB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/ycsb}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$HERE/ycsb-java/CairnRedisBinding.java

die() { echo "ycsb_java.sh: $*" >&2; exit 1; }

fetch() {
    command -v mvn >/dev/null || die "mvn (Maven) is needed to fetch YCSB"
    command -v javac >/dev/null || die "a JDK (javac) is needed"
    mkdir -p "$CACHE/lib" "$CACHE/classes" "$CACHE/workloads"
    if [ ! -f "$CACHE/lib/core-$YCSB_VERSION.jar" ] || [ ! -f "$CACHE/lib/jedis-$JEDIS_VERSION.jar" ]; then
        local pom=$CACHE/fetch-pom.xml
        cat >"$pom" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.cairn</groupId>
  <artifactId>ycsb-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>site.ycsb</groupId><artifactId>core</artifactId><version>$YCSB_VERSION</version></dependency>
    <dependency><groupId>redis.clients</groupId><artifactId>jedis</artifactId><version>$JEDIS_VERSION</version></dependency>
  </dependencies>
</project>
POM
        echo "ycsb_java.sh: fetching site.ycsb:core:$YCSB_VERSION and jedis $JEDIS_VERSION into $CACHE/lib" >&2
        mvn -q -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
            -DoutputDirectory="$CACHE/lib" >&2 || die "mvn could not fetch the artifacts"
    fi
    local cls=$CACHE/classes/cairn/ycsb/CairnRedisBinding.class
    if [ ! -f "$cls" ] || [ "$SRC" -nt "$cls" ]; then
        javac -nowarn -d "$CACHE/classes" -cp "$CACHE/lib/*" "$SRC" || die "cannot compile $SRC"
    fi
    # YCSB's workloads/workloada and workloadb (the core jar does not ship
    # them): CoreWorkload, 10 fields of 100 bytes (its defaults), zipfian.
    cat >"$CACHE/workloads/workloada" <<'W'
# YCSB workload A: update heavy, 50% reads, 50% updates.
recordcount=1000
operationcount=1000
workload=site.ycsb.workloads.CoreWorkload
readallfields=true
readproportion=0.5
updateproportion=0.5
scanproportion=0
insertproportion=0
requestdistribution=zipfian
W
    cat >"$CACHE/workloads/workloadb" <<'W'
# YCSB workload B: read mostly, 95% reads, 5% updates.
recordcount=1000
operationcount=1000
workload=site.ycsb.workloads.CoreWorkload
readallfields=true
readproportion=0.95
updateproportion=0.05
scanproportion=0
insertproportion=0
requestdistribution=zipfian
W
}

[ $# -ge 1 ] || die "usage: $0 fetch | load|run --host H --port P --workload a|b|FILE --records N --operations M --threads T [-- args]"
mode=$1; shift
case $mode in
    fetch) fetch; echo "$CACHE"; exit 0 ;;
    load) phase=-load ;;
    run) phase=-t ;;
    *) die "unknown mode $mode (fetch, load or run)" ;;
esac

host=127.0.0.1 port=6379 workload=a records=1000 operations=1000 threads=1
while [ $# -gt 0 ]; do
    case $1 in
        --host) host=$2; shift 2 ;;
        --port) port=$2; shift 2 ;;
        --workload) workload=$2; shift 2 ;;
        --records) records=$2; shift 2 ;;
        --operations) operations=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        --) shift; break ;;
        *) die "unknown option $1" ;;
    esac
done

fetch
case $workload in
    a|b) wfile=$CACHE/workloads/workload$workload ;;
    *) [ -f "$workload" ] || die "workload $workload: not a, b or a file"; wfile=$workload ;;
esac
if [ -n "${YCSB_REDIS_BINDING_JAR:-}" ]; then
    [ -f "$YCSB_REDIS_BINDING_JAR" ] || die "YCSB_REDIS_BINDING_JAR=$YCSB_REDIS_BINDING_JAR: no such file"
    cp="$YCSB_REDIS_BINDING_JAR:$CACHE/lib/*"
    db=site.ycsb.db.RedisClient
else
    cp="$CACHE/classes:$CACHE/lib/*"
    db=cairn.ycsb.CairnRedisBinding
fi
# -Xmx: YCSB's launcher sets none; a fixed heap keeps GC behaviour the
# same from run to run.
exec java ${YCSB_JAVA_OPTS:--Xmx1g} -cp "$cp" site.ycsb.Client "$phase" -db "$db" -P "$wfile" \
    -p redis.host="$host" -p redis.port="$port" \
    -p recordcount="$records" -p operationcount="$operations" \
    -threads "$threads" "$@"
