//! Errors the engine returns as values. The server turns each into Redis's
//! exact reply text in one place (`server::resp::errors`); nothing here knows
//! the wire form.

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
    /// The key does not exist (RENAME and friends).
    NoSuchKey,
    /// Source and destination are the same (MOVE, COPY into itself).
    SameObject,
    /// A string would grow past `proto-max-bulk-len`.
    StringTooLong,
    /// A database index outside 0..databases.
    DbIndexOutOfRange,
    /// A computed expire time overflows.
    InvalidExpireTime,
    /// LCS would need more transient memory than allowed.
    LcsTooLarge,
    /// Any other failure, as Redis's complete reply text (without the
    /// leading `-`), e.g. `ERR index out of range`. For errors one family
    /// raises in one place; shared ones deserve a variant of their own.
    Msg(&'static str),
}
