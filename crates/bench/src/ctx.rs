//! `contend bench ctx`: lmbench's lat_ctx. A ring of N processes (or threads) connected by
//! pipes passes a token; each member reads it, sums its private array (polluting the data and
//! instruction caches), and writes it on. The time per hop minus the overhead (one process
//! doing the same pipe write and read and the same summing with hot caches) is the context
//! switch time. lmbench reports the median of the repetitions; so do we, with the spread.
//!
//! Ring layout: pipe `i` is written by member `i − 1` and read by member `i`; member 0 is a
//! thread of this process that times the round trips. In process mode members 1..N are forked
//! children that only read, sum, write and `_exit` (no allocation after `fork`), each with
//! `PR_SET_PDEATHSIG` so none outlives contend. Teardown closes member 0's ends: every member
//! sees end-of-file in turn and exits. A member that dies breaks the ring the same way, and the
//! error names it.

use analysis::stats::Spread;
use serde::Serialize;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Words summed by one pass of the unrolled body (4 KiB of data, about 2 000 instructions).
pub const BLOCK_WORDS: usize = 1024;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Ring sizes (members per ring), each ≥ 2.
    pub procs: Vec<u32>,
    /// Private array per member, KiB (0: no work, only the token).
    pub sizes_kib: Vec<u32>,
    /// Rings running at once (lmbench's -P).
    pub parallel: u32,
    /// Repetitions run first and not counted (-W).
    pub warmup: u32,
    /// Counted repetitions (-N); the figure is their median.
    pub repetitions: u32,
    /// Threads of this process instead of forked processes.
    pub threads: bool,
    /// CPUs to pin to, in order: member `i` of ring `r` runs on `cpus[(r·N + i) mod len]`
    /// (`None`: not pinned).
    pub cpus: Option<Vec<u32>>,
    /// Target duration of one repetition.
    pub rep_time: Duration,
}

impl Config {
    /// Progress steps: for each size the overhead, then each ring size, each W + N repetitions.
    pub fn steps(&self) -> u64 {
        self.sizes_kib.len() as u64
            * (1 + self.procs.len() as u64)
            * u64::from(self.warmup + self.repetitions)
    }
}

/// The CPU of member `member` of ring `ring` (rings of `procs` members), or `None` unpinned.
pub fn cpu_of(cpus: Option<&[u32]>, ring: u32, member: u32, procs: u32) -> Option<u32> {
    let cpus = cpus.filter(|c| !c.is_empty())?;
    let g = (ring as usize) * (procs as usize) + member as usize;
    Some(cpus[g % cpus.len()])
}

/// Where the ring ran, in words: "all members on CPU 0", "members alternate over CPUs 0,1"...
pub fn placement_text(cpus: Option<&[u32]>, allowed: &str) -> String {
    match cpus {
        None => format!("not pinned: members free on CPUs {allowed} (the scheduler's choice)"),
        Some([one]) => format!("pinned: every member on CPU {one}"),
        Some(list) => format!(
            "pinned: member i of the ring on CPU list[i mod {}] with list = {} (consecutive members on different CPUs)",
            list.len(),
            list.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ),
    }
}

/// One ring size at one array size.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Point {
    pub procs: u32,
    /// Round trips of the ring per repetition.
    pub round_trips: u64,
    /// Time per hop (one member's read, work and write, and one switch), µs: the raw figure,
    /// mean over parallel rings, one value per counted repetition.
    pub hop_us: Vec<f64>,
    /// Summary of `hop_us`.
    pub hop: Spread,
    /// Context switch time, µs: each repetition's hop time minus the median overhead.
    pub switch: Spread,
}

/// One array size: its overhead and its ring sizes.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SizeResult {
    pub size_kib: u32,
    /// One process doing a pipe write and read and the summing with hot caches, µs per hop.
    pub overhead_us: Vec<f64>,
    pub overhead: Spread,
    pub overhead_ops: u64,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CtxResult {
    /// `processes` or `threads`.
    pub mode: &'static str,
    pub parallel: u32,
    pub warmup: u32,
    pub repetitions: u32,
    /// The pinning list, if pinned.
    pub cpus: Option<Vec<u32>>,
    /// Where the ring ran, in words.
    pub placement: String,
    pub sizes: Vec<SizeResult>,
    pub notes: Vec<String>,
}

