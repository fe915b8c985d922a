"""redis-py's Sentinel client against a set Redis Sentinel fails over
(issue 24, item 4): crates/server/tests/sentinel.rs runs it after each
failover of Cairn servers.

It asks the sentinels where master `m` is (discover_master), checks that is
the address the test expects, writes and reads through master_for (which
must reach a master, INFO role:master), and reads the write back through
slave_for once a replica has it. Usage: sentinel_check.py PORT,PORT,...
HOST:PORT (the sentinels, the expected master). Exits 0 when every check
passed, else prints each failure and exits 1.
"""

import sys
import time

from redis.sentinel import Sentinel

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def main():
    ports = [int(p) for p in sys.argv[1].split(",")]
    want = sys.argv[2]
    sentinel = Sentinel(
        [("127.0.0.1", p) for p in ports], socket_timeout=2, decode_responses=True
    )
    host, port = sentinel.discover_master("m")
    check("discover_master", f"{host}:{port}", want)
    master = sentinel.master_for("m", socket_timeout=2, decode_responses=True)
    check("master role", master.info("replication")["role"], "master")
    master.set("py:sentinel", want)
    check("GET through master_for", master.get("py:sentinel"), want)
    check("WAIT 1", master.execute_command("WAIT", 1, 5000) >= 1, True)
    replica = sentinel.slave_for("m", socket_timeout=2, decode_responses=True)
    check("replica role", replica.info("replication")["role"], "slave")
    got = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        got = replica.get("py:sentinel")
        if got == want:
            break
        time.sleep(0.05)
    check("GET through slave_for", got, want)
    for f in failures:
        print(f)
    if failures:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
