//! MPI recordings: the wrapper preloaded into every rank, and the rank streams it wrote.

use crate::notice::{info, note, warn, About, Notice};
use crate::RecordError;
use observe::cache::Cache;
use std::collections::BTreeSet;
use trace::meta::{Meta, StreamEntry, Unavailable};
use trace::{RunDir, StreamRole};

/// What `unavailable` calls a rank that refused the wrapper.
pub const REFUSED: &str = "MPI calls of a rank";
/// What `unavailable` calls ranks that ran without the wrapper.
pub const UNANNOUNCED: &str = "MPI calls of ranks without the wrapper";

/// Prepares an MPI recording: the command with the wrapper preloaded in every rank, the
/// environment for the launcher, and the cache the wrapper is in (a temporary one is removed
/// when dropped: keep it until the job has ended). Problems the user can fix are bad input.
pub fn prepare(
    command: &[String],
    forced: Option<observe::mpi::Implementation>,
    run: &RunDir,
    notices: &mut dyn FnMut(Notice),
) -> Result<(observe::mpi::Prepared, Cache), RecordError> {
    use observe::mpi::MpiError;
    let dir = std::fs::canonicalize(run.path()).unwrap_or_else(|_| run.path().to_path_buf());
    let cache = Cache::open(&mut |why| warn(notices, About::Setup, why)).map_err(|e| {
        RecordError::failed(format!("no private directory for the MPI wrapper: {e}"))
    })?;
    match observe::mpi::prepare(command, &dir, forced, &cache) {
        Ok(p) => {
            for n in &p.notices {
                note(notices, About::Setup, n.clone());
            }
            let kept = if cache.is_temporary() {
                format!("{}, built for this run only", p.library.display())
            } else {
                p.library.display().to_string()
            };
            info(
                notices,
                About::Setup,
                format!(
                    "recording MPI calls of every rank ({}; wrapper {kept})",
                    p.implementation.name(),
                ),
            );
            Ok((p, cache))
        }
        Err(
            e @ (MpiError::NoCompiler { .. }
            | MpiError::NoLauncher { .. }
            | MpiError::Unknown { .. }
            | MpiError::Mismatch { .. }),
        ) => Err(RecordError::bad(e.to_string())),
        Err(e) => Err(RecordError::failed(e)),
    }
}

/// How many rank streams were found, of how many jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ranks {
    pub streams: usize,
    pub jobs: u32,
}

/// Lists the rank streams the wrapper wrote in meta.json; refusals (a rank that loaded another
/// MPI) go to `unavailable` and the sink.
pub fn collect(run: &RunDir, meta: &mut Meta, notices: &mut dyn FnMut(Notice)) -> Ranks {
    let mut ranks = Ranks::default();
    if let Ok(entries) = std::fs::read_dir(run.path().join(trace::rundir::STREAMS_DIR)) {
        let mut found: Vec<(u32, u32, String)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (rank, job) = trace::mpi::rank_stream_name(&name)?;
                Some((job, rank, name))
            })
            .collect();
        found.sort();
        ranks.jobs = found
            .iter()
            .map(|(job, ..)| *job)
            .collect::<BTreeSet<_>>()
            .len() as u32;
        for (job, rank, name) in found {
            let file = format!("{}/{name}", trace::rundir::STREAMS_DIR);
            let (mut pid, mut events, mut dropped) = (0, 0, 0);
            if let Ok(mapped) = run.map_stream(&file) {
                if let Ok(stream) = mapped.parse() {
                    pid = stream.header.pid;
                    events = stream.events;
                    dropped = stream.dropped;
                }
            }
            meta.streams.push(StreamEntry {
                file,
                kind: trace::format::StreamKind::Rank,
                pid,
                tid: 0,
                rank: Some(rank as i32),
                events,
                dropped,
                name: if ranks.jobs > 1 {
                    format!("rank {rank} (MPI job {job})")
                } else {
                    format!("rank {rank}")
                },
                role: Some(StreamRole::MpiRank),
            });
            meta.events_dropped += dropped;
            ranks.streams += 1;
        }
    }
    for why in observe::mpi::unannounced(run.path()) {
        warn(notices, About::Outcome, why.clone());
        meta.unavailable.push(Unavailable {
            what: UNANNOUNCED.into(),
            why,
        });
    }
    for why in observe::mpi::refusals(run.path()) {
        warn(notices, About::Outcome, why.clone());
        meta.unavailable.push(Unavailable {
            what: REFUSED.into(),
            why,
        });
    }
    ranks
}
