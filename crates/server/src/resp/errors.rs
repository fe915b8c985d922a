//! Every error a RESP command can answer, in Redis 7.0's exact words: the
//! one place this wording lives. The engine returns typed errors
//! ([`engine_text`] maps each one); handlers return [`CmdError`] built from
//! the constants and constructors below, never literals of their own.
//!
//! Texts are grouped by where Redis raises them: the shared replies and
//! argument getters many commands use first, then admission (checks before
//! a command runs), then one group per command family. A text is written
//! without the leading `-` and the CRLF; `CmdError::message` gives the line.
use cairn_engine::error::{Error as EngineError, LcsError};
use cairn_engine::ops::hll::SelfTestFailure;
use std::borrow::Cow;
use std::fmt::Display;

/// A command's failure, turned into a `-` reply by the dispatcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    Engine(EngineError),
    /// `ERR syntax error`
    Syntax,
    /// `ERR value is not an integer or out of range`
    NotInteger,
    /// `ERR value is not a valid float`
    NotFloat,
    /// `ERR invalid expire time in '<cmd>' command`
    InvalidExpire(&'static str),
    /// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
    UnknownSubcommand {
        sub: Vec<u8>,
        parent: &'static str,
    },
    /// `ERR wrong number of arguments for '<cmd>' command`
    WrongArity(&'static str),
    /// A complete reply text (without the leading `-`), one of the
    /// constants below or made by a constructor here.
    Text(Cow<'static, str>),
    /// Like `Text`, for texts that quote client bytes verbatim (which need
    /// not be UTF-8), such as the unknown-command error.
    Bytes(Vec<u8>),
}

// ------------------------------------------------------------------------
// Shared replies (Redis `shared.*`) and the argument getters of `object.c`
// / `server.c` that many commands call with their default messages.

pub const SYNTAX: &str = "ERR syntax error";
/// `getLongLongFromObjectOrReply` and a stored value that is not one.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NO_SUCH_KEY: &str = "ERR no such key";
pub const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
pub const DB_INDEX_OUT_OF_RANGE: &str = "ERR DB index is out of range";
/// A value inside the integer range but outside what the command allows
/// (HRANDFIELD/ZRANDMEMBER WITHVALUES counts).
pub const OUT_OF_RANGE: &str = "ERR value is out of range";
/// `getPositiveLongFromObjectOrReply` with its default message.
pub const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
/// `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)`: a count whose
/// negation must not overflow.
pub const OUT_OF_LONG_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// `getIntFromObjectOrReply`'s default message.
pub const OUT_OF_INT_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
/// SRANDMEMBER/ZRANDMEMBER refusing a reply larger than proto-max-bulk-len
/// (Cairn's guard: Redis itself would build it and run out of memory).
pub const REPLY_TOO_BIG: &str =
    "ERR value is out of range, the reply would exceed proto-max-bulk-len";
/// The numkeys of the *MPOP and *INTERCARD commands.
pub const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";
/// The COUNT of the *MPOP commands.
pub const COUNT_NOT_POSITIVE: &str = "ERR count should be greater than 0";
/// The LIMIT of SINTERCARD and ZINTERCARD.
pub const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";
/// HINCRBYFLOAT's increment, which `string2ld` accepts as infinite.
pub const NAN_OR_INFINITY: &str = "ERR value is NaN or Infinity";
/// `getTimeoutFromObjectOrReply` (blocking commands).
pub const TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
/// CLIENT PAUSE's timeout.
pub const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
pub const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
/// `min-replicas-to-write` not met (Redis's `shared.noreplicaserr`).
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
pub const TIMEOUT_OUT_OF_RANGE: &str = "ERR timeout is out of range";
/// `parseScanCursorOrReply`.
pub const INVALID_CURSOR: &str = "ERR invalid cursor";

/// Redis's `addReplySubcommandSyntaxError`, given the subcommand as Redis
/// quotes it (its first 128 bytes) and the command in upper case.
pub fn subcommand_syntax(sub: &str, cmd: &str) -> CmdError {
    CmdError::text(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP."
    ))
}

// ------------------------------------------------------------------------
// Admission: refusals before a command runs (`processCommand`), and the
// dispatcher's own.

pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// Redis's `shared.loadingerr`.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// Redis's `shared.bgsaveerr`.
pub const MISCONF_SNAPSHOT: &str =
    "MISCONF Redis is configured to save RDB snapshots, but it's currently \
     unable to persist to disk. Commands that may modify the data set are disabled, because this \
     instance is configured to report errors during writes if RDB snapshotting fails \
     (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB \
     error.";

/// Why admission refuses writes, in Redis 7.0's words (`processCommand`,
/// `writeCommandsDeniedByDiskError`). The memcached port quotes the same
/// reason after its own SERVER_ERROR.
pub fn writes_denied(why: &crate::exec::admission::WritesDenied) -> String {
    use crate::exec::admission::WritesDenied;
    match why {
        WritesDenied::SnapshotFailed => MISCONF_SNAPSHOT.to_string(),
        WritesDenied::JournalFailed(err) => {
            format!("MISCONF Errors writing to the AOF file: {err}")
        }
    }
}

/// EXEC of a transaction a queueing error doomed.
pub const EXEC_ABORTED: &str = "EXECABORT Transaction discarded because of previous errors.";
/// SHUTDOWN whose final save failed.
pub const SHUTDOWN_FAILED: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// A refused EXEC: the refusal without its "ERR " (shared errors such as
/// OOM keep their own code).
pub fn exec_abort(refusal: &CmdError) -> CmdError {
    let msg = refusal.message();
    CmdError::text(format!(
        "EXECABORT Transaction discarded because of: {}",
        msg.strip_prefix("ERR ").unwrap_or(&msg)
    ))
}

/// A handler panicked (a Cairn bug): the client is told, the server goes on.
pub const INTERNAL: &str =
    "ERR internal error: the command failed unexpectedly (see the server log)";

/// A RESP2 client in subscribed mode may run only the pub/sub commands.
pub fn subscribed_context(cmd: &str) -> CmdError {
    CmdError::text(format!(
        "ERR Can't execute '{cmd}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET \
         are allowed in this context"
    ))
}

/// A blocked client released by CLIENT UNBLOCK ... ERROR.
pub const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

// ------------------------------------------------------------------------
// Connection: AUTH, HELLO, SELECT.

pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const AUTH_WITHOUT_PASSWORD: &str = "ERR AUTH <password> called without any password \
     configured for the default user. Are you sure your configuration is correct?";
pub const HELLO_PROTO_NOT_INTEGER: &str = "ERR Protocol version is not an integer or out of range";
pub const NOPROTO: &str = "NOPROTO unsupported protocol version";
pub const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already \
     authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate \
     the client and select the RESP protocol version at the same time";

pub fn hello_syntax(opt: &[u8]) -> CmdError {
    CmdError::text(format!(
        "ERR Syntax error in HELLO option '{}'",
        String::from_utf8_lossy(opt)
    ))
}

// ------------------------------------------------------------------------
// CLIENT.

pub const CLIENT_UNBLOCK_REASON: &str = "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR";
pub const CLIENT_NAME_INVALID: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";
pub const CLIENT_ID_INVALID: &str = "ERR Invalid client ID";
pub const CLIENT_ID_NOT_POSITIVE: &str = "ERR client-id should be greater than 0";
pub const NO_SUCH_CLIENT: &str = "ERR No such client";
pub const CLIENT_PAUSE_MODE: &str = "ERR CLIENT PAUSE mode must be WRITE or ALL";

/// `name` is already cut at a NUL, as Redis's `%s` would.
pub fn unknown_client_type(name: &str) -> CmdError {
    CmdError::text(format!("ERR Unknown client type '{name}'"))
}

/// `user` is already cut at a NUL, as Redis's `%s` would.
pub fn no_such_user(user: &str) -> CmdError {
    CmdError::text(format!("ERR No such user '{user}'"))
}

// ------------------------------------------------------------------------
// Transactions.

pub const MULTI_NESTED: &str = "ERR MULTI calls can not be nested";
pub const DISCARD_WITHOUT_MULTI: &str = "ERR DISCARD without MULTI";
pub const WATCH_INSIDE_MULTI: &str = "ERR WATCH inside MULTI is not allowed";
pub const EXEC_WITHOUT_MULTI: &str = "ERR EXEC without MULTI";

// ------------------------------------------------------------------------
// Generic keyspace commands: EXPIRE family, SWAPDB, OBJECT.

/// `opt` is already cut at a NUL, as Redis's `%s` would.
pub fn expire_unsupported_option(opt: &str) -> CmdError {
    CmdError::text(format!("ERR Unsupported option {opt}"))
}

pub const EXPIRE_NX_WITH_OTHERS: &str =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
pub const EXPIRE_GT_WITH_LT: &str = "ERR GT and LT options at the same time are not compatible";
pub const SWAPDB_FIRST_INVALID: &str = "ERR invalid first DB index";
pub const SWAPDB_SECOND_INVALID: &str = "ERR invalid second DB index";
pub const OBJECT_IDLETIME_UNDER_LFU: &str = "ERR An LFU maxmemory policy is selected, idle time \
     not tracked. Please note that when switching between policies at runtime LRU and LFU data \
     will take some time to adjust.";
pub const OBJECT_FREQ_WITHOUT_LFU: &str = "ERR An LFU maxmemory policy is not selected, access \
     frequency not tracked. Please note that when switching between policies at runtime LRU and \
     LFU data will take some time to adjust.";

// ------------------------------------------------------------------------
// Strings.

pub const SETRANGE_OFFSET: &str = "ERR offset is out of range";
/// DECRBY i64::MIN, refused before negating it.
pub const DECREMENT_OVERFLOW: &str = "ERR decrement would overflow";
/// LCS's wording for WRONGTYPE.
pub const LCS_NOT_STRINGS: &str = "ERR The specified keys must contain string values";
pub const LCS_IDX_WITH_LEN: &str =
    "ERR If you want both the length and indexes, please just use IDX.";

// ------------------------------------------------------------------------
// Bitmaps.

pub const BIT_NOT_BINARY: &str = "ERR bit is not an integer or out of range";
pub const BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
pub const BITOP_NOT_ONE_SOURCE: &str = "ERR BITOP NOT must be called with a single source key.";
pub const BITFIELD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that \
     u64 is not supported but i64 is.";
pub const BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";

// ------------------------------------------------------------------------
// Lists.

pub const LPOS_RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 \
     from the second ... or use negative to start from the end of the list";
pub const LPOS_COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
pub const LPOS_MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";

// ------------------------------------------------------------------------
// Sets.

pub const NUMKEYS_OVER_ARGS: &str = "ERR Number of keys can't be greater than number of args";

// ------------------------------------------------------------------------
// Sorted sets.

pub const MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
pub const MIN_MAX_NOT_LEX: &str = "ERR min or max not valid string range item";
pub const ZADD_XX_AND_NX: &str = "ERR XX and NX options at the same time are not compatible";
pub const ZADD_GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
pub const ZADD_INCR_ONE_PAIR: &str = "ERR INCR option supports a single increment-element pair";
pub const ZRANGE_LIMIT_BY_RANK: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
pub const ZRANGE_WITHSCORES_BYLEX: &str =
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
pub const WEIGHT_NOT_FLOAT: &str = "ERR weight value is not a float";

/// ZUNION/ZINTER/ZDIFF(STORE) and ZINTERCARD with numkeys < 1.
pub fn no_input_keys(cmd: &str) -> CmdError {
    CmdError::text(format!(
        "ERR at least 1 input key is needed for '{cmd}' command"
    ))
}

// ------------------------------------------------------------------------
// Geo (`geo.c`).

pub const GEO_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
pub const GEO_NEED_RADIUS: &str = "ERR need numeric radius";
pub const GEO_RADIUS_NEGATIVE: &str = "ERR radius cannot be negative";
pub const GEO_NEED_WIDTH: &str = "ERR need numeric width";
pub const GEO_NEED_HEIGHT: &str = "ERR need numeric height";
pub const GEO_BOX_NEGATIVE: &str = "ERR height or width cannot be negative";
pub const GEO_NO_MEMBER: &str = "ERR could not decode requested zset member";
pub const GEO_COUNT: &str = "ERR COUNT must be > 0";
pub const GEO_ANY_NEEDS_COUNT: &str = "ERR the ANY argument requires COUNT argument";
pub const GEORADIUS_STORE_WITH: &str =
    "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
pub const GEOSEARCHSTORE_WITH: &str =
    "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options";

/// A point outside the limits, printed with C's "%f" (Rust's `{:.6}` gives
/// the same digits, "inf" and "-inf" included).
pub fn geo_invalid_lon_lat(lon: f64, lat: f64) -> CmdError {
    CmdError::text(format!(
        "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
    ))
}

/// GEOSEARCH(STORE) without FROMMEMBER or FROMLONLAT; `cmd` as typed.
pub fn geo_from_missing(cmd: &str) -> CmdError {
    CmdError::text(format!(
        "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {cmd}"
    ))
}

/// GEOSEARCH(STORE) without BYRADIUS or BYBOX; `cmd` as typed.
pub fn geo_by_missing(cmd: &str) -> CmdError {
    CmdError::text(format!(
        "ERR exactly one of BYRADIUS and BYBOX can be specified for {cmd}"
    ))
}

// ------------------------------------------------------------------------
// HyperLogLog.

/// PFDEBUG's wording for [`EngineError::NoSuchKey`].
pub const PFDEBUG_NO_KEY: &str = "ERR The specified key does not exist";

/// `sub` quoted verbatim (`%s` of the client's bytes).
pub fn pfdebug_unknown(sub: &[u8]) -> CmdError {
    let mut msg = b"ERR Unknown PFDEBUG subcommand '".to_vec();
    msg.extend_from_slice(sub);
    msg.push(b'\'');
    CmdError::Bytes(msg)
}

/// PFSELFTEST's failures, with Redis's figures.
pub fn hll_selftest(f: SelfTestFailure) -> CmdError {
    CmdError::text(match f {
        SelfTestFailure::Register {
            index,
            expected,
            found,
        } => format!("TESTFAILED Register {index} should be {expected} but is {found}"),
        SelfTestFailure::CorruptSparse => "TESTFAILED corrupted sparse".to_string(),
        SelfTestFailure::SparseNotUsed => "TESTFAILED sparse encoding not used".to_string(),
        SelfTestFailure::Disagree => "TESTFAILED dense/sparse disagree".to_string(),
        SelfTestFailure::TooBigError { card, abserr } => {
            format!("TESTFAILED Too big error. card:{card} abserr:{abserr}")
        }
    })
}

// ------------------------------------------------------------------------
// Streams (Redis 7.0 `t_stream.c`).

pub const STREAM_INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
pub const XADD_ID_ZERO: &str = "ERR The ID specified in XADD must be greater than 0-0";
pub const XADD_ID_TOO_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
pub const STREAM_EXHAUSTED: &str =
    "ERR The stream has exhausted the last possible ID, unable to add more items";
pub const STREAM_MAXLEN_MINID: &str =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
pub const STREAM_MAXLEN_NEGATIVE: &str = "ERR The MAXLEN argument must be >= 0.";
pub const STREAM_LIMIT_NEGATIVE: &str = "ERR The LIMIT argument must be >= 0.";
pub const STREAM_LIMIT_NO_STRATEGY: &str =
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
pub const STREAM_LIMIT_NO_APPROX: &str =
    "ERR syntax error, LIMIT cannot be used without the special ~ option";
pub const XTRIM_NO_STRATEGY: &str =
    "ERR syntax error, XTRIM must be called with a trimming strategy";
pub const STREAM_BAD_START: &str = "ERR invalid start ID for the interval";
pub const STREAM_BAD_END: &str = "ERR invalid end ID for the interval";
pub const XSETID_BELOW_PROVIDED_MAX_DELETED: &str =
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
pub const XSETID_BELOW_TOP: &str =
    "ERR The ID specified in XSETID is smaller than the target stream top item";
pub const XSETID_ENTRIES_ADDED_BELOW_LENGTH: &str =
    "ERR The entries_added specified in XSETID is smaller than the target stream length";
pub const XSETID_ENTRIES_ADDED_NEGATIVE: &str = "ERR entries_added must be positive";
pub const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
pub const XGROUP_NEEDS_KEY: &str =
    "ERR The XGROUP subcommand requires the key to exist. Note that \
     for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.";
pub const ENTRIESREAD_NEGATIVE: &str = "ERR value for ENTRIESREAD must be positive or -1";
pub const XREADGROUP_DOLLAR: &str = "ERR The $ ID is meaningless in the context of XREADGROUP: \
     you want to read the history of this consumer by specifying a proper ID, or use the > ID to \
     get new messages. The $ ID would just return an empty result set.";
pub const XREAD_GT: &str = "ERR The > ID can be specified only when calling XREADGROUP using \
     the GROUP <group> <consumer> option.";
pub const XREAD_GROUP_OPTION: &str =
    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
pub const XREAD_NOACK_OPTION: &str =
    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
pub const XREADGROUP_MISSING_GROUP: &str = "ERR Missing GROUP option for XREADGROUP";
pub const XREADGROUP_GROUP_GONE: &str =
    "NOGROUP the consumer group this client was blocked on no longer exists";
pub const XREADGROUP_KEY_GONE: &str = "UNBLOCKED the stream key no longer exists";
pub const XCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XCLAIM";
pub const XCLAIM_IDLE: &str = "ERR Invalid IDLE option argument for XCLAIM";
pub const XCLAIM_TIME: &str = "ERR Invalid TIME option argument for XCLAIM";
pub const XCLAIM_RETRYCOUNT: &str = "ERR Invalid RETRYCOUNT option argument for XCLAIM";
pub const XAUTOCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XAUTOCLAIM";
pub const XAUTOCLAIM_COUNT: &str = "ERR COUNT must be > 0";

/// XREAD/XREADGROUP with an odd number of keys and IDs.
pub fn xread_unbalanced(cmd: &str, symbol: char) -> CmdError {
    CmdError::text(format!(
        "ERR Unbalanced '{cmd}' list of streams: for each stream key an ID or '{symbol}' must be \
         specified."
    ))
}

/// XREAD/XREADGROUP with BLOCK inside a script.
pub fn xread_block_in_script(cmd: &str) -> CmdError {
    CmdError::text(format!(
        "ERR {cmd} command is not allowed with BLOCK option from scripts"
    ))
}

/// XREADGROUP of a key or group that does not exist.
pub fn xreadgroup_nogroup(key: &[u8], group: &[u8]) -> CmdError {
    let mut m = b"NOGROUP No such key '".to_vec();
    m.extend_from_slice(key);
    m.extend_from_slice(b"' or consumer group '");
    m.extend_from_slice(group);
    m.extend_from_slice(b"' in XREADGROUP with GROUP option");
    CmdError::Bytes(m)
}

/// XPENDING, XCLAIM and XAUTOCLAIM of a key or group that does not exist.
pub fn nogroup_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    let mut m = b"NOGROUP No such key '".to_vec();
    m.extend_from_slice(key);
    m.extend_from_slice(b"' or consumer group '");
    m.extend_from_slice(group);
    m.push(b'\'');
    CmdError::Bytes(m)
}

