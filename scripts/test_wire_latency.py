#!/usr/bin/env python3
"""Tests of scripts/wire_latency.py on captures built byte by byte here.

    python3 scripts/test_wire_latency.py -v

Each capture is a classic nanosecond pcap of Ethernet/IPv4/TCP frames with
chosen timestamps, so every expected latency is exact.
"""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire_latency as wl  # noqa: E402

PORT = 6390
CLIENT = bytes([127, 0, 0, 1])
SERVER = bytes([127, 0, 0, 1])
ACK = 0x10
PSH = 0x08
SYN = 0x02
FIN = 0x01


def frame(sport, dport, seq, flags, payload=b"", cut=None):
    """An Ethernet/IPv4/TCP frame; `cut` keeps only that many payload
    bytes (as a snap length would). Returns (bytes, original length)."""
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq % (1 << 32), 0, 5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, CLIENT, SERVER)
    eth = b"\x00" * 12 + b"\x08\x00"
    full = eth + ip + tcp + payload
    if cut is not None:
        return full[: len(full) - len(payload) + cut], len(full)
    return full, len(full)


def pcap(records, nano=True, big=False):
    """A pcap file of (ts_ns, (frame, orig_len)) records."""
    e = ">" if big else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)]
    for ts, (f, orig) in records:
        frac = ts % 1_000_000_000 if nano else (ts % 1_000_000_000) // 1000
        out.append(struct.pack(e + "IIII", ts // 1_000_000_000, frac, len(f), orig))
        out.append(f)
    return b"".join(out)


def cmd(*words):
    b = b"*%d\r\n" % len(words)
    for w in words:
        b += b"$%d\r\n%s\r\n" % (len(w), w)
    return b


class Conn:
    """Builds one connection's frames with correct sequence numbers."""

    def __init__(self, cport, t0, cisn=1000, sisn=5000):
        self.cport = cport
        self.c = cisn + 1
        self.s = sisn + 1
        self.recs = [
            (t0, frame(cport, PORT, cisn, SYN)),
            (t0 + 10, frame(PORT, cport, sisn, SYN | ACK)),
            (t0 + 20, frame(cport, PORT, self.c, ACK)),
        ]

    def send(self, ts, data, cut=None):
        self.recs.append((ts, frame(self.cport, PORT, self.c, ACK | PSH, data, cut)))
        self.c += len(data)

    def reply(self, ts, data):
        self.recs.append((ts, frame(PORT, self.cport, self.s, ACK | PSH, data)))
        self.s += len(data)

    def ack_from_server(self, ts):
        self.recs.append((ts, frame(PORT, self.cport, self.s, ACK)))


def capture():
    """Two connections: a SET split over two segments, a pipelined batch
    of three GETs with its replies split, a retransmission, pure ACKs,
    replies out of order; a set-up command, an error reply and an
    unanswered request on the second; traffic on another port."""
    a = Conn(40000, 0)
    setc = cmd(b"SET", b"key:000000000001", b"VXK")
    a.send(1_000, setc[:10])
    a.send(1_500, setc[10:])
    a.ack_from_server(1_600)
    a.reply(5_000, b"+OK\r\n")  # SET: 4,000 ns
    batch = cmd(b"GET", b"k1") + cmd(b"GET", b"k2") + cmd(b"get", b"k3")
    a.send(10_000, batch)
    a.reply(12_000, b"$3\r\nabc\r\n")  # the batch of 3: 2,000 ns each
    a.reply(13_000, b"$1\r\nx\r\n$-1\r\n")
    # The batch sent again (retransmission): no new bytes.
    a.recs.append((14_000, frame(40000, PORT, a.c - len(batch), ACK | PSH, batch)))
    # A GET whose reply arrives in two segments, the second one first.
    a.send(29_000, cmd(b"GET", b"k4"))
    first, second = b"$5\r\n", b"hello\r\n"
    a.recs.append((30_000, frame(PORT, 40000, a.s + len(first), ACK | PSH, second)))
    a.recs.append((30_500, frame(PORT, 40000, a.s, ACK | PSH, first)))  # 1,500 ns
    a.s += len(first) + len(second)
    a.recs.append((31_000, frame(40000, PORT, a.c, FIN | ACK)))

    b = Conn(40001, 500, cisn=0xFFFFFFF0, sisn=0xFFFFFFFA)  # sequence wrap
    b.send(2_000, cmd(b"CONFIG", b"GET", b"save"))
    b.reply(2_400, b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n")
    b.send(20_000, cmd(b"GET", b"k5"))
    b.reply(20_700, b"$-1\r\n")  # 700 ns
    b.send(21_000, cmd(b"GET", b"k6"))
    b.reply(21_900, b"-ERR wrong\r\n")  # an error: left out
    b.send(22_000, cmd(b"GET", b"k7"))  # never answered
    other = [(3_000, frame(40002, 7000, 1, ACK | PSH, cmd(b"GET", b"zz")))]
    return sorted(a.recs + b.recs + other, key=lambda r: r[0])


class WireLatency(unittest.TestCase):
    def run_on(self, recs, commands, **kw):
        return wl.analyse(wl.read_pcap(pcap(recs, **kw)), PORT, commands)

    def test_pairs_requests_with_replies(self):
        get, set_ = self.run_on(capture(), ["GET", "SET"])
        # GET: 700 (b), 1,500 (out of order), 2,000 x 3 (the batch).
        self.assertEqual(get["requests"], 5)
        self.assertEqual(get["batches"], 4)  # the errored GET is a batch too
        self.assertEqual(get["batch_sizes"], {"1": 3, "3": 1})
        self.assertEqual(get["p50_us"], 2.0)
        self.assertEqual(get["p99_us"], 2.0)
        self.assertEqual(get["max_us"], 2.0)
        self.assertEqual(get["min_us"], 0.7)
        self.assertAlmostEqual(get["mean_us"], (0.7 + 1.5 + 3 * 2.0) / 5)
        self.assertEqual(get["errors"], 1)
        self.assertEqual(get["unanswered"], 1)
        self.assertEqual(get["excluded"], {"CONFIG": 1, "SET": 1})
        self.assertEqual(get["connections"], 2)
        self.assertEqual(get["retransmitted_bytes"], 3 * len(cmd(b"GET", b"k1")))
        self.assertEqual(get["problems"], {})
        # SET: first segment at 1,000, reply at 5,000.
        self.assertEqual(set_["requests"], 1)
        self.assertEqual(set_["p50_us"], 4.0)
        self.assertEqual(set_["excluded"], {"CONFIG": 1, "GET": 7})

    def test_default_command_is_the_most_frequent(self):
        (r,) = self.run_on(capture(), [None])
        self.assertEqual(r["command"], "GET")

    def test_microsecond_and_big_endian_files(self):
        for nano, big in ((False, False), (True, True), (False, True)):
            (r,) = self.run_on(capture(), ["SET"], nano=nano, big=big)
            self.assertEqual(r["p50_us"], 4.0, (nano, big))

    def test_unpipelined_requests_are_separate_batches(self):
        # Two GETs, the second sent after the first's reply: two batches,
        # each timed from its own send.
        a = Conn(41000, 0)
        a.send(100, cmd(b"GET", b"a"))
        a.reply(400, b"$-1\r\n")
        a.send(450, cmd(b"GET", b"b"))
        a.reply(1_450, b"$-1\r\n")
        (r,) = self.run_on(a.recs, ["GET"])
        self.assertEqual(r["batch_sizes"], {"1": 2})
        self.assertEqual((r["min_us"], r["max_us"]), (0.3, 1.0))
        # The client's turn-around: last reply byte at 400, next send 450.
        self.assertEqual(r["turnaround_mean_us"], 0.05)
        # Sent before the first reply was complete: one batch of two, timed
        # from the first send to the first reply.
        a = Conn(41000, 0)
        a.send(100, cmd(b"GET", b"a"))
        a.send(200, cmd(b"GET", b"b"))
        a.reply(400, b"$-1\r\n")
        a.reply(500, b"$-1\r\n")
        (r,) = self.run_on(a.recs, ["GET"])
        self.assertEqual(r["batch_sizes"], {"2": 1})
        self.assertEqual((r["requests"], r["p50_us"]), (2, 0.3))

    def test_snap_length_cut_stops_the_stream_and_says_so(self):
        a = Conn(42000, 0)
        a.send(100, cmd(b"GET", b"a"))
        a.reply(300, b"$-1\r\n")
        a.send(400, cmd(b"GET", b"bbbbbbbb"), cut=10)
        a.reply(600, b"$-1\r\n")
        (r,) = self.run_on(a.recs, ["GET"])
        self.assertEqual(r["requests"], 1)
        self.assertEqual(r["truncated_segments"], 1)
        self.assertEqual(r["problems"], {"client stream stopped: snaplen": 1})
        self.assertEqual(r["extra_replies"], 1)

    def test_resp3_and_nested_replies(self):
        # An attribute before +OK; an array of a map (of a set) and an
        # integer; a bulk error; an error; a null.
        buf = b"|1\r\n+a\r\n:1\r\n+OK\r\n*2\r\n%1\r\n+k\r\n~1\r\n#t\r\n:5\r\n!3\r\nerr\r\n-E\r\n_\r\n"
        p, out = 0, []
        while p < len(buf):
            p, err = wl.parse_reply(buf, p)
            out.append((p, err))
        self.assertEqual([e for _, e in out], [False, False, True, True, False])
        self.assertEqual([p for p, _ in out][:2], [17, 41])
        with self.assertRaises(wl.Incomplete):
            wl.parse_reply(b"$5\r\nab", 0)
        with self.assertRaises(wl.Malformed):
            wl.parse_reply(b"?x\r\n", 0)
        self.assertEqual(wl.parse_command(b"ping\r\n", 0), (6, "PING"))

    def test_percentiles_and_redis_benchmark_grid(self):
        pairs = [(1.0, 98), (5.0, 1), (9.0, 1)]
        self.assertEqual(wl.percentile(pairs, 100, 0.5), 1.0)
        self.assertEqual(wl.percentile(pairs, 100, 0.99), 5.0)
        self.assertEqual(wl.percentile(pairs, 100, 0.999), 9.0)
        self.assertEqual(wl.rb_grid(479.9), 479.0)
        self.assertEqual(wl.rb_grid(480.0), 487.0)
        self.assertEqual(wl.rb_grid(20_000.0), 20_015.0)

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.pcap")
            with open(path, "wb") as f:
                f.write(pcap(capture()))
            out = subprocess.run(
                [sys.executable, wl.__file__, path, "--port", str(PORT), "--command", "set",
                 "--json", os.path.join(d, "r.json")],
                capture_output=True, text=True, check=True,
            ).stdout
            self.assertIn("SET on port 6390: 1 requests", out)
            self.assertIn("p50 4.0", out)


if __name__ == "__main__":
    unittest.main()