/// Why a measurement failed.
#[derive(Debug)]
pub enum CtxError {
    /// A system call needed to build the ring failed.
    Setup(String),
    /// A member died (or the ring broke otherwise); the ring was taken down.
    RingBroken(String),
}

impl std::fmt::Display for CtxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtxError::Setup(s) | CtxError::RingBroken(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for CtxError {}

fn os_err(what: &str) -> CtxError {
    CtxError::Setup(format!("{what}: {}", std::io::Error::last_os_error()))
}

macro_rules! r1 {
    ($s:ident, $p:ident, $o:expr) => {
        // SAFETY: the caller checked that the block has BLOCK_WORDS words.
        $s = $s.wrapping_add(unsafe { core::ptr::read_volatile($p.add($o)) });
    };
}
macro_rules! r4 {
    ($s:ident, $p:ident, $o:expr) => {
        r1!($s, $p, $o);
        r1!($s, $p, $o + 1);
        r1!($s, $p, $o + 2);
        r1!($s, $p, $o + 3);
    };
}
macro_rules! r16 {
    ($s:ident, $p:ident, $o:expr) => {
        r4!($s, $p, $o);
        r4!($s, $p, $o + 4);
        r4!($s, $p, $o + 8);
        r4!($s, $p, $o + 12);
    };
}
macro_rules! r64 {
    ($s:ident, $p:ident, $o:expr) => {
        r16!($s, $p, $o);
        r16!($s, $p, $o + 16);
        r16!($s, $p, $o + 32);
        r16!($s, $p, $o + 48);
    };
}
macro_rules! r256 {
    ($s:ident, $p:ident, $o:expr) => {
        r64!($s, $p, $o);
        r64!($s, $p, $o + 64);
        r64!($s, $p, $o + 128);
        r64!($s, $p, $o + 192);
    };
}

/// One pass of the unrolled body over `BLOCK_WORDS` words: every load is a volatile load, so
/// the compiler neither vectorises nor drops it, and the body is a few thousand instructions
/// long, as lat_ctx's summing loop is (its I-cache footprint is part of the benchmark).
#[inline(never)]
fn sum_block(block: &[u32]) -> u32 {
    assert!(block.len() >= BLOCK_WORDS);
    let p = block.as_ptr();
    let mut s = 0u32;
    r256!(s, p, 0);
    r256!(s, p, 256);
    r256!(s, p, 512);
    r256!(s, p, 768);
    s
}

/// Sums the array the way a ring member does its work.
#[inline(never)]
pub fn sum_words(data: &[u32]) -> u32 {
    let mut s = 0u32;
    let mut chunks = data.chunks_exact(BLOCK_WORDS);
    for c in &mut chunks {
        s = s.wrapping_add(sum_block(c));
    }
    for w in chunks.remainder() {
        // SAFETY: a reference is valid for a read.
        s = s.wrapping_add(unsafe { core::ptr::read_volatile(w) });
    }
    s
}

fn words(size_kib: u32) -> usize {
    size_kib as usize * 1024 / 4
}

/// A private array of `size_kib` KiB, written once so its pages exist.
fn array(size_kib: u32, seed: u32) -> Vec<u32> {
    (0..words(size_kib) as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect()
}

/// Pins the calling thread to one CPU. Async-signal-safe (used in forked children).
pub fn pin_self(cpu: u32) -> Result<(), i32> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(libc::EINVAL);
        }
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// The CPUs this process may run on (its affinity mask).
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: as in pin_self.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..8 * std::mem::size_of::<libc::cpu_set_t>())
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

const TOKEN: [u8; 4] = *b"ctx!";

