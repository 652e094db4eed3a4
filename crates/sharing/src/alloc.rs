//! The heap: the C allocation functions and, on x86-64, C++ `operator new`/`new[]` are
//! interposed, so each live block is known with its size, allocation site (the return address
//! of the program's call), allocator, thread and time (see `live`). A hot line names the blocks
//! over it. On `free` (and a `realloc` that moves), the lines entirely inside the block start
//! over: shadow state cleared, hot slot closed with end = freed (the next object there is a new
//! line lifetime); lines the block only partly covers stay, and their hot slots mark the block
//! freed.
//!
//! The real functions come from `dlsym(RTLD_NEXT)`; while `dlsym` runs (it may allocate), the
//! hooks use glibc's `__libc_*`. The runtime's own allocations go to `__libc_*` directly (the
//! global allocator in lib.rs), never through these hooks.

use crate::live::{self, Block};
use crate::real::Real;
use crate::threads;
use crate::trampoline::entry;
use crate::{hot, shadow, sys};
use libc::{c_int, c_void};
use std::sync::atomic::Ordering;

type Ptr = *mut c_void;

unsafe extern "C" {
    fn __libc_malloc(n: usize) -> Ptr;
    fn __libc_calloc(n: usize, size: usize) -> Ptr;
    fn __libc_realloc(p: Ptr, n: usize) -> Ptr;
    fn __libc_memalign(align: usize, n: usize) -> Ptr;
    fn __libc_valloc(n: usize) -> Ptr;
    fn __libc_pvalloc(n: usize) -> Ptr;
    fn __libc_free(p: Ptr);
}

static MALLOC: Real = Real::new(c"malloc");
static CALLOC: Real = Real::new(c"calloc");
static REALLOC: Real = Real::new(c"realloc");
static FREE: Real = Real::new(c"free");
static POSIX_MEMALIGN: Real = Real::new(c"posix_memalign");
static ALIGNED_ALLOC: Real = Real::new(c"aligned_alloc");
static MEMALIGN: Real = Real::new(c"memalign");
static VALLOC: Real = Real::new(c"valloc");
static PVALLOC: Real = Real::new(c"pvalloc");
#[cfg(target_arch = "x86_64")]
static NEW: Real = Real::new(c"_Znwm");
#[cfg(target_arch = "x86_64")]
static NEW_ARRAY: Real = Real::new(c"_Znam");

const MALLOC_: u8 = 0;
const CALLOC_: u8 = 1;
const REALLOC_: u8 = 2;
const POSIX_MEMALIGN_: u8 = 3;
const ALIGNED_ALLOC_: u8 = 4;
const MEMALIGN_: u8 = 5;
const VALLOC_: u8 = 6;
const PVALLOC_: u8 = 7;
#[cfg(target_arch = "x86_64")]
const NEW_: u8 = 8;
#[cfg(target_arch = "x86_64")]
const NEW_ARRAY_: u8 = 9;

pub fn resolve() {
    for r in [
        &MALLOC,
        &CALLOC,
        &REALLOC,
        &FREE,
        &POSIX_MEMALIGN,
        &ALIGNED_ALLOC,
        &MEMALIGN,
        &VALLOC,
        &PVALLOC,
    ] {
        r.get();
    }
}

macro_rules! call {
    ($real:expr, $fallback:expr, fn($($t:ty),*) -> $ret:ty, $($arg:expr),*) => {{
        let p = $real.get();
        if p == 0 {
            // SAFETY: glibc's own function of the same contract.
            unsafe { $fallback($($arg),*) }
        } else {
            // SAFETY: the real function of this signature, with the program's arguments.
            unsafe { std::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $ret>(p)($($arg),*) }
        }
    }};
}

