#!/usr/bin/env python3
"""Medians of scripts/latency_agreement.sh's rounds as a Markdown table.

    scripts/latency_agreement_table.py OUT_DIR CASE...

Reads OUT_DIR/<case>-r<N>.json (one `cairn-bench get-set --rounds 1
--equal-load ...` report each) and prints, per case and test, every round
and then the medians: both clients' ops/s, p50 and p99 (cairn-bench's at
redis-benchmark's resolution, as `get-set` compares them), the differences,
both clients' CPU busy share and the rest of the machine's CPU use.
"""
import glob
import json
import re
import statistics
import sys

TOL_LAT = 0.10
TOL_RATE = 0.05
TOL_OVERLAP = 0.10


def pct(x):
    return "n/a" if x is None else f"{x * 100:+.1f}%"


def num(x):
    return f"{x:,.0f}"


def verdict(mode, rb_ops, cb_ops, d50, d99):
    # As `get-set`: one after the other, rates within 5%; at once (same
    # -n), runs overlapping by 90% or more.
    if mode == "concurrent":
        if min(rb_ops, cb_ops) / max(rb_ops, cb_ops) < 1 - TOL_OVERLAP - 1e-12:
            return "not the same load"
    elif abs(cb_ops - rb_ops) / rb_ops > TOL_RATE + 1e-12:
        return "not the same load"
    ok = all(d is not None and abs(d) <= TOL_LAT + 1e-12 for d in (d50, d99))
    return "within 10%" if ok else "differs"


def main():
    out, cases = sys.argv[1], sys.argv[2:]
    print("| case | op | round | ops/s rb / cb | p50 µs rb / cb | Δp50 "
          "| p99 µs rb / cb | Δp99 | busy rb / cb | others | verdict |")
    print("|---|---|---|---|---|---:|---|---:|---|---:|---|")
    for case in cases:
        files = sorted(glob.glob(f"{out}/{case}-r*.json"),
                       key=lambda f: int(re.search(r"-r(\d+)\.json$", f)[1]))
        for test in ("SET", "GET"):
            rows = []
            for f in files:
                r = json.load(open(f))
                cfg = r["config"]
                for c in cfg.get("equal_load_checks", []):
                    if c["test"] == test and c["round"] == 1:
                        rows.append((int(re.search(r"-r(\d+)\.json$", f)[1]),
                                     c, cfg.get("others_cpu_pct", 0.0),
                                     cfg.get("tries", 1)))
            if not rows:
                continue

            mode = rows[0][1]["mode"]

            def line(label, rb_ops, cb_ops, rb50, cb50, rb99, cb99, rbb, cbb,
                     others):
                d50 = (cb50 - rb50) / rb50 if rb50 > 0 else None
                d99 = (cb99 - rb99) / rb99 if rb99 > 0 else None
                busy = "-" if rbb is None or cbb is None else \
                    f"{rbb * 100:.0f}% / {cbb * 100:.0f}%"
                print(f"| {case} | {test} | {label} | {num(rb_ops)} / "
                      f"{num(cb_ops)} | {num(rb50)} / {num(cb50)} | "
                      f"{pct(d50)} | {num(rb99)} / {num(cb99)} | {pct(d99)}"
                      f" | {busy} | {others:.1f}% | "
                      f"{verdict(mode, rb_ops, cb_ops, d50, d99)} |")

            for rnd, c, others, tries in rows:
                line(f"{rnd}" + (f" (try {tries})" if tries > 1 else ""),
                     c["rb_ops_per_sec"], c["cb_ops_per_sec"],
                     c["rb_p50_us"], c["cb_p50_rb_us"],
                     c["rb_p99_us"], c["cb_p99_rb_us"],
                     c.get("rb_busy"), c.get("cb_busy"), others)

            def med(k):
                v = [c[k] for _, c, _, _ in rows if c.get(k) is not None]
                return statistics.median(v) if v else None

            line("**median**", med("rb_ops_per_sec"), med("cb_ops_per_sec"),
                 med("rb_p50_us"), med("cb_p50_rb_us"), med("rb_p99_us"),
                 med("cb_p99_rb_us"), med("rb_busy"), med("cb_busy"),
                 statistics.median(o for _, _, o, _ in rows))


if __name__ == "__main__":
    main()
