//! One memory access through the model: the fast path every instrumented load and store takes
//! (one thread-local load, one shadow load, a bit test; no shadow write unless the line's
//! state changes), and the slow path (a state change by one atomic swap or or, transfers
//! counted, hot lines itemised).

use crate::threads::{self, Local};
use crate::{hot, model, shadow};
use std::sync::atomic::Ordering;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Kind {
    Read = 0,
    Write = 1,
    AtomicRead = 2,
    AtomicWrite = 3,
}

impl Kind {
    #[inline(always)]
    pub fn is_write(self) -> bool {
        self as u8 & 1 != 0
    }
    #[inline(always)]
    pub fn is_atomic(self) -> bool {
        self as u8 & 2 != 0
    }
    pub fn from_u8(k: u8) -> Kind {
        match k & 3 {
            0 => Kind::Read,
            1 => Kind::Write,
            2 => Kind::AtomicRead,
            _ => Kind::AtomicWrite,
        }
    }
}

/// An access of `size` bytes (1..=16) at `addr` from code address `pc`: one access per line it
/// touches.
#[inline(always)]
pub fn access(addr: usize, size: usize, kind: Kind, pc: usize) {
    if crate::active() {
        checked_access(addr, size, kind, pc);
    }
}

/// `access` from a hook whose trampoline checked that the runtime is active (x86-64), for the
/// common case: a registered thread, an access inside one line, a line whose state it does not
/// change and that is not hot. That case saves no registers (every other case calls the cold
/// `unusual_access`, which starts again).
#[inline(always)]
pub fn active_access(addr: usize, size: usize, kind: Kind, pc: usize) {
    if !cfg!(target_arch = "x86_64") && !crate::active() {
        return;
    }
    // SAFETY: this thread's own block; fields are only written by this thread.
    let l = unsafe { &*threads::local() };
    let shift = shadow::shift();
    let mask = (1usize << shift) - 1;
    if kind.is_atomic()
        || l.rec.is_null()
        || (addr & mask) + size > mask + 1
        || addr >> shadow::ADDRESS_BITS != 0
    {
        return unusual_access(addr, size, kind, pc);
    }
    let e = shadow::entry_unchecked(addr, shift);
    let s = e.state.load(Ordering::Relaxed);
    let unchanged = if kind.is_write() {
        s == l.write_state
    } else {
        s & l.bit != 0
    };
    let hot = e.hot.load(Ordering::Relaxed);
    if hot != 0 {
        // An access to a sampled hot line that is not this thread's turn: counted, not
        // modelled (see `slow`).
        let left = l.sample_countdown.get();
        if hot & shadow::SAMPLED == 0 || left <= 1 {
            return unusual_access(addr, size, kind, pc);
        }
        l.sample_countdown.set(left - 1);
    } else if !unchanged {
        return unusual_access(addr, size, kind, pc);
    }
    // SAFETY: registered threads have a record.
    let rec = unsafe { &*l.rec };
    threads::bump(if kind.is_write() {
        &rec.writes
    } else {
        &rec.reads
    });
}

#[cold]
#[inline(never)]
fn unusual_access(addr: usize, size: usize, kind: Kind, pc: usize) {
    checked_access(addr, size, kind, pc);
}

#[inline(always)]
fn checked_access(addr: usize, size: usize, kind: Kind, pc: usize) {
    let l = threads::current();
    let mask = shadow::line_size() - 1;
    let offset = addr & mask;
    if offset + size <= mask + 1 {
        line_access(l, addr, offset, size, kind, pc);
    } else {
        split(l, addr, size, kind, pc);
    }
}

/// An access to `size` bytes from `addr` (any length, e.g. memcpy), one access per line.
pub fn range(addr: usize, size: usize, kind: Kind, pc: usize) {
    if !crate::active() || size == 0 {
        return;
    }
    let l = threads::current();
    split(l, addr, size, kind, pc);
}

