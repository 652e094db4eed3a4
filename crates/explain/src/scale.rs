//! A `contend scale` directory's model: scale.json, the runs of each configuration and the
//! Tudor & Teo model fitted to them (written by `contend scale`, read back by `contend report
//! SCALE_DIR` and `contend diff`).

use crate::error::{damaged, Error};
use analysis::activity::{self, Configuration, ScalingModel, WorkPoint, WorkUnit};
use analysis::split::{self as split, RunFigures};
pub use analysis::split::{Baseline, Cause, Verdict};
pub use analysis::stats::Interval;
use analysis::stats::Spread;
use serde::Serialize;
use std::path::Path;

/// The file of a scale directory that holds its model.
pub const SCALE_FILE: &str = "scale.json";

/// A busy-machine note when steal or other processes took more than this share of a
/// configuration's CPU capacity (n cores × T).
pub const DISTURBED_PCT: f64 = 5.0;

/// Whether `dir` is a `contend scale` directory (scale.json, and no meta.json of a run).
pub fn is_scale_dir(dir: &Path) -> bool {
    // Whatever scale.json is (a FIFO, a link): `load` says what is wrong with it.
    std::fs::symlink_metadata(dir.join(trace::rundir::META_FILE)).is_err()
        && std::fs::symlink_metadata(dir.join(SCALE_FILE)).is_ok()
}

/// Reads `dir/scale.json`.
pub fn load(dir: &Path) -> Result<ScaleResult, Error> {
    let path = dir.join(SCALE_FILE);
    let text =
        trace::files::read_in_run_to_string(dir, Path::new(SCALE_FILE), &trace::files::SCALE)
            .map_err(|e| damaged(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        damaged(format!(
            "{}: not a scale.json this contend can read: {e}",
            path.display()
        ))
    })
}

/// One run of one configuration.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, serde::Deserialize)]
pub struct RunResult {
    pub threads: u32,
    pub cores: u32,
    pub repeat: u32,
    /// The run directory, relative to the scale directory.
    pub run: String,
    pub elapsed_ns: f64,
    pub service_ns: f64,
    /// Σ run-queue wait over threads, ns: runnable but without a CPU.
    pub runq_wait_ns: f64,
    pub active_threads: f64,
    pub active_threads_listing_3_3: Option<f64>,
    /// Sampled service as a share of wait4's CPU time, %.
    pub coverage_pct: Option<f64>,
    /// Listing 3.4 from this run's samples, for as many cores as threads (m).
    pub modelled_active_threads: Option<f64>,
    /// Work C: cycles where the machine counts them, else user CPU time from wait4, ns (user +
    /// system in files of schema version 1).
    pub work: f64,
    pub unit: WorkUnit,
    /// User + system CPU time from wait4, ns.
    #[serde(default)]
    pub cpu_ns: f64,
    /// Of `cpu_ns`: user mode (the work without a PMU) and kernel (beside it, not in ω).
    #[serde(default)]
    pub user_ns: f64,
    #[serde(default)]
    pub system_ns: f64,
    /// CPU time stolen by the hypervisor from the run's CPUs, ns (/proc/stat).
    #[serde(default)]
    pub steal_ns: Option<f64>,
    /// CPU time other processes took on the run's CPUs, ns (/proc/stat busy time − the
    /// program's − contend's own).
    #[serde(default)]
    pub others_cpu_ns: Option<f64>,
    /// With --locks: the lock with the most wait, as the lock report names it, and its wait.
    #[serde(default)]
    pub top_lock: Option<String>,
    #[serde(default)]
    pub top_lock_wait_ns: Option<f64>,
    /// The round this run belongs to (1, 2, …; one run of every configuration a round). 0 in
    /// files written before rounds: `repeat` stands for it.
    #[serde(default)]
    pub round: u32,
    pub llc_misses: Option<f64>,
    pub llc_references: Option<f64>,
    pub lock_wait_ns: Option<f64>,
    pub exit_status: Option<i32>,
}

