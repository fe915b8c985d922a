//! The value types of individual directives (`appendfsync`, `maxmemory-policy`,
//! `save`, `client-output-buffer-limit`, `notify-keyspace-events`, ...), as the
//! rest of the server reads them from `Config`; how each is parsed and
//! rendered generically lives in `value.rs`.

use super::*;

macro_rules! config_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub enum $name {
            #[default]
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in the order Redis lists them in its error message.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            pub(super) const NAMES: &'static [&'static str] = &[$($text),+];

            /// The name used in config files and CONFIG GET.
            pub fn as_str(self) -> &'static str {
                Self::NAMES[self as usize]
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Field for $name {
            fn to_value(&self) -> Value {
                Value::Enum(*self as usize)
            }
            fn from_value(v: &Value) -> Option<Self> {
                match v {
                    Value::Enum(i) => Self::ALL.get(*i).copied(),
                    _ => None,
                }
            }
        }
    };
}

config_enum! {
    /// `loglevel`. The first variant is only the `Default` of the type; the
    /// directive's default is `notice`.
    LogLevel {
        Debug = "debug",
        Verbose = "verbose",
        Notice = "notice",
        Warning = "warning",
    }
}

config_enum! {
    /// `appendfsync`.
    AppendFsync {
        Always = "always",
        Everysec = "everysec",
        No = "no",
    }
}

config_enum! {
    /// `maxmemory-policy`.
    MaxmemoryPolicy {
        VolatileLru = "volatile-lru",
        VolatileLfu = "volatile-lfu",
        VolatileRandom = "volatile-random",
        VolatileTtl = "volatile-ttl",
        AllkeysLru = "allkeys-lru",
        AllkeysLfu = "allkeys-lfu",
        AllkeysRandom = "allkeys-random",
        Noeviction = "noeviction",
    }
}

config_enum! {
    /// `enable-debug-command` and `enable-protected-configs`: who may use
    /// the guarded feature.
    ProtectedAction {
        No = "no",
        Yes = "yes",
        /// Only connections from the loopback interface or a Unix socket.
        Local = "local",
    }
}

impl ProtectedAction {
    /// Redis's allowProtectedAction.
    pub fn allows(self, local_client: bool) -> bool {
        match self {
            ProtectedAction::No => false,
            ProtectedAction::Yes => true,
            ProtectedAction::Local => local_client,
        }
    }
}

config_enum! {
    /// `acl-pubsub-default`: the channels a new ACL user (or `reset`)
    /// starts with.
    PubsubDefault {
        ResetChannels = "resetchannels",
        AllChannels = "allchannels",
    }
}

config_enum! {
    /// `supervised`: how Cairn tells a service manager it is ready
    /// (`crate::process::supervise`).
    Supervised {
        No = "no",
        Upstart = "upstart",
        Systemd = "systemd",
        /// Upstart if `UPSTART_JOB` is set, else systemd if `NOTIFY_SOCKET`
        /// is; CONFIG GET then shows the one found.
        Auto = "auto",
    }
}

config_enum! {
    /// `tls-auth-clients`: whether a TLS client must show a certificate
    /// signed by `tls-ca-cert-file`/`-dir` (optional: checked if shown).
    TlsAuthClients {
        No = "no",
        Yes = "yes",
        Optional = "optional",
    }
}

config_enum! {
    /// `cluster-preferred-endpoint-type`: what CLUSTER SLOTS and SHARDS
    /// give as a node's endpoint.
    ClusterEndpoint {
        Ip = "ip",
        Hostname = "hostname",
        UnknownEndpoint = "unknown-endpoint",
    }
}

config_enum! {
    /// `repl-diskless-load` (what a replica's clients see during a full
    /// sync: `replication::diskless_load`).
    ReplDisklessLoad {
        Disabled = "disabled",
        OnEmptyDb = "on-empty-db",
        Swapdb = "swapdb",
    }
}

config_enum! {
    /// `oom-score-adj`: whether and how Cairn sets its own
    /// `/proc/self/oom_score_adj` (see `crate::process::set_oom_score_adj`).
    OomScoreAdj {
        No = "no",
        /// `yes`: the first `oom-score-adj-values` added to the score the
        /// process had before Cairn changed it.
        Relative = "yes",
        /// `relative` on input; parsing folds it into `Relative`, so
        /// CONFIG GET shows `yes` as Redis does. Never stored.
        RelativeName = "relative",
        /// The value is written as it is.
        Absolute = "absolute",
    }
}

/// `oom-score-adj-values`: the scores of Redis's three process classes
/// (master, replica, background child). Cairn is always a master and never
/// forks a child, so only the first applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OomScoreAdjValues(pub [i32; 3]);

/// One `save <seconds> <changes>` rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveRule {
    pub seconds: u64,
    pub changes: u64,
}

/// One class of `client-output-buffer-limit`. Zero means no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientBufferLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_seconds: u64,
}

