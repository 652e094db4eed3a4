//! The real pthread functions, found with `dlsym(RTLD_NEXT)` (or `dlvsym` where glibc keeps
//! several versions: `dlsym` could return the old `pthread_cond_wait@GLIBC_2.2.5`, which uses
//! a different condition-variable layout than the programs compiled today).
//!
//! Resolution happens in the library's constructor; a call that arrives earlier (another
//! library's constructor) resolves on the spot. If resolving recursively re-enters a wrapper
//! (dlsym taking a lock), the mutex and rwlock functions fall back to glibc's exported
//! `__pthread_*` aliases, which are the same code.

use libc::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub type Fn1 = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type Fn2 = unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int;
pub type Fn3 = unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void) -> c_int;
pub type FnClock = unsafe extern "C" fn(*mut c_void, libc::clockid_t, *const c_void) -> c_int;
pub type FnCondClock =
    unsafe extern "C" fn(*mut c_void, *mut c_void, libc::clockid_t, *const c_void) -> c_int;
pub type FnCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    extern "C" fn(*mut c_void) -> *mut c_void,
    *mut c_void,
) -> c_int;
pub type FnFork = unsafe extern "C" fn() -> libc::pid_t;

/// Every function the probe wraps. The index is the slot in [`SLOTS`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(usize)]
pub enum Real {
    MutexLock,
    MutexTrylock,
    MutexTimedlock,
    MutexClocklock,
    MutexUnlock,
    RwRdlock,
    RwTryrdlock,
    RwTimedrdlock,
    RwClockrdlock,
    RwWrlock,
    RwTrywrlock,
    RwTimedwrlock,
    RwClockwrlock,
    RwUnlock,
    SpinLock,
    SpinTrylock,
    SpinUnlock,
    CondWait,
    CondTimedwait,
    CondClockwait,
    BarrierWait,
    Create,
    Fork,
}

const COUNT: usize = Real::Fork as usize + 1;

/// (symbol, version for dlvsym or "" for the default, fallback alias in glibc or "").
const NAMES: [(&str, &str, &str); COUNT] = [
    ("pthread_mutex_lock\0", "", "__pthread_mutex_lock\0"),
    ("pthread_mutex_trylock\0", "", "__pthread_mutex_trylock\0"),
    ("pthread_mutex_timedlock\0", "", ""),
    ("pthread_mutex_clocklock\0", "", ""),
    ("pthread_mutex_unlock\0", "", "__pthread_mutex_unlock\0"),
    ("pthread_rwlock_rdlock\0", "", "__pthread_rwlock_rdlock\0"),
    (
        "pthread_rwlock_tryrdlock\0",
        "",
        "__pthread_rwlock_tryrdlock\0",
    ),
    ("pthread_rwlock_timedrdlock\0", "", ""),
    ("pthread_rwlock_clockrdlock\0", "", ""),
    ("pthread_rwlock_wrlock\0", "", "__pthread_rwlock_wrlock\0"),
    (
        "pthread_rwlock_trywrlock\0",
        "",
        "__pthread_rwlock_trywrlock\0",
    ),
    ("pthread_rwlock_timedwrlock\0", "", ""),
    ("pthread_rwlock_clockwrlock\0", "", ""),
    ("pthread_rwlock_unlock\0", "", "__pthread_rwlock_unlock\0"),
    ("pthread_spin_lock\0", "", ""),
    ("pthread_spin_trylock\0", "", ""),
    ("pthread_spin_unlock\0", "", ""),
    ("pthread_cond_wait\0", "GLIBC_2.3.2\0", ""),
    ("pthread_cond_timedwait\0", "GLIBC_2.3.2\0", ""),
    ("pthread_cond_clockwait\0", "", ""),
    ("pthread_barrier_wait\0", "", ""),
    ("pthread_create\0", "", ""),
    ("fork\0", "", ""),
];

/// Read by the hand-written fast paths in hooks.rs too (0: not resolved yet).
pub static SLOTS: [AtomicUsize; COUNT] = [const { AtomicUsize::new(0) }; COUNT];
static RESOLVING: AtomicBool = AtomicBool::new(false);

