//! The value types a key can hold, and their encodings.
pub mod codebooks;
pub mod hash;
pub mod list;
pub mod names;
pub mod set;
pub mod stream;
pub mod string;
pub mod zcomp;
pub mod zcomp_lz4;
pub mod zset;

pub use hash::{HashLimits, HashValue, HashView};
pub use list::ListValue;
pub use set::SetValue;
pub use stream::StreamValue;
pub use string::StrValue;
pub use zset::ZSetValue;

/// What a key holds. The type names and encoding names are Redis's, because
/// TYPE, OBJECT ENCODING and SCAN TYPE expose them.
#[derive(Clone, Debug)]
pub enum Value {
    Str(StrValue),
    Hash(Box<HashValue>),
    List(Box<ListValue>),
    Set(Box<SetValue>),
    ZSet(Box<ZSetValue>),
    Stream(Box<StreamValue>),
}

/// The kind of a value, independent of its encoding (TYPE, SCAN TYPE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String,
    Hash,
    List,
    Set,
    ZSet,
    Stream,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    /// Parses a TYPE name as SCAN's TYPE option accepts it (case-insensitive).
    pub fn from_name(name: &[u8]) -> Option<Kind> {
        [
            Kind::String,
            Kind::Hash,
            Kind::List,
            Kind::Set,
            Kind::ZSet,
            Kind::Stream,
        ]
        .into_iter()
        .find(|k| k.name().as_bytes().eq_ignore_ascii_case(name))
    }
}

impl Value {
    pub fn kind(&self) -> Kind {
        match self {
            Value::Str(_) => Kind::String,
            Value::Hash(_) => Kind::Hash,
            Value::List(_) => Kind::List,
            Value::Set(_) => Kind::Set,
            Value::ZSet(_) => Kind::ZSet,
            Value::Stream(_) => Kind::Stream,
        }
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => s.encoding(),
            Value::Hash(h) => h.encoding(),
            Value::List(l) => l.encoding(),
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
            Value::Stream(s) => s.encoding(),
        }
    }

    pub fn mem_bytes(&self) -> usize {
        match self {
            Value::Str(s) => s.mem_bytes(),
            Value::Hash(h) => std::mem::size_of::<HashValue>() + h.mem_bytes(),
            Value::List(l) => std::mem::size_of::<ListValue>() + l.mem_bytes(),
            Value::Set(s) => std::mem::size_of::<SetValue>() + s.mem_bytes(),
            Value::ZSet(z) => std::mem::size_of::<ZSetValue>() + z.mem_bytes(),
            Value::Stream(s) => std::mem::size_of::<StreamValue>() + s.mem_bytes(),
        }
    }
}
