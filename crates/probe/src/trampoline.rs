//! The exported entry points' trampolines: two instructions that pass the function's own
//! return address (the program's call site) as an extra argument to a Rust hook and jump to it,
//! so the hook returns straight to the program.

/// Defines an exported function whose trampoline puts the return address in the register of
/// the argument after its own arguments, and jumps to `$hook`.
macro_rules! interpose {
    ($name:ident ($($arg:ident: $ty:ty),*) -> $ret:ty, $hook:ident, $x86:literal, $arm:literal) => {
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        /// # Safety
        /// Called by the program as the C library function of the same name.
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(concat!("mov ", $x86, ", [rsp]"), "jmp {h}", h = sym $hook);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {h}", h = sym $hook);
        }
    };
}

pub(crate) use interpose;
