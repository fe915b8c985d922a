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
//!
//! `--target-rate R` paces the requests to R per second (see [`Pacer`]).
//! `--equal-load [paced|closed|concurrent]` runs cairn-bench at
//! redis-benchmark's load and compares the two clients' p50/p99
//! ([`check_latency`]): after it, paced to the rate it reached or both
//! closed-loop at the same concurrency, or both at once against the one
//! server ([`EqualLoad`]). The two clients
//! time the same interval: redis-benchmark 7 reads the clock in its
//! `writeHandler` right before the write of a fresh pipeline and on entry to
//! its `readHandler`, before reading; cairn-bench does the same (see
//! [`receive`]), and its percentiles are compared at redis-benchmark's
//! histogram resolution ([`at_rb_resolution`]). Each run also records the
//! client's own CPU: a single-threaded client that is busy all the time
//! leaves replies waiting in its sockets, and that wait is inside its
//! timed interval; redis-benchmark unpipelined at 50 connections is such a
//! client, so its latency there is mostly its own (see BENCHMARKS.md).
//! `--defer-writes` sends a connection's next pipeline after the rest of
//! the poll round, as redis-benchmark's event loop does. `--rx-timestamps`
//! ends each interval at the kernel's receive stamp of the reply instead
//! (what a packet capture on loopback sees; BENCHMARKS.md, "Latency
//! against the wire"), leaving out the reply's wait in this client.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream as StdStream;
use std::os::fd::{AsRawFd, RawFd};
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
        k.extend(std::iter::repeat_n(b'0', KEY_DIGITS));
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

/// "00" "01" … "99": two digits per division halves the key formatting
/// cost (it was a third of get-set's client instructions per request).
const DIGIT_PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Writes `v` as `KEY_DIGITS` zero-padded decimal digits (its low 12
/// digits, as redis-benchmark's `%012zu` of a value below 10^12).
#[inline]
pub fn put_digits(dst: &mut [u8], mut v: u64) {
    let dst = &mut dst[..KEY_DIGITS];
    for i in (0..KEY_DIGITS / 2).rev() {
        let pair = DIGIT_PAIRS[(v % 100) as usize];
        dst[2 * i..2 * i + 2].copy_from_slice(&pair);
        v /= 100;
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
    /// Requests per second for this event-loop thread, if paced.
    rate: Option<f64>,
    /// A connection whose replies are complete writes its next pipeline
    /// only after every other event of the same poll round is handled, as
    /// redis-benchmark's ae loop does (its `resetClient` re-arms the
    /// writable event, served by the next `epoll_wait`). The server then
    /// gets the requests in the same bursts, and, as in redis-benchmark,
    /// the rest of the round is outside the timed interval.
    defer_writes: bool,
    /// End intervals at the kernel's receive stamp ([`read_stamped`]).
    rx_timestamps: bool,
}

/// Paces one event loop to a request rate while staying closed-loop: the
/// pipeline that starts with the thread's m-th request is not sent before
/// `start + m / rate`, and, as without pacing, not before its connection's
/// previous pipeline is answered. A loop that falls behind catches up
/// without waiting (as YCSB's throttle), so the long-run rate is the target
/// whenever the server can sustain it.
///
/// Latency is still measured from the *actual* start of the write (as
/// redis-benchmark measures it, closed-loop), not from the intended send
/// time: a request held back by the pacer is not yet sent, and one sent late
/// because the loop fell behind is timed from when it went out. That keeps
/// the two clients' figures comparable; it does not correct coordinated
/// omission (neither does redis-benchmark).
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    start: Instant,
    /// Seconds per request.
    per_request: f64,
}

impl Pacer {
    /// A pacer for `rate` requests per second; `None` for no pacing (a
    /// rate that is not a positive finite number).
    pub fn new(rate: Option<f64>, start: Instant) -> Option<Pacer> {
        let r = rate.filter(|r| r.is_finite() && *r > 0.0)?;
        Some(Pacer {
            start,
            per_request: 1.0 / r,
        })
    }

    /// When the request numbered `issued` (0-based, in this loop) is due.
    #[inline]
    pub fn due(&self, issued: u64) -> Instant {
        // f64 seconds: exact enough (ns) for any run shorter than days.
        self.start + Duration::from_secs_f64((issued as f64 * self.per_request).min(1e9))
    }

    /// How long to wait at `now` before request `issued` may go out.
    #[inline]
    pub fn wait(&self, issued: u64, now: Instant) -> Duration {
        self.due(issued).saturating_duration_since(now)
    }
}

/// A one-shot monotonic timer the event loop polls like a socket, so a
/// paced loop wakes when the next request is due with microsecond
/// precision (a poll time-out is rounded up to whole milliseconds, which
/// would send a paced pipeline up to 1 ms late and then a burst to catch
/// up) without sleeping while replies of other connections arrive.
struct PaceTimer {
    fd: libc::c_int,
    /// The due time it is armed for.
    armed: Option<Instant>,
}

/// The poll token of the pacing timer (connections use 0..conns).
const TIMER: Token = Token(usize::MAX - 1);

impl PaceTimer {
    fn new(poll: &Poll) -> io::Result<PaceTimer> {
        // SAFETY: plain syscall; the result is checked.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let t = PaceTimer { fd, armed: None };
        poll.registry()
            .register(&mut mio::unix::SourceFd(&t.fd), TIMER, Interest::READABLE)?;
        Ok(t)
    }

    /// Fires once at `due` (now + `wait`); a no-op if already armed for it.
    fn arm(&mut self, due: Instant, wait: Duration) {
        if self.armed == Some(due) {
            return;
        }
        // A zero it_value would disarm: at least 1 ns.
        let wait = wait.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs().min(i32::MAX as u64) as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid fd and pointers; the old value is not asked for.
        let rc = unsafe { libc::timerfd_settime(self.fd, 0, &spec, std::ptr::null_mut()) };
        self.armed = (rc == 0).then_some(due);
    }

    /// Clears the expiry count (so the next expiry is a new edge).
    fn fired(&mut self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a local buffer; EAGAIN is fine.
        unsafe {
            libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len());
        }
        self.armed = None;
    }
}

impl Drop for PaceTimer {
    fn drop(&mut self) {
        // SAFETY: the fd is ours and closed once.
        unsafe {
            libc::close(self.fd);
        }
    }
}

