//! `cairn-bench get-set`: GET and SET exactly as `redis-benchmark -t set,get
//! -c C -P P -n N -r R -d D` issues them, so the two clients can be compared
//! on the same server in the same run (the issue's bar: at least 90% of
//! redis-benchmark's throughput, p50/p99 within 10%).
//!
//! Like redis-benchmark, C connections share one event loop (more with
//! `--client-threads`); each connection sends a pipeline of P commands with
//! fresh random keys `key:%012d` in `0..R`, and every reply of the pipeline
//! is given the latency from the start of the write to the first byte of
//! the answer. A test ends when N requests have been answered.
//! `--vs-redis-benchmark` runs redis-benchmark itself with the same options
//! against each RESP target, interleaved, and puts its figures beside.

use std::io::{self, Read, Write};
use std::net::TcpStream as StdStream;
use std::process::Command;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::cli::{make_ctx, parse_list, report_files, GetSetCmd};
use crate::report::{make_run, OpReport, Record, Run, ServerCpu, TargetInfo};
use crate::runner::{self, run_threads, thread_seed, Ctx, Outcome};
use crate::stats::{rate, Latency, Recorder};
use crate::sys;
use crate::target::{Protocol, Target};
use crate::wire::OpError;

const SET_NAMES: &[&str] = &["SET"];
const GET_NAMES: &[&str] = &["GET"];

/// Width of the random part of a key, as redis-benchmark's `__rand_int__`.
const KEY_DIGITS: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    Set,
    Get,
}

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::Set => "SET",
            Test::Get => "GET",
        }
    }
}

/// One command's bytes and where its key digits are.
pub struct Template {
    pub cmd: Vec<u8>,
    /// Offset of the key digits in `cmd`, if keys are random.
    pub key_at: Option<usize>,
}

/// Builds the command redis-benchmark sends for `test` (or the memcached
/// equivalent).
pub fn template(proto: Protocol, test: Test, random_keys: bool, data_size: usize) -> Template {
    let key: Vec<u8> = if random_keys {
        let mut k = b"key:".to_vec();
        k.extend(std::iter::repeat(b'0').take(KEY_DIGITS));
        k
    } else {
        b"key:__rand_int__".to_vec()
    };
    let value = benchmark_data(data_size);
    let mut cmd = Vec::new();
    let key_at;
    match proto {
        Protocol::Redis => {
            let name: &[u8] = if test == Test::Set { b"SET" } else { b"GET" };
            let n = if test == Test::Set { 3 } else { 2 };
            cmd.extend_from_slice(format!("*{n}\r\n${}\r\n", name.len()).as_bytes());
            cmd.extend_from_slice(name);
            cmd.extend_from_slice(format!("\r\n${}\r\n", key.len()).as_bytes());
            key_at = cmd.len() + 4;
            cmd.extend_from_slice(&key);
            cmd.extend_from_slice(b"\r\n");
            if test == Test::Set {
                cmd.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
                cmd.extend_from_slice(&value);
                cmd.extend_from_slice(b"\r\n");
            }
        }
        Protocol::Memcached => {
            cmd.extend_from_slice(if test == Test::Set { b"set " } else { b"get " });
            key_at = cmd.len() + 4;
            cmd.extend_from_slice(&key);
            if test == Test::Set {
                cmd.extend_from_slice(format!(" 0 0 {}\r\n", value.len()).as_bytes());
                cmd.extend_from_slice(&value);
            }
            cmd.extend_from_slice(b"\r\n");
        }
    }
    Template {
        cmd,
        key_at: random_keys.then_some(key_at),
    }
}

/// redis-benchmark 7's SET payload (`genBenchmarkRandomData`): an LCG from
/// the fixed state 1234, six bits a byte above '0'. The same for every key.
pub fn benchmark_data(n: usize) -> Vec<u8> {
    let mut state: u32 = 1234;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            b'0' + ((state >> 16) & 63) as u8
        })
        .collect()
}

