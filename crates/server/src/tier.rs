//! The disk tier's server side (issue 25 item 2; docs/design.md, "The disk
//! tier"): opens one value log per shard group (`cairn_persist::vlog`)
//! under `tier-dir`, installs them as the engine's `tier::Store`, and runs
//! the `cairn-tier` thread that moves cold values out while used memory
//! is over `tier-threshold` percent of `maxmemory`, writes the logs'
//! buffers, and compacts mostly dead segments. `make_room` lets a worker
//! that is over `maxmemory` move values out itself before eviction or
//! `-OOM`. The engine side (pointer blocks, the fetch, `tier_out`) is
//! `cairn_engine::tier`.
//!
//! Snapshots point into the logs (docs/design.md, "Restart: the snapshot
//! points into the tier"), so a segment compaction empties is *retired*,
//! not deleted, while a durable snapshot (or one being written) may still
//! name it: `Retirement` keeps the marks that decide when it may go.
use crate::shared::Shared;
use cairn_engine::evict::Pool;
use cairn_engine::tier::{self, Coding, Loc, Outcome, Record, Store, GROUPS};
use cairn_engine::{CmdState, Cx};
use cairn_persist::vlog::{self, Faults, Kind, Log, Ptr};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The logs, the fault knobs of `DEBUG TIER-FAULT` and the compaction
/// counters.
pub struct Tier {
    dir: PathBuf,
    logs: Vec<Log>,
    pub faults: Arc<Faults>,
    compactions: AtomicU64,
    compacted_bytes: AtomicU64,
    /// Each log's share of `tier-max-disk`, the part of it kept for
    /// compaction's copies (`compaction_reserve`), and the segment size.
    disk_limit: Option<u64>,
    reserve: u64,
    segment_size: u32,
    retirement: Mutex<Retirement>,
    /// Segments in `retirement` (read without its lock by `mark_live`).
    retired: AtomicUsize,
    /// The start-up load is over: compaction may judge what is live.
    started: AtomicBool,
}

/// Which snapshot a restart would load: the dump file and the journal's
/// base are different files, each of which may point into the tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Dump,
    Journal,
}

/// When a segment compaction emptied may be deleted. Marks count
/// retirements: a segment retired at mark `r` holds nothing a snapshot
/// cut at mark `c >= r` names (compaction repointed every live key before
/// retiring it, each under its shard lock, so a cut either saw the new
/// pointer or dumped the shard before the repoint and got a later mark).
/// So it may go once every snapshot a restart could load, and every one
/// being written, was cut at `r` or later.
#[derive(Default)]
struct Retirement {
    /// (group, segment, mark) of segments kept for older snapshots.
    segments: Vec<(usize, u32, u64)>,
    /// The last mark handed out.
    mark: u64,
    /// Cuts of snapshots not yet recorded durable (or given up).
    open: Vec<u64>,
    /// The cut of the last durable snapshot of each role (0 for the one
    /// loaded at start: it may name any segment).
    pins: HashMap<Role, u64>,
}

impl Retirement {
    /// Segments that may be deleted now, taken out of the list.
    fn deletable(&mut self) -> Vec<(usize, u32)> {
        let limit = self
            .pins
            .values()
            .chain(self.open.iter())
            .copied()
            .min()
            .unwrap_or(u64::MAX);
        let mut out = Vec::new();
        self.segments.retain(|&(g, seq, r)| {
            let go = r <= limit;
            if go {
                out.push((g, seq));
            }
            !go
        });
        out
    }
}

static TIER: OnceLock<Tier> = OnceLock::new();

/// The tier, when `tier-enabled yes`.
pub fn get() -> Option<&'static Tier> {
    TIER.get()
}

fn ptr(l: Loc) -> Ptr {
    Ptr {
        segment: l.segment,
        offset: l.offset,
        len: l.len,
    }
}

fn loc(p: Ptr) -> Loc {
    Loc {
        segment: p.segment,
        offset: p.offset,
        len: p.len,
    }
}

