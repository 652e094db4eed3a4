//! The waits section (issue 22): the off-CPU streams (`offcpu-PID`) through `analysis::waits`,
//! ended by the sched tracepoints' state changes, the probe's waits taking the futex waits
//! they cover, and each futex word named as the global it lies in.
//!
//! Stacks (slice 2): each off-CPU stream's stack file (`stacks/offcpu-PID.ustk`) is read
//! (bounded, regular file in the run), each distinct stack of a process unwound once
//! (`symbolize::unwind`, the process's saved memory maps), its frames named with the
//! symbolizer (inlined frames expanded) and classified (`analysis::waits::classify`); the
//! analysis gets plain [`WaitStack`]s. A stack that does not unwind past its first frame is
//! kept, as `[unknown]`, and counted.
//!
//! Blame (slice 3): the streams' wakings, their wakers' stacks named the same way (in the same
//! list of distinct stacks), go to `analysis::waits::waits_and_blame`, which pairs each wait
//! with what ended it.

mod runtime;

use crate::Notice;
use analysis::waits::{BlockIn, ProbeWait, StackIn, ThreadBlocks, WaitReport, WaitStack, WakingIn};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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
    /// The run recorded stacks (some block has a stack record).
    pub stacks_recorded: bool,
    /// The distinct stacks the report's `stack_waits` index.
    pub stacks: Vec<WaitStack>,
}

/// Frames kept per unwound stack.
const MAX_FRAMES: usize = 128;

/// The symbolizers of a run's processes, built on first use from their saved memory maps.
struct Symbolizers {
    snapshots: BTreeMap<u32, Vec<String>>,
    built: HashMap<u32, Option<symbolize::Symbolizer>>,
    recorded_at: Option<std::time::SystemTime>,
}

impl Symbolizers {
    fn new(run_dir: &Path) -> Symbolizers {
        let snapshots = crate::locks::maps_snapshots(run_dir);
        let recorded_at = std::fs::metadata(run_dir.join(trace::rundir::META_FILE))
            .and_then(|m| m.modified())
            .ok();
        Symbolizers {
            snapshots,
            built: HashMap::new(),
            recorded_at,
        }
    }

    /// Process `pid`'s symbolizer, or `None` when no memory map of it was saved.
    fn of(
        &mut self,
        run_dir: &Path,
        pid: u32,
    ) -> Result<Option<&mut symbolize::Symbolizer>, crate::Error> {
        if !self.built.contains_key(&pid) {
            let sym = match self.snapshots.get(&pid) {
                None => None,
                Some(files) => {
                    let mut files = files.clone();
                    files.sort();
                    let mut maps = symbolize::Maps::new();
                    for f in &files {
                        if let Some(m) = crate::names::read_maps(run_dir, f)? {
                            maps.merge(&m);
                        }
                    }
                    Some(symbolize::Symbolizer::with_options(
                        maps,
                        symbolize::SymbolizerOptions {
                            recorded_at: self.recorded_at,
                            ..Default::default()
                        },
                    ))
                }
            };
            self.built.insert(pid, sym);
        }
        Ok(self.built.get_mut(&pid).and_then(Option::as_mut))
    }
}

/// Unwinds, names and classifies the stacks of a run, each distinct one once.
struct StackNamer {
    stacks: Vec<WaitStack>,
    /// (pid, registers, hash and length of the bytes) → index in `stacks`.
    seen: HashMap<(u32, trace::ustack::Regs, u64, usize), u32>,
    /// (pid, the walk's addresses) → index in `stacks`: stacks whose bytes differ (locals,
    /// saved registers) mostly walk to the same frames, which are named once.
    walks: HashMap<(u32, Vec<u64>), u32>,
    unwinders: HashMap<u32, symbolize::unwind::StackUnwinder>,
    truncated: u64,
    /// Distinct stacks whose walk stopped past their first frame at code it could not walk
    /// through (the vDSO, JIT code, a module without call frame information or changed).
    stopped: u64,
    no_maps: BTreeSet<u32>,
    /// JIT frames' names, from the run's perf maps.
    jit: runtime::PerfMaps,
}

