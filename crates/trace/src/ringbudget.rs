//! The rings' budget: how much shared memory all the rings of one run may take together,
//! whatever the number of threads the target creates over its life.
//!
//! The recorder creates a small control file ([`BUDGET_FILE`], one page) in the rings
//! directory before it launches the target; every probe maps it. A probe *reserves* the bytes
//! of a new ring before creating it ([`Budget::reserve`]): the size it asked for while the
//! budget allows, smaller rings as the budget fills ([`grant`]), and none when even the
//! smallest does not fit — the thread is then not recorded, and counted
//! ([`Budget::count_refused`]). The recorder *releases* a ring's bytes once the ring is closed
//! (its thread ended) and fully drained ([`Budget::release`]).
//!
//! Layout (little-endian, every field 8-aligned, accessed only atomically once published):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CNTDBUDG` |
//! | 8 | 4 | version (1) |
//! | 16 | 8 | limit: bytes all ring files may take together |
//! | 24 | 8 | used: bytes of ring files reserved and not yet released |
//! | 32 | 8 | threads not recorded because the budget was full |
//! | 40 | 8 | threads not recorded because their ring could not be made (a failed system call) |
//!
//! Both sides check what they read: a probe never reserves past the limit nor trusts a limit
//! above [`MAX_LIMIT`]; the recorder clamps the counts it reports.
#![allow(unsafe_code)] // shared memory between processes: raw pointers and atomics

use crate::ring::{file_len, MIN_CAPACITY};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The control file's name in the rings directory (not a `.ring`: the drainer skips it).
pub const BUDGET_FILE: &str = "budget";
pub const BUDGET_MAGIC: [u8; 8] = *b"CNTDBUDG";
pub const BUDGET_VERSION: u32 = 1;
/// The control file's size.
pub const BUDGET_LEN: usize = 4096;
/// The default budget: 192 MiB, well under the 256 MiB a run may take in `/dev/shm`, leaving
/// room for rings a thread closed but the recorder has not released yet.
pub const DEFAULT_LIMIT: u64 = 192 << 20;
/// No budget above this is believed (a scribbled control file).
pub const MAX_LIMIT: u64 = 64 << 30;
/// The smallest ring a thread is given when the budget is nearly full: 64 KiB holds 4096
/// records, many times what a thread records between two drains (1 ms apart).
pub const SMALLEST_RING: u64 = 64 << 10;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_LIMIT: usize = 16;
const OFF_USED: usize = 24;
const OFF_REFUSED: usize = 32;
const OFF_FAILED: usize = 40;

/// The capacity (data area, bytes) to give a new ring when `used` of `limit` bytes are taken,
/// for a thread that asked for `requested` (a power of two); `None`: not even the smallest
/// ring fits.
///
/// While more than half the budget is free, a ring may take up to an eighth of what is free
/// above that half: the first threads get what they asked for, later ones halve step by step
/// (eight rings per step), down to [`SMALLEST_RING`]. The half kept back is for smallest rings
/// only, so a program with well over a thousand threads alive at once still has every one
/// recorded (192 MiB: about 1 500 threads at once), while a program with a few threads gets
/// big rings.
pub fn grant(requested: u64, limit: u64, used: u64) -> Option<u64> {
    let requested = requested.clamp(MIN_CAPACITY, crate::ring::MAX_CAPACITY);
    let smallest = SMALLEST_RING.min(requested);
    let free = limit.saturating_sub(used);
    let above_half = free.saturating_sub(limit / 2);
    let mut capacity = requested;
    while capacity > smallest && file_len(capacity).saturating_mul(8) > above_half {
        capacity /= 2;
    }
    let capacity = capacity.max(smallest);
    (file_len(capacity) <= free).then_some(capacity)
}

/// Writes a fresh control block into `base`.
///
/// # Safety
/// `base` must be a writable, 8-aligned mapping of at least [`BUDGET_LEN`] zero bytes that no
/// probe reads yet.
pub unsafe fn init(base: *mut u8, limit: u64) {
    // SAFETY: the caller guarantees the mapping; all offsets lie inside it.
    unsafe {
        std::ptr::copy_nonoverlapping(BUDGET_MAGIC.as_ptr(), base.add(OFF_MAGIC), 8);
        (base.add(OFF_VERSION) as *mut u32).write(BUDGET_VERSION.to_le());
        (base.add(OFF_LIMIT) as *mut u64).write(limit.min(MAX_LIMIT).to_le());
    }
}

/// A view of a mapped control block.
#[derive(Clone, Copy)]
pub struct Budget {
    base: *mut u8,
}

// SAFETY: every access to the shared block is atomic.
unsafe impl Send for Budget {}
// SAFETY: as above.
unsafe impl Sync for Budget {}

