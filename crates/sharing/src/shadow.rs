//! Shadow memory: 16 bytes per modelled line of the 47-bit user address space, in one
//! reservation that costs nothing until touched. Entry of `addr` = base + (addr >> shift) * 16:
//! no hashing. A line's entry is written only when its state changes, so a line private to one
//! thread is written once (its first access) and read after that.

use crate::sys;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Addresses the shadow covers: below 2^47 (the x86-64 and default aarch64 user space).
pub const ADDRESS_BITS: u32 = 47;

#[repr(C, align(16))]
pub struct Entry {
    /// The model's state word (see `model`).
    pub state: AtomicU64,
    /// Transfers on this line while it is not hot (counts towards hotness).
    pub transfers: AtomicU32,
    /// 1 + the line's hot slot, or 0: not tracked in detail; with [`SAMPLED`] set once the
    /// line's accesses are sampled (its history window is full).
    pub hot: AtomicU32,
}

/// The bit of [`Entry::hot`] saying the hot line is sampled (slot ids stay below it).
pub const SAMPLED: u32 = 1 << 31;

const ENTRY: usize = std::mem::size_of::<Entry>();
const _: () = assert!(ENTRY == 16);

static BASE: AtomicUsize = AtomicUsize::new(0);
static SHIFT: AtomicU32 = AtomicU32::new(6);

fn length(shift: u32) -> usize {
    (1usize << (ADDRESS_BITS - shift)) * ENTRY
}

/// Reserves the shadow for lines of `1 << shift` bytes; false if the kernel refuses.
pub fn init(shift: u32) -> bool {
    let Some(base) = sys::reserve(length(shift), None) else {
        return false;
    };
    SHIFT.store(shift, Ordering::Relaxed);
    BASE.store(base, Ordering::Release);
    true
}

/// A fresh shadow at the same place (a forked child starts over).
pub fn renew() {
    let base = BASE.load(Ordering::Relaxed);
    if base != 0 {
        let shift = SHIFT.load(Ordering::Relaxed);
        if sys::reserve(length(shift), Some(base)).is_none() {
            // Cannot happen with MAP_FIXED over our own mapping; without a shadow the child
            // would read the parent's states, which are still a valid model state.
            sys::zero_pages(base, length(shift));
        }
    }
}

#[inline(always)]
pub fn shift() -> u32 {
    SHIFT.load(Ordering::Relaxed)
}

#[inline(always)]
pub fn line_size() -> usize {
    1 << shift()
}

/// The entry of the line holding `addr`, or None for an address outside the shadow.
#[inline(always)]
pub fn entry(addr: usize) -> Option<&'static Entry> {
    if addr >> ADDRESS_BITS != 0 {
        return None;
    }
    let p = BASE.load(Ordering::Relaxed) + (addr >> shift()) * ENTRY;
    // SAFETY: the shadow covers every line below 2^47 and is never unmapped while active
    // (`entry` is only called after `init` succeeded); zero is a valid Entry.
    Some(unsafe { &*(p as *const Entry) })
}

/// The entry of `addr` (below 2^47) for lines of `1 << shift` bytes (`shift()`).
#[inline(always)]
pub fn entry_unchecked(addr: usize, shift: u32) -> &'static Entry {
    let p = BASE.load(Ordering::Relaxed) + (addr >> shift) * ENTRY;
    // SAFETY: as in `entry`; the caller checked the address.
    unsafe { &*(p as *const Entry) }
}

/// Forgets the lines in [first, first + count) (line numbers, i.e. addr >> shift): states and
/// counts back to zero. Entries already zero are not written (so untouched shadow stays
/// untouched); large ranges give whole shadow pages back instead. Hot slots are the caller's.
pub fn clear_lines(first: usize, count: usize) {
    const PAGE: usize = 4096;
    let base = BASE.load(Ordering::Relaxed);
    let start = base + first * ENTRY;
    let end = start + count * ENTRY;
    let (inner_start, inner_end) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
    if inner_end > inner_start && inner_end - inner_start >= 64 * PAGE {
        clear_entries(start, inner_start);
        sys::zero_pages(inner_start, inner_end - inner_start);
        clear_entries(inner_end, end);
    } else {
        clear_entries(start, end);
    }
}

fn clear_entries(start: usize, end: usize) {
    let mut p = start;
    while p < end {
        // SAFETY: inside the shadow (see `entry`).
        let e = unsafe { &*(p as *const Entry) };
        if e.state.load(Ordering::Relaxed) != 0 || e.transfers.load(Ordering::Relaxed) != 0 {
            e.state.store(0, Ordering::Relaxed);
            e.transfers.store(0, Ordering::Relaxed);
        }
        p += ENTRY;
    }
}
