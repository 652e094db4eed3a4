//! `contend scale --threads M -- CMD ... {threads} ...`: runs a program with M threads on one
//! core, on M cores (and on one socket's cores on NUMA machines), repeated, each run recorded
//! into one directory; then the Tudor & Teo model of where the speed-up went (memory/hardware
//! contention vs other dependencies), as the thesis's General Metrics Gathering tool did.

use crate::exit::bad_input;
use analysis::activity::WorkUnit;
use std::path::{Path, PathBuf};
use std::time::Duration;
use trace::RunDir;

#[derive(clap::Args)]
pub struct Args {
    /// Thread counts: one (`4`) or a sweep (`1,2,4,8`). `{threads}` in CMD is replaced by
    /// each, and OMP_NUM_THREADS is set to it.
    #[arg(long, value_name = "M[,M...]", value_delimiter = ',', required = true)]
    threads: Vec<u32>,
    /// Core counts to run each thread count on (default: 1 and M, plus one socket's cores
    /// on a NUMA machine when M exceeds them). `m` stands for the thread count.
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',')]
    cores: Vec<String>,
    /// Rounds (one run of every configuration each, interleaved): `N`, or `MIN..MAX` to stop
    /// once every verdict is settled (see --precision) after at least MIN rounds.
    #[arg(long, value_name = "N|MIN..MAX", default_value = "3..10")]
    repeat: String,
    /// A verdict is settled when its cause's share interval (95 %) is narrower than this many
    /// percentage points, or no measurable loss is established.
    #[arg(long, value_name = "POINTS", default_value_t = 20.0)]
    precision: f64,
    /// Stop starting rounds after this long (e.g. `2m`, `90s`), settled or not.
    #[arg(long, value_name = "DURATION")]
    budget: Option<String>,
    /// Warm-up rounds done first and not counted (warm caches, page cache).
    #[arg(long, value_name = "W", default_value_t = 0)]
    warmup: u32,
    /// The directory for every run and scale.json (numbered if it exists).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "scale.data"
    )]
    output: PathBuf,
    /// How the cores are chosen: socket-first (one thread per core, filling a package
    /// first), spread or compact.
    #[arg(long, value_name = "ORDER", default_value = "socket-first")]
    fill: topology::FillOrder,
    /// Service-time sampling interval, ms.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    interval: f64,
    /// Also record exact scheduler states from the sched tracepoints (off by default here: they
    /// cost the kernel about 2 µs per context switch, which would weigh on the timings).
    #[arg(long)]
    sched_trace: bool,
    /// Also record locks (LD_PRELOAD probe), to say how much of the dependency loss lock
    /// waits explain (thesis table 4.11).
    #[arg(long)]
    locks: bool,
    /// Print the result as JSON (scale.json) on stdout.
    #[arg(long)]
    json: bool,
    /// Where to write the speed-up plot for a sweep (default: DIR/speedup.svg).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// The program and its arguments, with `{threads}` where the thread count goes.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

