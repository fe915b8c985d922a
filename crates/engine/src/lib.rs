//! Cairn's engine: the sharded keyspace, value encodings, expiry, and the
//! operations of each command family. It knows no sockets, no wire bytes and
//! no files: commands arrive as typed calls and leave as typed results.
//!
//! - `keyspace`: shards, keys, and the `Guard` every operation works through.
//! - `table`: one database's slice of one shard (open addressing, SCAN-safe).
//! - `entry`, `value`: what is stored and how it is encoded.
//! - `evict`: which key goes under `maxmemory` (Redis's eviction pool).
//! - `expire`, `iterate`: the active expiry sweep and whole-keyspace walks.
//! - `slots`: Redis Cluster's hash slots and cluster mode's per-slot key
//!   counts.
//! - `snapshot`: the copy-on-lock cut behind point-in-time snapshots.
//! - `ops`: one module per command family, e.g. `ops::string::set`.
//! - `record`: the deterministic record of each write, for the journal;
//!   `rewrite`: the deterministic forms of clock-, chance- and wait-dependent
//!   writes, in one place.
//! - `tier`: the disk tier's pointer blocks, the store the server
//!   installs (the value logs) and the one fetch path of tiered values.
//! - `tracking`: the hook that tells client-side caching which keys
//!   changed, called where WATCH is told.
//! - `cx`: the command context every lock takes (arguments, clock, EXEC's
//!   hold, staged records and events), so no per-command state is
//!   thread-local.
pub mod clock;
pub mod compact;
pub mod cx;
pub mod entry;
pub mod error;
pub mod events;
pub mod evict;
pub mod expire;
pub mod iterate;
pub mod keyspace;
pub mod lazyfree;
pub mod ops;
pub mod record;
pub mod rewrite;
pub mod slots;
pub mod snapshot;
pub mod table;
pub mod tier;
pub mod tracking;
pub mod util;
pub mod value;
pub mod zcoder;

pub use cx::{CmdState, Cx};
pub use entry::{Entry, Owned, Ref, StrRef};
pub use error::Error;
pub use keyspace::{Engine, Expiry, Guard, Hold, Key, Options, WatchFlag, WouldWait};
pub use value::{Kind, Value};

pub type Result<T> = std::result::Result<T, Error>;
