//! How many workers serve clients (`worker-balance`).
//!
//! Cairn starts one worker per core, but a worker only pays for itself when
//! it has a core to run on. On a machine whose other cores are busy (the
//! usual case on a small box, where the clients run beside the server) two
//! half-idle workers cost more than one busy one: each sleeps and is woken
//! separately, they take turns on the cores with the clients, and two
//! workers hitting one key contend for its shard. Measured on the 2-vCPU
//! development machine with redis-benchmark beside the server, one worker
//! served unpipelined SET/GET 8-13% faster than two, and every `-P 16`
//! line of part 2 6-55% faster (BENCHMARKS.md, session 5).
//!
//! So once a second the cron thread measures how much work the workers do
//! (`WorkerStats::work_ns`: each worker thread's CPU time, less the time
//! it spent spinning on empty polls) and how much CPU the rest of the
//! machine takes (/proc/stat minus this process's `getrusage`), and
//! chooses how many workers are *active* (`target`): enough that none runs
//! above `SPREAD_AT` of a core, but no more than the cores other processes
//! leave free *among the cores this process may run on*. Other processes'
//! CPU counts against those only where it cannot fit on the cores outside
//! the server's affinity mask: a server pinned to 6 of 16 cores beside
//! clients on the other 10 has all 6 (the first rule, which subtracted
//! all of the machine's other CPU from the 6, kept about two workers of a
//! saturated server busy there: 266k SET/s against 727k with every worker
//! on). A worker that had work all window but waited on the run queue for
//! much of it (a share of a core beside busy client threads:
//! `STARVED_WAIT`) gets one more worker beside it while the machine also
//! idled, since the kernel shares cores per thread. Active workers are
//! 0..k; the acceptor gives new connections to them only, and an inactive
//! worker hands each of its connections to an active one as soon as the
//! connection is quiet (no pending input or output, not blocked,
//! subscribed or monitoring: see `worker::Worker::movable`). When k grows,
//! the busiest workers hand their surplus connections to the new ones
//! (`Plan`).
//!
//! Spreading is quick (one window of measurement) and consolidating slow
//! (`SHRINK_AFTER` windows), so a burst spreads at once and a lull does not
//! shuffle connections back and forth. A worker never moves a connection
//! mid-request: the keyspace does not care which worker runs a command (no
//! worker owns data), so a move only changes which poll the socket is in.
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A worker busier than this fraction of a core wants company.
pub const SPREAD_AT: f64 = 0.7;
/// A core the others leave at least half free is room for one more
/// worker. A quarter (until session 22) kept one saturated worker beside a
/// client that took 0.3-0.5 of a core, with half a core idle: compressed
/// MGET x 32 ran at 1.00 of a core in one worker against 1.23-1.26 in two
/// (docs/design.md, "Active workers"). Beside a client of about a core
/// (redis-benchmark unpipelined, where two workers measured 8-13% slower
/// than one) the room is still one.
pub const ROOM_SLACK: f64 = 0.5;
/// Workers already active keep a core down to a quarter free: the client
/// beside them speeds up with them and takes a little more, which must not
/// undo the spread a window later (hysteresis).
pub const KEEP_SLACK: f64 = 0.75;
/// A worker that waited on the run queue for at least this fraction of a
/// window, and ran or waited for nearly all of it (`STARVED_BUSY`), is
/// starved: it had work all along but got a share of a core, not a core.
/// Its CPU time alone reads as a half-busy worker. Beside a client of 8
/// threads on 2 cores (E4's sequential MGET, session 22) one worker was
/// runnable 100% of the time at ~0.55 of a core, the client's threads
/// waited on it half the time and the cores idled 7-9%; with two workers
/// that phase ran 8-15% faster with 2% idle. The scheduler shares cores
/// per thread, so a second worker is the server's second share.
pub const STARVED_WAIT: f64 = 0.3;
/// See `STARVED_WAIT`: run plus run-queue wait, of the window.
pub const STARVED_BUSY: f64 = 0.9;
/// A starved worker gets company only if the machine also sat idle for
/// this many cores' worth of the window: then a second worker fills gaps
/// the scheduler left, where with every core busy it would only take
/// time from other processes (session 5 measured one worker faster beside
/// a busy client; `tests/balance.rs` keeps that case at one). Starved
/// workers already active stay while they are starved.
pub const STARVED_IDLE: f64 = 0.06;
/// Windows in a row a smaller target must hold before workers are retired.
pub const SHRINK_AFTER: u32 = 3;
/// Length of one measurement window.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Shared state: the active count and the current plan of moves.
pub struct Balance {
    /// Workers 0..active take new connections and keep theirs.
    active: AtomicUsize,
    /// 0: automatic; k > 0: fixed at k by `DEBUG BALANCE` (tests).
    forced: AtomicUsize,
    /// Bumped with every new plan; a worker acts on a plan once.
    epoch: AtomicU64,
    /// Connections each worker should hand over: (from, to, count).
    plan: Mutex<Vec<(usize, usize, usize)>>,
    /// Connections moved since start (INFO `worker_moves`).
    pub moved: AtomicU64,
    /// The last window's measurements (INFO).
    pub last: Mutex<Option<Sample>>,
}

