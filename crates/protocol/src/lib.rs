//! Cairn's wire codecs. Sans-IO: bytes in, frames out, and replies into a
//! byte buffer. Nothing here knows about sockets, keys or values.
pub mod memcache;
pub mod resp;
