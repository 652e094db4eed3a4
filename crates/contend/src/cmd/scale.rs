//! `contend scale --threads M -- CMD ... {threads} ...`: runs a program with M threads on one
//! core, on M cores (and on one socket's cores on NUMA machines), repeated, each run recorded
//! into one directory; then the Tudor & Teo model of where the speed-up went (memory/hardware
//! contention vs other dependencies), as the thesis's General Metrics Gathering tool did.

use crate::exit::bad_input;
use analysis::activity::{self, Configuration, WorkPoint, WorkUnit};
use analysis::stats::Spread;
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
use explain::scale::{ConfigurationResult, RunResult, ScaleResult, ThreadCountModel};

fn substitute(command: &[String], m: u32) -> Vec<String> {
    command
        .iter()
        .map(|a| a.replace("{threads}", &m.to_string()))
        .collect()
}

/// The core counts for thread count `m`: the user's list (`m` replaced) or 1, one socket's
/// cores (NUMA, when m exceeds them) and m; capped at the CPUs there are.
fn core_counts(
    spec: &[String],
    m: u32,
    cores_per_socket: u32,
    numa: bool,
    available: u32,
) -> Result<Vec<u32>, String> {
    let mut out: Vec<u32> = if spec.is_empty() {
        let mut v = vec![1, m.min(available)];
        if numa && m > cores_per_socket && cores_per_socket > 1 {
            v.push(cores_per_socket);
        }
        v
    } else {
        spec.iter()
            .map(|s| {
                let t = s.trim();
                if t == "m" || t == "M" {
                    Ok(m)
                } else {
                    t.parse::<u32>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        format!("--cores: `{t}` is not a core count (a number ≥ 1, or m)")
                    })
                }
            })
            .collect::<Result<_, _>>()?
    };
    if let Some(&n) = out.iter().find(|&&n| n > available) {
        return Err(format!(
            "--cores: {n} cores asked for, but this machine has {available} core(s) to give one thread each"
        ));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What `scale` will run on a machine: for each thread count, its core counts; the CPUs are
/// the first n of `order`.
#[derive(Debug)]
struct Planned {
    order: Vec<u32>,
    cores_per_socket: u32,
    numa: bool,
    counts: Vec<(u32, Vec<u32>)>,
    notes: Vec<String>,
}

/// Plans the runs from the topology (a value, so NUMA plans are tested on machines this one
/// is not). One thread per core: the fill order's first CPUs are one per core.
fn plan_runs(
    machine: &topology::Topology,
    fill: topology::FillOrder,
    threads: &[u32],
    cores: &[String],
) -> Result<Planned, String> {
    let order = machine.fill_order(fill);
    // One thread per core: socket-first and spread give out one CPU of every core before any
    // core's second; compact gives siblings first, so there every online CPU counts.
    let available = if fill == topology::FillOrder::Compact {
        order.len() as u32
    } else {
        (machine.cores.len().max(1)).min(order.len()) as u32
    };
    let first_package = machine.cores.first().map(|c| c.package);
    let cores_per_socket = machine
        .cores
        .iter()
        .filter(|c| Some(c.package) == first_package)
        .count() as u32;
    let numa = machine.nodes.len() > 1;
    let mut counts = Vec::new();
    let mut notes = Vec::new();
    for &m in threads {
        counts.push((m, core_counts(cores, m, cores_per_socket, numa, available)?));
        if m > available {
            notes.push(format!(
                "{m} threads but {available} core(s): the m-core configuration runs on {available} cores (more threads than cores)"
            ));
        }
    }
    Ok(Planned {
        order,
        cores_per_socket,
        numa,
        counts,
        notes,
    })
}

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
    let planned = plan_runs(&machine, args.fill, &args.threads, &args.cores).map_err(bad_input)?;
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
        let command = substitute(&args.command, *m);
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

    let result = model(
        &args,
        &plan,
        &order,
        runs,
        cores_per_socket,
        numa,
        notes,
        interval,
    );
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

#[allow(clippy::too_many_arguments)]
fn model(
    args: &Args,
    plan: &[(u32, Vec<u32>)],
    order: &[u32],
    runs: Vec<RunResult>,
    cores_per_socket: u32,
    numa: bool,
    mut notes: Vec<String>,
    interval: Duration,
) -> ScaleResult {
    let mut configurations = Vec::new();
    let mut thread_counts = Vec::new();
    for (m, counts) in plan {
        let mut configs: Vec<Configuration> = Vec::new();
        for &n in counts {
            let these: Vec<&RunResult> = runs
                .iter()
                .filter(|r| r.threads == *m && r.cores == n)
                .collect();
            let pick =
                |f: fn(&RunResult) -> f64| -> Vec<f64> { these.iter().map(|r| f(r)).collect() };
            let elapsed = Spread::of_or_nan(&pick(|r| r.elapsed_ns));
            let active = Spread::of_or_nan(&pick(|r| r.active_threads));
            let waiting = Spread::of_or_nan(&pick(|r| r.runq_wait_ns / r.elapsed_ns.max(1.0)));
            let service = Spread::of_or_nan(&pick(|r| r.service_ns));
            let lock_waits: Vec<f64> = these.iter().filter_map(|r| r.lock_wait_ns).collect();
            let coverage: Vec<f64> = these.iter().filter_map(|r| r.coverage_pct).collect();
            if let Some(c) = Spread::of(&coverage).map(|s| s.min).filter(|&c| c < 90.0) {
                notes.push(format!(
                    "{m} threads on {n} core(s): the samples cover only {c:.0} % of the program's CPU time in one run: A is underestimated (a longer run, or --interval 1)"
                ));
            }
            // Cycles only if every run of the configuration counted them.
            let unit = if these.iter().all(|r| r.unit == WorkUnit::Cycles) && !these.is_empty() {
                WorkUnit::Cycles
            } else {
                WorkUnit::OnCpuNs
            };
            // One unit per configuration: cycles only when every run counted them.
            let work = if unit == WorkUnit::Cycles {
                Spread::of_or_nan(&pick(|r| r.work))
            } else {
                Spread::of_or_nan(&pick(|r| r.cpu_ns))
            };
            let optional = |f: fn(&RunResult) -> Option<f64>| {
                let v: Vec<f64> = these.iter().filter_map(|r| f(r)).collect();
                (v.len() == these.len())
                    .then(|| Spread::of(&v).map(|s| s.median))
                    .flatten()
            };
            let configuration = Configuration {
                threads: *m,
                cores: n,
                elapsed_ns: elapsed.median,
                service_ns: service.median,
                active_threads: active.median,
                work: work.median,
                unit,
                llc_misses: optional(|r| r.llc_misses),
                llc_references: optional(|r| r.llc_references),
                lock_wait_ns: Spread::of(&lock_waits).map(|s| s.median),
            };
            configs.push(configuration.clone());
            configurations.push(ConfigurationResult {
                threads: *m,
                cores: n,
                cpus: order[..n as usize].to_vec(),
                elapsed_ns: elapsed,
                work,
                active_threads: active,
                waiting_threads: waiting,
                modelled_active_threads: Spread::of(
                    &these
                        .iter()
                        .filter_map(|r| r.modelled_active_threads)
                        .collect::<Vec<_>>(),
                )
                .map(|s| s.median),
                configuration,
            });
        }
        let mut missing = Vec::new();
        let baseline = configs.iter().find(|c| c.cores == 1);
        let mut models = Vec::new();
        match baseline {
            None => missing.push(format!(
                "{m} threads: no one-core run, so no baseline U = C(1): add 1 to --cores"
            )),
            Some(b) => {
                for c in configs.iter().filter(|c| c.cores != 1) {
                    match activity::scaling_model(b, c) {
                        Ok(model) => models.push(model),
                        Err(e) => missing.push(format!("{m} threads on {} cores: {e}", c.cores)),
                    }
                }
                if models.is_empty() && *m > 1 {
                    missing.push(format!(
                        "{m} threads: no run on more than one core to compare with the baseline"
                    ));
                }
            }
        }
        let points: Vec<WorkPoint> = configs.iter().map(WorkPoint::from).collect();
        // One thread has no contention to model.
        let memory_queue = match activity::memory_queue(&points) {
            Ok(q) => Some(q),
            Err(e) => {
                if *m > 1 {
                    missing.push(format!("{m} threads: μ and L (eq. 3.6): {e}"));
                }
                None
            }
        };
        let numa_delta = if numa {
            match activity::numa_delta(&points, cores_per_socket) {
                Ok(d) => Some(d),
                Err(e) => {
                    missing.push(format!("{m} threads: δ (eq. 3.7): {e}"));
                    None
                }
            }
        } else {
            None
        };
        thread_counts.push(ThreadCountModel {
            threads: *m,
            models,
            memory_queue,
            numa: numa_delta,
            missing,
        });
    }
    let unit = if !configurations.is_empty()
        && configurations
            .iter()
            .all(|c| c.configuration.unit == WorkUnit::Cycles)
    {
        WorkUnit::Cycles
    } else {
        WorkUnit::OnCpuNs
    };
    ScaleResult {
        command: args.command.clone(),
        unit,
        repeat: args.repeat,
        warmup: args.warmup,
        interval_ns: interval.as_nanos() as u64,
        fill: format!("{:?}", args.fill),
        cores_per_socket,
        numa,
        runs,
        configurations,
        thread_counts,
        notes,
    }
}

/// The renderer's view of a result.
fn result_view(r: &ScaleResult) -> report::scale::ScaleView<'_> {
    r.view()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_counts_default_and_given() {
        assert_eq!(core_counts(&[], 4, 8, false, 8).unwrap(), vec![1, 4]);
        assert_eq!(core_counts(&[], 16, 8, true, 16).unwrap(), vec![1, 8, 16]);
        // More threads than CPUs: the m-core run uses every CPU.
        assert_eq!(core_counts(&[], 4, 2, false, 2).unwrap(), vec![1, 2]);
        let given = ["1".to_string(), "m".to_string()];
        assert_eq!(core_counts(&given, 2, 2, false, 2).unwrap(), vec![1, 2]);
        assert!(core_counts(&["3".to_string()], 2, 2, false, 2)
            .unwrap_err()
            .contains("2 core(s)"));
        assert!(core_counts(&["x".to_string()], 2, 2, false, 2)
            .unwrap_err()
            .contains("`x`"));
    }

    #[test]
    fn a_two_socket_numa_machine_adds_one_socket_and_fills_cores_first() {
        // 2 packages × 4 cores × 2 threads, one node per package: CPUs 0-7 on package 0.
        let machine = topology::Topology::synthetic("2x4x2").unwrap();
        let p = plan_runs(&machine, topology::FillOrder::SocketFirst, &[8, 2], &[]).unwrap();
        assert!(p.numa);
        assert_eq!(p.cores_per_socket, 4);
        assert_eq!(p.counts, vec![(8, vec![1, 4, 8]), (2, vec![1, 2])]);
        // One thread per core: the first 8 CPUs handed out are on 8 different cores, the
        // first 4 of them on package 0.
        let first: Vec<u32> = p.order[..8].to_vec();
        let core_of = |cpu: u32| {
            machine
                .cores
                .iter()
                .position(|c| c.cpus.contains(cpu))
                .unwrap()
        };
        let mut cores: Vec<usize> = first.iter().map(|&c| core_of(c)).collect();
        cores.sort_unstable();
        cores.dedup();
        assert_eq!(cores.len(), 8, "{first:?}");
        assert!(first[..4]
            .iter()
            .all(|&c| machine.cores[core_of(c)].package == machine.cores[0].package));
        assert!(p.notes.is_empty());
    }

    #[test]
    fn a_uma_machine_runs_one_and_m_cores_and_says_when_threads_exceed_cpus() {
        let machine = topology::Topology::synthetic("1x2x1").unwrap();
        let p = plan_runs(&machine, topology::FillOrder::SocketFirst, &[4], &[]).unwrap();
        assert!(!p.numa);
        assert_eq!(p.counts, vec![(4, vec![1, 2])]);
        assert!(
            p.notes[0].contains("4 threads but 2 core(s)"),
            "{:?}",
            p.notes
        );
        let err = plan_runs(
            &machine,
            topology::FillOrder::SocketFirst,
            &[2],
            &["1".into(), "3".into()],
        )
        .unwrap_err();
        assert!(err.contains("3 cores asked for"), "{err}");
    }

    #[test]
    fn the_placeholder_is_replaced_everywhere() {
        let cmd: Vec<String> = ["./app", "-t", "{threads}", "--name=run{threads}"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(substitute(&cmd, 4), vec!["./app", "-t", "4", "--name=run4"]);
    }
}
