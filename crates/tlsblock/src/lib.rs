//! Per-thread storage hooks reach in one instruction, for contend's lock probe (preloaded) and
//! sharing runtime (linked in).
//!
//! Rust's `thread_local!` in a shared library uses the general-dynamic model: every access
//! calls `__tls_get_addr` (twice per lock+unlock pair was most of the probe's cost). A library
//! loaded at start-up (LD_PRELOAD, or a program's `DT_NEEDED`) is in the static TLS block, so it
//! can use the initial-exec model instead: the block's offset from the thread pointer is in the
//! GOT, and an access is `mov` + `add fs:0`. [`zeroed_thread_local!`] declares zero-filled TLS
//! blocks that way (x86-64; elsewhere `thread_local!`), for types whose all-zero value is their
//! initial state. Not for libraries that may be `dlopen`ed after start-up.

/// Declares `pub fn $name() -> *mut $ty`: this thread's zero-initialised `$ty`, in a block of
/// `$size` bytes named `$sym` (unique per library).
#[macro_export]
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
