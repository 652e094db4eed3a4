//! The MPI section: the rank streams of a run directory (and of other hosts' directories,
//! `Options::mpi_from`) decoded into the analysis's input, each rank's call sites named from
//! its own `maps/rank-R.maps` (`maps/rank-R.N.maps` in job N) (ranks have different address
//! spaces), so that the same line of code is one call site across ranks.

use crate::error::{damaged, Error};
use crate::Notice;
use analysis::mpi::RankInput;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use trace::StreamFile;

/// An MPI job's analysis, and the names its call-site ids index.
pub struct Mpi {
    pub run: analysis::mpi::MpiRun,
    /// `main (app.c:42)` per call-site id.
    pub site_names: Vec<String>,
}

/// The job's rank traces, analysed with `options`' thresholds; `None` when there are none.
pub(crate) fn mpi(
    run: &Path,
    options: &crate::Options,
    notices: &mut Vec<Notice>,
) -> Result<Option<Mpi>, Error> {
    let mut dirs = vec![run.to_path_buf()];
    dirs.extend(options.mpi_from.iter().cloned());
    Ok(load(&dirs, options.mpi_job, notices)?.map(|job| Mpi {
        run: analysis::mpi::analyse(&job.ranks, options.mpi_thresholds),
        site_names: job.names,
    }))
}

/// One MPI job's rank traces, decoded; call-site ids index `names`.
struct Job {
    ranks: Vec<RankInput>,
    names: Vec<String>,
}

/// `streams/rank-R.cst` or `streams/rank-R.N.cst`.
pub fn is_rank_stream(index: &trace::meta::StreamIndex<'_>, file: &str) -> bool {
    index.role(file) == trace::layout::StreamRole::MpiRank
}

/// The rank streams of `dirs` for one MPI job, decoded: `job` if given, else the first job
/// (a run directory holds several when the recorded command ran `mpirun` more than once; each
/// job's streams are numbered alike, `rank-R.N.cst`). A rank of the job found in two
/// directories is an error (the same host's directory given twice). Call-site ids index the
/// returned names.
fn load(
    dirs: &[PathBuf],
    job: Option<u32>,
    notices: &mut Vec<Notice>,
) -> Result<Option<Job>, Error> {
    // job -> rank -> (run directory, file in it)
    let mut jobs: BTreeMap<u32, BTreeMap<u32, (PathBuf, String)>> = BTreeMap::new();
    for dir in dirs {
        let streams = dir.join(trace::rundir::STREAMS_DIR);
        let Ok(entries) = std::fs::read_dir(&streams) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some((rank, n)) = trace::mpi::rank_stream_name(&name) else {
                continue;
            };
            let rel = format!("{}/{name}", trace::rundir::STREAMS_DIR);
            if let Some((old, old_rel)) =
                jobs.entry(n).or_default().insert(rank, (dir.clone(), rel))
            {
                return Err(Error::Option(format!(
                    "rank {rank} has two traces, {} and {}: give each host's run directory once",
                    old.join(old_rel).display(),
                    e.path().display()
                )));
            }
        }
    }
    let listed = || {
        jobs.keys()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen = match job {
        Some(n) if jobs.contains_key(&n) => n,
        Some(n) if jobs.is_empty() => {
            return Err(Error::Option(format!(
                "--mpi-job {n}: this run has no MPI rank traces"
            )))
        }
        Some(n) => {
            return Err(Error::Option(format!(
                "--mpi-job {n}: no such MPI job in this run; its jobs are {}",
                listed()
            )))
        }
        None => match jobs.keys().next() {
            Some(&first) => first,
            None => return Ok(None),
        },
    };
    if jobs.len() > 1 {
        notices.push(Notice(format!(
            "this run holds {} MPI jobs ({}): showing job {chosen}{}",
            jobs.len(),
            listed(),
            if job.is_none() {
                "; choose another with --mpi-job N"
            } else {
                ""
            }
        )));
    }
    let files = jobs.remove(&chosen).unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    let mut ids: HashMap<String, u64> = HashMap::new();
    let mut ranks = Vec::new();
    for (rank, (dir, rel)) in files {
        let shown = dir.join(&rel).display().to_string();
        // Inside its run directory, never through a link, a regular file (`trace::files`): a
        // FIFO given by --mpi-from would block, a device would read forever.
        let mapped = StreamFile::open_in_run(&dir, Path::new(&rel))
            .map_err(|e| damaged(format!("{e} (cannot read the stream)")))?;
        let stream = mapped
            .parse()
            .map_err(|e| damaged(format!("{shown}: {e} (the stream is damaged)")))?;
        let (mut items, malformed) = trace::mpi::decode(stream.events());
        crate::plausible::check_mpi_items(&mut items, &shown, notices);
        let mut input = RankInput {
            rank,
            pid: stream.header.pid,
            closed: stream.is_complete(),
            malformed,
            ..Default::default()
        };
        // Strings the items refer to.
        for item in &items {
            let id = match item {
                trace::mpi::MpiItem::CommDefined { members, .. } => *members,
                trace::mpi::MpiItem::Mark { label, .. } => *label,
                _ => continue,
            };
            if let Some(s) = stream.string(id) {
                input.strings.insert(id, s.to_string());
            }
        }
        // Call sites, named with this rank's address space.
        let mut symbolizer = rank_symbolizer(&dir, rank, chosen)?;
        for item in &items {
            let trace::mpi::MpiItem::Call(g) = item else {
                continue;
            };
            if input.sites.contains_key(&g.site) {
                continue;
            }
            let Some(address) = stream.site_address(g.site) else {
                continue;
            };
            let name = match symbolizer.as_mut() {
                Some(sym) => crate::names::site_name(&sym.resolve_call_site(address)),
                None => format!("{address:#x}"),
            };
            let next = names.len() as u64;
            let id = *ids.entry(name.clone()).or_insert_with(|| {
                names.push(name);
                next
            });
            input.sites.insert(g.site, id);
        }
        input.items = items;
        ranks.push(input);
    }
    Ok(Some(Job { ranks, names }))
}

/// The symbolizer of `rank` from its run directory's `maps/rank-R[.N].maps` (`None`: none).
fn rank_symbolizer(
    run: &Path,
    rank: u32,
    job: u32,
) -> Result<Option<symbolize::Symbolizer>, Error> {
    let rel = format!(
        "{}/{}",
        trace::layout::MAPS_DIR,
        trace::mpi::rank_maps_name(rank, job)
    );
    Ok(crate::names::read_maps(run, &rel)?.map(symbolize::Symbolizer::new))
}
