//! Per-thread storage the hooks reach in one instruction.
//!
//! Rust's `thread_local!` in a shared library uses the general-dynamic model: every access
//! calls `__tls_get_addr`. The runtime is linked into the program (a `DT_NEEDED` entry), so it
//! is loaded at start-up into the static TLS block and can use the initial-exec model: the
//! block's offset from the thread pointer is in the GOT, and an access is `mov` + `add fs:0`
//! (as crates/probe/src/tls.rs does). Zero-filled blocks only: all-zero is the initial state.

/// Declares `pub fn $name() -> *mut $ty`: this thread's zero-initialised `$ty`.
macro_rules! zeroed_thread_local {
    ($name:ident, $ty:ty, $sym:literal, $size:literal) => {
        #[cfg(target_arch = "x86_64")]
        core::arch::global_asm!(
            // Hidden global: other codegen units reference it; the library does not export it.
            concat!(".globl ", $sym),
            concat!(".hidden ", $sym),
            concat!(".type ", $sym, ", @object"),
            concat!(".size ", $sym, ", ", $size),
            ".section .tbss,\"awT\",@nobits",
            ".p2align 6",
            concat!($sym, ":"),
            concat!(".zero ", $size),
            ".text",
        );

        const _: () = assert!(std::mem::size_of::<$ty>() <= $size);

        #[cfg(target_arch = "x86_64")]
        #[inline(always)]
        pub fn $name() -> *mut $ty {
            let p: *mut $ty;
            // SAFETY: the thread pointer plus the block's offset from the GOT is this thread's
            // block, zero-filled by the loader at thread creation.
            unsafe {
                core::arch::asm!(
                    concat!("mov {p}, qword ptr [rip + ", $sym, "@GOTTPOFF]"),
                    "add {p}, qword ptr fs:0",
                    p = out(reg) p,
                    options(nostack, pure, readonly, preserves_flags),
                );
            }
            p
        }

        #[cfg(not(target_arch = "x86_64"))]
        #[inline(always)]
        pub fn $name() -> *mut $ty {
            thread_local! {
                static BLOCK: std::cell::UnsafeCell<[u64; $size / 8]> =
                    const { std::cell::UnsafeCell::new([0; $size / 8]) };
            }
            BLOCK.with(|b| b.get().cast())
        }
    };
}

pub(crate) use zeroed_thread_local;
