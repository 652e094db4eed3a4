//! The waits section (issue 22): the off-CPU streams (`offcpu-PID`) through `analysis::waits`,
//! ended by the sched tracepoints' state changes, the probe's waits taking the futex waits
//! they cover, and each futex word named as the global it lies in.

use crate::Notice;
use analysis::waits::{BlockIn, ProbeWait, ThreadBlocks, WaitReport};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use trace::{EventKind, Stream};

/// The waits of a run and the names of their futex words.
#[derive(Debug)]
pub struct Waits {
    pub report: WaitReport,
    /// (pid, futex word) -> the global it lies in (`HOT`, `queue+0x8`).
    pub names: HashMap<(u32, u64), String>,
    /// Thread names, by tid (from the sampler's or the probe's streams).
    pub thread_names: HashMap<u32, String>,
    /// The blocks' ends came from the sched tracepoints (else no wait has a length).
    pub ends_traced: bool,
}

/// The off-CPU streams of a run.
fn offcpu_streams<'s, 'a>(
    meta: &'s trace::Meta,
    streams: &'s [(String, Stream<'a>)],
) -> impl Iterator<Item = &'s (String, Stream<'a>)> {
    let index = meta.stream_index();
    streams
        .iter()
        .filter(move |(file, _)| index.role(file) == trace::layout::StreamRole::OffCpu)
}

