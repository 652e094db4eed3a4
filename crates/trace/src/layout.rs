//! What a run directory holds and where: the role of each stream, the `captured` tags of
//! meta.json, and the names of the files beside the streams. Writers and readers both take
//! names from here, so that a file is never looked for under a name nobody writes.

use crate::format::StreamKind;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Default run directory name, like perf's `perf.data`.
pub const DEFAULT_RUN_DIR: &str = "contend.data";
/// The run's description, beside its streams.
pub const META_FILE: &str = "meta.json";
/// Where the event streams are.
pub const STREAMS_DIR: &str = "streams";
/// File extension of event streams.
pub const STREAM_EXT: &str = "cst";

/// Which recorder wrote a stream, and so what its records mean and which clock they count.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamRole {
    /// A thread's lock, condition and barrier events from the LD_PRELOAD probe
    /// (`streams/PID-TID-N.cst`), in the run's clock.
    Lock,
    /// A thread's service-time samples and scheduler states from the sampler
    /// (`streams/sched-TID.cst`), in CLOCK_MONOTONIC.
    Sampler,
    /// The machine's runnable and blocked counts from the sampler (`streams/system.cst`).
    System,
    /// An MPI rank's calls from the PMPI wrapper (`streams/rank-R.cst`, `rank-R.N.cst`).
    MpiRank,
    /// A process's threads' voluntary switches out, with their reason and futex arguments
    /// (`streams/offcpu-PID.cst`, see [`crate::offcpu`]), in CLOCK_MONOTONIC.
    OffCpu,
    /// A role written by a newer contend: its stream is left alone.
    #[serde(other)]
    Other,
}

impl StreamRole {
    /// The role of a stream listed without one (meta.json written before roles were recorded),
    /// from its file name and kind, by the names each recorder has always written.
    pub fn infer(file: &str, kind: StreamKind) -> StreamRole {
        let name = file.rsplit('/').next().unwrap_or(file);
        if name.starts_with(SAMPLER_STREAM_PREFIX) {
            StreamRole::Sampler
        } else if name.starts_with(OFFCPU_STREAM_PREFIX) {
            StreamRole::OffCpu
        } else if name == format!("{SYSTEM_STREAM}.{}", STREAM_EXT) {
            StreamRole::System
        } else if crate::mpi::rank_stream_name(name).is_some() {
            StreamRole::MpiRank
        } else {
            match kind {
                StreamKind::Rank => StreamRole::MpiRank,
                StreamKind::System => StreamRole::System,
                StreamKind::Thread | StreamKind::Process => StreamRole::Lock,
            }
        }
    }
}

/// Stream name (without `.cst`) of the sampler's stream of thread `tid`.
pub fn sampler_stream(tid: u32) -> String {
    format!("{SAMPLER_STREAM_PREFIX}{tid}")
}

/// Stream name (without `.cst`) of the off-CPU blocks of process `pid`'s threads.
pub fn offcpu_stream(pid: u32) -> String {
    format!("{OFFCPU_STREAM_PREFIX}{pid}")
}

/// Prefix of the off-CPU recorder's per-process streams.
pub const OFFCPU_STREAM_PREFIX: &str = "offcpu-";

/// Prefix of the sampler's per-thread streams.
pub const SAMPLER_STREAM_PREFIX: &str = "sched-";
/// Stream name (without `.cst`) of the sampler's machine-wide stream.
pub const SYSTEM_STREAM: &str = "system";

/// Where a process's sharing results are, relative to the run directory.
pub fn sharing_results(pid: u32) -> String {
    format!("{SHARING_DIR}/{pid}.json")
}

/// Where a process's sharing history (the hot lines' accesses) is.
pub fn sharing_history(pid: u32) -> String {
    format!("{SHARING_DIR}/{pid}.hist")
}

/// Where the memory map of a process whose sharing was recorded is.
pub fn sharing_maps(pid: u32) -> String {
    format!("{MAPS_DIR}/sharing-{pid}.maps")
}

/// The process a `sharing/PID.json` file name belongs to.
pub fn sharing_results_pid(file_name: &str) -> Option<u32> {
    file_name.strip_suffix(".json")?.parse().ok()
}

pub const SHARING_DIR: &str = "sharing";
pub const MAPS_DIR: &str = "maps";
/// The wrapper's note that a rank loaded another MPI than it was built for:
/// `mpi-refused-PID.txt` in the run directory.
pub const MPI_REFUSED_PREFIX: &str = "mpi-refused-";

