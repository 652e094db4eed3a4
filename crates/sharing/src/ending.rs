//! Ends other than `exit`, where the results are written too (by `snapshot`): a fatal signal
//! (SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, and SIGTERM, SIGINT), `_exit`/`_Exit`, and
//! `exec*` (before the call; if it fails, the program goes on and the results are written
//! again when it ends).
//!
//! Signals: the runtime's handler is in place exactly while the program's disposition of the
//! signal is the default one. At start it is installed for each of those signals still at
//! SIG_DFL, and `sigaction` and `signal` are interposed:
//! - the program setting SIG_DFL keeps the runtime's handler in place (and remembers the
//!   program's mask and flags, which a later query returns);
//! - the program setting its own handler or SIG_IGN installs exactly that: its handler then runs
//!   as it would without the runtime (no emulation of flags, masks or alternate stacks), and a
//!   signal the program handles (a SIGSEGV a garbage collector provokes, a SIGTERM that ends
//!   with `exit`) never makes the runtime write. A handler that ends the process goes through
//!   `exit` or `_exit` (written there), or restores SIG_DFL and re-raises (the runtime's handler
//!   is back in place and writes);
//! - a query returns the program's own view: SIG_DFL while the runtime's handler is there.
//!
//! The handler writes, then restores the program's default disposition and raises the signal
//! again for its own thread: it is delivered as the handler returns, so the process ends as it
//! would have (the same signal, a core dump where it makes one, the same status for the
//! parent). This was chosen over chaining from one handler installed for good, which would
//! have to emulate every `sa_flags` behaviour and would write for signals the program handles.
//!
//! Not covered: `sigset`, `sysv_signal`, `bsd_signal` and raw `rt_sigaction` calls (rare; a
//! handler installed that way replaces the runtime's, as before); a program handler installed
//! with SA_RESETHAND that returns (the kernel resets the signal to its own SIG_DFL); a stack
//! overflow (no stack is left to run a handler on unless the program set an alternate one);
//! SIGKILL. glibc's own internal `sigaction` calls (abort's, system's) are not interposed and
//! need not be; nor are the `execve` and `_exit` that `posix_spawn`, `system` and `popen` make
//! in their `vfork`-like children (internal calls), which must not write.

use crate::real::Real;
use crate::snapshot::{self, Why};
use crate::sync::SpinLock;
use libc::{c_char, c_int};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The signals whose default action ends the process and after which the results are written.
const SIGNALS: [c_int; 7] = [
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGTERM,
    libc::SIGINT,
];

/// Signal numbers are below this.
const NSIG: usize = 65;

static REAL_SIGACTION: Real = Real::new(c"sigaction");
static REAL_SIGNAL: Real = Real::new(c"signal");

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

/// Per signal: whether the runtime's handler is in place, and the program's SIG_DFL action
/// (mask and flags as it gave them) meanwhile.
struct Dispositions {
    ours: [AtomicBool; NSIG],
    program: [UnsafeCell<libc::sigaction>; NSIG],
}

// SAFETY: `program` entries change only under LOCK (with signals blocked), and the handler
// reads the entry of the signal it runs for, which is stable while `ours` is set for it.
unsafe impl Sync for Dispositions {}

static DISPOSITIONS: Dispositions = Dispositions {
    ours: [const { AtomicBool::new(false) }; NSIG],
    // SAFETY: an all-zero sigaction is SIG_DFL with an empty mask and no flags.
    program: [const { UnsafeCell::new(unsafe { std::mem::zeroed() }) }; NSIG],
};

/// Serialises changes of the dispositions (taken with every signal blocked, so a handler on
/// the same thread never waits for it).
static LOCK: SpinLock = SpinLock::new();

fn managed(sig: c_int) -> bool {
    SIGNALS.contains(&sig)
}

/// Finds the real functions (from the constructor: dlsym is not async-signal-safe).
pub fn resolve() {
    for r in [&REAL_SIGACTION, &REAL_SIGNAL]
        .into_iter()
        .chain(&EXECS)
        .chain(&VARIADIC_EXECS)
    {
        r.get_or_libc();
    }
}

/// In a forked child: whoever held the lock in the parent does not exist here.
pub fn renew_in_child() {
    LOCK.reset();
}

fn real_sigaction() -> SigactionFn {
    // SAFETY: the real function of this signature.
    unsafe { std::mem::transmute::<usize, SigactionFn>(REAL_SIGACTION.require_or_libc()) }
}

/// The action that puts the runtime's handler in place of the program's `dfl` (its mask kept,
/// the other writing signals blocked while the handler writes).
fn ours(dfl: &libc::sigaction) -> libc::sigaction {
    let mut act = *dfl;
    act.sa_sigaction = on_fatal as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
    for s in SIGNALS {
        // SAFETY: a valid set and signal number.
        unsafe { libc::sigaddset(&mut act.sa_mask, s) };
    }
    act
}

