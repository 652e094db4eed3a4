//! The probe's clock: the time-stamp counter where it is invariant (the recorder checks
//! `constant_tsc` and `nonstop_tsc` and says so in the environment), else CLOCK_MONOTONIC.
//! The recorder calibrates the counter against CLOCK_MONOTONIC and stores the pairs in meta.

use std::sync::atomic::{AtomicBool, Ordering};

static USE_COUNTER: AtomicBool = AtomicBool::new(false);

/// Chooses the counter (true) or CLOCK_MONOTONIC (false); called once at start-up.
pub fn use_counter(on: bool) {
    USE_COUNTER.store(on && counter_available(), Ordering::Relaxed);
}

pub fn uses_counter() -> bool {
    USE_COUNTER.load(Ordering::Relaxed)
}

fn counter_available() -> bool {
    cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
}

#[inline]
pub fn now() -> u64 {
    if USE_COUNTER.load(Ordering::Relaxed) {
        counter()
    } else {
        monotonic_ns()
    }
}

/// The time between two readings of `now()` in ticks: nanoseconds for CLOCK_MONOTONIC, and at
/// least as many for an invariant counter (which runs at 1 GHz or more), so a threshold of
/// 1000 ticks is at most 1 µs: enough to tell a wait from an uncontended call.
#[inline]
pub fn ns_between(a: u64, b: u64) -> u64 {
    b.saturating_sub(a)
}

#[inline]
pub fn counter() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let v: u64;
        // SAFETY: the virtual counter is readable from user space on Linux.
        unsafe { core::arch::asm!("mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
        v
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        monotonic_ns()
    }
}

#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