impl StackNamer {
    fn index(
        &mut self,
        run_dir: &Path,
        syms: &mut Symbolizers,
        pid: u32,
        e: &trace::ustack::StackEntry<'_>,
    ) -> Result<u32, crate::Error> {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        e.stack.hash(&mut h);
        let key = (pid, e.regs, h.finish(), e.stack.len());
        if let Some(&i) = self.seen.get(&key) {
            return Ok(i);
        }
        let stack = match syms.of(run_dir, pid)? {
            None => {
                self.no_maps.insert(pid);
                WaitStack {
                    kind: analysis::waits::WaitKind::Unknown,
                    site: None,
                    frames: vec![unknown_frame(e.regs.ip)],
                    unknown: true,
                }
            }
            Some(sym) => {
                let unwinder = self.unwinders.entry(pid).or_default();
                let walked = unwinder.unwind(sym, &e.regs, e.stack, MAX_FRAMES);
                match walked.end {
                    symbolize::unwind::UnwindEnd::Truncated => self.truncated += 1,
                    symbolize::unwind::UnwindEnd::NoModule
                    | symbolize::unwind::UnwindEnd::Failed(_)
                        if !walked.is_unknown() =>
                    {
                        self.stopped += 1
                    }
                    _ => {}
                }
                let walk_key = (pid, walked.frames.clone());
                if let Some(&i) = self.walks.get(&walk_key) {
                    self.seen.insert(key, i);
                    return Ok(i);
                }
                let mut named = name_stack(sym, &walked);
                self.jit.name(run_dir, pid, &mut named);
                self.walks.insert(walk_key, self.stacks.len() as u32);
                named
            }
        };
        let i = self.stacks.len() as u32;
        self.stacks.push(stack);
        self.seen.insert(key, i);
        Ok(i)
    }
}

/// The frame that stands for what a stack's walk could not reach.
fn unknown_frame(address: u64) -> analysis::waits::WaitFrame {
    analysis::waits::WaitFrame {
        function: "[unknown]".into(),
        address,
        ..Default::default()
    }
}

/// contend's own lock probe (LD_PRELOAD), which interposes the pthread calls: its frames sit
/// between the program's call and the C library's, and are never the program's site.
fn is_probe_module(module: Option<&str>) -> bool {
    module.is_some_and(|m| {
        m.rsplit('/')
            .next()
            .is_some_and(|f| f.starts_with("libcontend_probe"))
    })
}

