//! Start-up and the server's own threads: binds the listeners, starts one
//! worker per core (or `server-threads`), the acceptors, and the cron thread
//! that runs active expiry; then waits for SHUTDOWN or a signal.
use crate::config::Config;
use crate::exec::table::CommandTable;
use crate::log;
use crate::net::worker::{Worker, WAKER};
use crate::resp::cmd;
use crate::shared::{Hot, Pause, Shared, WorkerHandle, WorkerStats};
use crate::slowlog::SlowLog;
use cairn_engine::expire::ExpireCycle;
use cairn_engine::{Engine, Options};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The command table, from every family's handlers.
pub fn command_table() -> Result<CommandTable, String> {
    CommandTable::build(&cmd::families())
}

/// Builds the shared state from a config (also used by unit tests).
pub fn build_shared(cfg: Config) -> Result<Arc<Shared>, String> {
    let table = command_table()?;
    let threads = worker_threads(&cfg);
    // With balancing on, serve on one worker until the load asks for more
    // (`balance`: spreading takes one window, so a busy server spreads
    // within a second, and a light one never pays for idle workers).
    let start_active = if cfg.worker_balance { 1 } else { threads };
    let engine = Engine::new(Options {
        databases: cfg.databases,
        shards: 1024,
    });
    if cfg.cluster_enabled {
        // Before any key is stored: the counts start from an empty keyspace.
        engine.enable_slot_index();
    }
    let cluster = crate::cluster::Cluster::new(cfg.cluster_enabled);
    let ncmds = table.all().len();
    let acl = crate::auth::Registry::new(&table);
    let shared = Arc::new(Shared {
        engine,
        config: RwLock::new(cfg),
        hot: Hot::default(),
        table,
        clients: Mutex::new(HashMap::new()),
        next_client_id: AtomicU64::new(1),
        connected: AtomicUsize::new(0),
        total_connections: AtomicU64::new(0),
        rejected_connections: AtomicU64::new(0),
        workers: OnceLock::new(),
        worker_stats: (0..threads).map(|_| WorkerStats::new(ncmds)).collect(),
        started: Instant::now(),
        run_id: run_id(),
        tcp_port: AtomicU16::new(0),
        tls: Default::default(),
        shutdown: AtomicBool::new(false),
        pause: Pause::default(),
        slowlog: Mutex::new(SlowLog::default()),
        latency: Default::default(),
        memory: crate::memory::Guard::default(),
        pubsub: crate::pubsub::PubSub::default(),
        tracking: Default::default(),
        monitors: Mutex::new(Vec::new()),
        monitor_count: AtomicUsize::new(0),
        stat_reset_at: Mutex::new(Instant::now()),
        blocking: Default::default(),
        memcache: crate::memcache::McShared::new(threads),
        journal: Arc::new(crate::journal::Journal::new(threads)),
        snapshots: Default::default(),
        scripts: crate::script::Scripts::new(threads),
        balance: crate::net::balance::Balance::new(start_active),
        acl,
        replication: Default::default(),
        cluster,
    });
    let _ = shared.journal.server.set(Arc::downgrade(&shared));
    crate::tracking::install(&shared);
    shared.refresh_hot();
    crate::auth::load_at_start(&shared)?;
    Ok(shared)
}

