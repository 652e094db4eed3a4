//! `contend record [opts] -- CMD...`: run a program under observation into a run directory.
//! With `--locks`, the LD_PRELOAD probe records every pthread lock, condition wait and barrier.

use crate::exit::bad_input;
use anyhow::Context;
use observe::launch::{self, LockOptions, Plan};
use observe::sampler::SamplerOptions;
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
    /// Record a process that is already running, instead of starting CMD (Ctrl-C stops).
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with_all = ["locks", "cpus", "layout", "fill"])]
    pid: Option<u32>,
    /// With -p: stop after this many seconds (default: when the process exits, or Ctrl-C).
    #[arg(long, value_name = "S", requires = "pid")]
    duration: Option<f64>,
    /// Service-time sampling interval, in ms: every thread's on-CPU time, run-queue wait,
    /// context switches and CPU from /proc/PID/task/TID/schedstat. 0 turns sampling off.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    interval: f64,
    /// Do not record exact scheduler states from the sched tracepoints (recorded by default
    /// where permitted; they cost the kernel about 2 µs per context switch, machine-wide).
    #[arg(long)]
    no_sched_trace: bool,
    /// Run the program on these CPUs only (a list such as 0-3,8).
    #[arg(long, value_name = "LIST", conflicts_with_all = ["layout", "fill"])]
    cpus: Option<String>,
    /// Run the program on the CPUs a layout file lists (numbers in the order they are given
    /// out, like the thesis's systemConfig.txt); with --cores, the first N of them.
    #[arg(long, value_name = "FILE", conflicts_with = "fill")]
    layout: Option<PathBuf>,
    /// Run the program on CPUs taken in this order from the machine's topology: socket-first
    /// (fill one package first), spread (alternate packages) or compact; with --cores N.
    #[arg(long, value_name = "ORDER", requires = "cores")]
    fill: Option<topology::FillOrder>,
    /// With --fill or --layout: how many CPUs to use.
    #[arg(long, value_name = "N")]
    cores: Option<usize>,
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
    /// Record an MPI job's calls in every rank (`contend record --mpi -- mpirun -np 4 ./app`;
    /// also mpiexec, srun, or a single rank): contend builds its PMPI wrapper with the
    /// program's own mpicc (cached) and has the launcher preload it into each rank.
    #[arg(long, conflicts_with = "pid")]
    mpi: bool,
    /// Run a contention generator beside the program for the whole run, on CPUs it does not
    /// use: `mem generate --cpus LIST [--rate GB/S] [--size BYTES]`, the memory contention
    /// generator (the program gets the other CPUs unless --cpus says). Compare with a run
    /// without it: `contend diff`.
    #[arg(long, value_name = "SPEC", conflicts_with_all = ["pid", "mpi"])]
    interfere: Option<String>,
    /// With --mpi: the MPI the program uses, when contend cannot tell from the program
    /// (openmpi or mpich).
    #[arg(long, value_name = "IMPL", requires = "mpi", value_parser = parse_mpi_impl)]
    mpi_impl: Option<observe::mpi::Implementation>,
    /// The program to run and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD", required_unless_present = "pid")]
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

fn parse_mpi_impl(s: &str) -> Result<observe::mpi::Implementation, String> {
    match s.to_ascii_lowercase().as_str() {
        "openmpi" | "open-mpi" | "ompi" => Ok(observe::mpi::Implementation::OpenMpi),
        "mpich" => Ok(observe::mpi::Implementation::Mpich),
        _ => Err(format!(
            "`{s}` is not an MPI contend knows: use openmpi or mpich"
        )),
    }
}