impl Balance {
    /// `active`: how many workers take connections at start.
    pub fn new(active: usize) -> Self {
        Balance {
            active: AtomicUsize::new(active.max(1)),
            forced: AtomicUsize::new(0),
            epoch: AtomicU64::new(0),
            plan: Mutex::new(Vec::new()),
            moved: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    /// Workers currently taking connections (0..this).
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The moves `from` owes under the current plan: (to, count) pairs.
    pub fn moves_of(&self, from: usize) -> Vec<(usize, usize)> {
        self.plan
            .lock()
            .iter()
            .filter(|m| m.0 == from)
            .map(|m| (m.1, m.2))
            .collect()
    }

    /// `DEBUG BALANCE k` (0: back to automatic).
    pub fn force(&self, shared: &crate::shared::Shared, k: usize) {
        self.forced.store(k, Ordering::Relaxed);
        if k > 0 {
            self.apply(shared, k.min(shared.worker_stats.len()));
        }
    }

    /// Makes `k` the active count, plans the moves that spread connections
    /// when it grows, and pokes every worker so they act now.
    fn apply(&self, shared: &crate::shared::Shared, k: usize) {
        let n = shared.worker_stats.len();
        let old = self.active.swap(k, Ordering::Relaxed);
        let counts: Vec<usize> = shared
            .worker_stats
            .iter()
            .map(|w| w.conns.load(Ordering::Relaxed))
            .collect();
        *self.plan.lock() = if k > old {
            spread(&counts[..n], k)
        } else {
            Vec::new()
        };
        self.epoch.fetch_add(1, Ordering::Release);
        if k != old {
            crate::log::verbose(&format!("Active workers: {old} -> {k}"));
        }
        for w in shared.workers() {
            w.send(crate::shared::Msg::Poke);
        }
    }
}

/// One window's measurements, in cores (1.0 = one core busy for the
/// whole window).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Work the workers did: the sum of their busy fractions.
    pub work: f64,
    /// Busiest active worker's busy fraction.
    pub peak: f64,
    /// CPU the rest of the machine used (other processes and time the
    /// hypervisor took; see `Jiffies::busy`), over all its online cores.
    pub others: f64,
    /// Cores this process may use: its affinity mask (`sched_getaffinity`),
    /// or less under a cgroup CPU quota (`available_parallelism`).
    pub cores: f64,
    /// Cores the machine has online (`others` is measured over these).
    pub online: f64,
    /// Some active worker was starved of CPU (`STARVED_WAIT`).
    pub starved: bool,
    /// Cores' worth of the window the machine sat idle (not iowait).
    pub idle: f64,
}

impl Sample {
    /// Other processes' CPU that must be running on this process's cores:
    /// what does not fit on the online cores outside them. Where the
    /// server may use every core (the 2-core box) that is all of `others`,
    /// as before; a pinned server beside clients on other cores sees none
    /// of theirs. Others pinned onto the server's own cores are
    /// undercounted, but they then share those cores with the workers
    /// rather than leave them: a worker still gets its turn on each.
    pub fn others_here(&self) -> f64 {
        let elsewhere = (self.online - self.cores).max(0.0);
        (self.others - elsewhere).max(0.0)
    }

