"""Starts a worker process for a client check and stops it afterwards.

The worker's output goes to a temporary file that is printed when the check
fails, so a failure shows both sides. The process shares the check's process
group, which the Rust test kills as a whole if the check hangs.
"""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

# Lines of a failed worker's output to show: enough for the error and its
# traceback, not a minute of retries.
SHOW_LINES = 60


def wait_for(proc, poll, timeout, what):
    """Calls poll() until it returns (True, value); fails fast if the worker
    process has exited, since no result can come then."""
    deadline = time.monotonic() + timeout
    while True:
        done, value = poll()
        if done:
            return value
        if proc.poll() is not None:
            raise AssertionError("%s: the worker exited (status %s)" % (what, proc.returncode))
        if time.monotonic() > deadline:
            raise AssertionError("%s: no result within %s s" % (what, timeout))


@contextlib.contextmanager
def running(argv, env=None, stop_timeout=10):
    log = tempfile.NamedTemporaryFile(prefix="cairn-worker-", suffix=".log", delete=False)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    ok = False
    try:
        yield proc
        ok = True
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        if not ok:
            with open(log.name, errors="replace") as f:
                lines = f.readlines()
            sys.stdout.write("--- worker output (%s), last %d of %d lines:\n%s--- end\n"
                             % (" ".join(argv), min(SHOW_LINES, len(lines)), len(lines),
                                "".join(lines[-SHOW_LINES:])))
        os.unlink(log.name)
