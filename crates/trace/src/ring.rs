//! Shared-memory rings: how a probe inside the target hands events to the recorder outside it.
//!
//! Each thread of the target owns one ring: a file in the run directory's `rings/` that both
//! processes map. The thread (the single producer) appends 16-byte records and advances `head`;
//! the recorder (the single consumer) copies records out and advances `tail`. The target never
//! makes a system call to record an event, never blocks (a full ring counts the event as
//! dropped), and a target killed with SIGKILL loses nothing it wrote: the pages belong to the
//! file, and the recorder drains them after the target is gone.
//!
//! Layout (all little-endian; the header is one page so the data area is page-aligned):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `CNTDRING` |
//! | 8 | 4 | version (1) |
//! | 12 | 4 | header size (4096) |
//! | 16 | 8 | capacity of the data area in bytes (a power of two, at least 4096) |
//! | 24 | 4 | pid |
//! | 28 | 4 | tid |
//! | 32 | 4 | clock source (as in stream headers) |
//! | 36 | 4 | flags: bit 0 = closed by its thread |
//! | 40 | 8 | clock value when the ring was created |
//! | 48 | 16 | thread name (NUL-padded) |
//! | 64 | 8 | head: bytes ever written (producer; release store) |
//! | 128 | 8 | tail: bytes ever consumed (consumer; release store) |
//! | 192 | 8 | dropped: records the producer could not store |
//!
//! `head` and `tail` sit on separate cache lines so the two processes do not false-share.
//!
//! Besides events, the producer writes *definitions* in-band, before the first record that
//! uses them: [`DEF_SITE`] (`site` = the producer's id, `ts` = the address) and [`DEF_OBJECT`]
//! (`obj` = id, `aux` = [`crate::ObjectKind`], `ts` = the address). The recorder turns them into
//! the stream's tables.
#![allow(unsafe_code)] // shared memory between two processes: raw pointers and atomics

use crate::format::RECORD_LEN;
use crate::Record;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const RING_MAGIC: [u8; 8] = *b"CNTDRING";
pub const RING_VERSION: u32 = 1;
pub const RING_HEADER_LEN: usize = 4096;
pub const MIN_CAPACITY: u64 = 4096;
pub const MAX_CAPACITY: u64 = 1 << 30;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_HEADER_LEN: usize = 12;
const OFF_CAPACITY: usize = 16;
const OFF_PID: usize = 24;
const OFF_TID: usize = 28;
const OFF_CLOCK: usize = 32;
const OFF_FLAGS: usize = 36;
const OFF_START: usize = 40;
const OFF_NAME: usize = 48;
pub const NAME_LEN: usize = 16;
const OFF_HEAD: usize = 64;
const OFF_TAIL: usize = 128;
const OFF_DROPPED: usize = 192;

const FLAG_CLOSED: u32 = 1;

/// In-band definition of a call site: `site` is the id, `ts` the address.
pub const DEF_SITE: u8 = 0xF0;
/// In-band definition of an object: `obj` is the id, `aux` the kind, `ts` the address.
pub const DEF_OBJECT: u8 = 0xF1;

/// The subdirectory of the rings directory where the probe marks the processes it is loaded
/// in (`<pid>-<instance>.probe`, `.fork`); the recorder creates it before the launch. Apart
/// from the rings, so that looking for new rings while the program runs never lists them.
pub const MARKS_DIR: &str = "marks";

/// The size of a ring file for a data area of `capacity` bytes.
pub fn file_len(capacity: u64) -> u64 {
    RING_HEADER_LEN as u64 + capacity
}

/// Facts written once when a ring is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingInfo {
    pub capacity: u64,
    pub pid: u32,
    pub tid: u32,
    pub clock: u32,
    pub start: u64,
}

/// # Safety
/// `base` must point to at least `RING_HEADER_LEN` bytes, 8-aligned, valid for the call.
unsafe fn atomic64<'a>(base: *mut u8, off: usize) -> &'a AtomicU64 {
    // SAFETY: the caller guarantees the header is mapped; offsets are 8-aligned constants.
    unsafe { &*(base.add(off) as *const AtomicU64) }
}

/// # Safety
/// As for [`atomic64`].
unsafe fn atomic32<'a>(base: *mut u8, off: usize) -> &'a AtomicU32 {
    // SAFETY: as above; offsets are 4-aligned constants.
    unsafe { &*(base.add(off) as *const AtomicU32) }
}

