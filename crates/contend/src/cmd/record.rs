//! `contend record [opts] -- CMD...`: run a program under observation into a run directory.
//! With `--locks`, the LD_PRELOAD probe records every pthread lock, condition wait and barrier.

use crate::exit::bad_input;
use anyhow::Context;
use observe::launch::{self, LockOptions, Plan};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::Duration;
use trace::meta::{Clock, Meta, Unavailable};
use trace::{ClockSource, RunDir};

#[derive(clap::Args)]
pub struct Args {
    /// The run directory to create (an existing one is kept and the new run numbered).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = trace::DEFAULT_RUN_DIR)]
    output: PathBuf,
    /// Record pthread mutexes, rwlocks, spinlocks, condition waits and barriers of an
    /// unmodified program through the LD_PRELOAD probe. `--locks=sampled` (or `sampled:N`)
    /// records one in N uncontended acquisitions (default 64) and every contended one.
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "full", require_equals = true)]
    locks: Option<LockMode>,
    /// With --locks: record the program's heap allocations too (malloc, calloc, realloc, the
    /// aligned allocators, C++ new), so that a lock on the heap is named by the call site that
    /// allocated it. Costs a clock read and two records per allocation.
    #[arg(long, requires = "locks")]
    alloc_sites: bool,
    /// Each thread's event ring, in KiB: events beyond what fits between two drains are
    /// counted as dropped.
    #[arg(long, value_name = "KIB", default_value_t = 4096)]
    ring_kb: u64,
    /// How often the rings are drained, in ms.
    #[arg(long, value_name = "MS", default_value_t = 1)]
    poll_ms: u64,
    /// The program to run and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// How much of the uncontended lock traffic is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockMode {
    /// Record one in this many uncontended acquisitions (1: all).
    every: u32,
}

impl std::str::FromStr for LockMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(LockMode { every: 1 }),
            "sampled" => Ok(LockMode { every: 64 }),
            _ => s
                .strip_prefix("sampled:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&n| n >= 1)
                .map(|every| LockMode { every })
                .ok_or_else(|| {
                    format!("`{s}` is not a lock mode: use full, sampled or sampled:N (N >= 1)")
                }),
        }
    }
}

/// The probe library: `$CONTEND_PROBE`, else beside this executable (where cargo builds it).
fn find_probe() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("CONTEND_PROBE") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(bad_input(format!(
            "CONTEND_PROBE names {}, which is not a file",
            p.display()
        )));
    }
    let exe = std::env::current_exe().context("finding the contend executable")?;
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let candidates = [
        dir.join("libcontend_probe.so"),
        dir.join("deps/libcontend_probe.so"),
        dir.join("../lib/contend/libcontend_probe.so"),
    ];
    // Cargo leaves a copy both beside the binary (workspace builds) and in deps/ (builds of
    // contend alone): take the newest, so a stale copy never shadows a fresh build.
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    candidates
        .iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| modified(p))
        .cloned()
        .ok_or_else(|| {
        anyhow::anyhow!(
            "the lock probe libcontend_probe.so is not installed beside contend (looked in {}): build it with `cargo build --release -p probe`, or set CONTEND_PROBE to its path",
            dir.display()
        )
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Some(mode) = args.locks else {
        return Err(bad_input(
            "nothing to record: pass --locks (record the program's pthread locks)",
        ));
    };
    let probe = find_probe()?;
    let run = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut meta = Meta::new(args.command.clone());
    meta.topology = topology::Topology::live()
        .ok()
        .and_then(|t| {
            serde_json::to_value(report::topo::TopoJson {
                summary: t.summary(),
                topology: &t,
            })
            .ok()
        })
        .unwrap_or(serde_json::Value::Null);
    meta.captured.push("locks".into());
    if args.alloc_sites {
        meta.captured.push("alloc-sites".into());
    }
    if mode.every > 1 {
        meta.lock_sample_every = Some(mode.every);
    }
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;

    let outcome = launch::run(Plan {
        command: &args.command,
        run: &run,
        locks: Some(LockOptions {
            probe,
            ring_kib: args.ring_kb,
            sample_every: mode.every,
            alloc_sites: args.alloc_sites,
        }),
        poll: Duration::from_millis(args.poll_ms.max(1)),
    })
    .map_err(|e| match e {
        launch::LaunchError::Spawn { .. } => bad_input(e.to_string()),
        other => anyhow::Error::new(other),
    })?;

    if outcome.clock == ClockSource::Monotonic {
        meta.unavailable.push(Unavailable {
            what: "time-stamp counter".into(),
            why: "not invariant on this CPU (no constant_tsc/nonstop_tsc): CLOCK_MONOTONIC used, about 20 ns per read".into(),
        });
    }
    meta.clock = Clock {
        source: outcome.clock,
        hz: outcome.clock_hz,
        calibration: outcome.calibration.clone(),
    };
    meta.started = outcome.started.clone();
    meta.ended = Some(outcome.ended.clone());
    meta.monotonic_span = Some(outcome.monotonic_span);
    meta.events_dropped = outcome.streams.iter().map(|s| s.dropped).sum();
    meta.exit_status = outcome
        .status
        .code()
        .or(outcome.status.signal().map(|s| 128 + s));
    meta.streams = outcome.streams;
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    for note in &outcome.notes {
        eprintln!("contend: note: {note}");
    }
    let events: u64 = meta.streams.iter().map(|s| s.events).sum();
    eprintln!(
        "contend: recorded {events} events from {} thread(s), {} dropped, into {}",
        meta.streams.len(),
        meta.events_dropped,
        run.path().display()
    );
    // The program's own exit status is contend's (as perf record does).
    match meta.exit_status {
        Some(0) | None => Ok(()),
        Some(code) => std::process::exit(code),
    }
}
