//! Cache-line sharing results (docs/formats.md §2.5): what the sharing runtime
//! (`crates/sharing`, linked into a program built with `contend cc`) writes for each process
//! when it exits, and what `contend report` / `contend c2c report` read back. One definition for
//! both sides: the runtime serialises these types, the reader deserialises and validates them.
//!
//! Per process, in the run directory:
//! - `sharing/PID.json`: a [`ProcessSharing`] (the threads, the totals, every hot line with the
//!   object it lies in, which threads read and wrote which bytes, and per-access statistics);
//! - `sharing/PID.hist`: the access history of hot lines, [`HISTORY_MAGIC`] then 4-byte
//!   little-endian [`HistoryEntry`] words; each line's [`HistoryRef`] says where its window is;
//! - `maps/sharing-PID.maps`: `/proc/PID/maps` at exit, to name code and globals.

use serde::{Deserialize, Serialize};

/// `version` of [`ProcessSharing`]; a reader refuses a newer one.
pub const SHARING_VERSION: u32 = 1;
/// The first 8 bytes of a `.hist` file.
pub const HISTORY_MAGIC: [u8; 8] = *b"CSHIST01";
/// The largest line size the runtime models (bytes); offsets fit 7 bits.
pub const MAX_LINE_SIZE: u32 = 128;

/// One process's sharing results.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSharing {
    pub version: u32,
    pub pid: u32,
    /// The process it was forked from, when the runtime saw the fork.
    pub parent_pid: Option<u32>,
    /// `/proc/self/exe` at start.
    pub program: String,
    /// The modelled cache-line size in bytes (64, or 128 with `--line 128`).
    pub line_size: u32,
    /// Transfers after which a line is tracked in detail; 0 with `--exhaustive` (every line
    /// from its first access).
    pub hot_after: u32,
    /// Once a hot line's history window is full (or when it has none), 1 in `sample_every` of
    /// each thread's accesses to it go through the model and are itemised, each counting for
    /// `sample_every` (its counts and transfers are then estimates); 1: every access, exact.
    #[serde(default = "exact")]
    pub sample_every: u32,
    /// CLOCK_MONOTONIC ns when the runtime started and when it wrote this file.
    pub started_ns: u64,
    pub ended_ns: u64,
    pub threads: Vec<ThreadInfo>,
    pub totals: Totals,
    /// Hot lines, each once per object lifetime (a line freed and reused is a new entry).
    pub lines: Vec<HotLine>,
    /// Present when these results come from the PMU back end (memory samples of a perf.data
    /// file) instead of the sharing runtime: counts are then estimates from samples (each
    /// sample stands for its period), and accesses carry [`PmuAccess`] figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmu: Option<PmuSummary>,
}

/// What the PMU back end read: raw sample counts, before any weighting.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmuSummary {
    /// The perf.data file's events (e.g. `cpu/mem-loads,ldlat=30/P`, `cpu/mem-stores/P`).
    pub events: Vec<String>,
    /// Load and store samples of this process with a data address.
    pub samples: u64,
    pub load_samples: u64,
    pub store_samples: u64,
    /// Loads modified in another core's cache on this node / on another node (perf c2c's
    /// local and remote HITM), and loads served by a peer cache (AMD, Arm).
    pub hitm_local: u64,
    pub hitm_remote: u64,
    pub peer: u64,
    /// File-wide: memory samples without a data address, samples of other events, samples the
    /// kernel lost, records that could not be decoded.
    pub without_address: u64,
    pub other_samples: u64,
    pub lost: u64,
    pub malformed: u64,
    /// Threads beyond the 65535th of the process, counted under the last thread index.
    #[serde(default)]
    pub threads_folded: u64,
}

/// An access statistic's raw PMU figures (samples, not weighted by period).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmuAccess {
    pub samples: u64,
    pub hitm_local: u64,
    pub hitm_remote: u64,
    pub peer: u64,
    /// Sum, count and maximum of the load latencies (sample weights, core cycles).
    pub latency_cycles: u64,
    pub latency_samples: u64,
    pub latency_max: u64,
}

fn exact() -> u32 {
    1
}

/// A thread the runtime met. Threads are numbered in order of their first instrumented access
/// or creation, from 0 (the main thread).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    pub index: u16,
    pub tid: u32,
    /// The thread that created it (`pthread_create`), when known.
    pub created_by: Option<u16>,
    /// The start routine's address, when created through `pthread_create`.
    pub start_routine: Option<u64>,
    pub first_ns: u64,
}

