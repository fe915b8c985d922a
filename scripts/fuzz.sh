#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time (default 30 s
# each, or the first argument) from its committed seeds (fuzz/seeds/<t>);
# the corpus it grows stays in target/fuzz-corpus. Fails on the first crash,
# leaving the input in fuzz/artifacts/<t>/ (turn it into a regression test).
# Installs the nightly toolchain and cargo-fuzz when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "==> installing the nightly toolchain (cargo-fuzz needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "==> cargo install cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
targets=$(cd fuzz && cargo +nightly fuzz list)
echo "==> building fuzz targets: $(echo $targets)"
(cd fuzz && cargo +nightly fuzz build)
for t in $targets; do
  mkdir -p "target/fuzz-corpus/$t"
  echo "==> fuzz $t for ${secs}s"
  log="target/fuzz-corpus/$t.log"
  status=0
  (cd fuzz && cargo +nightly fuzz run "$t" "../target/fuzz-corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1) \
    >"$log" 2>&1 || status=$?
  # libFuzzer's periodic status lines are the progress; its stats the result.
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss_mb' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$log" >&2
    echo "fuzz target $t failed (exit $status); the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
echo "==> fuzzing: no crash in $(echo $targets | wc -w) targets"
