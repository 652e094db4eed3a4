//! `contend report [RUN]`: validates a run directory and explains it. For now the run summary
//! (what was recorded, per stream); the lock, activity, MPI and sharing sections are added by
//! the analyses that produce them.

use crate::exit::bad_input;
use report::run_summary::{RunSummary, StreamSummary};
use std::path::PathBuf;
use trace::{RunDir, StreamFile};

#[derive(clap::Args)]
pub struct Args {
    /// The run directory to read.
    #[arg(value_name = "RUN", default_value = trace::DEFAULT_RUN_DIR)]
    run: PathBuf,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (dir, meta) = RunDir::open(&args.run).map_err(|e| bad_input(e.to_string()))?;
    let run_name = args.run.display().to_string();

    // The streams meta.json lists, then any stream file it does not (a recorder that died
    // before rewriting meta.json): every stream in the directory is read and validated.
    let mut files: Vec<String> = Vec::new();
    for s in &meta.streams {
        if files.contains(&s.file) {
            eprintln!(
                "contend: note: meta.json lists {} twice; reading it once",
                s.file
            );
        } else {
            files.push(s.file.clone());
        }
    }
    for f in dir.stream_files().map_err(|e| bad_input(e.to_string()))? {
        if !files.contains(&f) {
            eprintln!("contend: note: {run_name}/{f} is not listed in meta.json; reading it too");
            files.push(f);
        }
    }

    let mut streams = Vec::with_capacity(files.len());
    for file in &files {
        let path = dir.path().join(file);
        let shown = format!("{run_name}/{file}");
        // Only regular files: opening a FIFO or device planted in a run directory would block.
        match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => {
                return Err(bad_input(format!("{shown}: not a regular file")));
            }
            _ => {}
        }
        let mapped = StreamFile::open(&path)
            .map_err(|e| bad_input(format!("{shown}: cannot read the stream: {e}")))?;
        let stream = mapped.parse().map_err(|e| {
            bad_input(format!(
                "{shown}: {e} (the stream is damaged; re-record the run)"
            ))
        })?;
        if !stream.is_complete() {
            eprintln!(
                "contend: note: {shown} was not closed by its writer (killed, or still running): {} events read up to its last complete chunk",
                stream.events
            );
        }
        streams.push(StreamSummary::new(file, &stream));
    }
    let summary = RunSummary::new(&run_name, &meta, streams);
    if summary.events_dropped > 0 {
        eprintln!(
            "contend: note: {} events were dropped while recording (buffers full or disk too slow); results undercount them",
            summary.events_dropped
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", report::run_summary::render(&summary));
    }
    Ok(())
}