/// Whole-process counts.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Instrumented accesses seen (every hook call that touches memory).
    pub reads: u64,
    pub writes: u64,
    /// Atomic operations (counted in reads or writes too: a load is a read, anything else a
    /// write).
    pub atomics: u64,
    /// Transfers on every line, hot or not.
    pub transfers: u64,
    /// Lines that became hot, and hot lines not tracked because the table was full.
    pub hot_lines: u64,
    pub hot_lines_dropped: u64,
    /// History entries not kept because a line's window was full (not an error: the window is
    /// a sample) and because the history budget was spent.
    pub history_beyond_window: u64,
    pub history_dropped: u64,
    /// Heap allocations and frees seen.
    pub allocations: u64,
    pub frees: u64,
}

/// Why a hot line's record ended.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LineEnd {
    /// The process exited (or wrote its results) with the line still live.
    Exit,
    /// The heap block it was in was freed (or reallocated away).
    Freed,
}

/// A line tracked in detail.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HotLine {
    /// Unique within the process.
    pub id: u32,
    /// The line's address (a multiple of the line size).
    pub address: u64,
    pub hot_since_ns: u64,
    pub ended_ns: u64,
    pub end: LineEnd,
    /// Transfers counted on this line before it became hot (not attributed to accesses).
    pub transfers_before_hot: u64,
    /// The heap blocks that overlapped the line while it was hot, in order of allocation (small
    /// blocks share lines); empty for a global, a stack or another mapping (the reader names
    /// those from the maps). An access belongs to the block that covers its offset.
    pub objects: Vec<Allocation>,
    /// Per (offset, size, kind, thread, code address): counts since the line became hot. Which
    /// threads read and wrote which bytes follows from these.
    pub accesses: Vec<AccessStat>,
    /// The line's access history window in the `.hist` file, if one was kept.
    pub history: Option<HistoryRef>,
}

/// A heap block.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub address: u64,
    pub size: u64,
    /// Return address of the program's call to the allocator.
    pub site: u64,
    /// Which allocator: `malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`,
    /// `memalign`, `valloc`, `pvalloc`, `operator new`, ...
    pub allocator: String,
    pub thread: u16,
    pub allocated_ns: u64,
    /// When it was freed, if it was while the line was tracked.
    pub freed_ns: Option<u64>,
}

/// What an access did.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessKind {
    Read,
    Write,
    /// An atomic load.
    AtomicRead,
    /// An atomic store or read-modify-write.
    AtomicWrite,
}

impl AccessKind {
    pub fn is_write(self) -> bool {
        matches!(self, AccessKind::Write | AccessKind::AtomicWrite)
    }
    pub fn is_atomic(self) -> bool {
        matches!(self, AccessKind::AtomicRead | AccessKind::AtomicWrite)
    }
}

/// Accesses of one kind by one thread from one code address to one place in a line.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessStat {
    pub offset: u8,
    /// Bytes touched in this line (a range access is clipped to the line).
    pub size: u8,
    pub kind: AccessKind,
    pub thread: u16,
    /// The instrumented access's code address (return address of the hook call).
    pub pc: u64,
    pub count: u64,
    /// How many of them were transfers (the line's current version written by another thread).
    pub transfers: u64,
    /// CPUs the accesses ran on (from `rdtscp`/`getcpu` when sampled; may be empty).
    pub cpus: Vec<u32>,
    /// The PMU back end's raw figures for these accesses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmu: Option<PmuAccess>,
}

/// Where a line's history window is in the `.hist` file.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRef {
    /// Index of the first entry (entries are 4 bytes after the 8-byte magic).
    pub first: u64,
    pub entries: u32,
    /// Accesses to the line after the window was full (not in the history).
    pub beyond: u64,
}

/// One access in a line's history, in the order the accesses were made (the runtime takes a
/// slot with an atomic increment on the line's counter, so the order is the line's
/// coherence order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryEntry {
    pub offset: u8,
    /// 1..=128 bytes.
    pub size: u8,
    pub write: bool,
    pub atomic: bool,
    pub thread: u16,
}

impl HistoryEntry {
    /// bits 0..6 offset, 7..13 size − 1, 14 write, 15 atomic, 16..31 thread.
    pub fn encode(self) -> u32 {
        debug_assert!(self.size >= 1 && u32::from(self.size) <= MAX_LINE_SIZE);
        (u32::from(self.offset) & 0x7f)
            | ((u32::from(self.size.max(1)) - 1) & 0x7f) << 7
            | u32::from(self.write) << 14
            | u32::from(self.atomic) << 15
            | u32::from(self.thread) << 16
    }

