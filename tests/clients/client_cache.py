"""redis-py's RESP3 client-side caching against a Redis-compatible server
(issue 22): `Redis(protocol=3, cache_config=CacheConfig())` turns on
CLIENT TRACKING and keeps replies of read commands in a local cache that the
server's invalidation pushes clear. Checked here from the server's side:
INFO commandstats counts the GETs that really arrived.

- a second read of a key is served locally (no GET reaches the server);
- a write from another connection invalidates it: the next read goes to the
  server and sees the new value;
- FLUSHALL empties the local cache (an invalidation with a null key list);
- a key that expires on the server is invalidated by the expiry itself.

An invalidation push travels separately from the writer's reply, so it may
arrive a moment after the writer saw OK; each check waits for it (bounded)
and counts the reads that hit the server meanwhile, which must be none.

Usage: python client_cache.py redis://127.0.0.1:PORT/0. Exits 0 when every
check passed, 1 with a message otherwise.
"""

import sys
import time
from urllib.parse import urlparse

import redis
from redis.cache import CacheConfig
from redis.connection import CacheProxyConnection

# How long an invalidation may take to reach the caching client.
PUSH_WAIT_S = 3.0


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    url = urlparse(sys.argv[1])
    addr = dict(host=url.hostname, port=url.port, db=int(url.path.lstrip("/") or 0))

    # redis-py refuses client-side caching unless the server says it is Redis
    # 7.4 or later ("to maximize compatibility with all Redis products"). What
    # it uses - HELLO 3, CLIENT TRACKING ON and `invalidate` pushes - is Redis
    # 6.0's protocol, which the reference 7.0 and Cairn (a 7.0) both speak, so
    # the gate is lowered to the oldest version these checks are run against.
    CacheProxyConnection.MIN_ALLOWED_VERSION = "7.0.0"

    cached = redis.Redis(**addr, protocol=3, cache_config=CacheConfig(), decode_responses=True)
    # The writer and the observer: a plain RESP2 connection, no cache.
    other = redis.Redis(**addr, decode_responses=True)
    cache = cached.get_cache()
    check(cache is not None, "Redis(cache_config=...) made no cache")

    def server_gets():
        stats = other.info("commandstats").get("cmdstat_get", {})
        return int(stats.get("calls", 0))

    def read(key, expect, why):
        """Reads `key` once; returns True if the GET reached the server."""
        before = server_gets()
        got = cached.get(key)
        check(got == expect, f"{why}: GET {key} gave {got!r}, expected {expect!r}")
        return server_gets() > before

    def read_until(key, fresh, stale, why):
        """Reads until the value is `fresh`; a `stale` one meanwhile must
        come from the local cache. Returns (seconds waited, stale reads)."""
        t0 = time.monotonic()
        stale_reads = 0
        while True:
            before = server_gets()
            got = cached.get(key)
            went_to_server = server_gets() > before
            if got == fresh:
                check(went_to_server, f"{why}: the fresh value of {key} did not come from the server")
                return time.monotonic() - t0, stale_reads
            check(got == stale, f"{why}: GET {key} gave {got!r}, expected {stale!r} or {fresh!r}")
            check(not went_to_server,
                  f"{why}: the server answered GET {key} with the old value {got!r}: "
                  "it was not invalidated, or was read back before the write")
            stale_reads += 1
            if time.monotonic() - t0 > PUSH_WAIT_S:
                fail(f"{why}: no invalidation of {key} within {PUSH_WAIT_S} s ({stale_reads} cached reads)")
            time.sleep(0.01)

    # The connection really tracks: CLIENT TRACKING ON was accepted.
    info = cached.execute_command("CLIENT", "TRACKINGINFO")
    flags = info.get("flags") if isinstance(info, dict) else None
    check(flags is not None and "on" in flags, f"CLIENT TRACKINGINFO of the caching connection: {info!r}")

    # 1. Served from the local cache the second time.
    other.set("k", "v1")
    check(read("k", "v1", "first read"), "the first read of k did not reach the server")
    for i in range(3):
        check(not read("k", "v1", "cached read"), f"cached read {i + 1} of k reached the server")
    check(cache.size >= 1, f"local cache holds {cache.size} entries after a read")
    print("ok: a repeated GET is served from the local cache", flush=True)

    # 2. A write from another connection invalidates it.
    other.set("k", "v2")
    waited, stale = read_until("k", "v2", "v1", "after SET from another connection")
    check(not read("k", "v2", "cached again"), "the new value of k was not cached again")
    print(f"ok: SET from another connection invalidated k ({waited * 1000:.0f} ms, {stale} cached reads before)", flush=True)

    # Other writes invalidate too: a hash read by HGETALL, changed by HINCRBY.
    other.hset("h", mapping={"a": "1", "b": "2"})
    check(cached.hgetall("h") == {"a": "1", "b": "2"}, "HGETALL h")
    hgetalls = lambda: int(other.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0))  # noqa: E731
    n = hgetalls()
    check(cached.hgetall("h") == {"a": "1", "b": "2"} and hgetalls() == n, "second HGETALL h reached the server")
    other.hincrby("h", "a", 5)
    t0 = time.monotonic()
    while cached.hgetall("h") != {"a": "6", "b": "2"}:
        check(time.monotonic() - t0 < PUSH_WAIT_S, "HINCRBY from another connection did not invalidate h")
        time.sleep(0.01)
    print("ok: HINCRBY from another connection invalidated a cached HGETALL", flush=True)

    # 3. FLUSHALL empties the local cache.
    other.set("f1", "x")
    other.set("f2", "y")
    read("f1", "x", "before FLUSHALL")
    read("f2", "y", "before FLUSHALL")
    check(not read("f1", "x", "cached before FLUSHALL"), "f1 was not cached")
    other.flushall()
    t0 = time.monotonic()
    while True:
        # Any command lets redis-py process the pushes waiting on its socket;
        # PING is not cacheable, so it always goes to the server.
        cached.ping()
        if cache.size == 0:
            break
        check(time.monotonic() - t0 < PUSH_WAIT_S,
              f"FLUSHALL from another connection left {cache.size} entries in the local cache")
        time.sleep(0.01)
    check(read("f1", None, "after FLUSHALL"), "the read after FLUSHALL did not reach the server")
    print("ok: FLUSHALL emptied the local cache", flush=True)

    # 4. Expiry invalidates: nothing but the server's own expiry touches `e`.
    ttl_ms = 300
    # Taken before the SET, so the server's TTL cannot start earlier.
    set_at = time.monotonic()
    other.set("e", "short-lived", px=ttl_ms)
    read("e", "short-lived", "before expiry")
    check(not read("e", "short-lived", "cached before expiry"), "e was not cached")
    waited, stale = read_until("e", None, "short-lived", "after expiry")
    lived = time.monotonic() - set_at
    check(lived * 1000 >= ttl_ms - 5, f"e was invalidated after {lived * 1000:.0f} ms, before its {ttl_ms} ms TTL")
    print(f"ok: expiry invalidated e {lived * 1000:.0f} ms after SET PX {ttl_ms} ({stale} cached reads before)", flush=True)

    cached.close()
    other.close()
    print("all client-side caching checks passed", flush=True)


if __name__ == "__main__":
    main()
