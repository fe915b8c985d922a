"""redis-py's cluster client (RedisCluster) against a server in cluster mode
(issue 24, item 5a): crates/server/tests/cluster.rs runs it against Cairn
started with `cluster-enabled yes`, a one-node cluster that owns every slot.

It discovers the topology (CLUSTER SLOTS), spreads single-key commands over
many slots, runs a cluster pipeline, hash-tagged multi-key commands, a
script with declared keys, redis-py's own cross-slot helpers, and checks
that a multi-key command across slots sent straight to the node gets
CROSSSLOT. Usage: cluster_check.py redis://HOST:PORT. Exits 0 when every
check passed, else prints each failure and exits 1.
"""

import sys
from urllib.parse import urlparse

from redis.cluster import RedisCluster
from redis.exceptions import ClusterCrossSlotError

failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def main():
    url = urlparse(sys.argv[1])
    rc = RedisCluster(host=url.hostname, port=url.port, decode_responses=True)

    nodes = rc.get_nodes()
    check("nodes discovered", len(nodes), 1)
    check("the node's port", nodes[0].port, url.port)
    check("primaries", len(rc.get_primaries()), 1)
    check("cluster_state", rc.cluster_info()["cluster_state"], "ok")
    check("keyslot matches the client's", rc.cluster_keyslot("foo"), rc.keyslot("foo"))

    # Single-key commands over many slots.
    for i in range(300):
        rc.set(f"key:{i}", i)
    check("gets", [rc.get(f"key:{i}") for i in range(300)], [str(i) for i in range(300)])
    slots = {rc.keyslot(f"key:{i}") for i in range(300)}
    check("keys spread over slots", len(slots) > 250, True)
    total = sum(rc.cluster_countkeysinslot(s) for s in slots)
    check("COUNTKEYSINSLOT over the keys' slots", total, 300)

    # A cluster pipeline: redis-py groups its commands by node.
    pipe = rc.pipeline()
    for i in range(100):
        pipe.incr(f"ctr:{i}")
        pipe.incrby(f"ctr:{i}", 2)
    check("pipeline", pipe.execute(), [v for _ in range(100) for v in (1, 3)])

    # Hash tags keep related keys in one slot, so multi-key commands work.
    check("mset tagged", rc.mset({"{user1}:name": "ann", "{user1}:mail": "a@x"}), True)
    check("mget tagged", rc.mget("{user1}:name", "{user1}:mail"), ["ann", "a@x"])
    rc.sadd("{user1}:a", "x", "y")
    rc.sadd("{user1}:b", "y", "z")
    check("sinter tagged", rc.sinter("{user1}:a", "{user1}:b"), {"y"})
    check("rename tagged", rc.rename("{user1}:name", "{user1}:first"), True)
    check("getkeysinslot", sorted(rc.cluster_get_keys_in_slot(rc.keyslot("{user1}"), 10)),
          ["{user1}:a", "{user1}:b", "{user1}:first", "{user1}:mail"])

    # redis-py splits these by slot itself.
    check("mget_nonatomic", rc.mget_nonatomic(["key:1", "key:2", "nokey"]), ["1", "2", None])
    rc.mset_nonatomic({"a": "1", "b": "2", "c": "3"})
    check("mset_nonatomic", rc.mget_nonatomic(["a", "b", "c"]), ["1", "2", "3"])

    # A script with its keys declared.
    got = rc.eval("return redis.call('get', KEYS[1]) .. redis.call('get', KEYS[2])",
                  2, "{user1}:first", "{user1}:mail")
    check("eval tagged", got, "anna@x")

    # Across slots, sent to the node without the client's own check.
    try:
        rc.execute_command("MSET", "a", "1", "b", "2", target_nodes=rc.get_primaries())
        failures.append("MSET across slots: no error")
    except ClusterCrossSlotError as e:
        check("CROSSSLOT text", str(e), "Keys in request don't hash to the same slot")

    check("dbsize", rc.dbsize(), 300 + 100 + 4 + 3)

    if failures:
        for f in failures:
            print("FAIL", f)
        sys.exit(1)
    print("ok: redis-py RedisCluster")


main()
