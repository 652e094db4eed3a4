//! The run's ring budget (`trace::ringbudget`), mapped from the rings directory the first time
//! a thread makes a ring. Mapped once per process (a forked child keeps its parent's mapping,
//! which is the same shared block); no allocation.

use crate::config;
use crate::thread::StackPath;
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};
use trace::ringbudget::{Budget, BUDGET_FILE, BUDGET_LEN};

static BLOCK: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
/// 0: not looked for yet; 1: mapped (BLOCK is set); 2: absent (a recorder without a budget).
static STATE: AtomicU8 = AtomicU8::new(0);

/// The budget, or `None` when the rings directory has none (then rings take the size asked
/// for, as before budgets existed).
pub fn get() -> Option<Budget> {
    match STATE.load(Ordering::Acquire) {
        1 => {
            let base = BLOCK.load(Ordering::Acquire);
            // SAFETY: published only after `Budget::new` accepted it; never unmapped.
            unsafe { Budget::new(base) }
        }
        2 => None,
        _ => map(),
    }
}

fn map() -> Option<Budget> {
    let mut path = StackPath::new();
    path.push(config::get().dir());
    path.push(b"/");
    path.push(BUDGET_FILE.as_bytes());
    path.push(b"\0");
    if path.overflowed() {
        STATE.store(2, Ordering::Release);
        return None;
    }
    // SAFETY: a NUL-terminated path; the fd is closed on every path below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        STATE.store(2, Ordering::Release);
        return None;
    }
    // SAFETY: fstat into a zeroed struct; mmap of an open fd, checked.
    let base = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        let ok = libc::fstat(fd, &mut st) == 0
            && (st.st_mode & libc::S_IFMT) == libc::S_IFREG
            && st.st_size == BUDGET_LEN as libc::off_t;
        let p = if ok {
            libc::mmap(
                std::ptr::null_mut(),
                BUDGET_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        libc::close(fd);
        p
    };
    if base == libc::MAP_FAILED {
        STATE.store(2, Ordering::Release);
        return None;
    }
    let base = base.cast::<u8>();
    // SAFETY: a shared mapping of BUDGET_LEN bytes, page-aligned, kept for the process's life.
    let Some(budget) = (unsafe { Budget::new(base) }) else {
        // SAFETY: our own mapping, not published.
        unsafe { libc::munmap(base.cast(), BUDGET_LEN) };
        STATE.store(2, Ordering::Release);
        return None;
    };
    // Two threads may race to map it: the first to publish wins, the other unmaps its copy.
    match BLOCK.compare_exchange(
        std::ptr::null_mut(),
        base,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {
            STATE.store(1, Ordering::Release);
            Some(budget)
        }
        Err(winner) => {
            // SAFETY: our own mapping, not published; the winner's is valid (see `get`).
            unsafe { libc::munmap(base.cast(), BUDGET_LEN) };
            unsafe { Budget::new(winner) }
        }
    }
}
