#!/bin/sh
# Instructions per value of zstd coding and decoding, outside the server
# (src/main.rs says what MODE means). Makes values.txt as
# scripts/bench_compression.sh does, builds, runs under callgrind with
# collection on only inside the coding and decoding loops, and prints
# their counts per value (decoding runs 5 times over the 1,000 values:
# its line is "(5x)"; divide by 5).
# usage: scripts/zstd_cost/run.sh MODE LEVEL      e.g. DK=64 NS=384 run.sh base 3
set -eu
cd "$(dirname "$0")"
[ -s values.txt ] || python3 - 4000 values.txt <<'PY'
import os, sys
n, out = int(sys.argv[1]), sys.argv[2]
words = []
d = "/usr/share/common-licenses"
for f in sorted(os.listdir(d)):
    words += open(os.path.join(d, f), encoding="utf-8", errors="replace").read().split()
M = (1 << 64) - 1
with open(out, "w") as o:
    for i in range(n):
        x = ((i + 1) * 0x9E3779B97F4A7C15) & M
        v = []
        size = 0
        while size < 2800:
            x ^= (x << 13) & M; x ^= x >> 7; x ^= (x << 17) & M
            start = (x >> 16) % len(words); run = 3 + x % 12
            for k in range(run):
                w = words[(start + k) % len(words)]
                v.append(w); size += len(w) + 1
        o.write(" ".join(v)[:2800].replace("\n", " ") + "\n")
PY
cargo build --release -q
out=$(mktemp)
valgrind --tool=callgrind --toggle-collect='zstd_cost::enc' --toggle-collect='zstd_cost::dec' \
  --toggle-collect='zstd_cost::lz4_enc' --toggle-collect='zstd_cost::lz4_dec' --toggle-collect='zstd_cost::clz4_enc' --toggle-collect='zstd_cost::clz4_dec' --toggle-collect='zstd_cost::dec_ext' --toggle-collect='zstd_cost::dec_ext_direct' --toggle-collect='zstd_cost::dec_prefix' --toggle-collect='zstd_cost::dec_flex' \
  --callgrind-out-file="$out" ./target/release/zstd-cost "$1" "$2" 2>&1 | grep -v '^=='
callgrind_annotate --inclusive=yes "$out" | grep -E 'zstd_cost::(enc|dec|lz4_enc|lz4_dec|clz4_enc|clz4_dec|dec_ext|dec_ext_direct|dec_prefix|dec_flex) ' | sort -u
rm -f "$out"