/// Writes `v` as `KEY_DIGITS` zero-padded decimal digits.
#[inline]
pub fn put_digits(dst: &mut [u8], mut v: u64) {
    for i in (0..KEY_DIGITS).rev() {
        dst[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

struct Conn {
    sock: TcpStream,
    req: Vec<u8>,
    wlen: usize,
    written: usize,
    inflight: usize,
    pending: usize,
    errors: usize,
    error_text: Option<String>,
    start: Instant,
    first: Option<Instant>,
    rbuf: Vec<u8>,
    rlen: usize,
}

struct Params<'a> {
    target: &'a Target,
    tpl: &'a Template,
    pipeline: usize,
    keyspace: u64,
    timeout: Duration,
}

fn open(p: &Params, poll: &Poll, token: Token) -> io::Result<Conn> {
    let s = StdStream::connect_timeout(&p.target.addr, p.timeout.max(Duration::from_secs(1)))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let mut sock = TcpStream::from_std(s);
    poll.registry()
        .register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)?;
    let mut req = Vec::with_capacity(p.tpl.cmd.len() * p.pipeline);
    for _ in 0..p.pipeline {
        req.extend_from_slice(&p.tpl.cmd);
    }
    Ok(Conn {
        sock,
        req,
        wlen: 0,
        written: 0,
        inflight: 0,
        pending: 0,
        errors: 0,
        error_text: None,
        start: Instant::now(),
        first: None,
        rbuf: vec![0; 16 * 1024],
        rlen: 0,
    })
}

/// Starts a pipeline of `k` commands with fresh random keys.
fn issue(c: &mut Conn, p: &Params, k: usize, rng: &mut SmallRng) -> io::Result<()> {
    let len = p.tpl.cmd.len();
    if let Some(at) = p.tpl.key_at {
        for i in 0..k {
            let v = rng.random_range(0..p.keyspace);
            put_digits(&mut c.req[i * len + at..i * len + at + KEY_DIGITS], v);
        }
    }
    c.wlen = k * len;
    c.written = 0;
    c.inflight = k;
    c.pending = k;
    c.errors = 0;
    c.first = None;
    c.start = Instant::now();
    flush(c)
}

fn flush(c: &mut Conn) -> io::Result<()> {
    while c.written < c.wlen {
        match c.sock.write(&c.req[c.written..c.wlen]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => c.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads what is available and counts complete replies. Returns Err on a
/// broken connection or unparseable reply.
fn receive(c: &mut Conn, proto: Protocol) -> Result<(), OpError> {
    loop {
        if c.rlen == c.rbuf.len() {
            let n = c.rbuf.len() * 2;
            c.rbuf.resize(n, 0);
        }
        let space = c.rbuf.len() - c.rlen;
        match c.sock.read(&mut c.rbuf[c.rlen..]) {
            Ok(0) => return Err(OpError::Closed),
            Ok(n) => {
                if c.first.is_none() && c.inflight > 0 {
                    c.first = Some(Instant::now());
                }
                c.rlen += n;
                // A short read drained the socket; on Linux any later data
                // raises a new edge, so the read that would only say
                // WouldBlock is skipped (one syscall per reply, as
                // redis-benchmark does).
                if n < space {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut pos = 0;
    while c.pending > 0 {
        let r = match proto {
            Protocol::Redis => {
                crate::resp::skim(&c.rbuf[pos..c.rlen]).map(|o| o.map(|s| (s.len, s.error)))
            }
            Protocol::Memcached => {
                crate::memcache::skim(&c.rbuf[pos..c.rlen]).map(|o| o.map(|s| (s.len, s.error)))
            }
        };
        match r {
            Ok(Some((len, err))) => {
                if err {
                    c.errors += 1;
                    if c.error_text.is_none() {
                        let end = (pos + len).min(pos + 120);
                        c.error_text = Some(
                            String::from_utf8_lossy(&c.rbuf[pos..end])
                                .trim_end()
                                .to_string(),
                        );
                    }
                }
                pos += len;
                c.pending -= 1;
            }
            Ok(None) => break,
            Err(e) => return Err(OpError::Protocol(e)),
        }
    }
    if c.pending == 0 && pos < c.rlen {
        return Err(OpError::Protocol("more replies than requests".into()));
    }
    c.rbuf.copy_within(pos..c.rlen, 0);
    c.rlen -= pos;
    Ok(())
}

/// One event-loop thread: `conns` connections, `share` requests.
fn event_loop(
    p: &Params,
    conns_n: usize,
    share: u64,
    seed: u64,
    start: &mut runner::Start,
    rec: &mut Recorder,
) {
    let Ok(mut poll) = Poll::new() else {
        start.ready(rec);
        rec.err(0, &OpError::Io("cannot create poll".into()), share);
        return;
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut conns: Vec<Option<Conn>> = Vec::with_capacity(conns_n);
    let mut first_error = None;
    for i in 0..conns_n {
        match open(p, &poll, Token(i)) {
            Ok(c) => conns.push(Some(c)),
            Err(e) => {
                first_error.get_or_insert(e);
                conns.push(None);
            }
        }
    }
    start.ready(rec);
    if conns.iter().all(|c| c.is_none()) {
        let e = first_error.map_or(OpError::Closed, OpError::from);
        rec.err(0, &e, share);
        return;
    }
    let mut issued: u64 = 0;
    let mut finished: u64 = 0;
    let batch = |issued: u64| (share - issued).min(p.pipeline as u64) as usize;
    for c in conns.iter_mut().flatten() {
        if issued < share {
            let k = batch(issued);
            issued += k as u64;
            if let Err(e) = issue(c, p, k, &mut rng) {
                // Counted when the loop notices the dead connection.
                c.error_text = Some(e.to_string());
            }
        }
    }
    let mut events = Events::with_capacity(1024);
    let tick = (p.timeout / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
    let mut last_check = Instant::now();
    while finished < share {
        if poll.poll(&mut events, Some(tick)).is_err() {
            continue;
        }
        for ev in events.iter() {
            let i = ev.token().0;
            let Some(c) = conns[i].as_mut() else { continue };
            let mut failed = None;
            if ev.is_writable() && c.written < c.wlen {
                if let Err(e) = flush(c) {
                    failed = Some(OpError::from(e));
                }
            }
            if failed.is_none() && (ev.is_readable() || ev.is_read_closed()) {
                if let Err(e) = receive(c, p.test_proto()) {
                    failed = Some(e);
                }
            }
            if let Some(e) = failed {
                // The whole pipeline in flight is lost.
                if c.inflight > 0 {
                    rec.err(0, &e, c.inflight as u64);
                    finished += c.inflight as u64;
                }
                conns[i] = reopen(p, &poll, i, &mut issued, share, &mut rng);
                continue;
            }
            if c.inflight > 0 && c.pending == 0 {
                let now = Instant::now();
                let lat = c.first.unwrap_or(now).saturating_duration_since(c.start);
                let ok = (c.inflight - c.errors) as u64;
                if lat > p.timeout {
                    rec.err(0, &OpError::Timeout, c.inflight as u64);
                } else {
                    if ok > 0 {
                        rec.ok(0, lat, ok, ok, now);
                    }
                    if c.errors > 0 {
                        let text = c.error_text.take().unwrap_or_default();
                        rec.err(0, &OpError::Server(text), c.errors as u64);
                    }
                }
                finished += c.inflight as u64;
                c.inflight = 0;
                if issued < share {
                    let k = batch(issued);
                    issued += k as u64;
                    if let Err(e) = issue(c, p, k, &mut rng) {
                        rec.err(0, &OpError::from(e), k as u64);
                        finished += k as u64;
                        c.inflight = 0;
                        conns[i] = reopen(p, &poll, i, &mut issued, share, &mut rng);
                    }
                }
            }
        }
        let now = Instant::now();
        if now.duration_since(last_check) >= tick {
            last_check = now;
            for (i, slot) in conns.iter_mut().enumerate() {
                let expired = slot
                    .as_ref()
                    .is_some_and(|c| c.inflight > 0 && now.duration_since(c.start) > p.timeout);
                if expired {
                    let n = slot.as_ref().map_or(0, |c| c.inflight) as u64;
                    rec.err(0, &OpError::Timeout, n);
                    finished += n;
                    *slot = reopen(p, &poll, i, &mut issued, share, &mut rng);
                }
            }
            // Work left but no connection: account for it and stop.
            if conns.iter().all(|c| c.is_none()) && finished < share {
                let left = share - finished;
                rec.err(0, &OpError::Io("no connection to the server".into()), left);
                return;
            }
            if issued < share {
                // A connection that was down gets work again.
                for c in conns.iter_mut().flatten() {
                    if c.inflight == 0 && issued < share {
                        let k = batch(issued);
                        issued += k as u64;
                        if issue(c, p, k, &mut rng).is_err() {
                            rec.err(0, &OpError::Closed, k as u64);
                            finished += k as u64;
                            c.inflight = 0;
                        }
                    }
                }
            }
        }
    }
}

/// Replaces a failed connection and gives it a new pipeline.
fn reopen(
    p: &Params,
    poll: &Poll,
    i: usize,
    issued: &mut u64,
    share: u64,
    rng: &mut SmallRng,
) -> Option<Conn> {
    let mut c = open(p, poll, Token(i)).ok()?;
    if *issued < share {
        let k = (share - *issued).min(p.pipeline as u64) as usize;
        *issued += k as u64;
        if issue(&mut c, p, k, rng).is_err() {
            // Left for the time-out check to count.
            c.start = Instant::now() - p.timeout * 2;
        }
    }
    Some(c)
}

impl Params<'_> {
    fn test_proto(&self) -> Protocol {
        self.target.protocol
    }
}

#[allow(clippy::too_many_arguments)]
fn run_test(ctx: &Ctx, t: &Target, test: Test, a: &GetSetCmd, seed: u64, round: u32) -> Outcome {
    let tpl = template(t.protocol, test, a.keyspace > 0, a.data_size);
    let p = Params {
        target: t,
        tpl: &tpl,
        pipeline: a.pipeline,
        keyspace: a.keyspace.max(1),
        timeout: ctx.timeout,
    };
    let threads = a.client_threads.clamp(1, a.clients);
    let names = if test == Test::Set {
        SET_NAMES
    } else {
        GET_NAMES
    };
    let label = format!("{} {} r{round}", t.name, test.name());
    run_threads(
        ctx,
        t,
        &label,
        threads,
        Some(a.requests),
        names,
        |i, start, rec| {
            let conns = a.clients / threads + usize::from(i < a.clients % threads);
            let share =
                a.requests / threads as u64 + u64::from((i as u64) < a.requests % threads as u64);
            event_loop(&p, conns, share, thread_seed(seed, round, i), start, rec);
        },
    )
}

/// Runs redis-benchmark with the same options; its CSV becomes a [`Run`].
fn redis_benchmark(
    bin: &str,
    t: &Target,
    test: Test,
    a: &GetSetCmd,
    round: u32,
    name: &str,
) -> Result<Run, String> {
    let mut cmd = Command::new(bin);
    cmd.args(["-h", &t.addr.ip().to_string(), "-p", &t.port.to_string()])
        .args(["-c", &a.clients.to_string(), "-P", &a.pipeline.to_string()])
        .args([
            "-n",
            &a.requests.to_string(),
            "-d",
            &a.data_size.to_string(),
        ])
        .args(["-t", &test.name().to_ascii_lowercase(), "--csv"]);
    if a.keyspace > 0 {
        cmd.args(["-r", &a.keyspace.to_string()]);
    }
    if a.client_threads > 1 {
        cmd.args(["--threads", &a.client_threads.to_string()]);
    }
    if let Some(pw) = &t.password {
        cmd.args(["-a", pw]);
        if let Some(u) = &t.user {
            cmd.args(["--user", u]);
        }
    }
    if let Some(db) = t.db {
        cmd.args(["--dbnum", &db.to_string()]);
    }
    let started = sys::unix_now();
    let cpu0 = t.pid.and_then(sys::cpu_ticks);
    let t0 = Instant::now();
    let out = cmd.output().map_err(|e| format!("cannot run {bin}: {e}"))?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu1 = t.pid.and_then(sys::cpu_ticks);
    if !out.status.success() {
        return Err(format!(
            "{bin} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let l = parse_rb_csv(&text, test.name())
        .ok_or_else(|| format!("cannot parse {bin} output: {text:?}"))?;
    let rps = l.0;
    let duration = if rps > 0.0 {
        a.requests as f64 / rps
    } else {
        wall
    };
    let lat = l.1;
    let ops = a.requests;
    let server_cpu = match (t.pid, cpu0, cpu1) {
        (Some(pid), Some(x), Some(y)) => {
            let tck = sys::clk_tck();
            let secs = y.saturating_sub(x) as f64 / tck as f64;
            Some(ServerCpu {
                pid,
                cpu_seconds: secs,
                us_per_op: crate::stats::cpu_us_per_op(y.saturating_sub(x), tck, ops),
                percent: secs / wall * 100.0,
            })
        }
        _ => None,
    };
    Ok(Run {
        target: name.to_string(),
        phase: test.name().to_string(),
        round,
        threads: a.clients as u32,
        started_unix: started,
        duration_s: duration,
        ops,
        errors: 0,
        timeouts: 0,
        ops_per_sec: rate(ops, duration),
        unit: "ops".into(),
        units: ops,
        units_per_sec: rate(ops, duration),
        per_op: vec![OpReport {
            op: test.name().to_string(),
            ops,
            ops_per_sec: rate(ops, duration),
            latency: lat,
            errors: Default::default(),
            error_samples: Default::default(),
        }],
        timeline: vec![],
        server_cpu,
        extra: [("tool".to_string(), serde_json::json!(bin))]
            .into_iter()
            .collect(),
    })
}

/// Parses redis-benchmark 7's `--csv` output: the header, then
/// `"SET","rps","avg","min","p50","p95","p99","max"` (milliseconds).
pub fn parse_rb_csv(text: &str, test: &str) -> Option<(f64, Latency)> {
    for line in text.lines() {
        let f: Vec<&str> = line
            .split(',')
            .map(|x| x.trim().trim_matches('"'))
            .collect();
        if f.len() >= 8 && f[0].eq_ignore_ascii_case(test) {
            let n = |i: usize| f[i].parse::<f64>().ok();
            let ms = |i: usize| n(i).map(|v| v * 1000.0);
            return Some((
                n(1)?,
                Latency {
                    count: 0,
                    mean_us: ms(2)?,
                    min_us: ms(3)?,
                    p50_us: ms(4)?,
                    p95_us: ms(5)?,
                    p99_us: ms(6)?,
                    // redis-benchmark's CSV has no p99.9 (0 = unknown).
                    p999_us: 0.0,
                    max_us: ms(7)?,
                },
            ));
        }
    }
    None
}

pub fn command(a: GetSetCmd) -> Result<(), String> {
    let (mut ctx, pids) = make_ctx(&a.common)?;
    let tests: Vec<String> = parse_list(&a.tests, "--tests")?;
    let tests: Vec<Test> = tests
        .iter()
        .map(|t| match t.to_ascii_lowercase().as_str() {
            "set" => Ok(Test::Set),
            "get" => Ok(Test::Get),
            _ => Err(format!("--tests: {t:?} is not set or get")),
        })
        .collect::<Result<_, _>>()?;
    if a.clients == 0 || a.pipeline == 0 || a.requests == 0 || a.client_threads == 0 {
        return Err("-c, -P, -n and --client-threads must be at least 1".into());
    }
    let started = sys::unix_now();
    let mut infos = runner::prepare_targets(&mut ctx, &pids)?;
    let seed = runner::seed_base(&ctx);
    let mut records = Vec::new();
    let mut extra_targets: Vec<TargetInfo> = Vec::new();
    for round in 1..=ctx.rounds {
        for &test in &tests {
            for t in &ctx.targets {
                let out = run_test(&ctx, t, test, &a, seed, round);
                let run = make_run(
                    &t.name,
                    test.name(),
                    round,
                    a.clients as u32,
                    out.started_unix,
                    out.duration_s,
                    &out.merged,
                    "ops",
                    out.server_cpu,
                );
                ctx.say(&format!(
                    "{} {} round {round}: {} ops/s, p50 {} µs, p99 {} µs, {} errors",
                    t.name,
                    test.name(),
                    crate::report::thousands(run.ops_per_sec),
                    crate::report::micros(run.per_op.first().map_or(0.0, |o| o.latency.p50_us)),
                    crate::report::micros(run.per_op.first().map_or(0.0, |o| o.latency.p99_us)),
                    run.errors
                ));
                records.push(Record {
                    run,
                    merged: Some(out.merged),
                });
                if let (Some(bin), Protocol::Redis) = (&a.vs_redis_benchmark, t.protocol) {
                    let name = format!("{}:redis-benchmark", t.name);
                    let run = redis_benchmark(bin, t, test, &a, round, &name)?;
                    ctx.say(&format!(
                        "{name} {} round {round}: {} ops/s, p50 {} µs, p99 {} µs",
                        test.name(),
                        crate::report::thousands(run.ops_per_sec),
                        crate::report::micros(run.per_op[0].latency.p50_us),
                        crate::report::micros(run.per_op[0].latency.p99_us)
                    ));
                    if !extra_targets.iter().any(|x| x.name == name) {
                        let base = infos.iter().find(|i| i.name == t.name).cloned();
                        extra_targets.push(TargetInfo {
                            name: name.clone(),
                            url: t.url.clone(),
                            protocol: t.protocol,
                            server_version: base.and_then(|b| b.server_version),
                            pid: t.pid,
                            pid_source: t.pid_source.map(String::from),
                        });
                    }
                    records.push(Record { run, merged: None });
                }
            }
        }
    }
    // Each redis-benchmark line right after its target's.
    for x in extra_targets {
        let base = x.name.trim_end_matches(":redis-benchmark");
        let at = infos
            .iter()
            .position(|i| i.name == base)
            .map_or(infos.len(), |p| p + 1);
        infos.insert(at, x);
    }
    let config = serde_json::json!({
        "clients": a.clients,
        "pipeline": a.pipeline,
        "requests": a.requests,
        "keyspace": a.keyspace,
        "data_size": a.data_size,
        "tests": tests.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "client_threads": a.client_threads,
        "rounds": ctx.rounds,
        "timeout_s": ctx.timeout.as_secs_f64(),
        "vs_redis_benchmark": a.vs_redis_benchmark,
        "latency_definition": "from the start of a pipeline's write to the first byte of its answer, for every request of the pipeline (as redis-benchmark)",
    });
    let rep = runner::finish(&ctx, "get-set", infos, config, &records, vec![], started)?;
    if let Some(prefix) = &ctx.chart {
        let files = crate::cli::phases_chart(
            &ctx,
            prefix,
            "get-set",
            &format!(
                "GET/SET, {} connections, pipeline {}",
                a.clients, a.pipeline
            ),
            &rep.summary,
            None,
            false,
        )?;
        report_files(&ctx, &files);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_redis_benchmark() {
        let t = template(Protocol::Redis, Test::Set, true, 3);
        assert_eq!(
            t.cmd,
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000000\r\n$3\r\nVXK\r\n"
        );
        let mut cmd = t.cmd.clone();
        let at = t.key_at.unwrap();
        put_digits(&mut cmd[at..at + KEY_DIGITS], 42);
        assert_eq!(
            cmd,
            b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000042\r\n$3\r\nVXK\r\n"
        );
        // What redis-benchmark 7.0 stores for -d 8.
        assert_eq!(benchmark_data(8), b"VXKeHogK");
        let t = template(Protocol::Redis, Test::Get, false, 3);
        assert_eq!(t.cmd, b"*2\r\n$3\r\nGET\r\n$16\r\nkey:__rand_int__\r\n");
        assert_eq!(t.key_at, None);
        let t = template(Protocol::Memcached, Test::Set, true, 2);
        assert_eq!(t.cmd, b"set key:000000000000 0 0 2\r\nVX\r\n");
        assert_eq!(
            &t.cmd[t.key_at.unwrap()..t.key_at.unwrap() + 12],
            b"000000000000"
        );
        let t = template(Protocol::Memcached, Test::Get, true, 2);
        assert_eq!(t.cmd, b"get key:000000000000\r\n");
    }

    #[test]
    fn parses_redis_benchmark_csv() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"SET\",\"52356.02\",\"0.503\",\"0.104\",\"0.479\",\"0.711\",\"0.999\",\"3.151\"\n";
        let (rps, l) = parse_rb_csv(csv, "SET").unwrap();
        assert_eq!(rps, 52356.02);
        assert!((l.p50_us - 479.0).abs() < 1e-9);
        assert!((l.p99_us - 999.0).abs() < 1e-9);
        assert!((l.max_us - 3151.0).abs() < 1e-9);
        assert!(parse_rb_csv(csv, "GET").is_none());
    }
}
