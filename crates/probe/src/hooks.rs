//! The interposed functions. Each exported symbol is a two-instruction trampoline that passes
//! its own return address (the program's call site) as an extra argument to the Rust hook, then
//! jumps to it; the hook returns straight to the program. The hooks call the real function and
//! return exactly what it returned: recording never changes a result, errno, or which call the
//! program's request ends up in.
//!
//! Contention is detected as the thesis's mutex tool did it (§3.1.2.1): try first; a try that
//! succeeds is an uncontended acquisition; a try that fails with EBUSY starts a timed wait,
//! ended by the real blocking call. Any other try result (EINVAL, EAGAIN, EDEADLK,
//! ENOTRECOVERABLE, ...) is left to the blocking call to report, so the program sees the answer
//! the real function gives it.

use crate::real;
use crate::sampler;
use crate::thread::{self, with_recording};
use crate::{clock, config};
use libc::{c_int, c_void};
use trace::locks::{AFTER_COND, CONTENDED, MODE_EXCLUSIVE, MODE_SHARED, MODE_SPIN, MODE_UNKNOWN};
use trace::locks::{OWNER_DIED, TIMED, TRY};
use trace::{EventKind, ObjectKind};

use crate::trampoline::interpose;

type Ptr = *mut c_void;
type CPtr = *const c_void;

#[cfg(not(target_arch = "x86_64"))]
interpose!(pthread_mutex_lock(m: Ptr) -> c_int, mutex_lock, "rsi", "x1");
interpose!(pthread_mutex_trylock(m: Ptr) -> c_int, mutex_trylock, "rsi", "x1");
interpose!(pthread_mutex_timedlock(m: Ptr, t: CPtr) -> c_int, mutex_timedlock, "rdx", "x2");
interpose!(pthread_mutex_clocklock(m: Ptr, c: libc::clockid_t, t: CPtr) -> c_int, mutex_clocklock, "rcx", "x3");
#[cfg(not(target_arch = "x86_64"))]
interpose!(pthread_mutex_unlock(m: Ptr) -> c_int, mutex_unlock, "rsi", "x1");
interpose!(pthread_rwlock_rdlock(l: Ptr) -> c_int, rw_rdlock, "rsi", "x1");
interpose!(pthread_rwlock_tryrdlock(l: Ptr) -> c_int, rw_tryrdlock, "rsi", "x1");
interpose!(pthread_rwlock_timedrdlock(l: Ptr, t: CPtr) -> c_int, rw_timedrdlock, "rdx", "x2");
interpose!(pthread_rwlock_clockrdlock(l: Ptr, c: libc::clockid_t, t: CPtr) -> c_int, rw_clockrdlock, "rcx", "x3");
interpose!(pthread_rwlock_wrlock(l: Ptr) -> c_int, rw_wrlock, "rsi", "x1");
interpose!(pthread_rwlock_trywrlock(l: Ptr) -> c_int, rw_trywrlock, "rsi", "x1");
interpose!(pthread_rwlock_timedwrlock(l: Ptr, t: CPtr) -> c_int, rw_timedwrlock, "rdx", "x2");
interpose!(pthread_rwlock_clockwrlock(l: Ptr, c: libc::clockid_t, t: CPtr) -> c_int, rw_clockwrlock, "rcx", "x3");
interpose!(pthread_rwlock_unlock(l: Ptr) -> c_int, rw_unlock, "rsi", "x1");
interpose!(pthread_spin_lock(l: Ptr) -> c_int, spin_lock, "rsi", "x1");
interpose!(pthread_spin_trylock(l: Ptr) -> c_int, spin_trylock, "rsi", "x1");
interpose!(pthread_spin_unlock(l: Ptr) -> c_int, spin_unlock, "rsi", "x1");
interpose!(pthread_cond_wait(c: Ptr, m: Ptr) -> c_int, cond_wait, "rdx", "x2");
interpose!(pthread_cond_timedwait(c: Ptr, m: Ptr, t: CPtr) -> c_int, cond_timedwait, "rcx", "x3");
interpose!(pthread_cond_clockwait(c: Ptr, m: Ptr, k: libc::clockid_t, t: CPtr) -> c_int, cond_clockwait, "r8", "x4");
interpose!(pthread_barrier_wait(b: Ptr) -> c_int, barrier_wait, "rsi", "x1");

