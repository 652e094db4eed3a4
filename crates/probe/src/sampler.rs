//! Sampled mode (`--locks=sampled`): only one in N uncontended acquisitions (on average, at
//! random intervals) is recorded, with its release; every contended one still is. An
//! unrecorded acquisition costs a thread-local countdown and nothing else; recorded holds go on a small per-thread stack, so a release is
//! recorded exactly when its lock is found there, and a thread that holds no recorded lock
//! (the common case) releases after one comparison: no clock read, no record, no search.

use std::sync::atomic::{AtomicU32, Ordering};

/// Recorded holds remembered per thread at once. Past this the oldest is forgotten: its release
/// then goes unrecorded, and the report counts the hold among those never released.
const DEPTH: usize = 16;

static EVERY: AtomicU32 = AtomicU32::new(1);

/// All-zero is the initial state: an empty stack, and a countdown that records the next one.
/// The fast paths in hooks.rs address `countdown` at offset 0 and `depth` at offset 4, and rely
/// on `countdown` staying 0 unless sampled mode is recording.
#[repr(C)]
pub struct Sampler {
    countdown: u32,
    depth: u32,
    held: [usize; DEPTH],
    /// xorshift state for the intervals (0: not seeded yet).
    random: u64,
}

tlsblock::zeroed_thread_local!(sampler, Sampler, "contend_probe_sampler_tls", 192);

/// Records one in `n` uncontended acquisitions (1: all of them).
pub fn set_every(n: u32) {
    EVERY.store(n.max(1), Ordering::Relaxed);
}

/// True when this uncontended acquisition goes unrecorded.
#[inline(always)]
pub fn skip_acquisition() -> bool {
    let every = EVERY.load(Ordering::Relaxed);
    if every <= 1 {
        return false;
    }
    // SAFETY: this thread's own sampler (see `tls`). A signal handler that interrupts this
    // leaves the stack as balanced as it found it, and can only change which acquisition the
    // countdown picks.
    let s = unsafe { &mut *sampler() };
    if s.countdown > 0 {
        s.countdown -= 1;
        true
    } else {
        s.countdown = next_interval(s, every);
        false
    }
}

/// How many uncontended acquisitions to skip before the next recorded one: uniform in
/// [0, 2N-2], so one in N is recorded on average. A fixed interval would alias with a program's
/// own periodic patterns (a thread taking lock A fifteen times, then B once, would see only A
/// or only B) and bias the per-lock estimates.
#[inline(never)]
fn next_interval(s: &mut Sampler, every: u32) -> u32 {
    if s.random == 0 {
        // Any non-zero seed that differs between threads.
        s.random = (s as *const Sampler as u64) | 1;
    }
    let mut x = s.random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s.random = x;
    let span = 2 * u64::from(every) - 1;
    ((x >> 11) % span) as u32
}

/// Remembers that this thread's acquisition of `lock` was recorded, so that its release is.
#[inline]
pub fn recorded_hold(lock: usize) {
    if EVERY.load(Ordering::Relaxed) <= 1 {
        return;
    }
    // SAFETY: as above.
    let s = unsafe { &mut *sampler() };
    let depth = s.depth as usize;
    if depth == DEPTH {
        s.held.copy_within(1.., 0);
        s.held[DEPTH - 1] = lock;
    } else {
        s.held[depth] = lock;
        s.depth += 1;
    }
}

/// True when the release of `lock` ends an unrecorded hold (and so goes unrecorded too).
#[inline(always)]
pub fn skip_release(lock: usize) -> bool {
    if EVERY.load(Ordering::Relaxed) <= 1 {
        return false;
    }
    // SAFETY: as above.
    let s = unsafe { &mut *sampler() };
    s.depth == 0 || !forget_hold(s, lock)
}

/// Takes `lock` off the stack of recorded holds; false when it is not there.
#[inline(never)]
fn forget_hold(s: &mut Sampler, lock: usize) -> bool {
    let depth = s.depth as usize;
    // Locks are usually released in the reverse order of taking them: search from the top.
    match s.held[..depth].iter().rposition(|&h| h == lock) {
        Some(i) => {
            s.held.copy_within(i + 1..depth, i);
            s.depth -= 1;
            true
        }
        None => false,
    }
}
