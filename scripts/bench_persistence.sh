#!/bin/bash
# Issue 6 benchmark: redis-benchmark against Redis and Cairn with the same persistence settings.
N=${N:-200000}
OUT=${OUT:-persist.csv}
: > $OUT
run() { # name port
  for P in 1 16; do
    redis-benchmark -p $2 -t set,incr,lpush,hset -c 50 -n $N -r 100000 -P $P --csv 2>/dev/null | grep -v '^"test"' | sed "s/^/\"$1\",\"P$P\",/" >> $OUT
  done
}
for cfg in off everysec always; do
  for srv in redis cairn; do
    d=${DATA:-/tmp/cairn-bench-persist}/data-$srv-$cfg; rm -rf $d; mkdir -p $d
    if [ $cfg = off ]; then extra="--appendonly no"; else extra="--appendonly yes --appendfsync $cfg"; fi
    if [ $srv = redis ]; then
      redis-server --port 7611 --dir $d --save '' $extra --daemonize yes >/dev/null; port=7611
    else
      ${CAIRN:-target/release/cairn} --port 7612 --dir $d --save '' $extra > $d/log 2>&1 & port=7612
    fi
    sleep 1
    echo "== $srv $cfg $(date +%T)" >&2
    run "$srv-$cfg" $port
    redis-cli -p $port shutdown nosave >/dev/null 2>&1; sleep 1
  done
done
echo done >&2
