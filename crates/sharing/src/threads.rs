//! Threads: each gets an index (0 for the process's first thread, then in order of creation
//! through `pthread_create` or, for threads the runtime did not see created, of their first
//! hook call), a record the exit writer reads (counts, statistics table, what `ThreadInfo`
//! says), and a thread-local block the hooks reach in one instruction.
//!
//! Records live in one reservation indexed by thread index and are never freed while the
//! process runs, so a thread's statistics survive it. Index [`model::MAX_INDEX`] is shared by
//! every thread beyond it (their statistics are not itemised: a table has one owner).

use crate::model;
use crate::stats::Table;
use crate::sys;
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// This thread's block (all-zero until the thread is registered).
#[repr(C)]
pub struct Local {
    /// The thread's record; null: not registered yet.
    pub rec: *const Record,
    /// The model's holder bit and state-after-write for this thread.
    pub bit: u64,
    pub write_state: u64,
    pub index: u16,
    /// Inside the runtime's allocation bookkeeping (holding its locks): a signal handler's
    /// access must not look heap blocks up.
    pub in_alloc: Cell<u8>,
    /// Hot-line accesses until the CPU is read again, and the CPU last read.
    pub cpu_countdown: Cell<u32>,
    pub cpu: Cell<u32>,
    /// Accesses to sampled hot lines (window full) to skip before the next one is modelled.
    pub sample_countdown: Cell<u32>,
}

tlsblock::zeroed_thread_local!(local, Local, "contend_sharing_tls", 64);

/// What the exit writer needs of a thread. Written by its own thread only (counts with
/// relaxed load + store: no locked instructions), except the statistics table's guard.
#[repr(C, align(128))]
pub struct Record {
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub atomics: AtomicU64,
    pub transfers: AtomicU64,
    /// Accesses to hot lines with no history window (the budget was spent).
    pub history_dropped: AtomicU64,
    pub allocations: AtomicU64,
    pub frees: AtomicU64,
    /// 1 while the thread updates its statistics or a history: the exit writer waits for 0.
    pub busy: AtomicU32,
    /// Shared by several threads (the last index): statistics are not itemised.
    pub shared: AtomicBool,
    pub registered: AtomicBool,
    pub tid: AtomicU32,
    pub created_by: AtomicU32,
    pub start_routine: AtomicU64,
    pub first_ns: AtomicU64,
    /// The thread's statistics of hot-line accesses; only its thread touches it while busy.
    pub stats: UnsafeCell<Table>,
}

// SAFETY: `stats` is only used by the owning thread while `busy` is set and by the exit writer
// after every thread's `busy` was seen clear with the stop flag set (see `hot::record`).
unsafe impl Sync for Record {}

/// Threads the records reservation holds.
pub const MAX_THREADS: usize = model::MAX_INDEX as usize + 1;
const NO_CREATOR: u32 = u32::MAX;

static RECORDS: AtomicUsize = AtomicUsize::new(0);
/// The next index to hand out.
static NEXT: AtomicU32 = AtomicU32::new(0);

fn records_len() -> usize {
    MAX_THREADS * std::mem::size_of::<Record>()
}

/// Reserves the records and registers the calling (first) thread as 0.
pub fn init() -> bool {
    let Some(base) = sys::reserve(records_len(), None) else {
        return false;
    };
    RECORDS.store(base, Ordering::Release);
    NEXT.store(0, Ordering::Relaxed);
    register(None, None, None);
    true
}

/// The record of `index` (zero-filled until registered).
pub fn record(index: u16) -> &'static Record {
    let base = RECORDS.load(Ordering::Acquire);
    // SAFETY: index < MAX_THREADS; the reservation is never unmapped while the process runs
    // (a forked child replaces it in place); all-zero is a valid Record.
    unsafe { &*((base + usize::from(index) * std::mem::size_of::<Record>()) as *const Record) }
}

/// Indices handed out so far (some may never have registered: a failed `pthread_create`).
pub fn count() -> u16 {
    NEXT.load(Ordering::Acquire).min(MAX_THREADS as u32) as u16
}

/// Takes the next index (for a thread about to be created).
pub fn reserve_index() -> u16 {
    let i = NEXT.fetch_add(1, Ordering::AcqRel);
    i.min(u32::from(model::MAX_INDEX)) as u16
}

