//! contend's cache-line sharing runtime (`libcontend_sharing.so`): linked by `contend cc` into
//! programs compiled with ThreadSanitizer instrumentation (`-fsanitize=thread` at compile time
//! only) in place of libtsan. Every instrumented load and store calls a hook here, which runs
//! the coherence model of its cache line (see `model`) and counts **transfers**: accesses by
//! one thread to a line whose current version another thread wrote, the software analogue of
//! a HITM. Lines whose transfers reach a threshold become **hot** and are tracked in detail:
//! per-access statistics (offset, size, kind, thread, code address, CPUs) and an access
//! history the analysis replays. Once a hot line's history window is full, each thread models
//! and itemises only 1 in `CONTEND_SHARING_SAMPLE` (16) of its accesses to it, scaled (the
//! shadow entry's `SAMPLED` bit lets the fast path skip the others). Heap blocks are tracked so a hot line is named by the object
//! it lies in; pthread locks count as atomic writes of their lock word.
//!
//! The program must behave exactly as without the runtime: atomic hooks perform the operation
//! with its exact result, copies copy, allocations and locks call the real functions, errno is
//! kept around everything the runtime does. With `CONTEND_SHARING_DIR` unset the runtime is
//! inactive: the hooks do only that. See `config` for the options, `output` for the files
//! written at exit, `ending` and `snapshot` for the same files written on a fatal signal, at
//! `_exit` and before `exec`, HOOKS.md for the hooks of each compiler.
//!
//! Limits (by design): threads whose indices are equal modulo 48 share a holder bit (a read
//! by one of a version another holds is not seen as a transfer); threads beyond index 65534
//! share that index and are not itemised; accesses by an instrumented signal handler that
//! interrupts the runtime's own statistics update are counted but not itemised; results are
//! written by `exit` (returning from `main`, or `exit` from any thread), and also by `_exit`,
//! before `exec`, and on a fatal signal while the program leaves that signal at its default
//! action (see `ending` for which and how), not on SIGKILL or a stack overflow; a program that
//! execs another built with `contend cc` has its results replaced by the new image's (same
//! pid); two threads calling `exit` at once may end the process while the
//! first writes (nothing half-written is left: files are renamed into place); memory given
//! back with `munmap` (other than through `free`) keeps its lines' state; the history of a
//! hot line is in the order its accesses took their entries, which can differ slightly from
//! the order their state updates took effect when threads access the line at the same moment.
//!
//! Modules, one job each: `hooks` (plain access hooks and no-ops), `atomics`, `mem` (copies),
//! `alloc` (allocator interposition) and `live` (the live heap blocks), `locks`, `threads`
//! (indices, records, `pthread_create`), `access` (the fast and slow paths), `model` (the state
//! word), `shadow` (one entry per line), `hot` (hot slots, histories), `stats` (per-thread
//! statistics), `output`, `ending` (signals, `_exit`, `exec`) and `snapshot` (the writer they
//! use, async-signal-safe), `config`, `real` (finding the real functions), `trampoline`,
//! `sync`, `sys`.

// The interposed symbols (malloc, memcpy, pthread_create, ...) would replace the test
// harness's own: unit tests build only the pure parts.
#![cfg_attr(test, allow(dead_code, unused_imports, unused_macros))]

mod trampoline;

mod access;
#[cfg(not(test))]
mod alloc;
#[cfg(not(test))]
mod atomics;
mod config;
#[cfg(not(test))]
mod ending;
#[cfg(not(test))]
mod hooks;
mod hot;
mod live;
#[cfg(not(test))]
mod locks;
#[cfg(not(test))]
mod mem;
pub mod model;
mod output;
mod real;
mod shadow;
mod snapshot;
mod stats;
mod sync;
mod sys;
mod threads;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

/// The runtime's own memory comes from glibc directly, never through the interposed malloc
/// (which would record it as the program's).
struct LibcAllocator;

