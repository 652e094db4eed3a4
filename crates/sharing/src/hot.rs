//! Hot lines: lines tracked in detail once their transfers reach the threshold (or from their
//! first access in exhaustive mode), as Predator does. Each gets a slot in a preallocated table
//! ([`CAPACITY`] slots; later hot lines are only counted, in `hot_lines_dropped`) holding its
//! address, when it became hot, the heap blocks over it, and its history window in a shared
//! arena ([`ARENA_ENTRIES`] entries; once spent, later lines get no history).
//!
//! Every access to a hot line counts in the accessing thread's statistics (see `stats`) and
//! takes the next entry of the line's history with an atomic increment of the line's counter,
//! so the history is in the order the accesses took their entries.

use crate::access::Kind;
use crate::live::Block;
use crate::sync::SpinLock;
use crate::threads::{self, Local};
use crate::{shadow, stats, sys};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use trace::sharing::HistoryEntry;

/// Hot lines tracked at most.
pub const CAPACITY: usize = 65536;
/// History entries for all hot lines together (1 GiB, reserved, touched as written).
pub const ARENA_ENTRIES: u64 = 1 << 28;
/// Heap blocks kept per hot line (later ones are not listed).
pub const MAX_OBJECTS: usize = 8;

pub const LIVE: u32 = 0;
pub const FREED: u32 = 1;

/// A heap block as a hot line keeps it.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Object {
    pub block: Block,
    /// 0 while live.
    pub freed_ns: u64,
}

#[repr(C, align(64))]
pub struct Slot {
    /// The history counter: every thread touching the line increments it, so it has a cache
    /// line of its own.
    pub next: AtomicU64,
    _pad: [u64; 7],
    pub line: AtomicU64,
    pub hot_since: AtomicU64,
    pub ended_ns: AtomicU64,
    pub end: AtomicU32,
    /// History entries this line may use (0: no history), from `first` in the arena.
    pub window: AtomicU32,
    pub first: AtomicU64,
    pub transfers_before_hot: AtomicU64,
    /// Objects, under `OBJECTS`.
    pub objects: std::cell::UnsafeCell<[Object; MAX_OBJECTS]>,
    pub nobjects: AtomicU32,
}

// SAFETY: `objects` is only touched under the `OBJECTS` lock.
unsafe impl Sync for Slot {}

static SLOTS: AtomicUsize = AtomicUsize::new(0);
static ARENA: AtomicUsize = AtomicUsize::new(0);
/// Slots handed out, lines dropped, slots not closed yet.
static USED: AtomicU32 = AtomicU32::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static OPEN: AtomicU32 = AtomicU32::new(0);
static ARENA_NEXT: AtomicU64 = AtomicU64::new(0);
/// Set when the results are being written: statistics and histories stop changing.
static STOP: AtomicBool = AtomicBool::new(false);
/// Guards every slot's objects.
pub static OBJECTS: SpinLock = SpinLock::new();

static WINDOW: AtomicU32 = AtomicU32::new(0);
/// A thread reads its CPU (`sched_getcpu`, through rseq or the vDSO: no system call) at its
/// first access to a hot line and then every this many accesses to hot lines; the accesses
/// between are attributed to the CPU last read (a migration shows up to 1023 accesses late).
const CPU_EVERY: u32 = 1024;

fn slots_len() -> usize {
    CAPACITY * std::mem::size_of::<Slot>()
}

fn arena_len() -> usize {
    ARENA_ENTRIES as usize * 4
}

pub fn init(window: u32) -> bool {
    WINDOW.store(window, Ordering::Relaxed);
    let (Some(s), Some(a)) = (
        sys::reserve(slots_len(), None),
        sys::reserve(arena_len(), None),
    ) else {
        return false;
    };
    SLOTS.store(s, Ordering::Release);
    ARENA.store(a, Ordering::Release);
    true
}

