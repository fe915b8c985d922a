//! Freeing large buffers off the request path (Redis's lazyfree, for the
//! one kind of value where freeing costs real time in Cairn: a single
//! buffer of megabytes).
//!
//! jemalloc returns an allocation of 8 MiB or more (`oversize_threshold`)
//! to the OS at once, so dropping a 100 MB string is a `madvise`/`munmap`
//! of 25,600 pages: milliseconds, under whatever shard lock or on whichever
//! worker dropped it. Every large string buffer (`value::string::BigBytes`,
//! the big request arguments the server reads into buffers of their own)
//! therefore goes through [`release`]: the last owner of a buffer of at
//! least [`MIN_BYTES`] hands it to one background thread, which frees it.
//! Sending is one channel push; an owner that is not the last only drops
//! its reference. Redis's `lazyfree-lazy-*` directives do not gate this:
//! they choose lazy freeing for collections with many elements, which in
//! Redis 7.0 never includes a string (`lazyfreeGetFreeEffort` is 1), so in
//! Redis a 100 MB DEL stalls the server; Cairn's answer is simply never to
//! stall for it.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};

/// Buffers at least this large (capacity) are freed in the background.
/// Smaller ones go back to jemalloc's thread cache or arena in well under a
/// microsecond, less than the hand-off would cost.
pub const MIN_BYTES: usize = 1024 * 1024;

static QUEUE: OnceLock<Mutex<Sender<Vec<u8>>>> = OnceLock::new();
/// Buffers handed over and not yet freed (INFO `lazyfree_pending_objects`).
static PENDING: AtomicUsize = AtomicUsize::new(0);
/// Buffers freed by the background thread since start (`lazyfreed_objects`).
static FREED: AtomicU64 = AtomicU64::new(0);

/// Drops one reference to a shared buffer; if it was the last and the
/// buffer is large, the memory is freed on the background thread.
/// `Arc::into_inner` guarantees that of two owners racing to drop, exactly
/// one gets the buffer, so it is never freed inline by accident.
pub fn release(buf: Arc<Vec<u8>>) {
    if buf.capacity() < MIN_BYTES {
        return;
    }
    if let Some(v) = Arc::into_inner(buf) {
        free(v);
    }
}

/// Frees an owned buffer, in the background when it is large.
pub fn free(v: Vec<u8>) {
    if v.capacity() < MIN_BYTES {
        return;
    }
    let queue = QUEUE.get_or_init(start);
    PENDING.fetch_add(1, Ordering::Relaxed);
    // The lock is only contended by other large frees; a poisoned or
    // closed queue (the thread could not start) frees inline instead.
    let sent = match queue.lock() {
        Ok(tx) => tx.send(v).map_err(|e| e.0),
        Err(_) => Err(v),
    };
    if let Err(v) = sent {
        PENDING.fetch_sub(1, Ordering::Relaxed);
        drop(v);
    }
}

/// Buffers waiting for the background thread.
pub fn pending() -> usize {
    PENDING.load(Ordering::Relaxed)
}

/// Buffers the background thread has freed.
pub fn freed() -> u64 {
    FREED.load(Ordering::Relaxed)
}

/// Counts a value handed to another background freer (the server's, for
/// UNLINK's large collections) in the same figures: pending until
/// [`freed_elsewhere`].
pub fn queued_elsewhere() {
    PENDING.fetch_add(1, Ordering::Relaxed);
}

/// The other freer dropped (or gave back) a value [`queued_elsewhere`]
/// counted; `freed`: it was freed in the background.
pub fn freed_elsewhere(freed: bool) {
    PENDING.fetch_sub(1, Ordering::Relaxed);
    if freed {
        FREED.fetch_add(1, Ordering::Relaxed);
    }
}

fn start() -> Mutex<Sender<Vec<u8>>> {
    let (tx, rx) = channel::<Vec<u8>>();
    let spawned = std::thread::Builder::new()
        .name("cairn-lazyfree".into())
        .spawn(move || {
            for v in rx {
                drop(v);
                PENDING.fetch_sub(1, Ordering::Relaxed);
                FREED.fetch_add(1, Ordering::Relaxed);
            }
        });
    // Without the thread the receiver is gone and every send fails, so
    // `free` falls back to freeing inline.
    drop(spawned);
    Mutex::new(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_freed_in_the_background_small_ones_inline() {
        let before = freed();
        free(vec![0u8; 16]);
        release(Arc::new(vec![0u8; 16]));
        let big = Arc::new(vec![1u8; MIN_BYTES]);
        let other = big.clone();
        release(big); // not the last owner: only a decrement
        assert_eq!(Arc::strong_count(&other), 1);
        release(other);
        free(vec![2u8; MIN_BYTES]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while freed() < before + 2 {
            assert!(std::time::Instant::now() < deadline, "background free");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
