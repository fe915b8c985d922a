"""Celery with its Redis broker (kombu) and result backend against the server
at argv[1]: a `celery worker` process (--pool solo) runs real tasks, on the
default queue and on an expiring one, a chord, and a failing task.
Exits non-zero on any failure.
"""
import os
import sys

URL = sys.argv[1]
os.environ["CAIRN_CLIENTS_URL"] = URL

import worker  # noqa: E402
from celery import chord  # noqa: E402
from celery.exceptions import TimeoutError as CeleryTimeout  # noqa: E402
from celery_tasks import add, app, fail, total  # noqa: E402

TIMEOUT = 30


def result(res):
    def poll():
        try:
            return True, res.get(timeout=0.5)
        except CeleryTimeout:
            return False, None
    return worker.wait_for(proc, poll, TIMEOUT, "task %s" % res.id)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


argv = [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker", "--pool", "solo",
        "--concurrency", "1", "-Q", "celery,cairn_expiring", "-n", "cairn-check@%h",
        "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
with worker.running(argv) as proc:
    check(result(add.delay(2, 3)) == 5, "a task on the default queue ran")
    check(result(add.apply_async((4, 5), queue="cairn_expiring")) == 9,
          "a task on a queue with x-expires ran")
    results = [add.delay(i, i) for i in range(5)]
    check([result(r) for r in results] == [0, 2, 4, 6, 8], "five tasks, in order")
    check(result(chord(add.s(i, 10) for i in range(4))(total.s())) == 46,
          "a chord of four tasks joined into its callback")
    failed = fail.delay("boom")
    try:
        result(failed)
    except ValueError as e:
        check(str(e) == "boom", "a failing task's exception came back")
    else:
        raise AssertionError("a failing task returned")
    check(failed.state == "FAILURE", "its state is FAILURE")
    check(app.control.ping(timeout=2.0), "the worker answers a broadcast ping")

print("celery_check: all checks passed")