unsafe extern "C" {
    fn __libc_malloc(n: usize) -> *mut libc::c_void;
    fn __libc_calloc(n: usize, size: usize) -> *mut libc::c_void;
    fn __libc_realloc(p: *mut libc::c_void, n: usize) -> *mut libc::c_void;
    fn __libc_memalign(align: usize, n: usize) -> *mut libc::c_void;
    fn __libc_free(p: *mut libc::c_void);
}

/// glibc's malloc alignment on 64-bit targets.
const MALLOC_ALIGN: usize = 16;

// SAFETY: glibc's allocator functions meet GlobalAlloc's contract for these alignments.
unsafe impl std::alloc::GlobalAlloc for LibcAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        #[cfg(debug_assertions)]
        snapshot::no_allocation_here();
        // SAFETY: plain allocations.
        unsafe {
            if layout.align() <= MALLOC_ALIGN {
                __libc_malloc(layout.size()).cast()
            } else {
                __libc_memalign(layout.align(), layout.size()).cast()
            }
        }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        #[cfg(debug_assertions)]
        snapshot::no_allocation_here();
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: a plain allocation.
            unsafe { __libc_calloc(1, layout.size()).cast() }
        } else {
            // SAFETY: fresh memory of layout.size() bytes.
            unsafe {
                let p = self.alloc(layout);
                if !p.is_null() {
                    std::ptr::write_bytes(p, 0, layout.size());
                }
                p
            }
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: p came from this allocator.
        unsafe { __libc_free(p.cast()) }
    }
    unsafe fn realloc(&self, p: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        #[cfg(debug_assertions)]
        snapshot::no_allocation_here();
        if layout.align() <= MALLOC_ALIGN {
            // SAFETY: p came from __libc_malloc/calloc.
            return unsafe { __libc_realloc(p.cast(), size).cast() };
        }
        // SAFETY: GlobalAlloc's default: allocate, copy the smaller size, free.
        unsafe {
            let new = self.alloc(std::alloc::Layout::from_size_align_unchecked(
                size,
                layout.align(),
            ));
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(p, new, layout.size().min(size));
                self.dealloc(p, layout);
            }
            new
        }
    }
}

#[global_allocator]
static ALLOCATOR: LibcAllocator = LibcAllocator;

/// Recording (the configuration was valid and the memory reserved).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static EXHAUSTIVE: AtomicBool = AtomicBool::new(false);
static SAMPLE_EVERY: AtomicU32 = AtomicU32::new(1);
static HOT_AFTER: AtomicU32 = AtomicU32::new(config::DEFAULT_HOT_AFTER);
/// 0 not started, 1 starting, 2 done.
static INIT: AtomicU8 = AtomicU8::new(0);
/// This process: pid, the parent's pid when it was forked (0: none), start time, program.
static PID: AtomicU32 = AtomicU32::new(0);
static PARENT_PID: AtomicU32 = AtomicU32::new(0);
static STARTED_NS: AtomicU64 = AtomicU64::new(0);
static PROGRAM: OnceLock<String> = OnceLock::new();

#[inline(always)]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// What the slow path needs of the configuration.
pub(crate) struct Settings {
    pub exhaustive: bool,
    pub hot_after: u32,
    pub sample_every: u32,
}

#[inline]
pub(crate) fn settings() -> Settings {
    Settings {
        exhaustive: EXHAUSTIVE.load(Ordering::Relaxed),
        hot_after: HOT_AFTER.load(Ordering::Relaxed),
        sample_every: SAMPLE_EVERY.load(Ordering::Relaxed),
    }
}

/// Starts the runtime (once): from the library's constructor or the first instrumented
/// module's `__tsan_init`, whichever comes first.
pub(crate) fn init() {
    if INIT
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    let _keep = sys::KeepErrno::new();
    resolve_real();
    if let Some(cfg) = config::load() {
        start(cfg);
    }
    INIT.store(2, Ordering::Release);
}

