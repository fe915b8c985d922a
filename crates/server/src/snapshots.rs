//! Snapshot scheduling: SAVE, BGSAVE, the `save` rules, the start-up load,
//! the final save at shutdown, FLUSHALL's save, the `-MISCONF` and
//! `-LOADING` states, and the figures INFO persistence shows.
//!
//! The file format and the point-in-time cut are `cairn_persist::snapshot`
//! and `cairn_engine::snapshot`; this module decides when they run. A
//! BGSAVE makes its cut on the thread that runs the command (so, as with
//! Redis's fork, a write answered after the BGSAVE reply is not in the
//! file) and hands the writing to the saver thread, which also checks the
//! save rules and scheduled saves ten times a second (Redis's serverCron).
use crate::log;
use crate::shared::Shared;
use cairn_engine::Cx;
use cairn_persist::snapshot::{self as snap, Cut, Progress, SaveError};
use parking_lot::{Condvar, Mutex};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed BGSAVE, the save
/// rules wait this long before trying again.
const RETRY_DELAY_SECS: u64 = 5;

/// A background save handed to the saver thread.
struct Job {
    cut: Cut,
    path: PathBuf,
}

/// The running background save, for INFO.
struct Running {
    progress: Arc<Progress>,
    started: Instant,
    keys_total: u64,
}

/// Snapshot state shared by every thread (`Shared::snapshots`).
pub struct Snapshots {
    job: Mutex<Option<Job>>,
    wake: Condvar,
    running: Mutex<Option<Running>>,
    /// A BGSAVE holds the engine's cut (from its cut to its file's rename).
    pub in_progress: AtomicBool,
    /// BGSAVE SCHEDULE (or a BGSAVE inside EXEC) waits for the engine.
    pub scheduled: AtomicBool,
    /// Unix seconds of the last successful save (LASTSAVE).
    pub lastsave: AtomicU64,
    /// Unix seconds of the last BGSAVE attempt (rule retries wait on it).
    last_try: AtomicU64,
    /// `rdb_last_bgsave_status`.
    pub last_ok: AtomicBool,
    last_bgsave_secs: AtomicI64,
    saves: AtomicU64,
    /// `Engine::changes()` as of the last saved cut: the dirty baseline.
    dirty_base: AtomicU64,
    last_cow: AtomicU64,
    /// Writes are refused with `-MISCONF` (stop-writes-on-bgsave-error).
    pub deny_writes: AtomicBool,
    /// The start-up load is running: commands get `-LOADING`.
    pub loading: AtomicBool,
    loading_start: AtomicU64,
    loading_total: AtomicU64,
    loading_done: AtomicU64,
    last_load_keys: AtomicU64,
    last_load_expired: AtomicU64,
}

impl Default for Snapshots {
    fn default() -> Self {
        let now = unix_secs();
        Snapshots {
            job: Mutex::new(None),
            wake: Condvar::new(),
            running: Mutex::new(None),
            in_progress: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            lastsave: AtomicU64::new(now),
            last_try: AtomicU64::new(0),
            last_ok: AtomicBool::new(true),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            dirty_base: AtomicU64::new(0),
            last_cow: AtomicU64::new(0),
            deny_writes: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            loading_start: AtomicU64::new(0),
            loading_total: AtomicU64::new(0),
            loading_done: AtomicU64::new(0),
            last_load_keys: AtomicU64::new(0),
            last_load_expired: AtomicU64::new(0),
        }
    }
}

fn unix_secs() -> u64 {
    cairn_engine::clock::now_ms() / 1000
}

/// `dir/dbfilename`.
pub fn path(shared: &Shared) -> PathBuf {
    let c = shared.config.read();
    PathBuf::from(&c.dir).join(&c.dbfilename)
}

pub(crate) fn options(shared: &Shared) -> snap::Options {
    let c = shared.config.read();
    snap::Options {
        format: snap::Format::Cairn,
        used_mem: 0,
        checksum: c.rdbchecksum,
        fail_after_bytes: fault_after_bytes(),
        key_delay: delay(c.rdb_key_save_delay),
        max_queued_bytes: c.snapshot_queue_limit,
        functions: shared
            .scripts
            .functions
            .libraries()
            .iter()
            .map(|l| l.code.to_vec())
            .collect(),
        // Read at the cut (`Cut::set_repl`), not now.
        repl: None,
        // A copy that leaves the process carries values in full; the
        // files a restart loads turn pointers on (`file_options`, the
        // journal's rewrite).
        tier_pointers: false,
    }
}

