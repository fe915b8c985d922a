#!/usr/bin/env bash
# The encyclopedic prose of E4's real-text values (issue 25;
# crates/bench/src/corpus.rs): FOLDOC and the Jargon File as Debian ships
# them (packages dict-foldoc and dict-jargon, ~3 MB together), unpacked
# with `apt-get download` and `dpkg -x` into the cache dir
# ${CAIRN_CORPUS_DIR:-$HOME/.cache/cairn/corpus}, never into the
# repository. Not installed as packages: they depend on the dictd daemon,
# which a benchmark machine does not want running. With the packages
# installed (/usr/share/dictd/*.dict.dz) there is nothing to do.
# Prints the directory that holds them. Idempotent: a second run finds
# the files and only prints the path.
set -euo pipefail
DIR=${CAIRN_CORPUS_DIR:-$HOME/.cache/cairn/corpus}
want=(foldoc.dict.dz jargon.dict.dz)
have() { for f in "${want[@]}"; do [ -s "$1/$f" ] || return 1; done; }
if have /usr/share/dictd; then echo /usr/share/dictd; exit 0; fi
if have "$DIR"; then echo "$DIR"; exit 0; fi
command -v apt-get >/dev/null && command -v dpkg >/dev/null \
  || { echo "text_corpus.sh: needs apt-get and dpkg (Debian)" >&2; exit 1; }
mkdir -p "$DIR"
tmp=$(mktemp -d "$DIR/fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes into the current directory; as root it warns
# that the _apt user cannot write there (harmless).
( cd "$tmp" && apt-get download dict-foldoc dict-jargon >/dev/null 2>&1 ) || {
  apt-get update -qq >/dev/null 2>&1 || true
  ( cd "$tmp" && apt-get download dict-foldoc dict-jargon >/dev/null 2>&1 )
} || { echo "text_corpus.sh: apt-get download dict-foldoc dict-jargon failed" >&2; exit 1; }
for d in "$tmp"/*.deb; do dpkg -x "$d" "$tmp/x"; done
for f in "${want[@]}"; do cp "$tmp/x/usr/share/dictd/$f" "$DIR/$f"; done
# Which versions: the corpus fingerprint in a report changes with them.
( cd "$tmp" && ls ./*.deb | sed 's|^\./||' ) > "$DIR/packages.txt"
echo "$DIR"
