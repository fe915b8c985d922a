//! After a command: hands what the engine recorded (`cairn_engine::events`)
//! to the parts of the server that act on it. Keyspace notifications go to
//! pub/sub; keys that became ready wake clients blocked on them.
use crate::shared::Shared;
use cairn_engine::events::{self, Event};

/// Handles every event this thread recorded. Called with no shard locked:
/// after each command, after EXEC, and after an active-expiry pass.
pub fn after_command(shared: &Shared) {
    if !events::pending() {
        return;
    }
    for e in events::take() {
        match e {
            Event::Notify {
                class,
                event,
                db,
                key,
            } => crate::pubsub::keyspace_event(shared, class, event, db, &key),
            Event::Ready { db, key } => crate::blocking::key_ready(shared, db, &key),
            Event::ReadyDb { db } => crate::blocking::db_ready(shared, db),
        }
    }
}
