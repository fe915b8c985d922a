//! The order Redis serves blocked clients in: a command whose write makes
//! a key ready for a blocked client (a push for BLPOP, a BLMOVE's target
//! list for the next BLMOVE, ...) has its reply held, and its client runs
//! nothing more, until every client it woke has had its turn, and every
//! client those woke in turn (a chain of BLMOVEs). Redis serves them in
//! `handleClientsBlockedOnKeys` right after the command, before its reply
//! leaves and before any other command runs, so whoever reads after the
//! push's reply sees the lists as served (Redis's unit/type/list "Linked
//! LMOVEs", "Circular BRPOPLPUSH", WATCH after BRPOPLPUSH).
//!
//! Here a blocked client runs on its own worker (`crate::blocking`). A wake
//! sent on behalf of a client's command carries a `Ticket` of the client
//! that started the chain, counted once per wake. The woken client's worker
//! gives its count back once that client has had its turn (served, or back
//! to waiting, or gone), after any wake its own command sent has taken the
//! ticket further. The last count back tells the origin's worker
//! (`Msg::Served`), which writes the held reply and runs the client's next
//! request. The origin keeps one count of its own while its command runs,
//! so the ticket cannot run dry between two of its wakes.
//!
//! Clients whose commands wake nobody never make a ticket: the plain
//! request path pays one check of a flag per request and per flush.
//! Wakes from outside a client's command (expiry, replication, CLIENT
//! UNBLOCK) carry none and are sent as before (`Msg::Wake`).
use crate::client::Client;
use crate::shared::{Msg, Shared};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One origin command's wakes not yet served.
#[derive(Debug)]
pub struct Ticket {
    /// Wakes in flight, plus one while the origin's command runs.
    left: AtomicUsize,
    /// The origin client's worker and id, told when `left` reaches 0.
    worker: usize,
    client: u64,
}

/// A client's part in serve chains.
#[derive(Debug, Default)]
pub struct ServeWait {
    /// The ticket of this client's own command's wakes, until they are all
    /// served: its reply is held and its next request waits meanwhile.
    origin: Option<Arc<Ticket>>,
    /// The origin's own count of `origin` is still held (its command runs).
    own: bool,
    /// Tickets this client was woken with: its own wakes carry them on, and
    /// they are given back once it has had its turn.
    carried: Vec<Arc<Ticket>>,
}

impl ServeWait {
    /// The client's reply and next request wait for the clients its last
    /// command woke.
    #[inline]
    pub fn waiting(&self) -> bool {
        self.origin.is_some()
    }

    /// The client was woken with tickets it has not given back.
    #[inline]
    pub fn carrying(&self) -> bool {
        !self.carried.is_empty()
    }
}

/// Wakes client `id` on `worker`, whose wait a write of `by`'s command made
/// ready (None: no client's command, a plain wake).
pub fn wake(shared: &Shared, worker: usize, id: u64, by: Option<&mut Client>) {
    let Some(by) = by else {
        shared.worker(worker).send(Msg::Wake(id));
        return;
    };
    let sw = &mut by.served;
    let tickets = if sw.carried.is_empty() {
        let origin = sw.origin.get_or_insert_with(|| {
            Arc::new(Ticket {
                left: AtomicUsize::new(0),
                worker: by.info.worker(),
                client: by.id,
            })
        });
        if !sw.own {
            sw.own = true;
            origin.left.fetch_add(1, Ordering::AcqRel);
        }
        vec![origin.clone()]
    } else {
        sw.carried.clone()
    };
    for t in &tickets {
        t.left.fetch_add(1, Ordering::AcqRel);
    }
    shared.worker(worker).send(Msg::WakeServed(id, tickets));
}

/// After each command (`exec::dispatch::execute`): gives back the origin's
/// own count of the ticket its wakes made, if any; the client waits while
/// the woken clients have not all had their turn.
#[inline]
pub fn settle(client: &mut Client) {
    if client.served.own {
        settle_slow(client);
    }
}

#[cold]
fn settle_slow(client: &mut Client) {
    let sw = &mut client.served;
    sw.own = false;
    if let Some(t) = &sw.origin {
        if t.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            sw.origin = None;
        }
    }
}

/// The woken client had its turn (or is gone): gives back the counts of
/// the tickets it carried, telling each origin whose chain is done.
pub fn release(shared: &Shared, client: &mut Client) {
    for t in client.served.carried.drain(..) {
        give_back(shared, &t);
    }
}

/// Gives back one count of each of `tickets` (a wake that found no client
/// waiting).
pub fn give_back_all(shared: &Shared, tickets: Vec<Arc<Ticket>>) {
    for t in &tickets {
        give_back(shared, t);
    }
}

fn give_back(shared: &Shared, t: &Ticket) {
    if t.left.fetch_sub(1, Ordering::AcqRel) == 1 {
        shared.worker(t.worker).send(Msg::Served(t.client));
    }
}

/// A woken client takes the tickets its wake carried.
pub fn carry(client: &mut Client, tickets: Vec<Arc<Ticket>>) {
    client.served.carried.extend(tickets);
}

/// `Msg::Served` reached the origin's worker: true if the client's chain is
/// done (its reply may go and its next request run). A stale message (the
/// client took a new count since) leaves it waiting; the last count back
/// sends another.
pub fn done(client: &mut Client) -> bool {
    let sw = &mut client.served;
    match &sw.origin {
        Some(t) if !sw.own && t.left.load(Ordering::Acquire) == 0 => {
            sw.origin = None;
            true
        }
        _ => false,
    }
}
