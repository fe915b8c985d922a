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
                sys.stdout.write("--- worker output (%s):\n%s--- end of worker output\n"
                                 % (" ".join(argv), f.read()))
        os.unlink(log.name)