/// Writes a fresh ring header into `base` (the start of a zero-filled mapping of
/// `file_len(capacity)` bytes).
///
/// # Safety
/// `base` must be a writable, page-aligned mapping of at least `file_len(info.capacity)` bytes
/// that no consumer reads yet.
pub unsafe fn init(base: *mut u8, info: &RingInfo, name: &[u8]) {
    // SAFETY: the caller guarantees the mapping; all offsets are inside the header page.
    unsafe {
        std::ptr::copy_nonoverlapping(RING_MAGIC.as_ptr(), base.add(OFF_MAGIC), 8);
        (base.add(OFF_VERSION) as *mut u32).write(RING_VERSION.to_le());
        (base.add(OFF_HEADER_LEN) as *mut u32).write((RING_HEADER_LEN as u32).to_le());
        (base.add(OFF_CAPACITY) as *mut u64).write(info.capacity.to_le());
        (base.add(OFF_PID) as *mut u32).write(info.pid.to_le());
        (base.add(OFF_TID) as *mut u32).write(info.tid.to_le());
        (base.add(OFF_CLOCK) as *mut u32).write(info.clock.to_le());
        (base.add(OFF_START) as *mut u64).write(info.start.to_le());
        set_name(base, name);
    }
}

/// Copies a thread name into the header (cut to 15 bytes, NUL-padded).
///
/// # Safety
/// As for [`init`].
pub unsafe fn set_name(base: *mut u8, name: &[u8]) {
    let n = name.len().min(NAME_LEN - 1);
    // SAFETY: the name field lies inside the header page.
    unsafe {
        std::ptr::write_bytes(base.add(OFF_NAME), 0, NAME_LEN);
        std::ptr::copy_nonoverlapping(name.as_ptr(), base.add(OFF_NAME), n);
    }
}

/// The producer's side, owned by one thread of the target. No allocation, no system call.
/// All-zero is [`Producer::detached`].
#[repr(C)]
pub struct Producer {
    base: *mut u8,
    data: *mut u8,
    mask: u64,
    capacity: u64,
    /// The producer's copy of `head` (it is the only writer of it).
    head: u64,
    /// The last `tail` seen; refreshed only when the ring looks full.
    tail: u64,
}

// SAFETY: a Producer is used by the thread that owns it; moving it between threads is fine as
// long as only one uses it at a time, which `&mut self` methods ensure.
unsafe impl Send for Producer {}

impl Producer {
    /// A producer attached to no ring (all fields zero); `push` must not be called on it.
    pub const fn detached() -> Producer {
        Producer {
            base: std::ptr::null_mut(),
            data: std::ptr::null_mut(),
            mask: 0,
            capacity: 0,
            head: 0,
            tail: 0,
        }
    }

    pub fn is_attached(&self) -> bool {
        !self.base.is_null()
    }

    /// # Safety
    /// `base` must be a mapping initialised by [`init`] with the same capacity, which stays
    /// mapped for the Producer's lifetime; only one Producer may exist per ring.
    pub unsafe fn new(base: *mut u8, capacity: u64) -> Producer {
        debug_assert!(capacity.is_power_of_two());
        // SAFETY: the caller guarantees the mapping.
        let head = unsafe { atomic64(base, OFF_HEAD) }.load(Ordering::Relaxed);
        Producer {
            base,
            // SAFETY: the data area follows the header page inside the mapping.
            data: unsafe { base.add(RING_HEADER_LEN) },
            mask: capacity - 1,
            capacity,
            head,
            tail: 0,
        }
    }