/// Registers the calling thread with `index` (or the next one), its creator and start routine.
pub fn register(index: Option<u16>, creator: Option<u16>, start: Option<u64>) -> &'static Local {
    let index = index.unwrap_or_else(reserve_index);
    let rec = record(index);
    if rec.registered.swap(true, Ordering::AcqRel) {
        // The shared last index: the first thread's details stay.
        rec.shared.store(true, Ordering::Relaxed);
    } else {
        rec.tid.store(sys::gettid(), Ordering::Relaxed);
        rec.created_by
            .store(creator.map_or(NO_CREATOR, u32::from), Ordering::Relaxed);
        rec.start_routine
            .store(start.unwrap_or(0), Ordering::Relaxed);
        rec.first_ns.store(sys::now_ns(), Ordering::Relaxed);
    }
    // SAFETY: this thread's own block.
    let l = unsafe { &mut *local() };
    l.index = index;
    l.bit = model::holder_bit(index);
    l.write_state = model::write_state(index);
    l.cpu_countdown.set(0);
    l.sample_countdown.set(0);
    l.rec = rec;
    l
}

/// The calling thread's block, registering it on its first call.
#[inline(always)]
pub fn current() -> &'static Local {
    // SAFETY: this thread's own block; fields are only written by this thread.
    let l = unsafe { &*local() };
    if l.rec.is_null() {
        return register_late();
    }
    l
}

#[cold]
#[inline(never)]
fn register_late() -> &'static Local {
    register(None, None, None)
}

/// What `ThreadInfo` says of a registered index: (tid, created_by, start_routine, first_ns).
pub fn info(index: u16) -> Option<(u32, Option<u16>, Option<u64>, u64)> {
    let r = record(index);
    if !r.registered.load(Ordering::Acquire) {
        return None;
    }
    let c = r.created_by.load(Ordering::Relaxed);
    let s = r.start_routine.load(Ordering::Relaxed);
    Some((
        r.tid.load(Ordering::Relaxed),
        (c != NO_CREATOR).then_some(c as u16),
        (s != 0).then_some(s),
        r.first_ns.load(Ordering::Relaxed),
    ))
}

/// In a forked child: only the forking thread exists; it becomes index 0 in fresh records.
pub fn renew_in_child() {
    let base = RECORDS.load(Ordering::Acquire);
    if base == 0 {
        return;
    }
    for i in 0..count() {
        // SAFETY: the parent's other threads do not exist here, and this thread is in the
        // fork handler, not in a statistics update.
        unsafe { (*record(i).stats.get()).release() };
    }
    if sys::reserve(records_len(), Some(base)).is_none() {
        return;
    }
    NEXT.store(0, Ordering::Relaxed);
    register(None, None, None);
}

/// Increments a count only its thread changes (no locked instruction).
#[inline(always)]
pub fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

/// `bump` by `n`.
#[inline(always)]
pub fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

// ---- pthread_create ----

/// What a new thread needs to start: the program's routine and argument, its index, its
/// creator.
struct Start {
    routine: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
    index: u16,
    creator: u16,
}

extern "C" fn thread_entry(p: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: `p` is the Box leaked by `create` below, handed to exactly this thread.
    let start = unsafe { Box::from_raw(p.cast::<Start>()) };
    let Start {
        routine,
        arg,
        index,
        creator,
    } = *start;
    register(Some(index), Some(creator), Some(routine as usize as u64));
    // No value with a destructor is live across this call: a forced unwind (pthread_exit,
    // cancellation) passes through this frame.
    routine(arg)
}

pub type CreateFn = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    *mut libc::c_void,
) -> libc::c_int;

/// `pthread_create`: the new thread gets the next index now (so indices follow creation order)
/// and registers before running the program's routine.
///
/// # Safety
/// The program's arguments to `pthread_create`; `real` is the real function.
pub unsafe fn create(
    real: CreateFn,
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
) -> libc::c_int {
    if !crate::active() {
        // SAFETY: the program's own arguments.
        return unsafe { real(thread, attr, routine, arg) };
    }
    let creator = current().index;
    let start = Box::into_raw(Box::new(Start {
        routine,
        arg,
        index: reserve_index(),
        creator,
    }));
    // SAFETY: as above, with our entry point, which frees `start`.
    let r = unsafe { real(thread, attr, thread_entry, start.cast()) };
    if r != 0 {
        // SAFETY: the thread was not created, so nothing else owns `start`.
        drop(unsafe { Box::from_raw(start) });
    }
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn records_do_not_share_lines() {
        let size = std::mem::size_of::<super::Record>();
        assert_eq!(size % 128, 0, "{size}");
    }
}