/// Prepares an MPI recording: the command with the wrapper preloaded in every rank, and the
/// environment for the launcher. Problems the user can fix are bad input (exit 2).
fn prepare_mpi(args: &Args, run: &RunDir) -> anyhow::Result<observe::mpi::Prepared> {
    use observe::mpi::MpiError;
    let dir = std::fs::canonicalize(run.path()).unwrap_or_else(|_| run.path().to_path_buf());
    let cache = observe::mpi::default_cache();
    match observe::mpi::prepare(&args.command, &dir, args.mpi_impl, &cache) {
        Ok(p) => {
            for n in &p.notices {
                eprintln!("contend: note: {n}");
            }
            eprintln!(
                "contend: recording MPI calls of every rank ({}; wrapper cached in {})",
                p.implementation.name(),
                cache.display()
            );
            Ok(p)
        }
        Err(
            e @ (MpiError::NoCompiler { .. }
            | MpiError::NoLauncher { .. }
            | MpiError::Unknown { .. }
            | MpiError::Mismatch { .. }),
        ) => Err(bad_input(e.to_string())),
        Err(e) => Err(anyhow::Error::new(e)),
    }
}

/// The rank streams the wrapper wrote, for meta.json; refusals (a rank that loaded another MPI)
/// go to `unavailable` and stderr. Returns how many streams, of how many jobs.
fn collect_mpi(run: &RunDir, meta: &mut Meta) -> (usize, u32) {
    let mut ranks = 0;
    let mut jobs = 0;
    if let Ok(entries) = std::fs::read_dir(run.path().join("streams")) {
        let mut found: Vec<(u32, u32, String)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (rank, job) = trace::mpi::rank_stream_name(&name)?;
                Some((job, rank, name))
            })
            .collect();
        found.sort();
        jobs = found
            .iter()
            .map(|(job, ..)| *job)
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u32;
        for (job, rank, name) in found {
            let file = format!("streams/{name}");
            let (mut pid, mut events, mut dropped) = (0, 0, 0);
            if let Ok(mapped) = trace::StreamFile::open(&run.path().join(&file)) {
                if let Ok(stream) = mapped.parse() {
                    pid = stream.header.pid;
                    events = stream.events;
                    dropped = stream.dropped;
                }
            }
            meta.streams.push(trace::meta::StreamEntry {
                file,
                kind: trace::format::StreamKind::Rank,
                pid,
                tid: 0,
                rank: Some(rank as i32),
                events,
                dropped,
                name: if jobs > 1 {
                    format!("rank {rank} (MPI job {job})")
                } else {
                    format!("rank {rank}")
                },
            });
            meta.events_dropped += dropped;
            ranks += 1;
        }
    }
    for why in observe::mpi::refusals(run.path()) {
        eprintln!("contend: warning: {why}");
        meta.unavailable.push(Unavailable {
            what: "MPI calls of a rank".into(),
            why,
        });
    }
    (ranks, jobs)
}

/// The probe library: `$CONTEND_PROBE`, else beside this executable (where cargo builds it).
pub fn find_probe() -> anyhow::Result<PathBuf> {
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

/// The CPUs asked for with --cpus, --layout or --fill (and --cores), checked against the
/// machine; `None` when the program may run anywhere.
pub fn placement(
    cpus: Option<&str>,
    layout: Option<&std::path::Path>,
    fill: Option<topology::FillOrder>,
    cores: Option<usize>,
    machine: &topology::Topology,
) -> anyhow::Result<Option<Vec<u32>>> {
    let order: Vec<u32> = if let Some(list) = cpus {
        let set: topology::CpuSet = list
            .parse()
            .map_err(|e| bad_input(format!("--cpus {list}: {e}")))?;
        set.iter().collect()
    } else if let Some(path) = layout {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad_input(format!("--layout {}: {e}", path.display())))?;
        topology::parse_layout(&text)
            .map_err(|e| bad_input(format!("--layout {}: {e}", path.display())))?
    } else if let Some(order) = fill {
        machine.fill_order(order)
    } else {
        if cores.is_some() {
            return Err(bad_input(
                "--cores needs --fill or --layout to say which CPUs to take",
            ));
        }
        return Ok(None);
    };
    let order = match cores {
        Some(0) => return Err(bad_input("--cores must be at least 1")),
        Some(n) if n > order.len() => {
            return Err(bad_input(format!(
                "--cores {n}: only {} CPU(s) to choose from ({})",
                order.len(),
                topology::CpuSet::list_in_order(&order)
            )))
        }
        Some(n) => order[..n].to_vec(),
        None => order,
    };
    let set: topology::CpuSet = order.iter().copied().collect();
    machine.check_cpus(&set).map_err(bad_input)?;
    Ok(Some(order))
}

