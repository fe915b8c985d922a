#!/usr/bin/env python3
"""Tests of scripts/bench_replication.py's parsing and arithmetic, with
exact expected values (no servers):

    python3 scripts/test_bench_replication.py -v
"""
import os
import sys
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_replication as br  # noqa: E402


class Resp(unittest.TestCase):
    def test_each_kind(self):
        self.assertEqual(br.parse_reply(b"+OK\r\n"), ("OK", 5))
        err = br.parse_reply(b"-LOADING Redis is loading\r\n")[0]
        self.assertIsInstance(err, br.RespError)
        self.assertEqual(err, "LOADING Redis is loading")
        self.assertEqual(br.parse_reply(b":1000000\r\n"), (1000000, 10))
        self.assertEqual(br.parse_reply(b"$3\r\nabc\r\n"), (b"abc", 9))
        self.assertEqual(br.parse_reply(b"$-1\r\n"), (None, 5))
        self.assertEqual(br.parse_reply(b"*2\r\n$1\r\na\r\n:7\r\n"), ([b"a", 7], 15))
        self.assertEqual(br.parse_reply(b"*0\r\n"), ([], 4))

    def test_binary_bulk_holds_crlf(self):
        v = b"a\r\nb\r\n"
        self.assertEqual(br.parse_reply(b"$6\r\n" + v + b"\r\n"), (v, 12))

    def test_every_split_is_incomplete_until_the_end(self):
        whole = b"*3\r\n+PONG\r\n$5\r\nhello\r\n*1\r\n:-3\r\n"
        for cut in range(len(whole)):
            self.assertIsNone(br.parse_reply(whole[:cut]), cut)
        self.assertEqual(br.parse_reply(whole), (["PONG", b"hello", [-3]], len(whole)))

    def test_offset_and_garbage(self):
        self.assertEqual(br.parse_reply(b"+A\r\n+B\r\n", 4), ("B", 8))
        with self.assertRaises(ValueError):
            br.parse_reply(b"hello\r\n")

    def test_encode(self):
        self.assertEqual(br.encode("SET", b"k", 12),
                         b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n12\r\n")


class Info(unittest.TestCase):
    # As Redis 7.0.15's replica writes it (one field trimmed).
    REPLICA = (b"# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:40001\r\n"
               b"master_link_status:up\r\nmaster_sync_in_progress:0\r\n"
               b"slave_read_repl_offset:5120\r\nslave_repl_offset:5093\r\n"
               b"master_replid:0f5c3a\r\nmaster_repl_offset:5093\r\n\r\n")

    def test_fields(self):
        f = br.parse_info(self.REPLICA)
        self.assertEqual(f["master_link_status"], "up")
        self.assertEqual(f["slave_repl_offset"], "5093")
        self.assertEqual(f["master_host"], "127.0.0.1")
        self.assertNotIn("# Replication", f)

    def test_value_with_colons_and_commas(self):
        f = br.parse_info("slave0:ip=127.0.0.1,port=1,state=online,offset=9,lag=0\r\n")
        self.assertEqual(f["slave0"], "ip=127.0.0.1,port=1,state=online,offset=9,lag=0")

    def test_stat_calls(self):
        self.assertEqual(br.stat_calls("calls=1234,usec=99,usec_per_call=0.08,rejected_calls=0"),
                         1234)
        with self.assertRaises(ValueError):
            br.stat_calls("usec=99")


class Logs(unittest.TestCase):
    def test_redis(self):
        disk = ("1:M 27 Nov 2026 08:00:01.123 * Replica 127.0.0.1:40002 asks for synchronization\n"
                "1:M 27 Nov 2026 08:00:01.123 * Starting BGSAVE for SYNC with target: disk\n")
        sockets = "1:M 27 Nov 2026 08:00:09.000 * Starting BGSAVE for SYNC with target: replicas sockets\n"
        self.assertEqual(br.transfer_seen(disk), "disk")
        self.assertEqual(br.transfer_seen(disk + sockets), "diskless")
        self.assertEqual(br.transfer_seen(sockets + disk), "disk")

    def test_cairn(self):
        line = ("12:M 27 Nov 2026 08:00:01.123 * Full resync requested by replica 127.0.0.1:40002; "
                "starting a fork-less RDB transfer (diskless)\n")
        self.assertEqual(br.transfer_seen(line), "diskless")
        self.assertEqual(br.transfer_seen(line.replace("(diskless)", "(disk)")), "disk")
        self.assertIsNone(br.transfer_seen("nothing here\n"))


class Benchmark(unittest.TestCase):
    OUT = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
           '"p99_latency_ms","max_latency_ms"\n'
           '"MSET (10 keys)","136537.62","5.612","0.560","5.431","7.943","9.671","13.551"\n')

    def test_named_row(self):
        self.assertEqual(br.benchmark_rps(self.OUT, "mset"), 136537.62)

    def test_preparation_row_skipped(self):
        out = ('"test","rps"\n"LPUSH (needed to benchmark LRANGE)","500000.00"\n'
               '"LRANGE_100 (first 100 elements)","42517.50"\n')
        self.assertEqual(br.benchmark_rps(out, "lrange_100"), 42517.5)

    def test_missing(self):
        with self.assertRaises(ValueError):
            br.benchmark_rps(self.OUT, "set")