/// One configuration over its repeats.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, serde::Deserialize)]
pub struct ConfigurationResult {
    pub threads: u32,
    pub cores: u32,
    pub cpus: Vec<u32>,
    pub elapsed_ns: Spread,
    pub work: Spread,
    pub active_threads: Spread,
    /// Threads waiting for a CPU on average (Σ run-queue wait / T).
    pub waiting_threads: Spread,
    /// System (kernel) CPU time, ns: shown beside the work, not in ω without a PMU.
    #[serde(default)]
    pub system_ns: Option<Spread>,
    /// A for m cores predicted from these runs' samples (listing 3.4), median.
    pub modelled_active_threads: Option<f64>,
    /// The model's input: medians.
    pub configuration: Configuration,
}

/// A thread count's model (or why there is none).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, serde::Deserialize)]
pub struct ThreadCountModel {
    pub threads: u32,
    /// Against the one-core baseline, for each other core count.
    pub models: Vec<ScalingModel>,
    pub memory_queue: Option<activity::MemoryQueue>,
    pub numa: Option<activity::NumaDelta>,
    /// Why a model could not be made (too few configurations, a fit that failed, ...).
    pub missing: Vec<String>,
    /// One per core count n ≠ 1: the three-way split with its intervals and what it
    /// establishes.
    #[serde(default)]
    pub verdicts: Vec<Verdict>,
}

/// scale.json.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema, serde::Deserialize)]
pub struct ScaleResult {
    /// The reports' layout version (crate::SCHEMA_VERSION): rounds, verdicts, the one-thread
    /// baseline and user/system time were added to it, so files without them still read.
    #[serde(default = "schema_one")]
    pub schema_version: u32,
    pub command: Vec<String>,
    pub unit: WorkUnit,
    /// Runs counted per configuration (the rounds done, in files with rounds).
    pub repeat: u32,
    /// Complete rounds counted (one run of every configuration each); 0 before rounds.
    #[serde(default)]
    pub rounds: u32,
    /// `--repeat MIN..MAX` and `--precision` (points), when adaptive.
    #[serde(default)]
    pub repeat_min: u32,
    #[serde(default)]
    pub repeat_max: u32,
    #[serde(default)]
    pub precision_pct: f64,
    /// Why the rounds stopped where they did.
    #[serde(default)]
    pub stopped: String,
    pub warmup: u32,
    pub interval_ns: u64,
    pub fill: String,
    pub cores_per_socket: u32,
    pub numa: bool,
    pub runs: Vec<RunResult>,
    pub configurations: Vec<ConfigurationResult>,
    pub thread_counts: Vec<ThreadCountModel>,
    pub notes: Vec<String>,
}

fn schema_one() -> u32 {
    1
}

impl ScaleResult {
    /// Every verdict, in thread-count order.
    pub fn verdicts(&self) -> impl Iterator<Item = &Verdict> {
        self.thread_counts.iter().flat_map(|t| t.verdicts.iter())
    }

    /// Whether every verdict is settled at `precision_pct` (and there is at least one).
    pub fn settled(&self, precision_pct: f64) -> bool {
        self.verdicts().count() > 0 && self.verdicts().all(|v| split::settled(v, precision_pct))
    }

    /// The widest share interval among the verdicts' named or competing causes, points: what
    /// the progress bar shows.
    pub fn widest_share_pct(&self) -> Option<f64> {
        self.verdicts()
            .flat_map(|v| [v.memory_pct, v.cpu_wait_pct, v.blocked_pct])
            .filter(|i| i.is_defined())
            .map(|i| i.width())
            .reduce(f64::max)
    }