fn read_token(fd: RawFd, tok: &mut [u8; 4]) -> bool {
    loop {
        // SAFETY: tok is 4 writable bytes.
        let n = unsafe { libc::read(fd, tok.as_mut_ptr().cast(), 4) };
        if n == 4 {
            return true;
        }
        // SAFETY: reading errno.
        if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        return false;
    }
}

fn write_token(fd: RawFd, tok: &[u8; 4]) -> bool {
    loop {
        // SAFETY: tok is 4 readable bytes.
        let n = unsafe { libc::write(fd, tok.as_ptr().cast(), 4) };
        if n == 4 {
            return true;
        }
        // SAFETY: reading errno.
        if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        return false;
    }
}

/// A ring member other than the timer: read, work, write, until end-of-file.
/// Async-signal-safe: no allocation, no locks.
fn member_loop(rd: RawFd, wr: RawFd, data: &[u32]) {
    let mut tok = [0u8; 4];
    while read_token(rd, &mut tok) {
        if !data.is_empty() {
            std::hint::black_box(sum_words(data));
        }
        if !write_token(wr, &tok) {
            return;
        }
    }
}

/// Member 0: `k` round trips of the ring; elapsed time, or `None` if the ring broke.
fn round_trips(rd: RawFd, wr: RawFd, data: &[u32], k: u64) -> Option<Duration> {
    let mut tok = TOKEN;
    let start = Instant::now();
    for _ in 0..k {
        if !write_token(wr, &tok) || !read_token(rd, &mut tok) {
            return None;
        }
        if !data.is_empty() {
            std::hint::black_box(sum_words(data));
        }
    }
    Some(start.elapsed())
}

fn pipe() -> Result<(OwnedFd, OwnedFd), CtxError> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("creating a pipe"));
    }
    // SAFETY: pipe2 returned two new descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Calibrates a repetition's iteration count: doubles (from 32) until a run takes ≥ 10 ms,
/// runs that count twice more and scales the fastest of the three to `target` (one preempted
/// run must not shorten every repetition).
fn calibrate(
    target: Duration,
    mut run: impl FnMut(u64) -> Result<Duration, CtxError>,
) -> Result<u64, CtxError> {
    let mut k = 32u64;
    loop {
        let t = run(k)?;
        if t >= Duration::from_millis(10) || k >= 1 << 32 {
            let t = t.min(run(k)?).min(run(k)?);
            let per = t.as_secs_f64() / k as f64;
            return Ok(((target.as_secs_f64() / per.max(1e-12)).ceil() as u64).max(1));
        }
        k *= 2;
    }
}

/// The overhead at one size: one process, one pipe, write then read then sum, hot caches.
fn overhead(
    cfg: &Config,
    size_kib: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<f64>, u64), CtxError> {
    let (rd, wr) = pipe()?;
    let data = array(size_kib, 1);
    let cpu = cpu_of(cfg.cpus.as_deref(), 0, 0, 2);
    std::thread::scope(|s| {
        let h = s.spawn(|| -> Result<(Vec<f64>, u64), CtxError> {
            if let Some(c) = cpu {
                pin_self(c).map_err(|e| {
                    CtxError::Setup(format!(
                        "pinning to CPU {c}: {}",
                        std::io::Error::from_raw_os_error(e)
                    ))
                })?;
            }
            let mut run = |k: u64| {
                round_trips(rd.as_raw_fd(), wr.as_raw_fd(), &data, k)
                    .ok_or_else(|| os_err("the overhead's pipe"))
            };
            let k = calibrate(cfg.rep_time, &mut run)?;
            let mut out = Vec::new();
            for r in 0..cfg.warmup + cfg.repetitions {
                let t = run(k)?;
                if r >= cfg.warmup {
                    out.push(t.as_secs_f64() * 1e6 / k as f64);
                }
            }
            Ok((out, k))
        });
        h.join()
            .map_err(|_| CtxError::Setup("the overhead thread panicked".into()))?
    })
    .inspect(|_| {
        for _ in 0..cfg.warmup + cfg.repetitions {
            progress(&format!("{size_kib} KiB: overhead"));
        }
    })
}

