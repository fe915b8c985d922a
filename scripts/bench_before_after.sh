#!/bin/bash
# Part-1 redis-benchmark lines, an older Cairn binary (OLD) against a newer one (NEW), alternating
# round by round so both see the same machine. Writes CSV rows: binary, round, pipeline, test, rps, ...
# Env: OLD (required), NEW (default target/release/cairn), ROUNDS (2), TESTS (set,get,incr,mset),
#      N (200000 requests per line), OUT (before_after.csv), DATA (scratch directory).
OUT=${OUT:-before_after.csv}; : > $OUT
ROUNDS=${ROUNDS:-2}; TESTS=${TESTS:-set,get,incr,mset}; N=${N:-200000}
for round in $(seq 1 $ROUNDS); do
  for v in old new; do
    bin=${NEW:-target/release/cairn}; [ $v = old ] && bin=${OLD:?path to the older cairn binary}
    d=${DATA:-/tmp/cairn-before-after}/p1-$v; rm -rf $d; mkdir -p $d
    $bin --port 7631 --dir $d --save '' > $d/log 2>&1 & sleep 1
    for P in 1 16; do
      redis-benchmark -p 7631 -t $TESTS -c 50 -n $N -r 100000 -P $P --csv 2>/dev/null | grep -v '^"test"' | sed "s/^/\"$v\",\"$round\",\"P$P\",/" >> $OUT
    done
    redis-cli -p 7631 shutdown nosave >/dev/null 2>&1; sleep 1
    echo "round $round/$ROUNDS $v done" >&2
  done
done