/// What a run recorded: meta.json's `captured` tags. Written as the same strings as ever; a tag
/// this contend does not know is kept as it is, so newer runs still read.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Captured {
    /// Lock events from the probe (`locks`).
    Locks,
    /// Heap allocations, for naming heap locks (`alloc-sites`).
    AllocSites,
    /// Service-time samples (`schedstat`).
    Schedstat,
    /// Exact scheduler states from the sched tracepoints (`sched-tracepoints`).
    SchedTracepoints,
    /// MPI calls of every rank (`mpi`).
    Mpi,
    /// Cache-line sharing (`sharing`).
    Sharing,
    /// Marks written by the program (`mark`).
    Mark,
    /// The target's voluntary switches out with futex arguments (`off-cpu`).
    OffCpu,
    /// A tag of another contend.
    Other(String),
}

impl Captured {
    pub fn as_str(&self) -> &str {
        match self {
            Captured::Locks => "locks",
            Captured::AllocSites => "alloc-sites",
            Captured::Schedstat => "schedstat",
            Captured::SchedTracepoints => "sched-tracepoints",
            Captured::Mpi => "mpi",
            Captured::Sharing => "sharing",
            Captured::Mark => "mark",
            Captured::OffCpu => "off-cpu",
            Captured::Other(s) => s,
        }
    }
}

impl From<String> for Captured {
    fn from(s: String) -> Captured {
        match s.as_str() {
            "locks" => Captured::Locks,
            "alloc-sites" => Captured::AllocSites,
            "schedstat" => Captured::Schedstat,
            "sched-tracepoints" => Captured::SchedTracepoints,
            "mpi" => Captured::Mpi,
            "sharing" => Captured::Sharing,
            "mark" => Captured::Mark,
            "off-cpu" => Captured::OffCpu,
            _ => Captured::Other(s),
        }
    }
}

impl From<&str> for Captured {
    fn from(s: &str) -> Captured {
        Captured::from(s.to_string())
    }
}

impl From<Captured> for String {
    fn from(c: Captured) -> String {
        match c {
            Captured::Other(s) => s,
            known => known.as_str().to_string(),
        }
    }
}

impl fmt::Display for Captured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lets `meta.captured.iter().any(|c| c == "locks")` keep working.
impl PartialEq<str> for Captured {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_inferred_from_the_names_recorders_write() {
        let role = StreamRole::infer;
        assert_eq!(
            role("streams/10518-10520-5984823110228.cst", StreamKind::Thread),
            StreamRole::Lock
        );
        assert_eq!(
            role("streams/sched-10518.cst", StreamKind::Thread),
            StreamRole::Sampler
        );
        assert_eq!(
            role("streams/sched-10518.2.cst", StreamKind::Thread),
            StreamRole::Sampler
        );
        assert_eq!(
            role("streams/system.cst", StreamKind::System),
            StreamRole::System
        );
        assert_eq!(
            role("streams/rank-0.cst", StreamKind::Rank),
            StreamRole::MpiRank
        );
        assert_eq!(
            role("streams/rank-3.2.cst", StreamKind::Rank),
            StreamRole::MpiRank
        );
        assert_eq!(
            role("streams/odd.cst", StreamKind::Rank),
            StreamRole::MpiRank
        );
        assert_eq!(
            serde_json::to_string(&StreamRole::MpiRank).unwrap(),
            "\"mpi-rank\""
        );
    }

    #[test]
    fn captured_tags_keep_their_strings() {
        for tag in [
            "locks",
            "alloc-sites",
            "schedstat",
            "sched-tracepoints",
            "mpi",
            "sharing",
            "mark",
            "off-cpu",
            "something-newer",
        ] {
            let c: Captured = serde_json::from_str(&format!("\"{tag}\"")).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{tag}\""));
            assert!(c == *tag);
        }
        assert_eq!(Captured::from("locks"), Captured::Locks);
        assert_eq!(
            Captured::from("x"),
            Captured::Other("x".into()),
            "unknown tags are kept"
        );
    }

    #[test]
    fn file_names() {
        assert_eq!(sharing_maps(42), "maps/sharing-42.maps");
        assert_eq!(sharing_results(42), "sharing/42.json");
        assert_eq!(sharing_history(42), "sharing/42.hist");
        assert_eq!(sharing_results_pid("42.json"), Some(42));
        assert_eq!(sharing_results_pid("42.hist"), None);
        assert_eq!(sampler_stream(7), "sched-7");
        assert_eq!(offcpu_stream(7), "offcpu-7");
        assert_eq!(
            StreamRole::infer("streams/offcpu-7.cst", StreamKind::Process),
            StreamRole::OffCpu
        );
    }

    #[test]
    fn an_unknown_role_reads_as_other() {
        let r: StreamRole = serde_json::from_str("\"gpu-kernels\"").unwrap();
        assert_eq!(r, StreamRole::Other);
        assert_eq!(
            serde_json::to_string(&StreamRole::OffCpu).unwrap(),
            "\"off-cpu\""
        );
    }
}
