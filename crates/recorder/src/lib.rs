//! Recording a run: one skeleton for `contend record`, `record -p`, `record --mpi`,
//! `record --interfere`, `c2c record` and each run of `contend scale`.
//!
//! [`record`] creates the run directory, writes meta.json (built here only, by [`new_meta`]),
//! launches the program with the sampler, the lock probe, the MPI wrapper, the sharing runtime
//! or `perf c2c record`, and a contention generator beside it, then finalises meta.json.
//! [`attach`] records a process that is already running; [`sharing::import`] makes a run of a
//! perf.data file.
//!
//! Options are plain structs with `Default`. Errors are one [`RecordError`]: bad input, the
//! program could not start ([`CouldNotStart`], carrying the shell's 126/127), or a failure.
//! Nothing is printed here: what the user should hear goes to a [`Notice`] sink as it happens.

pub mod error;
pub mod finish;
pub mod interfere;
pub mod mpi;
pub mod notice;
pub mod perfmap;
pub mod placement;
pub mod probe;
pub mod scale;
pub mod sharing;

pub use error::{CouldNotStart, RecordError};
pub use finish::{counter_totals, counters_wanted, signal_name};
pub use notice::{About, Level, Notice};
pub use placement::Placement;
pub use probe::find_probe;
pub use sharing::{Backend, SharingOptions};

use notice::{info, note, warn};
use observe::launch::{self, LockOptions, Plan};
use observe::sampler::SamplerOptions;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::Duration;
use trace::meta::{Meta, Unavailable};
use trace::{Captured, ClockSource, RunDir, StreamKind};

/// A meta.json for a run starting now: the one place one is made.
pub fn new_meta(command: Vec<String>, recorded_by: &[String]) -> Meta {
    let mut meta = Meta::new(command);
    meta.recorded_by = recorded_by.to_vec();
    meta
}

/// The sampling interval asked for in milliseconds: `None` for 0 (sampling off); bad input
/// outside 0.1 ms to 60 s.
pub fn sampling_interval(ms: f64) -> Result<Option<Duration>, RecordError> {
    if !(ms >= 0.0 && ms.is_finite()) {
        return Err(RecordError::bad(format!(
            "--interval {ms}: give a number of milliseconds (0 turns sampling off)"
        )));
    }
    if ms == 0.0 {
        return Ok(None);
    }
    if !(0.1..=60_000.0).contains(&ms) {
        return Err(RecordError::bad(format!(
            "--interval {ms} ms: give 0.1 ms to 60000 ms (0 turns sampling off)"
        )));
    }
    Ok(Some(Duration::from_secs_f64(ms / 1000.0)))
}

/// Lock recording through the LD_PRELOAD probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locks {
    /// Record one in this many uncontended acquisitions (1: all).
    pub sample_every: u32,
    /// Record heap allocations too, to name heap locks by the site that allocated them.
    pub alloc_sites: bool,
    /// Each thread's event ring, KiB.
    pub ring_kib: u64,
    /// The probe library; `None`: [`find_probe`].
    pub probe: Option<PathBuf>,
    /// Record the program's blocked futex waits too (`observe::offcpu`; `--no-waits` turns
    /// it off).
    pub waits: bool,
    /// With `waits`: bytes of user stacks kept at most (`--stack-budget`; 0: no stacks).
    pub stack_budget: u64,
}

impl Default for Locks {
    fn default() -> Self {
        Locks {
            sample_every: 1,
            alloc_sites: false,
            ring_kib: 4096,
            probe: None,
            waits: true,
            stack_budget: observe::offcpu::DEFAULT_STACK_BUDGET,
        }
    }
}

