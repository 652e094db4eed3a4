//! The locks section: the lock probe's streams through `analysis::locks`, sorted, with every
//! lock and call site named from the memory maps the probe saved (`maps/PID-*.maps`).
//!
//! [`lock_report`] is the only glue between the streams and the analysis.

use crate::names::{profile_frames, site_name, CallSite};
use crate::Notice;
use analysis::locks::{HoldId, LockStream};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use trace::Stream;

/// The lock analysis of a run and the names of what it shows.
pub struct Locks {
    pub report: analysis::locks::LockReport,
    /// Labels for the renderers: sites `function (file:line)`, locks `hot_lock` or their
    /// heap block.
    pub naming: report::locks::Naming,
    /// Each named call site's function and `file:line`, for JSON.
    pub sites: HashMap<u64, CallSite>,
    /// Each contended hold with the hold it waited for (owner, waiter), and the critical
    /// path's holds (sorted), by hold id: what a timeline written from the streams draws.
    pub wakeups: Vec<(HoldId, HoldId)>,
    pub path: Vec<HoldId>,
    /// The lock streams the analysis read (relative to the run directory), in its order.
    pub files: Vec<String>,
    /// Where the probe was loaded, and what it could not measure.
    pub coverage: report::locks::Coverage,
}

/// The lock probe's streams of a run (not the sampler's or the MPI wrapper's, which carry no
/// lock events and count another clock), with their threads' names.
pub(crate) fn lock_streams<'s, 'a>(
    meta: &'s trace::Meta,
    streams: &'s [(String, Stream<'a>)],
) -> Vec<(&'s str, LockStream<'s, 'a>)> {
    let index = meta.stream_index();
    streams
        .iter()
        .filter(|(file, _)| index.role(file) == trace::layout::StreamRole::Lock)
        .map(|(file, stream)| {
            (
                file.as_str(),
                LockStream {
                    stream,
                    name: index.name(file),
                },
            )
        })
        .collect()
}