    /// Appends one record; false (and the ring's drop counter incremented) when it is full.
    #[inline]
    pub fn push(&mut self, record: &Record) -> bool {
        if self.head - self.tail + RECORD_LEN as u64 > self.capacity {
            // SAFETY: the header is mapped for the Producer's lifetime (see `new`).
            self.tail = unsafe { atomic64(self.base, OFF_TAIL) }.load(Ordering::Acquire);
            if self.head - self.tail + RECORD_LEN as u64 > self.capacity {
                // SAFETY: as above.
                unsafe { atomic64(self.base, OFF_DROPPED) }.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        let at = (self.head & self.mask) as usize;
        let bytes = record.encode();
        // SAFETY: `at` is a multiple of 16 below the power-of-two capacity, so the 16 bytes
        // lie inside the data area; the consumer does not read them until `head` covers them.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.data.add(at), RECORD_LEN) };
        self.head += RECORD_LEN as u64;
        // SAFETY: as above. Release: the record's bytes are visible before the new head.
        unsafe { atomic64(self.base, OFF_HEAD) }.store(self.head, Ordering::Release);
        true
    }

    /// Counts an event that was not recorded (the thread was inside the probe already, e.g. a
    /// signal handler interrupted a record).
    pub fn count_dropped(&mut self) {
        // SAFETY: the header is mapped for the Producer's lifetime.
        unsafe { atomic64(self.base, OFF_DROPPED) }.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks the ring closed (its thread ended); the consumer drains it and lets it go.
    pub fn close(&mut self) {
        // SAFETY: the header is mapped for the Producer's lifetime.
        unsafe { atomic32(self.base, OFF_FLAGS) }.fetch_or(FLAG_CLOSED, Ordering::Release);
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

/// Why a ring cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("the ring file is {len} bytes, smaller than its {RING_HEADER_LEN}-byte header")]
    TooShort { len: usize },
    #[error("not a contend ring (bad magic)")]
    BadMagic,
    #[error("ring version {0}, this contend reads version {RING_VERSION}")]
    Version(u32),
    #[error(
        "ring capacity {capacity} does not match the file's {len} bytes or is not a power of two"
    )]
    BadCapacity { capacity: u64, len: usize },
    #[error("the producer's position {head} is behind the consumer's {tail} or more than the capacity ahead: the ring was corrupted")]
    Corrupt { head: u64, tail: u64 },
}

/// The consumer's side, over a mapping of a whole ring file. Everything the producer wrote is
/// checked before use: a misbehaving target cannot make the consumer read out of bounds.
pub struct Consumer<'a> {
    map: &'a mut [u8],
    capacity: u64,
}

impl<'a> Consumer<'a> {
    pub fn new(map: &'a mut [u8]) -> Result<Consumer<'a>, RingError> {
        let len = map.len();
        if len < RING_HEADER_LEN {
            return Err(RingError::TooShort { len });
        }
        if map[OFF_MAGIC..OFF_MAGIC + 8] != RING_MAGIC {
            return Err(RingError::BadMagic);
        }
        let version = u32::from_le_bytes(
            map[OFF_VERSION..OFF_VERSION + 4]
                .try_into()
                .unwrap_or_default(),
        );
        if version != RING_VERSION {
            return Err(RingError::Version(version));
        }
        let capacity = u64::from_le_bytes(
            map[OFF_CAPACITY..OFF_CAPACITY + 8]
                .try_into()
                .unwrap_or_default(),
        );
        if !capacity.is_power_of_two()
            || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity)
            || file_len(capacity) != len as u64
        {
            return Err(RingError::BadCapacity { capacity, len });
        }
        Ok(Consumer { map, capacity })
    }

    fn u32_at(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.map[off..off + 4].try_into().unwrap_or_default())
    }

    pub fn info(&self) -> RingInfo {
        RingInfo {
            capacity: self.capacity,
            pid: self.u32_at(OFF_PID),
            tid: self.u32_at(OFF_TID),
            clock: self.u32_at(OFF_CLOCK),
            start: u64::from_le_bytes(
                self.map[OFF_START..OFF_START + 8]
                    .try_into()
                    .unwrap_or_default(),
            ),
        }
    }

    /// The thread name in the header (lossy UTF-8, up to the first NUL).
    pub fn name(&self) -> String {
        let raw = &self.map[OFF_NAME..OFF_NAME + NAME_LEN];
        let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        String::from_utf8_lossy(&raw[..end]).into_owned()
    }

    fn atomic(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is an 8-aligned constant inside the header, which `new` checked is
        // mapped; the mapping is page-aligned, so the address is 8-aligned. Shared-memory
        // fields are only ever accessed atomically by both sides.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU64) }
    }

    pub fn is_closed(&self) -> bool {
        // SAFETY: as in `atomic`, for the 4-aligned flags word.
        let flags = unsafe { &*(self.map.as_ptr().add(OFF_FLAGS) as *const AtomicU32) };
        flags.load(Ordering::Acquire) & FLAG_CLOSED != 0
    }