/// Puts the runtime's handler in place for every writing signal still at SIG_DFL (at start).
pub fn install() {
    let real = real_sigaction();
    for sig in SIGNALS {
        // SAFETY: plain data; the real sigaction fills it.
        let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers.
        if unsafe { real(sig, std::ptr::null(), &mut now) } != 0
            || now.sa_sigaction != libc::SIG_DFL
        {
            continue;
        }
        let i = sig as usize;
        // SAFETY: at start, before the program's code runs: nobody else touches the entry.
        unsafe { *DISPOSITIONS.program[i].get() = now };
        // SAFETY: a valid action.
        if unsafe { real(sig, &ours(&now), std::ptr::null_mut()) } == 0 {
            DISPOSITIONS.ours[i].store(true, Ordering::Release);
        }
    }
}

/// The runtime's handler: write, then end the process as the program's default disposition
/// would (see the module's comment).
extern "C" fn on_fatal(sig: c_int, _info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    let _keep = crate::sys::KeepErrno::new();
    snapshot::write(Why::Signal(sig));
    let i = sig as usize;
    // The lock may be held by another thread changing a disposition (briefly) or by nobody;
    // never by this thread, whose signals are blocked meanwhile. Not taking it after a while
    // is still safe: the entry of a signal whose handler runs is not being changed.
    let locked = LOCK.try_lock_for(1_000_000);
    DISPOSITIONS.ours[i].store(false, Ordering::Release);
    // SAFETY: the program's SIG_DFL action for `sig` (see Dispositions).
    let dfl = unsafe { *DISPOSITIONS.program[i].get() };
    let real = REAL_SIGACTION.cached();
    if real != 0 {
        // SAFETY: the real function of this signature (resolved at start); a valid action.
        unsafe { std::mem::transmute::<usize, SigactionFn>(real)(sig, &dfl, std::ptr::null_mut()) };
    } else {
        default_by_system_call(sig);
    }
    if locked {
        LOCK.unlock();
    }
    // SAFETY: signalling this thread; the signal stays pending (blocked in this handler) and
    // is delivered with the default action when the handler returns.
    unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), sig) };
}

/// SIG_DFL without glibc (needs no signal-return trampoline, as no handler runs).
fn default_by_system_call(sig: c_int) {
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    let act = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: a valid kernel sigaction of the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &act as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            8usize,
        )
    };
}

/// Blocks every signal until dropped (the dispositions' lock is taken under it).
struct Blocked(libc::sigset_t);

impl Blocked {
    fn new() -> Blocked {
        // SAFETY: plain data, filled below.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut saved: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sets.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut saved);
        }
        Blocked(saved)
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// `sigaction` for a writing signal while the runtime is active.
///
/// # Safety
/// The program's arguments to `sigaction`.
unsafe fn managed_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let real = real_sigaction();
    let i = sig as usize;
    // `act` and `old` may be the same structure: read the new action first.
    // SAFETY: the program's pointer, when given.
    let new = (!act.is_null()).then(|| unsafe { *act });
    let _blocked = Blocked::new();
    LOCK.lock();
    // SAFETY: plain data.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    let mut r = 0;
    if DISPOSITIONS.ours[i].load(Ordering::Acquire) {
        // SAFETY: under LOCK.
        previous = unsafe { *DISPOSITIONS.program[i].get() };
    } else {
        // SAFETY: valid pointers.
        r = unsafe { real(sig, std::ptr::null(), &mut previous) };
    }
    if let (0, Some(new)) = (r, new) {
        if new.sa_sigaction == libc::SIG_DFL {
            // SAFETY: under LOCK.
            unsafe { *DISPOSITIONS.program[i].get() = new };
            // SAFETY: a valid action.
            r = unsafe { real(sig, &ours(&new), std::ptr::null_mut()) };
            DISPOSITIONS.ours[i].store(r == 0, Ordering::Release);
        } else {
            // SAFETY: the program's own action.
            r = unsafe { real(sig, &new, std::ptr::null_mut()) };
            if r == 0 {
                DISPOSITIONS.ours[i].store(false, Ordering::Release);
            }
        }
    }
    LOCK.unlock();
    if r == 0 && !old.is_null() {
        // SAFETY: the program's pointer.
        unsafe { *old = previous };
    }
    r
}

/// # Safety
/// Called by the program as `sigaction`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if crate::active() && managed(sig) {
        // SAFETY: the program's arguments.
        return unsafe { managed_sigaction(sig, act, old) };
    }
    // SAFETY: the real function with the program's arguments.
    unsafe { real_sigaction()(sig, act, old) }
}

