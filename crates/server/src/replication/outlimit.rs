//! `client-output-buffer-limit replica` (Redis 7.0
//! `checkClientOutputBufferLimits` for the replica class): a replica whose
//! unsent share of the replication buffer reaches the hard limit, or stays
//! at or over the soft limit for more than its seconds, is closed with
//! Redis's log line, so one that stops reading cannot hold the master's
//! memory (its blocks) until `repl-timeout`. Checked once a second by the
//! cron: a link's sender blocks in its socket write, so it cannot check.
use super::link::Replica;
use super::Replication;
use crate::log;
use crate::shared::Shared;
use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Since when (unix seconds) each replica, by client id, has been at or
/// over the soft limit.
static SOFT_SINCE: Mutex<Vec<(u64, u64)>> = parking_lot::const_mutex(Vec::new());

impl Replication {
    /// Bytes of the stream the reader has yet to send.
    fn pending(&self, reader: usize) -> u64 {
        self.state
            .lock()
            .buffer
            .as_ref()
            .map_or(0, |b| b.pending(reader))
    }
}

/// Whether `used` bytes pending break the limit, Redis's way: the hard
/// limit at once, the soft one after more than its seconds over it.
fn over(id: u64, used: u64, hard: u64, soft: u64, soft_secs: u64, now: u64) -> bool {
    let mut since = SOFT_SINCE.lock();
    if hard != 0 && used >= hard {
        since.retain(|e| e.0 != id);
        return true;
    }
    if soft != 0 && used >= soft {
        return match since.iter().find(|e| e.0 == id) {
            Some(&(_, t)) => now.saturating_sub(t) > soft_secs,
            None => {
                since.push((id, now));
                false
            }
        };
    }
    since.retain(|e| e.0 != id);
    false
}

/// Once a second: closes the replicas over the limit.
pub fn check(shared: &Shared) {
    let lim = shared.config.read().client_output_buffer_limit.replica;
    let r = &shared.replication;
    let replicas: Vec<Arc<Replica>> = r.replicas.lock().clone();
    if replicas.is_empty() {
        SOFT_SINCE.lock().clear();
        return;
    }
    if lim.hard_bytes == 0 && lim.soft_bytes == 0 {
        return;
    }
    let now = cairn_engine::clock::now_ms() / 1000;
    for rep in replicas {
        let Some(reader) = rep.reader() else {
            continue;
        };
        let used = r.pending(reader);
        if !over(
            rep.info.id,
            used,
            lim.hard_bytes,
            lim.soft_bytes,
            lim.soft_seconds,
            now,
        ) {
            continue;
        }
        // Registered means the link has not closed its socket yet, so the
        // fd is still this replica's.
        let clients = shared.clients.lock();
        if !clients.contains_key(&rep.info.id) || rep.info.killed.load(Ordering::Relaxed) {
            continue;
        }
        rep.info.obl.store(used as usize, Ordering::Relaxed);
        let line = crate::client::describe(shared, &rep.info);
        log::warning(&format!(
            "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
        ));
        rep.info.killed.store(true, Ordering::Relaxed);
        // SAFETY: shutdown(2) takes no pointers; the fd is open (above).
        unsafe {
            libc::shutdown(rep.info.fd, libc::SHUT_RDWR);
        }
        drop(clients);
        SOFT_SINCE.lock().retain(|e| e.0 != rep.info.id);
    }
}