/// The machine's topology as meta.json keeps it.
pub(super) fn topology_json(t: &topology::Topology) -> serde_json::Value {
    serde_json::to_value(report::topo::TopoJson {
        summary: t.summary(),
        topology: t,
    })
    .unwrap_or(serde_json::Value::Null)
}

fn sampling_options(args: &Args, attached: bool) -> anyhow::Result<Option<SamplerOptions>> {
    if !(args.interval >= 0.0 && args.interval.is_finite()) {
        return Err(bad_input(format!(
            "--interval {}: give a number of milliseconds (0 turns sampling off)",
            args.interval
        )));
    }
    if args.interval == 0.0 {
        return Ok(None);
    }
    if !(0.1..=60_000.0).contains(&args.interval) {
        return Err(bad_input(format!(
            "--interval {} ms: give 0.1 ms to 60000 ms (0 turns sampling off)",
            args.interval
        )));
    }
    Ok(Some(SamplerOptions {
        interval: Duration::from_secs_f64(args.interval / 1000.0),
        attached,
        follow_children: true,
        sched_trace: !args.no_sched_trace,
    }))
}

/// The sampler's part of meta.json; what could not be had goes to `unavailable`, and the
/// tracepoint reader's caveats to stderr.
pub fn sampling_meta(interval: Duration, s: &launch::SamplerStats, meta: &mut Meta) {
    if let Some((what, why)) = &s.sched_unavailable {
        eprintln!("contend: note: {what} not recorded: {why}");
        meta.unavailable.push(Unavailable {
            what: what.clone(),
            why: why.clone(),
        });
    }
    let sched_trace = s.sched.as_ref().map(|t| {
        for note in t.notes.iter().filter(|n| n.starts_with("mounted")) {
            eprintln!("contend: note: {note}");
        }
        if t.lost > 0 || t.switch_gaps > 0 || !t.idle_exits_untraced.is_empty() {
            eprintln!(
                "contend: note: sched tracepoints: {} records lost, {} gaps in the CPUs' switch chains{}: some state intervals are approximate",
                t.lost,
                t.switch_gaps,
                if t.idle_exits_untraced.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", switches out of idle not delivered by this kernel on CPU(s) {}",
                        topology::CpuSet::list_in_order(&t.idle_exits_untraced)
                    )
                }
            );
        }
        trace::meta::SchedTrace {
            state_changes: t.state_changes,
            lost: t.lost,
            unparsed: t.unparsed,
            switch_gaps: t.switch_gaps,
            idle_exits_untraced: t.idle_exits_untraced.clone(),
            unsampled_threads: t.unsampled_threads,
            notes: t.notes.clone(),
        }
    });
    meta.sampling = Some(trace::meta::Sampling {
        interval_ns: interval.as_nanos() as u64,
        source: "schedstat".into(),
        rounds: s.rounds,
        late_rounds: s.late_rounds,
        sampler_cpu_ns: s.own_cpu_ns,
        wall_ns: s.wall_ns,
        sched_tracepoints: sched_trace.is_some(),
        sched_trace,
        steal_ns: s.steal_ns,
    });
    if s.sched.is_some() && !meta.captured.iter().any(|c| c == "sched-tracepoints") {
        meta.captured.push("sched-tracepoints".into());
    }
}

