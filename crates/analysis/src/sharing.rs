//! Cache-line sharing (docs/methodology.md §7): what the sharing runtime recorded about each
//! hot line, turned into perf c2c's two tables — the lines by cross-thread transfers, and per
//! line the distribution over offsets, threads and code — plus what perf c2c leaves to the
//! reader: whether the line is falsely or truly shared, and what separating its fields would
//! save, by replaying the line's recorded history with the fields on separate lines.
//!
//! The coherence model is the runtime's (`crates/sharing`, formats.md §2.5): per line, the thread
//! whose write made the current version and the threads holding it; a **transfer** is an access
//! by a thread to a line whose current version another thread wrote (a read by a thread not yet
//! holding it, or any write). Pure functions: no I/O; names of code and objects come from the
//! caller.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use trace::sharing::{AccessKind, HistoryEntry, HotLine, PmuAccess, ProcessSharing};

/// A field: a maximal byte range of a line covered by overlapping accesses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Field {
    pub offset: u8,
    pub size: u8,
    pub readers: BTreeSet<u16>,
    pub writers: BTreeSet<u16>,
    pub loads: u64,
    pub stores: u64,
    /// Transfers counted at accesses to this field.
    pub transfers: u64,
    /// Whether another thread writes what a thread here accesses: sharing of data itself.
    pub truly_shared: bool,
}

impl Field {
    pub fn end(&self) -> u32 {
        u32::from(self.offset) + u32::from(self.size)
    }
    pub fn threads(&self) -> BTreeSet<u16> {
        self.readers.union(&self.writers).copied().collect()
    }
}

/// What kind of sharing makes a line's transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Threads touch disjoint bytes: the transfers go away when the fields are on separate
    /// lines.
    FalseSharing,
    /// Threads touch the same bytes (one of them writing): the transfers are the data's own.
    TrueSharing,
    /// Both, each with at least [`MIXED_SHARE`] of the transfers.
    Mixed,
}

impl Class {
    pub fn title(self) -> &'static str {
        match self {
            Class::FalseSharing => "false sharing",
            Class::TrueSharing => "true sharing",
            Class::Mixed => "mixed",
        }
    }
}

/// Share of transfers each kind must have for a line to be called mixed.
pub const MIXED_SHARE: f64 = 0.10;

/// Transfers of a history replayed as recorded and with the fields moved apart.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Replay {
    /// History entries replayed (the window; the line may have had more accesses).
    pub entries: u64,
    /// Transfers in the window with the layout as it is.
    pub as_is: u64,
    /// With each group of the fix hint on its own line.
    pub grouped: u64,
    /// With every field on its own line (padding everything to the line size).
    pub padded: u64,
}

/// What to separate, and what it would save.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FixHint {
    /// Groups of fields (offset ranges) accessed by the same threads, to put on separate lines.
    pub groups: Vec<FieldGroup>,
    /// Fraction of the line's transfers that separating the groups removes (from the replay;
    /// without a history, from the attribution of transfers to truly shared fields).
    pub reduction: f64,
    /// The line's transfers (those before it became hot included) times `reduction`.
    pub transfers_removed: u64,
    /// Whether `reduction` comes from replaying the history (else it is estimated).
    pub from_replay: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FieldGroup {
    /// Byte ranges `[start, end)`.
    pub ranges: Vec<(u8, u8)>,
    pub threads: BTreeSet<u16>,
}

/// One row of a line's distribution: accesses of one kind by one thread from one code address
/// to one offset.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct OffsetRow {
    pub offset: u8,
    pub size: u8,
    pub kind: AccessKind,
    pub thread: u16,
    pub tid: u32,
    pub pc: u64,
    pub count: u64,
    pub transfers: u64,
    /// This row's share of the line's attributed transfers (0..=1).
    pub transfer_share: f64,
    pub cpus: Vec<u32>,
    /// Index into the line's `objects` of the heap block covering this offset.
    pub object: Option<usize>,
    /// Raw sample figures, from the PMU back end.
    pub pmu: Option<PmuAccess>,
}

