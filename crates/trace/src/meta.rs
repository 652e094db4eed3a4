//! `meta.json`: what a run is (command, host, clock, topology), what was captured, what was
//! unavailable and why, and the streams with their counts. Field-by-field in docs/formats.md §1.

use crate::layout::{Captured, StreamRole};
use serde::{Deserialize, Deserializer, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Major schema version: a reader rejects a newer major version. Fields added within a major
/// version are optional (`#[serde(default)]`), and unknown fields are ignored, so older
/// readers read newer files of the same major version.
pub const SCHEMA_VERSION: u32 = 1;

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub schema_version: u32,
    pub tool: Tool,
    /// The measured command line (argv), or the attached process's.
    #[serde(default)]
    pub command: Vec<String>,
    /// The contend command line that made the run.
    #[serde(default)]
    pub recorded_by: Vec<String>,
    pub started: Timestamp,
    #[serde(default)]
    pub ended: Option<Timestamp>,
    #[serde(default)]
    pub host: Host,
    /// The machine's topology as `contend topo --json` prints it (null if not recorded, or if
    /// what was recorded does not read as a topology: a run is not refused for it).
    #[serde(default, deserialize_with = "topology_or_none")]
    pub topology: Option<topology::Described>,
    pub clock: Clock,
    /// What this run recorded, e.g. `"mark"`, `"locks"`, `"schedstat"`.
    #[serde(default)]
    pub captured: Vec<Captured>,
    /// What was asked for or usually recorded but could not be, with the reason.
    #[serde(default)]
    pub unavailable: Vec<Unavailable>,
    #[serde(default)]
    pub streams: Vec<StreamEntry>,
    /// Sum of the streams' dropped events.
    #[serde(default)]
    pub events_dropped: u64,
    /// The measured program's exit status, if it was launched by contend and exited.
    #[serde(default)]
    pub exit_status: Option<i32>,
    /// When the measured program started and ended, in CLOCK_MONOTONIC ns (the time base of the
    /// streams once converted): the span analyses measure the run by.
    #[serde(default)]
    pub monotonic_span: Option<[u64; 2]>,
    /// Lock recording in sampled mode: one in this many uncontended acquisitions was recorded
    /// (absent: all were).
    #[serde(default)]
    pub lock_sample_every: Option<u32>,
    /// Lock recording: how many processes the probe was loaded in (it announces itself in each,
    /// whether or not it takes a lock). 0: it was loaded in none, and `locks` is not captured
    /// but unavailable. Absent: not recorded with `--locks`, or by an older contend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_probe_processes: Option<u64>,
    /// Service-time sampling (`contend record`'s sampler), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Sampling>,
    /// The off-CPU recorder's counts (`off-cpu` captured), when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offcpu: Option<OffCpuMeta>,
    /// The program's total work: CPU time and, where the machine has them, hardware counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
    /// The CPUs the program was confined to, in the order they were given out (absent: not
    /// pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<u32>>,
    /// How the recording ended, in words ("exited with status 0", "killed by signal 9
    /// (SIGKILL)", "could not start: ...", "attached; stopped by Ctrl-C").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// The run recorded a process that was already running (`record -p`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
    /// What `contend c2c record` recorded: the sharing runtime's options and each process's
    /// results file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<SharingMeta>,
    /// A contention generator that ran beside the program (`record --interfere`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<Interference>,
}

