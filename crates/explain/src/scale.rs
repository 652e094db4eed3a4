//! A `contend scale` directory's model: scale.json, the runs of each configuration and the
//! Tudor & Teo model fitted to them (written by `contend scale`, read back by `contend report
//! SCALE_DIR` and `contend diff`).

use crate::error::{damaged, Error};
use analysis::activity::{self, Configuration, ScalingModel, WorkUnit};
use analysis::stats::Spread;
use serde::Serialize;
use std::path::Path;

/// The file of a scale directory that holds its model.
pub const SCALE_FILE: &str = "scale.json";

/// Whether `dir` is a `contend scale` directory (scale.json, and no meta.json of a run).
pub fn is_scale_dir(dir: &Path) -> bool {
    !dir.join(trace::rundir::META_FILE).exists() && dir.join(SCALE_FILE).is_file()
}

/// Reads `dir/scale.json`.
pub fn load(dir: &Path) -> Result<ScaleResult, Error> {
    let path = dir.join(SCALE_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(|e| damaged(format!("{}: {e}", path.display())))?;
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
