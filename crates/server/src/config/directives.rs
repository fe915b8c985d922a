//! The directive table: one line of `directives!` per directive declares
//! the `Config` field, its name and alias, syntax, default, flags and
//! check; parsing, CONFIG GET/SET and CONFIG REWRITE are all driven by it.

use super::*;

/// No flags: CONFIG SET may change it.
pub(super) const MUTABLE: u8 = 0;
/// CONFIG SET refuses it ("can't set immutable config").
pub(super) const IMMUTABLE: u8 = 1;
/// CONFIG SET allows it only as `enable-protected-configs` says.
pub(super) const PROTECTED: u8 = 2;
/// The value is a secret: callers should redact it from logs, MONITOR and
/// the slow log, and `Debug` hides it.
pub(super) const SENSITIVE: u8 = 4;

pub(super) const I32_MIN: i128 = i32::MIN as i128;
pub(super) const I32_MAX: i128 = i32::MAX as i128;
pub(super) const U32_MAX: i128 = u32::MAX as i128;
pub(super) const I64_MAX: i128 = i64::MAX as i128;
pub(super) const U64_MAX: i128 = u64::MAX as i128;
/// Redis's size_t configs top out at LONG_MAX; a 32-bit usize cannot hold that.
pub(super) const SIZE_MAX: i128 = if (usize::MAX as u128) < (i64::MAX as u128) {
    usize::MAX as i128
} else {
    I64_MAX
};
pub(super) const MB: i128 = 1024 * 1024;

pub(super) struct Directive {
    pub(super) name: &'static str,
    pub(super) alias: Option<&'static str>,
    pub(super) kind: Kind,
    /// The default, written as in a config file after the name.
    pub(super) default: &'static str,
    pub(super) flags: u8,
    pub(super) refine: Refine,
    pub(super) get: fn(&Config) -> Value,
    pub(super) put: fn(&mut Config, &Value) -> bool,
}

impl Directive {
    pub(super) fn default_value(&self) -> Result<Value, String> {
        let args = if self.kind.multi_arg() {
            split_args(self.default.as_bytes())
                .map(bytes_to_strings)
                .ok_or("unbalanced quotes")?
                .ok_or("not UTF-8")?
        } else {
            vec![self.default.to_string()]
        };
        let zero = (self.get)(&Config::zeroed());
        self.kind.parse(&args, &zero)
    }

    pub(super) fn store(&self, config: &mut Config, v: &Value) -> Result<(), String> {
        if (self.put)(config, v) {
            Ok(())
        } else {
            Err(format!(
                "internal error: the value of '{}' does not fit its field",
                self.name
            ))
        }
    }

    pub(super) fn render(&self, config: &Config) -> String {
        self.kind.render(&(self.get)(config))
    }
}

macro_rules! alias {
    () => {
        None
    };
    ($a:literal) => {
        Some($a)
    };
}