/// `pthread_mutex_lock` on x86-64, with sampled mode's common case written out by hand: an
/// uncontended acquisition that goes unrecorded costs a try-lock and a countdown, with no frame
/// and no call into Rust (the budget is 10 ns a pair, the bare pair about 5.5). The countdown
/// is non-zero only in sampled mode (full recording and pass-through never set it), so it is
/// the only word read to decide. Anything else (the countdown at zero, a robust/PI/PP mutex, a
/// busy lock, a real function not resolved yet) goes to the Rust hooks with the call site, as
/// every other trampoline does. A signal handler interrupting between the countdown's load and
/// store can only change which acquisition is sampled.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
/// # Safety
/// Called by the program as `pthread_mutex_lock`.
pub unsafe extern "C" fn pthread_mutex_lock(m: Ptr) -> c_int {
    core::arch::naked_asm!(
        "test dword ptr [rdi + 16], {robust_pi_pp}",
        "jnz 2f",
        "mov rdx, qword ptr [rip + contend_probe_sampler_tls@GOTTPOFF]",
        "add rdx, qword ptr fs:0",
        "cmp dword ptr [rdx], 0",
        "je 2f",
        "mov rax, qword ptr [rip + {slots} + {trylock}]",
        "test rax, rax",
        "jz 2f",
        "push rdi",
        "call rax",
        "pop rdi",
        "test eax, eax",
        "jnz 1f",
        // Acquired: only uncontended acquisitions count down (as in `sampler`). A signal
        // handler may have run the countdown to zero meanwhile: then it stays there.
        "mov rdx, qword ptr [rip + contend_probe_sampler_tls@GOTTPOFF]",
        "add rdx, qword ptr fs:0",
        "mov ecx, dword ptr [rdx]",
        "test ecx, ecx",
        "jz 3f",
        "dec ecx",
        "mov dword ptr [rdx], ecx",
        "3:",
        "ret",
        // The try failed: timed as a contended acquisition from here.
        "1:",
        "mov esi, eax",
        "mov rdx, qword ptr [rsp]",
        "jmp {busy}",
        "2:",
        "mov rsi, qword ptr [rsp]",
        "jmp {hook}",
        slots = sym real::SLOTS,
        trylock = const real::Real::MutexTrylock as usize * 8,
        robust_pi_pp = const KIND_ROBUST_PI_PP,
        busy = sym mutex_lock_busy,
        hook = sym mutex_lock,
    );
}

/// `pthread_mutex_unlock` on x86-64: in sampled mode (countdown non-zero), a thread that holds
/// no recorded lock goes straight to the real function (see `pthread_mutex_lock`).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
/// # Safety
/// Called by the program as `pthread_mutex_unlock`.
pub unsafe extern "C" fn pthread_mutex_unlock(m: Ptr) -> c_int {
    core::arch::naked_asm!(
        "mov rax, qword ptr [rip + contend_probe_sampler_tls@GOTTPOFF]",
        "add rax, qword ptr fs:0",
        "cmp dword ptr [rax + 4], 0",
        "jne 1f",
        "cmp dword ptr [rax], 0",
        "je 1f",
        "mov rax, qword ptr [rip + {slots} + {unlock}]",
        "test rax, rax",
        "jz 1f",
        "jmp rax",
        "1:",
        "mov rsi, qword ptr [rsp]",
        "jmp {hook}",
        slots = sym real::SLOTS,
        unlock = const real::Real::MutexUnlock as usize * 8,
        hook = sym mutex_unlock,
    );
}

/// The hand-written `pthread_mutex_lock` found the lock busy (or the try failed otherwise).
#[cfg(target_arch = "x86_64")]
extern "C" fn mutex_lock_busy(m: Ptr, r: c_int, site: usize) -> c_int {
    acquire_recorded(r, m, ObjectKind::Mutex, MODE_EXCLUSIVE, site, || unsafe {
        real::fn1_mutex_lock()(m)
    })
}

/// Acquires through `attempt` (a try) and, when that finds the lock busy, `block` (the
/// program's own call), recording what happened. The unrecorded fast path of sampled mode stays
/// in the hook; everything else is out of line, so the hook needs few registers.
#[inline(always)]
fn acquire(
    lock: CPtr,
    kind: ObjectKind,
    mode: u8,
    site: usize,
    attempt: impl FnOnce() -> c_int,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if !config::recording() {
        return block();
    }
    let r = attempt();
    if r == 0 && sampler::skip_acquisition() {
        return r;
    }
    acquire_recorded(r, lock, kind, mode, site, block)
}

