"""python-rq against the server at argv[1] (issue 22), the way a user meets it:
enqueue jobs, run a burst worker (a forking Worker, as `rq worker --burst`
runs), read return values, and find failures with their exception text.

rq keeps each job's results in a stream (XADD inside MULTI, read back with
XREVRANGE, XREAD BLOCK while waiting), its job state in hashes and its
registries in sorted sets, so a server that lacks streams loses results and
statuses here. Exits non-zero with a message on any failure.
"""
import os
import sys
import time

from redis import Redis
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry

import rq_tasks
import worker


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def ok(what):
    print("ok:", what, flush=True)


def main():
    url = sys.argv[1]
    conn = Redis.from_url(url)
    q = Queue("cairn-rq-check", connection=conn)

    plain = q.enqueue(rq_tasks.add, 2, 3)
    structured = q.enqueue(rq_tasks.shout, "cairn")
    kept = q.enqueue(rq_tasks.add, 20, 22, result_ttl=60)
    short = q.enqueue(rq_tasks.add, 1, 1, result_ttl=1)
    failing = q.enqueue(rq_tasks.explode, 7)
    check(plain.get_status() == JobStatus.QUEUED, f"status after enqueue: {plain.get_status()}")
    check(q.count == 5, f"queue holds {q.count} jobs, not 5")

    # The default Worker forks a work horse per job, as in production.
    w = Worker([q], connection=conn, name=f"cairn-rq-check-{os.getpid()}")
    worked = w.work(burst=True)
    check(worked, "the burst worker did no work")
    check(q.count == 0, f"{q.count} jobs left in the queue after a burst")
    ok("a burst worker ran 5 jobs")

    check(plain.get_status() == JobStatus.FINISHED, f"plain job status {plain.get_status()}")
    check(plain.return_value() == 5, f"return_value {plain.return_value()!r}")
    fetched = Job.fetch(plain.id, connection=conn)
    check(fetched.return_value() == 5, f"return_value of a fetched job {fetched.return_value()!r}")
    check(structured.return_value() == {"word": "CAIRN", "len": 5},
          f"structured return_value {structured.return_value()!r}")
    finished = FinishedJobRegistry(queue=q).get_job_ids()
    check(plain.id in finished and structured.id in finished, f"finished registry {finished}")
    ok("return values, statuses and the finished registry")

    # result_ttl bounds how long the job and its result stay: the job hash
    # expires with it (and the default is 500 s).
    check(kept.return_value() == 42, f"result_ttl=60 job's return_value {kept.return_value()!r}")
    pttl = conn.pttl(kept.key)
    check(0 < pttl <= 60_000, f"job hash of a result_ttl=60 job has PTTL {pttl}")
    default_pttl = conn.pttl(plain.key)
    check(400_000 < default_pttl <= 500_000, f"job hash of a default job has PTTL {default_pttl}")
    # A 1 s TTL may already have run out under load: only its end is checked.
    deadline = time.monotonic() + 5
    while conn.exists(short.key):
        check(time.monotonic() < deadline, "the result_ttl=1 job outlived its TTL by 4 s")
        time.sleep(0.05)
    try:
        Job.fetch(short.id, connection=conn)
        raise AssertionError("a job past its result_ttl can still be fetched")
    except NoSuchJobError:
        pass
    ok(f"result_ttl: PTTL {pttl} ms for 60 s, {default_pttl} ms by default; a 1 s job expired")

    check(failing.get_status() == JobStatus.FAILED, f"failing job status {failing.get_status()}")
    failed_ids = FailedJobRegistry(queue=q).get_job_ids()
    check(failing.id in failed_ids, f"failed registry {failed_ids} lacks {failing.id}")
    result = Job.fetch(failing.id, connection=conn).latest_result()
    check(result is not None and result.type == result.Type.FAILED, f"latest result {result!r}")
    check("ValueError: boom 7" in (result.exc_string or ""), f"exception text {result.exc_string!r}")
    check(failing.return_value() is None, "a failed job has a return value")
    ok("the failed job is in the failed registry with its exception text")

    # A client waiting for a result while a worker in another process runs
    # the job: latest_result(timeout) blocks on the result stream (XREAD BLOCK).
    waited = q.enqueue(rq_tasks.add, 100, 1)
    rq_bin = os.path.join(os.path.dirname(sys.executable), "rq")
    argv = [rq_bin, "worker", "--burst", "--url", url, "--path", os.getcwd(), q.name]
    with worker.running(argv) as proc:
        result = waited.latest_result(timeout=20)
        check(result is not None, "latest_result(timeout=20) returned nothing")
        check(result.return_value == 101, f"blocking latest_result {result.return_value!r}")
        proc.wait(20)
        check(proc.returncode == 0, f"rq worker --burst exited with {proc.returncode}")
    ok("latest_result(timeout) got the result from an `rq worker --burst` process")
    print("all rq checks passed", flush=True)


if __name__ == "__main__":
    main()