// The model's types live with the loader that reads scale.json back (`contend report DIR`).
use explain::scale::{RunResult, ScaleResult};

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.threads.is_empty() || args.threads.contains(&0) {
        return Err(bad_input("--threads: give thread counts of 1 or more"));
    }
    let (repeat_min, repeat_max) =
        recorder::scale::parse_repeat(&args.repeat).map_err(bad_input)?;
    const MOST_WARMUPS: u32 = 10_000;
    if args.warmup > MOST_WARMUPS {
        return Err(bad_input(format!(
            "--warmup: at most {MOST_WARMUPS} warm-up rounds"
        )));
    }
    if !(args.precision.is_finite() && args.precision > 0.0 && args.precision <= 100.0) {
        return Err(bad_input(format!(
            "--precision {}: give percentage points above 0, up to 100",
            args.precision
        )));
    }
    let budget = match &args.budget {
        Some(b) => Some(
            humantime::parse_duration(b)
                .map_err(|e| bad_input(format!("--budget `{b}`: {e} (examples: 90s, 2m, 1h)")))?,
        ),
        None => None,
    };
    if !(0.1..=60_000.0).contains(&args.interval) {
        return Err(bad_input(format!(
            "--interval {} ms: give 0.1 ms to 60000 ms",
            args.interval
        )));
    }
    let mut notes = Vec::new();
    if !args.command.iter().any(|a| a.contains("{threads}")) {
        let note = "the command has no {threads} placeholder: only OMP_NUM_THREADS is set to the thread count".to_string();
        crate::ui::note(&note);
        notes.push(note);
    }
    let machine = topology::Topology::live()?;
    let planned = recorder::scale::plan_runs(&machine, args.fill, &args.threads, &args.cores)
        .map_err(bad_input)?;
    for note in &planned.notes {
        crate::ui::note(note);
        notes.push(note.clone());
    }
    let (order, cores_per_socket, numa) = (planned.order, planned.cores_per_socket, planned.numa);
    let plan = planned.counts;
    let probe = if args.locks {
        Some(recorder::find_probe()?)
    } else {
        None
    };
    // Said once here: each run's own warning is not shown (only the sampler's notices are).
    if let Some(o) = args
        .locks
        .then(|| recorder::probe::load_obstacle(&args.command))
        .flatten()
    {
        let note = format!("{}: lock waits are not measured", o.why);
        crate::ui::warning(&note);
        notes.push(note);
    }
    let root = RunDir::create(&args.output).map_err(|e| {
        if e.is_bad_input() {
            bad_input(e.to_string())
        } else {
            anyhow::anyhow!("{e}")
        }
    })?;
    // The scale directory holds runs, not streams of its own.
    let _ = std::fs::remove_dir(root.path().join(trace::rundir::STREAMS_DIR));
    let configurations: Vec<(u32, u32)> = plan
        .iter()
        .flat_map(|(m, counts)| counts.iter().map(move |&n| (*m, n)))
        .collect();
    let total = configurations.len() as u64 * u64::from(args.warmup + repeat_max);
    let bar = crate::ui::progress_bar(total, "runs");
    let interval = Duration::from_secs_f64(args.interval / 1000.0);
    // SAFETY: sysconf has no preconditions.
    let tick_ns = 1e9 / (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64);
    let mut experiment = explain::scale::Experiment {
        command: args.command.clone(),
        repeat_min,
        repeat_max,
        precision_pct: args.precision,
        locks: args.locks,
        stopped: String::new(),
        warmup: args.warmup,
        interval_ns: interval.as_nanos() as u64,
        fill: format!("{:?}", args.fill),
        cores_per_socket,
        numa,
        plan,
        order,
    };
    let started = std::time::Instant::now();
    let mut runs = Vec::new();
    let mut width = String::new();
    let mut result = None;
    // Warm-up rounds (not counted), then counted rounds; within a round every configuration
    // runs once, the order rotated a place each round so none always runs first.
    for round in 0..(args.warmup + repeat_max) {
        let counted = round >= args.warmup;
        let number = if counted {
            round - args.warmup + 1
        } else {
            round + 1
        };
        let round_started = std::time::Instant::now();
        for i in 0..configurations.len() {
            let (m, n) = configurations[(i + round as usize) % configurations.len()];
            let name = if counted {
                format!("m{m}-n{n}-r{number}")
            } else {
                format!("m{m}-n{n}-warmup{number}")
            };
            let what = if counted { "round" } else { "warm-up" };
            bar.set_message(format!(
                "{what} {number}, {m} threads on {n} core(s){width}"
            ));
            let command = recorder::scale::substitute(&args.command, m);
            let cpus: Vec<u32> = experiment.order[..n as usize].to_vec();
            let result = one_run(
                root.path(),
                &name,
                &command,
                m,
                n,
                &cpus,
                interval,
                probe.as_deref(),
                args.sched_trace,
                if counted { number } else { 0 },
                tick_ns,
            )?;
            bar.inc(1);
            if let Some(code) = result.exit_status.filter(|&c| c != 0) {
                bar.abandon();
                let failed = format!(
                    "{} exited with status {code} in {name} (its output is in {}/{name}/stderr.txt)",
                    command[0],
                    root.path().display()
                );
                let complete = if counted { number - 1 } else { 0 };
                if complete == 0 {
                    crate::ui::error(format_args!("{failed}; stopping"));
                    std::process::exit(code);
                }
                // The rounds done are kept and modelled (a failed run says nothing of the
                // others); the round it broke is left out, so every round still pairs its
                // configurations. The exit status is the program's, as `record` passes it.
                crate::ui::error(format_args!(
                    "{failed}; stopping after {complete} complete round(s)"
                ));
                runs.retain(|r: &RunResult| r.round < number);
                notes.push(format!(
                    "{failed}: the experiment stopped there; the verdicts use the {complete} complete round(s) before it"
                ));
                experiment.stopped =
                    format!("a run failed in round {number}: {complete} complete round(s) kept");
                finish(&args, &root, &experiment, runs, notes)?;
                std::process::exit(code);
            }
            if counted {
                runs.push(result);
            }
        }
        if !counted {
            continue;
        }
        let spent = started.elapsed();
        let over_budget = budget.is_some_and(|b| spent + round_started.elapsed() > b);
        if number >= repeat_min || over_budget {
            let r = explain::scale::model(&experiment, runs.clone(), notes.clone());
            if let Some(w) = r.widest_share_pct() {
                width = format!(", widest share interval {w:.0} points");
            }
            let settled = r.settled(args.precision);
            let has_verdicts = r.verdicts().count() > 0;
            result = Some(r);
            if number >= repeat_min && (settled || !has_verdicts) && repeat_min < repeat_max {
                experiment.stopped = format!(
                    "every verdict settled after {number} round(s) (--repeat {}, --precision {})",
                    args.repeat, args.precision
                );
                break;
            }
            if over_budget && number < repeat_max {
                experiment.stopped = format!(
                    "stopped by --budget {} after {number} round(s){}",
                    args.budget.as_deref().unwrap_or(""),
                    if number < repeat_min {
                        format!(", fewer than the {repeat_min} asked for")
                    } else {
                        String::new()
                    }
                );
                break;
            }
        }
        if number == repeat_max {
            experiment.stopped = if repeat_min < repeat_max
                && !result.as_ref().is_some_and(|r| r.settled(args.precision))
            {
                format!("{repeat_max} round(s), the most --repeat allows, and not every verdict settled")
            } else {
                format!("{repeat_max} round(s)")
            };
        }
    }
    bar.finish_and_clear();
    finish(&args, &root, &experiment, runs, notes)
}

