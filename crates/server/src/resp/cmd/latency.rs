//! LATENCY LATEST, HISTORY, RESET, GRAPH, DOCTOR and HELP over the
//! latency monitor (`crate::latency`), with Redis 7.0's replies (latency.c,
//! and sparkline.c for GRAPH), and LATENCY HISTOGRAM over the per-command
//! histograms (`crate::cmdlatency`; server.c `latencyAllCommandsFillCDF`).
use crate::config::AppendFsync;
use crate::exec::table::Def;
use crate::latency::Series;
use crate::resp::cmd::reply_help;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors::CmdError;

pub const COMMANDS: &[Def] = &[Def::container(
    "latency",
    &[
        Def::new("latest", latest),
        Def::new("history", history),
        Def::new("reset", reset),
        Def::new("graph", graph),
        Def::new("doctor", doctor),
        Def::new("help", help),
        Def::new("histogram", histogram),
    ],
)];

fn now_secs() -> u64 {
    cairn_engine::clock::now_ms() / 1000
}

/// LATENCY LATEST → for each event [name, unix time, latest ms, max ms].
fn latest(ctx: &mut Ctx) -> CmdResult {
    let events = ctx.shared.latency.snapshot();
    let mut w = ctx.reply();
    w.array(events.len());
    for (name, ts) in &events {
        let last = ts.last();
        w.array(4);
        w.bulk(name.as_bytes());
        w.int(last.time as i64);
        w.int(last.latency_ms as i64);
        w.int(ts.max_ms as i64);
    }
    Ok(())
}

/// LATENCY HISTORY event → [[unix time, ms], ...], oldest first; empty
/// for an event with no samples.
fn history(ctx: &mut Ctx) -> CmdResult {
    let series = ctx.shared.latency.get(ctx.arg(2));
    let samples: Vec<_> = series.iter().flat_map(|(_, ts)| ts.in_order()).collect();
    let mut w = ctx.reply();
    w.array(samples.len());
    for s in samples {
        w.array(2);
        w.int(s.time as i64);
        w.int(s.latency_ms as i64);
    }
    Ok(())
}

/// LATENCY RESET [event ...] → integer: how many series were dropped.
fn reset(ctx: &mut Ctx) -> CmdResult {
    let m = &ctx.shared.latency;
    let n = if ctx.argc() == 2 {
        m.reset(None)
    } else {
        ctx.args.iter_from(2).map(|e| m.reset(Some(e))).sum()
    };
    ctx.int(n as i64)
}

/// LATENCY GRAPH event → verbatim text: a sparkline of the samples, or
/// an error for an event with none.
fn graph(ctx: &mut Ctx) -> CmdResult {
    let Some((name, ts)) = ctx.shared.latency.get(ctx.arg(2)) else {
        return Err(CmdError::text(format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(ctx.arg(2))
        )));
    };
    let text = sparkline_graph(name, &ts, now_secs());
    ctx.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

/// The graph's width in columns (LATENCY_GRAPH_COLS).
const GRAPH_COLS: usize = 80;

/// latency.c `latencyCommandGenSparkeline`: a title, a rule, then the
/// samples as a filled sparkline 4 rows high, each labelled with how long
/// ago it was (`12s`, `3m`, `2h`, `1d`) written downwards.
fn sparkline_graph(name: &str, ts: &Series, now: u64) -> String {
    let samples: Vec<_> = ts.in_order().collect();
    let (min, max) = samples.iter().fold((u64::MAX, 0), |(lo, hi), s| {
        (lo.min(s.latency_ms), hi.max(s.latency_ms))
    });
    let min = if samples.is_empty() { 0 } else { min };
    let seq: Vec<(f64, String)> = samples
        .iter()
        .map(|s| {
            let elapsed = now as i64 - s.time as i64;
            let label = if elapsed < 60 {
                format!("{elapsed}s")
            } else if elapsed < 3600 {
                format!("{}m", elapsed / 60)
            } else if elapsed < 3600 * 24 {
                format!("{}h", elapsed / 3600)
            } else {
                format!("{}d", elapsed / (3600 * 24))
            };
            (s.latency_ms as f64, label)
        })
        .collect();
    let mut out = format!(
        "{name} - high {max} ms, low {min} ms (all time high {} ms)\n",
        ts.max_ms
    );
    out.push_str(&"-".repeat(GRAPH_COLS));
    out.push('\n');
    let mut j = 0;
    while j < seq.len() {
        let len = (seq.len() - j).min(GRAPH_COLS);
        if j != 0 {
            out.push('\n');
        }
        sparkline_range(&mut out, &seq, 4, j, len);
        j += GRAPH_COLS;
    }
    out
}

