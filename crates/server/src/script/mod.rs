//! Scripting (Redis 7.0's EVAL and FUNCTION): the server-wide state, which
//! every worker shares, and the running of a script (`run`).
//!
//! - The script cache: bodies by SHA-1, whatever worker EVAL'd or loaded
//!   them, with their shebang flags and what Cairn learned of them (a
//!   script that touched a key it did not declare runs under `hold_all`
//!   from then on). SCRIPT FLUSH bumps a generation; each worker's
//!   interpreter drops its compiled scripts when it sees a new one.
//! - Each worker thread has its own Lua interpreter (`run::WORKER_VM`):
//!   a Lua state is not `Send`, and one per worker lets scripts on
//!   different shards run at once, where Redis runs one at a time.
//! - What runs now, per worker (`RunSlot`), for BUSY and SCRIPT KILL /
//!   FUNCTION KILL: another worker's client reads it with atomics only.
//! - SCRIPT DEBUG sessions over the client's connection (`debug`).
pub mod debug;
pub mod functions;
pub mod run;

use crate::shared::Shared;
use hashbrown::HashMap;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Shebang flags (`#!lua flags=...`), Redis 7.0's `SCRIPT_FLAG_*`.
pub mod flag {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
    /// No shebang: Redis 6's rules (writes checked per command).
    pub const EVAL_COMPAT: u32 = 1 << 5;

    /// The flag a shebang or `register_function` names, if known.
    pub fn parse(name: &[u8]) -> Option<u32> {
        Some(match name {
            b"no-writes" => NO_WRITES,
            b"allow-oom" => ALLOW_OOM,
            b"allow-stale" => ALLOW_STALE,
            b"no-cluster" => NO_CLUSTER,
            b"allow-cross-slot-keys" => ALLOW_CROSS_SLOT,
            _ => return None,
        })
    }

    /// The names of `flags`, in Redis's order (FUNCTION LIST).
    pub fn names(flags: u32) -> Vec<&'static str> {
        [
            (NO_WRITES, "no-writes"),
            (ALLOW_OOM, "allow-oom"),
            (ALLOW_STALE, "allow-stale"),
            (NO_CLUSTER, "no-cluster"),
            (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
        ]
        .iter()
        .filter(|(f, _)| flags & f != 0)
        .map(|&(_, n)| n)
        .collect()
    }
}