class Stats(unittest.TestCase):
    def test_percentile_nearest_rank(self):
        v = list(range(1, 101))
        self.assertEqual(br.percentile(v, 50), 50)
        self.assertEqual(br.percentile(v, 99), 99)
        self.assertEqual(br.percentile(v, 100), 100)
        self.assertEqual(br.percentile([5, 1, 3], 50), 3)
        self.assertEqual(br.percentile([7], 99), 7)
        self.assertIsNone(br.percentile([], 50))
        self.assertEqual(br.summary([3, 1, 2]), (2, 3, 3))

    def test_lag_level_replica(self):
        self.assertEqual(br.lag_series([(0.0, 100, 100), (0.01, 200, 200)]), [(0, 0.0), (0, 0.0)])

    def test_lag_interpolates_the_masters_offset(self):
        # The master writes 1,000 bytes every 10 ms; the replica is 1,500
        # bytes behind: it holds what the master had 15 ms earlier.
        samples = [(i * 0.01, 1000 * (i + 1), max(0, 1000 * (i + 1) - 1500)) for i in range(6)]
        got = br.lag_series(samples)
        self.assertEqual([b for b, _ in got], [1000, 1500, 1500, 1500, 1500, 1500])
        # The first two replica offsets (0, 500) precede the first sample:
        # counted from it, so their ms lag is a lower bound.
        self.assertAlmostEqual(got[0][1], 0.0)
        self.assertAlmostEqual(got[1][1], 10.0)
        for _, ms in got[2:]:
            self.assertAlmostEqual(ms, 15.0)

    def test_lag_exact_sample_and_a_stall(self):
        # The master stops at 3,000; the replica reaches 2,000 (the
        # master's offset at t=0.02 exactly), then catches up.
        samples = [(0.0, 1000, 1000), (0.01, 2000, 1000), (0.02, 3000, 1000),
                   (0.05, 3000, 2000), (0.06, 3000, 3000)]
        got = br.lag_series(samples)
        self.assertEqual([b for b, _ in got], [0, 1000, 2000, 1000, 0])
        self.assertAlmostEqual(got[1][1], 10.0)  # 1,000 was the master's at t=0
        self.assertAlmostEqual(got[2][1], 20.0)
        self.assertAlmostEqual(got[3][1], 40.0)  # 2,000 was the master's at t=0.01
        self.assertEqual(got[4], (0, 0.0))