/// Marks the thread as inside an allocator hook for its whole duration (the real function
/// included): an instrumented signal handler interrupting it must not make the runtime look
/// heap blocks up (their locks may be held, glibc's malloc may be mid-update).
struct InAlloc(Option<&'static threads::Local>);

impl InAlloc {
    #[inline]
    fn enter() -> InAlloc {
        if !crate::active() {
            return InAlloc(None);
        }
        let l = threads::current();
        if l.in_alloc.get() != 0 {
            return InAlloc(None);
        }
        l.in_alloc.set(1);
        InAlloc(Some(l))
    }
}

impl Drop for InAlloc {
    #[inline]
    fn drop(&mut self) {
        if let Some(l) = self.0 {
            l.in_alloc.set(0);
        }
    }
}

/// Records block [p, p+size) allocated at `site`.
#[inline]
fn allocated(p: Ptr, size: usize, site: usize, allocator: u8) {
    if p.is_null() || !crate::active() {
        return;
    }
    let _keep = sys::KeepErrno::new();
    let l = threads::current();
    // SAFETY: registered threads have a record.
    threads::bump(unsafe { &(*l.rec).allocations });
    let b = Block {
        address: p as u64,
        size: size as u64,
        site: site as u64,
        allocated_ns: sys::now_ns(),
        thread: l.index,
        allocator,
    };
    live::insert(b);
    // After the insert (SeqCst by its lock) and against `hot::promote`'s publication: a line
    // made hot meanwhile is seen here or sees the block.
    std::sync::atomic::fence(Ordering::SeqCst);
    if hot::any_open() {
        for_each_hot(b.address as usize, size, |id, _| hot::add_object(id, &b));
    }
}

/// Calls `f(slot, line)` for each hot line overlapping [start, start+len): by reading the
/// shadow of each line for small ranges, else by scanning the open hot slots.
fn for_each_hot(start: usize, len: usize, mut f: impl FnMut(u32, usize)) {
    let shift = shadow::shift();
    let (first, last) = (start >> shift, (start + len.max(1) - 1) >> shift);
    if last - first < 64 {
        for line in first..=last {
            if let Some(e) = shadow::entry(line << shift) {
                let id = e.hot.load(Ordering::Acquire) & !shadow::SAMPLED;
                if id != 0 {
                    f(id, line << shift);
                }
            }
        }
    } else {
        for id in hot::open_in(first << shift, (last + 1) << shift) {
            f(
                id,
                hot::slot(id as usize - 1).line.load(Ordering::Relaxed) as usize,
            );
        }
    }
}

/// Forgets block `p` before the real free: lines entirely inside it start over.
#[inline]
fn freeing(p: Ptr) {
    if p.is_null() || !crate::active() {
        return;
    }
    let _keep = sys::KeepErrno::new();
    let l = threads::current();
    // SAFETY: registered threads have a record.
    threads::bump(unsafe { &(*l.rec).frees });
    if let Some(b) = live::remove(p as u64) {
        forget(&b, true);
    }
}

/// Block `b` ends: its hot lines mark it freed; with `clear`, the lines entirely inside it
/// start over (shadow cleared, hot slots closed).
fn forget(b: &Block, clear: bool) {
    let shift = shadow::shift();
    let line = 1usize << shift;
    let (start, end) = (b.address as usize, (b.address + b.size) as usize);
    // Lines entirely inside: [inner_first, inner_end) in line numbers.
    let inner_first = start.next_multiple_of(line) >> shift;
    let inner_end = end >> shift;
    let now = sys::now_ns();
    if hot::any_open() {
        for_each_hot(start, b.size as usize, |id, l| {
            let n = l >> shift;
            hot::object_freed(id, b, now);
            if clear && n >= inner_first && n < inner_end {
                hot::close(id, now);
                if let Some(e) = shadow::entry(l) {
                    e.hot.store(0, Ordering::Release);
                }
            }
        });
    }
    if clear && inner_end > inner_first {
        shadow::clear_lines(inner_first, inner_end - inner_first);
    }
}

extern "C" fn malloc_work(n: usize, site: usize) -> Ptr {
    // The signal-safe writer never allocates; glibc functions it might call would, here.
    #[cfg(debug_assertions)]
    crate::snapshot::no_allocation_here();
    let _in = InAlloc::enter();
    let p = call!(MALLOC, __libc_malloc, fn(usize) -> Ptr, n);
    allocated(p, n, site, MALLOC_);
    p
}

extern "C" fn calloc_work(n: usize, size: usize, site: usize) -> Ptr {
    // The signal-safe writer never allocates; glibc functions it might call would, here.
    #[cfg(debug_assertions)]
    crate::snapshot::no_allocation_here();
    let _in = InAlloc::enter();
    let p = call!(CALLOC, __libc_calloc, fn(usize, usize) -> Ptr, n, size);
    allocated(p, n.saturating_mul(size), site, CALLOC_);
    p
}

extern "C" fn realloc_work(old: Ptr, n: usize, site: usize) -> Ptr {
    // The signal-safe writer never allocates; glibc functions it might call would, here.
    #[cfg(debug_assertions)]
    crate::snapshot::no_allocation_here();
    let _in = InAlloc::enter();
    if old.is_null() || !crate::active() {
        let p = call!(REALLOC, __libc_realloc, fn(Ptr, usize) -> Ptr, old, n);
        allocated(p, n, site, REALLOC_);
        return p;
    }
    // The old block leaves the map before the real call: once realloc returns, its memory may
    // already be another thread's new block, whose entry must not be the one removed. It goes
    // back if realloc fails. (Its lines are forgotten after the call: only then is it known
    // whether it moved; a block reusing the memory at once may see its first accesses
    // forgotten too.)
    let known = live::remove(old as u64);
    let p = call!(REALLOC, __libc_realloc, fn(Ptr, usize) -> Ptr, old, n);
    if let Some(b) = known {
        let _keep = sys::KeepErrno::new();
        if p.is_null() && n != 0 {
            live::insert(b);
        } else {
            // Moved (or freed by a zero size): its lines start over. Resized in place: the
            // same memory, so only its hot lines learn that the old extent ended.
            forget(&b, p != old);
        }
    }
    allocated(p, n, site, REALLOC_);
    p
}

extern "C" fn free_work(p: Ptr, _site: usize) {
    let _in = InAlloc::enter();
    freeing(p);
    call!(FREE, __libc_free, fn(Ptr) -> (), p);
}

/// posix_memalign while dlsym runs.
unsafe extern "C" fn libc_posix_memalign(out: *mut Ptr, align: usize, n: usize) -> c_int {
    // SAFETY: glibc's memalign; `out` is the program's pointer.
    unsafe {
        let p = __libc_memalign(align, n);
        if p.is_null() {
            return libc::ENOMEM;
        }
        *out = p;
    }
    0
}

extern "C" fn posix_memalign_work(out: *mut Ptr, align: usize, n: usize, site: usize) -> c_int {
    let _in = InAlloc::enter();
    let r = call!(
        POSIX_MEMALIGN,
        libc_posix_memalign,
        fn(*mut Ptr, usize, usize) -> c_int,
        out,
        align,
        n
    );
    if r == 0 {
        // SAFETY: on success the block's address was stored through `out`.
        allocated(unsafe { *out }, n, site, POSIX_MEMALIGN_);
    }
    r
}

extern "C" fn aligned_alloc_work(align: usize, n: usize, site: usize) -> Ptr {
    let _in = InAlloc::enter();
    let p = call!(
        ALIGNED_ALLOC,
        __libc_memalign,
        fn(usize, usize) -> Ptr,
        align,
        n
    );
    allocated(p, n, site, ALIGNED_ALLOC_);
    p
}

extern "C" fn memalign_work(align: usize, n: usize, site: usize) -> Ptr {
    let _in = InAlloc::enter();
    let p = call!(MEMALIGN, __libc_memalign, fn(usize, usize) -> Ptr, align, n);
    allocated(p, n, site, MEMALIGN_);
    p
}

extern "C" fn valloc_work(n: usize, site: usize) -> Ptr {
    let _in = InAlloc::enter();
    let p = call!(VALLOC, __libc_valloc, fn(usize) -> Ptr, n);
    allocated(p, n, site, VALLOC_);
    p
}

extern "C" fn pvalloc_work(n: usize, site: usize) -> Ptr {
    let _in = InAlloc::enter();
    let p = call!(PVALLOC, __libc_pvalloc, fn(usize) -> Ptr, n);
    allocated(p, n, site, PVALLOC_);
    p
}

entry!(malloc, malloc_work, "rsi", "x1");
entry!(calloc, calloc_work, "rdx", "x2");
entry!(realloc, realloc_work, "rdx", "x2");
entry!(free, free_work, "rsi", "x1");
entry!(posix_memalign, posix_memalign_work, "rcx", "x3");
entry!(aligned_alloc, aligned_alloc_work, "rdx", "x2");
entry!(memalign, memalign_work, "rdx", "x2");
entry!(valloc, valloc_work, "rsi", "x1");
entry!(pvalloc, pvalloc_work, "rsi", "x1");

/// `operator new(size_t)` and `operator new[](size_t)` on x86-64 (as crates/probe does): the
/// work allocates with the real `malloc` (as libstdc++'s operator new does, zero bytes counting
/// as one) and records with the program's call site; when that fails, the trampoline jumps to
/// the real operator new with the original argument and no frame of ours on the stack, so the
/// new-handler runs and `std::bad_alloc` propagates exactly as without the runtime.
#[cfg(target_arch = "x86_64")]
macro_rules! interpose_new {
    ($name:ident, $which:expr) => {
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        /// # Safety
        /// Called by the program as the C++ operator of this mangled name.
        pub unsafe extern "C" fn $name(n: usize) -> Ptr {
            core::arch::naked_asm!(
                "mov rsi, qword ptr [rsp]",
                "mov edx, {which}",
                "push rdi",
                "call {work}",
                "pop rdi",
                "test rax, rax",
                "jz 1f",
                "ret",
                "1:",
                "push rdi",
                "mov edi, {which}",
                "call {real_new}",
                "pop rdi",
                "jmp rax",
                work = sym new_work,
                real_new = sym real_new,
                which = const $which as usize,
            );
        }
    };
}

#[cfg(target_arch = "x86_64")]
interpose_new!(_Znwm, NEW_);
#[cfg(target_arch = "x86_64")]
interpose_new!(_Znam, NEW_ARRAY_);

#[cfg(target_arch = "x86_64")]
extern "C" fn new_work(n: usize, site: usize, which: usize) -> Ptr {
    let _in = InAlloc::enter();
    let p = call!(MALLOC, __libc_malloc, fn(usize) -> Ptr, n.max(1));
    allocated(p, n, site, which as u8);
    p
}

/// The real operator new (for the failure path).
#[cfg(target_arch = "x86_64")]
extern "C" fn real_new(which: usize) -> usize {
    if which == usize::from(NEW_ARRAY_) {
        NEW_ARRAY.require()
    } else {
        NEW.require()
    }
}
