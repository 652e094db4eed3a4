//! The live heap blocks: address → size, call site, allocator, thread, time. Sharded by
//! address (each shard a hash map under its own lock) so threads allocating at once rarely
//! meet; blocks larger than [`SMALL`] are also kept in an ordered map, so the block covering an
//! address can be found (a small block covering it starts at most `SMALL` bytes before it and
//! is found by trying each 16-byte-aligned start, glibc's alignment).

use crate::sync::SpinLock;
use std::cell::UnsafeCell;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};

/// Blocks up to this size are found by probing start addresses.
pub const SMALL: usize = 4096;
/// The heap's alignment (glibc's MALLOC_ALIGNMENT on 64-bit targets).
const ALIGN: usize = 16;
const SHARDS: usize = 64;

/// Allocator names, by `Block::allocator`.
pub const ALLOCATORS: [&str; 11] = [
    "malloc",
    "calloc",
    "realloc",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "operator new",
    "operator new[]",
    "reallocarray",
];

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub site: u64,
    pub allocated_ns: u64,
    pub thread: u16,
    pub allocator: u8,
}

#[derive(Default, Clone, Copy)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Default, Clone, Copy)]
struct BuildAddr;

impl BuildHasher for BuildAddr {
    type Hasher = AddrHasher;
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher(0)
    }
}

struct Shard {
    lock: SpinLock,
    map: UnsafeCell<Option<HashMap<u64, Block, BuildAddr>>>,
}

// SAFETY: `map` is only touched under `lock`.
unsafe impl Sync for Shard {}

static SHARD_TABLE: [Shard; SHARDS] = [const {
    Shard {
        lock: SpinLock::new(),
        map: UnsafeCell::new(None),
    }
}; SHARDS];

struct Large {
    lock: SpinLock,
    /// start → end of blocks larger than SMALL.
    map: UnsafeCell<BTreeMap<u64, u64>>,
}

// SAFETY: `map` is only touched under `lock`.
unsafe impl Sync for Large {}

static LARGE: Large = Large {
    lock: SpinLock::new(),
    map: UnsafeCell::new(BTreeMap::new()),
};

#[inline]
fn shard(address: u64) -> &'static Shard {
    &SHARD_TABLE[((address >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SHARDS]
}

fn with_shard<R>(address: u64, f: impl FnOnce(&mut HashMap<u64, Block, BuildAddr>) -> R) -> R {
    let s = shard(address);
    s.lock.with(|| {
        // SAFETY: under the shard's lock.
        let map = unsafe { &mut *s.map.get() };
        f(map.get_or_insert_with(|| HashMap::with_hasher(BuildAddr)))
    })
}

/// Records a new block.
pub fn insert(b: Block) {
    with_shard(b.address, |m| m.insert(b.address, b));
    if b.size as usize > SMALL {
        LARGE.lock.with(|| {
            // SAFETY: under the lock.
            unsafe { &mut *LARGE.map.get() }.insert(b.address, b.address + b.size)
        });
    }
}

/// Forgets the block at `address`, returning it if it was known.
pub fn remove(address: u64) -> Option<Block> {
    let b = with_shard(address, |m| m.remove(&address))?;
    if b.size as usize > SMALL {
        LARGE.lock.with(|| {
            // SAFETY: under the lock.
            unsafe { &mut *LARGE.map.get() }.remove(&address)
        });
    }
    Some(b)
}

fn get(address: u64) -> Option<Block> {
    with_shard(address, |m| m.get(&address).copied())
}

/// The live blocks overlapping [start, start + len), in order of address.
pub fn overlapping(start: usize, len: usize) -> Vec<Block> {
    let (start, end) = (start as u64, (start + len) as u64);
    let mut found = Vec::new();
    // A block starting before `start` that reaches into the range: the nearest one below.
    let large = LARGE.lock.with(|| {
        // SAFETY: under the lock.
        let m = unsafe { &*LARGE.map.get() };
        m.range(..start).next_back().map(|(&a, &e)| (a, e))
    });
    let mut below = None;
    let mut a = start.saturating_sub(ALIGN as u64) / ALIGN as u64 * ALIGN as u64;
    let lowest = start.saturating_sub(SMALL as u64);
    while a >= lowest && a < start {
        if let Some(b) = get(a) {
            below = Some(b);
            break;
        }
        if a < ALIGN as u64 {
            break;
        }
        a -= ALIGN as u64;
    }
    // Blocks do not overlap: the nearest start below is the only candidate; none within SMALL
    // leaves a large block.
    match (below, large) {
        (Some(b), _) if b.address + b.size > start => found.push(b),
        (None, Some((a, e))) if e > start => found.extend(get(a)),
        _ => {}
    }
    let mut a = start.next_multiple_of(ALIGN as u64);
    while a < end {
        found.extend(get(a));
        a += ALIGN as u64;
    }
    found
}

/// Before `fork`: every lock taken, so the child's maps are consistent.
pub fn lock_all() {
    for s in &SHARD_TABLE {
        s.lock.lock();
    }
    LARGE.lock.lock();
}

pub fn unlock_all() {
    LARGE.lock.unlock();
    for s in &SHARD_TABLE {
        s.lock.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(address: u64, size: u64) -> Block {
        Block {
            address,
            size,
            site: 1,
            allocated_ns: address,
            thread: 0,
            allocator: 0,
        }
    }

    #[test]
    fn finds_the_blocks_over_a_line() {
        // Addresses of their own (the map is process-wide and tests run in parallel).
        let base = 0x7700_0000_0000u64;
        insert(block(base + 0x1000 - 32, 48)); // covers base+0x1000..+16
        insert(block(base + 0x1000 + 16, 16));
        insert(block(base + 0x1000 + 48, 100)); // reaches past the line
        insert(block(base + 0x1000 + 200, 8)); // beyond the line
        let got: Vec<u64> = overlapping(base as usize + 0x1000, 64)
            .iter()
            .map(|b| b.address)
            .collect();
        assert_eq!(
            got,
            [base + 0x1000 - 32, base + 0x1000 + 16, base + 0x1000 + 48]
        );
        // A block ending exactly at the line does not overlap it.
        let got = overlapping(base as usize + 0x1000 + 0x1000, 64);
        assert!(got.is_empty());
        assert_eq!(remove(base + 0x1000 + 16).map(|b| b.size), Some(16));
        assert_eq!(remove(base + 0x1000 + 16), None);
    }

    #[test]
    fn finds_a_large_block_around_a_line() {
        let base = 0x7710_0000_0000u64;
        insert(block(base, 1 << 20));
        insert(block(base + (1 << 20) + 64, 32));
        let got = overlapping(base as usize + 0x8_0000, 64);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].address, base);
        // A small block just below the line but not reaching it, inside nothing large: none.
        let got = overlapping(base as usize + (1 << 20) + 128, 64);
        assert!(got.is_empty(), "{got:?}");
        remove(base);
        assert!(overlapping(base as usize + 0x8_0000, 64).is_empty());
    }
}