/// Everything a launched run puts in meta.json but its streams: clock, times, exit status
/// and outcome, work and counters (what the machine lacks goes to `unavailable`, and to
/// stderr when `tell`), sampling.
pub fn fill_meta(
    meta: &mut Meta,
    outcome: &launch::Outcome,
    sampling_interval: Option<Duration>,
    tell: bool,
) {
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
    meta.outcome = Some(match (outcome.status.code(), outcome.status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("killed by signal {}", signal_name(sig)),
        _ => "ended".into(),
    });
    meta.work = Some(trace::meta::Work {
        cpu_ns: outcome.cpu_ns,
        counters: counter_totals(&outcome.counters),
    });
    for u in &outcome.counters_unavailable {
        meta.unavailable.push(Unavailable {
            what: u.what.clone(),
            why: u.why.clone(),
        });
        if tell {
            eprintln!("contend: note: {} not counted: {}", u.what, u.why);
        }
    }
    if let (Some(interval), Some(stats)) = (sampling_interval, &outcome.sampler) {
        sampling_meta(interval, stats, meta);
    }
}

/// A signal's name, for people.
fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a static or thread-local string for any number.
    let text = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) };
    format!("{sig} ({})", text.to_string_lossy())
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(pid) = args.pid {
        return attach(&args, pid);
    }
    let machine = topology::Topology::live().ok();
    let cpus = match &machine {
        Some(m) => placement(
            args.cpus.as_deref(),
            args.layout.as_deref(),
            args.fill,
            args.cores,
            m,
        )?,
        None if args.cpus.is_some() || args.layout.is_some() || args.fill.is_some() => {
            return Err(anyhow::anyhow!(
                "cannot read this machine's topology to place the program"
            ))
        }
        None => None,
    };
    let interference = match (&args.interfere, &machine) {
        (Some(spec), Some(m)) => Some(super::interfere::parse(spec, m)?),
        (Some(_), None) => {
            return Err(anyhow::anyhow!(
                "cannot read this machine's topology to place the generator"
            ))
        }
        _ => None,
    };
    let cpus = match &interference {
        Some(spec) => {
            let allowed: Vec<u32> = bench::ctx::allowed_cpus();
            Some(super::interfere::program_cpus(cpus, &allowed, &spec.cpus)?)
        }
        None => cpus,
    };
    let sampling = sampling_options(&args, false)?;
    let probe = match args.locks {
        Some(_) => Some(find_probe()?),
        None => None,
    };
    let run = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut meta = Meta::new(args.command.clone());
    meta.recorded_by = std::env::args().collect();
    meta.topology = machine
        .as_ref()
        .map_or(serde_json::Value::Null, topology_json);
    meta.cpus = cpus.clone();
    if sampling.is_some() {
        meta.captured.push("schedstat".into());
    }
    if let Some(mode) = args.locks {
        meta.captured.push("locks".into());
        if args.alloc_sites {
            meta.captured.push("alloc-sites".into());
        }
        if mode.every > 1 {
            meta.lock_sample_every = Some(mode.every);
        }
    }
    let (command, env) = if args.mpi {
        meta.captured.push("mpi".into());
        let p = match prepare_mpi(&args, &run) {
            Ok(p) => p,
            Err(e) => {
                // Nothing was started: leave no empty run directory behind.
                let _ = std::fs::remove_dir_all(run.path());
                return Err(e);
            }
        };
        (p.command, p.env)
    } else {
        (args.command.clone(), Vec::new())
    };
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;

    let generator = match &interference {
        Some(spec) => {
            let g = super::interfere::start(spec)?;
            eprintln!(
                "contend: the memory contention generator runs on CPU(s) {}, the program on {}",
                topology::CpuSet::list_in_order(&spec.cpus),
                cpus.as_deref()
                    .map_or("any".to_string(), topology::CpuSet::list_in_order)
            );
            Some(g)
        }
        None => None,
    };
    let outcome = launch::run(Plan {
        command: &command,
        run: &run,
        locks: args.locks.zip(probe).map(|(mode, probe)| LockOptions {
            probe,
            ring_kib: args.ring_kb,
            sample_every: mode.every,
            alloc_sites: args.alloc_sites,
        }),
        poll: Duration::from_millis(args.poll_ms.max(1)),
        sampling: sampling.clone(),
        cpus: cpus.clone(),
        capture_output: false,
        env,
        counters: counters_wanted(),
    });
    if let Some(g) = generator {
        let done = g.stop();
        match (&done.achieved_gb_s, &done.error) {
            (Some(rate), _) => {
                eprintln!("contend: the generator moved {rate:.2} GB/s beside the program")
            }
            (None, Some(e)) => eprintln!("contend: warning: {e}"),
            _ => {}
        }
        meta.interference = Some(done);
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e @ launch::LaunchError::Spawn { .. }) => {
            // Kept and marked, so that what was asked for is on record; the shell's codes.
            let code = match &e {
                launch::LaunchError::Spawn { source, .. }
                    if source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    126
                }
                _ => 127,
            };
            meta.outcome = Some(format!("could not start: {e}"));
            meta.exit_status = Some(code);
            let _ = run.write_meta(&meta);
            eprintln!(
                "contend: error: {e} (the empty run is kept in {})",
                run.path().display()
            );
            std::process::exit(code);
        }
        Err(other) => return Err(anyhow::Error::new(other)),
    };

    if outcome.clock == ClockSource::Monotonic && args.locks.is_some() {
        meta.unavailable.push(Unavailable {
            what: "time-stamp counter".into(),
            why: "not invariant on this CPU (no constant_tsc/nonstop_tsc): CLOCK_MONOTONIC used, about 20 ns per read".into(),
        });
    }
    fill_meta(
        &mut meta,
        &outcome,
        sampling.as_ref().map(|o| o.interval),
        true,
    );
    let elapsed_ns = outcome.monotonic_span[1].saturating_sub(outcome.monotonic_span[0]);
    meta.streams = outcome.streams;
    let (ranks, jobs) = if args.mpi {
        collect_mpi(&run, &mut meta)
    } else {
        (0, 0)
    };
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    let refused = meta
        .unavailable
        .iter()
        .any(|u| u.what == "MPI calls of a rank");
    if args.mpi && ranks == 0 && refused {
        eprintln!("contend: warning: no MPI rank trace was written: the ranks refused the wrapper (above)");
    } else if args.mpi && ranks == 0 {
        eprintln!("contend: warning: no MPI rank trace was written: the program did not call MPI_Init with the wrapper loaded (a launcher contend does not know? name it with --mpi-impl, or see the notes above)");
    }
    for note in &outcome.notes {
        eprintln!("contend: note: {note}");
    }
    if let Some(sig) = outcome.status.signal() {
        eprintln!(
            "contend: the program was killed by signal {}; what was recorded is kept in {}",
            signal_name(sig),
            run.path().display()
        );
    }
    if let Some(options) = &sampling {
        if elapsed_ns < options.interval.as_nanos() as u64 {
            eprintln!(
                "contend: note: the program ran {:.1} ms, less than one sampling interval ({} ms): its service time is not sampled (try --interval 1)",
                elapsed_ns as f64 / 1e6,
                args.interval
            );
        }
    }
    let events: u64 = meta.streams.iter().map(|s| s.events).sum();
    let threads: std::collections::BTreeSet<u32> = meta
        .streams
        .iter()
        .filter(|s| s.kind == trace::format::StreamKind::Thread)
        .map(|s| s.tid)
        .collect();
    let from = if jobs > 1 {
        format!(
            "{} thread(s) and {ranks} MPI rank(s) of {jobs} jobs (see report --mpi-job)",
            threads.len()
        )
    } else if ranks > 0 {
        format!("{} thread(s) and {ranks} MPI rank(s)", threads.len())
    } else {
        format!("{} thread(s)", threads.len())
    };
    eprintln!(
        "contend: recorded {events} events from {from}, {} dropped, into {}",
        meta.events_dropped,
        run.path().display()
    );
    // The program's own exit status is contend's (as perf record does).
    match meta.exit_status {
        Some(0) | None => Ok(()),
        Some(code) => std::process::exit(code),
    }
}