    /// Records the producer could not store.
    pub fn dropped(&self) -> u64 {
        self.atomic(OFF_DROPPED).load(Ordering::Relaxed)
    }

    /// Hands every record written since the last call to `each`, in order, then releases
    /// their space to the producer. Returns how many records were drained.
    pub fn drain(&mut self, mut each: impl FnMut(Record)) -> Result<u64, RingError> {
        let head = self.atomic(OFF_HEAD).load(Ordering::Acquire);
        let tail = self.atomic(OFF_TAIL).load(Ordering::Relaxed);
        if head < tail || head - tail > self.capacity || !head.is_multiple_of(RECORD_LEN as u64) {
            return Err(RingError::Corrupt { head, tail });
        }
        let mask = self.capacity - 1;
        let mut pos = tail;
        while pos < head {
            let at = RING_HEADER_LEN + (pos & mask) as usize;
            let mut b = [0u8; RECORD_LEN];
            b.copy_from_slice(&self.map[at..at + RECORD_LEN]);
            each(Record::decode(&b));
            pos += RECORD_LEN as u64;
        }
        self.atomic(OFF_TAIL).store(head, Ordering::Release);
        Ok((head - tail) / RECORD_LEN as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;

    /// A page-aligned buffer standing in for a mapping.
    fn mapping(capacity: u64) -> Vec<u64> {
        vec![0u64; file_len(capacity) as usize / 8]
    }

    fn rec(ts: u64) -> Record {
        Record {
            ts,
            kind: EventKind::Mark,
            aux: 0,
            site: crate::NO_SITE,
            obj: crate::NO_STRING,
        }
    }

    #[test]
    fn records_pass_in_order_and_a_full_ring_counts_drops() {
        let mut mem = mapping(4096);
        let base = mem.as_mut_ptr() as *mut u8;
        let info = RingInfo {
            capacity: 4096,
            pid: 1,
            tid: 2,
            clock: 1,
            start: 5,
        };
        unsafe { init(base, &info, b"worker-1") };
        let mut p = unsafe { Producer::new(base, 4096) };
        let fits = 4096 / RECORD_LEN as u64;
        for t in 0..fits + 10 {
            let kept = p.push(&rec(t));
            assert_eq!(kept, t < fits, "record {t}");
        }
        let len = mem.len() * 8;
        let bytes = unsafe { std::slice::from_raw_parts_mut(base, len) };
        let mut c = Consumer::new(bytes).unwrap();
        assert_eq!(c.info(), info);
        assert_eq!(c.name(), "worker-1");
        assert_eq!(c.dropped(), 10);
        let mut seen = Vec::new();
        assert_eq!(c.drain(|r| seen.push(r.ts)).unwrap(), fits);
        assert_eq!(seen, (0..fits).collect::<Vec<_>>());
        // Space is free again; the ring wraps.
        assert!(p.push(&rec(1000)));
        let mut seen = Vec::new();
        c.drain(|r| seen.push(r.ts)).unwrap();
        assert_eq!(seen, [1000]);
        assert!(!c.is_closed());
        p.close();
        assert!(c.is_closed());
    }

    #[test]
    fn a_corrupt_header_is_refused() {
        let mut mem = mapping(4096);
        let len = mem.len() * 8;
        let base = mem.as_mut_ptr() as *mut u8;
        let bytes = unsafe { std::slice::from_raw_parts_mut(base, len) };
        assert!(matches!(Consumer::new(bytes), Err(RingError::BadMagic)));
        let info = RingInfo {
            capacity: 4096,
            pid: 1,
            tid: 2,
            clock: 1,
            start: 0,
        };
        unsafe { init(base, &info, b"") };
        // A head far beyond the tail (a scribbling target) is corruption, not a huge read.
        unsafe { atomic64(base, OFF_HEAD) }.store(1 << 40, Ordering::Relaxed);
        let bytes = unsafe { std::slice::from_raw_parts_mut(base, len) };
        let mut c = Consumer::new(bytes).unwrap();
        assert!(matches!(c.drain(|_| {}), Err(RingError::Corrupt { .. })));
        let short = unsafe { std::slice::from_raw_parts_mut(base, 100) };
        assert!(matches!(
            Consumer::new(short),
            Err(RingError::TooShort { len: 100 })
        ));
    }
}
