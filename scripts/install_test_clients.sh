#!/usr/bin/env bash
# Installs the real clients that crates/server/tests/scripting_clients.rs runs
# against Cairn's scripting (issue 21):
#   - a Python virtualenv at target/clients-venv (or $CAIRN_CLIENTS_VENV) with
#     the pinned redis-py, Celery/kombu, dramatiq and limits of
#     tests/clients/requirements.txt;
#   - Debian's ruby-sidekiq (Sidekiq 6.4) and ruby-redis.
# Idempotent: a second run checks a stamp and a `require` and returns in well
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
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "==> installing ${need_pkgs[*]} (Debian packages)"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# The venv is keyed on the requirements file's hash, so a changed pin
# reinstalls and an unchanged one costs one sha256sum.
want="$(sha256sum "$reqs" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "==> installing the Python test clients into $venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$reqs"
echo "$want" >"$stamp"
