//! Launching a program under observation: environment for the probe, draining its rings while
//! it runs, the clock calibration, and its exit status.

use crate::lockrings::RingDrainer;
use crate::private::{copy_owned_file, euid, PrivateDir};
use crate::sampler::{Sampler, SamplerOptions};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};
use trace::meta::{ClockPoint, StreamEntry};
use trace::{ClockSource, RunDir};

/// Lock recording through the LD_PRELOAD probe.
pub struct LockOptions {
    /// The probe library (`libcontend_probe.so`).
    pub probe: PathBuf,
    /// Each thread's ring, in KiB.
    pub ring_kib: u64,
    /// Record one in this many uncontended acquisitions (1: all).
    pub sample_every: u32,
    /// Record heap allocations too, to name heap locks by their allocation site.
    pub alloc_sites: bool,
}

pub struct Plan<'a> {
    pub command: &'a [String],
    pub run: &'a RunDir,
    pub locks: Option<LockOptions>,
    /// How often the rings are drained.
    pub poll: Duration,
    /// Service-time sampling of every thread (`crate::sampler`).
    pub sampling: Option<SamplerOptions>,
    /// CPUs the program (and everything it starts) may run on; `None`: wherever it likes.
    pub cpus: Option<Vec<u32>>,
    /// Send the program's stdout and stderr to `stdout.txt` and `stderr.txt` in the run
    /// directory instead of the terminal (`contend scale`, which runs it many times).
    pub capture_output: bool,
    /// Extra environment for the program (e.g. `OMP_NUM_THREADS`).
    pub env: Vec<(String, String)>,
    /// Count the program's work with these counters (`crate::counters`; what the machine
    /// lacks is reported in [`Outcome::counters_unavailable`]).
    pub counters: Vec<crate::counters::Counter>,
    /// Record the program's voluntary switches out, with futex arguments (`crate::offcpu`).
    pub waits: bool,
    /// With `waits`: bytes of user stacks kept at most (0: none).
    pub wait_stack_budget: u64,
}

pub struct Outcome {
    pub status: ExitStatus,
    /// The program's start and end: wall clock, and CLOCK_MONOTONIC ns.
    pub started: trace::meta::Timestamp,
    pub ended: trace::meta::Timestamp,
    pub monotonic_span: [u64; 2],
    pub clock: ClockSource,
    pub clock_hz: u64,
    pub calibration: Vec<ClockPoint>,
    pub streams: Vec<StreamEntry>,
    pub notes: Vec<String>,
    pub end_time: u64,
    /// User plus system CPU time of the program and the children it waited for, ns
    /// (`wait4`'s rusage: exact, whatever the sampling interval): `user_ns + system_ns`.
    pub cpu_ns: Option<u64>,
    /// Of `cpu_ns`, the time in user mode (memory stalls included) and in the kernel (page
    /// faults, system calls).
    pub user_ns: Option<u64>,
    pub system_ns: Option<u64>,
    /// What the sampler did, when sampling.
    pub sampler: Option<SamplerStats>,
    /// Counter totals over the program and its descendants.
    pub counters: Vec<crate::counters::Reading>,
    pub counters_unavailable: Vec<crate::counters::Unavailable>,
    /// With the lock probe: the processes it announced itself in.
    pub probe_announced: Option<crate::lockrings::Announced>,
    /// With `waits`: what the off-CPU recorder did, or why it could not run.
    pub offcpu: Option<Result<crate::offcpu::OffCpuStats, trace::meta::Unavailable>>,
}

/// The sampler's own figures, for meta.json and the benchmarks.
#[derive(Debug, Clone)]
pub struct SamplerStats {
    pub rounds: u64,
    pub late_rounds: u64,
    pub own_cpu_ns: u64,
    pub wall_ns: u64,
    /// The sched-tracepoint reader's figures, when it ran.
    pub sched: Option<crate::sampler::SchedTraceStats>,
    /// Why the sched tracepoints could not be used, when asked for: (what, why).
    pub sched_unavailable: Option<(String, String)>,
    /// CPU time stolen by the hypervisor, all CPUs, while sampling.
    pub steal_ns: Option<u64>,
}

