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
    /// Runs of each configuration; figures are medians, with their spread.
    #[arg(long, value_name = "R", default_value_t = 5)]
    repeat: u32,
    /// Runs of each configuration done first and not counted (warm caches, page cache).
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
    if args.repeat == 0 {
        return Err(bad_input("--repeat must be at least 1"));
    }
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
    let root = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    // The scale directory holds runs, not streams of its own.
    let _ = std::fs::remove_dir(root.path().join(trace::rundir::STREAMS_DIR));
    let total: u64 = plan
        .iter()
        .map(|(_, c)| c.len() as u64 * u64::from(args.repeat + args.warmup))
        .sum();
    let bar = crate::ui::progress_bar(total, "runs");
    let interval = Duration::from_secs_f64(args.interval / 1000.0);
    let mut runs = Vec::new();
    for (m, counts) in &plan {
        let command = recorder::scale::substitute(&args.command, *m);
        for &n in counts {
            let cpus: Vec<u32> = order[..n as usize].to_vec();
            for r in 0..(args.warmup + args.repeat) {
                let counted = r >= args.warmup;
                let name = if counted {
                    format!("m{m}-n{n}-r{}", r - args.warmup + 1)
                } else {
                    format!("m{m}-n{n}-warmup{}", r + 1)
                };
                bar.set_message(format!("{m} threads on {n} core(s), {name}"));
                let result = one_run(
                    root.path(),
                    &name,
                    &command,
                    *m,
                    n,
                    &cpus,
                    interval,
                    probe.as_deref(),
                    args.sched_trace,
                    if counted { r - args.warmup + 1 } else { 0 },
                )?;
                bar.inc(1);
                if let Some(code) = result.exit_status.filter(|&c| c != 0) {
                    bar.abandon();
                    crate::ui::error(format_args!("{} exited with status {code} in {} (its output is in {}/{name}/stderr.txt); stopping", command[0],
                        name,
                        root.path().display()));
                    std::process::exit(code);
                }
                if counted {
                    runs.push(result);
                }
            }
        }
    }
    bar.finish_and_clear();

    let experiment = explain::scale::Experiment {
        command: args.command.clone(),
        repeat: args.repeat,
        warmup: args.warmup,
        interval_ns: interval.as_nanos() as u64,
        fill: format!("{:?}", args.fill),
        cores_per_socket,
        numa,
        plan,
        order,
    };
    let result = explain::scale::model(&experiment, runs, notes);
    let json = serde_json::to_string_pretty(&result)?;
    std::fs::write(root.path().join("scale.json"), &json)?;
    if args.json {
        println!("{json}");
    } else {
        print!("{}", report::scale::render(&result_view(&result)));
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
        "{} runs kept in {} (scale.json; `contend report {}/RUN` for one run)",
        result.runs.len(),
        root.path().display(),
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
    repeat: u32,
) -> anyhow::Result<RunResult> {
    let recorded = recorder::record(
        &recorder::RecordOptions {
            command: command.to_vec(),
            output: root.join(name),
            recorded_by: std::env::args().collect(),
            interval: Some(interval),
            sched_trace,
            placement: recorder::Placement {
                chosen: Some(cpus.to_vec()),
                ..recorder::Placement::default()
            },
            locks: probe.map(|p| recorder::Locks {
                probe: Some(p.to_path_buf()),
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
    let (run, meta, outcome) = (recorded.run, recorded.meta, recorded.outcome);
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
    let elapsed = outcome.monotonic_span[1].saturating_sub(outcome.monotonic_span[0]) as f64;
    Ok(RunResult {
        threads: m,
        cores: n,
        repeat,
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
        work: cycles.unwrap_or(outcome.cpu_ns.unwrap_or(0) as f64),
        unit: if cycles.is_some() {
            WorkUnit::Cycles
        } else {
            WorkUnit::OnCpuNs
        },
        cpu_ns: outcome.cpu_ns.unwrap_or(0) as f64,
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
