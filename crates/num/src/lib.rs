//! Numbers as Cairn's reference servers read them from text, for the crates
//! that must read them the same way but may not depend on each other: the
//! memcached codec reads a command line's numbers, and the engine reads a
//! stored value as incr/decr does, with one `safe_strtoull`. The codecs
//! know no values and the engine knows no wire bytes, so neither crate can
//! host this for the other. No dependencies, no I/O.
pub mod memcache;
