//! Pub/Sub: channels, patterns and shard channels, and delivery to
//! subscribers on any worker. (Skeleton: the pub/sub work fills it in.)
use crate::shared::Shared;

/// Publishes a keyspace notification (Redis `notifyKeyspaceEvent`): on
/// `__keyspace@<db>__:<key>` and/or `__keyevent@<db>__:<event>` as
/// `notify-keyspace-events` enables them. `class` is already known to be
/// enabled.
pub fn keyspace_event(_shared: &Shared, _class: u32, _event: &str, _db: usize, _key: &[u8]) {}