/// One hot line, analysed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LineReport {
    pub pid: u32,
    pub id: u32,
    pub address: u64,
    pub line_size: u32,
    /// Transfers: attributed to accesses since the line became hot, plus those before.
    pub transfers: u64,
    pub transfers_before_hot: u64,
    pub loads: u64,
    pub stores: u64,
    pub atomics: u64,
    pub threads: BTreeSet<u16>,
    pub fields: Vec<Field>,
    /// `None` when the line had no transfers after it became hot (nothing to classify).
    pub class: Option<Class>,
    /// Transfers caused by true sharing and by false sharing (their sum is the attributed
    /// transfers; from the replay when there is a history).
    pub true_transfers: u64,
    pub false_transfers: u64,
    pub replay: Option<Replay>,
    pub hint: Option<FixHint>,
    /// transfers × the cost of one transfer given to [`analyse`], ns.
    pub estimated_cost_ns: f64,
    pub rows: Vec<OffsetRow>,
    /// The line's raw sample figures summed over its accesses, from the PMU back end.
    pub pmu: Option<PmuAccess>,
    /// Which threads read (bit 0) and wrote (bit 1) each byte, per thread: `(thread, [u8; line])`.
    pub byte_use: Vec<(u16, Vec<u8>)>,
}

/// A process's lines, most transferred first.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SharingReport {
    pub lines: Vec<LineReport>,
    /// Transfers on all lines, hot or not, summed over processes.
    pub transfers_total: u64,
    /// How long the threads were on a CPU together, against what sharing needs to show.
    pub concurrency: ConcurrencyCheck,
    /// What the report can conclude.
    pub verdict: Verdict,
}

/// Concurrent on-CPU time a run needs, at the default `hot_after` of 64, before "no hot line"
/// means "no sharing": 100 × the 0.03 ms in which reader_writer's two threads, on a CPU
/// together, make 64 transfers on its line (2 161 a ms at the slowest; docs/methodology.md §7.6).
pub const TOGETHER_NEEDED_NS: u64 = 3_000_000;

/// The threshold for a run whose lines become hot after `hot_after` transfers (0: from the
/// first access, when one transfer is enough to show): proportional, since transfers come at
/// a rate per unit of concurrent time.
pub fn together_needed_ns(hot_after: u32) -> u64 {
    TOGETHER_NEEDED_NS * u64::from(hot_after.max(1)) / 64
}

/// What a run's sharing results allow to conclude.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// At least one line became hot.
    SharingFound,
    /// No line became hot, and the threads ran together long enough for sharing to show (or
    /// no process had two threads; or the concurrency was not measured: see
    /// [`ConcurrencyCheck`]).
    NoSharing,
    /// No line became hot, but the threads were on a CPU together for less than the
    /// threshold: sharing may be there and not have shown.
    Unknown,
}

/// The concurrency behind the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ConcurrencyCheck {
    /// Time at least two threads of a process were on a CPU at once, ns (with several
    /// multi-threaded processes, the least of them); `None` when not measured (no sampler
    /// data: recorded with `--interval 0`, or imported).
    pub on_cpu_together_ns: Option<u64>,
    /// Whether that is exact (sched tracepoints) or a lower bound (schedstat samples).
    pub exact: Option<bool>,
    pub method: Option<crate::concurrency::Method>,
    /// What sharing needs to show ([`together_needed_ns`] of the run's `hot_after`), ns.
    pub threshold_ns: u64,
    /// Whether any process had two or more threads (with one, nothing can be shared).
    pub multi_threaded: bool,
}

impl SharingReport {
    /// Sets the concurrency and the verdict: `concurrency` is that of the processes with two
    /// or more threads (`None`: not measured), `hot_after` the runtime's threshold.
    pub fn judge(
        &mut self,
        concurrency: Option<crate::concurrency::Concurrency>,
        multi_threaded: bool,
        hot_after: u32,
    ) {
        self.concurrency = ConcurrencyCheck {
            on_cpu_together_ns: concurrency.map(|c| c.on_cpu_together_ns),
            exact: concurrency.map(|c| c.exact),
            method: concurrency.map(|c| c.method),
            threshold_ns: together_needed_ns(hot_after),
            multi_threaded,
        };
        self.verdict = verdict(
            !self.lines.is_empty(),
            multi_threaded,
            self.concurrency.on_cpu_together_ns,
            self.concurrency.threshold_ns,
        );
    }
}

