//! String values: integers stored as i64, other bytes as a buffer.
//!
//! Encodings mirror Redis's three so OBJECT ENCODING answers the same:
//! `int` (the text is exactly what `string2l` accepts, at most 20 bytes),
//! `embstr` (a short string created whole, at most 44 bytes) and `raw` (longer,
//! or produced by in-place edits such as APPEND and SETRANGE).
use crate::util::num;

/// Longest string Redis stores as `embstr` (object.c).
pub const EMBSTR_MAX: usize = 44;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrValue {
    Int(i64),
    Bytes { data: Vec<u8>, raw: bool },
}

impl StrValue {
    /// A string created whole (SET, GETSET, ...): picks the encoding the way
    /// Redis's `tryObjectEncoding` does.
    pub fn from_bytes(b: &[u8]) -> StrValue {
        if let Some(n) = num::should_store_as_int(b) {
            return StrValue::Int(n);
        }
        StrValue::Bytes {
            data: b.to_vec(),
            raw: b.len() > EMBSTR_MAX,
        }
    }

    /// Like `from_bytes` but takes ownership of a buffer already built.
    pub fn from_vec(b: Vec<u8>) -> StrValue {
        if let Some(n) = num::should_store_as_int(&b) {
            return StrValue::Int(n);
        }
        let raw = b.len() > EMBSTR_MAX;
        StrValue::Bytes { data: b, raw }
    }

    /// The result of an in-place edit (APPEND, SETRANGE): always `raw`.
    pub fn edited(b: Vec<u8>) -> StrValue {
        StrValue::Bytes { data: b, raw: true }
    }

    /// Calls `f` with the value's bytes, formatting an integer on the stack.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            StrValue::Int(n) => f(itoa::Buffer::new().format(*n).as_bytes()),
            StrValue::Bytes { data, .. } => f(data),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// Moves the bytes out for editing, formatting an integer if needed.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            StrValue::Int(n) => itoa::Buffer::new().format(n).as_bytes().to_vec(),
            StrValue::Bytes { data, .. } => data,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            StrValue::Int(n) => itoa::Buffer::new().format(*n).len(),
            StrValue::Bytes { data, .. } => data.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value as an integer, as INCR reads it.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            StrValue::Int(n) => Some(*n),
            StrValue::Bytes { data, .. } => num::parse_i64(data),
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self {
            StrValue::Int(_) => "int",
            StrValue::Bytes { raw: false, .. } => "embstr",
            StrValue::Bytes { raw: true, .. } => "raw",
        }
    }

    pub fn mem_bytes(&self) -> usize {
        match self {
            StrValue::Int(_) => 0,
            StrValue::Bytes { data, .. } => data.capacity(),
        }
    }
}
