//! The process itself: the settings Redis applies to itself
//! (`daemonize`, `supervised`, `oom-score-adj` / `oom-score-adj-values`,
//! `jemalloc-bg-thread`), background threads' priority, the signals that
//! ask for a shutdown, the shutdown itself, and CPU time (`getrusage`) for
//! INFO, memcached's stats and the balancer. A service: command handlers
//! call it (SHUTDOWN, INFO, CONFIG SET), it calls none of them.
use crate::config::{Config, OomScoreAdj, Supervised};
use crate::log;
use crate::shared::Shared;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The pid file a daemonized Cairn writes when `pidfile` is not set (Redis:
/// `/var/run/redis.pid`).
pub const DEFAULT_PIDFILE: &str = "/var/run/cairn.pid";

/// Redis's daemonize(): forks, the parent exits 0 at once, the child starts
/// a new session and points stdin, stdout and stderr at /dev/null (so with
/// no `logfile` the log goes nowhere, as in Redis).
///
/// Must run while the process has a single thread: `main` calls it right
/// after loading the config, before the server starts any thread and
/// before jemalloc's background threads are enabled (`set_jemalloc_bg_thread`
/// runs later, in `server::run`). A forked child only keeps the calling
/// thread, so any other thread's locks would stay held forever.
pub fn daemonize() -> Result<(), String> {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: the process is single-threaded here (see above), so the child
    // is a full copy; the parent only calls _exit.
    match unsafe { libc::fork() } {
        -1 => return Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {}
        // SAFETY: _exit ends the parent without running destructors or
        // flushing anything twice (both were flushed above).
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: plain system calls on the child's own descriptors.
    unsafe {
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

/// `jemalloc-bg-thread`: jemalloc's background threads purge unused dirty
/// pages instead of the allocating threads. Returns jemalloc's error text
/// if it refuses.
pub fn set_jemalloc_bg_thread(on: bool) -> Result<(), String> {
    tikv_jemalloc_ctl::background_thread::write(on).map_err(|e| e.to_string())
}

/// The score the process had before Cairn first changed it; `Some` while
/// Cairn's setting is applied (Redis's oom_score_adj_base and
/// oom_score_adjusted_by_redis).
static OOM_BASE: Mutex<Option<i32>> = Mutex::new(None);

const OOM_FILE: &str = "/proc/self/oom_score_adj";

/// Redis's setOOMScoreAdj for a master: with `oom-score-adj` on, writes the
/// first `oom-score-adj-values` (added to the score found before Cairn
/// first changed it, in relative mode), clamped to -1000..=1000; when
/// turned off, restores that original score. Failures are logged, as Redis
/// does, and returned so CONFIG SET can refuse the change.
pub fn set_oom_score_adj(cfg: &Config) -> Result<(), ()> {
    let mut base = OOM_BASE.lock();
    let value = match cfg.oom_score_adj {
        OomScoreAdj::No => match base.take() {
            Some(original) => original,
            None => return Ok(()),
        },
        mode => {
            let fresh = base.is_none();
            let original = match *base {
                Some(b) => b,
                None => {
                    let read = std::fs::read_to_string(OOM_FILE).map_err(|e| {
                        log::warning(&format!("Unable to read oom_score_adj: {}", strerror(&e)))
                    })?;
                    let b = read.trim().parse::<i32>().unwrap_or(0);
                    *base = Some(b);
                    b
                }
            };
            let mut v = cfg.oom_score_adj_values.0[0];
            if mode != OomScoreAdj::Absolute {
                v += original;
            }
            let v = v.clamp(-1000, 1000);
            if let Err(e) = std::fs::write(OOM_FILE, format!("{v}\n")) {
                // Nothing changed: the next attempt reads the score again.
                if fresh {
                    *base = None;
                }
                log::warning(&format!("Unable to write oom_score_adj: {}", strerror(&e)));
                return Err(());
            }
            return Ok(());
        }
    };
    std::fs::write(OOM_FILE, format!("{value}\n"))
        .map_err(|e| log::warning(&format!("Unable to write oom_score_adj: {}", strerror(&e))))
}

/// An io::Error's text without Rust's " (os error N)" suffix: strerror().
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// Redis's redisIsSupervised, at start-up before any thread exists: `auto`
/// becomes upstart or systemd by the environment; upstart stops the
/// process (SIGSTOP, upstart's readiness signal) and clears `UPSTART_JOB`;
/// systemd is told the server is loading. Returns the mode found (stored
/// back into the config, so CONFIG GET shows it, as in Redis) and whether
/// the process is supervised, in which case it must not daemonize.
pub fn supervise(mode: Supervised) -> (Supervised, bool) {
    let (mode, supervised) = find_supervisor(mode);
    if supervised {
        let _ = SUPERVISOR.set(mode);
    }
    (mode, supervised)
}

/// The service manager found at start-up, if any (INFO's
/// `process_supervised`; systemd gets READY=1 and STOPPING=1).
static SUPERVISOR: std::sync::OnceLock<Supervised> = std::sync::OnceLock::new();

/// `upstart` or `systemd` when the process is supervised, else `no`, as
/// Redis's INFO `process_supervised` says.
pub fn supervisor() -> Supervised {
    SUPERVISOR.get().copied().unwrap_or(Supervised::No)
}

fn find_supervisor(mode: Supervised) -> (Supervised, bool) {
    let mode = match mode {
        Supervised::Auto if std::env::var_os("UPSTART_JOB").is_some() => Supervised::Upstart,
        Supervised::Auto if std::env::var_os("NOTIFY_SOCKET").is_some() => Supervised::Systemd,
        m => m,
    };
    let supervised = match mode {
        Supervised::Upstart => {
            if std::env::var_os("UPSTART_JOB").is_none() {
                log::warning("upstart supervision requested, but UPSTART_JOB not found!");
                false
            } else {
                log::notice("supervised by upstart, will stop to signal readiness.");
                // SAFETY: raising a signal at ourselves; the process stays
                // stopped until upstart continues it.
                unsafe { libc::raise(libc::SIGSTOP) };
                // Single-threaded here, so changing the environment is safe.
                std::env::remove_var("UPSTART_JOB");
                true
            }
        }
        Supervised::Systemd => {
            if notify_systemd("STATUS=Cairn is loading...\n") {
                log::notice("Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit.");
                true
            } else {
                log::warning("systemd supervision requested or auto-detected, but NOTIFY_SOCKET is not set or cannot be reached!");
                false
            }
        }
        _ => false,
    };
    (mode, supervised)
}

/// sd_notify(3) without libsystemd: one datagram to the Unix socket named
/// by `NOTIFY_SOCKET` (a leading `@` names an abstract socket). False when
/// the variable is unset or the send fails.
pub fn notify_systemd(message: &str) -> bool {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(target) => notify_to(&target, message),
        None => false,
    }
}

/// Sends `message` as one datagram to the socket `target` names.
fn notify_to(target: &std::ffi::OsStr, message: &str) -> bool {
    use std::os::unix::net::UnixDatagram;
    let Ok(sock) = UnixDatagram::unbound() else {
        return false;
    };
    let bytes = target.as_encoded_bytes();
    let sent = match bytes.strip_prefix(b"@") {
        #[cfg(target_os = "linux")]
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|addr| sock.send_to_addr(message.as_bytes(), &addr))
        }
        // Abstract sockets exist only on Linux.
        #[cfg(not(target_os = "linux"))]
        Some(_) => return false,
        None => sock.send_to(message.as_bytes(), target),
    };
    sent.is_ok()
}

/// How far below the request path background threads run (`nice`).
pub const BACKGROUND_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority by `BACKGROUND_NICE` (relative
/// to where it is, at most to 19): for the threads that serialize
/// compactions and snapshots, work no reply waits for. On a busy machine
/// the scheduler then gives the workers the CPU first (a thread 10 nice
/// levels down weighs about a tenth as much) and the background work takes
/// the idle time; it still gets its share, so it cannot starve. RocksDB
/// lowers its compaction threads the same way
/// (`Env::LowerThreadPoolCPUPriority`). On Linux the nice value belongs to
/// the thread (who = 0 is the calling thread), and a process may always
/// lower its own priority. A failure is logged and ignored: the work then
/// runs at normal priority.
///
/// Such a thread holds shard locks only briefly (a cut, one shard's dump);
/// a worker that waits on one leaves its core idle, which the lowered
/// thread then gets, so the wait does not stretch.
pub fn background_priority() {
    // SAFETY: get/setpriority read and write no memory of ours. errno is
    // cleared first because -1 is also a valid priority.
    let r = unsafe {
        *libc::__errno_location() = 0;
        let cur = libc::getpriority(libc::PRIO_PROCESS, 0);
        if cur == -1 && *libc::__errno_location() != 0 {
            -1
        } else {
            libc::setpriority(libc::PRIO_PROCESS, 0, (cur + BACKGROUND_NICE).min(19))
        }
    };
    if r != 0 {
        log::verbose(&format!(
            "Could not lower a background thread's priority: {}",
            std::io::Error::last_os_error()
        ));
    }
}

// ------------------------------------------------------------ signals ---

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// True once SIGTERM or SIGINT arrived (the start-up load checks it).
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// SIGTERM and SIGINT ask for a shutdown (`server::run` waits for them).
pub fn catch_signals() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int);
        libc::signal(libc::SIGTERM, handler as libc::sighandler_t);
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

/// Whether a signal arrived, forgetting it: a shutdown that fails (its
/// final save) leaves the server running until the next one.
pub fn take_signal() -> bool {
    SIGNALLED.swap(false, Ordering::SeqCst)
}

// ----------------------------------------------------------- shutdown ---

/// Final steps before the process exits (SHUTDOWN, SIGTERM).
pub fn shutdown(shared: &Shared, pidfile: &str) -> ! {
    log::warning("User requested shutdown...");
    if supervised_by_systemd() {
        notify_systemd("STOPPING=1\n");
    }
    if !pidfile.is_empty() {
        let _ = std::fs::remove_file(pidfile);
    }
    if shared.journal.enabled() {
        log::notice("Calling fsync() on the journal (append only) file.");
        // SHUTDOWN is refused inside MULTI, so no hold is held here.
        crate::journal::stop(shared, &cairn_engine::Cx::DETACHED);
    }
    log::warning("Cairn is now ready to exit, bye bye...");
    std::process::exit(0)
}

/// Supervised by systemd (`supervised systemd` or `auto`, and systemd was
/// reached at start-up): it is told when the server is ready and stops.
pub fn supervised_by_systemd() -> bool {
    supervisor() == Supervised::Systemd
}

// ------------------------------------------------------------- rusage ---

fn getrusage(who: libc::c_int) -> Option<libc::rusage> {
    // SAFETY: rusage is plain data that getrusage fills in.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        (libc::getrusage(who, &mut ru) == 0).then_some(ru)
    }
}