/// The per-thread share of a total rate over `threads` event loops.
pub fn thread_rate(total: Option<f64>, threads: usize) -> Option<f64> {
    total
        .filter(|r| r.is_finite() && *r > 0.0)
        .map(|r| r / threads.max(1) as f64)
}

fn open(p: &Params, poll: &Poll, token: Token) -> io::Result<Conn> {
    let s = StdStream::connect_timeout(&p.target.addr, p.timeout.max(Duration::from_secs(1)))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    if p.rx_timestamps {
        enable_rx_timestamps(&s)?;
    }
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
///
/// The end of a pipeline's latency is the clock read when its connection's
/// readiness is handled, *before* the read: redis-benchmark 7's
/// `readHandler` takes `ustime()` on entry, before `redisBufferRead`, so
/// neither the read syscall nor parsing is inside either client's interval.
///
/// With `rx_timestamps` the end is instead the kernel's receive time of
/// the reply bytes read first (see [`read_stamped`]), carried over to the
/// monotonic clock of `start`.
fn receive(c: &mut Conn, proto: Protocol, rx_timestamps: bool) -> Result<(), OpError> {
    let woke = Instant::now();
    loop {
        if c.rlen == c.rbuf.len() {
            let n = c.rbuf.len() * 2;
            c.rbuf.resize(n, 0);
        }
        let space = c.rbuf.len() - c.rlen;
        let got = if rx_timestamps {
            read_stamped(c.sock.as_raw_fd(), &mut c.rbuf[c.rlen..])
        } else {
            c.sock.read(&mut c.rbuf[c.rlen..]).map(|n| (n, None))
        };
        match got {
            Ok((0, _)) => return Err(OpError::Closed),
            Ok((n, stamp)) => {
                if c.first.is_none() && c.inflight > 0 {
                    c.first = Some(stamp.map_or(woke, rx_instant));
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

/// Asks the kernel to stamp every received segment (SO_TIMESTAMPNS,
/// CLOCK_REALTIME), for [`read_stamped`]. Linux turns stamping on for the
/// stack a moment after the first socket asks, so the first replies of a
/// run may come unstamped: their intervals end at the loop's clock read,
/// as without the option.
fn enable_rx_timestamps(s: &StdStream) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option value of the given size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `read` through `recvmsg`, also returning the kernel's receive stamp of
/// the data (CLOCK_REALTIME) when the socket has SO_TIMESTAMPNS on. For
/// TCP, Linux reports the stamp of the last segment the call consumed:
/// the first reply segment's own stamp when one read takes one segment
/// (an unpipelined reply, or a pipeline's replies written at once), a
/// later one when several queued segments are read together.
fn read_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // Room for one timespec control message (aligned as cmsghdr).
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr is plain data; zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        // SAFETY: iov points into `buf` and the control buffer is ours,
        // both alive for the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut stamp = None;
        // SAFETY: the kernel filled msg_control up to msg_controllen; the
        // CMSG macros stay inside it, and the data of an SCM_TIMESTAMPNS
        // message is one timespec (read unaligned).
        unsafe {
            let mut cm = libc::CMSG_FIRSTHDR(&msg);
            while !cm.is_null() {
                if (*cm).cmsg_level == libc::SOL_SOCKET && (*cm).cmsg_type == libc::SCM_TIMESTAMPNS
                {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cm).cast());
                    if ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec) {
                        stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                    }
                }
                cm = libc::CMSG_NXTHDR(&msg, cm);
            }
        }
        return Ok((n as usize, stamp));
    }
}

/// A CLOCK_REALTIME kernel stamp as an [`Instant`]: the monotonic now
/// less how long ago the stamp was by the real-time clock, both read
/// together (the two clocks advance at the same rate over microseconds).
fn rx_instant(stamp: Duration) -> Instant {
    let now = Instant::now();
    let real_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    back_to(now, real_now, stamp)
}

/// `now` moved back by `real_now - stamp`; a stamp after `real_now` (the
/// real-time clock stepped back) gives `now`.
fn back_to(now: Instant, real_now: Duration, stamp: Duration) -> Instant {
    now.checked_sub(real_now.saturating_sub(stamp))
        .unwrap_or(now)
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
    let pacer = Pacer::new(p.rate, Instant::now());
    // Connections with nothing in flight, waiting for the pacer (FIFO).
    let mut idle: VecDeque<usize> = VecDeque::with_capacity(conns_n);
    // Connections to write after this poll round (`defer_writes`).
    let mut deferred: Vec<usize> = Vec::with_capacity(conns_n);
    for (i, c) in conns.iter_mut().enumerate() {
        let Some(c) = c.as_mut() else { continue };
        if issued < share {
            if pacer.is_some_and(|pc| !pc.wait(issued, Instant::now()).is_zero()) {
                idle.push_back(i);
                continue;
            }
            let k = batch(issued);
            issued += k as u64;
            if let Err(e) = issue(c, p, k, &mut rng) {
                // Counted when the loop notices the dead connection.
                c.error_text = Some(e.to_string());
            }
        }
    }
    // Sends connection `i` its next pipeline of `k` (`send_or_reopen`).
    macro_rules! send {
        ($i:expr, $k:expr) => {
            send_or_reopen(
                &mut conns,
                $i,
                $k,
                p,
                &poll,
                share,
                &mut issued,
                &mut finished,
                &mut rng,
                rec,
            )
        };
    }
    let mut events = Events::with_capacity(1024);
    let tick = (p.timeout / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
    let mut last_check = Instant::now();
    // Without a timer (timerfd refused) pacing falls back to the poll
    // time-out's millisecond resolution.
    let mut timer = pacer.and_then(|_| PaceTimer::new(&poll).ok());
    while finished < share {
        let mut wait = tick;
        if let (Some(pc), false) = (pacer, idle.is_empty()) {
            let now = Instant::now();
            let w = pc.wait(issued, now);
            match timer.as_mut() {
                Some(t) if !w.is_zero() => t.arm(pc.due(issued), w),
                _ => wait = wait.min(w),
            }
        }
        if poll.poll(&mut events, Some(wait)).is_err() {
            continue;
        }
        for ev in events.iter() {
            if ev.token() == TIMER {
                if let Some(t) = timer.as_mut() {
                    t.fired();
                }
                continue;
            }
            let i = ev.token().0;
            let Some(c) = conns[i].as_mut() else { continue };
            let mut failed = None;
            if ev.is_writable() && c.written < c.wlen {
                if let Err(e) = flush(c) {
                    failed = Some(OpError::from(e));
                }
            }
            if failed.is_none() && (ev.is_readable() || ev.is_read_closed()) {
                if let Err(e) = receive(c, p.test_proto(), p.rx_timestamps) {
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
                if issued < share && pacer.is_some_and(|pc| pc.due(issued) > now) {
                    idle.push_back(i);
                } else if issued < share && p.defer_writes {
                    deferred.push(i);
                } else if issued < share {
                    let k = batch(issued);
                    issued += k as u64;
                    send!(i, k);
                }
            }
        }
        // Connections whose next pipeline waited for the end of the round.
        for i in deferred.drain(..) {
            let Some(c) = conns[i].as_mut() else { continue };
            if c.inflight > 0 || issued >= share {
                continue;
            }
            let k = batch(issued);
            issued += k as u64;
            send!(i, k);
        }
        // Paced connections whose turn has come.
        if let Some(pc) = pacer {
            let now = Instant::now();
            while issued < share && pc.due(issued) <= now {
                let Some(i) = idle.pop_front() else { break };
                let Some(c) = conns[i].as_mut() else { continue };
                if c.inflight > 0 {
                    continue;
                }
                let k = batch(issued);
                issued += k as u64;
                send!(i, k);
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
            if issued < share && pacer.is_none() {
                // A connection that was down gets work again (paced loops
                // hand work out through `idle`).
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

/// Sends connection `i` its next pipeline of `k` requests (already
/// counted in `issued`). A failed send loses the pipeline: it is counted as
/// errors and as `finished`, and the connection is replaced (`reopen`).
#[allow(clippy::too_many_arguments)]
fn send_or_reopen(
    conns: &mut [Option<Conn>],
    i: usize,
    k: usize,
    p: &Params,
    poll: &Poll,
    share: u64,
    issued: &mut u64,
    finished: &mut u64,
    rng: &mut SmallRng,
    rec: &mut Recorder,
) {
    let Some(c) = conns[i].as_mut() else {
        return;
    };
    if let Err(e) = issue(c, p, k, rng) {
        rec.err(0, &OpError::from(e), k as u64);
        *finished += k as u64;
        c.inflight = 0;
        conns[i] = reopen(p, poll, i, issued, share, rng);
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

/// One test against one target; `rate` (total requests per second) paces
/// it, see [`Pacer`].
#[allow(clippy::too_many_arguments)]
fn run_test(
    ctx: &Ctx,
    t: &Target,
    test: Test,
    a: &GetSetCmd,
    seed: u64,
    round: u32,
    rate: Option<f64>,
) -> Outcome {
    let tpl = template(t.protocol, test, a.keyspace > 0, a.data_size);
    let threads = a.client_threads.clamp(1, a.clients);
    let p = Params {
        target: t,
        tpl: &tpl,
        pipeline: a.pipeline,
        keyspace: a.keyspace.max(1),
        timeout: ctx.timeout,
        rate: thread_rate(rate, threads),
        defer_writes: a.defer_writes || a.equal_load == Some(EqualLoad::Closed),
        rx_timestamps: a.rx_timestamps,
    };
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
/// `during`, if any, runs while redis-benchmark does (`--equal-load
/// concurrent`).
fn redis_benchmark(
    bin: &str,
    t: &Target,
    test: Test,
    a: &GetSetCmd,
    round: u32,
    name: &str,
    during: Option<&mut dyn FnMut()>,
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
    let own0 = sys::cpu_seconds(sys::Who::Children);
    let t0 = Instant::now();
    let child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {bin}: {e}"))?;
    if let Some(f) = during {
        f();
    }
    // Its output is a CSV line and a progress line per 250 ms: the pipes
    // do not fill while `during` runs.
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot run {bin}: {e}"))?;
    let wall = t0.elapsed().as_secs_f64();
    let own1 = sys::cpu_seconds(sys::Who::Children);
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
            .chain(client_cpu(own0, own1, wall, a.client_threads, ops))
            .collect(),
    })
}

/// A client's CPU figures for a run's `extra`: seconds, µs per request,
/// and busy (CPU over wall time per client thread, see [`CLIENT_BOUND`]).
pub(crate) fn client_cpu(
    before: Option<f64>,
    after: Option<f64>,
    wall_s: f64,
    threads: usize,
    ops: u64,
) -> Vec<(String, serde_json::Value)> {
    let (Some(x), Some(y)) = (before, after) else {
        return Vec::new();
    };
    let cpu = (y - x).max(0.0);
    let mut v = vec![("client_cpu_s".to_string(), serde_json::json!(cpu))];
    if ops > 0 {
        v.push((
            "client_cpu_us_per_op".to_string(),
            serde_json::json!(cpu * 1e6 / ops as f64),
        ));
    }
    if wall_s > 0.0 {
        v.push((
            "client_busy".to_string(),
            serde_json::json!(cpu / wall_s / threads.max(1) as f64),
        ));
    }
    v
}

/// Runs redis-benchmark against `t`, says its figures, and registers its
/// report target (`<name>:redis-benchmark`) once.
#[allow(clippy::too_many_arguments)]
fn run_redis_benchmark(
    ctx: &Ctx,
    bin: &str,
    t: &Target,
    test: Test,
    a: &GetSetCmd,
    round: u32,
    infos: &[TargetInfo],
    extra_targets: &mut Vec<TargetInfo>,
    during: Option<&mut dyn FnMut()>,
) -> Result<Run, String> {
    let name = format!("{}:redis-benchmark", t.name);
    let run = redis_benchmark(bin, t, test, a, round, &name, during)?;
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
            name,
            url: t.url.clone(),
            protocol: t.protocol,
            server_version: base.and_then(|b| b.server_version),
            pid: t.pid,
            pid_source: t.pid_source.map(String::from),
        });
    }
    Ok(run)
}

/// Relative tolerance of the latency bar (issue 4: within 10% at p50 and
/// p99 at the same load).
pub const LATENCY_TOLERANCE: f64 = 0.10;
/// How far apart the two clients' rates may be and the loads still count
/// as the same.
pub const RATE_TOLERANCE: f64 = 0.05;
/// A client thread busier than this (CPU over wall time) is its own
/// bottleneck: replies wait in its socket while it serves other
/// connections, and that wait is inside its timed interval.
pub const CLIENT_BOUND: f64 = 0.90;

/// How `--equal-load` puts cairn-bench at redis-benchmark's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EqualLoad {
    /// cairn-bench paced evenly ([`Pacer`]) to the rate redis-benchmark
    /// reached. The same load when requests do not queue behind each other
    /// (one connection, or a server far from busy); a saturated closed-loop
    /// redis-benchmark sends in bursts, so its requests queue where evenly
    /// paced ones do not.
    Paced,
    /// Both clients closed-loop and unpaced with the same connections,
    /// pipeline and threads, cairn-bench with redis-benchmark's write
    /// rounds (`--defer-writes`, implied). The loads are the same when the throughputs
    /// are (within [`RATE_TOLERANCE`]): the same requests in flight at the
    /// same rate spend, by Little's law, the same mean time in the system.
    /// That holds when the server, not either client, is the bottleneck
    /// (pipelined runs).
    Closed,
    /// Both clients at once, each with the same options, against the same
    /// server: each times its own requests under the one combined load, so
    /// drift of the machine between runs cancels out. The same load while
    /// both run: both get the same -n, so their runs overlap by the ratio
    /// of their rates, which must be within [`OVERLAP_TOLERANCE`].
    Concurrent,
}

/// `concurrent`: the slower client's rate at least this share below the
/// faster's (the runs overlap by at least 90%).
pub const OVERLAP_TOLERANCE: f64 = 0.10;

/// What redis-benchmark 7 would print for a latency of `us` µs: it records
/// whole microseconds (`ustime()` differences) in an HDR histogram made by
/// `hdr_init(10, 3000000, 3)`, whose unit is 8 µs (the power of two at or
/// below the lowest value 10) with 2048 sub-buckets, and reports a
/// percentile as the highest value of its bucket: 8 µs steps up to
/// 16,383 µs, 16 µs steps to 32,767 µs, and so on. cairn-bench's own
/// histogram resolves 0.1%, so its percentile is mapped the same way
/// before the two are compared (the map is monotonic, so the percentile of
/// the mapped samples is the mapped percentile, to ±1 µs of rounding). At
/// a 40 µs p50 the map alone moves a figure by up to 7 µs, 18%.
pub fn at_rb_resolution(us: f64) -> f64 {
    if !us.is_finite() || us < 0.0 {
        return us;
    }
    let mut width = 8.0f64;
    while us >= 2048.0 * width && width < 1e12 {
        width *= 2.0;
    }
    (us / width).floor() * width + width - 1.0
}

/// One client's side of a comparison.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub ops_per_sec: f64,
    pub latency: &'a Latency,
    /// CPU seconds over wall seconds per client thread, if known.
    pub busy: Option<f64>,
}

/// cairn-bench's latency against redis-benchmark's at the same load.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencyCheck {
    pub target: String,
    pub test: String,
    /// 0 for the median over the rounds.
    pub round: u32,
    pub mode: EqualLoad,
    pub rb_ops_per_sec: f64,
    pub cb_ops_per_sec: f64,
    pub rb_p50_us: f64,
    /// cairn-bench's own figure.
    pub cb_p50_us: f64,
    /// The same at redis-benchmark's resolution ([`at_rb_resolution`]):
    /// the figure compared.
    pub cb_p50_rb_us: f64,
    /// (cairn-bench - redis-benchmark) / redis-benchmark, at
    /// redis-benchmark's resolution.
    pub p50_diff: Option<f64>,
    pub rb_p99_us: f64,
    pub cb_p99_us: f64,
    pub cb_p99_rb_us: f64,
    pub p99_diff: Option<f64>,
    /// Client CPU over wall time per client thread.
    pub rb_busy: Option<f64>,
    pub cb_busy: Option<f64>,
    /// The two rates within [`RATE_TOLERANCE`]: only then are the loads
    /// equal.
    pub same_load: bool,
    /// redis-benchmark at or above [`CLIENT_BOUND`]: its figures include
    /// its own queueing.
    pub rb_client_bound: bool,
    /// Both percentiles within [`LATENCY_TOLERANCE`].
    pub agrees: bool,
}

/// `(cb - rb) / rb`; `None` when the reference is not positive.
pub fn rel_diff(cb: f64, rb: f64) -> Option<f64> {
    (rb > 0.0 && rb.is_finite() && cb.is_finite()).then(|| (cb - rb) / rb)
}

/// Whether two runs were at the same load: rates within
/// [`RATE_TOLERANCE`] (one after the other), or, run at once, overlapping
/// by all but [`OVERLAP_TOLERANCE`] of the longer run.
pub fn same_load(mode: EqualLoad, rb_ops: f64, cb_ops: f64) -> bool {
    if !(rb_ops > 0.0 && cb_ops > 0.0 && rb_ops.is_finite() && cb_ops.is_finite()) {
        return false;
    }
    match mode {
        EqualLoad::Paced | EqualLoad::Closed => {
            ((cb_ops - rb_ops) / rb_ops).abs() <= RATE_TOLERANCE + 1e-12
        }
        EqualLoad::Concurrent => {
            rb_ops.min(cb_ops) / rb_ops.max(cb_ops) >= 1.0 - OVERLAP_TOLERANCE - 1e-12
        }
    }
}

/// Compares one pair of runs, redis-benchmark's then cairn-bench's.
pub fn check_latency(
    target: &str,
    test: &str,
    round: u32,
    mode: EqualLoad,
    rb: Side,
    cb: Side,
) -> LatencyCheck {
    let cb_p50_rb = at_rb_resolution(cb.latency.p50_us);
    let cb_p99_rb = at_rb_resolution(cb.latency.p99_us);
    let p50_diff = rel_diff(cb_p50_rb, rb.latency.p50_us);
    let p99_diff = rel_diff(cb_p99_rb, rb.latency.p99_us);
    let within = |d: Option<f64>| d.is_some_and(|d| d.abs() <= LATENCY_TOLERANCE + 1e-12);
    LatencyCheck {
        target: target.to_string(),
        test: test.to_string(),
        round,
        mode,
        rb_ops_per_sec: rb.ops_per_sec,
        cb_ops_per_sec: cb.ops_per_sec,
        rb_p50_us: rb.latency.p50_us,
        cb_p50_us: cb.latency.p50_us,
        cb_p50_rb_us: cb_p50_rb,
        p50_diff,
        rb_p99_us: rb.latency.p99_us,
        cb_p99_us: cb.latency.p99_us,
        cb_p99_rb_us: cb_p99_rb,
        p99_diff,
        rb_busy: rb.busy,
        cb_busy: cb.busy,
        same_load: same_load(mode, rb.ops_per_sec, cb.ops_per_sec),
        rb_client_bound: rb.busy.is_some_and(|b| b >= CLIENT_BOUND),
        agrees: within(p50_diff) && within(p99_diff),
    }
}

impl LatencyCheck {
    /// One line's verdict.
    pub fn verdict(&self) -> &'static str {
        match (self.same_load, self.agrees, self.rb_client_bound) {
            (false, _, _) if self.mode == EqualLoad::Concurrent => {
                "NOT SAME LOAD (the runs overlap by less than 90%)"
            }
            (false, _, _) => "NOT SAME LOAD (rates differ by more than 5%)",
            (true, true, _) => "ok (within 10%)",
            (true, false, true) => {
                "DIFFERS BY MORE THAN 10% (redis-benchmark client-bound: its own queueing is in its figures)"
            }
            (true, false, false) => "DIFFERS BY MORE THAN 10%",
        }
    }
}

/// Per target and test, the check of the rounds' medians (round 0).
pub fn median_checks(checks: &[LatencyCheck]) -> Vec<LatencyCheck> {
    let mut keys: Vec<(&str, &str, EqualLoad)> = Vec::new();
    for c in checks {
        let k = (c.target.as_str(), c.test.as_str(), c.mode);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(target, test, mode)| {
            let of: Vec<&LatencyCheck> = checks
                .iter()
                .filter(|c| c.target == target && c.test == test && c.mode == mode && c.round > 0)
                .collect();
            let med = |f: &dyn Fn(&LatencyCheck) -> f64| {
                crate::stats::median(&of.iter().map(|c| f(c)).collect::<Vec<_>>()).unwrap_or(0.0)
            };
            let med_opt = |f: &dyn Fn(&LatencyCheck) -> Option<f64>| {
                crate::stats::median(&of.iter().filter_map(|c| f(c)).collect::<Vec<_>>())
            };
            let rb_lat = Latency {
                p50_us: med(&|c| c.rb_p50_us),
                p99_us: med(&|c| c.rb_p99_us),
                ..Latency::default()
            };
            let cb_lat = Latency {
                p50_us: med(&|c| c.cb_p50_us),
                p99_us: med(&|c| c.cb_p99_us),
                ..Latency::default()
            };
            check_latency(
                target,
                test,
                0,
                mode,
                Side {
                    ops_per_sec: med(&|c| c.rb_ops_per_sec),
                    latency: &rb_lat,
                    busy: med_opt(&|c| c.rb_busy),
                },
                Side {
                    ops_per_sec: med(&|c| c.cb_ops_per_sec),
                    latency: &cb_lat,
                    busy: med_opt(&|c| c.cb_busy),
                },
            )
        })
        .collect()
}

/// The equal-load table: one line per round, then the medians.
pub fn render_checks(checks: &[LatencyCheck]) -> String {
    let pct = |d: Option<f64>| d.map_or("n/a".to_string(), |d| format!("{:+.1}%", d * 100.0));
    let busy = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.0}%", b * 100.0));
    let mut out = String::new();
    let mut modes: Vec<EqualLoad> = checks.iter().map(|c| c.mode).collect();
    modes.dedup();
    for m in modes {
        out.push_str(match m {
            EqualLoad::Paced => "equal load (paced): cairn-bench paced to redis-benchmark's measured rate",
            EqualLoad::Closed => "equal load (closed): both clients closed-loop, same connections; same load if the rates agree within 5%",
            EqualLoad::Concurrent => "equal load (concurrent): both clients at once against the server, same options each; same load while both run (overlap 90%+)",
        });
        out.push('\n');
    }
    out.push_str(
        "latency from the write to the reply's readiness (both clients); cb percentiles at redis-benchmark's resolution (8 µs steps below 16 ms); busy = client CPU / wall per thread\n",
    );
    out.push_str(&format!(
        "{:<12} {:<4} {:<6} {:>6} {:>10} {:>10} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>7}  {}\n",
        "target",
        "test",
        "mode",
        "round",
        "rb ops/s",
        "cb ops/s",
        "rb p50",
        "cb p50",
        "p50",
        "rb p99",
        "cb p99",
        "p99",
        "rb busy",
        "cb busy",
        "verdict"
    ));
    let medians = median_checks(checks);
    for c in checks.iter().chain(&medians) {
        out.push_str(&format!(
            "{:<12} {:<4} {:<6} {:>6} {:>10} {:>10} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>7}  {}\n",
            c.target,
            c.test,
            match c.mode {
                EqualLoad::Paced => "paced",
                EqualLoad::Closed => "closed",
                EqualLoad::Concurrent => "concur",
            },
            if c.round == 0 {
                "median".to_string()
            } else {
                c.round.to_string()
            },
            crate::report::thousands(c.rb_ops_per_sec),
            crate::report::thousands(c.cb_ops_per_sec),
            crate::report::micros(c.rb_p50_us),
            crate::report::micros(c.cb_p50_rb_us),
            pct(c.p50_diff),
            crate::report::micros(c.rb_p99_us),
            crate::report::micros(c.cb_p99_rb_us),
            pct(c.p99_diff),
            busy(c.rb_busy),
            busy(c.cb_busy),
            c.verdict()
        ));
    }
    out
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
    // The event-loop client drives plain sockets only.
    if let Some(t) = ctx.targets.iter().find(|t| t.tls.is_some()) {
        return Err(format!(
            "get-set does not speak TLS yet ({}); use redis-benchmark --tls, or the other subcommands",
            t.name
        ));
    }
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
    let mut checks: Vec<LatencyCheck> = Vec::new();
    if a.equal_load.is_some() && a.vs_redis_benchmark.is_none() {
        return Err("--equal-load needs --vs-redis-benchmark".into());
    }
    if a.equal_load.is_some() && ctx.target_rate.is_some() {
        return Err("--equal-load sets the load itself; drop --target-rate".into());
    }
    for round in 1..=ctx.rounds {
        for &test in &tests {
            for t in &ctx.targets {
                let vs = match (&a.vs_redis_benchmark, t.protocol) {
                    (Some(bin), Protocol::Redis) => Some(bin.as_str()),
                    _ => None,
                };
                // With --equal-load redis-benchmark goes first and its
                // measured rate becomes cairn-bench's target rate.
                // (With `concurrent`, cairn-bench's run while it runs.)
                let mut rb_run = None;
                let mut beside = None;
                if let (Some(bin), Some(mode)) = (vs, a.equal_load) {
                    let mut run_beside = || {
                        let own0 = sys::cpu_seconds(sys::Who::SelfProcess);
                        let out = run_test(&ctx, t, test, &a, seed, round, None);
                        beside = Some((own0, out, sys::cpu_seconds(sys::Who::SelfProcess)));
                    };
                    let during: Option<&mut dyn FnMut()> = if mode == EqualLoad::Concurrent {
                        Some(&mut run_beside)
                    } else {
                        None
                    };
                    rb_run = Some(run_redis_benchmark(
                        &ctx,
                        bin,
                        t,
                        test,
                        &a,
                        round,
                        &infos,
                        &mut extra_targets,
                        during,
                    )?);
                }
                let rate = match (&rb_run, a.equal_load) {
                    (Some(r), Some(EqualLoad::Paced)) => Some(r.ops_per_sec),
                    (Some(_), _) => None,
                    (None, _) => ctx.target_rate,
                };
                let (own0, out, own1) = match beside {
                    Some(b) => b,
                    None => {
                        let own0 = sys::cpu_seconds(sys::Who::SelfProcess);
                        let out = run_test(&ctx, t, test, &a, seed, round, rate);
                        (own0, out, sys::cpu_seconds(sys::Who::SelfProcess))
                    }
                };
                let mut run = make_run(
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
                if let Some(r) = rate {
                    run.extra.insert("target_rate".into(), serde_json::json!(r));
                }
                // All of this process's CPU in the run (the event loops;
                // the progress display and set-up are small beside them).
                run.extra.extend(client_cpu(
                    own0,
                    own1,
                    out.duration_s,
                    a.client_threads.clamp(1, a.clients),
                    run.ops,
                ));
                ctx.say(&format!(
                    "{} {} round {round}: {} ops/s{}, p50 {} µs, p99 {} µs, {} errors",
                    t.name,
                    test.name(),
                    crate::report::thousands(run.ops_per_sec),
                    rate.map_or(String::new(), |r| format!(
                        " (target {})",
                        crate::report::thousands(r)
                    )),
                    crate::report::micros(run.per_op.first().map_or(0.0, |o| o.latency.p50_us)),
                    crate::report::micros(run.per_op.first().map_or(0.0, |o| o.latency.p99_us)),
                    run.errors
                ));
                if let (Some(rb), Some(mode)) = (&rb_run, a.equal_load) {
                    if let (Some(cb_op), Some(rb_op)) = (run.per_op.first(), rb.per_op.first()) {
                        let busy = |r: &Run| r.extra.get("client_busy").and_then(|v| v.as_f64());
                        checks.push(check_latency(
                            &t.name,
                            test.name(),
                            round,
                            mode,
                            Side {
                                ops_per_sec: rb.ops_per_sec,
                                latency: &rb_op.latency,
                                busy: busy(rb),
                            },
                            Side {
                                ops_per_sec: run.ops_per_sec,
                                latency: &cb_op.latency,
                                busy: busy(&run),
                            },
                        ));
                    }
                }
                records.push(Record {
                    run,
                    merged: Some(out.merged),
                });
                if let Some(rb) = rb_run {
                    records.push(Record {
                        run: rb,
                        merged: None,
                    });
                } else if let Some(bin) = vs {
                    let rb = run_redis_benchmark(
                        &ctx,
                        bin,
                        t,
                        test,
                        &a,
                        round,
                        &infos,
                        &mut extra_targets,
                        None,
                    )?;
                    records.push(Record {
                        run: rb,
                        merged: None,
                    });
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
        "latency_definition": if a.rx_timestamps { "from the start of a pipeline's write to the kernel's receive stamp (SO_TIMESTAMPNS) of the first segment read with its replies (the last segment of that read), for every request of the pipeline; the reply's wait in this client is not included" } else { "from the start of a pipeline's write to the moment its connection's first readiness with reply bytes is handled (the clock is read before the read, as redis-benchmark's readHandler), for every request of the pipeline; with a target rate, from the actual write, not the intended send time" },
        "target_rate": ctx.target_rate,
        "equal_load": a.equal_load,
        "defer_writes": a.defer_writes || a.equal_load == Some(EqualLoad::Closed),
        "rx_timestamps": a.rx_timestamps,
        "equal_load_checks": checks.iter().cloned().chain(median_checks(&checks)).collect::<Vec<_>>(),
    });
    let mut notes = Vec::new();
    if a.rx_timestamps && a.vs_redis_benchmark.is_some() {
        // The two clients' intervals end at different points: a difference
        // between them is this client's wait for the reply, not a
        // disagreement (BENCHMARKS.md, "Latency against the wire").
        notes.push(
            "--rx-timestamps: cairn-bench's intervals end at the kernel's receive stamp of the reply, redis-benchmark's when its loop reaches the connection; redis-benchmark's figures include its wait for the reply, cairn-bench's do not".to_string(),
        );
    }
    for c in median_checks(&checks) {
        notes.push(format!(
            "{} {} ({:?}): redis-benchmark {} ops/s, cairn-bench {}; median p50 {} vs {} µs, p99 {} vs {} µs (cairn-bench at redis-benchmark's resolution vs redis-benchmark): {}",
            c.target,
            c.test,
            c.mode,
            crate::report::thousands(c.rb_ops_per_sec),
            crate::report::thousands(c.cb_ops_per_sec),
            crate::report::micros(c.cb_p50_rb_us),
            crate::report::micros(c.rb_p50_us),
            crate::report::micros(c.cb_p99_rb_us),
            crate::report::micros(c.rb_p99_us),
            c.verdict()
        ));
    }
    let rep = runner::finish(&ctx, "get-set", infos, config, &records, notes, started)?;
    if !checks.is_empty() {
        print!("{}", render_checks(&checks));
    }
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
        for v in [
            0u64,
            7,
            99,
            100,
            123_456_789_012,
            999_999_999_999,
            1_000_000_000_001,
        ] {
            let mut d = [0u8; KEY_DIGITS];
            put_digits(&mut d, v);
            assert_eq!(
                d.as_slice(),
                format!("{:012}", v % 1_000_000_000_000).as_bytes()
            );
        }
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
    fn rx_timestamps_are_the_arrival_not_the_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = StdStream::connect(l.local_addr().unwrap()).unwrap();
        enable_rx_timestamps(&client).unwrap();
        let (mut server, _) = l.accept().unwrap();
        // Linux turns receive stamping on for the whole stack a moment
        // after the first socket asks (a deferred static key): until then
        // segments arrive unstamped. Wait for a stamped one first.
        let mut warm = [0u8; 8];
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            server.write_all(b"w").unwrap();
            let (_, stamp) = read_stamped(client.as_raw_fd(), &mut warm).unwrap();
            if stamp.is_some() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "receive stamps never came on"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let real = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
        };
        let before = real();
        server.write_all(b"+OK\r\n").unwrap();
        let after = real();
        // The reply waits 30 ms in the socket before it is read.
        std::thread::sleep(Duration::from_millis(30));
        let mut buf = [0u8; 64];
        let (n, stamp) = read_stamped(client.as_raw_fd(), &mut buf).unwrap();
        let read_at = real();
        assert_eq!(&buf[..n], b"+OK\r\n");
        let stamp = stamp.expect("a receive stamp");
        assert!(
            stamp >= before && stamp <= after,
            "{before:?} {stamp:?} {after:?}"
        );
        assert!(read_at - stamp >= Duration::from_millis(30));
        // Without the option: no stamp.
        let plain = StdStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s2, _) = l.accept().unwrap();
        s2.write_all(b"x").unwrap();
        let (n, stamp) = read_stamped(plain.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, stamp), (1, None));
        // Carried to the monotonic clock: 30 ms ago is 30 ms before now.
        let now = Instant::now();
        let r = Duration::from_secs(1_000_000);
        assert_eq!(
            back_to(now, r, r - Duration::from_millis(30)),
            now - Duration::from_millis(30)
        );
        assert_eq!(back_to(now, r, r + Duration::from_millis(5)), now);
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
    #[test]
    fn pacer_spaces_requests_at_the_rate() {
        let t0 = Instant::now();
        assert!(Pacer::new(None, t0).is_none());
        assert!(Pacer::new(Some(0.0), t0).is_none());
        assert!(Pacer::new(Some(-5.0), t0).is_none());
        assert!(Pacer::new(Some(f64::NAN), t0).is_none());
        let p = Pacer::new(Some(1000.0), t0).unwrap();
        // Request m is due m ms after the start.
        assert_eq!(p.due(0), t0);
        assert_eq!(p.due(1), t0 + Duration::from_millis(1));
        assert_eq!(p.due(16), t0 + Duration::from_millis(16));
        assert_eq!(p.due(50_000), t0 + Duration::from_secs(50));
        // Waiting: before the due time the rest, after it nothing.
        assert_eq!(p.wait(16, t0), Duration::from_millis(16));
        assert_eq!(
            p.wait(16, t0 + Duration::from_millis(10)),
            Duration::from_millis(6)
        );
        assert!(p.wait(16, t0 + Duration::from_millis(17)).is_zero());
        // Pipelines of 16 at 1000 req/s: one pipeline every 16 ms, so by
        // 1 s at most 63 pipelines (1008 requests' due times) have come.
        let due_by = |t: Duration| {
            (0..)
                .step_by(16)
                .take_while(|&m| p.due(m) <= t0 + t)
                .count()
        };
        assert_eq!(due_by(Duration::from_secs(1)), 63);
        // A total rate is split evenly over the event loops.
        assert_eq!(thread_rate(Some(90_000.0), 3), Some(30_000.0));
        assert_eq!(thread_rate(Some(90_000.0), 0), Some(90_000.0));
        assert_eq!(thread_rate(Some(0.0), 3), None);
        assert_eq!(thread_rate(None, 3), None);
    }

    fn lat(p50: f64, p99: f64) -> Latency {
        Latency {
            p50_us: p50,
            p99_us: p99,
            ..Latency::default()
        }
    }

    fn side(ops: f64, l: &Latency, busy: Option<f64>) -> Side<'_> {
        Side {
            ops_per_sec: ops,
            latency: l,
            busy,
        }
    }

    #[test]
    fn redis_benchmark_resolution() {
        // What redis-benchmark 7.0 prints: the top of an 8 µs bucket.
        assert_eq!(at_rb_resolution(0.0), 7.0);
        assert_eq!(at_rb_resolution(32.0), 39.0);
        assert_eq!(at_rb_resolution(39.9), 39.0);
        assert_eq!(at_rb_resolution(40.0), 47.0);
        assert_eq!(at_rb_resolution(475.3), 479.0);
        assert_eq!(at_rb_resolution(480.0), 487.0);
        assert_eq!(at_rb_resolution(1_136.0), 1_143.0);
        // 16 µs steps from 2048 * 8 µs, 32 µs from twice that.
        assert_eq!(at_rb_resolution(16_383.0), 16_383.0);
        assert_eq!(at_rb_resolution(16_384.0), 16_399.0);
        assert_eq!(at_rb_resolution(16_400.0), 16_415.0);
        assert_eq!(at_rb_resolution(32_768.0), 32_799.0);
        // Monotonic, never below the value, at most one bucket above.
        let mut last = 0.0;
        for i in 0..170_000u32 {
            let v = i as f64 * 0.37;
            let q = at_rb_resolution(v);
            assert!(q >= last && q + 1.0 >= v, "{v} -> {q}");
            let width = if v < 16_384.0 { 8.0 } else { 32.0 };
            assert!(q - v < width, "{v} -> {q}");
            last = q;
        }
        // Not a number stays so (no verdict of agreement from it).
        assert!(at_rb_resolution(f64::NAN).is_nan());
    }

    #[test]
    fn latency_verdicts() {
        let rb = lat(503.0, 999.0);
        // cairn-bench's 540/900 read 543/903 at redis-benchmark's
        // resolution: +8.0% and -9.6%, within 10% at the same rate.
        let cb = lat(540.0, 900.0);
        let c = check_latency(
            "r",
            "SET",
            1,
            EqualLoad::Paced,
            side(50_000.0, &rb, Some(0.4)),
            side(49_900.0, &cb, Some(0.2)),
        );
        assert!(c.same_load && c.agrees && !c.rb_client_bound, "{c:?}");
        assert_eq!((c.cb_p50_rb_us, c.cb_p99_rb_us), (543.0, 903.0));
        assert!((c.p50_diff.unwrap() - 40.0 / 503.0).abs() < 1e-12);
        assert!((c.p99_diff.unwrap() + 96.0 / 999.0).abs() < 1e-12);
        assert_eq!(c.verdict(), "ok (within 10%)");
        // Without the resolution map 34 vs 39 µs would be -12.8%; mapped
        // it is 39 vs 39.
        let c = check_latency(
            "r",
            "GET",
            1,
            EqualLoad::Paced,
            side(15_000.0, &lat(39.0, 143.0), None),
            side(15_000.0, &lat(34.0, 140.0), None),
        );
        assert_eq!(c.p50_diff, Some(0.0));
        assert!(c.agrees);
        // p99 12% above does not agree; with redis-benchmark's thread
        // saturated the verdict says why.
        let c = check_latency(
            "r",
            "SET",
            1,
            EqualLoad::Closed,
            side(50_000.0, &rb, Some(0.97)),
            side(51_000.0, &lat(503.0, 1_120.0), Some(0.5)),
        );
        assert!(c.same_load && !c.agrees && c.rb_client_bound);
        assert!(c.verdict().contains("client-bound"), "{}", c.verdict());
        // 15% below on p50 fails too.
        let c = check_latency(
            "r",
            "GET",
            1,
            EqualLoad::Paced,
            side(50_000.0, &rb, None),
            side(50_000.0, &lat(425.0, 999.0), None),
        );
        assert!(!c.agrees && c.verdict() == "DIFFERS BY MORE THAN 10%");
        // 6% apart either way: not the same load.
        for cb_rate in [47_000.0, 53_000.0] {
            let c = check_latency(
                "r",
                "GET",
                1,
                EqualLoad::Closed,
                side(50_000.0, &rb, None),
                side(cb_rate, &rb, None),
            );
            assert!(!c.same_load && c.agrees, "{cb_rate}");
            assert!(c.verdict().starts_with("NOT SAME LOAD"));
        }
        // 4.9% apart: the same.
        let c = check_latency(
            "r",
            "GET",
            1,
            EqualLoad::Closed,
            side(50_000.0, &rb, None),
            side(52_450.0, &rb, None),
        );
        assert!(c.same_load);
        // No reference figure: no verdict of agreement.
        let c = check_latency(
            "r",
            "GET",
            1,
            EqualLoad::Paced,
            side(50_000.0, &lat(0.0, 999.0), None),
            side(50_000.0, &rb, None),
        );
        assert_eq!(c.p50_diff, None);
        assert!(!c.agrees);
        assert_eq!(rel_diff(110.0, 100.0).map(|d| (d * 1e9).round()), Some(1e8));
    }

    #[test]
    fn same_load_by_mode() {
        use EqualLoad::*;
        // One after the other: rates within 5% either way.
        assert!(same_load(Closed, 100.0, 105.0) && same_load(Paced, 100.0, 95.0));
        assert!(!same_load(Closed, 100.0, 105.1) && !same_load(Paced, 100.0, 94.9));
        // At once with the same -n: overlap = slower / faster rate.
        assert!(same_load(Concurrent, 100.0, 111.0));
        assert!(same_load(Concurrent, 90.0, 100.0));
        assert!(!same_load(Concurrent, 89.0, 100.0) && !same_load(Concurrent, 100.0, 89.0));
        for m in [Paced, Closed, Concurrent] {
            assert!(!same_load(m, 0.0, 0.0) && !same_load(m, f64::NAN, 1.0));
        }
        let l = lat(503.0, 999.0);
        let c = check_latency(
            "r",
            "GET",
            1,
            Concurrent,
            side(300_000.0, &l, None),
            side(250_000.0, &l, None),
        );
        assert!(
            !c.same_load && c.verdict().contains("overlap"),
            "{}",
            c.verdict()
        );
    }

    #[test]
    fn median_of_rounds_and_table() {
        let mk = |round, mode, rb50: f64, cb50: f64, busy: f64| {
            check_latency(
                "r",
                "SET",
                round,
                mode,
                side(50_000.0, &lat(rb50, 999.0), Some(busy)),
                side(50_000.0, &lat(cb50, 999.0), Some(0.3)),
            )
        };
        let rounds = vec![
            mk(1, EqualLoad::Closed, 503.0, 900.0, 0.5),
            mk(2, EqualLoad::Closed, 503.0, 520.0, 0.95),
            mk(3, EqualLoad::Closed, 511.0, 530.0, 0.6),
            // Another mode is its own median.
            mk(1, EqualLoad::Paced, 503.0, 100.0, 0.5),
        ];
        let m = median_checks(&rounds);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].round, m[0].mode, m[0].rb_p50_us, m[0].cb_p50_us),
            (0, EqualLoad::Closed, 503.0, 530.0)
        );
        assert_eq!(m[0].cb_p50_rb_us, 535.0);
        assert_eq!(m[0].rb_busy, Some(0.6));
        assert!(m[0].agrees, "the outlier round does not decide the median");
        assert_eq!((m[1].mode, m[1].cb_p50_us), (EqualLoad::Paced, 100.0));
        assert!(!m[1].agrees);
        let table = render_checks(&rounds);
        // Two mode lines, the definition, the header, 4 rounds, 2 medians.
        assert_eq!(table.lines().count(), 2 + 1 + 1 + 4 + 2, "{table}");
        assert!(table.contains("DIFFERS BY MORE THAN 10%"));
        let med: Vec<&str> = table.lines().filter(|l| l.contains("median")).collect();
        assert_eq!(med.len(), 2);
        assert!(
            med[0].contains("closed") && med[0].contains("+6.4%"),
            "{}",
            med[0]
        );
        assert!(
            med[0].contains("60%") && med[0].contains("30%"),
            "{}",
            med[0]
        );
    }
}
