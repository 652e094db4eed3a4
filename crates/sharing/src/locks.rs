//! pthread locks. glibc's lock code is not instrumented, so a lock word sharing a line with hot
//! data would be invisible; each lock operation is recorded as an atomic write of 4 bytes at the
//! lock object's address (the lock word: every acquire and release is an atomic
//! read-modify-write of it), from the program's call site. Acquisitions are recorded after the
//! real call returns (when the word was taken), releases before the real call (while the
//! thread still owns it); a try that fails still wrote the word (an atomic compare-exchange).

use crate::access::{access, Kind};
use crate::real::Real;
use crate::trampoline::entry;
use libc::{c_int, c_void};
use std::ffi::CStr;

type Ptr = *mut c_void;
type Fn1 = unsafe extern "C" fn(Ptr) -> c_int;

/// A real lock function, with glibc's internal alias to use while `dlsym` is busy.
struct Lock {
    real: Real,
    alias: &'static CStr,
}

impl Lock {
    const fn new(name: &'static CStr, alias: &'static CStr) -> Lock {
        Lock {
            real: Real::new(name),
            alias,
        }
    }

    #[inline]
    fn call(&self, l: Ptr) -> c_int {
        let mut p = self.real.get();
        if p == 0 {
            p = if self.alias.is_empty() {
                self.real.require()
            } else {
                Real::alias(self.alias)
            };
        }
        // SAFETY: the real function (or glibc's alias of it) of this signature, with the
        // program's argument.
        unsafe { std::mem::transmute::<usize, Fn1>(p)(l) }
    }
}

static MUTEX_LOCK: Lock = Lock::new(c"pthread_mutex_lock", c"__pthread_mutex_lock");
static MUTEX_TRYLOCK: Lock = Lock::new(c"pthread_mutex_trylock", c"__pthread_mutex_trylock");
static MUTEX_UNLOCK: Lock = Lock::new(c"pthread_mutex_unlock", c"__pthread_mutex_unlock");
static RW_RDLOCK: Lock = Lock::new(c"pthread_rwlock_rdlock", c"__pthread_rwlock_rdlock");
static RW_WRLOCK: Lock = Lock::new(c"pthread_rwlock_wrlock", c"__pthread_rwlock_wrlock");
static RW_TRYRDLOCK: Lock = Lock::new(c"pthread_rwlock_tryrdlock", c"__pthread_rwlock_tryrdlock");
static RW_TRYWRLOCK: Lock = Lock::new(c"pthread_rwlock_trywrlock", c"__pthread_rwlock_trywrlock");
static RW_UNLOCK: Lock = Lock::new(c"pthread_rwlock_unlock", c"__pthread_rwlock_unlock");
static SPIN_LOCK: Lock = Lock::new(c"pthread_spin_lock", c"");
static SPIN_TRYLOCK: Lock = Lock::new(c"pthread_spin_trylock", c"");
static SPIN_UNLOCK: Lock = Lock::new(c"pthread_spin_unlock", c"");

const ALL: [&Lock; 11] = [
    &MUTEX_LOCK,
    &MUTEX_TRYLOCK,
    &MUTEX_UNLOCK,
    &RW_RDLOCK,
    &RW_WRLOCK,
    &RW_TRYRDLOCK,
    &RW_TRYWRLOCK,
    &RW_UNLOCK,
    &SPIN_LOCK,
    &SPIN_TRYLOCK,
    &SPIN_UNLOCK,
];

pub fn resolve() {
    for l in ALL {
        l.real.get();
    }
}

macro_rules! acquire {
    ($($sym:ident $work:ident $lock:ident;)*) => {$(
        extern "C" fn $work(l: Ptr, pc: usize) -> c_int {
            let r = $lock.call(l);
            access(l as usize, 4, Kind::AtomicWrite, pc);
            r
        }
        entry!($sym, $work, "rsi", "x1");
    )*};
}

macro_rules! release {
    ($($sym:ident $work:ident $lock:ident;)*) => {$(
        extern "C" fn $work(l: Ptr, pc: usize) -> c_int {
            access(l as usize, 4, Kind::AtomicWrite, pc);
            $lock.call(l)
        }
        entry!($sym, $work, "rsi", "x1");
    )*};
}

acquire! {
    pthread_mutex_lock mutex_lock MUTEX_LOCK;
    pthread_mutex_trylock mutex_trylock MUTEX_TRYLOCK;
    pthread_rwlock_rdlock rw_rdlock RW_RDLOCK;
    pthread_rwlock_wrlock rw_wrlock RW_WRLOCK;
    pthread_rwlock_tryrdlock rw_tryrdlock RW_TRYRDLOCK;
    pthread_rwlock_trywrlock rw_trywrlock RW_TRYWRLOCK;
    pthread_spin_lock spin_lock SPIN_LOCK;
    pthread_spin_trylock spin_trylock SPIN_TRYLOCK;
}

release! {
    pthread_mutex_unlock mutex_unlock MUTEX_UNLOCK;
    pthread_rwlock_unlock rw_unlock RW_UNLOCK;
    pthread_spin_unlock spin_unlock SPIN_UNLOCK;
}
