//! The coherence model, one state word per line (shared with the analysis, which replays a hot
//! line's history with the same rules):
//!
//! state = (`writer`: the thread whose write made the line's current version, or none;
//! `holders`: the threads holding the current version). An access by thread T:
//! - a read (or atomic load): if T is not a holder, it is a **transfer** when the writer is
//!   some W ≠ T; then T becomes a holder. Otherwise nothing happens.
//! - a write (store, or any atomic store or read-modify-write, compare-exchange included even
//!   when it fails): a **transfer** when the writer is some W ≠ T, whoever holds copies;
//!   afterwards writer = T, holders = {T}. (A write by the current writer while others hold
//!   copies is not a transfer.)
//!
//! Encoding: bits 48..63 the writer's thread index + 1 (0: none), bits 0..47 the holders as a
//! bit per thread index modulo 48. Threads whose indices are equal modulo 48 share a bit, so a
//! read by one of them of a version another of them holds is missed; the writer is exact up to
//! thread index [`MAX_INDEX`].

/// Threads per holder bit set.
pub const HOLDER_BITS: u32 = 48;
pub const HOLDERS: u64 = (1 << HOLDER_BITS) - 1;
/// The largest thread index the writer field holds (later threads share it).
pub const MAX_INDEX: u16 = 65534;

#[inline(always)]
pub fn holder_bit(thread: u16) -> u64 {
    1u64 << (u32::from(thread) % HOLDER_BITS)
}

/// The state after `thread` writes: it is the writer and the only holder.
#[inline(always)]
pub fn write_state(thread: u16) -> u64 {
    ((u64::from(thread) + 1) << HOLDER_BITS) | holder_bit(thread)
}

#[inline(always)]
pub fn writer(state: u64) -> Option<u16> {
    match state >> HOLDER_BITS {
        0 => None,
        w => Some((w - 1) as u16),
    }
}

#[inline(always)]
fn foreign_writer(state: u64, thread: u16) -> bool {
    let w = state >> HOLDER_BITS;
    w != 0 && w != u64::from(thread) + 1
}

/// A read by `thread`: the new state and whether it was a transfer, or None when nothing
/// changes (the thread holds the current version).
#[inline(always)]
pub fn read(state: u64, thread: u16) -> Option<(u64, bool)> {
    let bit = holder_bit(thread);
    if state & bit != 0 {
        return None;
    }
    Some((state | bit, foreign_writer(state, thread)))
}

/// A write by `thread`: the new state and whether it was a transfer, or None when nothing
/// changes (the thread is the writer and the only holder).
#[inline(always)]
pub fn write(state: u64, thread: u16) -> Option<(u64, bool)> {
    let new = write_state(thread);
    if state == new {
        return None;
    }
    Some((new, foreign_writer(state, thread)))
}

/// One access: `write` or `read`.
#[inline(always)]
pub fn step(state: u64, thread: u16, is_write: bool) -> Option<(u64, bool)> {
    if is_write {
        write(state, thread)
    } else {
        read(state, thread)
    }
}

/// Whether an access by `thread` that found the line in `state` is a transfer (what `step`
/// says; the runtime applies the new state with one atomic swap or or).
#[inline(always)]
pub fn is_transfer(state: u64, thread: u16, is_write: bool) -> bool {
    step(state, thread, is_write).is_some_and(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The model's definition with exact sets, to check the packed one against.
    #[derive(Default, Clone, Debug, PartialEq)]
    struct Exact {
        writer: Option<u16>,
        holders: BTreeSet<u16>,
    }

    impl Exact {
        fn access(&mut self, t: u16, write: bool) -> bool {
            let transfer;
            if write {
                transfer = matches!(self.writer, Some(w) if w != t);
                self.writer = Some(t);
                self.holders = [t].into();
            } else if self.holders.contains(&t) {
                transfer = false;
            } else {
                transfer = matches!(self.writer, Some(w) if w != t);
                self.holders.insert(t);
            }
            transfer
        }
    }

    fn run(state: &mut u64, t: u16, w: bool) -> bool {
        let transfer = is_transfer(*state, t, w);
        match step(*state, t, w) {
            Some((s, t2)) => {
                assert_eq!(t2, transfer);
                // The runtime's update: swap for a write, or for a read.
                let atomic = if w {
                    write_state(t)
                } else {
                    *state | holder_bit(t)
                };
                assert_eq!(s, atomic);
                *state = s;
                transfer
            }
            None => {
                assert!(!transfer);
                false
            }
        }
    }

    #[test]
    fn transitions_by_hand() {
        let mut s = 0;
        // A read of a line nobody wrote: no transfer, the reader holds it.
        assert_eq!(read(s, 0), Some((holder_bit(0), false)));
        s = holder_bit(0);
        assert_eq!(read(s, 0), None);
        // A write with no writer: no transfer.
        assert_eq!(write(s, 1), Some((write_state(1), false)));
        s = write_state(1);
        assert_eq!(writer(s), Some(1));
        // The writer writing again: nothing changes.
        assert_eq!(write(s, 1), None);
        // Thread 0 reads thread 1's version: a transfer; a second read: nothing.
        let (s2, t) = read(s, 0).unwrap();
        assert!(t);
        assert_eq!(s2, write_state(1) | holder_bit(0));
        assert_eq!(read(s2, 0), None);
        // The writer writes while 0 holds a copy: not a transfer, 0's copy is gone.
        assert_eq!(write(s2, 1), Some((write_state(1), false)));
        // Thread 0 writes thread 1's version: a transfer, whoever holds it.
        assert_eq!(write(s2, 0), Some((write_state(0), true)));
        // Thread 1 reads again after 0's write: a transfer.
        assert_eq!(read(write_state(0), 1).map(|x| x.1), Some(true));
    }

    #[test]
    fn false_sharing_ping_pong_transfers_every_turn() {
        let mut s = 0;
        let mut transfers = 0;
        for round in 0..100 {
            let t = (round % 2) as u16;
            for _ in 0..3 {
                transfers += u32::from(run(&mut s, t, false));
                transfers += u32::from(run(&mut s, t, true));
            }
        }
        // Every turn after the first starts with a read of the other's version (a transfer);
        // the write after it is by a thread that is not the writer yet: another transfer.
        assert_eq!(transfers, 99 * 2);
    }

    #[test]
    fn packed_state_matches_the_definition_up_to_48_threads() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for threads in [2u64, 3, 8, 48] {
            let mut packed = 0u64;
            let mut exact = Exact::default();
            for _ in 0..20_000 {
                let r = next();
                let t = (r % threads) as u16;
                let w = (r >> 32) % 3 == 0;
                assert_eq!(run(&mut packed, t, w), exact.access(t, w));
                assert_eq!(writer(packed), exact.writer);
                let holders: BTreeSet<u16> = (0..48u16)
                    .filter(|&i| packed & holder_bit(i) != 0)
                    .collect();
                assert_eq!(holders, exact.holders);
            }
        }
    }

    #[test]
    fn threads_beyond_48_share_a_holder_bit_but_not_the_writer() {
        // 0 and 48 share a bit: 48's read of 1's version after 0 read it is missed.
        let s = write_state(1) | holder_bit(0);
        assert_eq!(read(s, 48), None);
        // The writer is exact: 48 writing 0's version is a transfer.
        assert_eq!(write(write_state(0), 48).map(|x| x.1), Some(true));
        assert_eq!(writer(write_state(MAX_INDEX)), Some(MAX_INDEX));
    }
}
