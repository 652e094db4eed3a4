//! Copies of `/proc/self/maps` into the rings directory (`<pid>-<instance>.maps`), so call sites
//! can be symbolised after the process is gone: once when a process records its first event,
//! and again at exit (to include libraries loaded with dlopen). Plain system calls, no malloc.

use crate::config;
use crate::thread::StackPath;
use std::sync::atomic::{AtomicU32, Ordering};

static SNAPSHOT_PID: AtomicU32 = AtomicU32::new(0);

pub fn snapshot_once(pid: u32) {
    if SNAPSHOT_PID.swap(pid, Ordering::AcqRel) != pid {
        snapshot(pid);
    }
}

pub fn forget_snapshot() {
    SNAPSHOT_PID.store(0, Ordering::Release);
}

/// Writes the snapshot (replacing an older one of this process).
pub fn snapshot(pid: u32) {
    let cfg = config::get();
    let mut path = StackPath::new();
    path.push(cfg.dir());
    path.push(b"/");
    path.push_num(u64::from(pid));
    path.push(b"-");
    path.push_num(cfg.instance);
    path.push(b".maps.tmp\0");
    let mut done = StackPath::new();
    done.push(&path.bytes()[..path.bytes().len() - b".tmp\0".len()]);
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
            libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
            0o600,
        );
        if dst < 0 {
            libc::close(src);
            return;
        }
        let mut buf = [0u8; 1024]; // small: this may run on a PTHREAD_STACK_MIN stack
        loop {
            let n = libc::read(src, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            if libc::write(dst, buf.as_ptr().cast(), n as usize) != n {
                break;
            }
        }
        libc::close(src);
        libc::close(dst);
        // Renamed into place so the recorder never reads half a snapshot.
        libc::rename(path.as_ptr(), done.as_ptr());
    }
}
