//! Compaction (BGREWRITEAOF, `auto-aof-rewrite-percentage`/`-min-size`,
//! and CONFIG SET appendonly yes): the journal's history is replaced by a
//! base snapshot of the keyspace at one instant plus a new journal file
//! holding the writes after it, without blocking clients (Redis 7's
//! multi-part AOF rewrite, with the snapshot writer's copy-on-lock cut
//! instead of fork).
//!
//! Steps, each safe to crash after:
//! 1. create journal file N+1 and write a manifest naming the old files
//!    *and* N+1 (a crash from here on replays old base + old journals +
//!    N+1: the whole history);
//! 2. the cut (`cairn_persist::snapshot::begin`, every shard locked for a
//!    moment): the writer is told to switch to file N+1 at the current
//!    journal position; as appends happen under shard locks, every write
//!    is either before the cut (in the old files and in the base) or
//!    after it (in file N+1);
//! 3. write the base snapshot N+1 (temporary file, fsync, rename) on this
//!    thread while clients go on;
//! 4. write the manifest `base N+1, journal N+1` and delete the old files.
//!
//! Turning the journal on at run time is the same with no old files: the
//! cut is also where recording starts, and the manifest is written only
//! once the base exists (Redis's AOF_WAIT_REWRITE).
use super::{Journal, Paths};
use crate::log;
use crate::shared::Shared;
use cairn_persist::journal::manifest::{self, Manifest};
use cairn_persist::snapshot::{self as snap, SaveError};
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Compaction state, for BGREWRITEAOF and INFO.
pub struct Rewrite {
    pub in_progress: AtomicBool,
    /// Waiting for a running snapshot (or an EXEC) to finish.
    pub scheduled: AtomicBool,
    /// The next run turns the journal on (CONFIG SET appendonly yes).
    pub enabling: AtomicBool,
    request: Mutex<bool>,
    wake: Condvar,
    started: Mutex<Option<Instant>>,
    pub last_secs: AtomicI64,
    pub last_ok: AtomicBool,
    pub rewrites: AtomicU64,
    pub consecutive_failures: AtomicU64,
    /// Peak bytes the snapshot held for shards copied before it wrote them
    /// (Cairn's copy-on-write figure: `aof_last_cow_size`).
    pub last_cow: AtomicU64,
    /// Journal size (base + journal files) right after the last
    /// compaction: the base of `auto-aof-rewrite-percentage`.
    pub size_after: AtomicU64,
}

impl Default for Rewrite {
    fn default() -> Self {
        Rewrite {
            in_progress: AtomicBool::new(false),
            scheduled: AtomicBool::new(false),
            enabling: AtomicBool::new(false),
            request: Mutex::new(false),
            wake: Condvar::new(),
            started: Mutex::new(None),
            last_secs: AtomicI64::new(-1),
            last_ok: AtomicBool::new(true),
            rewrites: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
            last_cow: AtomicU64::new(0),
            size_after: AtomicU64::new(0),
        }
    }
}

impl Rewrite {
    /// Seconds the running compaction has taken (-1: none).
    pub fn current_secs(&self) -> i64 {
        match *self.started.lock() {
            Some(t) if self.in_progress.load(Ordering::Relaxed) => t.elapsed().as_secs() as i64,
            _ => -1,
        }
    }

    fn kick(&self) {
        *self.request.lock() = true;
        self.wake.notify_one();
    }
}

/// BGREWRITEAOF's outcome, in Redis's words.
pub enum Started {
    Started,
    Scheduled,
}

/// BGREWRITEAOF while a compaction is already running (the RESP layer
/// words it).
pub struct AlreadyRunning;

/// BGREWRITEAOF: starts a compaction on the rewrite thread, or schedules
/// one behind a running snapshot or EXEC (Redis: behind a child process).
pub fn request(shared: &Shared, in_exec: bool) -> Result<Started, AlreadyRunning> {
    let r = &shared.journal.rewrite;
    if r.in_progress.load(Ordering::Acquire) {
        return Err(AlreadyRunning);
    }
    if in_exec || shared.engine.snapshot_running() {
        r.scheduled.store(true, Ordering::Relaxed);
        r.kick();
        return Ok(Started::Scheduled);
    }
    if r.in_progress
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return Err(AlreadyRunning);
    }
    *r.started.lock() = Some(Instant::now());
    r.kick();
    Ok(Started::Started)
}

