//! A spin lock for the runtime's rare shared updates (heap-block map shards, hot-line objects).
//! Not std's Mutex: the fork handlers must take every lock before `fork` and reset them in the
//! child without guards.

use std::sync::atomic::{AtomicBool, Ordering};

pub struct SpinLock(AtomicBool);

impl SpinLock {
    pub const fn new() -> SpinLock {
        SpinLock(AtomicBool::new(false))
    }

    #[inline]
    pub fn lock(&self) {
        let mut spins = 0u32;
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                // The holder may be descheduled (2 CPUs shared with others): let it run.
                // SAFETY: no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }

    /// Takes the lock unless it stays held for `tries` attempts; whether it was taken.
    pub fn try_lock_for(&self, tries: u32) -> bool {
        for _ in 0..tries {
            if self
                .0
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    #[inline]
    pub fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }

    /// In a forked child: whoever held it in the parent does not exist here.
    pub fn reset(&self) {
        self.0.store(false, Ordering::Relaxed);
    }

    #[inline]
    pub fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        self.lock();
        let r = f();
        self.unlock();
        r
    }
}
