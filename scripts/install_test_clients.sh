#!/usr/bin/env bash
# Installs the real clients that crates/server/tests/scripting_clients.rs
# (issue 21) and queue_clients.rs (issue 22) run against Cairn:
#   - a Python virtualenv at target/clients-venv (or $CAIRN_CLIENTS_VENV) with
#     the pinned redis-py, Celery/kombu, dramatiq, limits, python-rq and
#     pytest of tests/clients/requirements.txt;
#   - python-rq's source distribution (for the test suite it ships), checked
#     against the hash in tests/clients/rq-sdist.txt and unpacked under
#     target/rq-src (or $CAIRN_CLIENTS_RQ_SRC);
#   - BullMQ and ioredis from tests/clients/bullmq/package-lock.json, into
#     target/clients-node/node_modules (or $CAIRN_CLIENTS_NODE), outside the
#     source tree; Node.js and npm from Debian when the machine has none;
#   - Debian's ruby-sidekiq (Sidekiq 6.4) and ruby-redis;
#   - Debian's nutcracker (twemproxy) for twemproxy.rs (issue 24).
#   - Debian's redis-sentinel for sentinel.rs (issue 24).
#   - Debian's xfsprogs for scripts/bench_fs.sh's XFS (issue 25, E2).
# Idempotent: a second run checks stamps and a `require` and returns in well
# under a second. scripts/test calls it before `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CAIRN_CLIENTS_VENV:-target/clients-venv}"
reqs="tests/clients/requirements.txt"
stamp="$venv/.requirements.sha256"

need_pkgs=()
# Sidekiq comes from Debian: its 6.4 is what issue 21 names.
ruby -e 'require "sidekiq"; require "redis"' >/dev/null 2>&1 || need_pkgs+=(ruby-sidekiq ruby-redis)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_pkgs+=(python3-venv)
# BullMQ's pins need Node.js 18 or later, which Debian 12's nodejs is.
command -v node >/dev/null 2>&1 || need_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || need_pkgs+=(npm)
# rq's suite runs in a private network namespace: unshare (util-linux) and ip.
command -v unshare >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
# branch cluster: twemproxy (Debian's nutcracker) for tests/twemproxy.rs.
command -v nutcracker >/dev/null 2>&1 || need_pkgs+=(nutcracker)
# branch sentinel: Debian's redis-sentinel (7.0) for tests/sentinel.rs.
command -v redis-sentinel >/dev/null 2>&1 || need_pkgs+=(redis-sentinel)
# branch benchtier: mkfs.xfs (Debian's xfsprogs) for scripts/bench_fs.sh's
# XFS file system (E2, issue 25).
{ command -v mkfs.xfs || [ -x /usr/sbin/mkfs.xfs ] || [ -x /sbin/mkfs.xfs ]; } >/dev/null 2>&1 || need_pkgs+=(xfsprogs)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "==> installing ${need_pkgs[*]} (Debian packages)"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# Each part is keyed on its pin file's hash, so a changed pin reinstalls it
# and an unchanged one costs one sha256sum.
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

want="$(hash_of "$reqs")"
if ! { [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }; then
  echo "==> installing the Python test clients into $venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$reqs"
  echo "$want" >"$stamp"
fi

# python-rq's sdist: downloaded, not installed (its tests/ run against the
# venv's rq of the same version, which the pins keep equal).
rq_pins="tests/clients/rq-sdist.txt"
rq_src="${CAIRN_CLIENTS_RQ_SRC:-target/rq-src}"
rq_version="$(sed -n 's/^rq==\([^ ]*\).*/\1/p' "$rq_pins")"
if ! grep -qx "rq==$rq_version" "$reqs"; then
  echo "$rq_pins pins rq==$rq_version but $reqs does not: keep them equal" >&2
  exit 1
fi
want="$(hash_of "$rq_pins")"
if [ "$(cat "$rq_src/.stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$rq_src/rq-$rq_version/tests" ]; then
  echo "==> downloading python-rq $rq_version's source distribution into $rq_src"
  rm -rf "$rq_src"
  mkdir -p "$rq_src"
  "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    --no-binary :all: --require-hashes -r "$rq_pins" -d "$rq_src"
  tar -xzf "$rq_src/rq-$rq_version.tar.gz" -C "$rq_src"
  echo "$want" >"$rq_src/.stamp"
fi

# BullMQ: npm ci into a copy of the package files under target/, so the
# source tree gets no node_modules; the test finds it through NODE_PATH.
node_dir="${CAIRN_CLIENTS_NODE:-target/clients-node}"
node_pins=(tests/clients/bullmq/package.json tests/clients/bullmq/package-lock.json)
want="$(hash_of "${node_pins[@]}")"
if [ "$(cat "$node_dir/.stamp" 2>/dev/null)" != "$want" ] || [ ! -d "$node_dir/node_modules/bullmq" ]; then
  echo "==> installing BullMQ into $node_dir"
  mkdir -p "$node_dir"
  cp "${node_pins[@]}" "$node_dir/"
  # --ignore-scripts: the one install script (msgpackr-extract's) would only
  # look for a prebuilt addon that msgpackr can do without.
  (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" >"$node_dir/.stamp"
fi

# branch sentinel2: Redis 7.0.15's own Sentinel test suite
# (tests/redis_sentinel_suite.rs, scripts/redis_sentinel_tests.sh) needs
# tclsh, and Redis's source from Debian's package pool in a cache dir
# (scripts/redis_src.sh; never in the repository). A failed fetch only
# warns: the test then skips and says so.
if ! command -v tclsh >/dev/null 2>&1; then
  echo "==> installing tcl (Debian package)"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq tcl >/dev/null
fi
scripts/redis_src.sh >/dev/null ||
  echo "==> warning: Redis's source could not be fetched; tests/redis_sentinel_suite.rs will skip" >&2