impl Budget {
    /// A view of the block at `base`, or `None` when it is not a control block of this version.
    ///
    /// # Safety
    /// `base` must be an 8-aligned mapping of at least [`BUDGET_LEN`] bytes that stays mapped
    /// while the view (or a copy of it) is used.
    pub unsafe fn new(base: *mut u8) -> Option<Budget> {
        let b = Budget { base };
        let mut magic = [0u8; 8];
        // SAFETY: the caller guarantees the mapping.
        unsafe { std::ptr::copy_nonoverlapping(base.add(OFF_MAGIC), magic.as_mut_ptr(), 8) };
        let version = b.word32(OFF_VERSION).load(Ordering::Relaxed);
        (magic == BUDGET_MAGIC && u32::from_le(version) == BUDGET_VERSION).then_some(b)
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `new`'s caller guarantees the mapping; offsets are 8-aligned constants.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn word32(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as above, 4-aligned.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// The limit, believed only up to [`MAX_LIMIT`].
    pub fn limit(&self) -> u64 {
        self.word(OFF_LIMIT).load(Ordering::Relaxed).min(MAX_LIMIT)
    }

    pub fn used(&self) -> u64 {
        self.word(OFF_USED).load(Ordering::Relaxed)
    }

    /// Reserves a ring for a thread that asked for `requested` bytes: the capacity granted
    /// (its file takes `file_len(capacity)` bytes of the budget), or `None` when the budget is
    /// full (or the block was scribbled on: used beyond the limit).
    pub fn reserve(&self, requested: u64) -> Option<u64> {
        let limit = self.limit();
        let used = self.word(OFF_USED);
        let mut now = used.load(Ordering::Relaxed);
        loop {
            if now > limit {
                return None;
            }
            let capacity = grant(requested, limit, now)?;
            match used.compare_exchange_weak(
                now,
                now + file_len(capacity),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(capacity),
                Err(seen) => now = seen,
            }
        }
    }

    /// Gives back the bytes of a ring file (`file_len` of its capacity), never below zero.
    pub fn release(&self, bytes: u64) {
        let used = self.word(OFF_USED);
        let _ = used.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |now| {
            Some(now.saturating_sub(bytes))
        });
    }

    /// A thread not recorded because the budget was full.
    pub fn count_refused(&self) {
        self.word(OFF_REFUSED).fetch_add(1, Ordering::Relaxed);
    }

    /// A thread not recorded because its ring could not be made.
    pub fn count_failed(&self) {
        self.word(OFF_FAILED).fetch_add(1, Ordering::Relaxed);
    }

    /// Threads not recorded for want of budget (clamped: the target could write anything).
    pub fn refused(&self) -> u64 {
        self.word(OFF_REFUSED)
            .load(Ordering::Relaxed)
            .min(u64::from(u32::MAX))
    }

    /// Threads not recorded because their ring could not be made (clamped).
    pub fn failed(&self) -> u64 {
        self.word(OFF_FAILED)
            .load(Ordering::Relaxed)
            .min(u64::from(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_rings_get_what_they_ask_then_smaller_then_none() {
        let limit = DEFAULT_LIMIT;
        let asked = 4 << 20;
        let mut used = 0;
        let mut sizes = Vec::new();
        while let Some(c) = grant(asked, limit, used) {
            sizes.push(c);
            used += file_len(c);
        }
        assert!(used <= limit, "{used} > {limit}");
        assert!(limit - used < file_len(SMALLEST_RING));
        assert_eq!(sizes[0], asked);
        assert!(sizes.windows(2).all(|w| w[1] <= w[0]), "sizes only shrink");
        assert_eq!(*sizes.last().unwrap(), SMALLEST_RING);
        let big = sizes.iter().filter(|&&c| c == asked).count();
        assert!((8..=24).contains(&big), "{big} rings of the asked size");
        // Well over a thousand threads alive at once are all recorded.
        assert!(sizes.len() > 1400, "only {} rings fit", sizes.len());
    }

    #[test]
    fn a_small_request_is_kept_and_an_odd_one_bounded() {
        assert_eq!(grant(4096, DEFAULT_LIMIT, 0), Some(4096));
        assert_eq!(grant(4096, DEFAULT_LIMIT, DEFAULT_LIMIT - 8192), Some(4096));
        assert_eq!(grant(4096, DEFAULT_LIMIT, DEFAULT_LIMIT - 100), None);
        assert_eq!(grant(1 << 20, 0, 0), None);
        assert_eq!(grant(1 << 20, 1 << 20, 2 << 20), None);
    }

    #[test]
    fn reserve_and_release_keep_the_count_and_refuse_a_scribbled_block() {
        let mut mem = vec![0u64; BUDGET_LEN / 8];
        let base = mem.as_mut_ptr() as *mut u8;
        unsafe { init(base, 1 << 20) };
        let b = unsafe { Budget::new(base) }.unwrap();
        assert_eq!(b.limit(), 1 << 20);
        let c = b.reserve(64 << 10).unwrap();
        assert_eq!(b.used(), file_len(c));
        b.release(file_len(c));
        assert_eq!(b.used(), 0);
        b.release(5);
        assert_eq!(b.used(), 0, "never below zero");
        b.word(OFF_USED).store(u64::MAX, Ordering::Relaxed);
        assert_eq!(b.reserve(4096), None);
        b.count_refused();
        b.count_failed();
        assert_eq!((b.refused(), b.failed()), (1, 1));
        b.word(OFF_LIMIT).store(u64::MAX, Ordering::Relaxed);
        assert_eq!(b.limit(), MAX_LIMIT);
        mem[0] = 0;
        assert!(unsafe { Budget::new(mem.as_mut_ptr() as *mut u8) }.is_none());
    }
}