class CpuSection(unittest.TestCase):
    def test_rows_ratios_and_verdicts(self):
        cpu = {(("cairn", False), "set"): 1.0, (("cairn", True), "set"): 1.2,
               (("redis", False), "set"): 1.4, (("redis", True), "set"): 2.1,
               (("cairn", False), "incr"): 1.0, (("cairn", True), "incr"): 1.1,
               (("redis", False), "incr"): 1.3, (("redis", True), "incr"): None}
        lines = br.cpu_section(["set", "incr"], cpu)
        self.assertEqual(lines[0], "#### Master CPU per request, with a replica and alone")
        header = [ln for ln in lines if ln.startswith("| line")][0]
        self.assertIn("bar ≤ 1.11", header)
        rows = [ln for ln in lines if ln.startswith("| SET") or ln.startswith("| INCR")]
        self.assertEqual(rows, [
            "| SET | 1.00 | 1.20 | 1.200 | below | 1.40 | 2.10 | 1.500 | 0.571 |",
            "| INCR | 1.00 | 1.10 | 1.100 | meets | 1.30 | - | - | - |",
        ])
        # Every row has the header's cell count.
        cells = header.count("|")
        self.assertTrue(all(r.count("|") == cells for r in rows))
        self.assertEqual(lines[-1], "")

    def test_unmeasured_alone_is_no_verdict(self):
        row = br.cpu_section(["get"], {})[-2]
        self.assertEqual(row, "| GET | - | - | - | - | - | - | - | - |")


class ReplicaCpuSection(unittest.TestCase):
    def test_rows_and_ratio(self):
        cpu = {("cairn", "set"): 0.5, ("redis", "set"): 0.8,
               ("cairn", "incr"): 0.6, ("redis", "incr"): None}
        lines = br.replica_cpu_section(["set", "incr"], cpu)
        self.assertEqual(lines[0], "#### Replica CPU per applied request")
        header = [ln for ln in lines if ln.startswith("| line")][0]
        rows = [ln for ln in lines if ln.startswith("| SET") or ln.startswith("| INCR")]
        self.assertEqual(rows, ["| SET | 0.50 | 0.80 | 0.625 |", "| INCR | 0.60 | - | - |"])
        self.assertTrue(all(r.count("|") == header.count("|") for r in rows))
        self.assertEqual(lines[-1], "")


class Values(unittest.TestCase):
    def test_deterministic_distinct_and_incompressible(self):
        base = br.sync_base()
        self.assertEqual(base, br.sync_base())
        a, b = br.sync_value(base, 0, 1024), br.sync_value(base, 999999, 1024)
        self.assertEqual((len(a), len(b)), (1024, 1024))
        self.assertNotEqual(a, b)
        self.assertEqual(a[:8], (0).to_bytes(8, "little"))
        # Redis compresses strings with LZF when that saves space; random
        # bytes do not shrink (zlib as a stand-in: it finds more than LZF).
        self.assertGreater(len(zlib.compress(b, 9)), 1000)


class Settings(unittest.TestCase):
    def test_defaults_are_the_bars(self):
        s = br.Settings({}, quick=False)
        self.assertEqual((s.rounds, s.n, s.pipeline, s.sync_keys, s.value_size),
                         (5, 1000000, 16, 1000000, 1024))
        self.assertEqual(s.tests, ["set", "get", "incr", "hset", "mset"])
        self.assertEqual(s.parts, ["throughput", "sync", "lag"])
        self.assertEqual(s.lag_pipelines, [1, 16])

    def test_quick_and_overrides(self):
        s = br.Settings({"N": "500", "PARTS": "sync lag"}, quick=True)
        self.assertEqual((s.rounds, s.n, s.sync_keys, s.lag_seconds), (1, 500, 2000, 1.0))
        self.assertEqual(s.parts, ["sync", "lag"])
        self.assertIn("N=500", s.command())
        with self.assertRaises(SystemExit):
            br.Settings({"PARTS": "throughput,speed"}, quick=False)


if __name__ == "__main__":
    unittest.main()
