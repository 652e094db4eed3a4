//! `contend where PID`: where a process's threads run (last CPU and its NUMA node, CPU time,
//! run-queue wait, context switches) and where its memory lives, per node and kind.
//!
//! Failures are one line on stderr. No such process, a PID that exits while being read and
//! permission denied exit 2. Permission denied on `numa_maps` still prints everything that
//! could be read (threads, `VmRSS`) before the error, because the thread half of the triage
//! needs no privilege; `--threads-only` skips `numa_maps` and so never fails that way.
//! Under `--watch`, a process that exits after being shown ends the watch with exit code 0.

use crate::exit::bad_input;
use observe::{ProcError, Process};
use report::where_::{self as view, MemoryRead, WhereView};
use std::io::IsTerminal;
use std::time::{Duration, SystemTime};
use topology::Topology;

#[derive(clap::Args)]
pub struct Args {
    /// The process to look at. A thread id (from `ps -T`) is taken to mean its process.
    #[arg(value_name = "PID")]
    pid: u32,
    /// Print the facts as JSON on stdout instead of tables (with --watch, one object per line).
    #[arg(long)]
    json: bool,
    /// Refresh every SECS seconds (fractions allowed, e.g. 0.5) until the process exits or
    /// Ctrl-C. On a terminal the screen is redrawn in place; otherwise snapshots follow one
    /// another, each after a timestamp line.
    #[arg(long, value_name = "SECS", value_parser = parse_interval)]
    watch: Option<Duration>,
    /// Show the threads only: skip /proc/PID/numa_maps, which needs root or the process's
    /// owner and walks the page tables (slow for processes with hundreds of GiB).
    #[arg(long)]
    threads_only: bool,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        return Err(format!(
            "the interval must be above 0 and at most 86400 s, not {text}"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Missing, gone, hidden or thread-of errors are the user's input (exit 2); the rest are
/// measurement failures (exit 1).
fn to_anyhow(e: ProcError) -> anyhow::Error {
    match e {
        ProcError::NoSuchProcess { .. }
        | ProcError::Exited { .. }
        | ProcError::IsThread { .. }
        | ProcError::PermissionDenied { .. } => bad_input(e.to_string()),
        other => anyhow::Error::new(other),
    }
}

fn attach(pid: u32) -> anyhow::Result<Process> {
    match Process::attach(pid) {
        Err(ProcError::IsThread { tid, pid }) => {
            crate::ui::note(format_args!(
                "{tid} is a thread of process {pid}; showing process {pid}"
            ));
            Process::attach(pid).map_err(to_anyhow)
        }
        other => other.map_err(to_anyhow),
    }
}

/// One reading of the process. `denied` carries the permission error on `numa_maps`, which is
/// shown in the view and then reported as the command's error.
struct Snapshot {
    view: WhereView,
    denied: Option<ProcError>,
}

fn take_snapshot(
    process: &mut Process,
    topo: Option<&Topology>,
    threads_only: bool,
) -> Result<Snapshot, ProcError> {
    let taken_at = SystemTime::now();
    let info = process.info()?;
    let threads = process.threads()?;
    let mut denied = None;
    let memory = if threads_only {
        MemoryRead::Skipped
    } else {
        match process.memory() {
            Ok(m) => MemoryRead::Read(m),
            Err(e @ ProcError::PermissionDenied { .. }) => {
                let why = e.to_string();
                denied = Some(e);
                MemoryRead::Unavailable(why)
            }
            Err(ProcError::Unsupported { .. }) => MemoryRead::Unavailable(
                "this kernel has no numa_maps (built without NUMA support)".into(),
            ),
            Err(e) => return Err(e),
        }
    };
    Ok(Snapshot {
        view: WhereView::new(&info, &threads, memory, topo, taken_at),
        denied,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut process = attach(args.pid)?;
    let topo = match Topology::live() {
        Ok(t) => Some(t),
        Err(e) => {
            crate::ui::note(format_args!(
                "no topology ({e}); NUMA nodes are shown as n/a"
            ));
            None
        }
    };
    let interactive = std::io::stdout().is_terminal();
    let mut shown = false;
    loop {
        let snapshot = match take_snapshot(&mut process, topo.as_ref(), args.threads_only) {
            Ok(s) => s,
            Err(ProcError::Exited { pid }) if shown => {
                crate::ui::status(format_args!("process {pid} exited"));
                return Ok(());
            }
            Err(e) => return Err(to_anyhow(e)),
        };
        let frame = frame(&snapshot.view, &args, interactive)?;
        if !crate::output::print(format_args!("{frame}")) {
            return Ok(()); // stdout closed (`| head`): nothing more to say
        }
        shown = true;
        if let Some(e) = snapshot.denied {
            return Err(bad_input(format!("{e} (or pass --threads-only)")));
        }
        match args.watch {
            Some(interval) => std::thread::sleep(interval),
            None => return Ok(()),
        }
    }
}

/// The text for one snapshot, with the watch decoration when watching.
fn frame(v: &WhereView, args: &Args, interactive: bool) -> anyhow::Result<String> {
    let body = match (args.json, args.watch.is_some()) {
        (true, false) => view::to_json(v)? + "\n",
        (true, true) => view::to_json_line(v)? + "\n",
        (false, _) => view::render(v),
    };
    Ok(match args.watch {
        None => body,
        Some(_) if args.json => body,
        Some(interval) if interactive => format!(
            // Cursor home and clear screen, then the frame.
            "\x1b[H\x1b[2Jcontend where {}: every {} s, {} (Ctrl-C to stop)\n\n{body}",
            v.pid,
            interval.as_secs_f64(),
            v.time_utc
        ),
        Some(_) => format!("--- {} ---\n{body}", v.time_utc),
    })
}