#[inline(never)]
fn acquire_recorded(
    r: c_int,
    lock: CPtr,
    kind: ObjectKind,
    mode: u8,
    site: usize,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if r == 0 || r == libc::EOWNERDEAD {
        let ts = clock::now();
        let aux = mode | if r == 0 { 0 } else { OWNER_DIED };
        with_recording(|st| st.record(EventKind::LockAcquired, aux, (lock, kind), site, ts));
        sampler::recorded_hold(lock as usize);
        return r;
    }
    if r != libc::EBUSY {
        return block();
    }
    let waited = clock::now();
    with_recording(|st| st.record(EventKind::LockWait, mode, (lock, kind), site, waited));
    let r = block();
    let ts = clock::now();
    if r == 0 || r == libc::EOWNERDEAD {
        let aux = mode | CONTENDED | if r == 0 { 0 } else { OWNER_DIED };
        with_recording(|st| st.record(EventKind::LockAcquired, aux, (lock, kind), site, ts));
        sampler::recorded_hold(lock as usize);
    } else {
        let aux = r.clamp(0, 255) as u8;
        with_recording(|st| st.record(EventKind::LockFailed, aux, (lock, kind), site, ts));
    }
    r
}

/// Whether a timed call's arguments are ones the real function would take: a clock the
/// futex accepts (glibc checks the clock before anything else) and a timeout with nanoseconds
/// in range. Anything else goes straight to the real function, untried, so the program gets the
/// error (or the behaviour) the real function gives it.
#[inline]
fn plain_clock(clock: libc::clockid_t) -> bool {
    clock == libc::CLOCK_REALTIME || clock == libc::CLOCK_MONOTONIC
}

#[inline]
fn plain_timeout(t: CPtr) -> bool {
    if t.is_null() {
        return false;
    }
    // SAFETY: the program passes a timespec; the real function would read it too.
    let ns = unsafe { (*t.cast::<libc::timespec>()).tv_nsec };
    (0..1_000_000_000).contains(&ns)
}

/// A try-lock called by the program: recorded only when it acquires.
#[inline(always)]
fn try_acquire(
    lock: CPtr,
    kind: ObjectKind,
    mode: u8,
    site: usize,
    attempt: impl FnOnce() -> c_int,
) -> c_int {
    let r = attempt();
    if r == 0 && config::recording() && sampler::skip_acquisition() {
        return r;
    }
    if (r == 0 || r == libc::EOWNERDEAD) && config::recording() {
        let ts = clock::now();
        let aux = mode | TRY | if r == 0 { 0 } else { OWNER_DIED };
        with_recording(|st| st.record(EventKind::LockAcquired, aux, (lock, kind), site, ts));
        sampler::recorded_hold(lock as usize);
    }
    r
}

/// A release: recorded without a call site (the hold is named by its acquisition's), which
/// saves a table lookup per pair.
#[inline(always)]
fn release(
    lock: CPtr,
    kind: ObjectKind,
    mode: u8,
    _site: usize,
    unlock: impl FnOnce() -> c_int,
) -> c_int {
    if !config::recording() || sampler::skip_release(lock as usize) {
        return unlock();
    }
    release_recorded(lock, kind, mode, unlock)
}

#[inline(never)]
fn release_recorded(
    lock: CPtr,
    kind: ObjectKind,
    mode: u8,
    unlock: impl FnOnce() -> c_int,
) -> c_int {
    // Timed before the real unlock: the next owner's acquisition is then always later.
    let ts = clock::now();
    let r = unlock();
    if r == 0 {
        with_recording(|st| st.record_release(mode, (lock, kind), ts));
    }
    r
}

// SAFETY (all hooks): the pointers come from the program and go unchanged to the real function
// with the same signature; the probe only uses them as addresses.

/// glibc's `__kind` word of a `pthread_mutex_t` (offset 16 on 64-bit Linux, as its static
/// initialisers fix it) has these bits for mutexes whose try-lock is not the lock's first step:
/// robust (16), priority-inheritance (32) and priority-protect (64). A priority-protect lock
/// checks the caller's priority against the ceiling and a robust one may report the owner's
/// death, so trying first would change what the program sees.
const KIND_ROBUST_PI_PP: i32 = 16 | 32 | 64;