/// `options` for `dbfilename`: in the `snapshot-format` chosen (the
/// journal's base file is always Cairn's own).
fn file_options(shared: &Shared) -> snap::Options {
    let mut o = options(shared);
    if shared.config.read().snapshot_format == crate::config::SnapshotFormat::Rdb {
        o.format = snap::Format::Rdb;
        o.used_mem = crate::memory::used_fast();
    }
    // Cairn's own file is loaded next to this server's `tier/`: tiered
    // values go in it as pointers (RDB always carries them in full).
    o.tier_pointers = o.format == snap::Format::Cairn;
    o
}

/// Redis's `debugDelay`: microseconds, or for a negative value a fraction
/// of one (-10 is a tenth of a microsecond).
fn delay(us: i32) -> Duration {
    match us {
        0 => Duration::ZERO,
        n if n > 0 => Duration::from_micros(n as u64),
        n => Duration::from_nanos(1000 / u64::from(n.unsigned_abs())),
    }
}

/// Test knob: `CAIRN_TEST_SNAPSHOT_FAULT_AFTER=<bytes>` in the server's
/// environment makes every snapshot write fail after that many bytes, as
/// a full disk would (the tests run as root, where a read-only directory
/// does not stop writes).
fn fault_after_bytes() -> Option<u64> {
    std::env::var("CAIRN_TEST_SNAPSHOT_FAULT_AFTER")
        .ok()?
        .parse()
        .ok()
}

impl Snapshots {
    /// `rdb_changes_since_last_save`.
    pub fn dirty(&self, shared: &Shared) -> u64 {
        shared
            .engine
            .changes()
            .saturating_sub(self.dirty_base.load(Ordering::Relaxed))
    }

    /// Recomputes the `-MISCONF` state (after a save, or CONFIG SET).
    pub fn refresh_deny(&self, shared: &Shared) {
        let c = shared.config.read();
        let deny = c.stop_writes_on_bgsave_error
            && !c.save.is_empty()
            && !self.last_ok.load(Ordering::Relaxed);
        self.deny_writes.store(deny, Ordering::Relaxed);
    }

    /// A save finished: LASTSAVE is now (Redis sets it at completion, not
    /// at the fork), and the changes up to the cut are no longer dirty.
    fn saved(&self, changes_at_cut: u64, keep_dirty: bool) {
        self.lastsave.store(unix_secs(), Ordering::Relaxed);
        if !keep_dirty {
            self.dirty_base.store(changes_at_cut, Ordering::Relaxed);
        }
    }
}

/// Why BGSAVE did not start.
pub enum BgError {
    /// A BGSAVE is already running.
    InProgress,
    /// Something else (a journal rewrite) holds the engine's cut.
    Busy,
    /// Inside EXEC: the caller schedules it instead.
    InsideHold,
    Failed(String),
}

/// Makes the cut now, on this thread, and hands the writing to the saver.
pub fn bgsave(shared: &Shared, cx: &Cx) -> Result<(), BgError> {
    let st = &shared.snapshots;
    if st
        .in_progress
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return Err(BgError::InProgress);
    }
    st.last_try.store(unix_secs(), Ordering::Relaxed);
    st.saves.fetch_add(1, Ordering::Relaxed);
    let keys_total: u64 = (0..shared.engine.databases())
        .map(|d| shared.engine.dbsize(cx, d) as u64)
        .sum();
    let mut repl = None;
    let hold = crate::replication::restart::hold(shared);
    let cut = match snap::begin(&shared.engine, cx, &file_options(shared), || {
        repl = crate::replication::restart::at_cut(shared)
    }) {
        Ok(mut c) => {
            drop(hold);
            c.set_repl(repl);
            c
        }
        Err(e) => {
            st.in_progress.store(false, Ordering::Release);
            return Err(match e {
                SaveError::InProgress => BgError::Busy,
                SaveError::InsideHold => BgError::InsideHold,
                other => BgError::Failed(other.to_string()),
            });
        }
    };
    *st.running.lock() = Some(Running {
        progress: cut.progress(),
        started: Instant::now(),
        keys_total,
    });
    st.scheduled.store(false, Ordering::Relaxed);
    log::notice("Background saving started");
    *st.job.lock() = Some(Job {
        cut,
        path: path(shared),
    });
    st.wake.notify_one();
    Ok(())
}

