//! Disk tier reads that do not hold up the worker (issue 25; docs/design.md,
//! "Waiting for I/O without holding up a worker"): the server's half.
//!
//! A read command (GET, MGET, GETRANGE, GETEX, GETDEL) calls `prepare`
//! under its guard before it reads. The values its keys hold on disk are
//! first read with `preadv2(RWF_NOWAIT)` on the worker
//! (`cairn_engine::tier::nowait`); if each is in the page cache the
//! command runs at once. Otherwise the command answers nothing, the
//! dispatcher reports it `Parked`, and the RESP session leaves the request
//! at the head of the buffer (later pipelined requests wait behind it, as
//! behind a blocked command) and calls `submit`: the pointers that would
//! wait, all of an MGET's at once, go to a pool of `tier-io-threads` I/O
//! threads that read them with a blocking `pread`. The thread that reads
//! the last one sends the worker `Msg::Wake`; the worker runs the request
//! again (`collect` hands the records to `prepare`), which uses each
//! record whose pointer the key still holds and reads again any that
//! changed meanwhile, parking at most `MAX_PARKS` times before it reads
//! what is left synchronously, so a key rewritten over and over cannot
//! hold its reader for ever.
//!
//! Why threads and not io_uring: io_uring is refused by the default
//! seccomp profile of common container runtimes, would add a crate and a
//! second I/O model, and the reads are few per command and mostly served
//! by RWF_NOWAIT. The pool's interface is "fetch these pointers, wake this
//! client", which a ring can take over later.
//!
//! What cannot park reads synchronously, as before: commands inside
//! EXEC (the transaction holds every shard) or a script, a connection
//! that is not a RESP session on its worker (memcached, SCRIPT DEBUG),
//! and every other reader of tiered values (DUMP, COPY, an edit that
//! brings the value back to RAM, snapshots).
use crate::client::Client;
use crate::resp::errors::CmdError;
use crate::shared::{Msg, Shared};
use cairn_engine::tier::nowait::{self, Fetched, Installed, Want};
use cairn_engine::{Cx, Guard, Key};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Times one request parks before it reads what is left synchronously.
const MAX_PARKS: u32 = 3;

/// A client's side of a parked read, in `Client::tier`.
#[derive(Default)]
pub struct Parking {
    /// The front end can park this client's request (a RESP session sets
    /// it while it runs requests).
    pub allowed: bool,
    /// Set by `prepare`: the command parks for these reads.
    want: Option<Vec<Want>>,
    /// The reads in flight.
    job: Option<Arc<Job>>,
    /// Records fetched for the request at the head of the buffer.
    have: Fetched,
    /// Times that request has parked.
    parks: u32,
}

impl Parking {
    /// A read is in flight for the request at the head of the buffer.
    pub fn parked(&self) -> bool {
        self.job.is_some()
    }

    /// After the handler: true if it parked (and answered nothing).
    /// A handler that failed after asking drops the request.
    pub fn take_parked(&mut self, ok: bool) -> bool {
        if self.want.is_none() {
            return false;
        }
        if !ok {
            self.want = None;
            return false;
        }
        true
    }

    /// The request at the head is done: forget what was fetched for it.
    pub fn done(&mut self) {
        self.have.clear();
        self.parks = 0;
    }
}

/// Before a read command reads `keys` of `db` under `g`: Ok(None) if it
/// must park (the handler then returns at once, answering nothing); else
/// the records fetched for it, installed for the handler's run. A failed
/// read (EIO, a bad CRC) is the error that fails the command, returned
/// before the handler reads anything: `-ERR disk tier read failed: ...`
/// naming the record, the key left as it was.
pub fn prepare(
    client: &mut Client,
    cx: &Cx,
    g: &mut Guard,
    db: usize,
    keys: &[Key],
) -> Result<Option<Installed>, CmdError> {
    if cairn_engine::tier::store().is_none() {
        return Ok(Some(Installed::none()));
    }
    let wants = g.tier_wants(db, keys);
    let in_script = client.in_script;
    let p = &mut client.tier;
    if wants.is_empty() {
        p.have.clear();
        p.parks = 0;
        return Ok(Some(Installed::none()));
    }
    // Read into this thread's kept buffer unless a parked run left records.
    let mut have = nowait::reuse(std::mem::take(&mut p.have));
    let mut left = if have.is_empty() {
        wants
    } else {
        nowait::missing(wants, &mut have)
    };
    let can_park = p.allowed && p.parks < MAX_PARKS && !cx.in_hold() && !in_script;
    if !left.is_empty() && can_park {
        left = nowait::try_nowait(left, &mut have);
        if !left.is_empty() {
            p.parks += 1;
            p.want = Some(left);
            p.have = have;
            return Ok(None);
        }
    }
    // What is left (only where the command may not park) is read here,
    // synchronously, as `tier::plain` would read it a moment later: here
    // a failure is a value.
    p.parks = 0;
    if !left.is_empty() {
        nowait::fetch_all(&left, &mut have);
    }
    if let Some(e) = have.first_error() {
        return Err(read_failed(&format!(
            "{}: {e}",
            cairn_engine::tier::READ_FAILED
        )));
    }
    Ok(Some(nowait::install(have)))
}

/// The reply to a failed disk tier read (`text` starts with
/// `tier::READ_FAILED` and names the record), logged as a warning.
pub fn read_failed(text: &str) -> CmdError {
    crate::log::warning(text);
    CmdError::Text(format!("ERR {text}").into())
}