/// `contend record -p PID`: samples a running process until it exits, --duration, or Ctrl-C.
fn attach(args: &Args, pid: u32) -> anyhow::Result<()> {
    let mut process = observe::Process::attach(pid).map_err(|e| bad_input(e.to_string()))?;
    // Reading another user's threads works for some files and not others: refuse plainly.
    // SAFETY: signal 0 only checks permission; nothing is sent.
    if unsafe { libc::kill(pid as i32, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    {
        return Err(bad_input(format!(
            "process {pid} belongs to another user: run contend as that user or as root"
        )));
    }
    let info = process.info().map_err(|e| bad_input(e.to_string()))?;
    let Some(sampling) = sampling_options(args, true)? else {
        return Err(bad_input(
            "-p records by sampling: --interval 0 would record nothing",
        ));
    };
    let duration = match args.duration {
        Some(s) if s > 0.0 && s <= 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(bad_input(format!(
                "--duration {s}: give seconds above 0 (and below 10^9)"
            )))
        }
        None => None,
    };
    let run = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut meta = Meta::new(if info.cmdline.is_empty() {
        vec![info.comm.clone()]
    } else {
        info.cmdline.clone()
    });
    meta.recorded_by = std::env::args().collect();
    meta.attached = true;
    meta.topology = topology::Topology::live()
        .ok()
        .as_ref()
        .map_or(serde_json::Value::Null, topology_json);
    meta.captured.push("schedstat".into());
    meta.unavailable.push(Unavailable {
        what: "locks".into(),
        why: "a running process cannot be given the LD_PRELOAD probe: start it with `contend record --locks -- CMD`".into(),
    });
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    eprintln!(
        "contend: recording process {pid} ({}) every {} ms{}; Ctrl-C to stop",
        info.comm,
        args.interval,
        duration.map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()))
    );
    let interval = sampling.interval;
    let outcome = launch::attach(launch::AttachPlan {
        pid,
        run: &run,
        sampling,
        duration,
    })?;
    meta.started = outcome.started;
    meta.ended = Some(outcome.ended);
    meta.monotonic_span = Some(outcome.monotonic_span);
    sampling_meta(interval, &outcome.sampler, &mut meta);
    meta.events_dropped = outcome.streams.iter().map(|s| s.dropped).sum();
    meta.outcome = Some(
        match outcome.end {
            launch::AttachEnd::Exited => "attached; the process exited",
            launch::AttachEnd::Duration => "attached; stopped after --duration",
            launch::AttachEnd::Interrupted => "attached; stopped by Ctrl-C",
            launch::AttachEnd::Terminated => "attached; stopped by SIGTERM or SIGHUP",
        }
        .into(),
    );
    meta.streams = outcome.streams;
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    for note in &outcome.notes {
        eprintln!("contend: note: {note}");
    }
    let threads = meta
        .streams
        .iter()
        .filter(|s| s.kind == trace::format::StreamKind::Thread)
        .count();
    eprintln!(
        "contend: recorded {} sampling rounds of {threads} thread(s) into {} ({})",
        outcome.sampler.rounds,
        run.path().display(),
        meta.outcome.as_deref().unwrap_or("")
    );
    Ok(())
}

/// The counters `record` and `scale` ask for: the hardware set for the model, and task-clock
/// and context switches, which every Linux has.
pub fn counters_wanted() -> Vec<observe::counters::Counter> {
    observe::counters::HARDWARE
        .iter()
        .chain(observe::counters::FALLBACK)
        .copied()
        .collect()
}

/// Counter totals as meta.json keeps them: only what was counted (`n/a` is absence).
pub fn counter_totals(readings: &[observe::counters::Reading]) -> Vec<trace::meta::CounterTotal> {
    readings
        .iter()
        .filter_map(|r| {
            r.estimate().map(|value| trace::meta::CounterTotal {
                counter: r.counter.name().to_string(),
                event: r.event.clone(),
                value,
                enabled_ns: r.enabled_ns,
                running_ns: r.running_ns,
            })
        })
        .collect()
}