    /// Cores left for the workers, counting a core free to within
    /// `slack` of a whole one; at least one.
    pub fn room(&self, slack: f64) -> usize {
        ((self.cores - self.others_here()) + slack).floor().max(1.0) as usize
    }
}

/// The active count for a window: enough workers that the work fits at
/// `SPREAD_AT` each (twice the current count when the busiest is saturated,
/// since a saturated worker under-reports the work waiting for it), but no
/// more than the cores left free by everyone else (`Sample::room`: half a
/// core free is room to grow into, a quarter enough to keep a worker
/// already active), at least one and at most `n`.
pub fn target(s: &Sample, current: usize, n: usize) -> usize {
    let mut need = (s.work / SPREAD_AT).ceil().max(1.0) as usize;
    if s.peak > 0.9 {
        need = need.max(current * 2);
    }
    let mut room = s.room(ROOM_SLACK).max(s.room(KEEP_SLACK).min(current));
    if s.starved {
        // Busy others leave no free core, but the cores are shared per
        // thread: the workers keep their shares while they wait for them,
        // and one more joins while cores sat idle in the gaps.
        let want = if s.idle >= STARVED_IDLE {
            current + 1
        } else {
            current
        };
        need = need.max(want);
        room = room.max(want);
    }
    need.min(room).clamp(1, n.max(1))
}

/// A thread's time waiting on a run queue, in ns: the second field of
/// /proc/self/task/TID/schedstat (the first is its time on a CPU).
fn run_queue_wait_ns(tid: u32) -> Option<u64> {
    if tid == 0 {
        return None;
    }
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    parse_schedstat_wait(&s)
}

fn parse_schedstat_wait(s: &str) -> Option<u64> {
    s.split_whitespace().nth(1)?.parse().ok()
}

/// Moves that even out connection counts over workers 0..k: each worker
/// above the share gives its surplus to those below it.
pub fn spread(counts: &[usize], k: usize) -> Vec<(usize, usize, usize)> {
    let k = k.min(counts.len());
    if k == 0 {
        return Vec::new();
    }
    let total: usize = counts[..k].iter().sum();
    let share = total.div_ceil(k);
    let mut give: Vec<(usize, usize)> = (0..k)
        .filter(|&w| counts[w] > share)
        .map(|w| (w, counts[w] - share))
        .collect();
    let mut take: Vec<(usize, usize)> = (0..k)
        .filter(|&w| counts[w] < share)
        .map(|w| (w, share - counts[w]))
        .collect();
    let mut out = Vec::new();
    while let (Some(g), Some(t)) = (give.last_mut(), take.last_mut()) {
        let n = g.1.min(t.1);
        out.push((g.0, t.0, n));
        g.1 -= n;
        t.1 -= n;
        if g.1 == 0 {
            give.pop();
        }
        if t.1 == 0 {
            take.pop();
        }
    }
    out
}

/// The cron thread's side: the previous window's counters and the pending
/// decision.
pub struct Balancer {
    at: Instant,
    busy: Vec<u64>,
    /// Per worker, cumulative run-queue wait in ns (None: not readable).
    waits: Vec<Option<u64>>,
    machine: Option<Jiffies>,
    /// This process's CPU time, in µs.
    own: u64,
    /// A smaller target and how many windows in a row it has held.
    shrink: Option<(usize, u32)>,
}

impl Default for Balancer {
    fn default() -> Self {
        Balancer {
            at: Instant::now(),
            busy: Vec::new(),
            waits: Vec::new(),
            machine: None,
            own: 0,
            shrink: None,
        }
    }
}

impl Balancer {
    /// Called by the cron thread on every tick; measures and decides once
    /// per `WINDOW`.
    pub fn tick(&mut self, shared: &crate::shared::Shared) {
        let now = Instant::now();
        let elapsed = now.duration_since(self.at);
        if elapsed < WINDOW && !self.busy.is_empty() {
            return;
        }
        // Per worker, cumulative: CPU time less spinning, in ns.
        let busy: Vec<u64> = shared
            .worker_stats
            .iter()
            .map(|w| w.work_ns.load(Ordering::Relaxed))
            .collect();
        let waits: Vec<Option<u64>> = shared
            .worker_stats
            .iter()
            .map(|w| run_queue_wait_ns(w.tid.load(Ordering::Relaxed)))
            .collect();
        let machine = machine_jiffies();
        // Online cores: the per-core lines of the same read, so `others`
        // and `online` describe one machine even where /proc is a
        // container's view.
        let online = machine.map(|m| m.online);
        let own = crate::process::cpu_us(libc::RUSAGE_SELF);
        let first = self.busy.is_empty();
        let prev = std::mem::replace(&mut self.busy, busy);
        let prev_waits = std::mem::replace(&mut self.waits, waits);
        let prev_machine = std::mem::replace(&mut self.machine, machine);
        let prev_own = std::mem::replace(&mut self.own, own);
        self.at = now;
        if first {
            return;
        }
        let secs = elapsed.as_secs_f64();
        let balance = &shared.balance;
        let k = balance.active();
        let fractions: Vec<f64> = self
            .busy
            .iter()
            .zip(&prev)
            .map(|(b, p)| (b.saturating_sub(*p) as f64 / 1e9 / secs).clamp(0.0, 1.0))
            .collect();
        let work: f64 = fractions.iter().sum();
        let peak = fractions[..k.min(fractions.len())]
            .iter()
            .fold(0.0f64, |a, &b| a.max(b));
        let starved = self
            .waits
            .iter()
            .zip(&prev_waits)
            .zip(&fractions)
            .take(k)
            .any(|((w, p), &run)| match (w, p) {
                (Some(w), Some(p)) => {
                    let wait = w.saturating_sub(*p) as f64 / 1e9 / secs;
                    wait >= STARVED_WAIT && run + wait >= STARVED_BUSY
                }
                _ => false,
            });
        // Without /proc (or in a container hiding it) nobody else is seen
        // to use the machine: the count then follows the work alone.
        let others = match (machine, prev_machine) {
            (Some(m1), Some(m0)) if m1.total > m0.total => {
                let busy = (m1.busy.saturating_sub(m0.busy)) as f64 / clock_ticks() / secs;
                (busy - own.saturating_sub(prev_own) as f64 / 1e6 / secs).max(0.0)
            }
            _ => 0.0,
        };
        let idle = match (machine, prev_machine) {
            (Some(m1), Some(m0)) => m1.idle.saturating_sub(m0.idle) as f64 / clock_ticks() / secs,
            _ => 0.0,
        };
        let cores = cores();
        let sample = Sample {
            work,
            peak,
            others,
            cores,
            // Unknown: as if this process may use every core.
            online: online.map_or(cores, |n| n as f64).max(cores),
            starved,
            idle,
        };
        *balance.last.lock() = Some(sample);
        let forced = balance.forced.load(Ordering::Relaxed);
        let n = shared.worker_stats.len();
        if forced > 0 || !shared.hot.worker_balance.load(Ordering::Relaxed) {
            let want = if forced > 0 { forced.min(n) } else { n };
            if want != k {
                balance.apply(shared, want);
            }
            self.shrink = None;
            return;
        }
        let t = target(&sample, k, n);
        if t > k {
            self.shrink = None;
            balance.apply(shared, t);
        } else if t < k {
            let held = match self.shrink {
                Some((prev, windows)) if prev == t => windows + 1,
                _ => 1,
            };
            if held >= SHRINK_AFTER {
                self.shrink = None;
                balance.apply(shared, t);
            } else {
                self.shrink = Some((t, held));
            }
        } else {
            self.shrink = None;
        }
    }
}

/// Cores this process may use (`available_parallelism` reads the
/// affinity mask with `sched_getaffinity`, then any cgroup quota).
fn cores() -> f64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0)
}

