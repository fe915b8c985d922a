//! A lock whose release is a plain store, for the journal's append buffer.
//!
//! Every write command appends its record under this lock while the bytes
//! it just wrote into the buffer are still in the CPU's store buffer. A
//! release by a locked instruction (parking_lot's `unlock` is a
//! `lock cmpxchg`, to see parked waiters) must wait until all of those
//! stores have reached the cache, and the buffer's lines are usually not
//! there: the writer thread, on the other core, read them last. Measured
//! (perf, INCR `-P 16`, everysec): 83% of the append's samples sat on
//! that unlock, the append was 7% of the worker's time, and the worker
//! used 8-16% more CPU than with persistence off. On x86-64 a release
//! store needs no fence, so the stores drain while the worker goes on;
//! the next acquire is a whole command later.
//!
//! Waiters spin briefly, then yield, then sleep in short naps: nearly
//! every holder keeps the lock for a copy of one record or a few field
//! updates (the writer's `take` swaps two vectors); only a unit of a huge
//! value (a copy of up to 1 GiB) keeps it long enough for the naps. The
//! one thread that waits for data (the writer) sleeps on a condvar of its
//! own.
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists
// at a time (the flag, taken with Acquire and released with Release).
unsafe impl<T: Send> Sync for SpinLock<T> {}
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

impl<T> SpinLock<T> {
    pub const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard {
            lock: self,
            _marker: PhantomData,
        }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut tries = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                tries = tries.saturating_add(1);
                if tries < 100 {
                    std::hint::spin_loop();
                } else if tries < 200 {
                    // The holder may have been preempted (2 cores shared
                    // with clients): give it the CPU.
                    std::thread::yield_now();
                } else {
                    // A long copy (a huge value's unit): stop burning a core.
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Holds the lock; Send and Sync exactly when `&mut T` is.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    _marker: PhantomData<&'a mut T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and is borrowed mutably.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;
    use std::sync::Arc;

    #[test]
    fn excludes_across_threads() {
        // Non-atomic read-modify-write under the lock: any overlap loses
        // increments.
        let lock = Arc::new(SpinLock::new((0u64, 0u64)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..50_000 {
                        let mut g = lock.lock();
                        let v = g.0;
                        std::hint::black_box(&mut *g);
                        g.0 = v + 1;
                        g.1 = g.0;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let g = lock.lock();
        assert_eq!(*g, (200_000, 200_000));
    }

    #[test]
    fn a_long_hold_is_waited_out_through_the_naps() {
        // The waiter passes the spin and yield phases and naps until the
        // holder (a long copy) releases; it then sees the holder's write.
        let lock = Arc::new(SpinLock::new(0u32));
        let g = lock.lock();
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || *lock.lock())
        };
        std::thread::sleep(std::time::Duration::from_millis(30));
        let mut g = g;
        *g = 7;
        drop(g);
        assert_eq!(waiter.join().unwrap(), 7);
    }
}