impl SamplerStats {
    fn of(s: &crate::sampler::SamplerOutcome) -> SamplerStats {
        SamplerStats {
            rounds: s.rounds,
            late_rounds: s.late_rounds,
            own_cpu_ns: s.own_cpu_ns,
            wall_ns: s.wall_ns,
            sched: s.sched.clone(),
            sched_unavailable: s.sched_unavailable.clone(),
            steal_ns: s.steal_ns,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Whether the time-stamp counter runs at a constant rate on every CPU, whatever the power
/// state (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo): then it is a clock.
pub fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

pub use crate::clock::monotonic_ns;

/// A (counter, CLOCK_MONOTONIC) pair read as close together as possible: of five tries, the one
/// whose two monotonic reads around the counter are nearest.
pub fn clock_point() -> ClockPoint {
    let mut best = (
        u64::MAX,
        ClockPoint {
            ticks: 0,
            monotonic_ns: 0,
        },
    );
    for _ in 0..5 {
        let a = monotonic_ns();
        let t = tsc();
        let b = monotonic_ns();
        if b - a < best.0 {
            best = (
                b - a,
                ClockPoint {
                    ticks: t,
                    monotonic_ns: a + (b - a) / 2,
                },
            );
        }
    }
    best.1
}

/// Ticks per second between two calibration points.
pub fn rate(a: &ClockPoint, b: &ClockPoint) -> u64 {
    let ns = b.monotonic_ns.saturating_sub(a.monotonic_ns).max(1);
    ((b.ticks.saturating_sub(a.ticks) as u128 * 1_000_000_000) / ns as u128) as u64
}

/// Shortest interval between calibration points: at 20 ns of read-out jitter, 1e-7 of the rate.
const MIN_CALIBRATION: Duration = Duration::from_millis(200);

/// Runs the plan's command to completion and returns what was recorded.
pub fn run(plan: Plan<'_>) -> Result<Outcome, LaunchError> {
    // The TSC is for the lock probe's timestamps; the sampler and tracepoints use CLOCK_MONOTONIC.
    let use_tsc = plan.locks.is_some() && invariant_tsc();
    let (clock, start_point) = if use_tsc {
        (ClockSource::Tsc, clock_point())
    } else {
        let now = monotonic_ns();
        (
            ClockSource::Monotonic,
            ClockPoint {
                ticks: now,
                monotonic_ns: now,
            },
        )
    };
    let started = Instant::now();
    let mut cmd = Command::new(&plan.command[0]);
    cmd.args(&plan.command[1..]);
    cmd.envs(plan.env.iter().map(|(k, v)| (k, v)));
    if plan.capture_output {
        let file = |name: &str| {
            let path = plan.run.path().join(name);
            std::fs::File::create(&path).map_err(|source| LaunchError::Io { path, source })
        };
        cmd.stdout(file("stdout.txt")?).stderr(file("stderr.txt")?);
    }
    if let Some(cpus) = plan.cpus.clone() {
        // SAFETY: only async-signal-safe calls (CPU_SET on a local set, sched_setaffinity)
        // between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                for &c in &cpus {
                    libc::CPU_SET(c as usize, &mut set);
                }
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    // The program must not outlive contend by surprise: if contend dies (SIGKILL included),
    // the kernel sends it SIGKILL (what it recorded could not be saved anyway). Only the
    // program contend starts, not the processes it starts in turn; a set-user-ID program
    // clears this at exec.
    let recorder = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // contend died before the request took effect.
            if libc::getppid() as u32 != recorder {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut drainer = None;
    // Removes the rings directory if contend dies before it does (`crate::reaper`).
    let mut reaper = None;
    let mut busy_threshold = u64::MAX;
    // Removed when dropped, whichever way this function returns.
    let mut rings_guard = None;
    if let Some(locks) = &plan.locks {
        let rings = rings_dir(plan.run)?;
        let preload = match std::env::var_os("LD_PRELOAD") {
            Some(existing) if !existing.is_empty() => {
                let mut p = locks.probe.clone().into_os_string();
                p.push(":");
                p.push(existing);
                p
            }
            _ => locks.probe.clone().into_os_string(),
        };
        cmd.env("LD_PRELOAD", preload)
            .env("CONTEND_RINGS", rings.path())
            .env("CONTEND_RING_KB", locks.ring_kib.to_string())
            .env("CONTEND_LOCK_SAMPLE", locks.sample_every.to_string())
            .env(
                "CONTEND_ALLOC_SITES",
                if locks.alloc_sites { "1" } else { "0" },
            )
            .env("CONTEND_CLOCK", if use_tsc { "tsc" } else { "monotonic" });
        reaper = crate::reaper::watch(rings.path());
        drainer = Some(rings.path().to_path_buf());
        rings_guard = Some(rings);
        // A drain that moved more than half a ring means the program records fast: drain
        // again at once instead of sleeping, so rings do not fill up between drains.
        busy_threshold = locks.ring_kib * 1024 / 16 / 2;
    }
    // Stream headers are written while the program runs, so they carry the counter's rate from
    // a 20 ms calibration; meta.json gets the rate over the whole run (points at start and end),
    // which is what analyses use.
    let provisional_hz = if use_tsc {
        std::thread::sleep(Duration::from_millis(20));
        rate(&start_point, &clock_point())
    } else {
        1_000_000_000
    };
    let mut drainer =
        drainer.map(|rings| RingDrainer::new(plan.run, &rings, clock, provisional_hz));

    // Opened on this thread, inherited by the child at fork and enabled at its exec: they
    // count the program and everything it starts, never contend itself.
    let (counter_set, counters_unavailable) = if plan.counters.is_empty() {
        (None, Vec::new())
    } else {
        let (set, missing) = crate::counters::CounterSet::for_children(&plan.counters);
        (Some(set), crate::counters::merge_unavailable(&missing))
    };
    // Like the counters: opened here, inherited by the child, enabled at its exec.
    let mut offcpu = None;
    let mut offcpu_unavailable = None;
    if plan.waits {
        match crate::offcpu::OffCpuRecorder::open(plan.run.path(), plan.wait_stack_budget) {
            Ok(r) => offcpu = Some(r),
            Err(u) => offcpu_unavailable = Some(u),
        }
    }
    let spawned_wall = trace::meta::Timestamp::now();
    let spawned_mono = monotonic_ns();
    let child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: plan.command[0].clone(),
        source,
    })?;
    let child_pid = child.id();
    let sampler = match &plan.sampling {
        Some(options) => Some(
            Sampler::start(plan.run.path(), child_pid, options.clone()).map_err(|source| {
                LaunchError::Io {
                    path: plan.run.path().to_path_buf(),
                    source,
                }
            })?,
        ),
        None => None,
    };
    // Ctrl-C reaches the program (same process group); contend stays to save what it recorded.
    // SIGTERM and SIGHUP sent to contend are passed on to the program, and contend then
    // saves the run as it does when the program ends.
    // SAFETY: setting a disposition; restored below.
    let previous = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let caught = catch(&[libc::SIGTERM, libc::SIGHUP]);
    let mut forwarded = 0;
    // Drain often while events flow, back off to 10 ms while they do not: a recorder that
    // polls hard takes CPU from the program on small machines. New rings are looked for every
    // 20 ms (a ring holds far more than 20 ms of events).
    let idle_max = Duration::from_millis(10).max(plan.poll);
    let mut sleep = plan.poll;
    let mut last_discovery: Option<Instant> = None;
    let (status, cpu, ended_wall, ended_mono) = loop {
        let sig = INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed);
        if sig != 0 && forwarded == 0 {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child_pid as i32, sig) };
            forwarded = sig;
        }
        let moved = match drainer.as_mut() {
            Some(d) => {
                if last_discovery.is_none_or(|t| t.elapsed() >= Duration::from_millis(20)) {
                    d.discover();
                    last_discovery = Some(Instant::now());
                }
                d.drain()
            }
            None => 0,
        };
        let moved = moved + offcpu.as_mut().map_or(0, |o| o.drain());
        // With no rings to drain, wait for the program in the kernel: its end is then known
        // to the microsecond, not to the polling interval.
        let polling = drainer.is_some() || offcpu.is_some();
        let waited = if !polling {
            wait_child(child_pid, false)
        } else {
            wait_child(child_pid, true)
        };
        match waited {
            Ok(Some((status, cpu))) => {
                break (status, cpu, trace::meta::Timestamp::now(), monotonic_ns())
            }
            Ok(None) if !polling || moved > busy_threshold => {}
            Ok(None) => {
                sleep = if moved > 0 {
                    plan.poll
                } else {
                    (sleep * 2).min(idle_max)
                };
                std::thread::sleep(sleep);
            }
            Err(source) => {
                return Err(LaunchError::Io {
                    path: PathBuf::from(&plan.command[0]),
                    source,
                })
            }
        }
    };
    // SAFETY: restoring the previous disposition.
    unsafe { libc::signal(libc::SIGINT, previous) };
    restore(caught);
    let forwarded_note = (forwarded != 0)
        .then(|| format!("contend received signal {forwarded} and passed it on to the program"));
    let sampled = sampler.map(Sampler::stop);
    // Read after the child was reaped: its counts (and its descendants') are folded in.
    let counters = counter_set.map(|c| c.read()).unwrap_or_default();

    let mut calibration = vec![start_point];
    let mut clock_hz = provisional_hz;
    if use_tsc {
        if let Some(left) = MIN_CALIBRATION.checked_sub(started.elapsed()) {
            std::thread::sleep(left);
        }
        let end_point = clock_point();
        clock_hz = rate(&start_point, &end_point);
        calibration.push(end_point);
    }
    let end_time = if use_tsc { tsc() } else { monotonic_ns() };
    let offcpu = match (offcpu, offcpu_unavailable) {
        (Some(r), _) => Some(Ok(r.finish(monotonic_ns()))),
        (None, Some(u)) => Some(Err(u)),
        (None, None) => None,
    };
    let mut probe_announced = None;
    let (mut streams, mut notes) = match drainer {
        Some(d) => {
            let rings = d.rings_dir().to_path_buf();
            let (streams, mut notes) = d.finish(end_time);
            probe_announced = Some(crate::lockrings::announced(&rings));
            notes.extend(keep_maps(&rings, plan.run));
            drop(rings_guard);
            drop(reaper);
            (streams, notes)
        }
        None => (Vec::new(), Vec::new()),
    };
    notes.extend(forwarded_note);
    let offcpu = offcpu.map(|o| {
        o.map(|done| {
            streams.extend(done.streams);
            notes.extend(done.notes);
            done.stats
        })
    });
    let sampler = sampled.map(|s| {
        let stats = SamplerStats::of(&s);
        streams.extend(s.streams);
        notes.extend(s.notes);
        stats
    });
    Ok(Outcome {
        status,
        started: spawned_wall,
        ended: ended_wall,
        monotonic_span: [spawned_mono, ended_mono],
        clock,
        clock_hz,
        calibration,
        streams,
        notes,
        end_time,
        cpu_ns: Some(cpu.user_ns + cpu.system_ns),
        user_ns: Some(cpu.user_ns),
        system_ns: Some(cpu.system_ns),
        sampler,
        counters,
        counters_unavailable,
        probe_announced,
        offcpu,
    })
}

