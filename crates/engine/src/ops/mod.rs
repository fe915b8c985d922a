//! The operations of each command family, one module per family, written
//! against `Guard` (Dragonfly's `Op*` functions, Redis's `t_*.c`). Handlers in
//! the server parse wire arguments into these typed calls.
pub mod bitmap;
pub mod digest;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
pub mod memcache;
pub mod sample;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod zset;

use crate::value::{HashValue, ListValue, SetValue, StrValue, Value, ZSetValue};
use crate::{Error, Result};

/// The string a key holds, or WRONGTYPE.
pub fn as_str(v: &Value) -> Result<&StrValue> {
    match v {
        Value::Str(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

pub fn as_str_mut(v: &mut Value) -> Result<&mut StrValue> {
    match v {
        Value::Str(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

/// The hash a key holds, or WRONGTYPE.
pub fn as_hash(v: &Value) -> Result<&HashValue> {
    match v {
        Value::Hash(h) => Ok(h),
        _ => Err(Error::WrongType),
    }
}

pub fn as_hash_mut(v: &mut Value) -> Result<&mut HashValue> {
    match v {
        Value::Hash(h) => Ok(h),
        _ => Err(Error::WrongType),
    }
}

/// The list a key holds, or WRONGTYPE.
pub fn as_list(v: &Value) -> Result<&ListValue> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(Error::WrongType),
    }
}

pub fn as_list_mut(v: &mut Value) -> Result<&mut ListValue> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(Error::WrongType),
    }
}

/// The set a key holds, or WRONGTYPE.
pub fn as_set(v: &Value) -> Result<&SetValue> {
    match v {
        Value::Set(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

pub fn as_set_mut(v: &mut Value) -> Result<&mut SetValue> {
    match v {
        Value::Set(s) => Ok(s),
        _ => Err(Error::WrongType),
    }
}

/// The sorted set a key holds, or WRONGTYPE.
pub fn as_zset(v: &Value) -> Result<&ZSetValue> {
    match v {
        Value::ZSet(z) => Ok(z),
        _ => Err(Error::WrongType),
    }
}

pub fn as_zset_mut(v: &mut Value) -> Result<&mut ZSetValue> {
    match v {
        Value::ZSet(z) => Ok(z),
        _ => Err(Error::WrongType),
    }
}

/// Scaffolding shared by the family ops' unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::{Engine, Guard, Options};

    /// A small engine: two databases, four shards.
    pub fn engine() -> Engine {
        Engine::new(Options {
            databases: 2,
            shards: 4,
        })
    }

    /// Runs `f` with the whole keyspace locked.
    pub fn with<R>(e: &Engine, f: impl FnOnce(&mut Guard) -> R) -> R {
        let mut g = e.lock_all(&crate::cx::testing::cx());
        f(&mut g)
    }
}