/// `getrusage(who)` as (system, user) seconds with six decimals.
pub fn rusage(who: libc::c_int) -> (String, String) {
    let Some(ru) = getrusage(who) else {
        return ("0.000000".into(), "0.000000".into());
    };
    let t = |tv: libc::timeval| format!("{}.{:06}", tv.tv_sec, tv.tv_usec);
    (t(ru.ru_stime), t(ru.ru_utime))
}

/// System plus user CPU time of `getrusage(who)` in microseconds (0 if
/// it fails): `RUSAGE_THREAD` for the calling thread, `RUSAGE_SELF` for
/// the process.
pub fn cpu_us(who: libc::c_int) -> u64 {
    let us = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000 + tv.tv_usec as u64;
    getrusage(who).map_or(0, |ru| us(ru.ru_stime) + us(ru.ru_utime))
}

/// File descriptors kept for the server's own use (listeners, the journal,
/// snapshots, pollers, wake-up pipes) beside one per client: Redis's
/// `CONFIG_MIN_RESERVED_FDS`.
pub const RESERVED_FDS: u64 = 32;

/// Redis's `adjustOpenFilesLimit`: raises the soft `RLIMIT_NOFILE` to
/// `maxclients` + `RESERVED_FDS` if it is lower, as far as the hard limit
/// allows; where that is not enough, lowers `maxclients` to fit, with
/// Redis's log lines, so a client past the limit gets "max number of
/// clients reached" instead of waiting in the accept backlog while
/// `accept` fails. (Redis, as root, would raise the hard limit too; the
/// hard limit is the operator's statement here.) Err when not even one
/// client would fit.
pub fn adjust_open_files_limit(cfg: &mut crate::config::Config) -> Result<(), String> {
    let want = u64::from(cfg.maxclients) + RESERVED_FDS;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        crate::log::warning(&format!(
            "Unable to obtain the current NOFILE limit ({}), assuming 1024 and setting the max clients configuration accordingly.",
            std::io::Error::last_os_error()
        ));
        return lower_maxclients(cfg, 1024);
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    if soft >= want {
        return Ok(());
    }
    let best = want.min(hard);
    let raised = libc::rlimit {
        rlim_cur: best as libc::rlim_t,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let best = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        best
    } else {
        crate::log::warning(&format!(
            "Server can't set maximum open files to {want} because of OS error: {}.",
            std::io::Error::last_os_error()
        ));
        soft
    };
    if best >= want {
        return Ok(());
    }
    crate::log::warning(&format!(
        "You requested maxclients of {} requiring at least {want} max file descriptors.",
        cfg.maxclients
    ));
    lower_maxclients(cfg, best)
}