/// What to record and how.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordOptions {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The run directory to create (numbered if it exists).
    pub output: PathBuf,
    /// The contend command line, for meta.json.
    pub recorded_by: Vec<String>,
    /// Service-time sampling interval (`None`: no sampling); see [`sampling_interval`].
    pub interval: Option<Duration>,
    /// Record exact scheduler states from the sched tracepoints too.
    pub sched_trace: bool,
    pub placement: Placement,
    pub locks: Option<Locks>,
    /// How often the lock rings are drained.
    pub poll: Duration,
    /// Record an MPI job's calls in every rank; `Some(None)`: the MPI is found from the program.
    pub mpi: Option<Option<observe::mpi::Implementation>>,
    /// `mem generate --cpus LIST ...`: a contention generator beside the program.
    pub interfere: Option<String>,
    /// The contend executable that runs the generator (`None`: this one).
    pub generator_exe: Option<PathBuf>,
    /// Record cache-line sharing (`c2c record`).
    pub sharing: Option<SharingOptions>,
    /// Send the program's output to `stdout.txt` and `stderr.txt` in the run directory.
    pub capture_output: bool,
    /// Extra environment for the program.
    pub env: Vec<(String, String)>,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            command: Vec::new(),
            output: PathBuf::from(trace::DEFAULT_RUN_DIR),
            recorded_by: Vec::new(),
            interval: Some(Duration::from_millis(10)),
            sched_trace: true,
            placement: Placement::default(),
            locks: None,
            poll: Duration::from_millis(1),
            mpi: None,
            interfere: None,
            generator_exe: None,
            sharing: None,
            capture_output: false,
            env: Vec::new(),
        }
    }
}

/// A finished recording.
pub struct Recorded {
    pub run: RunDir,
    /// meta.json as written.
    pub meta: Meta,
    /// What the launch reported (its streams are in `meta.streams`).
    pub outcome: launch::Outcome,
    /// MPI rank streams found.
    pub ranks: mpi::Ranks,
}

impl Recorded {
    /// The measured program's exit status as contend passes it on (128+N for signal N), when
    /// not 0.
    pub fn failed_status(&self) -> Option<i32> {
        self.meta.exit_status.filter(|&c| c != 0)
    }
}

/// The sharing back end, once checked.
struct SharingPlan {
    options: SharingOptions,
    program: String,
    perf: Option<PathBuf>,
    meta: trace::meta::SharingMeta,
}

