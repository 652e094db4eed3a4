//! Copies of `/proc/self/maps` into the rings directory (`<pid>-<instance>.maps`), so call sites
//! can be symbolised after the process is gone: once when a process records its first event,
//! and again at exit (to include libraries loaded with dlopen). Plain system calls, no malloc.

use crate::config;
use crate::thread::StackPath;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

static SNAPSHOT_PID: AtomicU32 = AtomicU32::new(0);

pub fn snapshot_once(pid: u32) {
    if SNAPSHOT_PID.swap(pid, Ordering::AcqRel) != pid {
        snapshot(pid);
    }
}

pub fn forget_snapshot() {
    SNAPSHOT_PID.store(0, Ordering::Release);
}

/// Numbers this process's temporary snapshot files: each name is new, so it can be created
/// `O_EXCL` (a forked child has another pid, hence other names).
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Writes the snapshot (replacing an older one of this process): into a file of a name never
/// used before, created `O_CREAT|O_EXCL|O_NOFOLLOW` (nothing that exists, not even a symlink,
/// is written through), then renamed into place.
pub fn snapshot(pid: u32) {
    let cfg = config::get();
    let mut done = StackPath::new();
    done.push(cfg.dir());
    done.push(b"/");
    done.push_num(u64::from(pid));
    done.push(b"-");
    done.push_num(cfg.instance);
    done.push(b".maps");
    let mut path = StackPath::new();
    path.push(done.bytes());
    path.push(b".");
    path.push_num(TMP_SEQ.fetch_add(1, Ordering::Relaxed));
    path.push(b".tmp\0");
    done.push(b"\0");
    if path.overflowed() || done.overflowed() {
        return;
    }
    // SAFETY: NUL-terminated paths; every fd is closed; errors just leave no snapshot.
    unsafe {
        let src = libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if src < 0 {
            return;
        }
        let dst = libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        );
        if dst < 0 {
            libc::close(src);
            return;
        }
        let mut buf = [0u8; 1024]; // small: this may run on a PTHREAD_STACK_MIN stack
        let mut complete = true;
        loop {
            let n = libc::read(src, buf.as_mut_ptr().cast(), buf.len());
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n < 0 {
                complete = false;
            }
            if n <= 0 {
                break;
            }
            if libc::write(dst, buf.as_ptr().cast(), n as usize) != n {
                complete = false;
                break;
            }
        }
        libc::close(src);
        libc::close(dst);
        // Renamed into place so the recorder never reads half a snapshot (rename replaces
        // whatever has the name, a symlink included, without following it).
        if !complete || libc::rename(path.as_ptr(), done.as_ptr()) != 0 {
            libc::unlink(path.as_ptr());
        }
    }
}