/// The verdict: sharing found when a line is hot; otherwise unknown only when the threads of
/// a multi-threaded process were measured to run together for less than `threshold_ns`.
pub fn verdict(
    any_hot: bool,
    multi_threaded: bool,
    together_ns: Option<u64>,
    threshold_ns: u64,
) -> Verdict {
    if any_hot {
        Verdict::SharingFound
    } else if multi_threaded && together_ns.is_some_and(|t| t < threshold_ns) {
        Verdict::Unknown
    } else {
        Verdict::NoSharing
    }
}

/// Analyses every hot line of `process`; `histories[i]` is line i's decoded history (empty
/// if none). `transfer_ns` is the cost given to one transfer for the estimated cost column.
pub fn analyse_process(
    process: &ProcessSharing,
    histories: &[Vec<HistoryEntry>],
    transfer_ns: f64,
) -> Vec<LineReport> {
    process
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let empty = Vec::new();
            let history = histories.get(i).unwrap_or(&empty);
            analyse_line(process, line, history, transfer_ns)
        })
        .collect()
}

/// Lines of several processes, sorted by transfers (then address), most first.
pub fn rank(mut lines: Vec<LineReport>, transfers_total: u64) -> SharingReport {
    lines.sort_by(|a, b| {
        b.transfers
            .cmp(&a.transfers)
            .then(a.pid.cmp(&b.pid))
            .then(a.address.cmp(&b.address))
    });
    let verdict = if lines.is_empty() {
        Verdict::NoSharing
    } else {
        Verdict::SharingFound
    };
    SharingReport {
        lines,
        transfers_total,
        // Not measured until [`SharingReport::judge`] is given the concurrency.
        concurrency: ConcurrencyCheck {
            on_cpu_together_ns: None,
            exact: None,
            method: None,
            threshold_ns: TOGETHER_NEEDED_NS,
            multi_threaded: true,
        },
        verdict,
    }
}

/// Maximal byte ranges covered by overlapping (or touching-by-overlap) accesses.
pub fn fields_of(line: &HotLine, line_size: u32) -> Vec<Field> {
    let mut ranges: Vec<(u32, u32)> = line
        .accesses
        .iter()
        .map(|a| {
            let start = u32::from(a.offset);
            (start, (start + u32::from(a.size)).min(line_size))
        })
        .collect();
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s < last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut fields: Vec<Field> = merged
        .iter()
        .map(|&(s, e)| Field {
            offset: s as u8,
            size: (e - s) as u8,
            readers: BTreeSet::new(),
            writers: BTreeSet::new(),
            loads: 0,
            stores: 0,
            transfers: 0,
            truly_shared: false,
        })
        .collect();
    for a in &line.accesses {
        let Some(f) = fields
            .iter_mut()
            .find(|f| u32::from(a.offset) >= u32::from(f.offset) && u32::from(a.offset) < f.end())
        else {
            continue;
        };
        if a.kind.is_write() {
            f.writers.insert(a.thread);
            f.stores += a.count;
        } else {
            f.readers.insert(a.thread);
            f.loads += a.count;
        }
        f.transfers += a.transfers;
    }
    for f in &mut fields {
        let threads = f.threads();
        f.truly_shared = threads.len() > 1 && !f.writers.is_empty();
    }
    fields
}

/// The runtime's coherence model over one line (or one part of a line moved to its own line).
#[derive(Debug, Clone, Default)]
struct LineState {
    writer: Option<u16>,
    holders: BTreeSet<u16>,
}

impl LineState {
    /// Applies one access; true when it is a transfer.
    fn access(&mut self, thread: u16, write: bool) -> bool {
        let other_writer = matches!(self.writer, Some(w) if w != thread);
        if write {
            self.writer = Some(thread);
            self.holders.clear();
            self.holders.insert(thread);
            other_writer
        } else if self.holders.insert(thread) {
            other_writer
        } else {
            false
        }
    }
}

