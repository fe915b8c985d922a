#!/usr/bin/env python3
"""Seeds for fuzz/fuzz_targets/snapshot_records.rs from a real SAVE of a
Cairn with the disk tier and its coding on (issue 25; branch e4write).

usage: scripts/fuzz_snapshot_seeds.py [--cairn target/debug/cairn] [--out fuzz/seeds/snapshot_records]

Starts the server in a scratch directory with `maxmemory 48mb`,
`tier-enabled yes`, `value-compression yes` and `rdbchecksum no` (a CRC of 0 is not checked, so
the fuzzer's mutations reach past the sections instead of dying at a
CRC), writes 96 MB of text values (enough for the tier's LZ4 coding to
train dictionaries: 1 MiB of samples per domain), deletes all but a few
keys (some on disk, some in RAM), SAVEs, and writes:

- `tier_file`: the whole file (format version 3: tiered records, tag 8,
  and the dictionaries section 'Z'), with each dictionary's bytes cut to
  256 so the seed stays small (the section's lengths fixed up, its CRC 0
  as every CRC of the file);
- `tier_records`: every block's payload back to back (the records
  `Decoder::record` reads), and `tier_record`: one tiered record.

Every seed is checked to be under 64 KiB.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

MAGIC = b"CAIRNSNP"
HEADER_LEN = 32
BOOK_LEN = 263
SECTION_HEADER_LEN = 17  # tag u8, count u32, payload len u64, crc u32
END_LEN = 21
DICT_KEEP = 256
MAX_SEED = 64 * 1024


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def reply(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t in (b"+", b":"):
            return rest
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)

    def cmd(self, *args):
        self.s.sendall(resp(*args))
        return self.reply()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(resp(*c) for c in cmds))
        return [self.reply() for _ in cmds]


def words():
    out = []
    for root in ("/usr/share/common-licenses",):
        for name in sorted(os.listdir(root)):
            p = os.path.join(root, name)
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    out.extend(f.read().split())
    return out


def value(ws, i, size=2800):
    # Runs of words from varying places, as cairn-bench's real text.
    out = bytearray()
    j = (i * 7919) % len(ws)
    while len(out) < size:
        run = 3 + (j % 12)
        out += b" ".join(ws[j:j + run]) + b" "
        j = (j * 31 + 17) % len(ws)
    return bytes(out[:size])


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, i


def split(data):
    """(whole file with dictionaries cut, [block payloads])."""
    assert data.startswith(MAGIC), "not a Cairn snapshot"
    version = int.from_bytes(data[8:12], "little")
    assert version == 3, "version %d: the file points into no tier" % version
    out = bytearray(data[:HEADER_LEN])
    blocks = []
    saw_dicts = False
    i = HEADER_LEN
    while i < len(data):
        tag = data[i:i + 1]
        if tag == b"D":
            out += data[i:i + BOOK_LEN]
            i += BOOK_LEN
        elif tag == b"E":
            out += data[i:i + END_LEN]
            i += END_LEN
            break
        else:
            count = int.from_bytes(data[i + 1:i + 5], "little")
            n = int.from_bytes(data[i + 5:i + 13], "little")
            payload = data[i + SECTION_HEADER_LEN:i + SECTION_HEADER_LEN + n]
            if tag == b"Z":
                saw_dicts = True
                cut = bytearray()
                j = 0
                for _ in range(count):
                    cut += payload[j:j + 3]  # id u16, codec u8
                    ln, k = read_varint(payload, j + 3)
                    raw = payload[k:k + ln][:DICT_KEEP]
                    cut += varint(len(raw)) + raw
                    j = k + ln
                assert j == len(payload)
                payload = bytes(cut)
            if tag == b"B":
                blocks.append(payload)
            out += tag + count.to_bytes(4, "little") + len(payload).to_bytes(8, "little")
            out += bytes(4) + payload
            i += SECTION_HEADER_LEN + n
    assert saw_dicts, "the file has no dictionaries section"
    assert b"\x08" in b"".join(blocks), "no tiered record"
    return bytes(out), blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default="target/debug/cairn")
    ap.add_argument("--out", default="fuzz/seeds/snapshot_records")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="cairn-seeds-")
    log = open(os.path.join(d, "log"), "wb")
    srv = subprocess.Popen(
        [a.cairn, "--port", "0", "--bind", "127.0.0.1", "--dir", d, "--save", "",
         "--maxmemory", "48mb", "--tier-enabled", "yes", "--tier-segment-size", "64kb",
         "--value-compression", "yes", "--value-compression-idle-ms", "0",
         "--rdbchecksum", "no"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(300):
            text = open(os.path.join(d, "log"), "rb").read().decode(errors="replace")
            if "addr=127.0.0.1:" in text:
                port = int(text.split("addr=127.0.0.1:")[1].split()[0])
                break
            time.sleep(0.1)
        assert port, "the server did not start"
        c = Conn(port)
        ws = words()
        n = 96 * 1024 * 1024 // 2800
        for start in range(0, n, 100):
            deadline = time.time() + 30
            while True:
                try:
                    c.pipeline([("SET", "k:%d" % i, value(ws, i)) for i in range(start, min(n, start + 100))])
                    break
                except RuntimeError as e:
                    # The tier catching up; not for ever.
                    assert "OOM" in str(e) and time.time() < deadline, e
                    time.sleep(0.05)
        time.sleep(1)
        info = c.cmd("INFO", "compression").decode()
        print([l for l in info.splitlines() if "dict" in l], file=sys.stderr)
        enc = c.pipeline([("OBJECT", "ENCODING", "k:%d" % i) for i in range(n)])
        tiered = [i for i, e in enumerate(enc) if e == b"tiered"][:24]
        in_ram = [i for i, e in enumerate(enc) if e != b"tiered"][:6]
        keep = set(tiered + in_ram)
        assert len(tiered) >= 12, "too few values on disk"
        gone = [("DEL", "k:%d" % i) for i in range(n) if i not in keep]
        for j in range(0, len(gone), 1000):
            c.pipeline(gone[j:j + 1000])
        c.cmd("EXPIRE", "k:%d" % tiered[0], 100000)
        c.cmd("SAVE")
        data = open(os.path.join(d, "dump.cairn"), "rb").read()
        whole, blocks = split(data)
        os.makedirs(a.out, exist_ok=True)
        # The blocks' records back to back (`Decoder::record` reads on to
        # the end), and one tiered record alone.
        one = next(b for b in blocks if b[:1] == b"\x08" and len(b) < 64)
        seeds = [("tier_file", whole), ("tier_records", b"".join(blocks)), ("tier_record", one)]
        for name, b in seeds:
            assert len(b) < MAX_SEED, "%s is %d bytes" % (name, len(b))
            with open(os.path.join(a.out, name), "wb") as f:
                f.write(b)
            print("%s/%s: %d bytes" % (a.out, name, len(b)))
        try:
            c.cmd("SHUTDOWN", "NOSAVE")
        except (RuntimeError, OSError):
            pass
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