/// SAVE: the whole snapshot on this thread. Other workers keep serving
/// their clients meanwhile (Redis's SAVE stops the whole server); a
/// running journal rewrite's cut is waited for.
pub fn save(shared: &Shared, cx: &Cx, keep_dirty: bool) -> Result<snap::Stats, String> {
    let st = &shared.snapshots;
    st.saves.fetch_add(1, Ordering::Relaxed);
    let path = path(shared);
    let opts = file_options(shared);
    let cut = loop {
        let mut repl = None;
        let hold = crate::replication::restart::hold(shared);
        match snap::begin(&shared.engine, cx, &opts, || {
            repl = crate::replication::restart::at_cut(shared)
        }) {
            Ok(mut c) => {
                drop(hold);
                c.set_repl(repl);
                break c;
            }
            Err(SaveError::InProgress) => {
                snap::wait_free(&shared.engine, Duration::from_millis(100));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let changes = cut.changes_at_cut;
    let mut cut = cut;
    let pin = cut.take_tier_pin();
    match snap::write(&shared.engine, cut, &path) {
        Ok(stats) => {
            crate::tier::durable(crate::tier::Role::Dump, pin.as_ref());
            st.saved(changes, keep_dirty);
            st.last_ok.store(true, Ordering::Relaxed);
            st.refresh_deny(shared);
            log::notice(&format!(
                "DB saved on disk keys={} bytes={} file={}",
                stats.keys,
                stats.bytes,
                path.display()
            ));
            Ok(stats)
        }
        Err(e) => {
            log::warning(&format!("Failed saving the DB: {e}"));
            Err(e.to_string())
        }
    }
}

/// Stops a running BGSAVE (FLUSHALL, SHUTDOWN) and, unless `wait` is
/// false, waits until it has. Its temporary file is removed; the previous
/// snapshot stays. Inside EXEC (this thread holds every shard) the caller
/// must not wait: the saver needs a shard lock to notice.
pub fn abort_bgsave(shared: &Shared, wait: bool) {
    let st = &shared.snapshots;
    if let Some(r) = &*st.running.lock() {
        r.progress.abort.store(true, Ordering::Relaxed);
    } else {
        return;
    }
    log::warning("Background saving in progress: stopping it");
    while wait && st.in_progress.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The saver thread: writes BGSAVE jobs, and ten times a second checks
/// the save rules and scheduled saves.
pub fn saver(shared: Arc<Shared>) {
    let st = &shared.snapshots;
    loop {
        let job = {
            let mut slot = st.job.lock();
            if slot.is_none() {
                st.wake.wait_for(&mut slot, Duration::from_millis(100));
            }
            slot.take()
        };
        match job {
            Some(job) => write_job(&shared, job),
            None => check_rules(&shared),
        }
    }
}

fn write_job(shared: &Shared, job: Job) {
    let st = &shared.snapshots;
    let started = Instant::now();
    let changes = job.cut.changes_at_cut;
    let mut cut = job.cut;
    let pin = cut.take_tier_pin();
    let result = snap::write(&shared.engine, cut, &job.path);
    if result.is_ok() {
        crate::tier::durable(crate::tier::Role::Dump, pin.as_ref());
    }
    drop(pin);
    let secs = started.elapsed().as_secs() as i64;
    st.last_bgsave_secs.store(secs, Ordering::Relaxed);
    match result {
        Ok(stats) => {
            st.saved(changes, false);
            st.last_ok.store(true, Ordering::Relaxed);
            st.last_cow
                .store(stats.peak_queued_bytes, Ordering::Relaxed);
            log::notice(&format!(
                "Background saving terminated with success keys={} bytes={} cow_peak_bytes={} file={}",
                stats.keys,
                stats.bytes,
                stats.peak_queued_bytes,
                job.path.display()
            ));
        }
        Err(SaveError::Aborted) => {
            log::warning("Background saving stopped before it finished");
        }
        Err(e) => {
            st.last_ok.store(false, Ordering::Relaxed);
            log::warning(&format!("Background saving error: {e}"));
        }
    }
    *st.running.lock() = None;
    st.in_progress.store(false, Ordering::Release);
    st.refresh_deny(shared);
}

/// Redis's serverCron save checks: a rule whose changes and seconds are
/// both reached starts a BGSAVE (after a failure, only once
/// `RETRY_DELAY_SECS` passed); so does a scheduled BGSAVE.
fn check_rules(shared: &Shared) {
    let st = &shared.snapshots;
    if st.in_progress.load(Ordering::Relaxed)
        || st.loading.load(Ordering::Relaxed)
        || shared.engine.snapshot_running()
    {
        return;
    }
    let now = unix_secs();
    let may_retry = st.last_ok.load(Ordering::Relaxed)
        || now.saturating_sub(st.last_try.load(Ordering::Relaxed)) > RETRY_DELAY_SECS;
    if !may_retry {
        return;
    }
    let rules = shared.config.read().save.clone();
    let dirty = st.dirty(shared);
    let since = now.saturating_sub(st.lastsave.load(Ordering::Relaxed));
    let due = rules
        .iter()
        .find(|r| dirty >= r.changes && since > r.seconds);
    if let Some(r) = due {
        log::notice(&format!(
            "{} changes in {} seconds. Saving...",
            r.changes, r.seconds
        ));
    } else if !st.scheduled.load(Ordering::Relaxed) {
        return;
    }
    // The cron thread: outside any command.
    match bgsave(shared, &Cx::DETACHED) {
        Ok(()) | Err(BgError::InProgress) | Err(BgError::Busy) => {}
        Err(BgError::InsideHold) => {}
        Err(BgError::Failed(e)) => log::warning(&format!("Can't start a background save: {e}")),
    }
}

/// The final save of SHUTDOWN and SIGTERM: with save rules (unless
/// `nosave`) or with `save`, stop any BGSAVE and save now. Err means the
/// save failed and the server must not exit (unless `force`).
pub fn final_save(
    shared: &Shared,
    cx: &Cx,
    save: bool,
    nosave: bool,
    force: bool,
) -> Result<(), ()> {
    let rules = !shared.config.read().save.is_empty();
    abort_bgsave(shared, true);
    if !(save || (rules && !nosave)) {
        return Ok(());
    }
    log::notice("Saving the final snapshot before exiting.");
    match self::save(shared, cx, false) {
        Ok(_) => Ok(()),
        Err(_) if force => {
            log::warning("Error trying to save the DB. Exit anyway.");
            Ok(())
        }
        Err(_) => {
            log::warning("Error trying to save the DB, can't exit.");
            Err(())
        }
    }
}

/// Before FLUSHALL empties the keyspace: a running BGSAVE stops (it would
/// save the old data; Redis kills its child), before the flush's lock of
/// every shard would hand all the old data to its queue.
pub fn before_flushall(shared: &Shared, in_exec: bool) {
    abort_bgsave(shared, !in_exec);
}

/// After FLUSHALL (Redis 7.0 `flushAllDataAndResetRDB`): with save rules
/// the now empty dataset is saved at once. The dirty count is kept, as
/// Redis keeps it, so the flush still counts as a change. Inside EXEC no
/// cut can be made (this thread holds every shard), so a BGSAVE is
/// scheduled for right after it instead.
pub fn after_flushall(shared: &Shared, cx: &Cx, in_exec: bool) {
    if shared.config.read().save.is_empty() {
        return;
    }
    if in_exec {
        shared.snapshots.scheduled.store(true, Ordering::Relaxed);
    } else {
        let _ = save(shared, cx, true);
    }
}

/// Start-up: flags the server as loading if there is a snapshot to load.
/// Called before the listeners accept, so the first client already gets
/// `-LOADING`.
pub fn prepare_load(shared: &Shared) -> Option<PathBuf> {
    if shared.config.read().appendonly {
        // As Redis: with the journal on, the journal (its base snapshot
        // and what follows it) is the dataset, not `dbfilename`.
        return None;
    }
    let p = path(shared);
    if !p.exists() {
        return None;
    }
    let st = &shared.snapshots;
    st.loading.store(true, Ordering::Relaxed);
    st.loading_start.store(unix_secs(), Ordering::Relaxed);
    st.loading_total.store(
        std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0),
        Ordering::Relaxed,
    );
    Some(p)
}

/// Start-up: loads the snapshot `prepare_load` found, logging progress
/// every second; clients get `-LOADING` until it is done. A snapshot that
/// cannot be read stops start-up with its file, offset and reason.
pub fn load(shared: &Shared, path: &std::path::Path) -> Result<(), String> {
    let st = &shared.snapshots;
    let started = Instant::now();
    log::notice(&format!("Loading snapshot file={}", path.display()));
    let mut last_log = Instant::now();
    let opts = snap::LoadOptions {
        key_delay: delay(shared.config.read().key_load_delay),
        thread_start: Some(crate::memory::register_thread),
        ..Default::default()
    };
    let result = snap::load(&shared.engine, path, &opts, &mut |p| {
        if crate::process::signalled() {
            // Nothing to save yet: a half-loaded dataset must not be.
            log::warning("Received SIGTERM during loading, exiting now");
            std::process::exit(0);
        }
        st.loading_done.store(p.bytes_read, Ordering::Relaxed);
        if last_log.elapsed() >= Duration::from_secs(1) {
            last_log = Instant::now();
            log::notice(&format!(
                "Loading: keys={} bytes={} of {} ({:.1}%)",
                p.keys,
                p.bytes_read,
                p.total_bytes,
                p.bytes_read as f64 * 100.0 / p.total_bytes.max(1) as f64
            ));
        }
    });
    let stats = result.map_err(|e| format!("Fatal error loading the snapshot: {e}"))?;
    crate::script::functions::load_codes(shared, &stats.functions)
        .map_err(|e| format!("Fatal error loading the snapshot's functions: {e}"))?;
    st.dirty_base
        .store(shared.engine.changes(), Ordering::Relaxed);
    crate::replication::restart::restore(shared, stats.repl.clone());
    st.last_load_keys.store(stats.keys, Ordering::Relaxed);
    st.last_load_expired.store(stats.expired, Ordering::Relaxed);
    log::notice(&format!(
        "Done loading snapshot, keys loaded: {}, keys expired: {}.",
        stats.keys, stats.expired
    ));
    log::notice(&format!(
        "DB loaded from disk: {:.3} seconds",
        started.elapsed().as_secs_f64()
    ));
    st.loading.store(false, Ordering::Relaxed);
    Ok(())
}

/// Why DEBUG RELOAD failed.
#[derive(Debug)]
pub enum ReloadError {
    /// The save before the load failed (logged by `save`).
    Save,
    /// The file could not be loaded (logged here).
    Load,
}

/// DEBUG RELOAD: saves the snapshot (unless `save_first` is off), empties
/// every database (unless `flush` is off), and loads the snapshot back,
/// a key already present taking the loaded value with `merge` (debug.c's
/// RDBFLAGS_ALLOW_DUP; without it a duplicate fails the load, where
/// Redis would stop). Other clients get `-LOADING` until it is done, as
/// Redis's event loop answers them while it loads. Function libraries are
/// not dropped by the flush: the file's replace those of the same name.
pub fn reload(
    shared: &Shared,
    cx: &Cx,
    save_first: bool,
    flush: bool,
    merge: bool,
) -> Result<(), ReloadError> {
    if save_first {
        save(shared, cx, false).map_err(|_| ReloadError::Save)?;
    }
    let path = path(shared);
    let st = &shared.snapshots;
    st.loading.store(true, Ordering::Relaxed);
    st.loading_start.store(unix_secs(), Ordering::Relaxed);
    st.loading_total.store(
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
        Ordering::Relaxed,
    );
    if flush {
        drop(shared.engine.flush(cx, None));
    }
    let opts = snap::LoadOptions {
        thread_start: Some(crate::memory::register_thread),
        replace_existing: merge,
        ..Default::default()
    };
    let result = snap::load(&shared.engine, &path, &opts, &mut |p| {
        st.loading_done.store(p.bytes_read, Ordering::Relaxed);
    })
    .map_err(|e| e.to_string())
    .and_then(|stats| {
        // Redis's DEBUG RELOAD empties the functions with the data; with
        // NOFLUSH a library already there fails the load unless MERGE.
        use crate::script::functions::{load_codes_as, Policy};
        let policy = match (flush, merge) {
            (true, _) => Policy::Flush,
            (false, true) => Policy::Replace,
            (false, false) => Policy::Append,
        };
        load_codes_as(shared, &stats.functions, policy)?;
        Ok(stats)
    });
    st.loading.store(false, Ordering::Relaxed);
    match result {
        Ok(stats) => {
            st.dirty_base
                .store(shared.engine.changes(), Ordering::Relaxed);
            st.last_load_keys.store(stats.keys, Ordering::Relaxed);
            st.last_load_expired.store(stats.expired, Ordering::Relaxed);
            log::warning("DB reloaded by DEBUG RELOAD");
            Ok(())
        }
        Err(e) => {
            log::warning(&format!("DEBUG RELOAD failed loading the snapshot: {e}"));
            Err(ReloadError::Load)
        }
    }
}

/// INFO persistence: the loading and snapshot (`rdb_*`) fields, with
/// Redis 7.0's names. The copy-on-write figures are the bytes the running
/// (or last) snapshot held serialized in memory waiting to be written:
/// Cairn's counterpart of the memory a fork's copied pages take.
pub fn info_fields(shared: &Shared, field: &mut dyn FnMut(&str, String)) {
    let st = &shared.snapshots;
    let loading = st.loading.load(Ordering::Relaxed);
    let running = st.running.lock();
    let (peak, now_cow, processed, total, cur_secs) = match &*running {
        Some(r) => (
            r.progress.peak_queued_bytes.load(Ordering::Relaxed),
            r.progress.queued_bytes.load(Ordering::Relaxed),
            r.progress.keys.load(Ordering::Relaxed),
            r.keys_total,
            r.started.elapsed().as_secs() as i64,
        ),
        None => (0, 0, 0, 0, -1),
    };
    drop(running);
    let in_progress = st.in_progress.load(Ordering::Relaxed);
    field("loading", u8::from(loading).to_string());
    field("async_loading", "0".into());
    field("current_cow_peak", peak.to_string());
    field("current_cow_size", now_cow.to_string());
    field("current_cow_size_age", "0".into());
    let perc = if total > 0 {
        processed as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    field("current_fork_perc", format!("{perc:.2}"));
    field("current_save_keys_processed", processed.to_string());
    field("current_save_keys_total", total.to_string());
    field("rdb_changes_since_last_save", st.dirty(shared).to_string());
    field("rdb_bgsave_in_progress", u8::from(in_progress).to_string());
    field(
        "rdb_last_save_time",
        st.lastsave.load(Ordering::Relaxed).to_string(),
    );
    let ok = st.last_ok.load(Ordering::Relaxed);
    field(
        "rdb_last_bgsave_status",
        if ok { "ok" } else { "err" }.into(),
    );
    field(
        "rdb_last_bgsave_time_sec",
        st.last_bgsave_secs.load(Ordering::Relaxed).to_string(),
    );
    field("rdb_current_bgsave_time_sec", cur_secs.to_string());
    field("rdb_saves", st.saves.load(Ordering::Relaxed).to_string());
    field(
        "rdb_last_cow_size",
        st.last_cow.load(Ordering::Relaxed).to_string(),
    );
    field(
        "rdb_last_load_keys_expired",
        st.last_load_expired.load(Ordering::Relaxed).to_string(),
    );
    field(
        "rdb_last_load_keys_loaded",
        st.last_load_keys.load(Ordering::Relaxed).to_string(),
    );
    if loading {
        let start = st.loading_start.load(Ordering::Relaxed);
        let total = st.loading_total.load(Ordering::Relaxed);
        let done = st.loading_done.load(Ordering::Relaxed);
        let elapsed = unix_secs().saturating_sub(start);
        let perc = done as f64 * 100.0 / total.max(1) as f64;
        let eta = if done > 0 && elapsed > 0 {
            (total.saturating_sub(done) as f64 / (done as f64 / elapsed as f64)) as u64
        } else {
            1
        };
        field("loading_start_time", start.to_string());
        field("loading_total_bytes", total.to_string());
        field("loading_rdb_used_mem", "0".into());
        field("loading_loaded_bytes", done.to_string());
        field("loading_loaded_perc", format!("{perc:.2}"));
        field("loading_eta_seconds", eta.to_string());
    }
}