/// CPU time of a reaped child (and the children it reaped), ns, from `wait4`'s rusage.
#[derive(Debug, Clone, Copy)]
struct ChildCpu {
    user_ns: u64,
    system_ns: u64,
}

/// `wait4`: the exit status and the CPU time (user and system, ns) of the child and the
/// children it reaped, once it has exited; `None` while it runs (`nohang`) or when a signal
/// interrupted the wait.
fn wait_child(pid: u32, nohang: bool) -> std::io::Result<Option<(ExitStatus, ChildCpu)>> {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if nohang { libc::WNOHANG } else { 0 };
    // SAFETY: valid pointers to locals; pid is our own child.
    let r = unsafe { libc::wait4(pid as i32, &mut status, flags, &mut usage) };
    if r == 0 {
        return Ok(None);
    }
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(None);
        }
        return Err(e);
    }
    let tv_ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    let cpu = ChildCpu {
        user_ns: tv_ns(usage.ru_utime),
        system_ns: tv_ns(usage.ru_stime),
    };
    Ok(Some((ExitStatus::from_raw(status), cpu)))
}

/// The rings directory's name before mkdtemp's six random characters.
const RINGS_PREFIX: &str = "contend-rings-";

/// The longest rings directory path the probe takes: it copies the path into small stack
/// buffers (probe::config::MAX_DIR, 400 bytes with the NUL).
const PROBE_MAX_DIR: usize = 399;

