//! A run's Perfetto trace: its activity, futex-wait (waker → waiter flows) and MPI timelines, and its lock tracks written from the
//! streams as they are paired (`report::lock_exports::write_timeline`), so memory does not grow
//! with the run's length.

use crate::error::Error;
use crate::Run;
use std::io::Write;
use std::path::Path;

/// Writes `run`'s trace (`run_dir` is where it was opened from: the lock streams are read
/// again, one hold at a time). An error when the run has nothing to show.
pub fn write<W: Write>(
    run_dir: &Path,
    run: &Run,
    out: W,
) -> Result<export::perfetto::Written, Error> {
    let name = run
        .meta
        .command
        .first()
        .map(String::as_str)
        .unwrap_or("program");
    let activity = run
        .activity
        .as_ref()
        .map(|a| report::activity_exports::timeline_since(&a.threads, &a.states, name, a.start));
    let mpi = run
        .mpi
        .as_ref()
        .map(|m| report::mpi::timeline(&m.run, &m.site_names));
    // The paired futex waits, with flows from each waker to its waiter.
    let waits = run
        .waits
        .as_ref()
        .filter(|w| !w.report.paired.is_empty())
        .map(|w| report::waits::timeline(&w.report, &w.stacks, &w.thread_names, name));
    let others = [activity, mpi, waits]
        .into_iter()
        .flatten()
        .reduce(report::activity_exports::merge);
    if others.is_none() && run.locks.is_none() {
        return Err(Error::Option(
            "--perfetto: this run has no service-time samples, locks, futex waits or MPI calls to show".into(),
        ));
    }
    // Writing failed: the machine's (exit 1). The run's data cannot be exported (a time beyond
    // Perfetto's range, read from a damaged stream): the input's (exit 2).
    let failed = |e: export::ExportError| match e {
        export::ExportError::Io(_) => Error::Write(e.to_string()),
        export::ExportError::Invalid(_) => Error::Damaged(format!(
            "--perfetto: {e} (the run's data is damaged: re-record the run)"
        )),
    };
    let mut trace =
        export::perfetto::StreamingTrace::new(out, &Default::default()).map_err(failed)?;
    if let Some(t) = &others {
        trace.timeline(t).map_err(failed)?;
    }
    if let Some(locks) = &run.locks {
        let run_name = run_dir.display().to_string();
        let mut mapped = Vec::with_capacity(locks.files.len());
        for file in &locks.files {
            let shown = format!("{run_name}/{file}");
            let m = crate::open::map_stream(run_dir, file)?;
            mapped.push((file.clone(), shown, m));
        }
        let mut parsed = Vec::with_capacity(mapped.len());
        for (file, shown, m) in &mapped {
            parsed.push((file.clone(), crate::open::parse_stream(m, shown)?));
        }
        // The streams the report was made from, in its order: hold ids match.
        let streams: Vec<_> = crate::locks::lock_streams(&run.meta, &parsed)
            .into_iter()
            .map(|(_, s)| s)
            .collect();
        report::lock_exports::write_timeline(
            &mut trace,
            &streams,
            &analysis::clock::Conversion::from_meta(&run.meta.clock),
            &report::lock_exports::StreamedTimeline {
                report: &locks.report,
                wakeups: &locks.wakeups,
                path: &locks.path,
            },
            &locks.naming,
            name,
        )
        .map_err(failed)?;
    }
    trace.finish().map_err(failed)
}
