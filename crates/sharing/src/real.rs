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

    /// `get`, for a function libc defines, falling back to libc's own definition when
    /// RTLD_NEXT finds none: the runtime was loaded after libc (a dependency of an instrumented
    /// library that a program built without `contend cc` loads), so its interposed functions
    /// are not the ones the program calls, but the runtime calls the real ones itself. 0 when
    /// neither has it (or while `dlsym` is busy).
    pub fn get_or_libc(&self) -> usize {
        let v = self.get();
        if v != 0 || RESOLVING.load(Ordering::Acquire) {
            return v;
        }
        // SAFETY: NOLOAD returns the libc already loaded (or null); the handle is closed.
        let found = unsafe {
            let h = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
            if h.is_null() {
                return 0;
            }
            let f = libc::dlsym(h, self.name.as_ptr()) as usize;
            libc::dlclose(h);
            f
        };
        if found != 0 {
            self.slot.store(found, Ordering::Relaxed);
        }
        found
    }

    /// `require` with `get_or_libc`'s fallback.
    pub fn require_or_libc(&self) -> usize {
        let v = self.get_or_libc();
        if v != 0 {
            return v;
        }
        self.require()
    }

    /// The address if it was resolved, else 0; never resolves (async-signal-safe).
    pub fn cached(&self) -> usize {
        self.slot.load(Ordering::Relaxed)
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