/// Children of one measurement, killed (SIGKILL) and reaped when dropped if still there.
struct Children {
    /// (ring, member, pid, reaped status)
    list: Vec<(u32, u32, libc::pid_t, Option<i32>)>,
}

impl Children {
    /// Waits up to `patience` for every child, then kills the rest; records each status.
    fn reap(&mut self, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            let mut left = 0;
            for c in self.list.iter_mut().filter(|c| c.3.is_none()) {
                let mut status = 0;
                // SAFETY: waiting for our own child.
                let r = unsafe { libc::waitpid(c.2, &mut status, libc::WNOHANG) };
                if r == c.2 {
                    c.3 = Some(status);
                } else if r < 0 {
                    c.3 = Some(0);
                } else {
                    left += 1;
                }
            }
            if left == 0 {
                return;
            }
            if Instant::now() >= deadline {
                for c in self.list.iter_mut().filter(|c| c.3.is_none()) {
                    // SAFETY: signalling and reaping our own child.
                    unsafe {
                        libc::kill(c.2, libc::SIGKILL);
                        let mut status = 0;
                        libc::waitpid(c.2, &mut status, 0);
                        c.3 = Some(status);
                    }
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The first member that did not exit normally, in words.
    fn casualty(&self) -> Option<String> {
        self.list.iter().find_map(|&(ring, member, pid, status)| {
            let s = status?;
            let what = if libc::WIFSIGNALED(s) {
                format!("was killed by signal {}", libc::WTERMSIG(s))
            } else if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) != 0 {
                format!("exited with status {}", libc::WEXITSTATUS(s))
            } else {
                return None;
            };
            Some(format!("ring {ring} member {member} (pid {pid}) {what}"))
        })
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.reap(Duration::ZERO);
    }
}

/// One ring size at one array size: builds `parallel` rings, calibrates, runs W + N
/// repetitions, tears the rings down. Returns hop times (µs, one per counted repetition, mean
/// over rings) and the round trips per repetition.
fn measure_rings(
    cfg: &Config,
    procs: u32,
    size_kib: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<(Vec<f64>, u64), CtxError> {
    let p = cfg.parallel as usize;
    let n = procs as usize;
    let cpus = cfg.cpus.as_deref();
    // pipes[r][i]: read by member i, written by member i-1.
    let mut reads: Vec<Vec<Option<OwnedFd>>> = Vec::with_capacity(p);
    let mut writes: Vec<Vec<Option<OwnedFd>>> = Vec::with_capacity(p);
    for _ in 0..p {
        let (mut rs, mut ws) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let (r, w) = pipe()?;
            rs.push(Some(r));
            ws.push(Some(w));
        }
        reads.push(rs);
        writes.push(ws);
    }
    // Member i reads pipe i and writes pipe (i + 1) mod n.
    let mut datas: Vec<Vec<Vec<u32>>> = (0..p)
        .map(|r| {
            (0..n)
                .map(|i| array(size_kib, (r * n + i) as u32))
                .collect()
        })
        .collect();
    let mut children = Children { list: Vec::new() };
    let mut member_threads: Vec<(OwnedFd, OwnedFd, Vec<u32>, Option<u32>)> = Vec::new();
    if !cfg.threads {
        let all: Vec<RawFd> = reads
            .iter()
            .chain(writes.iter())
            .flatten()
            .flatten()
            .map(|f| f.as_raw_fd())
            .collect();
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        for r in 0..p {
            for i in 1..n {
                let rd = reads[r][i].as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
                let wr = writes[r][(i + 1) % n]
                    .as_ref()
                    .map(|f| f.as_raw_fd())
                    .unwrap_or(-1);
                let cpu = cpu_of(cpus, r as u32, i as u32, procs);
                let data: &[u32] = &datas[r][i];
                // SAFETY: the child only makes system calls, sums memory it already has and
                // calls _exit: nothing that allocates or takes a lock.
                let pid = unsafe { libc::fork() };
                if pid < 0 {
                    return Err(os_err(&format!(
                        "forking ring member {i} of {procs} (lower the process count)"
                    )));
                }
                if pid == 0 {
                    // SAFETY: see above; every call here is async-signal-safe.
                    unsafe {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        if libc::getppid() != parent {
                            libc::_exit(3);
                        }
                        if let Some(c) = cpu {
                            if pin_self(c).is_err() {
                                libc::_exit(4);
                            }
                        }
                        for &fd in &all {
                            if fd != rd && fd != wr {
                                libc::close(fd);
                            }
                        }
                        member_loop(rd, wr, data);
                        libc::_exit(0);
                    }
                }
                children.list.push((r as u32, i as u32, pid, None));
            }
        }
        // The children's ends are theirs now: close ours, so end-of-file travels the ring.
        for r in 0..p {
            for i in 1..n {
                reads[r][i] = None;
                writes[r][(i + 1) % n] = None;
            }
        }
        for d in datas.iter_mut() {
            d.truncate(1);
        }
    } else {
        for r in 0..p {
            for i in (1..n).rev() {
                let data = datas[r].pop().unwrap_or_default();
                let (Some(rd), Some(wr)) = (reads[r][i].take(), writes[r][(i + 1) % n].take())
                else {
                    continue;
                };
                member_threads.push((rd, wr, data, cpu_of(cpus, r as u32, i as u32, procs)));
            }
        }
    }
    // Member 0 of each ring: reads pipe 0, writes pipe 1.
    let mut timers: Vec<(OwnedFd, OwnedFd, Vec<u32>, Option<u32>)> = Vec::with_capacity(p);
    for r in 0..p {
        let (Some(rd), Some(wr)) = (reads[r][0].take(), writes[r][1 % n].take()) else {
            return Err(CtxError::Setup("ring without member 0".into()));
        };
        let data = datas[r].swap_remove(0);
        timers.push((rd, wr, data, cpu_of(cpus, r as u32, 0, procs)));
    }
    drop(reads);
    drop(writes);

    let iters = AtomicU64::new(0);
    let barrier = Barrier::new(p + 1);
    let results: Mutex<Vec<Option<Duration>>> = Mutex::new(vec![None; p]);
    let pin_failed: Mutex<Option<String>> = Mutex::new(None);
    let outcome = std::thread::scope(|s| {
        for (rd, wr, data, cpu) in member_threads {
            let pin_failed = &pin_failed;
            s.spawn(move || {
                if let Some(c) = cpu {
                    if let Err(e) = pin_self(c) {
                        *pin_failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                            "pinning a ring thread to CPU {c}: {}",
                            std::io::Error::from_raw_os_error(e)
                        ));
                        return;
                    }
                }
                member_loop(rd.as_raw_fd(), wr.as_raw_fd(), &data);
                drop((rd, wr));
            });
        }
        for (r, (rd, wr, data, cpu)) in timers.into_iter().enumerate() {
            let (iters, barrier, results, pin_failed) = (&iters, &barrier, &results, &pin_failed);
            s.spawn(move || {
                let pinned = match cpu {
                    Some(c) => pin_self(c).map_err(|e| {
                        *pin_failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                            "pinning a ring's timer to CPU {c}: {}",
                            std::io::Error::from_raw_os_error(e)
                        ));
                    }),
                    None => Ok(()),
                };
                loop {
                    barrier.wait();
                    let k = iters.load(Ordering::Acquire);
                    if k == 0 {
                        break;
                    }
                    let t = if pinned.is_ok() {
                        round_trips(rd.as_raw_fd(), wr.as_raw_fd(), &data, k)
                    } else {
                        None
                    };
                    results.lock().unwrap_or_else(|e| e.into_inner())[r] = t;
                    barrier.wait();
                }
                // Closing member 0's ends takes the ring down.
                drop((rd, wr));
            });
        }
        // Runs k round trips on every ring at once; the per-hop time (µs) averaged over rings.
        let run_all = |k: u64| -> Result<(f64, Duration), CtxError> {
            iters.store(k, Ordering::Release);
            barrier.wait();
            barrier.wait();
            let res = results.lock().unwrap_or_else(|e| e.into_inner());
            let mut sum = 0.0;
            let mut longest = Duration::ZERO;
            for t in res.iter() {
                let Some(t) = t else {
                    return Err(CtxError::RingBroken(String::new()));
                };
                sum += t.as_secs_f64() * 1e6 / (k as f64 * procs as f64);
                longest = longest.max(*t);
            }
            Ok((sum / p as f64, longest))
        };
        let measured = (|| {
            let k = calibrate(cfg.rep_time, |k| run_all(k).map(|r| r.1))?;
            let mut hops = Vec::new();
            for rep in 0..cfg.warmup + cfg.repetitions {
                let (hop, _) = run_all(k)?;
                if rep >= cfg.warmup {
                    hops.push(hop);
                }
                progress(&format!("{size_kib} KiB: {procs} processes"));
            }
            Ok((hops, k))
        })();
        iters.store(0, Ordering::Release);
        barrier.wait();
        measured
    });
    children.reap(Duration::from_secs(2));
    if let Some(msg) = pin_failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(CtxError::Setup(msg));
    }
    match outcome {
        Err(CtxError::RingBroken(_)) => {
            let who = children
                .casualty()
                .unwrap_or_else(|| "a ring member stopped passing the token".into());
            Err(CtxError::RingBroken(format!(
                "the ring of {procs} broke at {size_kib} KiB: {who}; every member was stopped"
            )))
        }
        other => other,
    }
}