/// In a forked child: no hot lines yet.
pub fn renew_in_child() {
    let (s, a) = (SLOTS.load(Ordering::Relaxed), ARENA.load(Ordering::Relaxed));
    if s == 0 {
        return;
    }
    sys::reserve(slots_len(), Some(s));
    sys::reserve(arena_len(), Some(a));
    USED.store(0, Ordering::Relaxed);
    DROPPED.store(0, Ordering::Relaxed);
    OPEN.store(0, Ordering::Relaxed);
    ARENA_NEXT.store(0, Ordering::Relaxed);
    STOP.store(false, Ordering::Relaxed);
    OBJECTS.reset();
}

/// Slot `i` (0-based).
pub fn slot(i: usize) -> &'static Slot {
    // SAFETY: i < CAPACITY; the table is never unmapped (a forked child replaces it in place);
    // all-zero is a valid Slot.
    unsafe { &*((SLOTS.load(Ordering::Acquire) + i * std::mem::size_of::<Slot>()) as *const Slot) }
}

/// Slots handed out (each a hot line).
pub fn used() -> usize {
    (USED.load(Ordering::Acquire) as usize).min(CAPACITY)
}

pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Whether any hot line is open (the allocator hooks skip their checks otherwise).
#[inline]
pub fn any_open() -> bool {
    OPEN.load(Ordering::Acquire) != 0
}

/// History entry `i` of the arena.
pub fn history_word(i: u64) -> u32 {
    // SAFETY: i < ARENA_ENTRIES (callers stay inside windows handed out).
    unsafe {
        (*((ARENA.load(Ordering::Relaxed) as *const AtomicU32).add(i as usize)))
            .load(Ordering::Relaxed)
    }
}

