//! The probe's announcements, so that the recorder can tell "loaded, and saw no lock" from
//! "never loaded" (a statically linked or setuid program, LD_PRELOAD removed, the loader
//! refusing the library). Files in the rings directory's `marks/` (`trace::ring::MARKS_DIR`,
//! made by the recorder), private (0600), created once:
//!
//! - `<pid>-<instance>.probe`, empty: a process image the probe was loaded in, left at load
//!   (and by a forked child at its normal exit);
//! - `<pid>-<instance>.fork`: a forked child, left at the fork, holding its name then (its
//!   parent's). A child that then execs a program the probe cannot enter leaves nothing more,
//!   and its name changes: the recorder compares it with the name the sampler last saw. One
//!   that ends without exec'ing (often with `_exit`, which runs no destructor) keeps the name.
//!   A `vfork` or `posix_spawn` child runs no fork handler and leaves no mark: it execs at once,
//!   and the program it execs announces itself or not.
//!
//! Each is one `open`, at most one `write`, one `close`: async-signal-safe, as the fork child
//! handler must be.

use crate::config;
use crate::thread::StackPath;

/// Leaves `<pid>-<instance>.probe` (once per pid and image: a second call finds it there).
pub fn announce() {
    mark(b".probe\0", false);
}

/// In a forked child: leaves `<pid>-<instance>.fork` with the process's name.
pub fn announce_fork() {
    mark(b".fork\0", true);
}

fn mark(suffix: &[u8], with_name: bool) {
    if !config::recording() {
        return;
    }
    let cfg = config::get();
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let mut path = StackPath::new();
    path.push(cfg.dir());
    path.push(b"/");
    path.push(trace::ring::MARKS_DIR.as_bytes());
    path.push(b"/");
    path.push_num(u64::from(pid));
    path.push(b"-");
    path.push_num(cfg.instance);
    path.push(suffix);
    if path.overflowed() {
        return;
    }
    // The program's errno is its own, even at a fork or at exit.
    // SAFETY: __errno_location returns this thread's errno; the path is NUL-terminated; PR_GET_NAME
    // writes at most 16 bytes; the fd is closed at once.
    unsafe {
        let saved = *libc::__errno_location();
        let fd = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        );
        if fd >= 0 {
            if with_name {
                let mut name = [0u8; 16];
                libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr());
                let n = name.iter().position(|&b| b == 0).unwrap_or(16);
                libc::write(fd, name.as_ptr().cast(), n);
            }
            libc::close(fd);
        }
        *libc::__errno_location() = saved;
    }
}
