"""dramatiq on Redis against the server at argv[1]: a `dramatiq` worker
process runs an actor, a delayed message and a failing actor; results come
back through the Redis results backend. Exits non-zero on any failure.
"""
import os
import sys

URL = sys.argv[1]
os.environ["CAIRN_CLIENTS_URL"] = URL

import worker  # noqa: E402
from dramatiq.results import ResultFailure, ResultTimeout  # noqa: E402
from dramatiq_tasks import fail, multiply  # noqa: E402

TIMEOUT = 30


def result(message):
    def poll():
        try:
            return True, message.get_result(block=True, timeout=500)
        except ResultTimeout:
            return False, None
    return worker.wait_for(proc, poll, TIMEOUT, "message %s" % message.message_id)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


argv = [sys.executable, "-m", "dramatiq", "dramatiq_tasks", "--processes", "1", "--threads", "2"]
with worker.running(argv) as proc:
    now = multiply.send(6, 7)
    later = multiply.send_with_options(args=(3, 5), delay=500)
    check(result(now) == 42, "an actor ran in the worker")
    check(result(later) == 15, "a delayed message ran")
    many = [multiply.send(i, 2) for i in range(5)]
    check([result(m) for m in many] == [0, 2, 4, 6, 8],
          "five messages, each result back")
    failed = fail.send("boom")
    try:
        result(failed)
    except ResultFailure as e:
        check("boom" in str(e), "a failing actor's error came back (%s)" % e)
    else:
        raise AssertionError("a failing actor returned a result")

print("dramatiq_check: all checks passed")