    /// The renderer's view (report::scale takes plain values, not this crate's types).
    pub fn view(&self) -> report::scale::ScaleView<'_> {
        let r = self;
        report::scale::ScaleView {
            command: &r.command,
            repeat: r.repeat,
            unit: r.unit,
            configurations: r
                .configurations
                .iter()
                .map(|c| report::scale::ConfigurationRow {
                    threads: c.threads,
                    cores: c.cores,
                    cpus: &c.cpus,
                    elapsed_ns: c.elapsed_ns,
                    work: c.work,
                    active_threads: c.active_threads,
                    waiting_threads: c.waiting_threads,
                    system_ns: c.system_ns,
                    modelled_active_threads: c.modelled_active_threads,
                })
                .collect(),
            models: r
                .thread_counts
                .iter()
                .flat_map(|t| t.models.iter())
                .collect(),
            queues: r
                .thread_counts
                .iter()
                .filter_map(|t| t.memory_queue.as_ref().map(|q| (t.threads, q)))
                .collect(),
            missing: r
                .thread_counts
                .iter()
                .flat_map(|t| t.missing.iter().map(String::as_str))
                .collect(),
            notes: r.notes.iter().map(String::as_str).collect(),
            verdicts: r.verdicts().collect(),
            rounds: r.rounds,
            stopped: &r.stopped,
        }
    }
}

/// How a scale experiment was run: what the model needs besides the runs.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub command: Vec<String>,
    /// `--repeat MIN..MAX` (MIN = MAX for a fixed count).
    pub repeat_min: u32,
    pub repeat_max: u32,
    /// A verdict is settled when its cause's share interval is narrower than this (points).
    pub precision_pct: f64,
    /// Locks were recorded.
    pub locks: bool,
    /// Why the rounds stopped.
    pub stopped: String,
    pub warmup: u32,
    pub interval_ns: u64,
    /// The fill order's name (`SocketFirst`, ...).
    pub fill: String,
    pub cores_per_socket: u32,
    pub numa: bool,
    /// Each thread count with its core counts.
    pub plan: Vec<(u32, Vec<u32>)>,
    /// The CPUs in the order they were handed out (n cores: the first n).
    pub order: Vec<u32>,
}

/// The round a run belongs to (`repeat` in files written before rounds).
fn round_of(r: &RunResult) -> u32 {
    if r.round > 0 {
        r.round
    } else {
        r.repeat
    }
}

/// The work a run gives the model: cycles when every run counted them, else user CPU time
/// (user + system in files written before the split).
fn work_of(r: &RunResult, unit: WorkUnit) -> f64 {
    match unit {
        WorkUnit::Cycles => r.work,
        WorkUnit::UserNs => r.user_ns,
        WorkUnit::OnCpuNs => r.cpu_ns,
    }
}

