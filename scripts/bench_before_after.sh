#!/bin/bash
# Part-1 redis-benchmark lines, an older Cairn binary (OLD) against a newer one (NEW), alternating, 2 rounds.
OUT=${OUT:-before_after.csv}; : > $OUT
for round in 1 2; do
  for v in old new; do
    bin=${NEW:-target/release/cairn}; [ $v = old ] && bin=${OLD:?path to the older cairn binary}
    d=${DATA:-/tmp/cairn-before-after}/p1-$v; rm -rf $d; mkdir -p $d
    $bin --port 7631 --dir $d --save '' > $d/log 2>&1 & sleep 1
    for P in 1 16; do
      redis-benchmark -p 7631 -t set,get,incr,mset -c 50 -n 200000 -r 100000 -P $P --csv 2>/dev/null | grep -v '^"test"' | sed "s/^/\"$v\",\"$round\",\"P$P\",/" >> $OUT
    done
    redis-cli -p 7631 shutdown nosave >/dev/null 2>&1; sleep 1
  done
done
