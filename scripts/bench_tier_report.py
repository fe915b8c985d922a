#!/usr/bin/env python3
"""Summaries of issue 25's E4 and E5 runs (scripts/bench_tier.sh), read
from cairn-bench's JSON reports: per phase Cairn's keys/s over
memcached's (extstore) and Redis's (all in RAM), the bar's checks with
✓/✗, the per-second curves as text sparklines with stalls named, memory
and disk per key, and what each server's disk tier held at the end.

    bench_tier_report.py e4 tier.json [round2/tier.json ...] --maxmemory BYTES
                         [--stats [DIR]] [--note TEXT ...] [--strict]
    bench_tier_report.py e5 load.json [round2/load.json ...] [--stats [DIR]] [--note TEXT ...] [--strict]
    bench_tier_report.py sparkline 1 2 3      (a check of the drawing)

Several reports are rounds (scripts/bench_tier.sh --rounds N: fresh
servers each): every round's keys/s and the median, the ratios and the
bar's checks from the medians. --stats reads each server's final stats
(<target>.stats) beside each report, or in DIR.

Standard library only, so a fresh machine runs it; the arithmetic is
tested by scripts/test_bench_tier.py.
"""
import argparse
import json
import math
import os
import statistics
import sys

# The bar of issue 25 (E4 at 3x RAM, E5's curve).
E4_VS_MEMCACHED = 1.0    # Cairn's keys/s at least memcached's, every phase
E4_VS_REDIS = 0.5        # within 2x of Redis holding everything in RAM
E4_RSS_OVER_MAXMEMORY = 1.2  # RSS under 1.2 GB at maxmemory 1gb
E5_LAST_OVER_FIRST = 0.7
OK, NO, UNKNOWN = "✓", "✗", "?"
BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values, width=72):
    """Text curve of `values` (None: no figure) squeezed to at most
    `width` columns by averaging neighbours; a zero column is '·' so a
    stall stands out, a column without figures is ' '."""
    vals = list(values)
    if not vals:
        return ""
    cols = []
    n = len(vals)
    w = min(width, n)
    for c in range(w):
        part = [v for v in vals[c * n // w:(c + 1) * n // w] if v is not None]
        cols.append(sum(part) / len(part) if part else None)
    top = max((v for v in cols if v is not None), default=0)
    out = []
    for v in cols:
        if v is None:
            out.append(" ")
        elif v <= 0 or top <= 0:
            out.append("·")
        else:
            out.append(BLOCKS[max(0, min(len(BLOCKS), math.ceil(v / top * len(BLOCKS))) - 1)])
    return "".join(out)


def human(b):
    """Bytes in binary units, as Redis's maxmemory reads them."""
    if b is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b:.0f} B"


def num(v, digits=0):
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def mark(ok):
    return UNKNOWN if ok is None else (OK if ok else NO)


def by_target_phase(rep):
    """{(target, phase): [runs]} in the report's order."""
    out = {}
    for r in rep["runs"]:
        out.setdefault((r["target"], r["phase"]), []).append(r)
    return out


def med(values):
    """The median of the values present, None if none is."""
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def cpu_table(figs, targets, phases):
    """Where each phase's CPU went: the server's and the client's per call,
    and the machine's split (client and servers share its cores, so keys/s
    follows their summed cost unless the machine idles)."""
    if not any(f.get("client_cpu_us") is not None or f.get("server_cpu_us") is not None
               for f in figs.values()):
        return []
    o = ["CPU per call (medians; the client's from its own getrusage, the machine's split from /proc/stat):", "",
         "| phase | target | server CPU µs/call | client CPU µs/call | sum | machine busy % | idle % | iowait % | steal % |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ph in phases:
        for t in targets:
            f = figs.get((t, ph))
            if not f:
                continue
            s, c = f.get("server_cpu_us"), f.get("client_cpu_us")
            b = f.get("box") or {}
            o.append(f"| {ph} | {t} | {num(s)} | {num(c)} | {num(s + c) if s is not None and c is not None else '-'} | "
                     + " | ".join(num(b.get(k), 1) for k in ("busy", "idle", "iowait", "steal")) + " |")
    return o + [""]


def phase_figures(runs):
    """One (target, phase)'s figures over its rounds: the median speed,
    the worst of everything else."""
    ex = [r.get("extra", {}) for r in runs]

    def worst(key, f=max):
        v = [e[key] for e in ex if e.get(key) is not None]
        return f(v) if v else None

    stalls = [s for e in ex for s in (e.get("stalls") or [])]
    return {
        "keys_s": statistics.median(r["units_per_sec"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "missing": worst("missing_keys"),
        "wrong": worst("wrong_keys"),
        "stalls": stalls,
        "stall_threshold_s": worst("stall_threshold_s"),
        "rss_peak": worst("rss_peak"),
        "rss_b_key": worst("rss_bytes_per_key"),
        "server_b_key": worst("server_bytes_per_key"),
        "disk_b_key": worst("disk_bytes_per_key"),
        "keys_stored": worst("keys_stored", min),
        "evictions": worst("evictions"),
        "tier_end": ex[-1].get("tier_end") or {},
        "server_cpu_us": med([(r.get("server_cpu") or {}).get("us_per_op") for r in runs]),
        "client_cpu_us": med([e.get("client_cpu_us_per_op") for e in ex]),
        "box": {k: med([(e.get("box_cpu_pct") or {}).get(k) for e in ex])
                for k in ("busy", "idle", "iowait", "steal")},
        "timeline": runs[0].get("timeline") or [],
        "duration_s": runs[0].get("duration_s", 0),
    }


def error_kinds(runs):
    """Errors by kind over runs ({kind: count}, from per_op)."""
    out = {}
    for r in runs:
        for op in r.get("per_op") or []:
            for k, n in (op.get("errors") or {}).items():
                out[k] = out.get(k, 0) + n
    return out


def value_account(runs, batch):
    """What became of the values of one target's E4 runs: keys refused
    (write calls answered with an error: MSET is all or nothing, so none
    of its keys were acknowledged), keys lost (missing in the worst read
    phase beyond those refused: acknowledged, then gone), keys read back
    wrong, and read errors other than a missing key (time-outs, errors)."""
    writes = [r for r in runs if r["phase"].startswith("mset")]
    reads = [r for r in runs if r["phase"].startswith("mget")]
    refused = sum(r["errors"] for r in writes) * batch
    missing = max((r.get("extra", {}).get("missing_keys") or 0 for r in reads), default=0)
    wrong = max((r.get("extra", {}).get("wrong_keys") or 0 for r in reads), default=0)
    other = sum(n for k, n in error_kinds(reads).items() if k not in ("missing", "wrong_value"))
    return {"refused": refused, "lost": max(0, missing - refused), "wrong": wrong, "read_errors": other}


def figures(rep):
    """{(target, phase): phase_figures} plus each target's value account."""
    figs = {k: phase_figures(v) for k, v in by_target_phase(rep).items()}
    batch = rep.get("config", {}).get("batch") or 1
    for t in dict.fromkeys(r["target"] for r in rep["runs"]):
        acc = value_account([r for r in rep["runs"] if r["target"] == t], batch)
        for (tt, _), f in figs.items():
            if tt == t:
                f["account"] = acc
    return figs


def merge_rounds(reps):
    """One report of several rounds' reports (one file a round, in order):
    the first's config, every run renumbered by its file (round i + 1).
    A single report keeps its own round numbers. Raises ValueError when
    the rounds' values differ (another corpus, size or seed): their
    figures do not compare."""
    if len(reps) == 1:
        return reps[0]
    key = lambda r: {k: (r.get("config", {}).get("values") or {}).get(k)  # noqa: E731
                     for k in ("kind", "size", "seed", "corpus_fingerprint")}
    first = key(reps[0])
    for i, r in enumerate(reps[1:], 2):
        if key(r) != first:
            raise ValueError(f"round {i}'s values differ from round 1's: {key(r)} against {first}")
    runs = []
    for i, r in enumerate(reps, 1):
        for run in r["runs"]:
            runs.append(dict(run, round=i))
    return {"runs": runs, "config": reps[0].get("config", {}), "rounds": len(reps)}


def rounds_table(rep, targets, phases, unit="keys/s"):
    """Every round's speed per (phase, target) and the median of them."""
    rounds = sorted({r["round"] for r in rep["runs"]})
    if len(rounds) < 2:
        return []
    speed = {(r["target"], r["phase"], r["round"]): r["units_per_sec"] for r in rep["runs"]}
    o = [f"{unit} in each round (fresh servers each round, the targets taking turns within each phase):", "",
         "| phase | target | " + " | ".join(f"round {n}" for n in rounds) + " | median |",
         "|---|---|" + "---:|" * (len(rounds) + 1)]
    for ph in phases:
        for t in targets:
            v = [speed.get((t, ph, n)) for n in rounds]
            known = [x for x in v if x is not None]
            if not known:
                continue
            o.append(f"| {ph} | {t} | " + " | ".join(num(x) for x in v) +
                     f" | {num(statistics.median(known))} |")
    return o + [""]


# The stats that count values a server dropped: memcached's LRU evictions
# and the items its slab page mover could not rescue (a value lost all the
# same), Redis's and Cairn's evicted keys.
EVICTION_STATS = {"memcached": ("evictions", "slab_reassign_evictions_nomem")}


def evicted(target, text):
    """A server's own count of values it dropped (None: not reported)."""
    kv = parse_kv(text)
    got = [kv[k] for k in EVICTION_STATS.get(target, ("evicted_keys",)) if k in kv]
    return sum(int(v) for v in got) if got else None


def evictions_table(stats_rounds):
    """Each server's own eviction count at the end of each round."""
    if not stats_rounds or not any(stats_rounds):
        return []
    targets = list(dict.fromkeys(t for st in stats_rounds for t in st))
    o = ["Values dropped by each server's own count at the end of each round "
         "(memcached `evictions` + `slab_reassign_evictions_nomem`, else `evicted_keys`):", "",
         "| target | " + " | ".join(f"round {i}" for i in range(1, len(stats_rounds) + 1)) + " |",
         "|---|" + "---:|" * len(stats_rounds)]
    for t in targets:
        cells = []
        for st in stats_rounds:
            v = evicted(t, st.get(t, ""))
            cells.append("-" if v is None else f"{v:,}")
        o.append(f"| {t} | " + " | ".join(cells) + " |")
    return o + [""]


def values_lines(cfg):
    """The values: corpus, fingerprint, seed, and how they code."""
    vals = cfg.get("values") or {}
    if vals.get("kind") != "real-text":
        return []
    o = [f"Values: real text from {vals.get('corpus_files')} files ({vals.get('corpus_source')}), "
         f"{vals.get('corpus_words'):,} words, fingerprint {vals.get('corpus_fingerprint')}, seed {vals.get('seed')}."]
    r = vals.get("ratios") or {}
    if "zstd3_dict" in r:
        o.append(f"Coded one value at a time ({r.get('values'):,} values, plain ÷ coded): "
                 f"zstd 3 {r['zstd3']:.2f}, zstd 3 + dictionary {r['zstd3_dict']:.2f}; "
                 f"LZ4 fast {r['lz4_fast']:.2f}, LZ4 fast + dictionary {r['lz4_fast_dict']:.2f} (Cairn's disk tier), "
                 f"LZ4 HC 4 + dictionary {r['lz4_hc4_dict']:.2f} (Cairn in RAM).")
    elif r.get("error"):
        o.append(f"(The values' ratios could not be measured: {r['error']}.)")
    return o + [""]


def cold_lines(rep):
    """Whether the page cache was dropped before the read phases."""
    reads = [r for r in rep["runs"] if r["phase"].startswith("mget")]
    flags = [r.get("extra", {}).get("page_cache_dropped") for r in reads]
    if all(f is None for f in flags):
        return ["Warm reads: the page cache was left as it was (the tiers' files may be read from RAM).", ""]
    done = sum(1 for f in flags if f)
    if done == len(reads):
        return [f"Cold reads: the page cache was dropped before every read phase ({done} of {len(reads)}).", ""]
    return [f"Cold reads asked for, but the page cache was dropped before only {done} of {len(reads)} "
            "read phases (dropping it needs root): the others may have read from RAM.", ""]


def e4_checks(figs, phases, base, maxmemory):
    """The bar's rows: (check, figure, bar, ok) with ok None when the run
    has no figure for it."""
    rows = []
    for ph in phases:
        c = figs.get((base, ph))
        for other, bar, what in (("memcached", E4_VS_MEMCACHED, "at least memcached's"),
                                 ("redis", E4_VS_REDIS, "within 2x of Redis's")):
            o = figs.get((other, ph))
            if o is None:
                continue
            r = ratio(c and c["keys_s"], o["keys_s"])
            rows.append((f"{ph}: {base} keys/s {what}", "-" if r is None else f"{r:.2f}",
                         f">= {bar}", None if r is None else r >= bar))
    mine = [figs[(base, ph)] for ph in phases if (base, ph) in figs]
    if mine:
        peaks = [f["rss_peak"] for f in mine if f["rss_peak"] is not None]
        peak = max(peaks) if peaks else None
        bound = E4_RSS_OVER_MAXMEMORY * maxmemory if maxmemory else None
        rows.append((f"{base} RSS peak under {E4_RSS_OVER_MAXMEMORY} x maxmemory",
                     human(peak), f"< {human(bound)}" if bound else "(no maxmemory)",
                     None if peak is None or bound is None else peak < bound))
        stalls = [s for f in mine for s in f["stalls"]]
        longest = max((s["len_s"] for s in stalls), default=0.0)
        thr = max((f["stall_threshold_s"] or 1.0) for f in mine)
        rows.append((f"{base}: no stall over {thr:g} s", f"{len(stalls)} (longest {longest:.2f} s)",
                     "0", not stalls))
        a = mine[0]["account"]
        rows.append((f"{base}: every write accepted (an -OOM refusal: the tier did not keep up)",
                     f"{a['refused']:,} keys refused", "0", a["refused"] == 0))
        rows.append((f"{base}: every accepted value read back intact",
                     f"{a['lost']:,} lost, {a['wrong']:,} wrong, {a['read_errors']:,} read errors", "0",
                     a["lost"] + a["wrong"] + a["read_errors"] == 0))
    # A peer that lost values (memcached evicts what extstore did not
    # write out in time) answers fewer keys per call, and a call with a
    # missing key does not count in keys/s: its ratios compare unlike work.
    others = dict.fromkeys(t for (t, _) in figs if t != base)
    for t in others:
        theirs = [figs[(t, ph)] for ph in phases if (t, ph) in figs]
        bad = sum(f["errors"] for f in theirs)
        miss = max((f["missing"] or 0 for f in theirs), default=0)
        ev = max((f["evictions"] or 0 for f in theirs), default=0)
        rows.append((f"{t} kept every value (else the ratios against it compare unlike work)",
                     f"{bad} errors, {miss} missing, {ev} evicted", "0", bad + miss + ev == 0))
    return rows


def tier_lines(figs, targets, phases):
    """What each server's disk tier held at the end of its last phase."""
    keys = {
        # Cairn's INFO tier.
        "tiered_keys": "keys with the value on disk",
        "tier_bytes_on_disk": "bytes on disk",
        "tier_live_bytes": "live bytes on disk",
        "tier_reads": "reads from disk",
        "tier_read_usec_per_call": "µs per read",
        "tier_read_errors": "read errors",
        "tier_append_errors": "append errors",
        "tier_compactions": "compactions",
        # memcached's extstore_* stats.
        "extstore_objects_used": "items on disk",
        "extstore_bytes_used": "bytes on disk",
        "extstore_objects_written": "items written",
        "extstore_objects_read": "items read",
        "extstore_io_queue": "I/O queue",
        "extstore_objects_evicted": "items evicted from disk (lost)",
        "extstore_compact_rescues": "compaction rescues",
    }
    out = []
    for t in targets:
        end = {}
        for ph in phases:
            end = figs.get((t, ph), {}).get("tier_end") or end
        if not end:
            continue
        parts = [f"{desc} {end[k]:,}" for k, desc in keys.items() if k in end]
        out.append(f"- {t}: " + ", ".join(parts))
    return out


def stats_of(stats_rounds):
    """The last round's stats ({target: text}) from a list of rounds', or
    a plain {target: text}."""
    if isinstance(stats_rounds, list):
        return stats_rounds[-1] if stats_rounds else {}
    return stats_rounds or {}


def e4_summary(rep, maxmemory, base="cairn", stats=None, notes=()):
    """stats: {target: text} or, for rounds, a list of them (one a round)."""
    figs = figures(rep)
    targets = list(dict.fromkeys(r["target"] for r in rep["runs"]))
    phases = list(dict.fromkeys(r["phase"] for r in rep["runs"]))
    others = [t for t in targets if t != base]
    cfg = rep.get("config", {})
    nrounds = len({r["round"] for r in rep["runs"]})
    o = [f"## E4 summary: {cfg.get('keys', '?'):,} keys of {cfg.get('value_size', '?')} B "
         f"({human((cfg.get('keys') or 0) * (cfg.get('value_size') or 0))}), maxmemory {human(maxmemory)}, "
         f"MSET/MGET x {cfg.get('batch', '?')}, {cfg.get('threads', ['?'])[0]} threads, "
         f"{nrounds} round{'s' if nrounds != 1 else ''}", ""]
    o += values_lines(cfg)
    o += [f"- {n}" for n in notes] + ([""] if notes else [])
    o += cold_lines(rep)
    if nrounds > 1:
        o += [f"Keys/s: the median of the {nrounds} rounds; the ratios are of the medians.", ""]
    head = "| phase | " + " | ".join(f"{t} keys/s" for t in targets) + " | " + \
        " | ".join(f"{base} ÷ {t}" for t in others) + " |"
    o += [head, "|---|" + "---:|" * (len(targets) + len(others))]
    for ph in phases:
        cells = [num(figs.get((t, ph), {}).get("keys_s")) for t in targets]
        c = figs.get((base, ph), {}).get("keys_s")
        rs = [ratio(c, figs.get((t, ph), {}).get("keys_s")) for t in others]
        o.append(f"| {ph} | " + " | ".join(cells) + " | " +
                 " | ".join("-" if r is None else f"{r:.2f}" for r in rs) + " |")
    o += [""] + rounds_table(rep, targets, phases)
    o += cpu_table(figs, targets, phases)
    if isinstance(stats, list):
        o += evictions_table(stats)
    o += ["| target | phase | errors | missing | wrong | evictions | keys stored | RSS peak | RSS B/key | used_memory B/key | disk B/key |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in targets:
        for ph in phases:
            f = figs.get((t, ph))
            if f:
                o.append(f"| {t} | {ph} | {f['errors']:,} | {num(f['missing'])} | {num(f['wrong'])} | "
                         f"{num(f['evictions'])} | {num(f['keys_stored'])} | {human(f['rss_peak'])} | "
                         f"{num(f['rss_b_key'])} | {num(f['server_b_key'])} | {num(f['disk_b_key'])} |")
    o += ["", "Keys/s in every second (one column per second, or the average of a few; "
          "`·` a column with nothing done):", "", "```"]
    width = max((len(f"{t} {ph}") for t in targets for ph in phases), default=10)
    for ph in phases:
        for t in targets:
            f = figs.get((t, ph))
            if not f:
                continue
            whole = min(len(f["timeline"]), int(f["duration_s"]))
            tl = f["timeline"][:whole] or f["timeline"]
            rng = f"min {num(min(tl))} med {num(statistics.median(tl))} max {num(max(tl))}" if tl else "no whole second"
            o.append(f"{t + ' ' + ph:<{width}} {sparkline(tl)}  {rng}")
            for s in f["stalls"]:
                o.append(f"{'':<{width}}   stall: nothing done for {s['len_s']:.2f} s from {s['at_s']:.1f} s")
    o += ["```", ""]
    tl = tier_lines(figs, targets, phases)
    if tl:
        o += ["The disk tiers at the end of the last phase:", ""] + tl + [""]
    if stats_of(stats):
        o += stats_lines(stats_of(stats), nrounds) + [""]
    o += ["| bar (issue 25, E4) | this run" + (" (medians)" if nrounds > 1 else "") + " | bar | |",
          "|---|---|---|---|"]
    for check, fig, bar, ok in e4_checks(figs, phases, base, maxmemory):
        o.append(f"| {check} | {fig} | {bar} | {mark(ok)} |")
    o += ["", ("These are one run's figures" if nrounds == 1 else f"These are {nrounds} rounds' figures") +
          ": the bar counts only on an idle machine at "
          "--size 3G --maxmemory 1gb (the median of 5 rounds). Below a few hundred MB of maxmemory the "
          "processes' fixed RSS (binary, threads, allocator pools: 20-40 MB) "
          "decides the RSS check. A call that misses a key counts as an error, "
          "not in keys/s."]
    return "\n".join(o) + "\n"


# The final stats lines worth showing (the script saves each server's
# whole `stats` / `INFO` beside the report).
MC_STATS = ("get_extstore", "get_aborted_extstore", "get_oom_extstore", "recache_from_extstore",
            "miss_from_extstore", "badcrc_from_extstore", "extstore_objects_used",
            "extstore_bytes_used", "extstore_page_evictions", "extstore_pages_free",
            "evictions", "slab_reassign_evictions_nomem", "curr_items")
CAIRN_INFO = ("used_memory", "maxmemory", "evicted_keys", "tiered_keys", "tier_bytes_on_disk",
              "tier_reads", "tier_read_usec_per_call", "tier_writes", "tier_compactions",
              "tier_append_errors", "tier_read_errors")


def parse_kv(text):
    """`name:value` (INFO) and `STAT name value` (memcached) lines."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("STAT "):
            parts = line.split(" ", 2)
            if len(parts) == 3:
                out[parts[1]] = parts[2]
        elif ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def stats_lines(stats, last_of=1):
    """stats: {target: text of its final stats / INFO}; last_of: rounds."""
    o = ["Each server's own figures after the " + ("run:" if last_of == 1 else f"last of {last_of} rounds:"), ""]
    for t, text in stats.items():
        kv = parse_kv(text)
        want = MC_STATS if t == "memcached" else CAIRN_INFO
        got = [f"{k} {kv[k]}" for k in want if k in kv]
        if got:
            o.append(f"- {t}: " + ", ".join(got))
    return o


def e5_summary(rep, base="cairn", stats=None, notes=()):
    runs = [r for r in rep["runs"] if r["phase"] == "load"]
    cfg = rep.get("config", {})
    nrounds = len({r["round"] for r in runs})
    o = [f"## E5 summary: {cfg.get('records', 0):,} records of ~{cfg.get('record_bytes', '?')} B "
         f"({cfg.get('record', 'ycsb-hash')}), {cfg.get('times', '?')} x maxmemory {human(cfg.get('maxmemory'))}, "
         f"{nrounds} round{'s' if nrounds != 1 else ''}", ""]
    o += values_lines(cfg)
    o += [f"- {n}" for n in notes] + ([""] if notes else [])
    o += ["| target | round | inserts/s | first tenth | last tenth | last ÷ first | bar >= 0.7 | errors | evictions | RSS at end | used_memory B/record | disk B/record |",
          "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    speeds, last_first, lost_any = {}, {}, set()
    for r in runs:
        ex = r.get("extra", {})
        first = rate_of(ex.get("percent_done_at_s"), cfg.get("records"), 0, 10)
        last = rate_of(ex.get("percent_done_at_s"), cfg.get("records"), 90, 100)
        rt = ex.get("last_to_first_tenth")
        tenths = ex.get("tenths") or [{}]
        end = tenths[-1]
        lost = r["errors"] + (end.get("evictions") or 0)
        verdict = "no verdict (records lost)" if lost else mark(None if rt is None else rt >= E5_LAST_OVER_FIRST)
        speeds.setdefault(r["target"], []).append(r["ops_per_sec"])
        if lost:
            lost_any.add(r["target"])
        if rt is not None:
            last_first.setdefault(r["target"], []).append(rt)
        o.append(f"| {r['target']} | {r['round']} | {num(r['ops_per_sec'])} | {num(first)} | {num(last)} | "
                 f"{'-' if rt is None else f'{rt:.2f}'} | {verdict} | {r['errors']:,} | {num(end.get('evictions'))} | "
                 f"{human(end.get('rss_bytes'))} | {num(end.get('server_bytes_per_record'))} | "
                 f"{num(end.get('disk_bytes_per_record'))} |")
    med = {t: statistics.median(v) for t, v in speeds.items()}
    if nrounds > 1:
        o += ["", f"The median of the {nrounds} rounds:", "",
              "| target | inserts/s | last ÷ first | bar >= 0.7 |", "|---|---:|---:|---|"]
        for t in med:
            rt = statistics.median(last_first[t]) if t in last_first else None
            verdict = ("no verdict (records lost)" if t in lost_any
                       else mark(None if rt is None else rt >= E5_LAST_OVER_FIRST))
            o.append(f"| {t} | {num(med[t])} | {'-' if rt is None else f'{rt:.2f}'} | {verdict} |")
    others = [t for t in med if t != base]
    if base in med and others:
        o += ["", ("Inserts/s" if nrounds == 1 else "Median inserts/s") + ": " + ", ".join(
            f"{base} ÷ {t} {ratio(med[base], med[t]):.2f}" for t in others if med[t])]
    o += ["", "Inserts/s per 1% of the load (`·`: none, ` `: not reached):", "", "```"]
    label = (lambda r: f"{r['target']} r{r['round']}") if nrounds > 1 else (lambda r: r["target"])  # noqa: E731
    width = max((len(label(r)) for r in runs), default=8)
    for r in runs:
        pp = r.get("extra", {}).get("inserts_per_sec_by_percent") or []
        known = [v for v in pp if v is not None]
        rng = f"min {num(min(known))} max {num(max(known))}" if known else "-"
        o.append(f"{label(r):<{width}} {sparkline(pp, 100)}  {rng}")
    o += ["```", ""]
    if stats_of(stats):
        o += stats_lines(stats_of(stats), nrounds) + [""]
    o += ["Memory and disk per record at every tenth of the load: load.md (and load.json's "
          "`tenths`, `samples`); the curve: e5-load-curve.svg" +
          (" (in each round's directory)." if nrounds > 1 else "."), "",
          ("These are one run's figures" if nrounds == 1 else f"These are {nrounds} rounds' figures") +
          ": the bar counts only on an idle machine."]
    return "\n".join(o) + "\n"


def rate_of(marks, n, a, b):
    """Inserts/s over percents a..b of a load of n (curve.rs's rate_between)."""
    if not marks or not n or marks[a] is None or marks[b] is None or marks[b] <= marks[a]:
        return None
    mark_of = lambda p: -(-n * p // 100)  # noqa: E731 (ceil, as percent_mark)
    return (mark_of(b) - mark_of(a)) / (marks[b] - marks[a])


def strict_failures(rep, mode, base="cairn", stats=None):
    """What `--strict` (the CI run) refuses: the base target lost or
    changed a value it had accepted, failed a read, did not finish the
    load, or its disk tier held nothing at the end. Refused writes (-OOM
    while the tier falls behind) are the bar's business, not breakage:
    the summary shows them."""
    runs = [r for r in rep["runs"] if r["target"] == base]
    if not runs:
        return [f"no runs of {base}"]
    out = []
    if mode == "e4":
        a = value_account(runs, rep.get("config", {}).get("batch") or 1)
        if a["lost"] + a["wrong"] + a["read_errors"]:
            out.append(f"{base}: {a['lost']} accepted values lost, {a['wrong']} read back wrong, "
                       f"{a['read_errors']} read errors")
    for r in runs:
        ex = r.get("extra", {})
        if mode == "e5" and ex.get("last_to_first_tenth") is None:
            out.append(f"{base} {r['phase']}: the load did not finish")
        if mode == "e5":
            other = {k: n for k, n in error_kinds([r]).items() if k != "server_error"}
            if other:
                out.append(f"{base} {r['phase']}: insert errors other than refusals {other}")
    ex = runs[-1].get("extra", {})
    end = ex.get("tier_end") or ((ex.get("samples") or [{}])[-1].get("tier") or {})
    tiered = end.get("tiered_keys")
    stats = stats_of(stats)
    if tiered is None and stats and base in stats:
        # The server's own INFO at the end (a sampler that read no tier).
        tiered = parse_kv(stats[base]).get("tiered_keys")
    if not tiered or str(tiered) == "0":
        out.append(f"{base}: no value on disk at the end (tiered_keys {tiered})")
    return out


def read_stats(report_paths, stats_dir):
    """[{target: text}] a round: <target>.stats in stats_dir (one report)
    or beside each report."""
    out = []
    for p in report_paths:
        d = stats_dir or os.path.dirname(os.path.abspath(p))
        st = {}
        for name in sorted(os.listdir(d)):
            if name.endswith(".stats"):
                with open(os.path.join(d, name)) as f:
                    st[name[:-len(".stats")]] = f.read()
        out.append(st)
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for mode in ("e4", "e5"):
        a = sub.add_parser(mode)
        a.add_argument("reports", nargs="+", help="one report a round, in order")
        if mode == "e4":
            a.add_argument("--maxmemory", type=int, required=True)
        a.add_argument("--base", default="cairn")
        a.add_argument("--stats", nargs="?", const="", default=None, metavar="DIR",
                       help="read each server's <target>.stats beside each report (or in DIR)")
        a.add_argument("--note", action="append", default=[], help="a line for the summary (repeat)")
        a.add_argument("--strict", action="store_true", help="exit 1 if the base target lost a value or tiered nothing")
    s = sub.add_parser("sparkline")
    s.add_argument("values", nargs="*", type=float)
    args = ap.parse_args(argv)
    if args.cmd == "sparkline":
        print(sparkline(args.values))
        return 0
    reps = []
    for p in args.reports:
        with open(p) as f:
            reps.append(json.load(f))
    try:
        rep = merge_rounds(reps)
    except ValueError as e:
        print(f"bench_tier_report.py: {e}", file=sys.stderr)
        return 2
    stats = None
    if args.stats is not None:
        if args.stats and len(args.reports) > 1:
            print("bench_tier_report.py: --stats DIR takes one report; without DIR each report's own", file=sys.stderr)
            return 2
        stats = read_stats(args.reports, args.stats)
    if args.cmd == "e4":
        sys.stdout.write(e4_summary(rep, args.maxmemory, args.base, stats, args.note))
    else:
        sys.stdout.write(e5_summary(rep, args.base, stats, args.note))
    if args.strict:
        bad = strict_failures(rep, args.cmd, args.base, stats)
        for b in bad:
            print(f"FAILED: {b}", file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