/// Makes `line` (its address) hot. `before`: transfers counted on it so far. Called by exactly
/// one thread per line lifetime (the one whose transfer reached the threshold, or whose access
/// was the line's first in exhaustive mode). Returns the slot's number (1-based) or 0.
#[cold]
#[inline(never)]
pub fn promote(e: &shadow::Entry, line: usize, before: u64, local: &Local) -> u32 {
    if USED.load(Ordering::Relaxed) as usize >= CAPACITY {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    let i = USED.fetch_add(1, Ordering::AcqRel) as usize;
    if i >= CAPACITY {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    let _keep = sys::KeepErrno::new();
    let s = slot(i);
    s.line.store(line as u64, Ordering::Relaxed);
    s.hot_since.store(sys::now_ns(), Ordering::Relaxed);
    s.end.store(LIVE, Ordering::Relaxed);
    s.transfers_before_hot.store(before, Ordering::Relaxed);
    let window = WINDOW.load(Ordering::Relaxed);
    if window > 0 {
        let first = ARENA_NEXT.fetch_add(u64::from(window), Ordering::Relaxed);
        if first + u64::from(window) <= ARENA_ENTRIES {
            s.first.store(first, Ordering::Relaxed);
            s.window.store(window, Ordering::Relaxed);
        }
    }
    OPEN.fetch_add(1, Ordering::SeqCst);
    let id = i as u32 + 1;
    // Published before the heap blocks are looked up: a block allocated meanwhile is either
    // found by the lookup or sees the line hot and adds itself (both sides are SeqCst).
    e.hot.store(id, Ordering::SeqCst);
    if before > 0 {
        // Transfers that raced with the promotion still count before the line was hot.
        let seen = u64::from(e.transfers.load(Ordering::Relaxed));
        s.transfers_before_hot
            .store(seen.max(before), Ordering::Relaxed);
    }
    if local.in_alloc.get() == 0 {
        for b in crate::live::overlapping(line, shadow::line_size()) {
            add_object(id, &b);
        }
    }
    id
}

/// Adds heap block `b` to hot slot `id`'s objects (once).
pub fn add_object(id: u32, b: &Block) {
    let s = slot(id as usize - 1);
    OBJECTS.with(|| {
        // SAFETY: under OBJECTS.
        let objects = unsafe { &mut *s.objects.get() };
        let n = s.nobjects.load(Ordering::Relaxed) as usize;
        if n == MAX_OBJECTS || objects[..n].iter().any(|o| o.block == *b) {
            return;
        }
        objects[n] = Object {
            block: *b,
            freed_ns: 0,
        };
        s.nobjects.store(n as u32 + 1, Ordering::Relaxed);
    });
}

/// Block `b` was freed at `now`: in hot slot `id`, it is marked freed.
pub fn object_freed(id: u32, b: &Block, now: u64) {
    let s = slot(id as usize - 1);
    OBJECTS.with(|| {
        // SAFETY: under OBJECTS.
        let objects = unsafe { &mut *s.objects.get() };
        let n = s.nobjects.load(Ordering::Relaxed) as usize;
        for o in &mut objects[..n] {
            if o.block == *b && o.freed_ns == 0 {
                o.freed_ns = now;
            }
        }
    });
}

/// The objects of slot `i` (0-based), in order of allocation.
pub fn objects(i: usize) -> Vec<Object> {
    let s = slot(i);
    let mut v = OBJECTS.with(|| {
        // SAFETY: under OBJECTS.
        let objects = unsafe { &*s.objects.get() };
        objects[..s.nobjects.load(Ordering::Relaxed) as usize].to_vec()
    });
    v.sort_by_key(|o| (o.block.allocated_ns, o.block.address));
    v
}

/// The objects of slot `i` (0-based) copied into `into`, without allocating and without waiting
/// long for their lock (async-signal-safe, for `snapshot`): the lock may be held by the very
/// code a fatal signal interrupted. Returns how many; none when the lock stays taken.
pub fn objects_into(i: usize, into: &mut [Object; MAX_OBJECTS]) -> usize {
    let s = slot(i);
    if !OBJECTS.try_lock_for(100_000) {
        return 0;
    }
    // SAFETY: under OBJECTS.
    let objects = unsafe { &*s.objects.get() };
    let n = (s.nobjects.load(Ordering::Relaxed) as usize).min(MAX_OBJECTS);
    into[..n].copy_from_slice(&objects[..n]);
    OBJECTS.unlock();
    n
}

/// Ends hot slot `id` (its line's heap block was freed at `now`).
pub fn close(id: u32, now: u64) {
    let s = slot(id as usize - 1);
    if s.end.swap(FREED, Ordering::AcqRel) == LIVE {
        s.ended_ns.store(now, Ordering::Relaxed);
        OPEN.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Open slots whose line lies in [start, end) (for large ranges, instead of reading the
/// shadow of every line).
pub fn open_in(start: usize, end: usize) -> Vec<u32> {
    (0..used())
        .filter(|&i| {
            let s = slot(i);
            let l = s.line.load(Ordering::Relaxed) as usize;
            s.end.load(Ordering::Relaxed) == LIVE && l >= start && l < end
        })
        .map(|i| i as u32 + 1)
        .collect()
}

/// Whether hot line `id`'s accesses are sampled: its history window is full, or it has none.
#[inline]
pub fn sampled(id: u32) -> bool {
    let s = slot(id as usize - 1);
    s.next.load(Ordering::Relaxed) >= u64::from(s.window.load(Ordering::Relaxed))
}

/// Itemises one access to hot line `id` in the thread's statistics and the line's history,
/// counting for `weight` accesses (1, or the sampling period once the line is sampled).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn record(
    l: &Local,
    id: u32,
    offset: usize,
    size: usize,
    kind: Kind,
    pc: usize,
    transfer: bool,
    weight: u32,
) {
    // SAFETY: registered threads have a record.
    let rec = unsafe { &*l.rec };
    // busy = 1 then STOP read, against the writer's STOP = 1 then busy read: the writer never
    // reads a table this thread is changing. With membarrier(2) the writer's side carries the
    // full fence (it makes every thread execute one), so this side needs only a compiler
    // fence; without it, both sides use SeqCst. A busy flag already set is a signal handler
    // interrupting this very code: its access is not itemised.
    if rec.busy.load(Ordering::Relaxed) != 0 {
        return;
    }
    if MEMBARRIER.load(Ordering::Relaxed) {
        rec.busy.store(1, Ordering::Relaxed);
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        rec.busy.swap(1, Ordering::SeqCst);
    }
    if STOP.load(Ordering::Relaxed) || rec.shared.load(Ordering::Relaxed) {
        rec.busy.store(0, Ordering::Release);
        return;
    }
    if l.cpu_countdown.get() == 0 {
        let _keep = sys::KeepErrno::new();
        // SAFETY: no preconditions.
        let c = unsafe { libc::sched_getcpu() };
        l.cpu.set(if c >= 0 { c as u32 } else { u32::MAX });
        l.cpu_countdown.set(CPU_EVERY);
    }
    l.cpu_countdown.set(l.cpu_countdown.get() - 1);
    let cpu = (l.cpu.get() <= u32::from(u16::MAX)).then_some(l.cpu.get() as u16);
    // SAFETY: the owner, while busy (see above).
    let table = unsafe { &mut *rec.stats.get() };
    table.add(
        stats::Key {
            pc: pc as u64,
            slot: id,
            offset: offset as u8,
            size: size as u8,
            kind: kind as u8,
        },
        transfer,
        cpu,
        weight,
    );
    let s = slot(id as usize - 1);
    let window = u64::from(s.window.load(Ordering::Relaxed));
    if window == 0 {
        threads::bump(&rec.history_dropped);
    } else if s.next.load(Ordering::Relaxed) < window {
        let n = s.next.fetch_add(1, Ordering::Relaxed);
        if n < window {
            let word = HistoryEntry {
                offset: offset as u8,
                size: size as u8,
                write: kind.is_write(),
                atomic: kind.is_atomic(),
                thread: l.index,
            }
            .encode();
            let at = s.first.load(Ordering::Relaxed) + n;
            // SAFETY: at < first + window <= ARENA_ENTRIES.
            unsafe {
                (*((ARENA.load(Ordering::Relaxed) as *const AtomicU32).add(at as usize)))
                    .store(word, Ordering::Relaxed)
            };
        }
    }
    rec.busy.store(0, Ordering::Release);
}

/// Whether membarrier(2) carries the stop protocol's fence (registered at start).
static MEMBARRIER: AtomicBool = AtomicBool::new(false);
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// Registers for expedited membarrier (at start, and again in a forked child: a new process).
pub fn register_membarrier() {
    let _keep = sys::KeepErrno::new();
    // SAFETY: a plain system call.
    let ok = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
        )
    } == 0;
    MEMBARRIER.store(ok, Ordering::Relaxed);
}

/// Lets statistics and histories change again after a snapshot (the process may go on: an
/// `exec` failed, a signal was handled).
pub fn resume() {
    STOP.store(false, Ordering::SeqCst);
}

/// Stops statistics and histories changing and waits (up to about a second) for threads in the
/// middle of an update, except the caller.
pub fn stop(me: Option<u16>) {
    STOP.store(true, Ordering::SeqCst);
    if MEMBARRIER.load(Ordering::Relaxed) {
        // Every running thread executes a full fence: one that set `busy` before it is seen
        // below, one that sets it after reads STOP.
        // SAFETY: a plain system call.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) };
        if r != 0 {
            // Cannot happen after a successful registration; give threads time to finish.
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    for i in 0..threads::count() {
        if Some(i) == me {
            continue;
        }
        let rec = threads::record(i);
        let mut tries = 0;
        while rec.busy.load(Ordering::SeqCst) != 0 && tries < 100_000 {
            tries += 1;
            // SAFETY: no preconditions.
            unsafe { libc::sched_yield() };
        }
    }
}