unsafe extern "C" {
    fn dlvsym(handle: *mut c_void, symbol: *const c_char, version: *const c_char) -> *mut c_void;
}

fn lookup(f: Real) -> usize {
    let (name, version, fallback) = NAMES[f as usize];
    // Someone's dlsym took a lock that came back here: use glibc's alias, no dlsym.
    let reentered = RESOLVING.swap(true, Ordering::Acquire);
    let mut found = 0usize;
    if !reentered {
        // SAFETY: NUL-terminated constant strings; RTLD_NEXT is valid in a shared object.
        found = unsafe {
            if version.is_empty() {
                libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast())
            } else {
                let v = dlvsym(
                    libc::RTLD_NEXT,
                    name.as_ptr().cast(),
                    version.as_ptr().cast(),
                );
                if v.is_null() {
                    libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast())
                } else {
                    v
                }
            }
        } as usize;
        RESOLVING.store(false, Ordering::Release);
    }
    if found == 0 && !fallback.is_empty() {
        // SAFETY: as above, with the default namespace.
        found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, fallback.as_ptr().cast()) } as usize;
    }
    found
}

/// Resolves every function now (from the library's constructor).
pub fn resolve_all() {
    for i in 0..COUNT {
        // SAFETY: i < COUNT, and Real is repr(usize) with contiguous discriminants from 0.
        let f: Real = unsafe { std::mem::transmute::<usize, Real>(i) };
        get(f);
    }
}

/// The address of the real function; aborts with a message if it cannot be found, since
/// returning from a pthread call without doing it would corrupt the program silently.
#[inline]
pub fn get(f: Real) -> usize {
    let slot = &SLOTS[f as usize];
    let v = slot.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let found = lookup(f);
    if found == 0 {
        let msg = b"contend probe: cannot find the real pthread function; aborting\n";
        // SAFETY: writing a constant buffer to stderr.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort();
        }
    }
    slot.store(found, Ordering::Relaxed);
    found
}

macro_rules! caller {
    ($name:ident, $ty:ty, $variant:expr) => {
        #[inline]
        pub fn $name() -> $ty {
            // SAFETY: the slot holds the address of the function named in NAMES, whose C
            // signature is $ty.
            unsafe { std::mem::transmute::<usize, $ty>(get($variant)) }
        }
    };
}

caller!(fn1_mutex_lock, Fn1, Real::MutexLock);
caller!(fn1_mutex_trylock, Fn1, Real::MutexTrylock);
caller!(fn2_mutex_timedlock, Fn2, Real::MutexTimedlock);
caller!(fnclock_mutex_clocklock, FnClock, Real::MutexClocklock);
caller!(fn1_mutex_unlock, Fn1, Real::MutexUnlock);
caller!(fn1_rw_rdlock, Fn1, Real::RwRdlock);
caller!(fn1_rw_tryrdlock, Fn1, Real::RwTryrdlock);
caller!(fn2_rw_timedrdlock, Fn2, Real::RwTimedrdlock);
caller!(fnclock_rw_clockrdlock, FnClock, Real::RwClockrdlock);
caller!(fn1_rw_wrlock, Fn1, Real::RwWrlock);
caller!(fn1_rw_trywrlock, Fn1, Real::RwTrywrlock);
caller!(fn2_rw_timedwrlock, Fn2, Real::RwTimedwrlock);
caller!(fnclock_rw_clockwrlock, FnClock, Real::RwClockwrlock);
caller!(fn1_rw_unlock, Fn1, Real::RwUnlock);
caller!(fn1_spin_lock, Fn1, Real::SpinLock);
caller!(fn1_spin_trylock, Fn1, Real::SpinTrylock);
caller!(fn1_spin_unlock, Fn1, Real::SpinUnlock);
caller!(fn2c_cond_wait, Fn2, Real::CondWait);
caller!(fn3_cond_timedwait, Fn3, Real::CondTimedwait);
caller!(fncondclock_cond_clockwait, FnCondClock, Real::CondClockwait);
caller!(fn1_barrier_wait, Fn1, Real::BarrierWait);
caller!(create, FnCreate, Real::Create);
caller!(fork, FnFork, Real::Fork);
