//! After a command: hands what the engine recorded in the command's state
//! (`cairn_engine::CmdState`, events of `cairn_engine::events`) to the
//! parts of the server that act on it. Keyspace notifications go to
//! pub/sub; keys that became ready wake clients blocked on them; keys
//! changed under BCAST prefixes go to client-side caching's clients.
use crate::client::Client;
use crate::shared::Shared;
use cairn_engine::events::Event;
use cairn_engine::CmdState;

/// Handles every event recorded in `state`. Called with no shard locked:
/// after each command (EXEC's included, whose queued commands share its
/// state), and after an active-expiry or eviction pass. `me` is the client
/// whose command raised them, if any (its own notifications land around
/// its reply).
pub fn after_command(shared: &Shared, state: &CmdState, mut me: Option<&mut Client>) {
    if !state.has_events() {
        return;
    }
    for e in state.take_events() {
        match e {
            Event::Notify {
                class,
                event,
                db,
                key,
            } => crate::pubsub::keyspace_event(shared, me.as_deref_mut(), class, event, db, &key),
            Event::Ready { db, key } => crate::blocking::key_ready(shared, db, &key),
            Event::ReadyDb { db } => crate::blocking::db_ready(shared, db),
            Event::Broadcast => crate::tracking::broadcast(shared),
        }
    }
}