/// Records `options.command` into a new run directory. The program's own exit status is in
/// the returned meta (`exit_status`); a program that could not start is
/// [`RecordError::CouldNotStart`], its run directory kept.
pub fn record(
    options: &RecordOptions,
    notices: &mut dyn FnMut(Notice),
) -> Result<Recorded, RecordError> {
    if options.command.is_empty() {
        return Err(RecordError::bad("no program to record was given"));
    }
    let machine = topology::Topology::live().ok();
    let cpus = match &machine {
        Some(m) => options.placement.resolve(m)?,
        None if options.placement.is_asked() => {
            return Err(RecordError::Failed(
                "cannot read this machine's topology to place the program".into(),
            ))
        }
        None => None,
    };
    let interference = match (&options.interfere, &machine) {
        (Some(spec), Some(m)) => Some(interfere::parse(spec, m)?),
        (Some(_), None) => {
            return Err(RecordError::Failed(
                "cannot read this machine's topology to place the generator".into(),
            ))
        }
        _ => None,
    };
    let cpus = match &interference {
        Some(spec) => Some(interfere::program_cpus(
            cpus,
            &bench::ctx::allowed_cpus(),
            &spec.cpus,
        )?),
        None => cpus,
    };
    let sampling = options.interval.map(|interval| SamplerOptions {
        interval,
        attached: false,
        follow_children: true,
        sched_trace: options.sched_trace,
    });
    let probe = match &options.locks {
        Some(l) => Some(match &l.probe {
            Some(p) => {
                probe::check_probe(p, "the lock probe given is")?;
                p.clone()
            }
            None => find_probe()?,
        }),
        None => None,
    };
    // Told before the program runs (its output follows), and kept as the reason should the
    // probe load nowhere.
    let obstacle = match &options.locks {
        Some(_) => probe::load_obstacle(&options.command),
        None => None,
    };
    if let Some(o) = &obstacle {
        warn(
            notices,
            About::Setup,
            format!("{}; its locks will not be recorded", o.why),
        );
    }
    let mut sharing = match &options.sharing {
        Some(s) => {
            let (program, backend) = sharing::check_program(&options.command, s, notices)?;
            let perf = match backend {
                Backend::Pmu => {
                    if s.hot_after.is_some()
                        || s.exhaustive
                        || s.window.is_some()
                        || s.sample.is_some()
                    {
                        note(notices, About::Setup, "--hot-after, --exhaustive, --window and --sample shape the sharing runtime; the PMU back end ignores them");
                    }
                    Some(sharing::perf_program()?)
                }
                _ => None,
            };
            Some(SharingPlan {
                meta: sharing::meta_for(backend, s),
                options: s.clone(),
                program,
                perf,
            })
        }
        None => None,
    };

    let run = RunDir::create(&options.output)?;
    let mut meta = new_meta(options.command.clone(), &options.recorded_by);
    meta.topology = machine.map(topology::Described::of);
    meta.cpus = cpus.clone();
    if sampling.is_some() {
        meta.capture(Captured::Schedstat);
    }
    if let Some(l) = &options.locks {
        meta.capture(Captured::Locks);
        if l.alloc_sites {
            meta.capture(Captured::AllocSites);
        }
        if l.sample_every > 1 {
            meta.lock_sample_every = Some(l.sample_every);
        }
    }
    if let Some(plan) = &sharing {
        meta.capture(Captured::Sharing);
        meta.sharing = Some(plan.meta.clone());
    }
    // `_mpi_cache` holds the wrapper the ranks preload: kept to the end of the recording.
    let (mut command, mut env, _mpi_cache) = match options.mpi {
        Some(forced) => {
            meta.capture(Captured::Mpi);
            let (p, cache) = match mpi::prepare(&options.command, forced, &run, notices) {
                Ok(p) => p,
                Err(e) => {
                    // Nothing was started: leave no empty run directory behind.
                    let _ = std::fs::remove_dir_all(run.path());
                    return Err(e);
                }
            };
            (p.command, p.env, Some(cache))
        }
        None => (options.command.clone(), Vec::new(), None),
    };
    env.extend(options.env.iter().cloned());
    run.write_meta(&meta)?;

    if let Some(plan) = &sharing {
        let dir = absolute(run.path());
        env.extend(sharing::runtime_env(
            &dir,
            plan.perf.is_some(),
            &plan.options,
        ));
        // The PMU back end runs the program under `perf c2c record`, into the run directory.
        if let Some(perf) = &plan.perf {
            std::fs::create_dir_all(dir.join(trace::layout::SHARING_DIR))?;
            let mut c = vec![
                perf.to_string_lossy().into_owned(),
                "c2c".into(),
                "record".into(),
                "-o".into(),
                perf_data(&dir).to_string_lossy().into_owned(),
                "--".into(),
            ];
            c.append(&mut command);
            command = c;
        }
        let o = &plan.options;
        info(
            notices,
            About::Setup,
            format!(
                "recording cache-line sharing of {} into {} ({}-byte lines, {})",
                plan.program,
                run.path().display(),
                o.line,
                if plan.perf.is_some() {
                    "memory samples of the PMU through `perf c2c record`".to_string()
                } else if o.exhaustive {
                    "every line tracked".to_string()
                } else if let Some(n) = o.hot_after {
                    format!("lines tracked in detail after {n} transfers")
                } else {
                    "lines tracked in detail once hot".to_string()
                }
            ),
        );
    }

    let generator = match &interference {
        Some(spec) => {
            let exe = match &options.generator_exe {
                Some(e) => e.clone(),
                None => std::env::current_exe()?,
            };
            let g = interfere::start(spec, &exe)?;
            info(
                notices,
                About::Setup,
                format!(
                    "the memory contention generator runs on CPU(s) {}, the program on {}",
                    topology::CpuSet::list_in_order(&spec.cpus),
                    cpus.as_deref()
                        .map_or("any".to_string(), topology::CpuSet::list_in_order)
                ),
            );
            Some(g)
        }
        None => None,
    };
    let pmu = sharing.as_ref().is_some_and(|p| p.perf.is_some());
    let outcome = launch::run(Plan {
        command: &command,
        run: &run,
        locks: options
            .locks
            .as_ref()
            .zip(probe)
            .map(|(l, probe)| LockOptions {
                probe,
                ring_kib: l.ring_kib,
                sample_every: l.sample_every,
                alloc_sites: l.alloc_sites,
            }),
        poll: options.poll.max(Duration::from_millis(1)),
        sampling: sampling.clone(),
        cpus: cpus.clone(),
        capture_output: options.capture_output,
        env,
        // Hardware counters would compete with perf's PEBS/IBS events for the PMU.
        counters: if pmu { Vec::new() } else { counters_wanted() },
        waits: options.locks.as_ref().is_some_and(|l| l.waits),
        wait_stack_budget: options.locks.as_ref().map_or(0, |l| l.stack_budget),
    });
    if let Some(g) = generator {
        let done = g.stop();
        match (&done.achieved_gb_s, &done.error) {
            (Some(rate), _) => info(
                notices,
                About::Outcome,
                format!("the generator moved {rate:.2} GB/s beside the program"),
            ),
            (None, Some(e)) => warn(notices, About::Outcome, e.clone()),
            _ => {}
        }
        meta.interference = Some(done);
    }
    let mut outcome = match outcome {
        Ok(o) => o,
        Err(launch::LaunchError::Spawn { program, source }) => {
            let e = CouldNotStart {
                program,
                why: source,
                run: run.path().to_path_buf(),
            };
            // Kept and marked, so that what was asked for is on record; the shell's codes.
            meta.outcome = Some(format!(
                "could not start: cannot start `{}`: {}",
                e.program, e.why
            ));
            meta.exit_status = Some(e.exit_code());
            let _ = run.write_meta(&meta);
            return Err(e.into());
        }
        Err(other) => return Err(RecordError::failed(other)),
    };

    if outcome.clock == ClockSource::Monotonic && options.locks.is_some() {
        meta.unavailable.push(Unavailable {
            what: "time-stamp counter".into(),
            why: "not invariant on this CPU (no constant_tsc/nonstop_tsc): CLOCK_MONOTONIC used, about 20 ns per read".into(),
        });
    }
    finish::fill_meta(&mut meta, &outcome, options.interval, notices);
    finish::offcpu_meta(&mut meta, &outcome, notices);
    let elapsed_ns = outcome.monotonic_span[1].saturating_sub(outcome.monotonic_span[0]);
    meta.streams = std::mem::take(&mut outcome.streams);
    if meta.has(Captured::OffCpu) {
        perfmap::save(
            run.path(),
            meta.streams
                .iter()
                .map(|s| s.pid)
                .collect::<std::collections::BTreeSet<_>>(),
            notices,
        );
    }
    if options.locks.is_some() {
        probe::account(
            &mut meta,
            outcome.probe_announced.as_ref(),
            obstacle.as_ref(),
            notices,
        );
    }
    let ranks = if options.mpi.is_some() {
        mpi::collect(&run, &mut meta, notices)
    } else {
        mpi::Ranks::default()
    };
    if let Some(plan) = &mut sharing {
        finish_sharing(&run, plan, &mut meta, notices);
    }
    run.write_meta(&meta)?;

    let refused = meta.unavailable.iter().any(|u| u.what == mpi::REFUSED);
    if options.mpi.is_some() && ranks.streams == 0 && refused {
        warn(
            notices,
            About::Outcome,
            "no MPI rank trace was written: the ranks refused the wrapper (above)",
        );
    } else if options.mpi.is_some() && ranks.streams == 0 {
        warn(notices, About::Outcome, "no MPI rank trace was written: the program did not call MPI_Init with the wrapper loaded (a launcher contend does not know? name it with --mpi-impl, or see the notes above)");
    }
    for n in &outcome.notes {
        note(notices, About::Outcome, n.clone());
    }
    if let Some(sig) = outcome.status.signal() {
        info(
            notices,
            About::Outcome,
            format!(
                "the program was killed by signal {}; what was recorded is kept in {}",
                signal_name(sig),
                run.path().display()
            ),
        );
    }
    match &sharing {
        Some(plan) => tell_sharing(&run, plan, notices),
        None => {
            if let Some(interval) = options.interval {
                if elapsed_ns < interval.as_nanos() as u64 {
                    note(
                        notices,
                        About::Outcome,
                        format!(
                            "the program ran {:.1} ms, less than one sampling interval ({} ms): its service time is not sampled (try --interval 1)",
                            elapsed_ns as f64 / 1e6,
                            interval.as_nanos() as f64 / 1e6
                        ),
                    );
                }
            }
            tell_recorded(&run, &meta, ranks, notices);
        }
    }
    Ok(Recorded {
        run,
        meta,
        outcome,
        ranks,
    })
}

