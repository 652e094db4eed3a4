//! Memory samples → the sharing model (`trace::sharing`), so that the PMU back end's results
//! go through the same analysis and report as the instrumentation back end's.
//!
//! Per process: threads numbered in order of their first sample (the main thread first); per
//! line, one [`AccessStat`] per (offset, load/store/locked, thread, code address). A sample
//! stands for `period` accesses (counts are estimates); a load sample that shows a
//! cache-to-cache transfer (HITM, peer) stands for `period` transfers. Samples carry an address,
//! not a width: each access is recorded as 1 byte at its address. Lines shown are those with a
//! transfer, or written by one thread and touched by another.

use super::{MemOp, MemSample, PerfMem, Transfer};
use std::collections::{BTreeMap, BTreeSet};
use trace::sharing::{
    AccessKind, AccessStat, HotLine, LineEnd, PmuAccess, PmuSummary, ProcessSharing, ThreadInfo,
    Totals, SHARING_VERSION,
};

type AccessKey = (u8, AccessKind, u16, u64);

#[derive(Default)]
struct LineAcc {
    first_ns: u64,
    last_ns: u64,
    accesses: BTreeMap<AccessKey, (AccessStat, BTreeSet<u32>)>,
}

fn kind_of(s: &MemSample) -> AccessKind {
    match (s.source.op(), s.source.locked()) {
        (_, true) => AccessKind::AtomicWrite,
        (MemOp::Store, false) => AccessKind::Write,
        _ => AccessKind::Read,
    }
}

/// Thread indices are u16; threads met after this many share the last index.
const MAX_THREADS: usize = u16::MAX as usize;

/// One [`ProcessSharing`] per process that has memory samples, in pid order. `program` names a
/// process whose COMM record is missing. `line_size` is a power of two from 8 to 128.
pub fn to_sharing(mem: &PerfMem, line_size: u32, program: &str) -> Vec<ProcessSharing> {
    assert!(
        line_size.is_power_of_two() && (8..=trace::sharing::MAX_LINE_SIZE).contains(&line_size),
        "line size {line_size}"
    );
    let mut by_pid: BTreeMap<u32, Vec<&MemSample>> = BTreeMap::new();
    for s in &mem.samples {
        by_pid.entry(s.pid).or_default().push(s);
    }
    by_pid
        .into_iter()
        .map(|(pid, mut samples)| {
            samples.sort_by_key(|s| s.time_ns);
            process(mem, pid, &samples, line_size, program)
        })
        .collect()
}

