//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN, ...).
//!
//! A blocking command that finds nothing calls `Ctx::block`; its request
//! stays at the head of the connection's buffer and the connection stops
//! running requests. The worker registers it here, under every key it
//! waits on, in arrival order, and runs the request once more (a push may
//! have landed between the command's look and the registration). Then:
//!
//! - a write that makes a key hold a list or sorted set records a ready
//!   key (`cairn_engine::events`, only while some client is blocked); after
//!   that command `key_ready` sends `Msg::Wake` to the worker of the
//!   *first* client waiting on the key, which runs the request again (a
//!   wake on behalf of a client's command holds that command's reply
//!   until the woken client has run: `crate::served`);
//! - a client served after a wake hands the wake on to the next waiter of
//!   its keys (`handoff`), so N elements pushed at once serve N clients in
//!   the order they blocked (Redis's FIFO), each on its own thread, and a
//!   client that lost the race to a non-blocking pop just keeps waiting at
//!   the head of the queue;
//! - the worker's timer runs the request with `Unblock::Timeout` when its
//!   deadline passes, and CLIENT UNBLOCK does the same from any thread.
//!
//! The registry is one mutex, taken only by blocking clients and by writes
//! that found a blocked client (the engine's `blocked` counter is zero
//! otherwise), so the plain request path never touches it.
use crate::client::{BlockOn, Client};
use crate::shared::Shared;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;

/// One waiting client: its id and its worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Waiter {
    client: u64,
    worker: usize,
}

/// A key of a database.
type DbKey = (usize, Box<[u8]>);

/// Who waits on which key, in arrival order.
#[derive(Default)]
pub struct Registry {
    keys: Mutex<HashMap<DbKey, VecDeque<Waiter>>>,
}

/// Registers `client` (on `worker`) as waiting on every key of `on`.
pub fn register(shared: &Shared, client: u64, worker: usize, on: &BlockOn) {
    let w = Waiter { client, worker };
    {
        let mut keys = shared.blocking.keys.lock();
        for k in &on.keys {
            let q = keys.entry((on.db, k.clone())).or_default();
            if !q.contains(&w) {
                q.push_back(w);
            }
        }
    }
    // Counted before the caller's second look at the keys, so a push that
    // lands after that look is sure to see a blocked client and signal.
    shared.engine.blocked.fetch_add(1, Ordering::SeqCst);
}

/// Removes `client` from the queues of `on`'s keys.
pub fn unregister(shared: &Shared, client: u64, on: &BlockOn) {
    {
        let mut keys = shared.blocking.keys.lock();
        for k in &on.keys {
            let slot = (on.db, k.clone());
            if let Some(q) = keys.get_mut(&slot) {
                q.retain(|w| w.client != client);
                if q.is_empty() {
                    keys.remove(&slot);
                }
            }
        }
    }
    shared.engine.blocked.fetch_sub(1, Ordering::SeqCst);
}

/// A client left its wait (served, timed out, unblocked or gone): the
/// next waiter on each of its keys gets a look, in case something is left.
/// `by`: the client served, whose serve chain the wakes belong to.
pub fn handoff(shared: &Shared, on: &BlockOn, mut by: Option<&mut Client>) {
    for k in &on.keys {
        key_ready(shared, on.db, k, by.as_deref_mut());
    }
}

/// `key` of `db` now holds a list or sorted set: wake the first client
/// blocked on it. `by`: the client whose command made it ready, if any.
pub fn key_ready(shared: &Shared, db: usize, key: &[u8], by: Option<&mut Client>) {
    let first = {
        let keys = shared.blocking.keys.lock();
        keys.get(&(db, Box::from(key)))
            .and_then(|q| q.front().copied())
    };
    if let Some(w) = first {
        crate::served::wake(shared, w.worker, w.client, by);
    }
}

/// Every key of `db` may have changed (SWAPDB): wake the first client
/// blocked on each key of it.
pub fn db_ready(shared: &Shared, db: usize, mut by: Option<&mut Client>) {
    let firsts: Vec<Waiter> = {
        let keys = shared.blocking.keys.lock();
        keys.iter()
            .filter(|((d, _), _)| *d == db)
            .filter_map(|(_, q)| q.front().copied())
            .collect()
    };
    for w in firsts {
        crate::served::wake(shared, w.worker, w.client, by.as_deref_mut());
    }
}