/// The frames of a walked stack named (inlined frames expanded, innermost first), its kind,
/// and the program's frame that waited.
fn name_stack(sym: &mut symbolize::Symbolizer, walked: &symbolize::unwind::Unwound) -> WaitStack {
    let mut names: Vec<String> = Vec::new();
    let mut frames: Vec<analysis::waits::WaitFrame> = Vec::new();
    let mut site = None;
    for (i, &a) in walked.frames.iter().enumerate() {
        let f = if i == 0 {
            sym.resolve_code(a)
        } else {
            sym.resolve_call_site(a)
        };
        let module = f.module_name();
        let mut expanded = vec![(f.function.clone(), f.file.clone(), f.line)];
        expanded.extend(
            f.inlined
                .iter()
                .map(|c| (c.function.clone(), c.file.clone(), c.line)),
        );
        for (function, file, line) in expanded {
            let location = match (&file, line) {
                (Some(file), Some(line)) => {
                    Some(format!("{}:{line}", crate::names::base_name(file)))
                }
                _ => None,
            };
            let label = match (&function, &location) {
                (Some(func), Some(loc)) => format!("{func} ({loc})"),
                (Some(func), None) => func.clone(),
                _ => f.to_string(),
            };
            if site.is_none()
                && i > 0
                && !analysis::waits::is_runtime_frame(function.as_deref(), module.as_deref())
                && !is_probe_module(module.as_deref())
                && (function.is_some() || location.is_some())
            {
                site = Some(label.clone());
            }
            let function = function.unwrap_or_else(|| f.to_string());
            names.push(function.clone());
            frames.push(analysis::waits::WaitFrame {
                function,
                file,
                line,
                module: f.module.as_ref().map(|m| m.to_string_lossy().into_owned()),
                address: a,
            });
        }
    }
    let unknown = walked.is_unknown();
    if unknown {
        frames.push(unknown_frame(0));
    }
    WaitStack {
        kind: analysis::waits::classify(names.iter().map(String::as_str)),
        site,
        frames,
        unknown,
    }
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
    let mut wakings: Vec<WakingIn> = Vec::new();
    let mut index: HashMap<(u32, u32), usize> = HashMap::new();
    let mut unpaired = 0;
    let mut syms = Symbolizers::new(run_dir);
    let mut namer = StackNamer {
        stacks: Vec::new(),
        seen: HashMap::new(),
        walks: HashMap::new(),
        unwinders: HashMap::new(),
        truncated: 0,
        stopped: 0,
        no_maps: BTreeSet::new(),
        jit: runtime::PerfMaps::default(),
    };
    let mut stacks_recorded = false;
    let (mut missing_entries, mut bad_entries) = (0u64, 0u64);
    let mut unreadable: Vec<String> = Vec::new();
    for (file, s) in offcpu_streams(meta, streams) {
        let decoded = trace::offcpu::decode(s.events(), s.header.tid);
        let (blocks, stream_wakings) = (decoded.blocks, decoded.wakings);
        unpaired += decoded.unpaired;
        // The stream's stack file, read only when a block or waking names an entry in it.
        let is_entry = |st: Option<trace::offcpu::BlockStack>| {
            matches!(st, Some(trace::offcpu::BlockStack::Entry(_)))
        };
        let wants_file = blocks.iter().any(|b| is_entry(b.block.stack))
            || stream_wakings.iter().any(|w| is_entry(w.waking.stack));
        stacks_recorded |= blocks.iter().any(|b| b.block.stack.is_some());
        let bytes = match trace::ustack::sidecar_of(file) {
            Some(rel) if wants_file => {
                match trace::files::read_in_run(
                    run_dir,
                    Path::new(&rel),
                    &trace::files::USER_STACKS,
                ) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        unreadable.push(e.to_string());
                        None
                    }
                }
            }
            _ => None,
        };
        let stack_file = match bytes.as_deref().map(trace::ustack::StackFile::parse) {
            Some(Ok(f)) => Some(f),
            Some(Err(e)) => {
                unreadable.push(format!(
                    "{}: {e}",
                    trace::ustack::sidecar_of(file).unwrap_or_default()
                ));
                None
            }
            None => None,
        };
        bad_entries += stack_file.as_ref().map_or(0, |f| f.bad_entries);
        // A process's stream holds its threads' blocks, each thread's in time order; a process
        // whose stream the recorder closed and reopened (`offcpu-PID.2.cst`) is one process:
        // its threads' blocks are merged, so each block ends before the thread's next.
        let pid = s.header.pid;
        for w in stream_wakings {
            let stack = match w.waking.stack {
                None => StackIn::NotRecorded,
                Some(trace::offcpu::BlockStack::Missing(_)) => StackIn::Missing,
                Some(trace::offcpu::BlockStack::Entry(i)) => {
                    match stack_file.as_ref().and_then(|f| f.entries.get(&i)) {
                        Some(e) => StackIn::At(namer.index(run_dir, &mut syms, pid, e)?),
                        None => {
                            missing_entries += 1;
                            StackIn::Missing
                        }
                    }
                }
            };
            wakings.push(WakingIn {
                pid,
                tid: w.tid,
                ts: w.waking.ts,
                woken: w.waking.woken,
                how: w.waking.how,
                futex: w.waking.futex,
                stack,
            });
        }
        for b in blocks {
            let stack = match b.block.stack {
                None => StackIn::NotRecorded,
                Some(trace::offcpu::BlockStack::Missing(_)) => StackIn::Missing,
                // Only futex and kernel-lock waits are unwound: the others are shown by reason.
                Some(trace::offcpu::BlockStack::Entry(_))
                    if b.block.futex.is_none()
                        && !s
                            .string(b.block.reason)
                            .is_some_and(|r| r.starts_with(trace::kernel_lock::PREFIX)) =>
                {
                    StackIn::Missing
                }
                Some(trace::offcpu::BlockStack::Entry(i)) => {
                    match stack_file.as_ref().and_then(|f| f.entries.get(&i)) {
                        Some(e) => StackIn::At(namer.index(run_dir, &mut syms, pid, e)?),
                        None => {
                            missing_entries += 1;
                            StackIn::Missing
                        }
                    }
                }
            };
            let block = BlockIn {
                ts: b.block.ts,
                reason: s.string(b.block.reason).map(String::from),
                futex: b.block.futex,
                stack,
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
    if !unreadable.is_empty() {
        notices.push(Notice(format!(
            "user stacks: {} stack file(s) could not be read, their waits are shown without stacks: {}",
            unreadable.len(),
            unreadable.join("; ")
        )));
    }
    if missing_entries + bad_entries > 0 {
        notices.push(Notice(format!(
            "user stacks: {bad_entries} damaged entr(ies) in the stack files, {missing_entries} block(s) naming a stack that is not there (a stack file cut short?): those waits are shown without stacks"
        )));
    }
    if !namer.no_maps.is_empty() {
        notices.push(Notice(format!(
            "user stacks: no memory map of process(es) {:?} was saved: their stacks are [unknown]",
            namer.no_maps
        )));
    }
    if namer.truncated > 0 {
        notices.push(Notice(format!(
            "user stacks: {} distinct stack(s) were deeper than the 8 KiB copied: their outer frames are missing",
            namer.truncated
        )));
    }
    if namer.stopped > 0 {
        notices.push(Notice(format!(
            "user stacks: {} distinct stack(s) stopped at code the unwinder could not walk through (the vDSO, JIT code, a module without call frame information or changed since the run): their outer frames are missing",
            namer.stopped
        )));
    }
    for why in &namer.jit.unreadable {
        notices.push(Notice(format!(
            "JIT frames: {why}: they are shown by address"
        )));
    }
    let (probe, blocks) = probe_waits(meta, streams, &threads);
    let mut report = analysis::waits::waits_and_blame(
        &threads,
        &wakings,
        states.unwrap_or(&[]),
        &probe,
        &namer.stacks,
    );
    // A run that recorded wakes, none of them by the program, still recorded them: its waits
    // were all ended by others.
    report.wakes_recorded |= meta.offcpu.as_ref().is_some_and(|o| o.wakings.is_some());
    if report.unknown_stacks > 0 {
        notices.push(Notice(format!(
            "user stacks: {} futex wait(s) have a stack that did not unwind past its first frame (code without call frame information, the vDSO, or a module changed since the run): shown as [unknown]",
            report.unknown_stacks
        )));
    }
    let homes = heap_homes(&threads, blocks);
    let names = name_words(run_dir, &report, &homes, &mut syms, notices)?;
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
        stacks_recorded,
        stacks: namer.stacks,
    }))
}