fn process(
    mem: &PerfMem,
    pid: u32,
    samples: &[&MemSample],
    line_size: u32,
    program: &str,
) -> ProcessSharing {
    let mut threads: Vec<ThreadInfo> = Vec::new();
    let mut index_of: BTreeMap<u32, u16> = BTreeMap::new();
    let first_ns = samples.first().map_or(0, |s| s.time_ns);
    if samples.iter().any(|s| s.tid == pid) {
        index_of.insert(pid, 0);
        threads.push(ThreadInfo {
            index: 0,
            tid: pid,
            created_by: None,
            start_routine: None,
            first_ns: samples
                .iter()
                .find(|s| s.tid == pid)
                .map_or(first_ns, |s| s.time_ns),
        });
    }
    let mut totals = Totals::default();
    let mut summary = PmuSummary {
        events: mem.events.clone(),
        without_address: mem.without_address,
        other_samples: mem.other_samples,
        lost: mem.lost,
        malformed: mem.malformed,
        ..Default::default()
    };
    let mut lines: BTreeMap<u64, LineAcc> = BTreeMap::new();
    let mask = !(u64::from(line_size) - 1);
    for s in samples {
        let thread = match index_of.get(&s.tid) {
            Some(&i) => i,
            None if threads.len() < MAX_THREADS => {
                let next = threads.len() as u16;
                threads.push(ThreadInfo {
                    index: next,
                    tid: s.tid,
                    created_by: None,
                    start_routine: None,
                    first_ns: s.time_ns,
                });
                index_of.insert(s.tid, next);
                next
            }
            // Past 65535 threads (a long run with thread churn): the rest share the last
            // index, and are counted.
            None => {
                summary.threads_folded += 1;
                index_of.insert(s.tid, (MAX_THREADS - 1) as u16);
                (MAX_THREADS - 1) as u16
            }
        };
        let kind = kind_of(s);
        let transfer = s.source.transfer();
        summary.samples += 1;
        match s.source.op() {
            MemOp::Store => summary.store_samples += 1,
            _ => summary.load_samples += 1,
        }
        match transfer {
            Transfer::LocalHitm => summary.hitm_local += 1,
            Transfer::RemoteHitm => summary.hitm_remote += 1,
            Transfer::LocalPeer | Transfer::RemotePeer => summary.peer += 1,
            Transfer::None => {}
        }
        if kind.is_write() {
            totals.writes = totals.writes.saturating_add(s.period);
        } else {
            totals.reads = totals.reads.saturating_add(s.period);
        }
        if kind.is_atomic() {
            totals.atomics = totals.atomics.saturating_add(s.period);
        }
        if transfer.is_transfer() {
            totals.transfers = totals.transfers.saturating_add(s.period);
        }
        let line = lines.entry(s.addr & mask).or_insert_with(|| LineAcc {
            first_ns: s.time_ns,
            ..Default::default()
        });
        line.last_ns = s.time_ns;
        let offset = (s.addr & !mask) as u8;
        let (stat, cpus) = line
            .accesses
            .entry((offset, kind, thread, s.ip))
            .or_insert_with(|| {
                (
                    AccessStat {
                        offset,
                        size: 1,
                        kind,
                        thread,
                        pc: s.ip,
                        count: 0,
                        transfers: 0,
                        cpus: Vec::new(),
                        pmu: Some(PmuAccess::default()),
                    },
                    BTreeSet::new(),
                )
            });
        stat.count = stat.count.saturating_add(s.period);
        let pmu = stat.pmu.get_or_insert_with(PmuAccess::default);
        pmu.samples += 1;
        match transfer {
            Transfer::LocalHitm => pmu.hitm_local += 1,
            Transfer::RemoteHitm => pmu.hitm_remote += 1,
            Transfer::LocalPeer | Transfer::RemotePeer => pmu.peer += 1,
            Transfer::None => {}
        }
        if transfer.is_transfer() {
            stat.transfers = stat.transfers.saturating_add(s.period);
        }
        if let (Some(w), MemOp::Load) = (s.weight, s.source.op()) {
            pmu.latency_cycles = pmu.latency_cycles.saturating_add(w);
            pmu.latency_samples += 1;
            pmu.latency_max = pmu.latency_max.max(w);
        }
        if let Some(c) = s.cpu {
            cpus.insert(c);
        }
    }
    // Sums of periods and weights saturate: a hostile file's periods cannot overflow them.
    let mut hot = Vec::new();
    for (address, acc) in lines {
        let stats: Vec<AccessStat> = acc
            .accesses
            .into_values()
            .map(|(mut a, cpus)| {
                a.cpus = cpus.into_iter().collect();
                a
            })
            .collect();
        let transfers = stats
            .iter()
            .fold(0u64, |t, a| t.saturating_add(a.transfers));
        let threads_here: BTreeSet<u16> = stats.iter().map(|a| a.thread).collect();
        let writers: BTreeSet<u16> = stats
            .iter()
            .filter(|a| a.kind.is_write())
            .map(|a| a.thread)
            .collect();
        let shared_write = !writers.is_empty() && threads_here.len() > 1;
        if transfers == 0 && !shared_write {
            continue;
        }
        hot.push(HotLine {
            id: hot.len() as u32 + 1,
            address,
            hot_since_ns: acc.first_ns,
            ended_ns: acc.last_ns,
            end: LineEnd::Exit,
            transfers_before_hot: 0,
            objects: Vec::new(),
            accesses: stats,
            history: None,
        });
    }
    totals.hot_lines = hot.len() as u64;
    ProcessSharing {
        version: SHARING_VERSION,
        pid,
        parent_pid: mem.parents.get(&pid).copied(),
        program: mem
            .commands
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| program.to_string()),
        line_size,
        hot_after: 0,
        sample_every: 1,
        started_ns: first_ns,
        ended_ns: samples.last().map_or(0, |s| s.time_ns),
        threads,
        totals,
        lines: hot,
        pmu: Some(summary),
    }
}