/// The waits of `streams` (every stream of the run, parsed once), or `None` when the run holds
/// no off-CPU stream and did not capture them.
pub(crate) fn waits(
    run_dir: &Path,
    meta: &trace::Meta,
    streams: &[(String, Stream<'_>)],
    states: Option<&[(u32, Vec<trace::sched::StateChange>)]>,
    notices: &mut Vec<Notice>,
) -> Result<Option<Waits>, crate::Error> {
    let mut threads: Vec<ThreadBlocks> = Vec::new();
    let mut index: HashMap<(u32, u32), usize> = HashMap::new();
    let mut unpaired = 0;
    for (_, s) in offcpu_streams(meta, streams) {
        let (blocks, bad) = trace::offcpu::blocks(s.events(), s.header.tid);
        unpaired += bad;
        // A process's stream holds its threads' blocks, each thread's in time order; a process
        // whose stream the recorder closed and reopened (`offcpu-PID.2.cst`) is one process:
        // its threads' blocks are merged, so each block ends before the thread's next.
        let pid = s.header.pid;
        for b in blocks {
            let block = BlockIn {
                ts: b.block.ts,
                reason: s.string(b.block.reason).map(String::from),
                futex: b.block.futex,
                stack: analysis::waits::StackIn::NotRecorded,
            };
            let i = *index.entry((pid, b.tid)).or_insert_with(|| {
                threads.push(ThreadBlocks {
                    pid,
                    tid: b.tid,
                    blocks: Vec::new(),
                });
                threads.len() - 1
            });
            threads[i].blocks.push(block);
        }
    }
    if threads.is_empty() && !meta.has(trace::Captured::OffCpu) {
        return Ok(None);
    }
    if unpaired > 0 {
        notices.push(Notice(format!(
            "off-CPU streams: {unpaired} records did not pair as the format says (a stream cut short?); those blocks are kept without their futex address"
        )));
    }
    let ends_traced = states.is_some_and(|s| !s.is_empty());
    if !ends_traced && !threads.is_empty() {
        notices.push(Notice("futex waits: the sched tracepoints did not record the threads' switches in (sampling off, or the tracepoints unavailable): the waits are counted but have no length".into()));
    }
    let (probe, blocks) = probe_waits(meta, streams);
    let report = analysis::waits::waits(&threads, states.unwrap_or(&[]), &probe);
    let homes = heap_homes(&threads, blocks);
    let names = name_words(run_dir, &report, &homes, notices)?;
    let index = meta.stream_index();
    let thread_names = meta
        .streams
        .iter()
        .filter(|s| !s.name.is_empty())
        .map(|s| (s.tid, index.name(&s.file).to_string()))
        .collect();
    Ok(Some(Waits {
        report,
        names,
        thread_names,
        ends_traced,
    }))
}

/// The probe's lock, condition and barrier waits, per thread, in CLOCK_MONOTONIC ns, with the
/// object they were on; and the heap blocks it recorded (`--alloc-sites`), with their call
/// sites' addresses.
fn probe_waits(
    meta: &trace::Meta,
    streams: &[(String, Stream<'_>)],
) -> (Vec<ProbeWait>, Vec<analysis::allocs::Block>) {
    let clock = analysis::clock::Conversion::from_meta(&meta.clock);
    let mut out = Vec::new();
    let mut blocks = Vec::new();
    for (_, l) in crate::locks::lock_streams(meta, streams) {
        let s = l.stream;
        let tid = s.header.tid;
        // The open wait of each kind: (start, object id).
        let mut open: HashMap<u8, (u64, u32)> = HashMap::new();
        let mut previous: Option<trace::Record> = None;
        for r in s.events() {
            if let Some(a) = previous
                .as_ref()
                .and_then(|p| trace::alloc::Alloc::decode(p, &r))
            {
                blocks.push(analysis::allocs::Block {
                    pid: s.header.pid,
                    ts_ns: clock.ns(a.ts),
                    site: s.site_address(a.site),
                    address: a.address,
                    size: u64::from(a.size),
                });
            }
            previous = Some(r);
            let (begin, end) = match r.kind {
                EventKind::LockWait | EventKind::CondWait | EventKind::BarrierWait => (true, false),
                EventKind::LockAcquired
                | EventKind::LockFailed
                | EventKind::CondWoken
                | EventKind::BarrierDone => (false, true),
                _ => continue,
            };
            let class = match r.kind {
                EventKind::LockWait | EventKind::LockAcquired | EventKind::LockFailed => 0,
                EventKind::CondWait | EventKind::CondWoken => 1,
                _ => 2,
            };
            if begin {
                open.insert(class, (r.ts, r.obj));
            } else if end {
                if let Some((start, obj)) = open.remove(&class) {
                    if let Some((kind, addr)) = s.object(obj) {
                        out.push(ProbeWait {
                            tid,
                            start: clock.ns(start),
                            end: clock.ns(r.ts),
                            obj: addr,
                            size: analysis::waits::pthread_object_size(kind),
                        });
                    }
                }
            }
        }
    }
    (out, blocks)
}

/// The heap block each futex word lives in: the latest recorded allocation covering it made
/// before the word's first futex wait (`analysis::allocs`' rule for locks).
fn heap_homes(
    threads: &[ThreadBlocks],
    blocks: Vec<analysis::allocs::Block>,
) -> HashMap<analysis::locks::LockKey, analysis::allocs::Home> {
    if blocks.is_empty() {
        return HashMap::new();
    }
    let mut first: HashMap<analysis::locks::LockKey, u64> = HashMap::new();
    for t in threads {
        for b in &t.blocks {
            if let Some(f) = b.futex {
                let key = analysis::locks::LockKey {
                    pid: t.pid,
                    address: f.uaddr,
                };
                let v = first.entry(key).or_insert(b.ts);
                *v = (*v).min(b.ts);
            }
        }
    }
    analysis::allocs::homes_of(blocks, first)
}

/// Names of the futex words: the global each lies in, from the memory maps the probe saved.
fn name_words(
    run_dir: &Path,
    r: &WaitReport,
    homes: &HashMap<analysis::locks::LockKey, analysis::allocs::Home>,
    notices: &mut Vec<Notice>,
) -> Result<HashMap<(u32, u64), String>, crate::Error> {
    let mut names = HashMap::new();
    if r.addresses.is_empty() {
        return Ok(names);
    }
    let mut snapshots: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(run_dir.join(trace::layout::MAPS_DIR)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_suffix(".maps")
                .and_then(|stem| stem.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            {
                snapshots
                    .entry(pid)
                    .or_default()
                    .push(format!("{}/{name}", trace::layout::MAPS_DIR));
            }
        }
    }
    let recorded_at = std::fs::metadata(run_dir.join(trace::rundir::META_FILE))
        .and_then(|m| m.modified())
        .ok();
    let mut unnamed_pids = Vec::new();
    for pid in r
        .addresses
        .iter()
        .map(|a| a.pid)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let Some(mut files) = snapshots.remove(&pid) else {
            unnamed_pids.push(pid);
            continue;
        };
        files.sort();
        let mut maps = symbolize::Maps::new();
        for f in &files {
            if let Some(m) = crate::names::read_maps(run_dir, f)? {
                maps.merge(&m);
            }
        }
        let mut sym = symbolize::Symbolizer::with_options(
            maps,
            symbolize::SymbolizerOptions {
                recorded_at,
                ..Default::default()
            },
        );
        for a in r.addresses.iter().filter(|a| a.pid == pid) {
            let key = analysis::locks::LockKey {
                pid,
                address: a.uaddr,
            };
            if let Some(d) = sym.resolve_data(a.uaddr) {
                names.insert((pid, a.uaddr), d.to_string());
            } else if let Some(home) = homes.get(&key) {
                let site_name = match home.block.site {
                    Some(s) => crate::names::site_name(&sym.resolve_call_site(s)),
                    None => "an unknown call site".to_string(),
                };
                let allocation = report::locks::Allocation {
                    site: home.block.site,
                    site_name,
                    block_address: home.block.address,
                    size: home.block.size,
                    offset: home.offset,
                };
                names.insert((pid, a.uaddr), allocation.describe());
            }
        }
    }
    if !unnamed_pids.is_empty() {
        notices.push(Notice(format!(
            "futex waits: no memory map of process(es) {unnamed_pids:?} was saved (the lock probe did not load there): their futex words are shown by address"
        )));
    }
    Ok(names)
}
