//! The memcached protocol (memcached 1.6 `doc/protocol.txt`): the text
//! commands (storage, retrieval, incr/decr, touch, gat/gats, delete,
//! flush_all, version, verbosity, stats, quit, noreply) and the meta
//! commands (mg, ms, md, ma, mn, me) with their flags. memcached 1.6.18 is
//! the reference for every byte: error texts, which malformed lines get
//! which error, when a data block is read or discarded.
//!
//! - `request`: requests in (`Decoder`), borrowing from the read buffer.
//! - `reply`: reply lines out.
//! - `base64`: meta keys sent with the `b` flag.
//!
//! Numbers are read as memcached's `safe_strto*` read them
//! (`cairn_num::memcache`, shared with the engine's incr/decr).

pub mod base64;
mod reply;
mod request;

pub use reply::{push_i64, push_u64, value_line};
pub use request::{
    key_ok, Auth, DataBlock, Decoded, Decoder, KeyBytes, Keys, Limits, Meta, MetaCmd, MetaFlags,
    Refusal, Request, Store, StoreMode, Words, KEY_MAX, LINE_MAX, OPAQUE_MAX,
};
