//! `contend c2c record|report`: cache-line sharing (false and true sharing), perf c2c's job.
//!
//! `record` runs a program built with `contend cc` (the instrumentation back end: its sharing
//! runtime writes `sharing/PID.json`, `sharing/PID.hist` and `maps/sharing-PID.maps` into the
//! run directory when each process exits) and registers what was written in meta.json.
//! `report` is `cmd::sharing::report`.
//!
//! Before running, `record` checks that the program is instrumented: its ELF `DT_NEEDED`
//! entries (or those of a library it loads) name `libcontend_sharing.so`. A program that is not
//! can only be observed through the hardware's memory-sampling events (PEBS, IBS, SPE); without
//! them `record` refuses and says how to rebuild.

use crate::exit::bad_input;
use observe::launch::{self, Plan};
use observe::sampler::SamplerOptions;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use trace::meta::{Meta, Unavailable};
use trace::RunDir;

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
    Report(super::sharing::ReportArgs),
}

#[derive(clap::Args)]
pub struct RecordArgs {
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
        Command::Report(a) => super::sharing::report(a),
    }
}

/// What a program file says about its instrumentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instrumentation {
    /// Linked with contend's sharing runtime (itself, or through a library it loads).
    Contend,
    /// Built with `-fsanitize=thread` and ThreadSanitizer's own runtime.
    Tsan,
    /// Neither.
    None,
    /// Not an ELF file contend can read (a script, another format): why.
    Unknown(String),
}

/// The instrumentation of the program file `path`. A dynamically linked program that does not
/// need the runtime itself may load it through a library: the dynamic loader lists what it
/// would load (`LD_TRACE_LOADED_OBJECTS`, as `ldd` does; nothing of the program runs).
pub fn instrumentation(path: &Path) -> Instrumentation {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => return Instrumentation::Unknown(format!("cannot read it: {e}")),
    };
    if data.starts_with(b"#!") {
        return Instrumentation::Unknown("it is a script".into());
    }
    let Some(facts) = observe::elf::facts(&data) else {
        return Instrumentation::Unknown("it is not a 64-bit ELF file contend can read".into());
    };
    if facts.needed.iter().any(|n| n.contains("contend_sharing")) {
        return Instrumentation::Contend;
    }
    if facts.defines_tsan_init || facts.needed.iter().any(|n| n.starts_with("libtsan")) {
        return Instrumentation::Tsan;
    }
    if facts.dynamic {
        if let Ok(out) = std::process::Command::new(path)
            .env("LD_TRACE_LOADED_OBJECTS", "1")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            if text.contains("contend_sharing") {
                return Instrumentation::Contend;
            }
            if text.lines().any(|l| l.trim_start().starts_with("libtsan")) {
                return Instrumentation::Tsan;
            }
        }
    }
    Instrumentation::None
}

/// The program a command runs, with its instrumentation: the command itself, else (a launcher
/// such as `env`, `taskset`, `numactl`, `time`) the first later argument that is an
/// instrumented program.
fn program_of(command: &[String]) -> (String, Option<PathBuf>, Instrumentation) {
    let first = command[0].clone();
    let Some(path) = super::cc::which(&first) else {
        return (
            first,
            None,
            Instrumentation::Unknown("it was not found".into()),
        );
    };
    let own = instrumentation(&path);
    if own == Instrumentation::Contend {
        return (first, Some(path), own);
    }
    for a in &command[1..] {
        if a.starts_with('-') || !a.contains('/') && super::cc::which(a).is_none() {
            continue;
        }
        if let Some(p) = super::cc::which(a).filter(|p| p.is_file()) {
            if instrumentation(&p) == Instrumentation::Contend {
                return (a.clone(), Some(p), Instrumentation::Contend);
            }
        }
    }
    let base = first.rsplit('/').next().unwrap_or(&first);
    if own == Instrumentation::None && LAUNCHERS.contains(&base) {
        let why = format!(
            "{base} starts another program, which contend did not find among its arguments"
        );
        return (first, Some(path), Instrumentation::Unknown(why));
    }
    (first, Some(path), own)
}

/// Programs that start the program of interest (shells, wrappers, build tools): when the
/// program they start is not found among their arguments, it is run unchecked.
const LAUNCHERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "env", "taskset", "numactl", "nice", "chrt", "time",
    "timeout", "stdbuf", "setarch", "xargs", "make", "ctest", "mpirun", "mpiexec", "srun",
];

/// The memory-sampling events this machine's PMU offers (under `sys`, normally `/sys`).
pub fn memory_sampling(sys: &Path) -> Vec<&'static str> {
    let devices = sys.join("bus/event_source/devices");
    let mut found = Vec::new();
    if devices.join("cpu/events/mem-loads").exists()
        || devices.join("cpu_core/events/mem-loads").exists()
    {
        found.push("PEBS mem-loads");
    }
    if devices.join("ibs_op").exists() {
        found.push("AMD IBS");
    }
    if std::fs::read_dir(&devices).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("arm_spe"))
    }) {
        found.push("Arm SPE");
    }
    found
}