/// Transfers when the accesses are replayed with the bytes of each part on a line of its own:
/// `part_of[offset]` names the part (line) each byte goes to. An access spanning parts counts
/// once per part it touches, as the runtime counts an access spanning lines.
pub fn replay(history: &[HistoryEntry], part_of: &[usize]) -> u64 {
    let parts = part_of.iter().copied().max().map_or(0, |m| m + 1);
    let mut states = vec![LineState::default(); parts.max(1)];
    let mut transfers = 0;
    let mut touched: Vec<usize> = Vec::with_capacity(4);
    for e in history {
        touched.clear();
        let end = (usize::from(e.offset) + usize::from(e.size)).min(part_of.len());
        for &p in &part_of[usize::from(e.offset).min(end)..end] {
            if !touched.contains(&p) {
                touched.push(p);
            }
        }
        for &p in &touched {
            transfers += u64::from(states[p].access(e.thread, e.write));
        }
    }
    transfers
}

/// The fix hint's groups: fields accessed by the same set of threads go together; each group
/// to its own line. Only lines with at least two groups have something to separate.
fn groups_of(fields: &[Field]) -> Vec<FieldGroup> {
    let mut by_threads: BTreeMap<BTreeSet<u16>, Vec<(u8, u8)>> = BTreeMap::new();
    for f in fields {
        by_threads
            .entry(f.threads())
            .or_default()
            .push((f.offset, f.end() as u8));
    }
    let mut groups: Vec<FieldGroup> = by_threads
        .into_iter()
        .map(|(threads, ranges)| FieldGroup { ranges, threads })
        .collect();
    groups.sort_by_key(|g| g.ranges[0]);
    groups
}

fn part_map(line_size: u32, groups: impl Iterator<Item = Vec<(u8, u8)>>) -> Vec<usize> {
    // Bytes no access touched stay with part 0 (they are never replayed).
    let mut part_of = vec![0usize; line_size as usize];
    for (i, ranges) in groups.enumerate() {
        for (s, e) in ranges {
            for slot in &mut part_of[usize::from(s)..usize::from(e).min(line_size as usize)] {
                *slot = i;
            }
        }
    }
    part_of
}