/// One read's outcome: the plain bytes, or the error that fails the
/// command; None until an I/O thread has done it.
type Slot = Option<Result<Vec<u8>, String>>;

/// The reads of one parked command.
pub struct Job {
    worker: usize,
    client: u64,
    wants: Vec<Want>,
    /// One slot per want, filled by the I/O threads.
    results: Mutex<Vec<Slot>>,
    left: AtomicUsize,
}

/// The I/O threads' queue: (job, index of the want to read).
struct Pool {
    shared: Arc<Shared>,
    queue: Mutex<VecDeque<(Arc<Job>, usize)>>,
    ready: Condvar,
    threads: usize,
}

static POOL: OnceLock<Pool> = OnceLock::new();

/// INFO's counters of parked reads.
pub struct Counters {
    /// Commands parked (a request parked twice counts twice).
    pub parked: AtomicU64,
    /// Records read by the I/O threads.
    pub pool_reads: AtomicU64,
    /// Reads queued or running on the I/O threads now.
    pub queue_depth: AtomicUsize,
}

pub static COUNTERS: Counters = Counters {
    parked: AtomicU64::new(0),
    pool_reads: AtomicU64::new(0),
    queue_depth: AtomicUsize::new(0),
};

/// `DEBUG TIER-FAULT DELAY ms` (tests): the I/O threads sleep this long
/// before each read, and no read is served without waiting, so every
/// tiered read parks and its client stays parked long enough to show
/// that others are served meanwhile.
static DELAY_MS: AtomicU64 = AtomicU64::new(0);

pub fn set_delay(ms: u64) {
    DELAY_MS.store(ms, Ordering::Relaxed);
}

/// True while `DEBUG TIER-FAULT DELAY` forces reads to wait.
pub fn delayed() -> bool {
    DELAY_MS.load(Ordering::Relaxed) > 0
}

/// The I/O threads' count (INFO), 0 before `start`.
pub fn threads() -> usize {
    POOL.get().map_or(0, |p| p.threads)
}

/// Starts `n` I/O threads (start-up, with the tier on): `tier-io-threads`.
pub fn start(shared: Arc<Shared>, n: usize) -> Result<(), String> {
    let pool = Pool {
        shared,
        queue: Mutex::new(VecDeque::new()),
        ready: Condvar::new(),
        threads: n.max(1),
    };
    if POOL.set(pool).is_err() {
        return Err("the disk tier's I/O threads were started twice".into());
    }
    crate::tier::install_reader();
    for i in 0..n.max(1) {
        std::thread::Builder::new()
            .name(format!("cairn-tier-io-{i}"))
            .spawn(io_thread)
            .map_err(|e| format!("spawn the disk tier's I/O threads: {e}"))?;
    }
    Ok(())
}

fn io_thread() {
    crate::memory::register_thread();
    let pool = POOL.get().expect("started before its threads");
    loop {
        let (job, i) = {
            let mut q = pool.queue.lock();
            loop {
                if let Some(t) = q.pop_front() {
                    break t;
                }
                pool.ready.wait(&mut q);
            }
        };
        let delay = DELAY_MS.load(Ordering::Relaxed);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        let w = &job.wants[i];
        let got = cairn_engine::tier::fetch(&[(&w.key[..], w.ptr)])
            .pop()
            .expect("one request, one answer");
        COUNTERS.pool_reads.fetch_add(1, Ordering::Relaxed);
        COUNTERS.queue_depth.fetch_sub(1, Ordering::Relaxed);
        job.results.lock()[i] = Some(got);
        if job.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            pool.shared.worker(job.worker).send(Msg::Wake(job.client));
        }
    }
}

/// The dispatcher reported `Parked`: the reads `prepare` asked for go to
/// the I/O threads, which wake `worker` for this client when the last is
/// done. Without a pool (cannot happen with the tier on) they are read
/// here and the request runs again at once.
pub fn submit(client: &mut Client, worker: usize) {
    let p = &mut client.tier;
    let wants = p.want.take().expect("Parked sets it");
    COUNTERS.parked.fetch_add(1, Ordering::Relaxed);
    let Some(pool) = POOL.get() else {
        nowait::fetch_all(&wants, &mut p.have);
        return;
    };
    let n = wants.len();
    let job = Arc::new(Job {
        worker,
        client: client.id,
        results: Mutex::new(vec![None; n]),
        left: AtomicUsize::new(n),
        wants,
    });
    COUNTERS.queue_depth.fetch_add(n, Ordering::Relaxed);
    {
        let mut q = pool.queue.lock();
        q.extend((0..n).map(|i| (job.clone(), i)));
    }
    if n == 1 {
        pool.ready.notify_one();
    } else {
        pool.ready.notify_all();
    }
    p.job = Some(job);
}

/// The session is about to run the request at the head again: false if
/// its reads are still in flight (it stays parked); else their records
/// are kept for `prepare` and the request may run.
pub fn collect(client: &mut Client) -> bool {
    let p = &mut client.tier;
    let Some(job) = &p.job else {
        return true;
    };
    if job.left.load(Ordering::Acquire) != 0 {
        return false;
    }
    let job = p.job.take().expect("checked above");
    let results = std::mem::take(&mut *job.results.lock());
    for (w, r) in job.wants.iter().zip(results) {
        p.have.push(w.ptr, r.expect("every read is done"));
    }
    true
}