/// XGROUP and XINFO of a group that does not exist.
pub fn nogroup_for_key(group: &[u8], key: &[u8]) -> CmdError {
    let mut m = b"NOGROUP No such consumer group '".to_vec();
    m.extend_from_slice(group);
    m.extend_from_slice(b"' for key name '");
    m.extend_from_slice(key);
    m.push(b'\'');
    CmdError::Bytes(m)
}

/// An unknown XCLAIM option.
pub fn xclaim_option(opt: &[u8]) -> CmdError {
    let mut m = b"ERR Unrecognized XCLAIM option '".to_vec();
    m.extend_from_slice(opt);
    m.push(b'\'');
    CmdError::Bytes(m)
}

// ------------------------------------------------------------------------
// Pub/Sub.

pub const SSUBSCRIBE_DENY_BLOCKING: &str =
    "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client";

// ------------------------------------------------------------------------
// Persistence: SAVE, BGSAVE, BGREWRITEAOF.

pub const BGSAVE_IN_PROGRESS: &str = "ERR Background save already in progress";
pub const BGSAVE_BUSY: &str = "ERR Another child process is active (AOF?): can't BGSAVE right \
     now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";
/// A failed SAVE: Redis's bare error (the log says why).
pub const SAVE_FAILED: &str = "ERR";
pub const BGREWRITEAOF_IN_PROGRESS: &str =
    "ERR Background append only file rewriting already in progress";