/// One hot line analysed: fields, classification, fix hint, distribution.
pub fn analyse_line(
    process: &ProcessSharing,
    line: &HotLine,
    history: &[HistoryEntry],
    transfer_ns: f64,
) -> LineReport {
    let size = process.line_size;
    let fields = fields_of(line, size);
    let attributed: u64 = line.accesses.iter().map(|a| a.transfers).sum();
    let (mut loads, mut stores, mut atomics) = (0, 0, 0);
    let mut threads = BTreeSet::new();
    let mut byte_use: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
    for a in &line.accesses {
        if a.kind.is_write() {
            stores += a.count;
        } else {
            loads += a.count;
        }
        if a.kind.is_atomic() {
            atomics += a.count;
        }
        threads.insert(a.thread);
        let bytes = byte_use
            .entry(a.thread)
            .or_insert_with(|| vec![0; size as usize]);
        let start = usize::from(a.offset);
        let end = (start + usize::from(a.size)).min(size as usize);
        for b in &mut bytes[start..end] {
            *b |= if a.kind.is_write() { 2 } else { 1 };
        }
    }
    let groups = groups_of(&fields);
    let replayed = (!history.is_empty()).then(|| {
        let as_is = replay(history, &vec![0; size as usize]);
        let grouped = replay(
            history,
            &part_map(size, groups.iter().map(|g| g.ranges.clone())),
        );
        let padded = replay(
            history,
            &part_map(size, fields.iter().map(|f| vec![(f.offset, f.end() as u8)])),
        );
        Replay {
            entries: history.len() as u64,
            as_is,
            grouped,
            padded,
        }
    });
    // True transfers: those that remain with every field apart (replay), or those counted at
    // accesses to fields another thread writes (attribution).
    let true_fraction = match &replayed {
        Some(r) if r.as_is > 0 => r.padded as f64 / r.as_is as f64,
        _ => {
            let true_attr: u64 = fields
                .iter()
                .filter(|f| f.truly_shared)
                .map(|f| f.transfers)
                .sum();
            if attributed > 0 {
                true_attr as f64 / attributed as f64
            } else {
                0.0
            }
        }
    };
    let true_transfers = (attributed as f64 * true_fraction).round() as u64;
    let false_transfers = attributed - true_transfers.min(attributed);
    let class = (attributed > 0 || replayed.as_ref().is_some_and(|r| r.as_is > 0)).then(|| {
        let false_fraction = 1.0 - true_fraction;
        if false_fraction >= 1.0 - MIXED_SHARE {
            Class::FalseSharing
        } else if false_fraction <= MIXED_SHARE {
            Class::TrueSharing
        } else {
            Class::Mixed
        }
    });
    let hint = (groups.len() > 1 && class.is_some_and(|c| c != Class::TrueSharing)).then(|| {
        let (reduction, from_replay) = match &replayed {
            Some(r) if r.as_is > 0 => (
                (r.as_is.saturating_sub(r.grouped)) as f64 / r.as_is as f64,
                true,
            ),
            _ => (1.0 - true_fraction, false),
        };
        FixHint {
            groups: groups.clone(),
            reduction,
            // The transfers before the line became hot are the same accesses' (the fix removes
            // them alike).
            transfers_removed: ((attributed + line.transfers_before_hot) as f64 * reduction).round()
                as u64,
            from_replay,
        }
    });
    let tid_of = |t: u16| {
        process
            .threads
            .iter()
            .find(|i| i.index == t)
            .map_or(0, |i| i.tid)
    };
    let mut rows: Vec<OffsetRow> = line
        .accesses
        .iter()
        .map(|a| OffsetRow {
            offset: a.offset,
            size: a.size,
            kind: a.kind,
            thread: a.thread,
            tid: tid_of(a.thread),
            pc: a.pc,
            count: a.count,
            transfers: a.transfers,
            transfer_share: if attributed > 0 {
                a.transfers as f64 / attributed as f64
            } else {
                0.0
            },
            cpus: a.cpus.clone(),
            object: {
                let at = line.address + u64::from(a.offset);
                line.objects
                    .iter()
                    .rposition(|o| at >= o.address && at < o.address.saturating_add(o.size))
            },
            pmu: a.pmu.clone(),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.transfers
            .cmp(&a.transfers)
            .then(a.offset.cmp(&b.offset))
            .then(b.count.cmp(&a.count))
    });
    let transfers = attributed + line.transfers_before_hot;
    LineReport {
        pid: process.pid,
        id: line.id,
        address: line.address,
        line_size: size,
        transfers,
        transfers_before_hot: line.transfers_before_hot,
        loads,
        stores,
        atomics,
        threads,
        fields,
        class,
        true_transfers,
        false_transfers,
        replay: replayed,
        hint,
        estimated_cost_ns: transfers as f64 * transfer_ns,
        rows,
        pmu: sum_pmu(&line.accesses),
        byte_use: byte_use.into_iter().collect(),
    }
}

/// The PMU figures of a line's accesses added up; `None` when none has any.
fn sum_pmu(accesses: &[trace::sharing::AccessStat]) -> Option<PmuAccess> {
    let mut total: Option<PmuAccess> = None;
    for p in accesses.iter().filter_map(|a| a.pmu.as_ref()) {
        let t = total.get_or_insert_with(PmuAccess::default);
        t.samples = t.samples.saturating_add(p.samples);
        t.hitm_local = t.hitm_local.saturating_add(p.hitm_local);
        t.hitm_remote = t.hitm_remote.saturating_add(p.hitm_remote);
        t.peer = t.peer.saturating_add(p.peer);
        t.latency_cycles = t.latency_cycles.saturating_add(p.latency_cycles);
        t.latency_samples = t.latency_samples.saturating_add(p.latency_samples);
        t.latency_max = t.latency_max.max(p.latency_max);
    }
    total
}

#[cfg(test)]
mod tests;