#[inline]
fn plain_mutex(m: CPtr) -> bool {
    // SAFETY: `m` points to a pthread_mutex_t (40 bytes on 64-bit Linux); the real call reads
    // the same word.
    let kind = unsafe { m.cast::<u8>().add(16).cast::<i32>().read_volatile() };
    kind & KIND_ROBUST_PI_PP == 0
}

/// A lock whose try would not be equivalent (see `plain_mutex`): the real call is made as is,
/// and contention inferred from it taking longer than an uncontended call can (1 µs).
#[inline(never)]
fn acquire_untried(
    lock: CPtr,
    kind: ObjectKind,
    mode: u8,
    site: usize,
    block: impl FnOnce() -> c_int,
) -> c_int {
    if !config::recording() {
        return block();
    }
    let asked = clock::now();
    let r = block();
    let got = clock::now();
    if r != 0 && r != libc::EOWNERDEAD {
        return r;
    }
    let waited = clock::ns_between(asked, got) > 1_000;
    let aux = mode | if waited { CONTENDED } else { 0 } | if r == 0 { 0 } else { OWNER_DIED };
    with_recording(|st| {
        if waited {
            st.record(EventKind::LockWait, mode, (lock, kind), site, asked);
        }
        st.record(EventKind::LockAcquired, aux, (lock, kind), site, got);
    });
    sampler::recorded_hold(lock as usize);
    r
}

extern "C" fn mutex_lock(m: Ptr, site: usize) -> c_int {
    if !plain_mutex(m) {
        return acquire_untried(m, ObjectKind::Mutex, MODE_EXCLUSIVE, site, || unsafe {
            real::fn1_mutex_lock()(m)
        });
    }
    acquire(
        m,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE,
        site,
        || unsafe { real::fn1_mutex_trylock()(m) },
        || unsafe { real::fn1_mutex_lock()(m) },
    )
}

extern "C" fn mutex_trylock(m: Ptr, site: usize) -> c_int {
    try_acquire(m, ObjectKind::Mutex, MODE_EXCLUSIVE, site, || unsafe {
        real::fn1_mutex_trylock()(m)
    })
}

extern "C" fn mutex_timedlock(m: Ptr, t: CPtr, site: usize) -> c_int {
    if !plain_timeout(t) {
        return unsafe { real::fn2_mutex_timedlock()(m, t) };
    }
    if !plain_mutex(m) {
        return acquire_untried(
            m,
            ObjectKind::Mutex,
            MODE_EXCLUSIVE | TIMED,
            site,
            || unsafe { real::fn2_mutex_timedlock()(m, t) },
        );
    }
    acquire(
        m,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE | TIMED,
        site,
        || unsafe { real::fn1_mutex_trylock()(m) },
        || unsafe { real::fn2_mutex_timedlock()(m, t) },
    )
}

extern "C" fn mutex_clocklock(m: Ptr, c: libc::clockid_t, t: CPtr, site: usize) -> c_int {
    if !plain_clock(c) || !plain_timeout(t) {
        return unsafe { real::fnclock_mutex_clocklock()(m, c, t) };
    }
    if !plain_mutex(m) {
        return acquire_untried(
            m,
            ObjectKind::Mutex,
            MODE_EXCLUSIVE | TIMED,
            site,
            || unsafe { real::fnclock_mutex_clocklock()(m, c, t) },
        );
    }
    acquire(
        m,
        ObjectKind::Mutex,
        MODE_EXCLUSIVE | TIMED,
        site,
        || unsafe { real::fn1_mutex_trylock()(m) },
        || unsafe { real::fnclock_mutex_clocklock()(m, c, t) },
    )
}

extern "C" fn mutex_unlock(m: Ptr, site: usize) -> c_int {
    release(m, ObjectKind::Mutex, MODE_EXCLUSIVE, site, || unsafe {
        real::fn1_mutex_unlock()(m)
    })
}

extern "C" fn rw_rdlock(l: Ptr, site: usize) -> c_int {
    acquire(
        l,
        ObjectKind::RwLock,
        MODE_SHARED,
        site,
        || unsafe { real::fn1_rw_tryrdlock()(l) },
        || unsafe { real::fn1_rw_rdlock()(l) },
    )
}

