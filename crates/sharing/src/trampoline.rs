//! Exported entry points as two-instruction trampolines: the function's own return address
//! (the code address of the program's call: for a `__tsan_*` hook, the instrumented access)
//! goes into an argument register the real work takes as `pc`, and the trampoline jumps there,
//! so the work returns straight to the program. The register is named per entry point (the one
//! after its arguments, or one whose argument the runtime ignores: a memory order), for x86-64
//! and aarch64.

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the sharing runtime supports x86-64 and aarch64");

/// `entry!(symbol, work, "x86-64 register", "aarch64 register")`.
macro_rules! entry {
    ($name:ident, $work:path, $x86:literal, $arm:literal) => {
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        /// # Safety
        /// Called by instrumented code (or the program) with the C signature of this symbol.
        pub unsafe extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                concat!("mov ", $x86, ", qword ptr [rsp]"),
                "jmp {w}",
                w = sym $work
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {w}", w = sym $work);
        }
    };
}

/// `access_entry!(symbol, work, ...)`: like `entry!` for hooks with nothing to do while the
/// runtime is inactive (plain loads and stores): on x86-64 the trampoline itself returns then,
/// so empty hooks cost a call and a flag test. The work may assume the runtime is active
/// there (elsewhere it checks again).
macro_rules! access_entry {
    ($name:ident, $work:path, $x86:literal, $arm:literal) => {
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        /// # Safety
        /// Called by instrumented code with the C signature of this symbol.
        pub unsafe extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                "cmp byte ptr [rip + {active}], 0",
                "je 2f",
                concat!("mov ", $x86, ", qword ptr [rsp]"),
                "jmp {w}",
                "2:",
                "ret",
                active = sym crate::ACTIVE,
                w = sym $work
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {w}", w = sym $work);
        }
    };
}

/// Exported functions that do nothing (annotations and events the model does not need).
macro_rules! nothing {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(naked)]
            #[unsafe(no_mangle)]
            /// # Safety
            /// Any arguments; does nothing.
            pub unsafe extern "C" fn $name() {
                #[cfg(target_arch = "x86_64")]
                core::arch::naked_asm!("ret");
                #[cfg(target_arch = "aarch64")]
                core::arch::naked_asm!("ret");
            }
        )*
    };
}

pub(crate) use {access_entry, entry, nothing};