/// Runs the whole benchmark. `progress` is called once per finished repetition.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&str)) -> Result<CtxResult, CtxError> {
    let mut sizes = Vec::new();
    for &size_kib in &cfg.sizes_kib {
        let (ovr, ovr_ops) = overhead(cfg, size_kib, progress)?;
        let ovr_spread = Spread::of_or_nan(&ovr);
        let mut points = Vec::new();
        for &procs in &cfg.procs {
            let (hops, k) = measure_rings(cfg, procs, size_kib, progress)?;
            let switch: Vec<f64> = hops.iter().map(|h| h - ovr_spread.median).collect();
            points.push(Point {
                procs,
                round_trips: k,
                hop: Spread::of_or_nan(&hops),
                switch: Spread::of_or_nan(&switch),
                hop_us: hops,
            });
        }
        sizes.push(SizeResult {
            size_kib,
            overhead: ovr_spread,
            overhead_us: ovr,
            overhead_ops: ovr_ops,
            points,
        });
    }
    let mut notes = Vec::new();
    for s in &sizes {
        for p in &s.points {
            if p.switch.median <= 0.0 {
                notes.push(format!(
                    "{} KiB, {} processes: the hop time does not exceed the overhead (switch ≤ 0): the switch is below this measurement's noise",
                    s.size_kib, p.procs
                ));
            }
        }
    }
    Ok(CtxResult {
        mode: if cfg.threads { "threads" } else { "processes" },
        parallel: cfg.parallel,
        warmup: cfg.warmup,
        repetitions: cfg.repetitions,
        cpus: cfg.cpus.clone(),
        placement: String::new(),
        sizes,
        notes,
    })
}

