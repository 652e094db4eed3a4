//! Heap allocations, recorded with `contend record --locks --alloc-sites` so that a lock on the
//! heap is named by the allocation it lives in (the analysis takes the latest allocation that
//! covers the lock's address before the lock's first event; frees are not needed for that,
//! since a block must be freed before its memory is handed out again).
//!
//! The C allocation functions and, on x86-64, C++'s `operator new` / `new[]` are interposed
//! (the `new` hooks allocate with the real `malloc` as libstdc++'s do, and hand the rare failure
//! to the real `operator new`, which runs the new-handler or throws). Without
//! `CONTEND_ALLOC_SITES=1` every hook only passes the call on. `free` is not interposed.
//!
//! The real functions come from `dlsym(RTLD_NEXT)`, so a replacement allocator loaded after the
//! probe keeps serving the program. `dlsym` may itself allocate: while it runs, the hooks call
//! glibc's `__libc_*` functions directly (the memory it gets there is glibc's, which is only an
//! issue with a replacement allocator that cannot free glibc's blocks).

use crate::thread::with_recording;
use crate::trampoline::interpose;
use crate::{clock, config};
use libc::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

type Ptr = *mut c_void;

unsafe extern "C" {
    fn __libc_malloc(n: usize) -> Ptr;
    fn __libc_calloc(n: usize, size: usize) -> Ptr;
    fn __libc_realloc(p: Ptr, n: usize) -> Ptr;
    fn __libc_memalign(align: usize, n: usize) -> Ptr;
}

#[derive(Clone, Copy)]
#[repr(usize)]
enum Real {
    Malloc,
    Calloc,
    Realloc,
    AlignedAlloc,
    Memalign,
    PosixMemalign,
    New,
    NewArray,
}

const NAMES: [&str; 8] = [
    "malloc\0",
    "calloc\0",
    "realloc\0",
    "aligned_alloc\0",
    "memalign\0",
    "posix_memalign\0",
    "_Znwm\0",
    "_Znam\0",
];

static SLOTS: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static RESOLVING: AtomicBool = AtomicBool::new(false);

/// The real function's address, or 0 while `dlsym` is running (the caller then uses glibc's).
#[inline]
fn real(f: Real) -> usize {
    let v = SLOTS[f as usize].load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    resolve(f)
}

#[cold]
fn resolve(f: Real) -> usize {
    if RESOLVING.swap(true, Ordering::Acquire) {
        return 0;
    }
    // SAFETY: a NUL-terminated constant name; RTLD_NEXT is valid in a shared object.
    let found =
        unsafe { libc::dlsym(libc::RTLD_NEXT, NAMES[f as usize].as_ptr().cast::<c_char>()) };
    RESOLVING.store(false, Ordering::Release);
    SLOTS[f as usize].store(found as usize, Ordering::Relaxed);
    found as usize
}

/// Resolves the C allocation functions now (from the library's constructor).
pub fn resolve_all() {
    for f in [
        Real::Malloc,
        Real::Calloc,
        Real::Realloc,
        Real::AlignedAlloc,
        Real::Memalign,
        Real::PosixMemalign,
    ] {
        real(f);
    }
}

fn aborting() -> ! {
    let msg = b"contend probe: cannot find the real allocation function; aborting\n";
    // SAFETY: writing a constant buffer to stderr.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort();
    }
}

#[inline]
fn record(p: Ptr, size: usize, site: usize) {
    if p.is_null() || !config::alloc_sites() {
        return;
    }
    let ts = clock::now();
    with_recording(|st| st.record_alloc(p as usize, size, site, ts));
}

interpose!(malloc(n: usize) -> Ptr, malloc_hook, "rsi", "x1");
interpose!(calloc(n: usize, size: usize) -> Ptr, calloc_hook, "rdx", "x2");
interpose!(realloc(p: Ptr, n: usize) -> Ptr, realloc_hook, "rdx", "x2");
interpose!(aligned_alloc(align: usize, n: usize) -> Ptr, aligned_alloc_hook, "rdx", "x2");
interpose!(memalign(align: usize, n: usize) -> Ptr, memalign_hook, "rdx", "x2");
interpose!(posix_memalign(out: *mut Ptr, align: usize, n: usize) -> c_int, posix_memalign_hook, "rcx", "x3");

// SAFETY (all hooks): the arguments go unchanged to the real function of the same signature;
// the probe only reads the returned address.