extern "C" fn rw_tryrdlock(l: Ptr, site: usize) -> c_int {
    try_acquire(l, ObjectKind::RwLock, MODE_SHARED, site, || unsafe {
        real::fn1_rw_tryrdlock()(l)
    })
}

extern "C" fn rw_timedrdlock(l: Ptr, t: CPtr, site: usize) -> c_int {
    if !plain_timeout(t) {
        return unsafe { real::fn2_rw_timedrdlock()(l, t) };
    }
    acquire(
        l,
        ObjectKind::RwLock,
        MODE_SHARED | TIMED,
        site,
        || unsafe { real::fn1_rw_tryrdlock()(l) },
        || unsafe { real::fn2_rw_timedrdlock()(l, t) },
    )
}

extern "C" fn rw_clockrdlock(l: Ptr, c: libc::clockid_t, t: CPtr, site: usize) -> c_int {
    if !plain_clock(c) || !plain_timeout(t) {
        return unsafe { real::fnclock_rw_clockrdlock()(l, c, t) };
    }
    acquire(
        l,
        ObjectKind::RwLock,
        MODE_SHARED | TIMED,
        site,
        || unsafe { real::fn1_rw_tryrdlock()(l) },
        || unsafe { real::fnclock_rw_clockrdlock()(l, c, t) },
    )
}

extern "C" fn rw_wrlock(l: Ptr, site: usize) -> c_int {
    acquire(
        l,
        ObjectKind::RwLock,
        MODE_EXCLUSIVE,
        site,
        || unsafe { real::fn1_rw_trywrlock()(l) },
        || unsafe { real::fn1_rw_wrlock()(l) },
    )
}

extern "C" fn rw_trywrlock(l: Ptr, site: usize) -> c_int {
    try_acquire(l, ObjectKind::RwLock, MODE_EXCLUSIVE, site, || unsafe {
        real::fn1_rw_trywrlock()(l)
    })
}

extern "C" fn rw_timedwrlock(l: Ptr, t: CPtr, site: usize) -> c_int {
    if !plain_timeout(t) {
        return unsafe { real::fn2_rw_timedwrlock()(l, t) };
    }
    acquire(
        l,
        ObjectKind::RwLock,
        MODE_EXCLUSIVE | TIMED,
        site,
        || unsafe { real::fn1_rw_trywrlock()(l) },
        || unsafe { real::fn2_rw_timedwrlock()(l, t) },
    )
}

extern "C" fn rw_clockwrlock(l: Ptr, c: libc::clockid_t, t: CPtr, site: usize) -> c_int {
    if !plain_clock(c) || !plain_timeout(t) {
        return unsafe { real::fnclock_rw_clockwrlock()(l, c, t) };
    }
    acquire(
        l,
        ObjectKind::RwLock,
        MODE_EXCLUSIVE | TIMED,
        site,
        || unsafe { real::fn1_rw_trywrlock()(l) },
        || unsafe { real::fnclock_rw_clockwrlock()(l, c, t) },
    )
}

extern "C" fn rw_unlock(l: Ptr, site: usize) -> c_int {
    // Whether a read or a write hold ends is the analysis's to pair from the acquisitions.
    release(l, ObjectKind::RwLock, MODE_UNKNOWN, site, || unsafe {
        real::fn1_rw_unlock()(l)
    })
}

extern "C" fn spin_lock(l: Ptr, site: usize) -> c_int {
    acquire(
        l,
        ObjectKind::SpinLock,
        MODE_SPIN,
        site,
        || unsafe { real::fn1_spin_trylock()(l) },
        || unsafe { real::fn1_spin_lock()(l) },
    )
}

extern "C" fn spin_trylock(l: Ptr, site: usize) -> c_int {
    try_acquire(l, ObjectKind::SpinLock, MODE_SPIN, site, || unsafe {
        real::fn1_spin_trylock()(l)
    })
}

extern "C" fn spin_unlock(l: Ptr, site: usize) -> c_int {
    release(l, ObjectKind::SpinLock, MODE_SPIN, site, || unsafe {
        real::fn1_spin_unlock()(l)
    })
}