fn worker_threads(cfg: &Config) -> usize {
    if cfg.server_threads > 0 {
        cfg.server_threads
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

/// A 40-hex-digit run id, new at every start (INFO server `run_id`).
fn run_id() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

pub fn run(mut cfg: Config) -> Result<(), String> {
    log::set_level(log::Level::parse(cfg.loglevel.as_str()).unwrap_or(log::Level::Notice));
    log::set_file(&cfg.logfile).map_err(|e| format!("Can't open the log file: {e}"))?;
    log::notice("oO0OoO0OoO0Oo Cairn is starting oO0OoO0OoO0Oo");
    log::notice(&format!(
        "Cairn version={} redis_compat={} bits={} pid={} just started",
        crate::VERSION,
        crate::exec::meta::REDIS_VERSION,
        usize::BITS,
        std::process::id()
    ));
    if let Some(f) = cfg.config_file() {
        log::notice(&format!("Configuration loaded file={}", f.display()));
    } else {
        log::notice("No config file specified, using the default config");
    }
    crate::process::adjust_open_files_limit(&mut cfg)?;
    if let Err(e) = crate::process::set_jemalloc_bg_thread(cfg.jemalloc_bg_thread) {
        log::warning(&format!("Failed to set jemalloc background_thread: {e}"));
    }
    // Failure is logged and start-up goes on, as in Redis.
    let _ = crate::process::set_oom_score_adj(&cfg);
    crate::memory::register_thread();
    cairn_engine::value::zcomp::set_thread_start(crate::memory::register_thread);
    // Redis's `port 0` turns plain TCP off; Cairn does so when a TLS port
    // is set, and otherwise takes `port 0` as an ephemeral port, where
    // Redis (with no `unixsocket`, which Cairn lacks) would refuse to
    // start for want of anything to listen on. See docs/design.md, "TLS".
    let listeners = if cfg.port == 0 && cfg.tls_port != 0 {
        Vec::new()
    } else {
        crate::net::listener::bind_all(&cfg.bind, cfg.port, cfg.tcp_backlog as i32)?
    };
    // memcached clients on their own port, same addresses (issue 7).
    let mc_listeners = match cfg.memcached_port {
        0 => Vec::new(),
        p => crate::net::listener::bind_all(&cfg.bind, p, cfg.tcp_backlog as i32)?,
    };
    // RESP over TLS on its own port, beside the plain one (Redis's
    // `tls-port`); the context is checked before anything is bound.
    let tls_context = if crate::net::tls_config::wanted(&cfg) {
        Some(
            crate::net::tls_config::build(&cfg)
                .map_err(|e| format!("Failed to configure TLS: {e}"))?,
        )
    } else {
        None
    };
    let tls_listeners = match cfg.tls_port {
        0 => Vec::new(),
        p => crate::net::listener::bind_all(&cfg.bind, p, cfg.tcp_backlog as i32)?,
    };
    let memcached_tls = cfg.memcached_tls;
    if !cfg.dir.is_empty() {
        std::env::set_current_dir(&cfg.dir)
            .map_err(|e| format!("Can't chdir to '{}': {e}", cfg.dir))?;
    }
    let pidfile = cfg.pidfile.clone();
    let appendonly = cfg.appendonly;
    // The tier's logs before anything is loaded (a load may tier).
    crate::tier::open(&cfg)?;
    let shared = build_shared(cfg)?;
    if let Some(c) = tls_context {
        shared.tls.set(c);
    }
    // INFO's tcp_port: 0 with no plain listener, as Redis reports it.
    let port = listeners
        .first()
        .and_then(|l| l.local_addr().ok())
        .map_or(0, |a| a.port());
    shared.tcp_port.store(port, Ordering::Relaxed);
    crate::cluster::open(&shared)?;

    let n = shared.worker_stats.len();
    let mut polls = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        let poll = mio::Poll::new().map_err(|e| format!("epoll: {e}"))?;
        let waker = mio::Waker::new(poll.registry(), WAKER).map_err(|e| format!("waker: {e}"))?;
        handles.push(WorkerHandle {
            mailbox: Mutex::new(Vec::new()),
            waker,
        });
        polls.push(poll);
    }
    if shared.workers.set(handles).is_err() {
        return Err("workers registered twice".into());
    }
    for (i, poll) in polls.into_iter().enumerate() {
        let w = Worker::new(i, shared.clone(), poll);
        std::thread::Builder::new()
            .name(format!("cairn-worker-{i}"))
            .spawn(move || w.run())
            .map_err(|e| format!("spawn worker: {e}"))?;
    }
    {
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-memory".into())
            .spawn(move || crate::memory::watch(&s))
            .map_err(|e| format!("spawn memory watcher: {e}"))?;
    }
    if crate::tier::get().is_some() {
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-tier".into())
            .spawn(move || crate::tier::thread(s))
            .map_err(|e| format!("spawn the disk tier: {e}"))?;
        std::thread::Builder::new()
            .name("cairn-tier-sync".into())
            .spawn(crate::tier::sync_thread)
            .map_err(|e| format!("spawn the disk tier's writer: {e}"))?;
        let io_threads = shared.config.read().tier_io_threads;
        crate::tier_io::start(shared.clone(), io_threads)?;
    }
    crate::zcoder::start(&shared)?;
    {
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-cron".into())
            .spawn(move || cron(s))
            .map_err(|e| format!("spawn cron: {e}"))?;
    }
    // Flag the load before anyone can connect: clients get -LOADING.
    // With the journal on, the snapshot file is not read (as Redis ignores
    // its RDB file when AOF is on): the journal's base and files are.
    let snapshot = if appendonly {
        shared.snapshots.loading.store(true, Ordering::Relaxed);
        None
    } else {
        crate::snapshots::prepare_load(&shared)
    };
    {
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-aof-rewrite".into())
            .spawn(move || {
                crate::memory::register_thread();
                crate::process::background_priority();
                crate::journal::rewrite::thread(s)
            })
            .map_err(|e| format!("spawn the journal rewriter: {e}"))?;
    }
    {
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-saver".into())
            .spawn(move || {
                crate::memory::register_thread();
                crate::process::background_priority();
                crate::snapshots::saver(s)
            })
            .map_err(|e| format!("spawn saver: {e}"))?;
    }
    for l in listeners {
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-accept".into())
            .spawn(move || {
                crate::net::listener::accept_loop(l, s, &crate::resp::session::FRONT_END, false)
            })
            .map_err(|e| format!("spawn acceptor: {e}"))?;
        log::notice(&format!("Ready to accept connections tcp addr={addr}"));
    }
    for l in tls_listeners {
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-accept-tls".into())
            .spawn(move || {
                crate::net::listener::accept_loop(l, s, &crate::resp::session::FRONT_END, true)
            })
            .map_err(|e| format!("spawn acceptor: {e}"))?;
        log::notice(&format!("Ready to accept connections tls addr={addr}"));
    }
    for l in mc_listeners {
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cairn-accept-mc".into())
            .spawn(move || {
                crate::net::listener::accept_loop(
                    l,
                    s,
                    &crate::memcache::session::FRONT_END,
                    memcached_tls,
                )
            })
            .map_err(|e| format!("spawn acceptor: {e}"))?;
        let kind = if memcached_tls { "tls" } else { "tcp" };
        log::notice(&format!(
            "Ready to accept memcached clients {kind} addr={addr}"
        ));
    }
    if !pidfile.is_empty() {
        if let Err(e) = std::fs::write(&pidfile, format!("{}\n", std::process::id())) {
            log::warning(&format!("Failed to write PID file {pidfile}: {e}"));
        }
    }
    shared
        .memory
        .startup
        .store(crate::memory::used_exact() as usize, Ordering::Relaxed);
    log::notice(&format!(
        "Server initialized threads={n} shards={}",
        shared.engine.shard_count()
    ));
    crate::process::catch_signals();
    // The listeners are up, as in Redis: clients connecting now are told
    // -LOADING until the snapshot is in.
    if let Some(p) = snapshot {
        crate::snapshots::load(&shared, &p)?;
    }
    if appendonly {
        crate::journal::open_at_startup(&shared)?;
        shared.snapshots.loading.store(false, Ordering::Relaxed);
    }
    crate::tier::loaded(if appendonly {
        crate::tier::Role::Journal
    } else {
        crate::tier::Role::Dump
    });
    crate::cluster::verify_data(&shared)?;
    crate::replication::replica::start_at_boot(&shared);
    if crate::process::supervised_by_systemd() {
        crate::process::notify_systemd("STATUS=Ready to accept connections\n");
        crate::process::notify_systemd("READY=1\n");
    }
    loop {
        while !crate::process::signalled() && !shared.shutdown.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !crate::process::take_signal() {
            break;
        }
        log::warning("Received SIGTERM scheduling shutdown...");
        // As Redis: with save rules, save first; if that fails, keep running.
        if crate::snapshots::final_save(&shared, &cairn_engine::Cx::DETACHED, false, false, false)
            .is_ok()
        {
            break;
        }
        log::warning(
            "SIGTERM received but errors trying to shut down the server, check the logs for more information",
        );
    }
    crate::process::shutdown(&shared, &pidfile)
}

/// Background work at `hz` times a second: active expiry within a quarter
/// of each period (Redis's default effort).
fn cron(shared: Arc<Shared>) {
    crate::memory::register_thread();
    let mut state = ExpireCycle::default();
    let mut balancer = crate::net::balance::Balancer::default();
    let mut repl_tick = Instant::now();
    loop {
        let hz = shared.config.read().hz.clamp(1, 500) as u64;
        let period = Duration::from_millis(1000 / hz);
        let started = Instant::now();
        cairn_engine::clock::tick();
        // The sweep's and the delayed flush's events and records, outside
        // any client command.
        let events = cairn_engine::CmdState::new();
        let cx = cairn_engine::Cx::background(&events);
        // A CLIENT PAUSE keeps the dataset still: no key expires in the
        // background until it ends (Redis 7.0 `activeExpireCycle`). A
        // replica leaves expiry to its master, whose DELs follow: a sweep
        // here could delete a key the master is about to PERSIST.
        if !crate::exec::admission::pause_in_force(&shared)
            && !shared.hot.active_expire_off.load(Ordering::Relaxed)
            && !shared.replication.replica_mode()
        {
            let sweep = Instant::now();
            shared
                .engine
                .active_expire(&cx, &mut state, started + period / 4);
            // Redis's `expire-cycle` latency event: the sweep's run time.
            let ms = sweep.elapsed().as_millis() as u64;
            shared.latency.sample_if_needed("expire-cycle", ms);
        }
        crate::memcache::run_due_flush(&shared, &cx);
        // Keys it expired: `expired` notifications.
        crate::keyevents::after_command(&shared, &events, None);
        balancer.tick(&shared);
        if repl_tick.elapsed() >= Duration::from_secs(1) {
            repl_tick = Instant::now();
            crate::replication::cron(&shared);
        }
        std::thread::sleep(period.saturating_sub(started.elapsed()));
    }
}
