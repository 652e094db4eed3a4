//! What the recorder asked for, read from the environment once, in the library's constructor,
//! before the program's threads exist. Nothing here allocates after that.
//!
//! - `CONTEND_RINGS=DIR`: record into rings in DIR (absent: the probe only passes calls on);
//! - `CONTEND_RING_KB=N`: each thread's ring, in KiB (rounded up to a power of two; default 1024);
//! - `CONTEND_CLOCK=tsc|monotonic`: the time source (the recorder checks the TSC is invariant);
//! - `CONTEND_LOCK_SAMPLE=N`: record one in N uncontended acquisitions (default 1: all);
//! - `CONTEND_ALLOC_SITES=1`: record heap allocations too (to name heap locks by theirs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The rings directory's path, at most: it is copied into stack buffers, and threads may run on
/// stacks as small as PTHREAD_STACK_MIN (16 KiB).
pub const MAX_DIR: usize = 400;

pub struct Config {
    dir: [u8; MAX_DIR],
    dir_len: usize,
    pub ring_bytes: u64,
    /// Distinguishes this load of the probe from an earlier image of the same process (exec
    /// keeps the pid): part of every ring's file name.
    pub instance: u64,
}

static mut CONFIG: Config = Config {
    dir: [0; MAX_DIR],
    dir_len: 0,
    ring_bytes: 1 << 20,
    instance: 0,
};
static RECORDING: AtomicBool = AtomicBool::new(false);
static ALLOC_SITES: AtomicBool = AtomicBool::new(false);
static READY: AtomicU64 = AtomicU64::new(0);

fn env(name: &[u8]) -> Option<&'static [u8]> {
    // SAFETY: a NUL-terminated name; getenv's result lives as long as the environment, which the
    // probe reads only at start-up before anything could change it.
    let p = unsafe { libc::getenv(name.as_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    Some(unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
}

fn parse_u64(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok()?.trim().parse().ok()
}

/// Reads the environment; called once from the constructor.
pub fn load() {
    if READY.swap(1, Ordering::AcqRel) != 0 {
        return;
    }
    let Some(dir) = env(b"CONTEND_RINGS\0") else {
        return;
    };
    if dir.is_empty() || dir.len() >= MAX_DIR {
        return;
    }
    let kib = env(b"CONTEND_RING_KB\0")
        .and_then(parse_u64)
        .unwrap_or(1024);
    let bytes = (kib.clamp(4, 1 << 20) * 1024).next_power_of_two();
    let tsc = env(b"CONTEND_CLOCK\0") == Some(b"tsc".as_slice());
    let every = env(b"CONTEND_LOCK_SAMPLE\0")
        .and_then(parse_u64)
        .unwrap_or(1);
    crate::sampler::set_every(every.clamp(1, u64::from(u32::MAX)) as u32);
    crate::clock::use_counter(tsc);
    // SAFETY: written once here, before any thread the program creates can read it (the
    // constructor runs before main), and only read afterwards.
    unsafe {
        let c = &mut *std::ptr::addr_of_mut!(CONFIG);
        c.dir[..dir.len()].copy_from_slice(dir);
        c.dir_len = dir.len();
        c.ring_bytes = bytes;
        c.instance = crate::clock::monotonic_ns();
    }
    ALLOC_SITES.store(
        env(b"CONTEND_ALLOC_SITES\0") == Some(b"1".as_slice()),
        Ordering::Relaxed,
    );
    RECORDING.store(true, Ordering::Release);
}

/// Whether heap allocations are recorded (only ever true while recording).
#[inline]
pub fn alloc_sites() -> bool {
    ALLOC_SITES.load(Ordering::Relaxed)
}

#[inline]
pub fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

pub fn get() -> &'static Config {
    // SAFETY: only written in `load`, before `recording()` turns true.
    unsafe { &*std::ptr::addr_of!(CONFIG) }
}

impl Config {
    pub fn dir(&self) -> &[u8] {
        &self.dir[..self.dir_len]
    }
}
