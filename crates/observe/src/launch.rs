//! Launching a program under observation: environment for the probe, draining its rings while
//! it runs, the clock calibration, and its exit status.

use crate::lockrings::RingDrainer;
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

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

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
    let use_tsc = invariant_tsc();
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
    let mut drainer = None;
    let mut busy_threshold = u64::MAX;
    if let Some(locks) = &plan.locks {
        let rings = rings_dir(plan.run);
        std::fs::create_dir_all(&rings).map_err(|source| LaunchError::Io {
            path: rings.clone(),
            source,
        })?;
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
            .env("CONTEND_RINGS", absolute(&rings))
            .env("CONTEND_RING_KB", locks.ring_kib.to_string())
            .env("CONTEND_LOCK_SAMPLE", locks.sample_every.to_string())
            .env(
                "CONTEND_ALLOC_SITES",
                if locks.alloc_sites { "1" } else { "0" },
            )
            .env("CONTEND_CLOCK", if use_tsc { "tsc" } else { "monotonic" });
        drainer = Some(rings);
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

    let spawned_wall = trace::meta::Timestamp::now();
    let spawned_mono = monotonic_ns();
    let mut child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: plan.command[0].clone(),
        source,
    })?;
    // Ctrl-C reaches the program (same process group); contend stays to save what it recorded.
    // SAFETY: setting a disposition; restored below.
    let previous = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    // Drain often while events flow, back off to 10 ms while they do not: a recorder that
    // polls hard takes CPU from the program on small machines. New rings are looked for every
    // 20 ms (a ring holds far more than 20 ms of events).
    let idle_max = Duration::from_millis(10).max(plan.poll);
    let mut sleep = plan.poll;
    let mut last_discovery: Option<Instant> = None;
    let (status, ended_wall, ended_mono) = loop {
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
        match child.try_wait() {
            Ok(Some(status)) => break (status, trace::meta::Timestamp::now(), monotonic_ns()),
            Ok(None) if moved > busy_threshold => {}
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
    let (streams, notes) = match drainer {
        Some(d) => {
            let rings = d.rings_dir().to_path_buf();
            let done = d.finish(end_time);
            keep_maps(&rings, plan.run);
            done
        }
        None => (Vec::new(), Vec::new()),
    };
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
    })
}

/// Where the rings live while the program runs: memory-backed `/dev/shm` when it exists (ring
/// pages are scratch space: on a disk-backed run directory the kernel would write them back
/// for nothing), else the run directory itself.
fn rings_dir(run: &RunDir) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let in_run = absolute(&run.path().join("rings"));
    // The probe copies the path into small stack buffers (probe::config::MAX_DIR).
    if !shm.is_dir() && in_run.as_os_str().len() >= 400 {
        return std::env::temp_dir().join(format!("contend-rings-{}", std::process::id()));
    }
    if shm.is_dir() {
        let name = format!(
            "contend-{}-{}",
            std::process::id(),
            run.path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        shm.join(name)
    } else {
        in_run
    }
}

/// Moves the probes' memory-map snapshots into the run directory's `maps/` and removes the
/// rings directory (its rings are already drained and deleted).
fn keep_maps(rings: &Path, run: &RunDir) {
    let maps = run.path().join("maps");
    let _ = std::fs::create_dir_all(&maps);
    if let Ok(entries) = std::fs::read_dir(rings) {
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().ends_with(".maps")
                && std::fs::rename(e.path(), maps.join(&name)).is_err()
            {
                let _ = std::fs::copy(e.path(), maps.join(&name));
            }
        }
    }
    let _ = std::fs::remove_dir_all(rings);
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