macro_rules! directives {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident : $ty:ty = $name:literal $(| $alias:literal)?,
            $kind:expr, $default:literal, $flags:expr, $refine:expr;
    )*) => {
        /// The server configuration. Field docs give the directive name;
        /// values are as Redis stores them (memory in bytes, times in the
        /// directive's unit).
        #[derive(Clone, PartialEq, Eq)]
        pub struct Config {
            $( $(#[doc = $doc])* pub $field: $ty, )*
            /// Absolute path of the config file given at startup.
            pub(super) config_file: Option<PathBuf>,
            /// `user <name> <rules...>` lines, in order (file only; the
            /// ACL registry is built from them at start). CONFIG REWRITE
            /// fills its copy's with the running users.
            pub user_lines: Vec<Vec<String>>,
        }

        impl Config {
            /// Every field at its type's zero; only a base for applying the
            /// table's defaults.
            pub(super) fn zeroed() -> Config {
                Config { $( $field: <$ty>::default(), )* config_file: None, user_lines: Vec::new() }
            }
        }

        pub(super) static TABLE: &[Directive] = &[$(
            Directive {
                name: $name,
                alias: alias!($($alias)?),
                kind: $kind,
                default: $default,
                flags: $flags,
                refine: $refine,
                get: |c: &Config| Field::to_value(&c.$field),
                put: |c: &mut Config, v: &Value| match Field::from_value(v) {
                    Some(x) => {
                        c.$field = x;
                        true
                    }
                    None => false,
                },
            },
        )*];
    };
}

pub(super) const fn int(min: i128, max: i128) -> Kind {
    Kind::Int { min, max }
}

pub(super) const fn mem(min: i128, max: i128) -> Kind {
    Kind::Memory { min, max }
}

pub(super) const STR: Kind = Kind::Str {
    null_if_empty: false,
};
pub(super) const NULLABLE_STR: Kind = Kind::Str {
    null_if_empty: true,
};

directives! {
    /// `bind`: addresses to listen on; a leading `-` marks one that may be
    /// unavailable. Cairn defaults to loopback only (Redis: `* -::*`).
    bind: Vec<String> = "bind", Kind::Bind, "127.0.0.1", MUTABLE, keep;
    /// `port`: TCP port, 0 = no TCP listener. Immutable in Cairn.
    port: u16 = "port", int(0, 65535), "6379", IMMUTABLE, keep;
    /// `databases`.
    databases: usize = "databases", int(1, I32_MAX), "16", IMMUTABLE, keep;
    /// `requirepass`: empty = no password.
    requirepass: String = "requirepass", NULLABLE_STR, "", SENSITIVE, keep;
    /// `maxclients`.
    maxclients: u32 = "maxclients", int(1, U32_MAX), "10000", MUTABLE, keep;
    /// `timeout`: idle seconds before a client is closed, 0 = never.
    timeout: u32 = "timeout", int(0, I32_MAX), "0", MUTABLE, keep;
    /// `tcp-keepalive`: seconds, 0 = off.
    tcp_keepalive: u32 = "tcp-keepalive", int(0, I32_MAX), "300", MUTABLE, keep;
    /// `tcp-backlog`.
    tcp_backlog: u32 = "tcp-backlog", int(0, I32_MAX), "511", IMMUTABLE, keep;
    /// `protected-mode`.
    protected_mode: bool = "protected-mode", Kind::Bool, "yes", MUTABLE, keep;
    /// `proto-max-bulk-len`: bytes.
    proto_max_bulk_len: u64 = "proto-max-bulk-len", mem(MB, I64_MAX), "512mb", MUTABLE, keep;
    /// `client-query-buffer-limit`: bytes.
    client_query_buffer_limit: u64 = "client-query-buffer-limit", mem(MB, I64_MAX), "1gb", MUTABLE, keep;
    /// `loglevel`.
    loglevel: LogLevel = "loglevel", Kind::Enum(LogLevel::NAMES), "notice", MUTABLE, keep;
    /// `logfile`: empty = standard error. Relative to `dir`, as Redis
    /// resolves it after chdir.
    logfile: String = "logfile", STR, "", IMMUTABLE, keep;
    /// `pidfile`: empty = none. Immutable, as in Redis.
    pidfile: String = "pidfile", NULLABLE_STR, "", IMMUTABLE, keep;
    /// `daemonize`: fork into the background at start-up, as Redis does
    /// (`crate::process::daemonize`); with no `pidfile`, one is written at
    /// `process::DEFAULT_PIDFILE`.
    daemonize: bool = "daemonize", Kind::Bool, "no", IMMUTABLE, keep;
    /// `supervised`: no, upstart, systemd or auto; when supervision is
    /// found, `daemonize` is ignored, as in Redis.
    supervised: Supervised = "supervised", Kind::Enum(Supervised::NAMES), "no", IMMUTABLE, keep;
    /// `dir`: working directory. Parsing checks it exists and stores its
    /// absolute path; changing the process's directory is the caller's job.
    /// Protected, as in Redis.
    dir: String = "dir", STR, ".", PROTECTED, valid_dir;
    /// `dbfilename`: the snapshot file in `dir`. Protected, as in Redis.
    /// Cairn's default names its own format (`dump.cairn`, not Redis's
    /// `dump.rdb`), so a Redis RDB file left in `dir` is never mistaken
    /// for a Cairn snapshot.
    dbfilename: String = "dbfilename", STR, "dump.cairn", PROTECTED, valid_dbfilename;
    /// `appendonly`: record every write in the journal (Cairn's AOF).
    appendonly: bool = "appendonly", Kind::Bool, "no", MUTABLE, keep;
    /// `appenddirname`: the journal's directory, under `dir`. Immutable, as in Redis.
    appenddirname: String = "appenddirname", STR, "appendonlydir", IMMUTABLE, valid_appenddirname;
    /// `auto-aof-rewrite-percentage`: compact when the journal grew by this
    /// much over its size after the last compaction; 0 = never.
    auto_aof_rewrite_percentage: u32 = "auto-aof-rewrite-percentage", int(0, I32_MAX), "100", MUTABLE, keep;
    /// `auto-aof-rewrite-min-size`: no automatic compaction below this size.
    auto_aof_rewrite_min_size: u64 = "auto-aof-rewrite-min-size", mem(0, I64_MAX), "64mb", MUTABLE, keep;
    /// `aof-load-truncated`: start with a warning when the last journal
    /// batch is torn (a crash mid-write), instead of refusing to start.
    aof_load_truncated: bool = "aof-load-truncated", Kind::Bool, "yes", MUTABLE, keep;
    /// `no-appendfsync-on-rewrite`: accepted for compatibility. Cairn's
    /// compaction does not fork and its fsyncs do not compete with a child,
    /// so fsyncs go on during a rewrite.
    no_appendfsync_on_rewrite: bool = "no-appendfsync-on-rewrite", Kind::Bool, "no", MUTABLE, keep;
    /// `appendfilename`. Immutable, as in Redis.
    appendfilename: String = "appendfilename", STR, "appendonly.aof", IMMUTABLE, valid_appendfilename;
    /// `appendfsync`.
    appendfsync: AppendFsync = "appendfsync", Kind::Enum(AppendFsync::NAMES), "everysec", MUTABLE, keep;
    /// `save`: snapshot rules, `<seconds> <changes>` pairs (a BGSAVE when
    /// at least `changes` keys changed and `seconds` passed since the last
    /// save). Cairn's default is none (Redis 7: `3600 1 300 100 60
    /// 10000`): persistence is opted into, so a Cairn started anywhere
    /// writes no file unasked; docs/design.md ("Snapshots") explains.
    save: Vec<SaveRule> = "save", Kind::Save, "", MUTABLE, keep;
    /// `stop-writes-on-bgsave-error`: with save rules, refuse writes
    /// (`-MISCONF`) while the last background save failed.
    stop_writes_on_bgsave_error: bool = "stop-writes-on-bgsave-error", Kind::Bool, "yes", MUTABLE, keep;
    /// `rdbchecksum`: CRCs in snapshot files (written as 0 and not
    /// checked when off). Immutable, as in Redis.
    rdbchecksum: bool = "rdbchecksum", Kind::Bool, "yes", IMMUTABLE, keep;
    /// `key-load-delay`: microseconds to wait per key loaded (a Redis
    /// debugging knob that tests use to watch a slow load).
    key_load_delay: i32 = "key-load-delay", int(I32_MIN, I32_MAX), "0", MUTABLE, keep;
    /// `rdb-key-save-delay`: microseconds to wait per key written by a
    /// snapshot (a Redis debugging knob that keeps a BGSAVE running).
    rdb_key_save_delay: i32 = "rdb-key-save-delay", int(I32_MIN, I32_MAX), "0", MUTABLE, keep;
    /// `snapshot-queue-limit` (Cairn only): serialized bytes a running
    /// snapshot may hold in memory (its copy-on-write cost) before the
    /// thread that adds to them writes them to the file itself; 0 = no
    /// limit.
    snapshot_queue_limit: u64 = "snapshot-queue-limit", mem(0, U64_MAX), "64mb", MUTABLE, keep;
    /// `maxmemory`: bytes, 0 = no limit.
    maxmemory: u64 = "maxmemory", mem(0, U64_MAX), "0", MUTABLE, keep;
    /// `maxmemory-policy`.
    maxmemory_policy: MaxmemoryPolicy = "maxmemory-policy", Kind::Enum(MaxmemoryPolicy::NAMES), "noeviction", MUTABLE, keep;
    /// `maxmemory-samples`.
    maxmemory_samples: u32 = "maxmemory-samples", int(1, I32_MAX), "5", MUTABLE, keep;
    /// `maxmemory-eviction-tenacity`: eviction time budget per command.
    maxmemory_eviction_tenacity: u32 = "maxmemory-eviction-tenacity", int(0, 100), "10", MUTABLE, keep;
    /// `lfu-log-factor`: how slowly the LFU counter saturates.
    lfu_log_factor: u32 = "lfu-log-factor", int(0, I32_MAX), "10", MUTABLE, keep;
    /// `lfu-decay-time`: minutes per LFU counter decrement (0: never).
    lfu_decay_time: u32 = "lfu-decay-time", int(0, I32_MAX), "1", MUTABLE, keep;
    /// `hz`: any value is accepted and clamped to 1..=500, as Redis does.
    hz: u32 = "hz", int(0, I32_MAX), "10", MUTABLE, clamp_hz;
    /// `dynamic-hz`.
    dynamic_hz: bool = "dynamic-hz", Kind::Bool, "yes", MUTABLE, keep;
    /// `notify-keyspace-events`.
    notify_keyspace_events: KeyspaceEvents = "notify-keyspace-events", Kind::Events, "", MUTABLE, keep;
    /// `slowlog-log-slower-than`: microseconds; negative disables the slow
    /// log, 0 logs every command.
    slowlog_log_slower_than: i64 = "slowlog-log-slower-than", int(-1, I64_MAX), "10000", MUTABLE, keep;
    /// `busy-reply-threshold` (alias `lua-time-limit`): milliseconds a
    /// script may run before other clients get BUSY and SCRIPT KILL /
    /// FUNCTION KILL apply; 0 = never.
    busy_reply_threshold: u64 = "busy-reply-threshold" | "lua-time-limit", int(0, I64_MAX), "5000", MUTABLE, keep;
    /// `lua-heap-limit` (Cairn only): bytes each worker's Lua interpreter
    /// may allocate; a script past it fails with "not enough memory"
    /// instead of growing the server without bound. 0 = no limit.
    lua_heap_limit: u64 = "lua-heap-limit", mem(0, U64_MAX), "256mb", MUTABLE, keep;
    /// `tracking-table-max-keys`: keys client-side caching remembers
    /// before it forgets random ones (telling their clients); 0 = no limit.
    tracking_table_max_keys: u64 = "tracking-table-max-keys", int(0, I64_MAX), "1000000", MUTABLE, keep;
    /// `slowlog-max-len`.
    slowlog_max_len: u64 = "slowlog-max-len", int(0, I64_MAX), "128", MUTABLE, keep;
    /// `latency-tracking`: each command's run times go in its histogram
    /// (`crate::cmdlatency`).
    latency_tracking: bool = "latency-tracking", Kind::Bool, "yes", MUTABLE, keep;
    /// `enable-debug-command`.
    enable_debug_command: ProtectedAction = "enable-debug-command", Kind::Enum(ProtectedAction::NAMES), "no", IMMUTABLE, keep;
    /// `enable-protected-configs`: who may CONFIG SET `dir` and
    /// `dbfilename`. Immutable, as in Redis.
    enable_protected_configs: ProtectedAction = "enable-protected-configs", Kind::Enum(ProtectedAction::NAMES), "no", IMMUTABLE, keep;
    /// `hash-max-listpack-entries` (alias `hash-max-ziplist-entries`).
    /// Default 512 as in Redis 7.0.
    hash_max_listpack_entries: usize = "hash-max-listpack-entries" | "hash-max-ziplist-entries", int(0, SIZE_MAX), "512", MUTABLE, keep;
    /// `hash-max-listpack-value` (alias `hash-max-ziplist-value`). Cairn's
    /// default is 1024 (Redis: 64), so hashes of 100-byte to 1 KB values,
    /// such as YCSB records, stay one packed (and compressible) buffer
    /// instead of a pointer-heavy table (issue 5).
    hash_max_listpack_value: usize = "hash-max-listpack-value" | "hash-max-ziplist-value", int(0, SIZE_MAX), "1024", MUTABLE, keep;
    /// `set-max-intset-entries`.
    set_max_intset_entries: usize = "set-max-intset-entries", int(0, SIZE_MAX), "512", MUTABLE, keep;
    /// `set-max-listpack-entries` (Redis 7.2).
    set_max_listpack_entries: usize = "set-max-listpack-entries", int(0, SIZE_MAX), "128", MUTABLE, keep;
    /// `set-max-listpack-value` (Redis 7.2).
    set_max_listpack_value: usize = "set-max-listpack-value", int(0, SIZE_MAX), "64", MUTABLE, keep;
    /// `zset-max-listpack-entries` (alias `zset-max-ziplist-entries`).
    zset_max_listpack_entries: usize = "zset-max-listpack-entries" | "zset-max-ziplist-entries", int(0, SIZE_MAX), "128", MUTABLE, keep;
    /// `zset-max-listpack-value` (alias `zset-max-ziplist-value`). Cairn's
    /// default is 1024 (Redis: 64), as for hashes.
    zset_max_listpack_value: usize = "zset-max-listpack-value" | "zset-max-ziplist-value", int(0, SIZE_MAX), "1024", MUTABLE, keep;
    /// `list-max-listpack-size` (alias `list-max-ziplist-size`): positive =
    /// entries per node, -1..-5 = 4kb..64kb per node.
    list_max_listpack_size: i32 = "list-max-listpack-size" | "list-max-ziplist-size", int(I32_MIN, I32_MAX), "-2", MUTABLE, keep;
    /// `lazyfree-lazy-user-del`.
    lazyfree_lazy_user_del: bool = "lazyfree-lazy-user-del", Kind::Bool, "no", MUTABLE, keep;
    /// `lazyfree-lazy-user-flush`.
    lazyfree_lazy_user_flush: bool = "lazyfree-lazy-user-flush", Kind::Bool, "no", MUTABLE, keep;
    /// `lazyfree-lazy-expire`.
    lazyfree_lazy_expire: bool = "lazyfree-lazy-expire", Kind::Bool, "no", MUTABLE, keep;
    /// `lazyfree-lazy-eviction`.
    lazyfree_lazy_eviction: bool = "lazyfree-lazy-eviction", Kind::Bool, "no", MUTABLE, keep;
    /// `active-expire-effort`.
    active_expire_effort: u32 = "active-expire-effort", int(1, 10), "1", MUTABLE, keep;
    /// `client-output-buffer-limit`.
    client_output_buffer_limit: ClientOutputBufferLimits = "client-output-buffer-limit", Kind::Obuf,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", MUTABLE, keep;
    /// `server-threads` (Cairn): worker threads, 0 = one per core.
    server_threads: usize = "server-threads", int(0, 1024), "0", IMMUTABLE, keep;
    /// `worker-spin-us` (Cairn only): how long a busy worker keeps polling
    /// without sleeping after its last request, 0 = never spin.
    worker_spin_us: u64 = "worker-spin-us", int(0, 1_000_000), "50", MUTABLE, keep;
    /// `worker-retain-locks` (Cairn only): a worker keeps a shard's lock
    /// from one command to the next while they hit the same shard, for at
    /// most one loop turn (`cairn_engine::keyspace::retain_locks`).
    worker_retain_locks: bool = "worker-retain-locks", Kind::Bool, "yes", IMMUTABLE, keep;
    /// `worker-balance` (Cairn only): serve clients on as many workers as
    /// the load needs and the machine's free cores allow, moving quiet
    /// connections between workers (`balance.rs`); no = every worker, always.
    worker_balance: bool = "worker-balance", Kind::Bool, "yes", MUTABLE, keep;
    /// `memcached-port` (Cairn): memcached protocol port, 0 = off.
    memcached_port: u16 = "memcached-port", int(0, 65535), "0", IMMUTABLE, keep;
    /// `io-threads`: accepted and shown as Redis does, otherwise ignored;
    /// Cairn's threading is `server-threads`.
    io_threads: u32 = "io-threads", int(1, 128), "1", IMMUTABLE, keep;

    // Directives of Redis 7.0's stock redis.conf, so Cairn starts from a
    // Redis config file. Ranges, flags and defaults are Redis's. Those
    // without an effect in Cairn are listed, with the reason, in
    // tests/diff/DIFFERENCES.md ("Directives accepted without effect").

    /// `oom-score-adj`: set `/proc/self/oom_score_adj` from
    /// `oom-score-adj-values` (`crate::process::set_oom_score_adj`).
    oom_score_adj: OomScoreAdj = "oom-score-adj", Kind::Enum(OomScoreAdj::NAMES), "no", MUTABLE, fold_oom_relative;
    /// `oom-score-adj-values`: master, replica, background-child scores;
    /// Cairn uses the first (it is never a replica and does not fork).
    oom_score_adj_values: OomScoreAdjValues = "oom-score-adj-values", Kind::OomValues, "0 200 800", MUTABLE, keep;
    /// `hll-sparse-max-bytes`: a sparse HyperLogLog that would grow past
    /// this many bytes turns dense (read per PFADD/PFMERGE via `Hot`).
    hll_sparse_max_bytes: u64 = "hll-sparse-max-bytes", mem(0, I64_MAX), "3000", MUTABLE, keep;
    /// `jemalloc-bg-thread`: jemalloc's background purging threads
    /// (`opt.background_thread`), switched at start-up and on CONFIG SET.
    jemalloc_bg_thread: bool = "jemalloc-bg-thread", Kind::Bool, "yes", MUTABLE, keep;
    /// `always-show-logo`: no effect (Cairn prints no ASCII logo).
    always_show_logo: bool = "always-show-logo", Kind::Bool, "no", IMMUTABLE, keep;
    /// `set-proc-title`: no effect (Cairn does not rewrite its argv).
    set_proc_title: bool = "set-proc-title", Kind::Bool, "yes", IMMUTABLE, keep;
    /// `proc-title-template`: validated as Redis does; no effect.
    proc_title_template: String = "proc-title-template", STR, "{title} {listen-addr} {server-mode}", MUTABLE, valid_proc_title_template;
    /// `rdbcompression`: no effect (see DIFFERENCES.md).
    rdbcompression: bool = "rdbcompression", Kind::Bool, "yes", MUTABLE, keep;
    /// `rdb-del-sync-files`: no effect (no replication sync files).
    rdb_del_sync_files: bool = "rdb-del-sync-files", Kind::Bool, "no", MUTABLE, keep;
    /// `rdb-save-incremental-fsync`: no effect.
    rdb_save_incremental_fsync: bool = "rdb-save-incremental-fsync", Kind::Bool, "yes", MUTABLE, keep;
    /// `aof-rewrite-incremental-fsync`: no effect.
    aof_rewrite_incremental_fsync: bool = "aof-rewrite-incremental-fsync", Kind::Bool, "yes", MUTABLE, keep;
    /// `aof-use-rdb-preamble`: no effect (the journal's base is always a
    /// Cairn snapshot).
    aof_use_rdb_preamble: bool = "aof-use-rdb-preamble", Kind::Bool, "yes", MUTABLE, keep;
    /// `aof-timestamp-enabled`: no effect.
    aof_timestamp_enabled: bool = "aof-timestamp-enabled", Kind::Bool, "no", MUTABLE, keep;
    /// `replica-serve-stale-data` (alias `slave-serve-stale-data`): no
    /// effect (no replication), as for every `replica-*`/`repl-*` below.
    replica_serve_stale_data: bool = "replica-serve-stale-data" | "slave-serve-stale-data", Kind::Bool, "yes", MUTABLE, keep;
    /// `replica-read-only` (alias `slave-read-only`).
    replica_read_only: bool = "replica-read-only" | "slave-read-only", Kind::Bool, "yes", MUTABLE, keep;
    /// `replica-priority` (alias `slave-priority`).
    replica_priority: u32 = "replica-priority" | "slave-priority", int(0, I32_MAX), "100", MUTABLE, keep;
    /// `replica-lazy-flush` (alias `slave-lazy-flush`).
    replica_lazy_flush: bool = "replica-lazy-flush" | "slave-lazy-flush", Kind::Bool, "no", MUTABLE, keep;
    /// `repl-diskless-sync`.
    repl_diskless_sync: bool = "repl-diskless-sync", Kind::Bool, "yes", MUTABLE, keep;
    /// `repl-diskless-sync-delay`: seconds.
    repl_diskless_sync_delay: u32 = "repl-diskless-sync-delay", int(0, I32_MAX), "5", MUTABLE, keep;
    /// `repl-diskless-sync-max-replicas`.
    repl_diskless_sync_max_replicas: u32 = "repl-diskless-sync-max-replicas", int(0, I32_MAX), "0", MUTABLE, keep;
    /// `repl-diskless-load`.
    repl_diskless_load: ReplDisklessLoad = "repl-diskless-load", Kind::Enum(ReplDisklessLoad::NAMES), "disabled", MUTABLE, keep;
    /// `repl-disable-tcp-nodelay`.
    repl_disable_tcp_nodelay: bool = "repl-disable-tcp-nodelay", Kind::Bool, "no", MUTABLE, keep;
    /// `acllog-max-len`: entries ACL LOG keeps.
    acllog_max_len: u64 = "acllog-max-len", int(0, I64_MAX), "128", MUTABLE, keep;
    /// `aclfile`: users are loaded from (and ACL SAVE writes) this file;
    /// empty = users come from `user` lines.
    aclfile: String = "aclfile", NULLABLE_STR, "", IMMUTABLE, keep;
    /// `acl-pubsub-default`.
    acl_pubsub_default: PubsubDefault = "acl-pubsub-default", Kind::Enum(PubsubDefault::NAMES), "resetchannels", MUTABLE, keep;
    /// `latency-monitor-threshold`: milliseconds; a command at least this
    /// slow is a LATENCY event (`crate::latency`); 0 is off.
    latency_monitor_threshold: u64 = "latency-monitor-threshold", int(0, I64_MAX), "0", MUTABLE, keep;
    /// `lazyfree-lazy-server-del`: no effect (see DIFFERENCES.md).
    lazyfree_lazy_server_del: bool = "lazyfree-lazy-server-del", Kind::Bool, "no", MUTABLE, keep;
    /// `disable-thp`: no effect (Cairn leaves transparent huge pages as
    /// the system has them).
    disable_thp: bool = "disable-thp", Kind::Bool, "yes", IMMUTABLE, keep;
    /// `activerehashing`: no effect (see DIFFERENCES.md).
    activerehashing: bool = "activerehashing", Kind::Bool, "yes", MUTABLE, keep;
    /// `list-compress-depth`: no effect (Cairn's lists are not compressed).
    list_compress_depth: u32 = "list-compress-depth", int(0, I32_MAX), "0", MUTABLE, keep;
    /// `stream-node-max-bytes`: a stream node closes at this size.
    stream_node_max_bytes: u64 = "stream-node-max-bytes", mem(0, I64_MAX), "4096", MUTABLE, keep;
    /// `stream-node-max-entries`: a stream node closes at this many entries.
    stream_node_max_entries: u64 = "stream-node-max-entries", int(0, I64_MAX), "100", MUTABLE, keep;
    /// `replicaof` (alias `slaveof`): "host port" from a config line
    /// (`replicaof <host> <port>`, read at start by
    /// `replication::replica`); immutable, as in Redis (REPLICAOF changes
    /// the master at run time).
    replicaof: String = "replicaof" | "slaveof", NULLABLE_STR, "", IMMUTABLE, keep;

    // TLS (issue 23), names, defaults and ranges as Redis 7.0. CONFIG SET
    // of any of them but `tls-port` rebuilds the TLS context while a TLS
    // port is open (`net::tls_config`; a bad value leaves the old one).

    /// `tls-port`: RESP over TLS on this port, 0 = none. Immutable in
    /// Cairn, as `port` is.
    tls_port: u16 = "tls-port", int(0, 65535), "0", IMMUTABLE, keep;
    /// `tls-cert-file`: the server's certificate chain (PEM).
    tls_cert_file: String = "tls-cert-file", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-key-file`: its private key (PEM: PKCS#1, PKCS#8, SEC1, or
    /// encrypted PKCS#8 with `tls-key-file-pass`).
    tls_key_file: String = "tls-key-file", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-key-file-pass`.
    tls_key_file_pass: String = "tls-key-file-pass", NULLABLE_STR, "", MUTABLE | SENSITIVE, keep;
    /// `tls-client-cert-file`: the certificate for outgoing connections
    /// (replication, later); stored only.
    tls_client_cert_file: String = "tls-client-cert-file", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-client-key-file`: stored only, as above.
    tls_client_key_file: String = "tls-client-key-file", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-client-key-file-pass`: stored only, as above.
    tls_client_key_file_pass: String = "tls-client-key-file-pass", NULLABLE_STR, "", MUTABLE | SENSITIVE, keep;
    /// `tls-dh-params-file`: no effect (rustls has no finite-field DHE;
    /// key exchange is ECDHE).
    tls_dh_params_file: String = "tls-dh-params-file", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-ca-cert-file`: roots client certificates are checked against.
    tls_ca_cert_file: String = "tls-ca-cert-file", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-ca-cert-dir`: every certificate in the directory's files is a root.
    tls_ca_cert_dir: String = "tls-ca-cert-dir", NULLABLE_STR, "", MUTABLE, keep;
    /// `tls-auth-clients`.
    tls_auth_clients: TlsAuthClients = "tls-auth-clients", Kind::Enum(TlsAuthClients::NAMES), "yes", MUTABLE, keep;
    /// `tls-protocols`: empty = "TLSv1.2 TLSv1.3".
    tls_protocols: String = "tls-protocols", NULLABLE_STR, "", MUTABLE, valid_tls_protocols;
    /// `tls-ciphers`: TLS 1.2 suites, OpenSSL names; empty = all rustls has.
    tls_ciphers: String = "tls-ciphers", NULLABLE_STR, "", MUTABLE, valid_tls_ciphers;
    /// `tls-ciphersuites`: TLS 1.3 suites; empty = all rustls has.
    tls_ciphersuites: String = "tls-ciphersuites", NULLABLE_STR, "", MUTABLE, valid_tls_ciphersuites;
    /// `tls-prefer-server-ciphers`: choose the suite by the server's order.
    tls_prefer_server_ciphers: bool = "tls-prefer-server-ciphers", Kind::Bool, "no", MUTABLE, keep;
    /// `tls-session-caching`: let clients resume sessions.
    tls_session_caching: bool = "tls-session-caching", Kind::Bool, "yes", MUTABLE, keep;
    /// `tls-session-cache-size`: sessions kept for resumption.
    tls_session_cache_size: u32 = "tls-session-cache-size", int(0, I32_MAX), "20480", MUTABLE, keep;
    /// `tls-session-cache-timeout`: seconds a session may be resumed after
    /// it was made.
    tls_session_cache_timeout: u32 = "tls-session-cache-timeout", int(0, I32_MAX), "300", MUTABLE, keep;
    /// `tls-replication`: stored only (no replication yet).
    tls_replication: bool = "tls-replication", Kind::Bool, "no", MUTABLE, keep;
    /// `tls-cluster`: stored only (no cluster bus).
    tls_cluster: bool = "tls-cluster", Kind::Bool, "no", MUTABLE, keep;
    /// `memcached-tls` (Cairn; memcached's `-Z`): `memcached-port` speaks
    /// TLS, with the same certificates and `tls-*` settings as `tls-port`.
    memcached_tls: bool = "memcached-tls", Kind::Bool, "no", IMMUTABLE, keep;

    // Replication (branch repl, issue 24): names, aliases, ranges and
    // defaults as Redis 7.0's config.c.

    /// `repl-backlog-size`: history kept for partial resynchronisation
    /// (`replication::buffer`); CONFIG SET resizes a live backlog.
    repl_backlog_size: u64 = "repl-backlog-size", mem(1, I64_MAX), "1mb", MUTABLE, keep;
    /// `repl-backlog-ttl`: seconds without replicas after which the backlog
    /// is freed (0: never).
    repl_backlog_ttl: u64 = "repl-backlog-ttl", int(0, I64_MAX), "3600", MUTABLE, keep;
    /// `repl-ping-replica-period` (alias `repl-ping-slave-period`): seconds.
    repl_ping_replica_period: u32 = "repl-ping-replica-period" | "repl-ping-slave-period", int(1, I32_MAX), "10", MUTABLE, keep;
    /// `repl-timeout`: seconds.
    repl_timeout: u32 = "repl-timeout", int(1, I32_MAX), "60", MUTABLE, keep;
    /// `min-replicas-to-write` (alias `min-slaves-to-write`).
    min_replicas_to_write: u32 = "min-replicas-to-write" | "min-slaves-to-write", int(0, I32_MAX), "0", MUTABLE, keep;
    /// `min-replicas-max-lag` (alias `min-slaves-max-lag`): seconds.
    min_replicas_max_lag: u32 = "min-replicas-max-lag" | "min-slaves-max-lag", int(0, I32_MAX), "10", MUTABLE, keep;
    /// `masterauth`: the password a replica gives its master.
    masterauth: String = "masterauth", NULLABLE_STR, "", MUTABLE | SENSITIVE, keep;
    /// `masteruser`: the user a replica authenticates as.
    masteruser: String = "masteruser", NULLABLE_STR, "", MUTABLE | SENSITIVE, keep;
    /// `replica-announce-ip` (alias `slave-announce-ip`).
    replica_announce_ip: String = "replica-announce-ip" | "slave-announce-ip", NULLABLE_STR, "", MUTABLE, keep;
    /// `replica-announce-port` (alias `slave-announce-port`): 0 = the
    /// listening port.
    replica_announce_port: u16 = "replica-announce-port" | "slave-announce-port", int(0, 65535), "0", MUTABLE, keep;
    /// `replica-announced`: shown to Sentinel (INFO `replica_announced`).
    replica_announced: bool = "replica-announced", Kind::Bool, "yes", MUTABLE, keep;
    // rest2 (issue 22): per-command latency histograms.

    /// `latency-tracking-info-percentiles`: the percentiles INFO
    /// latencystats reports for each command (`crate::cmdlatency`).
    latency_tracking_info_percentiles: Vec<String> = "latency-tracking-info-percentiles", Kind::Percentiles, "50 99 99.9", MUTABLE, keep;

    // Cluster mode (branch cluster): Redis 7.0's cluster directives with its
    // defaults. Cairn's cluster is one node with no bus (`crate::cluster`):
    // the announce-* directives shape what CLUSTER NODES/SLOTS/SHARDS show,
    // the rest are stored and shown only.
    /// `cluster-enabled`: answer as a one-node Redis Cluster owning every slot.
    cluster_enabled: bool = "cluster-enabled", Kind::Bool, "no", IMMUTABLE, keep;
    /// `cluster-config-file`: the node's ID and epochs (nodes.conf format), in `dir`.
    cluster_config_file: String = "cluster-config-file", STR, "nodes.conf", IMMUTABLE, keep;
    /// `cluster-port`: the bus port CLUSTER NODES shows (0: port + 10000); nothing listens.
    cluster_port: u16 = "cluster-port", int(0, 65535), "0", IMMUTABLE, keep;
    /// `cluster-node-timeout` (ms): stored only.
    cluster_node_timeout: i64 = "cluster-node-timeout", int(0, I64_MAX), "15000", MUTABLE, keep;
    /// `cluster-announce-ip`: the IP CLUSTER NODES/SLOTS/SHARDS show.
    cluster_announce_ip: String = "cluster-announce-ip", NULLABLE_STR, "", MUTABLE, keep;
    /// `cluster-announce-hostname`: shown beside the IP.
    cluster_announce_hostname: String = "cluster-announce-hostname", NULLABLE_STR, "", MUTABLE, valid_announced_hostname;
    /// `cluster-announce-port`: the client port shown (0: the bound port).
    cluster_announce_port: u16 = "cluster-announce-port", int(0, 65535), "0", MUTABLE, keep;
    /// `cluster-announce-bus-port`: the bus port shown.
    cluster_announce_bus_port: u16 = "cluster-announce-bus-port", int(0, 65535), "0", MUTABLE, keep;
    /// `cluster-announce-tls-port`: stored only.
    cluster_announce_tls_port: u16 = "cluster-announce-tls-port", int(0, 65535), "0", MUTABLE, keep;
    /// `cluster-require-full-coverage`: stored only (every slot is covered).
    cluster_require_full_coverage: bool = "cluster-require-full-coverage", Kind::Bool, "yes", MUTABLE, keep;
    /// `cluster-allow-reads-when-down`: stored only (the cluster is never down).
    cluster_allow_reads_when_down: bool = "cluster-allow-reads-when-down", Kind::Bool, "no", MUTABLE, keep;
    /// `cluster-allow-pubsubshard-when-down`: stored only.
    cluster_allow_pubsubshard_when_down: bool = "cluster-allow-pubsubshard-when-down", Kind::Bool, "yes", MUTABLE, keep;
    /// `cluster-link-sendbuf-limit`: stored only (no cluster links).
    cluster_link_sendbuf_limit: u64 = "cluster-link-sendbuf-limit", mem(0, U64_MAX), "0", MUTABLE, keep;
    /// `cluster-preferred-endpoint-type`: what CLUSTER SLOTS/SHARDS give as the endpoint.
    cluster_preferred_endpoint_type: ClusterEndpoint = "cluster-preferred-endpoint-type", Kind::Enum(ClusterEndpoint::NAMES), "ip", MUTABLE, keep;
    /// `cluster-replica-validity-factor`: stored only (no replicas).
    cluster_replica_validity_factor: i32 = "cluster-replica-validity-factor" | "cluster-slave-validity-factor", int(0, I32_MAX), "10", MUTABLE, keep;
    /// `cluster-migration-barrier`: stored only.
    cluster_migration_barrier: i32 = "cluster-migration-barrier", int(0, I32_MAX), "1", MUTABLE, keep;
    /// `cluster-replica-no-failover`: stored only.
    cluster_replica_no_failover: bool = "cluster-replica-no-failover" | "cluster-slave-no-failover", Kind::Bool, "no", MUTABLE, keep;
    /// `cluster-allow-replica-migration`: stored only.
    cluster_allow_replica_migration: bool = "cluster-allow-replica-migration", Kind::Bool, "yes", MUTABLE, keep;
    // branch rdb: RDB files (issue 24, item 1).
    /// `snapshot-format` (Cairn only): the format SAVE, BGSAVE, the save
    /// rules and the shutdown save write `dbfilename` in: `cairn` (its
    /// own) or `rdb` (Redis 7.0's RDB version 10, which redis-server
    /// loads). Start-up reads either, by the file's magic.
    snapshot_format: SnapshotFormat = "snapshot-format", Kind::Enum(SnapshotFormat::NAMES), "cairn", MUTABLE, keep;
    // branch zcomp: compressed string values (issue 25, item 1).
    /// `value-compression` (Cairn only): store string values of at least
    /// `value-compression-min-size` bytes compressed with trained
    /// dictionaries (`value-compression-codec`: lz4 in the background by
    /// default, or zstd at SET; docs/design.md, "Compressed values"). Off by
    /// default: a GET of a compressed 1 KB value costs more than 10% over
    /// a plain one. Changing it affects values written from then on.
    value_compression: bool = "value-compression", Kind::Bool, "no", MUTABLE, keep;
    /// `value-compression-min-size` (Cairn only): the shortest string
    /// compressed while `value-compression` is on.
    value_compression_min_size: usize = "value-compression-min-size", int(1, 32767), "512", MUTABLE, keep;
    /// `value-compression-level` (Cairn only): zstd's level for values and
    /// dictionaries (1-3 are the fast ones; see design.md for the measure).
    value_compression_level: i32 = "value-compression-level", int(1, 19), "3", MUTABLE, keep;
    // branch sentinel2: a Redis test knob Redis's Sentinel suite sets.
    /// `loading-process-events-interval-bytes`: how often Redis's single
    /// thread serves clients during a load. Stored and shown only: Cairn's
    /// workers answer (`-LOADING`) all through a load.
    loading_process_events_interval_bytes: i32 = "loading-process-events-interval-bytes", int(1024, I32_MAX), "2097152", MUTABLE, keep;
    // branch tier: the disk tier (issue 25, item 2).
    /// `tier-enabled` (Cairn only): move the coldest string values to
    /// value logs on disk while used memory is over `tier-threshold`
    /// percent of `maxmemory` (docs/design.md, "The disk tier"). Read at
    /// start.
    tier_enabled: bool = "tier-enabled", Kind::Bool, "no", IMMUTABLE, keep;
    /// `tier-dir` (Cairn only): where the logs live, one directory per
    /// shard group; relative to `dir`.
    tier_dir: String = "tier-dir", STR, "tier", IMMUTABLE, keep;
    /// `tier-threshold` (Cairn only): percent of `maxmemory` above which
    /// values move out.
    tier_threshold: u32 = "tier-threshold", int(1, 100), "90", MUTABLE, keep;
    /// `tier-min-size` (Cairn only): the shortest value moved out (a
    /// pointer and a disk read are not worth it for less).
    tier_min_size: usize = "tier-min-size", int(1, 32767), "256", MUTABLE, keep;
    /// `tier-max-disk` (Cairn only): bytes the logs may hold on disk, 0 =
    /// unbounded; past it values stay in RAM, as with a full disk.
    tier_max_disk: u64 = "tier-max-disk", mem(0, U64_MAX), "0", IMMUTABLE, keep;
    /// `tier-segment-size` (Cairn only): a log segment file's size (the
    /// unit of compaction).
    tier_segment_size: u32 = "tier-segment-size", mem(65536, U32_MAX), "64mb", IMMUTABLE, keep;
    // branch lz4code: liblz4 values coded in the background (issue 25, item 1).
    /// `value-compression-codec` (Cairn only): `lz4` stores a value plain
    /// at SET and a background coder codes it with LZ4 HC once it has been
    /// idle for `value-compression-idle-ms` (reads decode ~3x cheaper than
    /// zstd); `zstd` codes at SET, as before (docs/design.md, "LZ4 values
    /// coded in the background").
    value_compression_codec: CompressionCodec = "value-compression-codec", Kind::Enum(CompressionCodec::NAMES), "lz4", MUTABLE, keep;
    /// `value-compression-idle-ms` (Cairn only): how long a value is left
    /// plain after its last access before the coder codes it (the LRU
    /// clock's resolution: whole seconds, rounded up).
    value_compression_idle_ms: u32 = "value-compression-idle-ms", int(0, I32_MAX), "1000", MUTABLE, keep;
    /// `value-compression-lz4-level` (Cairn only): LZ4 HC's level in the
    /// background (3-12; 4 codes as small as zstd 3 on 2.8 KB of text).
    value_compression_lz4_level: i32 = "value-compression-lz4-level", int(3, 12), "4", MUTABLE, keep;
    // branch tierio: disk tier reads that do not hold up the worker.
    /// `tier-io-threads` (Cairn only): threads that read the tier for
    /// commands parked on a value not in the page cache (docs/design.md,
    /// "Waiting for I/O without holding up a worker"). Read at start.
    tier_io_threads: usize = "tier-io-threads", int(1, 64), "4", IMMUTABLE, keep;
    // branch tierw: the tier's codec on the write path (issue 25, E4).
    /// `tier-compression` (Cairn only): `none` writes a value that is
    /// plain in RAM to the tier as it is, a copy (memcached's extstore
    /// does the same); `lz4` codes it with LZ4's fast coder and the
    /// domain's dictionary, about half the bytes on disk for ~50,000
    /// instructions a 2.8 KB value, which on E4's write path was ~60% of
    /// the server's CPU (docs/design.md, "The tier's codec on the write
    /// path"). A value coded in RAM (`value-compression yes`) goes out
    /// coded under either.
    tier_compression: TierCompression = "tier-compression", Kind::Enum(TierCompression::NAMES), "none", MUTABLE, keep;
}

/// Directives only meaningful while reading a file; CONFIG REWRITE keeps
/// their lines untouched. Only `include` is supported by Cairn; the rest
/// are Redis's and are listed so a rewrite doesn't mangle such lines.
pub(super) const FILE_ONLY_DIRECTIVES: &[&str] = &[
    "include",
    "rename-command",
    "user",
    "loadmodule",
    "sentinel",
];

/// Looks a directive up by name or alias, case-insensitively. The second
/// value is the name that matched (Redis reports errors under it).
pub(super) fn lookup(name: &str) -> Option<(&'static Directive, &'static str)> {
    TABLE.iter().find_map(|d| {
        if d.name.eq_ignore_ascii_case(name) {
            Some((d, d.name))
        } else {
            d.alias
                .filter(|a| a.eq_ignore_ascii_case(name))
                .map(|a| (d, a))
        }
    })
}

/// True for directives whose value is a secret (`requirepass`): callers
/// redact CONFIG SET arguments for them in logs, MONITOR and SLOWLOG.
pub fn is_sensitive(name: &str) -> bool {
    lookup(name).is_some_and(|(d, _)| d.flags & SENSITIVE != 0)
}

impl Default for Config {
    fn default() -> Config {
        let mut c = Config::zeroed();
        for d in TABLE {
            // Every default parses (a unit test checks it); skipping a
            // broken one keeps the zero value rather than panicking.
            if let Ok(v) = d.default_value() {
                let _ = d.store(&mut c, &v);
            }
        }
        c
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Config");
        for d in TABLE {
            if is_sensitive(d.name) {
                s.field(d.name, &"<redacted>");
            } else {
                s.field(d.name, &d.render(self));
            }
        }
        s.field("config_file", &self.config_file).finish()
    }
}
