//! Explaining a recorded run: [`open`] reads a run directory once (meta.json, every event
//! stream, the memory maps, the MPI rank traces, the sharing results), validates it, runs the
//! analyses and names every address it exposes. The result, [`Run`], is what `contend report`
//! renders as text and what its `--json` prints (the serde form of the model plus
//! [`SCHEMA_VERSION`]); `contend diff`, `contend scale` and the demo read its typed fields.
//!
//! Nothing here prints: what the loader has to say about a run that is not fatal (a stream
//! not closed by its writer, symbols it could not read) is a [`Notice`] in the result, and a
//! damaged run directory is an [`Error`].

pub mod activity;
mod error;
pub mod html;
pub mod json;
pub mod locks;
pub mod mpi;
pub mod names;
mod open;
mod parallel;
pub mod perfetto;
mod plausible;
pub mod scale;
pub mod sharing;
pub mod waits;

pub use error::Error;
pub use open::{open, open_any};

use std::path::PathBuf;

/// The version of the `--json` outputs' layout (`contend report --json` among them).
pub use report::json::{Versioned, SCHEMA_VERSION};

/// What one cross-thread cache-line transfer is taken to cost, unless told (ns).
pub const DEFAULT_TRANSFER_NS: f64 = 100.0;

/// How to explain a run: the analyses' settings (what to keep, thresholds, where other hosts'
/// traces are), not how to show them. `Default` is what `contend report RUN` uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// Which mutex events the lock analysis keeps.
    pub lock_filter: analysis::locks::Filter,
    /// The order of the locks in the model.
    pub lock_sort: report::locks::SortKey,
    /// The MPI wait-state thresholds (the thesis's MPITool.conf).
    pub mpi_thresholds: analysis::waitstates::Thresholds,
    /// Other run directories holding rank traces of the same job (other hosts').
    pub mpi_from: Vec<PathBuf>,
    /// Which MPI job to explain when the run holds several (1 is the first); `None`: the first.
    pub mpi_job: Option<u32>,
    /// The cost of one cache-line transfer for the sharing section's estimated cost (ns).
    pub transfer_ns: f64,
    /// How many of the locks, in the model's order, get the replayed what-if (those shown).
    pub what_if_locks: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lock_filter: analysis::locks::Filter::default(),
            lock_sort: report::locks::SortKey::Wait,
            mpi_thresholds: analysis::waitstates::Thresholds::default(),
            mpi_from: Vec::new(),
            mpi_job: None,
            transfer_ns: DEFAULT_TRANSFER_NS,
            what_if_locks: 10,
        }
    }
}

/// Something worth saying about a run that does not stop it being explained (a stream cut
/// short, a module without symbols); the command prints it as `contend: note: ...`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Notice(pub String);

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A recorded run, read, validated, analysed and named.
pub struct Run {
    pub meta: trace::Meta,
    /// What was recorded, per stream.
    pub summary: report::run_summary::RunSummary,
    /// The sampler's view: service time, run-queue wait, active threads (`schedstat` runs).
    pub activity: Option<activity::Activity>,
    /// The lock analysis and the names of its locks and call sites (`--locks` runs).
    pub locks: Option<locks::Locks>,
    /// Blocked futex waits of any runtime, and other blocks (`--locks` runs, `off-cpu`).
    pub waits: Option<waits::Waits>,
    /// The MPI job's wait states, call sites named (`--mpi` runs).
    pub mpi: Option<mpi::Mpi>,
    /// False sharing and true sharing by cache line (programs built with `contend cc`).
    pub sharing: Option<sharing::Sharing>,
    /// What the loader noticed, in the order it did.
    pub notices: Vec<Notice>,
}

/// What a directory given to `contend report` holds: a recorded run, or a `contend scale`
/// directory (whose runs are run directories, and whose scale.json is the model).
pub enum Explained {
    Run(Box<Run>),
    Scale(Box<scale::ScaleResult>),
}

impl Run {
    /// Why the locks asked for were not measured (the probe loaded in no process), from
    /// meta.json's `unavailable`: what the locks section shows instead of zeros. `None` for a
    /// run that measured them, or that never asked (`record -p` lists locks as unavailable
    /// too, but never asked for them).
    pub fn locks_not_measured(&self) -> Option<&str> {
        if self.locks.is_some() || self.meta.attached {
            return None;
        }
        self.meta
            .unavailable
            .iter()
            .find(|u| u.what == "locks")
            .map(|u| u.why.as_str())
    }
}

impl Run {
    /// Why the waits asked for were not recorded (perf events refused), from meta.json's
    /// `unavailable`: what the waits section shows instead of zeros.
    pub fn waits_not_measured(&self) -> Option<&str> {
        if self.waits.is_some() {
            return None;
        }
        self.meta
            .unavailable
            .iter()
            .find(|u| u.what == trace::offcpu::UNAVAILABLE_WHAT)
            .map(|u| u.why.as_str())
    }

    /// What the off-CPU recorder saw of the threads' blocked time, when the waits' ends were
    /// traced: the futex waits found besides the probe's, and the other blocks (sleeps, I/O,
    /// kernel locks), each to its wake-up (the run-queue time after it is not blocked time).
    pub fn off_cpu_blocked(&self) -> Option<report::activity::OffCpuBlocked> {
        self.waits.as_ref().filter(|w| w.ends_traced).map(|w| {
            let r = &w.report;
            report::activity::OffCpuBlocked {
                futex_ns: r.futex_ns.saturating_sub(r.futex_runqueue_ns),
                other_ns: r.other_ns.saturating_sub(r.other_runqueue_ns),
                kernel_locks: report::kernel_locks::activity_share(&r.kernel_locks),
            }
        })
    }
}

impl Explained {
    /// The notices of a recorded run (a saved scale model has none).
    pub fn notices(&self) -> &[Notice] {
        match self {
            Explained::Run(r) => &r.notices,
            Explained::Scale(_) => &[],
        }
    }
}

impl Explained {
    /// The typed JSON form `contend report --json` prints.
    pub fn json(&self) -> json::ExplainedJson<'_> {
        match self {
            Explained::Run(r) => json::ExplainedJson::Run(Box::new(json::RunJson::of(r))),
            Explained::Scale(m) => json::ExplainedJson::Scale(m.as_ref()),
        }
    }
}

impl serde::Serialize for Explained {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json().serialize(s)
    }
}
