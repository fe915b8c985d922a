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
pub fn after_command(shared: &Shared, state: &CmdState, me: Option<&mut Client>) {
    handle(shared, state, me, false);
}

/// `after_command` for a command EXEC runs: BCAST invalidations wait for
/// the end of the transaction (`crate::tracking::broadcast` then), as
/// Redis sends them once per prefix per event loop turn, not per command.
/// True if one is owed.
pub fn after_queued_command(shared: &Shared, state: &CmdState, me: &mut Client) -> bool {
    handle(shared, state, Some(me), true)
}

fn handle(
    shared: &Shared,
    state: &CmdState,
    mut me: Option<&mut Client>,
    defer_broadcast: bool,
) -> bool {
    if !state.has_events() {
        return false;
    }
    let mut deferred = false;
    for e in state.take_events() {
        match e {
            Event::Notify {
                class,
                event,
                db,
                key,
            } => crate::pubsub::keyspace_event(shared, me.as_deref_mut(), class, event, db, &key),
            Event::Ready { db, key } => {
                crate::blocking::key_ready(shared, db, &key, me.as_deref_mut())
            }
            Event::ReadyDb { db } => crate::blocking::db_ready(shared, db, me.as_deref_mut()),
            Event::Broadcast if defer_broadcast => deferred = true,
            Event::Broadcast => crate::tracking::broadcast(shared),
        }
    }
    deferred
}