extern "C" fn malloc_hook(n: usize, site: usize) -> Ptr {
    let f = real(Real::Malloc);
    let p = if f == 0 {
        unsafe { __libc_malloc(n) }
    } else {
        let f: unsafe extern "C" fn(usize) -> Ptr = unsafe { std::mem::transmute(f) };
        unsafe { f(n) }
    };
    record(p, n, site);
    p
}

extern "C" fn calloc_hook(n: usize, size: usize, site: usize) -> Ptr {
    let f = real(Real::Calloc);
    let p = if f == 0 {
        unsafe { __libc_calloc(n, size) }
    } else {
        let f: unsafe extern "C" fn(usize, usize) -> Ptr = unsafe { std::mem::transmute(f) };
        unsafe { f(n, size) }
    };
    record(p, n.saturating_mul(size), site);
    p
}

extern "C" fn realloc_hook(old: Ptr, n: usize, site: usize) -> Ptr {
    let f = real(Real::Realloc);
    let p = if f == 0 {
        unsafe { __libc_realloc(old, n) }
    } else {
        let f: unsafe extern "C" fn(Ptr, usize) -> Ptr = unsafe { std::mem::transmute(f) };
        unsafe { f(old, n) }
    };
    record(p, n, site);
    p
}

extern "C" fn aligned_alloc_hook(align: usize, n: usize, site: usize) -> Ptr {
    let f = real(Real::AlignedAlloc);
    let p = if f == 0 {
        unsafe { __libc_memalign(align, n) }
    } else {
        let f: unsafe extern "C" fn(usize, usize) -> Ptr = unsafe { std::mem::transmute(f) };
        unsafe { f(align, n) }
    };
    record(p, n, site);
    p
}

extern "C" fn memalign_hook(align: usize, n: usize, site: usize) -> Ptr {
    let f = real(Real::Memalign);
    let p = if f == 0 {
        unsafe { __libc_memalign(align, n) }
    } else {
        let f: unsafe extern "C" fn(usize, usize) -> Ptr = unsafe { std::mem::transmute(f) };
        unsafe { f(align, n) }
    };
    record(p, n, site);
    p
}

extern "C" fn posix_memalign_hook(out: *mut Ptr, align: usize, n: usize, site: usize) -> c_int {
    let f = real(Real::PosixMemalign);
    if f == 0 {
        aborting();
    }
    let f: unsafe extern "C" fn(*mut Ptr, usize, usize) -> c_int =
        unsafe { std::mem::transmute(f) };
    let r = unsafe { f(out, align, n) };
    if r == 0 {
        // SAFETY: on success the real function stored the block's address through `out`.
        record(unsafe { *out }, n, site);
    }
    r
}

/// `operator new(size_t)` and `operator new[](size_t)` on x86-64: the hook allocates with the
/// real `malloc` (as libstdc++'s operator new does, zero bytes counting as one) and records;
/// when that fails (returns null), the trampoline jumps to the real operator new with the
/// original argument and no frame of ours on the stack, so the new-handler runs and
/// `std::bad_alloc` propagates exactly as without the probe.
macro_rules! interpose_new {
    ($name:ident, $variant:expr) => {
        #[cfg(target_arch = "x86_64")]
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        /// # Safety
        /// Called by the program as the C++ operator of this mangled name.
        pub unsafe extern "C" fn $name(n: usize) -> Ptr {
            core::arch::naked_asm!(
                "mov rsi, qword ptr [rsp]",
                "push rdi",
                "call {hook}",
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
                hook = sym new_hook,
                real_new = sym real_new,
                which = const $variant as usize,
            );
        }
    };
}

interpose_new!(_Znwm, Real::New);
interpose_new!(_Znam, Real::NewArray);

#[cfg(target_arch = "x86_64")]
extern "C" fn new_hook(n: usize, site: usize) -> Ptr {
    let p = malloc_hook_unrecorded(n.max(1));
    record(p, n, site);
    p
}

#[cfg(target_arch = "x86_64")]
fn malloc_hook_unrecorded(n: usize) -> Ptr {
    let f = real(Real::Malloc);
    if f == 0 {
        return unsafe { __libc_malloc(n) };
    }
    let f: unsafe extern "C" fn(usize) -> Ptr = unsafe { std::mem::transmute(f) };
    unsafe { f(n) }
}

/// The real operator new (`which`: 6 new, 7 new[]), for the failure path.
#[cfg(target_arch = "x86_64")]
extern "C" fn real_new(which: usize) -> usize {
    let f = if which == Real::NewArray as usize {
        Real::NewArray
    } else {
        Real::New
    };
    let v = real(f);
    if v == 0 {
        aborting();
    }
    v
}
