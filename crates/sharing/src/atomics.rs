//! The atomic-operation hooks. Instrumentation replaces every atomic operation with one of
//! these calls, so each performs the operation itself (as sequentially consistent, which is at
//! least as strong as any order asked for) with the result the program expects: old values,
//! compare-exchange writing the observed value back through the expected-value pointer on
//! failure (`_strong`/`_weak`, `int` result) or returning it (`_val`). Then the model sees an
//! atomic read (loads) or an atomic write (anything else, a failed compare-exchange included:
//! the instruction takes the line exclusively either way).
//!
//! The memory-order arguments are not needed, so the trampolines put the code address in the
//! register of the first of them. 128-bit operations use `lock cmpxchg16b` on x86-64 (on other
//! targets they are serialised by one lock: atomic only against each other).

use crate::access::{access, Kind};
use crate::trampoline::entry;
use std::sync::atomic::Ordering::SeqCst;

macro_rules! width {
    ($m:ident, $t:ty, $at:ty, $n:literal,
     $load:ident, $store:ident, $exchange:ident, $add:ident, $sub:ident, $and:ident, $or:ident,
     $xor:ident, $nand:ident, $strong:ident, $weak:ident, $val:ident) => {
        mod $m {
            use super::*;

            #[inline(always)]
            fn cell(a: usize) -> &'static $at {
                // SAFETY: the instrumented program passes the address of an object it accesses
                // atomically (aligned, live for the call).
                unsafe { <$at>::from_ptr(a as *mut $t) }
            }

            pub extern "C" fn load(a: usize, pc: usize) -> $t {
                let v = cell(a).load(SeqCst);
                access(a, $n, Kind::AtomicRead, pc);
                v
            }

            pub extern "C" fn store(a: usize, v: $t, pc: usize) {
                cell(a).store(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
            }

            pub extern "C" fn exchange(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).swap(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            pub extern "C" fn fetch_add(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).fetch_add(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            pub extern "C" fn fetch_sub(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).fetch_sub(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            pub extern "C" fn fetch_and(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).fetch_and(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            pub extern "C" fn fetch_or(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).fetch_or(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            pub extern "C" fn fetch_xor(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).fetch_xor(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            pub extern "C" fn fetch_nand(a: usize, v: $t, pc: usize) -> $t {
                let old = cell(a).fetch_nand(v, SeqCst);
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            /// `_strong` and `_weak` (a strong compare-exchange is a valid weak one).
            pub extern "C" fn compare_exchange(
                a: usize,
                expected: *mut $t,
                v: $t,
                pc: usize,
            ) -> libc::c_int {
                // SAFETY: the program passes a valid pointer to its expected value.
                let e = unsafe { expected.read() };
                let r = match cell(a).compare_exchange(e, v, SeqCst, SeqCst) {
                    Ok(_) => 1,
                    Err(seen) => {
                        // SAFETY: as above.
                        unsafe { expected.write(seen) };
                        0
                    }
                };
                access(a, $n, Kind::AtomicWrite, pc);
                r
            }

            pub extern "C" fn compare_exchange_val(a: usize, e: $t, v: $t, pc: usize) -> $t {
                let old = match cell(a).compare_exchange(e, v, SeqCst, SeqCst) {
                    Ok(old) | Err(old) => old,
                };
                access(a, $n, Kind::AtomicWrite, pc);
                old
            }

            entry!($load, load, "rsi", "x1");
            entry!($store, store, "rdx", "x2");
            entry!($exchange, exchange, "rdx", "x2");
            entry!($add, fetch_add, "rdx", "x2");
            entry!($sub, fetch_sub, "rdx", "x2");
            entry!($and, fetch_and, "rdx", "x2");
            entry!($or, fetch_or, "rdx", "x2");
            entry!($xor, fetch_xor, "rdx", "x2");
            entry!($nand, fetch_nand, "rdx", "x2");
            entry!($strong, compare_exchange, "rcx", "x3");
            entry!($weak, compare_exchange, "rcx", "x3");
            entry!($val, compare_exchange_val, "rcx", "x3");
        }
    };
}

width!(
    w8,
    u8,
    std::sync::atomic::AtomicU8,
    1,
    __tsan_atomic8_load,
    __tsan_atomic8_store,
    __tsan_atomic8_exchange,
    __tsan_atomic8_fetch_add,
    __tsan_atomic8_fetch_sub,
    __tsan_atomic8_fetch_and,
    __tsan_atomic8_fetch_or,
    __tsan_atomic8_fetch_xor,
    __tsan_atomic8_fetch_nand,
    __tsan_atomic8_compare_exchange_strong,
    __tsan_atomic8_compare_exchange_weak,
    __tsan_atomic8_compare_exchange_val
);
width!(
    w16,
    u16,
    std::sync::atomic::AtomicU16,
    2,
    __tsan_atomic16_load,
    __tsan_atomic16_store,
    __tsan_atomic16_exchange,
    __tsan_atomic16_fetch_add,
    __tsan_atomic16_fetch_sub,
    __tsan_atomic16_fetch_and,
    __tsan_atomic16_fetch_or,
    __tsan_atomic16_fetch_xor,
    __tsan_atomic16_fetch_nand,
    __tsan_atomic16_compare_exchange_strong,
    __tsan_atomic16_compare_exchange_weak,
    __tsan_atomic16_compare_exchange_val
);
width!(
    w32,
    u32,
    std::sync::atomic::AtomicU32,
    4,
    __tsan_atomic32_load,
    __tsan_atomic32_store,
    __tsan_atomic32_exchange,
    __tsan_atomic32_fetch_add,
    __tsan_atomic32_fetch_sub,
    __tsan_atomic32_fetch_and,
    __tsan_atomic32_fetch_or,
    __tsan_atomic32_fetch_xor,
    __tsan_atomic32_fetch_nand,
    __tsan_atomic32_compare_exchange_strong,
    __tsan_atomic32_compare_exchange_weak,
    __tsan_atomic32_compare_exchange_val
);
width!(
    w64,
    u64,
    std::sync::atomic::AtomicU64,
    8,
    __tsan_atomic64_load,
    __tsan_atomic64_store,
    __tsan_atomic64_exchange,
    __tsan_atomic64_fetch_add,
    __tsan_atomic64_fetch_sub,
    __tsan_atomic64_fetch_and,
    __tsan_atomic64_fetch_or,
    __tsan_atomic64_fetch_xor,
    __tsan_atomic64_fetch_nand,
    __tsan_atomic64_compare_exchange_strong,
    __tsan_atomic64_compare_exchange_weak,
    __tsan_atomic64_compare_exchange_val
);

/// 128-bit operations: a compare-and-swap loop over `cas`.
mod w128 {
    use super::*;

    /// Compare-and-swap; returns the value seen (== `old` on success). `lock cmpxchg16b`
    /// written out (the intrinsic becomes a libatomic call when not inlined); rbx is LLVM's,
    /// so the new value's low half passes through another register.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn cas(a: usize, old: u128, new: u128) -> u128 {
        let (mut lo, mut hi) = (old as u64, (old >> 64) as u64);
        // SAFETY: the program's 16-byte aligned atomic object; rbx is restored.
        unsafe {
            core::arch::asm!(
                "xchg {new_lo}, rbx",
                "lock cmpxchg16b xmmword ptr [{a}]",
                "mov rbx, {new_lo}",
                a = in(reg) a,
                new_lo = inout(reg) new as u64 => _,
                in("rcx") (new >> 64) as u64,
                inout("rax") lo,
                inout("rdx") hi,
                options(nostack),
            );
        }
        (u128::from(hi) << 64) | u128::from(lo)
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn cas(a: usize, old: u128, new: u128) -> u128 {
        static LOCK: crate::sync::SpinLock = crate::sync::SpinLock::new();
        LOCK.with(|| {
            // SAFETY: the program's atomic object; writers through these hooks are serialised.
            unsafe {
                let p = a as *mut u128;
                let seen = p.read_volatile();
                if seen == old {
                    p.write_volatile(new);
                }
                seen
            }
        })
    }

    fn update(a: usize, f: impl Fn(u128) -> u128) -> u128 {
        let mut cur = cas(a, 0, 0);
        loop {
            let seen = cas(a, cur, f(cur));
            if seen == cur {
                return cur;
            }
            cur = seen;
        }
    }

    pub extern "C" fn load(a: usize, pc: usize) -> u128 {
        // A compare-and-swap of 0 with 0 reads atomically (writing back what is there).
        let v = cas(a, 0, 0);
        access(a, 16, Kind::AtomicRead, pc);
        v
    }

    pub extern "C" fn store(a: usize, v: u128, pc: usize) {
        update(a, |_| v);
        access(a, 16, Kind::AtomicWrite, pc);
    }

    macro_rules! rmw {
        ($($name:ident $f:expr;)*) => {$(
            pub extern "C" fn $name(a: usize, v: u128, pc: usize) -> u128 {
                let f: fn(u128, u128) -> u128 = $f;
                let old = update(a, |c| f(c, v));
                access(a, 16, Kind::AtomicWrite, pc);
                old
            }
        )*};
    }

    rmw! {
        exchange |_, v| v;
        fetch_add |c, v| c.wrapping_add(v);
        fetch_sub |c, v| c.wrapping_sub(v);
        fetch_and |c, v| c & v;
        fetch_or |c, v| c | v;
        fetch_xor |c, v| c ^ v;
        fetch_nand |c, v| !(c & v);
    }

    pub extern "C" fn compare_exchange(
        a: usize,
        expected: *mut u128,
        v: u128,
        pc: usize,
    ) -> libc::c_int {
        // SAFETY: the program passes a valid pointer to its expected value.
        let e = unsafe { expected.read() };
        let seen = cas(a, e, v);
        access(a, 16, Kind::AtomicWrite, pc);
        if seen == e {
            1
        } else {
            // SAFETY: as above.
            unsafe { expected.write(seen) };
            0
        }
    }

    pub extern "C" fn compare_exchange_val(a: usize, e: u128, v: u128, pc: usize) -> u128 {
        let seen = cas(a, e, v);
        access(a, 16, Kind::AtomicWrite, pc);
        seen
    }

    entry!(__tsan_atomic128_load, load, "rsi", "x1");
    entry!(__tsan_atomic128_store, store, "rcx", "x4");
    entry!(__tsan_atomic128_exchange, exchange, "rcx", "x4");
    entry!(__tsan_atomic128_fetch_add, fetch_add, "rcx", "x4");
    entry!(__tsan_atomic128_fetch_sub, fetch_sub, "rcx", "x4");
    entry!(__tsan_atomic128_fetch_and, fetch_and, "rcx", "x4");
    entry!(__tsan_atomic128_fetch_or, fetch_or, "rcx", "x4");
    entry!(__tsan_atomic128_fetch_xor, fetch_xor, "rcx", "x4");
    entry!(__tsan_atomic128_fetch_nand, fetch_nand, "rcx", "x4");
    entry!(
        __tsan_atomic128_compare_exchange_strong,
        compare_exchange,
        "r8",
        "x4"
    );
    entry!(
        __tsan_atomic128_compare_exchange_weak,
        compare_exchange,
        "r8",
        "x4"
    );
    entry!(
        __tsan_atomic128_compare_exchange_val,
        compare_exchange_val,
        "r9",
        "x6"
    );
}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_atomic_thread_fence(_order: libc::c_int) {
    std::sync::atomic::fence(SeqCst);
}

#[unsafe(no_mangle)]
pub extern "C" fn __tsan_atomic_signal_fence(_order: libc::c_int) {
    std::sync::atomic::compiler_fence(SeqCst);
}
