//! The background coder (issue 25 item 1, branch lz4code; docs/design.md,
//! "LZ4 values coded in the background"): the `cairn-zcoder` thread, at
//! nice 19, walks the keyspace with `Engine::code_step` and codes the
//! values SET stored plain (pending) once they have been idle for
//! `value-compression-idle-ms`, within a CPU budget per tick. It also
//! decides when SET must code in line instead: while used memory is past
//! 90% of `maxmemory`, so memory stays bounded when the writers outrun it.
//!
//! A thread of its own, not the `cairn-tier` thread's loop: the tier
//! thread exists only with `tier-enabled yes`, and its 10 ms tick writes
//! the value logs' buffers, which a niced coder sharing it would delay.
use crate::shared::Shared;
use cairn_engine::keyspace::Limits;
use cairn_engine::value::zcomp::thread_cpu_us;
use cairn_engine::value::zcomp::Codec;
use cairn_engine::zcoder::{self, Cursor};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// CPU time the coder thread spent coding, in microseconds (INFO).
static CPU_US: AtomicU64 = AtomicU64::new(0);

/// See `CPU_US`.
pub fn cpu_us() -> u64 {
    CPU_US.load(Ordering::Relaxed)
}

/// SET codes in line now (memory near `maxmemory`): 1, else 0 (INFO).
static INLINE: AtomicBool = AtomicBool::new(false);

/// See `INLINE`.
pub fn inline() -> u8 {
    u8::from(INLINE.load(Ordering::Relaxed))
}

/// The coder's thread CPU per tick, at most: ~30 values of 2.8 KB at HC 4.
const BUDGET_US: u64 = 10_000;
/// Sleep between ticks while values wait, and when none is due.
const BUSY_SLEEP: Duration = Duration::from_millis(1);
const IDLE_SLEEP: Duration = Duration::from_millis(50);
/// SET codes in line from this share of `maxmemory` (percent), and goes
/// back to leaving values to the coder below the second.
const INLINE_ON_PCT: u64 = 90;
const INLINE_OFF_PCT: u64 = 85;

/// Copies the codec directives into the engine's limits (`Shared::configure`).
pub fn configure(limits: &Limits, c: &crate::config::Config) {
    let codec = match c.value_compression_codec {
        crate::config::CompressionCodec::Lz4 => Codec::Lz4,
        crate::config::CompressionCodec::Zstd => Codec::Zstd,
    };
    limits
        .value_compression_codec
        .store(codec as u8, Ordering::Relaxed);
    limits
        .value_compression_lz4_level
        .store(c.value_compression_lz4_level, Ordering::Relaxed);
}

/// Starts the coder thread (every server: it sleeps while nothing is
/// pending, and `value-compression` may be turned on at any time).
pub fn start(shared: &Arc<Shared>) -> Result<(), String> {
    let s = shared.clone();
    std::thread::Builder::new()
        .name("cairn-zcoder".into())
        .spawn(move || thread(s))
        .map(drop)
        .map_err(|e| format!("spawn the value coder: {e}"))
}

/// Nice 19 for this thread only (Linux applies setpriority to a thread id).
/// Not SCHED_IDLE: the coder takes shard locks, briefly; a SCHED_IDLE
/// thread preempted inside one would not run again until a core idles,
/// and a worker waiting on that shard would wait as long. At nice 19 the
/// scheduler still gives it a slice within milliseconds.
fn lower_priority() {
    // SAFETY: plain system calls on the calling thread.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS as _, tid as libc::id_t, 19);
    }
}

/// Sets or clears in-line coding by used memory against `maxmemory`.
fn watch_memory(shared: &Shared) {
    let limits = &shared.engine.limits;
    let max = shared.hot.maxmemory.load(Ordering::Relaxed);
    let inline = limits.value_compression_inline.load(Ordering::Relaxed);
    let want = if max == 0 {
        false
    } else {
        let used = crate::memory::used_exact();
        let pct = if inline {
            INLINE_OFF_PCT
        } else {
            INLINE_ON_PCT
        };
        used > max / 100 * pct
    };
    if want != inline {
        limits
            .value_compression_inline
            .store(want, Ordering::Relaxed);
        INLINE.store(want, Ordering::Relaxed);
    }
}

fn thread(shared: Arc<Shared>) {
    crate::memory::register_thread();
    lower_priority();
    let mut cur = Cursor::default();
    // Values coded in the pass under way: a whole pass that coded nothing
    // (what is pending is too young) is followed by a longer sleep.
    let mut pass_coded = 0usize;
    loop {
        watch_memory(&shared);
        if zcoder::pending().0 == 0 {
            std::thread::sleep(IDLE_SLEEP);
            continue;
        }
        let (idle_secs, level) = {
            let c = shared.config.read();
            (
                c.value_compression_idle_ms.div_ceil(1000),
                c.value_compression_lz4_level,
            )
        };
        let t0 = thread_cpu_us();
        let mut rest = false;
        loop {
            let pass = cur.passes;
            let s = shared.engine.code_step(&mut cur, idle_secs, level);
            pass_coded += s.coded;
            if cur.passes != pass {
                rest = pass_coded == 0;
                pass_coded = 0;
                if rest {
                    break;
                }
            }
            if thread_cpu_us().saturating_sub(t0) >= BUDGET_US {
                break;
            }
        }
        CPU_US.fetch_add(thread_cpu_us().saturating_sub(t0), Ordering::Relaxed);
        std::thread::sleep(if rest { IDLE_SLEEP } else { BUSY_SLEEP });
    }
}