/// The directory the rings live in while the program runs: a private one (random name, mode
/// 0700, created atomically, never one that existed: `/dev/shm` is writable by every user) in
/// [`rings_parent`].
fn rings_dir(run: &RunDir) -> Result<PrivateDir, LaunchError> {
    let parent = rings_parent(
        Path::new("/dev/shm"),
        &absolute(run.path()),
        &absolute(&std::env::temp_dir()),
    );
    let dir = PrivateDir::new_in(&parent, RINGS_PREFIX).map_err(|source| LaunchError::Io {
        path: parent.clone(),
        source,
    })?;
    if dir.path().as_os_str().len() > PROBE_MAX_DIR {
        return Err(LaunchError::Io {
            path: dir.path().to_path_buf(),
            source: std::io::Error::other(format!(
                "the path is longer than the lock probe takes ({PROBE_MAX_DIR} bytes): record \
                 into a shorter run directory or set TMPDIR to a shorter one"
            )),
        });
    }
    Ok(dir)
}

/// Memory-backed `/dev/shm` when it exists (ring pages are scratch space: on a disk-backed run
/// directory the kernel would write them back for nothing), else the run directory, else (its
/// path too long for the probe) `$TMPDIR`.
fn rings_parent(shm: &Path, run: &Path, tmp: &Path) -> PathBuf {
    if shm.is_dir() {
        shm.to_path_buf()
    } else if run.as_os_str().len() + 1 + RINGS_PREFIX.len() + 6 <= PROBE_MAX_DIR {
        run.to_path_buf()
    } else {
        tmp.to_path_buf()
    }
}

