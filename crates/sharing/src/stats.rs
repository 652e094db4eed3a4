//! A thread's statistics of its accesses to hot lines: per (hot slot, offset, size, kind, code
//! address), the count, the transfers and the CPUs they ran on. An open-addressing table in
//! memory of its own (mmap, not malloc: it grows inside instrumented accesses, which may be in
//! a signal handler or inside the program's malloc), owned by one thread, read at exit.

use crate::sys;

/// Distinct CPUs kept per entry (later ones are not listed).
pub const CPUS: usize = 16;
const FIRST_CAPACITY: usize = 256;
/// Entries a table grows to at most (64 MiB); accesses with a new key after that are counted
/// in `dropped` only.
pub const MAX_CAPACITY: usize = 1 << 20;

/// What an entry is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Key {
    pub pc: u64,
    /// 1 + the hot slot (0 marks an empty entry).
    pub slot: u32,
    pub offset: u8,
    pub size: u8,
    /// `access::Kind` as a number.
    pub kind: u8,
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct Entry {
    pub pc: u64,
    pub slot: u32,
    pub offset: u8,
    pub size: u8,
    pub kind: u8,
    pub ncpus: u8,
    pub count: u64,
    pub transfers: u64,
    pub cpus: [u16; CPUS],
}

const _: () = assert!(std::mem::size_of::<Entry>() == 64);

impl Entry {
    pub fn key(&self) -> Key {
        Key {
            pc: self.pc,
            slot: self.slot,
            offset: self.offset,
            size: self.size,
            kind: self.kind,
        }
    }

    pub fn cpus(&self) -> &[u16] {
        &self.cpus[..usize::from(self.ncpus)]
    }

    #[inline]
    fn add_cpu(&mut self, cpu: u16) {
        let n = usize::from(self.ncpus);
        if n > 0 && self.cpus[n - 1] == cpu {
            return;
        }
        if self.cpus[..n].contains(&cpu) || n == CPUS {
            return;
        }
        self.cpus[n] = cpu;
        self.ncpus += 1;
    }
}

/// All-zero is an empty table with no memory.
pub struct Table {
    entries: *mut Entry,
    capacity: usize,
    len: usize,
    /// Accesses not itemised because the table was at its largest.
    pub dropped: u64,
}