/// Caches a ring's members share, from the topology: for each cache level from 2 up, the
/// capacity the ring's CPUs see (the sum over the distinct instances serving them), and a note
/// for each (size, ring size) whose working set (members × size) exceeds it.
pub fn working_set_notes(
    machine: &topology::Topology,
    cpus: &[u32],
    sizes_kib: &[u32],
    procs: &[u32],
    parallel: u32,
) -> Vec<String> {
    let mut levels: Vec<u8> = machine
        .caches
        .iter()
        .filter(|c| c.kind != topology::CacheKind::Instruction && c.level >= 2)
        .map(|c| c.level)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    let mut notes = Vec::new();
    for &size in sizes_kib.iter().filter(|&&s| s > 0) {
        // One note per level exceeded, smallest first.
        for &level in &levels {
            let capacity: u64 = machine
                .caches
                .iter()
                .filter(|c| {
                    c.level == level
                        && c.kind != topology::CacheKind::Instruction
                        && cpus.iter().any(|&cpu| c.cpus.contains(cpu))
                })
                .filter_map(|c| c.size_kib)
                .sum();
            if capacity == 0 {
                continue;
            }
            if let Some(&n) = procs
                .iter()
                .filter(|&&n| u64::from(n) * u64::from(parallel) * u64::from(size) > capacity)
                .min()
            {
                notes.push(format!(
                    "{size} KiB per member: from {n} processes{} the working set ({} KiB) exceeds the L{level} the ring's CPUs share ({capacity} KiB): switch times include refilling it from {}",
                    if parallel > 1 { format!(" × {parallel} rings") } else { String::new() },
                    u64::from(n) * u64::from(parallel) * u64::from(size),
                    if level == *levels.last().unwrap_or(&level) { "memory" } else { "the next level" }
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_is_every_word_once() {
        let v: Vec<u32> = (0..(BLOCK_WORDS as u32 * 3 + 17)).collect();
        let expect = v.iter().fold(0u32, |a, &b| a.wrapping_add(b));
        assert_eq!(sum_words(&v), expect);
        assert_eq!(sum_words(&[]), 0);
        assert_eq!(words(4), BLOCK_WORDS);
    }

    #[test]
    fn members_take_cpus_round_robin() {
        let cpus = [0u32, 1];
        let ring: Vec<_> = (0..4)
            .map(|i| cpu_of(Some(&cpus), 0, i, 4).unwrap())
            .collect();
        assert_eq!(ring, vec![0, 1, 0, 1]);
        // The second of two 3-member rings continues the count.
        assert_eq!(cpu_of(Some(&cpus), 1, 0, 3), Some(1));
        assert_eq!(cpu_of(Some(&[5]), 3, 7, 8), Some(5));
        assert_eq!(cpu_of(None, 0, 1, 2), None);
        assert!(placement_text(Some(&[0]), "0-1").contains("every member on CPU 0"));
        assert!(placement_text(None, "0-1").contains("not pinned"));
    }

    #[test]
    fn working_set_notes_follow_the_caches() {
        // 1 package × 2 cores: the synthetic caches are an L2 of 2048 KiB per core and one
        // L3 of 1536 KiB per core (3072 KiB).
        let m = topology::Topology::synthetic("1x2x1").unwrap();
        let total = |level: u8| -> u64 {
            m.caches
                .iter()
                .filter(|c| c.level == level)
                .filter_map(|c| c.size_kib)
                .sum()
        };
        assert_eq!((total(2), total(3)), (4096, 3072));
        let notes = working_set_notes(&m, &[0, 1], &[0, 1], &[2, 4], 1);
        assert!(notes.is_empty(), "{notes:?}");
        // 1 100 KiB: the L3 from 3 members, the L2 from 4.
        let notes = working_set_notes(&m, &[0, 1], &[1100], &[2, 3, 4, 8], 1);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("L2") && notes[0].contains("from 4 processes"));
        assert!(notes[0].contains("the next level"), "{notes:?}");
        assert!(notes[1].contains("L3") && notes[1].contains("from 3 processes"));
        assert!(notes[1].contains("memory"), "{notes:?}");
        // Only the caches serving the ring's CPUs count: one core's L2 is 2048 KiB.
        let notes = working_set_notes(&m, &[0], &[1100], &[2], 1);
        assert!(notes[0].contains("(2048 KiB)"), "{notes:?}");
        // Parallel rings multiply the working set.
        let notes = working_set_notes(&m, &[0, 1], &[1100], &[2], 2);
        assert!(notes.iter().any(|n| n.contains("× 2 rings")), "{notes:?}");
    }
}
