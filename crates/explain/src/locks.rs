//! The locks section: the lock probe's streams through `analysis::locks`, sorted, with every
//! lock and call site named from the memory maps the probe saved (`maps/PID-*.maps`).
//!
//! [`lock_report`] is the only glue between the streams and the analysis.

use crate::names::{profile_frames, site_name, CallSite};
use crate::Notice;
use analysis::locks::{HoldId, LockStream};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
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
) -> Locks {
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
    let (naming, sites) = name_addresses(run_dir, &r, &streamed.homes, notices);
    Locks {
        report: r,
        naming,
        sites,
        wakeups: streamed.wakeups,
        path: streamed.path,
        files: files.into_iter().map(String::from).collect(),
        coverage: report::locks::Coverage::of(meta),
    }
}

/// Names for the report's call sites and locks, from the memory maps the probe saved in the
/// run directory's `maps/` (one symboliser per process). Problems are notices, not errors.
fn name_addresses(
    run_dir: &Path,
    r: &analysis::locks::LockReport,
    homes: &HashMap<analysis::locks::LockKey, analysis::allocs::Home>,
    notices: &mut Vec<Notice>,
) -> (report::locks::Naming, HashMap<u64, CallSite>) {
    let mut naming = report::locks::Naming::default();
    let mut sites: HashMap<u64, CallSite> = HashMap::new();
    let mut snapshots: BTreeMap<u32, Vec<PathBuf>> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(run_dir.join(trace::layout::MAPS_DIR)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name
                .strip_suffix(".maps")
                .and_then(|stem| stem.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            {
                snapshots.entry(pid).or_default().push(e.path());
            }
        }
    }
    let recorded_at = std::fs::metadata(run_dir.join(trace::rundir::META_FILE))
        .and_then(|m| m.modified())
        .ok();
    for (pid, mut files) in snapshots {
        files.sort();
        let mut maps = symbolize::Maps::new();
        for f in &files {
            if let Ok((m, _)) = symbolize::Maps::read(f) {
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
    (naming, sites)
}
