#!/usr/bin/env python3
"""Tests of the E2, E4 and E5 summaries (scripts/bench_tier_report.py,
scripts/bench_fs_report.py) on made-up reports with exact expected
values (no servers):

    python3 scripts/test_bench_tier.py -v
"""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_fs_report as fsr  # noqa: E402
import bench_tier_report as tr  # noqa: E402

MiB = 1 << 20


def run(target, phase, keys_s, extra=None, errors=0, timeline=None, rnd=1):
    return {"target": target, "phase": phase, "round": rnd, "units_per_sec": keys_s,
            "ops_per_sec": keys_s, "errors": errors, "duration_s": len(timeline or [1]),
            "timeline": timeline or [keys_s], "extra": extra or {}}


def e4_report(cairn_rss=20 * MiB, stall=None, cairn_wrong=0):
    runs = []
    speeds = {"cairn": (100_000, 80_000, 50_000), "memcached": (80_000, 100_000, 40_000),
              "redis": (150_000, 200_000, 90_000)}
    for i, ph in enumerate(("mset-seq", "mget-seq", "mget-rand")):
        for t, s in speeds.items():
            ex = {"missing_keys": 0, "wrong_keys": cairn_wrong if t == "cairn" else 0,
                  "stalls": [], "stall_threshold_s": 1.0, "rss_peak": cairn_rss if t == "cairn" else 30 * MiB,
                  "keys_stored": 1000, "evictions": 0, "server_bytes_per_key": 900.0,
                  "rss_bytes_per_key": 1000.0, "disk_bytes_per_key": 1200.0}
            if t == "cairn" and stall and i == 0:
                ex["stalls"] = [{"at_s": 2.0, "len_s": stall}]
            if t == "cairn":
                ex["tier_end"] = {"tiered_keys": 700, "tier_bytes_on_disk": 1_000_000}
            if t == "memcached":
                ex["tier_end"] = {"extstore_objects_used": 650}
            runs.append(run(t, ph, s[i], ex, timeline=[s[i], 0, s[i] // 2]))
    return {"runs": runs, "config": {"keys": 1000, "value_size": 2800, "batch": 32, "threads": [8],
                                     "values": {"kind": "real-text", "corpus_files": 3,
                                                "corpus_source": "test", "corpus_words": 12345,
                                                "corpus_fingerprint": "ab", "seed": 25}}}


ACCEPTED = "cairn: every write accepted (an -OOM refusal: the tier did not keep up)"
INTACT = "cairn: every accepted value read back intact"


def refused_report(missing):
    rep = e4_report()
    for r in rep["runs"]:
        if r["target"] != "cairn":
            continue
        if r["phase"] == "mset-seq":
            r["errors"] = 3
            r["per_op"] = [{"errors": {"server_error": 3}}]
        else:
            r["errors"] = 40
            r["per_op"] = [{"errors": {"missing": 40}}]
            r["extra"]["missing_keys"] = missing
    return rep


class Sparkline(unittest.TestCase):
    def test_levels_zero_and_missing(self):
        self.assertEqual(tr.sparkline([1, 2, 3, 0, 5, 8]), "▁▂▃·▅█")
        self.assertEqual(tr.sparkline([None, 4, 4]), " ██")
        self.assertEqual(tr.sparkline([]), "")

    def test_squeezed_by_averaging(self):
        # 8 values into 4 columns: pairs averaged (1, 2, 0, 4).
        self.assertEqual(tr.sparkline([1, 1, 2, 2, 0, 0, 4, 4], width=4), "▂▄·█")


class E4(unittest.TestCase):
    def test_checks_pass(self):
        figs = tr.figures(e4_report())
        rows = tr.e4_checks(figs, ["mset-seq", "mget-seq", "mget-rand"], "cairn", 20 * MiB)
        got = {r[0]: (r[1], r[3]) for r in rows}
        self.assertEqual(got["mset-seq: cairn keys/s at least memcached's"], ("1.25", True))
        self.assertEqual(got["mget-seq: cairn keys/s at least memcached's"], ("0.80", False))
        self.assertEqual(got["mset-seq: cairn keys/s within 2x of Redis's"], ("0.67", True))
        self.assertEqual(got["mget-seq: cairn keys/s within 2x of Redis's"], ("0.40", False))
        self.assertEqual(got["cairn RSS peak under 1.2 x maxmemory"], ("20.00 MiB", True))
        self.assertEqual(got["cairn: no stall over 1 s"], ("0 (longest 0.00 s)", True))
        self.assertEqual(got[ACCEPTED], ("0 keys refused", True))
        self.assertEqual(got[INTACT], ("0 lost, 0 wrong, 0 read errors", True))
        peer = "memcached kept every value (else the ratios against it compare unlike work)"
        self.assertEqual(got[peer], ("0 errors, 0 missing, 0 evicted", True))

    def test_a_peer_that_lost_values_is_flagged(self):
        rep = e4_report()
        for r in rep["runs"]:
            if r["target"] == "memcached":
                r["extra"].update(evictions=7612, missing_keys=7612 if r["phase"] != "mset-seq" else 0)
                r["errors"] = 245 if r["phase"] == "mget-seq" else 0
        figs = tr.figures(rep)
        got = {r[0]: (r[1], r[3]) for r in tr.e4_checks(figs, ["mset-seq", "mget-seq"], "cairn", 20 * MiB)}
        peer = "memcached kept every value (else the ratios against it compare unlike work)"
        self.assertEqual(got[peer], ("245 errors, 7612 missing, 7612 evicted", False))
        self.assertEqual(got[peer.replace("memcached", "redis")][1], True)

    def test_checks_fail_on_rss_stalls_and_bad_values(self):
        rep = e4_report(cairn_rss=25 * MiB, stall=1.5, cairn_wrong=2)
        figs = tr.figures(rep)
        got = {r[0]: (r[1], r[3]) for r in tr.e4_checks(figs, ["mset-seq"], "cairn", 20 * MiB)}
        self.assertEqual(got["cairn RSS peak under 1.2 x maxmemory"], ("25.00 MiB", False))
        self.assertEqual(got["cairn: no stall over 1 s"], ("1 (longest 1.50 s)", False))
        self.assertEqual(got[INTACT], ("0 lost, 2 wrong, 0 read errors", False))

    def test_refused_writes_are_not_lost_values(self):
        # Three MSETs of 32 refused (-OOM): 96 keys never acknowledged.
        rep = refused_report(missing=96)
        got = {r[0]: (r[1], r[3]) for r in tr.e4_checks(tr.figures(rep), ["mset-seq"], "cairn", 20 * MiB)}
        self.assertEqual(got[ACCEPTED], ("96 keys refused", False))
        self.assertEqual(got[INTACT], ("0 lost, 0 wrong, 0 read errors", True))
        self.assertEqual(tr.strict_failures(rep, "e4"), [])
        # Four more missing than refused were accepted and then lost.
        rep = refused_report(missing=100)
        self.assertEqual(tr.value_account([r for r in rep["runs"] if r["target"] == "cairn"], 32),
                         {"refused": 96, "lost": 4, "wrong": 0, "read_errors": 0})
        self.assertEqual(tr.strict_failures(rep, "e4"),
                         ["cairn: 4 accepted values lost, 0 read back wrong, 0 read errors"])

    def test_summary_text(self):
        s = tr.e4_summary(e4_report(stall=1.5), 20 * MiB, stats={
            "memcached": "STAT get_extstore 42\r\nSTAT curr_items 1000\r\nEND\r\n",
            "cairn": "# Tier\r\ntiered_keys:700\r\ntier_reads:5\r\n"})
        self.assertIn("| mset-seq | 100,000 | 80,000 | 150,000 | 1.25 | 0.67 |", s)
        self.assertIn("| mget-rand | 50,000 | 40,000 | 90,000 | 1.25 | 0.56 |", s)
        self.assertIn("stall: nothing done for 1.50 s from 2.0 s", s)
        self.assertIn("- cairn: keys with the value on disk 700, bytes on disk 1,000,000", s)
        self.assertIn("- memcached: items on disk 650", s)
        self.assertIn("- memcached: get_extstore 42, curr_items 1000", s)
        self.assertIn("- cairn: tiered_keys 700, tier_reads 5", s)
        self.assertIn("12,345 words", s)
        self.assertIn("| cairn: no stall over 1 s | 1 (longest 1.50 s) | 0 | ✗ |", s)
        # The per-second curve: 100,000 then nothing then half.
        self.assertIn("cairn mset-seq      █·▄  min 0 med 50,000 max 100,000", s)

    def test_cpu_table_gives_medians_per_call_and_the_machine_split(self):
        runs = []
        for i, (srv, cli, idle) in enumerate(((100, 300, 5.0), (120, 320, 15.0), (110, 310, 10.0))):
            r = run("cairn", "mget-seq", 1000, {"client_cpu_us_per_op": cli,
                                                "box_cpu_pct": {"busy": 100 - idle, "idle": idle,
                                                                "iowait": 0.0, "steal": 1.0}}, rnd=i)
            r["server_cpu"] = {"us_per_op": srv}
            runs.append(r)
        figs = {("cairn", "mget-seq"): tr.phase_figures(runs)}
        t = tr.cpu_table(figs, ["cairn"], ["mget-seq"])
        self.assertIn("| mget-seq | cairn | 110 | 310 | 420 | 90.0 | 10.0 | 0.0 | 1.0 |", t)
        # Reports made before the client measured itself: no table.
        figs = {("cairn", "mget-seq"): tr.phase_figures([run("cairn", "mget-seq", 1000)])}
        self.assertEqual(tr.cpu_table(figs, ["cairn"], ["mget-seq"]), [])

    def test_rounds_take_the_median_speed(self):
        runs = [run("cairn", "mset-seq", v, rnd=i) for i, v in enumerate((10, 30, 20))]
        self.assertEqual(tr.phase_figures(runs)["keys_s"], 20)


def round_report(speeds, fingerprint="ab", dropped=None, evicted=0):
    """A one-round E4 report: speeds {target: (mset, mget-seq, mget-rand)}."""
    runs = []
    for i, ph in enumerate(("mset-seq", "mget-seq", "mget-rand")):
        for t, s in speeds.items():
            ex = {"missing_keys": 0, "wrong_keys": 0, "stalls": [], "stall_threshold_s": 1.0,
                  "rss_peak": 20 * MiB, "keys_stored": 1000, "evictions": evicted if t == "memcached" else 0}
            if dropped is not None and ph.startswith("mget"):
                ex["page_cache_dropped"] = dropped
            runs.append(run(t, ph, s[i], ex))
    return {"runs": runs, "config": {"keys": 1000, "value_size": 2800, "batch": 32, "threads": [8],
                                     "values": {"kind": "real-text", "size": 2800, "seed": 25,
                                                "corpus_files": 3, "corpus_source": "test",
                                                "corpus_words": 12345, "corpus_fingerprint": fingerprint,
                                                "ratios": {"values": 1000, "zstd3": 1.98, "zstd3_dict": 3.02,
                                                           "lz4_fast": 1.39, "lz4_fast_dict": 1.98,
                                                           "lz4_hc4_dict": 2.85}}}}


ROUNDS = [{"cairn": (100, 300, 50), "memcached": (80, 200, 40)},
          {"cairn": (120, 100, 70), "memcached": (60, 400, 20)},
          {"cairn": (90, 200, 60), "memcached": (100, 300, 30)}]


class Rounds(unittest.TestCase):
    def test_merge_renumbers_and_refuses_other_values(self):
        rep = tr.merge_rounds([round_report(r) for r in ROUNDS])
        self.assertEqual(sorted({r["round"] for r in rep["runs"]}), [1, 2, 3])
        self.assertEqual(len(rep["runs"]), 18)
        one = round_report(ROUNDS[0])
        self.assertIs(tr.merge_rounds([one]), one)
        with self.assertRaisesRegex(ValueError, "round 2's values differ"):
            tr.merge_rounds([one, round_report(ROUNDS[1], fingerprint="cd")])

    def test_medians_give_the_ratios_and_the_checks(self):
        rep = tr.merge_rounds([round_report(r) for r in ROUNDS])
        figs = tr.figures(rep)
        # cairn mset 100/120/90 -> 100; memcached 80/60/100 -> 80.
        self.assertEqual(figs[("cairn", "mset-seq")]["keys_s"], 100)
        self.assertEqual(figs[("memcached", "mget-seq")]["keys_s"], 300)
        got = {r[0]: (r[1], r[3]) for r in tr.e4_checks(figs, ["mset-seq", "mget-seq", "mget-rand"], "cairn", 20 * MiB)}
        self.assertEqual(got["mset-seq: cairn keys/s at least memcached's"], ("1.25", True))
        self.assertEqual(got["mget-seq: cairn keys/s at least memcached's"], ("0.67", False))
        self.assertEqual(got["mget-rand: cairn keys/s at least memcached's"], ("2.00", True))
        s = tr.e4_summary(rep, 20 * MiB)
        self.assertIn("3 rounds", s)
        self.assertIn("| mget-seq | cairn | 300 | 100 | 200 | 200 |", s)
        self.assertIn("| mget-seq | memcached | 200 | 400 | 300 | 300 |", s)
        self.assertIn("| mget-seq | 200 | 300 | 0.67 |", s)
        self.assertIn("| bar (issue 25, E4) | this run (medians) | bar | |", s)

    def test_one_round_has_no_rounds_table(self):
        s = tr.e4_summary(round_report(ROUNDS[0]), 20 * MiB)
        self.assertNotIn("in each round", s)
        self.assertIn("8 threads, 1 round\n", s)

    def test_evictions_per_round_from_the_servers_stats(self):
        st = [{"memcached": "STAT evictions 0\r\nSTAT slab_reassign_evictions_nomem 5\r\nEND\r\n",
               "cairn": "evicted_keys:0\r\n"},
              {"memcached": "STAT evictions 7607\r\nEND\r\n", "cairn": "evicted_keys:0\r\n", "redis": ""}]
        o = "\n".join(tr.evictions_table(st))
        self.assertIn("| memcached | 5 | 7,607 |", o)
        self.assertIn("| cairn | 0 | 0 |", o)
        self.assertIn("| redis | - | - |", o)
        st[1]["memcached"] = "STAT evictions 7607\r\nSTAT slab_reassign_evictions_nomem 5\r\nEND\r\n"
        rep = tr.merge_rounds([round_report(r) for r in ROUNDS[:2]])
        s = tr.e4_summary(rep, 20 * MiB, stats=st, notes=["memcached profile `tuned`: `memcached -m 20`"])
        self.assertIn("| memcached | 5 | 7,612 |", s)
        self.assertIn("- memcached profile `tuned`: `memcached -m 20`", s)
        # The last round's stats lines.
        self.assertIn("- memcached: evictions 7607, slab_reassign_evictions_nomem 5", s)

    def test_values_line_gives_the_ratios(self):
        s = tr.e4_summary(round_report(ROUNDS[0]), 20 * MiB)
        self.assertIn("fingerprint ab, seed 25", s)
        self.assertIn("zstd 3 1.98, zstd 3 + dictionary 3.02; LZ4 fast 1.39, "
                      "LZ4 fast + dictionary 1.98 (Cairn's disk tier), LZ4 HC 4 + dictionary 2.85 (Cairn in RAM)", s)

    def test_cold_reads_said(self):
        warm = tr.cold_lines(round_report(ROUNDS[0]))
        self.assertTrue(warm[0].startswith("Warm reads"))
        cold = tr.cold_lines(round_report(ROUNDS[0], dropped=True))
        self.assertEqual(cold[0], "Cold reads: the page cache was dropped before every read phase (4 of 4).")
        rep = round_report(ROUNDS[0], dropped=True)
        rep["runs"][-1]["extra"]["page_cache_dropped"] = False
        self.assertIn("dropped before only 3 of 4 read phases", tr.cold_lines(rep)[0])

    def test_main_reads_rounds_and_their_stats(self):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, r in enumerate(ROUNDS, 1):
                os.makedirs(f"{d}/round-{i}")
                with open(f"{d}/round-{i}/tier.json", "w") as f:
                    json.dump(round_report(r, evicted=5 * i), f)
                with open(f"{d}/round-{i}/memcached.stats", "w") as f:
                    f.write(f"STAT evictions {5 * i}\r\nEND\r\n")
                paths.append(f"{d}/round-{i}/tier.json")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = tr.main(["e4", *paths, "--maxmemory", str(20 * MiB), "--stats", "--note", "hello"])
            self.assertEqual(rc, 0)
            self.assertIn("| memcached | 5 | 10 | 15 |", out.getvalue())
            self.assertIn("- hello", out.getvalue())
            self.assertIn("15 evicted", out.getvalue())
            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(tr.main(["e4", *paths, "--maxmemory", "1", "--stats", d]), 2)


class Strict(unittest.TestCase):
    def test_lost_values_and_an_empty_tier_fail(self):
        self.assertEqual(tr.strict_failures(e4_report(), "e4"), [])
        self.assertEqual(tr.strict_failures(e4_report(cairn_wrong=2), "e4"),
                         ["cairn: 0 accepted values lost, 2 read back wrong, 0 read errors"])
        rep = e4_report()
        rep["runs"][3]["per_op"] = [{"errors": {"timeout": 2}}]
        self.assertEqual(tr.strict_failures(rep, "e4"),
                         ["cairn: 0 accepted values lost, 0 read back wrong, 2 read errors"])
        rep = e4_report()
        rep["runs"][-3]["extra"]["tier_end"] = {"tiered_keys": 0}
        self.assertEqual(tr.strict_failures(rep, "e4"),
                         ["cairn: no value on disk at the end (tiered_keys 0)"])
        self.assertEqual(tr.strict_failures(rep, "e4", base="nobody"), ["no runs of nobody"])
        # Without the sampler's figure, the server's own INFO decides.
        del rep["runs"][-3]["extra"]["tier_end"]
        self.assertEqual(tr.strict_failures(rep, "e4", stats={"cairn": "tiered_keys:12\r\n"}), [])
        self.assertEqual(tr.strict_failures(rep, "e4", stats={"cairn": "tiered_keys:0\r\n"}),
                         ["cairn: no value on disk at the end (tiered_keys 0)"])

    def test_e5_reads_the_last_sample(self):
        ex = {"last_to_first_tenth": 0.9, "samples": [{"tier": {"tiered_keys": 0}}, {"tier": {"tiered_keys": 5}}]}
        self.assertEqual(tr.strict_failures({"runs": [run("cairn", "load", 1, ex)]}, "e5"), [])
        ex = {"last_to_first_tenth": None, "samples": [{}]}
        r = run("cairn", "load", 1, ex, errors=6)
        r["per_op"] = [{"errors": {"server_error": 4, "timeout": 2}}]
        self.assertEqual(tr.strict_failures({"runs": [r]}, "e5"),
                         ["cairn load: the load did not finish",
                          "cairn load: insert errors other than refusals {'timeout': 2}",
                          "cairn: no value on disk at the end (tiered_keys None)"])


class E5(unittest.TestCase):
    def report(self, last_marks_gap, errors=0, evicted=0):
        # 1000 records; each percent takes 0.1 s except the last tenth's.
        marks = [p * 0.1 for p in range(91)] + [9.0 + (p - 90) * last_marks_gap for p in range(91, 101)]
        tenths = [{"percent": 10 * (i + 1), "evictions": evicted if i == 9 else 0,
                   "rss_bytes": 10 * MiB, "server_bytes_per_record": 900.0,
                   "disk_bytes_per_record": 1100.0} for i in range(10)]
        ex = {"percent_done_at_s": marks, "tenths": tenths,
              "last_to_first_tenth": 100 / (10 * last_marks_gap) / 100,
              "inserts_per_sec_by_percent": [100.0] * 90 + [10 / last_marks_gap] * 10}
        r = run("cairn", "load", 1000.0, ex, errors=errors)
        return {"runs": [r, run("redis", "load", 2000.0, dict(ex, last_to_first_tenth=1.0))],
                "config": {"records": 1000, "record_bytes": 2816, "record": "string", "times": 3,
                           "maxmemory": 20 * MiB}}

    def test_rate_of_matches_curve_rs(self):
        marks = [p * 0.1 for p in range(101)]
        self.assertAlmostEqual(tr.rate_of(marks, 1000, 0, 10), 100.0)
        self.assertAlmostEqual(tr.rate_of(marks, 50, 0, 10), 5 / 1.0)
        self.assertIsNone(tr.rate_of(marks[:100] + [None], 1000, 90, 100))

    def test_flat_and_collapsing_loads(self):
        flat = tr.e5_summary(self.report(0.1))
        self.assertIn("| cairn | 1 | 1,000 | 100 | 100 | 1.00 | ✓ | 0 | 0 | 10.00 MiB | 900 | 1,100 |", flat)
        self.assertIn("cairn ÷ redis 0.50", flat)
        slow = tr.e5_summary(self.report(0.2))
        self.assertIn("| cairn | 1 | 1,000 | 100 | 50 | 0.50 | ✗ |", slow)
        lost = tr.e5_summary(self.report(0.1, evicted=3))
        self.assertIn("no verdict (records lost)", lost)

    def test_rounds_give_medians(self):
        reps = [self.report(g) for g in (0.1, 0.2, 0.125)]
        for rep, speed in zip(reps, (1000.0, 3000.0, 2000.0)):
            rep["runs"][0]["ops_per_sec"] = speed
        s = tr.e5_summary(tr.merge_rounds(reps))
        self.assertIn("| cairn | 2 | 3,000 | 100 | 50 | 0.50 | ✗ |", s)
        # Medians: 2,000 inserts/s, last/first 0.8 (1.0, 0.5, 0.8).
        self.assertIn("| cairn | 2,000 | 0.80 | ✓ |", s)
        self.assertIn("cairn r3 ", s)
        self.assertIn("| redis | 2,000 | 1.00 | ✓ |", s)
        self.assertIn("Median inserts/s: cairn ÷ redis 1.00", s)
        # A round that lost records leaves the median without a verdict.
        reps[1] = self.report(0.2, evicted=3)
        reps[1]["runs"][0]["ops_per_sec"] = 3000.0
        s = tr.e5_summary(tr.merge_rounds(reps))
        self.assertIn("| cairn | 2,000 | 0.80 | no verdict (records lost) |", s)


class Fs(unittest.TestCase):
    def test_tables_pair_redis_and_cairn(self):
        with tempfile.TemporaryDirectory() as d:
            for label, k in (("ext4", 1.0), ("xfs", 2.0)):
                with open(f"{d}/persist-{label}.csv", "w") as f:
                    f.write(f'"redis-off","P1","SET","{50000 * k:.2f}","0.5"\n'
                            f'"cairn-off","P1","SET","{60000 * k:.2f}","0.5"\n'
                            '"redis-always","P16","INCR","1000.00","9"\n')
                rep = {"summary": [
                    {"phase": "load", "target": "cairn", "op": "INSERT", "ops_per_sec": 3000 * k,
                     "latency": {"p99_us": 900}, "errors": 0},
                    {"phase": "load", "target": "redis", "op": "INSERT", "ops_per_sec": 2000 * k,
                     "latency": {"p99_us": 800}, "errors": 1},
                    {"phase": "run", "target": "cairn", "op": "READ", "ops_per_sec": 1.0,
                     "latency": {"p99_us": 1}, "errors": 0}]}
                with open(f"{d}/ycsb-{label}-everysec.json", "w") as f:
                    json.dump(rep, f)
            o = "\n".join(fsr.place_table(d, ["everysec", "always"], "ext4", d))
            self.assertIn("| off | P1 | SET | 50,000 | 60,000 | 1.20 |", o)
            self.assertIn("| always | P16 | INCR | 1,000 | - | - |", o)
            self.assertIn("| everysec | load | 2,000 | 3,000 | 1.50 | 800 | 900 | 1 / 0 |", o)
            self.assertIn("| always | (no result) |", o)
            self.assertNotIn("READ", o)
            s = "\n".join(fsr.side_by_side(d, ["everysec"], ["ext4", "xfs"]))
            self.assertIn("| cairn | off | P1 | SET | 60,000 | 120,000 | 2.00 |", s)
            self.assertIn("| redis | everysec | load | YCSB ops/s | 2,000 | 4,000 | 2.00 |", s)


if __name__ == "__main__":
    unittest.main()