struct Handle(&'static Tier);

impl Store for Handle {
    fn append(
        &self,
        group: usize,
        db: u8,
        coded: bool,
        key: &[u8],
        value: &[u8],
    ) -> Result<Loc, String> {
        let kind = if coded { Kind::Coded } else { Kind::Plain };
        self.0.logs[group]
            .append(db, kind, key, value)
            .map(loc)
            .map_err(|e| e.to_string())
    }

    fn read(&self, group: usize, l: Loc) -> Result<Record, String> {
        let f = self.0.logs[group].read(ptr(l)).map_err(|e| e.to_string())?;
        Ok(Record {
            key: f.key().to_vec(),
            value: f.value().to_vec(),
            coded: f.kind() == Kind::Coded,
        })
    }

    fn free(&self, group: usize, l: Loc) {
        self.0.logs[group].free(ptr(l));
    }

    fn mark_live(&self, group: usize, l: Loc) -> Result<(), String> {
        self.0.logs[group]
            .mark_live(ptr(l))
            .map_err(|e| e.to_string())?;
        // A load holds compaction off, so a segment it names cannot be
        // deleted meanwhile; one retired before (DEBUG RELOAD's flush let
        // compaction empty it) is live again.
        if self.0.retired.load(Ordering::Relaxed) > 0 {
            let mut r = self.0.retirement.lock();
            r.segments
                .retain(|&(g, seq, _)| !(g == group && seq == l.segment));
            self.0.retired.store(r.segments.len(), Ordering::Relaxed);
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), String> {
        for l in &self.0.logs {
            l.sync().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn open_cut(&self) -> u64 {
        let mut r = self.0.retirement.lock();
        let m = r.mark;
        r.open.push(m);
        m
    }

    fn close_cut(&self, mark: u64) {
        let mut r = self.0.retirement.lock();
        if let Some(i) = r.open.iter().position(|&m| m == mark) {
            r.open.swap_remove(i);
        }
        drop(r);
        self.0.sweep();
    }
}

/// Each log's two write buffers: 64 KiB, not the library's 1 MiB, since
/// they count in used memory (sixteen logs, two tails: 2 MiB in all) and
/// a write per 64 KiB is still a small share of a value's cost.
const BUFFER_SIZE: usize = 64 << 10;

/// The bytes of a log's share of `tier-max-disk` (`limit`) that new
/// values leave to compaction: one segment and two segment headers, so
/// that compacting any one segment (its survivors are at most its size,
/// and the compaction tail may roll to a new segment once) always has
/// room, whatever new values did; at most half the share, so that a share
/// smaller than two segments still takes values (it compacts only
/// segments whose survivors fit what is left). Freed space comes back
/// when the compacted segment is deleted: at once without snapshots,
/// after the next durable snapshot otherwise ("Retired segments"); until
/// then the copies hold part of the reserve, and a compaction that finds
/// no room fails with the disk limit's error and leaves its segment as it
/// was.
fn compaction_reserve(limit: u64, segment_size: u32) -> u64 {
    let header = vlog::format::SEGMENT_HEADER_LEN;
    (u64::from(segment_size) + 2 * header).min(limit / 2)
}

/// `tier-dir`: relative to `dir`, the working directory by then.
fn dir_of(c: &crate::config::Config) -> PathBuf {
    PathBuf::from(&c.tier_dir)
}

/// Opens the logs and installs them (start-up, after the chdir to `dir`,
/// before anything is loaded). Nothing to do with `tier-enabled no`.
/// Segments left by an earlier run are opened (torn tails cut) with no
/// live records: the snapshot loaded next marks what it points at
/// (`Store::mark_live`), and compaction, once `loaded` says the load is
/// over, reclaims the rest.
pub fn open(c: &crate::config::Config) -> Result<(), String> {
    if !c.tier_enabled {
        return Ok(());
    }
    let dir = dir_of(c);
    let faults = Arc::new(Faults::default());
    // `tier-max-disk` is shared evenly: keys hash evenly over the groups.
    let disk_limit = (c.tier_max_disk > 0).then(|| (c.tier_max_disk / GROUPS as u64).max(1));
    let reserve = disk_limit.map_or(0, |l| compaction_reserve(l, c.tier_segment_size));
    let mut logs = Vec::with_capacity(GROUPS);
    for g in 0..GROUPS {
        let opts = vlog::Options {
            segment_size: c.tier_segment_size,
            disk_limit,
            compaction_reserve: reserve,
            faults: Some(faults.clone()),
            buffer_size: BUFFER_SIZE,
            ..vlog::Options::default()
        };
        let d = dir.join(format!("{g:02}"));
        logs.push(
            Log::open(&d, g as u16, opts).map_err(|e| format!("Can't open the disk tier: {e}"))?,
        );
    }
    let t = Tier {
        dir,
        logs,
        faults,
        compactions: AtomicU64::new(0),
        compacted_bytes: AtomicU64::new(0),
        disk_limit,
        reserve,
        segment_size: c.tier_segment_size,
        retirement: Mutex::new(Retirement::default()),
        retired: AtomicUsize::new(0),
        started: AtomicBool::new(false),
    };
    if TIER.set(t).is_err() {
        return Err("the disk tier was opened twice".into());
    }
    let t = TIER.get().expect("set just above");
    if !tier::install(Box::new(Handle(t))) {
        return Err("a disk tier store was installed twice".into());
    }
    crate::log::notice(&format!("Disk tier open dir={}", t.dir.display()));
    Ok(())
}

impl Tier {
    /// Bytes on disk (files and buffers) and live bytes, over every log.
    pub fn disk(&self) -> (u64, u64, usize) {
        self.logs.iter().map(Log::stats).fold((0, 0, 0), |a, s| {
            (a.0 + s.disk_bytes, a.1 + s.live_bytes, a.2 + s.segments)
        })
    }

    pub fn compactions(&self) -> (u64, u64) {
        (
            self.compactions.load(Ordering::Relaxed),
            self.compacted_bytes.load(Ordering::Relaxed),
        )
    }

    /// Segments kept for older snapshots.
    pub fn retired_segments(&self) -> usize {
        self.retired.load(Ordering::Relaxed)
    }

    /// Keeps an emptied segment until no snapshot may name it (deleted
    /// at once when none may).
    fn retire(&self, g: usize, seq: u32) {
        let mut r = self.retirement.lock();
        r.mark += 1;
        let m = r.mark;
        r.segments.push((g, seq, m));
        self.retired.store(r.segments.len(), Ordering::Relaxed);
        drop(r);
        self.sweep();
    }

    /// Deletes the retired segments no snapshot may name any more. Not
    /// while a load holds compaction off (it may mark one live again):
    /// the tier thread sweeps again later.
    fn sweep(&self) {
        let Some(_turn) = tier::try_compaction_turn() else {
            return;
        };
        let mut r = self.retirement.lock();
        let gone = r.deletable();
        self.retired.store(r.segments.len(), Ordering::Relaxed);
        drop(r);
        for (g, seq) in gone {
            if let Err(e) = self.logs[g].drop_segment(seq) {
                crate::log::warning(&format!("Disk tier: {e}"));
            }
        }
    }

    fn is_retired(&self, g: usize, seq: u32) -> bool {
        self.retired.load(Ordering::Relaxed) > 0
            && self
                .retirement
                .lock()
                .segments
                .iter()
                .any(|&(rg, rs, _)| rg == g && rs == seq)
    }
}

/// A snapshot of `role` is durable (the dump file renamed into place, or
/// the journal's manifest naming its new base): segments retired before
/// its cut are no longer named by it. `pin` is the cut's hold
/// (`Cut::take_tier_pin`), released by the caller afterwards.
pub fn durable(role: Role, pin: Option<&tier::CutPin>) {
    let (Some(t), Some(pin)) = (TIER.get(), pin) else {
        return;
    };
    t.retirement.lock().pins.insert(role, pin.mark());
    t.sweep();
}

/// The start-up load (snapshot, or journal and its base) is over: if it
/// took pointers into the tier, its file keeps every segment until a
/// newer snapshot of the same role is durable; compaction may start.
pub fn loaded(role: Role) {
    let Some(t) = TIER.get() else {
        return;
    };
    if tier::COUNTERS.loaded_pointers.load(Ordering::Relaxed) > 0 {
        t.retirement.lock().pins.insert(role, 0);
    }
    t.started.store(true, Ordering::Release);
}

thread_local! {
    /// This thread's pool of candidates to move out.
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

/// Samples per step, as `maxmemory-samples` by default.
const SAMPLES: usize = 5;

/// Empty samples in a row after which `move_out` gives up: one sample
/// walks at most 1,024 slots (`Engine::tier_sample`'s hand), and an empty
/// one is no sign that nothing is left to move elsewhere.
const EMPTY_SAMPLES: u32 = 64;

/// Moves cold values out until used memory is at most `target`, `budget`
/// is spent, the logs refuse an append (disk full, `tier-max-disk`) or
/// nothing is left to move. Returns how many values it moved.
fn move_out(shared: &Shared, cx: &Cx, target: u64, budget: Duration) -> u64 {
    let (min, lfu, coding) = {
        let c = shared.config.read();
        (
            c.tier_min_size,
            matches!(
                c.maxmemory_policy,
                crate::config::MaxmemoryPolicy::AllkeysLfu
                    | crate::config::MaxmemoryPolicy::VolatileLfu
            ),
            match c.tier_compression {
                crate::config::TierCompression::None => Coding::Plain,
                crate::config::TierCompression::Lz4 => Coding::Lz4,
            },
        )
    };
    let started = Instant::now();
    let engine = &shared.engine;
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let mut used = crate::memory::used_exact();
        let mut moved_since = 0;
        let mut values = 0;
        let mut empty = 0;
        while used > target {
            if out_of_time(started.elapsed(), budget, values) {
                return values;
            }
            // Refilled when empty: every key sampled is moved, coldest of
            // each sample first. Keeping the pool full (Redis's eviction
            // pool: five offers per move, the warmest leave) chose colder
            // victims but cost ten times the sampling, +14% CPU per MSET in
            // E4's load phase (branch e4write, docs/design.md); under
            // tiering the hand's even sweep already stands in for random
            // victims, as the random probes did.
            if pool.is_empty() {
                if engine.tier_sample(cx, lfu, min, SAMPLES, &mut pool) == 0 {
                    empty += 1;
                    if empty >= EMPTY_SAMPLES {
                        return values;
                    }
                    continue;
                }
                empty = 0;
            }
            let Some(c) = pool.pop_best() else {
                continue;
            };
            let out = engine.tier_out(c.db, &c.key, min, coding, cairn_engine::clock::now_ms());
            pool.recycle(c);
            match out {
                Outcome::Refused => {
                    pool.clear();
                    return values;
                }
                Outcome::Moved { .. } => {
                    values += 1;
                    moved_since += 1;
                    if moved_since >= 16 {
                        moved_since = 0;
                        used = crate::memory::used_exact();
                    }
                }
                Outcome::Skipped | Outcome::Raced => {}
            }
            if moved_since == 0 || pool.is_empty() {
                used = crate::memory::used_exact();
            }
        }
        values
    })
}

/// Whether `move_out` stops after `elapsed` of its `budget`, having moved
/// `moved` values. A caller that has moved nothing yet gets up to
/// `STALLED_BUDGETS` budgets: on a loaded machine a worker can lose its
/// core for a whole 5 ms budget before its first move (eight client
/// threads and two workers on two cores), and nothing moved turns its
/// write into an `-OOM` (one MSET x 32 in E4 with both workers on, run
/// S22n) although the tier had room to give.
fn out_of_time(elapsed: Duration, budget: Duration, moved: u64) -> bool {
    elapsed > budget && (moved > 0 || elapsed > budget * STALLED_BUDGETS)
}

/// See `out_of_time`.
const STALLED_BUDGETS: u32 = 10;

/// A worker over `maxmemory` (`memory::make_room`): moves values out
/// itself, for at most `budget`, before eviction or `-OOM` decide. True
/// if the command's `incoming` bytes fit afterwards, or if the budget ran
/// out while values were still moving and memory is within
/// `OVERSHOOT` of the limit: Redis lets a command through when eviction
/// is making progress but out of time (`EVICT_RUNNING`), and a write
/// refused while the tier is catching up would be an `-OOM` the user did
/// not ask for (eight MSET x 32 writers got them on a loaded machine). The
/// tier thread goes on moving values meanwhile.
pub fn make_room(shared: &Shared, cx: &Cx, max: u64, incoming: u64, budget: Duration) -> bool {
    // Inside EXEC or a script the command holds shards: moving a value
    // out would lock one again on this thread. Eviction decides there.
    if TIER.get().is_none() || incoming > max || cx.in_hold() {
        return false;
    }
    let moved = move_out(shared, cx, max - incoming, budget);
    WRITER_MOVES.fetch_add(moved, Ordering::Relaxed);
    let used = crate::memory::used_exact().saturating_add(incoming);
    used <= max || (moved > 0 && used <= max + max / OVERSHOOT)
}

/// Values moved out by workers whose write found memory over `maxmemory`
/// (INFO's `tier_moves_by_writers`; the rest, `tier_writes` less these,
/// the `cairn-tier` thread moved): how much of the tier's work lands on
/// the write path.
pub static WRITER_MOVES: AtomicU64 = AtomicU64::new(0);

/// How far past `maxmemory` (1/OVERSHOOT of it) a write may take memory
/// while the tier is moving values out but has not caught up.
const OVERSHOOT: u64 = 16;

/// How often the tier thread wakes.
const TICK: Duration = Duration::from_millis(10);
/// Time spent moving values out per tick, at most.
const MOVE_BUDGET: Duration = Duration::from_millis(20);
/// Compaction runs at most once per this, one segment at a time: a
/// segment (64 MiB at most) is the byte budget of a turn.
const COMPACT_EVERY: Duration = Duration::from_millis(200);
/// A segment whose live bytes fall to this share of its size is compacted.
const COMPACT_UNDER: f64 = 0.5;
/// The share once a log is within a segment of its part of
/// `tier-max-disk`: appends are about to be refused, and copying a
/// segment 80% live still gives back a fifth of it.
const COMPACT_UNDER_FULL: f64 = 0.8;

/// The `cairn-tier` thread: one for the sixteen logs (see design.md for
/// why one is enough here).
pub fn thread(shared: Arc<Shared>) {
    crate::memory::register_thread();
    let Some(t) = TIER.get() else {
        return;
    };
    let state = CmdState::new();
    let cx = Cx::background(&state);
    let mut last_compaction = Instant::now();
    let mut next_group = 0;
    loop {
        let max = shared.hot.maxmemory.load(Ordering::Relaxed);
        if max > 0 {
            let pct = u64::from(shared.config.read().tier_threshold);
            move_out(&shared, &cx, max / 100 * pct, MOVE_BUDGET);
        }
        if last_compaction.elapsed() >= COMPACT_EVERY && t.started.load(Ordering::Acquire) {
            last_compaction = Instant::now();
            t.sweep();
            for i in 0..GROUPS {
                let g = (next_group + i) % GROUPS;
                if compact_one(&shared, t, g) {
                    next_group = g + 1;
                    break;
                }
            }
        }
        std::thread::sleep(TICK);
    }
}

/// The `cairn-tier-sync` thread: every tick, each log's buffers written
/// and, under `everysec`, its fsyncs (`Log::tick`). Apart from the mover
/// (`thread`) so that moving values out goes on while an fsync waits for
/// the disk (tens of ms under E4's writes): while the mover waited,
/// memory reached `maxmemory` and the writers moved values themselves.
pub fn sync_thread() {
    crate::memory::register_thread();
    let Some(t) = TIER.get() else {
        return;
    };
    let mut last_warning: Option<Instant> = None;
    loop {
        for l in &t.logs {
            if let Err(e) = l.tick() {
                if last_warning.is_none_or(|w| w.elapsed() > Duration::from_secs(10)) {
                    crate::log::warning(&format!("Disk tier write failed: {e}"));
                    last_warning = Some(Instant::now());
                }
            }
        }
        std::thread::sleep(TICK);
    }
}

/// Compacts the emptiest candidate segment of group `g`, if any: copies
/// its live records, repoints their keys, drops it. True if it did.
fn compact_one(shared: &Shared, t: &Tier, g: usize) -> bool {
    // Not while a snapshot is being loaded: its keys would look dead.
    let Some(_turn) = tier::try_compaction_turn() else {
        return false;
    };
    let log = &t.logs[g];
    // "Nearly full": within a segment of what new values may use (the
    // share less compaction's reserve), where appends are about to be
    // refused.
    let under = match t.disk_limit {
        Some(limit) if log.stats().disk_bytes + u64::from(t.segment_size) + t.reserve >= limit => {
            COMPACT_UNDER_FULL
        }
        _ => COMPACT_UNDER,
    };
    let Some(seg) = log
        .candidates(under)
        .into_iter()
        .find(|s| !t.is_retired(g, s.seq))
    else {
        return false;
    };
    let engine = &shared.engine;
    let r = log.compact(seg.seq, |p, rec| {
        engine.tier_holder(rec.key, g, loc(p)).is_some()
    });
    let c = match r {
        Ok(c) => c,
        Err(e) => {
            crate::log::warning(&format!("Disk tier compaction failed: {e}"));
            return true;
        }
    };
    for m in &c.moved {
        if !engine.tier_repoint(&m.key, g, loc(m.old), loc(m.new)) {
            // Rewritten or deleted since: the copy is garbage.
            log.free(m.new);
        }
    }
    // A snapshot may still name records in it: kept until none may.
    t.retire(g, seg.seq);
    t.compactions.fetch_add(1, Ordering::Relaxed);
    t.compacted_bytes.fetch_add(seg.bytes, Ordering::Relaxed);
    true
}

// branch tierio: reads that do not wait, for `crate::tier_io`.

impl tier::nowait::NowaitRead for Handle {
    fn read_nowait(
        &self,
        group: usize,
        l: Loc,
        buf: &mut Vec<u8>,
    ) -> Option<Result<tier::nowait::Placed, String>> {
        // `DEBUG TIER-FAULT DELAY`: every read goes to the I/O threads.
        if crate::tier_io::delayed() {
            return None;
        }
        match self.0.logs[group].read_nowait_into(ptr(l), buf) {
            Ok(Some(p)) => Some(Ok(tier::nowait::Placed {
                key: p.key,
                value: p.value,
                coded: p.kind == Kind::Coded,
            })),
            Ok(None) => None,
            Err(e) => Some(Err(e.to_string())),
        }
    }
}

/// Installs the logs as the engine's reader that does not wait (when
/// the I/O threads start).
pub fn install_reader() {
    if let Some(t) = TIER.get() {
        tier::nowait::install_reader(Box::new(Handle(t)));
    }
}

impl Tier {
    /// `DEBUG TIER-DROP-CACHE`: every log's buffers written and fsynced,
    /// its segments' pages dropped from the page cache.
    pub fn drop_cache(&self) -> Result<(), String> {
        for l in &self.logs {
            l.drop_cache().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller that moved something stops at its budget; one that moved
    /// nothing (it lost its core, or every candidate raced) keeps trying
    /// up to `STALLED_BUDGETS` budgets, then stops even so.
    #[test]
    fn move_out_stops_at_budget_once_it_made_progress() {
        let b = Duration::from_millis(5);
        assert!(!out_of_time(Duration::from_millis(4), b, 0));
        assert!(!out_of_time(Duration::from_millis(4), b, 3));
        assert!(out_of_time(Duration::from_millis(6), b, 1));
        assert!(!out_of_time(Duration::from_millis(6), b, 0));
        assert!(!out_of_time(b * STALLED_BUDGETS, b, 0));
        assert!(out_of_time(
            b * STALLED_BUDGETS + Duration::from_micros(1),
            b,
            0
        ));
    }
}
