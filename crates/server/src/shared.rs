//! State shared by every thread: the engine, the config, the command table,
//! the client registry, statistics, and the handles to wake each worker.
use crate::client::ClientInfo;
use crate::config::Config;
use crate::exec::table::CommandTable;
use crate::slowlog::SlowLog;
use cairn_engine::Engine;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// A message to a worker thread, delivered through its mailbox + waker.
pub enum Msg {
    /// Pub/Sub messages for subscribers of this worker.
    Pubsub(crate::pubsub::Batch),
    /// A freshly accepted connection to adopt, its port's protocol, the
    /// TLS context it starts a handshake with if its port speaks TLS, and
    /// the refusal to answer once that handshake is done (protected mode
    /// on a TLS port; the connection then runs nothing).
    NewConn(
        std::net::TcpStream,
        std::net::SocketAddr,
        &'static crate::net::session::FrontEnd,
        Option<Arc<rustls::ServerConfig>>,
        Option<crate::net::session::Refusal>,
    ),
    /// A line for the MONITOR client with this id.
    Monitor(u64, Arc<[u8]>),
    /// Look at kill flags and paused clients now.
    Poke,
    /// Run the blocked request of this client again: a key it waits on is
    /// ready, or CLIENT UNBLOCK asked it to stop waiting.
    Wake(u64),
    /// The journal's durable position moved: release output held for it.
    Durable,
    /// A connection another worker handed over (`balance`): adopt it.
    Moved(crate::net::worker::Moved),
    /// Write the invalidation messages waiting in this client's inbox
    /// (`crate::tracking`).
    Invalidate(u64),
    /// Count down once this message is reached (a barrier between
    /// commands on every worker: see `journal::start`).
    Barrier(Arc<std::sync::atomic::AtomicUsize>),
    /// `Wake` on behalf of a client's command, whose reply waits until
    /// this client has had its turn (`crate::served`).
    WakeServed(u64, Vec<Arc<crate::served::Ticket>>),
    /// The clients this client's command woke have all had their turn:
    /// write its held reply and run its next request (`crate::served`).
    Served(u64),
}

/// How other threads reach a worker.
pub struct WorkerHandle {
    pub mailbox: Mutex<Vec<Msg>>,
    pub waker: mio::Waker,
}

impl WorkerHandle {
    pub fn send(&self, msg: Msg) {
        self.mailbox.lock().push(msg);
        // A failed wake means the poll is gone: the worker is shutting down.
        let _ = self.waker.wake();
    }
}

/// Counters owned by one worker. Only that worker writes them (a load and a
/// store, no atomic read-modify-write on the request path); INFO sums them.
/// Aligned to 128 bytes (two cache lines, the unit the adjacent-line
/// prefetcher moves) so that two workers' counters, written on every
/// request, never share a line: unaligned, the whole array fit in one.
#[repr(align(128))]
pub struct WorkerStats {
    pub commands: AtomicU64,
    pub net_in: AtomicU64,
    pub net_out: AtomicU64,
    pub error_replies: AtomicU64,
    /// The work the worker thread did, in ns: its CPU time less the time
    /// it spent spinning on polls that found nothing (`worker-spin-us`).
    /// Published at each of its cron ticks, read by `balance`.
    pub work_ns: AtomicU64,
    /// The worker thread's id (gettid; 0 until it runs), for `balance` to
    /// read its run-queue wait in /proc.
    pub tid: AtomicU32,
    /// Connections this worker serves.
    pub conns: AtomicUsize,
    /// Per command id: calls, microseconds, rejected calls, failed calls.
    pub cmd: Box<[[AtomicU64; 4]]>,
    /// Per command id: the latency histogram (`latency-tracking`).
    pub latency: crate::cmdlatency::Tracks,
}

impl WorkerStats {
    pub fn new(commands: usize) -> Self {
        WorkerStats {
            commands: AtomicU64::new(0),
            net_in: AtomicU64::new(0),
            net_out: AtomicU64::new(0),
            error_replies: AtomicU64::new(0),
            work_ns: AtomicU64::new(0),
            tid: AtomicU32::new(0),
            conns: AtomicUsize::new(0),
            cmd: (0..commands).map(|_| Default::default()).collect(),
            latency: crate::cmdlatency::Tracks::new(commands),
        }
    }
}