const REBUILD: &str = "rebuild with `CC=\"contend cc --\" make` (or `contend cc -- gcc ...`)";

/// Checks the program before anything is created: an instrumented program runs; anything else
/// is refused with what to do. Returns the program's name as the command gives it.
fn check_program(args: &RecordArgs) -> anyhow::Result<String> {
    let (name, _, inst) = program_of(&args.command);
    match inst {
        Instrumentation::Contend => Ok(name),
        Instrumentation::Unknown(why) => {
            eprintln!(
                "contend: note: cannot tell whether {name} was built with `contend cc` ({why}); running it: without the sharing runtime nothing is recorded"
            );
            Ok(name)
        }
        Instrumentation::Tsan => Err(bad_input(format!(
            "{name} was built with -fsanitize=thread and ThreadSanitizer's own runtime, not with `contend cc`: {REBUILD}"
        ))),
        Instrumentation::None => {
            let sys = args.sysfs.clone().unwrap_or_else(|| PathBuf::from("/sys"));
            let events = memory_sampling(&sys);
            if events.is_empty() {
                Err(bad_input(format!(
                    "{name} was not built with `contend cc` and this machine has no memory-sampling events (PEBS mem-loads, AMD IBS, Arm SPE): {REBUILD}, or run on a machine with one"
                )))
            } else {
                Err(bad_input(format!(
                    "{name} was not built with `contend cc`; this machine has memory-sampling events ({}), but contend's PMU back end for them is not available yet: {REBUILD}",
                    events.join(", ")
                )))
            }
        }
    }
}

