#!/bin/sh
# Instructions per 2.8 KB value of the disk tier's LZ4 coding and decoding
# outside the server (cost.c says what each mode is), on E4's values and
# a dictionary trained as the server trains one (the bench crate's
# e4_values example), with the liblz4 cairn-engine links (lz4-sys's
# bundled copy, -O3). Prints, per setting, the ratio and callgrind's
# inclusive count of code() and decode() divided by the 1,000 values.
# usage: scripts/lz4_tier_cost/run.sh ["MODE ACCEL SLOW" ...]
#   default: the table of docs/design.md, "The tier's codec on the write path"
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cd "$root"
cargo run -q --release -p cairn-bench --example e4_values -- "$d"
lib=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/lz4-sys-1.11*/liblz4/lib | tail -1)
gcc -O3 -g -I"$lib" scripts/lz4_tier_cost/cost.c "$lib/lz4.c" -o "$d/cost"
[ $# -gt 0 ] || set -- "0 1 0" "1 1 0" "0 1 1" "2 1 0" "0 2 0" "0 4 0" "0 8 0" "0 16 0" "0 32 0"
cd "$d"
for s in "$@"; do
  # shellcheck disable=SC2086 # "MODE ACCEL SLOW" is three words
  valgrind --tool=callgrind --callgrind-out-file=cg ./cost $s > line 2> /dev/null
  count() { callgrind_annotate --inclusive=yes cg 2> /dev/null | grep -m1 ":$1 " | awk '{gsub(",","",$1); print int($1/1000)}'; }
  echo "$(cat line); code $(count code), decode $(count decode) instructions a value"
done