/// The lock analysis of the run's lock streams (`streams`: every stream of the run, parsed
/// once by the loader), aggregated as the streams are read (`analysis::locks::analyze_streams`:
/// uncontended acquisitions are summed, never kept), and names for its addresses.
pub(crate) fn lock_report(
    run_dir: &Path,
    meta: &trace::Meta,
    streams: &[(String, Stream<'_>)],
    options: &crate::Options,
    notices: &mut Vec<Notice>,
) -> Result<Locks, crate::Error> {
    let (files, lock_streams): (Vec<&str>, Vec<LockStream>) =
        lock_streams(meta, streams).into_iter().unzip();
    let streamed = analysis::locks::analyze_streams(
        &lock_streams,
        &analysis::locks::StreamOptions {
            clock: analysis::clock::Conversion::from_meta(&meta.clock),
            span: meta.monotonic_span.map(|[a, b]| (a, b)),
            sample_every: meta.lock_sample_every.unwrap_or(1),
            filter: &options.lock_filter,
        },
    );
    let mut r = streamed.report;
    report::locks::sort_locks(&mut r.locks, options.lock_sort);
    let (naming, sites) = name_addresses(run_dir, &r, &streamed.homes, notices)?;
    Ok(Locks {
        report: r,
        naming,
        sites,
        wakeups: streamed.wakeups,
        path: streamed.path,
        files: files.into_iter().map(String::from).collect(),
        coverage: report::locks::Coverage::of(meta),
    })
}

/// Names for the report's call sites and locks, from the memory maps the probe saved in the
/// run directory's `maps/` (one symboliser per process). Problems are notices, not errors.
fn name_addresses(
    run_dir: &Path,
    r: &analysis::locks::LockReport,
    homes: &HashMap<analysis::locks::LockKey, analysis::allocs::Home>,
    notices: &mut Vec<Notice>,
) -> Result<(report::locks::Naming, HashMap<u64, CallSite>), crate::Error> {
    let mut naming = report::locks::Naming::default();
    let mut sites: HashMap<u64, CallSite> = HashMap::new();
    let snapshots = maps_snapshots(run_dir);
    let recorded_at = std::fs::metadata(run_dir.join(trace::rundir::META_FILE))
        .and_then(|m| m.modified())
        .ok();
    for (pid, mut files) in snapshots {
        files.sort();
        let mut maps = symbolize::Maps::new();
        for f in &files {
            if let Some(m) = crate::names::read_maps(run_dir, f)? {
                maps.merge(&m);
            }
        }
        let options = symbolize::SymbolizerOptions {
            recorded_at,
            ..Default::default()
        };
        let mut sym = symbolize::Symbolizer::with_options(maps, options);
        let lock_sites = r
            .locks
            .iter()
            .filter(|l| l.lock.pid == pid)
            .flat_map(|l| l.sites.iter().filter_map(|s| s.site));
        let cond_sites = r
            .conds
            .iter()
            .filter(|c| c.pid == pid)
            .flat_map(|c| c.sites.iter().copied());
        for s in lock_sites.chain(cond_sites) {
            if let std::collections::hash_map::Entry::Vacant(slot) = naming.sites.entry(s) {
                let frame = sym.resolve_call_site(s);
                let site = CallSite::of(&frame);
                slot.insert(site.label.clone());
                sites.insert(s, site);
                naming.frames.insert(s, profile_frames(&frame));
            }
        }
        for l in r.locks.iter().filter(|l| l.lock.pid == pid) {
            if let Some(d) = sym.resolve_data(l.lock.address) {
                naming.locks.insert(l.lock, d.to_string());
            } else if let Some(home) = homes.get(&l.lock) {
                let site_name = match home.block.site {
                    Some(s) => site_name(&sym.resolve_call_site(s)),
                    None => "an unknown call site".to_string(),
                };
                let allocation = report::locks::Allocation {
                    site: home.block.site,
                    site_name,
                    block_address: home.block.address,
                    size: home.block.size,
                    offset: home.offset,
                };
                naming.locks.insert(l.lock, allocation.describe());
                naming.allocations.insert(l.lock, allocation);
            }
        }
        for note in sym.notes() {
            notices.push(Notice(format!(
                "symbols: {}: {}",
                note.module.display(),
                note.message
            )));
        }
    }
    Ok((naming, sites))
}

/// Lock events × replays the what-if may cost: each replay pairs every lock event again and
/// simulates the steps of the shared locks (25 ns per event measured on lock_loop), so this
/// keeps the replays under about half a second of CPU time (half that on two CPUs). Above it the
/// locks shown last are not replayed; when not even the run as recorded and one lock fit, the
/// what-if is skipped, and the report says so (the 56 M-event run of scripts/bench-report.sh
/// is read at the speed it was before the what-if).
pub const WHAT_IF_BUDGET_EVENTS: u64 = 20_000_000;

/// The replayed what-if (`analysis::locks::whatif`) of the first `options.what_if_locks`
/// locks of `locks.report` that had contended acquisitions, stored in `locks.report.what_if`.
/// Needs each thread's CPU time (`activity`, schedstat runs): without it each lock gets the
/// bound, said so. Problems are notices.
pub(crate) fn what_if(
    meta: &trace::Meta,
    streams: &[(String, Stream<'_>)],
    locks: &mut Locks,
    activity: Option<&crate::activity::Activity>,
    options: &crate::Options,
    notices: &mut Vec<Notice>,
) {
    use analysis::locks::whatif::{self, ThreadSchedule, WhatIf, WhatIfs};
    let r = &locks.report;
    let chosen: Vec<analysis::locks::LockKey> = r
        .locks
        .iter()
        .take(options.what_if_locks)
        .filter(|l| l.contended > 0)
        .map(|l| l.lock)
        .collect();
    if chosen.is_empty() {
        return;
    }
    if !r.filter.is_empty() {
        notices.push(Notice(
            "lock what-if: not replayed on a filtered report (the replay needs every hold); run `contend report` without the lock filters for it".into(),
        ));
        return;
    }
    let (cpus, cpus_from) = match (&meta.cpus, &meta.topology) {
        (Some(c), _) if !c.is_empty() => (c.len() as u32, "placement"),
        (_, Some(t)) if !t.topology.online.is_empty() => (t.topology.online.len() as u32, "online"),
        _ => {
            notices.push(Notice(
                "lock what-if: not replayed: meta.json says neither the CPUs the run was confined to nor the CPUs online".into(),
            ));
            return;
        }
    };
    let lock_streams: Vec<LockStream> = lock_streams(meta, streams)
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let events: u64 = lock_streams.iter().map(|s| s.stream.events).sum();
    let dropped: u64 = lock_streams.iter().map(|s| s.stream.dropped).sum();
    if dropped > 0 {
        notices.push(Notice(format!(
            "lock what-if: not replayed: the recorder dropped {dropped} lock events, whose holds would be missing from the schedule; re-record with a larger --ring-kb (or sampled, --locks=sampled:N) to have it"
        )));
        return;
    }
    // The run as recorded first (it says how far to trust the model), then each lock.
    let affordable = (WHAT_IF_BUDGET_EVENTS / events.max(1)).saturating_sub(1) as usize;
    if affordable == 0 {
        notices.push(Notice(format!(
            "lock what-if: not replayed: {events} lock events are more than the replay's budget ({} events); the per-lock column shows the bound only. Record a shorter stretch of the program (fewer iterations, or `record -p PID` for a while) to have it replayed",
            WHAT_IF_BUDGET_EVENTS / 2
        )));
    } else if affordable < chosen.len() {
        notices.push(Notice(format!(
            "lock what-if: replayed for the first {affordable} of the {} contended locks shown ({events} lock events; budget {WHAT_IF_BUDGET_EVENTS} events × replays); the others show the bound only",
            chosen.len()
        )));
    }
    let clock = analysis::clock::Conversion::from_meta(&meta.clock);
    let every = meta.lock_sample_every.unwrap_or(1);
    let start = r.start_ns;
    let services: HashMap<(u32, u32), (u64, u64)> = activity
        .map(|a| {
            a.view
                .threads
                .iter()
                .map(|t| ((t.pid, t.tid), (t.service_ns, t.runq_wait_ns)))
                .collect()
        })
        .unwrap_or_default();
    let mut last_end = start;
    // Per thread: start (after the run's), own time, (CPU time, run-queue wait) if known.
    type Shape = (u64, u64, Option<(u64, u64)>);
    let shapes: Vec<Shape> = lock_streams
        .iter()
        .zip(&r.threads)
        .map(|(s, info)| {
            let first = s.stream.first_ts.map_or(start, |t| clock.ns(t));
            let last = s.stream.last_ts.map_or(first, |t| clock.ns(t)).max(first);
            last_end = last_end.max(last);
            let own = (last - first).saturating_sub(info.wait_ns);
            let cpu = services
                .get(&(s.stream.header.pid, s.stream.header.tid))
                .copied();
            (first.saturating_sub(start), own, cpu)
        })
        .collect();
    // The thread that ended last (the main thread, joining the others) waited for them in a
    // call contend does not trace: its steps end at its last lock event, and what the run did
    // after the other threads ended (the join's return, the exit) is kept as recorded. With
    // one thread, what the run did after it ended.
    let lasts: Vec<u64> = lock_streams
        .iter()
        .zip(&shapes)
        .map(|(s, &(start, ..))| s.stream.last_ts.map_or(start + r.start_ns, |t| clock.ns(t)))
        .collect();
    let joiner = (lasts.len() > 1)
        .then(|| (0..lasts.len()).max_by_key(|&i| (lasts[i], std::cmp::Reverse(i))))
        .flatten();
    let others_last = lasts
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != joiner)
        .map(|(_, &t)| t)
        .max()
        .unwrap_or(last_end);
    let tail = r.end_ns.saturating_sub(others_last);
    let replayed = affordable.min(chosen.len());
    // Without any thread's CPU time a replay could only give the bound: not run.
    let jobs: Vec<Option<analysis::locks::LockKey>> = if affordable == 0 || services.is_empty() {
        Vec::new()
    } else {
        std::iter::once(None)
            .chain(chosen[..replayed].iter().copied().map(Some))
            .collect()
    };
    // The joiner's own time is up to its last lock event: one pass over its stream to find it
    // (only when replaying: on a run too long to replay, the pass would cost as much). For the
    // bound alone, the joiner counts its CPU time only: it waited for the others anyway.
    let mut shapes = shapes;
    if let Some(j) = joiner {
        shapes[j].1 = if jobs.is_empty() {
            shapes[j].2.map_or(0, |c| c.0)
        } else {
            analysis::locks::schedule_steps(
                &lock_streams[j],
                &clock,
                every,
                r.end_ns,
                |_| false,
                true,
            )
            .map(|step| match step {
                whatif::Step::Run { wall_ns } => wall_ns,
                _ => 0,
            })
            .sum()
        };
    }
    let shapes = shapes;
    // Only a lock two threads take can make one wait: the others' calls are left out.
    let shared: HashSet<analysis::locks::LockKey> = r
        .locks
        .iter()
        .filter(|l| l.threads.len() > 1)
        .map(|l| l.lock)
        .collect();
    let schedules = |removed: Option<analysis::locks::LockKey>| {
        let shared = &shared;
        lock_streams
            .iter()
            .zip(&shapes)
            .enumerate()
            .map(|(i, (s, &(start_ns, own_ns, cpu)))| ThreadSchedule {
                start_ns,
                own_ns,
                cpu_ns: cpu.map(|c| c.0),
                runq_ns: cpu.map_or(0, |c| c.1),
                steps: analysis::locks::schedule_steps(
                    s,
                    &clock,
                    every,
                    r.end_ns,
                    move |k| Some(k) != removed && shared.contains(&k),
                    Some(i) == joiner,
                ),
            })
            .collect::<Vec<_>>()
    };
    let results = crate::parallel::run_parallel(&jobs, |removed| {
        whatif::replay(schedules(removed), cpus, removed)
    });
    let bound_only = whatif::bound(&schedules(None), cpus);
    let as_recorded = results
        .first()
        .and_then(|r| (r.unknown_cpu == 0).then_some(r.end_ns).flatten())
        .map(|e| whatif::run_time(e, tail));
    let mut out = Vec::new();
    for (k, &lock) in chosen.iter().enumerate() {
        let (predicted, method, why) = match results.get(k + 1) {
            Some(rep) => whatif::predict(rep),
            None if services.is_empty() => (
                bound_only,
                whatif::Method::Bound,
                Some("no thread's CPU time is known (no schedstat samples)".into()),
            ),
            None => (
                bound_only,
                whatif::Method::Bound,
                Some("not replayed: over the replay's budget of events".into()),
            ),
        };
        out.push(WhatIf {
            lock,
            predicted_ns: whatif::run_time(predicted, tail),
            bound_ns: whatif::run_time(results.get(k + 1).map_or(bound_only, |r| r.bound_ns), tail),
            method,
            why_bound: why,
        });
    }
    if services.is_empty() {
        notices.push(Notice(
            "lock what-if: no per-thread CPU time (recorded without schedstat sampling): each lock shows the bound only, with every thread's own time taken as CPU work".into(),
        ));
    }
    locks.report.what_if = Some(WhatIfs {
        method: whatif::METHOD,
        cpus,
        cpus_from,
        assumptions: whatif::ASSUMPTIONS.to_vec(),
        replayed_as_recorded_ns: as_recorded,
        measured_ns: r.duration_ns(),
        locks: out,
    });
}

/// The run's memory-map snapshots (`maps/PID-*.maps`: the probe's and the off-CPU recorder's),
/// by process, as paths relative to the run directory.
pub(crate) fn maps_snapshots(run_dir: &Path) -> BTreeMap<u32, Vec<String>> {
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
    snapshots
}
