//! A map from addresses to small ids that never calls malloc: it lives in anonymous mmap'd
//! memory, so it is safe in a signal handler and inside a program's own allocator locks.
//! Open addressing with linear probing; it doubles (a new mapping, then rehash) at half load.

use std::ptr;

const EMPTY: u64 = 0;

#[repr(C)]
#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    id: u32,
}

/// All-zero is the empty table (it lives in zero-filled thread-local storage).
#[repr(C)]
pub struct AddrTable {
    slots: *mut Slot,
    capacity: usize,
    len: usize,
}

// SAFETY: owned by one thread's state; the mapping is private to it.
unsafe impl Send for AddrTable {}

fn map(capacity: usize) -> *mut Slot {
    let bytes = capacity * std::mem::size_of::<Slot>();
    // SAFETY: an anonymous private mapping; checked for failure below.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

#[inline]
fn hash(key: u64) -> u64 {
    // Fibonacci hashing: lock and call-site addresses differ in their low bits.
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What a lookup found.
pub enum Lookup {
    Known(u32),
    /// Newly added with this id: the caller must define it in the ring first.
    New(u32),
    /// No id could be given (table full or out of memory).
    Full,
}

impl AddrTable {
    #[cfg(test)]
    pub const fn empty() -> AddrTable {
        AddrTable {
            slots: ptr::null_mut(),
            capacity: 0,
            len: 0,
        }
    }

    /// The id of `key`, giving it the next id (at most `max_ids` of them) if it is new.
    #[inline]
    pub fn get_or_insert(&mut self, key: u64, max_ids: u32) -> Lookup {
        // Key 0 marks empty slots; a null address never names a lock or a call site.
        if key == EMPTY {
            return Lookup::Full;
        }
        if self.len * 2 >= self.capacity && !self.grow() {
            if let Some(id) = self.find(key) {
                return Lookup::Known(id);
            }
            return Lookup::Full;
        }
        let mask = self.capacity - 1;
        let mut i = (hash(key) as usize) & mask;
        loop {
            // SAFETY: i < capacity, and slots maps `capacity` slots.
            let slot = unsafe { &mut *self.slots.add(i) };
            if slot.key == key {
                return Lookup::Known(slot.id);
            }
            if slot.key == EMPTY {
                if self.len as u32 >= max_ids {
                    return Lookup::Full;
                }
                slot.key = key;
                slot.id = self.len as u32;
                self.len += 1;
                return Lookup::New(slot.id);
            }
            i = (i + 1) & mask;
        }
    }

    fn find(&self, key: u64) -> Option<u32> {
        if self.capacity == 0 {
            return None;
        }
        let mask = self.capacity - 1;
        let mut i = (hash(key) as usize) & mask;
        loop {
            // SAFETY: i < capacity.
            let slot = unsafe { &*self.slots.add(i) };
            if slot.key == key {
                return Some(slot.id);
            }
            if slot.key == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) -> bool {
        let new_capacity = if self.capacity == 0 {
            256
        } else {
            self.capacity * 2
        };
        let fresh = map(new_capacity);
        if fresh.is_null() {
            return false;
        }
        let mask = new_capacity - 1;
        for i in 0..self.capacity {
            // SAFETY: i < old capacity.
            let old = unsafe { *self.slots.add(i) };
            if old.key != EMPTY {
                let mut j = (hash(old.key) as usize) & mask;
                // SAFETY: j < new capacity; the new table has room (it is at most half full).
                while unsafe { (*fresh.add(j)).key } != EMPTY {
                    j = (j + 1) & mask;
                }
                unsafe { *fresh.add(j) = old };
            }
        }
        self.release();
        self.slots = fresh;
        self.capacity = new_capacity;
        true
    }

    fn release(&mut self) {
        if !self.slots.is_null() {
            // SAFETY: slots was returned by mmap with this size.
            unsafe {
                libc::munmap(
                    self.slots.cast(),
                    self.capacity * std::mem::size_of::<Slot>(),
                )
            };
        }
        self.slots = ptr::null_mut();
        self.capacity = 0;
    }

    /// Forgets every entry (a forked child starts its own stream with its own ids).
    pub fn clear(&mut self) {
        self.release();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_stable_and_survive_growth() {
        let mut t = AddrTable::empty();
        for k in 1..=5000u64 {
            match t.get_or_insert(k * 64, u32::MAX) {
                Lookup::New(id) => assert_eq!(id as u64, k - 1),
                _ => panic!("key {k} not new"),
            }
        }
        for k in 1..=5000u64 {
            assert!(
                matches!(t.get_or_insert(k * 64, u32::MAX), Lookup::Known(id) if id as u64 == k - 1)
            );
        }
        assert!(matches!(t.get_or_insert(0, u32::MAX), Lookup::Full));
    }

    #[test]
    fn a_full_table_says_so() {
        let mut t = AddrTable::empty();
        assert!(matches!(t.get_or_insert(8, 2), Lookup::New(0)));
        assert!(matches!(t.get_or_insert(16, 2), Lookup::New(1)));
        assert!(matches!(t.get_or_insert(24, 2), Lookup::Full));
        assert!(matches!(t.get_or_insert(8, 2), Lookup::Known(0)));
    }
}