fn lower_maxclients(cfg: &mut crate::config::Config, limit: u64) -> Result<(), String> {
    if limit <= RESERVED_FDS {
        return Err(format!(
            "Your current 'ulimit -n' of {limit} is not enough for the server to start. Please increase your open file limit to at least {}. Exiting.",
            RESERVED_FDS + 1
        ));
    }
    cfg.maxclients = (limit - RESERVED_FDS) as u32;
    crate::log::warning(&format!(
        "Current maximum open files is {limit}. maxclients has been reduced to {} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
        cfg.maxclients
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 64];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn background_priority_lowers_only_the_calling_thread() {
        // SAFETY: getpriority reads no memory of ours.
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            background_priority();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + BACKGROUND_NICE).min(19));
        assert_eq!(nice(), before, "the calling thread only");
    }

    /// jemalloc-bg-thread switches jemalloc's own setting (this test binary
    /// uses jemalloc too: the global allocator is declared in main.rs).
    #[test]
    fn jemalloc_background_thread_follows_the_setting() {
        set_jemalloc_bg_thread(true).unwrap();
        assert!(tikv_jemalloc_ctl::background_thread::read().unwrap());
        set_jemalloc_bg_thread(false).unwrap();
        assert!(!tikv_jemalloc_ctl::background_thread::read().unwrap());
    }

    /// main.rs's `malloc_conf` reaches jemalloc: one arena for every
    /// thread (unless the environment overrides it, as a test run doesn't).
    #[test]
    fn jemalloc_runs_one_arena() {
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            return;
        }
        // `opt.narenas`: the automatic arenas (`arenas.narenas` also counts
        // the one jemalloc keeps for allocations of 8 MiB and more).
        // SAFETY: `opt.narenas` is an unsigned int, read as one.
        let n: u32 = unsafe { tikv_jemalloc_ctl::raw::read(b"opt.narenas\0") }.unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn notify_reaches_path_and_abstract_sockets() {
        let path = std::env::temp_dir().join(format!("cairn-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).unwrap();
        assert!(notify_to(path.as_os_str(), "READY=1\n"));
        assert_eq!(recv(&sock), "READY=1\n");
        let _ = std::fs::remove_file(&path);
        assert!(
            !notify_to(path.as_os_str(), "READY=1\n"),
            "no socket any more"
        );
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("cairn-notify-test-{}", std::process::id());
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name).unwrap();
            let sock = UnixDatagram::bind_addr(&addr).unwrap();
            assert!(notify_to(format!("@{name}").as_ref(), "STOPPING=1\n"));
            assert_eq!(recv(&sock), "STOPPING=1\n");
        }
    }
}
