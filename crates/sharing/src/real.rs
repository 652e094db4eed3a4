//! The real functions behind the interposed ones, found with `dlsym(RTLD_NEXT)` (so another
//! interposer loaded after this library, e.g. a replacement allocator, keeps serving the
//! program). Resolved in the constructor; a call before that resolves on the spot. `dlsym` may
//! itself call interposed functions (malloc, calloc): while any resolution runs, `get` returns
//! 0 and the caller uses its fallback (glibc's `__libc_*`, a copy loop, a `__pthread_*` alias).

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub struct Real {
    name: &'static CStr,
    slot: AtomicUsize,
}

static RESOLVING: AtomicBool = AtomicBool::new(false);

impl Real {
    pub const fn new(name: &'static CStr) -> Real {
        Real {
            name,
            slot: AtomicUsize::new(0),
        }
    }

    /// The real function's address, or 0 while `dlsym` is busy (use the fallback).
    #[inline(always)]
    pub fn get(&self) -> usize {
        let v = self.slot.load(Ordering::Relaxed);
        if v != 0 {
            return v;
        }
        self.resolve()
    }

    #[cold]
    #[inline(never)]
    pub fn resolve(&self) -> usize {
        if RESOLVING.swap(true, Ordering::Acquire) {
            return 0;
        }
        let _keep = crate::sys::KeepErrno::new();
        // SAFETY: a NUL-terminated name; RTLD_NEXT is valid in a shared object.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        RESOLVING.store(false, Ordering::Release);
        self.slot.store(found, Ordering::Relaxed);
        found
    }

    /// The address, waiting for another thread's resolution; aborts with a message if the
    /// function does not exist (returning without doing the call would corrupt the program).
    pub fn require(&self) -> usize {
        loop {
            let v = self.get();
            if v != 0 {
                return v;
            }
            if !RESOLVING.load(Ordering::Acquire) {
                let v = self.resolve();
                if v != 0 {
                    return v;
                }
                if !RESOLVING.load(Ordering::Acquire) {
                    crate::sys::say(&format!(
                        "cannot find the real {}; aborting",
                        self.name.to_string_lossy()
                    ));
                    // SAFETY: no preconditions.
                    unsafe { libc::abort() };
                }
            }
            std::hint::spin_loop();
        }
    }

    /// A fallback by name in the default scope (glibc's own aliases), or 0.
    pub fn alias(name: &CStr) -> usize {
        // SAFETY: a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
    }
}
