#!/usr/bin/env python3
"""Regenerates the golden files from a real redis-server 7.0.

usage: regen.py PORT NAME...   (reads NAME.cases, writes NAME.golden)

Each case is one Lua expression list, run as
    <show.lua> return all(pcall(function() return CASE end))
on one line (so errors carry "user_script:1:" as in Redis), after a
SCRIPT FLUSH so that cjson's settings start from their defaults.
"""
import socket, sys, os

HERE = os.path.dirname(os.path.abspath(__file__))

def cmd(sock, f, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        data = f.read(n + 2)[:-2]
        return data.decode("latin-1")
    return line.decode("latin-1").rstrip("\r\n")

def main():
    port = int(sys.argv[1])
    show = open(os.path.join(HERE, "show.lua")).read().strip()
    sock = socket.create_connection(("127.0.0.1", port))
    f = sock.makefile("rb")
    for name in sys.argv[2:]:
        out = []
        for case in open(os.path.join(HERE, name + ".cases")):
            case = case.rstrip("\n")
            if not case or case.startswith("#"):
                continue
            cmd(sock, f, "SCRIPT", "FLUSH")
            body = "%s return all(pcall(function() return %s end))" % (show, case)
            out.append("%s\t%s" % (case, cmd(sock, f, "EVAL", body, "0")))
        open(os.path.join(HERE, name + ".golden"), "w").write("\n".join(out) + "\n")

main()