/// The largest memory-map snapshot kept (a process with a hundred thousand mappings writes
/// about 10 MB).
const MAX_MAPS_BYTES: u64 = 64 << 20;

/// Copies the probes' memory-map snapshots into the run directory's `maps/`; notes on those
/// not kept. Only regular files of this user are copied (never through a symlink), bounded in
/// size, into files created new (`O_EXCL|O_NOFOLLOW`).
fn keep_maps(rings: &Path, run: &RunDir) -> Vec<String> {
    let maps = run.path().join(trace::layout::MAPS_DIR);
    let _ = std::fs::create_dir_all(&maps);
    let mut notes = Vec::new();
    let Ok(entries) = std::fs::read_dir(rings) else {
        return notes;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.as_encoded_bytes().ends_with(b".maps") {
            continue;
        }
        if let Err(why) = copy_owned_file(&e.path(), &maps.join(&name), euid(), MAX_MAPS_BYTES) {
            notes.push(format!(
                "memory map {} not kept ({why}): its call sites are shown by address",
                name.to_string_lossy()
            ));
        }
    }
    notes
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Recording a process that is already running (`contend record -p PID`).
pub struct AttachPlan<'a> {
    pub pid: u32,
    pub run: &'a RunDir,
    pub sampling: SamplerOptions,
    /// Stop after this long; `None`: when the process exits or on Ctrl-C.
    pub duration: Option<Duration>,
}

/// Why an attached recording ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachEnd {
    /// The process exited.
    Exited,
    /// `--duration` elapsed.
    Duration,
    /// Ctrl-C (SIGINT).
    Interrupted,
    /// SIGTERM or SIGHUP.
    Terminated,
}

pub struct AttachOutcome {
    pub started: trace::meta::Timestamp,
    pub ended: trace::meta::Timestamp,
    pub monotonic_span: [u64; 2],
    pub streams: Vec<StreamEntry>,
    pub notes: Vec<String>,
    pub sampler: SamplerStats,
    pub end: AttachEnd,
}

/// The signal that asked contend to stop (0: none).
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_interrupt(sig: libc::c_int) {
    INTERRUPTED.store(sig, std::sync::atomic::Ordering::Relaxed);
}

/// Installs `on_interrupt` for `signals` without SA_RESTART (a blocking wait returns EINTR);
/// returns the previous actions to restore.
fn catch(signals: &[libc::c_int]) -> Vec<(libc::c_int, libc::sigaction)> {
    INTERRUPTED.store(0, std::sync::atomic::Ordering::Relaxed);
    signals
        .iter()
        .map(|&sig| {
            // SAFETY: zeroed sigaction structs are valid; the handler only stores to an atomic.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_interrupt as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(sig, &action, &mut old);
                (sig, old)
            }
        })
        .collect()
}