// ------------------------------------------------------------------------
// DUMP, RESTORE, MIGRATE (Redis 7.0 `cluster.c`).

pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";
pub const DUMP_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
pub const BAD_DATA_FORMAT: &str = "ERR Bad data format";
pub const RESTORE_TTL_NEGATIVE: &str = "ERR Invalid TTL value, must be >= 0";
pub const RESTORE_IDLETIME_NEGATIVE: &str = "ERR Invalid IDLETIME value, must be >= 0";
pub const RESTORE_FREQ_RANGE: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";
pub const MIGRATE_KEYS_WITH_KEY: &str =
    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string";
pub const MIGRATE_CONNECT: &str = "IOERR error or timeout connecting to the client";
pub const MIGRATE_WRITE: &str = "IOERR error or timeout writing to target instance";
pub const MIGRATE_READ: &str = "IOERR error or timeout reading to target instance";

/// MIGRATE's first error from the target (its text without the `-`).
pub fn migrate_target_error(reply: &str) -> CmdError {
    CmdError::text(format!("ERR Target instance replied with error: {reply}"))
}

// ------------------------------------------------------------------------
// Server: COMMAND GETKEYS, CONFIG, SHUTDOWN, DEBUG, SLOWLOG.

pub const GETKEYS_INVALID_COMMAND: &str = "ERR Invalid command specified";
pub const GETKEYS_NO_KEYS: &str = "ERR The command has no key arguments";
pub const GETKEYS_BAD_ARITY: &str = "ERR Invalid number of arguments specified for command";
pub const GETKEYS_BAD_ARGS: &str = "ERR Invalid arguments specified for command";