/// What the off-CPU recorder (`observe::offcpu`) saw and missed.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpuMeta {
    /// Voluntary switches out of the program's threads recorded.
    pub blocks: u64,
    /// Of those, futex waits (address and operation known).
    pub futex_waits: u64,
    /// Samples the kernel dropped because a ring was full.
    #[serde(default)]
    pub lost: u64,
    /// Times the kernel throttled the event (samples missing from then to the next tick).
    #[serde(default)]
    pub throttled: u64,
    /// Records that could not be parsed, or blocks not written (counted, skipped).
    #[serde(default)]
    pub unparsed: u64,
    /// Kernel symbols were readable: without them no futex wait is recognised.
    #[serde(default)]
    pub kernel_symbols: bool,
    /// Blocks and wakings kept with their user stack (`stacks/*.ustk`), and those files'
    /// bytes.
    #[serde(default)]
    pub stacks: u64,
    #[serde(default)]
    pub stack_bytes: u64,
    /// Blocks and wakings kept without a stack because the run's stack budget
    /// (`--stack-budget`) was spent.
    #[serde(default)]
    pub stacks_over_budget: u64,
    /// Wakings of a thread by one of the program's threads (`sched_waking`, slice 3); of
    /// those, futex wakes with their word; and wakings kept with the waker's user stack.
    /// Absent in runs recorded before wakes were (their waits cannot be paired).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakings: Option<u64>,
    #[serde(default)]
    pub futex_wakes: u64,
    #[serde(default)]
    pub waking_stacks: u64,
    /// The wakes were asked for but could not be recorded: who woke whom is not known.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wakings_unavailable: bool,
}

/// A generator run beside the program for the whole run, on other CPUs.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// `contend` arguments that ran it (`bench mem generate ...`).
    pub command: Vec<String>,
    pub cpus: Vec<u32>,
    /// What it moved, GB/s (10⁹ bytes read + written per second), and what was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_gb_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_gb_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Why it gave no result, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One process's results as meta.json lists them.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingFile {
    /// `sharing/PID.json`, relative to the run directory.
    pub file: String,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_pid: Option<u32>,
    pub program: String,
    /// `sharing/PID.hist`, if written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// `maps/sharing-PID.maps`, if written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maps: Option<String>,
    pub accesses: u64,
    pub transfers: u64,
    pub hot_lines: u64,
    /// Why the file could not be read, if it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `c2c record` adds to meta.json, under `sharing`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingMeta {
    /// `instrumentation` (`contend cc`); `pmu` later.
    pub backend: String,
    pub line_size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_after: Option<u32>,
    pub exhaustive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    pub processes: Vec<SharingFile>,
}

/// How threads were sampled.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Sampling {
    /// The interval asked for, ns.
    pub interval_ns: u64,
    /// Where on-CPU and run-queue times come from: `"schedstat"` (ns) or `"stat"` (ticks).
    pub source: String,
    /// Sampling rounds taken, and how many came more than an interval late.
    pub rounds: u64,
    #[serde(default)]
    pub late_rounds: u64,
    /// CPU time the sampler itself used, ns, over `wall_ns` of sampling.
    #[serde(default)]
    pub sampler_cpu_ns: u64,
    #[serde(default)]
    pub wall_ns: u64,
    /// Exact state intervals from the sched tracepoints were recorded too.
    #[serde(default)]
    pub sched_tracepoints: bool,
    /// CPU time the hypervisor took from the machine's CPUs (all of them) while sampling, ns
    /// (`/proc/stat` steal): schedstat counts it as neither service nor run-queue wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ns: Option<u64>,
    /// With sched tracepoints: what their reader saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_trace: Option<SchedTrace>,
}

/// What the sched-tracepoint reader saw while recording.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SchedTrace {
    /// State changes written into the target's thread streams.
    pub state_changes: u64,
    /// Records the kernel lost (rings full).
    pub lost: u64,
    /// Records the reader could not parse.
    pub unparsed: u64,
    /// Breaks in a CPU's chain of switches (at least one switch not delivered): a thread's
    /// state between two recorded changes may then be wrong.
    pub switch_gaps: u64,
    /// CPUs whose switches out of idle this kernel does not deliver.
    #[serde(default)]
    pub idle_exits_untraced: Vec<u32>,
    /// Threads that ended before the sampler saw them (their changes not kept).
    #[serde(default)]
    pub unsampled_threads: u64,
    /// How the kernel's `prev_state` was decoded, and the reader's other notes.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The program's work, for the scaling model's C(n).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Work {
    /// User plus system CPU time of the program and its reaped children, ns (`wait4`).
    #[serde(default)]
    pub cpu_ns: Option<u64>,
    /// Of `cpu_ns`: user-mode and kernel time (`wait4`'s ru_utime and ru_stime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_ns: Option<u64>,
    /// Hardware and software counter totals, when opened.
    #[serde(default)]
    pub counters: Vec<CounterTotal>,
}

