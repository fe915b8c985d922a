#!/usr/bin/env bash
# Fetches Redis 7.0.15's source tarball from Debian's package pool (the
# `.orig.tar.gz` of bookworm's redis 7.0.15-1~deb12u*), checks its sha256,
# and unpacks it into the cache dir
# ${CAIRN_REDIS_SRC_CACHE:-$HOME/.cache/cairn/redis-src}, never into the
# repository: Cairn runs Redis's own test suites from there
# (scripts/redis_sentinel_tests.sh). Prints the unpacked tree's path.
# Idempotent: a second run finds the stamp and only prints the path.
set -euo pipefail

VERSION=7.0.15
URL="http://deb.debian.org/debian/pool/main/r/redis/redis_${VERSION}.orig.tar.gz"
SHA256=4b1dc4ee6d622a09fff9c6777191209750fb5e5a725ef78ea012d6eef4c22982
CACHE=${CAIRN_REDIS_SRC_CACHE:-$HOME/.cache/cairn/redis-src}
TREE=$CACHE/redis-$VERSION

die() { echo "redis_src.sh: $*" >&2; exit 1; }

# The stamp holds the tarball's hash: written last, so an interrupted
# unpack is redone.
if [ "$(cat "$TREE/.cairn-stamp" 2>/dev/null)" = "$SHA256" ] && [ -f "$TREE/tests/instances.tcl" ]; then
    echo "$TREE"
    exit 0
fi

mkdir -p "$CACHE"
tarball=$CACHE/redis_${VERSION}.orig.tar.gz
if ! echo "$SHA256  $tarball" | sha256sum -c --status 2>/dev/null; then
    command -v curl >/dev/null || die "curl is needed to fetch $URL"
    echo "redis_src.sh: fetching $URL" >&2
    part=$tarball.part
    rm -f "$part"
    code=$(curl -sS -L --retry 3 --connect-timeout 20 -o "$part" -w '%{http_code}' "$URL") ||
        die "cannot fetch $URL (network?)"
    if [ "$code" != 200 ]; then
        rm -f "$part"
        die "$URL answered HTTP $code: Debian's pool seems to have dropped redis $VERSION's \
source (snapshot.debian.org keeps old files; update URL and SHA256 in $0), \
or set CAIRN_REDIS_SRC_CACHE to a cache that holds redis-$VERSION"
    fi
    got=$(sha256sum "$part" | cut -d' ' -f1)
    if [ "$got" != "$SHA256" ]; then
        rm -f "$part"
        die "$URL has sha256 $got, expected $SHA256: refusing it"
    fi
    mv "$part" "$tarball"
fi

rm -rf "$TREE"
tmp=$(mktemp -d "$CACHE/unpack.XXXXXX")
tar -xzf "$tarball" -C "$tmp"
[ -d "$tmp/redis-$VERSION/tests" ] || die "$tarball holds no redis-$VERSION/tests"
mv "$tmp/redis-$VERSION" "$TREE"
rmdir "$tmp"
echo "$SHA256" >"$TREE/.cairn-stamp"
echo "$TREE"