/// READONLY, READWRITE, ASKING on a server without cluster support.
pub const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

/// A CONFIG SET whose value was accepted but could not be applied.
pub fn config_set_failed(name: &str, why: impl Display) -> CmdError {
    CmdError::text(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

pub const NO_CONFIG_FILE: &str = "ERR The server is running without a config file";

pub fn config_rewrite_failed(why: impl Display) -> CmdError {
    CmdError::text(format!("ERR Rewriting config file: {why}"))
}

pub const NO_SHUTDOWN: &str = "ERR No shutdown in progress.";
pub const DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command \
     option is set to \"local\", you can run it from a local connection, otherwise you need to \
     set this option in the configuration file, and then restart the server.";

/// DEBUG WORKERS (Cairn's own) with a bad count.
pub fn debug_workers_range(max: usize) -> CmdError {
    CmdError::text(format!("ERR workers must be AUTO or between 1 and {max}"))
}

/// SLOWLOG GET's count.
pub const COUNT_AT_LEAST_MINUS_ONE: &str = "ERR count should be greater than or equal to -1";

impl From<EngineError> for CmdError {
    fn from(e: EngineError) -> Self {
        CmdError::Engine(e)
    }
}

impl CmdError {
    pub fn text(msg: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Text(msg.into())
    }

    /// The error line without the leading `-` and trailing CRLF.
    pub fn message(&self) -> Cow<'static, str> {
        match self {
            CmdError::Engine(e) => Cow::Borrowed(engine_text(*e)),
            CmdError::Syntax => Cow::Borrowed(SYNTAX),
            CmdError::NotInteger => Cow::Borrowed(NOT_INTEGER),
            CmdError::NotFloat => Cow::Borrowed(NOT_FLOAT),
            CmdError::InvalidExpire(cmd) => {
                Cow::Owned(format!("ERR invalid expire time in '{cmd}' command"))
            }
            CmdError::UnknownSubcommand { sub, parent } => Cow::Owned(format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                truncate_lossy(sub, 128),
                parent.to_ascii_uppercase()
            )),
            CmdError::WrongArity(cmd) => {
                Cow::Owned(format!("ERR wrong number of arguments for '{cmd}' command"))
            }
            CmdError::Text(t) => t.clone(),
            CmdError::Bytes(b) => Cow::Owned(String::from_utf8_lossy(b).into_owned()),
        }
    }

    /// The error line as bytes, exactly as it goes on the wire (between
    /// `-` and CRLF, before CR/LF are replaced).
    pub fn message_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            CmdError::Bytes(b) => Cow::Borrowed(b),
            other => match other.message() {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
        }
    }
}

