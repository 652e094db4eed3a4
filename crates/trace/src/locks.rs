//! The `aux` byte of lock events (`LockWait`, `LockAcquired`, `LockReleased`): the lock mode in
//! bits 0-1 and flags above. One definition for the probe that writes it and the analysis that
//! reads it.

/// Bits 0-1: how the lock is held.
pub const MODE_MASK: u8 = 0b11;
pub const MODE_EXCLUSIVE: u8 = 0;
pub const MODE_SHARED: u8 = 1;
pub const MODE_SPIN: u8 = 2;
/// Mode not known at release (an rwlock unlock): the analysis pairs it with the acquisition.
pub const MODE_UNKNOWN: u8 = 3;
/// The acquisition waited: a `LockWait` of the same thread and lock precedes it.
pub const CONTENDED: u8 = 1 << 2;
/// From a try-lock call (which never waits).
pub const TRY: u8 = 1 << 3;
/// From a timed or clocked call.
pub const TIMED: u8 = 1 << 4;
/// The previous owner died holding a robust mutex (the call returned EOWNERDEAD).
pub const OWNER_DIED: u8 = 1 << 5;
/// Re-acquired on return from a condition wait (not a request of the program's own).
pub const AFTER_COND: u8 = 1 << 6;

pub fn mode(aux: u8) -> u8 {
    aux & MODE_MASK
}

pub fn has(aux: u8, flag: u8) -> bool {
    aux & flag != 0
}
