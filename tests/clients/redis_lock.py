"""redis-py's Lock against the server at argv[1] (issue 21).

Lock.release, extend and reacquire are Lua scripts run with EVALSHA, loaded
on NOSCRIPT: acquire, extend, release and reacquire one lock; a second client
blocked in acquire until the first releases; LockNotOwnedError for a client
whose lock expired and was taken by another. Exits non-zero on any failure.
"""
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

URL = sys.argv[1]
a = redis.Redis.from_url(URL, socket_timeout=10)
b = redis.Redis.from_url(URL, socket_timeout=10)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


# Lock registers its scripts once per class: clear the server's cache so the
# first release below goes through NOSCRIPT and the reload.
a.script_flush()

# --- acquire, extend, reacquire, release, reacquire.
lock = a.lock("cairn:lock:one", timeout=5)
check(lock.acquire(blocking=False), "acquire a free lock")
check(lock.owned() and lock.locked(), "owned and locked after acquire")
check(a.get("cairn:lock:one") == lock.local.token, "the key holds our token")
check(not b.lock("cairn:lock:one", timeout=5).acquire(blocking=False),
      "another client cannot take a held lock")
check(lock.extend(10), "extend adds time")
check(5000 < a.pttl("cairn:lock:one") <= 15000, "ttl is about 15 s after extend(10)")
check(lock.extend(2, replace_ttl=True), "extend with replace_ttl")
check(0 < a.pttl("cairn:lock:one") <= 2000, "ttl is at most 2 s after replace_ttl")
check(lock.reacquire(), "reacquire resets the timeout")
check(4000 < a.pttl("cairn:lock:one") <= 5000, "ttl is back to about 5 s")
lock.release()
check(a.exists("cairn:lock:one") == 0, "release deletes the key")
check(not lock.owned(), "not owned after release")
check(lock.acquire(blocking=False), "acquire again after release")
lock.release()

# --- a lock without a timeout must still release (the bug issue 21 reports).
forever = a.lock("cairn:lock:forever")
check(forever.acquire(blocking=False), "acquire a lock without timeout")
check(a.ttl("cairn:lock:forever") == -1, "a lock without timeout has no ttl")
forever.release()
check(a.exists("cairn:lock:forever") == 0, "released a lock without timeout")

# --- blocking acquire across two clients.
holder = a.lock("cairn:lock:shared", timeout=10)
check(holder.acquire(blocking=False), "client A holds the shared lock")
check(not b.lock("cairn:lock:shared", timeout=10, blocking_timeout=0.3, sleep=0.05).acquire(),
      "client B gives up after its blocking_timeout while A holds it")
# thread_local=False: the token is set in the waiting thread, read here.
waiter = b.lock("cairn:lock:shared", timeout=10, blocking_timeout=15, sleep=0.05,
                thread_local=False)
got = {}


def wait_for_lock():
    got["ok"] = waiter.acquire()
    got["at"] = time.monotonic()


t = threading.Thread(target=wait_for_lock)
started = time.monotonic()
t.start()
time.sleep(0.5)
check("ok" not in got, "client B is still waiting while A holds the lock")
released_at = time.monotonic()
holder.release()
t.join(20)
check(got.get("ok") is True, "client B acquired once A released")
check(got["at"] >= released_at and got["at"] - started >= 0.45,
      "client B acquired only after A's release (waited %.2f s)" % (got["at"] - started))
check(b.get("cairn:lock:shared") == waiter.local.token, "the key holds B's token")
waiter.release()

# --- a lock lost to expiry: its old owner gets LockNotOwnedError.
lost = a.lock("cairn:lock:lost", timeout=0.3)
check(lost.acquire(blocking=False), "A acquires with a 300 ms timeout")
time.sleep(0.6)
thief = b.lock("cairn:lock:lost", timeout=10)
check(thief.acquire(blocking=False), "B takes the expired lock")
# release last: it forgets the token, after which the others refuse locally.
for name, op in (("extend", lambda: lost.extend(5)), ("reacquire", lost.reacquire),
                 ("release", lost.release)):
    try:
        op()
    except LockNotOwnedError:
        print("ok: %s of a lost lock raises LockNotOwnedError" % name)
    else:
        raise AssertionError("%s of a lost lock did not raise LockNotOwnedError" % name)
check(b.get("cairn:lock:lost") == thief.local.token, "B still holds it after A's attempts")
thief.release()
try:
    thief.release()
except LockError:
    print("ok: releasing an unlocked lock raises LockError")
else:
    raise AssertionError("a second release did not raise")

print("redis_lock: all checks passed")