/// The whole machine's CPU time from /proc/stat, in jiffies summed over
/// its online cores.
#[derive(Clone, Copy, Debug)]
struct Jiffies {
    /// Time processes ran (user, nice, system) and steal (time the
    /// hypervisor gave elsewhere). Not interrupts and softirq: with IRQ
    /// time accounting the kernel charges them to no process, and on a busy
    /// server they are mostly its own network work (delivering its replies
    /// on loopback runs in softirq on the worker's core). Counted as
    /// others', they made saturated workers look crowded by other processes
    /// just when more of them were needed.
    busy: u64,
    total: u64,
    /// Idle time (not iowait).
    idle: u64,
    /// Online cores: the `cpuN` lines.
    online: usize,
}

fn machine_jiffies() -> Option<Jiffies> {
    parse_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn parse_stat(s: &str) -> Option<Jiffies> {
    let mut lines = s.lines();
    let line = lines.next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    if v.len() < 8 {
        return None;
    }
    let busy = v[0] + v[1] + v[2] + v[7];
    let total: u64 = v[..8].iter().sum();
    let online = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(Jiffies {
        busy,
        total,
        idle: v[3],
        online: online.max(1),
    })
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine whose every core this process may use.
    fn s(work: f64, peak: f64, others: f64, cores: f64) -> Sample {
        on(work, peak, others, cores, cores)
    }

    /// A process allowed `cores` of the machine's `online`.
    fn on(work: f64, peak: f64, others: f64, cores: f64, online: f64) -> Sample {
        Sample {
            work,
            peak,
            others,
            cores,
            online,
            starved: false,
            idle: 0.0,
        }
    }

    /// Follows `target` window by window from one active worker while
    /// `load(k)` says what the machine measures with k workers active.
    fn settle(n: usize, windows: usize, load: impl Fn(usize) -> Sample) -> usize {
        let mut k = 1;
        for _ in 0..windows {
            let t = target(&load(k), k, n);
            // Growing applies at once; the loads below never shrink it.
            k = k.max(t);
        }
        k
    }

    #[test]
    fn a_pinned_server_beside_busy_clients_spreads_over_its_cores() {
        // Issue 19's 16-core run: the server pinned to 6 cores, two
        // redis-benchmark processes with 5 threads each on the other 10
        // (about 10 cores' worth), every active worker saturated. The first
        // rule gave room for max(1, 6 - 10) = 1 or 2 workers.
        let busy = |k: usize| on(k as f64, 1.0, 10.0, 6.0, 16.0);
        assert_eq!(target(&busy(1), 1, 6), 2);
        assert_eq!(target(&busy(2), 2, 6), 4);
        assert_eq!(target(&busy(4), 4, 6), 6);
        assert_eq!(target(&busy(6), 6, 6), 6);
        assert_eq!(settle(6, 5, busy), 6);
        // Clients a little short of their 10 cores, or a little over with
        // interrupts counted: still every core.
        assert_eq!(settle(6, 5, |k| on(k as f64, 1.0, 9.2, 6.0, 16.0)), 6);
        assert_eq!(settle(6, 5, |k| on(k as f64, 1.0, 10.2, 6.0, 16.0)), 6);
        // More threads than allowed cores: the cores bound it.
        assert_eq!(settle(16, 5, |k| on(k as f64, 1.0, 10.0, 6.0, 16.0)), 6);
        // Unpipelined, the workers a little below saturation.
        assert_eq!(target(&on(4.0, 0.85, 10.0, 6.0, 16.0), 4, 6), 6);
    }

    #[test]
    fn a_pinned_server_stays_small_on_light_load() {
        // The same machine and clients, but the server has little to do.
        assert_eq!(target(&on(0.3, 0.3, 10.0, 6.0, 16.0), 1, 6), 1);
        assert_eq!(target(&on(0.6, 0.6, 10.0, 6.0, 16.0), 1, 6), 1);
        assert_eq!(target(&on(1.0, 0.5, 10.0, 6.0, 16.0), 2, 6), 2);
        assert_eq!(target(&on(0.0, 0.0, 2.0, 6.0, 16.0), 6, 6), 1);
    }

    #[test]
    fn others_count_against_the_server_only_beyond_the_cores_it_may_not_use() {
        // Pinned to 6 of 16: the first 10 cores of others' work fit outside.
        assert_eq!(on(0.0, 0.0, 10.0, 6.0, 16.0).others_here(), 0.0);
        assert_eq!(on(0.0, 0.0, 13.0, 6.0, 16.0).others_here(), 3.0);
        assert_eq!(on(0.0, 0.0, 13.0, 6.0, 16.0).room(ROOM_SLACK), 3);
        // Every core: all of it counts, as on the 2-core box.
        assert_eq!(s(0.0, 0.0, 1.0, 2.0).others_here(), 1.0);
        assert_eq!(s(0.0, 0.0, 1.0, 2.0).room(ROOM_SLACK), 1);
        // The whole machine busy, server's cores too: one worker.
        let full = on(6.0, 1.0, 15.5, 6.0, 16.0);
        assert_eq!(full.room(ROOM_SLACK), 1);
        assert_eq!(target(&full, 6, 6), 1);
    }

    #[test]
    fn the_stat_file_gives_busy_total_and_online_cores() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        let stat = "cpu  100 1 50 800 50 5 5 7 0 0\n\
                    cpu0 50 1 25 400 25 3 2 4 0 0\n\
                    cpu1 50 0 25 400 25 2 3 3 0 0\n\
                    intr 12345\n\
                    ctxt 678\n";
        let j = parse_stat(stat).unwrap();
        // Busy: user, nice, system and steal; not idle, iowait, irq, softirq.
        assert_eq!((j.busy, j.total, j.idle, j.online), (158, 1018, 800, 2));
        assert!(parse_stat("cpu 1 2 3\n").is_none());
    }

    #[test]
    fn a_client_beside_the_server_leaves_room_for_one_worker() {
        // The benchmark on 2 cores: the client takes about one core.
        assert_eq!(target(&s(0.9, 0.45, 1.0, 2.0), 2, 2), 1);
        assert_eq!(target(&s(0.95, 0.95, 1.1, 2.0), 1, 2), 1);
        // E4's client, ~1.2 cores: one worker.
        assert_eq!(target(&s(1.0, 1.0, 1.2, 2.0), 1, 2), 1);
    }

    #[test]
    fn a_saturated_worker_beside_a_light_client_gets_the_idle_half_core() {
        // Compressed MGET x 32 (session 22): the worker at a full core,
        // the client at 0.3-0.5, half a core idle.
        assert_eq!(target(&s(1.0, 1.0, 0.46, 2.0), 1, 2), 2);
        // Two workers then share 1.25 cores and the client takes a little
        // more: both stay.
        assert_eq!(target(&s(1.25, 0.65, 0.35, 2.0), 2, 2), 2);
        assert_eq!(target(&s(1.25, 0.65, 0.7, 2.0), 2, 2), 2);
        // But one worker does not grow into less than half a core, and two
        // give one back when less than a quarter is left.
        assert_eq!(target(&s(1.0, 1.0, 0.7, 2.0), 1, 2), 1);
        assert_eq!(target(&s(1.25, 0.65, 0.8, 2.0), 2, 2), 1);
    }

    #[test]
    fn a_worker_starved_of_cpu_gets_company_beside_a_busy_client() {
        // E4's sequential MGET (session 22): one worker at 0.55 of a core
        // by CPU time but waiting on the run queue most of the rest, the
        // client's 8 threads at ~1.2 cores.
        // The machine idled 8% of its two cores meanwhile.
        let starved = |work: f64, peak: f64, others: f64, idle: f64| Sample {
            starved: true,
            idle,
            ..s(work, peak, others, 2.0)
        };
        assert_eq!(target(&s(0.55, 0.55, 1.2, 2.0), 1, 2), 1);
        assert_eq!(target(&starved(0.55, 0.55, 1.2, 0.16), 1, 2), 2);
        // Two, still starved, stay two (idle or not); no more than the
        // workers there are.
        assert_eq!(target(&starved(0.8, 0.4, 1.2, 0.04), 2, 2), 2);
        assert_eq!(target(&starved(1.6, 0.8, 12.0, 0.5), 2, 4), 3);
        // Once no worker waits, the room rule applies again.
        assert_eq!(target(&s(0.8, 0.4, 1.2, 2.0), 2, 2), 1);
        // Starved with every core busy (others' threads took the gaps):
        // no more workers, as beside session 5's busy client.
        assert_eq!(target(&starved(0.55, 0.55, 1.4, 0.0), 1, 2), 1);
    }

    #[test]
    fn schedstat_gives_the_run_queue_wait() {
        assert_eq!(parse_schedstat_wait("123456 7890 42\n"), Some(7890));
        assert_eq!(parse_schedstat_wait("123456\n"), None);
        assert_eq!(run_queue_wait_ns(0), None);
        // This thread's own line parses.
        // SAFETY: gettid has no preconditions.
        let tid = u32::try_from(unsafe { libc::gettid() }).unwrap();
        assert!(run_queue_wait_ns(tid).is_some());
    }

    #[test]
    fn an_idle_machine_gets_as_many_workers_as_the_work_needs() {
        assert_eq!(target(&s(0.0, 0.0, 0.0, 16.0), 16, 16), 1);
        assert_eq!(target(&s(2.0, 0.5, 0.1, 16.0), 4, 16), 3);
        assert_eq!(target(&s(0.6, 0.6, 0.0, 2.0), 1, 2), 1);
        assert_eq!(target(&s(0.8, 0.8, 0.0, 2.0), 1, 2), 2);
    }

    #[test]
    fn a_saturated_worker_doubles_the_count_within_the_room() {
        assert_eq!(target(&s(1.0, 1.0, 0.0, 16.0), 1, 16), 2);
        assert_eq!(target(&s(2.0, 1.0, 0.0, 16.0), 2, 16), 4);
        assert_eq!(target(&s(2.0, 1.0, 13.0, 16.0), 2, 16), 3);
        assert_eq!(target(&s(8.0, 1.0, 0.0, 16.0), 8, 8), 8);
    }

    #[test]
    fn never_fewer_than_one_worker() {
        assert_eq!(target(&s(3.0, 1.0, 40.0, 2.0), 2, 2), 1);
        assert_eq!(target(&s(0.0, 0.0, 0.0, 1.0), 1, 1), 1);
    }

    #[test]
    fn spread_evens_out_counts_over_the_active_workers() {
        assert_eq!(spread(&[50, 0], 2), vec![(0, 1, 25)]);
        let moves = spread(&[30, 10, 0, 0], 4);
        let mut counts = [30i64, 10, 0, 0];
        for (f, t, n) in moves {
            counts[f] -= n as i64;
            counts[t] += n as i64;
        }
        assert!(counts.iter().all(|&c| c == 10), "{counts:?}");
        assert!(spread(&[5, 5], 2).is_empty());
        assert!(spread(&[], 0).is_empty());
    }
}