/// CONFIG SET appendonly yes: the rewrite thread turns the journal on
/// with a compaction (the data in memory becomes the base).
pub fn request_enable(shared: &Shared) {
    let r = &shared.journal.rewrite;
    r.enabling.store(true, Ordering::SeqCst);
    r.scheduled.store(true, Ordering::Relaxed);
    r.kick();
}

/// The rewrite thread: runs requested and scheduled compactions and,
/// ten times a second, checks `auto-aof-rewrite-*`.
pub fn thread(shared: Arc<Shared>) {
    let j = &shared.journal;
    let r = &j.rewrite;
    loop {
        {
            let mut req = r.request.lock();
            if !*req {
                r.wake.wait_for(&mut req, Duration::from_millis(100));
            }
            *req = false;
        }
        let mut run = r.in_progress.load(Ordering::Acquire);
        if !run && r.scheduled.load(Ordering::Relaxed) {
            if shared.engine.snapshot_running() {
                continue;
            }
            if r.in_progress
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                r.scheduled.store(false, Ordering::Relaxed);
                *r.started.lock() = Some(Instant::now());
                run = true;
            }
        }
        if !run
            && auto_due(&shared)
            && r.in_progress
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            *r.started.lock() = Some(Instant::now());
            run = true;
        }
        if !run {
            continue;
        }
        let started = Instant::now();
        let result = compact(&shared);
        r.last_secs
            .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
        match result {
            Ok(true) => {
                r.last_ok.store(true, Ordering::Relaxed);
                r.rewrites.fetch_add(1, Ordering::Relaxed);
                r.consecutive_failures.store(0, Ordering::Relaxed);
                log::notice("Background AOF rewrite finished successfully");
            }
            Ok(false) => {
                // A snapshot holds the engine's cut: try again after it.
                r.scheduled.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                r.last_ok.store(false, Ordering::Relaxed);
                r.consecutive_failures.fetch_add(1, Ordering::Relaxed);
                log::warning(&format!(
                    "Background AOF rewrite terminated with error: {e}"
                ));
            }
        }
        *r.started.lock() = None;
        r.in_progress.store(false, Ordering::Release);
    }
}

/// Redis's serverCron test: the journal grew by `auto-aof-rewrite-percentage`
/// over its size after the last compaction and is over the minimum size.
fn auto_due(shared: &Shared) -> bool {
    let j = &shared.journal;
    if !j.enabled() || j.failure().is_some() {
        return false;
    }
    let (perc, min) = {
        let c = shared.config.read();
        (c.auto_aof_rewrite_percentage, c.auto_aof_rewrite_min_size)
    };
    if perc == 0 {
        return false;
    }
    let size = j.total_size();
    if size <= min {
        return false;
    }
    let base = j.rewrite.size_after.load(Ordering::Relaxed).max(1);
    let growth = (size * 100 / base).saturating_sub(100);
    if growth >= u64::from(perc) {
        log::notice(&format!(
            "Starting automatic rewriting of AOF on {growth}% growth"
        ));
        return true;
    }
    false
}