/// The sharing results in `run`'s `sharing/` directory, checked with the format's reader.
pub fn collect_sharing(run: &Path) -> Vec<trace::meta::SharingFile> {
    let mut found: Vec<(u32, String)> = std::fs::read_dir(run.join("sharing"))
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = name.strip_suffix(".json")?.parse::<u32>().ok()?;
                    Some((pid, name))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
        .into_iter()
        .map(|(pid, name)| {
            let file = format!("sharing/{name}");
            let hist = format!("sharing/{pid}.hist");
            let maps = format!("maps/sharing-{pid}.maps");
            let mut entry = trace::meta::SharingFile {
                file: file.clone(),
                pid,
                parent_pid: None,
                program: String::new(),
                history: run.join(&hist).is_file().then_some(hist),
                maps: run.join(&maps).is_file().then_some(maps),
                accesses: 0,
                transfers: 0,
                hot_lines: 0,
                error: None,
            };
            match std::fs::read(run.join(&file))
                .map_err(|e| e.to_string())
                .and_then(|b| {
                    trace::sharing::ProcessSharing::from_json(&b).map_err(|e| e.to_string())
                }) {
                Ok(s) => {
                    entry.parent_pid = s.parent_pid;
                    entry.program = s.program;
                    entry.accesses = s.totals.reads + s.totals.writes;
                    entry.transfers = s.totals.transfers;
                    entry.hot_lines = s.lines.len() as u64;
                }
                Err(e) => entry.error = Some(e),
            }
            entry
        })
        .collect()
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    if args.interval != 0.0 && !(0.1..=60_000.0).contains(&args.interval) {
        return Err(bad_input(format!(
            "--interval {}: give 0.1 ms to 60000 ms (0 turns sampling off)",
            args.interval
        )));
    }
    let machine = topology::Topology::live().ok();
    let cpus = match &machine {
        Some(m) => super::record::placement(args.cpus.as_deref(), None, None, None, m)?,
        None if args.cpus.is_some() => {
            return Err(anyhow::anyhow!(
                "cannot read this machine's topology to place the program"
            ))
        }
        None => None,
    };
    let program = check_program(&args)?;

    let run = RunDir::create(&args.output).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut meta = Meta::new(args.command.clone());
    meta.recorded_by = std::env::args().collect();
    meta.topology = machine
        .as_ref()
        .map_or(serde_json::Value::Null, super::record::topology_json);
    meta.cpus = cpus.clone();
    let sampling = (args.interval > 0.0).then(|| SamplerOptions {
        interval: Duration::from_secs_f64(args.interval / 1000.0),
        attached: false,
        follow_children: true,
        sched_trace: !args.no_sched_trace,
    });
    if sampling.is_some() {
        meta.captured.push("schedstat".into());
    }
    meta.captured.push("sharing".into());
    let mut sharing = trace::meta::SharingMeta {
        backend: "instrumentation".into(),
        line_size: args.line,
        hot_after: args.hot_after,
        exhaustive: args.exhaustive,
        window: args.window,
        processes: Vec::new(),
    };
    meta.sharing = Some(sharing.clone());
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;

    let dir = absolute(run.path());
    let mut env = vec![
        (
            "CONTEND_SHARING_DIR".to_string(),
            dir.to_string_lossy().into_owned(),
        ),
        ("CONTEND_SHARING_LINE".to_string(), args.line.to_string()),
    ];
    if let Some(n) = args.hot_after {
        env.push(("CONTEND_SHARING_HOT_AFTER".into(), n.to_string()));
    }
    if args.exhaustive {
        env.push(("CONTEND_SHARING_EXHAUSTIVE".into(), "1".into()));
    }
    if let Some(n) = args.window {
        env.push(("CONTEND_SHARING_WINDOW".into(), n.to_string()));
    }
    if let Some(n) = args.sample {
        env.push(("CONTEND_SHARING_SAMPLE".into(), n.to_string()));
    }
    eprintln!(
        "contend: recording cache-line sharing of {} into {} ({}-byte lines, {})",
        program,
        run.path().display(),
        args.line,
        if args.exhaustive {
            "every line tracked".to_string()
        } else if let Some(n) = args.hot_after {
            format!("lines tracked in detail after {n} transfers")
        } else {
            "lines tracked in detail once hot".to_string()
        }
    );

    let outcome = launch::run(Plan {
        command: &args.command,
        run: &run,
        locks: None,
        poll: Duration::from_millis(1),
        sampling: sampling.clone(),
        cpus,
        capture_output: false,
        env,
        counters: super::record::counters_wanted(),
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e @ launch::LaunchError::Spawn { .. }) => {
            let code = match &e {
                launch::LaunchError::Spawn { source, .. }
                    if source.kind() == std::io::ErrorKind::PermissionDenied =>
                {
                    126
                }
                _ => 127,
            };
            meta.outcome = Some(format!("could not start: {e}"));
            meta.exit_status = Some(code);
            meta.sharing = Some(sharing.clone());
            let _ = run.write_meta(&meta);
            eprintln!(
                "contend: error: {e} (the empty run is kept in {})",
                run.path().display()
            );
            std::process::exit(code);
        }
        Err(other) => return Err(anyhow::Error::new(other)),
    };
    super::record::fill_meta(
        &mut meta,
        &outcome,
        sampling.as_ref().map(|o| o.interval),
        true,
    );
    meta.streams = outcome.streams;
    sharing.processes = collect_sharing(run.path());
    for p in sharing.processes.iter().filter(|p| p.error.is_some()) {
        let why = p.error.clone().unwrap_or_default();
        eprintln!("contend: warning: {}: {why}", p.file);
        meta.unavailable.push(Unavailable {
            what: format!("sharing of process {}", p.pid),
            why: format!("{}: {why}", p.file),
        });
    }
    let good = sharing
        .processes
        .iter()
        .filter(|p| p.error.is_none())
        .count();
    if sharing.processes.is_empty() {
        meta.unavailable.push(Unavailable {
            what: "sharing".into(),
            why: "the program wrote no sharing results: it was not built with `contend cc`, or it did not exit normally".into(),
        });
    }
    meta.sharing = Some(sharing.clone());
    run.write_meta(&meta).map_err(|e| anyhow::anyhow!("{e}"))?;
    for note in &outcome.notes {
        eprintln!("contend: note: {note}");
    }
    if let Some(sig) = outcome.status.signal() {
        eprintln!(
            "contend: the program was killed by signal {sig}; what was recorded is kept in {}",
            run.path().display()
        );
    }
    if sharing.processes.is_empty() {
        eprintln!(
            "contend: warning: no sharing results were written into {}: the program was not built with `contend cc` ({REBUILD}), or it did not exit normally (killed, or ended by _exit)",
            run.path().display()
        );
    } else {
        eprintln!(
            "contend: recorded sharing of {good} process(es) into {0}; see contend c2c report {0}",
            run.path().display()
        );
    }
    match meta.exit_status {
        Some(0) | None => Ok(()),
        Some(code) => std::process::exit(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sampling_events_are_found_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        assert!(memory_sampling(dir.path()).is_empty());
        let d = dir.path().join("bus/event_source/devices");
        std::fs::create_dir_all(d.join("ibs_op")).unwrap();
        std::fs::create_dir_all(d.join("arm_spe_0")).unwrap();
        std::fs::create_dir_all(d.join("cpu/events")).unwrap();
        std::fs::write(
            d.join("cpu/events/mem-loads"),
            "event=0xcd,umask=0x1,ldlat=3\n",
        )
        .unwrap();
        assert_eq!(
            memory_sampling(dir.path()),
            ["PEBS mem-loads", "AMD IBS", "Arm SPE"]
        );
    }
}
