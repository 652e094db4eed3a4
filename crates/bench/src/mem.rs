//! `contend bench mem`: memory bandwidth (STREAM: Copy, Scale, Add, Triad, as McCalpin's
//! stream.c counts bytes) and the thesis's memory contention generator (the MCG, §4.1.4:
//! threads streaming to memory with non-temporal stores, flat out or at a set rate).
//!
//! Arrays are mapped anonymously (page-aligned, so 16-byte non-temporal stores are aligned)
//! and first touched by the thread that uses each part, as STREAM's OpenMP initialisation does.
//! Threads are pinned; each owns a contiguous part of every array (a multiple of 8 elements,
//! one cache line).

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// STREAM's scalar.
pub const SCALAR: f64 = 3.0;

/// Whether explicit non-temporal stores are built for this architecture.
pub const NT_AVAILABLE: bool = cfg!(target_arch = "x86_64");

/// An anonymous mapping of `len` f64s, unmapped on drop.
struct Buf {
    ptr: *mut f64,
    len: usize,
}

// SAFETY: threads use disjoint ranges of the buffer (see `part`).
unsafe impl Send for Buf {}
// SAFETY: as above.
unsafe impl Sync for Buf {}

impl Buf {
    fn new(len: usize) -> Result<Buf, String> {
        let bytes = len.max(1) * 8;
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mapping {bytes} bytes: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Buf { ptr: p.cast(), len })
    }

    /// Elements `lo..hi`, for the one thread that owns them.
    ///
    /// # Safety
    /// No other live slice of this buffer may overlap `lo..hi`.
    #[allow(clippy::mut_from_ref)]
    unsafe fn part(&self, lo: usize, hi: usize) -> &mut [f64] {
        debug_assert!(lo <= hi && hi <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.add(lo), hi - lo)
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len.max(1) * 8) };
    }
}

/// Splits `n` elements into `threads` contiguous parts, each boundary a multiple of 8.
pub fn parts(n: usize, threads: usize) -> Vec<(usize, usize)> {
    let threads = threads.max(1);
    let lines = n / 8;
    (0..threads)
        .map(|t| {
            let lo = lines * t / threads * 8;
            let hi = if t + 1 == threads {
                n
            } else {
                lines * (t + 1) / threads * 8
            };
            (lo, hi)
        })
        .collect()
}

/// The four kernels, in STREAM's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum Kernel {
    Copy,
    Scale,
    Add,
    Triad,
}

impl Kernel {
    pub const ALL: [Kernel; 4] = [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad];

    /// Bytes moved per element as STREAM counts them: each array read or written once, 8 bytes
    /// each (write-allocate reads not counted).
    pub fn bytes_per_element(self) -> u64 {
        match self {
            Kernel::Copy | Kernel::Scale => 16,
            Kernel::Add | Kernel::Triad => 24,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "Copy",
            Kernel::Scale => "Scale",
            Kernel::Add => "Add",
            Kernel::Triad => "Triad",
        }
    }
}

/// Elements per plain copy chunk: `copy_from_slice` of 32 KiB stays below the size where the
/// C library's memcpy switches to non-temporal stores, so the plain Copy uses ordinary stores.
const COPY_CHUNK: usize = 4096;

fn copy(a: &[f64], c: &mut [f64]) {
    for (c, a) in c.chunks_mut(COPY_CHUNK).zip(a.chunks(COPY_CHUNK)) {
        c.copy_from_slice(a);
    }
}

#[inline(never)]
fn scale(c: &[f64], b: &mut [f64]) {
    for (b, c) in b.iter_mut().zip(c) {
        *b = SCALAR * *c;
    }
}

#[inline(never)]
fn add(a: &[f64], b: &[f64], c: &mut [f64]) {
    for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
        *c = *a + *b;
    }
}

#[inline(never)]
fn triad(b: &[f64], c: &[f64], a: &mut [f64]) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = *b + SCALAR * *c;
    }
}

