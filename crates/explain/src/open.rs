//! [`open`]: a run directory read once, every stream validated, each section analysed.

use crate::error::{damaged, Error};
use crate::{Explained, Notice, Options, Run};
use report::run_summary::{RunSummary, StreamSummary};
use std::path::Path;
use trace::Captured;
use trace::{RunDir, Stream, StreamFile};

/// A recorded run directory (`contend record`'s, `contend c2c record`'s), explained.
pub fn open(run: &Path, options: &Options) -> Result<Run, Error> {
    let (dir, mut meta) = RunDir::open(run).map_err(|e| damaged(e.to_string()))?;
    let run_name = run.display().to_string();
    let mut notices = Vec::new();
    crate::plausible::check_span(&mut meta, &run_name, &mut notices);
    let mut note = |text: String| notices.push(Notice(text));

    // The streams meta.json lists, then any stream file it does not (a recorder that died
    // before rewriting meta.json): every stream in the directory is read and validated.
    let mut files: Vec<String> = Vec::new();
    let mut listed = std::collections::HashSet::new();
    for s in &meta.streams {
        if listed.insert(s.file.as_str()) {
            files.push(s.file.clone());
        } else {
            note(format!("meta.json lists {} twice; reading it once", s.file));
        }
    }
    for f in dir.stream_files().map_err(|e| damaged(e.to_string()))? {
        if !listed.contains(f.as_str()) {
            note(format!(
                "{run_name}/{f} is not listed in meta.json; reading it too"
            ));
            files.push(f);
        }
    }

    let mut mapped_streams: Vec<(String, StreamFile)> = Vec::with_capacity(files.len());
    let index = meta.stream_index();
    for file in &files {
        let path = dir.path().join(file);
        let shown = format!("{run_name}/{file}");
        if crate::mpi::is_rank_stream(&index, file) && !path.exists() {
            note(format!("{shown} is listed in meta.json but not there (moved, or written on another host): give the directory that holds it with --mpi-from"));
            continue;
        }
        mapped_streams.push((file.clone(), map_stream(dir.path(), file)?));
    }
    // Each stream validated once; the lock analysis reads the parsed streams.
    let mut parsed: Vec<(String, Stream<'_>)> = Vec::with_capacity(mapped_streams.len());
    let mut streams = Vec::with_capacity(mapped_streams.len());
    let validated = parse_streams(&mapped_streams, &run_name);
    for ((file, _), stream) in mapped_streams.iter().zip(validated) {
        let shown = format!("{run_name}/{file}");
        let stream = stream?;
        if !stream.is_complete() {
            note(format!(
                "{shown} was not closed by its writer (killed, or still running): {} events read up to its last complete chunk",
                stream.events
            ));
        }
        streams.push(StreamSummary::new(file, &stream));
        parsed.push((file.clone(), stream));
    }
    let summary = RunSummary::new(&run_name, &meta, streams);
    if summary.events_dropped > 0 {
        note(format!(
            "{} events were dropped while recording (buffers full or disk too slow); results undercount them",
            summary.events_dropped
        ));
    }
    let mut locks = if meta.has(Captured::Locks) {
        Some(crate::locks::lock_report(
            dir.path(),
            &meta,
            &parsed,
            options,
            &mut notices,
        )?)
    } else {
        None
    };
    let activity = if meta.has(Captured::Schedstat) {
        Some(crate::activity::activity(
            &meta,
            &mapped_streams,
            &mut notices,
        )?)
    } else {
        None
    };
    let waits = crate::waits::waits(
        dir.path(),
        &meta,
        &parsed,
        activity.as_ref().map(|a| a.states.as_slice()),
        &mut notices,
    )?;
    if let Some(l) = locks.as_mut() {
        crate::locks::what_if(&meta, &parsed, l, activity.as_ref(), options, &mut notices);
    }
    let mpi = crate::mpi::mpi(run, options, &mut notices)?;
    if mpi.is_none() && meta.has(Captured::Mpi) {
        notices.push(Notice(no_rank_traces(run)));
    }
    let sharing = crate::sharing::load(run, options.transfer_ns, &mut notices)?;
    if sharing.is_none() && meta.has(Captured::Sharing) {
        notices.push(Notice("this run was recorded for sharing but holds no results (sharing/*.json): the program was not built with `contend cc`, or did not exit normally".into()));
    }
    Ok(Run {
        meta,
        summary,
        activity,
        locks,
        waits,
        mpi,
        sharing,
        notices,
    })
}

/// The stream `file` (as meta.json lists it) of the run directory `run` mapped: a regular file
/// inside the run, reached without following a link (`trace::files`: a FIFO or device planted
/// there would block or read forever; a link could lead out of the run).
pub(crate) fn map_stream(run: &Path, file: &str) -> Result<StreamFile, Error> {
    StreamFile::open_in_run(run, Path::new(file))
        .map_err(|e| damaged(format!("{e} (cannot read the stream)")))
}

/// Every mapped stream validated and parsed, on as many threads as there are CPUs (validation
/// reads every byte: 0.37 s of a 56 M-event run on one thread), results in file order.
fn parse_streams<'a>(
    mapped: &'a [(String, StreamFile)],
    run_name: &str,
) -> Vec<Result<Stream<'a>, Error>> {
    let parse = |i: usize| {
        let (file, stream) = &mapped[i];
        parse_stream(stream, &format!("{run_name}/{file}"))
    };
    // Largest first, each worker taking the next one left: the run's length is then about
    // the largest stream's or an even share, whichever is longer.
    let mut order: Vec<usize> = (0..mapped.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(mapped[i].1.bytes().len()));
    let parsed = crate::parallel::run_parallel(&order, parse);
    let mut results: Vec<Option<Result<Stream<'a>, Error>>> = Vec::new();
    results.resize_with(mapped.len(), || None);
    for (k, r) in parsed.into_iter().enumerate() {
        results[order[k]] = Some(r);
    }
    results
        .into_iter()
        .map(|r| r.expect("every stream was parsed"))
        .collect()
}

/// A mapped stream validated and parsed.
pub(crate) fn parse_stream<'a>(mapped: &'a StreamFile, shown: &str) -> Result<Stream<'a>, Error> {
    mapped.parse().map_err(|e| {
        damaged(format!(
            "{shown}: {e} (the stream is damaged; re-record the run)"
        ))
    })
}

/// Why a run recorded with `--mpi` has no rank traces.
fn no_rank_traces(run: &Path) -> String {
    let refused = std::fs::read_dir(run)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(trace::layout::MPI_REFUSED_PREFIX)
                })
                .count()
        })
        .unwrap_or(0);
    if refused > 0 {
        format!("this run was recorded with --mpi but holds no rank traces: {refused} rank(s) refused the MPI wrapper, built for another MPI than the one they loaded (`unavailable` above says which)")
    } else {
        "this run was recorded with --mpi but holds no rank traces: the ranks did not call MPI_Init with the wrapper loaded (see the notes printed by contend record)".into()
    }
}

/// What `contend report DIR` explains: a `contend scale` directory's model (its scale.json),
/// else the recorded run.
pub fn open_any(dir: &Path, options: &Options) -> Result<Explained, Error> {
    if crate::scale::is_scale_dir(dir) {
        return Ok(Explained::Scale(Box::new(crate::scale::load(dir)?)));
    }
    Ok(Explained::Run(Box::new(open(dir, options)?)))
}