/// The model of a scale experiment from its counted runs: each configuration's medians and
/// spreads, per thread count the Tudor & Teo model against the one-core baseline, μ and L
/// (eq. 3.6) and, on NUMA machines, δ (eq. 3.7), and the verdicts: the loss split three ways
/// with bootstrap intervals over the complete rounds. What cannot be fitted is said in
/// `missing`.
pub fn model(experiment: &Experiment, runs: Vec<RunResult>, mut notes: Vec<String>) -> ScaleResult {
    let Experiment {
        plan,
        order,
        cores_per_socket,
        numa,
        ..
    } = experiment;
    let (cores_per_socket, numa) = (*cores_per_socket, *numa);
    // One unit for the whole experiment, so every ratio compares like with like.
    let unit = if !runs.is_empty() && runs.iter().all(|r| r.unit == WorkUnit::Cycles) {
        WorkUnit::Cycles
    } else if !runs.is_empty() && runs.iter().all(|r| r.user_ns > 0.0) {
        WorkUnit::UserNs
    } else {
        WorkUnit::OnCpuNs
    };
    let mut configurations = Vec::new();
    let mut thread_counts = Vec::new();
    for (m, counts) in plan {
        let mut configs: Vec<Configuration> = Vec::new();
        for &n in counts {
            let these: Vec<&RunResult> = runs
                .iter()
                .filter(|r| r.threads == *m && r.cores == n)
                .collect();
            let pick = |f: &dyn Fn(&RunResult) -> f64| -> Vec<f64> {
                these.iter().map(|r| f(r)).collect()
            };
            let elapsed = Spread::of_or_nan(&pick(&|r| r.elapsed_ns));
            let active = Spread::of_or_nan(&pick(&|r| r.active_threads));
            let waiting = Spread::of_or_nan(&pick(&|r| r.runq_wait_ns / r.elapsed_ns.max(1.0)));
            let service = Spread::of_or_nan(&pick(&|r| r.service_ns));
            let lock_waits: Vec<f64> = these.iter().filter_map(|r| r.lock_wait_ns).collect();
            let coverage: Vec<f64> = these.iter().filter_map(|r| r.coverage_pct).collect();
            if let Some(c) = Spread::of(&coverage).map(|s| s.min).filter(|&c| c < 90.0) {
                notes.push(format!(
                    "{m} threads on {n} core(s): the samples cover only {c:.0} % of the program's CPU time in one run: A is underestimated (a longer run, or --interval 1)"
                ));
            }
            let work = Spread::of_or_nan(&pick(&|r| work_of(r, unit)));
            let system = (unit == WorkUnit::UserNs)
                .then(|| Spread::of(&pick(&|r| r.system_ns)))
                .flatten();
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
                waiting_threads: waiting.median.clamp(0.0, active.median.max(0.0)),
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
                cpus: order[..(n as usize).min(order.len())].to_vec(),
                elapsed_ns: elapsed,
                work,
                active_threads: active,
                waiting_threads: waiting,
                system_ns: system,
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
        // One thread has no contention to model. A fit whose parameters or extrapolated ω are
        // negative is not reported: it describes noise, not a memory queue.
        let memory_queue = match activity::memory_queue(&points) {
            Ok(q) => match q.failure() {
                Some(why) => {
                    if *m > 1 {
                        missing.push(format!("{m} threads: μ and L (eq. 3.6): {why}"));
                    }
                    None
                }
                None => Some(q),
            },
            Err(e) => {
                if *m > 1 {
                    missing.push(format!("{m} threads: μ and L (eq. 3.6): {e}"));
                }
                None
            }
        };
        let numa_delta = if numa {
            match activity::numa_delta(&points, cores_per_socket) {
                Ok(d) => match d.failure() {
                    Some(why) => {
                        missing.push(format!("{m} threads: δ (eq. 3.7): {why}"));
                        None
                    }
                    None => Some(d),
                },
                Err(e) => {
                    missing.push(format!("{m} threads: δ (eq. 3.7): {e}"));
                    None
                }
            }
        } else {
            None
        };
        let verdicts = if *m > 1 {
            counts
                .iter()
                .filter(|&&n| n != 1)
                .filter_map(|&n| verdict(experiment, &runs, unit, *m, n))
                .collect()
        } else {
            Vec::new()
        };
        thread_counts.push(ThreadCountModel {
            threads: *m,
            models,
            memory_queue,
            numa: numa_delta,
            missing,
            verdicts,
        });
    }
    let rounds = complete_rounds(plan, &runs).len() as u32;
    ScaleResult {
        schema_version: crate::SCHEMA_VERSION,
        command: experiment.command.clone(),
        unit,
        repeat: rounds,
        rounds,
        repeat_min: experiment.repeat_min,
        repeat_max: experiment.repeat_max,
        precision_pct: experiment.precision_pct,
        stopped: experiment.stopped.clone(),
        warmup: experiment.warmup,
        interval_ns: experiment.interval_ns,
        fill: experiment.fill.clone(),
        cores_per_socket,
        numa,
        runs,
        configurations,
        thread_counts,
        notes,
    }
}

/// The rounds in which every planned configuration ran once, in order.
fn complete_rounds(plan: &[(u32, Vec<u32>)], runs: &[RunResult]) -> Vec<u32> {
    let mut rounds: Vec<u32> = runs.iter().map(round_of).collect();
    rounds.sort_unstable();
    rounds.dedup();
    rounds.retain(|&round| {
        plan.iter().all(|(m, counts)| {
            counts.iter().all(|&n| {
                runs.iter()
                    .any(|r| r.threads == *m && r.cores == n && round_of(r) == round)
            })
        })
    });
    rounds
}

/// The runs of configuration (m, n) in `rounds`, one per round, as the split takes them.
fn figures_of(
    runs: &[RunResult],
    unit: WorkUnit,
    m: u32,
    n: u32,
    rounds: &[u32],
) -> Option<Vec<RunFigures>> {
    rounds
        .iter()
        .map(|&round| {
            runs.iter()
                .find(|r| r.threads == m && r.cores == n && round_of(r) == round)
                .map(|r| RunFigures {
                    elapsed_ns: r.elapsed_ns,
                    service_ns: r.service_ns,
                    runq_wait_ns: r.runq_wait_ns,
                    work: work_of(r, unit),
                    lock_wait_ns: r.lock_wait_ns,
                })
        })
        .collect()
}

/// Busy-machine notes for configuration (m, n): steal or other processes' CPU time above
/// [`DISTURBED_PCT`] of its capacity (n cores × T), on average over its runs.
fn disturbed(runs: &[RunResult], m: u32, n: u32) -> Vec<String> {
    let these: Vec<&RunResult> = runs
        .iter()
        .filter(|r| r.threads == m && r.cores == n)
        .collect();
    let capacity: f64 = these.iter().map(|r| f64::from(n) * r.elapsed_ns).sum();
    let mut out = Vec::new();
    if capacity <= 0.0 {
        return out;
    }
    let share = |f: fn(&RunResult) -> Option<f64>| {
        let v: Vec<f64> = these.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| 100.0 * v.iter().sum::<f64>() / capacity)
    };
    let (cores, whose) = if n == 1 {
        ("1 core".to_string(), "its".to_string())
    } else {
        (format!("{n} cores"), "their".to_string())
    };
    let threads = if m == 1 { "thread" } else { "threads" };
    if let Some(p) = share(|r| r.steal_ns).filter(|&p| p > DISTURBED_PCT) {
        out.push(format!(
            "the hypervisor stole {p:.0} % of {whose} time from the runs of {m} {threads} on {cores}"
        ));
    }
    if let Some(p) = share(|r| r.others_cpu_ns).filter(|&p| p > DISTURBED_PCT) {
        out.push(format!(
            "other processes took {p:.0} % of {whose} time from the runs of {m} {threads} on {cores}"
        ));
    }
    out
}

