//! A `contend scale` directory's model: scale.json, the runs of each configuration and the
//! Tudor & Teo model fitted to them (written by `contend scale`, read back by `contend report
//! SCALE_DIR` and `contend diff`).

use crate::error::{damaged, Error};
use analysis::activity::{self, Configuration, ScalingModel, WorkPoint, WorkUnit};
use analysis::stats::Spread;
use serde::Serialize;
use std::path::Path;

/// The file of a scale directory that holds its model.
pub const SCALE_FILE: &str = "scale.json";

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
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
    /// Work C: cycles where the machine counts them, else user + system CPU time from wait4, ns.
    pub work: f64,
    pub unit: WorkUnit,
    /// User + system CPU time from wait4, ns (the work when not every run counted cycles).
    #[serde(default)]
    pub cpu_ns: f64,
    pub llc_misses: Option<f64>,
    pub llc_references: Option<f64>,
    pub lock_wait_ns: Option<f64>,
    pub exit_status: Option<i32>,
}

/// One configuration over its repeats.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ConfigurationResult {
    pub threads: u32,
    pub cores: u32,
    pub cpus: Vec<u32>,
    pub elapsed_ns: Spread,
    pub work: Spread,
    pub active_threads: Spread,
    /// Threads waiting for a CPU on average (Σ run-queue wait / T).
    pub waiting_threads: Spread,
    /// A for m cores predicted from these runs' samples (listing 3.4), median.
    pub modelled_active_threads: Option<f64>,
    /// The model's input: medians.
    pub configuration: Configuration,
}

/// A thread count's model (or why there is none).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ThreadCountModel {
    pub threads: u32,
    /// Against the one-core baseline, for each other core count.
    pub models: Vec<ScalingModel>,
    pub memory_queue: Option<activity::MemoryQueue>,
    pub numa: Option<activity::NumaDelta>,
    /// Why a model could not be made (too few configurations, ...).
    pub missing: Vec<String>,
}

/// scale.json.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ScaleResult {
    pub command: Vec<String>,
    pub unit: WorkUnit,
    pub repeat: u32,
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

impl ScaleResult {
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
        }
    }
}

/// How a scale experiment was run: what the model needs besides the runs.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub command: Vec<String>,
    pub repeat: u32,
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

/// The model of a scale experiment from its counted runs: each configuration's medians and
/// spreads, and per thread count the Tudor & Teo model against the one-core baseline, μ and
/// L (eq. 3.6) and, on NUMA machines, δ (eq. 3.7). What cannot be fitted is said in `missing`.
pub fn model(experiment: &Experiment, runs: Vec<RunResult>, mut notes: Vec<String>) -> ScaleResult {
    let Experiment {
        plan,
        order,
        cores_per_socket,
        numa,
        ..
    } = experiment;
    let (cores_per_socket, numa) = (*cores_per_socket, *numa);
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
        command: experiment.command.clone(),
        unit,
        repeat: experiment.repeat,
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