/// The flags of an EVAL body from its shebang line (Redis 7.0
/// `evalExtractShebangFlags`), or Redis's error text.
pub fn shebang_flags(body: &[u8]) -> Result<u32, String> {
    if !body.starts_with(b"#!") {
        return Ok(flag::EVAL_COMPAT);
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = &body[..end];
    let mut parts = line.split(|&c| c == b' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or_default();
    if engine != b"#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = 0;
    for part in parts {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        for name in list.split(|&c| c == b',').filter(|n| !n.is_empty()) {
            flags |= flag::parse(name).ok_or_else(|| {
                format!(
                    "ERR Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(name)
                )
            })?;
        }
    }
    Ok(flags)
}

/// Whether EVAL, EVALSHA or FCALL with first argument `arg` (the body,
/// the SHA, the function's name) may write, as Redis 7.0's
/// `evalGetCommandFlags`/`fcallGetCommandFlags` tell CLIENT PAUSE WRITE:
/// a script without a shebang may (the commands are may-replicate); one
/// with flags may unless it declared no-writes; an unknown SHA or
/// function, or a shebang in error, keeps the command's may-replicate.
/// False for any other command.
pub fn may_write(shared: &Shared, cmd: &str, arg: &[u8]) -> bool {
    let flags = match cmd {
        "eval" => shebang_flags(arg).ok(),
        "evalsha" => std::str::from_utf8(arg)
            .ok()
            .and_then(|sha| shared.scripts.get(&sha.to_ascii_lowercase()))
            .map(|s| s.flags),
        "fcall" => shared.scripts.functions.flags_of(arg),
        _ => return false,
    };
    flags.is_none_or(|f| f & flag::EVAL_COMPAT != 0 || f & flag::NO_WRITES == 0)
}

/// One cached EVAL script.
pub struct Script {
    pub body: Arc<[u8]>,
    pub flags: u32,
    /// What its runs taught of its keys (`run::footprint`).
    pub footprint: std::sync::atomic::AtomicU8,
}

/// What a worker is running now (all zero when nothing).
#[derive(Default)]
pub struct RunSlot {
    /// Start of the running script, Unix milliseconds; 0 when none.
    pub started_ms: AtomicU64,
    /// It is a function (FCALL), not an EVAL script.
    pub is_function: AtomicBool,
    /// It wrote to the dataset: SCRIPT KILL answers UNKILLABLE.
    pub wrote: AtomicBool,
    /// SCRIPT KILL / FUNCTION KILL asked it to stop.
    pub kill: AtomicBool,
    /// It ran past `busy-reply-threshold` and counts in `Scripts::busy`.
    pub busy: AtomicBool,
    /// For FUNCTION STATS: the running function's name and command.
    pub name: parking_lot::Mutex<String>,
    pub command: parking_lot::Mutex<Vec<Vec<u8>>>,
}

/// The server's scripting state.
pub struct Scripts {
    cache: RwLock<HashMap<Box<str>, Arc<Script>>>,
    /// Bumped by SCRIPT FLUSH.
    generation: AtomicU64,
    /// Bytes of cached bodies (`used_memory_scripts_eval`).
    cache_bytes: AtomicUsize,
    /// One per worker.
    pub slots: Box<[RunSlot]>,
    /// How many running scripts are past `busy-reply-threshold`: while
    /// nonzero, other clients get BUSY.
    pub busy: AtomicUsize,
    /// Each worker interpreter's heap, for `used_memory_lua`.
    pub heap: Box<[AtomicUsize]>,
    /// The function libraries (FUNCTION LOAD).
    pub functions: functions::Registry,
}

impl Scripts {
    pub fn new(workers: usize) -> Scripts {
        Scripts {
            cache: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            cache_bytes: AtomicUsize::new(0),
            slots: (0..workers.max(1)).map(|_| RunSlot::default()).collect(),
            busy: AtomicUsize::new(0),
            heap: (0..workers.max(1)).map(|_| AtomicUsize::new(0)).collect(),
            functions: functions::Registry::default(),
        }
    }

    /// The cached script `sha` (lower-case hex).
    pub fn get(&self, sha: &str) -> Option<Arc<Script>> {
        self.cache.read().get(sha).cloned()
    }

    /// Caches `body` under `sha` (with its parsed `flags`) unless present.
    pub fn insert(&self, sha: &str, body: &[u8], flags: u32) -> Arc<Script> {
        if let Some(s) = self.get(sha) {
            return s;
        }
        let mut cache = self.cache.write();
        cache
            .entry(sha.into())
            .or_insert_with(|| {
                self.cache_bytes
                    .fetch_add(body.len() + sha.len(), Ordering::Relaxed);
                Arc::new(Script {
                    body: body.into(),
                    flags,
                    footprint: Default::default(),
                })
            })
            .clone()
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.cache.read().contains_key(sha.as_str())
    }

    /// SCRIPT FLUSH: forgets every script; workers drop their compiled
    /// copies at their next script.
    pub fn flush(&self) {
        self.cache.write().clear();
        self.cache_bytes.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn count(&self) -> usize {
        self.cache.read().len()
    }

    pub fn cache_bytes(&self) -> usize {
        self.cache_bytes.load(Ordering::Relaxed)
    }

    /// Bytes every worker's interpreter uses (`used_memory_lua`).
    pub fn heap_bytes(&self) -> usize {
        self.heap.iter().map(|h| h.load(Ordering::Relaxed)).sum()
    }

    /// True if worker `w` runs a script past the busy threshold: new
    /// connections go to another worker, which can answer them BUSY and
    /// take SCRIPT KILL.
    pub fn worker_busy(&self, w: usize) -> bool {
        self.slots
            .get(w)
            .is_some_and(|s| s.busy.load(Ordering::Relaxed))
    }

    /// The BUSY error for a command arriving while a script is past the
    /// busy threshold, if one is and the command may not run meanwhile.
    pub fn busy_error(&self) -> Option<&'static str> {
        if self.busy.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let function = self
            .slots
            .iter()
            .any(|s| s.busy.load(Ordering::Relaxed) && s.is_function.load(Ordering::Relaxed));
        Some(if function {
            crate::resp::errors::BUSY_FUNCTION
        } else {
            crate::resp::errors::BUSY_SCRIPT
        })
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL (true): asks the
    /// running scripts to stop. Err: Redis's NOTBUSY, UNKILLABLE or BUSY
    /// (the other kind is running).
    pub fn kill(&self, function: bool) -> Result<(), &'static str> {
        let running: Vec<&RunSlot> = self
            .slots
            .iter()
            .filter(|s| s.started_ms.load(Ordering::Relaxed) != 0)
            .collect();
        if running.is_empty() {
            return Err(if function {
                crate::resp::errors::NOTBUSY_FUNCTION
            } else {
                crate::resp::errors::NOTBUSY_SCRIPT
            });
        }
        if running
            .iter()
            .any(|s| s.is_function.load(Ordering::Relaxed) != function)
        {
            return Err(if function {
                crate::resp::errors::BUSY_SCRIPT_NOT_FUNCTION
            } else {
                crate::resp::errors::BUSY_FUNCTION_NOT_SCRIPT
            });
        }
        if running.iter().any(|s| s.wrote.load(Ordering::Relaxed)) {
            return Err(crate::resp::errors::UNKILLABLE);
        }
        for s in running {
            s.kill.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// What INFO memory reports of scripting.
pub struct MemoryInfo {
    /// Bytes of the workers' Lua heaps (`used_memory_lua`).
    pub lua: usize,
    /// Bytes of cached EVAL bodies (`used_memory_scripts_eval`).
    pub scripts: usize,
    /// Bytes of function library code (`used_memory_functions`).
    pub functions: usize,
    pub cached_scripts: usize,
    pub functions_count: usize,
    pub libraries: usize,
}

pub fn memory_info(shared: &Shared) -> MemoryInfo {
    let s = &shared.scripts;
    MemoryInfo {
        lua: s.heap_bytes(),
        scripts: s.cache_bytes(),
        functions: s.functions.bytes(),
        cached_scripts: s.count(),
        functions_count: s.functions.function_count(),
        libraries: s.functions.library_count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_parse_as_redis_parses_them() {
        assert_eq!(shebang_flags(b"return 1"), Ok(flag::EVAL_COMPAT));
        assert_eq!(shebang_flags(b"#!lua\nreturn 1"), Ok(0));
        assert_eq!(
            shebang_flags(b"#!lua flags=no-writes,allow-oom\nreturn 1"),
            Ok(flag::NO_WRITES | flag::ALLOW_OOM)
        );
        assert_eq!(shebang_flags(b"#!lua flags=\nreturn 1"), Ok(0));
        assert_eq!(
            shebang_flags(b"#!lua name=x\nreturn 1"),
            Err("ERR Unknown lua shebang option: name=x".into())
        );
        assert_eq!(
            shebang_flags(b"#!lua flags=bogus\nreturn 1"),
            Err("ERR Unexpected flag in script shebang: bogus".into())
        );
        assert_eq!(
            shebang_flags(b"#!lux\nreturn 1"),
            Err("ERR Unexpected engine in script shebang: #!lux".into())
        );
        assert_eq!(
            shebang_flags(b"#! lua\nreturn 1"),
            Err("ERR Unexpected engine in script shebang: #!".into())
        );
        assert_eq!(
            shebang_flags(b"#!lua"),
            Err("ERR Invalid script shebang".into())
        );
    }
}