/// Where the PMU back end's perf.data goes.
fn perf_data(dir: &std::path::Path) -> PathBuf {
    dir.join(trace::layout::SHARING_DIR).join("perf.data")
}

/// After the program: the PMU back end's samples imported, every process's results listed.
fn finish_sharing(
    run: &RunDir,
    plan: &mut SharingPlan,
    meta: &mut Meta,
    notices: &mut dyn FnMut(Notice),
) {
    let unavailable = |meta: &mut Meta, why: String| {
        meta.unavailable.push(Unavailable {
            what: "sharing".into(),
            why,
        })
    };
    if plan.perf.is_some() {
        let perf_failed = meta.exit_status.is_some_and(|c| c != 0);
        let data = perf_data(&absolute(run.path()));
        let empty = std::fs::metadata(&data).map_or(true, |m| m.len() == 0);
        if empty {
            let why = format!(
                "`perf c2c record` wrote no samples{} (see its messages above; memory sampling may need root or a lower kernel.perf_event_paranoid)",
                match meta.exit_status {
                    Some(c) if perf_failed => format!(" and exited with {c}"),
                    _ => String::new(),
                }
            );
            warn(notices, About::Outcome, why.clone());
            unavailable(meta, why);
        } else {
            match sharing::import_perf_data(run.path(), &data, plan.options.line, &plan.program) {
                Ok(mem) => sharing::report_losses(&mem, notices),
                Err(e) => {
                    warn(notices, About::Outcome, e.to_string());
                    unavailable(meta, e.to_string());
                }
            }
        }
    }
    plan.meta.processes = sharing::collect_sharing(run.path());
    for p in plan.meta.processes.iter().filter(|p| p.error.is_some()) {
        let why = p.error.clone().unwrap_or_default();
        warn(notices, About::Outcome, format!("{}: {why}", p.file));
        meta.unavailable.push(Unavailable {
            what: format!("sharing of process {}", p.pid),
            why: format!("{}: {why}", p.file),
        });
    }
    if plan.meta.processes.is_empty() && plan.perf.is_none() {
        unavailable(meta, "the program wrote no sharing results: it was not built with `contend cc`, or it did not exit normally".into());
    }
    meta.sharing = Some(plan.meta.clone());
}

