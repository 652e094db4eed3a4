//! Thin system helpers: the clock, reserved memory, errno kept around the runtime's own calls,
//! a line on stderr.

/// CLOCK_MONOTONIC in ns (vDSO: no system call).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn gettid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() as u32 }
}

pub fn getpid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::getpid() as u32 }
}

/// Restores the program's errno when dropped: the runtime's system calls must not change it.
pub struct KeepErrno(libc::c_int);

impl KeepErrno {
    #[inline]
    pub fn new() -> KeepErrno {
        // SAFETY: __errno_location returns this thread's errno.
        KeepErrno(unsafe { *libc::__errno_location() })
    }
}

impl Drop for KeepErrno {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// Reserves `len` bytes of zero-filled memory that costs nothing until touched (NORESERVE);
/// at `fixed` (replacing what is there) when given. None if the kernel refuses.
pub fn reserve(len: usize, fixed: Option<usize>) -> Option<usize> {
    let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
    if fixed.is_some() {
        flags |= libc::MAP_FIXED;
    }
    // SAFETY: an anonymous mapping; MAP_FIXED only over a mapping this runtime made.
    let p = unsafe {
        libc::mmap(
            fixed.unwrap_or(0) as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        None
    } else {
        Some(p as usize)
    }
}

pub fn release(addr: usize, len: usize) {
    // SAFETY: only called on mappings made by `reserve` that nothing uses any more.
    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
}

/// Gives the pages of [addr, addr+len) back (they read as zero again). Page-aligned ranges of
/// the runtime's own mappings only.
pub fn zero_pages(addr: usize, len: usize) {
    // SAFETY: as above; MADV_DONTNEED on private anonymous memory only drops its pages.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
}

/// `say` without allocating (async-signal-safe): the message in parts, written at once.
pub fn say_parts(parts: &[&[u8]]) {
    let mut line = [0u8; 1024];
    let mut len = 0;
    for part in [&b"contend sharing: "[..]]
        .iter()
        .chain(parts)
        .chain(&[&b"\n"[..]])
    {
        let n = part.len().min(line.len() - 1 - len);
        line[len..len + n].copy_from_slice(&part[..n]);
        len += n;
    }
    if line[len - 1] != b'\n' {
        line[len] = b'\n';
        len += 1;
    }
    let _keep = KeepErrno::new();
    // SAFETY: writing a buffer to fd 2.
    unsafe { libc::write(2, line.as_ptr().cast(), len) };
}

/// One line on stderr, `contend sharing: MESSAGE`.
pub fn say(message: &str) {
    let line = format!("contend sharing: {message}\n");
    let _keep = KeepErrno::new();
    // SAFETY: writing a buffer to fd 2.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}