/// sparkline.c `sparklineRenderRange` with SPARKLINE_FILL: `rows` rows
/// of `_o#` and `|`, one blank row, then the labels top to bottom.
fn sparkline_range(out: &mut String, seq: &[(f64, String)], rows: i32, offset: usize, len: usize) {
    const FILL: [u8; 3] = *b"_o#";
    let charset_len = FILL.len() as i32;
    let (lo, hi) = seq.iter().fold((f64::MAX, f64::MIN), |(lo, hi), (v, _)| {
        (lo.min(*v), hi.max(*v))
    });
    let mut relmax = hi - lo;
    if relmax == 0.0 {
        relmax = 1.0;
    }
    let steps = charset_len * rows;
    let mut row = 0;
    let mut chars = vec![b' '; len];
    loop {
        let mut more = false;
        chars.fill(b' ');
        for j in 0..len {
            let (value, label) = &seq[j + offset];
            let relval = value - lo;
            let mut step = (((relval * steps as f64) as i32) as f64 / relmax) as i32;
            step = step.clamp(0, steps - 1);
            if row < rows {
                let idx = step - (rows - row - 1) * charset_len;
                more = true;
                if (0..charset_len).contains(&idx) {
                    chars[j] = FILL[idx as usize];
                } else if idx >= charset_len {
                    chars[j] = b'|';
                }
            } else {
                // One blank row between the graph and the labels.
                if row - rows < 1 {
                    more = true;
                    break;
                }
                let at = (row - rows - 1) as usize;
                if let Some(&c) = label.as_bytes().get(at) {
                    more = true;
                    chars[j] = c;
                }
            }
        }
        if !more {
            break;
        }
        row += 1;
        out.push_str(std::str::from_utf8(&chars).expect("ASCII"));
        out.push('\n');
    }
}