/// What a sharing recording wrote.
fn tell_sharing(run: &RunDir, plan: &SharingPlan, notices: &mut dyn FnMut(Notice)) {
    let shown = run.path().display();
    let processes = &plan.meta.processes;
    if processes.is_empty() && plan.perf.is_some() {
        warn(
            notices,
            About::Outcome,
            format!("no memory samples were imported into {shown} (see above)"),
        );
    } else if processes.is_empty() {
        warn(notices, About::Outcome, format!("no sharing results were written into {shown}: the program was not built with `contend cc` ({}), or it did not exit normally and could not write them (killed by SIGKILL, or a stack overflow)", sharing::REBUILD));
    } else {
        let good = processes.iter().filter(|p| p.error.is_none()).count();
        info(
            notices,
            About::Outcome,
            format!("recorded sharing of {good} process(es) into {shown}; see contend c2c report {shown}"),
        );
    }
}

/// What a recording wrote: events, of how many threads and ranks.
fn tell_recorded(run: &RunDir, meta: &Meta, ranks: mpi::Ranks, notices: &mut dyn FnMut(Notice)) {
    let events: u64 = meta.streams.iter().map(|s| s.events).sum();
    let threads: std::collections::BTreeSet<u32> = meta
        .streams
        .iter()
        .filter(|s| s.kind == StreamKind::Thread)
        .map(|s| s.tid)
        .collect();
    let (n, jobs) = (ranks.streams, ranks.jobs);
    let from = if jobs > 1 {
        format!(
            "{} thread(s) and {n} MPI rank(s) of {jobs} jobs (see report --mpi-job)",
            threads.len()
        )
    } else if n > 0 {
        format!("{} thread(s) and {n} MPI rank(s)", threads.len())
    } else {
        format!("{} thread(s)", threads.len())
    };
    info(
        notices,
        About::Outcome,
        format!(
            "recorded {events} events from {from}, {} dropped, into {}",
            meta.events_dropped,
            run.path().display()
        ),
    );
}

