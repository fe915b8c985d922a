//! Every error line the memcached front end writes itself, in memcached
//! 1.6's words (`proto_text.c`, `proto_meta.c`): the one place this
//! wording lives, as `resp::errors` is for Redis's. Lines are written
//! without the CRLF.
//!
//! Not here: the codec's own refusals of a malformed request (`CLIENT_ERROR
//! bad data chunk`, `ERROR` for an unknown command, the storage refusals of
//! `cairn_protocol::memcache::Refusal`), which `cairn_protocol::memcache`
//! words as it parses; and the listener's refusal of a connection.
//!
//! No `cairn_engine::Error` reaches this front end: the engine's memcached
//! operations (`cairn_engine::ops::memcache`) report their expected
//! failures as outcomes (`Arith::NonNumeric`, `Stored::NotStored`, ...),
//! which the handlers answer with the lines below or memcached's status
//! words. A command that one day can fail with an engine error maps it here.

/// incr/decr/ma on a value that is not an unsigned 64-bit decimal (or not a
/// string at all).
pub const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";

/// A write refused while memory is over maxmemory and nothing can be
/// evicted (incr/decr/ma; the storage commands refuse with the codec's
/// `Refusal::NoMemory`).
pub const OUT_OF_MEMORY: &str = "SERVER_ERROR out of memory";

/// A key longer than memcached's 250 bytes or holding control characters.
pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";

/// `auth` (SASL-less text authentication) with wrong credentials.
pub const AUTH_FAILURE: &str = "CLIENT_ERROR authentication failure";

/// A command the connection's ACL user may not run, or a key it may not
/// read or write (`memcache::acl`). memcached has no per-command rights;
/// this is its one refusal of a command a connection may not run, the
/// answer to anything but the token line before `-Y` authentication
/// (`proto_text.c`), so clients already treat it as "not allowed here".
/// The ACL log says which command or key.
pub const NOPERM: &str = "CLIENT_ERROR unauthenticated";

/// `stats <group>` for a group Cairn does not keep: memcached answers an
/// unknown group with a bare ERROR.
pub const UNKNOWN_STATS_GROUP: &str = "ERROR";

/// Any command that touches the keyspace while the start-up load runs (RESP
/// clients get `-LOADING` meanwhile).
pub const LOADING: &str = "SERVER_ERROR loading the dataset in memory";

/// A write refused while the journal or the save rules could not keep it:
/// memcached has no disk, and its line for "cannot store now" is
/// SERVER_ERROR; the reason after it is the one RESP clients get as their
/// MISCONF error, so both ports name the same failure alike.
pub fn writes_denied(why: &crate::exec::admission::WritesDenied) -> String {
    format!("SERVER_ERROR {}", crate::resp::errors::writes_denied(why))
}

/// A write on a read-only replica (`replica-read-only yes`): memcached has
/// no replicas; SERVER_ERROR is its "cannot do this now" line, and the
/// reason is the RESP clients' `-READONLY` text.
pub const READONLY_REPLICA: &str =
    "SERVER_ERROR READONLY You can't write against a read only replica.";