/// One counter's total over the run.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CounterTotal {
    /// `cycles`, `instructions`, `llc-references`, `llc-misses`, `memory-stalls`, `task-clock`, ...
    pub counter: String,
    /// The event as the kernel was asked for it.
    pub event: String,
    /// Scaled for multiplexing (raw × enabled / running).
    pub value: u64,
    pub enabled_ns: u64,
    pub running_ns: u64,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// A wall-clock instant, stored both ways: nanoseconds for arithmetic, RFC 3339 for people.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Timestamp {
    pub unix_ns: u64,
    pub utc: String,
}

impl Timestamp {
    pub fn from_system(t: SystemTime) -> Timestamp {
        let ns = t
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Timestamp {
            unix_ns: u64::try_from(ns).unwrap_or(u64::MAX),
            utc: humantime::format_rfc3339_millis(t).to_string(),
        }
    }

    pub fn now() -> Timestamp {
        Timestamp::from_system(SystemTime::now())
    }
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// `uname -m`.
    pub arch: String,
}

impl Host {
    /// This machine, from /proc/sys/kernel (empty strings where unreadable).
    pub fn this() -> Host {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        Host {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}

/// The clock the streams' timestamps count.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Clock {
    /// `monotonic`, `tsc` or `realtime` (as in the stream headers).
    pub source: crate::format::ClockSource,
    /// Ticks per second.
    pub hz: u64,
    /// Pairs of (clock ticks, CLOCK_MONOTONIC ns) taken during the run, for converting a TSC
    /// to nanoseconds and checking its drift; empty for the nanosecond clocks.
    #[serde(default)]
    pub calibration: Vec<ClockPoint>,
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ClockPoint {
    pub ticks: u64,
    pub monotonic_ns: u64,
}

/// Something that could not be measured, and why, in words a user can act on: what the
/// observers report and meta.json keeps (never a zero in its place).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Unavailable {
    pub what: String,
    pub why: String,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} unavailable: {}", self.what, self.why)
    }
}

impl std::error::Error for Unavailable {}

/// meta.json's stream entries by file ([`Meta::stream_index`]).
#[derive(Debug, Clone)]
pub struct StreamIndex<'m> {
    by_file: std::collections::HashMap<&'m str, &'m StreamEntry>,
}

impl<'m> StreamIndex<'m> {
    /// The role of the stream `file` (relative to the run directory): as meta.json lists it,
    /// else inferred from its name (a stream meta.json does not list).
    pub fn role(&self, file: &str) -> StreamRole {
        self.by_file.get(file).map_or_else(
            || StreamRole::infer(file, crate::format::StreamKind::Thread),
            |s| s.role(),
        )
    }

    /// The thread's name meta.json gives the stream `file` (empty if none).
    pub fn name(&self, file: &str) -> &'m str {
        self.by_file.get(file).map_or("", |s| s.name.as_str())
    }
}

#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamEntry {
    /// Path relative to the run directory, e.g. `streams/t1234.cst`.
    pub file: String,
    pub kind: crate::format::StreamKind,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub tid: u32,
    #[serde(default)]
    pub rank: Option<i32>,
    /// Counts as the recorder last knew them; the stream itself is authoritative.
    #[serde(default)]
    pub events: u64,
    #[serde(default)]
    pub dropped: u64,
    /// The thread's name as it was when the stream ended (empty if unknown).
    #[serde(default)]
    pub name: String,
    /// Which recorder wrote it; absent in runs recorded before roles were (see [`Self::role`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<StreamRole>,
}

impl StreamEntry {
    /// The stream's role: as recorded, else inferred from its file name and kind.
    pub fn role(&self) -> StreamRole {
        self.role
            .unwrap_or_else(|| StreamRole::infer(&self.file, self.kind))
    }
}

