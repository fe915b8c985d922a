#!/usr/bin/env python3
"""Generate crates/server/src/exec/meta_data.rs from a real Redis server.

Cairn answers COMMAND, COMMAND INFO and COMMAND DOCS with the same bytes
Redis 7.0 sends. Rather than transcribing that metadata by hand, this script
asks a real redis-server for it over RESP3 (where sets, maps, status and bulk
strings are all distinguishable) and writes the reply trees out as Rust
statics that `crates/server/src/exec/meta.rs` renders in RESP2 or RESP3.

Usage:
    python3 tools/gen_command_meta.py                # start a private redis-server
    python3 tools/gen_command_meta.py --port 6379    # use a running server instead

Python 3 standard library only.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# Redis version the data must come from. The generator refuses any other
# server unless --any-version is given.
EXPECTED_REDIS_VERSION = "7.0.15"

# Cairn's command set. A bare name is a plain command; a tuple is a container
# command with the subcommands Cairn implements. Only those subcommands are kept
# in the container's own INFO/DOCS entry, and each one gets an entry of its own
# named "parent|sub".
COMMANDS = [
    # strings
    "get", "set", "setnx", "setex", "psetex", "getset", "getdel", "getex",
    "mget", "mset", "msetnx", "append", "strlen", "getrange", "setrange",
    "substr", "incr", "decr", "incrby", "decrby", "incrbyfloat", "lcs",
    # keyspace
    "del", "unlink", "exists", "type", "expire", "pexpire", "expireat",
    "pexpireat", "ttl", "pttl", "expiretime", "pexpiretime", "persist",
    "rename", "renamenx", "keys", "scan", "randomkey", "dbsize", "flushdb",
    "flushall", "select", "swapdb", "move", "copy", "touch",
    ("object", ["encoding", "freq", "idletime", "refcount", "help"]),
    # hashes
    "hset", "hsetnx", "hget", "hmset", "hmget", "hgetall", "hdel", "hlen",
    "hexists", "hkeys", "hvals", "hincrby", "hincrbyfloat", "hstrlen",
    "hrandfield", "hscan",
    # lists
    "lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "llen", "lrange",
    "lindex", "lset", "linsert", "lrem", "ltrim", "lpos", "lmove",
    "rpoplpush", "lmpop", "blpop", "brpop", "blmove", "brpoplpush", "blmpop",
    # sets
    "sadd", "srem", "smembers", "sismember", "smismember", "scard", "spop",
    "srandmember", "smove", "sinter", "sintercard", "sinterstore", "sunion",
    "sunionstore", "sdiff", "sdiffstore", "sscan",
    # sorted sets
    "zadd", "zincrby", "zrem", "zcard", "zcount", "zlexcount", "zscore",
    "zmscore", "zrank", "zrevrank", "zrange", "zrangestore", "zrangebyscore",
    "zrevrangebyscore", "zrangebylex", "zrevrangebylex", "zrevrange",
    "zpopmin", "zpopmax", "zmpop", "bzpopmin", "bzpopmax", "bzmpop",
    "zrandmember", "zremrangebyrank", "zremrangebyscore", "zremrangebylex",
    "zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore",
    "zintercard", "zscan",
    # bitmaps and HyperLogLog
    "setbit", "getbit", "bitcount", "bitpos", "bitop", "bitfield",
    "bitfield_ro", "pfadd", "pfcount", "pfmerge", "pfdebug", "pfselftest",
    # sort
    "sort", "sort_ro",
    # transactions
    "multi", "exec", "discard", "watch", "unwatch",
    # pub/sub
    "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "publish",
    ("pubsub", ["channels", "numsub", "numpat", "shardchannels",
                "shardnumsub", "help"]),
    "ssubscribe", "sunsubscribe", "spublish",
    # connection and server
    "ping", "echo", "hello", "auth", "quit", "reset",
    ("client", ["id", "setname", "getname", "list", "info", "kill", "pause",
                "unpause", "reply", "no-evict", "unblock", "tracking",
                "caching", "trackinginfo", "getredir", "help"]),
    ("command", ["count", "info", "docs", "list", "getkeys",
                 "getkeysandflags", "help"]),
    "info",
    ("config", ["get", "set", "resetstat", "rewrite", "help"]),
    "time", "shutdown", "debug",
    ("slowlog", ["get", "len", "reset", "help"]),
    "monitor",
    # memory
    ("memory", ["usage", "stats", "doctor", "malloc-stats", "purge", "help"]),
    # persistence
    "save", "bgsave", "lastsave", "bgrewriteaof",
    # scripting and functions
    "eval", "evalsha", "eval_ro", "evalsha_ro",
    ("script", ["load", "exists", "flush", "kill", "debug", "help"]),
    "fcall", "fcall_ro",
    ("function", ["load", "delete", "list", "dump", "restore", "flush",
                  "kill", "stats", "help"]),
    # ACL (issue 23)
    ("acl", ["cat", "deluser", "dryrun", "genpass", "getuser", "list", "load",
             "log", "save", "setuser", "users", "whoami", "help"]),
    # the rest of Redis 7.0 (issue 22)
    "wait", "role", "readonly", "readwrite", "asking", "lolwut",
    ("latency", ["latest", "history", "reset", "doctor", "graph", "help", "histogram"]),
    # geo (issue 22)
    "geoadd", "geodist", "geohash", "geopos", "georadius", "georadius_ro",
    "georadiusbymember", "georadiusbymember_ro", "geosearch",
    "geosearchstore",
    # dump (issue 22)
    "dump", "restore", "restore-asking", "migrate",
    # streams (issue 22)
    "xadd", "xrange", "xrevrange", "xlen", "xdel", "xtrim", "xsetid",
    "xread", "xreadgroup", "xack", "xpending", "xclaim", "xautoclaim",
    ("xgroup", ["create", "setid", "destroy", "createconsumer",
                "delconsumer", "help"]),
    ("xinfo", ["stream", "groups", "consumers", "help"]),
    # cluster mode (branch cluster, issue 24)
    ("cluster", ["addslots", "addslotsrange", "bumpepoch",
                 "count-failure-reports", "countkeysinslot", "delslots",
                 "delslotsrange", "failover", "flushslots", "forget",
                 "getkeysinslot", "help", "info", "keyslot", "links", "meet",
                 "myid", "nodes", "replicas", "replicate", "reset",
                 "saveconfig", "set-config-epoch", "setslot", "shards",
                 "slaves", "slots"]),
    # repl (issue 24): master side
    "psync", "sync", "replconf",
    # replica (issue 24): replica side
    "replicaof", "slaveof",
    # sentinel (issue 24)
    "failover",
]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "crates", "server", "src", "exec", "meta_data.rs")
MAX_WIDTH = 100


# --------------------------------------------------------------------------
# Reply trees. Mirrors the Rust `M` enum one to one.

class Node:
    __slots__ = ("kind", "value")

    def __init__(self, kind, value):
        # kind: "bulk" | "simple" | "int" | "null" | "arr" | "set" | "map"
        self.kind = kind
        # str for bulk/simple, int for int, None for null,
        # list[Node] for arr/set, list[(Node, Node)] for map
        self.value = value

    def __repr__(self):
        return "Node(%s, %r)" % (self.kind, self.value)

    def s(self):
        """The text of a string node."""
        if self.kind not in ("bulk", "simple"):
            raise ValueError("not a string node: %r" % (self,))
        return self.value

    def map_get(self, key):
        assert self.kind == "map"
        for k, v in self.value:
            if k.kind in ("bulk", "simple") and k.value == key:
                return v
        return None


# --------------------------------------------------------------------------
# A minimal RESP3 client.

class RedisError(Exception):
    pass


class Conn:
    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"$":
            n = int(rest)
            if n < 0:
                return Node("null", None)
            return Node("bulk", self._exact(n).decode("utf-8"))
        if t == b"+":
            return Node("simple", rest.decode("utf-8"))
        if t == b":":
            return Node("int", int(rest))
        if t == b"_":
            return Node("null", None)
        if t in (b"*", b"~"):
            n = int(rest)
            if n < 0:
                return Node("null", None)
            return Node("arr" if t == b"*" else "set", [self.read() for _ in range(n)])
        if t == b"%":
            n = int(rest)
            return Node("map", [(self.read(), self.read()) for _ in range(n)])
        if t == b"-":
            raise RedisError(rest.decode("utf-8", "replace"))
        # Doubles, booleans, verbatim strings, attributes, pushes and big numbers
        # never occur in COMMAND replies; the Rust tree has no variant for them.
        raise ValueError("unsupported RESP3 type %r in reply" % (line[:40],))

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a.encode("utf-8") if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self.read()


# --------------------------------------------------------------------------
# Running a private redis-server.

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(binary):
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="gen_command_meta.")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--daemonize", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port, workdir
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                stop_server(proc, workdir)
                sys.exit("could not start %s on port %d" % (binary, port))
            time.sleep(0.05)


def stop_server(proc, workdir):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------
# Collecting the metadata.

def info_entry(conn, name):
    reply = conn.call("COMMAND", "INFO", name)
    if reply.kind != "arr" or len(reply.value) != 1 or reply.value[0].kind != "arr":
        raise ValueError("COMMAND INFO %s: unexpected reply %r" % (name, reply))
    entry = reply.value[0]
    if len(entry.value) != 10 or entry.value[0].s() != name:
        raise ValueError("COMMAND INFO %s: unexpected entry %r" % (name, entry))
    return entry


def docs_entry(conn, name):
    reply = conn.call("COMMAND", "DOCS", name)
    if reply.kind != "map" or len(reply.value) != 1:
        raise ValueError("COMMAND DOCS %s: unknown command (reply %r)" % (name, reply))
    key, docs = reply.value[0]
    if key.s() != name or docs.kind != "map":
        raise ValueError("COMMAND DOCS %s: unexpected reply %r" % (name, reply))
    return docs


# Redis lists a container's subcommands in the iteration order of a hash table
# with a per-process random seed, so that order means nothing and changes from
# one server start to the next. Keep the data reproducible: sort by name.

def keep_subcommands_info(entry, parent, subs):
    """Drop the subcommands Cairn does not implement from an INFO entry."""
    wanted = {"%s|%s" % (parent, s) for s in subs}
    node = entry.value[9]
    kept = sorted((e for e in node.value if e.value[0].s() in wanted),
                  key=lambda e: e.value[0].s().encode("utf-8"))
    missing = wanted - {e.value[0].s() for e in kept}
    if missing:
        raise ValueError("COMMAND INFO %s lacks %s" % (parent, sorted(missing)))
    entry.value[9] = Node(node.kind, kept)


def keep_subcommands_docs(docs, parent, subs):
    """Drop the subcommands Cairn does not implement from a DOCS entry."""
    wanted = {"%s|%s" % (parent, s) for s in subs}
    node = docs.map_get("subcommands")
    if node is None:
        raise ValueError("COMMAND DOCS %s has no subcommands" % parent)
    kept = sorted(((k, v) for k, v in node.value if k.s() in wanted),
                  key=lambda kv: kv[0].s().encode("utf-8"))
    missing = wanted - {k.s() for k, _ in kept}
    if missing:
        raise ValueError("COMMAND DOCS %s lacks %s" % (parent, sorted(missing)))
    node.value[:] = kept


def collect(conn):
    entries = []  # (name, info Node, docs Node)
    for item in COMMANDS:
        if isinstance(item, tuple):
            parent, subs = item
            info = info_entry(conn, parent)
            docs = docs_entry(conn, parent)
            keep_subcommands_info(info, parent, subs)
            keep_subcommands_docs(docs, parent, subs)
            entries.append((parent, info, docs))
            for sub in subs:
                full = "%s|%s" % (parent, sub)
                entries.append((full, info_entry(conn, full), docs_entry(conn, full)))
        else:
            entries.append((item, info_entry(conn, item), docs_entry(conn, item)))
    names = [e[0] for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("duplicate command names in COMMANDS")
    entries.sort(key=lambda e: e[0].encode("utf-8"))
    return entries


def collect_all_names(conn):
    """Every command and subcommand the server has (COMMAND LIST), sorted,
    with its docs group: the README lists the ones Cairn lacks."""
    names = sorted(n.s() for n in conn.call("COMMAND", "LIST").value)
    out = []
    for name in names:
        group = docs_entry(conn, name).map_get("group")
        out.append((name, group.s() if group is not None else ""))
    return out


# --------------------------------------------------------------------------
# Rust output.

def rust_str(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F:
            out.append("\\u{%x}" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def flat(n):
    """A node as one line of Rust."""
    k = n.kind
    if k == "bulk":
        return "Bulk(%s)" % rust_str(n.value)
    if k == "simple":
        return "Simple(%s)" % rust_str(n.value)
    if k == "int":
        return "Int(%d)" % n.value
    if k == "null":
        return "Null"
    if k in ("arr", "set"):
        ctor = "Arr" if k == "arr" else "Set"
        return "%s(&[%s])" % (ctor, ", ".join(flat(c) for c in n.value))
    if k == "map":
        return "Map(&[%s])" % ", ".join("(%s, %s)" % (flat(a), flat(b)) for a, b in n.value)
    raise ValueError(k)


def pretty(n, indent, lead, trail, lines):
    """Append `lead + node + trail` at `indent`, breaking it over lines when it
    does not fit in MAX_WIDTH columns."""
    pad = " " * indent
    one = pad + lead + flat(n) + trail
    if len(one) <= MAX_WIDTH or n.kind not in ("arr", "set", "map") or not n.value:
        lines.append(one)
        return
    ctor = {"arr": "Arr", "set": "Set", "map": "Map"}[n.kind]
    lines.append("%s%s%s(&[" % (pad, lead, ctor))
    if n.kind == "map":
        for a, b in n.value:
            pair = "%s(%s, %s)," % (" " * (indent + 4), flat(a), flat(b))
            if len(pair) <= MAX_WIDTH:
                lines.append(pair)
            else:
                lines.append(" " * (indent + 4) + "(")
                pretty(a, indent + 8, "", ",", lines)
                pretty(b, indent + 8, "", ",", lines)
                lines.append(" " * (indent + 4) + "),")
    else:
        for c in n.value:
            pretty(c, indent + 4, "", ",", lines)
    lines.append("%s])%s" % (pad, trail))


def str_list(node):
    return "&[%s]" % ", ".join(rust_str(c.s()) for c in node.value)


def render_rust(entries, all_names, version, command_line):
    lines = [
        "// @generated by `%s`" % command_line,
        "// from Redis %s (COMMAND INFO / COMMAND DOCS over RESP3). Do not edit;" % version,
        "// edit tools/gen_command_meta.py and regenerate instead.",
        "",
        "use super::CommandMeta;",
        USE_PLACEHOLDER,
        "",
        "/// The Redis version the metadata below was read from.",
        "pub const REDIS_VERSION: &str = %s;" % rust_str(version),
        "",
        "/// Every command Cairn knows, sorted by name (subcommands as \"parent|sub\").",
        "#[rustfmt::skip]",
        "pub(super) static COMMANDS: &[CommandMeta] = &[",
    ]
    for name, info, docs in entries:
        v = info.value
        lines.append("    CommandMeta {")
        lines.append("        name: %s," % rust_str(name))
        lines.append("        arity: %d," % v[1].value)
        lines.append("        flags: %s," % str_list(v[2]))
        lines.append("        first_key: %d," % v[3].value)
        lines.append("        last_key: %d," % v[4].value)
        lines.append("        step: %d," % v[5].value)
        lines.append("        acl_categories: %s," % str_list(v[6]))
        pretty(info, 8, "info: ", ",", lines)
        pretty(docs, 8, "docs: ", ",", lines)
        lines.append("    },")
    lines.append("];")
    lines.append("")
    lines.append("/// Every command and subcommand of Redis %s (its `COMMAND LIST`), sorted," % version)
    lines.append("/// with its docs group: what Cairn lacks is listed in the README.")
    lines.append("#[rustfmt::skip]")
    lines.append("#[cfg_attr(not(test), allow(dead_code))]")
    lines.append("pub(super) static REDIS_COMMANDS: &[(&str, &str)] = &[")
    for name, group in all_names:
        lines.append("    (%s, %s)," % (rust_str(name), rust_str(group)))
    lines.append("];")
    # Import only the variants the data uses, so it compiles warning-free.
    used = set()
    for _, info, docs in entries:
        variants(info, used)
        variants(docs, used)
    i = lines.index(USE_PLACEHOLDER)
    lines[i] = "use super::M::{%s};" % ", ".join(sorted(used))
    return "\n".join(lines) + "\n"


USE_PLACEHOLDER = "use super::M::{...};"
VARIANT = {"bulk": "Bulk", "simple": "Simple", "int": "Int", "null": "Null",
           "arr": "Arr", "set": "Set", "map": "Map"}


def variants(n, used):
    used.add(VARIANT[n.kind])
    if n.kind in ("arr", "set"):
        for c in n.value:
            variants(c, used)
    elif n.kind == "map":
        for a, b in n.value:
            variants(a, used)
            variants(b, used)


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int,
                    help="use an already running server instead of starting one")
    ap.add_argument("--redis-server", default="redis-server",
                    help="redis-server binary to start (default: from PATH)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="output file (default: %(default)s)")
    ap.add_argument("--any-version", action="store_true",
                    help="accept a server other than Redis %s" % EXPECTED_REDIS_VERSION)
    args = ap.parse_args()

    proc = workdir = None
    port = args.port
    if port is None:
        proc, port, workdir = start_server(args.redis_server)
    try:
        conn = Conn(args.host, port)
        hello = conn.call("HELLO", "3")
        version = hello.map_get("version").s()
        if version != EXPECTED_REDIS_VERSION and not args.any_version:
            sys.exit("server is Redis %s, expected %s (use --any-version to override)"
                     % (version, EXPECTED_REDIS_VERSION))
        entries = collect(conn)
        all_names = collect_all_names(conn)
        conn.close()
    finally:
        if proc is not None:
            stop_server(proc, workdir)

    text = render_rust(entries, all_names, version, "python3 tools/gen_command_meta.py")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, args.out)
    print("wrote %d commands from Redis %s to %s"
          % (len(entries), version, os.path.relpath(args.out)))


if __name__ == "__main__":
    main()