fn absolute(p: &std::path::Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Recording a running process (`record -p`).
#[derive(Debug, Clone, PartialEq)]
pub struct AttachOptions {
    pub pid: u32,
    pub output: PathBuf,
    pub recorded_by: Vec<String>,
    /// Sampling interval; `None` is refused (attaching records by sampling).
    pub interval: Option<Duration>,
    pub sched_trace: bool,
    /// Stop after this many seconds (`None`: when the process exits, or on Ctrl-C).
    pub duration: Option<f64>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            pid: 0,
            output: PathBuf::from(trace::DEFAULT_RUN_DIR),
            recorded_by: Vec::new(),
            interval: Some(Duration::from_millis(10)),
            sched_trace: true,
            duration: None,
        }
    }
}

/// Samples a running process until it exits, the duration ends, or Ctrl-C.
pub fn attach(
    options: &AttachOptions,
    notices: &mut dyn FnMut(Notice),
) -> Result<(RunDir, Meta), RecordError> {
    let pid = options.pid;
    let mut process = observe::Process::attach(pid).map_err(|e| RecordError::bad(e.to_string()))?;
    // Reading another user's threads works for some files and not others: refuse plainly.
    // SAFETY: signal 0 only checks permission; nothing is sent.
    if unsafe { libc::kill(pid as i32, 0) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    {
        return Err(RecordError::bad(format!(
            "process {pid} belongs to another user: run contend as that user or as root"
        )));
    }
    let info_ = process
        .info()
        .map_err(|e| RecordError::bad(e.to_string()))?;
    let Some(interval) = options.interval else {
        return Err(RecordError::bad(
            "-p records by sampling: --interval 0 would record nothing",
        ));
    };
    let duration = match options.duration {
        Some(s) if s > 0.0 && s <= 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(RecordError::bad(format!(
                "--duration {s}: give seconds above 0 (and below 10^9)"
            )))
        }
        None => None,
    };
    let run = RunDir::create(&options.output)?;
    let mut meta = new_meta(
        if info_.cmdline.is_empty() {
            vec![info_.comm.clone()]
        } else {
            info_.cmdline.clone()
        },
        &options.recorded_by,
    );
    meta.attached = true;
    meta.topology = topology::Topology::live().ok().map(topology::Described::of);
    meta.capture(Captured::Schedstat);
    meta.unavailable.push(Unavailable {
        what: "locks".into(),
        why: "a running process cannot be given the LD_PRELOAD probe: start it with `contend record --locks -- CMD`".into(),
    });
    run.write_meta(&meta)?;
    info(
        notices,
        About::Setup,
        format!(
            "recording process {pid} ({}) every {} ms{}; Ctrl-C to stop",
            info_.comm,
            interval.as_nanos() as f64 / 1e6,
            duration.map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()))
        ),
    );
    let outcome = launch::attach(launch::AttachPlan {
        pid,
        run: &run,
        sampling: SamplerOptions {
            interval,
            attached: true,
            follow_children: true,
            sched_trace: options.sched_trace,
        },
        duration,
    })
    .map_err(RecordError::failed)?;
    meta.started = outcome.started;
    meta.ended = Some(outcome.ended);
    meta.monotonic_span = Some(outcome.monotonic_span);
    finish::sampling_meta(interval, &outcome.sampler, &mut meta, notices);
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
    run.write_meta(&meta)?;
    for n in &outcome.notes {
        note(notices, About::Outcome, n.clone());
    }
    let threads = meta
        .streams
        .iter()
        .filter(|s| s.kind == StreamKind::Thread)
        .count();
    info(
        notices,
        About::Outcome,
        format!(
            "recorded {} sampling rounds of {threads} thread(s) into {} ({})",
            outcome.sampler.rounds,
            run.path().display(),
            meta.outcome.as_deref().unwrap_or("")
        ),
    );
    Ok((run, meta))
}
