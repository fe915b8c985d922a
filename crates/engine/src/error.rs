//! Errors the engine returns as values: each variant names a condition and
//! its data, never a reply text. Each protocol maps them to its own wording
//! in one file (`server::resp::errors` for Redis's texts, byte for byte;
//! `server::memcache::errors` for memcached's), so a new front end maps the
//! same conditions to its own codes.

pub use crate::util::lcs::LcsError;

/// A command failed for a reason the client must be told about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The key holds a value of another type.
    WrongType,
    /// A stored string or argument is not a 64-bit integer.
    NotInteger,
    /// A stored string or argument is not a valid float.
    NotFloat,
    /// A stored hash field is not an integer.
    HashNotInteger,
    /// A stored hash field is not a float.
    HashNotFloat,
    /// INCR-family result would leave the i64 range.
    Overflow,
    /// INCRBYFLOAT result would be NaN or infinite.
    NanOrInfinity,
    /// A sorted-set increment met the opposite infinity: the score would be
    /// NaN (ZADD INCR, ZINCRBY).
    ScoreNaN,
    /// The key does not exist (RENAME, LSET, PFDEBUG and friends).
    NoSuchKey,
    /// Source and destination are the same (MOVE, COPY into itself).
    SameObject,
    /// A string would grow past `proto-max-bulk-len`.
    StringTooLong,
    /// A database index outside 0..databases.
    DbIndexOutOfRange,
    /// A computed expire time overflows.
    InvalidExpireTime,
    /// A list index outside the list (LSET).
    IndexOutOfRange,
    /// A bit offset that is not a non-negative integer, or whose byte lies
    /// past `proto-max-bulk-len` (SETBIT, GETBIT, BITFIELD).
    BitOffsetOutOfRange,
    /// The memory for a string could not be allocated (a bitmap grown to a
    /// huge offset; Redis would abort instead).
    OutOfMemory,
    /// A write asked of the read-only form of a command (BITFIELD_RO with
    /// SET or INCRBY).
    ReadOnlyWrite,
    /// SORT without ALPHA met an element (or BY weight) that does not read
    /// as a double.
    SortNotFloat,
    /// The string at the key is not a HyperLogLog (bad header or size).
    HllInvalid,
    /// A HyperLogLog's sparse data does not describe its registers.
    HllCorrupt,
    /// PFDEBUG DECODE of a HyperLogLog that is not sparse.
    HllNotSparse,
    /// A stream ID argument that does not parse (checked where Redis
    /// parses it, sometimes after the key is looked up).
    InvalidStreamId,
    /// XADD's ID is not above the stream's last ID.
    StreamIdTooSmall,
    /// The stream's last ID is the greatest possible one.
    StreamExhausted,
    /// XSETID below the stream's last entry.
    StreamSetIdBelowTop,
    /// XSETID's ENTRIESADDED below the stream's length.
    StreamEntriesAddedBelowLength,
    /// The consumer group (or its key) does not exist: each command words
    /// it with the names it was given.
    NoGroup,
    /// XGROUP CREATE of a group that exists.
    BusyGroup,
    /// LCS cannot be computed within the limits.
    Lcs(LcsError),
}

impl From<LcsError> for Error {
    fn from(e: LcsError) -> Self {
        Error::Lcs(e)
    }
}