/// Adds `n` to a counter that only the calling thread writes.
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Values read on the request path, copied out of the config so a command
/// never takes the config lock. CONFIG SET refreshes them.
#[derive(Default)]
pub struct Hot {
    pub requirepass: AtomicBool,
    pub maxclients: AtomicUsize,
    pub timeout_secs: AtomicU64,
    pub query_buffer_limit: AtomicUsize,
    pub proto_max_bulk_len: AtomicUsize,
    pub slowlog_slower_than_us: AtomicU64,
    /// slowlog-log-slower-than < 0 disables the slow log.
    pub slowlog_enabled: AtomicBool,
    pub maxmemory: AtomicU64,
    pub worker_spin_us: AtomicU64,
    pub worker_balance: AtomicBool,
    /// `client-output-buffer-limit pubsub`: hard bytes, soft bytes, soft
    /// seconds (0 = off), checked on every delivery to a subscriber.
    pub pubsub_obuf_hard: AtomicU64,
    pub pubsub_obuf_soft: AtomicU64,
    pub pubsub_obuf_soft_secs: AtomicU64,
    /// `client-output-buffer-limit normal`, likewise, checked after a
    /// normal client's requests ran (its replies, referenced large values
    /// included: `crate::outref`).
    pub normal_obuf_hard: AtomicU64,
    pub normal_obuf_soft: AtomicU64,
    pub normal_obuf_soft_secs: AtomicU64,
    /// `hll-sparse-max-bytes`, read by PFADD and PFMERGE.
    pub hll_sparse_max_bytes: AtomicUsize,
    /// `busy-reply-threshold`, milliseconds (0: never busy).
    pub busy_reply_threshold_ms: AtomicU64,
    /// DEBUG SET-ACTIVE-EXPIRE 0: the background expiry sweep is off.
    pub active_expire_off: AtomicBool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS 1: scripts may call `noscript`
    /// commands (Redis's `script_disable_deny_script`, for tests).
    pub script_allow_denied: AtomicBool,
    /// `latency-tracking`: each command's run time goes in its histogram.
    pub latency_tracking: AtomicBool,
}

/// CLIENT PAUSE state.
#[derive(Default)]
pub struct Pause {
    /// Unix ms until which clients are paused; 0 when not paused.
    pub until_ms: AtomicU64,
    /// True: every command waits (ALL); false: only writes (WRITE).
    pub all: AtomicBool,
    /// FAILOVER's pause (Redis's PAUSE_DURING_FAILOVER) holds `until_ms`
    /// at u64::MAX: CLIENT UNPAUSE leaves it, the failover's end lifts it.
    pub failover: AtomicBool,
    /// Clients with a request held by the pause: INFO's `blocked_clients`
    /// counts them, as Redis counts a postponed client as blocked.
    pub held: AtomicUsize,
}

/// Everything shared across threads.
pub struct Shared {
    pub engine: Engine,
    pub config: RwLock<Config>,
    pub hot: Hot,
    pub table: CommandTable,
    pub clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    pub next_client_id: AtomicU64,
    pub connected: AtomicUsize,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub workers: OnceLock<Vec<WorkerHandle>>,
    pub worker_stats: Box<[WorkerStats]>,
    pub started: Instant,
    pub run_id: String,
    pub tcp_port: AtomicU16,
    /// The TLS context new connections on a TLS port get (`tls-*`).
    pub tls: crate::net::tls_config::TlsContext,
    pub shutdown: AtomicBool,
    pub pause: Pause,
    pub slowlog: Mutex<SlowLog>,
    /// LATENCY's event samples (`latency-monitor-threshold`).
    pub latency: crate::latency::Monitor,
    pub memory: crate::memory::Guard,
    /// Pub/Sub subscriptions (channels, patterns, shard channels).
    pub pubsub: crate::pubsub::PubSub,
    /// (client id, worker) of every MONITOR client.
    pub monitors: Mutex<Vec<(u64, usize)>>,
    pub monitor_count: AtomicUsize,
    /// Stat counters reset by CONFIG RESETSTAT are offset from these.
    pub stat_reset_at: Mutex<Instant>,
    /// Clients blocked on keys.
    pub blocking: crate::blocking::Registry,
    /// The memcached protocol's statistics and server-wide state.
    pub memcache: crate::memcache::McShared,
    /// The journal (appendonly): its buffer, writer and positions.
    pub journal: Arc<crate::journal::Journal>,
    /// Snapshots: BGSAVE state, save rules, loading (`snapshots.rs`).
    pub snapshots: crate::snapshots::Snapshots,
    /// EVAL's script cache, the function libraries, what each worker runs.
    pub scripts: crate::script::Scripts,
    /// Which workers take connections (`balance.rs`).
    pub balance: crate::net::balance::Balance,
    /// ACL users and the ACL log (`auth`).
    pub acl: crate::auth::Registry,
    /// Client-side caching's tracking table (`tracking.rs`).
    pub tracking: crate::tracking::Tracking,
    /// The replication stream and backlog (`replication`).
    pub replication: Arc<crate::replication::Replication>,
    /// Cluster mode: the node's identity (`cluster`).
    pub cluster: crate::cluster::Cluster,
}

impl Shared {
    pub fn worker(&self, i: usize) -> &WorkerHandle {
        &self
            .workers
            .get()
            .expect("workers are registered before serving")[i]
    }