/// LATENCY DOCTOR → verbatim text: Redis's report on the recorded events
/// and its advice.
fn doctor(ctx: &mut Ctx) -> CmdResult {
    let (threshold, slower_than, fsync_always) = {
        let c = ctx.shared.config.read();
        (
            c.latency_monitor_threshold,
            c.slowlog_log_slower_than,
            c.appendfsync == AppendFsync::Always,
        )
    };
    let events = ctx.shared.latency.snapshot();
    let text = report(&events, threshold, slower_than, fsync_always, now_secs());
    ctx.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

/// latency.c `createLatencyReport`, for the events Cairn records.
fn report(
    events: &[(&str, Series)],
    threshold: u64,
    slower_than: i64,
    fsync_always: bool,
    now: u64,
) -> String {
    if events.is_empty() && threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis \
                instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in \
                order to enable it. If we weren't in a deep space mission I'd suggest to take a \
                look at https://redis.io/topics/latency-monitor.\n"
            .to_string();
    }
    let mut out = String::new();
    let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut large_objects, mut relax_fsync) = (false, false, false);
    let mut advices = 0;
    for (n, (event, ts)) in events.iter().enumerate() {
        if n == 0 {
            out.push_str(
                "Dave, I have observed latency spikes in this Redis instance. You don't mind \
                 talking about it, do you Dave?\n\n",
            );
        }
        let samples: Vec<_> = ts.in_order().collect();
        let count = samples.len() as u64;
        // Every series holds at least one sample (it is made by one).
        let avg = samples
            .iter()
            .map(|s| s.latency_ms)
            .sum::<u64>()
            .checked_div(count)
            .unwrap_or(0);
        let mad = samples
            .iter()
            .map(|s| (avg as i64 - s.latency_ms as i64).unsigned_abs())
            .sum::<u64>()
            .checked_div(count)
            .unwrap_or(0);
        let oldest = samples.iter().map(|s| s.time).min().unwrap_or(now);
        let period = if count > 0 {
            now.saturating_sub(oldest).max(1)
        } else {
            0
        };
        out.push_str(&format!(
            "{}. {event}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, \
             period {:.2} sec). Worst all time event {}ms.",
            n + 1,
            period as f64 / count as f64,
            ts.max_ms
        ));
        match *event {
            "command" => {
                if slower_than < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if (slower_than / 1000) as u64 > threshold {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "aof-fsync-always" => {
                relax_fsync = true;
                advices += 1;
            }
            _ => {}
        }
        out.push('\n');
    }
    if events.is_empty() && advices == 0 {
        out.push_str(
            "Dave, no latency spike was observed during the lifetime of this Redis instance, not \
             in the slightest bit. I honestly think you ought to sit down calmly, take a stress \
             pill, and think things over.\n",
        );
    } else if advices == 0 {
        out.push_str(
            "\nWhile there are latency events logged, I'm not able to suggest any easy fix. \
             Please use the Redis community to get some help, providing this report in your \
             help request.\n",
        );
    } else {
        out.push_str("\nI have a few advices for you:\n\n");
        if slowlog_enabled {
            out.push_str(&format!(
                "- There are latency issues with potentially slow commands you are using. Try to \
                 enable the Slow Log Redis feature using the command 'CONFIG SET \
                 slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to \
                 log slow commands execution for you.\n",
                threshold * 1000
            ));
        }
        if slowlog_tuning {
            out.push_str(&format!(
                "- Your current Slow Log configuration only logs events that are slower than \
                 your configured latency monitor threshold. Please use 'CONFIG SET \
                 slowlog-log-slower-than {}'.\n",
                threshold * 1000
            ));
        }
        if slowlog_inspect {
            out.push_str(
                "- Check your Slow Log to understand what are the commands you are running which \
                 are too slow to execute. Please check https://redis.io/commands/slowlog for more \
                 information.\n",
            );
        }
        if scheduler {
            out.push_str(
                "- The system is slow to execute Redis code paths not containing system calls. \
                 This usually means the system does not provide Redis CPU time to run for long \
                 periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / \
                 VM just for Redis if you are running other software in the same system.\n  3) \
                 Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli \
                 --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) \
                 Check if the problem is allocator-related by recompiling Redis with \
                 MALLOC=libc, if you are using Jemalloc. However this may create fragmentation \
                 problems.\n",
            );
        }
        if relax_fsync && fsync_always {
            out.push_str(
                "- Your fsync policy is set to 'always'. It is very hard to get good performances \
                 with such a setup, if possible try to relax the fsync policy to 'onesec'.\n",
            );
        }
        if large_objects {
            out.push_str(
                "- Deleting, expiring or evicting (because of maxmemory policy) large objects is \
                 a blocking operation. If you have very large objects that are often deleted, \
                 expired, or evicted, try to fragment those objects into multiple smaller \
                 objects.\n",
            );
        }
    }
    out
}

/// LATENCY HISTOGRAM [command ...] → map of full command name → map
/// {calls: n, histogram_usec: map of µs bucket → calls at or below it}
/// (RESP2: flat arrays), for the commands (or, for a container, its
/// subcommands too) that ran since the last reset; unknown names are left
/// out. No names: every command, in the command table's order (Redis
/// walks its command dict, in hash order).
fn histogram(ctx: &mut Ctx) -> CmdResult {
    let table = &ctx.shared.table;
    let mut picked = Vec::new();
    let mut add = |cmd: &crate::exec::table::Command| {
        if let Some(h) = crate::cmdlatency::read(ctx.shared, cmd.id) {
            picked.push((cmd.name, h));
        }
    };
    if ctx.argc() == 2 {
        for cmd in table.all() {
            add(cmd);
        }
    } else {
        for name in ctx.args.iter_from(2) {
            let Some(cmd) = super::server::lookup_full(table, name) else {
                continue;
            };
            add(cmd);
            let mut subs: Vec<usize> = cmd.subs.values().copied().collect();
            subs.sort_unstable();
            for id in subs {
                add(table.get(id));
            }
        }
    }
    let mut w = ctx.reply();
    w.map(picked.len());
    for (name, h) in picked {
        w.bulk(name.as_bytes());
        w.map(2);
        w.bulk(b"calls");
        w.int(h.calls() as i64);
        w.bulk(b"histogram_usec");
        let cdf = h.cdf();
        w.map(cdf.len());
        for (usec, calls) in cdf {
            w.int(usec as i64);
            w.int(calls as i64);
        }
    }
    Ok(())
}

/// LATENCY HELP → help lines.
fn help(ctx: &mut Ctx) -> CmdResult {
    reply_help(
        ctx,
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    )
}