    pub fn decode(word: u32) -> HistoryEntry {
        HistoryEntry {
            offset: (word & 0x7f) as u8,
            size: ((word >> 7) & 0x7f) as u8 + 1,
            write: word & (1 << 14) != 0,
            atomic: word & (1 << 15) != 0,
            thread: (word >> 16) as u16,
        }
    }
}

/// Problems with a sharing file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SharingError {
    #[error("not sharing results: {0}")]
    Json(String),
    #[error("version {0} is newer than this contend reads ({SHARING_VERSION}): update contend")]
    Newer(u32),
    #[error("{0}")]
    Invalid(String),
    #[error("the history file does not start with {HISTORY_MAGIC:?}")]
    HistoryMagic,
    #[error("line {line}: its history (entries {first}..{end}) is beyond the history file's {have} entries")]
    HistoryRange {
        line: u32,
        first: u64,
        end: u64,
        have: u64,
    },
}

impl ProcessSharing {
    /// Parses and validates a `PID.json` (every field's range, every thread index known, offsets
    /// inside the line).
    pub fn from_json(bytes: &[u8]) -> Result<ProcessSharing, SharingError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        let v: VersionOnly =
            serde_json::from_slice(bytes).map_err(|e| SharingError::Json(e.to_string()))?;
        if v.version > SHARING_VERSION {
            return Err(SharingError::Newer(v.version));
        }
        let s: ProcessSharing =
            serde_json::from_slice(bytes).map_err(|e| SharingError::Json(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    pub fn validate(&self) -> Result<(), SharingError> {
        let bad = |m: String| Err(SharingError::Invalid(m));
        if !self.line_size.is_power_of_two() || !(8..=MAX_LINE_SIZE).contains(&self.line_size) {
            return bad(format!(
                "line size {} is not a power of two from 8 to {MAX_LINE_SIZE}",
                self.line_size
            ));
        }
        let known = |t: u16| self.threads.iter().any(|i| i.index == t);
        for (n, t) in self.threads.iter().enumerate() {
            if self.threads[..n].iter().any(|o| o.index == t.index) {
                return bad(format!("thread index {} appears twice", t.index));
            }
        }
        if self.sample_every == 0 {
            return bad("sample_every is 0 (1 means every access)".into());
        }
        let size = self.line_size;
        for line in &self.lines {
            if line.address % u64::from(size) != 0 {
                return bad(format!(
                    "line {} at {:#x} is not aligned to {size} bytes",
                    line.id, line.address
                ));
            }
            for o in &line.objects {
                let end = o.address.saturating_add(o.size);
                if end <= line.address || o.address >= line.address + u64::from(size) {
                    return bad(format!(
                        "line {}: heap block {:#x}+{} does not overlap it",
                        line.id, o.address, o.size
                    ));
                }
            }
            for a in &line.accesses {
                if a.size == 0 || u32::from(a.offset) + u32::from(a.size) > size {
                    return bad(format!(
                        "line {}: access at offset {} of {} bytes is outside the line",
                        line.id, a.offset, a.size
                    ));
                }
                if !known(a.thread) {
                    return bad(format!(
                        "line {}: unknown thread index {}",
                        line.id, a.thread
                    ));
                }
                if a.transfers > a.count {
                    return bad(format!(
                        "line {}: {} transfers out of {} accesses",
                        line.id, a.transfers, a.count
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A `.hist` file's entries (after checking its magic); a trailing partial word is an error.
pub fn history_entries(bytes: &[u8]) -> Result<&[u8], SharingError> {
    let rest = bytes
        .strip_prefix(&HISTORY_MAGIC[..])
        .ok_or(SharingError::HistoryMagic)?;
    if rest.len() % 4 != 0 {
        return Err(SharingError::Invalid(format!(
            "the history file's {} bytes after its magic are not whole 4-byte entries",
            rest.len()
        )));
    }
    Ok(rest)
}

/// Line `line`'s history window decoded from a `.hist` file's entries, checking its range and
/// every entry (offset and size inside the line, thread known).
pub fn line_history(
    entries: &[u8],
    line: &HotLine,
    sharing: &ProcessSharing,
) -> Result<Vec<HistoryEntry>, SharingError> {
    let Some(h) = &line.history else {
        return Ok(Vec::new());
    };
    let have = (entries.len() / 4) as u64;
    let end = h.first.saturating_add(u64::from(h.entries));
    if end > have {
        return Err(SharingError::HistoryRange {
            line: line.id,
            first: h.first,
            end,
            have,
        });
    }
    let words = &entries[(h.first * 4) as usize..(end * 4) as usize];
    let mut out = Vec::with_capacity(h.entries as usize);
    for w in words.chunks_exact(4) {
        let e = HistoryEntry::decode(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        if u32::from(e.offset) + u32::from(e.size) > sharing.line_size {
            return Err(SharingError::Invalid(format!(
                "line {}: history entry at offset {} of {} bytes is outside the line",
                line.id, e.offset, e.size
            )));
        }
        if !sharing.threads.iter().any(|t| t.index == e.thread) {
            return Err(SharingError::Invalid(format!(
                "line {}: history entry of unknown thread index {}",
                line.id, e.thread
            )));
        }
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_entries_pin_their_bits() {
        let e = HistoryEntry {
            offset: 56,
            size: 8,
            write: true,
            atomic: false,
            thread: 3,
        };
        // 56 | (7 << 7) | (1 << 14) | (3 << 16)
        assert_eq!(e.encode(), 0x0003_43b8);
        assert_eq!(HistoryEntry::decode(0x0003_43b8), e);
        let big = HistoryEntry {
            offset: 0,
            size: 128,
            write: false,
            atomic: true,
            thread: 65535,
        };
        assert_eq!(big.encode(), 0xffff_bf80);
        assert_eq!(HistoryEntry::decode(big.encode()), big);
    }

    fn sample() -> ProcessSharing {
        ProcessSharing {
            version: SHARING_VERSION,
            pid: 10,
            parent_pid: None,
            program: "/bin/x".into(),
            line_size: 64,
            hot_after: 64,
            sample_every: 1,
            started_ns: 1,
            ended_ns: 2,
            threads: vec![ThreadInfo {
                index: 0,
                tid: 10,
                created_by: None,
                start_routine: None,
                first_ns: 1,
            }],
            totals: Totals::default(),
            lines: vec![HotLine {
                id: 1,
                address: 0x1000,
                hot_since_ns: 1,
                ended_ns: 2,
                end: LineEnd::Exit,
                transfers_before_hot: 0,
                objects: vec![],
                accesses: vec![AccessStat {
                    offset: 60,
                    size: 4,
                    kind: AccessKind::Write,
                    thread: 0,
                    pc: 0x400000,
                    count: 3,
                    transfers: 1,
                    cpus: vec![0],
                    pmu: None,
                }],
                history: Some(HistoryRef {
                    first: 0,
                    entries: 2,
                    beyond: 0,
                }),
            }],
            pmu: None,
        }
    }

    #[test]
    fn valid_results_round_trip_and_bad_ones_say_why() {
        let s = sample();
        let json = serde_json::to_vec(&s).unwrap();
        assert_eq!(ProcessSharing::from_json(&json).unwrap(), s);

        let mut bad = s.clone();
        bad.lines[0].accesses[0].offset = 61;
        let e = bad.validate().unwrap_err().to_string();
        assert!(
            e.contains("offset 61 of 4 bytes is outside the line"),
            "{e}"
        );

        let mut bad = s.clone();
        bad.lines[0].accesses[0].thread = 7;
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("unknown thread index 7"));

        let mut bad = s.clone();
        bad.line_size = 96;
        assert!(bad.validate().is_err());

        let mut newer = serde_json::to_value(&s).unwrap();
        newer["version"] = 2.into();
        assert_eq!(
            ProcessSharing::from_json(&serde_json::to_vec(&newer).unwrap()),
            Err(SharingError::Newer(2))
        );
        assert!(matches!(
            ProcessSharing::from_json(b"{\"version\":1}"),
            Err(SharingError::Json(_))
        ));
    }

    #[test]
    fn history_is_checked_against_its_file() {
        let s = sample();
        let mut file = HISTORY_MAGIC.to_vec();
        for e in [
            HistoryEntry {
                offset: 0,
                size: 8,
                write: true,
                atomic: false,
                thread: 0,
            },
            HistoryEntry {
                offset: 8,
                size: 8,
                write: false,
                atomic: false,
                thread: 0,
            },
        ] {
            file.extend(e.encode().to_le_bytes());
        }
        let entries = history_entries(&file).unwrap();
        let h = line_history(entries, &s.lines[0], &s).unwrap();
        assert_eq!(h.len(), 2);
        assert!(h[0].write && !h[1].write);
        // One entry short.
        let short = history_entries(&file[..file.len() - 4]).unwrap();
        assert!(matches!(
            line_history(short, &s.lines[0], &s),
            Err(SharingError::HistoryRange { .. })
        ));
        assert_eq!(
            history_entries(b"CSHIST00"),
            Err(SharingError::HistoryMagic)
        );
        assert!(history_entries(&file[..file.len() - 1]).is_err());
    }
}