/// Redis's text for each engine error. Where a command words a condition
/// its own way (LCS's WRONGTYPE, PFDEBUG's missing key), its handler maps
/// that one case with a constant above.
pub fn engine_text(e: EngineError) -> &'static str {
    match e {
        EngineError::WrongType => WRONGTYPE,
        EngineError::NotInteger => NOT_INTEGER,
        EngineError::NotFloat => NOT_FLOAT,
        EngineError::HashNotInteger => "ERR hash value is not an integer",
        EngineError::HashNotFloat => "ERR hash value is not a float",
        EngineError::Overflow => "ERR increment or decrement would overflow",
        EngineError::NanOrInfinity => "ERR increment would produce NaN or Infinity",
        EngineError::ScoreNaN => "ERR resulting score is not a number (NaN)",
        EngineError::NoSuchKey => NO_SUCH_KEY,
        EngineError::SameObject => "ERR source and destination objects are the same",
        EngineError::StringTooLong => {
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
        }
        EngineError::DbIndexOutOfRange => DB_INDEX_OUT_OF_RANGE,
        EngineError::InvalidExpireTime => "ERR invalid expire time",
        EngineError::IndexOutOfRange => INDEX_OUT_OF_RANGE,
        EngineError::BitOffsetOutOfRange => "ERR bit offset is not an integer or out of range",
        EngineError::OutOfMemory => "ERR Out of memory allocating the string",
        // BITFIELD_RO is the only read-only form that can be asked a write.
        EngineError::ReadOnlyWrite => "ERR BITFIELD_RO only supports the GET subcommand",
        EngineError::SortNotFloat => "ERR One or more scores can't be converted into double",
        EngineError::HllInvalid => "WRONGTYPE Key is not a valid HyperLogLog string value.",
        EngineError::HllCorrupt => "INVALIDOBJ Corrupted HLL object detected",
        EngineError::HllNotSparse => "ERR HLL encoding is not sparse",
        EngineError::InvalidStreamId => STREAM_INVALID_ID,
        EngineError::StreamIdTooSmall => XADD_ID_TOO_SMALL,
        EngineError::StreamExhausted => STREAM_EXHAUSTED,
        EngineError::StreamSetIdBelowTop => XSETID_BELOW_TOP,
        EngineError::StreamEntriesAddedBelowLength => XSETID_ENTRIES_ADDED_BELOW_LENGTH,
        // Handlers word it with the key and group names; this is the
        // fallback no reply should need.
        EngineError::NoGroup => "NOGROUP No such key or consumer group",
        EngineError::BusyGroup => BUSYGROUP,
        EngineError::Lcs(LcsError::StringTooLong) => "ERR String too long for LCS",
        EngineError::Lcs(LcsError::ExceedsProtoMaxBulkLen) => {
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
        }
        EngineError::Lcs(LcsError::AllocFailed) => {
            "ERR Insufficient memory, failed allocating transient memory for LCS"
        }
    }
}