#[inline(never)]
fn split(l: &Local, addr: usize, size: usize, kind: Kind, pc: usize) {
    let line = shadow::line_size();
    let end = addr.saturating_add(size);
    let mut a = addr;
    while a < end {
        let offset = a & (line - 1);
        let n = (line - offset).min(end - a);
        line_access(l, a, offset, n, kind, pc);
        a += n;
    }
}

#[inline(always)]
fn line_access(l: &Local, addr: usize, offset: usize, size: usize, kind: Kind, pc: usize) {
    // SAFETY: registered threads have a record.
    let rec = unsafe { &*l.rec };
    threads::bump(if kind.is_write() {
        &rec.writes
    } else {
        &rec.reads
    });
    if kind.is_atomic() {
        threads::bump(&rec.atomics);
    }
    let Some(e) = shadow::entry(addr) else {
        return;
    };
    let s = e.state.load(Ordering::Relaxed);
    let unchanged = if kind.is_write() {
        s == l.write_state
    } else {
        s & l.bit != 0
    };
    if unchanged && e.hot.load(Ordering::Relaxed) == 0 {
        return;
    }
    slow(l, e, s, addr - offset, offset, size, kind, pc);
}

#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn slow(
    l: &Local,
    e: &shadow::Entry,
    s: u64,
    line: usize,
    offset: usize,
    size: usize,
    kind: Kind,
    pc: usize,
) {
    // A hot line whose history window is full is sampled: only 1 in `sample_every` of this
    // thread's accesses to it run the model and are itemised, each counting for that many
    // (the reads and writes totals stay exact). This keeps the shadow entry, which moves
    // between cores as the data does, out of most accesses to the hottest lines.
    let mut weight = 1;
    let raw = e.hot.load(Ordering::Relaxed);
    let hot_now = raw & !shadow::SAMPLED;
    if hot_now != 0 {
        let every = crate::settings().sample_every;
        if every > 1 && hot::sampled(hot_now) {
            if raw & shadow::SAMPLED == 0 {
                // Marked in the shadow so the fast path skips without looking at the slot;
                // only if the line is still this hot line (not closed meanwhile).
                let _ = e.hot.compare_exchange(
                    raw,
                    raw | shadow::SAMPLED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            let left = l.sample_countdown.get();
            if left > 1 {
                l.sample_countdown.set(left - 1);
                return;
            }
            l.sample_countdown.set(every);
            weight = every;
        }
    }
    // One atomic read-modify-write, no retry loop: a write's new state does not depend on the
    // old one (swap), a read adds the thread's holder bit (or). The old state says whether it
    // was a transfer, exactly as `model::step` on it would.
    let is_write = kind.is_write();
    let changed = if is_write {
        s != l.write_state
    } else {
        s & l.bit == 0
    };
    let (mut transfer, mut from_empty) = (false, false);
    if changed {
        let old = if is_write {
            e.state.swap(l.write_state, Ordering::Relaxed)
        } else {
            e.state.fetch_or(l.bit, Ordering::Relaxed)
        };
        transfer = model::is_transfer(old, l.index, is_write);
        from_empty = old == 0;
    }
    // SAFETY: registered threads have a record.
    let rec = unsafe { &*l.rec };
    if transfer {
        threads::add(&rec.transfers, u64::from(weight));
    }
    let mut hot = e.hot.load(Ordering::Acquire) & !shadow::SAMPLED;
    if hot == 0 {
        let cfg = crate::settings();
        if cfg.exhaustive {
            // The access that took the line out of its empty state is its first: it promotes.
            if !from_empty {
                return;
            }
            hot = hot::promote(e, line, 0, l);
            if hot == 0 {
                return;
            }
        } else {
            if transfer {
                let n = e
                    .transfers
                    .fetch_add(1, Ordering::Relaxed)
                    .saturating_add(1);
                if n == cfg.hot_after {
                    // Tracked from the next access: this one counts before the line was hot.
                    hot::promote(e, line, u64::from(n), l);
                }
            }
            return;
        }
    }
    hot::record(l, hot, offset, size, kind, pc, transfer, weight);
}