/// # Safety
/// Called by the program as `signal` (glibc's: BSD semantics, SA_RESTART).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if !(crate::active() && managed(sig)) {
        // SAFETY: the real function of this signature, with the program's arguments.
        return unsafe {
            std::mem::transmute::<usize, SignalFn>(REAL_SIGNAL.require_or_libc())(sig, handler)
        };
    }
    // What glibc's `signal` asks for: the handler, the signal itself blocked while it runs,
    // interrupted calls restarted.
    // SAFETY: plain data.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: valid sets and signal number.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaddset(&mut act.sa_mask, sig);
    }
    // SAFETY: plain data.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    if unsafe { managed_sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

// ---- _exit ----

fn exit_now(status: c_int) -> ! {
    snapshot::write(Why::Exit);
    loop {
        // SAFETY: ends the process, as glibc's _exit does.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// # Safety
/// Called by the program as `_exit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    exit_now(status)
}

/// # Safety
/// Called by the program as `_Exit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(status)
}

// ---- exec ----

/// Before an exec: write (async-signal-safe: execve may be called from a signal handler).
fn before_exec() {
    snapshot::write(Why::Exec);
}

static EXECS: [Real; 5] = [
    Real::new(c"execve"),
    Real::new(c"execv"),
    Real::new(c"execvp"),
    Real::new(c"execvpe"),
    Real::new(c"fexecve"),
];

type Argv = *const *const c_char;

/// # Safety
/// Called by the program as `execve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(path: *const c_char, argv: Argv, envp: Argv) -> c_int {
    before_exec();
    type F = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    // SAFETY: the real function of this signature, with the program's arguments.
    unsafe { std::mem::transmute::<usize, F>(EXECS[0].require_or_libc())(path, argv, envp) }
}

/// # Safety
/// Called by the program as `execv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(path: *const c_char, argv: Argv) -> c_int {
    before_exec();
    type F = unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    // SAFETY: as above.
    unsafe { std::mem::transmute::<usize, F>(EXECS[1].require_or_libc())(path, argv) }
}

/// # Safety
/// Called by the program as `execvp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: Argv) -> c_int {
    before_exec();
    type F = unsafe extern "C" fn(*const c_char, Argv) -> c_int;
    // SAFETY: as above.
    unsafe { std::mem::transmute::<usize, F>(EXECS[2].require_or_libc())(file, argv) }
}

/// # Safety
/// Called by the program as `execvpe`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(file: *const c_char, argv: Argv, envp: Argv) -> c_int {
    before_exec();
    type F = unsafe extern "C" fn(*const c_char, Argv, Argv) -> c_int;
    // SAFETY: as above.
    unsafe { std::mem::transmute::<usize, F>(EXECS[3].require_or_libc())(file, argv, envp) }
}

/// # Safety
/// Called by the program as `fexecve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(fd: c_int, argv: Argv, envp: Argv) -> c_int {
    before_exec();
    type F = unsafe extern "C" fn(c_int, Argv, Argv) -> c_int;
    // SAFETY: as above.
    unsafe { std::mem::transmute::<usize, F>(EXECS[4].require_or_libc())(fd, argv, envp) }
}

/// `execl`, `execlp`, `execle` take their arguments as C varargs, which Rust cannot receive:
/// their trampolines save the argument registers, call this (which writes and returns the real
/// function's address), restore the registers and jump to the real function, arguments and
/// stack untouched.
static VARIADIC_EXECS: [Real; 3] = [
    Real::new(c"execl"),
    Real::new(c"execlp"),
    Real::new(c"execle"),
];

extern "C" fn variadic_exec(which: usize) -> usize {
    before_exec();
    VARIADIC_EXECS[which].require_or_libc()
}

macro_rules! variadic_exec_entry {
    ($($name:ident $which:literal;)*) => {$(
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        /// # Safety
        /// Called by the program with the C signature of this symbol.
        pub unsafe extern "C" fn $name() {
            // x86-64: 7 pushes after the return address leave the stack 16-byte aligned for
            // the call; rax holds the vector-register count of a variadic call.
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(
                "push rdi", "push rsi", "push rdx", "push rcx", "push r8", "push r9", "push rax",
                concat!("mov edi, ", $which),
                "call {f}",
                "mov r11, rax",
                "pop rax", "pop r9", "pop r8", "pop rcx", "pop rdx", "pop rsi", "pop rdi",
                "jmp r11",
                f = sym variadic_exec
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(
                "stp x29, x30, [sp, #-80]!",
                "mov x29, sp",
                "stp x0, x1, [sp, #16]",
                "stp x2, x3, [sp, #32]",
                "stp x4, x5, [sp, #48]",
                "stp x6, x7, [sp, #64]",
                concat!("mov x0, #", $which),
                "bl {f}",
                "mov x16, x0",
                "ldp x0, x1, [sp, #16]",
                "ldp x2, x3, [sp, #32]",
                "ldp x4, x5, [sp, #48]",
                "ldp x6, x7, [sp, #64]",
                "ldp x29, x30, [sp], #80",
                "br x16",
                f = sym variadic_exec
            );
        }
    )*};
}

variadic_exec_entry! {
    execl 0;
    execlp 1;
    execle 2;
}
