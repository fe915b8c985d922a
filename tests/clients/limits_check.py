"""The `limits` rate limiter's Redis strategies against the server at argv[1].

Moving window, fixed window and sliding window counter are Lua scripts
(EVALSHA, reloaded on NOSCRIPT); each must admit exactly its limit, refuse the
next hit, keep identifiers apart, and admit again once the window has passed.
Exits non-zero on any failure.
"""
import sys
import time

import redis
from limits import RateLimitItemPerMinute, RateLimitItemPerSecond, storage, strategies

URL = sys.argv[1]
store = storage.storage_from_string(URL)
raw = redis.Redis.from_url(URL)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


check(store.check(), "storage reachable")


def limits_exactly(name, limiter, per_minute, per_second):
    # `limit` hits pass, the next is refused, another identifier is separate.
    for i in range(5):
        check(limiter.hit(per_minute, name, "alice"), "%s: hit %d of 5 admitted" % (name, i + 1))
    check(not limiter.hit(per_minute, name, "alice"), "%s: hit 6 of 5 refused" % name)
    check(not limiter.test(per_minute, name, "alice"), "%s: test() says refused" % name)
    stats = limiter.get_window_stats(per_minute, name, "alice")
    check(stats.remaining == 0, "%s: nothing remaining (%r)" % (name, stats))
    check(stats.reset_time > time.time() - 1, "%s: reset time ahead (%r)" % (name, stats))
    check(limiter.hit(per_minute, name, "bob"), "%s: another identifier is separate" % name)
    check(limiter.get_window_stats(per_minute, name, "bob").remaining == 4,
          "%s: bob has 4 remaining" % name)
    # cost > 1 counts as several hits (whether a refused hit still counts
    # differs between strategies, so nothing is asked after the refusal).
    check(limiter.hit(per_minute, name, "carol", cost=3), "%s: cost 3 of 5 admitted" % name)
    check(limiter.get_window_stats(per_minute, name, "carol").remaining == 2,
          "%s: cost 3 leaves 2" % name)
    check(not limiter.hit(per_minute, name, "carol", cost=3), "%s: cost 3 more refused" % name)
    # The window passes: per second, 2 hits, refused, admitted again later.
    check(limiter.hit(per_second, name, "dave") and limiter.hit(per_second, name, "dave"),
          "%s: 2 of 2 per second admitted" % name)
    check(not limiter.hit(per_second, name, "dave"), "%s: third hit in the second refused" % name)
    deadline = time.time() + 5
    while not limiter.test(per_second, name, "dave"):
        if time.time() > deadline:
            raise AssertionError("%s: still refused 5 s later" % name)
        time.sleep(0.1)
    check(limiter.hit(per_second, name, "dave"), "%s: admitted again once the window passed" % name)
    limiter.clear(per_minute, name, "alice")
    check(limiter.hit(per_minute, name, "alice"), "%s: admitted after clear()" % name)


limits_exactly("moving", strategies.MovingWindowRateLimiter(store),
               RateLimitItemPerMinute(5), RateLimitItemPerSecond(2))
limits_exactly("fixed", strategies.FixedWindowRateLimiter(store),
               RateLimitItemPerMinute(5), RateLimitItemPerSecond(2))
limits_exactly("sliding", strategies.SlidingWindowCounterRateLimiter(store),
               RateLimitItemPerMinute(5), RateLimitItemPerSecond(2))

# Fixed-window counters expire with their window (the INCR+EXPIRE script).
keys = [k for k in raw.scan_iter("LIMITS:*")]
check(keys, "limits wrote its keys under LIMITS:")
check(all(raw.pttl(k) != -1 for k in keys if raw.type(k) == b"string"),
      "every counter key has a ttl")
check(store.reset() is not None, "reset() (a script deleting LIMITS:*) ran")
check(not list(raw.scan_iter("LIMITS:*")), "reset() removed every key")

print("limits_check: all checks passed")