/// The probe's lock, condition and barrier waits, per thread, in CLOCK_MONOTONIC ns, with the
/// object they were on; and the heap blocks it recorded (`--alloc-sites`), with their call
/// sites' addresses.
///
/// This is a second pass over the lock streams, so it reads only what it needs: a thread
/// that never blocked on a futex has no wait for the probe to cover, and without
/// `--alloc-sites` there are no allocations to find.
fn probe_waits(
    meta: &trace::Meta,
    streams: &[(String, Stream<'_>)],
    threads: &[ThreadBlocks],
) -> (Vec<ProbeWait>, Vec<analysis::allocs::Block>) {
    let clock = analysis::clock::Conversion::from_meta(&meta.clock);
    let allocs = meta.captured.contains(&trace::layout::Captured::AllocSites);
    let blocked: std::collections::HashSet<u32> = threads
        .iter()
        .filter(|t| t.blocks.iter().any(|b| b.futex.is_some()))
        .map(|t| t.tid)
        .collect();
    let mut out = Vec::new();
    let mut blocks = Vec::new();
    for (_, l) in crate::locks::lock_streams(meta, streams) {
        let s = l.stream;
        let tid = s.header.tid;
        if !allocs && !blocked.contains(&tid) {
            continue;
        }
        // The open wait of each class (lock, condition, barrier): (start, object id).
        let mut open: [Option<(u64, u32)>; 3] = [None; 3];
        let mut previous: Option<trace::Record> = None;
        for r in s.events() {
            if let Some(a) = previous
                .as_ref()
                .filter(|_| allocs)
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
                open[class] = Some((r.ts, r.obj));
            } else if end {
                if let Some((start, obj)) = open[class].take() {
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

/// Names of the futex words: the global each lies in, from the memory maps the recorders
/// saved, else the heap block it lies in.
fn name_words(
    run_dir: &Path,
    r: &WaitReport,
    homes: &HashMap<analysis::locks::LockKey, analysis::allocs::Home>,
    syms: &mut Symbolizers,
    notices: &mut Vec<Notice>,
) -> Result<HashMap<(u32, u64), String>, crate::Error> {
    let mut names = HashMap::new();
    if r.addresses.is_empty() {
        return Ok(names);
    }
    let mut unnamed_pids = Vec::new();
    for pid in r
        .addresses
        .iter()
        .map(|a| a.pid)
        .collect::<std::collections::BTreeSet<_>>()
    {
        let Some(sym) = syms.of(run_dir, pid)? else {
            unnamed_pids.push(pid);
            continue;
        };
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