/// The model of the rounds done: scale.json, the text (or JSON) and the plot of a sweep.
fn finish(
    args: &Args,
    root: &RunDir,
    experiment: &explain::scale::Experiment,
    runs: Vec<RunResult>,
    notes: Vec<String>,
) -> anyhow::Result<()> {
    let result = explain::scale::model(experiment, runs, notes);
    let json = serde_json::to_string_pretty(&result)?;
    std::fs::write(root.path().join("scale.json"), &json)?;
    if args.json {
        crate::output::outln!("{json}");
    } else {
        crate::output::out!("{}", report::scale::render(&result_view(&result)));
    }
    if args.threads.len() > 1 {
        let path = args
            .plot
            .clone()
            .unwrap_or_else(|| root.path().join("speedup.svg"));
        std::fs::write(&path, report::scale::speedup_svg(&result_view(&result)))
            .map_err(|e| bad_input(format!("cannot write {}: {e}", path.display())))?;
        crate::ui::status(format_args!("wrote {}", path.display()));
    }
    crate::ui::status(format_args!(
        "{} runs kept in {} ({} round(s); scale.json; `contend report {}/RUN` for one run)",
        result.runs.len(),
        root.path().display(),
        result.rounds,
        root.path().display()
    ));
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn one_run(
    root: &Path,
    name: &str,
    command: &[String],
    m: u32,
    n: u32,
    cpus: &[u32],
    interval: Duration,
    probe: Option<&Path>,
    sched_trace: bool,
    round: u32,
    tick_ns: f64,
) -> anyhow::Result<RunResult> {
    let (stat_before, own_before, wall_before) = (
        recorder::scale::proc_stat(),
        recorder::scale::own_cpu_ns(),
        std::time::Instant::now(),
    );
    let recorded = recorder::record(
        &recorder::RecordOptions {
            command: command.to_vec(),
            output: root.join(name),
            recorded_by: crate::args::command_line(),
            interval: Some(interval),
            sched_trace,
            placement: recorder::Placement {
                chosen: Some(cpus.to_vec()),
                ..recorder::Placement::default()
            },
            locks: probe.map(|p| recorder::Locks {
                probe: Some(p.to_path_buf()),
                // The scaling runs need the probe's lock figures only.
                waits: false,
                stack_budget: 0,
                ..recorder::Locks::default()
            }),
            capture_output: true,
            env: vec![("OMP_NUM_THREADS".into(), m.to_string())],
            ..recorder::RecordOptions::default()
        },
        // Of many runs, only what the sampler says is worth repeating.
        &mut |n| {
            if n.about == recorder::About::Sampling {
                crate::ui::recorder_notice(&n);
            }
        },
    )?;
    let (stat_after, own_after, wall) = (
        recorder::scale::proc_stat(),
        recorder::scale::own_cpu_ns(),
        wall_before.elapsed(),
    );
    let (run, meta, outcome) = (recorded.run, recorded.meta, recorded.outcome);
    let cpu_ns = outcome.cpu_ns.unwrap_or(0) as f64;
    let elapsed = outcome.monotonic_span[1].saturating_sub(outcome.monotonic_span[0]) as f64;
    let (steal_ns, others_cpu_ns) = match (&stat_before, &stat_after) {
        (Some(b), Some(a)) => {
            let (steal, others) =
                recorder::scale::disturbance(b, a, cpus, tick_ns, cpu_ns, own_after - own_before);
            // The reads bracket the recorder's set-up and finishing too: count the share of
            // the span the program ran (what else ran is taken as spread evenly over it).
            let ran = (elapsed / wall.as_nanos().max(1) as f64).min(1.0);
            (Some(steal * ran), Some(others * ran))
        }
        _ => (None, None),
    };
    let counted = |name: &str| {
        outcome
            .counters
            .iter()
            .find(|r| r.counter.name() == name)
            .and_then(|r| r.estimate())
            .map(|v| v as f64)
    };
    let cycles = counted("cycles");
    let explained = explain::open(run.path(), &explain::Options::default())
        .map_err(|e| bad_input(e.to_string()))?;
    for notice in &explained.notices {
        crate::ui::note(notice);
    }
    let Some(activity) = explained.activity.as_ref().map(|a| &a.view) else {
        anyhow::bail!(
            "{}: no service-time samples (no activity section): the program ended before the first sample?",
            run.path().display()
        );
    };
    let user_ns = outcome.user_ns.unwrap_or(0) as f64;
    // The lock with the most wait, named as the lock report names it.
    let top = explained.locks.as_ref().and_then(|l| {
        l.report
            .locks
            .iter()
            .max_by_key(|s| s.wait_ns)
            .filter(|s| s.wait_ns > 0)
            .map(|s| (l.naming.lock_label(s.lock), s.wait_ns as f64))
    });
    Ok(RunResult {
        threads: m,
        cores: n,
        repeat: round,
        round,
        run: run
            .path()
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        elapsed_ns: elapsed,
        service_ns: activity.service_ns as f64,
        runq_wait_ns: activity.runq_wait_ns as f64,
        active_threads: activity.active_threads,
        coverage_pct: activity.coverage_pct,
        active_threads_listing_3_3: activity.active_threads_listing_3_3,
        modelled_active_threads: activity
            .modelled_active_threads
            .iter()
            .find(|e| e.cores == m)
            .map(|e| e.active_threads),
        // Without a PMU the work is user time: stall cycles are inside it, page faults and
        // system calls (system time) are not memory contention.
        work: cycles.unwrap_or(user_ns),
        unit: if cycles.is_some() {
            WorkUnit::Cycles
        } else {
            WorkUnit::UserNs
        },
        cpu_ns,
        user_ns,
        system_ns: outcome.system_ns.unwrap_or(0) as f64,
        steal_ns,
        others_cpu_ns,
        top_lock: top.as_ref().map(|t| t.0.clone()),
        top_lock_wait_ns: top.map(|t| t.1),
        llc_misses: counted("llc-misses"),
        llc_references: counted("llc-references"),
        lock_wait_ns: explained
            .locks
            .as_ref()
            .map(|l| l.report.summary.wait_ns as f64),
        exit_status: meta.exit_status,
    })
}

/// The renderer's view of a result.
fn result_view(r: &ScaleResult) -> report::scale::ScaleView<'_> {
    r.view()
}