#[cfg(not(test))]
fn resolve_real() {
    mem::resolve();
    alloc::resolve();
    locks::resolve();
    ending::resolve();
    CREATE.get();
}

#[cfg(test)]
fn resolve_real() {}

fn start(cfg: &config::Config) {
    let started_ns = sys::now_ns();
    let shift = cfg.line_size.trailing_zeros();
    if !shadow::init(shift) || !hot::init(cfg.window) || !threads::init() {
        sys::say("cannot reserve the shadow memory; the program runs without sharing results");
        return;
    }
    EXHAUSTIVE.store(cfg.exhaustive, Ordering::Relaxed);
    HOT_AFTER.store(cfg.hot_after, Ordering::Relaxed);
    SAMPLE_EVERY.store(cfg.sample_every, Ordering::Relaxed);
    PROGRAM.get_or_init(|| {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    PID.store(sys::getpid(), Ordering::Relaxed);
    STARTED_NS.store(started_ns, Ordering::Relaxed);
    hot::register_membarrier();
    // SAFETY: plain functions as fork handlers.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_parent),
            Some(after_fork_child),
        )
    };
    #[cfg(not(test))]
    ending::install();
    ACTIVE.store(true, Ordering::Release);
}

extern "C" fn before_fork() {
    if active() {
        live::lock_all();
        hot::OBJECTS.lock();
    }
}

extern "C" fn after_fork_parent() {
    if active() {
        hot::OBJECTS.unlock();
        live::unlock_all();
    }
}

/// The child starts over: new pid, its parent's pid noted, the forking thread is index 0,
/// fresh shadow, no hot lines, no statistics. Live heap blocks stay (the child's heap is a
/// copy of the parent's; their thread indices are the parent's).
extern "C" fn after_fork_child() {
    if !active() {
        return;
    }
    let started_ns = sys::now_ns();
    hot::OBJECTS.reset();
    live::unlock_all();
    shadow::renew();
    hot::renew_in_child();
    threads::renew_in_child();
    output::renew_in_child();
    snapshot::renew_in_child();
    #[cfg(not(test))]
    ending::renew_in_child();
    hot::register_membarrier();
    PARENT_PID.store(PID.load(Ordering::Relaxed), Ordering::Relaxed);
    PID.store(sys::getpid(), Ordering::Relaxed);
    STARTED_NS.store(started_ns, Ordering::Relaxed);
}

/// Writes the results: at exit (from whichever thread calls `exit`).
fn finish() {
    if !active() {
        return;
    }
    let Some(cfg) = config::get() else {
        return;
    };
    let parent = PARENT_PID.load(Ordering::Relaxed);
    let process = output::Process {
        pid: PID.load(Ordering::Relaxed),
        parent_pid: (parent != 0).then_some(parent),
        program: PROGRAM.get().cloned().unwrap_or_default(),
        started_ns: STARTED_NS.load(Ordering::Relaxed),
    };
    let hot_after = if cfg.exhaustive { 0 } else { cfg.hot_after };
    snapshot::exit_writer_starts();
    output::write(&process, cfg, hot_after);
    snapshot::exit_writer_done();
}

// ---- pthread_create ----

#[cfg(not(test))]
static CREATE: real::Real = real::Real::new(c"pthread_create");

/// # Safety
/// Called by the program as `pthread_create`.
#[cfg(not(test))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
    arg: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the real function of this signature.
    let real: threads::CreateFn = unsafe { std::mem::transmute(CREATE.require()) };
    // SAFETY: the program's arguments.
    unsafe { threads::create(real, thread, attr, routine, arg) }
}

// ---- load and exit ----

#[cfg(not(test))]
extern "C" fn on_load() {
    init();
}

#[cfg(not(test))]
extern "C" fn on_exit() {
    finish();
}

// Run by the dynamic loader when the library is loaded and when the process exits (exit() from
// any thread runs the destructors after the program's own atexit handlers).
#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".fini_array")]
static ON_EXIT: extern "C" fn() = on_exit;