/// The verdict on m threads on n cores, from the complete rounds; None without a one-core
/// run of m threads or a complete round.
fn verdict(
    experiment: &Experiment,
    runs: &[RunResult],
    unit: WorkUnit,
    m: u32,
    n: u32,
) -> Option<Verdict> {
    let rounds = complete_rounds(&experiment.plan, runs);
    let target = figures_of(runs, unit, m, n, &rounds)?;
    let one_core = figures_of(runs, unit, m, 1, &rounds)?;
    let one_thread = figures_of(runs, unit, 1, 1, &rounds);
    let b = split::bootstrap_split(&split::SplitInput {
        threads: m,
        cores: n,
        target: &target,
        one_core: &one_core,
        one_thread: one_thread.as_deref(),
    })?;
    let involved = [(m, n), (m, 1), (1, 1)];
    let mut disturbed_notes = Vec::new();
    for (tm, tn) in involved {
        disturbed_notes.extend(disturbed(runs, tm, tn));
    }
    let shortest_run_ns = runs
        .iter()
        .filter(|r| involved.contains(&(r.threads, r.cores)))
        .map(|r| r.elapsed_ns)
        .fold(f64::INFINITY, f64::min);
    // The lock with the most wait over the target's runs.
    let mut by_lock: Vec<(&str, f64)> = Vec::new();
    for r in runs.iter().filter(|r| r.threads == m && r.cores == n) {
        if let (Some(name), Some(wait)) = (&r.top_lock, r.top_lock_wait_ns) {
            match by_lock.iter_mut().find(|(l, _)| *l == name.as_str()) {
                Some((_, w)) => *w += wait,
                None => by_lock.push((name, wait)),
            }
        }
    }
    let top_lock = by_lock
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(l, _)| l.to_string());
    let ctx = split::Context {
        precision_pct: experiment.precision_pct,
        disturbed: disturbed_notes,
        shortest_run_ns,
        interval_ns: experiment.interval_ns as f64,
        locks: experiment.locks,
        top_lock,
    };
    Some(split::verdict(m, n, &b, &ctx))
}
