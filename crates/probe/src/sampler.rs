//! Sampled mode (`--locks=sampled`): only one in N uncontended acquisitions is recorded (with
//! its release); every contended one still is. An unrecorded acquisition costs a thread-local
//! countdown and a push on a small stack of unrecorded holds, so that its release, found on
//! that stack, is skipped too: no clock read and no record for either.

use std::sync::atomic::{AtomicU32, Ordering};

/// Unrecorded holds remembered per thread; past this, acquisitions are recorded.
const DEPTH: usize = 16;

static EVERY: AtomicU32 = AtomicU32::new(1);

/// All-zero is the initial state: an empty stack, and a countdown that records the next one.
#[repr(C)]
pub struct Sampler {
    countdown: u32,
    depth: usize,
    held: [usize; DEPTH],
}

crate::tls::zeroed_thread_local!(sampler, Sampler, "contend_probe_sampler_tls", 256);

/// Records one in `n` uncontended acquisitions (1: all of them).
pub fn set_every(n: u32) {
    EVERY.store(n.max(1), Ordering::Relaxed);
}

/// True when this uncontended acquisition of `lock` goes unrecorded.
#[inline]
pub fn skip_acquisition(lock: usize) -> bool {
    let every = EVERY.load(Ordering::Relaxed);
    if every <= 1 {
        return false;
    }
    // SAFETY: this thread's own sampler (see `tls`). A signal handler that interrupts this uses
    // the stack in a balanced way: its pushes are popped before it returns.
    let s = unsafe { &mut *sampler() };
    if s.countdown > 0 && s.depth < DEPTH {
        s.countdown -= 1;
        s.held[s.depth] = lock;
        s.depth += 1;
        true
    } else {
        s.countdown = every - 1;
        false
    }
}

/// True when the release of `lock` ends an unrecorded hold (and so goes unrecorded too).
#[inline]
pub fn skip_release(lock: usize) -> bool {
    if EVERY.load(Ordering::Relaxed) <= 1 {
        return false;
    }
    // SAFETY: as above.
    let s = unsafe { &mut *sampler() };
    // Locks are usually released in the reverse order of taking them: check the top first.
    if s.depth > 0 && s.held[s.depth - 1] == lock {
        s.depth -= 1;
        return true;
    }
    let mut i = s.depth;
    while i > 0 {
        i -= 1;
        if s.held[i] == lock {
            for j in i..s.depth - 1 {
                s.held[j] = s.held[j + 1];
            }
            s.depth -= 1;
            return true;
        }
    }
    false
}