fn restore(previous: Vec<(libc::c_int, libc::sigaction)>) {
    for (sig, old) in previous {
        // SAFETY: restoring an action sigaction gave us.
        unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
    }
}

/// Samples a running process until it exits, the duration elapses, or Ctrl-C. The process is
/// only read, never stopped or signalled.
pub fn attach(plan: AttachPlan<'_>) -> Result<AttachOutcome, LaunchError> {
    let previous = catch(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    let started = trace::meta::Timestamp::now();
    let started_mono = monotonic_ns();
    let began = Instant::now();
    let sampler = Sampler::start(plan.run.path(), plan.pid, plan.sampling).map_err(|source| {
        LaunchError::Io {
            path: plan.run.path().to_path_buf(),
            source,
        }
    })?;
    let end = loop {
        match INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            0 => {}
            libc::SIGINT => break AttachEnd::Interrupted,
            _ => break AttachEnd::Terminated,
        }
        if sampler.is_finished() {
            break AttachEnd::Exited;
        }
        if plan.duration.is_some_and(|d| began.elapsed() >= d) {
            break AttachEnd::Duration;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut ended = trace::meta::Timestamp::now();
    let mut ended_mono = monotonic_ns();
    let s = sampler.stop();
    restore(previous);
    if end == AttachEnd::Exited && s.last_round_ns > started_mono {
        // The sampler saw the process gone at its last round: that is the end (noticing it
        // here came later, after the sampler had shut down).
        let early = ended_mono.saturating_sub(s.last_round_ns);
        ended_mono = s.last_round_ns;
        ended = trace::meta::Timestamp::from_system(
            std::time::SystemTime::now() - Duration::from_nanos(early),
        );
    }
    let sampler = SamplerStats::of(&s);
    Ok(AttachOutcome {
        started,
        ended,
        monotonic_span: [started_mono, ended_mono],
        streams: s.streams,
        notes: s.notes,
        sampler,
        end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn rings_go_to_dev_shm_else_the_run_directory_else_tmpdir() {
        let top = tempfile::tempdir().unwrap();
        let (shm, run, tmp) = (
            top.path().join("shm"),
            top.path().join("run"),
            top.path().join("tmp"),
        );
        std::fs::create_dir(&shm).unwrap();
        assert_eq!(rings_parent(&shm, &run, &tmp), shm);
        let no_shm = top.path().join("no-shm");
        assert_eq!(rings_parent(&no_shm, &run, &tmp), run);
        // A run directory whose rings path would not fit the probe's buffers.
        let long = PathBuf::from(format!("/{}", "r".repeat(PROBE_MAX_DIR - 20)));
        assert_eq!(rings_parent(&no_shm, &long, &tmp), tmp);
    }

    #[test]
    fn only_the_users_regular_map_snapshots_are_kept() {
        let top = tempfile::tempdir().unwrap();
        let run = RunDir::create(&top.path().join("run")).unwrap();
        let rings = PrivateDir::new_in(top.path(), RINGS_PREFIX).unwrap();
        let secret = top.path().join("secret");
        std::fs::write(&secret, b"root:$6$hash").unwrap();
        std::fs::write(rings.path().join("10-1.maps"), b"00400000-00401000 r-xp").unwrap();
        symlink(&secret, rings.path().join("11-1.maps")).unwrap();
        let fifo = std::ffi::CString::new(
            rings
                .path()
                .join("12-1.maps")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(rings.path().join("10-1.maps.0.tmp"), b"half").unwrap();
        let notes = keep_maps(rings.path(), &run);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("11-1.maps") && n.contains("symbolic link")),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.contains("12-1.maps") && n.contains("not a regular file")),
            "{notes:?}"
        );
        let maps = run.path().join(trace::layout::MAPS_DIR);
        let kept: Vec<_> = std::fs::read_dir(&maps)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(kept, ["10-1.maps"]);
        assert_eq!(
            std::fs::read(maps.join("10-1.maps")).unwrap(),
            b"00400000-00401000 r-xp"
        );
        let path = rings.path().to_path_buf();
        drop(rings);
        assert!(!path.exists());
        assert_eq!(std::fs::read(&secret).unwrap(), b"root:$6$hash");
    }
}