/// A recorded topology, or `None` for null or for one that does not read (an older or damaged
/// description must not make the whole run unreadable).
fn topology_or_none<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<topology::Described>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

impl Meta {
    /// A meta for a run starting now, with a monotonic nanosecond clock.
    pub fn new(command: Vec<String>) -> Meta {
        Meta {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: "contend".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            command,
            recorded_by: Vec::new(),
            started: Timestamp::now(),
            ended: None,
            host: Host::this(),
            topology: None,
            clock: Clock {
                source: crate::format::ClockSource::Monotonic,
                hz: 1_000_000_000,
                calibration: Vec::new(),
            },
            captured: Vec::new(),
            unavailable: Vec::new(),
            streams: Vec::new(),
            events_dropped: 0,
            exit_status: None,
            monotonic_span: None,
            lock_sample_every: None,
            lock_probe_processes: None,
            sampling: None,
            offcpu: None,
            work: None,
            cpus: None,
            outcome: None,
            attached: false,
            sharing: None,
            interference: None,
        }
    }

    /// Whether the run recorded `what`.
    pub fn has(&self, what: Captured) -> bool {
        self.captured.contains(&what)
    }

    /// Records that the run captured `what` (once).
    pub fn capture(&mut self, what: Captured) {
        if !self.has(what.clone()) {
            self.captured.push(what);
        }
    }

    /// The streams of one role, in meta.json's order.
    pub fn streams_with(&self, role: StreamRole) -> impl Iterator<Item = &StreamEntry> + '_ {
        self.streams.iter().filter(move |s| s.role() == role)
    }

    /// The stream entries by file, built once for a pass over a run's streams: a run of
    /// thousands of threads lists thousands, and a search of the list per stream would be
    /// quadratic.
    pub fn stream_index(&self) -> StreamIndex<'_> {
        // The first entry of a file listed twice, as a search of the list would find it.
        let mut by_file = std::collections::HashMap::with_capacity(self.streams.len());
        for s in &self.streams {
            by_file.entry(s.file.as_str()).or_insert(s);
        }
        StreamIndex { by_file }
    }

    /// How many CPUs the recorded machine had online (its topology's PUs), if recorded.
    pub fn online_cpus(&self) -> Option<u32> {
        self.topology.as_ref().map(|t| t.topology.pus.len() as u32)
    }

    /// The NUMA node of each online CPU of the recorded machine (empty if not recorded).
    pub fn node_of_cpu(&self) -> std::collections::BTreeMap<u32, u32> {
        self.topology
            .iter()
            .flat_map(|t| &t.topology.pus)
            .filter_map(|pu| Some((pu.cpu, pu.node?)))
            .collect()
    }

    /// Parses meta.json text, rejecting a newer major schema with a message that says so.
    pub fn from_json(text: &str) -> Result<Meta, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            None => return Err("no schema_version: not a contend meta.json".into()),
            Some(v) if v > u64::from(SCHEMA_VERSION) => {
                return Err(format!(
                    "schema version {v} is newer than this contend's {SCHEMA_VERSION}: upgrade contend to read it"
                ))
            }
            Some(_) => {}
        }
        let meta: Meta =
            serde_json::from_value(value).map_err(|e| format!("does not match the schema: {e}"))?;
        meta.check()?;
        Ok(meta)
    }

    /// What the schema's types cannot say: a usable clock rate, and stream paths that stay
    /// inside the run directory (a hostile meta.json must not make a reader open other files).
    fn check(&self) -> Result<(), String> {
        if self.clock.hz == 0 {
            return Err("clock.hz is 0: a clock must tick".into());
        }
        for s in &self.streams {
            let path = std::path::Path::new(&s.file);
            let inside = !s.file.is_empty()
                && path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside {
                return Err(format!(
                    "stream file {:?} is not a path inside the run directory",
                    s.file
                ));
            }
        }
        Ok(())
    }
}
