//! Copies and fills. gcc 12 and clang 14 leave `memcpy`/`memmove`/`memset` calls (including
//! the ones they make for struct copies) uninstrumented and rely on the runtime intercepting
//! them, as libtsan does; newer clang calls `__tsan_memcpy`/`__tsan_memmove`/`__tsan_memset`.
//! Both are defined here: the real function does the work, then the source bytes count as a
//! read and the destination bytes as a write, per line. Calls from this library's own code
//! (Rust's copies go through the same symbol) are only passed on. Fortified builds'
//! `__memcpy_chk` and friends check the destination size first, as glibc's do.

use crate::access::{range, Kind};
use crate::real::Real;
use crate::trampoline::entry;
use std::sync::atomic::{AtomicUsize, Ordering};

type Copy = unsafe extern "C" fn(usize, usize, usize) -> usize;
type Fill = unsafe extern "C" fn(usize, libc::c_int, usize) -> usize;

static MEMCPY: Real = Real::new(c"memcpy");
static MEMMOVE: Real = Real::new(c"memmove");
static MEMSET: Real = Real::new(c"memset");

/// This library's code, [start, end): its own calls are not the program's accesses.
static OWN_START: AtomicUsize = AtomicUsize::new(0);
static OWN_END: AtomicUsize = AtomicUsize::new(0);

pub fn resolve() {
    MEMCPY.get();
    MEMMOVE.get();
    MEMSET.get();
    own_code();
}

/// Finds the executable segment holding this library's code.
fn own_code() {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        let me = data as usize;
        // SAFETY: the loader passes a valid info with `dlpi_phnum` program headers.
        let info = unsafe { &*info };
        for i in 0..usize::from(info.dlpi_phnum) {
            // SAFETY: i < dlpi_phnum.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_X == 0 {
                continue;
            }
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            let end = start + ph.p_memsz as usize;
            if (start..end).contains(&me) {
                OWN_START.store(start, Ordering::Relaxed);
                OWN_END.store(end, Ordering::Relaxed);
                return 1;
            }
        }
        0
    }
    // SAFETY: a callback that only reads what the loader passes.
    unsafe { libc::dl_iterate_phdr(Some(each), own_code as *const () as *mut libc::c_void) };
}

#[inline(always)]
fn from_program(pc: usize) -> bool {
    crate::active()
        && !(OWN_START.load(Ordering::Relaxed)..OWN_END.load(Ordering::Relaxed)).contains(&pc)
}

// Fallbacks before the real functions are known (another library's constructor copying
// before this one's ran): string instructions, which the compiler cannot turn back into calls
// of the functions being defined.
fn copy_forward(dst: usize, src: usize, n: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's buffers of n bytes.
    unsafe {
        core::arch::asm!("rep movsb", inout("rdi") dst => _, inout("rsi") src => _,
            inout("rcx") n => _, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    for i in 0..n {
        // SAFETY: as above; volatile keeps it a loop.
        unsafe { ((dst + i) as *mut u8).write_volatile(((src + i) as *const u8).read_volatile()) };
    }
}

fn copy_backward(dst: usize, src: usize, n: usize) {
    for i in (0..n).rev() {
        // SAFETY: the caller's buffers of n bytes; volatile keeps it a loop.
        unsafe { ((dst + i) as *mut u8).write_volatile(((src + i) as *const u8).read_volatile()) };
    }
}

fn fill(dst: usize, c: libc::c_int, n: usize) {
    for i in 0..n {
        // SAFETY: the caller's buffer of n bytes; volatile keeps it a loop.
        unsafe { ((dst + i) as *mut u8).write_volatile(c as u8) };
    }
}

#[inline(always)]
fn real_copy(f: &Real, dst: usize, src: usize, n: usize, overlap: bool) -> usize {
    let p = f.get();
    if p != 0 {
        // SAFETY: the real function of this signature, with the program's arguments.
        return unsafe { std::mem::transmute::<usize, Copy>(p)(dst, src, n) };
    }
    if overlap && dst > src && dst < src + n {
        copy_backward(dst, src, n);
    } else {
        copy_forward(dst, src, n);
    }
    dst
}

#[inline(always)]
fn real_fill(dst: usize, c: libc::c_int, n: usize) -> usize {
    let p = MEMSET.get();
    if p != 0 {
        // SAFETY: the real memset, with the program's arguments.
        return unsafe { std::mem::transmute::<usize, Fill>(p)(dst, c, n) };
    }
    fill(dst, c, n);
    dst
}

extern "C" fn memcpy_work(dst: usize, src: usize, n: usize, pc: usize) -> usize {
    let r = real_copy(&MEMCPY, dst, src, n, false);
    if from_program(pc) {
        range(src, n, Kind::Read, pc);
        range(dst, n, Kind::Write, pc);
    }
    r
}

extern "C" fn memmove_work(dst: usize, src: usize, n: usize, pc: usize) -> usize {
    let r = real_copy(&MEMMOVE, dst, src, n, true);
    if from_program(pc) {
        range(src, n, Kind::Read, pc);
        range(dst, n, Kind::Write, pc);
    }
    r
}

extern "C" fn memset_work(dst: usize, c: libc::c_int, n: usize, pc: usize) -> usize {
    let r = real_fill(dst, c, n);
    if from_program(pc) {
        range(dst, n, Kind::Write, pc);
    }
    r
}

fn check(n: usize, room: usize) {
    if n > room {
        unsafe extern "C" {
            fn __chk_fail() -> !;
        }
        // SAFETY: glibc's report of a buffer overflow; it does not return.
        unsafe { __chk_fail() };
    }
}

extern "C" fn memcpy_chk_work(dst: usize, src: usize, n: usize, room: usize, pc: usize) -> usize {
    check(n, room);
    memcpy_work(dst, src, n, pc)
}

extern "C" fn memmove_chk_work(dst: usize, src: usize, n: usize, room: usize, pc: usize) -> usize {
    check(n, room);
    memmove_work(dst, src, n, pc)
}

extern "C" fn memset_chk_work(
    dst: usize,
    c: libc::c_int,
    n: usize,
    room: usize,
    pc: usize,
) -> usize {
    check(n, room);
    memset_work(dst, c, n, pc)
}

entry!(memcpy, memcpy_work, "rcx", "x3");
entry!(memmove, memmove_work, "rcx", "x3");
entry!(memset, memset_work, "rcx", "x3");
entry!(__tsan_memcpy, memcpy_work, "rcx", "x3");
entry!(__tsan_memmove, memmove_work, "rcx", "x3");
entry!(__tsan_memset, memset_work, "rcx", "x3");
entry!(__memcpy_chk, memcpy_chk_work, "r8", "x4");
entry!(__memmove_chk, memmove_chk_work, "r8", "x4");
entry!(__memset_chk, memset_chk_work, "r8", "x4");