/// The non-temporal kernels: 16-byte `movntpd` stores (SSE2, always present on x86-64), four
/// per 64-byte line, then `sfence`. Destinations are 16-byte aligned (page-aligned mappings,
/// parts a multiple of 8 elements); a tail shorter than 2 elements is stored normally.
#[cfg(target_arch = "x86_64")]
mod nt {
    use super::SCALAR;
    use core::arch::x86_64::*;

    #[inline(never)]
    pub fn copy_nt(a: &[f64], c: &mut [f64]) {
        let n = c.len().min(a.len());
        let (pa, pc) = (a.as_ptr(), c.as_mut_ptr());
        let mut j = 0;
        // SAFETY: j + 2 <= n keeps every 16-byte access inside both slices; pc + j is 16-byte
        // aligned (see the module comment).
        unsafe {
            while j + 2 <= n {
                _mm_stream_pd(pc.add(j), _mm_loadu_pd(pa.add(j)));
                j += 2;
            }
            _mm_sfence();
        }
        c[j..n].copy_from_slice(&a[j..n]);
    }

    #[inline(never)]
    pub fn scale_nt(c: &[f64], b: &mut [f64]) {
        let n = b.len().min(c.len());
        let (pc, pb) = (c.as_ptr(), b.as_mut_ptr());
        let mut j = 0;
        // SAFETY: as in copy_nt.
        unsafe {
            let s = _mm_set1_pd(SCALAR);
            while j + 2 <= n {
                _mm_stream_pd(pb.add(j), _mm_mul_pd(s, _mm_loadu_pd(pc.add(j))));
                j += 2;
            }
            _mm_sfence();
        }
        for k in j..n {
            b[k] = SCALAR * c[k];
        }
    }

    #[inline(never)]
    pub fn add_nt(a: &[f64], b: &[f64], c: &mut [f64]) {
        let n = c.len().min(a.len()).min(b.len());
        let (pa, pb, pc) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        let mut j = 0;
        // SAFETY: as in copy_nt.
        unsafe {
            while j + 2 <= n {
                _mm_stream_pd(
                    pc.add(j),
                    _mm_add_pd(_mm_loadu_pd(pa.add(j)), _mm_loadu_pd(pb.add(j))),
                );
                j += 2;
            }
            _mm_sfence();
        }
        for k in j..n {
            c[k] = a[k] + b[k];
        }
    }

