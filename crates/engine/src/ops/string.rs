//! String operations (Redis t_string.c): GET, SET and friends.
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::as_str;
use crate::value::{StrValue, Value};
use crate::{Error, Result};

/// SET's existence condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Always,
    /// NX: only if the key does not exist.
    IfAbsent,
    /// XX: only if the key exists.
    IfPresent,
}

/// What SET did.
#[derive(Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// False when NX/XX stopped the write.
    pub written: bool,
    /// The old value when GET was asked for (None: the key did not exist).
    pub old: Option<Vec<u8>>,
}

/// GET key: the string's bytes, None if absent, WRONGTYPE otherwise.
pub fn get<R>(g: &mut Guard, db: usize, k: &Key, f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
    match g.read(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(as_str(&e.value)?.with_bytes(|b| f(Some(b)))),
    }
}

/// SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT|KEEPTTL]. With `get`, the old
/// value must be a string (WRONGTYPE otherwise) and nothing is written.
pub fn set(
    g: &mut Guard,
    db: usize,
    k: &Key,
    value: &[u8],
    cond: Cond,
    expiry: Expiry,
    want_old: bool,
) -> Result<SetOutcome> {
    let mut old = None;
    let exists = match g.peek(db, k) {
        Some(e) => {
            if want_old {
                old = Some(as_str(&e.value)?.to_vec());
            }
            true
        }
        None => false,
    };
    let allowed = match cond {
        Cond::Always => true,
        Cond::IfAbsent => !exists,
        Cond::IfPresent => exists,
    };
    if !allowed {
        return Ok(SetOutcome {
            written: false,
            old,
        });
    }
    // A deadline already in the past is stored as given, as Redis 7.0 does;
    // lazy expiry then hides the key from the next lookup.
    g.set(db, k, Value::Str(StrValue::from_bytes(value)), expiry);
    Ok(SetOutcome { written: true, old })
}

/// Errors for a value that would exceed the configured string limit.
pub fn check_len(g: &Guard, len: usize) -> Result<()> {
    if len > g.engine().limits.max_string() {
        return Err(Error::StringTooLong);
    }
    Ok(())
}