/// `%.Ns` of possibly non-UTF-8 bytes, as Redis prints arguments in errors.
pub fn truncate_lossy(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(n)]).into_owned()
}

/// `%.Ns` of client bytes: C-string semantics, so a NUL ends it.
fn c_str(b: &[u8], n: usize) -> &[u8] {
    let b = &b[..b.len().min(n)];
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// Redis 7.0's unknown-command text (server.c `processCommand`): the name
/// and the first arguments, each quoted, the argument list capped near 128
/// bytes, every piece printed with `%.*s`, so bytes go out as sent and a
/// NUL cuts the piece short.
pub fn unknown_command<'a>(name: &[u8], args: impl Iterator<Item = &'a [u8]>) -> CmdError {
    let mut list: Vec<u8> = Vec::new();
    for a in args {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        list.push(b'\'');
        list.extend_from_slice(c_str(a, room));
        list.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend_from_slice(c_str(name, 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend_from_slice(&list);
    CmdError::Bytes(msg)
}

// ------------------------------------------------------------------------
// Scripting (Redis 7.0 `script.c`, `script_lua.c`, `eval.c`,
// `functions.c`).

/// `shared.noscripterr`.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
/// `shared.slowevalerr`.
pub const BUSY_SCRIPT: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// `shared.slowscripterr`... for functions (`shared.slowfunctionerr`).
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// FUNCTION KILL while an EVAL script runs.
pub const BUSY_SCRIPT_NOT_FUNCTION: &str = BUSY_SCRIPT;
/// SCRIPT KILL while a function runs.
pub const BUSY_FUNCTION_NOT_SCRIPT: &str = BUSY_FUNCTION;
pub const NOTBUSY_SCRIPT: &str = "NOTBUSY No scripts in execution right now.";
pub const NOTBUSY_FUNCTION: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands \
against the dataset. You can either wait the script termination or kill the server in a \
hard way using the SHUTDOWN NOSAVE command.";
pub const SCRIPT_KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
pub const SCRIPT_UNKNOWN_COMMAND: &str = "Unknown Redis command called from script";
pub const SCRIPT_WRONG_ARITY: &str = "Wrong number of args calling Redis command from script";
pub const SCRIPT_NOT_ALLOWED: &str = "This Redis command is not allowed from script";
pub const SCRIPT_WRITE_IN_READ_ONLY: &str =
    "Write commands are not allowed from read-only scripts.";
/// Cairn only: see `crate::script::run` (a script that already wrote
/// reached an undeclared key whose shard another command held).
pub const SCRIPT_UNDECLARED_BUSY: &str = "ERR the script used a key it did not declare in KEYS \
and another command held that key's shard; declare every key a script uses";
/// A script tried to start a script (cannot happen through the command
/// table's `noscript` flags; kept as an error, not a panic).
pub const SCRIPT_NESTED: &str = "ERR a script cannot run another script";
pub const SCRIPT_RO_WITH_WRITE_FLAG: &str =
    "ERR Can not execute a script with write flag using *_ro command.";
pub const NUMKEYS_NEGATIVE: &str = "ERR Number of keys can't be negative";
pub const NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";

// ------------------------------------------------------------------------
// Cluster mode (branch cluster; Redis 7.0 `cluster.c`, `db.c`).

pub const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const SELECT_IN_CLUSTER: &str = "ERR SELECT is not allowed in cluster mode";
pub const MOVE_IN_CLUSTER: &str = "ERR MOVE is not allowed in cluster mode";
pub const SWAPDB_IN_CLUSTER: &str = "ERR SWAPDB is not allowed in cluster mode";
pub const COPY_DB_IN_CLUSTER: &str =
    "ERR Copying to another database is not allowed in cluster mode";
pub const SCRIPT_NO_CLUSTER: &str = "ERR Can not run script on cluster, 'no-cluster' flag is set.";
/// A script's `redis.call` whose own keys span slots (Redis's
/// getNodeByQuery finds no node for them; raised as a Lua error, like the
/// SCRIPT_* texts).
pub const SCRIPT_CROSS_SLOT_CALL: &str =
    "Script attempted to access a non local key in a cluster node";
pub const CLUSTER_INVALID_SLOT: &str = "ERR Invalid or out of range slot";
pub const CLUSTER_INVALID_SLOT_SHORT: &str = "ERR Invalid slot";
pub const CLUSTER_GETKEYSINSLOT_ARGS: &str = "ERR Invalid slot or number of keys";
pub const CLUSTER_FAILOVER_ON_MASTER: &str = "ERR You should send CLUSTER FAILOVER to a replica";
pub const CLUSTER_REPLICATE_MYSELF: &str = "ERR Can't replicate myself";
pub const CLUSTER_FORGET_MYSELF: &str = "ERR I tried hard but I can't forget myself...";
pub const CLUSTER_RESET_WITH_KEYS: &str =
    "ERR CLUSTER RESET can't be called with master nodes containing keys";
pub const CLUSTER_EPOCH_SET: &str = "ERR Node config epoch is already non-zero";
pub const CLUSTER_SETSLOT_SYNTAX: &str =
    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";

pub fn cluster_unknown_node(id: &[u8]) -> CmdError {
    CmdError::text(format!("ERR Unknown node {}", String::from_utf8_lossy(id)))
}

pub fn cluster_slot_busy(slot: u16) -> CmdError {
    CmdError::text(format!("ERR Slot {slot} is already busy"))
}

pub fn cluster_range_reversed(start: u16, end: u16) -> CmdError {
    CmdError::text(format!(
        "ERR start slot number {start} is greater than end slot number {end}"
    ))
}

pub fn cluster_invalid_epoch(epoch: i64) -> CmdError {
    CmdError::text(format!("ERR Invalid config epoch specified: {epoch}"))
}

pub fn cluster_unknown_setslot_node(id: &[u8]) -> CmdError {
    CmdError::text(format!(
        "ERR I don't know about node {}",
        String::from_utf8_lossy(id)
    ))
}

pub fn cluster_already_owner(slot: u16) -> CmdError {
    CmdError::text(format!("ERR I'm already the owner of hash slot {slot}"))
}

/// Cairn only: what a one-node cluster without a cluster bus cannot do
/// (tests/diff/DIFFERENCES.md).
pub fn cluster_one_node(what: &str) -> CmdError {
    CmdError::text(format!(
        "ERR Cairn's cluster mode is one node that owns every slot and has no cluster bus: {what}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every engine error becomes one reply line that opens with an
    /// upper-case error code (what clients and INFO errorstats key on).
    #[test]
    fn engine_texts_are_single_lines_with_a_code() {
        use EngineError::*;
        let all = [
            WrongType,
            NotInteger,
            NotFloat,
            HashNotInteger,
            HashNotFloat,
            Overflow,
            NanOrInfinity,
            ScoreNaN,
            NoSuchKey,
            SameObject,
            StringTooLong,
            DbIndexOutOfRange,
            InvalidExpireTime,
            IndexOutOfRange,
            BitOffsetOutOfRange,
            OutOfMemory,
            ReadOnlyWrite,
            SortNotFloat,
            HllInvalid,
            HllCorrupt,
            HllNotSparse,
            Lcs(LcsError::StringTooLong),
            Lcs(LcsError::ExceedsProtoMaxBulkLen),
            Lcs(LcsError::AllocFailed),
        ];
        for e in all {
            let text = engine_text(e);
            let code = text.split(' ').next().unwrap();
            assert!(code.len() >= 2, "{e:?}: {text}");
            assert!(
                code.bytes().all(|b| b.is_ascii_uppercase()),
                "{e:?}: {text}"
            );
            assert!(!text.contains(['\r', '\n']), "{e:?}: {text}");
        }
        assert_eq!(
            CmdError::Engine(HllInvalid).message(),
            "WRONGTYPE Key is not a valid HyperLogLog string value."
        );
    }

    #[test]
    fn unknown_command_quotes_bytes_like_printf() {
        let e = unknown_command(b"fo\0o", [&b"a\xffb"[..], b"c\0d"].into_iter());
        assert_eq!(
            &*e.message_bytes(),
            &b"ERR unknown command 'fo', with args beginning with: 'a\xffb' 'c' "[..]
        );
    }
}