/// A condition wait releases its mutex, waits, and re-acquires it: recorded as those steps, so
/// the mutex's hold ends at the wait and the waiting counts as idle time, not lock contention.
#[inline(always)]
fn cond(c: Ptr, m: Ptr, site: usize, wait: impl FnOnce() -> c_int) -> c_int {
    if !config::recording() {
        return wait();
    }
    // In sampled mode the hold that the wait ends was perhaps not recorded: then neither is its
    // end. The re-acquisition always is (and so is the release that follows it).
    let hold_recorded = !sampler::skip_release(m as usize);
    let ts = clock::now();
    with_recording(|st| {
        if hold_recorded {
            st.record(
                EventKind::LockReleased,
                MODE_EXCLUSIVE,
                (m, ObjectKind::Mutex),
                site,
                ts,
            );
        }
        st.record(EventKind::CondWait, 0, (c, ObjectKind::Cond), site, ts);
    });
    let r = wait();
    let ts = clock::now();
    with_recording(|st| {
        st.record(
            EventKind::CondWoken,
            r.clamp(0, 255) as u8,
            (c, ObjectKind::Cond),
            site,
            ts,
        );
        st.record(
            EventKind::LockAcquired,
            MODE_EXCLUSIVE | AFTER_COND,
            (m, ObjectKind::Mutex),
            site,
            ts,
        );
    });
    sampler::recorded_hold(m as usize);
    r
}

extern "C" fn cond_wait(c: Ptr, m: Ptr, site: usize) -> c_int {
    cond(c, m, site, || unsafe { real::fn2c_cond_wait()(c, m) })
}

extern "C" fn cond_timedwait(c: Ptr, m: Ptr, t: CPtr, site: usize) -> c_int {
    cond(c, m, site, || unsafe {
        real::fn3_cond_timedwait()(c, m, t)
    })
}

extern "C" fn cond_clockwait(c: Ptr, m: Ptr, k: libc::clockid_t, t: CPtr, site: usize) -> c_int {
    cond(c, m, site, || unsafe {
        real::fncondclock_cond_clockwait()(c, m, k, t)
    })
}

extern "C" fn barrier_wait(b: Ptr, site: usize) -> c_int {
    if !config::recording() {
        return unsafe { real::fn1_barrier_wait()(b) };
    }
    let ts = clock::now();
    with_recording(|st| {
        st.record(
            EventKind::BarrierWait,
            0,
            (b, ObjectKind::Barrier),
            site,
            ts,
        )
    });
    let r = unsafe { real::fn1_barrier_wait()(b) };
    let ts = clock::now();
    let serial = u8::from(r == libc::PTHREAD_BARRIER_SERIAL_THREAD);
    with_recording(|st| {
        st.record(
            EventKind::BarrierDone,
            serial,
            (b, ObjectKind::Barrier),
            site,
            ts,
        )
    });
    r
}

/// What a new thread needs to start: the program's routine and argument, and who made it.
struct Start {
    routine: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
    creator: u32,
}

extern "C" fn thread_entry(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the Box leaked by pthread_create below, handed to exactly this thread.
    let start = unsafe { Box::from_raw(p.cast::<Start>()) };
    let Start {
        routine,
        arg,
        creator,
    } = *start;
    thread::set_creator(creator);
    // Open the thread's stream now, so its start is on record even if it never locks.
    with_recording(|_| ());
    routine(arg)
}

/// # Safety
/// Called by the program as `pthread_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    if !config::recording() {
        // SAFETY: the program's own arguments to the real function.
        return unsafe { real::create()(thread, attr, routine, arg) };
    }
    // SAFETY: gettid has no preconditions.
    let creator = unsafe { libc::gettid() } as u32;
    let start = Box::into_raw(Box::new(Start {
        routine,
        arg,
        creator,
    }));
    // SAFETY: as above, with our entry point, which frees `start`.
    let r = unsafe { real::create()(thread, attr, thread_entry, start.cast()) };
    if r != 0 {
        // SAFETY: the thread was not created, so nothing else owns `start`.
        drop(unsafe { Box::from_raw(start) });
    }
    r
}

/// # Safety
/// Called by the program as `fork`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    // SAFETY: the real fork; the child's probe state is reset by the atfork handler.
    let pid = unsafe { real::fork()() };
    if pid > 0 && config::recording() {
        let ts = clock::now();
        with_recording(|st| st.record_plain(EventKind::Fork, pid as u32, 0, ts));
    }
    pid
}