#[inline]
fn hash(k: &Key) -> u64 {
    let mixed = k.pc
        ^ (u64::from(k.slot) << 32)
        ^ (u64::from(k.offset) << 16)
        ^ (u64::from(k.size) << 8)
        ^ u64::from(k.kind);
    mixed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl Table {
    pub const fn new() -> Table {
        Table {
            entries: std::ptr::null_mut(),
            capacity: 0,
            len: 0,
            dropped: 0,
        }
    }

    /// Counts one access.
    #[inline]
    pub fn add(&mut self, key: Key, transfer: bool, cpu: Option<u16>, weight: u32) {
        if self.len * 2 >= self.capacity && !self.grow() {
            // Full: only keys already present are counted.
            if let Some(e) = self.find(&key) {
                Self::count(e, transfer, cpu, weight);
            } else {
                self.dropped += 1;
            }
            return;
        }
        let mask = self.capacity - 1;
        let mut i = (hash(&key) >> 32) as usize & mask;
        loop {
            // SAFETY: i < capacity, inside the table's mapping.
            let e = unsafe { &mut *self.entries.add(i) };
            if e.slot == 0 {
                *e = Entry {
                    pc: key.pc,
                    slot: key.slot,
                    offset: key.offset,
                    size: key.size,
                    kind: key.kind,
                    ncpus: 0,
                    count: 0,
                    transfers: 0,
                    cpus: [0; CPUS],
                };
                self.len += 1;
                Self::count(e, transfer, cpu, weight);
                return;
            }
            if e.key() == key {
                Self::count(e, transfer, cpu, weight);
                return;
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn count(e: &mut Entry, transfer: bool, cpu: Option<u16>, weight: u32) {
        e.count += u64::from(weight);
        e.transfers += u64::from(transfer) * u64::from(weight);
        if let Some(c) = cpu {
            e.add_cpu(c);
        }
    }

    fn find(&mut self, key: &Key) -> Option<&mut Entry> {
        if self.capacity == 0 {
            return None;
        }
        let mask = self.capacity - 1;
        let mut i = (hash(key) >> 32) as usize & mask;
        loop {
            // SAFETY: as in `add`.
            let e = unsafe { &mut *self.entries.add(i) };
            if e.slot == 0 {
                return None;
            }
            if e.key() == *key {
                return Some(e);
            }
            i = (i + 1) & mask;
        }
    }

    /// Doubles the table (or makes the first one); false at the largest size or without memory.
    #[cold]
    fn grow(&mut self) -> bool {
        let capacity = if self.capacity == 0 {
            FIRST_CAPACITY
        } else {
            self.capacity * 2
        };
        if capacity > MAX_CAPACITY {
            return false;
        }
        let _keep = sys::KeepErrno::new();
        let Some(mem) = sys::reserve(capacity * std::mem::size_of::<Entry>(), None) else {
            return false;
        };
        let old = std::mem::replace(
            self,
            Table {
                entries: mem as *mut Entry,
                capacity,
                len: 0,
                dropped: self.dropped,
            },
        );
        for e in old.iter() {
            let mask = capacity - 1;
            let mut i = (hash(&e.key()) >> 32) as usize & mask;
            // SAFETY: i < capacity; the new table has room (it is twice as large).
            unsafe {
                while (*self.entries.add(i)).slot != 0 {
                    i = (i + 1) & mask;
                }
                *self.entries.add(i) = *e;
            }
            self.len += 1;
        }
        let mut old = old;
        old.release();
        true
    }

    /// The entries in use.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> + '_ {
        (0..self.capacity)
            // SAFETY: i < capacity.
            .map(move |i| unsafe { &*self.entries.add(i) })
            .filter(|e| e.slot != 0)
    }

    /// Gives the memory back; the table is empty afterwards.
    pub fn release(&mut self) {
        if !self.entries.is_null() {
            sys::release(
                self.entries as usize,
                self.capacity * std::mem::size_of::<Entry>(),
            );
        }
        *self = Table::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pc: u64, slot: u32, offset: u8) -> Key {
        Key {
            pc,
            slot,
            offset,
            size: 8,
            kind: 1,
        }
    }

    #[test]
    fn counts_per_key_and_keeps_them_across_growth() {
        let mut t = Table::new();
        for round in 0..3u64 {
            for pc in 0..2000u64 {
                t.add(
                    key(0x400000 + pc, 1 + (pc % 3) as u32, (pc % 8) as u8 * 8),
                    round == 0,
                    Some((pc % 20) as u16),
                    1,
                );
            }
        }
        t.add(key(0x400000, 1, 0), false, Some(3), 1);
        let all: Vec<&Entry> = t.iter().collect();
        assert_eq!(all.len(), 2000);
        let first = all.iter().find(|e| e.pc == 0x400000).unwrap();
        assert_eq!((first.count, first.transfers), (4, 1));
        assert_eq!(first.cpus(), &[0, 3]);
        assert_eq!(t.dropped, 0);
        t.release();
        assert_eq!(t.iter().count(), 0);
    }

    #[test]
    fn cpus_are_distinct_and_bounded() {
        let mut t = Table::new();
        for c in 0..40u16 {
            t.add(key(1, 1, 0), false, Some(c % 20), 1);
            t.add(key(1, 1, 0), false, None, 1);
        }
        let e = t.iter().next().unwrap();
        assert_eq!(e.count, 80);
        assert_eq!(e.cpus().len(), CPUS);
        assert_eq!(e.cpus()[..3], [0, 1, 2]);
        t.release();
    }
}