/// `client-output-buffer-limit`, per client class. The class Redis calls
/// `slave` in CONFIG GET (and accepts as `slave` or `replica`) is `replica`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientOutputBufferLimits {
    pub normal: ClientBufferLimit,
    pub replica: ClientBufferLimit,
    pub pubsub: ClientBufferLimit,
}

impl ClientOutputBufferLimits {
    pub(super) fn classes(&self) -> [(&'static str, &ClientBufferLimit); 3] {
        [
            ("normal", &self.normal),
            ("slave", &self.replica),
            ("pubsub", &self.pubsub),
        ]
    }
}

use cairn_engine::events::class;

/// `notify-keyspace-events` as Redis's NOTIFY_* bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceEvents(pub u32);

impl KeyspaceEvents {
    // The bits are the engine's notification classes, so the parsed
    // setting goes to the engine as it is.
    /// K: publish on `__keyspace@<db>__`.
    pub const KEYSPACE: u32 = class::KEYSPACE;
    /// E: publish on `__keyevent@<db>__`.
    pub const KEYEVENT: u32 = class::KEYEVENT;
    pub const GENERIC: u32 = class::GENERIC;
    pub const STRING: u32 = class::STRING;
    pub const LIST: u32 = class::LIST;
    pub const SET: u32 = class::SET;
    pub const HASH: u32 = class::HASH;
    pub const ZSET: u32 = class::ZSET;
    pub const EXPIRED: u32 = class::EXPIRED;
    pub const EVICTED: u32 = class::EVICTED;
    pub const STREAM: u32 = class::STREAM;
    pub const KEY_MISS: u32 = class::KEY_MISS;
    pub const MODULE: u32 = class::MODULE;
    pub const NEW: u32 = class::NEW;
    /// What `A` stands for: every class except key-miss and new-key.
    pub const ALL: u32 = Self::GENERIC
        | Self::STRING
        | Self::LIST
        | Self::SET
        | Self::HASH
        | Self::ZSET
        | Self::EXPIRED
        | Self::EVICTED
        | Self::STREAM
        | Self::MODULE;

    /// Redis's keyspaceEventsStringToFlags; `None` on an unknown letter.
    pub fn parse(classes: &str) -> Option<KeyspaceEvents> {
        let mut flags = 0;
        for c in classes.bytes() {
            flags |= match c {
                b'A' => Self::ALL,
                b'g' => Self::GENERIC,
                b'$' => Self::STRING,
                b'l' => Self::LIST,
                b's' => Self::SET,
                b'h' => Self::HASH,
                b'z' => Self::ZSET,
                b'x' => Self::EXPIRED,
                b'e' => Self::EVICTED,
                b'K' => Self::KEYSPACE,
                b'E' => Self::KEYEVENT,
                b't' => Self::STREAM,
                b'm' => Self::KEY_MISS,
                b'd' => Self::MODULE,
                b'n' => Self::NEW,
                _ => return None,
            };
        }
        Some(KeyspaceEvents(flags))
    }

    /// True when any of `flags` is enabled.
    pub fn contains(self, flags: u32) -> bool {
        self.0 & flags != 0
    }
}

impl fmt::Display for KeyspaceEvents {
    /// Redis's keyspaceEventsFlagsToString, including its quirk that `n` is
    /// not shown next to `A`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = self.0;
        let mut out = String::new();
        if flags & Self::ALL == Self::ALL {
            out.push('A');
        } else {
            for (bit, c) in [
                (Self::GENERIC, 'g'),
                (Self::STRING, '$'),
                (Self::LIST, 'l'),
                (Self::SET, 's'),
                (Self::HASH, 'h'),
                (Self::ZSET, 'z'),
                (Self::EXPIRED, 'x'),
                (Self::EVICTED, 'e'),
                (Self::STREAM, 't'),
                (Self::MODULE, 'd'),
                (Self::NEW, 'n'),
            ] {
                if self.contains(bit) {
                    out.push(c);
                }
            }
        }
        for (bit, c) in [
            (Self::KEYSPACE, 'K'),
            (Self::KEYEVENT, 'E'),
            (Self::KEY_MISS, 'm'),
        ] {
            if self.contains(bit) {
                out.push(c);
            }
        }
        f.write_str(&out)
    }
}

// branch rdb: RDB files (issue 24, item 1).
config_enum! {
    /// `snapshot-format`: the file format of `dbfilename` when saving.
    SnapshotFormat {
        Cairn = "cairn",
        Rdb = "rdb",
    }
}

// branch tierw: the disk tier's codec on the write path (issue 25, E4).
config_enum! {
    /// `tier-compression`: how a value plain in RAM is written to the
    /// disk tier (one coded in RAM goes out as it is either way).
    TierCompression {
        None = "none",
        Lz4 = "lz4",
    }
}

// branch lz4code: liblz4 values coded in the background (issue 25, item 1).
config_enum! {
    /// `value-compression-codec`: the codec of compressed string values.
    CompressionCodec {
        Lz4 = "lz4",
        Zstd = "zstd",
    }
}