    pub fn workers(&self) -> &[WorkerHandle] {
        self.workers.get().map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// Copies the request-path values out of the config.
    pub fn refresh_hot(&self) {
        let c = self.config.read();
        let h = &self.hot;
        h.maxmemory.store(c.maxmemory, Ordering::Relaxed);
        h.hll_sparse_max_bytes.store(
            usize::try_from(c.hll_sparse_max_bytes).unwrap_or(usize::MAX),
            Ordering::Relaxed,
        );
        h.worker_spin_us.store(c.worker_spin_us, Ordering::Relaxed);
        h.worker_balance.store(c.worker_balance, Ordering::Relaxed);
        h.maxclients.store(c.maxclients as usize, Ordering::Relaxed);
        h.timeout_secs.store(c.timeout as u64, Ordering::Relaxed);
        h.query_buffer_limit
            .store(c.client_query_buffer_limit as usize, Ordering::Relaxed);
        h.proto_max_bulk_len
            .store(c.proto_max_bulk_len as usize, Ordering::Relaxed);
        h.slowlog_enabled
            .store(c.slowlog_log_slower_than >= 0, Ordering::Relaxed);
        h.slowlog_slower_than_us
            .store(c.slowlog_log_slower_than.max(0) as u64, Ordering::Relaxed);
        h.busy_reply_threshold_ms
            .store(c.busy_reply_threshold, Ordering::Relaxed);
        h.latency_tracking
            .store(c.latency_tracking, Ordering::Relaxed);
        self.latency
            .threshold_ms
            .store(c.latency_monitor_threshold, Ordering::Relaxed);
        self.memory.configure(&c);
        self.replication.configure(
            c.repl_backlog_size,
            c.min_replicas_to_write,
            c.min_replicas_max_lag,
        );
        crate::replication::sync_expiry(self, c.replica_read_only);
        let limits = &self.engine.limits;
        limits.lfu.store(
            matches!(
                c.maxmemory_policy,
                crate::config::MaxmemoryPolicy::AllkeysLfu
                    | crate::config::MaxmemoryPolicy::VolatileLfu
            ),
            Ordering::Relaxed,
        );
        limits
            .proto_max_bulk_len
            .store(c.proto_max_bulk_len as usize, Ordering::Relaxed);
        limits
            .hash_max_listpack_entries
            .store(c.hash_max_listpack_entries, Ordering::Relaxed);
        limits
            .hash_max_listpack_value
            .store(c.hash_max_listpack_value, Ordering::Relaxed);
        limits.value_compression_min.store(
            if c.value_compression {
                c.value_compression_min_size
            } else {
                usize::MAX
            },
            Ordering::Relaxed,
        );
        limits
            .value_compression_level
            .store(c.value_compression_level, Ordering::Relaxed);
        crate::zcoder::configure(limits, &c);
        limits
            .notify
            .store(c.notify_keyspace_events.0, Ordering::Relaxed);
        limits
            .list_max_listpack_size
            .store(i64::from(c.list_max_listpack_size), Ordering::Relaxed);
        limits
            .set_max_intset_entries
            .store(c.set_max_intset_entries, Ordering::Relaxed);
        limits
            .set_max_listpack_entries
            .store(c.set_max_listpack_entries, Ordering::Relaxed);
        limits
            .set_max_listpack_value
            .store(c.set_max_listpack_value, Ordering::Relaxed);
        limits
            .zset_max_listpack_entries
            .store(c.zset_max_listpack_entries, Ordering::Relaxed);
        limits
            .zset_max_listpack_value
            .store(c.zset_max_listpack_value, Ordering::Relaxed);
        let node_bytes = usize::try_from(c.stream_node_max_bytes).unwrap_or(usize::MAX);
        let node_entries = usize::try_from(c.stream_node_max_entries).unwrap_or(usize::MAX);
        limits
            .stream_node_max_bytes
            .store(node_bytes, Ordering::Relaxed);
        limits
            .stream_node_max_entries
            .store(node_entries, Ordering::Relaxed);
        self.slowlog.lock().set_max_len(c.slowlog_max_len as usize);
        self.tracking.max_keys.store(
            usize::try_from(c.tracking_table_max_keys).unwrap_or(usize::MAX),
            Ordering::Relaxed,
        );
        self.journal.set_policy(c.appendfsync);
        let ps = &c.client_output_buffer_limit.pubsub;
        h.pubsub_obuf_hard.store(ps.hard_bytes, Ordering::Relaxed);
        h.pubsub_obuf_soft.store(ps.soft_bytes, Ordering::Relaxed);
        h.pubsub_obuf_soft_secs
            .store(ps.soft_seconds, Ordering::Relaxed);
        let n = &c.client_output_buffer_limit.normal;
        h.normal_obuf_hard.store(n.hard_bytes, Ordering::Relaxed);
        h.normal_obuf_soft.store(n.soft_bytes, Ordering::Relaxed);
        h.normal_obuf_soft_secs
            .store(n.soft_seconds, Ordering::Relaxed);
        drop(c);
        // A lowered `tracking-table-max-keys` applies at once.
        crate::tracking::enforce_limit(self);
        // `save` or `stop-writes-on-bgsave-error` may have changed.
        self.snapshots.refresh_deny(self);
    }

    /// Microseconds since the server started.
    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}