/// One compaction. Ok(false): a snapshot is running; nothing was changed.
fn compact(shared: &Arc<Shared>) -> Result<bool, String> {
    let j: &Journal = &shared.journal;
    let r = &j.rewrite;
    let paths = Paths::from_config(shared);
    std::fs::create_dir_all(&paths.dir)
        .map_err(|e| format!("Can't create the journal directory: {e}"))?;
    let enabling = r.enabling.load(Ordering::SeqCst) && !j.enabled();
    let recording = j.enabled() || enabling;
    let old = if j.enabled() {
        j.manifest.lock().clone()
    } else {
        super::load_manifest(&paths)?.unwrap_or_default()
    };
    let seq = old.last_seq() + 1;
    let mut next = None;
    if recording {
        let (f, size) = super::create_file(&paths, seq)?;
        if enabling {
            super::spawn_writer(shared, f, size);
            super::arm(shared, None);
        } else {
            // 1: the manifest names the new file before anything goes in it.
            let mut m = old.clone();
            m.incr
                .push((Manifest::incr_name(&paths.appendfilename, seq), seq));
            m.store(&paths.dir, &paths.appendfilename)
                .map_err(|e| format!("Can't write the journal manifest: {e}"))?;
            *j.manifest.lock() = m;
            next = Some(f);
        }
    }
    log::notice("Background append only file rewriting started");
    // 2: the cut. The base is loaded next to this server's `tier/`:
    // tiered values go in it as pointers.
    let mut opts = crate::snapshots::options(shared);
    opts.tier_pointers = true;
    // A compaction thread: never inside a client's EXEC hold.
    let cut = snap::begin(&shared.engine, &cairn_engine::Cx::DETACHED, &opts, || {
        if let Some(f) = next.take() {
            j.rotate_at_cut(f);
        }
        if enabling {
            super::switch_on(shared);
        }
    });
    let cut = match cut {
        Ok(c) => c,
        Err(SaveError::InProgress) => {
            if enabling {
                super::abandon_enable(shared);
            }
            return Ok(false);
        }
        Err(e) => {
            if enabling {
                super::abandon_enable(shared);
            }
            return Err(e.to_string());
        }
    };
    if enabling {
        r.enabling.store(false, Ordering::SeqCst);
        *j.manifest.lock() = Manifest {
            base: None,
            incr: vec![(Manifest::incr_name(&paths.appendfilename, seq), seq)],
        };
    }
    // 3: the base.
    let base = Manifest::base_name(&paths.appendfilename, seq);
    let base_path = paths.dir.join(&base);
    let mut cut = cut;
    let tier_pin = cut.take_tier_pin();
    let stats = snap::write(&shared.engine, cut, &base_path).map_err(|e| e.to_string())?;
    r.last_cow.store(stats.peak_queued_bytes, Ordering::Relaxed);
    // 4: the new manifest, then the old files go.
    let new = Manifest {
        base: Some((base, seq)),
        incr: if recording {
            vec![(Manifest::incr_name(&paths.appendfilename, seq), seq)]
        } else {
            Vec::new()
        },
    };
    new.store(&paths.dir, &paths.appendfilename)
        .map_err(|e| format!("Can't write the journal manifest: {e}"))?;
    // Only now would a restart load the new base.
    crate::tier::durable(crate::tier::Role::Journal, tier_pin.as_ref());
    drop(tier_pin);
    if recording {
        *j.manifest.lock() = new.clone();
    }
    for (name, _) in old.incr.iter().chain(old.base.iter()) {
        if !new.incr.iter().any(|(n, _)| n == name) && new.base.as_ref().map(|b| &b.0) != Some(name)
        {
            let _ = std::fs::remove_file(paths.dir.join(name));
        }
    }
    let _ = manifest::sync_dir(&paths.dir);
    let base_size = std::fs::metadata(&base_path).map(|m| m.len()).unwrap_or(0);
    j.base_size.store(base_size, Ordering::Relaxed);
    j.incr_before.store(0, Ordering::Relaxed);
    r.size_after.store(j.total_size(), Ordering::Relaxed);
    log::notice(&format!(
        "Journal compacted: base {} ({} keys, {} bytes)",
        base_path.display(),
        stats.keys,
        base_size
    ));
    Ok(true)
}

/// Loads a base snapshot at start-up. Keys whose expire time has passed are
/// kept (Redis loads an AOF's RDB preamble the same way): the journal after
/// the base may write to them as they were at the cut, and replay expires
/// nothing; they go on first lookup afterwards.
pub fn load_base(shared: &Shared, path: &std::path::Path) -> Result<u64, String> {
    let opts = snap::LoadOptions {
        keep_expired: true,
        thread_start: Some(crate::memory::register_thread),
        ..Default::default()
    };
    let mut last = Instant::now();
    let stats = snap::load(&shared.engine, path, &opts, &mut |p| {
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            log::notice(&format!(
                "Loading base {}: {} of {} MB",
                path.display(),
                p.bytes_read >> 20,
                p.total_bytes >> 20
            ));
        }
    })
    .map_err(|e| e.to_string())?;
    crate::script::functions::load_codes(shared, &stats.functions)?;
    Ok(stats.keys)
}