    #[inline(never)]
    pub fn triad_nt(b: &[f64], c: &[f64], a: &mut [f64]) {
        let n = a.len().min(b.len()).min(c.len());
        let (pa, pb, pc) = (a.as_mut_ptr(), b.as_ptr(), c.as_ptr());
        let mut j = 0;
        // SAFETY: as in copy_nt.
        unsafe {
            let s = _mm_set1_pd(SCALAR);
            while j + 2 <= n {
                _mm_stream_pd(
                    pa.add(j),
                    _mm_add_pd(
                        _mm_loadu_pd(pb.add(j)),
                        _mm_mul_pd(s, _mm_loadu_pd(pc.add(j))),
                    ),
                );
                j += 2;
            }
            _mm_sfence();
        }
        for k in j..n {
            a[k] = b[k] + SCALAR * c[k];
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod nt {
    pub fn copy_nt(a: &[f64], c: &mut [f64]) {
        super::copy(a, c)
    }
    pub fn scale_nt(c: &[f64], b: &mut [f64]) {
        super::scale(c, b)
    }
    pub fn add_nt(a: &[f64], b: &[f64], c: &mut [f64]) {
        super::add(a, b, c)
    }
    pub fn triad_nt(b: &[f64], c: &[f64], a: &mut [f64]) {
        super::triad(b, c, a)
    }
}

/// What `stream` runs.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Elements per array (f64).
    pub elements: usize,
    /// One thread per entry, pinned to that CPU.
    pub cpus: Vec<u32>,
    /// Non-temporal stores.
    pub nt: bool,
    /// Times each kernel runs (STREAM's NTIMES); the first is not counted.
    pub ntimes: u32,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct KernelResult {
    pub kernel: Kernel,
    /// Bytes per run as STREAM counts them.
    pub bytes: u64,
    /// Best rate, GB/s (10⁹ bytes per second): bytes / min time.
    pub best_gb_s: f64,
    pub avg_s: f64,
    pub min_s: f64,
    pub max_s: f64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Validation {
    pub passed: bool,
    /// Mean absolute error per element of a, b and c relative to the expected value.
    pub relative_error: [f64; 3],
    pub epsilon: f64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StreamResult {
    pub elements: usize,
    pub array_bytes: u64,
    /// The sum of the machine's last-level caches, bytes (set by the caller, from the Topology).
    pub llc_total_bytes: Option<u64>,
    pub threads: usize,
    pub cpus: Vec<u32>,
    pub nt: bool,
    pub ntimes: u32,
    pub kernels: Vec<KernelResult>,
    pub validation: Validation,
    pub notes: Vec<String>,
}

fn pin(cpu: u32) -> Result<(), String> {
    crate::ctx::pin_self(cpu).map_err(|e| {
        format!(
            "pinning to CPU {cpu}: {}",
            std::io::Error::from_raw_os_error(e)
        )
    })
}

/// STREAM's expected values after `ntimes` of the four kernels, from a = 1, b = 2, c = 0.
fn expected(ntimes: u32) -> [f64; 3] {
    let (mut a, mut b, mut c) = (1.0f64, 2.0f64, 0.0f64);
    for _ in 0..ntimes {
        c = a;
        b = SCALAR * c;
        c = a + b;
        a = b + SCALAR * c;
    }
    [a, b, c]
}

/// Runs STREAM; `progress` is called after each kernel run.
pub fn stream(cfg: &StreamConfig, progress: &mut dyn FnMut(&str)) -> Result<StreamResult, String> {
    let n = cfg.elements;
    let (a, b, c) = (Buf::new(n)?, Buf::new(n)?, Buf::new(n)?);
    let ranges = parts(n, cfg.cpus.len());
    let threads = cfg.cpus.len();
    let command = AtomicU8::new(0);
    let barrier = Barrier::new(threads + 1);
    let failed: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); 4];
    std::thread::scope(|s| {
        for (t, &(lo, hi)) in ranges.iter().enumerate() {
            let cpu = cfg.cpus[t];
            let (a, b, c, command, barrier, failed) = (&a, &b, &c, &command, &barrier, &failed);
            let nt = cfg.nt;
            s.spawn(move || {
                if let Err(e) = pin(cpu) {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                }
                // SAFETY: this thread's range is disjoint from every other thread's.
                let (a, b, c) = unsafe { (a.part(lo, hi), b.part(lo, hi), c.part(lo, hi)) };
                loop {
                    barrier.wait();
                    match command.load(Ordering::Acquire) {
                        1 => {
                            a.fill(1.0);
                            b.fill(2.0);
                            c.fill(0.0);
                        }
                        2 if nt => nt::copy_nt(a, c),
                        2 => copy(a, c),
                        3 if nt => nt::scale_nt(c, b),
                        3 => scale(c, b),
                        4 if nt => nt::add_nt(a, b, c),
                        4 => add(a, b, c),
                        5 if nt => nt::triad_nt(b, c, a),
                        5 => triad(b, c, a),
                        _ => break,
                    }
                    barrier.wait();
                }
            });
        }
        let run = |cmd: u8| -> f64 {
            command.store(cmd, Ordering::Release);
            let start = Instant::now();
            barrier.wait();
            barrier.wait();
            start.elapsed().as_secs_f64()
        };
        run(1);
        for k in 0..cfg.ntimes {
            for (i, kernel) in Kernel::ALL.iter().enumerate() {
                let t = run(2 + i as u8);
                if k > 0 {
                    times[i].push(t);
                }
                progress(kernel.name());
            }
        }
        command.store(0, Ordering::Release);
        barrier.wait();
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let kernels = Kernel::ALL
        .iter()
        .zip(&times)
        .map(|(&kernel, t)| {
            let bytes = kernel.bytes_per_element() * n as u64;
            let min = t.iter().copied().fold(f64::INFINITY, f64::min);
            let max = t.iter().copied().fold(0.0, f64::max);
            let avg = t.iter().sum::<f64>() / t.len().max(1) as f64;
            KernelResult {
                kernel,
                bytes,
                best_gb_s: bytes as f64 / min / 1e9,
                avg_s: avg,
                min_s: min,
                max_s: max,
            }
        })
        .collect();
    // STREAM's check: the mean absolute error of each array against the value the kernels
    // should have produced, relative to it, below 1e-13 (double precision).
    let expect = expected(cfg.ntimes);
    let mut err = [0.0f64; 3];
    for (i, buf) in [&a, &b, &c].into_iter().enumerate() {
        // SAFETY: every thread has finished; this is the only slice.
        let v = unsafe { buf.part(0, n) };
        let sum: f64 = v.iter().map(|x| (x - expect[i]).abs()).sum();
        err[i] = sum / n.max(1) as f64 / expect[i].abs();
    }
    let epsilon = 1e-13;
    Ok(StreamResult {
        elements: n,
        array_bytes: n as u64 * 8,
        llc_total_bytes: None,
        threads,
        cpus: cfg.cpus.clone(),
        nt: cfg.nt,
        ntimes: cfg.ntimes,
        kernels,
        validation: Validation {
            passed: err.iter().all(|e| *e <= epsilon),
            relative_error: err,
            epsilon,
        },
        notes: Vec::new(),
    })
}

/// `MemAvailable` from /proc/meminfo, in bytes: what a buffer can take without swapping.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|k| k * 1024)
}

/// The sum of the last-level caches' sizes over the whole machine, KiB (STREAM's rule: each
/// array at least 4 times this).
pub fn llc_total_kib(machine: &topology::Topology) -> Option<u64> {
    let level = machine
        .caches
        .iter()
        .filter(|c| c.kind != topology::CacheKind::Instruction)
        .map(|c| c.level)
        .max()?;
    let total: u64 = machine
        .caches
        .iter()
        .filter(|c| c.level == level && c.kind != topology::CacheKind::Instruction)
        .filter_map(|c| c.size_kib)
        .sum();
    (total > 0).then_some(total)
}

/// What `generate` runs.
#[derive(Debug, Clone)]
pub struct GenerateConfig {
    pub cpus: Vec<u32>,
    /// Target rate over all threads, GB/s; `None`: flat out.
    pub rate_gb_s: Option<f64>,
    /// `None`: until `stop` is set.
    pub duration: Option<Duration>,
    /// Each thread's source and destination, elements each.
    pub elements_per_thread: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GenerateResult {
    pub cpus: Vec<u32>,
    pub target_gb_s: Option<f64>,
    pub seconds: f64,
    /// Bytes read and written (16 per element copied, as STREAM's Copy counts).
    pub bytes: u64,
    pub achieved_gb_s: f64,
    /// Per thread, GB/s.
    pub per_thread_gb_s: Vec<f64>,
    pub buffer_bytes_per_thread: u64,
}

/// Bytes a thread moves between checks of the clock (copying 32 KiB, 64 KiB counted).
const GEN_CHUNK: usize = 4096;

/// The MCG: each thread copies its source to its destination with non-temporal stores, over
/// and over, in chunks; with a target rate it sleeps whenever it is ahead of
/// `bytes / (rate / threads)`, so the average over the run is the target. `progress` is called
/// about every 100 ms with the bytes moved so far.
pub fn generate(
    cfg: &GenerateConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64, u64),
) -> Result<GenerateResult, String> {
    let threads = cfg.cpus.len();
    let per_thread_rate = cfg.rate_gb_s.map(|r| r * 1e9 / threads as f64);
    let moved: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    // Each thread's own running time, ns, stored when it stops.
    let ran_ns: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let failed: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let n = cfg.elements_per_thread.max(GEN_CHUNK);
    let done = AtomicBool::new(false);
    let start_barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for (t, &cpu) in cfg.cpus.iter().enumerate() {
            let (moved, ran_ns, failed, done, start_barrier) =
                (&moved[t], &ran_ns[t], &failed, &done, &start_barrier);
            s.spawn(move || {
                let setup = (|| -> Result<(Buf, Buf), String> {
                    pin(cpu)?;
                    let (src, dst) = (Buf::new(n)?, Buf::new(n)?);
                    // SAFETY: both buffers are this thread's alone.
                    unsafe {
                        src.part(0, n).fill(1.0);
                        dst.part(0, n).fill(0.0);
                    }
                    Ok((src, dst))
                })();
                // Fine-grained sleeps: 1 µs timer slack instead of 50 µs.
                // SAFETY: prctl with an integer argument.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000u64) };
                start_barrier.wait();
                let (src, dst) = match setup {
                    Ok(b) => b,
                    Err(e) => {
                        *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        return;
                    }
                };
                // SAFETY: as above.
                let (src, dst) = unsafe { (src.part(0, n), dst.part(0, n)) };
                let begin = Instant::now();
                let mut bytes = 0u64;
                let mut at = 0usize;
                while !done.load(Ordering::Relaxed) {
                    let hi = (at + GEN_CHUNK).min(n);
                    nt::copy_nt(&src[at..hi], &mut dst[at..hi]);
                    bytes += ((hi - at) * 16) as u64;
                    at = if hi == n { 0 } else { hi };
                    moved.store(bytes, Ordering::Relaxed);
                    if let Some(rate) = per_thread_rate {
                        let due = Duration::from_secs_f64(bytes as f64 / rate);
                        let now = begin.elapsed();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                    }
                }
                ran_ns.store(begin.elapsed().as_nanos() as u64, Ordering::Relaxed);
            });
        }
        start_barrier.wait();
        let start = Instant::now();
        let mut last = Instant::now();
        loop {
            let t = start.elapsed();
            if stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| t >= d) {
                break;
            }
            if last.elapsed() >= Duration::from_millis(100) {
                last = Instant::now();
                progress(
                    t.as_secs_f64(),
                    moved.iter().map(|m| m.load(Ordering::Relaxed)).sum(),
                );
            }
            let left = cfg
                .duration
                .map_or(Duration::from_millis(10), |d| d.saturating_sub(t));
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
        done.store(true, Ordering::Relaxed);
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    // Each thread's rate over its own running time (from the start barrier to the moment it
    // saw the stop); the total is their sum.
    let per_thread_gb_s: Vec<f64> = moved
        .iter()
        .zip(&ran_ns)
        .map(|(m, t)| m.load(Ordering::Relaxed) as f64 / (t.load(Ordering::Relaxed).max(1) as f64))
        .collect();
    let seconds = ran_ns
        .iter()
        .map(|t| t.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0) as f64
        / 1e9;
    Ok(GenerateResult {
        cpus: cfg.cpus.clone(),
        target_gb_s: cfg.rate_gb_s,
        seconds,
        bytes: moved.iter().map(|m| m.load(Ordering::Relaxed)).sum(),
        achieved_gb_s: per_thread_gb_s.iter().sum(),
        per_thread_gb_s,
        buffer_bytes_per_thread: (n * 8) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_everything_on_line_boundaries() {
        for (n, t) in [(1000, 3), (8, 2), (17, 1), (1 << 20, 7)] {
            let p = parts(n, t);
            assert_eq!(p.len(), t);
            assert_eq!(p[0].0, 0);
            assert_eq!(p[t - 1].1, n);
            for w in p.windows(2) {
                assert_eq!(w[0].1, w[1].0);
                assert_eq!(w[0].1 % 8, 0);
            }
        }
    }

    #[test]
    fn kernels_compute_stream_s_values_with_and_without_nt() {
        for nt in [false, true] {
            let cfg = StreamConfig {
                elements: 10_001,
                cpus: vec![crate::ctx::allowed_cpus()[0]],
                nt,
                ntimes: 3,
            };
            let r = stream(&cfg, &mut |_| {}).unwrap();
            assert!(r.validation.passed, "{:?}", r.validation);
            assert_eq!(r.kernels[0].bytes, 16 * 10_001);
            assert_eq!(r.kernels[3].bytes, 24 * 10_001);
        }
        // By hand: one round from a = 1, b = 2, c = 0 gives c = 1 + 3, b = 3, a = 3 + 12.
        assert_eq!(expected(1), [15.0, 3.0, 4.0]);
    }
}
