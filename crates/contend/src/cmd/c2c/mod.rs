//! `contend c2c record|report`: cache-line sharing (false and true sharing), perf c2c's job.
//!
//! `record` and `import` are the recorder's (`recorder::sharing`: the back ends, the check that
//! a program is instrumented, perf.data files); `report` is in `report.rs` (`explain::sharing`, rendered by `report::sharing`).

mod report;

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Run a program built with `contend cc` and record which threads share which cache lines.
    ///
    /// Example: `contend cc -- gcc -O2 -g app.c -o app && contend c2c record -- ./app`, then
    /// `contend c2c report`.
    Record(RecordArgs),
    /// Show the shared cache lines of a run: perf c2c's line table and per-line distribution.
    ///
    /// Example: `contend c2c report`, `contend c2c report contend.data.1 --json`.
    Report(report::ReportArgs),
    /// Read the memory samples of a perf.data file (`perf c2c record` or `perf mem record` on
    /// a machine with Intel PEBS or AMD IBS) into a run directory, for `contend c2c report`.
    ///
    /// Example: `perf c2c record -o perf.data -- ./app && contend c2c import perf.data`.
    Import(ImportArgs),
}

/// Which back end `c2c record` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The sharing runtime of a `contend cc` build, else the PMU when the machine has
    /// memory-sampling events.
    Auto,
    /// The sharing runtime (the program must be built with `contend cc`).
    Instrumentation,
    /// The PMU's memory samples through `perf c2c record` (any program; needs PEBS or IBS).
    Pmu,
}

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The perf.data file.
    #[arg(value_name = "PERF_DATA")]
    file: PathBuf,
    /// The run directory to create (an existing one is kept and the new run numbered).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = trace::DEFAULT_RUN_DIR)]
    output: PathBuf,
    /// The cache-line size, in bytes: 64, or 128 (adjacent-line prefetch).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = parse_line)]
    line: u32,
}

#[derive(clap::Args)]
pub struct RecordArgs {
    /// Where the samples come from: `instrumentation` (a `contend cc` build), `pmu` (the
    /// hardware's memory sampling through `perf c2c record`), or `auto` (the first that fits).
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    backend: Backend,
    /// The run directory to create (an existing one is kept and the new run numbered).
    #[arg(short = 'o', long = "output", value_name = "DIR", default_value = trace::DEFAULT_RUN_DIR)]
    output: PathBuf,
    /// The cache-line size to model, in bytes: 64, or 128 to model adjacent-line prefetch
    /// (two lines move together).
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = parse_line)]
    line: u32,
    /// Track a line in detail (who touches which bytes, history) once this many transfers
    /// (accesses to the line by a thread other than the one that wrote it last) were counted
    /// on it: 1 to 4294967295 (the runtime's default: 64).
    #[arg(long, value_name = "N", conflicts_with = "exhaustive", value_parser = clap::value_parser!(u32).range(1..))]
    hot_after: Option<u32>,
    /// Track every line in detail from its first access (slower; finds lines with few
    /// transfers too).
    #[arg(long)]
    exhaustive: bool,
    /// How many accesses of each hot line's history to keep, for the fix hint's replay: 0 to
    /// 16777216 (the runtime's default: 65536).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=16_777_216))]
    window: Option<u32>,
    /// Once a hot line's history window is full, model and itemise 1 in N of each thread's
    /// accesses to it, each counting for N (its counts become estimates; the totals of reads
    /// and writes stay exact): 1 to 65536, 1 for every access (slowest; the runtime's
    /// default: 16).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    sample: Option<u32>,
    /// Run the program on these CPUs only (a list such as 0-3,8).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Service-time sampling interval, in ms (as `contend record`); 0 turns it off.
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    interval: f64,
    /// Do not record scheduler states from the sched tracepoints.
    #[arg(long)]
    no_sched_trace: bool,
    /// Read the machine's PMU capabilities under this directory instead of /sys (for tests).
    #[arg(long, value_name = "DIR", hide = true)]
    sysfs: Option<PathBuf>,
    /// The program to run and its arguments (after `--`).
    #[arg(last = true, value_name = "CMD", required = true)]
    command: Vec<String>,
}

fn parse_line(s: &str) -> Result<u32, String> {
    match s {
        "64" => Ok(64),
        "128" => Ok(128),
        _ => Err(format!(
            "`{s}` is not a line size contend models: use 64 or 128"
        )),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Record(a) => record(a),
        Command::Report(a) => report::report(a),
        Command::Import(a) => import(a),
    }
}

fn tell(n: recorder::Notice) {
    crate::ui::recorder_notice(&n);
}

fn import(args: ImportArgs) -> anyhow::Result<()> {
    let options = recorder::sharing::ImportOptions {
        file: args.file,
        output: args.output,
        line: args.line,
        recorded_by: crate::args::command_line(),
    };
    recorder::sharing::import(&options, &mut tell)?;
    Ok(())
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    let options = recorder::RecordOptions {
        command: args.command,
        output: args.output,
        recorded_by: crate::args::command_line(),
        interval: recorder::sampling_interval(args.interval)?,
        sched_trace: !args.no_sched_trace,
        placement: recorder::Placement {
            cpus: args.cpus,
            ..recorder::Placement::default()
        },
        sharing: Some(recorder::SharingOptions {
            backend: match args.backend {
                Backend::Auto => recorder::Backend::Auto,
                Backend::Instrumentation => recorder::Backend::Instrumentation,
                Backend::Pmu => recorder::Backend::Pmu,
            },
            line: args.line,
            hot_after: args.hot_after,
            exhaustive: args.exhaustive,
            window: args.window,
            sample: args.sample,
            sysfs: args.sysfs.unwrap_or_else(|| PathBuf::from("/sys")),
        }),
        ..recorder::RecordOptions::default()
    };
    let recorded = recorder::record(&options, &mut tell)?;
    // The program's own exit status is contend's.
    match recorded.failed_status() {
        None => Ok(()),
        Some(code) => std::process::exit(code),
    }
}
